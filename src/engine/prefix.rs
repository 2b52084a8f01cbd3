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

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a block id with one multiply: ids are already well mixed (or are
/// a trace's small hash ids, which the multiply spreads over the high bits
/// hashbrown reads). Nothing iterates the map, so its order cannot reach a
/// result.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
}

/// A map keyed by block id.
pub(super) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// The block cache of one replica.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    /// Block id → (users, release stamp when unused).
    map: IdMap<(u32, u64)>,
    /// (release stamp, block id) of unused cached blocks in release order
    /// (eviction order). An entry is live while its block is still unused
    /// with that stamp; entries of blocks since taken again or evicted are
    /// skipped and, when they outnumber the live ones, dropped.
    lru: VecDeque<(u64, u64)>,
    /// Entries of `lru` that are no longer live.
    stale: u64,
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
            self.stale += 1;
            self.evictable -= 1;
            self.in_use += 1;
        }
        entry.0 += 1;
        self.compact();
    }

    /// Drops the entries of `lru` that are no longer live once they
    /// outnumber the live ones (amortised O(1) per operation).
    #[inline]
    fn compact(&mut self) {
        if self.stale > self.evictable + 1024 {
            let map = &self.map;
            self.lru.retain(|&(stamp, id)| map.get(&id) == Some(&(0, stamp)));
            self.stale = 0;
        }
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
        self.lru.push_back((self.stamp, id));
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
        self.lru.push_back((self.stamp, id));
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
        let mut left = n;
        while left > 0 {
            let Some((stamp, id)) = self.lru.pop_front() else { return };
            if self.map.get(&id) != Some(&(0, stamp)) {
                self.stale -= 1;
                continue;
            }
            self.map.remove(&id);
            self.evictable -= 1;
            self.evictions += 1;
            out(id);
            left -= 1;
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

    /// The lazily cleaned release queue evicts in exactly the order of an
    /// ordered map of release stamps (the structure it replaced), through
    /// many compactions.
    #[test]
    fn lazy_release_queue_evicts_as_an_ordered_map_would() {
        use rand::{RngExt, SeedableRng};
        use std::collections::BTreeMap;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut c = PrefixCache::default();
        // Reference: id -> (users, stamp), stamp -> id.
        let (mut m, mut lru, mut stamp) = (HashMap::<u64, (u32, u64)>::new(), BTreeMap::<u64, u64>::new(), 0u64);
        for _ in 0..200_000 {
            let id = rng.random_range(0..3_000u64);
            match rng.random_range(0..4) {
                0 => {
                    let fresh = !m.contains_key(&id);
                    if fresh {
                        stamp += 1;
                        m.insert(id, (0, stamp));
                        lru.insert(stamp, id);
                    }
                    assert_eq!(c.insert_unused(id), fresh);
                }
                1 => {
                    if let Some(e) = m.get_mut(&id) {
                        if e.0 == 0 {
                            lru.remove(&e.1);
                        }
                        e.0 += 1;
                    }
                    c.acquire(id);
                }
                2 => {
                    if m.get(&id).is_some_and(|e| e.0 > 0) {
                        let e = m.get_mut(&id).unwrap();
                        e.0 -= 1;
                        let now_unused = e.0 == 0;
                        if now_unused {
                            stamp += 1;
                            e.1 = stamp;
                            lru.insert(stamp, id);
                        }
                        assert_eq!(c.release(id), now_unused);
                    }
                }
                _ => {
                    let n = rng.random_range(0..4u64);
                    let mut want = Vec::new();
                    for _ in 0..n {
                        let Some((_, id)) = lru.pop_first() else { break };
                        m.remove(&id);
                        want.push(id);
                    }
                    let mut got = Vec::new();
                    c.evict(n, |id| got.push(id));
                    assert_eq!(got, want);
                }
            }
            assert_eq!(c.evictable, lru.len() as u64);
        }
    }
}
