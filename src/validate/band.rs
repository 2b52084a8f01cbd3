//! The committed snapshot of `servesim validate` (`validation/expected.json`)
//! and the error bands derived from it: how far a prediction of an engine
//! profile on a GPU has been from measurements it was not fitted to.

use super::{Dataset, Role, Row, Stats};
use serde::{Deserialize, Serialize};

/// Data sets with more rows than this keep only their statistics in the snapshot.
const MAX_ROWS: usize = 2000;

/// One data set in the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotSet {
    /// Its key.
    pub key: String,
    /// Whether constants were fitted to it as a whole.
    pub role: Role,
    /// `(metric, fitted, statistics)` as `validate` prints them.
    pub stats: Vec<(String, bool, Stats)>,
    /// Every row, for data sets of at most 2,000 rows (empty otherwise).
    pub rows: Vec<Row>,
}

/// The snapshot of a validation run.
pub fn snapshot(sets: &[Dataset]) -> Vec<SnapshotSet> {
    sets.iter()
        .map(|d| SnapshotSet {
            key: d.key.clone(),
            role: d.role,
            stats: d.stats(),
            rows: if d.rows.len() <= MAX_ROWS { d.rows.clone() } else { Vec::new() },
        })
        .collect()
}

/// The committed snapshot.
pub fn expected() -> Vec<SnapshotSet> {
    serde_json::from_str(include_str!("../../validation/expected.json")).expect("validation/expected.json parses")
}

/// The validated error of one engine profile on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBand {
    /// The engine profile (`engine.preset`), or `legacy`.
    pub profile: String,
    /// The GPU the rows were measured on.
    pub gpu: String,
    /// Whether that is the scenario's GPU (false: no measurement on it; the band is from another GPU).
    pub same_gpu: bool,
    /// Held-out rows counted (0: nothing validates this profile).
    pub n: usize,
    /// Median |predicted − measured| / measured over them.
    pub median_abs: f64,
    /// Largest |predicted − measured| / measured over them.
    pub worst_abs: f64,
    /// Median signed error (negative: servesim predicts too little).
    pub bias: f64,
    /// Where the rows come from.
    pub source: String,
}

impl ErrorBand {
    /// One line for a report.
    pub fn describe(&self) -> String {
        if self.n == 0 {
            return format!(
                "model error: not validated ({}); treat the result as uncertain by tens of percent",
                self.source
            );
        }
        format!(
            "model error ({} profile{}): median ±{:.0}%, worst ±{:.0}%, bias {:+.0}% over {} held-out measurements ({})",
            self.profile,
            if self.same_gpu {
                format!(" on {}", self.gpu)
            } else {
                format!(", NOT validated on this GPU; on {}", self.gpu)
            },
            self.median_abs * 100.0,
            self.worst_abs * 100.0,
            self.bias * 100.0,
            self.n,
            self.source
        )
    }
}

/// Which snapshot rows validate a profile: (data set, row filter, GPU of a row).
/// A data set's key, which of its rows count, and the GPU a row was measured on.
type RowSource = (&'static str, fn(&Row) -> bool, fn(&Row) -> &'static str);

fn rows_of(profile: &str) -> Vec<RowSource> {
    fn a100(_: &Row) -> &'static str {
        "a100-80gb"
    }
    fn any(_: &Row) -> bool {
        true
    }
    fn trt_gpu(r: &Row) -> &'static str {
        if r.id.contains("L40S") { "l40s" } else { "a100-80gb" }
    }
    match profile {
        "vllm-v1" => vec![("gpustack-serve", |r| r.metric.starts_with("vLLM "), a100)],
        "sglang" => vec![("gpustack-serve", |r| r.metric.starts_with("SGLang "), a100)],
        "trtllm" => {
            vec![("gpustack-serve", |r| r.metric.starts_with("TRT-LLM "), a100), ("trtllm-offline", any, trt_gpu)]
        }
        "vllm-v0" => vec![("splitwise", any, a100)],
        "sarathi" => vec![("sarathi", any, |_| "a100-80gb-pcie")],
        _ => Vec::new(),
    }
}

/// The validated error band of `profile` (None: the legacy cost model) on
/// the GPU `gpu` (a catalogue key), from the committed snapshot: the
/// held-out rows of that profile on that GPU, or else on every GPU it was
/// measured on (flagged as not this GPU).
pub fn band(profile: Option<&str>, gpu: &str) -> ErrorBand {
    let name = profile.unwrap_or("legacy").to_string();
    let snap = expected();
    let mut here = Vec::new();
    let mut all = Vec::new();
    let mut sources = Vec::new();
    let mut gpus: Vec<&str> = Vec::new();
    for (set, keep, gpu_of) in rows_of(&name) {
        let Some(s) = snap.iter().find(|s| s.key == set) else { continue };
        for r in s.rows.iter().filter(|r| r.excluded.is_none() && !r.fitted && keep(r) && r.predicted.is_finite()) {
            all.push(r.error());
            if !gpus.contains(&gpu_of(r)) {
                gpus.push(gpu_of(r));
            }
            if gpu_of(r) == gpu {
                here.push(r.error());
            }
        }
        sources.push(set);
    }
    let same_gpu = !here.is_empty();
    let errors = if same_gpu { here } else { all };
    let st = Stats::of(&errors);
    let source = if sources.is_empty() {
        match profile {
            None => "the legacy cost model has no validation data: name an engine preset".into(),
            Some(p) => format!("no shipped data set measures the `{p}` profile"),
        }
    } else {
        format!("servesim validate: {}", sources.join(", "))
    };
    ErrorBand {
        profile: name,
        gpu: if same_gpu { gpu.to_string() } else { gpus.join(", ") },
        same_gpu,
        n: st.n,
        median_abs: st.median_abs,
        worst_abs: st.worst_abs,
        bias: st.bias,
        source,
    }
}
