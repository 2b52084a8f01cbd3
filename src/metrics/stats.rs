//! Descriptive statistics with numpy's conventions: population standard
//! deviation (ddof = 0) and linearly interpolated percentiles
//! (`numpy.percentile(..., method="linear")`), as `vllm bench serve` reports.

pub use crate::config::PERCENTILES;

/// Percentile `p` (0–100) of an ascending slice, numpy "linear" method.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The median of a slice (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Percentiles of unsorted data in O(n) per percentile (selection, not a
/// full sort); `data` is reordered. `ps` must be ascending.
pub fn percentiles(data: &mut [f64], ps: &[f64]) -> Vec<f64> {
    let n = data.len();
    if n == 0 {
        return vec![f64::NAN; ps.len()];
    }
    let mut out = Vec::with_capacity(ps.len());
    let mut start = 0; // everything before `start` is <= everything from it
    for &p in ps {
        let rank = p / 100.0 * (n - 1) as f64;
        let lo = rank.floor() as usize;
        let frac = rank - lo as f64;
        let (_, &mut a, right) = data[start..].select_nth_unstable_by(lo - start, f64::total_cmp);
        let b = if frac > 0.0 && lo + 1 < n { right.iter().copied().fold(f64::INFINITY, f64::min) } else { a };
        out.push(a + (b - a) * frac);
        start = lo;
    }
    out
}

/// Mean, population std, percentiles and max of a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Values at [`PERCENTILES`].
    pub percentiles: Vec<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Percentiles asked for beyond [`PERCENTILES`] (scenario key `percentiles`), as
    /// (percentile, value), ascending; empty unless asked for.
    pub extra: Vec<(f64, f64)>,
}

impl Distribution {
    /// Describes `data` (reordered in place).
    pub fn of(data: &mut [f64]) -> Self {
        let n = data.len();
        if n == 0 {
            return Distribution {
                count: 0,
                mean: f64::NAN,
                std: f64::NAN,
                percentiles: vec![f64::NAN; PERCENTILES.len()],
                min: f64::NAN,
                max: f64::NAN,
                extra: Vec::new(),
            };
        }
        let mean = data.iter().sum::<f64>() / n as f64;
        let var = data.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        let min = data.iter().copied().fold(f64::INFINITY, f64::min);
        let max = data.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let percentiles = percentiles(data, &PERCENTILES);
        Distribution { count: n as u64, mean, std: var.sqrt(), percentiles, min, max, extra: Vec::new() }
    }

    /// Describes `data` (reordered in place), with the percentiles `extra`
    /// (ascending, none of [`PERCENTILES`]) besides the standard ones.
    pub fn of_with(data: &mut [f64], extra: &[f64]) -> Self {
        let mut d = Distribution::of(data);
        d.extra = extra.iter().copied().zip(percentiles(data, extra)).collect();
        d
    }

    /// Describes a histogram of pooled samples.
    pub fn of_histogram(h: &super::LogHistogram) -> Self {
        Distribution {
            count: h.count(),
            mean: h.mean(),
            std: h.std(),
            percentiles: PERCENTILES.iter().map(|&p| h.percentile(p)).collect(),
            min: h.min(),
            max: h.max(),
            extra: Vec::new(),
        }
    }

    /// The value at percentile `p`: a standard one or one of `extra`.
    pub fn at(&self, p: f64) -> Option<f64> {
        PERCENTILES
            .iter()
            .position(|&q| q == p)
            .map(|i| self.percentiles[i])
            .or_else(|| self.extra.iter().find(|(q, _)| *q == p).map(|(_, v)| *v))
    }

    /// Every reported percentile, standard and extra, ascending, as (percentile, value).
    pub fn all_percentiles(&self) -> Vec<(f64, f64)> {
        let mut all: Vec<(f64, f64)> = PERCENTILES.iter().copied().zip(self.percentiles.iter().copied()).collect();
        all.extend(self.extra.iter().copied());
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all
    }

    /// The median (p50).
    pub fn median(&self) -> f64 {
        self.percentiles[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) = [3., 7.6, 9.76]
        let mut d = [10.0, 2.0, 4.0, 1.0, 3.0];
        let p = percentiles(&mut d, &[50.0, 90.0, 99.0]);
        assert_eq!(p[0], 3.0);
        assert!((p[1] - 7.6).abs() < 1e-12);
        assert!((p[2] - 9.76).abs() < 1e-12);
    }

    #[test]
    fn selection_equals_sorting() {
        let mut x: Vec<f64> = (0..1001).map(|i| ((i * 7919) % 1009) as f64 * 0.37).collect();
        let mut sorted = x.clone();
        sorted.sort_by(f64::total_cmp);
        let ps = [0.0, 12.5, 50.0, 99.0, 99.9, 100.0];
        let got = percentiles(&mut x, &ps);
        for (g, p) in got.iter().zip(ps) {
            assert_eq!(*g, percentile_sorted(&sorted, p), "p{p}");
        }
    }

    #[test]
    fn std_is_population() {
        let d = Distribution::of(&mut [1.0, 2.0, 3.0, 4.0]);
        assert!((d.std - 1.118_033_988_749_895).abs() < 1e-12);
        assert_eq!(d.mean, 2.5);
    }
}
