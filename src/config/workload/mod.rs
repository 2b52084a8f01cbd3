//! `[workload]`: the top-level workload table and what ties its parts
//! together: which arrival process is in effect, and the checks that span
//! parts (run length against the process, lengths against classes, sessions).
//! The parts live in their own files: arrival processes (`arrivals`),
//! length distributions (`lengths`), request classes (`classes`),
//! closed-loop users and sessions (`sessions`) and trace replay (`traces`).

mod arrivals;
mod classes;
mod lengths;
mod sessions;
mod traces;

pub use arrivals::{ArrivalKind, Diurnal, OnOff, ProcessConfig, RampStrategy, RampUp, RatePoint};
pub use classes::ClassConfig;
pub use lengths::{JointLengths, LengthDist, MaxTokens, MaxTokensRepr, TimeDist, TooLong};
pub use sessions::{ClosedLoop, Sessions};
pub use traces::{OnBadRow, TimeUnit, TraceFormat, TraceReplay};

use crate::config::validate::{Check, fail};
use arrivals::check_process;
use lengths::{check_length, check_time};
use serde::{Deserialize, Serialize};
use sessions::check_sessions;
use traces::check_columns;

/// `[workload]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Arrival process (default: `trace` with `[workload.trace]`,
    /// `closed-loop` with `[workload.closed_loop]`, else `poisson`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalKind>,
    /// Mean arrival rate, requests (or sessions) per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Gamma and Weibull: coefficient of variation of the inter-arrival gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Gamma: shape parameter as in `vllm bench serve --burstiness` (cv = 1/sqrt(burstiness)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// On/off bursts (`arrival = "on-off"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
    /// Piecewise-linear rate schedule (Poisson arrivals): `[[workload.rate_schedule]]` points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_schedule: Vec<RatePoint>,
    /// Sinusoidal rate around `rate` (Poisson arrivals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diurnal: Option<Diurnal>,
    /// Ramp the rate over the requests, as `vllm bench serve --ramp-up-strategy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up: Option<RampUp>,
    /// Scale arrival times so the last of N requests is sent at exactly N / rate
    /// (what `vllm bench serve` does).
    #[serde(default)]
    pub rescale_to_rate: bool,
    /// Prompt length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthDist>,
    /// Output length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Joint (prompt, output) pairs from a file, instead of the two distributions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lengths: Option<JointLengths>,
    /// Requests longer than the context window: reject or clip.
    #[serde(default)]
    pub on_too_long: TooLong,
    /// What each request's client sends as `max_tokens`: `"output"` (its
    /// output length, `vllm bench serve`'s behaviour), a fixed cap (longer
    /// outputs are cut there), or `"none"`. Engines that reserve memory for
    /// the whole output reserve against it.
    #[serde(default, skip_serializing_if = "MaxTokens::is_output")]
    pub max_tokens: MaxTokens,
    /// Closed-loop users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<ClosedLoop>,
    /// Multi-turn sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Trace replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplay>,
    /// Request classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassConfig>,
}

impl WorkloadConfig {
    /// The arrival process in effect.
    pub fn arrival_kind(&self) -> ArrivalKind {
        match self.arrival {
            Some(a) => a,
            None if self.trace.is_some() => ArrivalKind::Trace,
            None if self.closed_loop.is_some() => ArrivalKind::ClosedLoop,
            None => ArrivalKind::Poisson,
        }
    }

    /// The parameters of the common (workload-level) arrival process.
    pub fn process(&self) -> ProcessConfig<'_> {
        ProcessConfig {
            kind: self.arrival_kind(),
            rate: self.rate,
            cv: self.cv,
            burstiness: self.burstiness,
            on_off: self.on_off.as_ref(),
            rate_schedule: &self.rate_schedule,
            diurnal: self.diurnal.as_ref(),
        }
    }
}

impl WorkloadConfig {
    /// Checks every workload value, given the run length.
    pub(super) fn validate(&self, num_requests: Option<u64>, duration_s: Option<f64>, warmup_s: f64) -> Check {
        let kind = self.arrival_kind();
        self.check_common_process(kind)?;
        self.check_kind_tables(kind, num_requests, duration_s, warmup_s)?;
        self.check_ramp(num_requests)?;
        // Lengths: the workload's, or every class's own.
        let trace = kind == ArrivalKind::Trace;
        self.check_lengths(trace)?;
        if let Some(s) = &self.sessions {
            check_sessions(s, trace)?;
        }
        self.check_classes(self.has_default_lengths(), trace)
    }

    /// The common arrival process: checked when some request uses it, refused when none does.
    fn check_common_process(&self, kind: ArrivalKind) -> Check {
        if matches!(kind, ArrivalKind::Offline | ArrivalKind::ClosedLoop)
            && !self.classes.is_empty()
            && self.classes.iter().all(|c| c.own_process().is_some())
        {
            return fail(
                "workload.classes",
                format!(
                    "arrival = \"{}\" sends requests of the classes that have a weight, and none has one",
                    kind.as_str()
                ),
                "give at least one class a weight",
            );
        }
        let uses_common = self.classes.is_empty() || self.classes.iter().any(|c| c.own_process().is_none());
        if uses_common {
            check_process("workload", &self.process())?;
        } else if self.arrival.is_some() || self.rate.is_some() {
            return fail(
                if self.rate.is_some() { "workload.rate" } else { "workload.arrival" },
                "no class uses the common arrival process: every class has its own",
                "remove it, or give some class a weight instead of its own rate",
            );
        }
        Ok(())
    }

    /// What the process kind needs (offline: a request count; closed loop, trace: their tables),
    /// and those tables only with their kind.
    fn check_kind_tables(
        &self,
        kind: ArrivalKind,
        num_requests: Option<u64>,
        duration_s: Option<f64>,
        warmup_s: f64,
    ) -> Check {
        match kind {
            ArrivalKind::Offline => {
                if self.sessions.is_some() || self.classes.iter().any(|c| c.own_process().is_some()) {
                    return fail(
                        if self.sessions.is_some() { "workload.sessions" } else { "workload.classes" },
                        "offline requests all arrive at t = 0: later session turns and classes with their own \
                         arrival process cannot be combined with them",
                        "use an open-loop process (e.g. arrival = \"poisson\") or a closed loop instead",
                    );
                }
                if warmup_s > 0.0 {
                    return fail(
                        "warmup_s",
                        "every request of an offline run arrives at t = 0, so a warm-up would exclude all of them",
                        "remove warmup_s (or set it to 0) for arrival = \"offline\"",
                    );
                }
                if duration_s.is_some() {
                    return fail(
                        "duration_s",
                        "offline arrivals need a request count",
                        "use num_requests with arrival = \"offline\"",
                    );
                }
            }
            ArrivalKind::ClosedLoop => match &self.closed_loop {
                None => {
                    return fail(
                        "workload.closed_loop",
                        "arrival = \"closed-loop\" needs [workload.closed_loop]",
                        "add closed_loop = { users = 32, think_time_s = { dist = \"exponential\", mean = 1.0 } }",
                    );
                }
                Some(c) => {
                    if c.users == 0 {
                        return fail("workload.closed_loop.users", "must be at least 1", "set users >= 1");
                    }
                    check_time("workload.closed_loop.think_time_s", &c.think_time_s)?;
                }
            },
            ArrivalKind::Trace => {
                let Some(t) = &self.trace else {
                    return fail(
                        "workload.trace",
                        "arrival = \"trace\" needs [workload.trace]",
                        "add [workload.trace] with file = \"traces/...\" and format = \"azure\", \"mooncake\", \"csv\" or \"vllm-json\"",
                    );
                };
                self.check_trace(t, num_requests, duration_s)?;
            }
            _ => {}
        }
        if self.closed_loop.is_some() && kind != ArrivalKind::ClosedLoop {
            return fail(
                "workload.closed_loop",
                "only applies to arrival = \"closed-loop\"",
                "set arrival = \"closed-loop\" or remove it",
            );
        }
        if self.trace.is_some() && kind != ArrivalKind::Trace {
            return fail(
                "workload.trace",
                "only applies to arrival = \"trace\"",
                "set arrival = \"trace\" or remove [workload.trace]",
            );
        }
        Ok(())
    }

    /// Joint lengths or a prompt and an output distribution from the
    /// workload: prompt and output lengths every class without its own can use.
    fn has_default_lengths(&self) -> bool {
        self.lengths.is_some() || (self.prompt_tokens.is_some() && self.output_tokens.is_some())
    }

    /// The workload's lengths: joint or two distributions, required unless a
    /// trace or the classes give them.
    fn check_lengths(&self, trace: bool) -> Check {
        if self.lengths.is_some() && (self.prompt_tokens.is_some() || self.output_tokens.is_some()) {
            return fail(
                "workload.lengths",
                "joint lengths and prompt_tokens/output_tokens are both set",
                "keep [workload.lengths] (pairs from a file) or the two distributions",
            );
        }
        if let Some(j) = &self.lengths {
            check_columns("workload.lengths", j.format, &j.prompt_column, &j.output_column)?;
        }
        for (key, d, zero) in [
            ("workload.prompt_tokens", &self.prompt_tokens, false),
            ("workload.output_tokens", &self.output_tokens, true),
        ] {
            if let Some(d) = d {
                check_length(key, d, zero)?;
            }
        }
        if !self.has_default_lengths() && !trace && self.classes.is_empty() {
            let missing =
                if self.prompt_tokens.is_none() { "workload.prompt_tokens" } else { "workload.output_tokens" };
            return fail(
                missing,
                "is required: it sets the request lengths",
                "write e.g. prompt_tokens = { dist = \"lognormal\", mean = 1000, cv = 1.0 }, or [workload.lengths] to resample a file",
            );
        }
        Ok(())
    }
}
