//! One engine replica: vLLM-style continuous batching with a paged KV cache.
//!
//! # Scheduling (one call of [`Replica::form_step`])
//! With `chunked_prefill` (vLLM v1 / Sarathi-Serve):
//! 1. every decoding sequence gets one token of the step's token budget and,
//!    when its KV length sits on a block boundary, a new block; if blocks run
//!    out, the most recently admitted running sequence is preempted
//!    (recompute: its blocks are freed and it returns to the head of the
//!    waiting queue) until the rest fit;
//! 2. partially prefilled sequences, in admission order, get the next chunk
//!    of their prompt that fits the remaining budget and free blocks;
//! 3. if nothing was preempted, waiting requests are admitted first come
//!    first served while `max_num_seqs`, the budget and free blocks allow
//!    (the head of the queue blocks the rest: no skipping).
//!
//! Without chunked prefill (vLLM v0), a step is prefill-only when the head of
//! the waiting queue can be admitted with its whole prompt (prefills first),
//! and decode-only otherwise.
//!
//! # Cost per step
//! Decoding sequences are not visited on every step: the decode group
//! (`decode`) keeps their aggregates, and a sequence is touched only when
//! it is admitted, finishes a prefill chunk, is preempted or completes.
//!
//! # Parts
//! Each concern of a replica is a type of its own: the waiting queue
//! ([`WaitQueue`]), the running sequences (`running`), the KV blocks and
//! their prefix cache (`kv`, [`prefix`]), the decode group (`decode`), the
//! step being formed (`step`), speculative draws (`speculative`), swap space
//! (`swap`) and KV kept for a hand-off (`handoff`). [`Replica`] schedules
//! over them.
//!
//! # Files
//! [`Replica`] keeps its state, its public entry points and the order of
//! operations here; its work is spread over one file per concern: step
//! formation and the batch policies (`form`), admission and preemption
//! (`admit`), finishing a step with its accounting and statistics
//! (`account`), and the steady-decode fast path (`fast`).

mod account;
mod admit;
mod attribution;
mod decode;
mod fast;
mod form;
mod handoff;
mod kv;
pub mod lora;
mod offload;
pub mod prefix;
mod queue;
mod running;
mod speculative;
mod step;
mod swap;

pub use account::ReplicaStats;
pub use form::BatchPolicy;
pub use kv::blocks_for;
pub use offload::OffloadStats;
pub use queue::WaitQueue;

use crate::cost::StepCostModel;
use crate::metrics::{LiveRecords, LogHistogram, RequestRecord};
use decode::DecodeGroup;
use kv::KvBlocks;
use running::{Phase, Running, Seq};
use step::Step;

/// Engine limits of one replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineParams {
    /// Maximum running sequences.
    pub max_num_seqs: u32,
    /// Token budget per step.
    pub max_num_batched_tokens: u32,
    /// How batches are formed.
    pub batching: BatchPolicy,
    /// Tokens per KV block.
    pub block_size: u32,
    /// KV blocks in the replica.
    pub num_blocks: u64,
    /// Order the waiting queue by the key given at enqueue (else first come first served).
    pub keyed_queue: bool,
    /// Most requests waiting; more are refused (`u32::MAX`: no limit).
    pub max_waiting: u32,
    /// Largest prompt chunk of one request in one step (`u32::MAX`: the budget).
    pub max_chunk: u32,
    /// Automatic prefix caching.
    pub prefix_caching: bool,
    /// Blocks kept free when admitting a waiting request (vLLM's watermark).
    pub watermark_blocks: u64,
    /// Speculative decoding: tokens proposed per decoding sequence and step (0: off).
    pub spec_k: u32,
    /// Multi-step scheduling: steps run per schedule (1: every step is scheduled).
    pub scheduler_steps: u32,
    /// Prefill pool: after its first token a request leaves for a decode pool,
    /// its KV blocks held until the transfer ends.
    pub handoff: bool,
    /// Swap preemption: host blocks available (0: preemption recomputes).
    pub swap_blocks: u64,
    /// Swap preemption: time to copy one block between host and GPU, s.
    pub swap_block_time: f64,
    /// What a waiting request must find free in the KV cache to be admitted.
    pub admission: crate::config::Admission,
    /// Which running sequence is preempted when blocks run out.
    pub victim: crate::config::Victim,
    /// Preempted requests go back to the tail of the waiting queue (else the head).
    pub preempted_to_back: bool,
    /// KV offload tiers (host memory, disk): blocks each holds.
    pub offload_blocks: [u64; 2],
    /// Time to load one block from each tier into GPU memory, s.
    pub offload_block_time: [f64; 2],
    /// The connector that runs the tiers.
    pub offload_connector: crate::config::OffloadConnector,
    /// `admission = "reserve"`: (starting, floor) fraction of the running
    /// requests' remaining output reserved, and its fall per decode step.
    pub new_token_ratio: (f64, f64, f64),
    /// What the clients send as `max_tokens` (`workload.max_tokens`): the
    /// output limit `max-length` and `reserve` admissions reserve for.
    pub max_tokens: crate::config::MaxTokens,
    /// Longest sequence the replica accepts (`max_model_len`): the limit of
    /// a request whose client sends no `max_tokens`.
    pub max_model_len: u32,
}

/// One engine replica.
pub struct Replica<C> {
    /// Index in the cluster.
    pub id: u32,
    /// The step-time model.
    cost: C,
    /// Engine limits.
    p: EngineParams,
    /// Admitted requests not yet running.
    waiting: WaitQueue,
    /// Requests running (prefilling or decoding), in admission order.
    running: Running,
    /// Slots of the prefilling sequences, in admission order.
    prefilling: Vec<u32>,
    /// Aggregates of the decoding sequences.
    decode: DecodeGroup,
    /// The KV blocks and the prefix cache.
    kv: KvBlocks,
    /// The step being formed or in flight.
    step: Step,
    /// Scratch: ITL sample counts per class for the step being finished.
    itl_counts: Vec<u32>,
    /// Tokens still to compute for the requests here (prompt chunks, recomputes
    /// and outputs), for join-shortest-queue routing.
    pending_tokens: u64,
    /// Static batching: when the idle replica must look at its queue again.
    wake_at: Option<f64>,
    /// Speculative decoding: the accepted runs of each sequence's verify steps.
    spec: speculative::SpecDraws,
    /// Prefill pool: KV kept for requests whose transfer is in flight.
    in_transfer: handoff::HandOffs,
    /// Waiting requests whose KV needs no prefill: arrived from a prefill
    /// pool (0), or swapped out to host memory (its host blocks).
    ready: std::collections::HashMap<u32, u64>,
    /// Swap preemption's host memory and the copies of the step being planned.
    swap: swap::Swap,
    /// `admission = "reserve"`: fraction of running requests' remaining
    /// output counted as still needed (SGLang's new_token_ratio).
    ratio: f64,
    /// `admission = "reserve"`: blocks promised to requests admitted in the
    /// step being formed (their whole remaining output).
    step_promised: u64,
    /// Multi-step scheduling: steps left in the current window after the one in flight.
    window_left: u32,
    /// Start of the measurement window.
    window_start: f64,
    /// End of the last step, or when the replica began serving, s.
    last_step_end: f64,
    /// Σ over running sequences of their `max_tokens` beyond their real
    /// output (clipped at 4,096), for SGLang's admission reserve.
    limit_extra: u64,
    /// Time the waiting/running integrals were last brought up to.
    t_touch: f64,
    /// Latency attribution's clocks (used only when the records attribute).
    clocks: attribution::Clocks,
    /// The power model's weights over the peaks: (c / peak FLOP/s, m / peak
    /// bytes/s), so that a step's activity × duration needs no division.
    power_weights: (f64, f64),
    /// LoRA adapters (with `[lora]`).
    lora: Option<lora::Loras>,
    /// The cost model's [`crate::cost::DecodeRun`] of each decode batch size
    /// met so far (index: sequences), for the fast path.
    decode_runs: Vec<Option<crate::cost::DecodeRun>>,
    /// Statistics.
    pub stats: ReplicaStats,
}

/// What a traced request was doing during a span of time (for the timeline chart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// Computing a prefill chunk.
    Prefill,
    /// Decoding, one token per step.
    Decode,
    /// Preempted, waiting to be recomputed.
    Preempted,
}

/// One span of a traced request's life.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// Request id.
    pub req: u32,
    /// What it was doing.
    pub kind: SpanKind,
    /// Start, s.
    pub start: f64,
    /// End, s.
    pub end: f64,
}

/// Shared per-run sinks the replicas write into.
pub struct Sinks {
    /// Every request's record, indexed by request id.
    pub records: LiveRecords,
    /// Pooled inter-token latencies of measured requests, per class.
    pub itl: Vec<LogHistogram>,
    /// Requests arriving at or after this time are measured.
    pub warmup: f64,
    /// Requests completed so far (whole run).
    pub completed: u64,
    /// Spans of the requests with id below `timeline_limit`.
    pub timeline: Vec<Span>,
    /// Requests traced for the timeline.
    pub timeline_limit: u32,
    /// Whether completions are reported in `done`.
    pub notify: bool,
    /// Requests completed since the caller last drained it (with `notify`).
    pub done: Vec<u32>,
    /// Prefill pool: requests whose KV cache must now move to a decode pool.
    pub handoffs: Vec<u32>,
    /// TTFTs of the first tokens shown, when a fleet policy reads them.
    pub first_tokens: Option<Vec<f64>>,
}

impl<C: StepCostModel> Replica<C> {
    /// A new idle replica.
    pub fn new(id: u32, p: EngineParams, cost: C, window_start: f64) -> Self {
        let cost_peak = (cost.peak_flops(), cost.peak_bandwidth());
        Replica {
            id,
            cost,
            p,
            waiting: WaitQueue::new(p.keyed_queue),
            running: Running::new(),
            prefilling: Vec::new(),
            decode: DecodeGroup::new(p.block_size),
            kv: KvBlocks::with_offload(&p),
            step: Step::default(),
            itl_counts: Vec::new(),
            pending_tokens: 0,
            wake_at: None,
            spec: speculative::SpecDraws::new(p.spec_k),
            in_transfer: handoff::HandOffs::default(),
            ready: std::collections::HashMap::new(),
            swap: swap::Swap::new(p.swap_blocks, p.swap_block_time),
            ratio: p.new_token_ratio.0,
            step_promised: 0,
            window_left: 0,
            window_start,
            last_step_end: 0.0,
            limit_extra: 0,
            t_touch: 0.0,
            clocks: attribution::Clocks::default(),
            power_weights: (crate::energy::POWER.compute / cost_peak.0, crate::energy::POWER.memory / cost_peak.1),
            lora: None,
            decode_runs: Vec::new(),
            stats: ReplicaStats {
                peak_flops: cost_peak.0,
                peak_bandwidth: cost_peak.1,
                num_blocks: p.num_blocks,
                ..ReplicaStats::default()
            },
        }
    }

    /// The step-time model.
    pub fn cost_model(&self) -> &C {
        &self.cost
    }
    /// Whether a step is in flight.
    pub fn is_busy(&self) -> bool {
        self.step.busy
    }
    /// Requests admitted here and not finished (waiting + running).
    pub fn outstanding(&self) -> u32 {
        self.waiting.len() as u32 + self.running.len()
    }
    /// Requests in the waiting queue.
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }
    /// Running sequences.
    pub fn num_running(&self) -> u32 {
        self.running.len()
    }
    /// Sequences in the step in flight (0 when idle).
    pub fn batch_size(&self) -> u32 {
        if self.step.busy { self.step.batch.decode_seqs + self.step.batch.prefill_seqs } else { 0 }
    }
    /// KV blocks in use (held by sequences or cached; not counting blocks
    /// only reserved for future growth).
    pub fn used_blocks(&self) -> u64 {
        self.kv.used()
    }
    /// The engine limits.
    pub fn params(&self) -> &EngineParams {
        &self.p
    }

    /// Integrates the waiting/running counts up to `now` (call before they change).
    #[inline]
    fn touch(&mut self, now: f64) {
        let from = self.t_touch.max(self.window_start);
        if now > from {
            let dt = now - from;
            self.stats.waiting_area += self.waiting.len() as f64 * dt;
            self.stats.running_area += self.running.len() as f64 * dt;
        }
        self.t_touch = now;
    }

    /// Puts an admitted request in the waiting queue (ordered by `key` when
    /// the queue is keyed); `work` is its prompt + output tokens. Returns
    /// false, admitting nothing, when the queue is full (`max_waiting`).
    pub fn enqueue(&mut self, now: f64, req: u32, key: f64, work: u64, records: &mut LiveRecords) -> bool {
        if self.waiting.len() >= self.p.max_waiting as usize {
            return false;
        }
        self.pending_tokens += work;
        self.touch(now);
        self.waiting.push_back(req, key);
        self.stats.routed += 1;
        if records.attributing() {
            self.clocks.enter_queue(now, records.attr(req));
        }
        true
    }

    /// Decode pool: queues request `req` whose prompt KV cache has arrived
    /// (it still has `work` tokens to decode); false when the queue is full.
    pub fn enqueue_ready(&mut self, now: f64, req: u32, key: f64, work: u64, records: &mut LiveRecords) -> bool {
        if !self.enqueue(now, req, key, work, records) {
            return false;
        }
        self.ready.insert(req, 0);
        true
    }

    /// Prefill pool: the KV cache of `req` has left; its blocks are freed (or stay cached).
    pub fn release_handoff(&mut self, now: f64, req: u32, records: &LiveRecords) {
        let Some((blocks, shared, tokens)) = self.in_transfer.release(req) else {
            unreachable!("request {req} holds no KV on replica {}", self.id)
        };
        self.touch(now);
        self.kv.give_back(req, &records[req as usize], shared, blocks as u64, tokens as u64);
    }

    /// A waiting request gave up (its record is already marked refused); it
    /// leaves the queue when it reaches the front.
    pub fn cancel_waiting(&mut self, now: f64, work: u64) {
        self.touch(now);
        self.waiting.cancel_one();
        self.pending_tokens -= work;
    }

    /// Sets each class's (prefix group, shared system-prompt tokens), for prefix caching.
    pub fn set_prefix_groups(&mut self, groups: std::sync::Arc<[(u32, u32)]>) {
        self.kv.set_groups(groups);
    }

    /// Sets each class's acceptance rate and the seed of the acceptance draws
    /// (speculative decoding).
    pub fn set_speculative(&mut self, alpha: std::sync::Arc<[f64]>, seed: u64) {
        self.spec.set(alpha, seed);
    }

    /// Tokens a speculative sequence has emitted after `j` verify steps.
    fn spec_emitted(&self, s: &Seq, j: u32) -> u32 {
        let left = s.output - s.generated;
        self.spec.draws(s.req, s.salt, s.class).take(j as usize).fold(0u32, |a, x| a.saturating_add(x)).min(left)
    }

    /// Tokens generated by sequence `s` so far (decoding ones are not touched per step).
    #[inline]
    fn generated_now(&self, s: &Seq) -> u32 {
        if s.phase != Phase::Decode {
            s.generated
        } else if s.units > 0 {
            s.generated + self.spec_emitted(s, (self.decode.d - s.d0) as u32)
        } else {
            s.generated + (self.decode.d - s.d0) as u32
        }
    }

    /// Tokens (or, speculating, verify steps) still to compute for a running sequence.
    #[inline]
    fn pending_of(&self, s: &Seq) -> u64 {
        let decode = if s.phase == Phase::Decode && s.units > 0 {
            s.units as u64 - (self.decode.d - s.d0)
        } else {
            (s.output - self.generated_now(s)) as u64
        };
        (s.target - s.computed) as u64 + decode
    }

    /// Sets the replayed trace whose rows carry prefix-block hashes.
    pub fn set_trace_hashes(&mut self, trace: Option<std::sync::Arc<crate::workload::trace::Trace>>) {
        self.kv.set_hashes(trace);
    }

    /// The leading blocks of request `req`'s prompt that other requests may
    /// share (system prompt, session context, trace hash blocks), at most
    /// 1,024, into `out`: what a prefix-aware router matches on.
    pub fn prefix_ids(&self, req: u32, r: &RequestRecord, out: &mut Vec<u64>) {
        self.kv.prefix_ids(req, r, out);
    }

    /// Static batching: the time an idle replica with waiting requests must
    /// form its batch at (taken once).
    pub fn take_wake(&mut self) -> Option<f64> {
        self.wake_at.take()
    }

    /// Tokens still to compute here: prompt chunks, recomputes and outputs.
    pub fn pending_tokens(&self) -> u64 {
        self.pending_tokens
    }

    /// Records a span of a traced request.
    #[inline]
    fn span(sinks: &mut Sinks, req: u32, kind: SpanKind, start: f64, end: f64) {
        if req < sinks.timeline_limit {
            sinks.timeline.push(Span { req, kind, start, end });
        }
    }

    /// Removes a decoding sequence from the decode group, returning its KV blocks.
    fn leave_decode(&mut self, i: u32) -> u64 {
        let s = self.running[i];
        self.decode.leave(i, &s)
    }

    /// Returns to the free pool what sequence `i` reserved and did not use
    /// (`admission = "max-length"`), when it leaves holding `held` blocks.
    fn drop_reservation(&mut self, i: u32, held: u64) {
        let r = self.running[i].resv_final as u64;
        if r > 0 {
            self.kv.unreserve(r, held);
            self.running[i].resv_final = 0;
        }
    }

    /// Start of the step in flight (the end of the previous one).
    pub fn step_start(&self) -> f64 {
        self.step.start
    }

    /// The replica (a fleet slot) begins serving at `now`: idle time counts from here.
    pub fn serving_from(&mut self, now: f64) {
        self.last_step_end = now;
    }

    /// Serves the adapters of `plan` (`[lora]`).
    pub fn set_lora(&mut self, plan: std::sync::Arc<lora::LoraPlan>) {
        self.lora = Some(lora::Loras::new(plan));
    }

    /// Whether the adapter of request `req` is in this replica's GPU memory
    /// (true without `[lora]`).
    pub fn holds_adapter_of(&self, req: u32) -> bool {
        self.lora.as_ref().is_none_or(|l| l.holds(l.plan().adapter_of(req)))
    }

    /// Removes running sequence `i` (its adapter has one user fewer).
    #[inline]
    fn drop_seq(&mut self, i: u32) {
        self.limit_extra -= self.running[i].limit_extra as u64;
        if let Some(l) = self.lora.as_mut() {
            l.leave(self.running[i].req);
        }
        self.running.remove(i);
    }

    /// Time spent in steps since the start of the run, s.
    pub fn busy_total(&self) -> f64 {
        self.stats.busy_whole_run
    }

    /// End of the step in flight, if any.
    pub fn step_end(&self) -> Option<f64> {
        self.step.busy.then_some(self.step.start + self.step.cost.time)
    }

    /// The replica fails at `now`: everything it held (GPU memory, the
    /// prefix cache, the step in flight, its queue) is lost. Returns the
    /// requests that were here (waiting or running, not those already
    /// refused), oldest running first, then the queue; the replica is left
    /// empty and idle, its statistics kept. The step in flight counts as
    /// busy only up to `now`.
    pub fn evacuate(&mut self, now: f64, records: &LiveRecords) -> Vec<u32> {
        self.touch(now);
        let mut out: Vec<u32> = self.running.iter().map(|(_, s)| s.req).collect();
        let mut queued: Vec<u32> = self.waiting.entries().into_iter().filter(|&r| !records.refused(r)).collect();
        queued.sort_unstable();
        out.extend(queued);
        if self.step.busy && self.step.start < now {
            // The part of the step done before the failure: its share of the work.
            let done = ((now - self.step.start) / self.step.cost.time).min(1.0);
            self.step.cost.flops *= done;
            self.step.cost.bytes *= done;
            self.account_step(now);
        }
        self.close_offload();
        self.kv.empty(&self.p);
        self.waiting = WaitQueue::new(self.p.keyed_queue);
        self.running = Running::new();
        self.prefilling.clear();
        self.decode = DecodeGroup::new(self.p.block_size);
        self.step = Step::default();
        self.pending_tokens = 0;
        self.wake_at = None;
        self.in_transfer = handoff::HandOffs::default();
        self.ready.clear();
        self.swap = swap::Swap::new(self.p.swap_blocks, self.p.swap_block_time);
        self.ratio = self.p.new_token_ratio.0;
        self.step_promised = 0;
        if let Some(l) = self.lora.as_mut() {
            // Adapters in GPU and host memory are lost too.
            l.empty();
        }
        // The attribution clocks run on: requests read only their differences.
        out
    }

    /// Adds the offload tiers' activity to the statistics (they are emptied after).
    fn close_offload(&mut self) {
        if let Some(o) = self.kv.offload.as_ref() {
            self.stats.offload.add(&o.stats);
        }
    }

    /// Closes the time integrals at the end of the run.
    pub fn close(&mut self, t_end: f64) {
        self.close_offload();
        if let Some(l) = &self.lora {
            self.stats.lora = l.stats;
        }
        self.touch(t_end);
        self.stats.prefix_evictions = self.kv.cache.evictions;
    }

    /// Tokens still to compute, recounted from the sequences and the waiting
    /// queue (O(requests here)); the tests compare it with the running count.
    pub fn recount_pending(&self, records: &LiveRecords) -> u64 {
        let mut total = 0u64;
        for (_, s) in self.running.iter() {
            total += self.pending_of(s);
        }
        for r in self.waiting.entries() {
            if records.refused(r) {
                continue;
            }
            let rec = &records[r as usize];
            if self.ready.contains_key(&r) {
                total += (rec.output - rec.generated) as u64;
            } else {
                total += rec.prompt as u64 + rec.output as u64;
            }
        }
        total
    }

    /// Checks the replica's invariants (O(running)); for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let (mut n_dec, mut dec_ctx, mut phase) = (0u32, 0u64, vec![0u32; self.decode.phase_count.len()]);
        let mut blocks = 0u64;
        let mut n = 0;
        for (_, s) in self.running.iter() {
            if s.phase == Phase::Decode {
                n_dec += 1;
                dec_ctx += self.decode.kv_len(s);
                phase[self.decode.phase_of(s.d0, s.kv0)] += 1;
            }
            blocks += match s.phase {
                Phase::Decode => {
                    blocks_for(self.decode.kv_len(s), self.p.block_size) + if s.extra_held { s.extra as u64 } else { 0 }
                }
                Phase::Prefill => s.blocks as u64,
                Phase::Free => return Err("free slot in running list".into()),
            } - s.shared as u64;
            n += 1;
        }
        if n != self.running.len() {
            return Err(format!("running list has {n} entries, counter says {}", self.running.len()));
        }
        if (n_dec, dec_ctx) != (self.decode.n, self.decode.ctx) || phase != self.decode.phase_count {
            return Err(format!(
                "decode aggregates ({}, {}) disagree with the sequences ({n_dec}, {dec_ctx})",
                self.decode.n, self.decode.ctx
            ));
        }
        let used = self.kv.used();
        // During a decode step the step's new blocks are already reserved.
        let reserved = if self.step.busy && self.step.decodes {
            self.decode.phase_count[self.decode.d_mod as usize] as u64
        } else {
            0
        };
        let pending: u64 = self
            .decode
            .joiners
            .iter()
            .map(|&j| &self.running[j])
            .filter(|s| !s.extra_held)
            .map(|s| s.extra as u64)
            .sum();
        if pending != self.decode.extra_pending {
            return Err(format!("{} extra blocks pending, joiners owe {pending}", self.decode.extra_pending));
        }
        // Blocks shared through the prefix cache count once; blocks of KV in transfer count.
        let blocks = blocks + self.kv.cache.in_use + self.in_transfer.own_blocks();
        if used != blocks + reserved {
            return Err(format!("{used} blocks in use but sequences hold {blocks} (+{reserved} reserved)"));
        }
        if used > self.p.num_blocks {
            return Err("KV blocks in use exceed capacity".into());
        }
        let host: u64 = self.ready.values().sum();
        if host != self.swap.used() || self.swap.used() > self.swap.capacity() {
            return Err(format!(
                "{} host blocks in use ({host} held by swapped requests), {} available",
                self.swap.used(),
                self.swap.capacity()
            ));
        }
        if self.kv.cache.evictable > self.kv.free {
            return Err("more evictable cached blocks than free blocks".into());
        }
        Ok(())
    }
}
