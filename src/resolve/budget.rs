//! What one run of a resolved setup will cost (requests, memory, wall
//! time, simulated horizon), and the refusal of a run beyond the
//! [`crate::limits`] in force, naming the key that binds.

use super::Setup;
use crate::error::ConfigError;
use crate::limits::{
    BASE_BYTES, BYTES_PER_ADAPTER, BYTES_PER_MEASURED, BYTES_PER_REPLICA, BYTES_PER_USER, FLAT_AFTER, Limits,
    MAX_CLOCK_S, MAX_REQUEST_IDS, SECONDS_PER_REQUEST,
};

/// The work a run is expected to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Requests (None: not known before simulating, e.g. closed loop).
    pub requests: Option<f64>,
    /// Time of the last arrival, simulated s (None: not known).
    pub horizon_s: Option<f64>,
    /// Peak memory, bytes: [`BASE_BYTES`], the measured requests up to
    /// [`FLAT_AFTER`], replicas, LoRA adapters and closed-loop users (a
    /// backlog is watched while the run goes).
    pub memory_bytes: f64,
    /// The part of `memory_bytes` that grows with a setting, and the setting.
    pub memory_driver: Option<(&'static str, f64)>,
}

impl Estimate {
    /// Projected wall time on one core, s (None: the request count is not known).
    pub fn projected_s(&self) -> Option<f64> {
        self.requests.map(|n| n * SECONDS_PER_REQUEST)
    }

    /// The estimate in words.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.requests {
            parts.push(format!("about {} requests", human(n)));
        }
        if let Some(t) = self.projected_s() {
            parts.push(if t < 1.0 {
                "under a second of wall time".into()
            } else {
                format!("about {} of wall time", duration(t))
            });
        }
        parts.push(format!("about {} of memory", bytes(self.memory_bytes)));
        if let Some(h) = self.horizon_s {
            parts.push(format!("{} s of simulated time ({})", human(h), span(h)));
        }
        parts.join(", ")
    }
}

/// The work of simulating `setup`, from its workload and deployment alone.
pub fn estimate(setup: &Setup) -> Estimate {
    let w = &setup.workload;
    let rate = w.offered_rate.filter(|r| r.is_finite() && *r > 0.0 && !w.offline && w.closed_loop.is_none());
    // Sessions count their rate in sessions: each brings its turns.
    let turns = match &setup.scenario.workload.sessions {
        Some(s) => s.turns.mean(),
        None => Some(1.0),
    };
    let rate_requests = rate.zip(turns).map(|(r, t)| r * t);
    let trace_rows = w.trace.as_ref().filter(|t| !t.repeat).map(|t| (t.hi - t.lo) as f64);
    let users = w.closed_loop.as_ref().map(|(u, _)| *u as f64);
    let requests = match (w.num_requests, w.horizon) {
        (Some(n), _) => Some(n as f64),
        (None, Some(h)) => trace_rows.or(rate_requests.map(|r| r * h)),
        (None, None) => trace_rows,
    };
    // A closed loop sends at least one request per user.
    let requests = match (requests, users) {
        (None, Some(u)) => Some(u),
        (r, _) => r,
    };
    let horizon_s = match (w.horizon, w.num_requests) {
        (Some(h), _) => Some(h),
        (None, Some(n)) if w.trace.is_none() => rate_requests.map(|r| n as f64 / r),
        _ => None,
    };
    let replicas: f64 = setup.pools.iter().map(|p| p.replicas as f64).sum();
    let adapters = setup.scenario.lora.as_ref().map_or(0.0, |l| l.adapters as f64);
    let drivers = [
        ("requests", requests.unwrap_or(0.0).min(FLAT_AFTER) * BYTES_PER_MEASURED),
        ("hardware.replicas", replicas * BYTES_PER_REPLICA),
        ("lora.adapters", adapters * BYTES_PER_ADAPTER),
        ("workload.closed_loop.users", users.unwrap_or(0.0) * BYTES_PER_USER),
    ];
    let memory_bytes = BASE_BYTES + drivers.iter().map(|(_, b)| b).sum::<f64>();
    let memory_driver = drivers.into_iter().filter(|(_, b)| *b > 0.0).max_by(|a, b| a.1.total_cmp(&b.1));
    Estimate { requests, horizon_s, memory_bytes, memory_driver }
}

/// Refuses a run whose estimated work exceeds `limits` (or the clock),
/// giving the estimate and the flag that raises the limit.
pub fn check(setup: &Setup, limits: &Limits) -> Result<(), ConfigError> {
    let e = estimate(setup);
    let what = e.describe();
    if let Some(h) = e.horizon_s
        && h > MAX_CLOCK_S
    {
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; beyond {MAX_CLOCK_S:e} s the clock cannot resolve a microsecond"
        ))
        .key(horizon_key(setup))
        .hint("raise the arrival rate or lower num_requests / duration_s"));
    }
    let request_key = || match (setup.workload.num_requests, setup.workload.closed_loop.is_some()) {
        (Some(_), _) => "num_requests",
        (None, true) => "workload.closed_loop.users",
        (None, false) => "duration_s",
    };
    if e.memory_bytes > limits.max_memory_bytes {
        let (key, part) = e.memory_driver.unwrap_or(("requests", 0.0));
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; memory binds: the limit is {:.1} GiB (--max-memory), and {} of it \
             is for `{key}`",
            limits.max_memory_bytes / 1073741824.0,
            bytes(part)
        ))
        .key(if key == "requests" { request_key() } else { key })
        .hint("lower that setting, or pass --max-memory GIB to allow it"));
    }
    if let Some(n) = e.requests
        && n > limits.max_requests.min(MAX_REQUEST_IDS) as f64
    {
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; the limit is {} requests ({})",
            human(limits.max_requests.min(MAX_REQUEST_IDS) as f64),
            if limits.max_requests < MAX_REQUEST_IDS { "--max-requests" } else { "request ids are 32-bit" }
        ))
        .key(request_key())
        .hint("shorten the run, or split it into several seeds"));
    }
    if let Some(t) = e.projected_s()
        && t > limits.max_projected_s
    {
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; time binds: the limit is {} of projected wall time \
             (--max-projected-time; memory would be {})",
            duration(limits.max_projected_s),
            bytes(e.memory_bytes)
        ))
        .key(request_key())
        .hint("pass --max-projected-time SECONDS to allow it, or shorten the run"));
    }
    if let Some(h) = e.horizon_s
        && h > limits.max_horizon_s
    {
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; the limit is {} s (--max-horizon)",
            human(limits.max_horizon_s)
        ))
        .key(horizon_key(setup))
        .hint("pass --max-horizon SECONDS to allow it, or shorten the run"));
    }
    Ok(())
}

/// The key that sets the horizon: `duration_s`, or the rate for `num_requests` runs.
fn horizon_key(setup: &Setup) -> &'static str {
    if setup.workload.horizon.is_some() { "duration_s" } else { "workload.rate" }
}

/// A count or time in plain digits, or in powers of ten when large.
fn human(x: f64) -> String {
    if x.abs() < 1e7 { format!("{}", x.round() as i64) } else { format!("{x:.2e}") }
}

/// A wall time in words.
fn duration(s: f64) -> String {
    match s {
        s if s >= 86400.0 => format!("{:.1} days", s / 86400.0),
        s if s >= 3600.0 => format!("{:.1} hours", s / 3600.0),
        s if s >= 60.0 => format!("{:.0} min", s / 60.0),
        s if s >= 1.0 => format!("{s:.0} s"),
        _ => "under a second".into(),
    }
}

fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e12 => format!("{:.1} TB", b / 1e12),
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.0} MB", b / 1e6),
        b => format!("{:.0} kB", (b / 1e3).max(1.0)),
    }
}

fn span(s: f64) -> String {
    match s {
        s if s >= 365.25 * 86400.0 => {
            let y = s / (365.25 * 86400.0);
            if y < 1e4 { format!("{y:.1} years") } else { format!("{y:.2e} years") }
        }
        s if s >= 86400.0 => format!("{:.1} days", s / 86400.0),
        s if s >= 3600.0 => format!("{:.1} hours", s / 3600.0),
        s => format!("{:.0} minutes", s / 60.0),
    }
}
