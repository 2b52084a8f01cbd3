//! The paged KV cache of one replica: free, reserved and cached blocks, and
//! the identity of each block of a request's token stream for prefix caching.

use super::offload::Offload;
use super::prefix::{self, PrefixCache, Run};
use crate::metrics::RequestRecord;
use crate::workload::trace::Trace;
use std::sync::Arc;

/// Tokens per prefix block of the Mooncake trace's `hash_ids`.
const HASH_BLOCK: u64 = 512;

/// Blocks needed to hold `tokens` tokens in blocks of `block_size`.
#[inline]
pub fn blocks_for(tokens: u64, block_size: u32) -> u64 {
    if block_size.is_power_of_two() {
        // The usual sizes (16, 32, 64): a shift, not a division.
        let shift = block_size.trailing_zeros();
        (tokens >> shift) + (tokens & (block_size as u64 - 1) != 0) as u64
    } else {
        tokens.div_ceil(block_size as u64)
    }
}

/// One replica's KV blocks. Every block is free, reserved for the future
/// growth of an admitted sequence, or in use (held by sequences, by the
/// prefix cache while shared, or by KV in transfer). Unused cached blocks
/// count as free and are evicted when truly free ones run short.
#[derive(Debug, Clone)]
pub(super) struct KvBlocks {
    /// Blocks in the replica.
    total: u64,
    /// Tokens per block.
    block_size: u32,
    /// Automatic prefix caching.
    caching: bool,
    /// Free blocks (unused cached blocks included).
    pub(super) free: u64,
    /// Blocks reserved for the future growth of admitted sequences
    /// (`admission = "max-length"`); not free, not yet used.
    pub(super) reserved: u64,
    /// The prefix cache (used with prefix caching).
    pub(super) cache: PrefixCache,
    /// Per class: (prefix group, shared system-prompt tokens).
    groups: Arc<[(u32, u32)]>,
    /// A replayed trace whose rows name their prefix blocks (Mooncake `hash_ids`).
    hashed: Option<Arc<Trace>>,
    /// Offload tiers below GPU memory (None: none, or all empty).
    pub(super) offload: Option<Box<Offload>>,
    /// Room to list a request's runs in (kept to spare an allocation per release).
    scratch: Vec<Run>,
}

impl KvBlocks {
    /// `total` free blocks of `block_size` tokens.
    pub(super) fn new(total: u64, block_size: u32, caching: bool) -> Self {
        KvBlocks {
            total,
            block_size,
            caching,
            free: total,
            reserved: 0,
            cache: PrefixCache::default(),
            groups: Arc::from(Vec::new()),
            hashed: None,
            offload: None,
            scratch: Vec::new(),
        }
    }

    /// The blocks of an engine (with its offload tiers, if any).
    pub(super) fn with_offload(p: &super::EngineParams) -> Self {
        let mut kv = KvBlocks::new(p.num_blocks, p.block_size, p.prefix_caching);
        kv.offload = Offload::new(p.offload_blocks, p.offload_block_time, p.offload_connector);
        kv
    }

    /// Every block free again, the prefix cache and the offload tiers empty
    /// (a failed replica's memory); the block identities and the eviction
    /// count are kept.
    pub(super) fn empty(&mut self, p: &super::EngineParams) {
        let evictions = self.cache.evictions;
        *self = KvBlocks { groups: self.groups.clone(), hashed: self.hashed.take(), ..KvBlocks::with_offload(p) };
        self.cache.evictions = evictions;
    }

    /// Blocks in use (held or cached and shared; not counting blocks only reserved).
    #[inline]
    pub(super) fn used(&self) -> u64 {
        self.total - self.free - self.reserved
    }

    /// Whether `n` blocks can be taken for growth (free or reserved).
    #[inline]
    pub(super) fn fits_growth(&self, n: u64) -> bool {
        n <= self.free + self.reserved
    }

    /// Takes `n` free blocks, evicting unused cached blocks if truly free ones run short.
    #[inline]
    pub(super) fn take(&mut self, n: u64) {
        if self.cache.evictable > 0 {
            let truly_free = self.free - self.cache.evictable;
            if n > truly_free {
                // The tiers already hold copies of what they keep (stored when computed).
                self.cache.evict(n - truly_free, |_, _, _| {});
            }
        }
        self.free -= n;
    }

    /// Takes `n` blocks for sequences that grow: from the reserve first, then free blocks.
    #[inline]
    pub(super) fn take_growth(&mut self, n: u64) {
        let from_reserve = n.min(self.reserved);
        self.reserved -= from_reserve;
        self.take(n - from_reserve);
    }

    /// Moves `n` free blocks to the reserve.
    #[inline]
    pub(super) fn reserve(&mut self, n: u64) {
        self.take(n);
        self.reserved += n;
    }

    /// Returns to the free blocks what a sequence reserved for `final_blocks`
    /// and did not use, as it leaves holding `held` blocks.
    #[inline]
    pub(super) fn unreserve(&mut self, final_blocks: u64, held: u64) {
        let left = final_blocks.saturating_sub(held).min(self.reserved);
        self.reserved -= left;
        self.free += left;
    }

    /// Sets each class's (prefix group, shared system-prompt tokens).
    pub(super) fn set_groups(&mut self, groups: Arc<[(u32, u32)]>) {
        self.groups = groups;
    }

    /// Sets the replayed trace whose rows carry prefix-block hashes.
    pub(super) fn set_hashes(&mut self, trace: Option<Arc<Trace>>) {
        self.hashed = trace.filter(|t| !t.hash_ids.is_empty());
    }

    /// Identity of block `j` of request `req`'s token stream.
    #[inline]
    pub(super) fn block_id(&self, req: u32, r: &RequestRecord, j: u32) -> u64 {
        self.block_key(req, r, j).0
    }

    /// Identity of block `j` of request `req`'s token stream, and whether other requests may share it.
    #[inline]
    fn block_key(&self, req: u32, r: &RequestRecord, j: u32) -> (u64, bool) {
        let run = self.run_at(req, r, j, j + 1);
        // Only a request's own namespace (kind 3) is not shared.
        (prefix::id(run.ns, run.lo), run.ns & 3 != 3)
    }

    /// The blocks of request `req`'s token stream from block `j` (before
    /// `to`) that lie in one namespace at consecutive positions.
    #[inline]
    fn run_at(&self, req: u32, r: &RequestRecord, j: u32, to: u32) -> Run {
        let bs = self.block_size as u64;
        let mut end = to;
        if let Some(trace) = &self.hashed
            && r.trace_row != u32::MAX
        {
            // Mooncake: hash id h names tokens [512h, 512(h+1)) and the whole
            // prefix before them; a block lying wholly in hash block h is
            // position (start % 512) / block_size of h's namespace.
            let hashes = trace.rows[r.trace_row as usize].hashes(trace);
            let h = j as u64 * bs / HASH_BLOCK;
            if (h as usize) < hashes.len() {
                let ns = prefix::namespace(0, hashes[h as usize] as u64);
                // Blocks before `inside_end` end within hash block h; the first block starting in it.
                let inside_end = ((h + 1) * HASH_BLOCK / bs) as u32;
                let first = (h * HASH_BLOCK).div_ceil(bs) as u32;
                if j < inside_end {
                    return Run { ns, lo: j - first, hi: inside_end.min(to) - first };
                }
                // This block straddles two hash blocks: it alone falls through.
                end = j + 1;
            }
        }
        match self.groups.get(r.class as usize) {
            Some(&(g, tokens)) if g != u32::MAX && (j + 1) * self.block_size <= tokens => {
                Run { ns: prefix::namespace(1, g as u64), lo: j, hi: end.min(tokens / self.block_size) }
            }
            _ if r.session != u32::MAX => Run { ns: prefix::namespace(2, r.session as u64), lo: j, hi: end },
            _ => Run { ns: prefix::namespace(3, req as u64), lo: j, hi: end },
        }
    }

    /// [`Self::runs`] listed in the scratch vector (taken out of `self`; put it back after use).
    #[inline]
    fn list_runs(&mut self, req: u32, r: &RequestRecord, from: u32, to: u32) -> Vec<Run> {
        let mut runs = std::mem::take(&mut self.scratch);
        runs.clear();
        runs.extend(self.runs(req, r, from, to));
        runs
    }

    /// Blocks `from..to` of request `req`'s token stream as runs, in order.
    #[inline]
    fn runs<'a>(&'a self, req: u32, r: &'a RequestRecord, from: u32, to: u32) -> impl Iterator<Item = Run> + 'a {
        let mut j = from;
        std::iter::from_fn(move || {
            (j < to).then(|| {
                let run = self.run_at(req, r, j, to);
                j += run.hi - run.lo;
                run
            })
        })
    }

    /// The leading blocks of request `req`'s prompt that other requests may
    /// share, at most 1,024, into `out`.
    #[inline]
    pub(super) fn prefix_ids(&self, req: u32, r: &RequestRecord, out: &mut Vec<u64>) {
        out.clear();
        let full = (r.prompt.saturating_sub(1) / self.block_size).min(1024);
        for j in 0..full {
            match self.block_key(req, r, j) {
                (id, true) => out.push(id),
                _ => break,
            }
        }
    }

    /// Of the leading full blocks of a request about to hold `target` tokens,
    /// how many the prefix cache holds, how many of those are unused, and
    /// how many blocks after them the offload tiers hold (at least one token
    /// is always computed, to produce the next token).
    #[inline]
    pub(super) fn cached_prefix(&self, req: u32, r: &RequestRecord, target: u32) -> (u32, u64, u32) {
        if !self.caching {
            return (0, 0, 0);
        }
        let full = (target - 1) / self.block_size;
        let (hits, unused) = self.cache.peek(self.runs(req, r, 0, full));
        let tiered = match &self.offload {
            Some(o) => (hits..full).take_while(|&j| o.find(self.block_id(req, r, j)).is_some()).count() as u32,
            None => 0,
        };
        (hits, unused, tiered)
    }

    /// Loads blocks `from..to` of `req` from the offload tiers (their time
    /// goes to the step being planned).
    pub(super) fn load(&mut self, req: u32, r: &RequestRecord, from: u32, to: u32) {
        for j in from..to {
            let id = self.block_id(req, r, j);
            if let Some(o) = self.offload.as_mut() {
                o.load(id);
            }
        }
    }

    /// Takes a reference to the first `hits` cached blocks of `req`, of which
    /// `unused` were free.
    #[inline]
    pub(super) fn share(&mut self, req: u32, r: &RequestRecord, hits: u32, unused: u64) {
        let runs = self.list_runs(req, r, 0, hits);
        self.cache.acquire(&runs);
        self.scratch = runs;
        self.free -= unused;
    }

    /// A sequence of `req` computed `target` tokens of which its leading
    /// `shared` blocks are in the cache: its other full blocks join the cache
    /// (up to the first already cached by someone else). Returns the new
    /// count of its shared blocks.
    #[inline]
    pub(super) fn publish(&mut self, req: u32, r: &RequestRecord, shared: u32, target: u32) -> u32 {
        if !self.caching {
            return shared;
        }
        let full = target / self.block_size;
        if shared >= full {
            return shared;
        }
        let runs = self.list_runs(req, r, shared, full);
        let added = self.cache.insert_used(&runs);
        self.scratch = runs;
        // Computed here: the connector stores a copy in the tiers.
        if let Some(mut o) = self.offload.take() {
            for j in shared..shared + added {
                o.store(self.block_id(req, r, j));
            }
            self.offload = Some(o);
        }
        shared + added
    }

    /// Returns a sequence's `total` blocks: with prefix caching its `shared`
    /// leading blocks drop a reference and its other full blocks (of
    /// `kv_tokens` computed tokens) stay cached until evicted.
    #[inline]
    pub(super) fn give_back(&mut self, req: u32, r: &RequestRecord, shared: u32, total: u64, kv_tokens: u64) {
        if !self.caching {
            self.free += total;
            return;
        }
        let full = (kv_tokens / self.block_size as u64).min(total) as u32;
        // Tail first, as vLLM frees a request's blocks (single_type_kv_cache_manager.py
        // free: reversed order), so eviction takes a sequence's last blocks before
        // its leading ones and a preempted request resumes with its prefix cached.
        let runs = self.list_runs(req, r, shared, full);
        self.cache.insert_unused(&runs);
        self.scratch = runs;
        // vLLM's connector copied every full block after its step, the
        // output's too (LMCache saves no decode blocks by default).
        if let Some(mut o) = self.offload.take_if(|o| o.stores_decode()) {
            for j in (shared..full).rev() {
                o.store(self.block_id(req, r, j));
            }
            self.offload = Some(o);
        }
        let runs = self.list_runs(req, r, 0, shared);
        self.free += self.cache.release(&runs);
        self.scratch = runs;
        self.free += total - shared as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::TraceRow;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn rounding() {
        assert_eq!(super::blocks_for(0, 16), 0);
        assert_eq!(super::blocks_for(1, 16), 1);
        assert_eq!(super::blocks_for(16, 16), 1);
        assert_eq!(super::blocks_for(17, 16), 2);
        // The shift for powers of two gives the division's answer, and so
        // does the decode group's masked block phase.
        for bs in [1u32, 2, 3, 8, 12, 16, 32, 64, 100, 256, 512] {
            let g = super::super::decode::DecodeGroup::new(bs);
            for t in (0..5000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
                assert_eq!(super::blocks_for(t, bs), t.div_ceil(bs as u64), "{t} tokens, blocks of {bs}");
                let (d0, kv0) = (t, (t.wrapping_mul(7919) % 100_003) as u32);
                let b = bs as u64;
                assert_eq!(g.phase_of(d0, kv0), ((d0 % b + b - kv0 as u64 % b) % b) as usize);
            }
        }
    }

    /// Block `j`'s identity as it was computed block by block before runs.
    fn one_block(kv: &KvBlocks, req: u32, r: &RequestRecord, j: u32) -> u64 {
        let bs = kv.block_size;
        if let Some(trace) = &kv.hashed
            && r.trace_row != u32::MAX
        {
            let hashes = trace.rows[r.trace_row as usize].hashes(trace);
            let start = j as u64 * bs as u64;
            let h = (start / HASH_BLOCK) as usize;
            if ((j + 1) as u64 * bs as u64).div_ceil(HASH_BLOCK) as usize <= hashes.len().min(h + 1) {
                return prefix::id(prefix::namespace(0, hashes[h] as u64), (start % HASH_BLOCK / bs as u64) as u32);
            }
        }
        let (kind, owner) = match kv.groups.get(r.class as usize) {
            Some(&(g, tokens)) if g != u32::MAX && (j + 1) * bs <= tokens => (1, g as u64),
            _ if r.session != u32::MAX => (2, r.session as u64),
            _ => (3, req as u64),
        };
        prefix::id(prefix::namespace(kind, owner), j)
    }

    /// A request's runs name exactly the blocks the per-block identities
    /// name, in order, for every block size (dividing the trace's 512-token
    /// hash blocks or not), prefix group, session and trace row.
    #[test]
    fn runs_name_each_block_as_one_by_one() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let trace = Arc::new(Trace {
            rows: vec![TraceRow {
                t: 0.0,
                prompt: 9000,
                output: 1,
                class: u32::MAX,
                session: u32::MAX,
                hash_start: 0,
                hash_len: 7,
                line: 2,
            }],
            hash_ids: vec![4, 8, 15, 16, 23, 42, 4],
            ..Trace::default()
        });
        for bs in [1, 16, 24, 100, 512, 700] {
            for _ in 0..200 {
                let mut kv = KvBlocks::new(1 << 20, bs, true);
                kv.set_groups(Arc::from(vec![(3, rng.random_range(0..3000)), (u32::MAX, 0)]));
                if rng.random_bool(0.5) {
                    kv.set_hashes(Some(trace.clone()));
                }
                let mut r = RequestRecord::new(0.0, 5000, 10);
                r.class = rng.random_range(0..3);
                r.session = if rng.random_bool(0.5) { 9 } else { u32::MAX };
                r.trace_row = if rng.random_bool(0.7) { 0 } else { u32::MAX };
                let (from, to) = (rng.random_range(0..40), rng.random_range(0..9000 / bs));
                let got: Vec<u64> = kv
                    .runs(77, &r, from, to)
                    .flat_map(|run| (run.lo..run.hi).map(move |x| prefix::id(run.ns, x)))
                    .collect();
                let want: Vec<u64> = (from..to).map(|j| one_block(&kv, 77, &r, j)).collect();
                assert_eq!(got, want, "block size {bs}, from {from} to {to}");
            }
        }
    }
}
