//! Synthetic step-time models for teaching and for queueing-theory oracles.

use super::{StepBatch, StepCost, StepCostModel};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Every step takes the same time, whatever the batch: with a batch of one
/// and one token per request this is the D in M/D/1.
#[derive(Debug, Clone)]
pub struct ConstantStep {
    /// Step time, seconds.
    pub time: f64,
}

impl StepCostModel for ConstantStep {
    fn step(&mut self, _: &StepBatch) -> StepCost {
        StepCost { time: self.time, flops: 0.0, bytes: 0.0 }
    }
    fn peak_flops(&self) -> f64 {
        f64::INFINITY
    }
    fn peak_bandwidth(&self) -> f64 {
        f64::INFINITY
    }
}

/// Every step takes an independent exponentially distributed time: with a
/// batch of one and one token per request this is the M in M/M/1.
#[derive(Debug, Clone)]
pub struct ExponentialStep {
    mean: f64,
    rng: Pcg64Mcg,
}

impl ExponentialStep {
    /// Mean step time in seconds; `seed` selects the random stream.
    pub fn new(mean: f64, seed: u64) -> Self {
        ExponentialStep { mean, rng: Pcg64Mcg::seed_from_u64(seed) }
    }
}

impl StepCostModel for ExponentialStep {
    fn step(&mut self, _: &StepBatch) -> StepCost {
        // Inverse-CDF sampling: exact and value-stable across library versions.
        let u: f64 = self.rng.random();
        StepCost { time: -self.mean * (1.0 - u).ln(), flops: 0.0, bytes: 0.0 }
    }
    /// The mean: no draw, so the step times of the run are unchanged.
    fn predict(&mut self, _: &StepBatch) -> f64 {
        self.mean
    }
    fn peak_flops(&self) -> f64 {
        f64::INFINITY
    }
    fn peak_bandwidth(&self) -> f64 {
        f64::INFINITY
    }
}
