//! What each command does: the handlers `dispatch` calls, once clap has
//! parsed the arguments (src/cli.rs).

use super::*;
use crate::error::{ConfigError, Result};
use crate::export::{self, format_check, format_summary, prepare_out_dir};
use crate::files::{self, write_atomic, write_json};
use crate::scenario::{LoadedScenario, load_scenario_with};
use crate::{Catalog, Setup, resolve};
use std::path::Path;

pub(super) fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Check(a) => {
            let (loaded, setup) = load(&a, None)?;
            print!("{}", format_check(&setup));
            if let Some(o) = loaded.preset_origins() {
                let default = if o.implicit { " (the default: the scenario names no preset)" } else { "" };
                println!("from the preset {}{default}: {}", o.preset, o.from_preset.join(", "));
                let pinned: Vec<String> =
                    o.pinned.iter().map(|(k, mine, theirs)| format!("{k} = {mine} (preset: {theirs})")).collect();
                println!(
                    "set by the scenario over the preset: {}",
                    if pinned.is_empty() { "none".to_string() } else { pinned.join(", ") }
                );
            }
            if baseline_setup(&loaded, &a)?.is_some() {
                println!("[baseline] is valid too");
            }
            Ok(())
        }
        Command::List(a) => {
            let catalog = open_catalog(a.models.as_deref())?;
            print!("{}", list(&catalog, a.what));
            Ok(())
        }
        Command::Bench(a) => crate::bench::main(a),
        Command::Explain(a) => cmd_explain(a),
        Command::Validate(a) => cmd_validate(a),
        Command::StabilityTable(a) => cmd_stability_table(a),
        Command::Playground(a) => {
            let catalog = open_catalog(a.models.as_deref())?;
            let pg = crate::playground::Playground::new(&a.scenario, &a.set, catalog)?;
            crate::playground::run_cli(pg, a.port, !a.no_open)
        }
        Command::Calibrate(a) => cmd_calibrate(a),
        Command::Sweep(a) => cmd_sweep(a),
        Command::Merge(a) => {
            let (points, notes) = crate::sweep::merge(&a.dirs, &a.out, a.partial, a.force)?;
            for note in &notes {
                eprintln!("warning: {note}");
            }
            println!("merged {} points from {} folders into {}", points.len(), a.dirs.len(), a.out.display());
            Ok(())
        }
        Command::Compare(a) => {
            let c = crate::compare::compare(&a.a, &a.b, &a.percentiles)?;
            if a.json {
                println!("{}", to_json(&c)?);
            } else {
                print!("{}", crate::compare::format(&c));
            }
            Ok(())
        }
        Command::Plot(a) => cmd_plot(&a.dir),
        Command::Report(a) => {
            let _lock = files::FolderLock::take(&a.dir, "command")?;
            finish_report(&a.dir, true, false)
        }
        Command::Capacity(a) => {
            let (mut loaded, _) = load(&a.s, a.seed)?;
            loaded.min_requests = a.min_requests;
            if !(a.tolerance > 0.0 && a.tolerance < 1.0) {
                return Err(ConfigError::new(format!("--tolerance {} must be in (0, 1)", a.tolerance)).into());
            }
            let catalog = open_catalog(a.s.models.as_deref())?;
            let terse = a.quiet || a.json;
            if !terse {
                println!("{}", crate::validate::band::engine_line(&loaded.scenario, &catalog));
            }
            let progress = Progress::start("capacity search", None, terse);
            let c = crate::plan::capacity(&loaded, &catalog, a.replications, a.tolerance)?;
            drop(progress);
            if a.json {
                println!("{}", to_json(&c)?);
            } else {
                print!("{}", crate::plan::format_capacity(&c, &loaded.scenario.name));
            }
            Ok(())
        }
        Command::Plan(a) => {
            let (mut loaded, _) = load(&a.s, a.seed)?;
            loaded.min_requests = a.min_requests;
            let catalog = open_catalog(a.s.models.as_deref())?;
            let terse = a.quiet || a.json;
            if !terse {
                println!("{}", crate::validate::band::engine_line(&loaded.scenario, &catalog));
            }
            let progress = Progress::start("planning", None, terse);
            let p = crate::plan::plan(&loaded, &catalog)?;
            drop(progress);
            let dir =
                a.out.clone().unwrap_or_else(|| Path::new("output").join(format!("{}-plan", loaded.scenario.name)));
            crate::files::create_out_dir(&dir)?;
            write_json(&dir.join("plan.json"), &p)?;
            if a.json {
                println!("{}", to_json(&p)?);
            } else if !a.quiet {
                print!("{}", crate::plan::format_plan(&p, &loaded.scenario.name, a.details));
                println!("results: {}", dir.join("plan.json").display());
            }
            finish_report(&dir, a.report, terse)
        }
    }
}

/// The scenario's `[baseline]` variant, validated and resolved (None without one).
fn baseline_setup(loaded: &LoadedScenario, a: &ScenarioArgs) -> Result<Option<Setup>> {
    let Some(b) = &loaded.scenario.baseline else { return Ok(None) };
    let over: Vec<(String, toml::Value)> = b.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let s = loaded.derive(&over, "baseline").map_err(|e| loaded.locate_baseline(e, &over))?;
    Ok(Some(resolve(&s, &open_catalog(a.models.as_deref())?).map_err(|e| loaded.locate_baseline(e, &over))?))
}

/// A progress line on stderr for a long command: requests simulated (of
/// `total`, when known) and time elapsed, redrawn a few times a second. Shown
/// only on a terminal, only after half a second (short runs stay silent),
/// never with -q; cleared when dropped.
struct Progress {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(what: &str, total: Option<u64>, quiet: bool) -> Progress {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Progress { stop, thread: None };
        }
        let (flag, what) = (stop.clone(), what.to_string());
        let start = crate::limits::simulated();
        let thread = std::thread::spawn(move || {
            let wait = |ms| {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                flag.load(std::sync::atomic::Ordering::Relaxed)
            };
            if wait(500) {
                return;
            }
            let bar = match total {
                Some(n) => indicatif::ProgressBar::new(n).with_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg} {bar:30} {human_pos}/{human_len} requests  {elapsed}, ETA {eta}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                ),
                None => indicatif::ProgressBar::new_spinner().with_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg} {spinner} {human_pos} requests simulated  {elapsed}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                ),
            };
            bar.set_message(what);
            loop {
                bar.set_position(crate::limits::simulated() - start);
                if wait(200) {
                    break;
                }
            }
            bar.finish_and_clear();
        });
        Progress { stop, thread: Some(thread) }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The catalogue with the user's models folder. A broken file there is left
/// out with a warning, so only commands that name it fail (with its error).
fn open_catalog(dir: Option<&Path>) -> Result<Catalog> {
    let catalog = Catalog::with_dir(dir)?;
    for b in &catalog.broken {
        let first = b.error.to_string();
        let first = first.lines().next().unwrap_or("");
        eprintln!("warning: {first} (left out of the catalogue: only what uses {:?} fails)", b.stem);
    }
    Ok(catalog)
}

/// Loads, overrides, validates and resolves a scenario.
fn load(a: &ScenarioArgs, seed: Option<u64>) -> Result<(LoadedScenario, Setup)> {
    let catalog = open_catalog(a.models.as_deref())?;
    let catalog_arc = std::sync::Arc::new(catalog.clone());
    let mut loaded = match &a.text {
        Some(text) => crate::scenario::load_scenario_str_with(text, &a.scenario, &a.set, &catalog_arc)?,
        None => load_scenario_with(&a.scenario, &a.set, &catalog_arc)?,
    };
    if let Some(seed) = seed {
        loaded.scenario.seed = seed;
        loaded.seed_override = Some(seed);
    }
    let setup = resolve(&loaded.scenario, &catalog).map_err(|e| loaded.locate(e))?;
    warn_pinned(&loaded);
    Ok((loaded, setup))
}

/// Warns when `--set engine.preset=…` leaves engine keys pinned by the scenario.
fn warn_pinned(loaded: &LoadedScenario) {
    if let Some(w) = loaded.pinned_warning() {
        eprintln!("warning: {w}");
    }
}

fn cmd_explain(a: ExplainArgs) -> Result<()> {
    use crate::explain::Metric;
    let metric = a.metric.map(|m| match m {
        TailArg::Ttft => Metric::Ttft,
        TailArg::Tpot => Metric::Tpot,
        TailArg::E2e => Metric::E2e,
    });
    let opts = crate::explain::Options { replications: a.replications, what_if: !a.no_what_if, metric };
    let catalog = std::sync::Arc::new(open_catalog(a.models.as_deref())?);
    let x = if a.target.is_dir() {
        if !a.set.is_empty() {
            return Err(ConfigError::new("--set applies to a scenario file, not to a results folder")
                .hint("explain the folder as it was run, or pass the scenario file with --set")
                .into());
        }
        let (x, _) = crate::explain::explain_folder(&a.target, &catalog, opts)?;
        crate::explain::write_explanation(&a.target, &x)?;
        export::write_html_report(&a.target)?;
        x
    } else {
        let loaded = load_scenario_with(&a.target, &a.set, &catalog)?;
        let mut setup = resolve(&loaded.scenario, &catalog).map_err(|e| loaded.locate(e))?;
        crate::explain::folder::check_size(&setup)?;
        setup.attribution = true;
        let rep = crate::run_setup(&setup, setup.scenario.seed);
        rep.check().map_err(|e| loaded.locate(e))?;
        crate::explain::explain(&rep, &loaded, &catalog, opts)?
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&x).map_err(|e| crate::Error::Runtime(e.to_string()))?);
    } else {
        print!("{}", crate::explain::text(&x));
        if a.target.is_dir() {
            println!("written: {}", a.target.join("explain.json").display());
            println!("report: {}", a.target.join("report.html").display());
        }
    }
    Ok(())
}

fn cmd_run(mut a: RunArgs) -> Result<()> {
    a.s = a.q.scenario_args()?;
    let (loaded, mut setup) = load(&a.s, a.seed)?;
    if let Some(file) = &a.q.save_scenario {
        let text = loaded.scenario_toml(&format!(
            "# Written by servesim run --save-scenario from {}\n# with {}.\n",
            if a.s.text.is_some() { "the built-in quickstart".to_string() } else { a.s.scenario.display().to_string() },
            if a.s.set.is_empty() {
                "no overrides".to_string()
            } else {
                // One comment line: a line break in an override is written as \n.
                let one_line = |s: &String| s.replace('\n', "\\n").replace('\r', "\\r");
                a.s.set.iter().map(|s| format!("--set {}", one_line(s))).collect::<Vec<_>>().join(" ")
            }
        ))?;
        write_atomic(file, |w| w.write_all(text.as_bytes()))?;
        if !a.quiet && !a.json {
            println!("scenario: {}", file.display());
        }
    }
    setup.attribution = a.attribution;
    let dir = a.out.clone().unwrap_or_else(|| Path::new("output").join(&setup.scenario.name));
    let replaced = prepare_out_dir(&dir, a.force)?;
    files::create_out_dir(&dir)?;
    let _lock = files::FolderLock::take(&dir, "run")?;
    let seed = setup.scenario.seed;
    let requests = crate::resolve::estimate(&setup).requests.map(|n| n as u64);
    let runs = 1 + loaded.scenario.baseline.is_some() as u64;
    let progress = Progress::start("simulating", requests.map(|n| n * runs), a.quiet || a.json);
    // All or nothing: the files are staged, then moved into place together.
    // requests.csv is written as requests finish, so no record is kept.
    let staging = files::Staging::new(&dir)?;
    let mut csv = match a.no_requests {
        true => None,
        false => Some(export::RequestsCsv::create(&staging.path().join("requests.csv"), &setup)?),
    };
    let sink = csv.as_mut().map(|c| c as &mut dyn crate::sim::RecordSink);
    let (rep, base) = rayon::join(
        || crate::run_setup_with(&setup, seed, crate::sim::Recording::Stream(sink)),
        || -> Result<Option<crate::Report>> { Ok(baseline_setup(&loaded, &a.s)?.map(|bs| crate::run_lean(&bs, seed))) },
    );
    drop(progress);
    let base = base?;
    rep.check().map_err(|e| loaded.locate(e))?;
    if let Some(b) = &base {
        b.check_complete()?;
    }
    if let Some(c) = csv {
        c.finish()?;
    }
    export::write_run_files(staging.path(), &loaded, &rep, std::env::args().collect())?;
    if let Some(b) = &base {
        write_json(&staging.path().join("baseline-summary.json"), &b.summary)?;
    }
    if a.report {
        export::write_html_report(staging.path())?;
    }
    staging.commit()?;
    if a.json {
        println!("{}", to_json(&rep.summary)?);
    } else if !a.quiet {
        let catalog = open_catalog(a.s.models.as_deref())?;
        println!("{}", crate::validate::band::engine_line(&loaded.scenario, &catalog));
        print!("{}", format_summary(&rep.summary, &setup.scenario.percentiles));
        if let Some(b) = &base {
            print!("{}", export::format_baseline(&rep.summary, &b.summary));
        }
        println!("results: {}{}", dir.display(), if replaced { " (replacing the previous run's)" } else { "" });
        if a.report {
            println!("report: {}", dir.join("report.html").display());
        }
    }
    Ok(())
}

/// `value` as the pretty JSON the results files hold.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value).map_err(|e| crate::Error::Runtime(format!("cannot write JSON: {e}")))
}

/// Writes report.html when asked (`--report`, `servesim report`) and says where.
fn finish_report(dir: &Path, wanted: bool, quiet: bool) -> Result<()> {
    if wanted {
        let p = export::write_html_report(dir)?;
        if !quiet {
            println!("report: {}", p.display());
        }
    }
    Ok(())
}

fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let bad = || {
        ConfigError::new(format!("--shard {s}: expected K/N with 0 <= K < N"))
            .hint("for example --shard 0/4 ... --shard 3/4")
    };
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if n == 0 || k >= n {
        return Err(bad().into());
    }
    Ok((k, n))
}

fn cmd_sweep(a: SweepArgs) -> Result<()> {
    let catalog = open_catalog(a.s.models.as_deref())?;
    let mut loaded = load_scenario_with(&a.s.scenario, &a.s.set, &std::sync::Arc::new(catalog.clone()))?;
    warn_pinned(&loaded);
    if let Some(seed) = a.seed {
        loaded.scenario.seed = seed;
        loaded.seed_override = Some(seed);
    }
    loaded.min_requests = a.min_requests;
    let grid = crate::sweep::Grid::new(&loaded, &a.grid, a.zip)?;
    let shard = a.shard.as_deref().map(parse_shard).transpose()?;
    if a.replications == Some(0) {
        return Err(ConfigError::new("--replications must be at least 1").into());
    }
    // Fail fast on a grid value that breaks the scenario (e.g. a typo in a key).
    for (i, p) in grid.points().iter().enumerate().take(1) {
        loaded.derive(p, &format!("sweep point {i}"))?;
    }
    let dir = a.out.clone().unwrap_or_else(|| Path::new("output").join(format!("{}-sweep", loaded.scenario.name)));
    let opts = crate::sweep::SweepOptions {
        jobs: a.jobs,
        replications: a.replications,
        shard,
        resume: a.resume,
        force: a.force,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let points = crate::sweep::run_sweep(&loaded, &catalog, &grid, &opts, &dir)?;
    let manifest = crate::sweep::SweepManifest::read(&dir)?;
    crate::sweep::write_outputs(&dir, &manifest, &points)?;
    if !a.quiet {
        println!("{}", crate::validate::band::engine_line(&loaded.scenario, &catalog));
        print!("{}", export::format_sweep(&manifest, &points));
        println!("results: {}", dir.display());
    }
    finish_report(&dir, a.report, a.quiet)?;
    failed_points(&points, &dir)
}

/// Failed sweep points are named on stderr with how many failed and why. A
/// sweep in which every point failed exits with code 2 (a grid may hold
/// points that cannot run, e.g. a model that does not fit at tp = 1: the rest
/// are still results).
fn failed_points(points: &[crate::sweep::PointResult], dir: &Path) -> Result<()> {
    let failed: Vec<&str> = points.iter().filter_map(|p| p.error.as_deref()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    let mut reasons: Vec<&str> = failed.iter().map(|e| e.lines().next().unwrap_or("")).collect();
    reasons.sort_unstable();
    reasons.dedup();
    let more = if reasons.len() > 3 { format!("; and {} other reasons", reasons.len() - 3) } else { String::new() };
    let what = format!(
        "{} of {} sweep points failed: {}{more}",
        failed.len(),
        points.len(),
        reasons.iter().take(3).copied().collect::<Vec<_>>().join("; ")
    );
    if failed.len() < points.len() {
        eprintln!("warning: {what} (each point's error is in {})", dir.join(crate::sweep::POINTS).display());
        return Ok(());
    }
    Err(ConfigError::new(what)
        .hint("fix the grid values or the scenario (each point's error is in points.jsonl)")
        .into())
}

fn cmd_stability_table(a: StabilityTableArgs) -> Result<()> {
    use crate::detection::System;
    let systems = a
        .systems
        .iter()
        .map(|s| {
            System::ALL.iter().copied().find(|x| x.key() == s.as_str()).ok_or_else(|| {
                let names: Vec<&str> = System::ALL.iter().map(|x| x.key()).collect();
                crate::ConfigError::new(format!("unknown queue {s:?}"))
                    .key("--systems")
                    .hint(format!("use {}", names.join(", ")))
                    .into()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rhos = if a.rhos.is_empty() { crate::detection::RHOS.to_vec() } else { a.rhos.clone() };
    if a.seeds == 0 || a.lengths.contains(&0) || rhos.iter().any(|r| !(*r > 0.0 && r.is_finite())) {
        return Err(crate::ConfigError::new("seeds, lengths and loads must be positive")
            .key("stability-table")
            .hint("e.g. --seeds 20 --lengths 2000,20000 --rhos 0.9,1.05")
            .into());
    }
    // The Poisson queues get the peaks too; the families steady loads.
    let (queues, families): (Vec<System>, Vec<System>) =
        systems.iter().partition(|s| matches!(s, System::MM1 | System::MD1 | System::W1));
    let mut cases = crate::detection::cases(&queues, &rhos, &a.lengths);
    cases.extend(crate::detection::family_cases(&families, &rhos, &a.lengths));
    let rows = crate::detection::table(&cases, a.seeds, &Catalog::builtin()?)?;
    let md = crate::detection::markdown(&rows);
    print!("{md}");
    if let Some(path) = &a.out {
        crate::files::write_atomic(path, |w| w.write_all(md.as_bytes()))?;
        println!("table: {}", path.display());
    }
    Ok(())
}

fn cmd_validate(a: ValidateArgs) -> Result<()> {
    let catalog = open_catalog(a.models.as_deref())?;
    let sets = crate::validate::run(&catalog, &a.only)?;
    if a.rows {
        for d in &sets {
            print!("{}", crate::validate::format_rows(d));
        }
    }
    print!("{}", crate::validate::format_summary(&sets));
    let bands = crate::validate::band::table(&crate::validate::snapshot(&sets));
    if !bands.is_empty() {
        println!(
            "\nserving error bands (held-out rows; band = the |error| {:.0}% of them stay within; coverage = share \
             inside the band computed without their own model):",
            crate::validate::band::COVERAGE * 100.0
        );
        print!("{}", crate::validate::band::format_table(&bands));
    }
    if let Some(dir) = &a.out {
        crate::files::create_out_dir(dir)?;
        let path = dir.join("validation.json");
        write_json(&path, &sets)?;
        println!("results: {}", path.display());
    }
    if let Some(path) = &a.snapshot {
        write_json(path, &crate::validate::snapshot(&sets))?;
        println!("snapshot: {}", path.display());
    }
    Ok(())
}

fn cmd_calibrate(a: CalibrateArgs) -> Result<()> {
    let catalog = open_catalog(a.models.as_deref())?;
    let scenario = match &a.scenario {
        Some(path) => {
            let mut sets = a.set.clone();
            if let Some(p) = &a.preset {
                sets.push(format!("engine.preset=\"{p}\""));
            }
            Some(load_scenario_with(path, &sets, &std::sync::Arc::new(catalog.clone()))?)
        }
        None => None,
    };
    let opts = crate::calibrate::Options {
        input: crate::calibrate::Input::parse(&a.input),
        scenario,
        preset: a.preset.clone(),
        fit: a.fit.clone(),
        folds: a.folds,
        rows: a.rows.clone(),
        name: a.name.clone(),
    };
    let progress = Progress::start("calibrating", None, false);
    // Every error names the measurements it is about.
    let (calibration, profile) = crate::calibrate::run(&opts, &catalog).map_err(|e| match e {
        crate::Error::Config(c) if c.file.is_none() && !c.message.contains(&a.input) => {
            crate::Error::Config(ConfigError { message: format!("calibrating {}: {}", a.input, c.message), ..c })
        }
        other => other,
    })?;
    drop(progress);
    print!("{}", crate::calibrate::format_run(&calibration));
    let dir = a.out.clone().unwrap_or_else(|| Path::new("output").join(format!("calibrate-{}", calibration.profile)));
    let engine_dir = dir.join("engine");
    crate::files::create_out_dir(&engine_dir)?;
    write_json(&dir.join("calibration.json"), &calibration)?;
    if !calibration.warnings.is_empty() && !a.force {
        println!("results: {}", dir.join("calibration.json").display());
        return Err(ConfigError::new(format!(
            "the profile was not written: the data leave {} weakly determined (see the warnings above)",
            calibration.warnings.iter().map(|w| w.split('`').nth(1).unwrap_or(w)).collect::<Vec<_>>().join(", ")
        ))
        .hint("fit fewer keys (--fit), add measurements that depend on them, or write it anyway with --force")
        .into());
    }
    let file = dir.join("engine").join(format!("{}.toml", calibration.profile));
    let text = crate::calibrate::profile_toml(&profile, &calibration);
    write_atomic(&file, |w| w.write_all(text.as_bytes()))?;
    println!(
        "profile: {}  (use it with --models {} and engine.preset = \"{}\")",
        file.display(),
        dir.display(),
        calibration.profile
    );
    println!("results: {}", dir.join("calibration.json").display());
    Ok(())
}

fn cmd_plot(dir: &Path) -> Result<()> {
    let _lock = if dir.is_dir() { Some(files::FolderLock::take(dir, "command")?) } else { None };
    if dir.join(crate::sweep::MANIFEST).exists() {
        let m = crate::sweep::SweepManifest::read(dir)?;
        let points = crate::sweep::read_points(&dir.join(crate::sweep::POINTS))?;
        let mut points = points;
        points.sort_by_key(|p| p.index);
        crate::sweep::write_charts(dir, &m, &points)?;
        println!("redrew tradeoff, pareto and hockey charts in {}", dir.display());
        return Ok(());
    }
    if dir.join("manifest.json").exists() {
        let run = export::RunData::read(dir)?;
        for note in &run.notes {
            eprintln!("warning: {note}");
        }
        export::write_run_charts(dir, run.view())?;
        println!("redrew cdf, timeseries and timeline charts in {}", dir.display());
        return Ok(());
    }
    Err(ConfigError::new(format!("{} holds no servesim results", dir.display()))
        .hint("pass a folder written by `servesim run` or `servesim sweep`")
        .into())
}

fn list(c: &Catalog, what: ListWhat) -> String {
    let mut o = String::new();
    match what {
        ListWhat::Models => {
            o += &format!(
                "{:<16} {:<20} {:>8} {:>7} {:>6} {:>8} {:>8} {:>9}  source\n",
                "name", "model", "params", "layers", "kv_h", "hidden", "context", "experts"
            );
            for e in c.models.values() {
                let s = &e.spec;
                o += &format!(
                    "{:<16} {:<20} {:>7.1}B {:>7} {:>6} {:>8} {:>8} {:>9}  {}\n",
                    e.key,
                    s.name,
                    s.total_params() / 1e9,
                    s.num_layers,
                    s.num_kv_heads,
                    s.hidden_size,
                    s.max_context,
                    if s.is_moe() { format!("{}/{}", s.experts_per_token, s.num_experts) } else { "-".into() },
                    e.origin
                );
            }
        }
        ListWhat::Gpus => {
            o += &format!(
                "{:<16} {:<15} {:>7} {:>8} {:>8} {:>8} {:>9} {:>7}  source\n",
                "name", "gpu", "mem_GB", "HBM_GB/s", "bf16_TF", "fp8_TF", "link_GB/s", "$/hour"
            );
            for e in c.gpus.values() {
                let s = &e.spec;
                o += &format!(
                    "{:<16} {:<15} {:>7} {:>8} {:>8} {:>8} {:>9} {:>7.2}  {}\n",
                    e.key,
                    s.name,
                    s.memory_gb,
                    s.memory_bandwidth_gbps,
                    s.bf16_tflops,
                    s.fp8_tflops,
                    s.interconnect_gbps,
                    s.price_per_hour,
                    e.origin
                );
            }
        }
        ListWhat::Engines => {
            o += &format!(
                "{:<10} {:<14} {:<8} {:<10} {:<8}  description\n",
                "name", "engine", "version", "memory", "cost"
            );
            for e in c.engines.values() {
                let s = &e.spec;
                let get = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("legacy").to_string();
                o += &format!(
                    "{:<10} {:<14} {:<8} {:<10} {:<8}  {}\n",
                    e.key,
                    s.name,
                    s.version,
                    get(&s.engine, "memory_plan"),
                    get(&s.cost, "model"),
                    s.description
                );
            }
        }
    }
    o
}
