//! The steady-decode fast path: while nothing but decoding can happen,
//! steps are finished and the next planned inline, with the same arithmetic
//! in the same order as [`Replica::finish_step`] and [`Replica::form_step`].

use super::{Replica, Sinks};
use crate::config::Admission;
use crate::cost::{DecodeRun, StepBatch, StepCostModel};

impl<C: StepCostModel> Replica<C> {
    /// Runs steady decode steps inline while nothing but decoding can happen:
    /// the step in flight and the next are pure decode steps, no sequence
    /// finishes in the step in flight, nobody can be admitted, no preemption
    /// is needed, and the step ends before `horizon`. Sequences that joined
    /// the decode group at the previous step's end are taken as
    /// [`Replica::finish_step`] takes them. Each such step is finished and the next
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
                && self.prefilling.is_empty()
                && (self.waiting.is_empty()
                    || (self.p.batching.chunked() && self.running.len() >= self.p.max_num_seqs))
                && self.decode.extra_pending == 0
                && self.decode.none_due_now()
                && self.kv.fits_growth(self.decode.blocks_needed_after());
            if !steady || end >= horizon {
                return end;
            }
            if self.decode.joiners.is_empty() && self.lora.is_none() && self.has_decode_run(self.decode.n) {
                // (Lent out of the replica for the run: it is read, not copied.)
                let runs = std::mem::take(&mut self.decode_runs);
                let steps = match &runs[self.decode.n as usize] {
                    Some(run) => self.decode_run(run, horizon, sinks, check, area, in_system),
                    None => 0,
                };
                self.decode_runs = runs;
                if steps > 0 {
                    if check && let Err(m) = self.check_invariants() {
                        panic!("replica {} at t = {} (decode run): {m}", self.id, self.step.start);
                    }
                    continue;
                }
                // (The next step would evict cached blocks: it runs below.)
            }
            // Finish the step in flight (pure decode, no completion).
            *area += in_system as f64 * (end - self.step.start);
            self.account_step(end);
            let attributing = sinks.records.attributing();
            if attributing {
                // As `attribute_step` splits a pure decode step: its own
                // compute, no stall, and the swap copies it waited for.
                let swap = self.step.swap_time;
                self.clocks.decode_step(end - self.step.start - swap, 0.0, swap);
            }
            self.pending_tokens -= self.decode.n as u64;
            self.decode_tokens_out(end, sinks, attributing);
            self.advance_d();
            self.decode.ctx += self.decode.n as u64;
            // Plan the next one: every sequence decodes one more token.
            self.kv.take_growth(self.decode.blocks_needed());
            self.step.batch =
                StepBatch::decoding(self.decode.n, (self.decode.ctx + self.decode.n as u64) as f64, self.p.spec_k);
            self.step.cost = self.price_step();
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

    /// Whether the cost model has a [`DecodeRun`] for `n` decoding
    /// sequences; it is then in `decode_runs[n]`, kept for the next run of
    /// the same size.
    #[inline]
    pub(super) fn has_decode_run(&mut self, n: u32) -> bool {
        if let Some(Some(_)) = self.decode_runs.get(n as usize) {
            return true;
        }
        let Some(run) = self.cost.decode_run(n, self.p.spec_k) else { return false };
        if self.decode_runs.len() <= n as usize {
            self.decode_runs.resize(n as usize + 1, None);
        }
        self.decode_runs[n as usize] = Some(run);
        true
    }

    /// Steady decode steps of an unchanging batch (no joiner, no LoRA),
    /// priced by `run`: the loop of [`Self::fast_forward`] with what cannot
    /// change inside the run checked once, and the clock, the context, the
    /// decode step, the free blocks, the integrals and the Little's-law area
    /// in locals, written back at the end. It stops before the step in
    /// flight when that step ends at or after `horizon`, when a sequence
    /// finishes in it, when the next step's blocks would not fit or would
    /// evict cached blocks; the general loop then looks again. With `check`,
    /// it runs one step at most (the caller checks the invariants). Returns
    /// the steps run.
    fn decode_run(
        &mut self,
        run: &DecodeRun,
        horizon: f64,
        sinks: &mut Sinks,
        check: bool,
        area: &mut f64,
        in_system: u64,
    ) -> u64 {
        let n = self.decode.n;
        let n64 = n as u64;
        let finish = self.decode.first_finish();
        let attributing = sinks.records.attributing();
        let in_system = in_system as f64;
        let batch = StepBatch::decoding(n, 0.0, self.p.spec_k);
        let (seqs, tokens) = ((batch.decode_seqs + batch.prefill_seqs) as f64, batch.tokens() as i64 as f64);
        // The one class measured, if one: its histogram takes every gap.
        let mut measured = self.decode.n_class.iter().enumerate().filter(|(_, c)| **c > 0);
        let single = match (measured.next(), measured.next()) {
            (Some((k, &c)), None) => Some((k, c as u64)),
            _ => None,
        };
        let reserve = self.p.admission == Admission::Reserve;
        let (_, floor, decay) = self.p.new_token_ratio;
        let mut ratio = self.ratio;
        let mut acc = self.integrals();
        let (mut start, mut cost, mut ctx) = (self.step.start, self.step.cost, self.decode.ctx);
        let inside = acc.inside(start);
        let (mut d, mut d_mod, bs) = (self.decode.d, self.decode.d_mod, self.decode.block_size);
        let phase = &self.decode.phase_count;
        let (mut free, mut reserved, evictable) = (self.kv.free, self.kv.reserved, self.kv.cache.evictable);
        let mut used = self.kv.used();
        let mut last_end = self.decode.last_end;
        let mut swap = self.step.swap_time;
        let mut a = *area;
        let mut steps = 0u64;
        loop {
            let end = start + cost.time;
            // The blocks the next step takes as every sequence grows by one token.
            let next_mod = if d_mod + 1 == bs { 0 } else { d_mod + 1 };
            let need = phase[next_mod as usize] as u64;
            let from_reserve = need.min(reserved);
            if end >= horizon
                || d >= finish
                || need > free + reserved
                || (evictable > 0 && need - from_reserve > free - evictable)
                || (check && steps == 1)
            {
                break;
            }
            a += in_system * (end - start);
            if inside {
                acc.add_inside(start, end, &cost, seqs, tokens, used);
            } else {
                acc.add_step(start, end, &cost, &batch, used);
            }
            if attributing {
                // (Only the run's first step, formed by `form_step`, may have waited for swap copies.)
                self.clocks.decode_step(end - start - swap, 0.0, swap);
            }
            swap = 0.0;
            match single {
                Some((k, c)) => sinks.itl[k].add(end - last_end, c),
                None => super::account::itl_gap(sinks.itl, &self.decode.n_class, end - last_end),
            }
            last_end = end;
            d += 1;
            d_mod = next_mod;
            if reserve {
                ratio = (ratio - decay).max(floor);
            }
            ctx += n64;
            reserved -= from_reserve;
            free -= need - from_reserve;
            used += need;
            cost = run.cost((ctx + n64) as i64 as f64);
            start = end;
            steps += 1;
        }
        if steps > 0 {
            acc.peak_tokens(batch.scheduled_tokens());
            self.set_integrals(acc);
            self.pending_tokens -= steps * n64;
            self.ratio = ratio;
            self.decode.d = d;
            self.decode.d_mod = d_mod;
            self.decode.ctx = ctx;
            self.decode.last_end = last_end;
            self.kv.free = free;
            self.kv.reserved = reserved;
            self.step.batch = StepBatch::decoding(n, (ctx + n64) as f64, self.p.spec_k);
            self.step.cost = cost;
            self.step.swap_time = 0.0;
            self.step.start = start;
            *area = a;
        }
        steps
    }
}
