//! `servesim calibrate`: fits the free parameters of an engine profile to
//! measurements by least squares, reports the error on held-out folds, and
//! writes a profile file scenarios can name.
//!
//! A calibration [`Problem`] is a list of measured points, each predicted
//! either by one engine step of the `kernel` cost model (per-step CSV,
//! Splitwise's profile) or by a statistic of a whole simulation (a
//! `vllm bench serve` result, an offline-throughput table). The residual of a
//! point is ln(predicted / measured); the solver ([`lm`]) minimises their
//! sum of squares over the chosen `[cost]` (and preprocessing) keys within
//! bounds. Before a fit is accepted the Jacobian at the solution must show
//! that the data determine every parameter: a parameter nothing in the data
//! depends on, or one that cannot be told apart from another, is refused
//! with the reason. The k-fold error refits on all folds but one and
//! predicts the one left out.

pub mod inputs;
pub mod lm;

use crate::Catalog;
use crate::catalog::{GpuSpec, LlmSpec};
use crate::config::{CostConfig, Dtype, KvDtype};
use crate::cost::{KernelModel, Layout, StepBatch, StepCostModel};
use crate::error::ConfigError;
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
    let (x0, y0, x1, y1) = if p < 50.0 { (0.0, d.min, 50.0, d.percentiles[0]) } else { (50.0, d.percentiles[0], 90.0, d.percentiles[1]) };
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
}

/// The parameters `calibrate` may fit and their bounds: (key, lo, hi, scale).
pub const FITTABLE: &[(&str, f64, f64, f64)] = &[
    ("cost.step_overhead_ms", 0.0, 200.0, 1.0),
    ("cost.per_seq_overhead_ms", 0.0, 10.0, 0.05),
    ("cost.per_request_overhead_ms", 0.0, 200.0, 1.0),
    ("cost.gemm_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.attention_efficiency_scale", 0.2, 2.0, 0.1),
    ("cost.cpu_overlap", 0.0, 1.0, 0.1),
    ("cost.comm_overlap", 0.0, 1.0, 0.1),
    ("engine.preprocess_ms", 0.0, 1000.0, 1.0),
    ("engine.preprocess_us_per_token", 0.0, 1000.0, 1.0),
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
    pub fn predict(&self, catalog: &Catalog, params: &[lm::Param], values: &[f64], idx: &[usize]) -> crate::Result<Vec<f64>> {
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
                    crate::config::load_scenario_str_with(&sim.text, std::path::Path::new(&sim.name), &sets, &cat)?;
                let setup = crate::resolve(&loaded.scenario, catalog)?;
                Ok((s, crate::run_setup(&setup, loaded.scenario.seed).summary))
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

    /// ln(predicted / measured) of the points `idx`.
    fn residuals(&self, catalog: &Catalog, params: &[lm::Param], values: &[f64], idx: &[usize]) -> crate::Result<Vec<f64>> {
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
    (crate::validate::median(&e), e.iter().cloned().fold(0.0, f64::max))
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
        return Err(ConfigError::new("no usable measurements in the input")
            .hint("check the file's format (servesim calibrate --help lists the formats)")
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
                .hint("add measurements that vary them differently (other batch sizes, prompt lengths), or fit one of \
                       them and keep the other with --fix")
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
            let out: Vec<usize> =
                all.iter().copied().filter(|&i| groups.iter().position(|g| *g == problem.points[i].group).unwrap_or(0) % k == f).collect();
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
        "cost.per_seq_overhead_ms" => "measure steps at several batch sizes (decode batches of 1 to 64 sequences)".into(),
        "cost.per_request_overhead_ms" => "measure steps that admit new requests, or serving runs".into(),
        "engine.preprocess_ms" | "engine.preprocess_us_per_token" => {
            "preprocessing only shows in serving runs (TTFT); step-level data cannot determine it".into()
        }
        _ => format!("give measurements that depend on `{key}`, or leave it out of --fit"),
    }
}

/// The report printed by `servesim calibrate`.
pub fn format_report(problem: &Problem, c: &Calibration) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let meas: Vec<f64> = problem.points.iter().map(|p| p.measured).collect();
    let _ = writeln!(o, "fitted {} parameter(s) to {} measurements:", c.params.len(), meas.len());
    for ((p, v), se) in c.params.iter().zip(&c.values).zip(&c.std_err) {
        let _ = writeln!(o, "  {:<34} {:>10.4}  ± {:.4}", p.key, v, se);
    }
    for w in &c.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    let (m, w) = errors(&c.fitted, &meas);
    let _ = writeln!(o, "in-sample error:         median {:.1} %, worst {:.1} %", m * 100.0, w * 100.0);
    let (hp, hm): (Vec<f64>, Vec<f64>) =
        c.held_out.iter().zip(&meas).filter(|(p, _)| p.is_finite()).map(|(p, m)| (*p, *m)).unzip();
    if hp.is_empty() {
        let _ = writeln!(o, "held-out error:          not available (one group of measurements only)");
    } else {
        let (m, w) = errors(&hp, &hm);
        let _ = writeln!(
            o,
            "held-out error ({}-fold): median {:.1} %, worst {:.1} % over {} points",
            c.folds,
            m * 100.0,
            w * 100.0,
            hp.len()
        );
    }
    for s in &problem.skipped {
        let _ = writeln!(o, "skipped: {s}");
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
