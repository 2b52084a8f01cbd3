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

/// Blocks `lo..hi` of one namespace: a stretch of a request's blocks that
/// share a namespace (a prefix group, a session, a request, a trace's hash
/// block) and consecutive positions in it. Block `x` of namespace `ns` is the
/// block whose id is [`id`]`(ns, x)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The namespace (owner × 4 + kind).
    pub ns: u64,
    /// First position.
    pub lo: u32,
    /// One past the last position.
    pub hi: u32,
}

/// Positions `lo..hi` of a namespace that are cached with the same number of
/// users. While unused, block `x` was released with stamp `base - 1 - x`: the
/// blocks of a stretch are released last position first (as vLLM frees a
/// request's blocks, tail first), so one `base` describes them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    lo: u32,
    hi: u32,
    users: u32,
    base: u64,
}

/// A stretch released at once, in the release queue: block `x` of `lo..hi`
/// of `ns` got stamp `base - 1 - x`. Its blocks are still unused with those
/// stamps where a segment of `ns` with the same `base` and no users covers
/// them; elsewhere they were since taken again or evicted.
#[derive(Debug, Clone, Copy)]
struct Released {
    ns: u64,
    lo: u32,
    hi: u32,
    base: u64,
}

/// The block cache of one replica, kept as stretches of blocks rather than
/// one entry per block: an engine with one-token pages (SGLang's radix
/// cache) releases a prompt's thousand blocks in one operation. Every
/// operation behaves exactly as if it were applied to each block in turn.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    /// Namespace → its cached segments, sorted and disjoint.
    segs: IdMap<Vec<Seg>>,
    /// Released stretches in stamp order (eviction order).
    lru: VecDeque<Released>,
    /// Blocks named by `lru` (live or not).
    lru_blocks: u64,
    stamp: u64,
    /// Cached blocks nobody uses (counted as free; evicted when space is needed).
    pub evictable: u64,
    /// Cached blocks in use (reference count > 0).
    pub in_use: u64,
    /// Blocks evicted.
    pub evictions: u64,
}

/// The namespace of an owner of `kind` (0 = trace hash block, 1 = prefix group, 2 = session, 3 = request).
#[inline]
pub fn namespace(kind: u64, owner: u64) -> u64 {
    owner.wrapping_mul(4).wrapping_add(kind)
}

/// Identity of block `x` of namespace `ns`.
#[inline]
pub fn id(ns: u64, x: u32) -> u64 {
    crate::workload::stream_seed(ns, x as u64)
}

/// Makes `x` a boundary between segments (splits the one that spans it).
#[inline]
fn cut(v: &mut Vec<Seg>, x: u32) {
    let i = v.partition_point(|s| s.hi <= x);
    if i < v.len() && v[i].lo < x {
        let right = Seg { lo: x, ..v[i] };
        v[i].hi = x;
        v.insert(i + 1, right);
    }
}

/// The segments lying in `lo..hi`, after cutting at both ends.
#[inline]
fn span(v: &mut Vec<Seg>, lo: u32, hi: u32) -> std::ops::Range<usize> {
    cut(v, lo);
    cut(v, hi);
    v.partition_point(|s| s.hi <= lo)..v.partition_point(|s| s.lo < hi)
}

/// Joins touching neighbours that behave as one (same users; if unused,
/// the same release) around `range`.
fn join(v: &mut Vec<Seg>, range: std::ops::Range<usize>) {
    let (mut i, mut end) = (range.start.max(1), (range.end + 1).min(v.len()));
    while i < end {
        let (a, b) = (v[i - 1], v[i]);
        if a.hi == b.lo && a.users == b.users && (a.users > 0 || a.base == b.base) {
            v[i - 1].hi = b.hi;
            v.remove(i);
            end -= 1;
        } else {
            i += 1;
        }
    }
}

impl PrefixCache {
    /// How many of the leading blocks of `runs` (in order) are cached, and
    /// how many of those are unused (evictable).
    pub fn peek(&self, runs: impl Iterator<Item = Run>) -> (u32, u64) {
        let (mut h, mut e) = (0, 0);
        for run in runs {
            let Some(v) = self.segs.get(&run.ns) else { break };
            let (mut x, mut i) = (run.lo, v.partition_point(|s| s.hi <= run.lo));
            while x < run.hi && i < v.len() && v[i].lo <= x {
                let end = v[i].hi.min(run.hi);
                h += end - x;
                e += if v[i].users == 0 { (end - x) as u64 } else { 0 };
                x = end;
                i += 1;
            }
            if x < run.hi {
                break;
            }
        }
        (h, e)
    }

    /// Takes a reference to every block of `runs` (all cached).
    pub fn acquire(&mut self, runs: &[Run]) {
        for run in runs {
            let Some(v) = self.segs.get_mut(&run.ns) else { continue };
            let range = span(v, run.lo, run.hi);
            for s in &mut v[range.clone()] {
                if s.users == 0 {
                    let n = (s.hi - s.lo) as u64;
                    self.evictable -= n;
                    self.in_use += n;
                }
                s.users += 1;
            }
            join(v, range);
        }
        self.compact();
    }

    /// Rebuilds the release queue from its live stretches once the stale
    /// ones outnumber them (amortised O(1) per operation).
    #[inline]
    fn compact(&mut self) {
        if self.lru_blocks <= 2 * self.evictable + 1024 {
            return;
        }
        let old = std::mem::take(&mut self.lru);
        for r in old {
            let Some(v) = self.segs.get(&r.ns) else { continue };
            let end = v.partition_point(|s| s.lo < r.hi);
            for s in v[..end].iter().rev().take_while(|s| s.hi > r.lo) {
                if s.users == 0 && s.base == r.base {
                    self.lru.push_back(Released { lo: s.lo.max(r.lo), hi: s.hi.min(r.hi), ..r });
                }
            }
        }
        self.lru_blocks = self.evictable;
    }

    /// Queues a just-released stretch (joined to the previous one when it continues it).
    #[inline]
    fn queue(&mut self, r: Released) {
        self.lru_blocks += (r.hi - r.lo) as u64;
        if let Some(last) = self.lru.back_mut()
            && last.ns == r.ns
            && last.base == r.base
            && last.lo == r.hi
        {
            last.lo = r.lo;
            return;
        }
        self.lru.push_back(r);
    }

    /// Drops a reference to every block of `runs`, last block first;
    /// returns how many became unused (evictable).
    pub fn release(&mut self, runs: &[Run]) -> u64 {
        let mut freed = 0;
        for run in runs.iter().rev() {
            let Some(mut v) = self.segs.remove(&run.ns) else { continue };
            let range = span(&mut v, run.lo, run.hi);
            for i in range.clone().rev() {
                let s = &mut v[i];
                s.users -= 1;
                if s.users == 0 {
                    let n = s.hi - s.lo;
                    s.base = self.stamp + s.hi as u64 + 1;
                    self.stamp += n as u64;
                    self.queue(Released { ns: run.ns, lo: s.lo, hi: s.hi, base: s.base });
                    self.evictable += n as u64;
                    self.in_use -= n as u64;
                    freed += n as u64;
                }
            }
            join(&mut v, range);
            self.segs.insert(run.ns, v);
        }
        freed
    }

    /// Adds the blocks of `runs` freed by their only user as unused but
    /// cached, last block first; blocks an equal copy of which is already
    /// cached are simply freed.
    pub fn insert_unused(&mut self, runs: &[Run]) {
        for run in runs.iter().rev() {
            let mut v = self.segs.remove(&run.ns).unwrap_or_default();
            // The gaps between cached segments of lo..hi, last first.
            let mut top = run.hi;
            while top > run.lo {
                let i = v.partition_point(|s| s.lo < top);
                let below = if i > 0 && v[i - 1].hi > run.lo { Some(v[i - 1]) } else { None };
                let gap_lo = below.map_or(run.lo, |s| s.hi.min(top));
                if gap_lo < top {
                    let n = (top - gap_lo) as u64;
                    let base = self.stamp + top as u64 + 1;
                    self.stamp += n;
                    v.insert(i, Seg { lo: gap_lo, hi: top, users: 0, base });
                    self.queue(Released { ns: run.ns, lo: gap_lo, hi: top, base });
                    self.evictable += n;
                    join(&mut v, i..i + 1);
                }
                top = below.map_or(run.lo, |s| s.lo.max(run.lo));
            }
            if !v.is_empty() {
                self.segs.insert(run.ns, v);
            }
        }
    }

    /// Adds the blocks of `runs` that their computing sequence keeps using,
    /// in order, up to the first already cached; returns how many were added.
    pub fn insert_used(&mut self, runs: &[Run]) -> u32 {
        let mut added = 0;
        for run in runs {
            let v = self.segs.entry(run.ns).or_default();
            debug_assert!(run.lo < run.hi);
            let i = v.partition_point(|s| s.hi <= run.lo);
            let stop = if i < v.len() { v[i].lo.clamp(run.lo, run.hi) } else { run.hi };
            if stop > run.lo {
                v.insert(i, Seg { lo: run.lo, hi: stop, users: 1, base: 0 });
                join(v, i..i + 1);
                added += stop - run.lo;
                self.in_use += (stop - run.lo) as u64;
            }
            if stop < run.hi {
                break;
            }
        }
        added
    }

    /// Evicts the `n` least recently released unused blocks, handing each
    /// evicted stretch (namespace, positions) to `out`, in eviction order.
    pub fn evict(&mut self, n: u64, mut out: impl FnMut(u64, u32, u32)) {
        let mut left = n;
        while left > 0 {
            let Some(r) = self.lru.front_mut() else { return };
            if r.hi <= r.lo {
                self.lru.pop_front();
                continue;
            }
            // The highest segment of the stretch's namespace starting below its top.
            let found = self.segs.get_mut(&r.ns).and_then(|v| {
                let i = v.partition_point(|s| s.lo < r.hi).checked_sub(1)?;
                (v[i].hi > r.lo).then_some((v, i))
            });
            let Some((v, i)) = found else {
                // Nothing of the stretch is cached any more.
                self.lru_blocks -= (r.hi - r.lo) as u64;
                r.hi = r.lo;
                continue;
            };
            let s = v[i];
            // Blocks above the segment were taken again or evicted: stale.
            self.lru_blocks -= (r.hi - r.hi.min(s.hi)) as u64;
            r.hi = r.hi.min(s.hi);
            let lo = s.lo.max(r.lo);
            if s.users != 0 || s.base != r.base {
                self.lru_blocks -= (r.hi - lo) as u64;
                r.hi = lo;
                continue;
            }
            let k = left.min((r.hi - lo) as u64) as u32;
            let (from, to) = (r.hi - k, r.hi);
            r.hi = from;
            let ns = r.ns;
            self.lru_blocks -= k as u64;
            match (s.lo < from, to < s.hi) {
                (true, true) => {
                    v[i].hi = from;
                    v.insert(i + 1, Seg { lo: to, ..s });
                }
                (true, false) => v[i].hi = from,
                (false, true) => v[i].lo = to,
                (false, false) => {
                    v.remove(i);
                    if v.is_empty() {
                        self.segs.remove(&ns);
                    }
                }
            }
            self.evictable -= k as u64;
            self.evictions += k as u64;
            left -= k as u64;
            out(ns, from, to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    mod oracle {
        use super::super::IdMap;
        use std::collections::VecDeque;

        /// The block cache as it was kept before stretches: one entry per block
        /// (the oracle the stretches must match block for block).
        #[derive(Debug, Clone, Default)]
        pub struct Blocks {
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

        impl Blocks {
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
    }

    fn run(ns: u64, lo: u32, hi: u32) -> Run {
        Run { ns, lo, hi }
    }

    #[test]
    fn references_eviction_order_and_leading_matches() {
        let mut c = PrefixCache::default();
        c.insert_unused(&[run(5, 0, 2), run(9, 0, 2)]);
        // Released last block first: 9:1, 9:0, 5:1, 5:0.
        assert_eq!(c.peek([run(5, 0, 2), run(9, 0, 1)].into_iter()), (3, 3));
        assert_eq!(c.peek([run(5, 0, 3), run(9, 0, 1)].into_iter()), (2, 2), "the chain stops at the first miss");
        c.acquire(&[run(9, 0, 1)]);
        assert_eq!((c.evictable, c.in_use), (3, 1));
        let mut out = Vec::new();
        c.evict(2, |ns, lo, hi| out.push((ns, lo, hi)));
        // 9:1 went first; 9:0 is in use, so 5:1 went next.
        assert_eq!(out, vec![(9, 1, 2), (5, 1, 2)]);
        assert_eq!(c.release(&[run(9, 0, 1)]), 1);
        assert_eq!((c.evictable, c.in_use, c.evictions), (2, 0, 2));
        assert_eq!(c.insert_used(&[run(5, 1, 4)]), 3);
        assert_eq!(c.insert_used(&[run(5, 0, 4)]), 0, "5:0 is cached already");
    }

    /// Random runs of at most three distinct namespaces, as a request's blocks come.
    fn runs(rng: &mut rand_pcg::Pcg64Mcg) -> Vec<Run> {
        let mut ns: Vec<u64> = (0..4).collect();
        let k = rng.random_range(1..=3);
        (0..k)
            .map(|_| {
                let n = ns.remove(rng.random_range(0..ns.len()));
                let lo = rng.random_range(0..30);
                run(n, lo, lo + rng.random_range(1..12))
            })
            .collect()
    }

    fn ids(runs: &[Run]) -> Vec<u64> {
        runs.iter().flat_map(|r| (r.lo..r.hi).map(|x| id(r.ns, x))).collect()
    }

    /// Every operation on stretches does what the same operation applied
    /// block by block does to the one-entry-per-block cache: same answers,
    /// same counts, same blocks evicted in the same order, through many
    /// splits, joins and compactions of the release queue.
    #[test]
    fn stretches_behave_as_blocks_one_by_one() {
        for seed in 0..4 {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let (mut c, mut o) = (PrefixCache::default(), oracle::Blocks::default());
            for step in 0..40_000 {
                let rs = runs(&mut rng);
                let all = ids(&rs);
                match rng.random_range(0..6) {
                    0 => {
                        c.insert_unused(&rs);
                        for &id in all.iter().rev() {
                            o.insert_unused(id);
                        }
                    }
                    1 => {
                        c.acquire(&rs);
                        for &id in &all {
                            o.acquire(id);
                        }
                    }
                    2 => {
                        // Only blocks someone holds can be released.
                        let held = |id: &u64| o.peek(std::iter::once(*id)) == (1, 0);
                        if all.iter().all(held) {
                            let want = all.iter().rev().filter(|&&id| o.release(id)).count() as u64;
                            assert_eq!(c.release(&rs), want, "seed {seed} step {step}");
                        }
                    }
                    3 => {
                        let want = all.iter().take_while(|&&id| o.insert_used(id)).count() as u32;
                        assert_eq!(c.insert_used(&rs), want, "seed {seed} step {step}");
                    }
                    4 => assert_eq!(c.peek(rs.iter().copied()), o.peek(all.iter().copied()), "seed {seed} step {step}"),
                    _ => {
                        let n = rng.random_range(0..20u64);
                        let (mut got, mut want) = (Vec::new(), Vec::new());
                        c.evict(n, |ns, lo, hi| got.extend((lo..hi).rev().map(|x| id(ns, x))));
                        o.evict(n, |id| want.push(id));
                        assert_eq!(got, want, "seed {seed} step {step}");
                    }
                }
                assert_eq!(
                    (c.evictable, c.in_use, c.evictions),
                    (o.evictable, o.in_use, o.evictions),
                    "seed {seed} step {step}"
                );
            }
        }
    }
}
