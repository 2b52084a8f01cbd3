//! `servesim compare A B`: two results folders side by side.
//!
//! The headline metrics of both `summary.json` files are set next to each
//! other with B − A. When both runs served the same requests (same ids,
//! arrival times and lengths: same seed and same workload), the latencies are
//! also compared request by request: these paired differences cancel the
//! arrival noise both runs share (common random numbers), so a small change
//! shows with a narrow interval. Otherwise the comparison says why it is not
//! paired and gives unpaired (Welch) intervals, which are wider.
//!
//! Intervals are 95% and computed from [`BATCHES`] contiguous batches of
//! requests (the batch-means method of simulation output analysis), because
//! neighbouring requests meet the same queue and are not independent:
//! Student's t on the batch means for mean differences (Welch's when
//! unpaired), and a block bootstrap over batches (fixed seed, [`RESAMPLES`]
//! resamples, on at most [`BOOTSTRAP_PAIRS`] requests a side) for the
//! difference of the p99s.

use crate::error::{ConfigError, Result};
use crate::files::read::{MAX_WHOLE_BYTES, open_regular, read_line, read_whole};
use crate::metrics::stats::percentiles;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde_json::Value;
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;
use std::path::Path;

/// Bootstrap resamples for the p99 difference.
pub const RESAMPLES: usize = 200;
/// Contiguous batches of requests the intervals are computed from (batch
/// means): requests close in time share the queue they met, so they are not
/// independent samples; batches of many requests nearly are.
pub const BATCHES: usize = 20;
/// Requests the bootstrap uses at most (an even subsample beyond).
pub const BOOTSTRAP_PAIRS: usize = 50_000;
/// Rows of requests.csv read at most per side.
pub const MAX_ROWS: usize = 20_000_000;

/// The latency columns compared request by request.
const LATENCIES: [(&str, &str); 4] =
    [("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2el_ms", "E2EL"), ("queue_ms", "queue")];

/// One results folder, as compare sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The folder.
    pub dir: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed of the run.
    pub seed: u64,
    /// Stability verdict.
    pub verdict: String,
}

/// A headline metric of both runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Metric, as printed.
    pub metric: String,
    /// The summary.json key (dotted for nested ones).
    pub key: String,
    /// A's value (null: not defined).
    pub a: Option<f64>,
    /// B's value (null: not defined).
    pub b: Option<f64>,
    /// B − A (null when either is undefined).
    pub diff: Option<f64>,
    /// (B − A) / A (null when either is undefined or A is 0).
    pub relative: Option<f64>,
}

/// Per-request (or, unpaired, per-sample) differences of one latency, B − A, ms.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyDiff {
    /// Metric (TTFT, TPOT, E2EL, queue).
    pub metric: String,
    /// Requests compared: pairs, or (unpaired) the smaller of the two samples.
    pub n: u64,
    /// Mean of B − A, ms.
    pub mean_diff_ms: f64,
    /// 95% interval of the mean difference, ms (paired t or Welch).
    pub mean_diff_ci_ms: [f64; 2],
    /// Median of the per-request differences, ms (paired only).
    pub median_diff_ms: Option<f64>,
    /// Share of pairs where B was faster (paired only).
    pub b_faster_share: Option<f64>,
    /// p99 of A over the compared requests, ms.
    pub p99_a_ms: f64,
    /// p99 of B over the compared requests, ms.
    pub p99_b_ms: f64,
    /// 95% bootstrap interval of p99(B) − p99(A), ms.
    pub p99_diff_ci_ms: [f64; 2],
}

/// The whole comparison (`compare --json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The first folder (the reference).
    pub a: Side,
    /// The second folder.
    pub b: Side,
    /// Resolved-scenario keys whose values differ: (key, A's, B's).
    pub differs: Vec<(String, String, String)>,
    /// Whether the latencies are compared request by request.
    pub paired: bool,
    /// Why they are, or are not, paired.
    pub pairing: String,
    /// Headline metrics side by side.
    pub rows: Vec<Row>,
    /// Latency differences, B − A (empty without requests.csv on both sides).
    pub latencies: Vec<LatencyDiff>,
    /// What the reader should keep in mind (an overloaded side, say).
    pub notes: Vec<String>,
}

/// One measured request of requests.csv.
#[derive(Debug, Clone, Copy)]
struct Req {
    id: u64,
    arrival: f64,
    prompt: u32,
    output: u32,
    completed: bool,
    lat: [f64; 4],
}

struct Folder {
    side: Side,
    summary: Value,
    scenario: Value,
    requests: Option<Vec<Req>>,
}

fn bad(path: &Path, what: impl std::fmt::Display) -> ConfigError {
    ConfigError::new(format!("{}: {what}", path.display()))
}

fn read_folder(dir: &Path) -> Result<Folder> {
    if !dir.join("summary.json").exists() {
        return Err(ConfigError::new(format!("{} holds no summary.json: not the folder of a run", dir.display()))
            .hint("give two folders written by `servesim run`, e.g. servesim compare output/a output/b")
            .into());
    }
    let json = |f: &str| -> Result<Value> {
        let p = dir.join(f);
        Ok(serde_json::from_str(&read_whole(&p, MAX_WHOLE_BYTES)?).map_err(|e| bad(&p, e))?)
    };
    let summary = json("summary.json")?;
    let scenario = if dir.join("manifest.json").exists() {
        json("manifest.json")?["resolved_scenario"].clone()
    } else {
        Value::Null
    };
    let requests =
        if dir.join("requests.csv").exists() { Some(read_requests(&dir.join("requests.csv"))?) } else { None };
    let side = Side {
        dir: dir.display().to_string(),
        scenario: summary["scenario"].as_str().unwrap_or("?").to_string(),
        seed: summary["seed"].as_u64().unwrap_or(0),
        verdict: summary["stability"]["verdict"].as_str().unwrap_or("?").to_string(),
    };
    Ok(Folder { side, summary, scenario, requests })
}

/// The measured requests of a requests.csv, by id; columns found by name.
fn read_requests(path: &Path) -> Result<Vec<Req>> {
    let (file, _) = open_regular(path)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut line = String::new();
    let at = |n: usize| move || format!("{}:{n}", path.display());
    read_line(&mut reader, &mut line, at(1))?;
    let header: Vec<String> = line.trim_end().split(',').map(str::to_string).collect();
    let col = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| bad(path, format!("line 1: no column {name}")))
    };
    let [id, status, measured, arrival, prompt, output] =
        ["id", "status", "measured", "arrival_s", "prompt_tokens", "output_tokens"].map(col);
    let (id, status, measured, arrival, prompt, output) = (id?, status?, measured?, arrival?, prompt?, output?);
    let lat_cols = LATENCIES.map(|(c, _)| col(c));
    let mut lat_idx = [0; 4];
    for (i, c) in lat_cols.into_iter().enumerate() {
        lat_idx[i] = c?;
    }
    let mut out = Vec::new();
    for n in 2.. {
        if read_line(&mut reader, &mut line, at(n))? == 0 {
            break;
        }
        if !line.ends_with('\n') {
            return Err(bad(path, format!("line {n} ends mid-row: the file was cut short"))
                .hint("run the scenario again to write it whole")
                .into());
        }
        let f: Vec<&str> = line.trim_end().split(',').collect();
        let field = |i: usize| f.get(i).copied().ok_or_else(|| bad(path, format!("line {n}: too few columns")));
        let num = |i: usize| -> std::result::Result<f64, ConfigError> {
            let s = field(i)?;
            if s.is_empty() {
                return Ok(f64::NAN);
            }
            s.parse().map_err(|_| bad(path, format!("line {n}: {:?} is not a number ({})", s, header[i])))
        };
        if field(measured)? != "1" {
            continue;
        }
        if out.len() >= MAX_ROWS {
            return Err(bad(
                path,
                format!("over {MAX_ROWS} measured requests: too many to compare request by request"),
            )
            .hint("compare shorter runs, or read the two summary.json files")
            .into());
        }
        let mut lat = [0.0; 4];
        for (k, &i) in lat_idx.iter().enumerate() {
            lat[k] = num(i)?;
        }
        out.push(Req {
            id: num(id)? as u64,
            arrival: num(arrival)?,
            prompt: num(prompt)? as u32,
            output: num(output)? as u32,
            completed: field(status)? == "completed",
            lat,
        });
    }
    out.sort_by_key(|r| r.id);
    Ok(out)
}

/// Flattens a JSON value into dotted keys.
fn flatten(v: &Value, at: &str, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(x, &if at.is_empty() { k.clone() } else { format!("{at}.{k}") }, out);
            }
        }
        Value::Array(items) if items.iter().any(|x| x.is_object()) => {
            for (i, x) in items.iter().enumerate() {
                flatten(x, &format!("{at}[{i}]"), out);
            }
        }
        other => {
            out.insert(at.to_string(), other.to_string());
        }
    }
}

fn scenario_differences(a: &Value, b: &Value) -> Vec<(String, String, String)> {
    let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
    flatten(a, "", &mut fa);
    flatten(b, "", &mut fb);
    let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let absent = "(unset)".to_string();
    keys.into_iter()
        .filter(|k| !matches!(k.as_str(), "name" | "description"))
        .filter_map(|k| {
            let (x, y) = (fa.get(k).unwrap_or(&absent), fb.get(k).unwrap_or(&absent));
            (x != y).then(|| (k.clone(), x.clone(), y.clone()))
        })
        .collect()
}

/// Whether both runs served the same requests, and why (not).
fn pairing(a: &Folder, b: &Folder) -> (bool, String) {
    let (Some(ra), Some(rb)) = (&a.requests, &b.requests) else {
        return (
            false,
            "not compared request by request: a folder has no requests.csv (run with --no-requests)".into(),
        );
    };
    let seeds = if a.side.seed == b.side.seed {
        format!("same seed {}", a.side.seed)
    } else {
        format!("seeds {} and {}", a.side.seed, b.side.seed)
    };
    if ra.len() != rb.len() {
        return (
            false,
            format!(
                "unpaired ({seeds}): A measured {} requests and B {}; the intervals are Welch's and wider than \
                 paired ones. Run B with A's seed and workload to pair them",
                ra.len(),
                rb.len()
            ),
        );
    }
    for (x, y) in ra.iter().zip(rb) {
        if x.id != y.id || x.arrival != y.arrival || x.prompt != y.prompt || x.output != y.output {
            return (
                false,
                format!(
                    "unpaired ({seeds}): request {} differs (arrival {} s, {}/{} tokens in A; request {} at {} s, \
                     {}/{} in B), so the workloads differ; the intervals are Welch's",
                    x.id, x.arrival, x.prompt, x.output, y.id, y.arrival, y.prompt, y.output
                ),
            );
        }
    }
    (
        true,
        format!(
            "paired: {seeds} and the same {} measured requests (ids, arrival times and lengths match); each \
             difference is one request's B − A",
            ra.len()
        ),
    )
}

/// 97.5% quantile of Student's t with `df` degrees of freedom.
fn t975(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0)).map(|d| d.inverse_cdf(0.975)).unwrap_or(f64::NAN)
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    (m, x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0).max(1.0))
}

fn p99(x: &mut [f64]) -> f64 {
    percentiles(x, &[99.0])[0]
}

/// Splits `n` requests (in id order) into [`BATCHES`] contiguous batches, or
/// fewer of at least 10 requests each; returns their bounds.
fn batches(n: usize) -> Vec<std::ops::Range<usize>> {
    let k = BATCHES.min(n / 10).max(2).min(n);
    (0..k).map(|i| i * n / k..(i + 1) * n / k).collect()
}

fn batch_means(x: &[f64], bounds: &[std::ops::Range<usize>]) -> Vec<f64> {
    bounds.iter().map(|r| x[r.clone()].iter().sum::<f64>() / r.len().max(1) as f64).collect()
}

/// 95% block-bootstrap interval of p99(b) − p99(a): whole batches are drawn
/// with replacement (the same batches of both sides when `paired`), so the
/// requests' dependence within a batch is kept.
fn p99_diff_ci(a: &[f64], b: &[f64], paired: bool) -> [f64; 2] {
    let (ba, bb) = (batches(a.len()), batches(b.len()));
    // An even subsample keeps each resample's cost bounded.
    let stride = (a.len().max(b.len())).div_ceil(BOOTSTRAP_PAIRS).max(1);
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0x5e55_c0de);
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut diffs: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            ra.clear();
            rb.clear();
            for k in 0..ba.len().max(bb.len()) {
                let i = rng.random_range(0..ba.len());
                let j = if paired { i } else { rng.random_range(0..bb.len()) };
                if k < ba.len() {
                    ra.extend(a[ba[i].clone()].iter().step_by(stride));
                }
                if k < bb.len() {
                    rb.extend(b[bb[j].clone()].iter().step_by(stride));
                }
            }
            p99(&mut rb) - p99(&mut ra)
        })
        .collect();
    let q = percentiles(&mut diffs, &[2.5, 97.5]);
    [q[0], q[1]]
}

fn latency_diffs(a: &[Req], b: &[Req], paired: bool) -> Vec<LatencyDiff> {
    LATENCIES
        .iter()
        .enumerate()
        .filter_map(|(k, &(_, name))| {
            let ok = |r: &Req| r.completed && r.lat[k].is_finite();
            let (mut xa, mut xb): (Vec<f64>, Vec<f64>) = if paired {
                a.iter().zip(b).filter(|(x, y)| ok(x) && ok(y)).map(|(x, y)| (x.lat[k], y.lat[k])).unzip()
            } else {
                let side = |s: &[Req]| s.iter().filter(|r| ok(r)).map(|r| r.lat[k]).collect::<Vec<f64>>();
                (side(a), side(b))
            };
            if xa.len() < 20 || xb.len() < 20 {
                return None;
            }
            let p99_diff_ci_ms = p99_diff_ci(&xa, &xb, paired);
            let mut d = LatencyDiff {
                metric: name.into(),
                n: xa.len().min(xb.len()) as u64,
                mean_diff_ms: 0.0,
                mean_diff_ci_ms: [f64::NAN; 2],
                median_diff_ms: None,
                b_faster_share: None,
                p99_a_ms: 0.0,
                p99_b_ms: 0.0,
                p99_diff_ci_ms,
            };
            if paired {
                let mut diff: Vec<f64> = xa.iter().zip(&xb).map(|(x, y)| y - x).collect();
                let means = batch_means(&diff, &batches(diff.len()));
                let (m, v) = mean_var(&means);
                let h = t975(means.len() as f64 - 1.0) * (v / means.len() as f64).sqrt();
                d.mean_diff_ms = diff.iter().sum::<f64>() / diff.len() as f64;
                d.mean_diff_ci_ms = [m - h, m + h].map(|x| x - m + d.mean_diff_ms);
                d.b_faster_share = Some(diff.iter().filter(|&&x| x < 0.0).count() as f64 / diff.len() as f64);
                d.median_diff_ms = Some(percentiles(&mut diff, &[50.0])[0]);
            } else {
                // Welch's interval on the batch means of each side.
                let (ma, mb) = (batch_means(&xa, &batches(xa.len())), batch_means(&xb, &batches(xb.len())));
                let ((_, va), (_, vb)) = (mean_var(&ma), mean_var(&mb));
                let (na, nb) = (ma.len() as f64, mb.len() as f64);
                let (sa, sb) = (va / na, vb / nb);
                let df = (sa + sb).powi(2) / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
                let h = t975(if df.is_finite() { df } else { na.min(nb) - 1.0 }) * (sa + sb).sqrt();
                let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
                d.mean_diff_ms = mean(&xb) - mean(&xa);
                d.mean_diff_ci_ms = [d.mean_diff_ms - h, d.mean_diff_ms + h];
            }
            d.p99_a_ms = p99(&mut xa);
            d.p99_b_ms = p99(&mut xb);
            Some(d)
        })
        .collect()
}

/// The headline rows: throughput, SLOs, cost, and latency means and percentiles.
fn rows(a: &Value, b: &Value, shown: &[f64]) -> Vec<Row> {
    let get = |v: &Value, key: &str| key.split('.').fold(v, |v, k| &v[k]).as_f64();
    let mut spec: Vec<(String, String)> = [
        ("Request throughput (req/s)", "request_throughput"),
        ("Request goodput (req/s)", "request_goodput"),
        ("Output token throughput (tok/s)", "output_throughput"),
        ("Output tok/s per GPU", "output_throughput_per_gpu"),
        ("SLO attainment", "slo.attainment"),
        ("Failed requests", "failed"),
        ("GPUs", "cost.num_gpus"),
        ("USD per SLO-met request", "cost.usd_per_slo_met_request"),
        ("USD per 1M output tokens", "cost.usd_per_million_output_tokens"),
        ("Joules per output token", "energy.joules_per_output_token"),
        ("GPU busy fraction", "utilisation.gpu_busy_fraction"),
        ("Mean batch size", "utilisation.mean_batch_size"),
        ("Preemptions", "utilisation.preemptions"),
    ]
    .into_iter()
    .map(|(m, k)| (m.to_string(), k.to_string()))
    .collect();
    for (stem, name) in [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"), ("queue", "queue")] {
        spec.push((format!("Mean {name} (ms)"), format!("mean_{stem}_ms")));
        for &p in shown {
            spec.push((format!("P{p} {name} (ms)"), format!("p{p}_{stem}_ms")));
        }
    }
    spec.into_iter()
        .map(|(metric, key)| {
            let (x, y) = (get(a, &key), get(b, &key));
            let diff = x.zip(y).map(|(x, y)| y - x);
            let relative = x.zip(diff).filter(|(x, _)| *x != 0.0).map(|(x, d)| d / x.abs());
            Row { metric, key, a: x, b: y, diff, relative }
        })
        .collect()
}

/// Compares the run folders `a` (the reference) and `b`; `shown` are the
/// percentiles of the headline rows (empty: 50, 90, 99).
pub fn compare(a: &Path, b: &Path, shown: &[f64]) -> Result<Comparison> {
    let (fa, fb) = (read_folder(a)?, read_folder(b)?);
    let shown = if shown.is_empty() { vec![50.0, 90.0, 99.0] } else { shown.to_vec() };
    let (paired, why) = pairing(&fa, &fb);
    let latencies = match (&fa.requests, &fb.requests) {
        (Some(x), Some(y)) => latency_diffs(x, y, paired),
        _ => Vec::new(),
    };
    let mut notes = Vec::new();
    for (name, s) in [("A", &fa.side), ("B", &fb.side)] {
        if matches!(s.verdict.as_str(), "overloaded" | "shedding" | "inconclusive") {
            notes.push(format!(
                "{name} ({}) is {}: its latencies depend on how long it ran, so its differences describe these \
                 runs, not a steady state",
                s.dir, s.verdict
            ));
        }
    }
    for p in &shown {
        let key = format!("p{p}_ttft_ms");
        if fa.summary.get(&key).is_none() || fb.summary.get(&key).is_none() {
            notes.push(format!("P{p} is not in both summaries: run with --percentiles {p} to add it"));
        }
    }
    Ok(Comparison {
        differs: scenario_differences(&fa.scenario, &fb.scenario),
        rows: rows(&fa.summary, &fb.summary, &shown),
        a: fa.side,
        b: fb.side,
        paired,
        pairing: why,
        latencies,
        notes,
    })
}

/// Decimals for a value of this size: 1 from 100, 2 from 1, else 4.
fn decimals(v: f64) -> usize {
    match v.abs() {
        a if a >= 100.0 => 1,
        a if a >= 1.0 || a == 0.0 => 2,
        _ => 4,
    }
}

fn fmt(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.*}", decimals(v)),
        _ => "n/a".into(),
    }
}

fn signed(x: f64) -> String {
    if x.is_finite() { format!("{x:+.*}", decimals(x)) } else { "n/a".into() }
}

/// The comparison as text.
pub fn format(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "{:=^92}", " servesim compare ");
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        let _ = writeln!(o, "{name}: {} ({}, seed {}, {})", s.dir, s.scenario, s.seed, s.verdict);
    }
    if c.differs.is_empty() {
        let _ = writeln!(o, "Scenario: identical resolved scenarios");
    } else {
        let _ = writeln!(o, "Scenario keys that differ (A → B):");
        for (k, x, y) in c.differs.iter().take(20) {
            let _ = writeln!(o, "  {k:<40} {x} → {y}");
        }
        if c.differs.len() > 20 {
            let _ = writeln!(o, "  … and {} more", c.differs.len() - 20);
        }
    }
    let _ = writeln!(o, "Requests: {}", c.pairing);
    let _ = writeln!(o, "{:-^92}", " Headline (summary.json) ");
    let _ = writeln!(o, "{:<34} {:>10} {:>10} {:>11} {:>9}", "metric", "A", "B", "B − A", "change");
    for r in &c.rows {
        let rel = r.relative.map_or("".into(), |x| format!("{:+.1}%", x * 100.0));
        let diff = r.diff.map_or("n/a".into(), signed);
        let _ = writeln!(o, "{:<34} {:>10} {:>10} {:>11} {:>9}", r.metric, fmt(r.a), fmt(r.b), diff, rel);
    }
    if !c.latencies.is_empty() {
        let title =
            if c.paired { " Per-request differences, B − A (ms) " } else { " Unpaired differences, B − A (ms) " };
        let _ = writeln!(o, "{:-^92}", title);
        let _ = writeln!(
            o,
            "{:<6} {:>6} {:>28} {:>9} {:>8} {:>30}",
            "metric", "n", "mean Δ [95% CI]", "median Δ", "B faster", "p99 Δ [95% CI]"
        );
        for l in &c.latencies {
            let _ = writeln!(
                o,
                "{:<6} {:>6} {:>28} {:>9} {:>8} {:>30}",
                l.metric,
                l.n,
                format!(
                    "{} [{}, {}]",
                    signed(l.mean_diff_ms),
                    signed(l.mean_diff_ci_ms[0]),
                    signed(l.mean_diff_ci_ms[1])
                ),
                l.median_diff_ms.map_or("-".into(), signed),
                l.b_faster_share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
                format!(
                    "{} [{}, {}]",
                    signed(l.p99_b_ms - l.p99_a_ms),
                    signed(l.p99_diff_ci_ms[0]),
                    signed(l.p99_diff_ci_ms[1])
                ),
            );
        }
        let _ = writeln!(
            o,
            "An interval that excludes 0 is a difference this many requests resolve; one that spans 0 is not \
             (95%, from {BATCHES} batches of consecutive requests; the p99's by a block bootstrap)."
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}
