//! LoRA adapters (Step 10): one adapter everywhere is the base model, a
//! batch never mixes more adapters than the engine has slots, adapter-aware
//! routing finds loaded adapters, and adapter memory comes out of the KV cache.

use crate::common::{run, setup};
use servesim::metrics::Status;

const QUICK: &str = include_str!("../../scenarios/quickstart.toml");
const TWO: &[&str] =
    &["num_requests=3000", "hardware.replicas=2", "workload.rate=20", "hardware.router=\"least-outstanding\""];

fn with(extra: &[&str]) -> servesim::Report {
    let sets: Vec<&str> = TWO.iter().chain(extra).copied().collect();
    run(QUICK, &sets)
}

#[test]
fn one_adapter_everywhere_is_no_lora() {
    let base = with(&[]);
    for extra in [
        &["lora.adapters=1"][..],
        &["lora.adapters=1", "lora.max_loras=4", "lora.router_affinity=true", "lora.rank=64"],
    ] {
        let one = with(extra);
        for (a, b) in base.output.records.iter().zip(&one.output.records) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{extra:?}");
        }
        let mut a = serde_json::to_value(&one.summary).unwrap();
        let l = a.as_object_mut().unwrap().insert("lora".into(), serde_json::Value::Null).unwrap();
        assert_eq!(l["merged"], true);
        assert_eq!(a, serde_json::to_value(&base.summary).unwrap(), "{extra:?}");
    }
}

#[test]
fn batches_never_mix_more_adapters_than_slots() {
    for slots in [1u32, 4, 8] {
        let set = format!("lora.max_loras={slots}");
        let rep = with(&["lora.adapters=20", &set, "lora.max_cpu_loras=20"]);
        let l = rep.summary.lora.as_ref().unwrap();
        for r in &rep.output.replicas {
            assert!(r.lora.adapter_steps <= r.steps * slots as u64, "{slots} slots: {:?}", r.lora);
        }
        assert!(l.mean_adapters_per_step <= slots as f64 && l.mean_adapters_per_step > 0.5);
        assert!(rep.output.records.iter().all(|r| r.status == Status::Completed));
        // Every admission either found its adapter or loaded it.
        let loads = l.host_loads + l.storage_loads;
        assert!(loads > 0 && l.gpu_hit_rate < 1.0);
        // Storage loads at most once per adapter per replica while the host cache holds them all.
        assert!(l.storage_loads <= 20 * 2, "{l:?}");
        assert!(l.time_share > 0.0 && l.time_share < 0.5);
    }
}

#[test]
fn more_slots_and_adapter_aware_routing_help() {
    let few = with(&["lora.adapters=20", "lora.max_loras=4", "lora.max_cpu_loras=20"]);
    let routed = with(&["lora.adapters=20", "lora.max_loras=4", "lora.max_cpu_loras=20", "lora.router_affinity=true"]);
    let many = with(&["lora.adapters=20", "lora.max_loras=20"]);
    let att = |r: &servesim::Report| r.summary.metrics.slo.as_ref().unwrap().attainment;
    let hit = |r: &servesim::Report| r.summary.lora.as_ref().unwrap().gpu_hit_rate;
    assert!(hit(&routed) > hit(&few), "{} vs {}", hit(&routed), hit(&few));
    assert!(att(&many) > att(&few), "{} vs {}", att(&many), att(&few));
    assert_eq!(many.summary.lora.as_ref().unwrap().slot_waits, 0);
    // The adapters' slots take KV memory.
    assert!(many.summary.kv_cache.blocks_per_replica < with(&[]).summary.kv_cache.blocks_per_replica);
}

#[test]
fn bad_lora_values_name_the_key() {
    for (set, key) in [
        ("lora.adapters=0", "lora.adapters"),
        ("lora.max_loras=4", ""),
        ("lora.kernel_efficiency=2", "lora.kernel_efficiency"),
    ] {
        let err = crate::common::config_error(QUICK, &[set, "lora.max_cpu_loras=2"]);
        let key = if key.is_empty() { "lora.max_cpu_loras" } else { key };
        assert!(err.contains(key), "{set}: {err}");
    }
    let _ = setup(QUICK, &["lora.adapters=3"]);
}
