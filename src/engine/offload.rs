//! KV offload tiers below GPU memory (host memory, then local disk), in the
//! manner of LMCache and vLLM's KV-connector offloading: a prefix block the
//! GPU cache evicts moves down to the first tier instead of vanishing, a
//! tier's least recently used block moves down to the next (or is dropped
//! from the last), and a request whose prefix continues in a tier loads
//! those blocks back at the tier's bandwidth instead of computing them.
//! Tiers are inclusive caches: a block loaded back stays in its tier.

use std::collections::{BTreeMap, HashMap};

/// One tier: an LRU set of block ids of bounded size.
#[derive(Debug, Clone, Default)]
struct Tier {
    /// Blocks it can hold.
    capacity: u64,
    /// Time to load one block into GPU memory, s.
    block_time: f64,
    /// Block id → its stamp in `lru`.
    map: HashMap<u64, u64>,
    /// Stamp → block id, oldest first.
    lru: BTreeMap<u64, u64>,
    stamp: u64,
}

impl Tier {
    /// Inserts (or refreshes) `id`; returns the block pushed out, if any.
    fn put(&mut self, id: u64) -> Option<u64> {
        self.stamp += 1;
        if let Some(old) = self.map.insert(id, self.stamp) {
            self.lru.remove(&old);
            self.lru.insert(self.stamp, id);
            return None;
        }
        self.lru.insert(self.stamp, id);
        if self.map.len() as u64 > self.capacity {
            let (_, out) = self.lru.pop_first().expect("a tier over capacity holds a block");
            self.map.remove(&out);
            return Some(out);
        }
        None
    }

    /// Marks `id` as just used.
    fn touch(&mut self, id: u64) {
        self.put(id);
    }
}

/// Activity of the tiers (per replica).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OffloadStats {
    /// Blocks loaded back into GPU memory, per tier.
    pub loaded_blocks: [u64; 2],
    /// Blocks written to each tier (the GPU's evictions, then the first tier's).
    pub stored_blocks: [u64; 2],
    /// Blocks dropped from the last tier.
    pub dropped_blocks: u64,
    /// Time the loads added to steps, s.
    pub load_time: f64,
}

/// The tiers of one replica.
#[derive(Debug, Clone, Default)]
pub(super) struct Offload {
    tiers: [Tier; 2],
    /// Load time of the step being planned, s.
    step: f64,
    pub(super) stats: OffloadStats,
}

impl Offload {
    /// Tiers of `blocks[i]` blocks, each loaded in `block_time[i]` seconds;
    /// None when both are empty (then nothing changes anywhere).
    pub(super) fn new(blocks: [u64; 2], block_time: [f64; 2]) -> Option<Box<Self>> {
        if blocks == [0, 0] {
            return None;
        }
        let tier = |i: usize| Tier { capacity: blocks[i], block_time: block_time[i], ..Tier::default() };
        Some(Box::new(Offload { tiers: [tier(0), tier(1)], step: 0.0, stats: OffloadStats::default() }))
    }

    /// A block evicted from GPU memory moves down.
    pub(super) fn store(&mut self, id: u64) {
        let mut id = Some(id);
        for (i, t) in self.tiers.iter_mut().enumerate() {
            let Some(b) = id else { return };
            if t.capacity == 0 {
                continue;
            }
            self.stats.stored_blocks[i] += 1;
            id = t.put(b);
        }
        if id.is_some() {
            self.stats.dropped_blocks += 1;
        }
    }

    /// The tier holding `id`, if any.
    #[inline]
    pub(super) fn find(&self, id: u64) -> Option<usize> {
        self.tiers.iter().position(|t| t.map.contains_key(&id))
    }

    /// Loads `id` (held by a tier) into GPU memory in the step being planned.
    pub(super) fn load(&mut self, id: u64) {
        if let Some(i) = self.find(id) {
            let t = &mut self.tiers[i];
            t.touch(id);
            self.step += t.block_time;
            self.stats.loaded_blocks[i] += 1;
        }
    }

    /// The load time of the step being planned (the count starts again).
    pub(super) fn take_step(&mut self) -> f64 {
        let t = std::mem::take(&mut self.step);
        self.stats.load_time += t;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicted_blocks_move_down_and_fall_off_the_last_tier() {
        let mut o = Offload::new([2, 1], [1.0, 10.0]).unwrap();
        for id in 1..=4 {
            o.store(id);
        }
        // Tier 0 holds the two newest, tier 1 the one pushed out last; 1 fell off.
        assert_eq!((o.find(4), o.find(3), o.find(2), o.find(1)), (Some(0), Some(0), Some(1), None));
        assert_eq!(o.stats.dropped_blocks, 1);
        o.load(2);
        o.load(3);
        assert_eq!(o.take_step(), 11.0);
        assert_eq!(o.take_step(), 0.0);
        assert_eq!(o.stats.loaded_blocks, [1, 1]);
        assert!(Offload::new([0, 0], [1.0, 1.0]).is_none());
    }
}
