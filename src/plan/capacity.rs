//! `servesim capacity`: the highest load one configuration sustains under
//! its SLOs, searched by bisection in independent replications, lengthened
//! when the searches disagree, and confirmed by one run five times longer.
//!
//! Why the confirmation: a bisection judges each load on runs of the
//! scenario's length. A load slightly above the true limit can pass such a
//! run (the backlog has not yet had time to grow past the stability tests),
//! so the answer errs high on bursty traffic. One run [`CONFIRM_FACTOR`]
//! times longer at the answer either holds, or the answer steps down until
//! one does, and the output says so.

use super::{LoadKnob, MIN_TAIL_REQUESTS, judge, lengthen_advice, load_knob, simulate, slo_of};
use crate::Catalog;
use crate::config::SloConfig;
use crate::error::Result;
use crate::scenario::LoadedScenario;
use crate::sweep::{Stat, point_seed};
use rayon::prelude::*;
use serde::Serialize;

/// How many times longer than the search's runs the confirmation run is.
pub const CONFIRM_FACTOR: f64 = 5.0;
/// An interval wider than ± this fraction of its centre is too wide to act on:
/// the searches are repeated with longer runs.
pub const WIDE_INTERVAL: f64 = 0.25;
/// How many times more requests the lengthened searches measure.
const LENGTHEN_FACTOR: u64 = 4;
/// Most steps down the confirmation takes before it gives up.
const MAX_STEPS_DOWN: usize = 10;

/// The result of `servesim capacity`.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// The load knob searched: `workload.rate` (req/s), or `workload.trace.speedup` for a replayed trace.
    pub knob: String,
    /// Highest sustainable value of the knob found by each replication's bisection.
    pub per_replication: Vec<f64>,
    /// Their mean and 95% Student-t interval.
    pub rate: Stat,
    /// The first searches' mean and interval, when it was wider than ±25% of
    /// its centre and the searches were repeated with longer runs (null otherwise).
    pub first_searches: Option<Stat>,
    /// The `--min-requests` the repeated searches ran with (null: not repeated).
    pub lengthened_to_requests: Option<u64>,
    /// The answer checked with one run five times longer (null: nothing to confirm).
    pub confirmation: Option<Confirmation>,
    /// Mean offered arrival rate at knob value 1 (trace replays: the trace's own rate), req/s.
    pub rate_per_unit: Option<f64>,
    /// Relative precision of each bisection.
    pub tolerance: f64,
    /// The validated throughput error of the scenario's engine profile on
    /// its GPU (from `servesim validate`), beside the simulation's interval above.
    pub model_error: crate::validate::ErrorBand,
    /// The knob's value found with every step slower and faster by that
    /// error (1 ± band): where the model's own error puts the answer (None:
    /// no validated band).
    pub model_range: Option<(f64, f64)>,
    /// Fewest measured requests beyond the SLO percentile (e.g. above p99)
    /// in the highest passing run of any search: below 10 that percentile
    /// rests on a handful of requests (null with `slo.min_attainment`).
    pub tail_requests: Option<f64>,
    /// Why the run just above the result failed, per search.
    pub limited_by: Vec<String>,
    /// When the result is not precise: the reason and the run length that would fix it.
    pub precision_warning: Option<String>,
}

/// The answer rerun [`CONFIRM_FACTOR`] times longer, stepping down until it holds.
#[derive(Debug, Clone, Serialize)]
pub struct Confirmation {
    /// How many times longer than the search's runs.
    pub factor: f64,
    /// The value the searches found (their mean).
    pub searched: f64,
    /// The highest value that held over the long run (null: none within the steps tried).
    pub value: Option<f64>,
    /// Each long run, from the searched value down.
    pub steps: Vec<ConfirmStep>,
}

/// One long run of the confirmation.
#[derive(Debug, Clone, Serialize)]
pub struct ConfirmStep {
    /// The knob's value.
    pub value: f64,
    /// Requests measured (after the warm-up).
    pub measured_requests: u64,
    /// Whether it meets the SLOs and is stable.
    pub meets: bool,
    /// Why not, or the binding objective and its headroom.
    pub reason: String,
}

impl Capacity {
    /// The answer: the confirmed value, or the searches' mean when there was
    /// nothing to confirm; 0 when no value held.
    pub fn answer(&self) -> f64 {
        match &self.confirmation {
            Some(c) => c.value.unwrap_or(0.0),
            None => self.rate.mean,
        }
    }
}

/// One bisection's outcome.
struct Search {
    value: f64,
    /// Tail requests of its highest passing run.
    tail: f64,
    /// Measured requests of its highest passing run.
    measured: u64,
    /// Simulated time of its highest passing run, s.
    sim_time_s: f64,
    /// Why the run above the answer failed.
    why: String,
}

/// Runs `replications` independent bisections of the load knob.
fn searches(
    loaded: &LoadedScenario,
    catalog: &Catalog,
    knob: &LoadKnob,
    slo: &SloConfig,
    replications: u32,
    tol: f64,
) -> Result<Vec<Search>> {
    (0..replications.max(1))
        .into_par_iter()
        .map(|rep| {
            let seed = point_seed(loaded.scenario.seed, 0, rep);
            let mut best = Search { value: 0.0, tail: f64::NAN, measured: 0, sim_time_s: 0.0, why: String::new() };
            let mut why = String::new();
            let meets = |rate: f64| -> Result<bool> {
                let s = simulate(loaded, catalog, &knob.set(rate), seed)?;
                let v = judge(&s, slo);
                if v.meets && rate >= best.value {
                    best = Search {
                        value: rate,
                        tail: s.tail_requests(slo),
                        measured: s.metrics.measured_requests,
                        sim_time_s: s.simulated_time_s,
                        why: String::new(),
                    };
                } else if !v.meets {
                    why = v.reason;
                }
                Ok(v.meets)
            };
            let x = super::bisect_up(knob.start, tol, meets)?;
            Ok(Search { value: x, why, ..best })
        })
        .collect()
}

/// Whether an interval is too wide to act on.
fn wide(r: &Stat) -> bool {
    r.mean > 0.0 && r.ci_lo.is_finite() && (r.ci_hi - r.ci_lo) / 2.0 > WIDE_INTERVAL * r.mean
}

/// The overrides that make a run `factor` times longer than the run of
/// `loaded` with `over`: more requests, or a longer time after the warm-up
/// (`sim_time_s`, the run's simulated time, stands in for a trace replayed
/// whole); a trace then loops.
pub(super) fn longer(
    loaded: &LoadedScenario,
    over: &[(String, toml::Value)],
    factor: f64,
    sim_time_s: f64,
) -> Result<Vec<(String, toml::Value)>> {
    use toml::Value;
    let s = loaded.derive(over, "confirmation run")?;
    let warm = s.warmup_s.max(0.0);
    let mut o = over.to_vec();
    match (s.num_requests, s.duration_s) {
        (Some(n), _) => o.push(("num_requests".into(), Value::Integer((n as f64 * factor).ceil() as i64))),
        (None, Some(d)) => o.push(("duration_s".into(), Value::Float(warm + factor * (d - warm).max(0.0)))),
        (None, None) => o.push(("duration_s".into(), Value::Float(warm + factor * (sim_time_s - warm).max(1.0)))),
    }
    if s.workload.trace.is_some() {
        o.push(("workload.trace.loop".into(), Value::Boolean(true)));
    }
    Ok(o)
}

/// Reruns `value` [`CONFIRM_FACTOR`] times longer, stepping down by
/// max(`tol`, 1%) until a run holds (at most [`MAX_STEPS_DOWN`] steps).
fn confirm(
    loaded: &LoadedScenario,
    catalog: &Catalog,
    knob: &LoadKnob,
    slo: &SloConfig,
    value: f64,
    tol: f64,
    sim_time_s: f64,
) -> Result<Confirmation> {
    let seed = point_seed(loaded.scenario.seed, 1, 0);
    let step = tol.max(0.01);
    let mut c = Confirmation { factor: CONFIRM_FACTOR, searched: value, value: None, steps: Vec::new() };
    let mut x = value;
    for _ in 0..=MAX_STEPS_DOWN {
        let over = longer(loaded, &knob.set(x), CONFIRM_FACTOR, sim_time_s)?;
        let s = simulate(loaded, catalog, &over, seed)?;
        let v = judge(&s, slo);
        c.steps.push(ConfirmStep {
            value: x,
            measured_requests: s.metrics.measured_requests,
            meets: v.meets,
            reason: v.outcome(),
        });
        if v.meets {
            c.value = Some(x);
            break;
        }
        x /= 1.0 + step;
    }
    Ok(c)
}

/// Finds the highest load that meets the SLOs, once per replication (each
/// with its own arrivals), to `tol` relative precision; repeats the searches
/// with runs four times longer when their interval is wider than ±25% of its
/// centre, and confirms the answer with one run five times longer.
pub fn capacity(loaded: &LoadedScenario, catalog: &Catalog, replications: u32, tol: f64) -> Result<Capacity> {
    let slo = slo_of(&loaded.scenario)?;
    let knob = load_knob(loaded, catalog)?;
    let mut per = searches(loaded, catalog, &knob, &slo, replications, tol)?;
    let stat = |per: &[Search]| Stat::of(&per.iter().map(|p| p.value).collect::<Vec<_>>());
    let mut first_searches = None;
    let mut lengthened = loaded.clone();
    if wide(&stat(&per)) {
        let measured = per.iter().map(|p| p.measured).max().unwrap_or(0);
        let min = (LENGTHEN_FACTOR * measured).max(loaded.min_requests.unwrap_or(0));
        lengthened.min_requests = Some(min);
        first_searches = Some(stat(&per));
        per = searches(&lengthened, catalog, &knob, &slo, replications, tol)?;
    }
    let rate = stat(&per);
    let tail = per.iter().map(|p| p.tail).filter(|t| !t.is_nan()).fold(f64::INFINITY, f64::min);
    let tail_requests = tail.is_finite().then_some(tail);
    let limited_by: Vec<String> = per.iter().map(|p| p.why.clone()).collect();
    let mut warnings = Vec::new();
    if let Some(first) = &first_searches {
        let still = if wide(&rate) {
            let measured = per.iter().map(|p| p.measured).max().unwrap_or(0);
            format!(
                "; still wider than ±{:.0}%: rerun with --min-requests {} for a narrower one",
                WIDE_INTERVAL * 100.0,
                LENGTHEN_FACTOR * measured
            )
        } else {
            String::new()
        };
        warnings.push(format!(
            "the first searches disagreed ({:.2}, 95% CI [{:.2}, {:.2}], wider than ±{:.0}%): they were repeated \
             with runs of about {} measured requests{still}",
            first.mean,
            first.ci_lo,
            first.ci_hi,
            WIDE_INTERVAL * 100.0,
            thousands(lengthened.min_requests.unwrap_or(0))
        ));
    }
    if let Some(t) = tail_requests.filter(|&t| t < MIN_TAIL_REQUESTS) {
        let p = slo.percentile.unwrap_or(99.0);
        warnings.push(format!(
            "the p{p} objective was judged on as few as {t:.0} requests beyond it: {}",
            lengthen_advice(p)
        ));
    }
    if limited_by.iter().any(|w| w.starts_with("inconclusive")) {
        warnings.push(
            "some searches stopped at a run too short to tell steady state from slow overload: run longer \
             (num_requests) and the result may rise"
                .into(),
        );
    }
    let sim_time = per.iter().map(|p| p.sim_time_s).fold(0.0, f64::max);
    let confirmation = if rate.mean > 0.0 {
        Some(confirm(&lengthened, catalog, &knob, &slo, rate.mean, tol, sim_time)?)
    } else {
        None
    };
    let model_error = crate::validate::band(
        loaded.scenario.engine.preset.as_deref(),
        catalog.gpu(&loaded.scenario.hardware.gpu).map_or(&loaded.scenario.hardware.gpu, |e| &e.key),
        crate::validate::BandMetric::Throughput,
        Some(catalog),
    );
    let model_range = super::model_error::model_range(&lengthened, catalog, &knob, &slo, tol, model_error.band)?;
    Ok(Capacity {
        model_range,
        tail_requests,
        limited_by,
        precision_warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        knob: knob.key.into(),
        rate,
        first_searches,
        lengthened_to_requests: first_searches.map(|_| lengthened.min_requests.unwrap_or(0)),
        confirmation,
        per_replication: per.iter().map(|p| p.value).collect(),
        rate_per_unit: knob.rate_per_unit,
        tolerance: tol,
        model_error,
    })
}

/// Thousands separated by commas: 39050 → "39,050".
pub(super) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `servesim capacity`'s report for scenario `name`.
pub fn format_capacity(c: &Capacity, name: &str) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let trace = c.knob != "workload.rate";
    // A knob value as the user reads it.
    let show = |x: f64| -> String {
        if trace {
            format!("×{x:.2}{}", c.rate_per_unit.map_or(String::new(), |u| format!(" ({:.2} req/s)", x * u)))
        } else {
            format!("{x:.2} req/s")
        }
    };
    let what = if trace { "maximum sustainable trace speed-up" } else { "maximum sustainable rate" };
    let answer = c.answer();
    let held = c.confirmation.as_ref().and_then(|f| f.steps.iter().find(|s| s.meets));
    match (&c.confirmation, held) {
        (Some(f), Some(h)) => {
            let _ = writeln!(
                o,
                "{name}: {what} {}, confirmed over {} requests ({:.0}× the search's runs)",
                show(answer),
                thousands(h.measured_requests),
                f.factor
            );
        }
        (Some(f), None) => {
            let _ = writeln!(
                o,
                "{name}: {what} not confirmed: no value from {} down to {} held over a {:.0}× longer run; \
                 treat the capacity as below {}",
                show(f.searched),
                show(f.steps.last().map_or(f.searched, |s| s.value)),
                f.factor,
                show(f.steps.last().map_or(f.searched, |s| s.value))
            );
        }
        (None, _) => {
            let _ = writeln!(o, "{name}: {what} {}", show(answer));
            if answer == 0.0 {
                let _ = writeln!(
                    o,
                    "  no load meets the objectives: every search failed down to 1/1000 of the scenario's load"
                );
            }
        }
    }
    let r = &c.rate;
    let runs = c.per_replication.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", ");
    let ci = if r.ci_lo.is_finite() { format!(", 95% CI [{:.2}, {:.2}]", r.ci_lo, r.ci_hi) } else { String::new() };
    let _ = writeln!(o, "  searches: {:.2}{ci} ({} searches: {runs})", r.mean, c.per_replication.len());
    if let Some(f) = &c.confirmation {
        let steps: Vec<String> = f
            .steps
            .iter()
            .map(|s| {
                let verdict = if s.meets { "holds".to_string() } else { s.reason.clone() };
                format!("{:.2} {verdict}", s.value)
            })
            .collect();
        let _ = writeln!(o, "  confirmation ({:.0}× longer): {}", f.factor, steps.join("; "));
        if f.value.is_some_and(|v| v < f.searched) {
            let _ = writeln!(
                o,
                "  the searches' answer did not hold over the longer run: stepped down to {}",
                show(answer)
            );
        }
    }
    let range = c.model_range.map_or(String::new(), |(lo, hi)| {
        let u = if trace { c.rate_per_unit.unwrap_or(1.0) } else { 1.0 };
        format!("; model error puts it in [{:.2}, {:.2}] req/s", lo * u, hi * u)
    });
    let _ = writeln!(o, "  (simulation CI [{:.2}, {:.2}]{range})", r.ci_lo, r.ci_hi);
    let _ = writeln!(o, "  (the {})", c.model_error.describe());
    if let Some(why) = c.limited_by.iter().find(|w| !w.is_empty()) {
        let _ = writeln!(o, "  limited by: {why}");
    }
    if let Some(w) = &c.precision_warning {
        let _ = writeln!(o, "  warning: {w}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(39050), "39,050");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn an_interval_wider_than_a_quarter_of_its_centre_is_wide() {
        assert!(wide(&Stat { mean: 20.4, ci_lo: 5.3, ci_hi: 35.5 }));
        assert!(!wide(&Stat { mean: 7.56, ci_lo: 6.0, ci_hi: 9.0 }));
        assert!(!wide(&Stat { mean: 7.0, ci_lo: f64::NAN, ci_hi: f64::NAN }));
    }
}
