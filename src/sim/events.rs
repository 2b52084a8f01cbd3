//! The pending events other than arrivals, in their order (see the
//! ordering in [`super`]'s docs): a binary heap, and beside it each
//! replica's next step end in a flat array. With several replicas nearly
//! every event is a step end; the array takes one in a store, and finds the
//! earliest again in a scan, where the heap would sift twice. Which of the
//! two holds an event changes nothing of the order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Event kinds, in their order at equal times (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A replica's step ends.
    StepEnd = 0,
    /// A request's preprocessing ends: it is routed (or queued at the central queue).
    Admit = 1,
    /// An idle replica looks at its queue.
    Wake = 2,
    /// A client's `max_wait_s` runs out.
    Timeout = 3,
    /// A prefill replica's KV cache has reached the decode pool.
    Transfer = 4,
    /// A fleet slot has started (or been repaired): it serves from now.
    Ready = 5,
    /// A fleet slot fails (random failure of its current life).
    Fail = 6,
    /// A scripted failure (key: its index in `fleet.failures`).
    Script = 7,
    /// The fleet's scaling policy looks.
    Tick = 8,
    /// A warm standby has been replaced.
    Refill = 9,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Event {
    pub(super) t: f64,
    pub(super) kind: Kind,
    pub(super) key: u32,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    // Reversed: BinaryHeap is a max-heap and we want the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then((o.kind as u8).cmp(&(self.kind as u8))).then(o.key.cmp(&self.key))
    }
}

/// Replicas up to which step ends are held in the array (beyond, a scan
/// costs more than the heap).
const SCAN_MAX: usize = 64;
/// A slot of the array with no step end.
const EMPTY: i64 = i64::MAX;

/// `t` as an integer in the order of [`f64::total_cmp`] (the heap's).
#[inline(always)]
fn ordered(t: f64) -> i64 {
    let b = t.to_bits() as i64;
    b ^ (((b >> 63) as u64) >> 1) as i64
}

/// The inverse of [`ordered`].
#[inline(always)]
fn time(k: i64) -> f64 {
    f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
}

/// The pending events (see the module docs).
pub(super) struct EventQueue {
    heap: BinaryHeap<Event>,
    /// Replica `i`'s step end held here ([`ordered`]), or [`EMPTY`]; none
    /// beyond [`SCAN_MAX`] replicas. (A second step end of one replica, as
    /// after a failure, or one at no finite time goes to the heap.)
    ends: Vec<i64>,
    /// The replica of the earliest of `ends` (the lowest of equals), valid
    /// while `in_ends > 0`.
    first: usize,
    /// Step ends held in `ends`.
    in_ends: usize,
}

impl EventQueue {
    /// An empty queue for `replicas` replicas.
    pub(super) fn new(replicas: usize) -> Self {
        let n = if replicas <= SCAN_MAX { replicas } else { 0 };
        EventQueue { heap: BinaryHeap::new(), ends: vec![EMPTY; n], first: 0, in_ends: 0 }
    }

    /// Events pending.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.heap.len() + self.in_ends
    }

    #[inline]
    pub(super) fn push(&mut self, e: Event) {
        let r = e.key as usize;
        if e.kind == Kind::StepEnd && e.t < f64::INFINITY && r < self.ends.len() && self.ends[r] == EMPTY {
            let k = ordered(e.t);
            self.ends[r] = k;
            if self.in_ends == 0 || k < self.ends[self.first] || (k == self.ends[self.first] && r < self.first) {
                self.first = r;
            }
            self.in_ends += 1;
        } else {
            self.heap.push(e);
        }
    }

    /// The array's earliest step end, if any.
    #[inline(always)]
    fn array_top(&self) -> Option<Event> {
        (self.in_ends > 0).then(|| Event {
            t: time(self.ends[self.first]),
            kind: Kind::StepEnd,
            key: self.first as u32,
        })
    }

    /// The earliest event.
    #[inline]
    pub(super) fn peek(&self) -> Option<Event> {
        match (self.array_top(), self.heap.peek()) {
            // (Reversed order: the greater is the earlier.)
            (Some(s), Some(h)) => Some(if s >= *h { s } else { *h }),
            (Some(s), None) => Some(s),
            (None, h) => h.copied(),
        }
    }

    /// Takes the earliest event.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if let Some(s) = self.array_top()
            // (Reversed order: the greater is the earlier.)
            && self.heap.peek().is_none_or(|h| s >= *h)
        {
            self.ends[self.first] = EMPTY;
            self.in_ends -= 1;
            if self.in_ends > 0 {
                // The earliest left, the lowest replica among equals.
                let (mut best, mut best_k) = (0, EMPTY);
                for (i, &k) in self.ends.iter().enumerate() {
                    if k < best_k {
                        (best, best_k) = (i, k);
                    }
                }
                self.first = best;
            }
            return Some(s);
        }
        self.heap.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Random pushes and pops (step ends of a few replicas, two at once
    /// for one replica, equal and infinite times, other kinds) come out of
    /// the queue in the order a plain heap gives.
    #[test]
    fn pops_in_the_heaps_order() {
        let kinds = [Kind::StepEnd, Kind::StepEnd, Kind::StepEnd, Kind::Admit, Kind::Wake, Kind::Timeout, Kind::Tick];
        for (seed, replicas) in [(1, 1), (2, 3), (3, 8), (4, 64), (5, 65)] {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut q = EventQueue::new(replicas);
            let mut heap = BinaryHeap::new();
            let mut now = 0.0;
            for _ in 0..20_000 {
                if rng.random_bool(0.55) {
                    let kind = kinds[rng.random_range(0..kinds.len())];
                    // Times on a coarse grid (ties are frequent), some never.
                    let t = match rng.random_range(0..20) {
                        0 => f64::INFINITY,
                        _ => now + rng.random_range(0..8) as f64 * 0.25,
                    };
                    let key = rng.random_range(0..replicas as u32 + 1);
                    let e = Event { t, kind, key };
                    q.push(e);
                    heap.push(e);
                } else {
                    let (a, b) = (q.pop(), heap.pop());
                    assert_eq!(a.map(|e| (e.t, e.kind, e.key)), b.map(|e| (e.t, e.kind, e.key)));
                    if let Some(e) = a.filter(|e| e.t.is_finite()) {
                        now = e.t;
                    }
                }
                assert_eq!(q.len(), heap.len());
                assert_eq!(q.peek().map(|e| (e.t, e.kind, e.key)), heap.peek().map(|e| (e.t, e.kind, e.key)));
            }
        }
    }
}
