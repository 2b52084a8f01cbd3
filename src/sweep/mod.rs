//! Parameter sweeps: grids of scenario variants, replications with Student-t
//! confidence intervals, baselines with common random numbers, sharding.
//!
//! # Determinism
//! Point `i` of a grid, replication `r`, runs with seed
//! `point_seed(scenario seed, i, r)` whatever the number of threads, shards or
//! resumptions; its baseline runs with the same seed, so both see the same
//! arrivals and lengths. Results are written in point order, so `sweep.csv`,
//! `sweep.json` and the charts are byte-identical however the work was split.

mod output;

pub use output::{MANIFEST, POINTS, SweepManifest, chart_points, merge, read_points, write_charts, write_outputs};

use crate::config::SweepMode;
use crate::error::{ConfigError, Error, Result, at};
use crate::metrics::Summary;
use crate::scenario::{LoadedScenario, parse_value};
use crate::workload::stream_seed;
use crate::{Catalog, resolve, run_lean};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// Grid axes in order: dotted key → values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// The axes.
    pub axes: Vec<(String, Vec<toml::Value>)>,
    /// How they combine.
    pub mode: SweepMode,
}

impl Grid {
    /// The scenario's `[sweep]` grid with `--grid key=v1,v2` axes added or replaced.
    pub fn new(loaded: &LoadedScenario, cli: &[String], zip: bool) -> Result<Grid, ConfigError> {
        let sw = loaded.scenario.sweep.clone().unwrap_or_default();
        let mut axes: Vec<(String, Vec<toml::Value>)> =
            sw.grid.iter().map(|(k, v)| (k.clone(), v.as_array().cloned().unwrap_or_default())).collect();
        for g in cli {
            let Some((k, vals)) = g.split_once('=') else {
                return Err(ConfigError::new(format!("--grid {g}: expected key.path=v1,v2,..."))
                    .hint("for example --grid workload.rate=5,10,20"));
            };
            let values: Vec<toml::Value> = split_values(vals).iter().map(|v| parse_value(v.trim())).collect();
            let k = k.trim().to_string();
            match axes.iter_mut().find(|a| a.0 == k) {
                Some(a) => a.1 = values,
                None => axes.push((k, values)),
            }
        }
        let mode = if zip { SweepMode::Zip } else { sw.mode };
        if axes.is_empty() {
            return Err(ConfigError::new("the sweep has no axes").file(&loaded.path).hint(
                "add a [sweep.grid] table (\"workload.rate\" = [5, 10, 20]) or pass --grid workload.rate=5,10,20",
            ));
        }
        if mode == SweepMode::Zip {
            let n = axes[0].1.len();
            if let Some(a) = axes.iter().find(|a| a.1.len() != n) {
                return Err(ConfigError::new(format!(
                    "zip mode needs axes of equal length: {} has {}, {} has {n}",
                    a.0,
                    a.1.len(),
                    axes[0].0
                ))
                .hint("give every axis the same number of values, or use mode = \"cartesian\""));
            }
        }
        Ok(Grid { axes, mode })
    }

    /// The points, each a list of (key, value) overrides, in index order
    /// (cartesian: the last axis varies fastest).
    pub fn points(&self) -> Vec<Vec<(String, toml::Value)>> {
        match self.mode {
            SweepMode::Zip => (0..self.axes[0].1.len())
                .map(|i| self.axes.iter().map(|(k, v)| (k.clone(), v[i].clone())).collect())
                .collect(),
            SweepMode::Cartesian => {
                let mut out: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
                for (k, vals) in &self.axes {
                    out = out
                        .into_iter()
                        .flat_map(|p| {
                            vals.iter().map(move |v| {
                                let mut q = p.clone();
                                q.push((k.clone(), v.clone()));
                                q
                            })
                        })
                        .collect();
                }
                out
            }
        }
    }
}

/// Splits "a,b,{x=1,y=2}" at top-level commas.
fn split_values(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur, mut quoted) = (0i32, String::new(), false);
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            '{' | '[' if !quoted => depth += 1,
            '}' | ']' if !quoted => depth -= 1,
            ',' if depth == 0 && !quoted => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

/// Seed of replication `rep` of point `index`.
pub fn point_seed(seed: u64, index: usize, rep: u32) -> u64 {
    stream_seed(stream_seed(seed, 0x5EED_0000 + index as u64), rep as u64 + 1)
}

/// Mean and Student-t 95% confidence interval of replications.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// Mean of the finite samples.
    pub mean: f64,
    /// Lower bound of the 95% interval (NaN with fewer than 2 samples).
    pub ci_lo: f64,
    /// Upper bound.
    pub ci_hi: f64,
}

impl Stat {
    /// Mean and 95% CI of the finite values in `x`.
    pub fn of(x: &[f64]) -> Stat {
        let v: Vec<f64> = x.iter().copied().filter(|v| v.is_finite()).collect();
        let n = v.len();
        if n == 0 {
            return Stat { mean: f64::NAN, ci_lo: f64::NAN, ci_hi: f64::NAN };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Stat { mean, ci_lo: f64::NAN, ci_hi: f64::NAN };
        }
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).map(|d| d.inverse_cdf(0.975)).unwrap_or(f64::NAN);
        let h = t * sd / (n as f64).sqrt();
        Stat { mean, ci_lo: mean - h, ci_hi: mean + h }
    }
}

impl Serialize for Stat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let f = |x: f64| x.is_finite().then_some(x);
        [f(self.mean), f(self.ci_lo), f(self.ci_hi)].serialize(s)
    }
}

impl<'de> Deserialize<'de> for Stat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let [a, b, c]: [Option<f64>; 3] = Deserialize::deserialize(d)?;
        let g = |x: Option<f64>| x.unwrap_or(f64::NAN);
        Ok(Stat { mean: g(a), ci_lo: g(b), ci_hi: g(c) })
    }
}

/// The headline metrics compared against a baseline and shown in tables.
pub const HEADLINE: [&str; 16] = [
    "request_throughput",
    "output_throughput",
    "output_throughput_per_gpu",
    "request_goodput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "mean_queue_ms",
    "slo.attainment",
    "failed",
    "cost.usd_per_million_output_tokens",
];

/// Columns of the sweep tables (terminal and HTML): (header, metric).
pub const TABLE_COLUMNS: [(&str, &str); 8] = [
    ("req/s", "request_throughput"),
    ("out tok/s", "output_throughput"),
    ("TTFT p50", "median_ttft_ms"),
    ("TTFT p99", "p99_ttft_ms"),
    ("TPOT p50", "median_tpot_ms"),
    ("TPOT p99", "p99_tpot_ms"),
    ("SLO %", "slo.attainment"),
    ("$/1M tok", "cost.usd_per_million_output_tokens"),
];

/// Every numeric field of a summary as (dotted name, value); booleans as 0/1,
/// nulls as NaN, lists left out.
pub fn flatten(s: &Summary) -> Vec<(String, f64)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, f64)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&name, x, out);
                }
            }
            serde_json::Value::Number(n) => out.push((prefix.to_string(), n.as_f64().unwrap_or(f64::NAN))),
            serde_json::Value::Bool(b) => out.push((prefix.to_string(), *b as u8 as f64)),
            serde_json::Value::Null => out.push((prefix.to_string(), f64::NAN)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", &serde_json::to_value(s).unwrap_or_default(), &mut out);
    // `seed` differs per replication and is not a metric.
    out.retain(|(k, _)| k != "seed");
    out
}

/// The result of one grid point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// Index in the grid.
    pub index: usize,
    /// The overrides that define it, as JSON values.
    pub params: Vec<(String, serde_json::Value)>,
    /// Why it could not run (e.g. the model does not fit), if so.
    pub error: Option<String>,
    /// Replications run.
    pub replications: u32,
    /// Fraction of replications judged stable (1 when stability does not apply).
    pub stable_fraction: f64,
    /// The worst verdict of the replications: "overloaded", "shedding",
    /// "failing" (more than 1% of measured requests failed for other reasons
    /// than load, e.g. too long for max_model_len), "inconclusive", "stable"
    /// or "not_applicable". Points not stable are kept off the Pareto
    /// frontier and the knee.
    #[serde(default)]
    pub verdict: String,
    /// Fewest measured requests beyond the SLO percentile in any
    /// replication (null without percentile objectives): below 10, that
    /// percentile rests on a handful of requests.
    #[serde(default)]
    pub tail_requests: Option<f64>,
    /// Every summary metric: replication mean and 95% CI.
    pub metrics: Vec<(String, Stat)>,
    /// Headline metrics of this configuration minus its baseline's
    /// (paired by seed), with 95% CI; empty without a baseline.
    pub vs_baseline: Vec<(String, Stat)>,
}

impl PointResult {
    /// The mean of a metric.
    pub fn get(&self, name: &str) -> f64 {
        self.metrics.iter().find(|m| m.0 == name).map_or(f64::NAN, |m| m.1.mean)
    }

    /// The mean of metric `name` for this point's baseline: its own mean
    /// minus the mean paired difference (NaN without a baseline).
    pub fn baseline_mean(&self, name: &str) -> f64 {
        self.get(name) - self.vs_baseline.iter().find(|m| m.0 == name).map_or(f64::NAN, |m| m.1.mean)
    }
    /// Its verdict (a points file written before verdicts: overloaded
    /// unless every replication was stable).
    pub fn verdict(&self) -> Verdict {
        match self.verdict.as_str() {
            "" if self.stable_fraction >= 1.0 => Verdict::Stable,
            "" => Verdict::Overloaded,
            v => Verdict::parse(v),
        }
    }
    /// A parameter's value as a number, if it is one.
    pub fn param_f64(&self, key: &str) -> Option<f64> {
        self.params.iter().find(|p| p.0 == key).and_then(|p| p.1.as_f64())
    }
}

fn to_json(v: &toml::Value) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// Runs one point: its replications and, if the scenario has one, the baseline beside each.
pub fn run_point(
    loaded: &LoadedScenario,
    catalog: &Catalog,
    index: usize,
    params: &[(String, toml::Value)],
    reps: u32,
) -> PointResult {
    let mut res = PointResult {
        index,
        params: params.iter().map(|(k, v)| (k.clone(), to_json(v))).collect(),
        error: None,
        replications: reps,
        stable_fraction: f64::NAN,
        verdict: String::new(),
        tail_requests: None,
        metrics: Vec::new(),
        vs_baseline: Vec::new(),
    };
    let what = format!("sweep point {index}");
    let setup = match loaded.derive(params, &what).and_then(|s| resolve(&s, catalog)) {
        Ok(s) => s,
        Err(e) => {
            res.error = Some(e.to_string());
            return res;
        }
    };
    let baseline = match &loaded.scenario.baseline {
        Some(b) => {
            let mut all = params.to_vec();
            all.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
            match loaded.derive(&all, &format!("baseline of {what}")).and_then(|s| resolve(&s, catalog)) {
                Ok(s) => Some(s),
                Err(e) => {
                    res.error = Some(e.to_string());
                    return res;
                }
            }
        }
        None => None,
    };
    let mut runs: Vec<Vec<(String, f64)>> = Vec::new();
    let mut diffs: Vec<Vec<f64>> = vec![Vec::new(); HEADLINE.len()];
    let mut stable = 0u32;
    let mut worst = Verdict::NotApplicable;
    for rep in 0..reps {
        let seed = point_seed(setup.scenario.seed, index, rep);
        let r = run_lean(&setup, seed);
        if let Err(e) = r.check_complete() {
            res.error = Some(e.to_string());
            return res;
        }
        stable += matches!(r.summary.stability.verdict.as_str(), "stable" | "not_applicable") as u32;
        worst = worst.max(Verdict::of(&r.summary));
        if let Some(slo) = &setup.scenario.slo {
            let t = r.summary.tail_requests(slo);
            if t.is_finite() {
                res.tail_requests = Some(res.tail_requests.map_or(t, |x: f64| x.min(t)));
            }
        }
        let flat = flatten(&r.summary);
        if let Some(b) = &baseline {
            let fb = flatten(&run_lean(b, seed).summary);
            for (k, name) in HEADLINE.iter().enumerate() {
                let get = |f: &[(String, f64)]| f.iter().find(|m| m.0 == *name).map_or(f64::NAN, |m| m.1);
                diffs[k].push(get(&flat) - get(&fb));
            }
        }
        runs.push(flat);
    }
    res.stable_fraction = stable as f64 / reps as f64;
    res.verdict = worst.as_str().into();
    // Align by name: maps such as failures_by_reason differ between replications.
    let mut names: Vec<&String> = Vec::new();
    for r in &runs {
        for (n, _) in r {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    res.metrics = names
        .iter()
        .map(|&name| {
            let v: Vec<f64> = runs.iter().map(|r| r.iter().find(|m| &m.0 == name).map_or(f64::NAN, |m| m.1)).collect();
            (name.clone(), Stat::of(&v))
        })
        .collect();
    if baseline.is_some() {
        res.vs_baseline = HEADLINE.iter().zip(&diffs).map(|(n, d)| (n.to_string(), Stat::of(d))).collect();
    }
    res
}

/// A sweep point's verdict, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Offline batch: stability does not apply.
    NotApplicable,
    /// A steady state that served its requests.
    Stable,
    /// Too short, or too few requests, to tell.
    Inconclusive,
    /// More than 1% of measured requests failed for reasons other than load.
    Failing,
    /// Steady only because more than 1% of requests were refused or timed out.
    Shedding,
    /// The backlog grew: the offered load exceeds capacity.
    Overloaded,
}

impl Verdict {
    /// The verdict of one run.
    pub fn of(s: &Summary) -> Verdict {
        match s.stability.verdict.as_str() {
            "overloaded" => Verdict::Overloaded,
            "shedding" => Verdict::Shedding,
            _ if s.failed_fraction() - s.stability.shed_fraction > crate::metrics::stability::SHED_LIMIT => {
                Verdict::Failing
            }
            "inconclusive" => Verdict::Inconclusive,
            "not_applicable" => Verdict::NotApplicable,
            _ => Verdict::Stable,
        }
    }

    /// Parses the name written in `verdict` (an old points file without one: stable).
    pub fn parse(s: &str) -> Verdict {
        match s {
            "overloaded" => Verdict::Overloaded,
            "shedding" => Verdict::Shedding,
            "failing" => Verdict::Failing,
            "inconclusive" => Verdict::Inconclusive,
            "not_applicable" => Verdict::NotApplicable,
            _ => Verdict::Stable,
        }
    }

    /// Its name in `sweep.json` and `sweep.csv`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotApplicable => "not_applicable",
            Verdict::Stable => "stable",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Failing => "failing",
            Verdict::Shedding => "shedding",
            Verdict::Overloaded => "overloaded",
        }
    }

    /// A stable (or offline) point: one charts join and the frontier and knee may use.
    pub fn ok(self) -> bool {
        self <= Verdict::Stable
    }
}

/// Options of a sweep.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// Worker threads (default: all cores).
    pub jobs: Option<usize>,
    /// Replications per point (default: the scenario's).
    pub replications: Option<u32>,
    /// Run only points with index ≡ k (mod n).
    pub shard: Option<(usize, usize)>,
    /// Skip points already in the output folder.
    pub resume: bool,
    /// Replace results already in the output folder.
    pub force: bool,
    /// Show a progress bar.
    pub progress: bool,
}

/// Runs (this shard of) a sweep into `dir`, appending each point's result to
/// `points.jsonl` as it finishes; returns all points of the shard, sorted.
pub fn run_sweep(
    loaded: &LoadedScenario,
    catalog: &Catalog,
    grid: &Grid,
    opts: &SweepOptions,
    dir: &Path,
) -> Result<Vec<PointResult>> {
    let reps = opts.replications.or(loaded.scenario.sweep.as_ref().map(|s| s.replications)).unwrap_or(1).max(1);
    let points = grid.points();
    let manifest = SweepManifest::new(loaded, grid, reps, points.len());
    let points_file = dir.join(POINTS);
    crate::files::create_out_dir(dir)?;
    let _lock = crate::files::FolderLock::take(dir, "sweep")?;
    let mut done: Vec<PointResult> = Vec::new();
    if points_file.exists() {
        if opts.resume {
            let old = SweepManifest::read(dir)?;
            if !old.same_sweep(&manifest) {
                return Err(ConfigError::new(format!("{} holds a different sweep; cannot resume it", dir.display()))
                    .hint("use another --out folder, or --force to start over")
                    .into());
            }
            done = output::read_points_repair(&points_file)?;
        } else if !opts.force {
            return Err(ConfigError::new(format!("{} already holds sweep results", dir.display()))
                .hint("pass --resume to continue it, --force to start over, or --out DIR")
                .into());
        } else {
            std::fs::remove_file(&points_file).map_err(at("remove", &points_file))?;
        }
    }
    crate::files::create_out_dir(dir)?;
    crate::files::write_json(&dir.join(MANIFEST), &SweepManifest { shard: opts.shard, ..manifest })?;
    let todo: Vec<(usize, &Vec<(String, toml::Value)>)> = points
        .iter()
        .enumerate()
        .filter(|(i, _)| opts.shard.is_none_or(|(k, n)| i % n == k))
        .filter(|(i, _)| !done.iter().any(|p| p.index == *i))
        .collect();
    let file =
        std::fs::OpenOptions::new().create(true).append(true).open(&points_file).map_err(at("open", &points_file))?;
    let sink = Mutex::new(std::io::BufWriter::new(file));
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(todo.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} points  {elapsed} elapsed, ETA {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let work = || -> Result<Vec<PointResult>> {
        todo.par_iter()
            .map(|(i, params)| {
                let r = run_point(loaded, catalog, *i, params, reps);
                let line = serde_json::to_string(&r).map_err(|e| Error::Runtime(e.to_string()))?;
                {
                    let mut w = sink.lock().map_err(|_| Error::Runtime("points file lock poisoned".into()))?;
                    writeln!(w, "{line}").and_then(|_| w.flush()).map_err(at("append to", &points_file))?;
                }
                bar.inc(1);
                Ok(r)
            })
            .collect()
    };
    let new = match opts.jobs {
        Some(j) => rayon::ThreadPoolBuilder::new()
            .num_threads(j.max(1))
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?
            .install(work)?,
        None => work()?,
    };
    bar.finish_and_clear();
    done.extend(new);
    done.sort_by_key(|p| p.index);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_t_interval() {
        // mean 2, sd 1, n 4: t(0.975, 3) = 3.182 → half-width 1.591.
        let s = Stat::of(&[1.0, 2.0, 3.0, 2.0]);
        assert!((s.mean - 2.0).abs() < 1e-12);
        let sd = (2.0f64 / 3.0).sqrt();
        assert!((s.ci_hi - 2.0 - 3.182_446 * sd / 2.0).abs() < 1e-4, "{s:?}");
        assert!(Stat::of(&[5.0]).ci_lo.is_nan());
    }

    #[test]
    fn splits_top_level_commas_only() {
        assert_eq!(split_values("1,2,{dist=\"fixed\",value=3}"), vec!["1", "2", "{dist=\"fixed\",value=3}"]);
    }
}
