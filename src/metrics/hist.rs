//! A log-linear histogram for pooled samples too numerous to keep (one per
//! generated token): relative bucket width 2^-10, so any percentile it reports
//! is within 0.1% of the exact one. Mean and standard deviation are exact.

/// Mantissa bits kept per octave.
const SUB_BITS: u32 = 10;
/// Smallest exponent tracked: 2^-30 s (about 1 ns); smaller values go to bucket 0.
const MIN_EXP: i64 = -30;
/// Largest exponent tracked: 2^20 s (about 12 days).
const MAX_EXP: i64 = 20;
const BUCKETS: usize = ((MAX_EXP - MIN_EXP + 1) as usize) << SUB_BITS;

/// Upper bound of the relative error of a reported percentile.
pub const RELATIVE_ERROR: f64 = 1.0 / (1u64 << SUB_BITS) as f64;

/// Weighted samples of positive values (seconds).
#[derive(Debug, Clone)]
pub struct LogHistogram {
    counts: Vec<u64>,
    /// Samples exactly 0 (a request that never queued), kept apart so that
    /// they come back as 0, not as the smallest bucket's middle.
    zeros: u64,
    n: u64,
    sum: f64,
    sum_sq: f64,
    min: f64,
    max: f64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LogHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        LogHistogram { counts: vec![0; BUCKETS], zeros: 0, n: 0, sum: 0.0, sum_sq: 0.0, min: f64::INFINITY, max: 0.0 }
    }

    #[inline]
    fn index(x: f64) -> usize {
        let bits = x.to_bits() as i64;
        let exp = ((bits >> 52) & 0x7ff) - 1023;
        if exp < MIN_EXP {
            return 0;
        }
        if exp > MAX_EXP {
            return BUCKETS - 1;
        }
        let mant = (bits >> (52 - SUB_BITS)) & ((1 << SUB_BITS) - 1);
        (((exp - MIN_EXP) << SUB_BITS) | mant) as usize
    }

    /// Lower edge of a bucket.
    fn lower(i: usize) -> f64 {
        let exp = (i >> SUB_BITS) as i64 + MIN_EXP;
        let mant = (i & ((1 << SUB_BITS) - 1)) as f64 / (1u64 << SUB_BITS) as f64;
        (1.0 + mant) * (exp as f64).exp2()
    }

    /// Adds `count` samples of value `x`.
    #[inline]
    pub fn add(&mut self, x: f64, count: u64) {
        if count == 0 {
            return;
        }
        let x = x.max(0.0);
        if x == 0.0 {
            self.zeros += count;
        } else {
            self.counts[Self::index(x)] += count;
        }
        let c = count as f64;
        self.n += count;
        self.sum += x * c;
        self.sum_sq += x * x * c;
        if x < self.min {
            self.min = x;
        }
        if x > self.max {
            self.max = x;
        }
    }

    /// Adds every sample of another histogram.
    pub fn merge(&mut self, o: &LogHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.zeros += o.zeros;
        self.n += o.n;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }
    /// Exact mean.
    pub fn mean(&self) -> f64 {
        if self.n == 0 { f64::NAN } else { self.sum / self.n as f64 }
    }
    /// Exact population standard deviation.
    pub fn std(&self) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let m = self.mean();
        (self.sum_sq / self.n as f64 - m * m).max(0.0).sqrt()
    }
    /// Exact minimum.
    pub fn min(&self) -> f64 {
        if self.n == 0 { f64::NAN } else { self.min }
    }
    /// Exact maximum.
    pub fn max(&self) -> f64 {
        if self.n == 0 { f64::NAN } else { self.max }
    }

    /// Percentile `p` (0–100) with numpy's linear interpolation between
    /// order statistics, each order statistic placed by linear interpolation
    /// inside its bucket.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let rank = p / 100.0 * (self.n - 1) as f64;
        let lo = rank.floor() as u64;
        let frac = rank - lo as f64;
        let a = self.order_stat(lo);
        if frac == 0.0 { a } else { a + (self.order_stat((lo + 1).min(self.n - 1)) - a) * frac }
    }

    /// Approximate k-th smallest sample (0-based).
    fn order_stat(&self, k: u64) -> f64 {
        if k < self.zeros {
            return 0.0;
        }
        let mut seen = self.zeros;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if seen + c > k {
                let lo = Self::lower(i).max(self.min);
                let hi = if i + 1 < BUCKETS { Self::lower(i + 1) } else { self.max }.min(self.max);
                let pos = (k - seen) as f64 + 0.5;
                return (lo + (hi - lo) * pos / c as f64).clamp(self.min, self.max);
            }
            seen += c;
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_stated_error() {
        let mut h = LogHistogram::new();
        let mut xs: Vec<f64> = (1..=10_000).map(|i| 0.001 * (1.0 + (i as f64).sqrt())).collect();
        for &x in &xs {
            h.add(x, 1);
        }
        xs.sort_by(f64::total_cmp);
        for p in [1.0, 50.0, 90.0, 99.0, 99.9] {
            let exact = crate::metrics::stats::percentile_sorted(&xs, p);
            let got = h.percentile(p);
            assert!((got - exact).abs() / exact <= RELATIVE_ERROR, "p{p}: {got} vs {exact}");
        }
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((h.mean() - mean).abs() < 1e-12);
        assert_eq!(h.max(), *xs.last().unwrap());
    }

    #[test]
    fn weighted_equals_repeated() {
        let mut a = LogHistogram::new();
        let mut b = LogHistogram::new();
        a.add(0.02, 5);
        a.add(0.03, 2);
        for _ in 0..5 {
            b.add(0.02, 1);
        }
        b.add(0.03, 1);
        b.add(0.03, 1);
        assert_eq!(a.percentile(50.0), b.percentile(50.0));
        assert_eq!(a.count(), 7);
        assert!((a.mean() - b.mean()).abs() < 1e-15);
    }

    #[test]
    fn zeros_come_back_as_zero() {
        let mut h = LogHistogram::new();
        h.add(0.0, 60);
        h.add(0.01, 40);
        assert_eq!((h.percentile(50.0), h.min()), (0.0, 0.0));
        let p90 = h.percentile(90.0);
        assert!((p90 - 0.01).abs() <= 0.01 * RELATIVE_ERROR, "{p90}");
    }
}
