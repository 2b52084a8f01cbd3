//! `[[workload.classes]]`: the kinds of request in the mix, each with a share
//! of the common arrivals or a process of its own, its own lengths,
//! objectives, priority, shared prefix and admission limit; and their checks.

use super::arrivals::check_process;
use super::lengths::check_length;
use super::traces::check_columns;
use super::{ArrivalKind, Diurnal, JointLengths, LengthDist, OnOff, ProcessConfig, RatePoint, WorkloadConfig};
use crate::config::SloConfig;
use crate::config::validate::{Check, fail, positive, slo as check_slo};
use serde::{Deserialize, Serialize};

/// `[[workload.classes]]`: one kind of request in the mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Name, used in `summary.json` and `requests.csv`.
    pub name: String,
    /// Share of the common arrival process (relative weight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Own arrival process instead of a share: `poisson`, `gamma`, `weibull`,
    /// `deterministic` or `on-off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalKind>,
    /// Own arrival rate, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Own process: gap coefficient of variation (gamma, weibull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Own process: gamma shape (vLLM's burstiness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// Own process: on/off bursts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
    /// Own process: piecewise-linear rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_schedule: Vec<RatePoint>,
    /// Own process: sinusoidal rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diurnal: Option<Diurnal>,
    /// Prompt lengths (default: the workload's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthDist>,
    /// Output lengths (default: the workload's); `fixed` 0 makes the class
    /// prefill-only (embeddings, scoring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Joint (prompt, output) pairs from a file (default: the workload's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lengths: Option<JointLengths>,
    /// Objectives of this class (default: `[slo]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloConfig>,
    /// Scheduling priority (lower is served first, as vLLM; ties by arrival), used by priority scheduling.
    #[serde(default)]
    pub priority: i32,
    /// Classes with the same prefix group share one system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_group: Option<String>,
    /// Tokens of that shared system prompt, added in front of every prompt.
    #[serde(default)]
    pub prefix_tokens: u32,
    /// Admission limit: prompt + output tokens per second accepted for this
    /// class (a token bucket); requests beyond it are refused (`rate_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_rate_limit: Option<f64>,
    /// Bucket size of the limit, tokens (default: one second's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_burst: Option<f64>,
    /// Speculative decoding: acceptance rate α of this class's draft tokens
    /// (default: `engine.speculative.acceptance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_acceptance: Option<f64>,
}

impl ClassConfig {
    /// The class's own arrival process, if it has one.
    pub fn own_process(&self) -> Option<ProcessConfig<'_>> {
        let own = self.arrival.is_some()
            || self.rate.is_some()
            || self.on_off.is_some()
            || !self.rate_schedule.is_empty()
            || self.diurnal.is_some();
        own.then(|| ProcessConfig {
            kind: self.arrival.unwrap_or(if self.on_off.is_some() { ArrivalKind::OnOff } else { ArrivalKind::Poisson }),
            rate: self.rate,
            cv: self.cv,
            burstiness: self.burstiness,
            on_off: self.on_off.as_ref(),
            rate_schedule: &self.rate_schedule,
            diurnal: self.diurnal.as_ref(),
        })
    }
}

impl WorkloadConfig {
    pub(super) fn check_classes(&self, has_default: bool, trace: bool) -> Check {
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            let key = format!("workload.classes[{i}]");
            let k = |s: &str| format!("{key}.{s}");
            if c.name.trim().is_empty() {
                return fail(&k("name"), "is empty", "name the class, e.g. name = \"chat\"");
            }
            if c.name.contains([',', '"', '\n', '\r']) {
                return fail(
                    &k("name"),
                    format!("class name {:?} contains a comma, quote or line break", c.name),
                    "use letters, digits, '-' or '_'",
                );
            }
            if !seen.insert(c.name.as_str()) {
                return fail(
                    &k("name"),
                    format!("class \"{}\" is defined twice", c.name),
                    "give every class its own name",
                );
            }
            match (c.weight, c.own_process()) {
                (Some(_), Some(_)) => {
                    return fail(
                        &k("weight"),
                        "a class takes a share of the common arrivals (weight) or has its own process (rate, arrival), not both",
                        "keep one of them",
                    );
                }
                (Some(w), None) => positive(&k("weight"), w)?,
                (None, None) if self.classes.len() > 1 && !trace => {
                    return fail(
                        &k("weight"),
                        format!("class \"{}\" has neither a weight nor its own arrival process", c.name),
                        "set weight = <share> or rate = <requests per second>",
                    );
                }
                (None, Some(p)) => {
                    if matches!(p.kind, ArrivalKind::ClosedLoop | ArrivalKind::Trace | ArrivalKind::Offline) {
                        return fail(
                            &k("arrival"),
                            format!("a class's own process cannot be \"{}\"", p.kind.as_str()),
                            "use poisson, gamma, weibull, deterministic or on-off, or give the class a weight",
                        );
                    }
                    check_process(&key, &p)?;
                }
                _ => {}
            }
            if let Some(j) = &c.lengths {
                if c.prompt_tokens.is_some() || c.output_tokens.is_some() {
                    return fail(
                        &k("lengths"),
                        "joint lengths and prompt_tokens/output_tokens are both set",
                        "keep one of them",
                    );
                }
                check_columns(&k("lengths"), j.format, &j.prompt_column, &j.output_column)?;
            }
            if let Some(d) = &c.prompt_tokens {
                check_length(&k("prompt_tokens"), d, false)?;
            }
            if let Some(d) = &c.output_tokens {
                check_length(&k("output_tokens"), d, true)?;
            }
            let own = c.lengths.is_some() || (c.prompt_tokens.is_some() && c.output_tokens.is_some());
            let partial = c.prompt_tokens.is_some() || c.output_tokens.is_some();
            if !trace && !own && !has_default {
                let missing = if c.prompt_tokens.is_none() && (partial || self.prompt_tokens.is_none()) {
                    "prompt_tokens"
                } else {
                    "output_tokens"
                };
                let merged = if missing == "prompt_tokens" {
                    self.prompt_tokens.is_some()
                } else {
                    self.output_tokens.is_some()
                };
                if !merged {
                    return fail(
                        &k(missing),
                        format!("class \"{}\" has no {missing} and the workload sets none", c.name),
                        format!("set {missing} in the class or in [workload]"),
                    );
                }
            }
            if let Some(s) = &c.slo {
                if s.percentile.is_some() || s.min_attainment.is_some() {
                    return fail(
                        &k(if s.percentile.is_some() { "slo.percentile" } else { "slo.min_attainment" }),
                        "the rule for capacity and plan applies to every class alike",
                        "set percentile or min_attainment in [slo], and only objectives (ttft_ms, tpot_ms, e2e_ms) in a class",
                    );
                }
                check_slo(&k("slo"), s)?;
            }
            if let Some(r) = c.token_rate_limit {
                positive(&k("token_rate_limit"), r)?;
            }
            if let Some(b) = c.token_burst {
                positive(&k("token_burst"), b)?;
                if c.token_rate_limit.is_none() {
                    return fail(
                        &k("token_burst"),
                        "applies with token_rate_limit",
                        "set token_rate_limit too, or remove token_burst",
                    );
                }
            }
            if let Some(a) = c.spec_acceptance {
                crate::config::validate::acceptance(&k("spec_acceptance"), a)?;
            }
            if c.prefix_group.is_some() && c.prefix_tokens == 0 {
                return fail(
                    &k("prefix_tokens"),
                    "a prefix group needs the length of its shared prompt",
                    "set prefix_tokens = <tokens of the shared system prompt>",
                );
            }
        }
        Ok(())
    }
}
