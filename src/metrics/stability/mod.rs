//! Overload detection: did the run reach a steady state, and did it serve its
//! users without shedding them?
//!
//! A finite run of an overloaded system reports latencies that only measure
//! how long it ran. The evidence used here is the **backlog**: the number of
//! requests waiting for their first token (arrived, with no token yet, nor
//! refused) over time. That covers every queue in front of a first token:
//! preprocessing, the central queue and router holds, the engine's waiting
//! queue and the prefill itself, and with disaggregated pools the KV transfer
//! and the decode pool's queue; after a replica failure, the retry. Requests
//! already decoding are left out: their number follows the arrivals' noise
//! even when the system has capacity to spare, and it is bounded by the
//! engine, so sustained growth always shows in front of the first token. In a
//! stable system the backlog fluctuates around a level; in an overloaded one
//! it grows by (λ − μ) per second, so the fraction of arrivals left behind
//! tends to 1 − 1/ρ (4.8% at ρ = 1.05, 50% at ρ = 2).
//!
//! The measured arrival span (first to last measured arrival) is cut into
//! [`CELLS`] equal cells and the time-averaged backlog of each is computed
//! exactly from the arrival and departure times. Three tests follow.
//!
//! 1. **Fill-up.** A run that starts empty fills up to its working level
//!    within about one time in system. The cells that start within twice the
//!    mean time in system of t = 0 (at most the first quarter) are left out,
//!    so that filling up is not read as growth.
//! 2. **Trend with a confidence bound.** The backlog's least-squares slope
//!    over the remaining cells, times their span, less the change that a
//!    changing arrival rate explains by Little's law, estimates the growth G.
//!    Its standard error is inflated by √((1 + r₁)/(1 − r₁)) for the lag-1
//!    autocorrelation r₁ of the residuals, because a queue's backlog is
//!    strongly autocorrelated near saturation. The bound is G ± 3·se. The run
//!    is **overloaded** when the lower bound exceeds [`MATERIAL_OVER`] of the
//!    arrivals in that span *and* completions fell short of arrivals while
//!    they lasted. It is **stable** only when the upper bound is below
//!    [`MATERIAL_STABLE`] of the arrivals and the lower bound is not above
//!    zero, i.e. when the run is long enough to tell steady state from slow
//!    overload and shows no significant growth. Otherwise it is
//!    **inconclusive**, and the explanation says to run longer.
//!    **The load the run drew.** Bursty arrivals and heavy-tailed lengths
//!    make a run's tokens vary by several percent around the scenario's,
//!    and a run that drew a lighter load than a rate just over capacity
//!    shows no growth. When two standard errors of the measured tokens
//!    (from the cells' successive differences) exceed [`LOAD_TOLERANCE`],
//!    a run whose queue stayed up through whole cells (above
//!    [`WINDOW_LEVEL`] times its lower-quartile backlog at both ends and on
//!    average: the engine was saturated there) is stable only if it drained
//!    its queue in those cells faster than the requests arrived over the
//!    run by more than that uncertainty: the headroom it showed must cover
//!    the load it may have missed. Otherwise it is inconclusive.
//! 3. **Windows.** Overload can show only mid-run, for example during a
//!    diurnal peak that drains afterwards. A one-sided CUSUM over the cells
//!    accumulates backlog growth in excess of [`WINDOW_EXCESS`] of the
//!    arrivals. A stretch of at least [`WINDOW_MIN_CELLS`] cells,
//!    [`WINDOW_MIN_ARRIVALS`] arrivals and [`WINDOW_SOJOURNS`] median times
//!    in system, whose own trend, at its lower
//!    confidence bound ([`WINDOW_Z`] standard errors), still grows by more
//!    than that excess once the rise a changing arrival rate explains by
//!    Little's law ((λ₁ − λ₀) × median wait) is taken off, and whose backlog rose by more than [`WINDOW_LEVEL`]
//!    times the run's lower-quartile backlog, is an overload window, reported with
//!    its start and end times.
//!
//! A run that refused or timed out more than [`SHED_LIMIT`] of its measured
//! requests (`max_waiting`, `max_wait_s` or rate limits) is **shedding**.
//! Shedding keeps the backlog bounded, so such a run is never called stable,
//! only "stable by shedding". The error rates of the whole procedure are
//! measured by `servesim stability-table` and published in
//! docs/stability.md. Offline runs (all requests at t = 0) are throughput
//! tests, and stability does not apply to them.

use serde::Serialize;

/// Cells the measured arrival span is cut into.
pub const CELLS: usize = 40;
/// Width of the trend test's confidence bound, in standard errors.
pub const Z: f64 = 3.0;
/// An overloaded run leaves more than this fraction of its arrivals behind,
/// at the lower confidence bound.
pub const MATERIAL_OVER: f64 = 0.01;
/// A stable run leaves less than this fraction behind, at the upper bound.
/// ρ = 1.05 leaves 4.8%.
pub const MATERIAL_STABLE: f64 = 0.02;
/// A stable run's backlog in the last tenth of its arrivals is at most this
/// many times that of the first tenth (at least one request): the absolute
/// test that keeps long runs honest, since [`MATERIAL_STABLE`] of the
/// arrivals loosens as a run gets longer. A queue whose waits rose fivefold
/// over the run describes no steady state, whatever share of the arrivals
/// that rise is.
pub const STABLE_RISE: f64 = 5.0;
/// Reference excess of the window CUSUM: growth beyond 3% of arrivals.
pub const WINDOW_EXCESS: f64 = 0.03;
/// Width of a window's confidence bound, in standard errors (wider than the whole run's [`Z`]: the CUSUM picked the stretch).
pub const WINDOW_Z: f64 = 4.0;
/// A window spans at least this many cell widths (3/40 of the run).
pub const WINDOW_MIN_CELLS: usize = 5;
/// A window's backlog rises by more than this many times the run's
/// lower-quartile backlog (at least 1): a queue that merely wanders around its working
/// level near saturation is not overloaded there.
pub const WINDOW_LEVEL: f64 = 4.0;
/// A window lasts at least this many median times in system: a backlog
/// that merely follows a rising rate (L = λW) adjusts within one.
pub const WINDOW_SOJOURNS: f64 = 10.0;
/// A window spans at least this many arrivals: shorter rises are the
/// ordinary excursions of a busy stable queue (at ρ = 0.9 an M/M/1 queue's
/// backlog relaxes over about 340 arrivals).
pub const WINDOW_MIN_ARRIVALS: u64 = 1000;
/// A stable verdict needs the load the run drew known to within this
/// fraction (two standard errors of its tokens, see
/// [`Stability::load_uncertainty`]): a rate 5% over capacity (ρ 1.05) must
/// not pass for stable because its run happened to draw a lighter load.
pub const LOAD_TOLERANCE: f64 = 0.05;
/// Shedding more than this fraction of measured requests is not a stable service.
pub const SHED_LIMIT: f64 = 0.01;
/// Fewer measured requests than this cannot be judged.
pub const MIN_REQUESTS: usize = 200;

/// A stretch of the run during which the backlog grew faster than the system drained it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadWindow {
    /// Start of the stretch, s from the start of the simulation.
    pub start_s: f64,
    /// End of the stretch, s.
    pub end_s: f64,
    /// Rise of the time-averaged backlog over the stretch beyond what the
    /// change in arrival rate explains by Little's law, requests.
    pub backlog_rise: f64,
}

/// The stability verdict and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stability {
    /// "stable", "shedding" (steady only because requests were refused or
    /// timed out), "overloaded", "inconclusive" (run too short, or too few
    /// requests, to tell) or "not_applicable" (offline batch).
    pub verdict: String,
    /// One sentence a reader can act on.
    pub explanation: String,
    /// Measured arrivals per second over the arrival span.
    pub offered_rate: f64,
    /// Requests that left the system (finished or refused) per second over the same span.
    pub completion_rate_during_arrivals: f64,
    /// 1 − departures ÷ arrivals over the measured arrival span: the share of
    /// arrivals still in the system when arrivals stopped, net of those
    /// already there when the span began.
    pub completion_deficit: f64,
    /// Mean backlog (requests waiting for their first token) over the first tenth of the arrival span.
    pub backlog_first_tenth: f64,
    /// Mean backlog over the last tenth of the arrival span.
    pub backlog_last_tenth: f64,
    /// Working level of the backlog: the median of the cells' time-averaged
    /// backlog after fill-up.
    pub backlog_level: f64,
    /// Seconds at the start of the arrival span left out of the trend test while the system filled up.
    pub fill_up_s: f64,
    /// Estimated growth of the backlog over the rest of the span (trend ×
    /// span), less the change a changing arrival rate explains by Little's
    /// law ((λ last tenth − λ first tenth) × median time to first token), requests.
    pub backlog_growth: f64,
    /// Lower confidence bound of that growth (3 autocorrelation-corrected standard errors), requests.
    pub backlog_growth_low: f64,
    /// Upper confidence bound of that growth, requests.
    pub backlog_growth_high: f64,
    /// backlog_growth ÷ arrivals over the same span: tends to 1 − 1/ρ under overload, to 0 when stable.
    pub growth_fraction: f64,
    /// Measured requests refused or timed out because of load (queue full, client timeout, rate limit), as a fraction.
    pub shed_fraction: f64,
    /// Stretches of the run when the backlog grew faster than the system drained it.
    pub overload_windows: Vec<OverloadWindow>,
    /// Mean time to first token of the requests that arrived in the first tenth of the span and completed, ms.
    pub ttft_first_tenth_ms: f64,
    /// Mean time to first token of the requests that arrived in the last tenth of the span and completed, ms.
    pub ttft_last_tenth_ms: f64,
    /// How well the run pinned down its own load: two standard errors of
    /// the tokens (prompt + output) its measured requests brought, relative
    /// to them, from the dispersion of the cells' tokens (successive
    /// differences, so that a changing rate does not count as noise).
    /// Bursty arrivals and heavy-tailed lengths make it large: a run then
    /// drew a load that may lie several percent from the scenario's.
    pub load_uncertainty: f64,
    /// Cells (of 40, after fill-up) through which the queue stayed up: the
    /// backlog above 4 times its lower quartile (at least 1) at both ends
    /// and on average. The engine was saturated there.
    pub saturated_cells: u32,
    /// Requests leaving the backlog per second in the saturated cells over
    /// the offered rate, less 1: the headroom the run showed where it was
    /// saturated (NaN when no cell was).
    pub saturated_headroom: f64,
}

impl Stability {
    fn empty(verdict: &str, explanation: String) -> Self {
        Stability {
            verdict: verdict.into(),
            explanation,
            offered_rate: f64::NAN,
            completion_rate_during_arrivals: f64::NAN,
            completion_deficit: f64::NAN,
            backlog_first_tenth: f64::NAN,
            backlog_last_tenth: f64::NAN,
            backlog_level: f64::NAN,
            fill_up_s: f64::NAN,
            backlog_growth: f64::NAN,
            backlog_growth_low: f64::NAN,
            backlog_growth_high: f64::NAN,
            growth_fraction: f64::NAN,
            shed_fraction: f64::NAN,
            overload_windows: Vec::new(),
            ttft_first_tenth_ms: f64::NAN,
            ttft_last_tenth_ms: f64::NAN,
            load_uncertainty: f64::NAN,
            saturated_cells: 0,
            saturated_headroom: f64::NAN,
        }
    }

    /// The verdict in a few words, for tables and refusals.
    pub fn headline(&self) -> String {
        match self.verdict.as_str() {
            "overloaded" if self.overload_windows.is_empty() || self.backlog_growth_low > 0.0 => format!(
                "overloaded: the queue grows through the run ({:.1}% of arrivals left behind)",
                self.growth_fraction * 100.0
            ),
            "overloaded" => {
                let w: Vec<String> =
                    self.overload_windows.iter().map(|w| format!("{:.0}-{:.0} s", w.start_s, w.end_s)).collect();
                format!("overloaded during {}", w.join(", "))
            }
            "shedding" => format!("stable only by shedding {:.1}% of requests", self.shed_fraction * 100.0),
            "inconclusive" => "inconclusive: too short to tell steady state from slow overload; run longer".into(),
            v => v.to_string(),
        }
    }

    /// The verdict in one sentence a newcomer understands (see [`meaning`]).
    pub fn meaning(&self) -> String {
        meaning(&self.verdict, self.shed_fraction)
    }

    /// The verdict as a yes/no: `Some(true)` for stable, `Some(false)` for
    /// overloaded or shedding, `None` when inconclusive or not applicable.
    pub fn stable(&self) -> Option<bool> {
        match self.verdict.as_str() {
            "stable" => Some(true),
            "overloaded" | "shedding" => Some(false),
            _ => None,
        }
    }
}

/// A verdict in one sentence a newcomer understands (the report's banner;
/// the README says the same); `shed` is the shed fraction.
pub fn meaning(verdict: &str, shed: f64) -> String {
    match verdict {
        "stable" => "Stable: the queue did not grow, so the latencies below describe a steady state this load \
                     can sustain."
            .into(),
        "overloaded" => "Overloaded: requests arrived faster than they were served and the queue kept growing, \
                         so the latencies below grow with the run's length and describe no steady state."
            .into(),
        "shedding" => format!(
            "Stable only by shedding load: {:.1}% of requests were refused or timed out, and the latencies \
             below describe only those that were served.",
            shed * 100.0
        ),
        "inconclusive" => "Inconclusive: the run is too short to tell a steady state from a slow overload; \
                           run it longer before trusting its latencies."
            .into(),
        _ => "Offline batch: every request arrives at once, so there is no steady state to judge.".into(),
    }
}

/// Per-cell accounts of a run's requests, on some grid of time cells: what
/// [`Backlog`] and [`FineBacklog`] both keep.
#[derive(Debug, Clone)]
struct Cells {
    /// Requests waiting at the grid's start.
    start: i64,
    /// Per cell: arrivals, departures, and Σ(cell end − t) over arrivals minus the same over departures.
    arrivals: Vec<u64>,
    departures: Vec<u64>,
    area_shift: Vec<f64>,
    /// Per cell of arrival: Σ time to first token and count over completed measured requests.
    delay_sum: Vec<f64>,
    delay_n: Vec<u64>,
    /// Per cell of arrival: tokens (prompt + output) the measured requests brought.
    work: Vec<f64>,
    measured: u64,
    shed: u64,
}

/// Where a time falls on a grid.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// Before the grid's start.
    Before,
    /// In this cell, which ends at this time.
    Cell(usize, f64),
    /// Past the grid's end.
    After,
}

impl Cells {
    fn new(n: usize) -> Self {
        Cells {
            start: 0,
            arrivals: vec![0; n],
            departures: vec![0; n],
            area_shift: vec![0.0; n],
            delay_sum: vec![0.0; n],
            delay_n: vec![0; n],
            work: vec![0.0; n],
            measured: 0,
            shed: 0,
        }
    }

    /// An arrival (`sign` 1) or a departure (−1) at `t`, placed at `at`.
    fn event(&mut self, at: Place, t: f64, sign: i64) {
        match at {
            Place::Before => self.start += sign,
            Place::Cell(c, end) => {
                if sign > 0 {
                    self.arrivals[c] += 1;
                } else {
                    self.departures[c] += 1;
                }
                self.area_shift[c] += sign as f64 * (end - t).max(0.0);
            }
            Place::After => {}
        }
    }

    /// A measured request arriving at `at` with `work` tokens: shed or not,
    /// and its queueing delay if it completed (NaN otherwise).
    fn measure(&mut self, at: Place, shed: bool, queue_delay: f64, work: f64) {
        self.measured += 1;
        self.shed += shed as u64;
        if let Place::Cell(c, _) = at {
            self.work[c] += work;
            if !queue_delay.is_nan() {
                self.delay_sum[c] += queue_delay;
                self.delay_n[c] += 1;
            }
        }
    }

    /// Merges cells pairwise into the first half (cell k from cells 2k and
    /// 2k + 1, `width` wide each) and empties the second half.
    fn merge_pairs(&mut self, width: f64) {
        let n = self.arrivals.len();
        for k in 0..n / 2 {
            let (a, b) = (2 * k, 2 * k + 1);
            let net = self.arrivals[a] as f64 - self.departures[a] as f64;
            self.area_shift[k] = self.area_shift[a] + width * net + self.area_shift[b];
            self.arrivals[k] = self.arrivals[a] + self.arrivals[b];
            self.departures[k] = self.departures[a] + self.departures[b];
            self.delay_sum[k] = self.delay_sum[a] + self.delay_sum[b];
            self.delay_n[k] = self.delay_n[a] + self.delay_n[b];
            self.work[k] = self.work[a] + self.work[b];
        }
        for k in n / 2..n {
            (self.arrivals[k], self.departures[k], self.delay_n[k]) = (0, 0, 0);
            (self.area_shift[k], self.delay_sum[k], self.work[k]) = (0.0, 0.0, 0.0);
        }
    }
}

/// A request's arrival (+1) and, if it left, its departure (−1).
fn passage(arrival: f64, departure: f64) -> impl Iterator<Item = (f64, i64)> {
    std::iter::once((arrival, 1)).chain(departure.is_finite().then_some((departure.max(arrival), -1)))
}

/// The backlog of a run, accumulated cell by cell over the measured arrival
/// span `[t0, t1]`, one request at a time in any order.
#[derive(Debug, Clone)]
pub struct Backlog {
    t0: f64,
    width: f64,
    cells: Cells,
    /// Until when the system may still be filling up, s.
    fill_until: f64,
    /// Shortest overload window, s.
    min_window: f64,
    /// Typical (median) time to first token, s.
    sojourn: f64,
}

impl Backlog {
    /// An empty account of the span from the first to the last measured arrival.
    pub fn new(t0: f64, t1: f64) -> Self {
        Backlog {
            t0,
            width: (t1 - t0) / CELLS as f64,
            cells: Cells::new(CELLS),
            fill_until: 0.0,
            min_window: 0.0,
            sojourn: 0.0,
        }
    }

    /// Two standard errors of the measured requests' tokens, relative to
    /// them: the cells' tokens vary by their successive differences (a slow
    /// change of rate does not count), and the total's variance is the
    /// cells' summed.
    fn load_uncertainty(&self) -> f64 {
        let w = &self.cells.work;
        let total: f64 = w.iter().sum();
        let var = w.windows(2).map(|p| (p[1] - p[0]).powi(2)).sum::<f64>() / (2.0 * (w.len() - 1) as f64);
        2.0 * (var * w.len() as f64).sqrt() / total
    }

    /// The cells from `skip` on through which the queue stayed above
    /// `floor` (at both ends and on average: the engine was saturated
    /// there), and the rate at which it drained in them over the offered
    /// `rate`, less 1 (NaN when there are none).
    fn saturation(&self, mean: &[f64], bounds: &[f64], skip: usize, floor: f64, rate: f64) -> (u32, f64) {
        let (mut n, mut drained) = (0u32, 0u64);
        for c in (skip..CELLS).filter(|&c| bounds[c] > floor && bounds[c + 1] > floor && mean[c] > floor) {
            n += 1;
            drained += self.cells.departures[c];
        }
        let headroom = if n > 0 { drained as f64 / (n as f64 * self.width) / rate - 1.0 } else { f64::NAN };
        (n, headroom)
    }

    /// The system's own time scale: its requests spend `mean_sojourn` seconds
    /// in it on average and `median_sojourn` typically. Having started empty
    /// at t = 0, it is filling up until twice the mean; and its backlog
    /// follows a changing arrival rate within about one sojourn (Little's
    /// law), so an overload window must last [`WINDOW_SOJOURNS`] median
    /// sojourns. `median_wait` (arrival to first token) scales Little's-law
    /// corrections of the queue.
    pub fn time_scale(&mut self, mean_sojourn: f64, median_sojourn: f64, median_wait: f64) {
        if mean_sojourn.is_finite() {
            self.fill_until = 2.0 * mean_sojourn;
        }
        if median_sojourn.is_finite() {
            self.min_window = WINDOW_SOJOURNS * median_sojourn;
        }
        if median_wait.is_finite() {
            self.sojourn = median_wait;
        }
    }

    /// Where `t` falls: before t0, in a cell, or after t1 (t1 itself is in the last cell).
    fn place(&self, t: f64) -> Place {
        if t < self.t0 {
            return Place::Before;
        }
        if self.width <= 0.0 {
            return Place::After;
        }
        let c = match ((t - self.t0) / self.width) as usize {
            c if c < CELLS => c,
            CELLS if t <= self.t0 + self.width * CELLS as f64 * (1.0 + 1e-12) => CELLS - 1,
            _ => return Place::After,
        };
        Place::Cell(c, self.t0 + self.width * (c + 1) as f64)
    }

    /// One request of the run (warm-up included): it arrived at `arrival` and
    /// left at `departure` (infinite if it never did).
    pub fn add(&mut self, arrival: f64, departure: f64) {
        for (t, sign) in passage(arrival, departure) {
            self.cells.event(self.place(t), t, sign);
        }
    }

    /// One measured request: whether it was shed because of load, its
    /// time to first token if it completed (NaN otherwise), and the tokens
    /// it brought (prompt + output).
    pub fn measure(&mut self, arrival: f64, shed: bool, queue_delay: f64, work: f64) {
        self.cells.measure(self.place(arrival), shed, queue_delay, work);
    }

    /// The backlog change a changed arrival rate explains by Little's law,
    /// (λ₁ − λ₀) × median wait, from the rates of the cells
    /// `before` and `after`; zero unless the change is significant (more
    /// than 3 Poisson standard errors), so that noise in the rates cannot
    /// explain a growth away.
    fn follows(&self, before: std::ops::Range<usize>, after: std::ops::Range<usize>) -> f64 {
        let count = |r: std::ops::Range<usize>| self.cells.arrivals[r].iter().sum::<u64>() as f64;
        let (n0, n1) = (count(before.clone()), count(after.clone()));
        let (t0, t1) = (before.len() as f64 * self.width, after.len() as f64 * self.width);
        let (l0, l1) = (n0 / t0, n1 / t1);
        let se = (n0 / (t0 * t0) + n1 / (t1 * t1)).sqrt();
        if (l1 - l0).abs() > 3.0 * se { (l1 - l0) * self.sojourn } else { 0.0 }
    }

    /// Time-averaged backlog of each cell, and the backlog at each cell boundary.
    fn levels(&self) -> (Vec<f64>, Vec<f64>) {
        let mut n = self.cells.start as f64;
        let mut bounds = vec![n];
        let mut mean = Vec::with_capacity(CELLS);
        for c in 0..CELLS {
            mean.push(n + self.cells.area_shift[c] / self.width);
            n += self.cells.arrivals[c] as f64 - self.cells.departures[c] as f64;
            bounds.push(n);
        }
        (mean, bounds)
    }
}

/// Fine cells per [`CELLS`] cell, at least, in a [`FineBacklog`].
const FINE_PER_CELL: usize = 64;
/// Cells of a [`FineBacklog`]: once the run extends past them, pairs merge
/// and the width doubles, so between half and all of them are in use.
const FINE: usize = CELLS * FINE_PER_CELL * 2;

/// The backlog of a run too long to keep every request's passage: the same
/// accumulators as [`Backlog`], on a grid of `FINE` cells from `origin`
/// (the first measured arrival) whose cells double in width as the run
/// extends, so that requests may come before the measured span is known.
/// At the end ([`FineBacklog::into_backlog`]) they are re-binned onto the
/// [`CELLS`] cells over the measured span, each fine cell whole into one:
/// an event may move across a cell boundary by at most one fine cell:
/// 1/`FINE_PER_CELL` of a cell while the grid (which must reach the last
/// departure) is at most twice the measured arrival span, proportionally
/// more when the queue drains for longer than the arrivals lasted.
#[derive(Debug, Clone)]
pub struct FineBacklog {
    origin: f64,
    width: f64,
    cells: Cells,
}

impl FineBacklog {
    /// An empty account from `origin` on.
    pub fn new(origin: f64) -> Self {
        FineBacklog { origin, width: 1e-3, cells: Cells::new(FINE) }
    }

    /// Where `t` falls, widening the cells until it fits.
    fn place(&mut self, t: f64) -> Place {
        if t < self.origin {
            return Place::Before;
        }
        while t >= self.origin + self.width * FINE as f64 && self.width < f64::MAX / 4.0 {
            self.cells.merge_pairs(self.width);
            self.width *= 2.0;
        }
        let c = (((t - self.origin) / self.width) as usize).min(FINE - 1);
        Place::Cell(c, self.origin + self.width * (c + 1) as f64)
    }

    /// As [`Backlog::add`].
    pub fn add(&mut self, arrival: f64, departure: f64) {
        for (t, sign) in passage(arrival, departure) {
            let at = self.place(t);
            self.cells.event(at, t, sign);
        }
    }

    /// As [`Backlog::measure`].
    pub fn measure(&mut self, arrival: f64, shed: bool, queue_delay: f64, work: f64) {
        let at = self.place(arrival);
        self.cells.measure(at, shed, queue_delay, work);
    }

    /// The backlog over the measured span `[t0, t1]` (t0 ≥ origin). Each
    /// fine cell goes whole to the cell holding its middle (to the requests
    /// already waiting at t0 if that is before t0, nowhere if after t1):
    /// an event moves by less than one fine cell, and the time-averaged
    /// backlog stays consistent with the counts.
    pub fn into_backlog(self, t0: f64, t1: f64) -> Backlog {
        let mut b = Backlog::new(t0, t1);
        let (fine, to) = (&self.cells, &mut b.cells);
        to.measured = fine.measured;
        to.shed = fine.shed;
        to.start = fine.start;
        let end_all = t0 + b.width * CELLS as f64;
        for i in 0..FINE {
            let hi = self.origin + self.width * (i + 1) as f64;
            let mid = hi - self.width / 2.0;
            let net = fine.arrivals[i] as i64 - fine.departures[i] as i64;
            if mid < t0 || b.width <= 0.0 {
                to.start += net;
                continue;
            }
            if mid > end_all {
                continue;
            }
            let c = (((mid - t0) / b.width) as usize).min(CELLS - 1);
            let chi = t0 + b.width * (c + 1) as f64;
            to.arrivals[c] += fine.arrivals[i];
            to.departures[c] += fine.departures[i];
            // Σ sign × (chi − t) = Σ sign × (hi − t) + (chi − hi) × net, exactly.
            to.area_shift[c] += fine.area_shift[i] + (chi - hi) * net as f64;
            to.delay_sum[c] += fine.delay_sum[i];
            to.delay_n[c] += fine.delay_n[i];
            to.work[c] += fine.work[i];
        }
        b
    }
}

/// Judges a run from its backlog. `offline` runs are not judged.
pub fn assess(b: &Backlog, offline: bool) -> Stability {
    if offline {
        return Stability::empty(
            "not_applicable",
            "offline batch: every request is queued at t = 0, so this is a throughput test and latencies measure \
             queue position, not steady state"
                .into(),
        );
    }
    if b.cells.measured < MIN_REQUESTS as u64 {
        return Stability::empty(
            "inconclusive",
            format!(
                "{} measured requests are too few to judge stability (need {MIN_REQUESTS}): run longer",
                b.cells.measured
            ),
        );
    }
    if b.width <= 0.0 {
        return Stability::empty(
            "not_applicable",
            "all measured requests arrived at the same instant: a batch, not a steady stream".into(),
        );
    }
    let span = b.width * CELLS as f64;
    let (mean, bounds) = b.levels();
    let arrived: u64 = b.cells.arrivals.iter().sum();
    let left: u64 = b.cells.departures.iter().sum();
    let tenth = CELLS / 10;
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let delay = |r: std::ops::Range<usize>| {
        let n: u64 = b.cells.delay_n[r.clone()].iter().sum();
        b.cells.delay_sum[r].iter().sum::<f64>() / n as f64 * 1e3
    };
    let mut st = Stability::empty("", String::new());
    st.offered_rate = arrived as f64 / span;
    st.completion_rate_during_arrivals = left as f64 / span;
    st.completion_deficit = (bounds[CELLS] - bounds[0]) / arrived.max(1) as f64;
    st.backlog_first_tenth = avg(&mean[..tenth]);
    st.backlog_last_tenth = avg(&mean[CELLS - tenth..]);
    st.ttft_first_tenth_ms = delay(0..tenth);
    st.ttft_last_tenth_ms = delay(CELLS - tenth..CELLS);
    st.shed_fraction = b.cells.shed as f64 / b.cells.measured as f64;
    st.load_uncertainty = b.load_uncertainty();

    // 1. Fill-up: the cells within twice the mean time in system of the start of the simulation.
    let skip = (((b.fill_until - b.t0) / b.width).ceil().max(0.0) as usize).min(CELLS / 4);
    st.fill_up_s = skip as f64 * b.width;

    // 2. Trend over the remaining cells.
    let xs: Vec<f64> = (skip..CELLS).map(|c| (c as f64 + 0.5) * b.width).collect();
    let ys = &mean[skip..];
    let (slope, se) = trend(&xs, ys);
    let rest = span - st.fill_up_s;
    let arrived_rest = b.cells.arrivals[skip..].iter().sum::<u64>().max(1) as f64;
    // Little's law: a rate that changed from λ₀ to λ₁ moves the backlog by
    // (λ₁ − λ₀)·W without any overload; only the rest is growth.
    let follows = b.follows(skip..skip + tenth, CELLS - tenth..CELLS);
    st.backlog_growth = slope * rest - follows;
    st.backlog_growth_low = (slope - Z * se) * rest - follows;
    st.backlog_growth_high = (slope + Z * se) * rest - follows;
    st.growth_fraction = st.backlog_growth / arrived_rest;
    let trend_over = st.backlog_growth_low > MATERIAL_OVER * arrived_rest && st.completion_deficit > 0.0;
    let mut rest_levels = ys.to_vec();
    rest_levels.sort_by(f64::total_cmp);
    st.backlog_level = rest_levels[rest_levels.len() / 2];
    // Relative and absolute: growth of 2% of arrivals is ruled out, and the
    // queue did not rise several-fold from the first tenth to the last (a
    // long run at ρ just above 1 leaves far under 2% behind, yet its queue
    // and waits keep rising).
    let rose = st.backlog_growth > 0.0 && st.backlog_last_tenth > STABLE_RISE * st.backlog_first_tenth.max(1.0);
    let small = st.backlog_growth_high < MATERIAL_STABLE * arrived_rest && st.backlog_growth_low <= 0.0;
    // The load the run drew may be lighter than the scenario's: where the
    // engine was saturated, the headroom it showed must cover that.
    let floor = queue_floor(&rest_levels);
    (st.saturated_cells, st.saturated_headroom) = b.saturation(&mean, &bounds, skip, floor, st.offered_rate);
    let load_known =
        st.load_uncertainty <= LOAD_TOLERANCE || st.saturated_cells == 0 || st.saturated_headroom > st.load_uncertainty;

    // 3. Windows of excess growth.
    st.overload_windows = windows(b, &mean, skip, floor);
    conclude(&mut st, Trend { over: trend_over, small, rose, load_known });
    st
}

/// What the trend test found (see [`assess`]).
struct Trend {
    /// Growth above [`MATERIAL_OVER`] at the lower bound, with a completion deficit.
    over: bool,
    /// Growth of [`MATERIAL_STABLE`] ruled out, and none shown.
    small: bool,
    /// The queue rose several-fold from the first tenth to the last.
    rose: bool,
    /// The load the run drew is known well enough, or its saturated stretches showed the headroom.
    load_known: bool,
}

/// The verdict and its explanation, from the evidence in `st` and the trend test.
fn conclude(st: &mut Stability, t: Trend) {
    let Trend { over: trend_over, small, rose, load_known } = t;
    let trend_stable = small && !rose && load_known;
    let shed_pct = st.shed_fraction * 100.0;
    let evidence = format!(
        "backlog {:.1} → {:.1} requests (first → last tenth), time to first token {:.0} → {:.0} ms; offered {:.3} req/s, \
         {:.3} req/s left the system while arrivals lasted",
        st.backlog_first_tenth,
        st.backlog_last_tenth,
        st.ttft_first_tenth_ms,
        st.ttft_last_tenth_ms,
        st.offered_rate,
        st.completion_rate_during_arrivals
    );
    if trend_over {
        st.verdict = "overloaded".into();
        st.explanation = format!(
            "overloaded: the queue grows through the run, by {:.0} requests ({:.1}% of arrivals; between {:.0} and \
             {:.0} at 3 standard errors); {evidence}. Latency percentiles of this run grow with its length and do \
             not describe a steady state: lower the rate or add capacity",
            st.backlog_growth,
            st.growth_fraction * 100.0,
            st.backlog_growth_low,
            st.backlog_growth_high
        );
    } else if !st.overload_windows.is_empty() {
        st.verdict = "overloaded".into();
        let list: Vec<String> = st
            .overload_windows
            .iter()
            .map(|w| format!("from {:.0} s to {:.0} s (+{:.0} requests)", w.start_s, w.end_s, w.backlog_rise))
            .collect();
        st.explanation = format!(
            "overloaded {}: arrivals outran the system there, and its latencies there grew with the stretch's \
             length; {evidence}. Add capacity for the peak, or lower it",
            list.join(", ")
        );
    } else if st.shed_fraction > SHED_LIMIT {
        st.verdict = "shedding".into();
        st.explanation = format!(
            "stable only by shedding: {shed_pct:.1}% of measured requests were refused or gave up (queue full, \
             timeout or rate limit), which keeps the queue bounded; {evidence}. Latencies describe only the requests \
             that were served: add capacity or lower the rate"
        );
    } else if trend_stable {
        st.verdict = "stable".into();
        st.explanation = format!(
            "stable: no sustained queue growth (backlog growth {:+.0} requests, between {:.0} and {:.0} at 3 standard \
             errors, under {:.0}% of arrivals, around a working level of {:.1} waiting); {evidence}",
            st.backlog_growth,
            st.backlog_growth_low,
            st.backlog_growth_high,
            MATERIAL_STABLE * 100.0,
            st.backlog_level
        );
    } else if small && !rose {
        st.verdict = "inconclusive".into();
        st.explanation = format!(
            "inconclusive: run longer. The queue did not grow (backlog growth {:+.0} requests, between {:.0} and \
             {:.0} at 3 standard errors), but the load this run drew is known only to ±{:.1}% (bursty arrivals or \
             heavy-tailed lengths), more than the {:.0}% that separates a steady state from a slow overload, and \
             where the engine was saturated ({} of {CELLS} cells) it drained its queue only {:+.1}% faster than \
             requests arrived: a rate this close to capacity can look steady in a run this short; {evidence}",
            st.backlog_growth,
            st.backlog_growth_low,
            st.backlog_growth_high,
            st.load_uncertainty * 100.0,
            LOAD_TOLERANCE * 100.0,
            st.saturated_cells,
            st.saturated_headroom * 100.0
        );
    } else if rose && small {
        st.verdict = "inconclusive".into();
        st.explanation = format!(
            "inconclusive: run longer. The queue rose from {:.1} to {:.1} waiting requests (first → last tenth, more \
             than {STABLE_RISE}×) although its growth, {:+.0} requests, is small next to the arrivals: the load is \
             at or just past capacity, where waits keep rising and no steady state shows; {evidence}",
            st.backlog_first_tenth, st.backlog_last_tenth, st.backlog_growth
        );
    } else {
        st.verdict = "inconclusive".into();
        st.explanation = format!(
            "inconclusive: run longer. The backlog's growth over the run, {:+.0} requests (between {:.0} and {:.0} \
             at 3 standard errors), cannot be told apart from a slow overload ({:.0}% of arrivals); {evidence}",
            st.backlog_growth,
            st.backlog_growth_low,
            st.backlog_growth_high,
            MATERIAL_STABLE * 100.0
        );
    }
}

/// Least-squares slope of y on x and its standard error, inflated for the
/// lag-1 autocorrelation of the residuals (AR(1) variance factor).
fn trend(x: &[f64], y: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    if sxx <= 0.0 {
        return (0.0, 0.0);
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let res: Vec<f64> = x.iter().zip(y).map(|(xi, yi)| yi - a - b * xi).collect();
    let sse: f64 = res.iter().map(|e| e * e).sum();
    let r1 = if sse > 0.0 { res.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / sse } else { 0.0 };
    let r1 = r1.clamp(0.0, 0.95);
    let inflate = ((1.0 + r1) / (1.0 - r1)).sqrt();
    (b, (sse / (n - 2.0) / sxx).sqrt() * inflate)
}

/// A queue well above its working level: [`WINDOW_LEVEL`] times the
/// lower quartile (at least one request) of the cells' backlogs, `sorted`.
fn queue_floor(sorted: &[f64]) -> f64 {
    WINDOW_LEVEL * sorted[sorted.len() / 4].max(1.0)
}

/// Stretches where the backlog grew by more than [`WINDOW_EXCESS`] of the
/// arrivals: a one-sided CUSUM picks each candidate, and a candidate counts
/// when it spans at least [`WINDOW_MIN_CELLS`] cells and
/// [`WINDOW_MIN_ARRIVALS`] arrivals and its own trend's lower bound, at
/// [`WINDOW_Z`] standard errors, still exceeds that excess.
fn windows(b: &Backlog, mean: &[f64], skip: usize, floor: f64) -> Vec<OverloadWindow> {
    let mut found = Vec::new();
    let close = |from: usize, best: Option<(f64, usize)>, found: &mut Vec<OverloadWindow>| {
        let Some((_, to)) = best else { return };
        let arrivals: u64 = b.cells.arrivals[from + 1..=to].iter().sum();
        let long = (to - from) as f64 * b.width >= b.min_window;
        if to - from < WINDOW_MIN_CELLS || arrivals < WINDOW_MIN_ARRIVALS || !long {
            return;
        }
        let xs: Vec<f64> = (from..=to).map(|c| (c as f64 + 0.5) * b.width).collect();
        let (slope, se) = trend(&xs, &mean[from..=to]);
        let span = (to - from) as f64 * b.width;
        // Little's law: a rate that rose from λ₀ to λ₁ raises the backlog by
        // (λ₁ − λ₀)·W without any overload; only the rest counts.
        let around = |c: usize| c.saturating_sub(1)..(c + 2).min(CELLS);
        let follows = b.follows(around(from), around(to)).max(0.0);
        let rise = mean[to] - mean[from] - follows;
        if (slope - WINDOW_Z * se) * span - follows > WINDOW_EXCESS * arrivals as f64 && rise > floor {
            found.push(OverloadWindow {
                start_s: b.t0 + (from as f64 + 0.5) * b.width,
                end_s: b.t0 + (to as f64 + 0.5) * b.width,
                backlog_rise: rise,
            });
        }
    };
    // CUSUM state: accumulated excess, the cell it started from, and its best point.
    let (mut s, mut from) = (0.0, skip);
    let mut best: Option<(f64, usize)> = None;
    for c in skip + 1..mean.len() {
        s += mean[c] - mean[c - 1] - WINDOW_EXCESS * b.cells.arrivals[c] as f64;
        if s <= 0.0 {
            close(from, best.take(), &mut found);
            s = 0.0;
            from = c;
        } else if best.is_none_or(|(v, _)| s > v) {
            best = Some((s, c));
        }
    }
    close(from, best, &mut found);
    found
}

#[cfg(test)]
mod tests;
