//! The scenario parser and resolution: any bytes as a scenario file (with an
//! override) must give a scenario or a configuration error, never a panic.
//! A scenario that resolves and is small is also simulated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn catalog() -> &'static Arc<servesim::Catalog> {
    static C: OnceLock<Arc<servesim::Catalog>> = OnceLock::new();
    C.get_or_init(|| Arc::new(servesim::Catalog::builtin().expect("built-in catalogue")))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The first line, if it looks like one, is a --set override.
    let (sets, body) = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with("--set ") => (vec![first[6..].to_string()], rest),
        _ => (Vec::new(), text),
    };
    let Ok(loaded) = servesim::scenario::load_scenario_str_with(body, Path::new("fuzz.toml"), &sets, catalog()) else {
        return;
    };
    let Ok(setup) = servesim::resolve(&loaded.scenario, catalog()) else { return };
    // Simulate only what stays small: the fuzzer must stay fast.
    let small = setup.scenario.num_requests.is_some_and(|n| n <= 200)
        && setup.pools.iter().map(|p| p.replicas).sum::<u32>() <= 8;
    if small {
        let _ = servesim::run_setup(&setup, loaded.scenario.seed);
    }
});
