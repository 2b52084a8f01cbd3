//! KV offload tiers below GPU memory (host memory, then local disk), as the
//! KV connectors that run them work:
//!
//! - **Stored when computed.** A prompt block joins the tiers as soon as it is
//!   computed (vLLM's OffloadingConnector copies every full block after its
//!   step; LMCache stores every computed chunk after the forward pass), not
//!   when the GPU cache evicts it. The tiers hold *copies* of what the GPU
//!   holds: a tier of the GPU cache's size adds nothing. Each tier is an
//!   inclusive LRU cache; LMCache writes the disk tier through (a block goes
//!   to both), and its least recently used blocks fall off.
//! - **What the step waits for.** LMCache's store is synchronous: the next
//!   step starts after the copies (host bandwidth); its loads finish before
//!   the forward pass. vLLM copies asynchronously on a side stream (the step
//!   does not wait), and parks a request while its blocks load: servesim
//!   schedules the request in the same step and charges only the load time
//!   that step's own compute does not hide (docs/kv-offload.md, "Limits").

use super::prefix::IdMap;
use std::collections::BTreeMap;

/// One tier: an LRU set of block ids of bounded size.
#[derive(Debug, Clone, Default)]
struct Tier {
    /// Blocks it can hold.
    capacity: u64,
    /// Time to load one block into GPU memory, s.
    block_time: f64,
    /// Block id → its stamp in `lru`.
    map: IdMap<u64>,
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
    /// Blocks written to each tier (computed blocks not held yet).
    pub stored_blocks: [u64; 2],
    /// Blocks that fell off a tier (least recently used) and are held by no tier below.
    pub dropped_blocks: u64,
    /// Time the loads added to steps, s.
    pub load_time: f64,
    /// Time the stores added to steps (LMCache's synchronous store), s.
    pub store_time: f64,
}

impl OffloadStats {
    /// Adds `o`'s activity to this.
    pub(super) fn add(&mut self, o: &OffloadStats) {
        for i in 0..2 {
            self.loaded_blocks[i] += o.loaded_blocks[i];
            self.stored_blocks[i] += o.stored_blocks[i];
        }
        self.dropped_blocks += o.dropped_blocks;
        self.load_time += o.load_time;
        self.store_time += o.store_time;
    }
}

/// The tiers of one replica.
#[derive(Debug, Clone, Default)]
pub(super) struct Offload {
    tiers: [Tier; 2],
    connector: crate::config::OffloadConnector,
    /// Load time of the step being planned, s.
    step: f64,
    /// Store time the next step waits for (LMCache), s.
    pending_store: f64,
    pub(super) stats: OffloadStats,
}

impl Offload {
    /// Tiers of `blocks[i]` blocks, each copied in `block_time[i]` seconds,
    /// run by `connector`; None when both are empty (then nothing changes anywhere).
    pub(super) fn new(
        blocks: [u64; 2],
        block_time: [f64; 2],
        connector: crate::config::OffloadConnector,
    ) -> Option<Box<Self>> {
        if blocks == [0, 0] {
            return None;
        }
        let tier = |i: usize| Tier { capacity: blocks[i], block_time: block_time[i], ..Tier::default() };
        Some(Box::new(Offload {
            tiers: [tier(0), tier(1)],
            connector,
            step: 0.0,
            pending_store: 0.0,
            stats: OffloadStats::default(),
        }))
    }

    /// A block just computed on the GPU: stored in every tier that does not
    /// hold it yet (write-through), refreshed in those that do. LMCache's
    /// copy to host memory is waited for by the next step.
    pub(super) fn store(&mut self, id: u64) {
        for i in 0..2 {
            let t = &mut self.tiers[i];
            if t.capacity == 0 {
                continue;
            }
            if t.map.contains_key(&id) {
                t.touch(id);
                continue;
            }
            self.stats.stored_blocks[i] += 1;
            if i == 0 && self.connector == crate::config::OffloadConnector::Lmcache {
                self.pending_store += t.block_time;
            }
            if let Some(out) = t.put(id) {
                // Fell off this tier: dropped when no tier holds it any more
                // (a tier written later in this loop is checked as it stands).
                if !self.tiers.iter().any(|b| b.map.contains_key(&out)) {
                    self.stats.dropped_blocks += 1;
                }
            }
        }
    }

    /// Whether the connector also stores the blocks a request generated
    /// (vLLM's OffloadingConnector: every full block; LMCache 0.3:
    /// `save_decode_cache` off by default).
    #[inline]
    pub(super) fn stores_decode(&self) -> bool {
        self.connector == crate::config::OffloadConnector::Vllm
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

    /// The time a step whose own work takes `compute` seconds waits for the
    /// tiers (the count starts again): LMCache, its loads and the previous
    /// step's stores; vLLM, the part of its loads that outlasts the step.
    pub(super) fn take_step(&mut self, compute: f64) -> f64 {
        let load = std::mem::take(&mut self.step);
        let store = std::mem::take(&mut self.pending_store);
        let (load, store) = match self.connector {
            crate::config::OffloadConnector::Lmcache => (load, store),
            crate::config::OffloadConnector::Vllm => ((load - compute).max(0.0), 0.0),
        };
        self.stats.load_time += load;
        self.stats.store_time += store;
        load + store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_blocks_are_stored_in_every_tier_and_fall_off_least_recent_first() {
        use crate::config::OffloadConnector;
        let mut o = Offload::new([2, 3], [1.0, 10.0], OffloadConnector::Lmcache).unwrap();
        for id in 1..=4 {
            o.store(id);
        }
        // Host holds the two newest, disk (written through) the three newest; 1 is dropped.
        assert_eq!((o.find(4), o.find(3), o.find(2), o.find(1)), (Some(0), Some(0), Some(1), None));
        assert_eq!(o.stats.stored_blocks, [4, 4]);
        assert_eq!(o.stats.dropped_blocks, 1);
        // Storing a block a tier holds costs nothing.
        o.store(4);
        assert_eq!(o.stats.stored_blocks, [4, 4]);
        // LMCache: the next step waits for four host copies and its loads.
        o.load(2);
        o.load(3);
        assert_eq!(o.take_step(100.0), 4.0 + 11.0);
        assert_eq!(o.take_step(100.0), 0.0);
        assert_eq!(o.stats.loaded_blocks, [1, 1]);
        assert!(Offload::new([0, 0], [1.0, 1.0], OffloadConnector::Lmcache).is_none());
    }

    #[test]
    fn vllm_copies_in_the_background_and_hides_loads_under_the_step() {
        use crate::config::OffloadConnector;
        let mut o = Offload::new([4, 0], [1.0, 0.0], OffloadConnector::Vllm).unwrap();
        for id in 1..=3 {
            o.store(id);
        }
        for id in 1..=3 {
            o.load(id);
        }
        // Stores are free; 3 s of loads under a 2 s step cost 1 s.
        assert_eq!(o.take_step(2.0), 1.0);
        assert_eq!(o.stats.store_time, 0.0);
    }
}
