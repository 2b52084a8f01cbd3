//! The decode group of one replica: the sequences that have their prompt in
//! the KV cache and emit one token (or one verify step) per decode step.
//!
//! They advance together, so the group keeps aggregates (count, summed
//! context) and a decode-step counter `d` rather than visiting each
//! sequence on every step. Block-boundary crossings are counted per phase
//! `(d0 − kv0) mod block_size`, so the blocks a decode step needs are one
//! array read. Completions sit in a min-heap keyed by the decode step at
//! which they finish.

use super::kv::blocks_for;
use super::running::Seq;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Aggregates of the decoding sequences.
#[derive(Debug, Clone)]
pub(super) struct DecodeGroup {
    pub(super) block_size: u32,
    /// Decode steps run so far.
    pub(super) d: u64,
    /// `d mod block_size`, kept incrementally (a division per step is costly).
    pub(super) d_mod: u32,
    /// Decoding sequences.
    pub(super) n: u32,
    /// Measured decoding sequences per class.
    pub(super) n_class: Vec<u32>,
    /// Their summed KV length.
    pub(super) ctx: u64,
    /// Σ (output − generated at decode join + d0) over decoding sequences:
    /// their remaining output is this − n × d (`admission = "reserve"`).
    rem_base: u64,
    /// Decoding sequences per block phase: `phase_count[d mod block_size]`
    /// of them cross into a new block at the next decode step.
    pub(super) phase_count: Vec<u32>,
    /// (decode step of the last token, slot, slot version), earliest first.
    finish: Finishes,
    /// Sequences that joined since the last decode step ended.
    pub(super) joiners: Vec<u32>,
    /// End of the last decode step.
    pub(super) last_end: f64,
    /// Extra blocks of joined speculative sequences, to take at the next decode step.
    pub(super) extra_pending: u64,
}

impl DecodeGroup {
    /// An empty group for KV blocks of `block_size` tokens.
    pub(super) fn new(block_size: u32) -> Self {
        DecodeGroup {
            block_size,
            d: 0,
            d_mod: 0,
            n: 0,
            n_class: Vec::new(),
            ctx: 0,
            rem_base: 0,
            phase_count: vec![0; block_size as usize],
            finish: Finishes::default(),
            joiners: Vec::new(),
            last_end: 0.0,
            extra_pending: 0,
        }
    }

    /// Makes room for the per-class count of `class`.
    #[inline]
    pub(super) fn track_class(&mut self, class: u16) {
        if class as usize >= self.n_class.len() {
            self.n_class.resize(class as usize + 1, 0);
        }
    }

    /// KV length of a decoding sequence now.
    #[inline]
    pub(super) fn kv_len(&self, s: &Seq) -> u64 {
        s.kv0 as u64 + (self.d - s.d0)
    }

    /// Block phase of a sequence that joined at step `d0` with `kv0` tokens.
    #[inline]
    pub(super) fn phase_of(&self, d0: u64, kv0: u32) -> usize {
        let bs = self.block_size as u64;
        if bs.is_power_of_two() {
            // The usual sizes: masks, not divisions (the same value).
            return (d0.wrapping_sub(kv0 as u64) & (bs - 1)) as usize;
        }
        ((d0 % bs + bs - kv0 as u64 % bs) % bs) as usize
    }

    /// `(d + 1) mod block_size`, without a division.
    #[inline]
    pub(super) fn next_mod(&self) -> u32 {
        if self.d_mod + 1 == self.block_size { 0 } else { self.d_mod + 1 }
    }

    /// Blocks the decode step `d` needs (new blocks of sequences crossing a
    /// boundary, and extra blocks of speculative joiners).
    #[inline]
    pub(super) fn blocks_needed(&self) -> u64 {
        self.phase_count[self.d_mod as usize] as u64 + self.extra_pending
    }

    /// Blocks the decode step after the next one needs, not counting extra blocks.
    #[inline]
    pub(super) fn blocks_needed_after(&self) -> u64 {
        self.phase_count[self.next_mod() as usize] as u64
    }

    /// A decode step ended: every sequence is one token (or verify step) further.
    #[inline]
    pub(super) fn advance(&mut self) {
        self.d += 1;
        self.d_mod = self.next_mod();
    }

    /// Remaining output tokens of the decoding sequences.
    #[inline]
    pub(super) fn remaining_output(&self) -> u64 {
        self.rem_base.saturating_sub(self.n as u64 * self.d)
    }

    /// Sequence `s` in slot `i` (its prompt KV of `s.target` tokens complete,
    /// `s.generated` tokens out) joins at step `d`. It takes `units` verify
    /// steps with speculation (0: one token per step) and then holds `extra`
    /// blocks more. Returns the step it joined at.
    #[inline]
    pub(super) fn join(&mut self, i: u32, s: &Seq, units: u32, extra: u32) -> u64 {
        let ph = self.phase_of(self.d, s.target);
        self.phase_count[ph] += 1;
        self.n += 1;
        if s.measured {
            self.n_class[s.class as usize] += 1;
        }
        self.ctx += s.target as u64;
        self.extra_pending += extra as u64;
        let left = s.output - s.generated;
        self.rem_base += left as u64 + self.d;
        let finish_at = self.d + if units > 0 { units } else { left } as u64 - 1;
        self.finish.push((finish_at, i, s.version));
        self.joiners.push(i);
        self.d
    }

    /// Sequence `s` in slot `i` leaves; returns the KV blocks it holds.
    #[inline]
    pub(super) fn leave(&mut self, i: u32, s: &Seq) -> u64 {
        let kv = self.kv_len(s);
        let ph = self.phase_of(s.d0, s.kv0);
        self.phase_count[ph] -= 1;
        self.n -= 1;
        if s.measured {
            self.n_class[s.class as usize] -= 1;
        }
        self.ctx -= kv;
        self.rem_base -= (s.output - s.generated) as u64 + s.d0;
        if let Some(pos) = self.joiners.iter().position(|&j| j == i) {
            self.joiners.swap_remove(pos);
        }
        if s.extra_held {
            return blocks_for(kv, self.block_size) + s.extra as u64;
        }
        self.extra_pending -= s.extra as u64;
        blocks_for(kv, self.block_size)
    }

    /// Takes the next entry due by decode step `step`: (slot, version). The
    /// caller checks that the slot still holds that version.
    #[inline]
    pub(super) fn pop_due(&mut self, step: u64) -> Option<(u32, u32)> {
        let (at, i, version) = self.finish.first;
        if at > step {
            return None;
        }
        self.finish.pop();
        Some((i, version))
    }

    /// The first decode step at which a sequence finishes (`u64::MAX`: none).
    #[inline]
    pub(super) fn first_finish(&self) -> u64 {
        self.finish.first.0
    }

    /// No sequence finishes at the decode step in flight (step `d`).
    #[inline]
    pub(super) fn none_due_now(&self) -> bool {
        self.first_finish() > self.d
    }
}

/// An entry of [`Finishes`]: (decode step of the last token, slot, slot version).
type Finish = (u64, u32, u32);

/// The decode group's completions, taken smallest first. Entries pushed
/// in order (each at least the last) queue in a list, the others in a
/// heap: sequences of one output length finish in the order they joined,
/// and then no entry is sifted through the heap. The smallest entry is
/// kept at hand. Entries are taken in their order either way.
#[derive(Debug, Clone)]
struct Finishes {
    /// Entries pushed in increasing order.
    sorted: VecDeque<Finish>,
    /// The others.
    heap: BinaryHeap<Reverse<Finish>>,
    /// The smallest entry ([`Finishes::NONE`] when empty).
    first: Finish,
}

impl Default for Finishes {
    fn default() -> Self {
        Finishes { sorted: VecDeque::new(), heap: BinaryHeap::new(), first: Self::NONE }
    }
}

impl Finishes {
    /// Above every entry (no sequence finishes at step `u64::MAX`).
    const NONE: Finish = (u64::MAX, u32::MAX, u32::MAX);

    #[inline]
    fn push(&mut self, e: Finish) {
        if self.sorted.back().is_none_or(|&b| b <= e) {
            self.sorted.push_back(e);
        } else {
            self.heap.push(Reverse(e));
        }
        self.first = self.first.min(e);
    }

    /// Removes the smallest entry.
    #[inline]
    fn pop(&mut self) {
        if self.sorted.front() == Some(&self.first) {
            self.sorted.pop_front();
        } else {
            self.heap.pop();
        }
        let front = self.sorted.front().copied().unwrap_or(Self::NONE);
        self.first = self.heap.peek().map_or(front, |r| r.0.min(front));
    }
}
