//! The fleet over a run (`[fleet]`): replicas over time, what they cost,
//! failures, and SLO attainment by arrival time.

use crate::fleet::{FleetOutput, FleetSample, SloTimeline};

/// Most rows of `slo_over_time` (finer buckets are merged).
const MAX_WINDOWS: usize = 96;

/// The fleet as it ran (`[fleet]`; docs/fleet.md).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FleetSummary {
    /// Scaling policy (`none`: a fixed fleet, failures only).
    pub policy: String,
    /// The policy's target (null for `none` and `schedule`).
    pub target: Option<f64>,
    /// Fewest replicas the policy keeps.
    pub min_replicas: u32,
    /// Most replicas (replica slots).
    pub max_replicas: u32,
    /// Replicas serving at the start.
    pub initial_replicas: u32,
    /// One replica's cold start: provisioning + weights / storage bandwidth + engine start-up, s.
    pub cold_start_s: f64,
    /// Warm standby replicas kept (billed, not serving).
    pub warm_pool: u32,
    /// Replicas billed on average over the window (standbys included).
    pub mean_billed_replicas: f64,
    /// Most replicas serving at once.
    pub peak_ready_replicas: u32,
    /// Fewest replicas serving at once (after t = 0).
    pub min_ready_replicas: u32,
    /// GPU-hours billed over the window (replicas while starting, serving,
    /// draining or under repair, and standbys).
    pub gpu_hours: f64,
    /// What they cost, USD (GPU-hours × price; energy is in `energy`).
    pub usd: f64,
    /// Replicas added by the policy.
    pub scale_ups: u64,
    /// Replicas removed by the policy.
    pub scale_downs: u64,
    /// Net effect of the policy: requests that met their SLO with this
    /// fleet, less those that met it with the fleet frozen at its initial
    /// size (same arrivals), over the whole run. Negative when the policy
    /// met fewer objectives than doing nothing (null without a policy).
    pub rescued_requests: Option<i64>,
    /// The windows where the policy did better, summed: requests that met
    /// their SLO only because capacity arrived in time (null without a policy).
    pub slo_gained_requests: Option<u64>,
    /// The windows where it did worse, summed: requests that met their SLO
    /// with the frozen fleet and not with this one, e.g. after a scale-down
    /// (null without a policy). gained − lost = rescued_requests.
    pub slo_lost_requests: Option<u64>,
    /// Failures and what they cost.
    pub failures: FailureSummary,
    /// The fleet after every change: serving, starting, draining, failed, warm.
    pub replicas_over_time: Vec<FleetSample>,
    /// Requests by arrival time and the share that met their SLO.
    pub slo_over_time: Vec<SloWindow>,
}

/// Replica failures over the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FailureSummary {
    /// Mean time between failures of one replica, hours (null: none at random).
    pub mtbf_h: Option<f64>,
    /// Repair time, s.
    pub repair_s: f64,
    /// `retry` or `lost`.
    pub on_failure: String,
    /// Failures (random and scripted).
    pub failures: u64,
    /// Requests on failed replicas that were lost (they count as failed with `replica_failed`).
    pub lost_requests: u64,
    /// Requests on failed replicas sent again from scratch.
    pub retried_requests: u64,
    /// Replica-seconds spent failed.
    pub downtime_replica_s: f64,
}

/// Requests that arrived in one time window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SloWindow {
    /// Window start, s.
    pub t_start: f64,
    /// Window end, s.
    pub t_end: f64,
    /// Requests that arrived in it.
    pub requests: u64,
    /// Of them, completed.
    pub completed: u64,
    /// Of them, met every objective of their class.
    pub slo_met: u64,
    /// slo_met / requests (null without requests).
    pub attainment: Option<f64>,
    /// Requests of the window that met their SLO with the fleet frozen at
    /// its initial size (same arrivals; null without a policy).
    pub slo_met_frozen: Option<u64>,
    /// slo_met − slo_met_frozen: positive where capacity arrived in time,
    /// negative where the policy did worse than the frozen fleet (null
    /// without a policy).
    pub rescued: Option<i64>,
}

/// Builds the fleet summary; `duration` is the window, `gpus` GPUs per replica.
pub fn summarize(
    setup: &crate::Setup,
    f: &FleetOutput,
    timeline: &SloTimeline,
    frozen: Option<&SloTimeline>,
    duration: f64,
    gpus: u32,
    price: f64,
) -> FleetSummary {
    let cfg = setup.scenario.fleet.clone().unwrap_or_default();
    let gpu_hours = f.billed_replica_s * gpus as f64 / 3600.0;
    let after: Vec<&FleetSample> = f.series.iter().collect();
    let ready = |s: &&FleetSample| s.ready;
    let merge = timeline.buckets.len().div_ceil(MAX_WINDOWS).max(1);
    let slo_over_time: Vec<SloWindow> = timeline
        .buckets
        .chunks(merge)
        .enumerate()
        .map(|(k, c)| {
            let sum = |g: &dyn Fn(&crate::fleet::SloBucket) -> u64| c.iter().map(g).sum::<u64>();
            let (requests, slo_met) = (sum(&|b| b.requests), sum(&|b| b.slo_met));
            let w = timeline.bucket_s * merge as f64;
            let slo_met_frozen =
                frozen.map(|z| z.buckets.iter().skip(k * merge).take(merge).map(|b| b.slo_met).sum::<u64>());
            SloWindow {
                t_start: k as f64 * w,
                t_end: (k + 1) as f64 * w,
                requests,
                completed: sum(&|b| b.completed),
                slo_met,
                attainment: (requests > 0).then(|| slo_met as f64 / requests as f64),
                slo_met_frozen,
                rescued: slo_met_frozen.map(|z| slo_met as i64 - z as i64),
            }
        })
        .collect();
    FleetSummary {
        policy: cfg.policy.as_str().to_string(),
        target: cfg.target,
        // A fleet without a policy is its initial replicas.
        min_replicas: if cfg.policy == crate::config::ScalePolicy::None {
            setup.scenario.hardware.replicas
        } else {
            cfg.min_replicas
        },
        max_replicas: cfg.slots(setup.scenario.hardware.replicas),
        initial_replicas: setup.scenario.hardware.replicas,
        cold_start_s: f.cold_start_s,
        warm_pool: cfg.warm_pool,
        mean_billed_replicas: f.billed_replica_s / duration,
        peak_ready_replicas: after.iter().map(ready).max().unwrap_or(0),
        min_ready_replicas: after.iter().map(ready).min().unwrap_or(0),
        gpu_hours,
        usd: gpu_hours * price,
        scale_ups: f.scale_ups,
        scale_downs: f.scale_downs,
        rescued_requests: frozen.map(|_| slo_over_time.iter().filter_map(|w| w.rescued).sum()),
        slo_gained_requests: frozen
            .map(|_| slo_over_time.iter().filter_map(|w| w.rescued).filter(|&d| d > 0).map(|d| d as u64).sum()),
        slo_lost_requests: frozen
            .map(|_| slo_over_time.iter().filter_map(|w| w.rescued).filter(|&d| d < 0).map(|d| (-d) as u64).sum()),
        failures: FailureSummary {
            mtbf_h: cfg.mtbf_h,
            repair_s: cfg.repair_s,
            on_failure: match cfg.on_failure {
                crate::config::OnFailure::Retry => "retry".into(),
                crate::config::OnFailure::Lost => "lost".into(),
            },
            failures: f.failures,
            lost_requests: f.lost,
            retried_requests: f.retried,
            downtime_replica_s: f.downtime_s,
        },
        replicas_over_time: f.series.clone(),
        slo_over_time,
    }
}
