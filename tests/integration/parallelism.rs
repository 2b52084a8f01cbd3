//! Pipeline and expert parallelism through the whole simulator: GPU counts,
//! costs, latencies and the configuration errors of bad layouts.

use crate::common;

use common::{run, setup};
use servesim::scenario::load_scenario_str;
use servesim::{Catalog, Report};
use std::path::Path;

/// A light load, almost always one request at a time (a request lasts about
/// 0.5 s, arrivals are 50 s apart on average).
const LIGHT: &str = r#"
seed = 5
num_requests = 30
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[workload]
arrival = "poisson"
rate = 0.02
prompt_tokens = { dist = "fixed", value = 512 }
output_tokens = { dist = "fixed", value = 64 }
"#;

fn tpot(r: &Report) -> f64 {
    r.summary.metrics.tpot.dist.mean
}

#[test]
fn gpu_count_and_cost_cover_every_stage() {
    let flat = run(LIGHT, &["hardware.replicas=2"]);
    let piped = run(LIGHT, &["hardware.replicas=2", "hardware.pp=2"]);
    assert_eq!(flat.summary.cost.num_gpus, 2);
    assert_eq!(piped.summary.cost.num_gpus, 4);
    let per_gpu_hour = |r: &Report| r.summary.cost.gpu_hours / r.summary.duration * 3600.0;
    assert!((per_gpu_hour(&piped) - 4.0).abs() < 1e-9);
    assert!(piped.summary.cost.total_usd > 1.9 * flat.summary.cost.total_usd);
    assert_eq!(piped.setup.pools[0].memory.gpus_per_replica, 2);
}

#[test]
fn a_pipeline_does_not_speed_up_one_sequence_but_tensor_parallelism_does() {
    let flat = run(LIGHT, &[]);
    let pp2 = run(LIGHT, &["hardware.pp=2"]);
    let tp2 = run(LIGHT, &["hardware.tp=2"]);
    // One decoding sequence cannot be split into micro-batches: the two stages
    // run one after the other (plus a hand-over), as slow as one GPU.
    let r = tpot(&pp2) / tpot(&flat);
    assert!((1.0..1.05).contains(&r), "pp2 TPOT {} vs flat {}", tpot(&pp2), tpot(&flat));
    assert!(tpot(&tp2) < 0.8 * tpot(&flat), "tp2 TPOT {} vs flat {}", tpot(&tp2), tpot(&flat));
    // (tp2: half the weight reads per GPU, plus 64 all-reduces and the fixed overhead.)
    // But each pipeline GPU holds half the layers: far more KV tokens per replica.
    assert!(pp2.setup.pools[0].memory.kv_capacity_tokens > 2 * flat.setup.pools[0].memory.kv_capacity_tokens);
}

#[test]
fn expert_parallel_mixtral_runs_and_pays_for_all_to_all() {
    let tp = run(LIGHT, &["model.name=\"mixtral-8x7b\"", "hardware.tp=2"]);
    let ep = run(LIGHT, &["model.name=\"mixtral-8x7b\"", "hardware.tp=2", "hardware.expert_parallel=true"]);
    assert_eq!(ep.setup.pools[0].memory.experts_per_gpu, 4);
    assert!(tpot(&ep) > tpot(&tp), "EP TPOT {} vs TP {}", tpot(&ep), tpot(&tp));
    assert_eq!(ep.output.records.len(), tp.output.records.len());
}

fn resolve_err(sets: &[&str]) -> servesim::error::ConfigError {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    match load_scenario_str(LIGHT, Path::new("t.toml"), &sets) {
        Err(e) => e,
        Ok(l) => servesim::resolve(&l.scenario, &Catalog::builtin().unwrap()).expect_err("should be rejected"),
    }
}

#[test]
fn bad_layouts_are_config_errors_naming_the_key() {
    for (sets, key) in [
        (vec!["hardware.expert_parallel=true"], "hardware.expert_parallel"),
        (vec!["hardware.pp=0"], "hardware.pp"),
        (vec!["hardware.pp=64"], "hardware.pp"),
        (vec!["hardware.micro_batches=0"], "hardware.micro_batches"),
    ] {
        let e = resolve_err(&sets);
        assert_eq!(e.key.as_deref(), Some(key), "{sets:?}: {e}");
        assert!(e.hint.is_some(), "{sets:?}: no fix offered");
    }
    // Micro-batches alone are fine (and cost more weight reads).
    let s = setup(LIGHT, &["hardware.pp=2", "hardware.micro_batches=4"]);
    assert_eq!(s.scenario.hardware.micro_batches(), 4);
}
