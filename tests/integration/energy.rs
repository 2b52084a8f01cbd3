//! Energy (Step 10): GPU power follows the work, stays between the idle
//! floor and the board power, and its price and emissions add up.

use crate::common::setup;

const SCENARIO: &str = include_str!("../../scenarios/quickstart.toml");

fn energy(sets: &[&str]) -> servesim::Summary {
    energy_of(SCENARIO, sets)
}

fn energy_of(text: &str, sets: &[&str]) -> servesim::Summary {
    let s = setup(text, sets);
    servesim::run_setup(&s, s.scenario.seed).summary
}

#[test]
fn energy_is_monotone_in_work() {
    // The same 120 s window, more and more requests (all below the default
    // engine's capacity of about 7 req/s): more energy, and each
    // GPU between its idle floor (0.32 × 700 W) and its board power.
    let window = SCENARIO.replace("num_requests = 2000\n", "duration_s = 120\n");
    assert_ne!(window, SCENARIO);
    let mut last = 0.0;
    for rate in ["1", "2", "4", "6"] {
        let rate_set = format!("workload.rate={rate}");
        let s = energy_of(&window, &[&rate_set]);
        let e = &s.energy;
        assert!(e.kwh > last, "rate {rate}: {} kWh after {last}", e.kwh);
        last = e.kwh;
        let floor = servesim::energy::POWER.idle * 700.0;
        assert!(e.mean_power_w_per_gpu >= floor - 1e-9 && e.mean_power_w_per_gpu <= 700.0 + 1e-9, "{e:?}");
        assert!(e.joules_per_output_token.unwrap() > 0.0);
    }
    // Twice the replicas for the same work: the idle floor of the second
    // replica costs energy.
    let one = energy_of(&window, &["workload.rate=4"]).energy;
    let two = energy_of(&window, &["workload.rate=4", "hardware.replicas=2"]).energy;
    assert!(two.kwh > one.kwh, "{} vs {}", two.kwh, one.kwh);
}

#[test]
fn electricity_price_and_carbon_add_up() {
    let base = energy(&[]);
    let priced = energy(&["hardware.usd_per_kwh=0.12", "hardware.grid_gco2_per_kwh=400"]);
    let (e, c) = (&priced.energy, &priced.cost);
    assert_eq!(e.kwh, base.energy.kwh, "the price changes no energy");
    assert!((e.usd - e.kwh * 0.12).abs() < 1e-12);
    assert!((c.total_usd - (base.cost.total_usd + e.usd)).abs() < 1e-12, "energy is inside the cost");
    assert!(c.usd_per_million_output_tokens > base.cost.usd_per_million_output_tokens);
    assert!((e.kg_co2.unwrap() - e.kwh * 0.4).abs() < 1e-12);
    // Unset: no energy cost, no emissions figure, the cost as before.
    assert_eq!(base.energy.usd, 0.0);
    assert!(base.energy.kg_co2.is_none());
}
