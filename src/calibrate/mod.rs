//! `servesim calibrate`: fits the free parameters of an engine profile to
//! measurements by least squares, reports the error on held-out folds, and
//! writes a profile file scenarios can name.
//!
//! A calibration [`Problem`] is a list of measured points, each predicted
//! either by one engine step of the `kernel` cost model (per-step CSV,
//! Splitwise's profile) or by a statistic of a whole simulation (a
//! `vllm bench serve` result, an offline-throughput table, and the aggregate
//! serving results of [`aggregate`]: GuideLLM, GenAI-Perf, result tables,
//! built by [`runs`]). The residual of a
//! point is ln(predicted / measured); the solver ([`lm`]) minimises their
//! sum of squares over the chosen `[cost]` (and preprocessing) keys within
//! bounds. Before a fit is accepted the Jacobian at the solution must show
//! that the data determine every parameter: a parameter nothing in the data
//! depends on, or one that cannot be told apart from another, is refused
//! with the reason. The k-fold error refits on all folds but one and
//! predicts the one left out.

pub mod aggregate;
pub mod inputs;
pub mod lm;
pub mod runs;

use crate::Catalog;
use crate::config::{CostConfig, Dtype, KvDtype};
use crate::cost::{KernelModel, Layout, StepBatch, StepCostModel};
use crate::error::ConfigError;
use crate::spec::{GpuSpec, LlmSpec};
use rayon::prelude::*;
use serde::Deserialize;

/// A statistic of a simulation that a point measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// Output tokens per second.
    OutputThroughput,
    /// A percentile (0-100) of time to first token, ms.
    Ttft(f64),
    /// A percentile of time per output token, ms.
    Tpot(f64),
    /// A percentile of inter-token latency, ms.
    Itl(f64),
}

impl Stat {
    /// Its value in a summary.
    pub fn of(self, s: &crate::Summary) -> f64 {
        let m = &s.metrics;
        match self {
            Stat::OutputThroughput => m.output_throughput,
            Stat::Ttft(p) => pct(&m.ttft.dist, p),
            Stat::Tpot(p) => pct(&m.tpot.dist, p),
            Stat::Itl(p) => pct(&m.itl.dist, p),
        }
    }

    /// A short name.
    pub fn name(self) -> String {
        match self {
            Stat::OutputThroughput => "output tok/s".into(),
            Stat::Ttft(p) => format!("TTFT p{p}"),
            Stat::Tpot(p) => format!("TPOT p{p}"),
            Stat::Itl(p) => format!("ITL p{p}"),
        }
    }
}

/// A percentile of a summary distribution: the stored ones exactly, others
/// between the stored median and p90 (or the extremes) linearly.
fn pct(d: &crate::metrics::stats::Distribution, p: f64) -> f64 {
    let ps = crate::metrics::stats::PERCENTILES;
    if let Some(i) = ps.iter().position(|&q| q == p) {
        return d.percentiles[i];
    }
    let (x0, y0, x1, y1) =
        if p < 50.0 { (0.0, d.min, 50.0, d.percentiles[0]) } else { (50.0, d.percentiles[0], 90.0, d.percentiles[1]) };
    y0 + (y1 - y0) * (p - x0) / (x1 - x0)
}

/// How one point is predicted.
#[derive(Debug, Clone)]
pub enum How {
    /// One engine step of a set-up.
    Step {
        /// Index into [`Problem::setups`].
        setup: usize,
        /// The step.
        batch: StepBatch,
    },
    /// A statistic of a simulation.
    Sim {
        /// Index into [`Problem::sims`].
        sim: usize,
        /// The statistic.
        stat: Stat,
    },
}

/// One measured quantity.
#[derive(Debug, Clone)]
pub struct Point {
    /// What it is.
    pub label: String,
    /// Points of one group stay together in one fold (a set-up, a result file).
    pub group: String,
    /// The measured value (ms for times, tok/s for throughput).
    pub measured: f64,
    /// How it is predicted.
    pub how: How,
}

/// A model on a GPU, for step-level points.
#[derive(Debug, Clone)]
pub struct StepSetup {
    /// The model.
    pub llm: LlmSpec,
    /// The GPU.
    pub gpu: GpuSpec,
    /// Its layout.
    pub layout: Layout,
    /// Weight format.
    pub dtype: Dtype,
    /// KV format.
    pub kv: KvDtype,
    /// `[cost]` before the fitted keys are applied, as a TOML table.
    pub cost: toml::Table,
}

/// A simulation, for serving-level points.
#[derive(Debug, Clone)]
pub struct Sim {
    /// A name for messages.
    pub name: String,
    /// The scenario, as TOML text.
    pub text: String,
}

impl Sim {
    /// An error of this simulation's set-up, about its run rather than a
    /// file: the scenario text is servesim's own, so the error names the
    /// run (`name`) and the key, never a line of a file that does not exist.
    fn error(&self, e: ConfigError) -> ConfigError {
        let what = e.key.as_ref().map_or(e.message.clone(), |k| format!("`{k}`: {}", e.message));
        ConfigError { message: format!("{}: {what}", self.name), file: None, line: None, column: None, key: None, ..e }
    }
}

/// What to fit and what to fit it to.
#[derive(Debug, Clone)]
pub struct Problem {
    /// Step-level set-ups.
    pub setups: Vec<StepSetup>,
    /// Simulations.
    pub sims: Vec<Sim>,
    /// The points.
    pub points: Vec<Point>,
    /// Points the input could not use, and why.
    pub skipped: Vec<String>,
    /// What the reader assumed that the input does not say (fixed lengths
    /// for a run known by its means, an arrival process approximated).
    pub notes: Vec<String>,
}

/// The parameters `calibrate` may fit and their bounds: (key, lo, hi, scale).
pub const FITTABLE: &[(&str, f64, f64, f64)] = &[
    ("cost.step_overhead_ms", 0.0, 200.0, 1.0),
    ("cost.per_seq_overhead_ms", 0.0, 10.0, 0.05),
    ("cost.per_request_overhead_ms", 0.0, 200.0, 1.0),
    ("cost.gemm_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.attention_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.moe_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.w4_moe_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.cpu_overlap", 0.0, 1.0, 0.1),
    ("cost.eager_launch_us_per_layer", 0.0, 5000.0, 50.0),
    ("cost.comm_overlap", 0.0, 1.0, 0.1),
    ("engine.preprocess_ms", 0.0, 1000.0, 1.0),
    ("engine.preprocess_us_per_token", 0.0, 1000.0, 1.0),
    ("engine.frontend_latency_ms", 0.0, 1000.0, 1.0),
];

/// The bounds of a fittable key.
pub fn param_for(key: &str, init: f64) -> Result<lm::Param, ConfigError> {
    let Some(&(k, lo, hi, scale)) = FITTABLE.iter().find(|(k, ..)| *k == key) else {
        let list = FITTABLE.iter().map(|(k, ..)| *k).collect::<Vec<_>>().join(", ");
        return Err(ConfigError::new(format!("`{key}` cannot be fitted")).hint(format!("fit any of: {list}")));
    };
    Ok(lm::Param { key: k.into(), init: init.clamp(lo, hi), lo, hi, scale })
}

impl Problem {
    /// Predicts the points `idx` with `values` of `params`.
    pub fn predict(
        &self,
        catalog: &Catalog,
        params: &[lm::Param],
        values: &[f64],
        idx: &[usize],
    ) -> crate::Result<Vec<f64>> {
        // Simulations first (each once), in parallel.
        let mut sims: Vec<usize> = idx
            .iter()
            .filter_map(|&i| match self.points[i].how {
                How::Sim { sim, .. } => Some(sim),
                _ => None,
            })
            .collect();
        sims.sort_unstable();
        sims.dedup();
        let sets: Vec<String> = params.iter().zip(values).map(|(p, v)| format!("{}={v}", p.key)).collect();
        let summaries: Vec<crate::Result<(usize, crate::Summary)>> = sims
            .par_iter()
            .map(|&s| {
                let sim = &self.sims[s];
                let cat = std::sync::Arc::new(catalog.clone());
                let loaded =
                    crate::scenario::load_scenario_str_with(&sim.text, std::path::Path::new(&sim.name), &sets, &cat)
                        .map_err(|e| sim.error(e))?;
                let setup = crate::resolve(&loaded.scenario, catalog).map_err(|e| sim.error(e))?;
                Ok((s, crate::run_lean(&setup, loaded.scenario.seed).summary))
            })
            .collect();
        let mut by_sim = std::collections::HashMap::new();
        for r in summaries {
            let (s, sum) = r?;
            by_sim.insert(s, sum);
        }
        let mut models: std::collections::HashMap<usize, KernelModel> = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(idx.len());
        for &i in idx {
            let p = &self.points[i];
            out.push(match &p.how {
                How::Sim { sim, stat } => stat.of(&by_sim[sim]),
                How::Step { setup, batch } => {
                    if !models.contains_key(setup) {
                        let s = &self.setups[*setup];
                        let mut t = s.cost.clone();
                        for (p, v) in params.iter().zip(values) {
                            if let Some(k) = p.key.strip_prefix("cost.") {
                                t.insert(k.into(), toml::Value::Float(*v));
                            }
                        }
                        let mut cost = CostConfig::deserialize(t)
                            .map_err(|e| ConfigError::new(format!("cost settings: {}", e.message())))?;
                        cost.model = crate::config::CostModelKind::Kernel;
                        models.insert(*setup, KernelModel::new(&s.llm, &s.gpu, &s.layout, s.dtype, s.kv, &cost));
                    }
                    models.get_mut(setup).expect("model").step(batch).time * 1e3
                }
            });
        }
        Ok(out)
    }

    /// Moves the points of simulations servesim refuses to set up (a model
    /// that does not fit its GPUs, a context the engine rejects) to
    /// `skipped`, each with its reason, so that one infeasible row does not
    /// stop the fit.
    pub fn skip_infeasible(&mut self, catalog: &Catalog) {
        let cat = std::sync::Arc::new(catalog.clone());
        let refused: Vec<Option<String>> = self
            .sims
            .par_iter()
            .map(|sim| {
                crate::scenario::load_scenario_str_with(&sim.text, std::path::Path::new(&sim.name), &[], &cat)
                    .and_then(|l| crate::resolve(&l.scenario, catalog).map(|_| ()))
                    .err()
                    .map(|e| {
                        let e = sim.error(e);
                        let e = e.message.strip_prefix(&format!("{}: ", sim.name)).unwrap_or(&e.message).to_string();
                        e.lines().next().unwrap_or("").to_string()
                    })
            })
            .collect();
        for (i, why) in refused.iter().enumerate() {
            if let Some(why) = why {
                self.skipped.push(format!("{}: servesim refuses the set-up: {why}", self.sims[i].name));
            }
        }
        self.points.retain(|p| !matches!(p.how, How::Sim { sim, .. } if refused[sim].is_some()));
    }

    /// ln(predicted / measured) of the points `idx`.
    fn residuals(
        &self,
        catalog: &Catalog,
        params: &[lm::Param],
        values: &[f64],
        idx: &[usize],
    ) -> crate::Result<Vec<f64>> {
        let pred = self.predict(catalog, params, values, idx)?;
        Ok(idx
            .iter()
            .zip(pred)
            .map(|(&i, p)| {
                let r = (p / self.points[i].measured).ln();
                if r.is_finite() { r } else { 10.0 }
            })
            .collect())
    }
}

/// Median and worst |relative error| of predictions against measurements.
pub fn errors(pred: &[f64], meas: &[f64]) -> (f64, f64) {
    let e: Vec<f64> = pred.iter().zip(meas).map(|(p, m)| ((p - m) / m).abs()).collect();
    (crate::metrics::stats::median(&e), e.iter().cloned().fold(0.0, f64::max))
}

/// A finished calibration.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The parameters, with their fitted values.
    pub params: Vec<lm::Param>,
    /// Fitted values.
    pub values: Vec<f64>,
    /// Standard errors.
    pub std_err: Vec<f64>,
    /// Predictions of every point at the fit.
    pub fitted: Vec<f64>,
    /// Held-out predictions of every point (from the fit without its fold).
    pub held_out: Vec<f64>,
    /// The folds used.
    pub folds: usize,
    /// Warnings about weakly determined parameters.
    pub warnings: Vec<String>,
}

/// Fits `keys` of the problem (starting from `init`), checks they are
/// determined, and computes the k-fold held-out predictions.
pub fn calibrate(
    problem: &Problem,
    catalog: &Catalog,
    keys: &[(String, f64)],
    folds: usize,
) -> crate::Result<Calibration> {
    if problem.points.is_empty() {
        let why: String = problem.skipped.iter().take(5).map(|s| format!("\n  skipped: {s}")).collect();
        return Err(ConfigError::new(format!(
            "no usable measurements in the input{}{why}",
            if problem.skipped.len() > 5 {
                format!(" ({} rows skipped; the first 5:)", problem.skipped.len())
            } else {
                String::new()
            }
        ))
        .hint("fix the rows named above, or check the file's format (servesim calibrate --help lists the formats)")
        .into());
    }
    let params: Vec<lm::Param> = keys.iter().map(|(k, v)| param_for(k, *v)).collect::<Result<_, _>>()?;
    let all: Vec<usize> = (0..problem.points.len()).collect();
    if problem.points.len() <= params.len() {
        return Err(ConfigError::new(format!(
            "{} measurements cannot determine {} parameters",
            problem.points.len(),
            params.len()
        ))
        .hint("give more measurements, or fit fewer parameters with --fit")
        .into());
    }
    let sol = lm::minimise(&params, 60, |v| problem.residuals(catalog, &params, v, &all))?;
    let id = lm::identifiability(&sol, &params);
    let mut warnings = Vec::new();
    for (k, p) in params.iter().enumerate() {
        if id.sensitivity[k] < 1e-4 {
            return Err(ConfigError::new(format!(
                "the data cannot determine `{}`: no measurement changes when it changes",
                p.key
            ))
            .hint(cannot_hint(&p.key))
            .into());
        }
        for (l, q) in params.iter().enumerate().skip(k + 1) {
            let c = id.correlation[k][l];
            if !c.is_finite() || c.abs() > 0.995 {
                return Err(ConfigError::new(format!(
                    "the data cannot tell `{}` from `{}` (their estimates are {} correlated)",
                    p.key,
                    q.key,
                    if c.is_finite() { format!("{:.3}", c) } else { "perfectly".into() }
                ))
                .hint("add measurements that vary them differently (other batch sizes, prompt lengths), or fit only one of \
                       them (leave the other out of --fit)")
                .into());
            }
        }
        let se = id.std_err[k];
        if se.is_finite() && sol.values[k].abs() > 0.0 && se > sol.values[k].abs() {
            warnings.push(format!(
                "`{}` is weakly determined: {:.4} ± {:.4} (one standard error)",
                p.key, sol.values[k], se
            ));
        }
    }
    let fitted = problem.predict(catalog, &params, &sol.values, &all)?;
    // k-fold: whole groups are held out together.
    let mut groups: Vec<&str> = problem.points.iter().map(|p| p.group.as_str()).collect();
    groups.sort_unstable();
    groups.dedup();
    let k = folds.clamp(2, groups.len().max(2));
    let mut held_out = vec![f64::NAN; problem.points.len()];
    if groups.len() >= 2 {
        for f in 0..k {
            let out: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| groups.iter().position(|g| *g == problem.points[i].group).unwrap_or(0) % k == f)
                .collect();
            if out.is_empty() {
                continue;
            }
            let train: Vec<usize> = all.iter().copied().filter(|i| !out.contains(i)).collect();
            if train.len() <= params.len() {
                continue;
            }
            let start: Vec<lm::Param> =
                params.iter().zip(&sol.values).map(|(p, v)| lm::Param { init: *v, ..p.clone() }).collect();
            let s = lm::minimise(&start, 40, |v| problem.residuals(catalog, &start, v, &train))?;
            let pred = problem.predict(catalog, &start, &s.values, &out)?;
            for (i, p) in out.iter().zip(pred) {
                held_out[*i] = p;
            }
        }
    }
    Ok(Calibration {
        params: params.clone(),
        values: sol.values,
        std_err: id.std_err,
        fitted,
        held_out,
        folds: k,
        warnings,
    })
}

fn cannot_hint(key: &str) -> String {
    match key {
        "cost.per_seq_overhead_ms" => {
            "measure steps at several batch sizes (decode batches of 1 to 64 sequences)".into()
        }
        "cost.per_request_overhead_ms" => "measure steps that admit new requests, or serving runs".into(),
        "engine.preprocess_ms" | "engine.preprocess_us_per_token" | "engine.frontend_latency_ms" => {
            "preprocessing only shows in serving runs (TTFT); step-level data cannot determine it".into()
        }
        _ => format!("give measurements that depend on `{key}`, or leave it out of --fit"),
    }
}

/// The calibration report printed by `servesim calibrate`.
pub fn format_run(r: &CalibrationReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let n = r.points.len();
    let _ = writeln!(o, "calibrating `{}` to {} ({} measurements):", r.base_profile, r.input, n);
    let _ = writeln!(o, "  {:<34} {:>10} {:>10}  ± 1 s.e.", "parameter", "before", "fitted");
    for p in &r.params {
        let _ = writeln!(o, "  {:<34} {:>10.4} {:>10.4}  ± {:.4}", p.key, p.initial, p.value, p.std_err);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    let line = |o: &mut String, what: &str, e: &Option<ErrorStats>| {
        let _ = match e {
            Some(e) => writeln!(
                o,
                "{what:<26} median {:>5.1} %, worst {:>6.1} % over {} points",
                e.median_abs * 100.0,
                e.worst_abs * 100.0,
                e.n
            ),
            None => writeln!(o, "{what:<26} not available"),
        };
    };
    line(&mut o, "error before fitting:", &r.before);
    line(&mut o, "error at the fit:", &r.in_sample);
    line(&mut o, &format!("held-out error ({}-fold):", r.folds), &r.held_out);
    if r.held_out.is_none() {
        let _ =
            writeln!(o, "  (every measurement is in one group: no fold can be held out; the fit error is optimistic)");
    }
    for s in &r.skipped {
        let _ = writeln!(o, "skipped: {s}");
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// An engine profile with the fitted `[cost]` values (and preprocessing
/// keys) in place of the base profile's, each with its source.
pub fn write_profile(
    base: &crate::catalog::EngineProfile,
    name: &str,
    input: &str,
    c: &Calibration,
    meas_held_out: (f64, f64),
) -> crate::catalog::EngineProfile {
    let mut p = base.clone();
    p.name = name.to_string();
    p.description = format!("{} calibrated by servesim calibrate to {input}", base.description);
    for (param, v) in c.params.iter().zip(&c.values) {
        let (section, key) = param.key.split_once('.').unwrap_or(("cost", &param.key));
        let v = toml::Value::Float((v * 1e6).round() / 1e6);
        match section {
            "engine" => {
                p.engine.insert(key.into(), v);
            }
            _ => {
                p.cost.insert(key.into(), v);
            }
        }
        for r in &mut p.rules {
            r.engine.remove(key);
            r.cost.remove(key);
        }
        p.sources.insert(
            param.key.clone(),
            format!(
                "fitted by servesim calibrate to {input} (held-out {}-fold error: median {:.1} %, worst {:.1} %)",
                c.folds,
                meas_held_out.0 * 100.0,
                meas_held_out.1 * 100.0
            ),
        );
    }
    p.rules.retain(|r| !r.engine.is_empty() || !r.cost.is_empty());
    p
}

/// Where `servesim calibrate` reads its measurements.
#[derive(Debug, Clone)]
pub enum Input {
    /// A file in one of the formats of [`inputs`].
    File(std::path::PathBuf),
    /// A data set shipped in `validation/`: `gpustack-serve` (GPUStack's
    /// `vllm bench serve` blocks, each simulated with its engine's profile).
    Validation(String),
}

impl Input {
    /// `validation:<data set>` or a path.
    pub fn parse(s: &str) -> Input {
        match s.strip_prefix("validation:") {
            Some(d) => Input::Validation(d.to_string()),
            None => Input::File(s.into()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Validation(d) => format!("validation:{d}"),
        }
    }
}

/// What `servesim calibrate` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The measurements.
    pub input: Input,
    /// The scenario naming model, GPU, layout and engine (per-step CSV and
    /// the JSON serving results need one).
    pub scenario: Option<crate::scenario::LoadedScenario>,
    /// The engine profile to start from (default: the scenario's preset, or
    /// the engine the measurements name).
    pub preset: Option<String>,
    /// The keys to fit (default: the overheads the input can determine).
    pub fit: Vec<String>,
    /// Folds for the held-out error.
    pub folds: usize,
    /// Keep only points whose label contains one of these (all when empty).
    pub rows: Vec<String>,
    /// Name of the written profile (default `<preset>-calibrated`).
    pub name: Option<String>,
}

/// One fitted parameter in the calibration report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FittedParam {
    /// `section.key`.
    pub key: String,
    /// The value the base profile (or the built-in default) had.
    pub initial: f64,
    /// The fitted value.
    pub value: f64,
    /// One standard error of the fitted value (from the Jacobian at the fit).
    pub std_err: f64,
}

/// One measured point with its predictions.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PointResult {
    /// What it is.
    pub label: String,
    /// Its fold group.
    pub group: String,
    /// The measured value (ms for times, tok/s for throughput).
    pub measured: f64,
    /// Predicted by the base profile, before fitting.
    pub before: f64,
    /// Predicted at the fit.
    pub fitted: f64,
    /// Predicted by the fit without this point's fold (null when no fold could be left out).
    pub held_out: Option<f64>,
}

/// Median and worst |relative error|.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ErrorStats {
    /// Median |predicted − measured| / measured.
    pub median_abs: f64,
    /// Largest |predicted − measured| / measured.
    pub worst_abs: f64,
    /// Points counted.
    pub n: usize,
}

impl ErrorStats {
    fn of(pred: &[f64], meas: &[f64]) -> Option<ErrorStats> {
        let (p, m): (Vec<f64>, Vec<f64>) =
            pred.iter().zip(meas).filter(|(p, _)| p.is_finite()).map(|(p, m)| (*p, *m)).unzip();
        if p.is_empty() {
            return None;
        }
        let (median_abs, worst_abs) = errors(&p, &m);
        Some(ErrorStats { median_abs, worst_abs, n: p.len() })
    }
}

/// The result of `servesim calibrate`, written as calibration.json.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CalibrationReport {
    /// The measurements.
    pub input: String,
    /// The profile the fit started from.
    pub base_profile: String,
    /// The name of the profile written.
    pub profile: String,
    /// The fitted parameters.
    pub params: Vec<FittedParam>,
    /// Error of the base profile, before fitting.
    pub before: Option<ErrorStats>,
    /// In-sample error at the fit.
    pub in_sample: Option<ErrorStats>,
    /// Error on held-out folds (each fold predicted by the fit to the others).
    pub held_out: Option<ErrorStats>,
    /// Folds used.
    pub folds: usize,
    /// Every point.
    pub points: Vec<PointResult>,
    /// Measurements the input held that could not be used, and why.
    pub skipped: Vec<String>,
    /// What the reader assumed that the input does not say (absent when nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Weakly determined parameters.
    pub warnings: Vec<String>,
}

/// The measurements of `opts.input` as a problem, the base profile's name
/// and the keys fitted by default.
fn problem_of(opts: &Options, catalog: &Catalog) -> crate::Result<(Problem, String, Vec<&'static str>)> {
    const SERVING: &[&str] = &["cost.step_overhead_ms", "cost.per_seq_overhead_ms", "cost.per_request_overhead_ms"];
    const STEPS: &[&str] = &["cost.step_overhead_ms", "cost.per_seq_overhead_ms"];
    let scenario_preset = opts.scenario.as_ref().and_then(|s| s.scenario.engine.preset.clone());
    let named = opts.preset.clone().or(scenario_preset);
    let need_preset = |what: &str| -> crate::Result<String> {
        named.clone().ok_or_else(|| {
            ConfigError::new(format!("{what} does not say which engine measured it"))
                .hint("name the engine profile to calibrate with --preset (servesim list engines)")
                .into()
        })
    };
    match &opts.input {
        Input::Validation(d) if crate::measured::gpustack::lab(d).is_some() => {
            let lab = crate::measured::gpustack::lab(d).expect("checked");
            let mut p = inputs::gpustack(lab, &opts.rows);
            let blocks = crate::measured::gpustack::blocks(lab);
            let engines_of_sims: Vec<&str> =
                p.sims.iter().map(|s| blocks.iter().find(|b| b.id == s.name).map_or("", |b| b.preset)).collect();
            let mut engines: Vec<String> = blocks
                .iter()
                .filter(|b| crate::measured::selects(&opts.rows, &b.id))
                .map(|b| b.preset.to_string())
                .collect();
            engines.sort();
            engines.dedup();
            let preset = match (named.clone(), engines.as_slice()) {
                (Some(n), _) => n,
                (None, [one]) => one.clone(),
                (None, _) => {
                    return Err(ConfigError::new(format!(
                        "the rows chosen were measured with {} engines ({})",
                        engines.len(),
                        engines.join(", ")
                    ))
                    .hint(
                        "fit one engine at a time: --rows vLLM, --rows SGLang or --rows TensorRT-LLM (with more \
                           --rows to narrow the blocks)",
                    )
                    .into());
                }
            };
            p.skipped.retain(|s| crate::measured::selects(&opts.rows, s));
            if named.is_some() {
                // Simulate every block with the profile named instead of its engine's.
                for (sim, e) in p.sims.iter_mut().zip(&engines_of_sims) {
                    sim.text = sim.text.replace(&format!("preset = \"{e}\""), &format!("preset = \"{preset}\""));
                }
            }
            Ok((p, preset, SERVING.to_vec()))
        }
        Input::Validation(d) => Err(ConfigError::new(format!("no validation data set `{d}` to calibrate on"))
            .hint(
                "use validation:gpustack-serve (A100) or validation:gpustack-serve-h100, or give the file of \
                   another data set (e.g. \
                   validation/data/trtllm_perf_overview_a100_l40s.csv)",
            )
            .into()),
        Input::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", path.display())).file(path))?;
            let format = inputs::detect(path, &text)?;
            let preset = need_preset("the file")?;
            let mut p = inputs::read(path, catalog, opts.scenario.as_ref(), &preset)?;
            if !opts.rows.is_empty() {
                let keep: Vec<Point> =
                    p.points.iter().filter(|q| crate::measured::selects(&opts.rows, &q.label)).cloned().collect();
                p.points = keep;
            }
            let keys = match format {
                inputs::Format::Steps | inputs::Format::Splitwise | inputs::Format::Offline => STEPS.to_vec(),
                _ => SERVING.to_vec(),
            };
            Ok((p, preset, keys))
        }
    }
}

/// The value `key` has in a profile (base keys), else the built-in default.
fn initial_value(profile: Option<&crate::catalog::EngineProfile>, key: &str) -> f64 {
    let (section, k) = key.split_once('.').unwrap_or(("cost", key));
    let from_profile = profile.and_then(|p| match section {
        "engine" => p.engine.get(k),
        _ => p.cost.get(k),
    });
    let default = match section {
        "engine" => toml::Table::try_from(crate::config::EngineConfig::default()).ok().and_then(|t| t.get(k).cloned()),
        _ => toml::Table::try_from(CostConfig::default()).ok().and_then(|t| t.get(k).cloned()),
    };
    if from_profile.is_none() && k == "w4_moe_efficiency_scale" {
        // Unset, 4-bit experts run at the MoE scale.
        return initial_value(profile, "cost.moe_efficiency_scale");
    }
    from_profile
        .cloned()
        .or(default)
        .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        .unwrap_or(0.0)
}

/// Runs a calibration: reads the measurements, fits, computes the held-out
/// error, and returns the calibration report with the profile to write.
pub fn run(opts: &Options, catalog: &Catalog) -> crate::Result<(CalibrationReport, crate::catalog::EngineProfile)> {
    let (mut problem, preset, default_keys) = problem_of(opts, catalog)?;
    problem.skip_infeasible(catalog);
    let base = catalog.engine(&preset).ok_or_else(|| {
        ConfigError::new(format!("no engine profile `{preset}`"))
            .hint(format!("use one of: {}", catalog.engines.keys().cloned().collect::<Vec<_>>().join(", ")))
    })?;
    let keys: Vec<String> =
        if opts.fit.is_empty() { default_keys.iter().map(|k| k.to_string()).collect() } else { opts.fit.clone() };
    let keys: Vec<(String, f64)> = keys
        .iter()
        .map(|k| {
            let k = if k.contains('.') { k.clone() } else { format!("cost.{k}") };
            let v = initial_value(Some(&base.spec), &k);
            (k, v)
        })
        .collect();
    let params: Vec<lm::Param> = keys.iter().map(|(k, v)| param_for(k, *v)).collect::<Result<_, _>>()?;
    let all: Vec<usize> = (0..problem.points.len()).collect();
    let before = if problem.points.is_empty() {
        Vec::new()
    } else {
        problem.predict(catalog, &params, &params.iter().map(|p| p.init).collect::<Vec<_>>(), &all)?
    };
    let c = calibrate(&problem, catalog, &keys, opts.folds)?;
    let meas: Vec<f64> = problem.points.iter().map(|p| p.measured).collect();
    let held = ErrorStats::of(&c.held_out, &meas);
    let name = opts.name.clone().unwrap_or_else(|| format!("{preset}-calibrated"));
    let input = if opts.rows.is_empty() {
        opts.input.describe()
    } else {
        format!("{} (rows: {})", opts.input.describe(), opts.rows.join("; "))
    };
    let profile = write_profile(
        &base.spec,
        &name,
        &input,
        &c,
        held.map_or((f64::NAN, f64::NAN), |h| (h.median_abs, h.worst_abs)),
    );
    let calibration = CalibrationReport {
        input,
        base_profile: preset,
        profile: name,
        params: c
            .params
            .iter()
            .zip(&c.values)
            .zip(&c.std_err)
            .map(|((p, v), se)| FittedParam { key: p.key.clone(), initial: p.init, value: *v, std_err: *se })
            .collect(),
        before: ErrorStats::of(&before, &meas),
        in_sample: ErrorStats::of(&c.fitted, &meas),
        held_out: held,
        folds: c.folds,
        points: problem
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| PointResult {
                label: p.label.clone(),
                group: p.group.clone(),
                measured: p.measured,
                before: before[i],
                fitted: c.fitted[i],
                held_out: c.held_out[i].is_finite().then_some(c.held_out[i]),
            })
            .collect(),
        skipped: problem.skipped.clone(),
        notes: problem.notes.clone(),
        warnings: c.warnings.clone(),
    };
    Ok((calibration, profile))
}

/// A profile as a catalogue file, with a header saying how it was made.
pub fn profile_toml(p: &crate::catalog::EngineProfile, calibration: &CalibrationReport) -> String {
    let body = toml::to_string(p).unwrap_or_default();
    format!(
        "# {} -- written by `servesim calibrate` from the profile `{}`, fitted to {}.\n# Held-out error: {}.\n\
         # Put this file in <dir>/engine/ and run with --models <dir> and engine.preset = \"{}\".\n{body}",
        calibration.profile,
        calibration.base_profile,
        calibration.input,
        calibration.held_out.map_or("not available".into(), |h| format!(
            "median {:.1} %, worst {:.1} % over {} points ({}-fold)",
            h.median_abs * 100.0,
            h.worst_abs * 100.0,
            h.n,
            calibration.folds
        )),
        calibration.profile
    )
}
