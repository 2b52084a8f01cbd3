//! Step formation and the batch policies: [`BatchPolicy`], and
//! [`Replica::form_step`] in its phases — going idle or waiting for a static
//! batch, continuous batching (decodes, prefill chunks, admissions) or
//! whole-prompt steps, the multi-step window, and pricing the step formed.

use super::attribution::Block;
use super::{Replica, Sinks, blocks_for};
use crate::cost::StepCostModel;
use crate::metrics::Part;

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

impl<C: StepCostModel> Replica<C> {
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
            } else if self.static_batch_waits(now, sinks) {
                return None;
            }
            if !continuation {
                if let BatchPolicy::Chunked { .. } | BatchPolicy::Mixed = self.p.batching {
                    self.form_continuous(now, sinks);
                } else {
                    self.form_whole_prompts(now, sinks);
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
            self.plan_window(continuation);
            return Some(self.start_step(now, sinks));
        }
    }

    /// Static batching: an empty replica waits (true: it goes idle) until
    /// its batch is full or the oldest request has waited the timeout, and
    /// asks to be woken then.
    fn static_batch_waits(&mut self, now: f64, sinks: &Sinks) -> bool {
        let BatchPolicy::Static { timeout } = self.p.batching else { return false };
        if !self.running.is_empty() {
            return false;
        }
        // Form a batch when it is full or its oldest request has waited long enough.
        let records = &sinks.records;
        let head = self.waiting.front(|r| records.refused(r));
        let due = head.map_or(f64::INFINITY, |h| records[h as usize].admitted + timeout);
        if self.waiting.len() < self.p.max_num_seqs as usize && now < due {
            self.step.busy = false;
            self.wake_at = due.is_finite().then_some(due);
            self.wait_reason(now, sinks, Part::WaitBatchForming);
            return true;
        }
        false
    }

    /// Continuous batching (`Chunked`, `Mixed`): the decodes (unless prompt
    /// work goes first), the next chunks of the prefilling sequences, then
    /// new requests while the token budget, `max_num_seqs` and blocks allow.
    fn form_continuous(&mut self, now: f64, sinks: &mut Sinks) {
        // Whole prompts only without chunking (Orca): a prompt joins a step
        // only if it fits the budget left by the decodes.
        let whole = !self.p.batching.chunked();
        // Prefill first: a step that has prompt work runs only prompt work.
        let prefill_first = matches!(self.p.batching, BatchPolicy::Chunked { prefill_first: true });
        let prefill_only = prefill_first && (!self.prefilling.is_empty() || !self.waiting.is_empty());
        let preempted = !prefill_only && self.reserve_decode_blocks(now, sinks);
        self.step.decodes = !prefill_only && self.decode.n > 0;
        let per_decode = 1 + self.p.spec_k;
        let budget = self.p.max_num_batched_tokens.saturating_sub(if self.step.decodes {
            self.decode.n * per_decode
        } else {
            0
        });
        let mut budget = self.continue_prefills(budget, sinks.records.attributing());
        if preempted {
            self.clocks.block = Block::Kv;
        } else {
            while budget > 0
                && !self.waiting.is_empty()
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
    }

    /// The next chunk of each prefilling sequence, in admission order, while
    /// `budget` tokens and the free blocks last; returns the budget left.
    /// `attributing`, notes why the sequences left out wait.
    fn continue_prefills(&mut self, mut budget: u32, attributing: bool) -> u32 {
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
        budget
    }

    /// Whole prompts in prefill-only steps (`PrefillSteps`, `Static`):
    /// waiting requests are admitted while they fit; a step with no prompt
    /// admitted decodes.
    fn form_whole_prompts(&mut self, now: f64, sinks: &mut Sinks) {
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

    /// Multi-step scheduling: the steps left in the window after this one
    /// (`continuation`: this step continues a window).
    fn plan_window(&mut self, continuation: bool) {
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
    }

    /// Prices the step formed (its compute, the host–GPU copies and adapter
    /// loads it waits for) and starts it at `now`; returns its end.
    fn start_step(&mut self, now: f64, sinks: &mut Sinks) -> f64 {
        self.step.cost = self.price_step();
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
        now + self.step.cost.time
    }

    /// The cost of the step formed: a pure decode step from the batch size's
    /// [`crate::cost::DecodeRun`] where the model has one (the same bits),
    /// any other from the cost model.
    #[inline]
    pub(super) fn price_step(&mut self) -> crate::cost::StepCost {
        let b = &self.step.batch;
        if b.prefill_tokens == 0
            && b.decode_seqs > 0
            && *b == crate::cost::StepBatch::decoding(b.decode_seqs, b.decode_ctx_tokens, self.p.spec_k)
            && self.has_decode_run(b.decode_seqs)
            && let Some(Some(run)) = self.decode_runs.get(self.step.batch.decode_seqs as usize)
        {
            return run.cost(self.step.batch.decode_ctx_tokens);
        }
        self.cost.step(&self.step.batch)
    }

    /// Attribution: from `now` on, requests waiting here wait for `reason`.
    fn wait_reason(&mut self, now: f64, sinks: &Sinks, reason: Part) {
        if sinks.records.attributing() {
            self.clocks.switch(now, reason);
        }
    }

    /// Tokens the decodes take from the step's budget.
    pub(super) fn step_decode_tokens(&self) -> u64 {
        if self.step.decodes { self.decode.n as u64 * (1 + self.p.spec_k) as u64 } else { 0 }
    }
}
