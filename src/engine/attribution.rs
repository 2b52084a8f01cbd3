//! A replica's attribution clocks ([`crate::metrics::parts`]).
//!
//! Wait clocks: one per wait reason; at every instant exactly one runs (the
//! reason the scheduler gave at its latest step formation for not taking
//! the head of its queue), so their sum is the replica's time. A request
//! subtracts them when it joins the queue and adds them when it leaves:
//! what it gains is its wait, split by reason.
//!
//! Decode clocks: own compute, stall and swap time of the decode group,
//! advanced at every step end; a decoding sequence reads them when it joins
//! and when it leaves the group.

use crate::metrics::{Attr, Part};

/// Why the scheduler did not take the head of its waiting queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Block {
    /// It did not try (no one waiting, or only a step boundary in the way).
    Step,
    /// `max_num_seqs` (or a static batch in flight).
    BatchFull,
    /// The token budget was used up (by decodes or prompt chunks: see [`budget_part`]).
    Budget,
    /// The KV cache could not hold it.
    Kv,
}

/// The part a budget wait goes to: behind earlier prefills when prompt
/// chunks took at least as much of the step's budget as decodes did.
pub(super) fn budget_part(prefill_tokens: u64, decode_tokens: u64) -> Part {
    if prefill_tokens >= decode_tokens { Part::WaitPrefills } else { Part::WaitBudget }
}

impl Block {
    /// The wait part, given the step's prompt and decode tokens.
    pub(super) fn part(self, prefill_tokens: u64, decode_tokens: u64) -> Part {
        match self {
            Block::Step => Part::WaitStep,
            Block::BatchFull => Part::WaitBatchFull,
            Block::Budget => budget_part(prefill_tokens, decode_tokens),
            Block::Kv => Part::WaitKv,
        }
    }
}

/// Where decode-group time goes: (own, stall, swap) parts, before or after
/// the first token (with disaggregation, a request's first decode step on
/// the decode pool produces its first token).
fn decode_slots(before_first: bool) -> [Part; 3] {
    if before_first {
        [Part::Prefill, Part::Interference, Part::Interference]
    } else {
        [Part::DecodeCompute, Part::DecodeStall, Part::DecodeSwap]
    }
}

/// One replica's clocks.
#[derive(Debug, Clone)]
pub(super) struct Clocks {
    /// Wait clocks, indexed as [`Part::WAITS`], as of `since`.
    wait: [f64; 6],
    /// The running wait clock (index into `wait`) and since when.
    cur: usize,
    since: f64,
    /// Decode group: own compute, stall and swap time so far.
    decode: [f64; 3],
    /// Why the head of the queue was not taken in the step being formed.
    pub(super) block: Block,
}

impl Default for Clocks {
    fn default() -> Self {
        Clocks { wait: [0.0; 6], cur: 0, since: 0.0, decode: [0.0; 3], block: Block::Step }
    }
}

impl Clocks {
    /// The wait clocks at `now`.
    #[inline]
    fn wait_at(&self, now: f64) -> [f64; 6] {
        let mut w = self.wait;
        w[self.cur] += now - self.since;
        w
    }

    /// From `now` on, the running wait reason is `reason`.
    pub(super) fn switch(&mut self, now: f64, reason: Part) {
        self.wait[self.cur] += now - self.since;
        self.since = now;
        self.cur = Part::WAITS.iter().position(|&p| p == reason).unwrap_or(0);
    }

    /// A request joins the waiting queue at `now`.
    pub(super) fn enter_queue(&self, now: f64, a: &mut Attr) {
        a.mark = f64::NAN;
        for (p, w) in Part::WAITS.iter().zip(self.wait_at(now)) {
            a.parts[p.idx()] -= w;
        }
    }

    /// A request leaves the waiting queue at `now` (admitted): its wait,
    /// split by reason, or since its preemption as one part.
    pub(super) fn leave_queue(&self, now: f64, a: &mut Attr, before_first: bool) {
        if a.mark.is_nan() {
            for (p, w) in Part::WAITS.iter().zip(self.wait_at(now)) {
                a.parts[p.idx()] += w;
            }
        } else {
            let p = if before_first { Part::Preempted } else { Part::DecodePreempted };
            a.parts[p.idx()] += now - a.mark;
            a.mark = f64::NAN;
        }
    }

    /// A sequence joins the decode group.
    pub(super) fn open_decode(&self, a: &mut Attr, before_first: bool) {
        for (p, d) in decode_slots(before_first).iter().zip(self.decode) {
            a.parts[p.idx()] -= d;
        }
    }

    /// A sequence leaves the decode group (or its first token came out).
    pub(super) fn close_decode(&self, a: &mut Attr, before_first: bool) {
        for (p, d) in decode_slots(before_first).iter().zip(self.decode) {
            a.parts[p.idx()] += d;
        }
    }

    /// A step ended: its decodes' own compute, their stall, and swap copies, s.
    #[inline]
    pub(super) fn decode_step(&mut self, own: f64, stall: f64, swap: f64) {
        self.decode[0] += own;
        self.decode[1] += stall;
        self.decode[2] += swap;
    }
}

/// A prefilling sequence preempted before its first token: the compute it
/// loses becomes preemption time.
pub(super) fn lose_prefill(a: &mut Attr) {
    let lost = a.parts[Part::Prefill.idx()] + a.parts[Part::Interference.idx()];
    a.parts[Part::Prefill.idx()] = 0.0;
    a.parts[Part::Interference.idx()] = 0.0;
    a.parts[Part::Preempted.idx()] += lost;
}
