//! Helpers shared by the integration tests.
#![allow(dead_code)]

use servesim::config::load_scenario_str;
use servesim::{Catalog, Report, Setup};
use std::path::Path;

/// Resolves a scenario given as TOML text plus `--set` overrides.
pub fn setup(toml: &str, sets: &[&str]) -> Setup {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = load_scenario_str(toml, Path::new("test.toml"), &sets).unwrap_or_else(|e| panic!("{e}"));
    servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs a scenario given as TOML text plus overrides.
pub fn run(toml: &str, sets: &[&str]) -> Report {
    let s = setup(toml, sets);
    servesim::run_setup(&s, s.scenario.seed)
}

/// A single-server queue: batch of one, one-token outputs, so every request
/// is served by exactly one engine step.
pub const SINGLE_SERVER: &str = r#"
name = "single-server"
seed = 1
num_requests = 1000
[model]
name = "llama-3.1-8b"
[engine]
max_num_seqs = 1
[cost]
model = "constant"
step_overhead_ms = 0
step_time_ms = 10
[workload]
arrival = "poisson"
rate = 60
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 1 }
"#;

/// Mean of a slice.
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}
