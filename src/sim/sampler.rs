//! The time series of the cluster's state ([`TimeSample`]), sampled at a
//! fixed interval that doubles when the series grows long.

use crate::cost::StepCostModel;
use crate::engine::Replica;

/// Most samples kept in the time series; past it, every other sample is
/// dropped and the interval doubles.
const MAX_SAMPLES: usize = 2048;

/// The cluster's state at one instant (summed over replicas).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimeSample {
    /// Simulated time, s.
    pub t: f64,
    /// Requests waiting in replica queues.
    pub waiting: u32,
    /// Requests running (admitted to a batch).
    pub running: u32,
    /// Sequences in the steps in flight.
    pub batch: u32,
    /// Fraction of all KV blocks in use.
    pub kv_used: f64,
    /// Requests completed so far.
    pub completed: u64,
}

/// Samples the cluster's state every `interval` of simulated time.
pub(super) struct Sampler {
    /// When the next sample is due.
    pub(super) next: f64,
    interval: f64,
    /// The samples taken.
    pub(super) samples: Vec<TimeSample>,
    /// KV blocks of the whole cluster.
    total_blocks: u64,
    /// Replicas that may hold work (a sample visits only these, so its cost
    /// does not grow with idle replicas), and a flag per replica.
    active: Vec<u32>,
    is_active: Vec<bool>,
}

impl Sampler {
    #[inline]
    pub(super) fn due(&self, t: f64) -> bool {
        t >= self.next
    }

    pub(super) fn new<C: StepCostModel>(replicas: &[Replica<C>]) -> Self {
        Sampler {
            next: 0.0,
            interval: 0.05,
            samples: Vec::new(),
            total_blocks: replicas.iter().map(|r| r.params().num_blocks).sum(),
            active: Vec::new(),
            is_active: vec![false; replicas.len()],
        }
    }

    /// Replica `r` was given work.
    #[inline]
    pub(super) fn activate(&mut self, r: usize) {
        if !self.is_active[r] {
            self.is_active[r] = true;
            self.active.push(r as u32);
        }
    }

    /// Samples the cluster: sums over the active replicas (idle ones add
    /// nothing; integer sums, so the order never matters), dropping those
    /// that have gone idle.
    pub(super) fn take<C: StepCostModel>(&mut self, t: f64, replicas: &[Replica<C>], completed: u64) {
        let (mut waiting, mut running, mut batch, mut used) = (0u32, 0u32, 0u32, 0u64);
        let is_active = &mut self.is_active;
        self.active.retain(|&r| {
            let rep = &replicas[r as usize];
            let (w, n, b, u) = (rep.num_waiting() as u32, rep.num_running(), rep.batch_size(), rep.used_blocks());
            waiting += w;
            running += n;
            batch += b;
            used += u;
            let keep = w > 0 || n > 0 || u > 0 || rep.is_busy();
            is_active[r as usize] = keep;
            keep
        });
        self.samples.push(TimeSample {
            t,
            waiting,
            running,
            batch,
            kv_used: used as f64 / self.total_blocks as f64,
            completed,
        });
        if self.samples.len() >= MAX_SAMPLES {
            let mut k = 0;
            self.samples.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            self.interval *= 2.0;
        }
        self.next = t + self.interval;
    }
}
