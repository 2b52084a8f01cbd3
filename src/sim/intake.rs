//! What a request meets on its way in: the classes' token-rate limits at
//! arrival (`Limits`) and its sort key in the waiting queue of the pool it
//! is sent to (`Keyer`).

use crate::Setup;
use crate::config::QueueOrder;
use crate::metrics::RequestRecord;
use crate::rng::Stream;
use crate::workload::stream_seed;

/// The waiting-queue sort key of each request (lower is served first),
/// by the queue order of the pool it waits in.
pub(super) struct Keyer {
    /// Per pool: queue order, priority aging, prediction error.
    pools: Vec<(QueueOrder, Option<f64>, f64)>,
    seed: u64,
    priority: Vec<f64>,
    ttft: Vec<f64>,
}

impl Keyer {
    pub(super) fn new(setup: &Setup, seed: u64) -> Self {
        let classes = &setup.workload.classes;
        Keyer {
            pools: setup
                .pools
                .iter()
                .map(|p| {
                    let e = &p.engine_config;
                    (e.queue_order, e.priority_aging_s, e.prediction_error)
                })
                .collect(),
            seed: Stream::QueueKey.seed(seed),
            priority: classes.iter().map(|c| c.priority as f64).collect(),
            ttft: classes.iter().map(|c| c.slo.as_ref().and_then(|x| x.ttft_ms).map_or(1e12, |t| t * 1e-3)).collect(),
        }
    }

    #[inline]
    pub(super) fn key(&self, pool: u32, id: u32, r: &RequestRecord) -> f64 {
        let c = r.class as usize;
        let (order, aging, sigma) = self.pools[pool as usize];
        match order {
            QueueOrder::Fcfs => 0.0,
            // As vLLM: a lower value is served earlier, ties by arrival
            // (vllm/v1/core/sched/request_queue.py, PriorityRequestQueue).
            // With aging, the effective value p − waited/aging orders like
            // p + arrival/aging at any instant, so the key does not change
            // while waiting.
            QueueOrder::Priority => match aging {
                Some(a) => self.priority[c] + r.arrival / a,
                None => self.priority[c] * 1e12 + r.arrival,
            },
            QueueOrder::ShortestPrompt => r.prompt as f64,
            QueueOrder::ShortestJob => {
                if sigma == 0.0 {
                    r.output as f64
                } else {
                    // A lognormal prediction error, deterministic per request.
                    let u = ((stream_seed(self.seed, id as u64) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                    let z = statrs::function::erf::erfc_inv(2.0 * u) * -std::f64::consts::SQRT_2;
                    r.output as f64 * (sigma * z - sigma * sigma / 2.0).exp()
                }
            }
            QueueOrder::Edf => r.arrival + self.ttft[c],
        }
    }
}

/// Token buckets of the classes with a token rate limit.
pub(super) struct Limits {
    buckets: Vec<Option<(f64, f64, f64, f64)>>,
}

impl Limits {
    pub(super) fn new(setup: &Setup) -> Self {
        Limits { buckets: setup.workload.classes.iter().map(|c| c.token_limit.map(|(r, b)| (r, b, b, 0.0))).collect() }
    }

    /// Takes `tokens` from class `c`'s bucket at `now`; true when the limit refuses them.
    #[inline]
    pub(super) fn take(&mut self, c: u16, now: f64, tokens: f64) -> bool {
        let Some(Some((rate, cap, level, last))) = self.buckets.get_mut(c as usize) else { return false };
        *level = (*level + *rate * (now - *last)).min(*cap);
        *last = now;
        if *level >= tokens {
            *level -= tokens;
            false
        } else {
            true
        }
    }
}
