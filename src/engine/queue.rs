//! A replica's waiting queue: first come first served, or ordered by a key
//! (priority, shortest prompt, shortest predicted job, earliest deadline).
//! Preempted requests go back to the front in either mode (the most recently
//! preempted first, as vLLM does). Requests that give up while waiting are
//! removed lazily: they are counted as cancelled and skipped when they reach
//! the front.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    key: f64,
    seq: i64,
    req: u32,
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.total_cmp(&o.key).then(self.seq.cmp(&o.seq))
    }
}

/// The waiting queue of one replica.
#[derive(Debug, Clone, Default)]
pub struct WaitQueue {
    keyed: bool,
    fifo: VecDeque<u32>,
    heap: BinaryHeap<Reverse<Entry>>,
    back_seq: i64,
    front_seq: i64,
    cancelled: usize,
}

impl WaitQueue {
    /// A FIFO queue, or (with `keyed`) one ordered by ascending key, ties first come first served.
    pub fn new(keyed: bool) -> Self {
        WaitQueue { keyed, ..Default::default() }
    }

    /// Requests waiting (not counting cancelled ones).
    #[inline]
    pub fn len(&self) -> usize {
        (if self.keyed { self.heap.len() } else { self.fifo.len() }) - self.cancelled
    }

    /// Whether the queue is ordered by key (else first come first served).
    #[inline]
    pub fn is_keyed(&self) -> bool {
        self.keyed
    }

    /// Whether nobody is waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a newly admitted request.
    pub fn push_back(&mut self, req: u32, key: f64) {
        if self.keyed {
            self.back_seq += 1;
            self.heap.push(Reverse(Entry { key, seq: self.back_seq, req }));
        } else {
            self.fifo.push_back(req);
        }
    }

    /// Puts a preempted request at the front.
    pub fn push_front(&mut self, req: u32) {
        if self.keyed {
            self.front_seq -= 1;
            self.heap.push(Reverse(Entry { key: f64::NEG_INFINITY, seq: self.front_seq, req }));
        } else {
            self.fifo.push_front(req);
        }
    }

    /// Records that a waiting request gave up (it stays in place until it reaches the front).
    pub fn cancel_one(&mut self) {
        self.cancelled += 1;
    }

    /// The first live request, dropping cancelled ones (`dead(req)` says which) from the front.
    pub fn front(&mut self, dead: impl Fn(u32) -> bool) -> Option<u32> {
        loop {
            let r = if self.keyed { self.heap.peek().map(|e| e.0.req) } else { self.fifo.front().copied() }?;
            if !dead(r) {
                return Some(r);
            }
            self.pop_raw();
            self.cancelled -= 1;
        }
    }

    /// Every entry, cancelled ones included, in no particular order.
    pub fn entries(&self) -> Vec<u32> {
        if self.keyed { self.heap.iter().map(|e| e.0.req).collect() } else { self.fifo.iter().copied().collect() }
    }

    /// First come first served only: the first live request among the first
    /// `limit` entries after the front for which `ok` holds, with its position.
    pub fn find_after_front(
        &self,
        limit: usize,
        dead: impl Fn(u32) -> bool,
        ok: impl FnMut(&u32) -> bool,
    ) -> Option<(usize, u32)> {
        if self.keyed {
            return None;
        }
        let mut ok = ok;
        self.fifo.iter().enumerate().skip(1).take(limit).find(|(_, r)| !dead(**r) && ok(r)).map(|(k, &r)| (k, r))
    }

    /// Removes the live entry at position `k` (from [`WaitQueue::find_after_front`]).
    pub fn remove_at(&mut self, k: usize) {
        self.fifo.remove(k);
    }

    /// Removes the front (call after [`WaitQueue::front`] returned it).
    pub fn pop_front(&mut self) {
        self.pop_raw();
    }

    fn pop_raw(&mut self) {
        if self.keyed {
            self.heap.pop();
        } else {
            self.fifo.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_order_with_preempted_first_and_lazy_cancellation() {
        let mut q = WaitQueue::new(true);
        q.push_back(1, 5.0);
        q.push_back(2, 1.0);
        q.push_back(3, 5.0);
        q.push_front(9);
        q.push_front(8);
        let dead = |r: u32| r == 2;
        q.cancel_one();
        assert_eq!(q.len(), 4);
        let mut order = Vec::new();
        while let Some(r) = q.front(dead) {
            order.push(r);
            q.pop_front();
        }
        assert_eq!(order, [8, 9, 1, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn fifo_order() {
        let mut q = WaitQueue::new(false);
        q.push_back(1, 0.0);
        q.push_back(2, 0.0);
        q.push_front(7);
        let mut order = Vec::new();
        while let Some(r) = q.front(|_| false) {
            order.push(r);
            q.pop_front();
        }
        assert_eq!(order, [7, 1, 2]);
    }
}
