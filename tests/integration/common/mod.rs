//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod browser;

use servesim::scenario::load_scenario_str;
use servesim::{Catalog, Report, Setup};
use std::path::Path;

/// Resolves a scenario given as TOML text plus `--set` overrides.
pub fn setup(toml: &str, sets: &[&str]) -> Setup {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = load_scenario_str(toml, Path::new("test.toml"), &sets).unwrap_or_else(|e| panic!("{e}"));
    servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

/// The error a scenario text with `--set` overrides gets from loading or
/// resolving it (empty when it is accepted).
pub fn config_error(toml: &str, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    match load_scenario_str(toml, Path::new("t.toml"), &sets) {
        Err(e) => e.to_string(),
        Ok(l) => servesim::resolve(&l.scenario, &Catalog::builtin().unwrap())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default(),
    }
}

/// Runs a scenario given as TOML text plus overrides.
pub fn run(toml: &str, sets: &[&str]) -> Report {
    let s = setup(toml, sets);
    servesim::run_setup(&s, s.scenario.seed)
}

/// A single-server queue: batch of one, one-token outputs, so every request
/// is served by exactly one engine step (10 ms, constant).
pub const SINGLE_SERVER: &str = servesim::detection::SINGLE_SERVER;

/// Runs the servesim binary with `args` in folder `cwd`.
pub fn servesim_in(cwd: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run servesim")
}

/// (exit code, stdout, stderr) of a servesim run; fails on a Rust panic.
pub fn outcome(o: &std::process::Output) -> (i32, String, String) {
    let (so, se) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!se.contains("panicked"), "servesim panicked: {se}");
    (o.status.code().unwrap_or(-1), so, se)
}

/// Mean of a slice.
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}
