//! What a run returns ([`SimOutput`], [`Stopped`]) and where its records
//! go as they leave it ([`Recording`], [`RecordSink`]).

use super::TimeSample;
use crate::engine::{ReplicaStats, Span};
use crate::metrics::{LogHistogram, RecordSample, RequestRecord, Tally};

/// Everything the simulation observed.
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// One record per generated request, by id (= arrival order), when the
    /// run kept them ([`Recording::Keep`]); else the first
    /// [`TIMELINE_REQUESTS`] (for the timeline chart).
    pub records: Vec<RequestRecord>,
    /// Latency parts of the kept `records`, by id (empty unless the run
    /// kept its records with [`crate::Setup::attribution`] on). Defined for
    /// completed requests only: a request refused while waiting, or still
    /// waiting at the end, keeps an open wait (negative entries).
    pub parts: Vec<crate::metrics::Parts>,
    /// Whether `records` holds every request.
    pub kept: bool,
    /// The most records the simulation held at once: the requests in flight
    /// and those finished behind an older one still in flight (what a
    /// streamed run's memory follows).
    pub peak_live_records: usize,
    /// Arrival of the last request, s (0 without requests).
    pub last_arrival: f64,
    /// A run that streamed its records: a sample of them by id (between
    /// [`SAMPLE`] and 2 × [`SAMPLE`], or all when fewer), for the latency
    /// CDF charts. Empty when `kept`.
    pub sample: RecordSample,
    /// The statistics behind the summary, gathered as requests finished
    /// ([`crate::summarize::summarize`] takes them out).
    pub tally: Tally,
    /// Pooled inter-token latencies of measured requests.
    pub itl: LogHistogram,
    /// The same, per class.
    pub itl_by_class: Vec<LogHistogram>,
    /// Per-replica statistics.
    pub replicas: Vec<ReplicaStats>,
    /// End of the last engine step (the last completion), s: the end of the
    /// measurement window.
    pub end_time: f64,
    /// Time of the last event of any kind (a late rejected arrival may come
    /// after the last completion), s.
    pub run_end: f64,
    /// ∫ requests in the system dt over [0, run_end] (Little's law).
    pub in_system_area: f64,
    /// Events processed (steps + arrivals + admissions + wake-ups).
    pub events: u64,
    /// The cluster's state sampled at regular simulated times.
    pub timeseries: Vec<TimeSample>,
    /// What the first [`TIMELINE_REQUESTS`] requests did and when (for the timeline chart).
    pub timeline: Vec<Span>,
    /// Why the run stopped before its last event, if it did: its results
    /// are then incomplete and must not be reported ([`crate::Report::check`]).
    pub stopped: Option<Stopped>,
    /// What the fleet did (a `[fleet]` whose replicas may change).
    pub fleet: Option<crate::fleet::FleetOutput>,
    /// Requests by arrival time and how many met their SLO (with `[fleet]`).
    pub slo_timeline: Option<crate::fleet::SloTimeline>,
    /// The same for the fleet frozen at its initial size, same arrivals
    /// (filled by [`crate::run_setup_with`] for a scaling policy): what
    /// capacity that arrived in time changed.
    pub frozen_timeline: Option<crate::fleet::SloTimeline>,
}

/// Why a run stopped before its last event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stopped {
    /// An event lay beyond [`crate::limits::MAX_CLOCK_S`], at this time, s.
    Clock(f64),
    /// A stop was requested (`--max-wall-time`) with the clock at this time, s.
    Requested(f64),
    /// This many requests were held at once (a backlog growing past
    /// [`crate::limits::max_live_requests`]), with the clock at this time, s.
    Memory(usize, f64),
}

/// Requests followed for the timeline chart.
pub const TIMELINE_REQUESTS: u32 = 40;

/// A streamed run keeps between this many and twice as many records for its
/// charts ([`SimOutput::sample`]).
pub const SAMPLE: usize = 50_000;

/// Where finished requests' records go, in id order, as they leave the
/// simulation (the CLI writes them to `requests.csv` this way). An
/// implementation that does I/O keeps its first error and reports it when
/// the caller asks: the simulation itself does no I/O.
pub trait RecordSink: Send {
    /// Request `id` has left the simulation (or the run ended with it still
    /// in), with its latency parts when the run attributes them.
    fn record(&mut self, id: u32, r: &RequestRecord, parts: Option<&crate::metrics::Parts>);
}

/// What a run does with its per-request records.
pub enum Recording<'k> {
    /// Keep them all in [`SimOutput::records`] (memory grows with the run).
    Keep,
    /// Hand each to the sink as its request finishes, and keep only a
    /// sample for charts: memory follows the requests in flight.
    Stream(Option<&'k mut dyn RecordSink>),
}
