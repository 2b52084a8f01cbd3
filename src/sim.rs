//! The discrete-event loop: [`EventLoop`] owns the clock, the event queue,
//! the replicas and the routers, with one method per event kind.
//!
//! # Ordering and determinism
//! Events are handled in time order. Arrivals come from the request
//! [`Source`]; the queue holds the other five kinds. At equal times:
//!
//! 1. `StepEnd`, lowest replica first: a finished step frees batch slots and
//!    KV blocks before anyone is admitted at that instant;
//! 2. arrivals, in request order: a request arriving at the same instant as
//!    an admission or a wake-up is seen by it, so requests that arrive
//!    together are batched together;
//! 3. `Admit` (end of preprocessing), lowest request first: it enters a queue
//!    before the wake-up that may schedule it;
//! 4. `Wake`, lowest replica first: an idle replica plans its next step after
//!    everything else that happened at that instant;
//! 5. `Timeout`, lowest request first: a client gives up only if nothing at
//!    that instant served it;
//! 6. `Transfer`, lowest request first: the request joins a decode replica's
//!    queue and queues that replica's wake-up at the same instant, so it is
//!    still served then;
//! 7. the fleet's events (`[fleet]`): a slot becoming ready, a failure
//!    (random, then scripted), the policy's look, a warm standby refilled.
//!    They come last so that the policy sees everything that happened at
//!    that instant. When only fleet events are left (no arrival to come,
//!    nobody in the system), the run ends.
//!
//! No wall-clock time, hash-map order or thread scheduling enters the loop:
//! the same setup and seed give bit-identical records.

use crate::Setup;
use crate::cluster::{ReplicaLoad, Router};
use crate::config::{CostModelKind, DisaggregationConfig, PoolRole, QueueOrder, RouterKind};
use crate::cost::{ConstantStep, ExponentialStep, KernelModel, Roofline, Speculative, StepCostModel};
use crate::engine::{Replica, ReplicaStats, Sinks, Span};
use crate::metrics::{LiveRecords, LogHistogram, Part, RecordSample, RejectReason, RequestRecord, Status, Tally};
use crate::rng::Stream;
use crate::workload::{Source, stream_seed};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Everything the simulation observed.
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// One record per generated request, by id (= arrival order), when the
    /// run kept them ([`Recording::Keep`]); else the first
    /// [`TIMELINE_REQUESTS`] (for the timeline chart).
    pub records: Vec<RequestRecord>,
    /// Latency parts of the kept `records`, by id (empty unless the run
    /// kept its records with [`Setup::attribution`] on). Defined for
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
    /// ([`crate::metrics::summarize`] takes them out).
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

/// What becomes of records as they leave the simulation.
struct Retired<'k> {
    tally: Tally,
    keep: bool,
    /// Kept records (all, or the first [`TIMELINE_REQUESTS`]).
    records: Vec<RequestRecord>,
    /// Parts of the kept records (when attributing).
    parts: Vec<crate::metrics::Parts>,
    sample: RecordSample,
    sink: Option<&'k mut dyn RecordSink>,
    /// A fleet's requests by arrival time.
    slo: Option<(crate::fleet::SloTimeline, std::sync::Arc<crate::workload::WorkloadPlan>)>,
}

impl Retired<'_> {
    fn take(&mut self, id: u32, r: &RequestRecord, parts: Option<&crate::metrics::Parts>) {
        self.tally.add(r);
        if let Some((t, w)) = self.slo.as_mut() {
            t.add(r, crate::metrics::slo_met(w, r));
        }
        if self.keep || id < TIMELINE_REQUESTS {
            self.records.push(*r);
        }
        if self.keep {
            if let Some(p) = parts {
                self.parts.push(*p);
            }
            return;
        }
        self.sample.offer(id as u64, r);
        if let Some(s) = self.sink.as_mut() {
            s.record(id, r, parts);
        }
    }
}

/// Most samples kept in the time series; past it, every other sample is
/// dropped and the interval doubles.
const MAX_SAMPLES: usize = 2048;

/// The cluster's state at one instant (summed over replicas).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimeSample {
    /// Simulated time, s.
    pub t: f64,
    /// Requests waiting in replica queues.
    pub waiting: u32,
    /// Requests running (admitted to a batch).
    pub running: u32,
    /// Sequences in the steps in flight.
    pub batch: u32,
    /// Fraction of all KV blocks in use.
    pub kv_used: f64,
    /// Requests completed so far.
    pub completed: u64,
}

/// Samples the cluster's state every `interval` of simulated time.
struct Sampler {
    next: f64,
    interval: f64,
    samples: Vec<TimeSample>,
    /// KV blocks of the whole cluster.
    total_blocks: u64,
    /// Replicas that may hold work (a sample visits only these, so its cost
    /// does not grow with idle replicas), and a flag per replica.
    active: Vec<u32>,
    is_active: Vec<bool>,
}

impl Sampler {
    #[inline]
    fn due(&self, t: f64) -> bool {
        t >= self.next
    }

    fn new<C: StepCostModel>(replicas: &[Replica<C>]) -> Self {
        Sampler {
            next: 0.0,
            interval: 0.05,
            samples: Vec::new(),
            total_blocks: replicas.iter().map(|r| r.params().num_blocks).sum(),
            active: Vec::new(),
            is_active: vec![false; replicas.len()],
        }
    }

    /// Replica `r` was given work.
    #[inline]
    fn activate(&mut self, r: usize) {
        if !self.is_active[r] {
            self.is_active[r] = true;
            self.active.push(r as u32);
        }
    }

    /// Samples the cluster: sums over the active replicas (idle ones add
    /// nothing; integer sums, so the order never matters), dropping those
    /// that have gone idle.
    fn take<C: StepCostModel>(&mut self, t: f64, replicas: &[Replica<C>], completed: u64) {
        let (mut waiting, mut running, mut batch, mut used) = (0u32, 0u32, 0u32, 0u64);
        let is_active = &mut self.is_active;
        self.active.retain(|&r| {
            let rep = &replicas[r as usize];
            let (w, n, b, u) = (rep.num_waiting() as u32, rep.num_running(), rep.batch_size(), rep.used_blocks());
            waiting += w;
            running += n;
            batch += b;
            used += u;
            let keep = w > 0 || n > 0 || u > 0 || rep.is_busy();
            is_active[r as usize] = keep;
            keep
        });
        self.samples.push(TimeSample {
            t,
            waiting,
            running,
            batch,
            kv_used: used as f64 / self.total_blocks as f64,
            completed,
        });
        if self.samples.len() >= MAX_SAMPLES {
            let mut k = 0;
            self.samples.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            self.interval *= 2.0;
        }
        self.next = t + self.interval;
    }
}

/// Event kinds, in their order at equal times (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A replica's step ends.
    StepEnd = 0,
    /// A request's preprocessing ends: it is routed (or queued at the central queue).
    Admit = 1,
    /// An idle replica looks at its queue.
    Wake = 2,
    /// A client's `max_wait_s` runs out.
    Timeout = 3,
    /// A prefill replica's KV cache has reached the decode pool.
    Transfer = 4,
    /// A fleet slot has started (or been repaired): it serves from now.
    Ready = 5,
    /// A fleet slot fails (random failure of its current life).
    Fail = 6,
    /// A scripted failure (key: its index in `fleet.failures`).
    Script = 7,
    /// The fleet's scaling policy looks.
    Tick = 8,
    /// A warm standby has been replaced.
    Refill = 9,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    t: f64,
    kind: Kind,
    key: u32,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    // Reversed: BinaryHeap is a max-heap and we want the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then((o.kind as u8).cmp(&(self.kind as u8))).then(o.key.cmp(&self.key))
    }
}

impl<C: StepCostModel> ReplicaLoad for Replica<C> {
    fn outstanding(&self) -> u32 {
        Replica::outstanding(self)
    }
    fn kv_blocks(&self) -> u64 {
        self.used_blocks()
    }
    fn pending_tokens(&self) -> u64 {
        Replica::pending_tokens(self)
    }
}

/// Runs the setup with the given seed, choosing the configured cost model,
/// and keeps every record.
pub fn simulate(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, false, true, Recording::Keep)
}

/// Like [`simulate`], doing with the records as `recording` says.
pub fn simulate_recording(setup: &Setup, seed: u64, recording: Recording) -> SimOutput {
    simulate_opts(setup, seed, false, true, recording)
}

/// Like [`simulate`], verifying every replica's invariants after every step.
pub fn simulate_checked(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, true, true, Recording::Keep)
}

/// Like [`simulate`] but without the steady-decode fast path (every step
/// goes through the general scheduler): for tests that the fast path changes
/// nothing.
pub fn simulate_without_fast_path(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, false, false, Recording::Keep)
}

fn simulate_opts(setup: &Setup, seed: u64, check: bool, fast: bool, rec: Recording) -> SimOutput {
    let s = &setup.scenario;
    match s.cost.model {
        CostModelKind::Roofline => with_models(setup, seed, check, fast, rec, |llm, p, cost| {
            Roofline::with_layout(llm, &p.gpu, &p.layout, s.model.dtype, p.kv_dtype, cost)
        }),
        CostModelKind::Kernel => with_models(setup, seed, check, fast, rec, |llm, p, cost| {
            KernelModel::new(llm, &p.gpu, &p.layout, s.model.dtype, p.kv_dtype, cost)
                .with_graphs(p.engine_config.cuda_graph_max_bs)
        }),
        CostModelKind::Constant => {
            let t = s.cost.step_time_ms.unwrap_or(1.0) * 1e-3;
            simulate_with(setup, seed, |_| ConstantStep { time: t }, check, fast, rec)
        }
        CostModelKind::Exponential => {
            let t = s.cost.step_time_ms.unwrap_or(1.0) * 1e-3;
            let cost = |r| ExponentialStep::new(t, Stream::ReplicaStep(r).seed(seed));
            simulate_with(setup, seed, cost, check, fast, rec)
        }
    }
}

/// Simulates with one step-cost model per pool, built by `make(model, pool,
/// cost settings)`; pools that speculate wrap it with their draft's model.
fn with_models<C: StepCostModel + Clone>(
    setup: &Setup,
    seed: u64,
    check: bool,
    fast: bool,
    rec: Recording,
    make: impl Fn(&crate::catalog::LlmSpec, &crate::Pool, &crate::config::CostConfig) -> C,
) -> SimOutput {
    let pool = pool_of(setup);
    if setup.pools.iter().all(|p| p.draft.is_none()) {
        let models: Vec<C> = setup.pools.iter().map(|p| make(&setup.llm, p, &p.cost)).collect();
        return simulate_with(setup, seed, |r| models[pool[r as usize] as usize].clone(), check, fast, rec);
    }
    let models: Vec<Speculative<C>> = setup
        .pools
        .iter()
        .map(|p| {
            // Draft steps run inside the verify step: no scheduler overhead of their own.
            let cost = crate::config::CostConfig {
                step_overhead_ms: 0.0,
                per_request_overhead_ms: 0.0,
                per_seq_overhead_ms: 0.0,
                ..p.cost.clone()
            };
            let draft = p.draft.as_ref().map(|d| make(d, p, &cost));
            Speculative::new(make(&setup.llm, p, &p.cost), draft)
        })
        .collect();
    simulate_with(setup, seed, |r| models[pool[r as usize] as usize].clone(), check, fast, rec)
}

/// The pool of each replica, by replica index (pools in declaration order).
pub fn pool_of(setup: &Setup) -> Vec<u32> {
    setup.pools.iter().enumerate().flat_map(|(i, p)| std::iter::repeat_n(i as u32, p.replicas as usize)).collect()
}

/// Shortens a request to the context window: the prompt first (keeping at
/// least one token), then the output. Returns whether it changed.
fn clip(max_len: u32, prompt: &mut u32, output: &mut u32) -> bool {
    let total = *prompt as u64 + *output as u64;
    if total <= max_len as u64 {
        return false;
    }
    let over = total - max_len as u64;
    let from_prompt = over.min((*prompt as u64).saturating_sub(1)) as u32;
    *prompt -= from_prompt;
    *output -= (over - from_prompt as u64) as u32;
    true
}

/// Why a request can never be served by this setup (by every pool it may
/// visit), if so.
fn reject_reason(setup: &Setup, prompt: u32, output: u32) -> Option<RejectReason> {
    let total = prompt as u64 + output as u64;
    for p in &setup.pools {
        if total > p.memory.max_model_len as u64 {
            return Some(RejectReason::ExceedsMaxModelLen);
        }
        // KV the request holds at its longest there (a prefill-only one, or
        // one in a prefill pool, holds its prompt).
        let kv = match p.role {
            PoolRole::Prefill => prompt as u64,
            _ => prompt as u64 + output.max(1) as u64 - 1,
        };
        if kv > p.memory.kv_capacity_tokens {
            return Some(RejectReason::ExceedsKvCapacity);
        }
        if p.role != PoolRole::Decode && !p.engine.batching.chunked() && prompt > p.engine.max_num_batched_tokens {
            return Some(RejectReason::ExceedsTokenBudget);
        }
    }
    None
}

/// Runs the setup with one cost-model instance per replica from `make_cost`.
/// With `check`, every replica's invariants (KV blocks accounted, never over
/// capacity, running list consistent) are verified after every step: O(running)
/// per step, for tests. With `fast`, steady decode steps run through
/// [`Replica::fast_forward`]. `rec` says what becomes of the records.
pub fn simulate_with<C: StepCostModel>(
    setup: &Setup,
    seed: u64,
    make_cost: impl Fn(u32) -> C,
    check: bool,
    fast: bool,
    rec: Recording,
) -> SimOutput {
    EventLoop::new(setup, seed, make_cost, check, fast, rec).run()
}

/// What the run records: the engine writes into it through [`Sinks`].
struct Observed<'k> {
    /// The requests in flight (and those finished but not yet retired).
    records: LiveRecords,
    retired: Retired<'k>,
    itl: Vec<LogHistogram>,
    completed: u64,
    timeline: Vec<Span>,
    /// Completions not yet reported to the request source (closed loops, sessions).
    done: Vec<u32>,
    /// Requests a prefill replica has just handed over.
    handoffs: Vec<u32>,
    warmup: f64,
    notify: bool,
    /// TTFTs of first tokens since the fleet policy last looked (`policy = "ttft"`).
    first_tokens: Option<Vec<f64>>,
}

impl Observed<'_> {
    /// Passes the finished requests at the front of the window on.
    fn retire(&mut self) {
        let Observed { records, retired, .. } = self;
        records.retire(|id, r, p| retired.take(id, r, p));
    }

    fn sinks(&mut self) -> Sinks<'_> {
        Sinks {
            records: &mut self.records,
            itl: &mut self.itl,
            warmup: self.warmup,
            completed: &mut self.completed,
            timeline: &mut self.timeline,
            timeline_limit: TIMELINE_REQUESTS,
            notify: self.notify,
            done: &mut self.done,
            handoffs: &mut self.handoffs,
            first_tokens: self.first_tokens.as_mut(),
        }
    }
}

/// The discrete-event loop of one run: the clock, the event queue, the
/// replicas and routers, and one method per event kind (see the module docs
/// for their order at equal times).
struct EventLoop<'s, 'k, C: StepCostModel> {
    setup: &'s Setup,
    /// Verify every replica's invariants after every step.
    check: bool,
    /// Run steady decode steps through [`Replica::fast_forward`].
    fast: bool,
    /// The clock: the time of the event being handled, s.
    now: f64,
    /// Pending events; arrivals come from `requests` instead.
    queue: BinaryHeap<Event>,
    requests: Source,
    replicas: Vec<Replica<C>>,
    /// Replicas `0..n_entry` take arrivals (mixed or prefill pools); the rest decode.
    n_entry: usize,
    router: Router,
    dec_router: Router,
    /// A `Wake` of this replica is queued for the current instant.
    wake_pending: Vec<bool>,
    /// `router = "central-queue"`: requests wait at the router, first come
    /// first served, until a replica has room.
    central: bool,
    /// `router = "central-queue"`: the requests waiting there.
    central_queue: VecDeque<u32>,
    keyer: Keyer,
    limits: Limits,
    /// When each front-end worker is next free (none: unlimited).
    frontend: Vec<f64>,
    prefix_ids: Vec<u64>,
    obs: Observed<'k>,
    sampler: Sampler,
    /// Requests admitted and not yet finished or refused.
    in_system: u64,
    /// ∫ in_system dt (Little's law).
    area: f64,
    events: u64,
    last_step_end: f64,
    stopped: Option<Stopped>,
    /// Arrivals already counted in [`crate::limits::simulated`].
    reported: u64,
    /// Most requests held at once before the run is stopped ([`Stopped::Memory`]).
    max_live: usize,
    /// The longest request every pool accepts (clipping makes a request fit it).
    max_len: u32,
    clip_long: bool,
    /// A fixed `workload.max_tokens`: outputs longer are cut there (u32::MAX: none).
    output_cap: u32,
    max_wait: Option<f64>,
    pre_fixed: f64,
    pre_tok: f64,
    /// `engine.frontend_latency_ms`, s.
    pre_latency: f64,
    kv_bytes_per_token: f64,
    link: DisaggregationConfig,
    /// `[fleet]`: replicas that come and go (None: a fixed cluster).
    fleet: Option<Box<crate::fleet::Fleet>>,
    /// Fleet events in the queue (when only they are left, the run ends).
    fleet_events: usize,
    /// Requests admitted while no replica is ready, waiting at the router for one.
    held: VecDeque<u32>,
    /// Per replica: the ends of steps lost to failures (their `StepEnd`s are ignored).
    lost_step: Vec<Vec<f64>>,
    /// `lora.router_affinity`: prefer a replica holding the request's adapter.
    adapter_affinity: bool,
    /// Time up to which `area` is integrated (the clock, but for fleet
    /// events that leave the requests in the system as they are).
    area_t: f64,
}

impl<'s, 'k, C: StepCostModel> EventLoop<'s, 'k, C> {
    fn new(
        setup: &'s Setup,
        seed: u64,
        make_cost: impl Fn(u32) -> C,
        check: bool,
        fast: bool,
        rec: Recording<'k>,
    ) -> Self {
        let s = &setup.scenario;
        let warmup = s.warmup_s;
        let pool = pool_of(setup);
        let n_rep = pool.len();
        let mut replicas: Vec<Replica<C>> = (0..n_rep as u32)
            .map(|i| {
                let p = pool[i as usize];
                let mut r = Replica::new(i, setup.pools[p as usize].engine, make_cost(i), warmup);
                r.stats.pool = p;
                r
            })
            .collect();
        let n_entry = pool.iter().take_while(|&&p| setup.pools[p as usize].role != PoolRole::Decode).count();
        let groups: std::sync::Arc<[(u32, u32)]> =
            setup.workload.classes.iter().map(|c| (c.prefix_group, c.prefix_tokens)).collect();
        // Acceptance rates per class, per pool (each pool may speculate or not).
        let alpha: Vec<std::sync::Arc<[f64]>> = setup
            .pools
            .iter()
            .map(|p| match crate::config::SpeculativeConfig::active(&p.engine_config) {
                Some(sp) => setup.workload.classes.iter().map(|c| c.spec_acceptance.unwrap_or(sp.acceptance)).collect(),
                None => std::sync::Arc::from(Vec::new()),
            })
            .collect();
        let lora = crate::engine::lora::plan(setup, seed);
        for r in replicas.iter_mut() {
            if let Some(p) = &lora {
                r.set_lora(p.clone());
            }
            r.set_prefix_groups(groups.clone());
            r.set_trace_hashes(setup.workload.trace.as_ref().map(|t| t.trace.clone()));
            r.set_speculative(alpha[r.stats.pool as usize].clone(), Stream::Speculative.seed(seed));
        }
        let requests = Source::new(&setup.workload, seed);
        let notify = requests.needs_feedback();
        let (keep, sink) = match rec {
            Recording::Keep => (true, None),
            Recording::Stream(sink) => (false, sink),
        };
        let cap = if keep { setup.workload.num_requests.unwrap_or(0).min(1 << 26) as usize } else { 0 };
        let sampler = Sampler::new(&replicas);
        let fleet = s.fleet.as_ref().filter(|f| f.is_dynamic()).map(|f| {
            let p = &setup.pools[0];
            let weights = p.memory.weights_gib_total * crate::catalog::GIB;
            let cold = f.provision_s + weights / (f.weight_load_gbps * 1e9) + f.engine_start_s;
            Box::new(crate::fleet::Fleet::new(f, n_rep, s.hardware.replicas as usize, seed, cold, warmup))
        });
        let mut router = Router::new(s.hardware.router, n_entry, Stream::Router.seed(seed))
            .with_prefix_cap(s.hardware.prefix_load_cap);
        if let Some(f) = &fleet {
            let ready: Vec<bool> = (0..n_rep).map(|i| f.is_ready(i)).collect();
            router = router.with_fleet(&ready);
        }
        let slo = s.fleet.as_ref().map(|_| {
            let bucket = s.duration_s.map_or(300.0, |d| (d / 96.0).max(60.0));
            (crate::fleet::SloTimeline::new(bucket), setup.workload.clone())
        });
        let first_tokens =
            fleet.as_ref().filter(|f| f.config().policy == crate::config::ScalePolicy::Ttft).map(|_| Vec::new());
        let mut this = EventLoop {
            setup,
            check,
            fast,
            now: 0.0,
            queue: BinaryHeap::new(),
            requests,
            replicas,
            n_entry,
            router,
            dec_router: Router::new(s.hardware.router, (n_rep - n_entry).max(1), Stream::DecodeRouter.seed(seed)),
            wake_pending: vec![false; n_rep],
            central: s.hardware.router == RouterKind::CentralQueue,
            central_queue: VecDeque::new(),
            keyer: Keyer::new(setup, seed),
            limits: Limits::new(setup),
            frontend: vec![0.0; s.engine.frontend_workers as usize],
            prefix_ids: Vec::new(),
            obs: Observed {
                records: LiveRecords::with_attribution(setup.attribution),
                retired: Retired {
                    tally: Tally::new(setup),
                    keep,
                    records: Vec::with_capacity(cap),
                    parts: Vec::new(),
                    sample: RecordSample::new(SAMPLE),
                    sink,
                    slo,
                },
                itl: vec![LogHistogram::new(); setup.workload.classes.len()],
                completed: 0,
                timeline: Vec::new(),
                done: Vec::new(),
                handoffs: Vec::new(),
                warmup,
                notify,
                first_tokens,
            },
            sampler,
            in_system: 0,
            area: 0.0,
            events: 0,
            last_step_end: f64::NAN,
            stopped: None,
            reported: 0,
            max_live: crate::limits::max_live_requests(),
            // Clipping makes a request fit every pool, whichever serves it: the
            // cluster-wide limit is the smallest pool's.
            max_len: setup.max_model_len(),
            clip_long: setup.workload.clip,
            output_cap: match s.workload.max_tokens {
                crate::config::MaxTokens::Fixed(c) => c,
                _ => u32::MAX,
            },
            max_wait: s.engine.max_wait_s,
            pre_fixed: s.engine.preprocess_ms * 1e-3,
            pre_tok: s.engine.preprocess_us_per_token * 1e-6,
            pre_latency: s.engine.frontend_latency_ms * 1e-3,
            kv_bytes_per_token: setup.llm.kv_bytes_per_token(setup.llm.num_layers as f64, 1.0, s.kv_dtype().bytes()),
            link: s.disaggregation.clone().unwrap_or_default(),
            fleet,
            fleet_events: 0,
            held: VecDeque::new(),
            lost_step: vec![Vec::new(); n_rep],
            area_t: 0.0,
            adapter_affinity: s.lora.as_ref().is_some_and(|l| l.router_affinity),
        };
        this.start_fleet();
        this
    }

    /// Handles events in order until none is left; returns what was observed.
    fn run(mut self) -> SimOutput {
        loop {
            let top = self.queue.peek().copied();
            let next_arrival = self.requests.peek_time();
            // An arrival goes after step ends at the same instant, before everything else.
            if self.fleet_events > 0
                && self.queue.len() == self.fleet_events
                && next_arrival.is_none()
                && self.in_system == 0
            {
                // Only the fleet's own events are left: the run is over.
                break;
            }
            let take_arrival = match (top, next_arrival) {
                (None, None) => break,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(e), Some(a)) => a < e.t || (a == e.t && e.kind != Kind::StepEnd),
            };
            self.events += 1;
            let t_next = if take_arrival { next_arrival.unwrap_or(self.now) } else { top.map_or(self.now, |e| e.t) };
            // Guards (crate::limits): a clock too far out to resolve a
            // microsecond, and a stop requested from outside.
            if t_next > crate::limits::MAX_CLOCK_S {
                self.stopped = Some(Stopped::Clock(t_next));
                break;
            }
            if self.events & 0xffff == 0 {
                let arrived = self.obs.records.len() as u64;
                crate::limits::note_simulated(arrived - self.reported);
                self.reported = arrived;
                if crate::limits::stop_requested() {
                    self.stopped = Some(Stopped::Requested(self.now));
                    break;
                }
                if self.obs.records.live() > self.max_live {
                    self.stopped = Some(Stopped::Memory(self.obs.records.live(), self.now));
                    break;
                }
            }
            if self.sampler.due(t_next) {
                self.sampler.take(self.sampler.next, &self.replicas, self.obs.completed);
            }
            if take_arrival {
                self.on_arrival();
                self.obs.retire();
                continue;
            }
            let e = self.queue.pop().expect("event");
            if e.kind as u8 >= Kind::Ready as u8 {
                // Requests in the system stay as they are: the area is integrated later.
                self.fleet_events -= 1;
                self.now = e.t;
                self.on_fleet(e);
                self.obs.retire();
                continue;
            }
            self.area += self.in_system as f64 * (e.t - self.area_t);
            self.area_t = e.t;
            self.now = e.t;
            match e.kind {
                Kind::Admit => self.on_admit(e.key),
                Kind::Timeout => self.on_timeout(e.key),
                Kind::Transfer => self.on_transfer(e.key),
                Kind::Wake => self.on_wake(e.key as usize),
                Kind::StepEnd => self.on_step_end(e.key as usize, next_arrival),
                _ => unreachable!("fleet events are handled above"),
            }
            self.obs.retire();
        }
        self.finish()
    }

    /// A request arrives: recorded, clipped or refused if it can never fit,
    /// rate-limited, given its client timeout, and sent through preprocessing.
    fn on_arrival(&mut self) {
        let mut a = self.requests.pop().expect("arrival");
        self.area += self.in_system as f64 * (a.arrival - self.area_t);
        self.area_t = a.arrival;
        self.now = a.arrival;
        let id = self.obs.records.len() as u32;
        a.output = a.output.min(self.output_cap);
        let clipped = self.clip_long && clip(self.max_len, &mut a.prompt, &mut a.output);
        let mut rec = RequestRecord::new(a.arrival, a.prompt, a.output);
        rec.class = a.class;
        rec.session = a.session;
        rec.prefix = a.prefix.min(a.prompt);
        rec.clipped = clipped;
        rec.trace_row = a.trace_row;
        let now = self.now;
        let refused = reject_reason(self.setup, a.prompt, a.output).or_else(|| {
            self.limits.take(a.class, now, a.prompt as f64 + a.output as f64).then_some(RejectReason::RateLimited)
        });
        if let Some(reason) = refused {
            rec.status = Status::Rejected(reason);
            self.obs.records.push(rec);
            if self.obs.notify {
                self.requests.done(id, now, false);
            }
            return;
        }
        self.obs.records.push(rec);
        self.in_system += 1;
        if let Some(w) = self.max_wait {
            self.queue.push(Event { t: now + w, kind: Kind::Timeout, key: id });
        }
        let mut delay = self.pre_fixed + self.pre_tok * a.prompt as f64;
        // Arrivals come in time order, so taking the earliest-free worker is FCFS.
        if let Some(w) = self.frontend.iter_mut().min_by(|x, y| x.total_cmp(y)) {
            let start = w.max(now);
            *w = start + delay;
            delay = *w - now;
        }
        delay += self.pre_latency;
        if delay > 0.0 {
            self.queue.push(Event { t: now + delay, kind: Kind::Admit, key: id });
        } else {
            self.admit_now(id);
        }
    }

    /// Preprocessing is over (a request whose client gave up meanwhile is gone).
    fn on_admit(&mut self, id: u32) {
        if !self.obs.records.refused(id) {
            self.admit_now(id);
        }
    }

    /// The client gives up on a request that has not started.
    fn on_timeout(&mut self, id: u32) {
        let Some(rec) = self.obs.records.get(id) else { return };
        if rec.status == Status::InFlight && rec.first_scheduled.is_nan() {
            let r = rec.replica;
            self.refuse(id, RejectReason::TimedOut);
            if r != u32::MAX {
                let rec = &self.obs.records[id as usize];
                let work = rec.prompt as u64 + rec.output as u64;
                self.replicas[r as usize].cancel_waiting(self.now, work);
                self.observe(r as usize);
            }
        }
    }

    /// A request's KV cache has reached the decode pool: the prefill replica
    /// frees it, a decode replica queues the request.
    fn on_transfer(&mut self, id: u32) {
        let now = self.now;
        let from = self.obs.records[id as usize].replica as usize;
        self.replicas[from].release_handoff(now, id, &self.obs.records);
        self.observe(from);
        self.wake(from);
        let rec = &mut self.obs.records[id as usize];
        let r = self.n_entry + self.dec_router.pick(rec.session);
        rec.replica = r as u32;
        let work = (rec.output - rec.generated) as u64;
        let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
        self.sampler.activate(r);
        if self.obs.records.attributing() {
            let a = self.obs.records.attr(id);
            a.parts[Part::Transfer.idx()] += now - a.mark;
        }
        if !self.replicas[r].enqueue_ready(now, id, key, work, &mut self.obs.records) {
            self.refuse(id, RejectReason::QueueFull);
            return;
        }
        self.observe(r);
        self.wake(r);
    }

    /// An idle replica plans its next step.
    fn on_wake(&mut self, r: usize) {
        self.wake_pending[r] = false;
        if !self.replicas[r].is_busy()
            && let Some(end) = self.replicas[r].form_step(self.now, &mut self.obs.sinks())
        {
            self.queue.push(Event { t: end, kind: Kind::StepEnd, key: r as u32 });
        }
        if let Some(at) = self.replicas[r].take_wake() {
            // Static batching: look at the queue again when its batch is due.
            self.queue.push(Event { t: at, kind: Kind::Wake, key: r as u32 });
        }
        self.observe(r);
    }

    /// Replica `r`'s step ends. Its next steps run inline while nothing else
    /// can happen before they end (the next event or arrival, a hand-off, a
    /// closed-loop user's next request).
    fn on_step_end(&mut self, r: usize, next_arrival: Option<f64>) {
        if let Some(k) = self.lost_step[r].iter().position(|&t| t == self.now) {
            // The step was lost with its replica's failure.
            self.lost_step[r].swap_remove(k);
            return;
        }
        let mut t = self.now;
        let mut horizon = self.queue.peek().map_or(f64::INFINITY, |x| x.t).min(next_arrival.unwrap_or(f64::INFINITY));
        loop {
            let before = self.obs.completed;
            let next = self.replicas[r].finish_step(t, &mut self.obs.sinks());
            self.in_system -= self.obs.completed - before;
            if self.central && self.obs.completed != before && !self.central_queue.is_empty() {
                // Room freed for a request in the central queue: stop stepping inline to dispatch it now.
                horizon = horizon.min(t);
            }
            if !self.obs.handoffs.is_empty() {
                for id in self.obs.handoffs.drain(..) {
                    // The prompt's KV cache crosses the link to a decode replica.
                    let rec = &self.obs.records[id as usize];
                    let bytes = self.kv_bytes_per_token * (rec.prompt + rec.generated - 1) as f64;
                    let at = t + bytes / (self.link.kv_transfer_gbps * 1e9) + self.link.kv_transfer_latency_ms * 1e-3;
                    self.queue.push(Event { t: at, kind: Kind::Transfer, key: id });
                    horizon = horizon.min(at);
                }
            }
            if self.obs.notify && !self.obs.done.is_empty() {
                // Closed-loop users and sessions send their next request.
                for id in self.obs.done.drain(..) {
                    self.requests.done(id, t, true);
                }
                horizon = horizon.min(self.requests.peek_time().unwrap_or(f64::INFINITY));
            }
            if self.check
                && let Err(msg) = self.replicas[r].check_invariants()
            {
                panic!("replica {r} at t = {t}: {msg}");
            }
            if self.check {
                let (have, want) =
                    (self.replicas[r].pending_tokens(), self.replicas[r].recount_pending(&self.obs.records));
                assert_eq!(have, want, "replica {r} at t = {t}: pending tokens");
            }
            let next = match next {
                Some(_) if self.fast => {
                    let stop = horizon.min(self.sampler.next);
                    let end = self.replicas[r].fast_forward(
                        stop,
                        &mut self.obs.sinks(),
                        self.check,
                        &mut self.area,
                        self.in_system,
                    );
                    t = self.replicas[r].step_start();
                    Some(end)
                }
                other => other,
            };
            match next {
                // Past the clock limit, the step goes back to the event loop, which stops the run.
                Some(end) if end < horizon && end <= crate::limits::MAX_CLOCK_S => {
                    self.area += self.in_system as f64 * (end - t);
                    t = end;
                    self.events += 1;
                    if self.sampler.due(t) {
                        self.sampler.take(t, &self.replicas, self.obs.completed);
                    }
                }
                Some(end) => {
                    self.queue.push(Event { t: end, kind: Kind::StepEnd, key: r as u32 });
                    break;
                }
                None => break,
            }
        }
        self.now = t;
        self.area_t = t;
        self.last_step_end = t;
        if let Some(at) = self.replicas[r].take_wake() {
            self.queue.push(Event { t: at, kind: Kind::Wake, key: r as u32 });
        }
        self.observe(r);
        if self.central {
            self.dispatch();
        }
    }

    /// Refuses a request already counted in the system.
    fn refuse(&mut self, id: u32, why: RejectReason) {
        // (A fleet event may refuse: bring the area up to now first.)
        self.area += self.in_system as f64 * (self.now - self.area_t);
        self.area_t = self.now;
        self.obs.records[id as usize].status = Status::Rejected(why);
        self.in_system -= 1;
        if self.obs.notify {
            self.requests.done(id, self.now, false);
        }
    }

    /// Admits request `id` now: to the central queue, or routed to a replica.
    fn admit_now(&mut self, id: u32) {
        if self.central {
            let rec = &mut self.obs.records[id as usize];
            rec.admitted = self.now;
            let preprocess = self.now - rec.arrival;
            if self.obs.records.attributing() {
                let p = &mut self.obs.records.attr(id).parts;
                p[Part::Preprocess.idx()] = preprocess - p[Part::Preempted.idx()];
            }
            self.central_queue.push_back(id);
            self.dispatch();
        } else if !self.router.any_up() {
            // No replica serves (scaled to zero, or all failed): wait at the router.
            let rec = &mut self.obs.records[id as usize];
            rec.admitted = self.now;
            rec.replica = u32::MAX;
            self.held.push_back(id);
        } else if !self.route(id) {
            self.refuse(id, RejectReason::QueueFull);
        }
    }

    /// Routes request `id` to an entry replica and queues it there; false
    /// when that replica's queue is full.
    fn route(&mut self, id: u32) -> bool {
        let rec = &mut self.obs.records[id as usize];
        let r = if self.router.wants_prefix() {
            self.replicas[0].prefix_ids(id, rec, &mut self.prefix_ids);
            self.router.pick_prefix(&self.prefix_ids)
        } else {
            self.router.pick(rec.session)
        };
        let r = if self.adapter_affinity { self.prefer_adapter(id, r) } else { r };
        let rec = &mut self.obs.records[id as usize];
        // A request held at the router while no replica was ready was admitted then.
        let held = rec.admitted;
        if held.is_nan() {
            rec.admitted = self.now;
        }
        rec.replica = r as u32;
        let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
        let work = rec.prompt as u64 + rec.output as u64;
        let (arrival, now) = (rec.arrival, self.now);
        self.sampler.activate(r);
        if self.obs.records.attributing() {
            // (A request sent again after a failure counts from the failure.)
            let p = &mut self.obs.records.attr(id).parts;
            let lost = p[Part::Preempted.idx()];
            if held.is_nan() {
                p[Part::Preprocess.idx()] = now - arrival - lost;
            } else {
                p[Part::Preprocess.idx()] = held - arrival - lost;
                p[Part::CentralQueue.idx()] = now - held;
            }
        }
        if !self.replicas[r].enqueue(self.now, id, key, work, &mut self.obs.records) {
            return false;
        }
        self.router.observe(r, &self.replicas[r]);
        self.wake(r);
        true
    }

    /// `lora.router_affinity`: the least loaded entry replica holding
    /// request `id`'s adapter, unless it has more than `prefix_load_cap`
    /// requests above the router's pick `r` (then `r`).
    fn prefer_adapter(&self, id: u32, r: usize) -> usize {
        if self.replicas[r].holds_adapter_of(id) {
            return r;
        }
        let cap = self.setup.scenario.hardware.prefix_load_cap;
        let floor = self.replicas[r].outstanding();
        (0..self.n_entry)
            .filter(|&k| self.fleet.as_ref().is_none_or(|f| f.is_ready(k)) && self.replicas[k].holds_adapter_of(id))
            .min_by_key(|&k| (self.replicas[k].outstanding(), k))
            .filter(|&k| self.replicas[k].outstanding() <= floor + cap)
            .unwrap_or(r)
    }

    /// Central queue: hands its requests, first come first served, to
    /// replicas with room (fewer than `max_num_seqs` outstanding).
    fn dispatch(&mut self) {
        while let Some(&id) = self.central_queue.front() {
            if self.obs.records.refused(id) {
                self.central_queue.pop_front();
                continue;
            }
            if !self.router.any_up() {
                break;
            }
            let r = self.router.pick(u32::MAX);
            if self.replicas[r].outstanding() >= self.replicas[r].params().max_num_seqs {
                break;
            }
            self.central_queue.pop_front();
            let rec = &mut self.obs.records[id as usize];
            rec.replica = r as u32;
            let work = rec.prompt as u64 + rec.output as u64;
            let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
            let queued_for = self.now - rec.admitted;
            self.sampler.activate(r);
            if self.obs.records.attributing() {
                self.obs.records.attr(id).parts[Part::CentralQueue.idx()] = queued_for;
            }
            if !self.replicas[r].enqueue(self.now, id, key, work, &mut self.obs.records) {
                // Its waiting queue is full (`max_waiting` below
                // `max_num_seqs`): the request waits on at the router.
                self.obs.records[id as usize].replica = u32::MAX;
                self.central_queue.push_front(id);
                break;
            }
            self.router.observe(r, &self.replicas[r]);
            self.wake(r);
        }
    }

    /// Queues a wake-up of replica `r` at the current instant, if it is idle
    /// and none is queued.
    fn wake(&mut self, r: usize) {
        if !self.replicas[r].is_busy() && !self.wake_pending[r] {
            self.wake_pending[r] = true;
            self.queue.push(Event { t: self.now, kind: Kind::Wake, key: r as u32 });
        }
    }

    /// Tells the router of replica `r`'s pool about its new load (and turns
    /// off a draining fleet slot that has emptied).
    fn observe(&mut self, r: usize) {
        if let Some(f) = self.fleet.as_mut()
            && f.state[r] == crate::fleet::SlotState::Draining
            && !self.replicas[r].is_busy()
            && self.replicas[r].outstanding() == 0
        {
            f.turn_off(r, self.now);
            // Its GPU (and host) memory goes with it: a later start is cold.
            self.replicas[r].evacuate(self.now, &self.obs.records);
        }
        if r < self.n_entry {
            self.router.observe(r, &self.replicas[r]);
        } else {
            self.dec_router.observe(r - self.n_entry, &self.replicas[r]);
        }
    }

    /// Queues the fleet's first events: the policy's first look, the
    /// scripted failures and the first random failure of each ready slot.
    fn start_fleet(&mut self) {
        let Some(f) = self.fleet.as_mut() else { return };
        let mut first = Vec::new();
        if f.config().policy != crate::config::ScalePolicy::None {
            first.push(Event { t: f.config().interval_s, kind: Kind::Tick, key: 0 });
        }
        for (k, x) in f.config().failures.iter().enumerate() {
            first.push(Event { t: x.at_s, kind: Kind::Script, key: k as u32 });
        }
        for i in 0..f.state.len() {
            if f.is_ready(i)
                && let Some(t) = f.next_failure(i, 0.0)
            {
                first.push(Event { t, kind: Kind::Fail, key: f.key(i) });
            }
        }
        for e in first {
            self.push_fleet(e);
        }
    }

    fn push_fleet(&mut self, e: Event) {
        self.fleet_events += 1;
        self.queue.push(e);
    }

    /// A fleet event.
    fn on_fleet(&mut self, e: Event) {
        let now = self.now;
        match e.kind {
            Kind::Ready => {
                let Some(i) = self.fleet.as_ref().and_then(|f| f.live(e.key)) else { return };
                let f = self.fleet.as_mut().expect("fleet");
                f.ready(i, now);
                self.replicas[i].serving_from(now);
                if let Some(t) = f.next_failure(i, now) {
                    let key = f.key(i);
                    self.push_fleet(Event { t, kind: Kind::Fail, key });
                }
                self.router.set_up(i, true);
                self.observe(i);
                // Requests held while no replica served go to the router now.
                while let Some(id) = self.held.pop_front() {
                    if !self.obs.records.refused(id) && !self.route(id) {
                        self.refuse(id, RejectReason::QueueFull);
                    }
                }
                if self.central {
                    self.dispatch();
                }
            }
            Kind::Fail => {
                if let Some(i) = self.fleet.as_ref().and_then(|f| f.live(e.key)) {
                    let repair = self.fleet.as_ref().map_or(0.0, |f| f.config().repair_s);
                    self.fail(i, repair);
                }
            }
            Kind::Script => {
                let f = self.fleet.as_ref().expect("fleet");
                let x = &f.config().failures[e.key as usize];
                let (i, repair) = (x.replica as usize, x.repair_s.unwrap_or(f.config().repair_s));
                if f.state
                    .get(i)
                    .is_some_and(|s| matches!(s, crate::fleet::SlotState::Ready | crate::fleet::SlotState::Draining))
                {
                    self.fail(i, repair);
                }
            }
            Kind::Tick => self.on_tick(),
            Kind::Refill => self.fleet.as_mut().expect("fleet").refilled(now),
            _ => unreachable!("not a fleet event"),
        }
    }

    /// The scaling policy looks, and the fleet starts, drains or cancels replicas.
    fn on_tick(&mut self) {
        let now = self.now;
        let views: Vec<crate::fleet::SlotView> = self
            .replicas
            .iter()
            .map(|r| crate::fleet::SlotView {
                busy: r.busy_total(),
                outstanding: r.outstanding(),
                pending_tokens: r.pending_tokens(),
            })
            .collect();
        // Requests waiting at the router (held, or in the central queue), and their tokens.
        let (mut held, mut held_tokens) = (0u32, 0u64);
        for &id in self.held.iter().chain(self.central_queue.iter()) {
            if !self.obs.records.refused(id) {
                let r = &self.obs.records[id as usize];
                held += 1;
                held_tokens += r.prompt as u64 + r.output as u64;
            }
        }
        let f = self.fleet.as_mut().expect("fleet");
        if let Some(v) = self.obs.first_tokens.as_mut() {
            f.ttfts.append(v);
        }
        let actions = f.look(now, &views, held, held_tokens);
        let interval = f.config().interval_s;
        for a in actions {
            match a {
                crate::fleet::Action::Start(i, at) => {
                    let key = self.fleet.as_ref().expect("fleet").key(i);
                    self.push_fleet(Event { t: at, kind: Kind::Ready, key });
                }
                crate::fleet::Action::Drain(i) => {
                    self.router.set_up(i, false);
                    self.observe(i);
                }
                crate::fleet::Action::Cancel(_) => {}
                crate::fleet::Action::Refill(at) => self.push_fleet(Event { t: at, kind: Kind::Refill, key: 0 }),
            }
        }
        self.push_fleet(Event { t: now + interval, kind: Kind::Tick, key: 0 });
    }

    /// Slot `i` fails now: its requests are lost or sent again, and it is
    /// repaired after `repair` seconds (a draining slot just turns off).
    fn fail(&mut self, i: usize, repair: f64) {
        let now = self.now;
        if let Some(end) = self.replicas[i].step_end() {
            self.lost_step[i].push(end);
        }
        let ids = self.replicas[i].evacuate(now, &self.obs.records);
        self.router.set_up(i, false);
        let f = self.fleet.as_mut().expect("fleet");
        let retry = f.config().on_failure == crate::config::OnFailure::Retry;
        if let Some(at) = f.fail(i, now, repair, ids.len() as u64) {
            let key = f.key(i);
            self.push_fleet(Event { t: at, kind: Kind::Ready, key });
        }
        self.observe(i);
        for id in ids {
            if retry {
                // Sent again from scratch; its time so far counts.
                let rec = &mut self.obs.records[id as usize];
                rec.replica = u32::MAX;
                rec.admitted = f64::NAN;
                rec.first_scheduled = f64::NAN;
                rec.first_token = f64::NAN;
                rec.last_token = f64::NAN;
                rec.generated = 0;
                let lost = now - rec.arrival;
                if self.obs.records.attributing() {
                    // Everything before the failure was thrown away, as by a
                    // preemption (admission counts its preprocessing from here).
                    let p = &mut self.obs.records.attr(id).parts;
                    *p = [0.0; crate::metrics::NUM_PARTS];
                    p[Part::Preempted.idx()] = lost;
                }
                self.admit_now(id);
            } else {
                self.refuse(id, RejectReason::ReplicaFailed);
            }
        }
    }

    /// Closes the replicas' time integrals and gathers the output.
    fn finish(mut self) -> SimOutput {
        crate::limits::note_simulated(self.obs.records.len() as u64 - self.reported);
        let Observed { records, retired, .. } = &mut self.obs;
        let peak_live_records = records.peak();
        records.retire_all(|id, r, p| retired.take(id, r, p));
        let Retired { tally, keep, records, parts, sample, slo, .. } = self.obs.retired;
        let last_arrival = tally.last_arrival();
        for r in &mut self.replicas {
            r.close(self.now);
        }
        let end = if self.last_step_end.is_nan() { self.now } else { self.last_step_end };
        let fleet = self.fleet.take().map(|f| f.finish(end));
        let mut pooled = LogHistogram::new();
        for h in &self.obs.itl {
            pooled.merge(h);
        }
        SimOutput {
            records,
            parts,
            kept: keep,
            peak_live_records,
            last_arrival,
            sample,
            tally,
            itl: pooled,
            itl_by_class: self.obs.itl,
            replicas: self.replicas.into_iter().map(|r| r.stats).collect(),
            end_time: if self.last_step_end.is_nan() { self.now } else { self.last_step_end },
            run_end: self.now,
            in_system_area: self.area,
            events: self.events,
            timeseries: self.sampler.samples,
            timeline: self.obs.timeline,
            stopped: self.stopped,
            fleet,
            slo_timeline: slo.map(|x| x.0),
            frozen_timeline: None,
        }
    }
}

/// The waiting-queue sort key of each request (lower is served first),
/// by the queue order of the pool it waits in.
struct Keyer {
    /// Per pool: queue order, priority aging, prediction error.
    pools: Vec<(QueueOrder, Option<f64>, f64)>,
    seed: u64,
    priority: Vec<f64>,
    ttft: Vec<f64>,
}

impl Keyer {
    fn new(setup: &Setup, seed: u64) -> Self {
        let classes = &setup.workload.classes;
        Keyer {
            pools: setup
                .pools
                .iter()
                .map(|p| {
                    let e = &p.engine_config;
                    (e.queue_order, e.priority_aging_s, e.prediction_error)
                })
                .collect(),
            seed: Stream::QueueKey.seed(seed),
            priority: classes.iter().map(|c| c.priority as f64).collect(),
            ttft: classes.iter().map(|c| c.slo.as_ref().and_then(|x| x.ttft_ms).map_or(1e12, |t| t * 1e-3)).collect(),
        }
    }

    #[inline]
    fn key(&self, pool: u32, id: u32, r: &RequestRecord) -> f64 {
        let c = r.class as usize;
        let (order, aging, sigma) = self.pools[pool as usize];
        match order {
            QueueOrder::Fcfs => 0.0,
            // As vLLM: a lower value is served earlier, ties by arrival
            // (vllm/v1/core/sched/request_queue.py, PriorityRequestQueue).
            // With aging, the effective value p − waited/aging orders like
            // p + arrival/aging at any instant, so the key does not change
            // while waiting.
            QueueOrder::Priority => match aging {
                Some(a) => self.priority[c] + r.arrival / a,
                None => self.priority[c] * 1e12 + r.arrival,
            },
            QueueOrder::ShortestPrompt => r.prompt as f64,
            QueueOrder::ShortestJob => {
                if sigma == 0.0 {
                    r.output as f64
                } else {
                    // A lognormal prediction error, deterministic per request.
                    let u = ((stream_seed(self.seed, id as u64) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                    let z = statrs::function::erf::erfc_inv(2.0 * u) * -std::f64::consts::SQRT_2;
                    r.output as f64 * (sigma * z - sigma * sigma / 2.0).exp()
                }
            }
            QueueOrder::Edf => r.arrival + self.ttft[c],
        }
    }
}

/// Token buckets of the classes with a token rate limit.
struct Limits {
    buckets: Vec<Option<(f64, f64, f64, f64)>>,
}

impl Limits {
    fn new(setup: &Setup) -> Self {
        Limits { buckets: setup.workload.classes.iter().map(|c| c.token_limit.map(|(r, b)| (r, b, b, 0.0))).collect() }
    }

    /// Takes `tokens` from class `c`'s bucket at `now`; true when the limit refuses them.
    #[inline]
    fn take(&mut self, c: u16, now: f64, tokens: f64) -> bool {
        let Some(Some((rate, cap, level, last))) = self.buckets.get_mut(c as usize) else { return false };
        *level = (*level + *rate * (now - *last)).min(*cap);
        *last = now;
        if *level >= tokens {
            *level -= tokens;
            false
        } else {
            true
        }
    }
}
