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
//! ([`decode`]) keeps their aggregates, and a sequence is touched only when
//! it is admitted, finishes a prefill chunk, is preempted or completes.
//!
//! # Parts
//! Each concern of a replica is a type of its own: the waiting queue
//! ([`WaitQueue`]), the running sequences (`running`), the KV blocks and
//! their prefix cache (`kv`, [`prefix`]), the decode group (`decode`), the
//! step being formed (`step`), speculative draws (`speculative`), swap space
//! (`swap`) and KV kept for a hand-off (`handoff`). [`Replica`] schedules
//! over them.

mod attribution;
mod decode;
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

pub use kv::blocks_for;
pub use offload::OffloadStats;
pub use queue::WaitQueue;

use crate::config::Admission;
use crate::cost::{StepBatch, StepCostModel};
use crate::metrics::{LiveRecords, LogHistogram, Part, RequestRecord, Status};
use attribution::Block;
use decode::DecodeGroup;
use kv::KvBlocks;
use running::{Phase, Running, Seq};
use step::Step;

/// SGLang clips a request's expected new tokens at this many when reserving
/// room for them (python/sglang/srt/managers/schedule_policy.py CLIP_MAX_NEW_TOKENS).
const SGLANG_CLIP_NEW_TOKENS: u32 = 4096;

/// How a replica forms its batches: one value, so that impossible
/// combinations (chunked prefill with static batching, prefill-first without
/// chunks) cannot be written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchPolicy {
    /// Continuous batching with chunked prefill (vLLM V1, Sarathi-Serve):
    /// prompt chunks share each step's token budget with the decodes. With
    /// `prefill_first`, a step that has prompt work runs only prompt work.
    Chunked {
        /// A step with prompt work runs only prompt work (decodes wait).
        prefill_first: bool,
    },
    /// Continuous batching, whole prompts next to the decodes when they fit
    /// the budget the decodes leave (Orca, TensorRT-LLM in-flight batching).
    Mixed,
    /// Continuous batching, whole prompts in prefill-only steps (vLLM V0).
    PrefillSteps,
    /// Request-level batching: a batch starts when `max_num_seqs` requests
    /// wait or the oldest has waited `timeout` seconds, and nothing joins it
    /// until all its requests finish.
    Static {
        /// Batch-formation timeout, s.
        timeout: f64,
    },
}

impl BatchPolicy {
    /// Prompts are split into chunks.
    pub fn chunked(self) -> bool {
        matches!(self, BatchPolicy::Chunked { .. })
    }

    /// Request-level batching.
    pub fn is_static(self) -> bool {
        matches!(self, BatchPolicy::Static { .. })
    }
}

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

/// Time-integrated statistics of one replica over the measurement window.
#[derive(Debug, Clone, Default)]
pub struct ReplicaStats {
    /// Engine steps executed (whole run).
    pub steps: u64,
    /// Busy time inside the window, s.
    pub busy: f64,
    /// FLOPs per GPU inside the window.
    pub flops: f64,
    /// Bytes per GPU inside the window.
    pub bytes: f64,
    /// ∫ sequences-in-step dt over busy time.
    pub batch_area: f64,
    /// ∫ tokens-in-step dt over busy time.
    pub token_area: f64,
    /// ∫ KV blocks in use dt.
    pub kv_area: f64,
    /// Most KV blocks in use at a step start inside the window.
    pub peak_kv_blocks: u64,
    /// ∫ waiting requests dt.
    pub waiting_area: f64,
    /// ∫ running requests dt.
    pub running_area: f64,
    /// Preemptions (whole run).
    pub preemptions: u64,
    /// KV tokens discarded by preemptions, to be recomputed (whole run).
    pub recomputed_tokens: u64,
    /// Requests routed here.
    pub routed: u64,
    /// Prompt tokens of first admissions (prefix-cache queries).
    pub prefix_query_tokens: u64,
    /// Of those, tokens found in the prefix cache.
    pub prefix_hit_tokens: u64,
    /// Prefill tokens not computed thanks to the cache (recomputes included).
    pub prefix_saved_tokens: u64,
    /// Cached blocks evicted.
    pub prefix_evictions: u64,
    /// Speculative decoding: verify steps drawn (one per sequence per step).
    pub spec_draws: u64,
    /// Tokens those verify steps would emit (before truncation at the output length).
    pub spec_draw_tokens: u64,
    /// Sequence-steps spent decoding with speculation.
    pub spec_seq_steps: u64,
    /// Tokens emitted in them.
    pub spec_seq_tokens: u64,
    /// Prefill pool: requests handed to a decode pool after their first token.
    pub handoffs: u64,
    /// Index of the replica's pool.
    pub pool: u32,
    /// Peak FLOP/s of one of its GPUs (for MFU).
    pub peak_flops: f64,
    /// Most tokens any step took from the token budget (whole run).
    pub peak_step_tokens: u64,
    /// Peak bandwidth of one of its GPUs, bytes/s (for MBU).
    pub peak_bandwidth: f64,
    /// KV blocks of the replica.
    pub num_blocks: u64,
    /// Swap preemption: sequences swapped out to host memory (whole run).
    pub swaps_out: u64,
    /// Swap preemption: blocks copied between host and GPU (both ways).
    pub swapped_blocks: u64,
    /// Swap preemption: most host blocks in use at once.
    pub peak_host_blocks: u64,
    /// Swap preemption: time the copies added to steps, s.
    pub swap_time: f64,
    /// Prompt tokens of first admissions found in the offload tiers (loaded, not computed).
    pub offload_hit_tokens: u64,
    /// The offload tiers' activity (whole run).
    pub offload: offload::OffloadStats,
    /// LoRA adapters' activity (whole run).
    pub lora: lora::LoraStats,
    /// Time spent in steps over the whole run (warm-up included), s.
    pub busy_whole_run: f64,
    /// ∫ the power model's activity dt inside the window (s; per GPU of the
    /// replica, all alike): its dynamic energy is (1 − idle) × TDP × this
    /// ([`crate::energy`]).
    pub activity_area: f64,
    /// Time inside the window that the replica sat without a step beyond
    /// the first [`crate::energy::LONG_IDLE_S`] of each gap between steps
    /// (from its last step, or from when it began serving), s: drawn at
    /// the loaded-idle power, not the serving floor.
    pub long_idle_s: f64,
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
pub struct Sinks<'a> {
    /// Every request's record, indexed by request id.
    pub records: &'a mut LiveRecords,
    /// Pooled inter-token latencies of measured requests, per class.
    pub itl: &'a mut [LogHistogram],
    /// Requests arriving at or after this time are measured.
    pub warmup: f64,
    /// Requests completed so far (whole run).
    pub completed: &'a mut u64,
    /// Spans of the requests with id below `timeline_limit`.
    pub timeline: &'a mut Vec<Span>,
    /// Requests traced for the timeline.
    pub timeline_limit: u32,
    /// Whether completions are reported in `done`.
    pub notify: bool,
    /// Requests completed since the caller last drained it (with `notify`).
    pub done: &'a mut Vec<u32>,
    /// Prefill pool: requests whose KV cache must now move to a decode pool.
    pub handoffs: &'a mut Vec<u32>,
    /// TTFTs of the first tokens shown, when a fleet policy reads them.
    pub first_tokens: Option<&'a mut Vec<f64>>,
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

    /// The running sequence to preempt: the newest, or (SGLang) the decoding
    /// sequence with the fewest generated tokens, ties to the longest prompt.
    fn victim(&self, sinks: &Sinks) -> u32 {
        if self.p.victim == crate::config::Victim::Newest || self.decode.n == 0 {
            return self.running.newest();
        }
        let mut best = (u32::MAX, 0u32, self.running.newest());
        for (i, s) in self.running.iter() {
            if s.phase == Phase::Decode {
                let key = (self.generated_now(s), sinks.records[s.req as usize].prompt);
                if key.0 < best.0 || (key.0 == best.0 && key.1 > best.1) {
                    best = (key.0, key.1, i);
                }
            }
        }
        best.2
    }

    /// The output limit an engine that reserves plans for request `r`: its
    /// client's `max_tokens` (never below the output it will produce).
    #[inline]
    fn output_limit(&self, r: &RequestRecord) -> u32 {
        match self.p.max_tokens {
            crate::config::MaxTokens::Output => r.output,
            crate::config::MaxTokens::Fixed(c) => c.max(r.output),
            crate::config::MaxTokens::None => self.p.max_model_len.saturating_sub(r.prompt).max(r.output),
        }
    }

    /// Output tokens SGLang's admission reserves for waiting request `r`:
    /// its `max_tokens` left, clipped at 4,096 (`CLIP_MAX_NEW_TOKENS`).
    #[inline]
    fn sglang_new_tokens(&self, r: &RequestRecord) -> u64 {
        let limit = self.output_limit(r);
        (limit - r.generated.min(limit)).min(SGLANG_CLIP_NEW_TOKENS) as u64
    }

    /// Remaining output tokens of the running requests as SGLang's admission
    /// counts them (`admission = "reserve"`): each request's `max_tokens`
    /// left, the part beyond its real output clipped at 4,096 tokens
    /// ([`Replica::output_limit`]).
    fn running_remaining(&self) -> u64 {
        let dec = self.decode.remaining_output();
        let pre: u64 = self
            .prefilling
            .iter()
            .map(|&j| {
                let s = &self.running[j];
                (s.output - s.generated) as u64
            })
            .sum();
        dec + pre + self.limit_extra
    }

    /// SGLang's new ratio after a retraction: (generated + 20 × running) /
    /// (requested + 1) over the requests still running, at most 1.
    fn ratio_after_retraction(&self) -> f64 {
        let (mut generated, mut req, mut n) = (0u64, 0u64, 0u64);
        for (_, s) in self.running.iter() {
            generated += self.generated_now(s) as u64;
            req += s.output as u64;
            n += 1;
        }
        ((generated + 20 * n) as f64 / (req + 1) as f64).min(1.0)
    }

    /// Preempts running sequence `i` (recompute).
    fn preempt(&mut self, now: f64, i: u32, sinks: &mut Sinks) {
        self.touch(now);
        let s = self.running[i];
        // When its latest token came out: a decoding sequence that took part
        // in the last decode step got it then; others at their own last token.
        let last_token = if s.phase == Phase::Decode && !self.decode.joiners.contains(&i) {
            self.decode.last_end
        } else {
            s.last_token
        };
        // Decoding sequences are not touched per step: count their tokens now.
        let generated = self.generated_now(&s);
        let before = self.pending_of(&s);
        let (freed, kv) = match s.phase {
            Phase::Decode => {
                let kv = s.kv0 as u64 + (generated - s.generated) as u64;
                if s.units > 0 {
                    let j = self.decode.d - s.d0;
                    self.stats.spec_seq_steps -= s.units as u64 - j;
                    self.stats.spec_seq_tokens -= (s.output - generated) as u64;
                }
                (self.leave_decode(i), kv)
            }
            Phase::Prefill => {
                if let Some(pos) = self.prefilling.iter().position(|&j| j == i) {
                    self.prefilling.remove(pos);
                }
                (s.blocks as u64, s.computed as u64)
            }
            Phase::Free => unreachable!("preempting a free slot"),
        };
        let rec = sinks.records[s.req as usize];
        self.drop_reservation(i, freed);
        self.kv.give_back(s.req, &rec, s.shared, freed, kv);
        self.drop_seq(i);
        if s.phase == Phase::Decode {
            Self::span(sinks, s.req, SpanKind::Decode, s.last_token, last_token);
        }
        Self::span(sinks, s.req, SpanKind::Preempted, now, f64::NAN);
        if sinks.records.attributing() {
            let before_first = rec.first_token.is_nan();
            let a = sinks.records.attr(s.req);
            if s.phase == Phase::Decode {
                self.clocks.close_decode(a, before_first);
            } else if before_first {
                attribution::lose_prefill(a);
            }
            a.mark = now;
        }
        let r = &mut sinks.records[s.req as usize];
        r.generated = generated;
        r.last_token = last_token;
        r.preemptions += 1;
        self.stats.preemptions += 1;
        let host = blocks_for(kv, self.p.block_size);
        if s.phase == Phase::Decode && self.swap.out(host) {
            // Swap out: the KV moves to host memory and comes back when it resumes.
            self.stats.peak_host_blocks = self.stats.peak_host_blocks.max(self.swap.used());
            self.stats.swaps_out += 1;
            self.ready.insert(s.req, host);
            self.pending_tokens += (s.output - generated) as u64 - before;
            self.waiting.push_front(s.req);
            return;
        }
        // KV tokens thrown away, to be computed again.
        self.stats.recomputed_tokens += s.computed as u64 + (generated - s.generated) as u64;
        // Its remaining work (`before`) becomes the whole prompt (with the
        // tokens to recompute) and the rest of its output again.
        let after = r.prompt as u64 + r.output as u64;
        self.pending_tokens += after - before;
        if self.p.preempted_to_back && !self.waiting.is_keyed() {
            self.waiting.push_back(s.req, 0.0);
        } else {
            self.waiting.push_front(s.req);
        }
    }

    /// Makes room for this decode step's new blocks, preempting sequences
    /// (the newest, or as `victim` says) until the rest fit.
    fn reserve_decode_blocks(&mut self, now: f64, sinks: &mut Sinks) -> bool {
        let mut preempted = false;
        while self.decode.n > 0 {
            let need = self.decode.blocks_needed();
            if self.kv.fits_growth(need) {
                self.kv.take_growth(need);
                if self.decode.extra_pending > 0 {
                    self.decode.extra_pending = 0;
                    for &j in &self.decode.joiners {
                        self.running[j].extra_held = true;
                    }
                }
                break;
            }
            let victim = self.victim(sinks);
            self.preempt(now, victim, sinks);
            preempted = true;
        }
        if preempted && self.p.admission == crate::config::Admission::Reserve {
            self.ratio = self.ratio_after_retraction();
        }
        preempted
    }

    /// Most sequences that may run at once: `max_num_seqs`, and with
    /// speculation no more than the token budget holds at k + 1 tokens each
    /// (vLLM's scheduler charges every running request 1 + k tokens of the
    /// budget and leaves out those that do not fit).
    fn max_running(&self) -> u32 {
        if self.p.spec_k == 0 {
            return self.p.max_num_seqs;
        }
        self.p.max_num_seqs.min((self.p.max_num_batched_tokens / (1 + self.p.spec_k)).max(1))
    }

    /// Decode pool: admits waiting requests whose prompt KV has arrived,
    /// from the head of the queue, straight into the decode group.
    fn admit_ready(&mut self, now: f64, sinks: &mut Sinks) {
        if self.running.len() >= self.max_running() {
            self.clocks.block = Block::BatchFull;
        }
        while self.running.len() < self.max_running() {
            let records = &sinks.records;
            let Some(req) = self.waiting.front(|r| records.refused(r)) else {
                return;
            };
            let Some(&host) = self.ready.get(&req) else {
                return;
            };
            let r = &sinks.records[req as usize];
            let target = r.prompt + r.generated - 1;
            let need = blocks_for(target as u64, self.p.block_size);
            let watermark = if !self.running.is_empty() { self.p.watermark_blocks } else { 0 };
            if need + watermark > self.kv.free {
                self.clocks.block = Block::Kv;
                return;
            }
            self.touch(now);
            self.waiting.pop_front();
            self.ready.remove(&req);
            self.kv.take(need);
            if host > 0 {
                // Swap in: its blocks come back from host memory.
                self.swap.back(host, need);
            }
            let last = r.last_token;
            let before_first = r.first_token.is_nan();
            let i = self.start_seq(req, r, sinks.warmup, target, target, need as u32, 0, last);
            self.join_decode(i, last);
            if sinks.records.attributing() {
                let a = sinks.records.attr(req);
                self.clocks.leave_queue(now, a, before_first);
                self.clocks.open_decode(a, before_first);
            }
            if self.running.len() >= self.max_running() {
                self.clocks.block = Block::BatchFull;
            }
        }
    }

    /// Admits the head of the waiting queue with a first chunk of `max_chunk`
    /// tokens at most; returns false (and admits nothing) if it does not fit.
    fn try_admit(&mut self, now: f64, max_chunk: u32, whole: bool, sinks: &mut Sinks) -> bool {
        let records = &sinks.records;
        let Some(mut req) = self.waiting.front(|r| records.refused(r)) else {
            return false;
        };
        if !self.ready.is_empty() && self.ready.contains_key(&req) {
            // Its KV is on its way in (or on the host): admitted by `admit_ready` when it fits.
            return false;
        }
        // With LoRA, the position of the request taken when the head's
        // adapter has no slot (0: the head).
        let mut at = 0;
        if let Some(l) = self.lora.as_mut()
            && !l.can_start(req)
        {
            // Every adapter slot holds an adapter that running requests use:
            // as vLLM's scheduler, skip to the first request whose adapter
            // is loaded (first come first served queues; the first 1,024).
            let ready = &self.ready;
            let found = self.waiting.find_after_front(
                1024,
                |r| records.refused(r) || ready.contains_key(&r),
                |&r| l.holds(l.plan().adapter_of(r)),
            );
            match found {
                Some((k, r)) => {
                    at = k;
                    req = r;
                }
                None => {
                    self.clocks.block = Block::BatchFull;
                    return false;
                }
            }
        }
        let r = &sinks.records[req as usize];
        let target = r.prompt + r.generated;
        // Leading full blocks already in the prefix cache are not computed
        // again (at least one token always is, to produce the next token).
        let bs = self.p.block_size;
        let (hits, unused_hits, tiered) = self.kv.cached_prefix(req, r, target);
        // Blocks in the offload tiers are loaded, not computed: they need GPU blocks like computed ones.
        let skip = (hits + tiered) * bs;
        let chunk = (target - skip).min(max_chunk);
        if chunk == 0 || (whole && chunk < target - skip) {
            self.clocks.block = Block::Budget;
            return false;
        }
        let need_chunk = blocks_for((skip + chunk) as u64, bs) - hits as u64;
        let prompt_blocks = blocks_for(target as u64, bs) - hits as u64;
        // Blocks taken now, moved to the reserve for later growth, and
        // required free on top of both (see `config::Admission`).
        let (need, reserve, headroom) = match self.p.admission {
            Admission::Chunk => (need_chunk, 0, 0),
            // vLLM V0: the whole prompt's blocks are allocated at admission.
            Admission::Prompt => (prompt_blocks, 0, 0),
            // TensorRT-LLM GUARANTEED_NO_EVICT: the prompt now, the output reserved.
            Admission::MaxLength => {
                let last = (r.prompt + self.output_limit(r)).saturating_sub(1).max(target) as u64;
                (prompt_blocks, blocks_for(last, bs) - blocks_for(target as u64, bs), 0)
            }
            // SGLang: prompt and (clipped) output must fit beside the running
            // requests' expected needs and this step's earlier admissions.
            Admission::Reserve => {
                let out = self.sglang_new_tokens(r);
                let running = (self.ratio * self.running_remaining() as f64 / bs as f64).ceil() as u64;
                let rest = (prompt_blocks + blocks_for(out, bs)).saturating_sub(need_chunk);
                (need_chunk, 0, rest + running + self.step_promised)
            }
        };
        // A new request is admitted only if the free-block watermark remains
        // (room for running sequences to grow without preempting at once);
        // an idle replica waives it, so every request can eventually run.
        let watermark = if !self.running.is_empty() { self.p.watermark_blocks } else { 0 };
        let headroom = if !self.running.is_empty() { headroom } else { 0 };
        if need + reserve + unused_hits + watermark + headroom > self.kv.free {
            self.clocks.block = Block::Kv;
            return false;
        }
        if self.p.admission == Admission::Reserve {
            self.step_promised += blocks_for(self.sglang_new_tokens(r), bs);
        }
        self.touch(now);
        if at == 0 {
            self.waiting.pop_front();
        } else {
            self.waiting.remove_at(at);
        }
        self.kv.share(req, r, hits, unused_hits);
        if tiered > 0 {
            // Loaded before the evictions that taking blocks may cause move them.
            self.kv.load(req, r, hits, hits + tiered);
            if r.preemptions == 0 {
                self.stats.offload_hit_tokens += (tiered * bs) as u64;
            }
        }
        self.kv.take(need);
        if reserve > 0 {
            self.kv.reserve(reserve);
        }
        if self.p.prefix_caching {
            if r.preemptions == 0 {
                self.stats.prefix_query_tokens += r.prompt as u64;
                self.stats.prefix_hit_tokens += skip as u64;
            }
            self.stats.prefix_saved_tokens += skip as u64;
            self.pending_tokens -= skip as u64;
        }
        if r.preemptions > 0 && req < sinks.timeline_limit {
            // Close the open "preempted" span of this request.
            if let Some(sp) = sinks.timeline.iter_mut().rev().find(|sp| sp.req == req && sp.kind == SpanKind::Preempted)
            {
                sp.end = now;
            }
        }
        if sinks.records.attributing() {
            let before_first = sinks.records[req as usize].first_token.is_nan();
            self.clocks.leave_queue(now, sinks.records.attr(req), before_first);
        }
        let r = &mut sinks.records[req as usize];
        if r.first_scheduled.is_nan() {
            r.first_scheduled = now;
        }
        let last = if r.last_token.is_nan() { r.first_token } else { r.last_token };
        let i = self.start_seq(req, r, sinks.warmup, target, skip, (need + hits as u64) as u32, hits, last);
        if reserve > 0 {
            self.running[i].resv_final = (need + hits as u64 + reserve) as u32;
        }
        if self.p.admission == Admission::Reserve {
            // What its max_tokens asks beyond its real output (clipped as SGLang clips).
            let r = &sinks.records[req as usize];
            let extra = (self.output_limit(r) - r.output).min(SGLANG_CLIP_NEW_TOKENS);
            self.running[i].limit_extra = extra;
            self.limit_extra += extra as u64;
        }
        self.prefilling.push(i);
        self.step.push_chunk(i, &self.running[i], chunk);
        true
    }

    /// Puts admitted request `req` in a new running slot: `target` tokens to
    /// have in the KV cache, `computed` of them already there, holding
    /// `blocks` blocks of which `shared` come from the prefix cache; its
    /// latest token came out at `last_token`. Returns the slot.
    #[allow(clippy::too_many_arguments)]
    fn start_seq(
        &mut self,
        req: u32,
        r: &RequestRecord,
        warmup: f64,
        target: u32,
        computed: u32,
        blocks: u32,
        shared: u32,
        last_token: f64,
    ) -> u32 {
        self.decode.track_class(r.class);
        let measured = r.arrival >= warmup;
        let s = Seq::prefill(
            req,
            r.output,
            r.generated,
            target,
            computed,
            blocks,
            shared,
            r.class,
            measured,
            last_token,
            r.preemptions,
        );
        self.step.batch.new_requests += 1;
        if let Some(l) = self.lora.as_mut() {
            l.enter(req);
        }
        self.running.add(s)
    }

    /// Forms the next step at time `now`; returns its end time, or `None`
    /// (replica goes idle) when there is nothing to run.
    pub fn form_step(&mut self, now: f64, sinks: &mut Sinks) -> Option<f64> {
        loop {
            if self.running.is_empty() && self.waiting.is_empty() {
                self.step.busy = false;
                // SGLang resets its ratio whenever the scheduler goes idle.
                self.ratio = self.p.new_token_ratio.0;
                self.wait_reason(now, sinks, Part::WaitStep);
                return None;
            }
            self.step_promised = 0;
            self.step.clear();
            self.clocks.block = Block::Step;
            // Multi-step scheduling: inside a window the batch scheduled at its
            // start decodes on and nobody joins (vLLM 0.6 reuses the cached
            // schedule while the batch has remaining steps).
            let continuation = self.window_left > 0 && self.decode.n > 0;
            if !continuation && !self.ready.is_empty() {
                self.admit_ready(now, sinks);
            }
            if continuation {
                self.reserve_decode_blocks(now, sinks);
                self.step.decodes = self.decode.n > 0;
            } else if let BatchPolicy::Static { timeout } = self.p.batching
                && self.running.is_empty()
            {
                // Form a batch when it is full or its oldest request has waited long enough.
                let records = &sinks.records;
                let head = self.waiting.front(|r| records.refused(r));
                let due = head.map_or(f64::INFINITY, |h| records[h as usize].admitted + timeout);
                if self.waiting.len() < self.p.max_num_seqs as usize && now < due {
                    self.step.busy = false;
                    self.wake_at = due.is_finite().then_some(due);
                    self.wait_reason(now, sinks, Part::WaitBatchForming);
                    return None;
                }
            }
            if !continuation {
                if let BatchPolicy::Chunked { .. } | BatchPolicy::Mixed = self.p.batching {
                    // Whole prompts only without chunking (Orca): a prompt joins a step
                    // only if it fits the budget left by the decodes.
                    let whole = !self.p.batching.chunked();
                    // Prefill first: a step that has prompt work runs only prompt work.
                    let prefill_first = matches!(self.p.batching, BatchPolicy::Chunked { prefill_first: true });
                    let prefill_only = prefill_first && (!self.prefilling.is_empty() || !self.waiting.is_empty());
                    let preempted = !prefill_only && self.reserve_decode_blocks(now, sinks);
                    self.step.decodes = !prefill_only && self.decode.n > 0;
                    let per_decode = 1 + self.p.spec_k;
                    let mut budget = self.p.max_num_batched_tokens.saturating_sub(if self.step.decodes {
                        self.decode.n * per_decode
                    } else {
                        0
                    });
                    let attributing = sinks.records.attributing();
                    let mut k = 0;
                    while k < self.prefilling.len() && budget > 0 {
                        let i = self.prefilling[k];
                        k += 1;
                        let s = self.running[i];
                        let mut c = (s.target - s.computed).min(budget).min(self.p.max_chunk);
                        let bs = self.p.block_size as u64;
                        let have = s.blocks as u64;
                        let need = blocks_for((s.computed + c) as u64, self.p.block_size).saturating_sub(have);
                        if need > self.kv.free {
                            c = ((have + self.kv.free) * bs - s.computed as u64) as u32;
                            if c == 0 {
                                if attributing {
                                    self.step.stalled.push((i, s.req, Block::Kv));
                                }
                                continue;
                            }
                        }
                        let need = blocks_for((s.computed + c) as u64, self.p.block_size).saturating_sub(have);
                        self.kv.take(need);
                        self.running[i].blocks += need as u32;
                        self.step.push_chunk(i, &self.running[i], c);
                        budget -= c;
                    }
                    if attributing {
                        // The budget ran out before these prefilling sequences.
                        for &i in &self.prefilling[k..] {
                            self.step.stalled.push((i, self.running[i].req, Block::Budget));
                        }
                    }
                    if preempted {
                        self.clocks.block = Block::Kv;
                    } else {
                        while budget > 0
                            && self.running.len() < self.max_running()
                            && self.try_admit(
                                now,
                                if whole && self.running.is_empty() { u32::MAX } else { budget.min(self.p.max_chunk) },
                                whole,
                                sinks,
                            )
                        {
                            budget -= self.step.last_chunk();
                        }
                        if budget == 0 {
                            self.clocks.block = Block::Budget;
                        } else if self.running.len() >= self.max_running() {
                            self.clocks.block = Block::BatchFull;
                        }
                    }
                    if prefill_only && self.step.chunks.is_empty() {
                        // No prompt work fits after all: decode instead.
                        self.reserve_decode_blocks(now, sinks);
                        self.step.decodes = self.decode.n > 0;
                    }
                } else {
                    let mut budget = self.p.max_num_batched_tokens;
                    let mut first = true;
                    // Static batching admits only into an empty replica, the whole batch at once.
                    let admit = !self.p.batching.is_static() || self.running.is_empty();
                    while admit && self.running.len() < self.max_running() {
                        // A lone recompute longer than the budget may still run alone.
                        let cap = if first || self.p.batching.is_static() { u32::MAX } else { budget };
                        if !self.try_admit(now, cap, true, sinks) {
                            break;
                        }
                        budget = budget.saturating_sub(self.step.last_chunk());
                        first = false;
                    }
                    if !admit || self.running.len() >= self.max_running() {
                        self.clocks.block = Block::BatchFull;
                    }
                    if self.step.chunks.is_empty() {
                        self.reserve_decode_blocks(now, sinks);
                        self.step.decodes = self.decode.n > 0;
                    }
                }
            }
            if self.step.decodes {
                let b = &mut self.step.batch;
                b.decode_seqs = self.decode.n;
                b.decode_ctx_tokens = (self.decode.ctx + self.decode.n as u64) as f64;
                b.logits += self.decode.n;
                b.spec_tokens = self.p.spec_k;
            }
            if self.step.chunks.is_empty() && !self.step.decodes {
                // Blocks are exhausted by partial prefills: free the newest one.
                if self.running.is_empty() && !self.in_transfer.is_empty() {
                    // Prefill pool: the cache is full of KV being transferred;
                    // a transfer's end wakes the replica.
                    self.step.busy = false;
                    self.wait_reason(now, sinks, Part::WaitKv);
                    return None;
                }
                if self.running.is_empty() {
                    // Nothing runs and the head of the queue does not fit an
                    // empty cache: cannot happen, requests that never fit are
                    // rejected at arrival.
                    unreachable!("waiting request can never be scheduled");
                }
                let victim = self.running.newest();
                self.preempt(now, victim, sinks);
                continue;
            }
            if self.p.scheduler_steps > 1 {
                if continuation {
                    self.window_left -= 1;
                    self.step.batch.host_free = true;
                } else if self.step.chunks.is_empty() || self.p.batching.chunked() {
                    // Without chunked prefill only a decode batch runs several steps.
                    self.window_left = self.p.scheduler_steps - 1;
                } else {
                    self.window_left = 0;
                }
            }
            self.step.cost = self.cost.step(&self.step.batch);
            if let Some((blocks, t)) = self.swap.take_step() {
                // Copies between host and GPU memory in this step.
                self.step.cost.time += t;
                self.step.swap_time = t;
                self.stats.swap_time += t;
                self.stats.swapped_blocks += blocks;
            }
            if let Some(o) = self.kv.offload.as_mut() {
                // Prefix blocks loaded back from the offload tiers (and, with
                // LMCache, the previous step's stores), as far as the step waits for them.
                let t = o.take_step(self.step.cost.time);
                self.step.cost.time += t;
                self.step.swap_time += t;
            }
            if let Some(l) = self.lora.as_mut() {
                // Adapter loads, and the adapters' share of the batch.
                self.step.cost.time += l.step_time(&self.step.batch);
            }
            if sinks.records.attributing() {
                let records = &sinks.records;
                let reason = match self.waiting.front(|r| records.refused(r)) {
                    None => Part::WaitStep,
                    Some(_) => self.clocks.block.part(self.step.batch.prefill_tokens, self.step_decode_tokens()),
                };
                self.clocks.switch(now, reason);
            }
            self.step.busy = true;
            self.step.start = now;
            let end = now + self.step.cost.time;
            return Some(end);
        }
    }

    /// Attribution: from `now` on, requests waiting here wait for `reason`.
    fn wait_reason(&mut self, now: f64, sinks: &Sinks, reason: Part) {
        if sinks.records.attributing() {
            self.clocks.switch(now, reason);
        }
    }

    /// Tokens the decodes take from the step's budget.
    fn step_decode_tokens(&self) -> u64 {
        if self.step.decodes { self.decode.n as u64 * (1 + self.p.spec_k) as u64 } else { 0 }
    }

    /// Attribution of the step just ended (at `t_end`), before its results
    /// are applied: the decode clocks advance by the decodes' own compute,
    /// their stall and the swap copies; each prompt chunk is charged what it
    /// would have cost alone as its own compute and the rest of the step as
    /// interference; prefilling sequences left out of the step wait for the
    /// reason they were left out.
    fn attribute_step(&mut self, t_end: f64, sinks: &mut Sinks) {
        let dt = t_end - self.step.start;
        let swap = self.step.swap_time;
        let compute = dt - swap;
        let b = self.step.batch;
        if self.step.decodes {
            let own = if self.step.chunks.is_empty() {
                compute
            } else {
                let alone = StepBatch::decoding(b.decode_seqs, b.decode_ctx_tokens, b.spec_tokens);
                self.cost.predict(&alone).min(compute)
            };
            self.clocks.decode_step(own, compute - own, swap);
        } else {
            self.clocks.decode_step(0.0, compute, swap);
        }
        for &(i, c) in &self.step.chunks {
            let s = self.running[i];
            if sinks.records[s.req as usize].first_token.is_nan() {
                let mut alone = StepBatch::default();
                alone.add_chunk(s.computed, c, s.samples_after(c));
                let own = self.cost.predict(&alone).min(compute);
                let a = sinks.records.attr(s.req);
                a.parts[Part::Prefill.idx()] += own;
                a.parts[Part::Interference.idx()] += dt - own;
            } else {
                // Recomputing after a preemption while decoding.
                sinks.records.attr(s.req).parts[Part::DecodePreempted.idx()] += dt;
            }
        }
        let decode_tokens = self.step_decode_tokens();
        for &(i, req, block) in &self.step.stalled {
            let s = &self.running[i];
            if s.phase != Phase::Prefill || s.req != req {
                continue; // preempted while the step was formed
            }
            let part = if sinks.records[req as usize].first_token.is_nan() {
                block.part(b.prefill_tokens, decode_tokens)
            } else {
                Part::DecodePreempted
            };
            sinks.records.attr(req).parts[part.idx()] += dt;
        }
    }

    /// Advances the decode-step counter (after a decode step), and lets
    /// SGLang's reserve ratio decay one step towards its floor.
    #[inline]
    fn advance_d(&mut self) {
        self.decode.advance();
        if self.p.admission == Admission::Reserve {
            let (_, floor, decay) = self.p.new_token_ratio;
            self.ratio = (self.ratio - decay).max(floor);
        }
    }

    /// Start of the step in flight (the end of the previous one).
    pub fn step_start(&self) -> f64 {
        self.step.start
    }

    /// Runs steady decode steps inline while nothing but decoding can happen:
    /// the step in flight and the next are pure decode steps, no sequence
    /// finishes, nobody can be admitted, no preemption is needed, and the
    /// step ends before `horizon`. Each such step is finished and the next
    /// planned exactly as [`Replica::finish_step`] would (same arithmetic, same
    /// order), without the general machinery. Returns the end of the step
    /// left in flight; [`Replica::step_start`] is then the time reached.
    /// With `check`, verifies the invariants after every step. `area`
    /// accumulates `in_system` × each step's duration (Little's law), step by
    /// step as the event loop would.
    pub fn fast_forward(
        &mut self,
        horizon: f64,
        sinks: &mut Sinks,
        check: bool,
        area: &mut f64,
        in_system: u64,
    ) -> f64 {
        loop {
            let end = self.step.start + self.step.cost.time;
            let steady = self.p.scheduler_steps <= 1
                && self.step.busy
                && self.step.decodes
                && self.step.chunks.is_empty()
                && self.decode.joiners.is_empty()
                && self.prefilling.is_empty()
                && (self.waiting.is_empty()
                    || (self.p.batching.chunked() && self.running.len() >= self.p.max_num_seqs))
                && self.decode.extra_pending == 0
                && self.decode.none_due_next()
                && self.kv.fits_growth(self.decode.blocks_needed_after());
            if !steady || end >= horizon {
                return end;
            }
            // Finish the step in flight (pure decode, no completion).
            *area += in_system as f64 * (end - self.step.start);
            self.account_step(end);
            if sinks.records.attributing() {
                self.clocks.decode_step(end - self.step.start, 0.0, 0.0);
            }
            self.pending_tokens -= self.decode.n as u64;
            let gap = end - self.decode.last_end;
            for (h, &n) in sinks.itl.iter_mut().zip(&self.decode.n_class) {
                if n > 0 {
                    h.add(gap, n as u64);
                }
            }
            self.decode.last_end = end;
            self.advance_d();
            self.decode.ctx += self.decode.n as u64;
            // Plan the next one: every sequence decodes one more token.
            self.kv.take_growth(self.decode.blocks_needed());
            self.step.batch =
                StepBatch::decoding(self.decode.n, (self.decode.ctx + self.decode.n as u64) as f64, self.p.spec_k);
            self.step.cost = self.cost.step(&self.step.batch);
            if let Some(l) = self.lora.as_mut() {
                self.step.cost.time += l.step_time(&self.step.batch);
            }
            self.step.swap_time = 0.0;
            self.step.start = end;
            if check && let Err(m) = self.check_invariants() {
                panic!("replica {} at t = {end} (fast path): {m}", self.id);
            }
        }
    }

    /// Completes the step in flight at `t_end` and plans the next one;
    /// returns the next step's end time, if any.
    pub fn finish_step(&mut self, t_end: f64, sinks: &mut Sinks) -> Option<f64> {
        self.account_step(t_end);
        let attributing = sinks.records.attributing();
        if attributing {
            self.attribute_step(t_end, sinks);
        }
        self.pending_tokens -= self.step.batch.prefill_tokens + self.step.batch.decode_seqs as u64;
        if self.step.decodes {
            // Sequences that joined the decode group at the previous step's
            // end measure their gap from their own last token; one handed
            // over from a prefill pool shows its first token now.
            self.itl_counts.clone_from(&self.decode.n_class);
            for &j in &self.decode.joiners {
                let s = &self.running[j];
                let r = &mut sinks.records[s.req as usize];
                let first = r.first_token.is_nan();
                if first {
                    r.first_token = t_end;
                    if let Some(v) = sinks.first_tokens.as_mut() {
                        v.push(t_end - r.arrival);
                    }
                    if attributing {
                        // Its first decode step (on a decode pool) gave its first token.
                        let a = sinks.records.attr(s.req);
                        self.clocks.close_decode(a, true);
                        self.clocks.open_decode(a, false);
                    }
                }
                if s.measured {
                    self.itl_counts[s.class as usize] -= 1;
                    if !first {
                        sinks.itl[s.class as usize].add(t_end - s.last_token, 1);
                    }
                }
            }
            let gap = t_end - self.decode.last_end;
            for (h, &n) in sinks.itl.iter_mut().zip(&self.itl_counts) {
                if n > 0 {
                    h.add(gap, n as u64);
                }
            }
            self.decode.joiners.clear();
            self.decode.last_end = t_end;
            let step = self.decode.d;
            self.advance_d();
            self.decode.ctx += self.decode.n as u64;
            while let Some((i, version)) = self.decode.pop_due(step) {
                let s = self.running[i];
                if s.version == version && s.phase == Phase::Decode {
                    Self::span(sinks, s.req, SpanKind::Decode, s.last_token, t_end);
                    if attributing {
                        self.clocks.close_decode(sinks.records.attr(s.req), false);
                    }
                    let kv = s.kv0 as u64 + (s.output - s.generated) as u64;
                    let blocks = self.leave_decode(i);
                    self.complete(t_end, i, blocks, kv, s.output, sinks);
                }
            }
        }
        let chunks = std::mem::take(&mut self.step.chunks);
        for &(i, c) in &chunks {
            Self::span(sinks, self.running[i].req, SpanKind::Prefill, self.step.start, t_end);
            let s = &mut self.running[i];
            s.computed += c;
            if s.computed < s.target {
                continue;
            }
            // The prefill's last chunk yields the first token (a prefill-only
            // request yields its result and no token).
            if s.output > 0 {
                s.generated += 1;
                self.pending_tokens -= 1;
            }
            let mut s = *s;
            if let Some(pos) = self.prefilling.iter().position(|&j| j == i) {
                self.prefilling.remove(pos);
            }
            // Its full prompt blocks are now computed: others can share them.
            s.shared = self.kv.publish(s.req, &sinks.records[s.req as usize], s.shared, s.target);
            self.running[i].shared = s.shared;
            let r = &mut sinks.records[s.req as usize];
            // A request that leaves a prefill pool for a decode pool has
            // not shown the client a token yet: the decode side emits its
            // first token (docs/scenario.md, "Disaggregated TTFT").
            let leaves = self.p.handoff && s.generated < s.output;
            if r.first_token.is_nan() {
                if !leaves {
                    r.first_token = t_end;
                    if let Some(v) = sinks.first_tokens.as_mut() {
                        v.push(t_end - r.arrival);
                    }
                }
            } else if s.measured && s.output > 0 {
                // Token after a recompute: its gap includes the time spent preempted.
                sinks.itl[s.class as usize].add(t_end - s.last_token, 1);
            }
            if s.generated >= s.output {
                self.complete(t_end, i, s.blocks as u64, s.computed as u64, s.generated, sinks);
                continue;
            }
            if self.p.handoff {
                // Prefill pool: the request leaves for a decode pool; its KV
                // blocks stay until the transfer is over.
                self.touch(t_end);
                self.drop_reservation(i, s.blocks as u64);
                self.drop_seq(i);
                self.pending_tokens -= (s.output - s.generated) as u64;
                self.in_transfer.keep(s.req, s.blocks, s.shared, s.computed);
                self.stats.handoffs += 1;
                let r = &mut sinks.records[s.req as usize];
                // As vLLM's disaggregated prefill does, the prefill instance's
                // token is not sent on: the decode instance receives the KV of
                // all but the prompt's last token and computes that token and
                // the first output token again, in its first step.
                r.generated = s.generated - 1;
                r.last_token = t_end;
                if attributing {
                    sinks.records.attr(s.req).mark = t_end;
                }
                sinks.handoffs.push(s.req);
                continue;
            }
            self.join_decode(i, t_end);
            if attributing {
                self.clocks.open_decode(sinks.records.attr(s.req), false);
            }
        }
        self.step.chunks = chunks;
        self.step.chunks.clear();
        self.form_step(t_end, sinks)
    }

    /// Moves sequence `i`, whose prompt KV is complete, into the decode
    /// group; its latest token came out at `last_token`.
    fn join_decode(&mut self, i: u32, last_token: f64) {
        let s = self.running[i];
        let left = s.output - s.generated;
        let (units, extra) = if self.p.spec_k > 0 {
            // Draw the verify steps that emit the tokens left; blocks for
            // the tokens beyond one per step are held from the next step on.
            let (mut n, mut total) = (0u32, 0u32);
            for x in self.spec.draws(s.req, s.salt, s.class) {
                n += 1;
                total += x;
                self.stats.spec_draw_tokens += x as u64;
                if total >= left {
                    break;
                }
            }
            self.stats.spec_draws += n as u64;
            self.stats.spec_seq_steps += n as u64;
            self.stats.spec_seq_tokens += left as u64;
            self.pending_tokens -= (left - n) as u64;
            // ⌈a + b⌉ ≤ ⌈a⌉ + ⌈b⌉ in blocks: enough whatever the order of the runs.
            let extra = blocks_for((left - n) as u64, self.p.block_size) as u32;
            (n, extra)
        } else {
            (0, 0)
        };
        let d0 = self.decode.join(i, &s, units, extra);
        let sm = &mut self.running[i];
        sm.phase = Phase::Decode;
        sm.d0 = d0;
        sm.kv0 = s.target;
        sm.last_token = last_token;
        sm.units = units;
        sm.extra = extra;
        sm.extra_held = false;
    }

    fn complete(&mut self, t: f64, i: u32, blocks: u64, kv: u64, generated: u32, sinks: &mut Sinks) {
        self.touch(t);
        self.drop_reservation(i, blocks);
        let (req, shared) = (self.running[i].req, self.running[i].shared);
        let rec = sinks.records[req as usize];
        self.kv.give_back(req, &rec, shared, blocks, kv);
        self.drop_seq(i);
        let r = &mut sinks.records[req as usize];
        r.generated = generated;
        r.last_token = t;
        r.status = Status::Completed;
        *sinks.completed += 1;
        if sinks.notify {
            sinks.done.push(req);
        }
    }

    /// Adds the step just finished to the window integrals.
    #[inline]
    fn account_step(&mut self, t_end: f64) {
        // Idle beyond LONG_IDLE_S since the last step (inside the window).
        let long = self.step.start - (self.last_step_end + crate::energy::LONG_IDLE_S).max(self.window_start);
        if long > 0.0 {
            self.stats.long_idle_s += long;
        }
        self.last_step_end = t_end;
        self.stats.steps += 1;
        self.stats.busy_whole_run += t_end - self.step.start;
        self.stats.peak_step_tokens = self.stats.peak_step_tokens.max(self.step.batch.scheduled_tokens());
        let dt = t_end - self.step.start.max(self.window_start);
        if dt <= 0.0 {
            return;
        }
        // Only a step straddling the window start is counted in part.
        let frac = if self.step.start >= self.window_start { 1.0 } else { dt / (t_end - self.step.start) };
        let s = &mut self.stats;
        s.busy += dt;
        s.flops += self.step.cost.flops * frac;
        s.bytes += self.step.cost.bytes * frac;
        // The power model's activity × dt, without a division: activity ×
        // duration = min(c·FLOPs/peak + m·bytes/peak, duration) ([`crate::energy`]).
        let full = t_end - self.step.start;
        let work = self.power_weights.0 * self.step.cost.flops + self.power_weights.1 * self.step.cost.bytes;
        s.activity_area += work.min(full) * frac;
        let b = &self.step.batch;
        s.batch_area += (b.decode_seqs + b.prefill_seqs) as f64 * dt;
        s.token_area += b.tokens() as f64 * dt;
        let used = self.kv.used();
        s.kv_area += used as f64 * dt;
        s.peak_kv_blocks = s.peak_kv_blocks.max(used);
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
