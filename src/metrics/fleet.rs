//! The fleet over a run (`[fleet]`): replicas over time, what they cost,
//! failures, and SLO attainment by arrival time.

/// Most rows of `slo_over_time` (finer buckets are merged).
pub const MAX_WINDOWS: usize = 96;

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

/// The fleet at one instant (a row of the replicas-over-time series).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FleetSample {
    /// Simulated time, s.
    pub t: f64,
    /// Replicas serving.
    pub ready: u32,
    /// Replicas starting (billed, not serving).
    pub starting: u32,
    /// Replicas draining (finishing their requests, taking no new ones).
    pub draining: u32,
    /// Replicas failed, under repair.
    pub failed: u32,
    /// Warm standby replicas (billed, not serving).
    pub warm: u32,
}
