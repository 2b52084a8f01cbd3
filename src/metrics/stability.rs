//! Overload detection: is the queue growing through the run?
//!
//! A finite run of an overloaded system reports latencies that only measure
//! how long it ran. The measured requests are cut into 10 equal groups in
//! arrival order; the mean queueing delay of each group is regressed on its
//! mean arrival time. The run is declared **unstable** when both
//! (a) the slope is positive with a t-statistic above 3 (8 degrees of
//! freedom), and (b) the last group's mean queueing delay exceeds the first's
//! by more than the larger of the first's and half the median service time —
//! the queue has grown far beyond what steady-state fluctuation explains. Offline runs (all requests at t = 0)
//! are throughput tests: their queue drains by construction, so stability does
//! not apply.

use serde::Serialize;

/// Number of groups.
const GROUPS: usize = 10;

/// The stability verdict and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stability {
    /// "stable", "overloaded", "not_applicable" (offline) or "too_few_requests".
    pub verdict: String,
    /// One sentence a reader can act on.
    pub explanation: String,
    /// Measured arrivals per second over the arrival span.
    pub offered_rate: f64,
    /// Measured completions per second over the same span.
    pub completion_rate_during_arrivals: f64,
    /// Mean queueing delay of the first tenth of measured requests, ms.
    pub queue_delay_first_tenth_ms: f64,
    /// Mean queueing delay of the last tenth of measured requests, ms.
    pub queue_delay_last_tenth_ms: f64,
    /// Growth of the queueing delay per second of run time (regression slope), ms/s.
    pub queue_delay_slope_ms_per_s: f64,
    /// t-statistic of that slope.
    pub slope_t_stat: f64,
    /// Median service time (E2E minus queueing delay), ms.
    pub median_service_ms: f64,
}

/// Judges a run from its completed measured requests in arrival order —
/// (arrival s, queueing delay s, finish s) — and the arrival times of all
/// measured requests (rejected ones included).
pub fn assess(samples: &[(f64, f64, f64)], arrivals: &[f64], median_service: f64, offline: bool) -> Stability {
    let mut st = Stability {
        verdict: String::new(),
        explanation: String::new(),
        offered_rate: f64::NAN,
        completion_rate_during_arrivals: f64::NAN,
        queue_delay_first_tenth_ms: f64::NAN,
        queue_delay_last_tenth_ms: f64::NAN,
        queue_delay_slope_ms_per_s: f64::NAN,
        slope_t_stat: f64::NAN,
        median_service_ms: median_service * 1e3,
    };
    if offline {
        st.verdict = "not_applicable".into();
        st.explanation = "offline batch: every request is queued at t = 0, so this is a throughput test and latencies \
                          measure queue position, not steady state"
            .into();
        return st;
    }
    let n = samples.len();
    if n < 5 * GROUPS {
        st.verdict = "too_few_requests".into();
        st.explanation = format!("{n} measured requests are too few to judge stability (need {})", 5 * GROUPS);
        return st;
    }
    let (t0, t1) = (arrivals[0], arrivals[arrivals.len() - 1]);
    if t1 <= t0 {
        st.verdict = "not_applicable".into();
        st.explanation = "all measured requests arrived at the same instant: a batch, not a steady stream".into();
        return st;
    }
    let span = t1 - t0;
    st.offered_rate = (arrivals.len() - 1) as f64 / span;
    let done = samples.iter().filter(|s| s.2 <= t1).count();
    st.completion_rate_during_arrivals = done as f64 / span;
    let mut xs = [0.0; GROUPS];
    let mut ys = [0.0; GROUPS];
    for g in 0..GROUPS {
        let part = &samples[g * n / GROUPS..(g + 1) * n / GROUPS];
        let k = part.len() as f64;
        xs[g] = part.iter().map(|s| s.0).sum::<f64>() / k;
        ys[g] = part.iter().map(|s| s.1).sum::<f64>() / k;
    }
    let (slope, t) = regression(&xs, &ys);
    st.queue_delay_first_tenth_ms = ys[0] * 1e3;
    st.queue_delay_last_tenth_ms = ys[GROUPS - 1] * 1e3;
    st.queue_delay_slope_ms_per_s = slope * 1e3;
    st.slope_t_stat = t;
    let grew = ys[GROUPS - 1] - ys[0] > ys[0].max(0.5 * median_service);
    if t > 3.0 && grew {
        st.verdict = "overloaded".into();
        st.explanation = format!(
            "the queue grows through the run: queueing delay rose from {:.0} ms (first tenth) to {:.0} ms (last tenth), \
             {:.1} ms per second of run; offered {:.3} req/s but completed {:.3} req/s while arrivals lasted. \
             Latency percentiles of this run grow with its length and do not describe a steady state: lower the rate \
             or add capacity",
            st.queue_delay_first_tenth_ms,
            st.queue_delay_last_tenth_ms,
            st.queue_delay_slope_ms_per_s,
            st.offered_rate,
            st.completion_rate_during_arrivals
        );
    } else {
        st.verdict = "stable".into();
        st.explanation = format!(
            "no sustained queue growth: queueing delay {:.1} ms (first tenth) vs {:.1} ms (last tenth)",
            st.queue_delay_first_tenth_ms, st.queue_delay_last_tenth_ms
        );
    }
    st
}

/// Least-squares slope of y on x and its t-statistic.
fn regression(x: &[f64], y: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    if sxx <= 0.0 {
        return (0.0, 0.0);
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let sse: f64 = x.iter().zip(y).map(|(xi, yi)| (yi - a - b * xi).powi(2)).sum();
    let se = (sse / (n - 2.0) / sxx).sqrt();
    let t = if se > 0.0 {
        b / se
    } else if b > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    (b, t)
}
