//! Request streams: arrival times and prompt/output lengths.
//!
//! Requests are produced lazily, in arrival order, as the simulation consumes
//! them. Each random quantity has its own stream (a PCG-64 MCG generator
//! seeded from the scenario seed and a fixed stream number), so changing
//! the length distribution does not shift the arrival times and vice versa
//! (common random numbers across configurations).

mod dist;

pub use dist::{ArrivalSampler, LengthSampler, stream_seed};

use crate::config::{ArrivalKind, Scenario};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// One generated request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSpec {
    /// Arrival time, seconds.
    pub arrival: f64,
    /// Prompt tokens.
    pub prompt: u32,
    /// Output tokens.
    pub output: u32,
}

/// Random stream numbers.
const STREAM_ARRIVALS: u64 = 1;
const STREAM_PROMPT: u64 = 2;
const STREAM_OUTPUT: u64 = 3;

/// A lazy, deterministic request generator.
pub struct Generator {
    arrivals: ArrivalSampler,
    prompt: LengthSampler,
    output: LengthSampler,
    rng_a: Pcg64Mcg,
    rng_p: Pcg64Mcg,
    rng_o: Pcg64Mcg,
    t: f64,
    emitted: u64,
    max_requests: Option<u64>,
    horizon: Option<f64>,
}

impl Generator {
    /// The request stream of a scenario with the given seed.
    pub fn new(s: &Scenario, seed: u64) -> Self {
        let w = &s.workload;
        let arrivals = match w.arrival {
            ArrivalKind::Offline => ArrivalSampler::Offline,
            ArrivalKind::Poisson => ArrivalSampler::poisson(w.rate.unwrap_or(1.0)),
            ArrivalKind::Gamma => {
                let cv = w.cv.unwrap_or_else(|| 1.0 / w.burstiness.unwrap_or(1.0).sqrt());
                ArrivalSampler::gamma(w.rate.unwrap_or(1.0), cv)
            }
        };
        Generator {
            arrivals,
            prompt: LengthSampler::new(&w.prompt_tokens),
            output: LengthSampler::new(&w.output_tokens),
            rng_a: Pcg64Mcg::seed_from_u64(stream_seed(seed, STREAM_ARRIVALS)),
            rng_p: Pcg64Mcg::seed_from_u64(stream_seed(seed, STREAM_PROMPT)),
            rng_o: Pcg64Mcg::seed_from_u64(stream_seed(seed, STREAM_OUTPUT)),
            t: 0.0,
            emitted: 0,
            max_requests: s.num_requests,
            horizon: s.duration_s,
        }
    }

    /// Upper bound on the number of requests, when known in advance.
    pub fn size_hint_total(&self) -> Option<u64> {
        self.max_requests
    }
}

impl Iterator for Generator {
    type Item = RequestSpec;

    fn next(&mut self) -> Option<RequestSpec> {
        if self.max_requests.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        let t = self.t + self.arrivals.gap(&mut self.rng_a);
        if self.horizon.is_some_and(|h| t > h) {
            return None;
        }
        self.t = t;
        self.emitted += 1;
        Some(RequestSpec {
            arrival: t,
            prompt: self.prompt.sample(&mut self.rng_p),
            output: self.output.sample(&mut self.rng_o),
        })
    }
}
