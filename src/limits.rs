//! Bounds on one run's work, so that no single value can make a run
//! unbounded: the work is estimated before simulating and refused beyond a
//! documented limit unless the user raises it; the simulated clock, the
//! backlog's memory and the wall clock are guarded while it runs.
//!
//! - **Projected time** (default limit [`Limits::DEFAULT_MAX_PROJECTED_S`]):
//!   requests times [`SECONDS_PER_REQUEST`].
//! - **Memory** (default limit [`Limits::DEFAULT_MAX_MEMORY_BYTES`]): a
//!   streamed run's memory is flat in its length past 10⁶ requests; what
//!   grows it is counted ([`crate::resolve::Estimate::memory_bytes`]): LoRA adapters,
//!   closed-loop users, replicas, and the requests held for exact
//!   percentiles. A backlog that grows while the run is overloaded is
//!   watched as it grows ([`max_live_requests`]).
//! - **Requests** ([`MAX_REQUEST_IDS`], and `--max-requests` below it):
//!   request ids are 32-bit.
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

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Beyond this simulated time, s (about 32 years), the clock's resolution
/// falls below a microsecond (2⁻²³ s at 10⁹ s).
pub const MAX_CLOCK_S: f64 = 1e9;

/// Most requests one run can name: ids are 32-bit (one is kept as "none").
pub const MAX_REQUEST_IDS: u64 = u32::MAX as u64 - 1;

/// Memory of a small run: the program, the catalogue, the charts' samples,
/// bytes (measured: peak RSS of `servesim run scenarios/quickstart.toml
/// --set num_requests=2000`, 27 MB on 2026-12-06).
pub const BASE_BYTES: f64 = 32.0 * 1024.0 * 1024.0;

/// Memory per request of the first 10⁶, which a run holds for its exact
/// percentiles and sample, bytes (measured: peak RSS 120 MB at 10⁶
/// requests, 121 MB at 4·10⁶, against 27 MB at 2,000).
pub const BYTES_PER_MEASURED: f64 = 96.0;

/// Requests past which a streamed run's memory stays flat.
pub const FLAT_AFTER: f64 = 1e6;

/// Memory per request waiting in a backlog (record, queue entry), bytes
/// (measured: an overloaded run of 4·10⁶ requests peaks at 444 MB, of 10⁶
/// at 198 MB: 82 bytes per request more; rounded up).
pub const BYTES_PER_LIVE: f64 = 96.0;

/// Memory per replica (engine state, KV block tables, statistics), bytes
/// (measured: 256 replicas add 4.6 MB over one).
pub const BYTES_PER_REPLICA: f64 = 20_000.0;

/// Memory per LoRA adapter (its popularity's cumulative weight), bytes.
pub const BYTES_PER_ADAPTER: f64 = 8.0;

/// Memory per closed-loop user (its conversation, pending send and the
/// record of its request in flight), bytes.
pub const BYTES_PER_USER: f64 = 160.0;

/// Wall time one request costs on one core, s: the default engine profile
/// (vllm-v1, kernel cost model) on `scenarios/quickstart.toml`, 20 s for 10⁶
/// requests (2026-12-06, 2-core machine). Legacy-profile runs take about a
/// tenth of that, so the projection errs long.
pub const SECONDS_PER_REQUEST: f64 = 20e-6;

/// What one run may do before it is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Most requests one run may simulate (at most [`MAX_REQUEST_IDS`]).
    pub max_requests: u64,
    /// Latest expected arrival, simulated seconds.
    pub max_horizon_s: f64,
    /// Most memory one run may need, bytes.
    pub max_memory_bytes: f64,
    /// Longest projected wall time of one run, s.
    pub max_projected_s: f64,
}

impl Limits {
    /// All the request ids there are: time and memory bind first.
    pub const DEFAULT_MAX_REQUESTS: u64 = MAX_REQUEST_IDS;
    /// 10⁸ s, about three years of simulated traffic.
    pub const DEFAULT_MAX_HORIZON_S: f64 = 1e8;
    /// 4 GiB: 35 times a streamed run's flat peak.
    pub const DEFAULT_MAX_MEMORY_BYTES: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;
    /// One hour: 1.8·10⁸ requests at [`SECONDS_PER_REQUEST`].
    pub const DEFAULT_MAX_PROJECTED_S: f64 = 3600.0;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_horizon_s: Self::DEFAULT_MAX_HORIZON_S,
            max_memory_bytes: Self::DEFAULT_MAX_MEMORY_BYTES,
            max_projected_s: Self::DEFAULT_MAX_PROJECTED_S,
        }
    }
}

/// Most requests a run may hold at once (in flight or waiting) within this
/// process's memory limit, beyond what [`crate::resolve::Estimate::memory_bytes`] counted:
/// the simulation stops an overloaded run whose backlog passes it.
pub fn max_live_requests() -> usize {
    let l = current();
    ((l.max_memory_bytes - BASE_BYTES).max(0.0) / BYTES_PER_LIVE) as usize
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
