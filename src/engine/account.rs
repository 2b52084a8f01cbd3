//! Step accounting and statistics: finishing the step in flight (its
//! tokens, inter-token latencies, completions, prompts that finish their
//! prefill and join the decode group or leave for a decode pool), its
//! latency attribution, and the time integrals of [`ReplicaStats`].

use super::running::Phase;
use super::{Replica, Sinks, SpanKind, blocks_for, lora, offload};
use crate::config::Admission;
use crate::cost::{StepBatch, StepCost, StepCostModel, max_num, min_num};
use crate::metrics::{Part, Status};

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

impl<C: StepCostModel> Replica<C> {
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
    pub(super) fn advance_d(&mut self) {
        self.decode.advance();
        if self.p.admission == Admission::Reserve {
            let (_, floor, decay) = self.p.new_token_ratio;
            self.ratio = (self.ratio - decay).max(floor);
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
            self.decode_tokens_out(t_end, sinks, attributing);
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

    /// The decode group's tokens of the step ending at `t_end`: each
    /// decoding sequence's inter-token gap goes into its class's histogram.
    /// Sequences that joined the group at the previous step's end measure
    /// their gap from their own last token; one handed over from a prefill
    /// pool shows its first token now.
    #[inline(always)]
    pub(super) fn decode_tokens_out(&mut self, t_end: f64, sinks: &mut Sinks, attributing: bool) {
        let gap = t_end - self.decode.last_end;
        if self.decode.joiners.is_empty() {
            itl_gap(&mut sinks.itl, &self.decode.n_class, gap);
            self.decode.last_end = t_end;
            return;
        }
        self.joiners_out(t_end, gap, sinks, attributing);
    }

    /// [`Self::decode_tokens_out`] when sequences joined at the previous
    /// step's end: their own gaps first, then the group's `gap` for the rest.
    #[inline(never)]
    fn joiners_out(&mut self, t_end: f64, gap: f64, sinks: &mut Sinks, attributing: bool) {
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
        itl_gap(&mut sinks.itl, &self.itl_counts, gap);
        self.decode.joiners.clear();
        self.decode.last_end = t_end;
    }

    /// Moves sequence `i`, whose prompt KV is complete, into the decode
    /// group; its latest token came out at `last_token`.
    pub(super) fn join_decode(&mut self, i: u32, last_token: f64) {
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
        sinks.completed += 1;
        if sinks.notify {
            sinks.done.push(req);
        }
    }

    /// Adds the step just finished to the window integrals.
    #[inline(always)]
    pub(super) fn account_step(&mut self, t_end: f64) {
        let mut acc = self.integrals();
        let used = self.kv.used();
        acc.add_step(self.step.start, t_end, &self.step.cost, &self.step.batch, used);
        self.set_integrals(acc);
    }

    /// The integrals one step adds to, copied out (see [`Integrals`]).
    #[inline(always)]
    pub(super) fn integrals(&self) -> Integrals {
        let s = &self.stats;
        Integrals {
            window_start: self.window_start,
            power_weights: self.power_weights,
            last_step_end: self.last_step_end,
            long_idle_s: s.long_idle_s,
            steps: s.steps,
            busy_whole_run: s.busy_whole_run,
            peak_step_tokens: s.peak_step_tokens,
            busy: s.busy,
            flops: s.flops,
            bytes: s.bytes,
            activity_area: s.activity_area,
            batch_area: s.batch_area,
            token_area: s.token_area,
            kv_area: s.kv_area,
            peak_kv_blocks: s.peak_kv_blocks,
        }
    }

    /// Writes the integrals back.
    #[inline(always)]
    pub(super) fn set_integrals(&mut self, acc: Integrals) {
        self.last_step_end = acc.last_step_end;
        let s = &mut self.stats;
        s.long_idle_s = acc.long_idle_s;
        s.steps = acc.steps;
        s.busy_whole_run = acc.busy_whole_run;
        s.peak_step_tokens = acc.peak_step_tokens;
        s.busy = acc.busy;
        s.flops = acc.flops;
        s.bytes = acc.bytes;
        s.activity_area = acc.activity_area;
        s.batch_area = acc.batch_area;
        s.token_area = acc.token_area;
        s.kv_area = acc.kv_area;
        s.peak_kv_blocks = acc.peak_kv_blocks;
    }
}

/// What each step adds to: the replica's window integrals and step counts
/// ([`ReplicaStats`]) with what they need of the replica, as one local
/// value, so that a run of fast steps keeps them in registers and writes
/// them back once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Integrals {
    window_start: f64,
    power_weights: (f64, f64),
    last_step_end: f64,
    long_idle_s: f64,
    steps: u64,
    busy_whole_run: f64,
    peak_step_tokens: u64,
    busy: f64,
    flops: f64,
    bytes: f64,
    activity_area: f64,
    batch_area: f64,
    token_area: f64,
    kv_area: f64,
    peak_kv_blocks: u64,
}

impl Integrals {
    /// Adds the step `b` priced `cost` that ran from `start` to `t_end`
    /// with `used` KV blocks in use.
    #[inline(always)]
    pub(super) fn add_step(&mut self, start: f64, t_end: f64, cost: &StepCost, b: &StepBatch, used: u64) {
        // Idle beyond LONG_IDLE_S since the last step (inside the window).
        let long = start - max_num(self.last_step_end + crate::energy::LONG_IDLE_S, self.window_start);
        if long > 0.0 {
            self.long_idle_s += long;
        }
        self.peak_tokens(b.scheduled_tokens());
        let (seqs, tokens) = ((b.decode_seqs + b.prefill_seqs) as f64, b.tokens() as i64 as f64);
        if start >= self.window_start {
            // Inside the window: counted whole.
            self.add_inside(start, t_end, cost, seqs, tokens, used);
            return;
        }
        self.last_step_end = t_end;
        self.steps += 1;
        self.busy_whole_run += t_end - start;
        let dt = t_end - self.window_start;
        if dt <= 0.0 {
            return;
        }
        // A step straddling the window start is counted in its part inside.
        let frac = dt / (t_end - start);
        self.busy += dt;
        self.flops += cost.flops * frac;
        self.bytes += cost.bytes * frac;
        let work = self.power_weights.0 * cost.flops + self.power_weights.1 * cost.bytes;
        self.activity_area += min_num(work, t_end - start) * frac;
        self.batch_area += seqs * dt;
        self.token_area += tokens * dt;
        self.kv_area += used as i64 as f64 * dt;
        self.peak_kv_blocks = self.peak_kv_blocks.max(used);
    }

    /// Whether a step starting at `start` and every step back to back
    /// after it lie inside the window with no long idle before them: then
    /// [`Self::add_inside`] adds what [`Self::add_step`] would (the idle
    /// test is negative).
    #[inline(always)]
    pub(super) fn inside(&self, start: f64) -> bool {
        start >= self.window_start && self.last_step_end + crate::energy::LONG_IDLE_S >= start
    }

    /// The step of `seqs` sequences and `tokens` tokens (their peak is the
    /// caller's) that ran from `start` to `t_end`, inside the window, after
    /// the long-idle test: counted whole.
    #[inline(always)]
    pub(super) fn add_inside(&mut self, start: f64, t_end: f64, cost: &StepCost, seqs: f64, tokens: f64, used: u64) {
        self.last_step_end = t_end;
        self.steps += 1;
        let dt = t_end - start;
        self.busy_whole_run += dt;
        if dt <= 0.0 {
            return;
        }
        self.busy += dt;
        self.flops += cost.flops;
        self.bytes += cost.bytes;
        // The power model's activity × dt, without a division: activity ×
        // duration = min(c·FLOPs/peak + m·bytes/peak, duration) ([`crate::energy`]).
        let work = self.power_weights.0 * cost.flops + self.power_weights.1 * cost.bytes;
        self.activity_area += min_num(work, dt);
        self.batch_area += seqs * dt;
        self.token_area += tokens * dt;
        // (Block counts are far below 2^63: a signed conversion is exact and cheaper.)
        self.kv_area += used as i64 as f64 * dt;
        self.peak_kv_blocks = self.peak_kv_blocks.max(used);
    }

    /// Counts a step of `tokens` scheduled tokens in the whole run's peak.
    #[inline(always)]
    pub(super) fn peak_tokens(&mut self, tokens: u64) {
        self.peak_step_tokens = self.peak_step_tokens.max(tokens);
    }
}

/// One inter-token gap `gap` for `counts[c]` sequences of each class `c`.
#[inline(always)]
pub(super) fn itl_gap(itl: &mut [crate::metrics::LogHistogram], counts: &[u32], gap: f64) {
    for (h, &n) in itl.iter_mut().zip(counts) {
        if n > 0 {
            h.add(gap, n as u64);
        }
    }
}
