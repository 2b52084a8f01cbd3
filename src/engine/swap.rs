//! Swap preemption: the host memory that holds swapped-out KV blocks, and
//! the copies between host and GPU that the next step pays for.

/// One replica's host swap space.
#[derive(Debug, Clone)]
pub(super) struct Swap {
    /// Host blocks available (0: preemption recomputes).
    capacity: u64,
    /// Time to copy one block between host and GPU, s.
    block_time: f64,
    /// Host blocks holding swapped-out KV.
    used: u64,
    /// Blocks copied to or from the host in the step being planned.
    step: u64,
}

impl Swap {
    /// An empty swap space of `capacity` blocks, each copied in `block_time` seconds.
    pub(super) fn new(capacity: u64, block_time: f64) -> Self {
        Swap { capacity, block_time, used: 0, step: 0 }
    }

    /// Swaps out `blocks` blocks if they fit in host memory; false when the
    /// sequence must be recomputed instead.
    pub(super) fn out(&mut self, blocks: u64) -> bool {
        if self.used + blocks > self.capacity {
            return false;
        }
        self.used += blocks;
        self.step += blocks;
        true
    }

    /// A swapped sequence comes back: `host` blocks leave host memory and
    /// `need` blocks are copied back to the GPU.
    pub(super) fn back(&mut self, host: u64, need: u64) {
        self.used -= host;
        self.step += need;
    }

    /// Host blocks in use.
    pub(super) fn used(&self) -> u64 {
        self.used
    }

    /// Host blocks available.
    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The copies of the step being planned: (blocks, their time in s), and
    /// the count starts again for the next step. None when nothing moves.
    pub(super) fn take_step(&mut self) -> Option<(u64, f64)> {
        if self.step == 0 {
            return None;
        }
        let blocks = std::mem::take(&mut self.step);
        Some((blocks, blocks as f64 * self.block_time))
    }
}
