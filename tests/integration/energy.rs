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

/// A GPU that holds the model but runs nothing for minutes draws the
/// loaded-idle power (0.16 × TDP), not the busy engine's floor between steps
/// (0.32 × TDP): one request every few minutes leaves the replica's mean
/// power well under the floor (review: charged the serving floor throughout).
#[test]
fn a_replica_idle_for_minutes_draws_loaded_idle_power() {
    let window = SCENARIO.replace("num_requests = 2000\n", "duration_s = 3600\n");
    let s = energy_of(&window, &["workload.rate=0.005"]);
    let (loaded, floor) = (servesim::energy::LOADED_IDLE * 700.0, servesim::energy::POWER.idle * 700.0);
    let p = s.energy.mean_power_w_per_gpu;
    assert!(p > loaded && p < 0.5 * (loaded + floor), "{p} W between {loaded} and {floor}");
    assert!(s.energy.power_model.contains("idle over 60 s"), "{}", s.energy.power_model);
}

/// Warm standbys hold the model and serve nothing: each adds exactly the
/// loaded-idle power of its GPUs over the window (review: charged the
/// serving floor).
#[test]
fn warm_standbys_draw_loaded_idle_power() {
    // A fleet that never scales (min = max = 1): the standbys change nothing else.
    let fleet =
        format!("{SCENARIO}\n[fleet]\npolicy = \"utilisation\"\ntarget = 0.7\nmin_replicas = 1\nmax_replicas = 1\n");
    let none = energy_of(&fleet, &[]);
    let three = energy_of(&fleet, &["fleet.warm_pool=3"]);
    let extra_j = (three.energy.kwh - none.energy.kwh) * 3.6e6;
    let want = 3.0 * 700.0 * servesim::energy::LOADED_IDLE * three.duration;
    assert!((extra_j / want - 1.0).abs() < 1e-9, "{extra_j} J vs {want} J");
}
