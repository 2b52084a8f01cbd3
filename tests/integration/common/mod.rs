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
/// is served by exactly one engine step (10 ms, constant).
pub const SINGLE_SERVER: &str = servesim::detection::SINGLE_SERVER;

/// Mean of a slice.
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}
