//! Capacity planning: the highest rate one configuration sustains under its
//! SLOs (`capacity`), and the cheapest configurations that carry a target
//! load (`plan`).
//!
//! A configuration *meets* the SLOs at a load when the run's stability
//! verdict is "stable" (an overloaded, shedding or inconclusive run does not
//! meet them: when unsure, the search errs low), at most 1% of measured
//! requests fail, and either (with
//! `slo.min_attainment`) that fraction of requests meets every objective, or
//! (default) the `slo.percentile` (default p99) of TTFT, TPOT and E2E are
//! within their objectives. Both searches assume this is monotone — in rate
//! (more load never helps) and in replicas (more replicas never hurt) — and
//! bisect instead of scanning.

use crate::config::{Scenario, SloConfig};
use crate::error::{ConfigError, Result};
use crate::metrics::Summary;
use crate::scenario::LoadedScenario;

use crate::{Catalog, resolve, run_lean};
use rayon::prelude::*;
use serde::Serialize;

mod capacity;
mod check;
mod format;
mod model_error;
pub use capacity::{CONFIRM_FACTOR, Capacity, ConfirmStep, Confirmation, WIDE_INTERVAL, capacity, format_capacity};
pub use check::PlanCheck;
pub use format::format_plan;
use model_error::pessimistic_replicas;

/// How a run fares against the SLOs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Every condition holds.
    pub meets: bool,
    /// The objective closest to (or furthest past) its limit, e.g. "p99 TTFT".
    pub binding: String,
    /// Observed value of the binding objective (ms, or attainment fraction).
    pub value: f64,
    /// Its limit.
    pub limit: f64,
    /// Spare room on the binding objective: 1 − value/limit (for attainment,
    /// the fraction of allowed misses not used). Negative when violated.
    pub headroom: f64,
    /// Why it fails, when it does.
    pub reason: String,
}

impl Verdict {
    /// Why the run fails, or its binding objective and headroom when it meets the SLOs.
    pub fn outcome(&self) -> String {
        if self.meets {
            format!("{} {:.0}% headroom", self.binding, self.headroom * 100.0)
        } else {
            self.reason.clone()
        }
    }
}

/// Judges one run's summary against the scenario's SLOs: with request
/// classes, each class against its own objectives (the binding one is the
/// class closest to, or furthest past, its limit); `slo` gives the rule
/// (percentile or minimum attainment).
pub fn judge(s: &Summary, slo: &SloConfig) -> Verdict {
    let mut v = Verdict {
        meets: true,
        binding: String::new(),
        value: f64::NAN,
        limit: f64::NAN,
        headroom: f64::INFINITY,
        reason: String::new(),
    };
    match &s.classes {
        Some(classes) => {
            for (name, c) in &classes.0 {
                if let Some(obj) = &c.metrics.slo {
                    let objectives =
                        SloConfig { ttft_ms: obj.ttft_ms, tpot_ms: obj.tpot_ms, e2e_ms: obj.e2e_ms, ..slo.clone() };
                    judge_group(&c.metrics, &objectives, &format!("{name}: "), &mut v);
                }
            }
        }
        None => judge_group(&s.metrics, slo, "", &mut v),
    }
    let failed = s.failed_fraction();
    if failed > crate::metrics::stability::SHED_LIMIT {
        v.meets = false;
        v.reason = format!("{:.1}% of requests failed", failed * 100.0);
    }
    match s.stability.verdict.as_str() {
        "overloaded" | "shedding" | "inconclusive" => {
            v.meets = false;
            v.reason = s.stability.headline();
        }
        _ => {}
    }
    v
}

/// Judges one group of requests (all, or a class) against `slo`, keeping in
/// `v` the objective with the least headroom; `label` prefixes its name.
fn judge_group(m: &crate::metrics::RequestMetrics, slo: &SloConfig, label: &str, v: &mut Verdict) {
    let mut consider = |binding: String, value: f64, limit: f64, room: f64, fails: Option<String>| {
        if room < v.headroom || v.binding.is_empty() {
            v.headroom = room;
            v.binding = binding;
            v.value = value;
            v.limit = limit;
        }
        if let Some(why) = fails {
            v.meets = false;
            v.reason = why;
        }
    };
    if let Some(a) = slo.min_attainment {
        let got = m.slo.as_ref().map_or(0.0, |x| x.attainment);
        let room = if a < 1.0 {
            1.0 - (1.0 - got) / (1.0 - a)
        } else if got >= 1.0 {
            0.0
        } else {
            -1.0
        };
        let fails = (got < a).then(|| format!("{label}attainment {:.2}% < {:.2}%", got * 100.0, a * 100.0));
        consider(format!("{label}{:.1}% attainment", a * 100.0), got, a, room, fails);
    } else {
        let p = slo.percentile.unwrap_or(99.0);
        let idx = crate::metrics::stats::PERCENTILES.iter().position(|&q| q == p);
        for (name, limit, metric) in
            [("TTFT", slo.ttft_ms, &m.ttft), ("TPOT", slo.tpot_ms, &m.tpot), ("E2E", slo.e2e_ms, &m.e2el)]
        {
            let Some(limit) = limit else { continue };
            // A class with no request of this kind (e.g. TPOT of a prefill-only class) has nothing to judge.
            if metric.dist.count == 0 && m.completed > 0 {
                continue;
            }
            let value = idx.map_or(f64::NAN, |i| metric.dist.percentiles[i]);
            let fails = (value.is_nan() || value > limit)
                .then(|| format!("{label}p{p} {name} {} ms > {limit} ms", above(value, limit)));
            consider(format!("{label}p{p} {name}"), value, limit, 1.0 - value / limit, fails);
        }
    }
}

/// `value` printed with as few decimals (up to 3) as show it on its side of
/// `limit`: 50.4 beside 50 prints "50.4", so "50 ms > 50 ms" cannot appear.
pub fn above(value: f64, limit: f64) -> String {
    for d in 0..=3 {
        let shown = format!("{value:.d$}");
        let back: f64 = shown.parse().unwrap_or(value);
        if (back > limit) == (value > limit) && (back < limit) == (value < limit) {
            return shown;
        }
    }
    format!("{value:.3}")
}

pub(crate) fn slo_of(s: &Scenario) -> Result<SloConfig> {
    if s.slo.is_none() && s.workload.classes.iter().any(|c| c.slo.is_some()) {
        // Classes carry the objectives; the rule is the default (p99).
        return Ok(SloConfig::default());
    }
    s.slo.clone().ok_or_else(|| {
        ConfigError::new("capacity planning needs objectives")
            .key("slo")
            .hint("add an [slo] table, e.g. ttft_ms = 500 and tpot_ms = 50")
            .into()
    })
}

/// Runs `loaded` with overrides and a seed; returns the summary.
fn simulate(loaded: &LoadedScenario, catalog: &Catalog, over: &[(String, toml::Value)], seed: u64) -> Result<Summary> {
    let s = loaded.derive(over, "capacity search")?;
    let setup = resolve(&s, catalog).map_err(|e| loaded.locate(e))?;
    let r = run_lean(&setup, seed);
    r.check_complete()?;
    Ok(r.summary)
}

/// Fewer requests than this beyond the judged percentile make it unreliable.
pub const MIN_TAIL_REQUESTS: f64 = 10.0;

/// The `--min-requests` that puts [`MIN_TAIL_REQUESTS`] requests beyond
/// percentile `p` in each run, with a fifth more for the randomness of the
/// arrival count and for failed requests.
pub fn min_requests_for(p: f64) -> u64 {
    (1.2 * MIN_TAIL_REQUESTS / (1.0 - p / 100.0).max(1e-6)).ceil() as u64
}

/// What to do about a percentile judged on too few requests.
pub fn lengthen_advice(p: f64) -> String {
    format!(
        "rerun with --min-requests {} (or more) for {MIN_TAIL_REQUESTS:.0} requests beyond p{p} in every run",
        min_requests_for(p)
    )
}

/// The knob `capacity` and `plan` turn to set the load.
pub struct LoadKnob {
    /// What is varied: `workload.rate` (req/s) or `workload.trace.speedup`.
    pub key: &'static str,
    /// The scenario's own value.
    pub start: f64,
    /// Mean offered req/s per unit of the knob.
    pub rate_per_unit: Option<f64>,
    /// Scenario overrides that set the knob to a value.
    overrides: Box<dyn Fn(f64) -> Vec<(String, toml::Value)> + Send + Sync>,
}

impl LoadKnob {
    /// The overrides that set the knob to `x`.
    pub fn set(&self, x: f64) -> Vec<(String, toml::Value)> {
        (self.overrides)(x)
    }
}

/// How to scale the load of a scenario: the rate of its common arrival
/// process (a diurnal amplitude or a rate schedule scaled with it, keeping
/// its shape), or the speed-up of a replayed trace.
pub fn load_knob(loaded: &LoadedScenario, catalog: &Catalog) -> Result<LoadKnob> {
    use toml::Value;
    let w = &loaded.scenario.workload;
    if let Some(t) = &w.trace {
        if t.target_rate.is_some() {
            return Err(ConfigError::new(
                "capacity and plan scale a trace by its speedup, which target_rate overrides",
            )
            .key("workload.trace.target_rate")
            .hint("remove target_rate (the result is reported as a speed-up and the rate it gives)")
            .into());
        }
        let base = loaded.derive(&[("workload.trace.speedup".into(), Value::Float(1.0))], "capacity search")?;
        let setup = resolve(&base, catalog).map_err(|e| loaded.locate(e))?;
        return Ok(LoadKnob {
            key: "workload.trace.speedup",
            start: t.speedup.unwrap_or(1.0),
            rate_per_unit: setup.workload.offered_rate,
            overrides: Box::new(|x| vec![("workload.trace.speedup".into(), Value::Float(x))]),
        });
    }
    let unusable = || -> crate::Error {
        ConfigError::new("capacity and plan scale workload.rate (or a trace's speedup), which this workload lacks")
            .key("workload.arrival")
            .hint("use an arrival process with a rate (poisson, gamma, weibull, deterministic), a rate schedule or a trace; for closed-loop users, sweep workload.closed_loop.users")
            .into()
    };
    if w.classes.iter().any(|c| c.own_process().is_some()) && w.classes.iter().all(|c| c.own_process().is_some()) {
        return Err(unusable());
    }
    if !w.rate_schedule.is_empty() {
        let base = w.process().mean_rate().ok_or_else(unusable)?;
        let points = w.rate_schedule.clone();
        return Ok(LoadKnob {
            key: "workload.rate",
            start: base,
            rate_per_unit: Some(1.0),
            overrides: Box::new(move |x| {
                let scaled: Vec<Value> = points
                    .iter()
                    .map(|p| {
                        let mut t = toml::Table::new();
                        t.insert("t_s".into(), Value::Float(p.t_s));
                        t.insert("rate".into(), Value::Float(p.rate * x / base));
                        Value::Table(t)
                    })
                    .collect();
                vec![("workload.rate_schedule".into(), Value::Array(scaled))]
            }),
        });
    }
    let rate = w.rate.ok_or_else(unusable)?;
    let amplitude = w.diurnal.as_ref().map(|d| d.amplitude);
    Ok(LoadKnob {
        key: "workload.rate",
        start: rate,
        rate_per_unit: Some(1.0),
        overrides: Box::new(move |x| {
            let mut o = vec![("workload.rate".into(), Value::Float(x))];
            if let Some(a) = amplitude {
                o.push(("workload.diurnal.amplitude".into(), Value::Float(a * x / rate)));
            }
            o
        }),
    })
}

/// Largest x > 0 with `ok(x)`, assuming `ok` is true below some threshold and
/// false above it: doubles or halves from `start` to bracket it, then bisects
/// (geometrically) to relative precision `tol`. Returns 0 if a load 1,000×
/// below `start` still fails (further down, a run of the scenario's length
/// would only pass the clock limit: a 70B scenario whose objective no load
/// meets reached 5.5 simulated years at 1e-6 × start).
pub fn bisect_up(start: f64, tol: f64, mut ok: impl FnMut(f64) -> Result<bool>) -> Result<f64> {
    let (mut lo, mut hi);
    if ok(start)? {
        lo = start;
        hi = start * 2.0;
        while ok(hi)? {
            lo = hi;
            hi *= 2.0;
            if hi > start * 1e6 {
                return Ok(lo);
            }
        }
    } else {
        hi = start;
        lo = start / 2.0;
        while !ok(lo)? {
            hi = lo;
            lo /= 2.0;
            if lo < start * 1e-3 {
                return Ok(0.0);
            }
        }
    }
    while hi / lo - 1.0 > tol {
        let mid = (lo * hi).sqrt();
        if ok(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// One candidate configuration of a plan and what it needs.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The overrides that define it.
    pub config: Vec<(String, String)>,
    /// GPU type.
    pub gpu: String,
    /// Tensor parallelism.
    pub tp: u32,
    /// Fewest replicas that meet the SLOs at the target rate (None: none up to the limit, or it does not fit).
    pub replicas: Option<u32>,
    /// GPUs = replicas × tp.
    pub gpus: Option<u32>,
    /// USD per hour for those GPUs.
    pub usd_per_hour: Option<f64>,
    /// USD per million output tokens at the target rate.
    pub usd_per_million_output_tokens: Option<f64>,
    /// The binding SLO at that size and its headroom.
    pub verdict: Option<Verdict>,
    /// The same with one replica fewer (what the last replica buys).
    pub one_fewer: Option<Verdict>,
    /// Why it has no answer.
    pub note: String,
    /// The validated error of its engine profile on its GPU (from `servesim validate`).
    pub model_error: crate::validate::ErrorBand,
    /// Measured requests beyond the SLO percentile at that size (null with
    /// `slo.min_attainment` or without an answer): below 10, the percentile
    /// rests on a handful of requests.
    pub tail_requests: Option<f64>,
    /// Simulated time of the run at that size, s.
    #[serde(skip)]
    pub sim_time_s: f64,
    /// The overrides that simulate it at the target load (replicas aside).
    #[serde(skip)]
    pub overrides: Vec<(String, toml::Value)>,
}

/// One way to run the winner's replicas over the run: static, or scaled by
/// the scenario's `[fleet]` policy within some bounds.
#[derive(Debug, Clone, Serialize)]
pub struct FleetChoice {
    /// `static` or the policy's name.
    pub policy: String,
    /// Fewest replicas.
    pub min_replicas: u32,
    /// Most replicas.
    pub max_replicas: u32,
    /// Replicas billed on average (standbys included).
    pub mean_billed_replicas: f64,
    /// Its GPUs' cost per hour on average over the run, USD.
    pub usd_per_hour: f64,
    /// How the run fares against the SLOs.
    pub verdict: Verdict,
}

/// N+1 planning: the replicas the winner needs to hold the SLOs through a
/// replica failure.
#[derive(Debug, Clone, Serialize)]
pub struct FailureHeadroom {
    /// When the failure strikes (the middle of the run), s.
    pub at_s: f64,
    /// How long the replica is down, s (`fleet.repair_s`).
    pub repair_s: f64,
    /// The winner's size, and how it fares through the failure.
    pub at_winner: Verdict,
    /// Fewest replicas that hold the SLOs through it (null: none up to the winner's size + 2).
    pub replicas_needed: Option<u32>,
}

/// The result of `servesim plan`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Target load, req/s.
    pub rate: f64,
    /// Candidates, cheapest first (those without an answer last).
    pub candidates: Vec<Candidate>,
    /// When an answer rests on too few requests beyond the SLO percentile:
    /// the reason and the `--min-requests` that would fix it.
    pub precision_warning: Option<String>,
    /// The winner run static and scaled by the scenario's `[fleet]` policy,
    /// cheapest first (empty without a policy).
    pub fleet_choices: Vec<FleetChoice>,
    /// What the winner needs to hold the SLOs through a replica failure.
    pub failure_headroom: Option<FailureHeadroom>,
    /// The winner rerun with every step slower by its validated throughput
    /// error (`cost.step_time_scale` = 1 + band): how many replicas it then
    /// needs (None: no validated band, or more than twice the winner's).
    pub model_error_replicas: Option<u32>,
    /// The winner confirmed by runs five times longer, and the replica count
    /// one replica's capacity implies (null: no winner).
    pub check: Option<PlanCheck>,
}

fn axes(s: &Scenario) -> Vec<(String, Vec<toml::Value>)> {
    let p = s.plan.clone().unwrap_or_default();
    let gpus = if p.gpus.is_empty() { vec![s.hardware.gpu.clone()] } else { p.gpus.clone() };
    let tps = if p.tp.is_empty() { vec![s.hardware.tp] } else { p.tp.clone() };
    let mut axes = vec![
        ("hardware.gpu".to_string(), gpus.into_iter().map(toml::Value::String).collect()),
        ("hardware.tp".to_string(), tps.into_iter().map(|t| toml::Value::Integer(t as i64)).collect()),
    ];
    if !p.dtype.is_empty() {
        axes.push(("model.dtype".into(), p.dtype.iter().map(|d| toml::Value::String(d.as_str().into())).collect()));
    }
    for (k, v) in &p.knobs {
        axes.push((k.clone(), v.as_array().cloned().unwrap_or_default()));
    }
    axes
}

/// Searches the `[plan]` space for the cheapest configurations that carry the
/// target load within the SLOs.
pub fn plan(loaded: &LoadedScenario, catalog: &Catalog) -> Result<Plan> {
    let s = &loaded.scenario;
    if !s.pools.is_empty() {
        return Err(ConfigError::new("plan sizes hardware.gpu, tp and replicas; this scenario sets [[pools]] instead")
            .key("pools")
            .hint("compare pool sizes with `servesim sweep --grid pools[0].replicas=1,2,4`, or plan without [[pools]]")
            .into());
    }
    let slo = slo_of(s)?;
    let pc = s.plan.clone().unwrap_or_default();
    let knob = load_knob(loaded, catalog)?;
    let base_rate = knob.rate_per_unit.map(|u| u * knob.start);
    let rate = pc.rate.or(base_rate).ok_or_else(|| {
        ConfigError::new("plan needs a target rate").key("plan.rate").hint("set [plan] rate = <requests per second>")
    })?;
    // The knob value that offers `rate` req/s (a trace: the speed-up).
    let knob_value = rate / knob.rate_per_unit.unwrap_or(1.0);
    let grid = crate::sweep::Grid { axes: axes(s), mode: crate::config::SweepMode::Cartesian };
    let points = grid.points();
    let seed = s.seed;
    let sizing = Sizing { loaded, catalog, slo: &slo, knob: &knob, knob_value, max_replicas: pc.max_replicas, seed };
    let cands: Vec<Result<Candidate>> = points.par_iter().map(|p| sizing.candidate(p)).collect();
    let mut candidates: Vec<Candidate> = cands.into_iter().collect::<Result<_>>()?;
    candidates.sort_by(|a, b| {
        let key = |c: &Candidate| {
            (c.usd_per_hour.unwrap_or(f64::INFINITY), c.usd_per_million_output_tokens.unwrap_or(f64::INFINITY))
        };
        key(a).0.total_cmp(&key(b).0).then(key(a).1.total_cmp(&key(b).1))
    });
    let precision_warning = precision_warning(&candidates, &slo);
    let winner = candidates.iter().find(|c| c.replicas.is_some() && c.verdict.is_some());
    let ((fleet_choices, failure_headroom), (model_error_replicas, check)) = match winner {
        Some(w) => {
            let runs = WinnerRuns { loaded, catalog, over: &w.overrides, slo: &slo, seed };
            rayon::join(
                || rayon::join(|| fleet_choices(&runs, w), || failure_headroom(&runs, w)),
                || rayon::join(|| pessimistic_replicas(&runs, w), || check::check(&runs, w, &knob, knob_value, rate)),
            )
        }
        None => ((Ok(Vec::new()), Ok(None)), (Ok(None), Ok(None))),
    };
    Ok(Plan {
        rate,
        candidates,
        precision_warning,
        fleet_choices: fleet_choices?,
        failure_headroom: failure_headroom?,
        model_error_replicas: model_error_replicas?,
        check: check?,
    })
}

/// When answers judged the percentile objectives on too few requests beyond
/// the percentile: how many, and how to lengthen the runs.
fn precision_warning(candidates: &[Candidate], slo: &SloConfig) -> Option<String> {
    let thin: Vec<f64> = candidates.iter().filter_map(|c| c.tail_requests).filter(|&t| t < MIN_TAIL_REQUESTS).collect();
    (!thin.is_empty()).then(|| {
        let p = slo.percentile.unwrap_or(99.0);
        format!(
            "{} answer(s) judged the p{p} objectives on fewer than {MIN_TAIL_REQUESTS:.0} requests beyond p{p} \
             (as few as {:.0}): {}",
            thin.len(),
            thin.iter().copied().fold(f64::INFINITY, f64::min),
            lengthen_advice(p)
        )
    })
}

/// What every candidate of a plan is sized against: the target load and the SLOs.
struct Sizing<'a> {
    loaded: &'a LoadedScenario,
    catalog: &'a Catalog,
    slo: &'a SloConfig,
    knob: &'a LoadKnob,
    /// The knob value that offers the target load.
    knob_value: f64,
    max_replicas: u32,
    seed: u64,
}

impl Sizing<'_> {
    /// The candidate at grid point `p`, sized: its fewest replicas that meet
    /// the SLOs at the target load, their cost and verdict, and the verdict
    /// with one replica fewer (a note instead when it does not fit or never meets them).
    fn candidate(&self, p: &[(String, toml::Value)]) -> Result<Candidate> {
        let (s, catalog) = (&self.loaded.scenario, self.catalog);
        let mut over = p.to_vec();
        over.extend(self.knob.set(self.knob_value));
        let gpu =
            p.iter().find(|x| x.0 == "hardware.gpu").and_then(|x| x.1.as_str().map(String::from)).unwrap_or_default();
        let tp = p.iter().find(|x| x.0 == "hardware.tp").and_then(|x| x.1.as_integer()).unwrap_or(1) as u32;
        let mut c = Candidate {
            config: p.iter().map(|(k, v)| (k.clone(), v.to_string().trim_matches('"').to_string())).collect(),
            gpu,
            tp,
            replicas: None,
            gpus: None,
            usd_per_hour: None,
            usd_per_million_output_tokens: None,
            verdict: None,
            one_fewer: None,
            note: String::new(),
            model_error: crate::validate::band(
                s.engine.preset.as_deref(),
                "",
                crate::validate::BandMetric::Throughput,
                Some(catalog),
            ),
            tail_requests: None,
            sim_time_s: f64::NAN,
            overrides: over.clone(),
        };
        let gpu_key = catalog.gpu(&c.gpu).map_or(c.gpu.clone(), |e| e.key.clone());
        let base = match self.loaded.derive(&over, "plan candidate").and_then(|sc| resolve(&sc, catalog)) {
            Ok(b) => b,
            Err(e) => {
                c.note = e.message.clone();
                return Ok(c);
            }
        };
        c.model_error = crate::validate::band(
            base.scenario.engine.preset.as_deref(),
            &gpu_key,
            crate::validate::BandMetric::Throughput,
            Some(catalog),
        );
        let (n, sum) = match self.fewest_replicas(&over)? {
            Ok(found) => found,
            Err(last_reason) => {
                c.note = format!("does not meet the SLOs with {} replicas: {last_reason}", self.max_replicas);
                return Ok(c);
            }
        };
        let slo = self.slo;
        // Plan refuses [[pools]]: the one pool's price.
        let price = base.pools[0].price_per_gpu_hour;
        c.replicas = Some(n);
        let gpus = n * base.scenario.hardware.gpus_per_replica();
        c.gpus = Some(gpus);
        c.usd_per_hour = Some(gpus as f64 * price);
        c.usd_per_million_output_tokens = Some(gpus as f64 * price / 3600.0 / sum.metrics.output_throughput * 1e6);
        c.verdict = Some(judge(&sum, slo));
        c.tail_requests = Some(sum.tail_requests(slo)).filter(|t| t.is_finite());
        c.sim_time_s = sum.simulated_time_s;
        if n > 1 {
            c.one_fewer = Some(judge(&self.run(&over, n - 1)?, slo));
        }
        Ok(c)
    }

    /// The candidate with overrides `over` and `n` replicas, at the target load.
    fn run(&self, over: &[(String, toml::Value)], n: u32) -> Result<Summary> {
        let mut o = over.to_vec();
        o.push(("hardware.replicas".into(), toml::Value::Integer(n as i64)));
        if self.loaded.scenario.fleet.is_some() {
            // Sized static; the fleet's policy is weighed for the winner afterwards.
            o.extend(static_fleet().into_iter().map(|(k, v)| (k.to_string(), v)));
        }
        simulate(self.loaded, self.catalog, &o, self.seed)
    }

    /// The fewest replicas (up to the limit) with which the candidate with
    /// overrides `over` meets the SLOs, with that run: exponential search,
    /// then bisection. `Err`: none does, and why the largest tried fails.
    fn fewest_replicas(&self, over: &[(String, toml::Value)]) -> Result<std::result::Result<(u32, Summary), String>> {
        let (slo, max) = (self.slo, self.max_replicas);
        let run_at = |n: u32| self.run(over, n);
        let (mut lo, mut hi) = (0u32, 1u32);
        let mut found: Option<(u32, Summary)> = None;
        let mut last_reason = String::new();
        while hi <= max {
            let sum = run_at(hi)?;
            let v = judge(&sum, slo);
            if v.meets {
                found = Some((hi, sum));
                break;
            }
            last_reason = v.reason;
            lo = hi;
            hi *= 2;
        }
        if found.is_none() && lo < max {
            let sum = run_at(max)?;
            let v = judge(&sum, slo);
            if v.meets {
                found = Some((max, sum));
                hi = max;
            } else {
                last_reason = v.reason;
            }
        }
        if found.is_none() {
            return Ok(Err(last_reason));
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let sum = run_at(mid)?;
            if judge(&sum, slo).meets {
                hi = mid;
                found = Some((mid, sum));
            } else {
                lo = mid;
            }
        }
        Ok(Ok(found.expect("found above")))
    }
}

/// The `[fleet]` overrides that make a fleet static (its failures kept).
fn static_fleet() -> Vec<(&'static str, toml::Value)> {
    vec![("fleet.policy", toml::Value::String("none".into())), ("fleet.schedule", toml::Value::Array(Vec::new()))]
}

/// Runs of the plan's winner at the target load, judged against the SLOs.
struct WinnerRuns<'a> {
    loaded: &'a LoadedScenario,
    catalog: &'a Catalog,
    /// The winner's overrides at the target load.
    over: &'a [(String, toml::Value)],
    slo: &'a SloConfig,
    seed: u64,
}

impl WinnerRuns<'_> {
    /// The overrides of the winner with `n` replicas and the `[fleet]` overrides `fleet`.
    fn overrides(&self, n: u32, fleet: Vec<(&str, toml::Value)>) -> Vec<(String, toml::Value)> {
        let mut o = self.over.to_vec();
        o.push(("hardware.replicas".into(), toml::Value::Integer(n as i64)));
        o.extend(fleet.into_iter().map(|(k, v)| (k.to_string(), v)));
        o
    }

    /// The winner with `n` replicas and the `[fleet]` overrides `fleet`.
    fn run(&self, n: u32, fleet: Vec<(&str, toml::Value)>) -> Result<Summary> {
        simulate(self.loaded, self.catalog, &self.overrides(n, fleet), self.seed)
    }
}

/// The winner static, and scaled by the scenario's policy with every
/// minimum from 1 to its size and a maximum of its size or one more: the
/// cheapest that meets the SLOs first.
fn fleet_choices(runs: &WinnerRuns, w: &Candidate) -> Result<Vec<FleetChoice>> {
    use toml::Value;
    // A schedule sets its own counts: its bounds are not the plan's to vary.
    let Some(f) = runs
        .loaded
        .scenario
        .fleet
        .as_ref()
        .filter(|f| !matches!(f.policy, crate::config::ScalePolicy::None | crate::config::ScalePolicy::Schedule))
    else {
        return Ok(Vec::new());
    };
    let n = w.replicas.unwrap_or(1);
    let price = w.usd_per_hour.unwrap_or(f64::NAN) / w.gpus.unwrap_or(1).max(1) as f64;
    let per_replica = w.gpus.unwrap_or(1) as f64 / n.max(1) as f64;
    let mut shapes = vec![(0u32, 0u32)]; // static
    for max in [n, n + 1] {
        for min in 1..=n.min(max) {
            if min < max {
                shapes.push((min, max));
            }
        }
    }
    let runs: Vec<Result<FleetChoice>> = shapes
        .par_iter()
        .map(|&(min, max)| {
            let (sum, policy) = if max == 0 {
                (runs.run(n, static_fleet())?, "static".to_string())
            } else {
                let fl = vec![
                    ("fleet.min_replicas", Value::Integer(min as i64)),
                    ("fleet.max_replicas", Value::Integer(max as i64)),
                ];
                (runs.run(max, fl)?, f.policy.as_str().to_string())
            };
            let hours = sum.duration / 3600.0;
            let billed = sum.fleet.as_ref().map_or(n as f64, |x| x.mean_billed_replicas);
            Ok(FleetChoice {
                policy,
                min_replicas: if max == 0 { n } else { min },
                max_replicas: if max == 0 { n } else { max },
                mean_billed_replicas: billed,
                usd_per_hour: sum.fleet.as_ref().map_or(billed * per_replica * price, |x| x.usd / hours),
                verdict: judge(&sum, runs.slo),
            })
        })
        .collect();
    let mut out: Vec<FleetChoice> = runs.into_iter().collect::<Result<_>>()?;
    out.sort_by(|a, b| b.verdict.meets.cmp(&a.verdict.meets).then(a.usd_per_hour.total_cmp(&b.usd_per_hour)));
    Ok(out)
}

/// N+1: the winner's static fleet with one replica failing in the middle of
/// the run (its requests retried), then one and two replicas more, until
/// the SLOs hold through the failure.
fn failure_headroom(runs: &WinnerRuns, w: &Candidate) -> Result<Option<FailureHeadroom>> {
    use toml::Value;
    let n = w.replicas.unwrap_or(1);
    let at = (w.sim_time_s / 2.0).max(0.0);
    let repair =
        runs.loaded.scenario.fleet.as_ref().map_or(crate::config::FleetConfig::default().repair_s, |f| f.repair_s);
    let mut failure = toml::Table::new();
    failure.insert("at_s".into(), Value::Float(at));
    failure.insert("replica".into(), Value::Integer(0));
    failure.insert("repair_s".into(), Value::Float(repair));
    let verdicts: Vec<Result<Verdict>> = (n..=n + 2)
        .into_par_iter()
        .map(|k| {
            let mut fl = static_fleet();
            fl.push(("fleet.failures", Value::Array(vec![Value::Table(failure.clone())])));
            fl.push(("fleet.on_failure", Value::String("retry".into())));
            Ok(judge(&runs.run(k, fl)?, runs.slo))
        })
        .collect();
    let verdicts: Vec<Verdict> = verdicts.into_iter().collect::<Result<_>>()?;
    let needed = verdicts.iter().position(|v| v.meets).map(|i| n + i as u32);
    Ok(Some(FailureHeadroom { at_s: at, repair_s: repair, at_winner: verdicts[0].clone(), replicas_needed: needed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisection_finds_the_threshold() {
        let x = bisect_up(1.0, 0.01, |r| Ok(r <= 37.5)).unwrap();
        assert!(x <= 37.5 && x > 37.5 / 1.01, "{x}");
        let y = bisect_up(100.0, 0.01, |r| Ok(r <= 0.3)).unwrap();
        assert!(y <= 0.3 && y > 0.3 / 1.01, "{y}");
        // Nothing passes: 0, without probing below 1/1000 of the start.
        let mut lowest = f64::INFINITY;
        let z = bisect_up(3.0, 0.01, |r| {
            lowest = lowest.min(r);
            Ok(false)
        })
        .unwrap();
        assert_eq!(z, 0.0);
        assert!(lowest >= 3.0e-3 / 2.0, "{lowest}");
    }

    #[test]
    fn a_value_above_its_limit_prints_above_it() {
        assert_eq!(above(50.4, 50.0), "50.4");
        assert_eq!(above(50.04, 50.0), "50.04");
        assert_eq!(above(504.2, 500.0), "504");
        assert_eq!(above(1105.0, 50.0), "1105");
    }
}
