//! The command-line interface. All argument parsing lives here; commands call
//! the library and the exporters.

use crate::config::{LoadedScenario, load_scenario_with};
use crate::error::{ConfigError, Error, Result};
use crate::export::{self, format_check, format_summary, prepare_out_dir, write_atomic, write_json};
use crate::{Catalog, Setup, resolve};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

/// servesim: a discrete-event capacity simulator for LLM inference serving.
#[derive(Debug, Parser)]
#[command(
    name = "servesim",
    version,
    about,
    long_about = None,
    after_help = "Examples:\n  servesim run scenarios/quickstart.toml\n  servesim run --model llama-3.1-70b --gpu h100-sxm --tp 2 --rate 3\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4,6,8\n  servesim capacity scenarios/quickstart.toml\n  servesim explain output/quickstart\n\nEvery command: servesim <command> --help. The user guide: docs/guide.md."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Bounds on a run's work (src/limits.rs); every command takes them.
#[derive(Debug, Args)]
struct LimitArgs {
    /// Most requests one run may simulate (refused before simulating beyond it; default: all 32-bit ids).
    #[arg(long, global = true, value_name = "N", default_value_t = crate::limits::Limits::DEFAULT_MAX_REQUESTS)]
    max_requests: u64,
    /// Most memory one run may need, GiB (refused before simulating beyond it; an overloaded run's
    /// growing backlog is stopped there).
    #[arg(long, global = true, value_name = "GIB", default_value_t = 4.0)]
    max_memory: f64,
    /// Longest projected wall time of one run, seconds (refused before simulating beyond it).
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = crate::limits::Limits::DEFAULT_MAX_PROJECTED_S)]
    max_projected_time: f64,
    /// Latest expected arrival of one run, simulated seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = crate::limits::Limits::DEFAULT_MAX_HORIZON_S)]
    max_horizon: f64,
    /// Stop a command still simulating after this many wall-clock seconds (nothing is written).
    #[arg(long, global = true, value_name = "SECONDS")]
    max_wall_time: Option<f64>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate a scenario and write summary.json, requests.csv and manifest.json.
    #[command(
        after_help = "Examples:\n  servesim run scenarios/quickstart.toml\n  servesim run scenarios/quickstart.toml --set workload.rate=9 --out output/q9\n  servesim run --model llama-3.1-70b --gpu h100-sxm --tp 2 --rate 3 --prompt-tokens 1000 --output-tokens 250\n  servesim run scenarios/overload.toml --json > summary.json"
    )]
    Run(RunArgs),
    /// Validate a scenario; print the resolved configuration and memory plan.
    #[command(
        after_help = "Examples:\n  servesim check scenarios/quickstart.toml\n  servesim check scenarios/quickstart.toml --set hardware.tp=2"
    )]
    Check(ScenarioArgs),
    /// Print the catalogue of models or GPUs.
    #[command(after_help = "Examples:\n  servesim list models\n  servesim list engines")]
    List(ListArgs),
    /// Run a grid of scenario variants in parallel; write sweep.csv, sweep.json and charts.
    #[command(
        after_help = "Examples:\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4,6,8\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4 --grid engine.max_num_seqs=64,256 --report"
    )]
    Sweep(SweepArgs),
    /// Combine the folders of sharded sweeps into one result, as if run unsharded.
    #[command(after_help = "Examples:\n  servesim merge output/shard-0 output/shard-1 --out output/all")]
    Merge(MergeArgs),
    /// The highest request rate one configuration sustains under its SLOs, with a confidence interval.
    #[command(
        after_help = "Examples:\n  servesim capacity scenarios/quickstart.toml\n  servesim capacity scenarios/quickstart.toml -q --json"
    )]
    Capacity(CapacityArgs),
    /// The cheapest configurations of the [plan] search space that carry the target load within the SLOs.
    #[command(
        after_help = "Examples:\n  servesim plan scenarios/plan-70b-chat.toml\n  servesim plan scenarios/plan-70b-chat.toml --details --report"
    )]
    Plan(PlanArgs),
    /// Write a self-contained report.html for a results folder (a run, a sweep or a plan).
    #[command(after_help = "Examples:\n  servesim report output/quickstart")]
    Report(PlotArgs),
    /// Two run folders side by side: headline metrics with B − A, and per-request differences with 95% intervals where both served the same requests.
    #[command(
        after_help = "Examples:\n  servesim compare output/quickstart output/q9\n  servesim compare output/a output/b --percentiles 50,99,99.9 --json"
    )]
    Compare(CompareArgs),
    /// Redraw the charts of a results folder (a run or a sweep).
    #[command(after_help = "Examples:\n  servesim plot output/quickstart")]
    Plot(PlotArgs),
    /// Read a run backwards: which parts of their latency made the slowest requests slow, what caused them, and a change tested with common random numbers.
    #[command(
        after_help = "Examples:\n  servesim explain output/quickstart\n  servesim explain scenarios/overload.toml --metric ttft --json"
    )]
    Explain(ExplainArgs),
    /// Measure simulator speed and memory (see docs/development.md, "Speed").
    #[command(after_help = "Examples:\n  servesim bench\n  servesim bench --sizes 100000,1000000")]
    Bench(crate::bench::BenchArgs),
    /// Compare servesim's predictions with every reference data set shipped in validation/.
    #[command(after_help = "Examples:\n  servesim validate\n  servesim validate --only gpustack-serve-h100 --rows")]
    Validate(ValidateArgs),
    /// Fit an engine profile's overheads to measurements; report held-out error; write the profile.
    #[command(
        after_help = "Examples:\n  servesim calibrate validation:gpustack-serve --rows vLLM --rows \"qwen3-14b #\" --fit step_overhead_ms\n  servesim calibrate result.json --scenario my-setup.toml"
    )]
    Calibrate(CalibrateArgs),
    /// Measure the overload test's error rates on queues of known load (docs/stability.md).
    #[command(
        after_help = "Examples:\n  servesim stability-table --seeds 20\n  servesim stability-table --systems bursty --lengths 20000 --rhos 0.8,1.05"
    )]
    StabilityTable(StabilityTableArgs),
    /// A local web page to feel the latency–throughput tradeoff: controls re-simulate and redraw (docs/playground.md).
    #[command(
        after_help = "Examples:\n  servesim playground scenarios/quickstart.toml\n  servesim playground scenarios/what-if-router.toml --port 9000 --no-open"
    )]
    Playground(PlaygroundArgs),
}

#[derive(Debug, Args)]
struct ExplainArgs {
    /// A results folder written by `servesim run` (its run is simulated again
    /// from the manifest and checked against its summary.json), or a scenario file.
    target: PathBuf,
    /// Override a scenario key when TARGET is a scenario file (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Seeds per what-if (each runs the scenario with and without the change).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..=100))]
    replications: u32,
    /// Only the analysis: do not test the suggested changes.
    #[arg(long)]
    no_what_if: bool,
    /// Print the explanation as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The tail to explain and test changes for (default: the objective
    /// missed most; nothing to fix when every objective is met).
    #[arg(long, value_enum)]
    metric: Option<TailArg>,
}

/// A tail `explain --metric` names.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum TailArg {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// End-to-end latency.
    E2e,
}

#[derive(Debug, Args)]
struct PlaygroundArgs {
    /// Scenario TOML file.
    #[arg(default_value = "scenarios/quickstart.toml")]
    scenario: PathBuf,
    /// Override a scenario key, e.g. --set workload.rate=12 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = crate::playground::DEFAULT_PORT)]
    port: u16,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
}

#[derive(Debug, Args)]
struct StabilityTableArgs {
    /// Queues to run, comma-separated: mm1, md1, w1, and the families bursty,
    /// azure-code, priority, disaggregated, autoscaled.
    #[arg(long, value_delimiter = ',', default_value = "mm1,md1,w1")]
    systems: Vec<String>,
    /// Run lengths in requests, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2000,20000,100000")]
    lengths: Vec<u64>,
    /// Loads ρ, comma-separated (default: 0.8 … 10, the published table's).
    #[arg(long, value_delimiter = ',')]
    rhos: Vec<f64>,
    /// Seeds per case.
    #[arg(long, default_value_t = 50)]
    seeds: u64,
    /// Also write the Markdown table to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CalibrateArgs {
    /// The measurements: a per-step CSV, a Splitwise profile CSV, a `vllm bench serve`
    /// --save-result JSON (with or without --save-detailed), a GuideLLM report JSON, GenAI-Perf's
    /// profile_export_genai_perf.json, an offline-throughput table, a serving-results table
    /// (GPUStack's columns), or validation:gpustack-serve (A100) / validation:gpustack-serve-h100.
    input: String,
    /// Scenario naming the model, GPU, tp and engine (needed by per-step CSVs and the JSON results).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Override a key of --scenario (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Engine profile to start from (default: the scenario's preset, or the engine that measured the data).
    #[arg(long)]
    preset: Option<String>,
    /// Keys to fit, comma-separated (default: the overheads the data determine), e.g.
    /// --fit step_overhead_ms,per_seq_overhead_ms.
    #[arg(long, value_delimiter = ',', value_name = "KEYS")]
    fit: Vec<String>,
    /// Folds for the held-out error (measurements of one set-up stay in one fold).
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Use only measurements whose label contains this text; alternatives separated by `|`
    /// (repeatable: a measurement must match every --rows).
    #[arg(long = "rows", value_name = "TEXT")]
    rows: Vec<String>,
    /// Name of the profile written (default: <preset>-calibrated).
    #[arg(long)]
    name: Option<String>,
    /// Output folder: engine/<name>.toml and calibration.json (default: output/calibrate-<name>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Write the profile even when the fit leaves a parameter weakly determined.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Run only these data sets (repeatable): kernels-gemm, kernels-attention, kernels-allreduce,
    /// kernels-held-out-gpu, kernels-unfitted-gpu, vidur-ops, memory-logs, splitwise, sarathi, trtllm-offline, gpustack-serve,
    /// gpustack-serve-h100.
    #[arg(long = "only", value_name = "DATASET")]
    only: Vec<String>,
    /// Also print every row (measured, predicted, error) of the data sets run.
    #[arg(long)]
    rows: bool,
    /// Write validation.json (every data set with its rows and statistics) into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the snapshot the tests compare with (statistics, and the rows of the smaller data
    /// sets) to this file: validation/expected.json after a deliberate change.
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SweepArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// A grid axis, e.g. --grid workload.rate=5,10,20 (repeatable; adds to or replaces [sweep.grid]).
    #[arg(long = "grid", value_name = "KEY=V1,V2,...")]
    grid: Vec<String>,
    /// Advance the axes in lock step instead of taking their cartesian product.
    #[arg(long)]
    zip: bool,
    /// Worker threads (default: all cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Replications per point (default: [sweep] replications, else 1).
    #[arg(long, short)]
    replications: Option<u32>,
    /// Run only the points with index ≡ K (mod N), e.g. --shard 0/4.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Continue an interrupted sweep in the same folder, skipping finished points.
    #[arg(long)]
    resume: bool,
    /// Replace results already in the output folder.
    #[arg(long)]
    force: bool,
    /// Output folder (default: output/<scenario name>-sweep).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Do not print the results table.
    #[arg(long, short)]
    quiet: bool,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
}

#[derive(Debug, Args)]
struct CapacityArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// Independent searches (each with its own arrivals); 3 or more give a confidence interval.
    #[arg(long, short, default_value_t = 3)]
    replications: u32,
    /// Relative precision of each search.
    #[arg(long, default_value_t = 0.02)]
    tolerance: f64,
    /// Print the answer only: no engine line, no progress.
    #[arg(long, short)]
    quiet: bool,
    /// Print the result as JSON on stdout (nothing else).
    #[arg(long)]
    json: bool,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
}

#[derive(Debug, Args)]
struct PlanArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Print why each configuration without an answer failed, in full.
    #[arg(long)]
    details: bool,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// Output folder for plan.json (default: output/<scenario name>-plan).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Print nothing but errors (plan.json is still written).
    #[arg(long, short)]
    quiet: bool,
    /// Print plan.json on stdout (nothing else; the file is still written).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// Shard result folders.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged result.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Merge even if some points are missing.
    #[arg(long)]
    partial: bool,
    /// Replace the results already in --out.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct PlotArgs {
    /// A results folder written by `run` or `sweep`.
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The reference run's folder.
    a: PathBuf,
    /// The other run's folder (differences are B − A).
    b: PathBuf,
    /// Percentiles of the headline rows, comma-separated (default 50,90,99).
    #[arg(long, value_name = "P,P,...", value_delimiter = ',', num_args = 1..)]
    percentiles: Vec<f64>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args, Default)]
struct ScenarioArgs {
    /// Scenario TOML file.
    scenario: PathBuf,
    /// The scenario's text when it is not read from `scenario` (`run`'s
    /// quick flags without a file: the built-in quickstart).
    #[arg(skip)]
    text: Option<String>,
    /// Override a scenario key, e.g. --set workload.rate=12 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/ and gpu/ TOML files read on top of the built-in catalogue
    /// (default: ./models if it exists).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

mod quick;
use quick::RunScenarioArgs;

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    q: RunScenarioArgs,
    #[arg(skip)]
    s: ScenarioArgs,
    /// Output folder (default: output/<scenario name>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Replace results already in the output folder.
    #[arg(long)]
    force: bool,
    /// Do not print the summary table.
    #[arg(long, short)]
    quiet: bool,
    /// Print summary.json on stdout instead of the table (the files are still written).
    #[arg(long)]
    json: bool,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
    /// Do not write requests.csv (one row per request; about 150 bytes a
    /// request). The summary, time series and charts are unchanged.
    #[arg(long)]
    no_requests: bool,
    /// Split every request's latency into parts that add up to its TTFT and
    /// E2E (docs/attribution.md): requests.csv gains a `part_<name>_ms`
    /// column per part, which `servesim explain` reads.
    #[arg(long)]
    attribution: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ListWhat {
    Models,
    Gpus,
    /// Engine profiles (engine.preset).
    Engines,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// What to list.
    what: ListWhat,
    /// Extra catalogue folder (as for `run`).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

/// Entry point: parses arguments, runs the command, returns the exit code
/// (0 success, 1 runtime failure, 2 usage or configuration error).
pub fn main() -> i32 {
    // Output piped into a reader that stops early (`servesim run ... | head`)
    // ends the command quietly, as a closed pipe ends any Unix tool, instead
    // of a panic and a backtrace from the print that found the pipe closed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default_hook(info)
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if !(cli.limits.max_horizon.is_finite() && cli.limits.max_horizon > 0.0) {
        eprintln!("error: --max-horizon must be a positive number of seconds, got {}", cli.limits.max_horizon);
        return 2;
    }
    for (flag, x) in [("--max-memory", cli.limits.max_memory), ("--max-projected-time", cli.limits.max_projected_time)]
    {
        if !(x.is_finite() && x > 0.0) {
            eprintln!("error: {flag} must be a positive number, got {x}");
            return 2;
        }
    }
    crate::limits::set(crate::limits::Limits {
        max_requests: cli.limits.max_requests,
        max_horizon_s: cli.limits.max_horizon,
        max_memory_bytes: cli.limits.max_memory * 1024.0 * 1024.0 * 1024.0,
        max_projected_s: cli.limits.max_projected_time,
    });
    if let Some(s) = cli.limits.max_wall_time {
        if !(s.is_finite() && s > 0.0) {
            eprintln!("error: --max-wall-time must be a positive number of seconds, got {s}");
            return 2;
        }
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs_f64(s));
            crate::limits::request_stop();
        });
    }
    let code = match dispatch(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    if std::env::var_os("SERVESIM_PRINT_PEAK_RSS").is_some() {
        eprintln!("peak RSS {:.0} MiB", crate::bench::peak_rss_mib());
    }
    code
}

fn dispatch(cli: Cli) -> Result<()> {
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
            let _lock = export::FolderLock::take(&a.dir, "command")?;
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
            crate::export::create_out_dir(&dir)?;
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
        Some(text) => crate::config::load_scenario_str_with(text, &a.scenario, &a.set, &catalog_arc)?,
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
    export::create_out_dir(&dir)?;
    let _lock = export::FolderLock::take(&dir, "run")?;
    let seed = setup.scenario.seed;
    let requests = crate::limits::estimate(&setup).requests.map(|n| n as u64);
    let runs = 1 + loaded.scenario.baseline.is_some() as u64;
    let progress = Progress::start("simulating", requests.map(|n| n * runs), a.quiet || a.json);
    // All or nothing: the files are staged, then moved into place together.
    // requests.csv is written as requests finish, so no record is kept.
    let staging = export::Staging::new(&dir)?;
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
        crate::export::write_atomic(path, |w| w.write_all(md.as_bytes()))?;
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
        crate::export::create_out_dir(dir)?;
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
    crate::export::create_out_dir(&engine_dir)?;
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
    let _lock = if dir.is_dir() { Some(export::FolderLock::take(dir, "command")?) } else { None };
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

impl From<clap::Error> for Error {
    fn from(e: clap::Error) -> Self {
        Error::Config(ConfigError::new(e.to_string()))
    }
}
