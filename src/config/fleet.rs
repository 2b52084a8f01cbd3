//! `[fleet]`: replicas that come and go over a run — an autoscaling policy
//! with cold starts and a warm pool, and replica failures (docs/fleet.md
//! gives every default's source).

use super::validate::{Check, fail, non_negative, positive};
use serde::{Deserialize, Serialize};

/// Most replica slots a fleet may have.
pub const MAX_SLOTS: u32 = 4096;

/// What drives the number of replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ScalePolicy {
    /// A fixed fleet (failures may still take replicas away).
    #[default]
    None,
    /// Keep the busy fraction of the ready replicas near `target` (0–1),
    /// as Kubernetes' HPA does for a utilisation metric:
    /// desired = ⌈ready × busy / target⌉, within a 10% tolerance.
    Utilisation,
    /// Keep the requests in each replica (waiting + running, vLLM's
    /// `num_requests_waiting + num_requests_running`) near `target`.
    Queue,
    /// Keep the tokens still to compute per replica (prompt chunks and
    /// outputs) near `target`.
    PendingTokens,
    /// Add a replica while the p90 TTFT of the last interval is above
    /// `target` ms; remove one while it is below half of it.
    Ttft,
    /// Follow `schedule`: a time-of-day table of replica counts.
    Schedule,
}

impl ScalePolicy {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            ScalePolicy::None => "none",
            ScalePolicy::Utilisation => "utilisation",
            ScalePolicy::Queue => "queue",
            ScalePolicy::PendingTokens => "pending-tokens",
            ScalePolicy::Ttft => "ttft",
            ScalePolicy::Schedule => "schedule",
        }
    }
}

/// What becomes of the requests on a replica that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Sent again at once to another replica, from scratch (their time so far counts).
    #[default]
    Retry,
    /// Lost: they fail with reason `replica_failed`.
    Lost,
}

/// How a scaling rule limits one step: by a number of replicas or a percentage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleKind {
    /// At most `value` replicas per period (HPA `type: Pods`).
    Pods,
    /// At most `value` percent of the replicas at the period's start (HPA `type: Percent`).
    Percent,
}

/// One HPA scaling policy: at most `value` replicas (or percent) per `period_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRule {
    /// `pods` or `percent`.
    #[serde(rename = "type")]
    pub kind: RuleKind,
    /// Replicas, or percent, per period.
    pub value: u32,
    /// The period, s (HPA `periodSeconds`).
    pub period_s: f64,
}

/// Which of several rules applies (HPA `selectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SelectRule {
    /// The rule that allows the largest change.
    #[default]
    Max,
    /// The rule that allows the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// `fleet.scale_up` or `fleet.scale_down`: HPA's `behavior.scaleUp` /
/// `behavior.scaleDown` rate limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRules {
    /// The rules.
    pub policies: Vec<ScalingRule>,
    /// Which applies when several do.
    #[serde(default)]
    pub select: SelectRule,
}

impl ScalingRules {
    /// HPA's default scale-up: at most max(4 pods, 100%) per 15 s.
    pub fn hpa_up() -> Self {
        ScalingRules {
            policies: vec![
                ScalingRule { kind: RuleKind::Percent, value: 100, period_s: 15.0 },
                ScalingRule { kind: RuleKind::Pods, value: 4, period_s: 15.0 },
            ],
            select: SelectRule::Max,
        }
    }

    /// HPA's default scale-down: at most 100% per 15 s.
    pub fn hpa_down() -> Self {
        ScalingRules {
            policies: vec![ScalingRule { kind: RuleKind::Percent, value: 100, period_s: 15.0 }],
            select: SelectRule::Max,
        }
    }

    fn check(&self, key: &str) -> Check {
        if self.policies.is_empty() && self.select != SelectRule::Disabled {
            return fail(
                &format!("{key}.policies"),
                "is empty",
                "list at least one rule, e.g. policies = [{ type = \"pods\", value = 4, period_s = 15 }], or set select = \"disabled\"",
            );
        }
        for (i, r) in self.policies.iter().enumerate() {
            if r.value == 0 {
                return fail(
                    &format!("{key}.policies[{i}].value"),
                    "is 0",
                    "use a positive number of replicas or percent",
                );
            }
            if !(r.period_s > 0.0 && r.period_s <= 1800.0) {
                return fail(
                    &format!("{key}.policies[{i}].period_s"),
                    format!("is {}, outside (0, 1800]", r.period_s),
                    "use a period between 1 and 1800 s, as HPA allows",
                );
            }
        }
        Ok(())
    }
}

/// One row of `fleet.schedule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEntry {
    /// From this time of the run (modulo `schedule_period_s`), s.
    pub at_s: f64,
    /// Replicas wanted from then on.
    pub replicas: u32,
}

/// One scripted failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedFailure {
    /// When, s.
    pub at_s: f64,
    /// Which replica slot (0-based).
    #[serde(default)]
    pub replica: u32,
    /// Time to repair; unset: `fleet.repair_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_s: Option<f64>,
}

/// `[fleet]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// The scaling policy.
    pub policy: ScalePolicy,
    /// Fewest replicas the policy keeps (0: scale to zero; requests then
    /// wait at the router until a replica is ready).
    pub min_replicas: u32,
    /// Most replicas; unset: `hardware.replicas` (the replicas at the start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// The policy's target: busy fraction (`utilisation`), requests per
    /// replica (`queue`), tokens per replica (`pending-tokens`) or TTFT ms
    /// (`ttft`); ignored by `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// How often the policy looks, s (HPA's sync period: 15 s).
    pub interval_s: f64,
    /// A scale-up acts on the smallest recommendation of this window, s (HPA default 0).
    pub scale_up_delay_s: f64,
    /// A scale-down acts on the largest recommendation of this window, s (HPA default 300).
    pub scale_down_delay_s: f64,
    /// No scaling action within this long of the previous one, s.
    pub cooldown_s: f64,
    /// Rate limits on scale-ups (HPA `behavior.scaleUp.policies`; default
    /// max(4 replicas, 100%) per 15 s).
    pub scale_up: ScalingRules,
    /// Rate limits on scale-downs (HPA `behavior.scaleDown.policies`;
    /// default 100% per 15 s).
    pub scale_down: ScalingRules,
    /// `policy = "schedule"`: (time, replicas) rows, ascending times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<ScheduleEntry>,
    /// The schedule repeats with this period, s (86,400: daily).
    pub schedule_period_s: f64,
    /// Cold start: getting a GPU node and starting the container, s.
    pub provision_s: f64,
    /// Cold start: storage bandwidth the weights load at, GB/s.
    pub weight_load_gbps: f64,
    /// Cold start: engine start-up after the weights are in (memory
    /// profiling, CUDA-graph capture, compilation), s.
    pub engine_start_s: f64,
    /// Replicas kept started but not serving (billed, at idle power), ready
    /// `warm_start_s` after a scale-up takes one; the pool refills with a cold start.
    pub warm_pool: u32,
    /// Time a warm replica takes to serve, s.
    pub warm_start_s: f64,
    /// Mean time between failures of one replica, hours (unset: no random failures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtbf_h: Option<f64>,
    /// Time a failed replica takes to serve again (replacement, reload and restart), s.
    pub repair_s: f64,
    /// What becomes of the requests on a failed replica.
    pub on_failure: OnFailure,
    /// Failures at given times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<ScriptedFailure>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            policy: ScalePolicy::None,
            min_replicas: 1,
            max_replicas: None,
            target: None,
            interval_s: 15.0,
            scale_up_delay_s: 0.0,
            scale_down_delay_s: 300.0,
            cooldown_s: 0.0,
            scale_up: ScalingRules::hpa_up(),
            scale_down: ScalingRules::hpa_down(),
            schedule: Vec::new(),
            schedule_period_s: 86_400.0,
            provision_s: 60.0,
            weight_load_gbps: 2.0,
            engine_start_s: 30.0,
            warm_pool: 0,
            warm_start_s: 5.0,
            mtbf_h: None,
            repair_s: 600.0,
            on_failure: OnFailure::Retry,
            failures: Vec::new(),
        }
    }
}

impl FleetConfig {
    /// Replica slots: the most replicas that can run at once (a fleet
    /// without a policy keeps its `initial` ones).
    pub fn slots(&self, initial: u32) -> u32 {
        if self.policy == ScalePolicy::None { initial } else { self.max_replicas.unwrap_or(initial).max(initial) }
    }

    /// Whether anything can change the fleet during the run.
    pub fn is_dynamic(&self) -> bool {
        self.policy != ScalePolicy::None || self.mtbf_h.is_some() || !self.failures.is_empty()
    }

    /// Checks the values; `initial` is `hardware.replicas`.
    pub(super) fn validate(&self, initial: u32) -> Check {
        let max = self.slots(initial);
        if self.policy != ScalePolicy::None {
            if self.min_replicas > max {
                return fail(
                    "fleet.min_replicas",
                    format!("is {} but max_replicas is {max}", self.min_replicas),
                    "set min_replicas <= max_replicas",
                );
            }
            if initial < self.min_replicas || initial > max {
                return fail(
                    "hardware.replicas",
                    format!("starts the fleet at {initial}, outside [{}, {max}]", self.min_replicas),
                    "start between fleet.min_replicas and fleet.max_replicas",
                );
            }
        }
        if max > MAX_SLOTS {
            return fail(
                "fleet.max_replicas",
                format!("is {max}, above the limit of {MAX_SLOTS}"),
                format!("use at most {MAX_SLOTS}"),
            );
        }
        let metric = matches!(
            self.policy,
            ScalePolicy::Utilisation | ScalePolicy::Queue | ScalePolicy::PendingTokens | ScalePolicy::Ttft
        );
        match self.target {
            Some(t) if metric => {
                positive("fleet.target", t)?;
                if self.policy == ScalePolicy::Utilisation && t > 1.0 {
                    return fail("fleet.target", format!("is {t}: a busy fraction is at most 1"), "use e.g. 0.7");
                }
            }
            None if metric => {
                let eg = match self.policy {
                    ScalePolicy::Utilisation => "target = 0.7",
                    ScalePolicy::Queue => "target = 32 (requests per replica)",
                    ScalePolicy::PendingTokens => "target = 20000 (tokens per replica)",
                    _ => "target = 500 (ms)",
                };
                return fail(
                    "fleet.target",
                    format!("policy = \"{}\" needs a target", self.policy.as_str()),
                    format!("set {eg}"),
                );
            }
            Some(_) if self.policy == ScalePolicy::Schedule => {
                return fail(
                    "fleet.target",
                    format!("policy = \"{}\" takes no target", self.policy.as_str()),
                    "remove it",
                );
            }
            _ => {} // policy = "none" ignores it (so that a what-if can switch the policy off)
        }
        if self.policy == ScalePolicy::Schedule {
            if self.schedule.is_empty() {
                return fail(
                    "fleet.schedule",
                    "policy = \"schedule\" needs a schedule",
                    "add schedule = [{ at_s = 0, replicas = 2 }, { at_s = 28800, replicas = 6 }]",
                );
            }
            for (i, e) in self.schedule.iter().enumerate() {
                non_negative(&format!("fleet.schedule[{i}].at_s"), e.at_s)?;
                if i > 0 && e.at_s <= self.schedule[i - 1].at_s {
                    return fail(
                        &format!("fleet.schedule[{i}].at_s"),
                        "times must increase",
                        "list the rows in time order",
                    );
                }
                if e.replicas < self.min_replicas || e.replicas > max {
                    return fail(
                        &format!("fleet.schedule[{i}].replicas"),
                        format!("is {}, outside [{}, {max}]", e.replicas, self.min_replicas),
                        "stay within min_replicas and max_replicas",
                    );
                }
            }
        } else if !self.schedule.is_empty() {
            return fail("fleet.schedule", "is set but policy is not \"schedule\"", "set policy = \"schedule\"");
        }
        positive("fleet.interval_s", self.interval_s)?;
        non_negative("fleet.scale_up_delay_s", self.scale_up_delay_s)?;
        non_negative("fleet.scale_down_delay_s", self.scale_down_delay_s)?;
        non_negative("fleet.cooldown_s", self.cooldown_s)?;
        self.scale_up.check("fleet.scale_up")?;
        self.scale_down.check("fleet.scale_down")?;
        positive("fleet.schedule_period_s", self.schedule_period_s)?;
        non_negative("fleet.provision_s", self.provision_s)?;
        positive("fleet.weight_load_gbps", self.weight_load_gbps)?;
        non_negative("fleet.engine_start_s", self.engine_start_s)?;
        non_negative("fleet.warm_start_s", self.warm_start_s)?;
        non_negative("fleet.repair_s", self.repair_s)?;
        if let Some(m) = self.mtbf_h {
            positive("fleet.mtbf_h", m)?;
        }
        for (i, f) in self.failures.iter().enumerate() {
            non_negative(&format!("fleet.failures[{i}].at_s"), f.at_s)?;
            if f.replica >= max {
                return fail(
                    &format!("fleet.failures[{i}].replica"),
                    format!("is {}, but the fleet has {max} replica slots (0-based)", f.replica),
                    format!("use a replica below {max}"),
                );
            }
            if let Some(r) = f.repair_s {
                non_negative(&format!("fleet.failures[{i}].repair_s"), r)?;
            }
        }
        Ok(())
    }
}
