//! Admission and preemption: which waiting request joins the running
//! sequences (its prefix hits, the reserve `config::Admission` asks, LoRA
//! adapter slots, the free-block watermark), requests whose KV arrives ready
//! (from a prefill pool, or swapped back in), and the preemption that frees
//! blocks for the decodes (recompute or swap; the victim as `victim` says).

use super::attribution::{self, Block};
use super::running::{Phase, Seq};
use super::{Replica, Sinks, SpanKind, blocks_for};
use crate::config::Admission;
use crate::cost::StepCostModel;
use crate::metrics::RequestRecord;

/// SGLang clips a request's expected new tokens at this many when reserving
/// room for them (python/sglang/srt/managers/schedule_policy.py CLIP_MAX_NEW_TOKENS).
const SGLANG_CLIP_NEW_TOKENS: u32 = 4096;

impl<C: StepCostModel> Replica<C> {
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
    pub(super) fn preempt(&mut self, now: f64, i: u32, sinks: &mut Sinks) {
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
    pub(super) fn reserve_decode_blocks(&mut self, now: f64, sinks: &mut Sinks) -> bool {
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
    pub(super) fn max_running(&self) -> u32 {
        if self.p.spec_k == 0 {
            return self.p.max_num_seqs;
        }
        self.p.max_num_seqs.min((self.p.max_num_batched_tokens / (1 + self.p.spec_k)).max(1))
    }

    /// Decode pool: admits waiting requests whose prompt KV has arrived,
    /// from the head of the queue, straight into the decode group.
    pub(super) fn admit_ready(&mut self, now: f64, sinks: &mut Sinks) {
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
    pub(super) fn try_admit(&mut self, now: f64, max_chunk: u32, whole: bool, sinks: &mut Sinks) -> bool {
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
}
