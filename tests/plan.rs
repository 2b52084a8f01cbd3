//! Capacity search against the M/M/1 oracle, and plan search sanity.

mod common;
use servesim::config::load_scenario_str;
use servesim::plan::{capacity, judge, plan};
use servesim::{Catalog, run_setup};
use std::path::Path;

/// M/M/1 with μ = 100/s and an objective on p99 sojourn (= E2E) of 100 ms:
/// sojourn ~ Exp(μ − λ), so p99 = ln(100)/(μ − λ) ≤ 0.1 s ⇔ λ ≤ 100 − 46.05.
const MM1: &str = r#"
name = "mm1-capacity"
seed = 4
num_requests = 60000
[model]
name = "llama-3.1-8b"
[engine]
max_num_seqs = 1
[cost]
model = "exponential"
step_overhead_ms = 0
step_time_ms = 10
[workload]
arrival = "poisson"
rate = 30
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 1 }
[slo]
e2e_ms = 100
percentile = 99
"#;

#[test]
fn capacity_matches_the_mm1_percentile_oracle() {
    let loaded = load_scenario_str(MM1, Path::new("mm1.toml"), &[]).unwrap();
    let c = capacity(&loaded, &Catalog::builtin().unwrap(), 4, 0.01).unwrap();
    let want = 100.0 - 100f64.ln() / 0.1;
    assert!((c.rate.mean / want - 1.0).abs() < 0.05, "capacity {:?} vs M/M/1 {want}", c.rate);
    assert!(c.rate.ci_lo < c.rate.mean && c.rate.mean < c.rate.ci_hi);
    assert_eq!(c.per_replication.len(), 4);
}

#[test]
fn plan_picks_the_fewest_replicas_that_meet_the_slo() {
    // 4 single-server replicas of 10 ms steps behind least-outstanding routing at 150 req/s.
    let text = MM1.replace("model = \"exponential\"", "model = \"constant\"").replace("e2e_ms = 100", "e2e_ms = 40")
        + "[plan]\nrate = 150\nmax_replicas = 16\n";
    let text = text
        .replace("[engine]", "[hardware]\nrouter = \"least-outstanding\"\n[engine]")
        .replace("num_requests = 60000", "num_requests = 20000");
    let loaded = load_scenario_str(&text, Path::new("plan.toml"), &[]).unwrap();
    let catalog = Catalog::builtin().unwrap();
    let p = plan(&loaded, &catalog).unwrap();
    let c = &p.candidates[0];
    let n = c.replicas.expect("a replica count");
    assert!(n >= 2, "150 req/s cannot fit one server of 100 req/s");
    let slo = loaded.scenario.slo.clone().unwrap();
    let at = |k: u32| {
        let s = loaded
            .derive(
                &[
                    ("hardware.replicas".into(), toml::Value::Integer(k as i64)),
                    ("workload.rate".into(), toml::Value::Float(150.0)),
                ],
                "t",
            )
            .unwrap();
        let setup = servesim::resolve(&s, &catalog).unwrap();
        judge(&run_setup(&setup, s.seed).summary, &slo)
    };
    assert!(at(n).meets);
    assert!(!at(n - 1).meets, "{} replicas already meet the SLO", n - 1);
    assert_eq!(c.gpus, Some(n));
    assert!(c.one_fewer.as_ref().is_some_and(|v| !v.meets));
}
