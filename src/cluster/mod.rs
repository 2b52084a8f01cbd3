//! Routing requests across engine replicas.

use crate::config::RouterKind;

/// A router's view of one replica.
pub trait ReplicaLoad {
    /// Requests admitted to the replica and not yet finished.
    fn outstanding(&self) -> u32;
}

/// Chooses a replica for each admitted request. Decisions are deterministic:
/// ties go to the lowest replica index.
#[derive(Debug, Clone)]
pub struct Router {
    kind: RouterKind,
    next: usize,
}

impl Router {
    /// A router of the given kind.
    pub fn new(kind: RouterKind) -> Self {
        Router { kind, next: 0 }
    }

    /// Picks the replica for the next request.
    pub fn pick<R: ReplicaLoad>(&mut self, replicas: &[R]) -> usize {
        match self.kind {
            RouterKind::RoundRobin => {
                let r = self.next % replicas.len();
                self.next = r + 1;
                r
            }
            RouterKind::LeastOutstanding => {
                let mut best = 0;
                let mut best_load = u32::MAX;
                for (i, r) in replicas.iter().enumerate() {
                    let l = r.outstanding();
                    if l < best_load {
                        best = i;
                        best_load = l;
                    }
                }
                best
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    struct L(u32);
    impl ReplicaLoad for L {
        fn outstanding(&self) -> u32 {
            self.0
        }
    }

    #[test]
    fn round_robin_cycles() {
        let mut r = Router::new(RouterKind::RoundRobin);
        let reps = [L(0), L(0), L(0)];
        let picks: Vec<usize> = (0..5).map(|_| r.pick(&reps)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1]);
    }

    #[test]
    fn least_outstanding_picks_min_lowest_index() {
        let mut r = Router::new(RouterKind::LeastOutstanding);
        assert_eq!(r.pick(&[L(3), L(1), L(1)]), 1);
    }
}
