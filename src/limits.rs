//! Bounds on one run's work, so that no single value can make a run
//! unbounded: the work is estimated before simulating and refused beyond a
//! documented limit unless the user raises it; the simulated clock and the
//! wall clock are guarded while it runs.
//!
//! - **Requests** (default limit [`Limits::DEFAULT_MAX_REQUESTS`]): memory
//!   grows with them, about [`BYTES_PER_REQUEST`] each.
//! - **Simulated horizon** (default limit [`Limits::DEFAULT_MAX_HORIZON_S`]):
//!   the last arrival's expected time.
//! - **The clock** ([`MAX_CLOCK_S`], not raisable): beyond it an `f64` clock
//!   no longer resolves a microsecond, so latencies would print as 0.00 ms.
//!   A run whose events pass it (say, a KV link of 10⁻¹² GB/s) is stopped.
//! - **Wall time** (`--max-wall-time`): a run still going is stopped.
//!
//! The CLI sets the limits once per process ([`set`]); the library uses the
//! defaults otherwise. The simulation polls the stop flag ([`stop_requested`])
//! but results of runs that finish are unaffected by it.

use crate::Setup;
use crate::error::ConfigError;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Beyond this simulated time, s (about 32 years), the clock's resolution
/// falls below a microsecond (2⁻²³ s at 10⁹ s).
pub const MAX_CLOCK_S: f64 = 1e9;

/// Memory one request costs while simulating and summarising, bytes
/// (measured: `servesim bench`, peak RSS over requests at 10⁶ and 10⁷).
pub const BYTES_PER_REQUEST: f64 = 160.0;

/// What one run may do before it is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Most requests one run may simulate.
    pub max_requests: u64,
    /// Latest expected arrival, simulated seconds.
    pub max_horizon_s: f64,
}

impl Limits {
    /// 5·10⁷ requests: about 8 GB at [`BYTES_PER_REQUEST`].
    pub const DEFAULT_MAX_REQUESTS: u64 = 50_000_000;
    /// 10⁸ s, about three years of simulated traffic.
    pub const DEFAULT_MAX_HORIZON_S: f64 = 1e8;
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_requests: Self::DEFAULT_MAX_REQUESTS, max_horizon_s: Self::DEFAULT_MAX_HORIZON_S }
    }
}

static LIMITS: OnceLock<Limits> = OnceLock::new();
static STOP: AtomicBool = AtomicBool::new(false);
static SIMULATED: AtomicU64 = AtomicU64::new(0);

/// Adds `n` requests to the count simulated in this process (the event loop
/// reports its arrivals every 65,536 events, for progress bars).
pub fn note_simulated(n: u64) {
    SIMULATED.fetch_add(n, Ordering::Relaxed);
}

/// Requests simulated in this process so far (all runs together).
pub fn simulated() -> u64 {
    SIMULATED.load(Ordering::Relaxed)
}

/// Sets this process's limits (once; later calls are ignored).
pub fn set(limits: Limits) {
    let _ = LIMITS.set(limits);
}

/// This process's limits.
pub fn current() -> Limits {
    LIMITS.get().copied().unwrap_or_default()
}

/// Asks every simulation in this process to stop (`--max-wall-time`).
pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

/// Whether [`request_stop`] was called.
#[inline]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The work a run is expected to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Requests (None: not known before simulating, e.g. closed loop).
    pub requests: Option<f64>,
    /// Time of the last arrival, simulated s (None: not known).
    pub horizon_s: Option<f64>,
}

impl Estimate {
    /// Memory the requests need, bytes.
    pub fn memory_bytes(&self) -> Option<f64> {
        self.requests.map(|n| n * BYTES_PER_REQUEST)
    }

    /// The estimate in words.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.requests {
            parts.push(format!("about {} requests", human(n)));
        }
        if let Some(m) = self.memory_bytes() {
            parts.push(format!("about {} of memory", bytes(m)));
        }
        if let Some(h) = self.horizon_s {
            parts.push(format!("{} s of simulated time ({})", human(h), span(h)));
        }
        parts.join(", ")
    }
}

/// The work of simulating `setup`, from its workload alone.
pub fn estimate(setup: &Setup) -> Estimate {
    let w = &setup.workload;
    let rate = w.offered_rate.filter(|r| r.is_finite() && *r > 0.0 && !w.offline && w.closed_loop.is_none());
    // Sessions count their rate in sessions: each brings several requests.
    let rate_requests = if w.sessions.is_some() { None } else { rate };
    let trace_rows = w.trace.as_ref().filter(|t| !t.repeat).map(|t| (t.hi - t.lo) as f64);
    let requests = match (w.num_requests, w.horizon) {
        (Some(n), _) => Some(n as f64),
        (None, Some(h)) => trace_rows.or(rate_requests.map(|r| r * h)),
        (None, None) => trace_rows,
    };
    let horizon_s = match (w.horizon, w.num_requests) {
        (Some(h), _) => Some(h),
        (None, Some(n)) if w.trace.is_none() => rate_requests.map(|r| n as f64 / r),
        _ => None,
    };
    Estimate { requests, horizon_s }
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
    if let Some(n) = e.requests
        && n > limits.max_requests as f64
    {
        return Err(ConfigError::new(format!(
            "this run would simulate {what}; the limit is {} requests (--max-requests)",
            human(limits.max_requests as f64)
        ))
        .key(if setup.workload.num_requests.is_some() { "num_requests" } else { "duration_s" })
        .hint("pass --max-requests N to allow it, or shorten the run"));
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
