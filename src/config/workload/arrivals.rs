//! Open-loop arrival processes: the process kinds (Poisson, gamma, Weibull,
//! deterministic, offline, on/off), time-varying rates (rate schedule,
//! diurnal), the ramp-up, and the checks of one process's keys.

use super::WorkloadConfig;
use crate::config::validate::{Check, fail, non_negative, positive};
use serde::{Deserialize, Serialize};

/// Arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalKind {
    /// Exponential inter-arrival gaps at `rate`; with `rate_schedule` or
    /// `diurnal`, a non-homogeneous Poisson process.
    #[default]
    Poisson,
    /// Gamma-distributed gaps at `rate` with coefficient of variation `cv`
    /// (or vLLM's `burstiness` = shape = 1/cv²).
    Gamma,
    /// Weibull-distributed gaps at `rate` with coefficient of variation `cv`.
    Weibull,
    /// Constant gaps of 1/`rate`.
    Deterministic,
    /// All requests arrive at t = 0 (offline batch).
    Offline,
    /// Two-state Markov-modulated Poisson process (`[workload.on_off]`).
    OnOff,
    /// `closed_loop.users` users, each sending its next request when the
    /// previous one finished plus a think time.
    ClosedLoop,
    /// Replay of a recorded trace (`[workload.trace]`).
    Trace,
}

impl ArrivalKind {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalKind::Poisson => "poisson",
            ArrivalKind::Gamma => "gamma",
            ArrivalKind::Weibull => "weibull",
            ArrivalKind::Deterministic => "deterministic",
            ArrivalKind::Offline => "offline",
            ArrivalKind::OnOff => "on-off",
            ArrivalKind::ClosedLoop => "closed-loop",
            ArrivalKind::Trace => "trace",
        }
    }

    /// A renewal process: independent gaps at a rate (`poisson`, `gamma`,
    /// `weibull`, `deterministic`).
    pub(super) fn is_renewal(self) -> bool {
        matches!(self, ArrivalKind::Poisson | ArrivalKind::Gamma | ArrivalKind::Weibull | ArrivalKind::Deterministic)
    }
}

/// `[workload.on_off]`: a two-state Markov-modulated Poisson process. The
/// process stays in each state for an exponentially distributed time and
/// sends Poisson arrivals at that state's rate; it starts in a state drawn
/// from the stationary distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnOff {
    /// Arrival rate while "on", requests per second.
    pub on_rate: f64,
    /// Arrival rate while "off" (default 0).
    #[serde(default)]
    pub off_rate: f64,
    /// Mean time spent "on" per visit, s.
    pub on_mean_s: f64,
    /// Mean time spent "off" per visit, s.
    pub off_mean_s: f64,
}

impl OnOff {
    /// Long-run mean arrival rate.
    pub fn mean_rate(&self) -> f64 {
        (self.on_rate * self.on_mean_s + self.off_rate * self.off_mean_s) / (self.on_mean_s + self.off_mean_s)
    }
}

/// One point of a piecewise-linear rate schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePoint {
    /// Time, s.
    pub t_s: f64,
    /// Arrival rate at that time, requests per second.
    pub rate: f64,
}

/// `[workload.diurnal]`: rate(t) = rate + amplitude · sin(2π (t − phase_s) / period_s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diurnal {
    /// Swing around the mean `rate`, requests per second (at most `rate`).
    pub amplitude: f64,
    /// Period, s (default one day).
    #[serde(default = "day")]
    pub period_s: f64,
    /// Time of the upward zero crossing, s.
    #[serde(default)]
    pub phase_s: f64,
}

fn day() -> f64 {
    86_400.0
}

/// How the ramp-up interpolates the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RampStrategy {
    /// start + (end − start) · progress.
    Linear,
    /// start · (end / start)^progress.
    Exponential,
}

/// `[workload.ramp_up]`: like `vllm bench serve --ramp-up-strategy`: the
/// i-th of N requests is sent at rate r(i / (N − 1)) going from `start_rate`
/// to `end_rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RampUp {
    /// Interpolation.
    pub strategy: RampStrategy,
    /// Rate of the first request, per second.
    pub start_rate: f64,
    /// Rate of the last request (default: `workload.rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_rate: Option<f64>,
}

/// The keys describing one open-loop arrival process (of the workload or of a class).
#[derive(Debug, Clone, Copy)]
pub struct ProcessConfig<'a> {
    /// Process kind.
    pub kind: ArrivalKind,
    /// Mean rate.
    pub rate: Option<f64>,
    /// Gap CV.
    pub cv: Option<f64>,
    /// Gamma shape.
    pub burstiness: Option<f64>,
    /// On/off parameters.
    pub on_off: Option<&'a OnOff>,
    /// Rate schedule.
    pub rate_schedule: &'a [RatePoint],
    /// Sinusoidal rate.
    pub diurnal: Option<&'a Diurnal>,
}

impl ProcessConfig<'_> {
    /// Long-run mean arrival rate, when defined.
    pub fn mean_rate(&self) -> Option<f64> {
        match self.kind {
            ArrivalKind::OnOff => self.on_off.map(OnOff::mean_rate),
            ArrivalKind::Offline | ArrivalKind::ClosedLoop | ArrivalKind::Trace => None,
            _ if !self.rate_schedule.is_empty() => {
                let p = self.rate_schedule;
                if p.len() == 1 {
                    return Some(p[0].rate);
                }
                let span = p[p.len() - 1].t_s - p[0].t_s;
                let area: f64 = p.windows(2).map(|w| (w[1].t_s - w[0].t_s) * (w[0].rate + w[1].rate) / 2.0).sum();
                Some(area / span)
            }
            _ => self.rate,
        }
    }
}

/// A key under a process's table: `key.s`, or `s` alone when `key` is empty.
type SubKey<'a> = &'a dyn Fn(&str) -> String;

/// Checks the keys of one open-loop arrival process whose table is `key`.
pub(super) fn check_process(key: &str, p: &ProcessConfig<'_>) -> Check {
    let k = |s: &str| if key.is_empty() { s.to_string() } else { format!("{key}.{s}") };
    check_keys_apply(&k, p)?;
    check_gaps(&k, p)?;
    if p.kind == ArrivalKind::OnOff {
        check_on_off(&k, p.on_off)?;
    }
    if p.kind.is_renewal() {
        check_rate(&k, p)?;
        if let Some(d) = p.diurnal {
            check_diurnal(&k, d, p.rate)?;
        }
    }
    Ok(())
}

/// `rate`, `on_off`, `rate_schedule` and `diurnal` only where the process kind uses them.
fn check_keys_apply(k: SubKey<'_>, p: &ProcessConfig<'_>) -> Check {
    if !p.kind.is_renewal() && p.rate.is_some() {
        return fail(
            &k("rate"),
            format!("is not used by arrival = \"{}\"", p.kind.as_str()),
            match p.kind {
                ArrivalKind::OnOff => "set the rates in [on_off] (on_rate, off_rate) and remove rate",
                ArrivalKind::Offline => "remove rate: offline requests all arrive at t = 0",
                ArrivalKind::Trace => {
                    "remove rate: the trace sets the arrivals (scale them with speedup or target_rate)"
                }
                _ => "remove rate, or pick arrival = \"poisson\"",
            },
        );
    }
    if p.on_off.is_some() && p.kind != ArrivalKind::OnOff {
        return fail(
            &k("on_off"),
            "only applies to arrival = \"on-off\"",
            "set arrival = \"on-off\" or remove [on_off]",
        );
    }
    if (!p.rate_schedule.is_empty() || p.diurnal.is_some()) && p.kind != ArrivalKind::Poisson {
        return fail(
            &k(if p.diurnal.is_some() { "diurnal" } else { "rate_schedule" }),
            "a time-varying rate applies to Poisson arrivals only",
            "set arrival = \"poisson\"",
        );
    }
    Ok(())
}

/// The gap shape: `cv` and `burstiness` for gamma, `cv` for Weibull, neither otherwise.
fn check_gaps(k: SubKey<'_>, p: &ProcessConfig<'_>) -> Check {
    match p.kind {
        ArrivalKind::Gamma => match (p.cv, p.burstiness) {
            (Some(_), Some(_)) => {
                return fail(&k("burstiness"), "cv and burstiness are both set", "keep one: cv = 1/sqrt(burstiness)");
            }
            (None, None) => {
                return fail(
                    &k("cv"),
                    "gamma arrivals need cv or burstiness",
                    "set cv = 2.0 (burstier than Poisson) or burstiness = 0.25",
                );
            }
            (Some(v), None) if !(0.001..=30.0).contains(&v) => {
                return fail(
                    &k("cv"),
                    format!("must be between 0.001 and 30 for gamma gaps, got {v}"),
                    "use e.g. cv = 2.0",
                );
            }
            (None, Some(b)) if !(0.001..=1e6).contains(&b) => {
                return fail(
                    &k("burstiness"),
                    format!("must be between 0.001 and 1e6, got {b}"),
                    "use e.g. burstiness = 0.25",
                );
            }
            _ => {}
        },
        ArrivalKind::Weibull => {
            if p.burstiness.is_some() {
                return fail(
                    &k("burstiness"),
                    "only applies to arrival = \"gamma\"",
                    "give Weibull gaps their cv instead",
                );
            }
            match p.cv {
                None => {
                    return fail(
                        &k("cv"),
                        "Weibull arrivals need cv",
                        "set cv = 2.0 (burstier than Poisson) or 0.5 (smoother)",
                    );
                }
                Some(v) if !(0.05..=20.0).contains(&v) => {
                    return fail(
                        &k("cv"),
                        format!("must be between 0.05 and 20 for Weibull gaps, got {v}"),
                        "use e.g. cv = 2.0",
                    );
                }
                _ => {}
            }
        }
        _ => {
            if p.cv.is_some() {
                return fail(
                    &k("cv"),
                    "only applies to arrival = \"gamma\" or \"weibull\"",
                    "remove cv, or set arrival = \"gamma\"",
                );
            }
            if p.burstiness.is_some() {
                return fail(
                    &k("burstiness"),
                    "only applies to arrival = \"gamma\"",
                    "remove burstiness, or set arrival = \"gamma\"",
                );
            }
        }
    }
    Ok(())
}

/// `arrival = "on-off"`: its `[on_off]` table.
fn check_on_off(k: SubKey<'_>, on_off: Option<&OnOff>) -> Check {
    let Some(o) = on_off else {
        return fail(
            &k("on_off"),
            "arrival = \"on-off\" needs [on_off]",
            "add on_off = { on_rate = 20.0, off_rate = 1.0, on_mean_s = 10.0, off_mean_s = 30.0 }",
        );
    };
    non_negative(&k("on_off.on_rate"), o.on_rate)?;
    non_negative(&k("on_off.off_rate"), o.off_rate)?;
    positive(&k("on_off.on_mean_s"), o.on_mean_s)?;
    positive(&k("on_off.off_mean_s"), o.off_mean_s)?;
    if o.on_rate + o.off_rate <= 0.0 {
        return fail(&k("on_off.on_rate"), "both rates are 0: nothing would ever arrive", "set on_rate > 0");
    }
    Ok(())
}

/// A renewal process's rate: a `rate_schedule` (alone), or `rate`.
fn check_rate(k: SubKey<'_>, p: &ProcessConfig<'_>) -> Check {
    if p.rate_schedule.is_empty() {
        return match p.rate {
            None => fail(&k("rate"), "is required by this arrival process", "set rate = <requests per second>"),
            Some(r) => positive(&k("rate"), r),
        };
    }
    if p.rate.is_some() {
        return fail(
            &k("rate"),
            "rate and rate_schedule are both set",
            "keep one: the schedule gives the rate at every time",
        );
    }
    if p.diurnal.is_some() {
        return fail(&k("diurnal"), "diurnal and rate_schedule are both set", "keep one of them");
    }
    let mut prev = f64::NEG_INFINITY;
    for (i, pt) in p.rate_schedule.iter().enumerate() {
        let key = k(&format!("rate_schedule[{i}]"));
        non_negative(&format!("{key}.t_s"), pt.t_s)?;
        non_negative(&format!("{key}.rate"), pt.rate)?;
        if pt.t_s <= prev {
            return fail(
                &format!("{key}.t_s"),
                format!("times must increase, but {} follows {prev}", pt.t_s),
                "list the points in time order",
            );
        }
        prev = pt.t_s;
    }
    if p.rate_schedule.iter().all(|x| x.rate == 0.0) {
        return fail(&k("rate_schedule"), "every rate is 0: nothing would ever arrive", "give some point a rate > 0");
    }
    Ok(())
}

/// `[diurnal]` around the mean `rate`.
fn check_diurnal(k: SubKey<'_>, d: &Diurnal, rate: Option<f64>) -> Check {
    let rate = rate.unwrap_or(0.0);
    non_negative(&k("diurnal.amplitude"), d.amplitude)?;
    if d.amplitude > rate {
        return fail(
            &k("diurnal.amplitude"),
            format!("an amplitude of {} above a mean rate of {rate} would make the rate negative", d.amplitude),
            format!("use amplitude <= {rate}"),
        );
    }
    positive(&k("diurnal.period_s"), d.period_s)?;
    if !d.phase_s.is_finite() {
        return fail(&k("diurnal.phase_s"), "must be a finite number", "use e.g. phase_s = 0");
    }
    Ok(())
}

impl WorkloadConfig {
    pub(super) fn check_ramp(&self, num_requests: Option<u64>) -> Check {
        if (self.ramp_up.is_some() || self.rescale_to_rate)
            && (self.sessions.is_some() || self.classes.iter().any(|c| c.own_process().is_some()))
        {
            return fail(
                if self.ramp_up.is_some() { "workload.ramp_up" } else { "workload.rescale_to_rate" },
                "ramp-up and rescaling count the requests of the common process, so they cannot be combined with \
                 sessions or classes that have their own arrival process",
                "remove them, or give every class a weight instead of its own process",
            );
        }
        let renewal = self.arrival_kind().is_renewal() && self.rate_schedule.is_empty() && self.diurnal.is_none();
        if let Some(r) = &self.ramp_up {
            if !renewal {
                return fail(
                    "workload.ramp_up",
                    "ramp-up applies to poisson, gamma, weibull or deterministic arrivals at a fixed rate",
                    "remove ramp_up, or use a rate_schedule for other shapes",
                );
            }
            if num_requests.is_none() {
                return fail(
                    "workload.ramp_up",
                    "ramp-up goes from the first to the last request, so it needs num_requests",
                    "set num_requests = N",
                );
            }
            positive("workload.ramp_up.start_rate", r.start_rate)?;
            if let Some(e) = r.end_rate {
                positive("workload.ramp_up.end_rate", e)?;
            }
            if self.rescale_to_rate {
                return fail(
                    "workload.rescale_to_rate",
                    "does not apply with a ramp-up (vLLM only rescales a fixed rate)",
                    "remove one of them",
                );
            }
        }
        if self.rescale_to_rate {
            if !renewal {
                return fail(
                    "workload.rescale_to_rate",
                    "applies to poisson, gamma, weibull or deterministic arrivals at a fixed rate",
                    "remove it",
                );
            }
            if num_requests.is_none() {
                return fail(
                    "workload.rescale_to_rate",
                    "needs num_requests (the last request is sent at num_requests / rate)",
                    "set num_requests = N",
                );
            }
        }
        Ok(())
    }
}
