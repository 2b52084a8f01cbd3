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
pub fn expected() -> &'static [SnapshotSet] {
    static SNAPSHOT: std::sync::OnceLock<Vec<SnapshotSet>> = std::sync::OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        serde_json::from_str(include_str!("../../validation/expected.json")).expect("validation/expected.json parses")
    })
}

/// The serving quantity a band is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BandMetric {
    /// Median time to first token.
    Ttft,
    /// Median time per output token.
    Tpot,
    /// Output tokens per second (and so the capacity in requests per second).
    Throughput,
}

impl BandMetric {
    /// Every one, in report order.
    pub const ALL: [BandMetric; 3] = [BandMetric::Ttft, BandMetric::Tpot, BandMetric::Throughput];

    /// The text the snapshot's serving metrics end with.
    fn suffix(self) -> &'static str {
        match self {
            BandMetric::Ttft => "TTFT p50 ms",
            BandMetric::Tpot => "TPOT p50 ms",
            BandMetric::Throughput => "output tok/s",
        }
    }

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            BandMetric::Ttft => "TTFT",
            BandMetric::Tpot => "TPOT",
            BandMetric::Throughput => "throughput",
        }
    }
}

/// Share of held-out measurements a printed band is to cover.
pub const COVERAGE: f64 = 0.8;

/// The validated error of one engine profile on one GPU class, for one serving metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBand {
    /// The engine profile (`engine.preset`), or `legacy`.
    pub profile: String,
    /// The metric.
    pub metric: BandMetric,
    /// The GPU the rows were measured on (the scenario's, or the nearest validated one).
    pub gpu: String,
    /// Whether that is the scenario's GPU (false: no serving measurement on it; the band is the nearest class's).
    pub same_gpu: bool,
    /// When not the same GPU: how far the scenario's GPU is from the one measured
    /// (ratios of memory bandwidth and BF16 peak), in words.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub distance: String,
    /// Held-out rows counted (0: nothing validates this profile).
    pub n: usize,
    /// The band printed: the |error| that 80% of the held-out rows stay within.
    pub band: f64,
    /// Median |predicted − measured| / measured over them.
    pub median_abs: f64,
    /// Largest |predicted − measured| / measured over them.
    pub worst_abs: f64,
    /// Median signed error (negative: servesim predicts too little).
    pub bias: f64,
    /// Share of the rows inside the band computed without their own model's
    /// rows (leave one model page out): how well the band covers what it did not see.
    pub coverage: f64,
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
        let place = if self.same_gpu {
            format!("on {}", self.gpu)
        } else {
            format!("NOT validated on this GPU; nearest validated class {} ({})", self.gpu, self.distance)
        };
        format!(
            "model error ({} profile, {}, {place}): ±{:.0}% covers {:.0}% of {} held-out measurements (median ±{:.0}%, worst ±{:.0}%, bias {:+.0}%; {:.0}% covered leaving each model out) ({})",
            self.profile,
            self.metric.name(),
            self.band * 100.0,
            COVERAGE * 100.0,
            self.n,
            self.median_abs * 100.0,
            self.worst_abs * 100.0,
            self.bias * 100.0,
            self.coverage * 100.0,
            self.source
        )
    }
}

/// The engine label of a profile in the serving data sets' metric names.
fn engine_label(profile: &str) -> Option<&'static str> {
    match profile {
        "vllm-v1" => Some("vLLM"),
        "sglang" => Some("SGLang"),
        "trtllm" => Some("TRT-LLM"),
        _ => None,
    }
}

/// The `q`-quantile of |errors| (nearest rank, rounding up).
fn quantile_abs(errors: &[f64], q: f64) -> f64 {
    let mut a: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    if a.is_empty() {
        return f64::NAN;
    }
    let k = ((q * a.len() as f64).ceil() as usize).clamp(1, a.len());
    a[k - 1]
}

/// The model page of a serving row id (`qwen3-14b #3 SGLang SG1000` → `qwen3-14b`).
fn page(id: &str) -> &str {
    id.split(" #").next().unwrap_or(id).trim_end_matches("-latency")
}

/// (lab GPU, errors with their model page) of the held-out serving rows of `profile` for `metric`.
fn serving_rows(snap: &[SnapshotSet], profile: &str, metric: BandMetric) -> Vec<(&'static str, Vec<(String, f64)>)> {
    let Some(label) = engine_label(profile) else { return Vec::new() };
    let name = format!("{label} {}", metric.suffix());
    crate::measured::gpustack::LABS
        .iter()
        .map(|lab| {
            let rows = snap
                .iter()
                .find(|s| s.key == lab.key)
                .map(|s| {
                    s.rows
                        .iter()
                        .filter(|r| r.excluded.is_none() && !r.fitted && r.metric == name && r.predicted.is_finite())
                        .map(|r| (page(&r.id).to_string(), r.error()))
                        .collect()
                })
                .unwrap_or_default();
            (lab.gpu, rows)
        })
        .filter(|(_, rows): &(_, Vec<_>)| !rows.is_empty())
        .collect()
}

/// How far GPU `a` is from GPU `b`: |ln| of the bandwidth ratio plus |ln| of the BF16 peak ratio.
fn gpu_distance(catalog: Option<&crate::Catalog>, a: &str, b: &str) -> (f64, String) {
    let spec = |k: &str| catalog.and_then(|c| c.gpu(k)).map(|e| e.spec.clone());
    match (spec(a), spec(b)) {
        (Some(x), Some(y)) => {
            let bw = x.memory_bandwidth_gbps / y.memory_bandwidth_gbps;
            let fl = x.bf16_tflops / y.bf16_tflops;
            (bw.ln().abs() + fl.ln().abs(), format!("{bw:.2}× its memory bandwidth, {fl:.2}× its BF16 peak"))
        }
        _ => (f64::INFINITY, "not in the catalogue".into()),
    }
}

/// The validated serving error band of `profile` (None: the legacy cost
/// model) on the GPU `gpu` (a catalogue key) for `metric`, from the
/// committed snapshot: the held-out GPUStack rows of that profile on that
/// GPU, or else on the measured GPU nearest to it (flagged, with how far it is).
pub fn band(profile: Option<&str>, gpu: &str, metric: BandMetric, catalog: Option<&crate::Catalog>) -> ErrorBand {
    band_in(expected(), profile, gpu, metric, catalog)
}

/// [`band`] from the snapshot `snap` instead of the committed one.
pub fn band_in(
    snap: &[SnapshotSet],
    profile: Option<&str>,
    gpu: &str,
    metric: BandMetric,
    catalog: Option<&crate::Catalog>,
) -> ErrorBand {
    let name = profile.unwrap_or("legacy").to_string();
    let groups = serving_rows(snap, &name, metric);
    let chosen = groups.iter().find(|(g, _)| *g == gpu).or_else(|| {
        groups.iter().min_by(|a, b| gpu_distance(catalog, gpu, a.0).0.total_cmp(&gpu_distance(catalog, gpu, b.0).0))
    });
    let Some((measured_on, rows)) = chosen else {
        return ErrorBand {
            profile: name,
            metric,
            gpu: gpu.to_string(),
            same_gpu: false,
            distance: String::new(),
            n: 0,
            band: f64::NAN,
            median_abs: f64::NAN,
            worst_abs: f64::NAN,
            bias: f64::NAN,
            coverage: f64::NAN,
            source: match profile {
                None => "the legacy cost model has no validation data: name an engine preset".into(),
                Some(p) => format!("no shipped serving data set measures the `{p}` profile"),
            },
        };
    };
    let errors: Vec<f64> = rows.iter().map(|r| r.1).collect();
    let st = Stats::of(&errors);
    let inside = rows
        .iter()
        .filter(|(p, e)| {
            let others: Vec<f64> = rows.iter().filter(|r| &r.0 != p).map(|r| r.1).collect();
            !others.is_empty() && e.abs() <= quantile_abs(&others, COVERAGE)
        })
        .count();
    let same_gpu = *measured_on == gpu;
    let lab = crate::measured::gpustack::LABS.iter().find(|l| l.gpu == *measured_on).map_or("", |l| l.key);
    ErrorBand {
        profile: name,
        metric,
        gpu: measured_on.to_string(),
        same_gpu,
        distance: if same_gpu { String::new() } else { gpu_distance(catalog, gpu, measured_on).1 },
        n: st.n,
        band: quantile_abs(&errors, COVERAGE),
        median_abs: st.median_abs,
        worst_abs: st.worst_abs,
        bias: st.bias,
        coverage: inside as f64 / rows.len() as f64,
        source: format!("servesim validate: {lab}"),
    }
}

/// Every band a snapshot supports: each serving profile × measured GPU × metric.
pub fn table(snap: &[SnapshotSet]) -> Vec<ErrorBand> {
    let mut out = Vec::new();
    for profile in ["vllm-v1", "sglang", "trtllm"] {
        for lab in crate::measured::gpustack::LABS {
            for m in BandMetric::ALL {
                let b = band_in(snap, Some(profile), lab.gpu, m, None);
                if b.same_gpu && b.n > 0 {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// The bands as a table: engine × GPU × metric, with their coverage.
pub fn format_table(bands: &[ErrorBand]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<8} {:<10} {:<10} {:>4} {:>9} {:>9} {:>8} {:>7} {:>9}",
        "profile", "GPU", "metric", "n", "median|e|", "worst|e|", "bias", "band", "coverage"
    );
    for b in bands {
        let _ = writeln!(
            o,
            "{:<8} {:<10} {:<10} {:>4} {:>8.1}% {:>8.1}% {:>+7.1}% {:>6.0}% {:>8.0}%",
            b.profile,
            b.gpu,
            b.metric.name(),
            b.n,
            b.median_abs * 100.0,
            b.worst_abs * 100.0,
            b.bias * 100.0,
            b.band * 100.0,
            b.coverage * 100.0
        );
    }
    o
}

/// The line every `run`, `sweep`, `capacity` and `plan` prints first: which
/// engine profile (and version) and cost model the scenario runs, and the
/// validated serving error that applies to its GPU class, or that none does.
pub fn engine_line(scenario: &crate::config::Scenario, catalog: &crate::Catalog) -> String {
    let gpu = catalog.gpu(&scenario.hardware.gpu).map_or(scenario.hardware.gpu.clone(), |e| e.key.clone());
    let model = format!("{:?}", scenario.cost.model).to_lowercase();
    let preset = scenario.engine.preset.as_deref().unwrap_or("legacy");
    if preset == "legacy" {
        return format!(
            "Engine: legacy (servesim's teaching engine), {model} cost model: NOT validated against any \
             measurement (the most optimistic profile); drop engine.preset for the validated default \
             \"{}\"",
            crate::scenario::DEFAULT_PRESET
        );
    }
    let what =
        catalog.engine(preset).map_or(preset.to_string(), |e| format!("{preset} ({} {})", e.spec.name, e.spec.version));
    let bands: Vec<ErrorBand> = BandMetric::ALL.iter().map(|&m| band(Some(preset), &gpu, m, Some(catalog))).collect();
    let Some(first) = bands.iter().find(|b| b.n > 0) else {
        return format!(
            "Engine: {what}, {model} cost model; no serving measurement validates this profile (docs/fidelity.md)"
        );
    };
    let list: Vec<String> =
        bands.iter().filter(|b| b.n > 0).map(|b| format!("{} ±{:.0}%", b.metric.name(), b.band * 100.0)).collect();
    let place = if first.same_gpu {
        format!("validated on {gpu}")
    } else {
        // A GPU without measured kernel tables runs on generic kernel values too.
        let generic = catalog.gpu(&scenario.hardware.gpu).is_some_and(|e| e.spec.kernels.is_none())
            && scenario.cost.model == crate::config::CostModelKind::Kernel;
        format!(
            "NOT validated on {gpu}{}; nearest validated class {} ({})",
            if generic { " (no measured kernel tables: generic kernel values)" } else { "" },
            first.gpu,
            first.distance
        )
    };
    format!(
        "Engine: {what}, {model} cost model; {place}: {} (80% of held-out serving runs; docs/fidelity.md)",
        list.join(", ")
    )
}
