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
    #[inline]
    pub fn fast_forward(
        &mut self,
        horizon: f64,
        sinks: &mut Sinks,
        check: bool,
        area: &mut f64,
        in_system: u64,
    ) -> f64 {
        // (With several replicas, the step in flight most often ends past
        // the next event: answered without a call.)
        let end = self.step.start + self.step.cost.time;
        if end >= horizon {
            return end;
        }
        self.fast_steps(horizon, sinks, check, area, in_system)
    }

    /// The loop of [`Self::fast_forward`].
    fn fast_steps(&mut self, horizon: f64, sinks: &mut Sinks, check: bool, area: &mut f64, in_system: u64) -> f64 {
        loop {
            let end = self.step.start + self.step.cost.time;
            if end >= horizon || !self.steady() {
                return end;
            }
            if self.decode.joiners.is_empty() && self.lora.is_none() && self.has_decode_run(self.decode.n) {
                // (Lent out of the replica for the run: it is read, not copied.)
                let runs = std::mem::take(&mut self.decode_runs);
                let entry = self.run_entry(check, sinks.records.attributing());
                let steps = match &runs[self.decode.n as usize] {
                    Some(run) if entry.plain => self.decode_run::<true>(run, entry, horizon, sinks, area, in_system),
                    Some(run) => self.decode_run::<false>(run, entry, horizon, sinks, area, in_system),
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
            *area += in_system as f64 * (end - self.step.start);
            self.steady_step(sinks, check);
        }
    }

    /// Whether the step in flight and the next are steady decode steps: both
    /// pure decode steps, no sequence finishes in the step in flight, nobody
    /// can be admitted and no preemption is needed. [`Self::steady_step`]
    /// then finishes it.
    #[inline(always)]
    pub fn steady(&self) -> bool {
        self.p.scheduler_steps <= 1
            && self.step.busy
            && self.step.decodes
            && self.step.chunks.is_empty()
            && self.prefilling.is_empty()
            && (self.waiting.is_empty() || (self.p.batching.chunked() && self.running.len() >= self.p.max_num_seqs))
            && self.decode.extra_pending == 0
            && self.decode.none_due_now()
            && self.kv.fits_growth(self.decode.blocks_needed_after())
    }

    /// Finishes the step in flight, [`Self::steady`], at its end and plans
    /// the next exactly as [`Self::finish_step`] would (same arithmetic,
    /// same order), without the general machinery. The caller counts the
    /// step's Little's-law area. With `check`, verifies the invariants.
    #[inline]
    pub fn steady_step(&mut self, sinks: &mut Sinks, check: bool) {
        let end = self.step.start + self.step.cost.time;
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

    /// What a decode run starts from, read once: the integrals, whether
    /// every step lies inside the window, the one class measured, and
    /// whether the run is plain ([`decode_steps`]: inside the measurement
    /// window, one class measured, and nothing attributed, checked, evicted
    /// or decayed).
    fn run_entry(&self, check: bool, attributing: bool) -> RunEntry {
        let acc = self.integrals();
        let inside = acc.inside(self.step.start);
        let mut measured = self.decode.n_class.iter().enumerate().filter(|(_, c)| **c > 0);
        let single = match (measured.next(), measured.next()) {
            (Some((k, &c)), None) => Some((k, c as u64)),
            _ => None,
        };
        let plain = inside
            && single.is_some()
            && !attributing
            && !check
            && self.p.admission != Admission::Reserve
            && self.kv.cache.evictable == 0;
        RunEntry { acc, inside, single, plain, check }
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
    /// evict cached blocks; the general loop then looks again. With `entry.check`,
    /// it runs one step at most (the caller checks the invariants). Returns
    /// the steps run.
    fn decode_run<const PLAIN: bool>(
        &mut self,
        run: &DecodeRun,
        entry: RunEntry,
        horizon: f64,
        sinks: &mut Sinks,
        area: &mut f64,
        in_system: u64,
    ) -> u64 {
        let n = self.decode.n;
        let n64 = n as u64;
        let finish = self.decode.first_finish();
        let attributing = sinks.records.attributing();
        let batch = StepBatch::decoding(n, 0.0, self.p.spec_k);
        let (seqs, tokens) = ((batch.decode_seqs + batch.prefill_seqs) as f64, batch.tokens() as i64 as f64);
        let fixed = RunFixed {
            horizon,
            finish,
            bs: self.decode.block_size,
            evictable: self.kv.cache.evictable,
            check: entry.check,
            inside: entry.inside,
            attributing,
            reserve: self.p.admission == Admission::Reserve,
            ratio_floor_decay: (self.p.new_token_ratio.1, self.p.new_token_ratio.2),
            in_system: in_system as f64,
            seqs,
            tokens,
            n64,
            single: entry.single,
        };
        let mut st = RunState {
            acc: entry.acc,
            start: self.step.start,
            cost: self.step.cost,
            ctx: self.decode.ctx,
            d: self.decode.d,
            d_mod: self.decode.d_mod,
            free: self.kv.free,
            reserved: self.kv.reserved,
            used: self.kv.used(),
            last_end: self.decode.last_end,
            swap: self.step.swap_time,
            a: *area,
            ratio: self.ratio,
            steps: 0,
        };
        decode_steps::<PLAIN>(
            &fixed,
            &mut st,
            run,
            &batch,
            &self.decode.phase_count,
            &mut sinks.itl,
            &self.decode.n_class,
            &mut self.clocks,
        );
        let RunState { mut acc, start, cost, ctx, d, d_mod, free, reserved, last_end, a, ratio, steps, .. } = st;
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

/// What a decode run starts from ([`Replica::run_entry`]).
struct RunEntry {
    acc: super::account::Integrals,
    inside: bool,
    /// The one measured class and its sequences, if one: its histogram takes every gap.
    single: Option<(usize, u64)>,
    plain: bool,
    /// Invariants are checked after each step: the run takes one step at most.
    check: bool,
}

/// What a decode run reads and never changes (see [`Replica::decode_run`]).
struct RunFixed {
    horizon: f64,
    /// The first decode step at which a sequence finishes.
    finish: u64,
    /// Tokens per KV block.
    bs: u32,
    /// Cached blocks that a take would evict first.
    evictable: u64,
    check: bool,
    /// Every step lies inside the window ([`super::account::Integrals::inside`]).
    inside: bool,
    attributing: bool,
    /// `admission = "reserve"`: the new-token ratio decays each step, to (floor, decay).
    reserve: bool,
    ratio_floor_decay: (f64, f64),
    in_system: f64,
    /// Sequences and tokens of each step.
    seqs: f64,
    tokens: f64,
    n64: u64,
    /// The one measured class and its sequences, if one.
    single: Option<(usize, u64)>,
}

/// What a decode run advances, written back at its end.
struct RunState {
    acc: super::account::Integrals,
    start: f64,
    cost: crate::cost::StepCost,
    ctx: u64,
    d: u64,
    d_mod: u32,
    free: u64,
    reserved: u64,
    used: u64,
    last_end: f64,
    swap: f64,
    a: f64,
    ratio: f64,
    steps: u64,
}

/// The steps of a decode run ([`Replica::decode_run`]). `PLAIN`: the run
/// is plain ([`Replica::run_entry`]), and the loop is compiled without the
/// branches such a run never takes. The same sums in the same order either way.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn decode_steps<const PLAIN: bool>(
    f: &RunFixed,
    st: &mut RunState,
    run: &DecodeRun,
    batch: &StepBatch,
    phase: &[u32],
    itl: &mut [crate::metrics::LogHistogram],
    n_class: &[u32],
    clocks: &mut super::attribution::Clocks,
) {
    let (k, c) = f.single.unwrap_or((0, 0));
    let RunState { acc, start, cost, ctx, d, d_mod, free, reserved, used, last_end, swap, a, ratio, steps } = st;
    let (mut start, mut cost, mut ctx, mut d, mut d_mod) = (*start, *cost, *ctx, *d, *d_mod);
    let (mut free, mut reserved, mut used, mut last_end, mut swap) = (*free, *reserved, *used, *last_end, *swap);
    let (mut a, mut ratio, mut n_steps, mut acc_l) = (*a, *ratio, *steps, *acc);
    loop {
        let end = start + cost.time;
        // The blocks the next step takes as every sequence grows by one token.
        let next_mod = if d_mod + 1 == f.bs { 0 } else { d_mod + 1 };
        let need = phase[next_mod as usize] as u64;
        let from_reserve = need.min(reserved);
        if end >= f.horizon
            || d >= f.finish
            || need > free + reserved
            || (!PLAIN && f.evictable > 0 && need - from_reserve > free - f.evictable)
            || (!PLAIN && f.check && n_steps == 1)
        {
            break;
        }
        a += f.in_system * (end - start);
        if PLAIN || f.inside {
            acc_l.add_inside(start, end, &cost, f.seqs, f.tokens, used);
        } else {
            acc_l.add_step(start, end, &cost, batch, used);
        }
        if !PLAIN && f.attributing {
            // (Only the run's first step, formed by `form_step`, may have waited for swap copies.)
            clocks.decode_step(end - start - swap, 0.0, swap);
        }
        swap = 0.0;
        if PLAIN || f.single.is_some() {
            itl[k].add(end - last_end, c);
        } else {
            super::account::itl_gap(itl, n_class, end - last_end);
        }
        last_end = end;
        d += 1;
        d_mod = next_mod;
        if !PLAIN && f.reserve {
            ratio = (ratio - f.ratio_floor_decay.1).max(f.ratio_floor_decay.0);
        }
        ctx += f.n64;
        reserved -= from_reserve;
        free -= need - from_reserve;
        used += need;
        cost = run.cost((ctx + f.n64) as i64 as f64);
        start = end;
        n_steps += 1;
    }
    *st = RunState {
        acc: acc_l,
        start,
        cost,
        ctx,
        d,
        d_mod,
        free,
        reserved,
        used,
        last_end,
        swap,
        a,
        ratio,
        steps: n_steps,
    };
}
