//! Automatic prefix caching: KV blocks identified by the content they hold,
//! shared by reference count, and kept after their last user finishes until
//! the space is needed (least recently released first), as vLLM's
//! hash-based block cache does.
//!
//! A block's identity comes from the request's structure rather than from
//! token contents: block j of a class's shared system prompt is (group, j);
//! block j of a session's token stream (each turn appends to the previous
//! context) is (session, j); any other block is (request, j), which still
//! lets a preempted request find its own blocks again. Only leading
//! consecutive matches count, as with vLLM's chained block hashes.

use std::collections::{BTreeMap, HashMap};

/// The block cache of one replica.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    /// Block id → (users, release stamp when unused).
    map: HashMap<u64, (u32, u64)>,
    /// Unused cached blocks by release stamp (eviction order).
    lru: BTreeMap<u64, u64>,
    stamp: u64,
    /// Cached blocks nobody uses (counted as free; evicted when space is needed).
    pub evictable: u64,
    /// Cached blocks in use (reference count > 0).
    pub in_use: u64,
    /// Blocks evicted.
    pub evictions: u64,
}

/// Identity of block `j` of a namespace (`kind` 1 = prefix group, 2 = session, 3 = request).
#[inline]
pub fn block_id(kind: u64, owner: u64, j: u32) -> u64 {
    crate::workload::stream_seed(owner.wrapping_mul(4).wrapping_add(kind), j as u64)
}

impl PrefixCache {
    /// How many of the leading `ids` are cached, and how many of those are unused (evictable).
    pub fn peek(&self, ids: impl Iterator<Item = u64>) -> (u32, u64) {
        let (mut h, mut e) = (0, 0);
        for id in ids {
            match self.map.get(&id) {
                Some(&(users, _)) => {
                    h += 1;
                    e += (users == 0) as u64;
                }
                None => break,
            }
        }
        (h, e)
    }

    /// Takes a reference to a cached block.
    pub fn acquire(&mut self, id: u64) {
        let Some(entry) = self.map.get_mut(&id) else { return };
        if entry.0 == 0 {
            self.lru.remove(&entry.1);
            self.evictable -= 1;
            self.in_use += 1;
        }
        entry.0 += 1;
    }

    /// Drops a reference; true when the block became unused (evictable).
    pub fn release(&mut self, id: u64) -> bool {
        let Some(entry) = self.map.get_mut(&id) else { return false };
        entry.0 -= 1;
        if entry.0 > 0 {
            return false;
        }
        self.stamp += 1;
        entry.1 = self.stamp;
        self.lru.insert(self.stamp, id);
        self.evictable += 1;
        self.in_use -= 1;
        true
    }

    /// Adds a block freed by its only user as unused-but-cached; false if an
    /// equal block is already cached (then this copy is simply freed).
    pub fn insert_unused(&mut self, id: u64) -> bool {
        if self.map.contains_key(&id) {
            return false;
        }
        self.stamp += 1;
        self.map.insert(id, (0, self.stamp));
        self.lru.insert(self.stamp, id);
        self.evictable += 1;
        true
    }

    /// Adds a block its computing sequence keeps using; false if an equal
    /// block is already cached.
    pub fn insert_used(&mut self, id: u64) -> bool {
        if self.map.contains_key(&id) {
            return false;
        }
        self.map.insert(id, (1, 0));
        self.in_use += 1;
        true
    }

    /// Evicts the `n` least recently released unused blocks, handing each to `out`.
    #[inline]
    pub fn evict(&mut self, n: u64, mut out: impl FnMut(u64)) {
        for _ in 0..n {
            let Some((_, id)) = self.lru.pop_first() else { return };
            self.map.remove(&id);
            self.evictable -= 1;
            self.evictions += 1;
            out(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_eviction_order_and_leading_matches() {
        let mut c = PrefixCache::default();
        let ids: Vec<u64> = (0..4).map(|j| block_id(1, 7, j)).collect();
        assert!(c.insert_unused(ids[0]) && c.insert_unused(ids[1]) && c.insert_unused(ids[3]));
        assert_eq!(c.peek(ids.iter().copied()), (2, 2), "the chain stops at the first miss");
        c.acquire(ids[0]);
        assert_eq!((c.evictable, c.in_use), (2, 1));
        c.evict(1, |_| {});
        // The oldest unused block (ids[1]) went first.
        assert_eq!(c.peek(ids.iter().copied()), (1, 0));
        assert!(c.release(ids[0]));
        assert_eq!((c.evictable, c.in_use, c.evictions), (2, 0, 1));
    }
}
