//! The discrete-event loop.
//!
//! # Ordering and determinism
//! Events are processed in time order. Events at the same instant are ordered
//! by class: step completions first (lowest replica index first), then
//! arrivals and admissions (lowest request id first), then replica wake-ups —
//! so requests arriving together are batched together. No wall-clock time,
//! hash-map order or thread scheduling enters the loop: the same setup and
//! seed give bit-identical records.

use crate::Setup;
use crate::cluster::{ReplicaLoad, Router};
use crate::config::{CostModelKind, PoolRole, QueueOrder, RouterKind};
use crate::cost::{ConstantStep, ExponentialStep, KernelModel, Roofline, Speculative, StepCostModel};
use crate::engine::{Replica, ReplicaStats, Sinks, Span};
use crate::metrics::{LogHistogram, RejectReason, RequestRecord, Status};
use crate::rng::Stream;
use crate::workload::{Source, stream_seed};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Everything the simulation observed.
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// One record per generated request, by id (= arrival order).
    pub records: Vec<RequestRecord>,
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
    /// What the first [`TRACE_REQUESTS`] requests did and when (for the timeline chart).
    pub trace: Vec<Span>,
}

/// Requests traced for the timeline chart.
pub const TRACE_REQUESTS: u32 = 40;

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
}

impl Sampler {
    #[inline]
    fn due(&self, t: f64) -> bool {
        t >= self.next
    }

    fn take<C: StepCostModel>(&mut self, t: f64, replicas: &[Replica<C>], completed: u64) {
        let total: u64 = replicas.iter().map(|r| r.params().num_blocks).sum();
        self.samples.push(TimeSample {
            t,
            waiting: replicas.iter().map(|r| r.num_waiting() as u32).sum(),
            running: replicas.iter().map(|r| r.num_running()).sum(),
            batch: replicas.iter().map(|r| r.batch_size()).sum(),
            kv_used: replicas.iter().map(|r| r.used_blocks()).sum::<u64>() as f64 / total as f64,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    StepEnd = 0,
    Admit = 1,
    Wake = 2,
    Timeout = 3,
    /// A prefill replica's KV cache has reached the decode pool.
    Transfer = 4,
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

/// Runs the setup with the given seed, choosing the configured cost model.
pub fn simulate(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, false, true)
}

/// Like [`simulate`], verifying every replica's invariants after every step.
pub fn simulate_checked(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, true, true)
}

/// Like [`simulate`] but without the steady-decode fast path (every step
/// goes through the general scheduler): for tests that the fast path changes
/// nothing.
pub fn simulate_without_fast_path(setup: &Setup, seed: u64) -> SimOutput {
    simulate_opts(setup, seed, false, false)
}

fn simulate_opts(setup: &Setup, seed: u64, check: bool, fast: bool) -> SimOutput {
    let s = &setup.scenario;
    match s.cost.model {
        CostModelKind::Roofline => with_models(setup, seed, check, fast, |llm, p, cost| {
            Roofline::with_layout(llm, &p.gpu, &p.layout, s.model.dtype, p.kv_dtype, cost)
        }),
        CostModelKind::Kernel => with_models(setup, seed, check, fast, |llm, p, cost| {
            KernelModel::new(llm, &p.gpu, &p.layout, s.model.dtype, p.kv_dtype, cost)
        }),
        CostModelKind::Constant => {
            let t = s.cost.step_time_ms.unwrap_or(1.0) * 1e-3;
            simulate_with(setup, seed, |_| ConstantStep { time: t }, check, fast)
        }
        CostModelKind::Exponential => {
            let t = s.cost.step_time_ms.unwrap_or(1.0) * 1e-3;
            simulate_with(setup, seed, |r| ExponentialStep::new(t, Stream::ReplicaStep(r).seed(seed)), check, fast)
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
    make: impl Fn(&crate::catalog::LlmSpec, &crate::Pool, &crate::config::CostConfig) -> C,
) -> SimOutput {
    let pool = pool_of(setup);
    if setup.pools.iter().all(|p| p.draft.is_none()) {
        let models: Vec<C> = setup.pools.iter().map(|p| make(&setup.llm, p, &p.cost)).collect();
        return simulate_with(setup, seed, |r| models[pool[r as usize] as usize].clone(), check, fast);
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
    simulate_with(setup, seed, |r| models[pool[r as usize] as usize].clone(), check, fast)
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
/// [`Replica::fast_forward`].
pub fn simulate_with<C: StepCostModel>(
    setup: &Setup,
    seed: u64,
    make_cost: impl Fn(u32) -> C,
    check: bool,
    fast: bool,
) -> SimOutput {
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
    // Requests enter at the mixed or prefill pools (replicas 0..n_entry); decode pools follow.
    let n_entry = pool.iter().take_while(|&&p| setup.pools[p as usize].role != PoolRole::Decode).count();
    let mut dec_router = Router::new(s.hardware.router, (n_rep - n_entry).max(1), Stream::DecodeRouter.seed(seed));
    let link = s.disaggregation.clone().unwrap_or_default();
    let kv_bytes_per_token = setup.llm.kv_bytes_per_token(setup.llm.num_layers as f64, 1.0, s.kv_dtype().bytes());
    let mut handoffs: Vec<u32> = Vec::new();
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
    for r in replicas.iter_mut() {
        r.set_prefix_groups(groups.clone());
        r.set_trace_hashes(setup.workload.trace.as_ref().map(|t| t.trace.clone()));
        r.set_speculative(alpha[r.stats.pool as usize].clone(), Stream::Speculative.seed(seed));
    }
    let mut router =
        Router::new(s.hardware.router, n_entry, Stream::Router.seed(seed)).with_prefix_cap(s.hardware.prefix_load_cap);
    let mut prefix_ids: Vec<u64> = Vec::new();
    let mut requests = Source::new(&setup.workload, seed);
    let notify = requests.needs_feedback();
    let cap = setup.workload.num_requests.unwrap_or(0).min(1 << 26) as usize;
    let mut records: Vec<RequestRecord> = Vec::with_capacity(cap);
    let mut itl = vec![LogHistogram::new(); setup.workload.classes.len()];
    let mut done: Vec<u32> = Vec::new();
    // Clipping makes a request fit every pool, whichever serves it: the
    // cluster-wide limit is the smallest pool's (the order of pools never matters).
    let max_len = setup.max_model_len();
    let clip_long = setup.workload.clip;
    let keyer = Keyer::new(setup, seed);
    let mut limits = Limits::new(setup);
    let max_wait = s.engine.max_wait_s;
    let mut completed = 0u64;
    let mut heap: BinaryHeap<Event> = BinaryHeap::new();
    let mut wake_pending = vec![false; n_rep];
    let pre_fixed = s.engine.preprocess_ms * 1e-3;
    let pre_tok = s.engine.preprocess_us_per_token * 1e-6;
    // The frontend's workers (when limited): the time each is next free.
    // Arrivals come in time order, so taking the earliest-free worker is FCFS.
    let mut frontend: Vec<f64> = vec![0.0; s.engine.frontend_workers as usize];
    let mut now = 0.0f64;
    let mut in_system = 0u64;
    let mut area = 0.0f64;
    let mut events = 0u64;
    let mut last_step_end = f64::NAN;
    let mut trace: Vec<Span> = Vec::new();
    let mut sampler = Sampler { next: 0.0, interval: 0.05, samples: Vec::new() };

    // Refuses a request already counted in the system.
    macro_rules! refuse {
        ($id:expr, $why:expr) => {{
            let id: u32 = $id;
            records[id as usize].status = Status::Rejected($why);
            in_system -= 1;
            if notify {
                requests.done(id, now, false);
            }
        }};
    }

    // Central queue: requests wait at the router until a replica has room
    // (fewer than max_num_seqs outstanding), first come first served.
    let central = s.hardware.router == RouterKind::CentralQueue;
    let room = |r: &Replica<C>| r.params().max_num_seqs;
    let mut held: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
    macro_rules! dispatch {
        () => {
            while let Some(&id) = held.front() {
                if records[id as usize].status != Status::InFlight {
                    held.pop_front();
                    continue;
                }
                let r = router.pick(u32::MAX);
                if replicas[r].outstanding() >= room(&replicas[r]) {
                    break;
                }
                held.pop_front();
                let rec = &mut records[id as usize];
                rec.replica = r as u32;
                let work = rec.prompt as u64 + rec.output as u64;
                let key = keyer.key(replicas[r].stats.pool, id, rec);
                let queued = replicas[r].enqueue(now, id, key, work);
                debug_assert!(queued, "a replica with room accepts");
                router.observe(r, &replicas[r]);
                if !replicas[r].is_busy() && !wake_pending[r] {
                    wake_pending[r] = true;
                    heap.push(Event { t: now, kind: Kind::Wake, key: r as u32 });
                }
            }
        };
    }
    // Admits request `id` now: to the central queue, or routed to a replica.
    macro_rules! admit_now {
        ($id:expr) => {{
            let id: u32 = $id;
            if central {
                records[id as usize].admitted = now;
                held.push_back(id);
                dispatch!();
            } else {
                if !admit(
                    id,
                    &keyer,
                    now,
                    &mut records,
                    &mut replicas,
                    &mut router,
                    &mut heap,
                    &mut wake_pending,
                    &mut prefix_ids,
                ) {
                    refuse!(id, RejectReason::QueueFull);
                }
            }
        }};
    }

    // Tells the router of replica `r`'s pool about its new load.
    macro_rules! observe {
        ($r:expr) => {{
            let r: usize = $r;
            if r < n_entry {
                router.observe(r, &replicas[r]);
            } else {
                dec_router.observe(r - n_entry, &replicas[r]);
            }
        }};
    }

    macro_rules! sinks {
        () => {
            Sinks {
                records: &mut records,
                itl: &mut itl,
                warmup,
                completed: &mut completed,
                trace: &mut trace,
                trace_limit: TRACE_REQUESTS,
                notify,
                done: &mut done,
                handoffs: &mut handoffs,
            }
        };
    }

    loop {
        let top = heap.peek().copied();
        let next_arrival = requests.peek_time();
        let take_arrival = match (top, next_arrival) {
            (None, None) => break,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(e), Some(a)) => a < e.t || (a == e.t && e.kind != Kind::StepEnd),
        };
        events += 1;
        let t_next = if take_arrival { next_arrival.unwrap_or(now) } else { top.map_or(now, |e| e.t) };
        if sampler.due(t_next) {
            sampler.take(sampler.next, &replicas, completed);
        }
        if take_arrival {
            let mut a = requests.pop().expect("arrival");
            area += in_system as f64 * (a.arrival - now);
            now = a.arrival;
            let id = records.len() as u32;
            let clipped = clip_long && clip(max_len, &mut a.prompt, &mut a.output);
            let mut rec = RequestRecord::new(a.arrival, a.prompt, a.output);
            rec.class = a.class;
            rec.session = a.session;
            rec.prefix = a.prefix.min(a.prompt);
            rec.clipped = clipped;
            rec.trace_row = a.trace_row;
            let refused = reject_reason(setup, a.prompt, a.output).or_else(|| {
                limits.take(a.class, now, a.prompt as f64 + a.output as f64).then_some(RejectReason::RateLimited)
            });
            if let Some(reason) = refused {
                rec.status = Status::Rejected(reason);
                records.push(rec);
                if notify {
                    requests.done(id, now, false);
                }
                continue;
            }
            records.push(rec);
            in_system += 1;
            if let Some(w) = max_wait {
                heap.push(Event { t: now + w, kind: Kind::Timeout, key: id });
            }
            let mut delay = pre_fixed + pre_tok * a.prompt as f64;
            if let Some(w) = frontend.iter_mut().min_by(|x, y| x.total_cmp(y)) {
                let start = w.max(now);
                *w = start + delay;
                delay = *w - now;
            }
            if delay > 0.0 {
                heap.push(Event { t: now + delay, kind: Kind::Admit, key: id });
                continue;
            }
            admit_now!(id);
            continue;
        }
        let e = heap.pop().expect("event");
        area += in_system as f64 * (e.t - now);
        now = e.t;
        match e.kind {
            Kind::Admit => {
                // A request whose client gave up during preprocessing is gone.
                if records[e.key as usize].status == Status::InFlight {
                    admit_now!(e.key);
                }
            }
            Kind::Timeout => {
                let rec = &records[e.key as usize];
                if rec.status == Status::InFlight && rec.first_scheduled.is_nan() {
                    let r = rec.replica;
                    refuse!(e.key, RejectReason::TimedOut);
                    if r != u32::MAX {
                        let rec = &records[e.key as usize];
                        replicas[r as usize].cancel_waiting(now, rec.prompt as u64 + rec.output as u64);
                        observe!(r as usize);
                    }
                }
            }
            Kind::Transfer => {
                let id = e.key;
                let from = records[id as usize].replica as usize;
                replicas[from].release_handoff(now, id, &records);
                observe!(from);
                if !replicas[from].is_busy() && !wake_pending[from] {
                    wake_pending[from] = true;
                    heap.push(Event { t: now, kind: Kind::Wake, key: from as u32 });
                }
                let rec = &mut records[id as usize];
                let r = n_entry + dec_router.pick(rec.session);
                rec.replica = r as u32;
                let work = (rec.output - rec.generated) as u64;
                let key = keyer.key(replicas[r].stats.pool, id, rec);
                if !replicas[r].enqueue_ready(now, id, key, work) {
                    refuse!(id, RejectReason::QueueFull);
                    continue;
                }
                observe!(r);
                if !replicas[r].is_busy() && !wake_pending[r] {
                    wake_pending[r] = true;
                    heap.push(Event { t: now, kind: Kind::Wake, key: r as u32 });
                }
            }
            Kind::Wake => {
                let r = e.key as usize;
                wake_pending[r] = false;
                if !replicas[r].is_busy()
                    && let Some(end) = replicas[r].plan_step(now, &mut sinks!())
                {
                    heap.push(Event { t: end, kind: Kind::StepEnd, key: e.key });
                }
                if let Some(at) = replicas[r].take_wake() {
                    // Static batching: look at the queue again when its batch is due.
                    heap.push(Event { t: at, kind: Kind::Wake, key: e.key });
                }
                observe!(r);
            }
            Kind::StepEnd => {
                let r = e.key as usize;
                let mut t = now;
                // Run this replica's steps inline while nothing else can happen before they end.
                let mut horizon = heap.peek().map_or(f64::INFINITY, |x| x.t).min(next_arrival.unwrap_or(f64::INFINITY));
                loop {
                    let before = completed;
                    let next = replicas[r].finish_step(t, &mut sinks!());
                    in_system -= completed - before;
                    if central && completed != before && !held.is_empty() {
                        // Room freed for a held request: stop stepping inline to dispatch it now.
                        horizon = horizon.min(t);
                    }
                    if !handoffs.is_empty() {
                        for id in handoffs.drain(..) {
                            // The prompt's KV cache crosses the link to a decode replica.
                            let rec = &records[id as usize];
                            let bytes = kv_bytes_per_token * (rec.prompt + rec.generated - 1) as f64;
                            let at = t + bytes / (link.kv_transfer_gbps * 1e9) + link.kv_transfer_latency_ms * 1e-3;
                            heap.push(Event { t: at, kind: Kind::Transfer, key: id });
                            horizon = horizon.min(at);
                        }
                    }
                    if notify && !done.is_empty() {
                        // Closed-loop users and sessions send their next request.
                        for id in done.drain(..) {
                            requests.done(id, t, true);
                        }
                        horizon = horizon.min(requests.peek_time().unwrap_or(f64::INFINITY));
                    }
                    if check && let Err(msg) = replicas[r].check_invariants() {
                        panic!("replica {r} at t = {t}: {msg}");
                    }
                    if check {
                        let (have, want) = (replicas[r].pending_tokens(), replicas[r].recount_pending(&records));
                        assert_eq!(have, want, "replica {r} at t = {t}: pending tokens");
                    }
                    let next = match next {
                        Some(_) if fast => {
                            let stop = horizon.min(sampler.next);
                            let end = replicas[r].fast_forward(stop, &mut sinks!(), check, &mut area, in_system);
                            t = replicas[r].step_start();
                            Some(end)
                        }
                        other => other,
                    };
                    match next {
                        Some(end) if end < horizon => {
                            area += in_system as f64 * (end - t);
                            t = end;
                            events += 1;
                            if sampler.due(t) {
                                sampler.take(t, &replicas, completed);
                            }
                        }
                        Some(end) => {
                            heap.push(Event { t: end, kind: Kind::StepEnd, key: e.key });
                            break;
                        }
                        None => break,
                    }
                }
                now = t;
                last_step_end = t;
                if let Some(at) = replicas[r].take_wake() {
                    heap.push(Event { t: at, kind: Kind::Wake, key: e.key });
                }
                observe!(r);
                if central {
                    dispatch!();
                }
            }
        }
    }
    for r in &mut replicas {
        r.close(now);
    }
    let mut pooled = LogHistogram::new();
    for h in &itl {
        pooled.merge(h);
    }
    SimOutput {
        records,
        itl: pooled,
        itl_by_class: itl,
        replicas: replicas.into_iter().map(|r| r.stats).collect(),
        end_time: if last_step_end.is_nan() { now } else { last_step_end },
        run_end: now,
        in_system_area: area,
        events,
        timeseries: sampler.samples,
        trace,
    }
}

/// Routes request `id` to a replica and queues it there with sort key
/// `key`; false when that replica's queue is full.
#[allow(clippy::too_many_arguments)]
fn admit<C: StepCostModel>(
    id: u32,
    keyer: &Keyer,
    now: f64,
    records: &mut [RequestRecord],
    replicas: &mut [Replica<C>],
    router: &mut Router,
    heap: &mut BinaryHeap<Event>,
    wake_pending: &mut [bool],
    prefix_ids: &mut Vec<u64>,
) -> bool {
    let rec = &mut records[id as usize];
    let r = if router.wants_prefix() {
        replicas[0].prefix_ids(id, rec, prefix_ids);
        router.pick_prefix(prefix_ids)
    } else {
        router.pick(rec.session)
    };
    rec.admitted = now;
    rec.replica = r as u32;
    let key = keyer.key(replicas[r].stats.pool, id, rec);
    if !replicas[r].enqueue(now, id, key, rec.prompt as u64 + rec.output as u64) {
        return false;
    }
    router.observe(r, &replicas[r]);
    if !replicas[r].is_busy() && !wake_pending[r] {
        wake_pending[r] = true;
        heap.push(Event { t: now, kind: Kind::Wake, key: r as u32 });
    }
    true
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
            // Effective priority p + waited/aging orders like p − arrival/aging
            // at any instant, so the key does not change while waiting.
            QueueOrder::Priority => match aging {
                Some(a) => r.arrival / a - self.priority[c],
                None => r.arrival - self.priority[c] * 1e12,
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
