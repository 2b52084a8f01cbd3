//! The discrete-event loop: `EventLoop` owns the clock, the event queue,
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
//!
//! # Files
//! The loop, its state and the request events are here; beside it, the
//! event queue and the event kinds (`events`), routing
//! and the central queue (`route`), the fleet's scaling events (`scaling`),
//! failures and retries (`failure`), rate limits and queue keys (`intake`),
//! the time series (`sampler`) and what a run returns (`output`).

mod events;
mod failure;
mod intake;
mod output;
mod route;
mod sampler;
mod scaling;

pub use output::{RecordSink, Recording, SAMPLE, SimOutput, Stopped, TIMELINE_REQUESTS};
pub use sampler::TimeSample;

use crate::Setup;
use crate::cluster::{ReplicaLoad, Router};
use crate::config::{CostModelKind, DisaggregationConfig, PoolRole, RouterKind};
use crate::cost::{ConstantStep, ExponentialStep, KernelModel, Roofline, Speculative, StepCostModel};
use crate::engine::{Replica, Sinks};
use crate::metrics::{LiveRecords, LogHistogram, Part, RecordSample, RejectReason, RequestRecord, Status, Tally};
use crate::rng::Stream;
use crate::workload::Source;
use events::{Event, EventQueue, Kind};
use intake::{Keyer, Limits};
use sampler::Sampler;
use std::collections::VecDeque;

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
    make: impl Fn(&crate::spec::LlmSpec, &crate::Pool, &crate::config::CostConfig) -> C,
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

/// What the run records: the engine writes into `sinks`, and the records
/// it is done with go to `retired`.
struct Observed<'k> {
    /// The requests in flight (and those finished but not yet retired),
    /// inter-token gaps, completions, spans, completions not yet reported to
    /// the request source (closed loops, sessions), requests a prefill
    /// replica has just handed over, and TTFTs of first tokens since the
    /// fleet policy last looked (`policy = "ttft"`).
    sinks: Sinks,
    retired: Retired<'k>,
}

impl Observed<'_> {
    /// Passes the finished requests at the front of the window on.
    fn retire(&mut self) {
        let Observed { sinks, retired } = self;
        sinks.records.retire(|id, r, p| retired.take(id, r, p));
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
    queue: EventQueue,
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
        let lora = setup.lora_plan(seed);
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
            let weights = p.memory.weights_gib_total * crate::spec::GIB;
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
            queue: EventQueue::new(n_rep),
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
                sinks: Sinks {
                    records: LiveRecords::with_attribution(setup.attribution),
                    itl: vec![LogHistogram::new(); setup.workload.classes.len()],
                    warmup,
                    completed: 0,
                    timeline: Vec::new(),
                    timeline_limit: TIMELINE_REQUESTS,
                    notify,
                    done: Vec::new(),
                    handoffs: Vec::new(),
                    first_tokens,
                },
                retired: Retired {
                    tally: {
                        let mut t = setup.tally();
                        t.reserve(setup.workload.num_requests.unwrap_or(0));
                        t
                    },
                    keep,
                    records: Vec::with_capacity(cap),
                    parts: Vec::new(),
                    sample: RecordSample::new(SAMPLE),
                    sink,
                    slo,
                },
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
            let top = self.queue.peek();
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
                let arrived = self.obs.sinks.records.len() as u64;
                crate::limits::note_simulated(arrived - self.reported);
                self.reported = arrived;
                if crate::limits::stop_requested() {
                    self.stopped = Some(Stopped::Requested(self.now));
                    break;
                }
                if self.obs.sinks.records.live() > self.max_live {
                    self.stopped = Some(Stopped::Memory(self.obs.sinks.records.live(), self.now));
                    break;
                }
            }
            if self.sampler.due(t_next) {
                self.sampler.take(self.sampler.next, &self.replicas, self.obs.sinks.completed);
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
        let id = self.obs.sinks.records.len() as u32;
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
            self.obs.sinks.records.push(rec);
            if self.obs.sinks.notify {
                self.requests.done(id, now, false);
            }
            return;
        }
        self.obs.sinks.records.push(rec);
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
        if !self.obs.sinks.records.refused(id) {
            self.admit_now(id);
        }
    }

    /// The client gives up on a request that has not started.
    fn on_timeout(&mut self, id: u32) {
        let Some(rec) = self.obs.sinks.records.get(id) else { return };
        if rec.status == Status::InFlight && rec.first_scheduled.is_nan() {
            let r = rec.replica;
            self.refuse(id, RejectReason::TimedOut);
            if r != u32::MAX {
                let rec = &self.obs.sinks.records[id as usize];
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
        let from = self.obs.sinks.records[id as usize].replica as usize;
        self.replicas[from].release_handoff(now, id, &self.obs.sinks.records);
        self.observe(from);
        self.wake(from);
        let rec = &mut self.obs.sinks.records[id as usize];
        let r = self.n_entry + self.dec_router.pick(rec.session);
        rec.replica = r as u32;
        let work = (rec.output - rec.generated) as u64;
        let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
        self.sampler.activate(r);
        if self.obs.sinks.records.attributing() {
            let a = self.obs.sinks.records.attr(id);
            a.parts[Part::Transfer.idx()] += now - a.mark;
        }
        if !self.replicas[r].enqueue_ready(now, id, key, work, &mut self.obs.sinks.records) {
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
            && let Some(end) = self.replicas[r].form_step(self.now, &mut self.obs.sinks)
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
        // A steady decode step (the event loop has counted its area) is
        // finished on the fast path (unless latency is attributed: the step
        // may have held back requests that arrived while it ran).
        let mut steady = self.fast && !self.obs.sinks.records.attributing() && self.replicas[r].steady();
        loop {
            let before = self.obs.sinks.completed;
            let next = if steady {
                steady = false;
                self.replicas[r].steady_step(&mut self.obs.sinks, self.check);
                Some(t)
            } else {
                self.replicas[r].finish_step(t, &mut self.obs.sinks)
            };
            self.in_system -= self.obs.sinks.completed - before;
            if self.central && self.obs.sinks.completed != before && !self.central_queue.is_empty() {
                // Room freed for a request in the central queue: stop stepping inline to dispatch it now.
                horizon = horizon.min(t);
            }
            if !self.obs.sinks.handoffs.is_empty() {
                for id in self.obs.sinks.handoffs.drain(..) {
                    // The prompt's KV cache crosses the link to a decode replica.
                    let rec = &self.obs.sinks.records[id as usize];
                    let bytes = self.kv_bytes_per_token * (rec.prompt + rec.generated - 1) as f64;
                    let at = t + bytes / (self.link.kv_transfer_gbps * 1e9) + self.link.kv_transfer_latency_ms * 1e-3;
                    self.queue.push(Event { t: at, kind: Kind::Transfer, key: id });
                    horizon = horizon.min(at);
                }
            }
            if self.obs.sinks.notify && !self.obs.sinks.done.is_empty() {
                // Closed-loop users and sessions send their next request.
                for id in self.obs.sinks.done.drain(..) {
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
                    (self.replicas[r].pending_tokens(), self.replicas[r].recount_pending(&self.obs.sinks.records));
                assert_eq!(have, want, "replica {r} at t = {t}: pending tokens");
            }
            let next = match next {
                Some(_) if self.fast => {
                    let stop = horizon.min(self.sampler.next);
                    let end = self.replicas[r].fast_forward(
                        stop,
                        &mut self.obs.sinks,
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
                        self.sampler.take(t, &self.replicas, self.obs.sinks.completed);
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
        self.obs.sinks.records[id as usize].status = Status::Rejected(why);
        self.in_system -= 1;
        if self.obs.sinks.notify {
            self.requests.done(id, self.now, false);
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
            self.replicas[r].evacuate(self.now, &self.obs.sinks.records);
        }
        if r < self.n_entry {
            self.router.observe(r, &self.replicas[r]);
        } else {
            self.dec_router.observe(r - self.n_entry, &self.replicas[r]);
        }
    }

    /// Closes the replicas' time integrals and gathers the output.
    fn finish(mut self) -> SimOutput {
        crate::limits::note_simulated(self.obs.sinks.records.len() as u64 - self.reported);
        let Observed { sinks, retired } = &mut self.obs;
        let peak_live_records = sinks.records.peak();
        sinks.records.retire_all(|id, r, p| retired.take(id, r, p));
        let Retired { tally, keep, records, parts, sample, slo, .. } = self.obs.retired;
        let last_arrival = tally.last_arrival();
        for r in &mut self.replicas {
            r.close(self.now);
        }
        let end = if self.last_step_end.is_nan() { self.now } else { self.last_step_end };
        let fleet = self.fleet.take().map(|f| f.finish(end));
        let mut pooled = LogHistogram::new();
        for h in &self.obs.sinks.itl {
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
            itl_by_class: self.obs.sinks.itl,
            replicas: self.replicas.into_iter().map(|r| r.stats).collect(),
            end_time: if self.last_step_end.is_nan() { self.now } else { self.last_step_end },
            run_end: self.now,
            in_system_area: self.area,
            events: self.events,
            timeseries: self.sampler.samples,
            timeline: self.obs.sinks.timeline,
            stopped: self.stopped,
            fleet,
            slo_timeline: slo.map(|x| x.0),
            frozen_timeline: None,
        }
    }
}
