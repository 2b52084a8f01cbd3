//! `summary.json` must match the committed JSON Schema,
//! `schema/summary.schema.json`. Each test runs the library in-process and
//! validates the serialised `Summary`, so a renamed, added or retyped field
//! fails here until the schema is updated with it.

use serde_json::Value;
use servesim::{Catalog, scenario::load_scenario_str};
use std::path::Path;

const SCHEMA: &str = include_str!("../../schema/summary.schema.json");
const QUICKSTART: &str = include_str!("../../scenarios/quickstart.toml");

/// Offline batch without `[slo]`, two replicas and a short `max_model_len`
/// so some requests are rejected (fills `failures_by_reason`).
const OFFLINE: &str = r#"
name = "offline-schema"
seed = 3
num_requests = 400

[model]
name = "llama-3.1-8b"
dtype = "bf16"

[hardware]
gpu = "h100-sxm"
tp = 1
replicas = 2
router = "round-robin"

[engine]
preset = "legacy"
max_model_len = 2048

[workload]
arrival = "offline"
prompt_tokens = { dist = "lognormal", mean = 1000, cv = 1.0 }
output_tokens = { dist = "lognormal", mean = 250, cv = 0.8 }
"#;

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("schema/summary.schema.json is not valid JSON")
}

/// Runs a scenario text with `--set`-style overrides; returns summary.json as a value.
fn summary_json(text: &str, name: &str, sets: &[&str]) -> Value {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = load_scenario_str(text, Path::new(name), &sets).expect("scenario loads");
    let catalog = Catalog::builtin().expect("builtin catalog");
    // run_setup, not servesim::run: the latter refuses a run with nothing
    // measured, whose summary (a sweep point's, say) must still fit the schema.
    let setup = servesim::resolve(&loaded.scenario, &catalog).expect("scenario resolves");
    let report = servesim::run_setup(&setup, loaded.scenario.seed);
    serde_json::to_value(&report.summary).expect("summary serialises")
}

/// Schema errors as "instance path: message" lines (empty when valid).
fn schema_errors(instance: &Value) -> Vec<String> {
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!("  {}: {e}", if path.is_empty() { "/" } else { &path })
        })
        .collect()
}

fn assert_valid(instance: &Value, what: &str) {
    let errors = schema_errors(instance);
    assert!(
        errors.is_empty(),
        "{what}: summary.json does not match schema/summary.schema.json ({} errors):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn schema_is_valid_draft_2020_12() {
    let schema = schema();
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("schema/summary.schema.json is not a valid JSON Schema: {}: {e}", e.instance_path());
    }
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema["$id"], "https://servesim.dev/schema/summary.schema.json");
}

/// Every object schema is closed and requires all its properties; every
/// property has a description.
#[test]
fn schema_is_strict_and_documented() {
    fn walk(node: &Value, at: &str, problems: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                        problems.push(format!("{at}: additionalProperties is not false"));
                    }
                    let required: Vec<&str> = map
                        .get("required")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    for (key, sub) in props {
                        if !required.contains(&key.as_str()) {
                            problems.push(format!("{at}/properties/{key}: not required"));
                        }
                        if sub.get("description").and_then(Value::as_str).is_none_or(str::is_empty) {
                            problems.push(format!("{at}/properties/{key}: no description"));
                        }
                    }
                }
                for (key, sub) in map {
                    walk(sub, &format!("{at}/{key}"), problems);
                }
            }
            Value::Array(items) => {
                for (i, sub) in items.iter().enumerate() {
                    walk(sub, &format!("{at}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
    let mut problems = Vec::new();
    walk(&schema(), "#", &mut problems);
    assert!(problems.is_empty(), "schema problems:\n  {}", problems.join("\n  "));
}

#[test]
fn quickstart_summary_matches_schema() {
    let json = summary_json(QUICKSTART, "quickstart.toml", &["num_requests=300"]);
    assert_valid(&json, "quickstart (300 requests)");
    assert_eq!(json["num_requests"], 300);
    assert_eq!(json["slo"]["ttft_ms"], 500.0);
    assert!(json["slo"]["e2e_ms"].is_null(), "no E2E objective in quickstart");
    assert!(json["p99.9_ttft_ms"].is_f64(), "flattened percentile key present");
    assert_eq!(json["utilisation"]["requests_per_replica"].as_array().map(Vec::len), Some(1));
}

#[test]
fn overloaded_summary_matches_schema() {
    let json = summary_json(QUICKSTART, "quickstart.toml", &["workload.rate=60", "num_requests=2000"]);
    assert_valid(&json, "quickstart at rate 60 (overloaded)");
    assert_eq!(json["stable"], false);
    assert_eq!(json["stability"]["verdict"], "overloaded");
    assert!(json["stability"]["backlog_growth_low"].as_f64().is_some_and(|g| g > 0.0), "{}", json["stability"]);
}

#[test]
fn offline_summary_without_slo_matches_schema() {
    let json = summary_json(OFFLINE, "offline.toml", &[]);
    assert_valid(&json, "offline, no [slo]");
    assert!(json["slo"].is_null());
    assert!(json["request_goodput"].is_null());
    assert!(json["stable"].is_null());
    assert_eq!(json["stability"]["verdict"], "not_applicable");
    assert!(json["stability"]["backlog_growth"].is_null(), "NaN is written as null");
    assert_eq!(json["utilisation"]["requests_per_replica"].as_array().map(Vec::len), Some(2));
    let failures = json["failures_by_reason"]["exceeds_max_model_len"].as_u64().unwrap_or(0);
    assert!(failures > 0, "max_model_len = 2048 should reject some requests: {}", json["failures_by_reason"]);
    assert_eq!(json["failed"].as_u64(), Some(failures));
}

/// A warm-up longer than an offline batch measures nothing: every latency
/// statistic and ratio is undefined (null) and must still validate.
#[test]
fn summary_with_nothing_measured_matches_schema() {
    // 50 requests at 10 req/s all arrive within the 1000 s warm-up.
    let json = summary_json(QUICKSTART, "quickstart.toml", &["warmup_s=1000", "num_requests=50"]);
    assert_valid(&json, "a run with everything in the warm-up");
    assert_eq!(json["measured_requests"], 0);
    assert_eq!(json["ttft_count"], 0);
    assert!(json["mean_ttft_ms"].is_null());
    assert!(json["cost"]["usd_per_completed_request"].is_null());
}

/// The schema catches drift: a renamed field, a wrong type and an unknown
/// verdict are all reported with their instance paths.
#[test]
fn schema_rejects_drifted_summary() {
    let mut json = summary_json(QUICKSTART, "quickstart.toml", &["num_requests=100"]);
    let obj = json.as_object_mut().unwrap();
    let v = obj.remove("ttft_count").unwrap();
    obj.insert("ttft_n".into(), v);
    json["completed"] = Value::from(-1);
    json["stability"]["verdict"] = Value::from("fine");
    json["utilisation"]["extra"] = Value::from(1);
    let errors = schema_errors(&json).join("\n");
    for needle in ["ttft_count", "ttft_n", "/completed", "/stability/verdict", "/utilisation"] {
        assert!(errors.contains(needle), "expected an error mentioning {needle:?}, got:\n{errors}");
    }
}

/// Per-class metrics (a prefill-only class included), the workload block and
/// prefix-cache fields validate against the schema.
#[test]
fn classes_summary_matches_schema() {
    let text = include_str!("../../scenarios/mixed-classes.toml");
    let json = summary_json(text, "mixed-classes.toml", &["duration_s=120", "engine.prefix_caching=true"]);
    assert_valid(&json, "mixed classes");
    let classes = json["classes"].as_object().expect("classes object");
    assert!(classes.len() >= 3, "{}", classes.len());
    let prefill_only: Vec<&Value> = classes.values().filter(|c| c["prefill_only"] == true).collect();
    assert!(!prefill_only.is_empty(), "a prefill-only class");
    for c in prefill_only {
        assert_eq!(c["items_per_second"], c["request_throughput"]);
        assert_eq!(c["ttr_count"], c["completed"]);
        assert_eq!(c["tpot_count"], 0);
    }
    assert!(json["workload"]["offered_rate"].as_f64().is_some());
    assert!(json["kv_cache"]["prefix_hit_rate"].as_f64().is_some());
}

/// Pools with disaggregation, speculative decoding and swap preemption
/// validate against the schema.
#[test]
fn pools_speculation_and_swap_summaries_match_schema() {
    let dis = summary_json(
        include_str!("../../scenarios/what-if-disaggregation.toml"),
        "what-if-disaggregation.toml",
        &["duration_s=60", "pools[0].tp=2"],
    );
    assert_valid(&dis, "disaggregation");
    // Pools of different tp: no single tp or per-replica KV size describes them.
    assert!(dis["tp"].is_null() && dis["kv_cache"]["blocks_per_replica"].is_null());
    assert!(dis["kv_cache"]["total_blocks"].as_u64().is_some_and(|b| b > 0));
    assert_eq!(dis["pools"].as_array().map(Vec::len), Some(2));
    assert!(dis["disaggregation"]["mean_transfer_ms"].as_f64().is_some());
    let spec = summary_json(
        include_str!("../../scenarios/what-if-speculative.toml"),
        "what-if-speculative.toml",
        &[
            "duration_s=60",
            "engine.preset=\"legacy\"",
            "engine.preemption=\"swap\"",
            "engine.num_gpu_blocks=2000",
            "workload.rate=6",
        ],
    );
    assert_valid(&spec, "speculative decoding with swap");
    assert!(spec["speculative"]["tokens_per_step"].as_f64().is_some_and(|x| x > 1.5));
    assert!(spec["utilisation"]["swapped_out"].as_u64().is_some_and(|x| x > 0), "{}", spec["utilisation"]);
}

/// A fleet that scales, with a warm pool and a scripted failure: the fleet
/// section (replicas and SLO over time, failures) validates.
#[test]
fn fleet_summary_matches_schema() {
    let text = format!(
        "{QUICKSTART}\n[fleet]\npolicy = \"queue\"\ntarget = 8\nmax_replicas = 3\ninterval_s = 5\nwarm_pool = 1\n\
         failures = [{{ at_s = 30, replica = 0, repair_s = 20 }}]\n"
    );
    let json = summary_json(&text, "fleet.toml", &["num_requests=1500", "workload.rate=20"]);
    assert_valid(&json, "quickstart with a fleet");
    assert_eq!(json["fleet"]["policy"], "queue");
    assert_eq!(json["fleet"]["failures"]["failures"], 1);
    assert!(json["fleet"]["replicas_over_time"].as_array().is_some_and(|a| a.len() > 1));
    assert!(json["fleet"]["rescued_requests"].is_i64());
    let plain = summary_json(QUICKSTART, "quickstart.toml", &["num_requests=100"]);
    assert!(plain["fleet"].is_null());
}

/// KV offload tiers: the kv_cache.offload block validates.
#[test]
fn offload_summary_matches_schema() {
    let json = summary_json(
        QUICKSTART,
        "quickstart.toml",
        &[
            "num_requests=500",
            "engine.prefix_caching=true",
            "engine.kv_offload_cpu_gb=4",
            "engine.kv_offload_disk_gb=8",
        ],
    );
    assert_valid(&json, "quickstart with offload tiers");
    assert!(json["kv_cache"]["offload"]["tier_hit_rate"].is_f64());
}

/// LoRA adapters: the lora block validates.
#[test]
fn lora_summary_matches_schema() {
    let json =
        summary_json(QUICKSTART, "quickstart.toml", &["num_requests=500", "lora.adapters=8", "lora.max_loras=2"]);
    assert_valid(&json, "quickstart with LoRA adapters");
    assert_eq!(json["lora"]["adapters"], 8);
}

/// `percentiles` beyond the standard six add `p<P>_<metric>_ms` keys (top
/// level and per class), in ascending order among the standard ones, with
/// values between their neighbours; the summary still validates.
#[test]
fn asked_percentiles_are_added_and_validate() {
    let json = summary_json(QUICKSTART, "quickstart.toml", &["num_requests=400", "percentiles=[99.5, 75, 50]"]);
    assert_valid(&json, "quickstart with percentiles = [99.5, 75, 50]");
    let ttft = |p: &str| json[format!("p{p}_ttft_ms")].as_f64().unwrap_or_else(|| panic!("p{p}_ttft_ms missing"));
    assert!(ttft("50") <= ttft("75") && ttft("75") <= ttft("90"), "{} {} {}", ttft("50"), ttft("75"), ttft("90"));
    assert!(ttft("99") <= ttft("99.5") && ttft("99.5") <= ttft("99.9"));
    assert!(json["p75_itl_ms"].as_f64().is_some() && json["p99.5_e2el_ms"].as_f64().is_some());
    let keys: Vec<&String> = json.as_object().unwrap().keys().filter(|k| k.ends_with("_ttft_ms")).collect();
    let pos = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert!(pos("p50_ttft_ms") < pos("p75_ttft_ms") && pos("p75_ttft_ms") < pos("p90_ttft_ms"), "{keys:?}");
    // Without the key nothing is added.
    let plain = summary_json(QUICKSTART, "quickstart.toml", &["num_requests=400"]);
    assert!(plain.get("p75_ttft_ms").is_none());
    let text = include_str!("../../scenarios/mixed-classes.toml");
    let classes = summary_json(text, "mixed-classes.toml", &["duration_s=60", "percentiles=[80]"]);
    assert_valid(&classes, "mixed classes with percentiles = [80]");
    for (name, c) in classes["classes"].as_object().unwrap() {
        assert!(c.get("p80_ttft_ms").is_some() && c.get("p80_ttr_ms").is_some(), "class {name}");
    }
}
