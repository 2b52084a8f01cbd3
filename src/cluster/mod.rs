//! Routing requests across engine replicas.
//!
//! Every decision costs O(log replicas) at most: load-based routers keep a
//! tournament tree over the replicas' loads, updated whenever a replica's
//! load changes ([`Router::observe`]), so picking the least-loaded replica is
//! a read of the root. Ties go to the lowest replica index; random choices
//! draw from the router's own PCG-64 stream, so routing is deterministic.

use crate::config::RouterKind;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::HashMap;

/// A router's view of one replica.
pub trait ReplicaLoad {
    /// Requests admitted to the replica and not yet finished.
    fn outstanding(&self) -> u32;
    /// KV blocks in use.
    fn kv_blocks(&self) -> u64;
    /// Tokens still to compute (prompt chunks, recomputes, outputs).
    fn pending_tokens(&self) -> u64;
}

/// A tournament (segment) tree: the replica with the smallest load, ties to
/// the lowest index, in O(1); a load update in O(log n).
#[derive(Debug, Clone)]
pub struct MinTree {
    n: usize,
    size: usize,
    /// Node → (load, replica index); leaves at [size, 2 size).
    nodes: Vec<(u64, u32)>,
}

impl MinTree {
    /// `n` replicas, all at load 0.
    pub fn new(n: usize) -> Self {
        let size = n.next_power_of_two().max(1);
        let mut nodes = vec![(u64::MAX, u32::MAX); 2 * size];
        for i in 0..n {
            nodes[size + i] = (0, i as u32);
        }
        for k in (1..size).rev() {
            nodes[k] = nodes[2 * k].min(nodes[2 * k + 1]);
        }
        MinTree { n, size, nodes }
    }

    /// Sets replica `i`'s load.
    #[inline]
    pub fn set(&mut self, i: usize, load: u64) {
        let mut k = self.size + i;
        if self.nodes[k].0 == load {
            return;
        }
        self.nodes[k].0 = load;
        while k > 1 {
            k /= 2;
            self.nodes[k] = self.nodes[2 * k].min(self.nodes[2 * k + 1]);
        }
    }

    /// The least-loaded replica (lowest index among ties).
    #[inline]
    pub fn argmin(&self) -> usize {
        self.nodes[1].1 as usize
    }

    /// Replica `i`'s load.
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        self.nodes[self.size + i].0
    }

    /// Replicas.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Chooses a replica for each admitted request.
#[derive(Debug, Clone)]
pub struct Router {
    kind: RouterKind,
    next: usize,
    /// Loads by the router's metric (all but round robin and random).
    tree: MinTree,
    rng: Pcg64Mcg,
    /// Session → replica, for session affinity.
    sticky: HashMap<u32, u32>,
    /// `prefix-aware`: prefix block → replica last sent a request starting with it.
    prefix: HashMap<u64, u32>,
    prefix_cap: u64,
    /// A fleet whose replicas come and go: which take requests (None: all, always).
    up: Option<Vec<bool>>,
    /// The replicas that take requests, ascending.
    up_list: Vec<u32>,
}

/// Most prefix blocks the prefix-aware router remembers; past it the index
/// starts afresh (an approximate index, like a router-side radix tree with eviction).
const PREFIX_INDEX_LIMIT: usize = 1 << 22;

impl Router {
    /// A router of the given kind over `n` replicas; `seed` seeds its random choices.
    pub fn new(kind: RouterKind, n: usize, seed: u64) -> Self {
        Router {
            kind,
            next: 0,
            tree: MinTree::new(n),
            rng: Pcg64Mcg::seed_from_u64(seed),
            sticky: HashMap::new(),
            prefix: HashMap::new(),
            prefix_cap: 8,
            up: None,
            up_list: Vec::new(),
        }
    }

    /// A router over a fleet whose replicas come and go, with those of
    /// `ready` taking requests at first. With every replica ready it picks
    /// exactly as a router without a fleet (same draws, same order).
    pub fn with_fleet(mut self, ready: &[bool]) -> Self {
        self.up = Some(vec![true; ready.len()]);
        self.up_list = (0..ready.len() as u32).collect();
        for (i, &r) in ready.iter().enumerate() {
            if !r {
                self.set_up(i, false);
            }
        }
        self
    }

    /// Replica `i` starts or stops taking requests (a fleet's router only);
    /// observe its load after it starts.
    pub fn set_up(&mut self, i: usize, on: bool) {
        let Some(up) = self.up.as_mut() else { return };
        if up[i] == on {
            return;
        }
        up[i] = on;
        match self.up_list.binary_search(&(i as u32)) {
            Ok(k) if !on => {
                self.up_list.remove(k);
            }
            Err(k) if on => self.up_list.insert(k, i as u32),
            _ => {}
        }
        // A replica that takes nothing is never the least loaded.
        self.tree.set(i, if on { 0 } else { u64::MAX });
        if !on {
            self.sticky.retain(|_, r| *r as usize != i);
        }
    }

    /// Whether any replica takes requests.
    pub fn any_up(&self) -> bool {
        self.up.is_none() || !self.up_list.is_empty()
    }

    #[inline]
    fn is_up(&self, i: usize) -> bool {
        self.up.as_ref().is_none_or(|u| u[i])
    }

    /// Sets the load cap of prefix-aware routing.
    pub fn with_prefix_cap(mut self, cap: u32) -> Self {
        self.prefix_cap = cap as u64;
        self
    }

    /// Whether picks need the request's prefix blocks ([`Router::pick_prefix`]).
    pub fn wants_prefix(&self) -> bool {
        self.kind == RouterKind::PrefixAware
    }

    /// Prefix-aware pick for a request whose leading shareable blocks are
    /// `ids`: the replica last sent the deepest block of the longest run of
    /// them seen before, unless it has more than the cap of outstanding
    /// requests above the least loaded replica (then the least loaded).
    /// O(blocks) hash lookups plus O(log replicas).
    pub fn pick_prefix(&mut self, ids: &[u64]) -> usize {
        let best = self.tree.argmin();
        let floor = self.tree.get(best);
        let mut owner = None;
        for id in ids {
            match self.prefix.get(id) {
                Some(&r) => owner = Some(r as usize),
                None => break,
            }
        }
        let r = match owner {
            Some(o) if self.is_up(o) && self.tree.get(o) <= floor + self.prefix_cap => o,
            _ => best,
        };
        if self.prefix.len() + ids.len() > PREFIX_INDEX_LIMIT {
            self.prefix.clear();
        }
        for &id in ids {
            self.prefix.insert(id, r as u32);
        }
        r
    }

    /// The load a router of this kind ranks replicas by.
    #[inline]
    fn load<R: ReplicaLoad>(&self, r: &R) -> u64 {
        match self.kind {
            RouterKind::LeastKv => r.kv_blocks(),
            RouterKind::LeastTokens => r.pending_tokens(),
            _ => r.outstanding() as u64,
        }
    }

    /// Records replica `i`'s current load (call whenever it may have changed).
    #[inline]
    pub fn observe<R: ReplicaLoad>(&mut self, i: usize, r: &R) {
        if !matches!(self.kind, RouterKind::RoundRobin | RouterKind::Random) && self.is_up(i) {
            let l = self.load(r);
            self.tree.set(i, l);
        }
    }

    /// Picks the replica for the next request (of session `session`, u32::MAX: none).
    pub fn pick(&mut self, session: u32) -> usize {
        if self.up.is_some() {
            return self.pick_up(session);
        }
        let n = self.tree.len();
        match self.kind {
            RouterKind::RoundRobin => {
                let r = self.next % n;
                self.next = r + 1;
                r
            }
            RouterKind::Random => self.rng.random_range(0..n),
            RouterKind::PowerOfTwo => {
                if n == 1 {
                    return 0;
                }
                let a = self.rng.random_range(0..n);
                let b = (a + self.rng.random_range(1..n)) % n;
                let (la, lb) = (self.tree.get(a), self.tree.get(b));
                if la < lb || (la == lb && a < b) { a } else { b }
            }
            RouterKind::SessionAffinity if session != u32::MAX => {
                let best = self.tree.argmin();
                *self.sticky.entry(session).or_insert(best as u32) as usize
            }
            _ => self.tree.argmin(),
        }
    }
}

impl Router {
    /// [`Router::pick`] over the replicas that take requests (at least one
    /// must): the same choices as over a fixed cluster of those replicas.
    fn pick_up(&mut self, session: u32) -> usize {
        let n = self.up_list.len();
        let at = |k: usize| self.up_list[k] as usize;
        match self.kind {
            RouterKind::RoundRobin => {
                // The first replica after the last one picked, in index order.
                let k = self.up_list.partition_point(|&r| (r as usize) < self.next);
                let r = at(if k < n { k } else { 0 });
                self.next = r + 1;
                r
            }
            RouterKind::Random => at(self.rng.random_range(0..n)),
            RouterKind::PowerOfTwo => {
                if n == 1 {
                    return at(0);
                }
                let a = self.rng.random_range(0..n);
                let b = (a + self.rng.random_range(1..n)) % n;
                let (a, b) = (at(a), at(b));
                let (la, lb) = (self.tree.get(a), self.tree.get(b));
                if la < lb || (la == lb && a < b) { a } else { b }
            }
            RouterKind::SessionAffinity if session != u32::MAX => {
                let best = self.tree.argmin();
                *self.sticky.entry(session).or_insert(best as u32) as usize
            }
            _ => self.tree.argmin(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct L(u32, u64, u64);
    impl ReplicaLoad for L {
        fn outstanding(&self) -> u32 {
            self.0
        }
        fn kv_blocks(&self) -> u64 {
            self.1
        }
        fn pending_tokens(&self) -> u64 {
            self.2
        }
    }

    #[test]
    fn round_robin_cycles() {
        let mut r = Router::new(RouterKind::RoundRobin, 3, 0);
        let picks: Vec<usize> = (0..5).map(|_| r.pick(u32::MAX)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1]);
    }

    #[test]
    fn least_loaded_picks_min_lowest_index() {
        for (kind, loads) in [
            (RouterKind::LeastOutstanding, [L(3, 0, 0), L(1, 9, 9), L(1, 0, 0)]),
            (RouterKind::LeastKv, [L(0, 5, 0), L(9, 2, 0), L(0, 2, 0)]),
            (RouterKind::LeastTokens, [L(0, 0, 50), L(0, 0, 7), L(9, 9, 7)]),
        ] {
            let mut r = Router::new(kind, 3, 0);
            for (i, l) in loads.iter().enumerate() {
                r.observe(i, l);
            }
            assert_eq!(r.pick(u32::MAX), 1, "{kind:?}");
        }
    }

    #[test]
    fn min_tree_matches_a_scan() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for n in [1usize, 2, 3, 5, 16, 33] {
            let mut t = MinTree::new(n);
            let mut v = vec![0u64; n];
            for _ in 0..500 {
                let i = rng.random_range(0..n);
                v[i] = rng.random_range(0..6);
                t.set(i, v[i]);
                let want = (0..n).min_by_key(|&k| (v[k], k)).unwrap();
                assert_eq!(t.argmin(), want);
            }
        }
    }

    #[test]
    fn power_of_two_and_sessions() {
        let mut r = Router::new(RouterKind::PowerOfTwo, 4, 7);
        r.observe(2, &L(100, 0, 0));
        let picks: Vec<usize> = (0..200).map(|_| r.pick(u32::MAX)).collect();
        assert!(picks.iter().all(|&p| p < 4));
        assert!(!picks.contains(&2) || picks.iter().filter(|&&p| p == 2).count() < 10, "the loaded replica loses");
        let mut s = Router::new(RouterKind::SessionAffinity, 3, 0);
        let first = s.pick(42);
        s.observe(first, &L(50, 0, 0));
        assert_eq!(s.pick(42), first, "a session sticks to its replica");
        assert_ne!(s.pick(43), first, "a new session goes to the least loaded");
    }
}
