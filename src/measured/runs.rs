//! How a measured serving run sent its requests ([`Arrival`]) and the
//! lengths it is simulated with ([`Lengths`]), as the `[workload]` keys of a
//! scenario: what `servesim calibrate` fits runs known by their aggregate
//! statistics with and what `servesim validate` simulates GPUStack's blocks
//! with.

/// How a measured run sent its requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// A closed loop of this many clients, each sending its next request
    /// when the last one finishes (`--max-concurrency`, GuideLLM's
    /// `synchronous` and `concurrent`, GenAI-Perf's `concurrency`).
    Closed(u32),
    /// Poisson arrivals at this rate, requests per second.
    Poisson(f64),
    /// Gamma-distributed gaps at this rate with this shape (`vllm bench
    /// serve --burstiness`).
    Gamma(f64, f64),
    /// Evenly spaced arrivals at this rate (GuideLLM's `constant`,
    /// perf_analyzer's default `--request-distribution constant`).
    Constant(f64),
    /// Every request at once (`--request-rate inf`, GuideLLM's `throughput`).
    Offline,
}

impl Arrival {
    /// The `[workload]` keys of this arrival process.
    pub fn toml(&self) -> String {
        match self {
            Arrival::Closed(c) => format!("arrival = \"closed-loop\"\nclosed_loop = {{ users = {c} }}\n"),
            Arrival::Poisson(r) => format!("arrival = \"poisson\"\nrate = {r}\n"),
            Arrival::Gamma(r, b) => format!("arrival = \"gamma\"\nrate = {r}\nburstiness = {b}\n"),
            Arrival::Constant(r) => format!("arrival = \"deterministic\"\nrate = {r}\n"),
            Arrival::Offline => "arrival = \"offline\"\n".into(),
        }
    }

    /// A short description for labels: `concurrency 8`, `poisson 2 req/s`.
    pub fn describe(&self) -> String {
        match self {
            Arrival::Closed(c) => format!("concurrency {c}"),
            Arrival::Poisson(r) => format!("poisson {r} req/s"),
            Arrival::Gamma(r, b) => format!("gamma {r} req/s burstiness {b}"),
            Arrival::Constant(r) => format!("constant {r} req/s"),
            Arrival::Offline => "all at once".into(),
        }
    }
}

/// The request lengths of a simulated run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lengths {
    /// Every request has the run's mean prompt and output lengths (rounded;
    /// at least one output token).
    Fixed {
        /// Mean prompt tokens.
        input: f64,
        /// Mean output tokens.
        output: f64,
    },
    /// ShareGPT as `vllm bench serve` samples it (prompt <= 1024, total <=
    /// 2048): lognormal with the run's means and the dispersion of the
    /// filtered ShareGPT table.
    ShareGpt {
        /// Mean prompt tokens.
        input: f64,
        /// Mean output tokens.
        output: f64,
    },
}

impl Lengths {
    /// The `prompt_tokens` and `output_tokens` keys.
    pub fn toml(&self) -> String {
        match *self {
            Lengths::Fixed { input, output } => format!(
                "prompt_tokens = {{ dist = \"fixed\", value = {} }}\noutput_tokens = {{ dist = \"fixed\", value = {} }}\n",
                input.round(),
                output.round().max(1.0)
            ),
            Lengths::ShareGpt { input, output } => format!(
                "prompt_tokens = {{ dist = \"lognormal\", mean = {input:.1}, cv = 0.863 }}\n\
                 output_tokens = {{ dist = \"lognormal\", mean = {output:.1}, cv = 0.642 }}\n"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_and_lengths_write_workload_keys() {
        assert_eq!(Arrival::Closed(8).toml(), "arrival = \"closed-loop\"\nclosed_loop = { users = 8 }\n");
        assert_eq!(Arrival::Poisson(2.5).toml(), "arrival = \"poisson\"\nrate = 2.5\n");
        assert_eq!(Arrival::Constant(4.0).toml(), "arrival = \"deterministic\"\nrate = 4\n");
        assert_eq!(Arrival::Gamma(2.0, 0.5).toml(), "arrival = \"gamma\"\nrate = 2\nburstiness = 0.5\n");
        assert_eq!(Arrival::Offline.toml(), "arrival = \"offline\"\n");
        let fixed = Lengths::Fixed { input: 511.6, output: 0.2 }.toml();
        assert!(fixed.contains("value = 512 }") && fixed.contains("value = 1 }"), "{fixed}");
    }
}
