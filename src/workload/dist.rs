//! Samplers: token lengths, think times and unit-mean inter-arrival gaps.

use crate::config::{LengthDist, TimeDist};
use rand::RngExt;
use rand_distr::{Distribution, Gamma, LogNormal, Weibull, Zipf};
use rand_pcg::Pcg64Mcg;
use statrs::distribution::{ContinuousCDF, Normal};
use statrs::statistics::Distribution as _;
use std::sync::Arc;

/// A standard exponential variate (mean 1) by inversion.
#[inline]
pub fn exp1(rng: &mut Pcg64Mcg) -> f64 {
    let u: f64 = rng.random();
    -(1.0 - u).ln()
}

/// Token-length sampler.
#[derive(Debug, Clone)]
pub enum LengthSampler {
    /// Constant.
    Fixed(u32),
    /// Uniform integer in [lo, hi].
    Uniform(u32, u32),
    /// Truncated normal by inversion: u uniform in [lo_cdf, hi_cdf].
    Normal {
        /// The untruncated law.
        law: Normal,
        /// CDF at the lower edge (lo − 0.5).
        lo_cdf: f64,
        /// CDF at the upper edge (hi + 0.5).
        hi_cdf: f64,
        /// Smallest value.
        lo: u32,
        /// Largest value.
        hi: u32,
    },
    /// Rounded lognormal, at least 1.
    Lognormal {
        /// The law.
        law: LogNormal<f64>,
        /// Its mean.
        mean: f64,
    },
    /// Rounded exponential, at least 1.
    Exponential(f64),
    /// Zipf on 1..=n.
    Zipf(Zipf<f64>),
    /// Uniform resampling of observed values.
    Empirical(Arc<[u32]>),
}

impl LengthSampler {
    /// Sampler for a parametric distribution; `data` holds the values of an
    /// empirical one (read by the caller from `values` or a file).
    pub fn new(d: &LengthDist, data: Option<Arc<[u32]>>) -> Self {
        match *d {
            LengthDist::Fixed { value } => LengthSampler::Fixed(value),
            LengthDist::Uniform { min, max } => LengthSampler::Uniform(min, max),
            LengthDist::Normal { mean, std, min, max } => {
                let law = Normal::new(mean, std).expect("validated normal parameters");
                let lo = min.unwrap_or(1);
                let hi = max.unwrap_or(u32::MAX);
                let lo_cdf = law.cdf(lo as f64 - 0.5);
                let hi_cdf = if max.is_some() { law.cdf(hi as f64 + 0.5) } else { 1.0 };
                LengthSampler::Normal { law, lo_cdf, hi_cdf, lo, hi }
            }
            LengthDist::Lognormal { mean, cv, median, sigma } => {
                let (mu, s) = match (mean, cv, median, sigma) {
                    (Some(m), Some(c), _, _) => {
                        let s2 = (1.0 + c * c).ln();
                        (m.ln() - s2 / 2.0, s2.sqrt())
                    }
                    (_, _, Some(med), Some(s)) => (med.ln(), s),
                    _ => unreachable!("validated lognormal parameters"),
                };
                let law = LogNormal::new(mu, s).expect("validated lognormal parameters");
                LengthSampler::Lognormal { law, mean: (mu + s * s / 2.0).exp() }
            }
            LengthDist::Exponential { mean } => LengthSampler::Exponential(mean),
            LengthDist::Zipf { n, s } => {
                LengthSampler::Zipf(Zipf::new(n as f64, s).expect("validated zipf parameters"))
            }
            LengthDist::Empirical { ref values, .. } => {
                LengthSampler::Empirical(data.unwrap_or_else(|| values.as_slice().into()))
            }
        }
    }

    /// The mean of the distribution (before rounding for continuous laws).
    pub fn mean(&self) -> f64 {
        match *self {
            LengthSampler::Fixed(v) => v as f64,
            LengthSampler::Uniform(lo, hi) => (lo as f64 + hi as f64) / 2.0,
            LengthSampler::Normal { ref law, lo_cdf, hi_cdf, lo, hi } => {
                use statrs::distribution::Continuous;
                let (m, s) = (law.mean().unwrap_or(0.0), law.std_dev().unwrap_or(1.0));
                let a = lo as f64 - 0.5;
                let b = if hi == u32::MAX { f64::INFINITY } else { hi as f64 + 0.5 };
                let pdf = |x: f64| if x.is_finite() { law.pdf(x) * s } else { 0.0 };
                m + s * (pdf(a) - pdf(b)) / (hi_cdf - lo_cdf)
            }
            LengthSampler::Lognormal { mean, .. } => mean,
            LengthSampler::Exponential(m) => m,
            LengthSampler::Zipf(_) | LengthSampler::Empirical(_) => {
                // Exact for empirical; for Zipf, the mean of 20,000 fixed draws.
                if let LengthSampler::Empirical(v) = self {
                    return v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
                }
                let mut rng = <Pcg64Mcg as rand::SeedableRng>::seed_from_u64(0);
                (0..20_000).map(|_| self.sample(&mut rng) as f64).sum::<f64>() / 20_000.0
            }
        }
    }

    /// Next length.
    #[inline]
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> u32 {
        let round = |x: f64| x.round().clamp(1.0, u32::MAX as f64) as u32;
        match *self {
            LengthSampler::Fixed(v) => v,
            LengthSampler::Uniform(lo, hi) => rng.random_range(lo..=hi),
            LengthSampler::Normal { ref law, lo_cdf, hi_cdf, lo, hi } => {
                let u: f64 = rng.random();
                let p = (lo_cdf + u * (hi_cdf - lo_cdf)).clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON);
                (law.inverse_cdf(p).round().clamp(lo as f64, hi as f64)) as u32
            }
            LengthSampler::Lognormal { ref law, .. } => round(law.sample(rng)),
            LengthSampler::Exponential(mean) => round(mean * exp1(rng)),
            LengthSampler::Zipf(ref z) => z.sample(rng) as u32,
            LengthSampler::Empirical(ref v) => v[rng.random_range(0..v.len())],
        }
    }
}

/// Think-time sampler, seconds.
#[derive(Debug, Clone)]
pub enum TimeSampler {
    /// Constant.
    Fixed(f64),
    /// Exponential with this mean.
    Exponential(f64),
    /// Uniform in [lo, hi].
    Uniform(f64, f64),
    /// Lognormal.
    Lognormal(LogNormal<f64>),
}

impl TimeSampler {
    /// Sampler for a configured distribution.
    pub fn new(d: &TimeDist) -> Self {
        match *d {
            TimeDist::Fixed { value } => TimeSampler::Fixed(value),
            TimeDist::Exponential { mean } => TimeSampler::Exponential(mean),
            TimeDist::Uniform { min, max } => TimeSampler::Uniform(min, max),
            TimeDist::Lognormal { mean, cv } => {
                let s2 = (1.0 + cv * cv).ln();
                TimeSampler::Lognormal(LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt()).expect("validated lognormal"))
            }
        }
    }

    /// Next duration, s.
    #[inline]
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> f64 {
        match *self {
            TimeSampler::Fixed(v) => v,
            TimeSampler::Exponential(m) => m * exp1(rng),
            TimeSampler::Uniform(lo, hi) => lo + (hi - lo) * rng.random::<f64>(),
            TimeSampler::Lognormal(ref d) => d.sample(rng),
        }
    }
}

/// Unit-mean inter-arrival gap of a renewal process (multiply by 1/rate).
#[derive(Debug, Clone)]
pub enum UnitGap {
    /// Exponential (Poisson process).
    Exponential,
    /// Gamma with shape k and scale 1/k.
    Gamma(Gamma<f64>),
    /// Weibull with mean 1.
    Weibull(Weibull<f64>),
    /// Always 1.
    Deterministic,
}

impl UnitGap {
    /// Gamma gaps with coefficient of variation `cv` (shape 1/cv²).
    pub fn gamma(cv: f64) -> Self {
        let shape = 1.0 / (cv * cv);
        UnitGap::Gamma(Gamma::new(shape, 1.0 / shape).expect("validated gamma parameters"))
    }

    /// Weibull gaps with coefficient of variation `cv`.
    pub fn weibull(cv: f64) -> Self {
        let k = weibull_shape(cv);
        let scale = 1.0 / statrs::function::gamma::gamma(1.0 + 1.0 / k);
        UnitGap::Weibull(Weibull::new(scale, k).expect("validated weibull parameters"))
    }

    /// Next gap (mean 1).
    #[inline]
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> f64 {
        match self {
            UnitGap::Exponential => exp1(rng),
            UnitGap::Gamma(g) => g.sample(rng),
            UnitGap::Weibull(w) => w.sample(rng),
            UnitGap::Deterministic => 1.0,
        }
    }
}

/// The Weibull shape k whose coefficient of variation is `cv`:
/// cv² = Γ(1 + 2/k) / Γ(1 + 1/k)² − 1, solved by bisection on ln k (cv falls as k grows).
pub fn weibull_shape(cv: f64) -> f64 {
    use statrs::function::gamma::ln_gamma;
    let cv_of = |k: f64| ((ln_gamma(1.0 + 2.0 / k) - 2.0 * ln_gamma(1.0 + 1.0 / k)).exp() - 1.0).sqrt();
    let (mut lo, mut hi) = (0.05f64.ln(), 200f64.ln());
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cv_of(mid.exp()) > cv {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn weibull_shape_inverts_the_cv() {
        // k = 1 is the exponential (cv 1); k = 2 is Rayleigh (cv ≈ 0.5227).
        assert!((weibull_shape(1.0) - 1.0).abs() < 1e-9);
        assert!((weibull_shape(0.522_723_200_877_05) - 2.0).abs() < 1e-6);
    }

    #[test]
    fn truncated_normal_stays_in_its_window() {
        let d = LengthDist::Normal { mean: 100.0, std: 80.0, min: Some(50), max: Some(120) };
        let s = LengthSampler::new(&d, None);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for _ in 0..10_000 {
            let x = s.sample(&mut rng);
            assert!((50..=120).contains(&x), "{x}");
        }
    }
}
