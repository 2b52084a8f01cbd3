//! Samplers for inter-arrival gaps and token lengths.

use crate::config::LengthDist;
use rand::RngExt;
use rand_distr::{Distribution, Gamma, LogNormal};
use rand_pcg::Pcg64Mcg;

/// Seed of random stream `stream` for scenario seed `seed` (SplitMix64 mix),
/// so streams are independent and stable across versions.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Inter-arrival gap sampler.
#[derive(Debug, Clone)]
pub enum ArrivalSampler {
    /// Every request at t = 0.
    Offline,
    /// Exponential gaps with this mean.
    Poisson {
        /// Mean gap, s.
        mean: f64,
    },
    /// Gamma gaps.
    Gamma(Gamma<f64>),
}

impl ArrivalSampler {
    /// Poisson process at `rate` per second.
    pub fn poisson(rate: f64) -> Self {
        ArrivalSampler::Poisson { mean: 1.0 / rate }
    }
    /// Gamma renewal process at `rate` per second with gap CV `cv`.
    pub fn gamma(rate: f64, cv: f64) -> Self {
        let shape = 1.0 / (cv * cv);
        let scale = 1.0 / (rate * shape);
        ArrivalSampler::Gamma(Gamma::new(shape, scale).expect("validated gamma parameters"))
    }
    /// Next gap, seconds.
    #[inline]
    pub fn gap(&self, rng: &mut Pcg64Mcg) -> f64 {
        match self {
            ArrivalSampler::Offline => 0.0,
            ArrivalSampler::Poisson { mean } => {
                let u: f64 = rng.random();
                -mean * (1.0 - u).ln()
            }
            ArrivalSampler::Gamma(g) => g.sample(rng),
        }
    }
}

/// Token-length sampler.
#[derive(Debug, Clone)]
pub enum LengthSampler {
    /// Constant.
    Fixed(u32),
    /// Uniform integer in [lo, hi].
    Uniform(u32, u32),
    /// Rounded lognormal, at least 1.
    Lognormal(LogNormal<f64>),
}

impl LengthSampler {
    /// Sampler for a configured distribution.
    pub fn new(d: &LengthDist) -> Self {
        match *d {
            LengthDist::Fixed { value } => LengthSampler::Fixed(value),
            LengthDist::Uniform { min, max } => LengthSampler::Uniform(min, max),
            LengthDist::Lognormal { mean, cv } => {
                let s2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - s2 / 2.0;
                LengthSampler::Lognormal(LogNormal::new(mu, s2.sqrt()).expect("validated lognormal parameters"))
            }
        }
    }
    /// Next length.
    #[inline]
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> u32 {
        match *self {
            LengthSampler::Fixed(v) => v,
            LengthSampler::Uniform(lo, hi) => rng.random_range(lo..=hi),
            LengthSampler::Lognormal(ref d) => d.sample(rng).round().clamp(1.0, u32::MAX as f64) as u32,
        }
    }
}
