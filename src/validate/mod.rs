//! `servesim validate`: every reference data set shipped in `validation/`,
//! predicted and compared with what was measured.
//!
//! Each data set is a list of rows (one measured quantity each: a kernel
//! time, a KV capacity, a step time, a throughput, a TTFT or TPOT median),
//! predicted by the cost model, the memory plan or a whole simulation with
//! the engine profile that matches the measurement. The result says, per
//! data set, the median and worst relative error and the bias, and whether
//! anything in the model was fitted to that data set (then its error is an
//! in-sample fit, not a validation). `docs/fidelity.md` discusses the table.
//!
//! The data are compiled into the binary (`validation/data/`, with their
//! licences and provenance in `validation/README.md`), so `validate` runs
//! anywhere and gives the same numbers on every machine.

pub mod band;
pub mod gpustack;
mod kernels;
mod memory;
pub mod power;
mod serving;
mod steps;

pub use band::{BandMetric, ErrorBand, band, snapshot};
pub use serving::simulate;

use crate::Catalog;
use crate::metrics::stats::median;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One measured quantity and its prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What was measured (set-up and quantity), unique within the data set.
    pub id: String,
    /// The quantity: `ms`, `tokens`, `tok/s`, `ttft_median_ms`, ...
    pub metric: String,
    /// The measured value.
    #[serde(deserialize_with = "null_as_nan")]
    pub measured: f64,
    /// servesim's prediction (JSON null: none).
    #[serde(deserialize_with = "null_as_nan")]
    pub predicted: f64,
    /// Why the row is left out of the statistics, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// Whether a shipped constant was fitted to this row (its error is a fit,
    /// counted apart from the held-out rows).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fitted: bool,
}

impl Row {
    /// A row that counts.
    pub fn new(id: impl Into<String>, metric: &str, measured: f64, predicted: f64) -> Row {
        Row { id: id.into(), metric: metric.into(), measured, predicted, excluded: None, fitted: false }
    }

    /// Relative error (predicted − measured) / measured.
    pub fn error(&self) -> f64 {
        (self.predicted - self.measured) / self.measured
    }
}

/// Median, worst and bias of a set of relative errors.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Rows counted.
    pub n: usize,
    /// Median |error|.
    #[serde(deserialize_with = "null_as_nan")]
    pub median_abs: f64,
    /// Largest |error|.
    #[serde(deserialize_with = "null_as_nan")]
    pub worst_abs: f64,
    /// Median signed error (negative: servesim predicts too little).
    #[serde(deserialize_with = "null_as_nan")]
    pub bias: f64,
}

impl Stats {
    /// Statistics of relative errors.
    pub fn of(errors: &[f64]) -> Stats {
        if errors.is_empty() {
            return Stats::default();
        }
        let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        Stats {
            n: errors.len(),
            median_abs: median(&abs),
            worst_abs: abs.iter().cloned().fold(0.0, f64::max),
            bias: median(errors),
        }
    }
}

/// Reads a number that JSON wrote as null (a NaN) back as NaN.
fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// How a data set relates to the model's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Nothing in the prediction was fitted to this data: a validation.
    HeldOut,
    /// Some constants were fitted to this data: the error is a fit.
    InSample,
}

/// One reference data set and its predictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    /// Short key (`splitwise`, `gpustack-serve`, ...).
    pub key: String,
    /// What was measured, by whom, on what.
    pub title: String,
    /// The file(s) in `validation/data/` and their origin.
    pub source: String,
    /// How servesim predicts it (engine profile, cost model, simulation).
    pub method: String,
    /// Whether constants were fitted to it.
    pub role: Role,
    /// What was fitted to it, or what held-out means here.
    pub note: String,
    /// The rows.
    pub rows: Vec<Row>,
}

impl Dataset {
    /// Statistics of the counted rows, per metric, the rows a constant was
    /// fitted to apart from the held-out ones: `(metric, fitted, stats)`.
    pub fn stats(&self) -> Vec<(String, bool, Stats)> {
        let mut groups: Vec<(String, bool)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.excluded.is_none()) {
            let fitted = r.fitted || self.role == Role::InSample;
            if !groups.iter().any(|(m, f)| *m == r.metric && *f == fitted) {
                groups.push((r.metric.clone(), fitted));
            }
        }
        groups
            .into_iter()
            .map(|(m, f)| {
                let e: Vec<f64> = self
                    .rows
                    .iter()
                    .filter(|r| r.excluded.is_none() && r.metric == m && (r.fitted || self.role == Role::InSample) == f)
                    .map(Row::error)
                    .collect();
                (m, f, Stats::of(&e))
            })
            .collect()
    }
}

/// The `--rows` filters of each `calibrate <input>` run in
/// validation/calibrate.sh (`input` as the script writes it:
/// `validation:gpustack-serve`, `validation/data/splitwise_perf_model_a100.csv`):
/// a row that one run's filters all select ([`crate::measured::selects`]) was fitted to by a
/// shipped engine profile.
pub fn fitted_filters(input: &str) -> Vec<Vec<&'static str>> {
    let script = include_str!("../../validation/calibrate.sh");
    script
        .split("$bin calibrate ")
        .skip(1)
        .filter(|cmd| cmd.split_whitespace().next() == Some(input))
        .map(|cmd| {
            // The run's own lines: up to the next command of the script.
            let cmd = cmd.split("\n$").next().unwrap_or(cmd);
            // Each `--rows` value, quoted or a single word.
            cmd.split("--rows ")
                .skip(1)
                .filter_map(|t| match t.strip_prefix('"') {
                    Some(q) => q.split('"').next(),
                    None => t.split_whitespace().next(),
                })
                .collect()
        })
        .collect()
}

/// Every data set's key, in the order `validate` runs them.
pub const DATASETS: &[&str] = &[
    "kernels-gemm",
    "kernels-attention",
    "kernels-allreduce",
    "kernels-held-out-gpu",
    "kernels-unfitted-gpu",
    "vidur-ops",
    "memory-logs",
    "splitwise",
    "splitwise-power",
    "sarathi",
    "trtllm-offline",
    "gpustack-serve",
    "gpustack-serve-h100",
];

/// Runs the data sets named in `only` (all when empty), in parallel, in the order of [`DATASETS`].
pub fn run(catalog: &Catalog, only: &[String]) -> crate::Result<Vec<Dataset>> {
    for o in only {
        if !DATASETS.contains(&o.as_str()) {
            return Err(crate::ConfigError::new(format!("unknown data set \"{o}\""))
                .hint(format!("known data sets: {}", DATASETS.join(", ")))
                .into());
        }
    }
    let keys: Vec<&str> = DATASETS.iter().copied().filter(|k| only.is_empty() || only.iter().any(|o| o == k)).collect();
    let out: Vec<crate::Result<Dataset>> = keys
        .par_iter()
        .map(|&k| match k {
            "kernels-gemm" => kernels::gemm(catalog),
            "kernels-attention" => kernels::attention(catalog),
            "kernels-allreduce" => kernels::allreduce(catalog),
            "kernels-held-out-gpu" => kernels::held_out_gpu(catalog),
            "kernels-unfitted-gpu" => kernels::unfitted_gpus(catalog),
            "vidur-ops" => steps::vidur(catalog),
            "memory-logs" => memory::logs(catalog),
            "splitwise" => steps::splitwise(catalog),
            "splitwise-power" => power::splitwise_power(catalog),
            "sarathi" => steps::sarathi(catalog),
            "trtllm-offline" => serving::trtllm(catalog),
            key => gpustack::dataset(catalog, crate::measured::gpustack::lab(key).expect("a GPUStack lab")),
        })
        .collect();
    out.into_iter().collect()
}

/// Formats a number with 3 significant digits, no scientific notation for ordinary sizes.
fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The summary table: one line per data set and metric.
pub fn format_summary(sets: &[Dataset]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<22} {:<20} {:>5} {:>9} {:>9} {:>8}  role",
        "data set", "metric", "n", "median|e|", "worst|e|", "bias"
    );
    for d in sets {
        for (m, fitted, s) in d.stats() {
            let _ = writeln!(
                o,
                "{:<22} {:<20} {:>5} {:>8.1}% {:>8.1}% {:>+7.1}%  {}",
                d.key,
                m,
                s.n,
                s.median_abs * 100.0,
                s.worst_abs * 100.0,
                s.bias * 100.0,
                if fitted { "in-sample fit" } else { "held out" }
            );
        }
    }
    o
}

/// One data set in full: what it is, then every row.
pub fn format_rows(d: &Dataset) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "== {}: {}", d.key, d.title);
    let _ = writeln!(o, "   source: {}", d.source);
    let _ = writeln!(o, "   method: {}", d.method);
    let _ = writeln!(o, "   {}", d.note);
    let w = d.rows.iter().map(|r| r.id.len()).max().unwrap_or(10).clamp(10, 70);
    let _ = writeln!(o, "   {:<w$} {:<16} {:>12} {:>12} {:>8}", "row", "metric", "measured", "predicted", "error");
    for r in &d.rows {
        let _ = writeln!(
            o,
            "   {:<w$} {:<16} {:>12} {:>12} {:>+7.1}%{}",
            r.id,
            r.metric,
            sig(r.measured),
            sig(r.predicted),
            r.error() * 100.0,
            match (&r.excluded, r.fitted) {
                (Some(x), _) => format!("  (left out: {x})"),
                (None, true) => "  (fitted)".into(),
                _ => String::new(),
            }
        );
    }
    o
}
