//! The steady-decode fast path: while nothing but decoding can happen,
//! steps are finished and the next planned inline, with the same arithmetic
//! in the same order as [`Replica::finish_step`] and [`Replica::form_step`].

use super::{Replica, Sinks};
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
            if self.decode.joiners.is_empty()
                && self.lora.is_none()
                && let Some(run) = self.decode_run_of(self.decode.n)
            {
                self.decode_run(&run, horizon, sinks, check, area, in_system);
                continue;
            }
            // Finish the step in flight (pure decode, no completion).
            *area += in_system as f64 * (end - self.step.start);
            self.account_step(end);
            let attributing = sinks.records.attributing();
            if attributing {
                self.clocks.decode_step(end - self.step.start, 0.0, 0.0);
            }
            self.pending_tokens -= self.decode.n as u64;
            self.decode_tokens_out(end, sinks, attributing);
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

    /// The cost model's [`DecodeRun`] of `n` decoding sequences, kept for
    /// the next run of the same size.
    #[inline]
    fn decode_run_of(&mut self, n: u32) -> Option<DecodeRun> {
        if let Some(&Some(run)) = self.decode_runs.get(n as usize) {
            return Some(run);
        }
        let run = self.cost.decode_run(n, self.p.spec_k)?;
        if self.decode_runs.len() <= n as usize {
            self.decode_runs.resize(n as usize + 1, None);
        }
        self.decode_runs[n as usize] = Some(run);
        Some(run)
    }

    /// Steady decode steps of an unchanging batch (no joiner, no LoRA),
    /// priced by `run`: the loop of [`Self::fast_forward`] with what cannot
    /// change inside the run checked once. It stops before the step in
    /// flight when that step ends at or after `horizon`, when a sequence
    /// finishes in it, or when the next step's blocks would not fit; the
    /// general loop then looks again.
    fn decode_run(
        &mut self,
        run: &DecodeRun,
        horizon: f64,
        sinks: &mut Sinks,
        check: bool,
        area: &mut f64,
        in_system: u64,
    ) {
        let n = self.decode.n;
        let finish = self.decode.first_finish();
        let attributing = sinks.records.attributing();
        let in_system = in_system as f64;
        loop {
            let end = self.step.start + self.step.cost.time;
            if end >= horizon || self.decode.d >= finish || !self.kv.fits_growth(self.decode.blocks_needed_after()) {
                return;
            }
            *area += in_system * (end - self.step.start);
            self.account_step(end);
            if attributing {
                self.clocks.decode_step(end - self.step.start, 0.0, 0.0);
            }
            self.pending_tokens -= n as u64;
            self.decode_tokens_out(end, sinks, attributing);
            self.advance_d();
            self.decode.ctx += n as u64;
            self.kv.take_growth(self.decode.blocks_needed());
            let ctx = (self.decode.ctx + n as u64) as f64;
            self.step.batch = StepBatch::decoding(n, ctx, self.p.spec_k);
            self.step.cost = run.cost(ctx);
            self.step.swap_time = 0.0;
            self.step.start = end;
            if check && let Err(m) = self.check_invariants() {
                panic!("replica {} at t = {end} (decode run): {m}", self.id);
            }
        }
    }
}
