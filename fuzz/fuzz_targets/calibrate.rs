//! `servesim calibrate`'s input readers (per-step CSV, Splitwise profiles,
//! `vllm bench serve` JSON, offline tables): any bytes give a calibration
//! problem or a configuration error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::OnceLock;

struct Fixture {
    catalog: servesim::Catalog,
    scenario: servesim::scenario::LoadedScenario,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture {
        catalog: servesim::Catalog::builtin().expect("built-in catalogue"),
        scenario: servesim::scenario::load_scenario_str(
            include_str!("../../scenarios/quickstart.toml"),
            Path::new("quickstart.toml"),
            &[],
        )
        .expect("quickstart loads"),
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let f = fixture();
    for scenario in [Some(&f.scenario), None] {
        let _ = servesim::calibrate::inputs::from_text(Path::new("fuzz.csv"), text, &f.catalog, scenario, "vllm-v1");
    }
});
