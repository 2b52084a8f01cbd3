//! Every random stream of a run, by name, in one table.
//!
//! Each stream is seeded with `stream_seed(scenario seed, id)`. The ids of
//! the named streams are fixed numbers, kept from earlier versions so that
//! results stay value-stable. A family of streams (one per replica or per
//! class) takes its index in a range of its own, above 2³², so no index can
//! reach another stream's id. Adding a replica or a class adds a stream and
//! leaves the others' untouched.
//!
//! The per-class streams (prompt and output lengths, turns and think
//! times) keep the ids of the old shared streams for class 0, so a
//! single-class scenario draws exactly what it drew before they were split.

/// Seed of random stream `stream` for scenario seed `seed` (SplitMix64 mix),
/// so streams are independent and stable across versions.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A random stream of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Arrival times of the shared arrival process.
    Arrivals,
    /// Prompt lengths of class `i` (and a session's new tokens per turn).
    Prompt(u32),
    /// Output lengths of class `i`.
    Output(u32),
    /// Which class a shared-process arrival belongs to.
    Class,
    /// Think times of class `i`'s users and sessions.
    Think(u32),
    /// Turns per conversation of class `i`.
    Turns(u32),
    /// Which trace row a replayed request takes.
    Trace,
    /// Shortest-job-first's predicted output lengths (`engine.prediction_error`).
    QueueKey,
    /// The entry router (random and power-of-two choices).
    Router,
    /// The router of decode pools.
    DecodeRouter,
    /// Speculative decoding's accepted runs.
    Speculative,
    /// Arrival times of class `i`'s own arrival process.
    ClassProcess(u32),
    /// The exponential step-time model of replica `r`.
    ReplicaStep(u32),
    /// Random failures of fleet slot `r` (`fleet.mtbf_h`).
    Failures(u32),
    /// The LoRA adapter each request names.
    Lora,
}

impl Stream {
    /// Every named stream (of the families, class 0 only), for the collision test.
    pub const NAMED: [Stream; 12] = [
        Stream::Arrivals,
        Stream::Prompt(0),
        Stream::Output(0),
        Stream::Class,
        Stream::Think(0),
        Stream::Turns(0),
        Stream::Trace,
        Stream::QueueKey,
        Stream::Router,
        Stream::DecodeRouter,
        Stream::Speculative,
        Stream::Lora,
    ];

    /// The stream's id: distinct for every stream and index.
    pub fn id(self) -> u64 {
        const FAMILY: u64 = 1 << 32;
        match self {
            Stream::Arrivals => 1,
            Stream::Prompt(0) => 2,
            Stream::Output(0) => 3,
            Stream::Class => 4,
            Stream::Think(0) => 5,
            Stream::Turns(0) => 6,
            Stream::Trace => 7,
            Stream::QueueKey => 200,
            Stream::Router => 300,
            Stream::DecodeRouter => 301,
            Stream::Speculative => 400,
            Stream::Lora => 500,
            Stream::ClassProcess(i) => FAMILY + i as u64,
            Stream::ReplicaStep(r) => 2 * FAMILY + r as u64,
            Stream::Prompt(i) => 3 * FAMILY + i as u64,
            Stream::Output(i) => 4 * FAMILY + i as u64,
            Stream::Think(i) => 5 * FAMILY + i as u64,
            Stream::Turns(i) => 6 * FAMILY + i as u64,
            Stream::Failures(i) => 7 * FAMILY + i as u64,
        }
    }

    /// Seed of this stream for scenario seed `seed`.
    pub fn seed(self, seed: u64) -> u64 {
        stream_seed(seed, self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn no_two_streams_share_an_id() {
        let mut ids = HashSet::new();
        let families = (0..100_000u32).flat_map(|i| {
            let per_class = [Stream::Prompt(i), Stream::Output(i), Stream::Think(i), Stream::Turns(i)];
            [Stream::ClassProcess(i), Stream::ReplicaStep(i), Stream::Failures(i)]
                .into_iter()
                .chain(per_class.into_iter().filter(move |_| i > 0))
        });
        for s in Stream::NAMED.into_iter().chain(families).chain([Stream::ReplicaStep(u32::MAX)]) {
            assert!(ids.insert(s.id()), "{s:?} reuses id {}", s.id());
        }
        // The case a review found: replica 200's exponential steps and the router.
        assert_ne!(Stream::ReplicaStep(200).seed(7), Stream::Router.seed(7));
    }
}
