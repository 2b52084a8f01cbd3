//! Open-loop arrival processes: renewal (Poisson, gamma, Weibull,
//! deterministic) with optional ramp-up, non-homogeneous Poisson (rate
//! schedule, diurnal sinusoid) by thinning, two-state Markov-modulated
//! Poisson (on/off), and offline (all at once).

use super::dist::{UnitGap, exp1};
use crate::config::{ArrivalKind, ProcessConfig, RampStrategy, RampUp};
use rand::RngExt;
use rand_pcg::Pcg64Mcg;

/// A time-varying arrival rate.
#[derive(Debug, Clone, PartialEq)]
pub enum RateFn {
    /// Linear between (time, rate) points; constant before the first and after the last.
    Piecewise(Vec<(f64, f64)>),
    /// mean + amplitude · sin(2π (t − phase) / period).
    Sine {
        /// Mean rate.
        mean: f64,
        /// Swing.
        amplitude: f64,
        /// Period, s.
        period: f64,
        /// Upward zero crossing, s.
        phase: f64,
    },
}

impl RateFn {
    /// The rate at time t.
    pub fn rate(&self, t: f64) -> f64 {
        match self {
            RateFn::Piecewise(p) => {
                let i = p.partition_point(|x| x.0 <= t);
                if i == 0 {
                    p[0].1
                } else if i == p.len() {
                    p[p.len() - 1].1
                } else {
                    let (t0, r0) = p[i - 1];
                    let (t1, r1) = p[i];
                    r0 + (r1 - r0) * (t - t0) / (t1 - t0)
                }
            }
            RateFn::Sine { mean, amplitude, period, phase } => {
                (mean + amplitude * (std::f64::consts::TAU * (t - phase) / period).sin()).max(0.0)
            }
        }
    }

    /// An upper bound of the rate on [t, until), and `until`.
    fn bound(&self, t: f64) -> (f64, f64) {
        match self {
            RateFn::Piecewise(p) => {
                let i = p.partition_point(|x| x.0 <= t);
                if i == 0 {
                    (p[0].1, p[0].0)
                } else if i == p.len() {
                    (p[p.len() - 1].1, f64::INFINITY)
                } else {
                    (p[i - 1].1.max(p[i].1), p[i].0)
                }
            }
            RateFn::Sine { mean, amplitude, .. } => (mean + amplitude, f64::INFINITY),
        }
    }

    /// ∫ rate dt over [a, b] (numerically exact for piecewise-linear rates).
    pub fn integral(&self, a: f64, b: f64) -> f64 {
        match self {
            RateFn::Piecewise(p) => {
                let mut cuts: Vec<f64> = vec![a];
                cuts.extend(p.iter().map(|x| x.0).filter(|&x| x > a && x < b));
                cuts.push(b);
                cuts.windows(2).map(|w| (w[1] - w[0]) * (self.rate(w[0]) + self.rate(w[1])) / 2.0).sum()
            }
            RateFn::Sine { mean, amplitude, period, phase } => {
                let w = std::f64::consts::TAU / period;
                mean * (b - a) - amplitude / w * ((w * (b - phase)).cos() - (w * (a - phase)).cos())
            }
        }
    }
}

/// The vLLM ramp: request i of n is sent at rate r(i / (n − 1)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ramp {
    /// Rate of the first request.
    pub start: f64,
    /// Rate of the last request.
    pub end: f64,
    /// Exponential (else linear) interpolation.
    pub exponential: bool,
    /// Requests in the run.
    pub n: u64,
}

impl Ramp {
    /// Rate of request `i`.
    pub fn rate(&self, i: u64) -> f64 {
        let progress = i as f64 / (self.n.saturating_sub(1)).max(1) as f64;
        if self.exponential {
            self.start * (self.end / self.start).powf(progress)
        } else {
            self.start + (self.end - self.start) * progress
        }
    }
}

/// A stateful open-loop arrival process.
#[derive(Debug, Clone)]
pub enum Process {
    /// Every arrival at t = 0.
    Offline,
    /// Independent gaps: unit-mean gap × `mean_gap` (or 1/rate(i) with a ramp).
    Renewal {
        /// Gap law.
        gap: UnitGap,
        /// 1 / rate.
        mean_gap: f64,
        /// Ramp-up, if any.
        ramp: Option<Ramp>,
        /// Arrivals so far.
        index: u64,
    },
    /// Non-homogeneous Poisson by thinning against a piecewise bound.
    Nhpp(RateFn),
    /// Two-state Markov-modulated Poisson process.
    OnOff {
        /// Rates [off, on].
        rates: [f64; 2],
        /// Mean dwell times [off, on], s.
        dwell: [f64; 2],
        /// Current state (1 = on); `None` until the first call draws it.
        state: Option<usize>,
        /// When the state next flips.
        switch_at: f64,
    },
}

impl Process {
    /// The process described by a workload's (or class's) arrival keys;
    /// `ramp` applies to renewal processes with `num_requests` requests.
    pub fn new(p: &ProcessConfig<'_>, ramp: Option<(&RampUp, u64)>) -> Process {
        let renewal = |gap| {
            let rate = p.rate.unwrap_or(1.0);
            Process::Renewal {
                gap,
                mean_gap: 1.0 / rate,
                ramp: ramp.map(|(r, n)| Ramp {
                    start: r.start_rate,
                    end: r.end_rate.unwrap_or(rate),
                    exponential: r.strategy == RampStrategy::Exponential,
                    n,
                }),
                index: 0,
            }
        };
        if let Some(d) = p.diurnal {
            return Process::Nhpp(RateFn::Sine {
                mean: p.rate.unwrap_or(0.0),
                amplitude: d.amplitude,
                period: d.period_s,
                phase: d.phase_s,
            });
        }
        if !p.rate_schedule.is_empty() {
            return Process::Nhpp(RateFn::Piecewise(p.rate_schedule.iter().map(|x| (x.t_s, x.rate)).collect()));
        }
        match p.kind {
            ArrivalKind::Poisson => renewal(UnitGap::Exponential),
            ArrivalKind::Gamma => {
                renewal(UnitGap::gamma(p.cv.unwrap_or_else(|| 1.0 / p.burstiness.unwrap_or(1.0).sqrt())))
            }
            ArrivalKind::Weibull => renewal(UnitGap::weibull(p.cv.unwrap_or(1.0))),
            ArrivalKind::Deterministic => renewal(UnitGap::Deterministic),
            ArrivalKind::OnOff => {
                let o = p.on_off.expect("validated on_off");
                Process::OnOff {
                    rates: [o.off_rate, o.on_rate],
                    dwell: [o.off_mean_s, o.on_mean_s],
                    state: None,
                    switch_at: 0.0,
                }
            }
            ArrivalKind::Offline | ArrivalKind::ClosedLoop | ArrivalKind::Trace => Process::Offline,
        }
    }

    /// The next arrival strictly after (or, for offline, at) `t`; `None`
    /// when no arrival can ever come.
    #[inline]
    pub fn next(&mut self, t: f64, rng: &mut Pcg64Mcg) -> Option<f64> {
        match self {
            Process::Offline => Some(0.0),
            Process::Renewal { gap, mean_gap, ramp, index } => {
                let scale = match ramp {
                    Some(r) => 1.0 / r.rate(*index),
                    None => *mean_gap,
                };
                *index += 1;
                Some(t + gap.sample(rng) * scale)
            }
            Process::Nhpp(f) => {
                let mut t = t;
                loop {
                    let (lmax, until) = f.bound(t);
                    if lmax <= 0.0 {
                        if until.is_infinite() {
                            return None;
                        }
                        t = until;
                        continue;
                    }
                    let cand = t + exp1(rng) / lmax;
                    if cand >= until {
                        t = until;
                        continue;
                    }
                    t = cand;
                    if rng.random::<f64>() * lmax < f.rate(t) {
                        return Some(t);
                    }
                }
            }
            Process::OnOff { rates, dwell, state, switch_at } => {
                let mut s = match *state {
                    Some(s) => s,
                    None => {
                        // Stationary start; the residual dwell is exponential too.
                        let p_on = dwell[1] / (dwell[0] + dwell[1]);
                        let s = usize::from(rng.random::<f64>() < p_on);
                        *switch_at = t + dwell[s] * exp1(rng);
                        s
                    }
                };
                let mut t = t;
                loop {
                    let cand = if rates[s] > 0.0 { t + exp1(rng) / rates[s] } else { f64::INFINITY };
                    if cand < *switch_at {
                        *state = Some(s);
                        return Some(cand);
                    }
                    t = *switch_at;
                    s = 1 - s;
                    *switch_at = t + dwell[s] * exp1(rng);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piecewise_rate_and_integral() {
        let f = RateFn::Piecewise(vec![(10.0, 0.0), (20.0, 10.0), (30.0, 10.0)]);
        assert_eq!(f.rate(0.0), 0.0);
        assert_eq!(f.rate(15.0), 5.0);
        assert_eq!(f.rate(40.0), 10.0);
        assert!((f.integral(0.0, 30.0) - 150.0).abs() < 1e-9);
        assert!((f.integral(15.0, 40.0) - (37.5 + 100.0 + 100.0)).abs() < 1e-9);
    }

    #[test]
    fn sine_integral_matches_quadrature() {
        let f = RateFn::Sine { mean: 5.0, amplitude: 3.0, period: 100.0, phase: 7.0 };
        let n = 100_000;
        let h = 130.0 / n as f64;
        let q: f64 = (0..n).map(|i| f.rate((i as f64 + 0.5) * h) * h).sum();
        assert!((f.integral(0.0, 130.0) - q).abs() < 1e-6);
    }

    #[test]
    fn ramp_interpolates_by_request_index() {
        let r = Ramp { start: 1.0, end: 9.0, exponential: false, n: 5 };
        assert_eq!(r.rate(0), 1.0);
        assert_eq!(r.rate(2), 5.0);
        assert_eq!(r.rate(4), 9.0);
        let e = Ramp { exponential: true, ..r };
        assert!((e.rate(2) - 3.0).abs() < 1e-12);
    }
}
