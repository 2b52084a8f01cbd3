//! Sweep outputs: `points.jsonl` (appended as points finish), `sweep.csv`,
//! `sweep.json`, the sweep charts, and merging shards.

use super::{Grid, HEADLINE, PointResult};
use crate::error::{ConfigError, Error, Result, at};
use crate::plot::{self, SweepPoint};
use crate::scenario::LoadedScenario;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Per-point results, one JSON object per line, in completion order.
pub const POINTS: &str = "points.jsonl";
/// What the sweep is: scenario, grid, replications.
pub const MANIFEST: &str = "sweep-manifest.json";
/// The HTML report `servesim report` writes into a results folder.
const REPORT: &str = "report.html";

/// Everything that identifies a sweep (shards of one sweep share it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepManifest {
    /// servesim version.
    pub servesim_version: String,
    /// Scenario name.
    pub scenario: String,
    /// SHA-256 of the scenario file.
    pub scenario_sha256: String,
    /// The base scenario (file + overrides) as TOML text.
    pub base: String,
    /// The grid.
    pub grid: Grid,
    /// Replications per point.
    pub replications: u32,
    /// Points in the whole grid.
    pub total_points: usize,
    /// This run's shard (k, n), if sharded.
    pub shard: Option<(usize, usize)>,
    /// `--min-requests`: each run lengthened to about this many measured requests.
    #[serde(default)]
    pub min_requests: Option<u64>,
}

impl SweepManifest {
    /// The manifest of a sweep of `loaded` over `grid`.
    pub fn new(loaded: &LoadedScenario, grid: &Grid, replications: u32, total_points: usize) -> Self {
        SweepManifest {
            servesim_version: env!("CARGO_PKG_VERSION").into(),
            scenario: loaded.scenario.name.clone(),
            scenario_sha256: loaded.sha256.clone(),
            base: toml::to_string(&loaded.table()).unwrap_or_default(),
            grid: grid.clone(),
            replications,
            total_points,
            shard: None,
            min_requests: loaded.min_requests,
        }
    }

    /// Reads `sweep-manifest.json` from a results folder.
    pub fn read(dir: &Path) -> Result<Self> {
        let p = dir.join(MANIFEST);
        let text = crate::files::read::read_whole(&p, crate::files::read::MAX_WHOLE_BYTES)
            .map_err(|e| e.hint("pass a folder written by `servesim sweep`"))?;
        serde_json::from_str(&text).map_err(|e| ConfigError::new(format!("{}: {e}", p.display())).into())
    }

    /// True when both describe the same sweep (shards aside).
    pub fn same_sweep(&self, o: &SweepManifest) -> bool {
        SweepManifest { shard: None, ..self.clone() } == SweepManifest { shard: None, ..o.clone() }
    }

    /// The base scenario back as a loaded scenario (for charts and merging).
    pub fn loaded(&self) -> Result<LoadedScenario> {
        let mut l = crate::scenario::load_scenario_str(&self.base, Path::new(&format!("{}.toml", self.scenario)), &[])?;
        l.min_requests = self.min_requests;
        Ok(l)
    }
}

/// Reads a `points.jsonl`, dropping a last line cut short by an
/// interruption (the file is rewritten without it, so appends stay whole).
pub fn read_points_repair(path: &Path) -> Result<Vec<PointResult>> {
    let points = read_points(path)?;
    let text = std::fs::read_to_string(path).map_err(at("read", path))?;
    if !text.is_empty()
        && (!text.ends_with('\n') || text.lines().filter(|l| !l.trim().is_empty()).count() != points.len())
    {
        crate::files::write_atomic(path, |w| {
            for p in &points {
                writeln!(w, "{}", serde_json::to_string(p).map_err(std::io::Error::other)?)?;
            }
            Ok(())
        })?;
    }
    Ok(points)
}

/// Reads a `points.jsonl`, ignoring a last line cut short by an interruption.
pub fn read_points(path: &Path) -> Result<Vec<PointResult>> {
    read_points_noting(path).map(|(points, _)| points)
}

/// Reads a `points.jsonl`; a last line cut short by an interruption is
/// left out, and said: the second value names it and why it was dropped.
pub fn read_points_noting(path: &Path) -> Result<(Vec<PointResult>, Option<String>)> {
    let (f, _) = crate::files::read::open_regular(path)?;
    let mut reader = std::io::BufReader::new(f);
    let mut lines = Vec::new();
    let mut line = String::new();
    while crate::files::read::read_line(&mut reader, &mut line, || format!("{}:{}", path.display(), lines.len() + 1))?
        > 0
    {
        lines.push(line.trim_end_matches(['\n', '\r']).to_string());
    }
    let mut out = Vec::new();
    let mut torn = None;
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<PointResult>(l) {
            Ok(p) => out.push((p, i + 1)),
            // A torn last line: that point reruns on --resume.
            Err(e) if i + 1 == lines.len() => {
                torn = Some(format!(
                    "{}:{}: the last line is not a whole point ({e}); it was left out (a sweep cut short \
                     while writing it: `servesim sweep ... --resume` reruns that point)",
                    path.display(),
                    i + 1
                ))
            }
            Err(e) => return Err(ConfigError::new(format!("{}:{}: {e}", path.display(), i + 1)).into()),
        }
    }
    // A point twice means two sweeps wrote this file at once: its results
    // cannot be trusted to be one sweep's.
    let mut seen = std::collections::HashMap::new();
    for (p, line) in &out {
        if let Some(first) = seen.insert(p.index, *line) {
            return Err(ConfigError::new(format!(
                "{}:{line}: point {} is there twice (first at line {first}): two sweeps wrote this folder at once",
                path.display(),
                p.index
            ))
            .hint("run the sweep again into a fresh folder (or with --force)")
            .into());
        }
    }
    Ok((out.into_iter().map(|(p, _)| p).collect(), torn))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn num(x: f64) -> String {
    if x.is_finite() { ryu::Buffer::new().format_finite(x).to_string() } else { String::new() }
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Grid axes that set the load rather than the configuration: each chart
/// line (family) joins the points that differ only in these.
pub const LOAD_KEYS: [&str; 4] =
    ["workload.rate", "workload.closed_loop.users", "workload.trace.speedup", "workload.trace.target_rate"];

/// The sweep chart data of each point that ran, then (with a `[baseline]`)
/// each point's baseline as a family of its own, "baseline" or "baseline of
/// `<family>`": the point's mean minus the mean paired difference. A
/// baseline's stability is not recorded, so its points are never flagged.
pub fn chart_points(points: &[PointResult], base_rate: Option<f64>) -> Vec<SweepPoint> {
    let mut out = own_chart_points(points, base_rate);
    let baselines: Vec<SweepPoint> = points
        .iter()
        .filter(|p| p.error.is_none())
        .zip(out.iter())
        .filter(|(p, _)| !p.vs_baseline.is_empty())
        .map(|(p, c)| SweepPoint {
            family: if c.family.is_empty() { "baseline".into() } else { format!("baseline of {}", c.family) },
            rate: c.rate,
            output_throughput: p.baseline_mean("output_throughput"),
            output_throughput_per_gpu: p.baseline_mean("output_throughput_per_gpu"),
            ttft_p50: p.baseline_mean("median_ttft_ms"),
            ttft_p99: p.baseline_mean("p99_ttft_ms"),
            tpot_p50: p.baseline_mean("median_tpot_ms"),
            tpot_p99: p.baseline_mean("p99_tpot_ms"),
            flag: None,
        })
        .collect();
    out.extend(baselines);
    out
}

/// The chart data of each point that ran, as it ran.
fn own_chart_points(points: &[PointResult], base_rate: Option<f64>) -> Vec<SweepPoint> {
    points
        .iter()
        .filter(|p| p.error.is_none())
        .map(|p| SweepPoint {
            family: p
                .params
                .iter()
                .filter(|(k, _)| !LOAD_KEYS.contains(&k.as_str()))
                .map(|(k, v)| format!("{}={}", k.rsplit('.').next().unwrap_or(k), value_text(v)))
                .collect::<Vec<_>>()
                .join(", "),
            // Offered load: the swept or configured rate; for closed-loop users
            // and trace replays, the arrival rate the run observed.
            rate: p.param_f64("workload.rate").or(base_rate).or_else(|| {
                let r = p.get("workload.observed_arrival_rate");
                r.is_finite().then_some(r)
            }),
            output_throughput: p.get("output_throughput"),
            output_throughput_per_gpu: p.get("output_throughput_per_gpu"),
            ttft_p50: p.get("median_ttft_ms"),
            ttft_p99: p.get("p99_ttft_ms"),
            tpot_p50: p.get("median_tpot_ms"),
            tpot_p99: p.get("p99_tpot_ms"),
            flag: match p.verdict() {
                super::Verdict::Overloaded => Some(plot::Flag::Overloaded),
                super::Verdict::Shedding => Some(plot::Flag::Shedding),
                super::Verdict::Failing => Some(plot::Flag::Failing),
                super::Verdict::Inconclusive => Some(plot::Flag::Inconclusive),
                super::Verdict::Stable | super::Verdict::NotApplicable => None,
            },
        })
        .collect()
}

/// Writes `sweep.csv`, `sweep.json` and the sweep charts for `points` (sorted by index).
pub fn write_outputs(dir: &Path, manifest: &SweepManifest, points: &[PointResult]) -> Result<()> {
    let keys: Vec<String> = manifest.grid.axes.iter().map(|a| a.0.clone()).collect();
    let names: Vec<String> = points
        .iter()
        .find(|p| p.error.is_none())
        .map(|p| p.metrics.iter().map(|m| m.0.clone()).collect())
        .unwrap_or_default();
    let has_baseline = points.iter().any(|p| !p.vs_baseline.is_empty());
    crate::files::write_atomic(&dir.join("sweep.csv"), |w| {
        let mut head: Vec<String> = vec!["index".into()];
        head.extend(keys.iter().cloned());
        head.extend(["error".into(), "replications".into(), "stable_fraction".into(), "verdict".into()]);
        for n in &names {
            head.extend([n.clone(), format!("{n}_ci_lo"), format!("{n}_ci_hi")]);
        }
        if has_baseline {
            for n in HEADLINE {
                head.extend([
                    format!("vs_baseline.{n}"),
                    format!("vs_baseline.{n}_ci_lo"),
                    format!("vs_baseline.{n}_ci_hi"),
                ]);
            }
        }
        writeln!(w, "{}", head.iter().map(|h| csv_field(h)).collect::<Vec<_>>().join(","))?;
        for p in points {
            let mut row = vec![p.index.to_string()];
            for k in &keys {
                row.push(csv_field(&p.params.iter().find(|x| &x.0 == k).map_or(String::new(), |x| value_text(&x.1))));
            }
            row.push(csv_field(p.error.as_deref().unwrap_or("")));
            row.push(p.replications.to_string());
            row.push(num(p.stable_fraction));
            row.push(if p.error.is_some() { String::new() } else { p.verdict().as_str().to_string() });
            for n in &names {
                let s = p.metrics.iter().find(|m| &m.0 == n).map(|m| m.1);
                row.extend(match s {
                    Some(s) => [num(s.mean), num(s.ci_lo), num(s.ci_hi)],
                    None => [String::new(), String::new(), String::new()],
                });
            }
            if has_baseline {
                for n in HEADLINE {
                    let s = p.vs_baseline.iter().find(|m| m.0 == n).map(|m| m.1);
                    row.extend(match s {
                        Some(s) => [num(s.mean), num(s.ci_lo), num(s.ci_hi)],
                        None => [String::new(), String::new(), String::new()],
                    });
                }
            }
            writeln!(w, "{}", row.join(","))?;
        }
        Ok(())
    })?;
    #[derive(Serialize)]
    struct SweepJson<'a> {
        scenario: &'a str,
        grid: &'a Grid,
        replications: u32,
        total_points: usize,
        points: &'a [PointResult],
    }
    crate::files::write_json(
        &dir.join("sweep.json"),
        &SweepJson {
            scenario: &manifest.scenario,
            grid: &manifest.grid,
            replications: manifest.replications,
            total_points: manifest.total_points,
            points,
        },
    )?;
    write_charts(dir, manifest, points)
}

/// Draws the three sweep charts.
pub fn write_charts(dir: &Path, manifest: &SweepManifest, points: &[PointResult]) -> Result<()> {
    let base = manifest.loaded()?;
    let ttft_slo = base.scenario.slo.as_ref().and_then(|s| s.ttft_ms);
    let cp = chart_points(points, base.scenario.workload.rate.filter(|_| base.scenario.workload.trace.is_none()));
    let name = &manifest.scenario;
    let figs = [
        (
            "tradeoff",
            plot::tradeoff_figure(&format!("{name}: throughput vs time to first token"), &cp, false, ttft_slo),
        ),
        ("pareto", plot::pareto_figure(&format!("{name}: throughput per GPU vs interactivity"), &cp)),
        ("hockey", plot::hockey_figure(&format!("{name}: latency vs offered load"), &cp, ttft_slo)),
    ];
    use rayon::prelude::*;
    let res: Vec<Result<String>> = figs.par_iter().map(|(stem, f)| plot::save(f, dir, stem)).collect();
    res.into_iter().try_for_each(|r| r.map(|_| ()))
}

/// Combines shard folders into `out`: the same files as one unsharded run.
/// Returns the points, and what was left out (a shard's torn last line).
pub fn merge(
    dirs: &[std::path::PathBuf],
    out: &Path,
    partial: bool,
    force: bool,
) -> Result<(Vec<PointResult>, Vec<String>)> {
    let Some(first) = dirs.first() else {
        return Err(ConfigError::new("merge needs at least one results folder").into());
    };
    // Results already in `out` (another sweep's, or a shard's) are replaced only on request.
    // A run's folder (manifest.json, summary.json, requests.csv) counts too.
    let existing: Vec<&str> =
        [MANIFEST, POINTS, "sweep.csv", "sweep.json", REPORT, "manifest.json", "summary.json", "requests.csv"]
            .into_iter()
            .filter(|f| out.join(f).exists())
            .collect();
    if !existing.is_empty() && !force {
        return Err(ConfigError::new(format!("{} already holds results ({})", out.display(), existing.join(", ")))
            .hint("pass --force to replace them, or --out DIR to write elsewhere")
            .into());
    }
    let manifest = SweepManifest::read(first)?;
    let mut points: Vec<PointResult> = Vec::new();
    let mut notes = Vec::new();
    for d in dirs {
        let m = SweepManifest::read(d)?;
        if !m.same_sweep(&manifest) {
            return Err(ConfigError::new(format!("{} holds a different sweep than {}", d.display(), first.display()))
                .hint("merge only shards of the same scenario, grid and replications")
                .into());
        }
        let (read, torn) = read_points_noting(&d.join(POINTS))?;
        notes.extend(torn);
        for p in read {
            match points.iter().find(|q| q.index == p.index) {
                // Compare serialised (NaN-safe) forms.
                Some(q) if serde_json::to_string(q).ok() != serde_json::to_string(&p).ok() => {
                    return Err(Error::Runtime(format!("point {} differs between shards", p.index)));
                }
                Some(_) => {}
                None => points.push(p),
            }
        }
    }
    points.sort_by_key(|p| p.index);
    if !partial && points.len() < manifest.total_points {
        let missing: Vec<String> = (0..manifest.total_points)
            .filter(|i| points.binary_search_by_key(i, |p| p.index).is_err())
            .map(|i| i.to_string())
            .collect();
        return Err(ConfigError::new(format!(
            "the shards hold {} of {} points; missing: {}",
            points.len(),
            manifest.total_points,
            missing.iter().take(20).cloned().collect::<Vec<_>>().join(", ")
                + if missing.len() > 20 { ", ..." } else { "" }
        ))
        .hint(format!(
            "finish the missing shards (servesim sweep ... --shard K/N --resume), or pass --partial to merge what is \
             there{}",
            notes.iter().map(|n| format!("\n  {n}")).collect::<String>()
        ))
        .into());
    }
    crate::files::create_out_dir(out)?;
    let _lock = crate::files::FolderLock::take(out, "command")?;
    let merged = SweepManifest { shard: None, ..manifest };
    crate::files::write_json(&out.join(MANIFEST), &merged)?;
    crate::files::write_atomic(&out.join(POINTS), |w| {
        for p in &points {
            writeln!(w, "{}", serde_json::to_string(p).map_err(std::io::Error::other)?)?;
        }
        Ok(())
    })?;
    write_outputs(out, &merged, &points)?;
    // An HTML report of what was there before no longer describes these results.
    match std::fs::remove_file(out.join(REPORT)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(at("remove", &out.join(REPORT))(e)),
        _ => {}
    }
    Ok((points, notes))
}
