//! The aggregate readers on the fixtures of tests/data/calibrate/ (hand
//! written in each tool's schema, not measurements) and on broken variants.

use super::*;
use crate::calibrate::How;
use crate::calibrate::inputs::{Format, detect, from_text};
use serde_json::json;

const VLLM: &str = include_str!("../../../tests/data/calibrate/vllm_aggregate.json");
const GUIDELLM: &str = include_str!("../../../tests/data/calibrate/guidellm_report.json");
const GENAI: &str = include_str!("../../../tests/data/calibrate/genai_perf_profile_export_genai_perf.json");
const TABLE: &str = include_str!("../../../tests/data/calibrate/serving_results.csv");
const SCENARIO: &str = include_str!("../../../tests/data/calibrate/scenario.toml");

fn scenario() -> LoadedScenario {
    crate::scenario::load_scenario_str(SCENARIO, Path::new("scenario.toml"), &[]).unwrap()
}

fn read(name: &str, text: &str) -> Result<Problem, ConfigError> {
    let catalog = Catalog::builtin().unwrap();
    from_text(Path::new(name), text, &catalog, Some(&scenario()), "vllm-v1")
}

fn labels(p: &Problem) -> Vec<&str> {
    p.points.iter().map(|q| q.label.as_str()).collect()
}

fn measured(p: &Problem, label: &str) -> f64 {
    p.points.iter().find(|q| q.label == label).unwrap_or_else(|| panic!("no point {label}: {:?}", labels(p))).measured
}

/// `text` with the JSON object `edit` merged over its top level.
fn edited(text: &str, edit: serde_json::Value) -> String {
    let mut doc: Value = serde_json::from_str(text).unwrap();
    for (k, v) in edit.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc.to_string()
}

fn err(name: &str, text: &str) -> ConfigError {
    let e = read(name, text).expect_err("an error");
    assert_eq!(e.file.as_deref(), Some(Path::new(name)), "{e:?}");
    assert!(e.hint.is_some(), "an error with a fix: {e:?}");
    e
}

#[test]
fn detect_tells_the_formats_apart() {
    let p = Path::new("f");
    assert_eq!(detect(p, VLLM).unwrap(), Format::VllmAggregate);
    assert_eq!(detect(p, GUIDELLM).unwrap(), Format::GuideLlm);
    assert_eq!(detect(p, GENAI).unwrap(), Format::GenAiPerf);
    assert_eq!(detect(p, TABLE).unwrap(), Format::ServingTable);
    // Per-request arrays: the --save-detailed reader, as before.
    assert_eq!(detect(p, &edited(VLLM, json!({"ttfts": [0.1], "itls": [[0.01]]}))).unwrap(), Format::BenchJson);
    assert_eq!(detect(p, "{ not json").unwrap(), Format::BenchJson);
    assert_eq!(detect(p, "{\"something\": 1}").unwrap(), Format::BenchJson);
    let e = detect(p, "a,b\n1,2\n").unwrap_err();
    let hint = e.hint.unwrap();
    assert!(hint.contains("GuideLLM") && hint.contains("GenAI-Perf") && hint.contains("successful_requests"), "{hint}");
}

#[test]
fn vllm_aggregate_fits_its_medians_percentiles_and_throughput() {
    let p = read("r.json", VLLM).unwrap();
    assert_eq!(labels(&p), ["TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99", "output tok/s"]);
    let doc: Value = serde_json::from_str(VLLM).unwrap();
    assert_eq!(measured(&p, "TTFT p50"), doc["median_ttft_ms"].as_f64().unwrap());
    assert_eq!(measured(&p, "TPOT p99"), doc["p99_tpot_ms"].as_f64().unwrap());
    assert_eq!(measured(&p, "output tok/s"), doc["output_throughput"].as_f64().unwrap());
    // One run, folds by quantity.
    assert_eq!(p.sims.len(), 1);
    assert_eq!(p.points.iter().filter(|q| q.group == "TTFT").count(), 2);
    assert!(p.points.iter().all(|q| matches!(q.how, How::Sim { sim: 0, .. })));
    let text = &p.sims[0].text;
    for want in [
        "num_requests = 40",
        "arrival = \"closed-loop\"\nclosed_loop = { users = 4 }",
        "prompt_tokens = { dist = \"fixed\", value = 512 }",
        "output_tokens = { dist = \"fixed\", value = 128 }",
        "preset = \"vllm-v1\"",
        "name = \"llama-3.1-8b\"",
    ] {
        assert!(text.contains(want), "{want} in\n{text}");
    }
    assert!(p.notes[0].contains("512 prompt and 128 output tokens"), "{:?}", p.notes);
    // The scenario loads as it is.
    let cat = std::sync::Arc::new(Catalog::builtin().unwrap());
    crate::scenario::load_scenario_str_with(text, Path::new("t.toml"), &[], &cat).unwrap();
}

#[test]
fn vllm_aggregate_arrival_follows_the_recorded_settings() {
    let sim = |edit| read("r.json", &edited(VLLM, edit)).unwrap().sims[0].text.clone();
    let poisson = sim(json!({"max_concurrency": null, "request_rate": 2.5}));
    assert!(poisson.contains("arrival = \"poisson\"\nrate = 2.5\n"), "{poisson}");
    let gamma = sim(json!({"max_concurrency": null, "request_rate": 2.5, "burstiness": 0.5}));
    assert!(gamma.contains("arrival = \"gamma\"\nrate = 2.5\nburstiness = 0.5\n"), "{gamma}");
    let offline = sim(json!({"max_concurrency": null, "request_rate": "inf"}));
    assert!(offline.contains("arrival = \"offline\"\n"), "{offline}");
    // Both a concurrency and a rate: the closed loop, and a note.
    let p = read("r.json", &edited(VLLM, json!({"request_rate": 3.0}))).unwrap();
    assert!(p.sims[0].text.contains("users = 4"));
    assert!(p.notes.iter().any(|n| n.contains("3 req/s")), "{:?}", p.notes);
    // Other percentiles: those from the median up.
    let p = read("r.json", &edited(VLLM, json!({"p90_ttft_ms": 100.0, "p25_ttft_ms": 40.0, "p99.9_itl_ms": 20.0})))
        .unwrap();
    assert_eq!(measured(&p, "TTFT p90"), 100.0);
    assert_eq!(measured(&p, "ITL p99.9"), 20.0);
    assert!(!labels(&p).contains(&"TTFT p25"));
}

#[test]
fn vllm_aggregate_errors_name_the_key_and_the_fix() {
    let e = err("r.json", &edited(VLLM, json!({"completed": 0})));
    assert!(e.message.contains("no completed requests"), "{e:?}");
    let mut doc: Value = serde_json::from_str(VLLM).unwrap();
    doc.as_object_mut().unwrap().remove("total_input_tokens");
    let e = err("r.json", &doc.to_string());
    assert!(e.message.contains("`total_input_tokens`"), "{e:?}");
    let e = err("r.json", &edited(VLLM, json!({"ramp_up_strategy": "linear"})));
    assert!(e.message.contains("ramp"), "{e:?}");
    let e = err("r.json", "{\"completed\": 10, \"total_input_tokens\": 1000, \"total_output_tokens\": 100}");
    assert!(e.message.contains("no TTFT, TPOT, ITL"), "{e:?}");
    let e = err("r.json", &edited(VLLM, json!({"total_input_tokens": 0})));
    assert!(e.message.contains("prompt"), "{e:?}");
    // Without a scenario: which model and GPU ran is not in the file.
    let catalog = Catalog::builtin().unwrap();
    let e = from_text(Path::new("r.json"), VLLM, &catalog, None, "vllm-v1").unwrap_err();
    assert!(e.message.contains("--scenario"), "{e:?}");
}

#[test]
fn guidellm_benchmarks_become_one_run_each() {
    let p = read("g.json", GUIDELLM).unwrap();
    assert_eq!(p.sims.len(), 3);
    let arrivals = ["closed_loop = { users = 1 }", "closed_loop = { users = 4 }", "arrival = \"poisson\"\nrate = 2\n"];
    for (sim, want) in p.sims.iter().zip(arrivals) {
        assert!(sim.text.contains(want), "{want} in\n{}", sim.text);
        assert!(sim.text.contains("value = 512") && sim.text.contains("value = 128"), "{}", sim.text);
    }
    assert!(p.sims[0].text.contains("num_requests = 20") && p.sims[1].text.contains("num_requests = 40"));
    let doc: Value = serde_json::from_str(GUIDELLM).unwrap();
    let m = &doc["benchmarks"][1]["metrics"];
    let b2 = "benchmark 2 (concurrency 4)";
    assert_eq!(measured(&p, &format!("{b2} TTFT p50")), m["time_to_first_token_ms"]["successful"]["median"]);
    assert_eq!(
        measured(&p, &format!("{b2} TTFT p99.9")),
        m["time_to_first_token_ms"]["successful"]["percentiles"]["p999"]
    );
    // GuideLLM's ITL is vLLM's TPOT.
    assert_eq!(
        measured(&p, &format!("{b2} TPOT p90")),
        m["inter_token_latency_ms"]["successful"]["percentiles"]["p90"]
    );
    assert_eq!(measured(&p, &format!("{b2} output tok/s")), m["output_tokens_per_second"]["successful"]["mean"]);
    // Each benchmark is one fold group; nothing below the median.
    assert!(p.points.iter().filter(|q| q.label.starts_with(b2)).all(|q| q.group == b2));
    assert_eq!(p.points.iter().filter(|q| q.label.starts_with(b2)).count(), 13);
    assert!(!labels(&p).iter().any(|l| l.ends_with("p25") || l.ends_with("p0.1")));
    assert!(p.notes.iter().any(|n| n.contains("time_per_output_token_ms")), "{:?}", p.notes);
}

#[test]
fn guidellm_percentile_names() {
    for (name, p) in [("p001", 0.1), ("p01", 1.0), ("p05", 5.0), ("p50", 50.0), ("p999", 99.9)] {
        assert_eq!(guidellm_percentile(name), Some(p), "{name}");
    }
    assert_eq!(guidellm_percentile("pdf"), None);
    assert_eq!(guidellm_percentile("p"), None);
}

/// The fixture with benchmark `i` replaced by `f` of it.
fn guidellm_with(i: usize, f: impl Fn(&mut Value)) -> String {
    let mut doc: Value = serde_json::from_str(GUIDELLM).unwrap();
    f(&mut doc["benchmarks"][i]);
    doc.to_string()
}

#[test]
fn guidellm_strategies_and_schemas() {
    let text = guidellm_with(2, |b| b["config"]["strategy"] = json!({"type_": "constant", "rate": 1.5}));
    assert!(read("g.json", &text).unwrap().sims[2].text.contains("arrival = \"deterministic\"\nrate = 1.5\n"));
    let text = guidellm_with(2, |b| b["config"]["strategy"] = json!({"type_": "throughput"}));
    assert!(read("g.json", &text).unwrap().sims[2].text.contains("arrival = \"offline\"\n"));
    // GuideLLM 0.3: args.strategy, request_totals beside metrics.
    let text = guidellm_with(0, |b| {
        let strategy = b["config"]["strategy"].take();
        b["args"] = json!({"strategy": strategy});
        b.as_object_mut().unwrap().remove("config");
        let totals = b["metrics"]["request_totals"].take();
        b["metrics"].as_object_mut().unwrap().remove("request_totals");
        b["request_totals"] = totals;
    });
    let p = read("g.json", &text).unwrap();
    assert!(p.sims[0].text.contains("users = 1") && p.sims[0].text.contains("num_requests = 20"));
}

#[test]
fn guidellm_errors_name_the_benchmark_and_the_fix() {
    let e = err("g.json", &guidellm_with(1, |b| b["config"]["strategy"] = json!({"type_": "trace"})));
    assert!(e.message.contains("benchmark 2") && e.message.contains("`trace`"), "{e:?}");
    let e = err("g.json", &guidellm_with(1, |b| b["metrics"]["request_totals"]["successful"] = json!(0)));
    assert!(e.message.contains("benchmark 2 completed no requests"), "{e:?}");
    let e = err("g.json", &guidellm_with(0, |b| b["metrics"]["prompt_token_count"] = json!({})));
    assert!(e.message.contains("prompt_token_count"), "{e:?}");
    let e = err("g.json", &guidellm_with(1, |b| b["config"]["strategy"] = json!({"type_": "concurrent"})));
    assert!(e.message.contains("`streams`"), "{e:?}");
    let e = err("g.json", &edited(GUIDELLM, json!({"benchmarks": []})));
    assert!(e.message.contains("no benchmarks"), "{e:?}");
}

#[test]
fn genai_perf_reads_units_and_the_stimulus() {
    let p = read("e.json", GENAI).unwrap();
    let doc: Value = serde_json::from_str(GENAI).unwrap();
    assert_eq!(labels(&p)[..2], ["TTFT p50", "TTFT p75"]);
    assert_eq!(measured(&p, "TTFT p99"), doc["time_to_first_token"]["p99"]);
    assert_eq!(measured(&p, "TPOT p50"), doc["inter_token_latency"]["p50"]);
    assert_eq!(measured(&p, "output tok/s"), doc["output_token_throughput"]["avg"]);
    assert!(p.sims[0].text.contains("users = 4") && p.sims[0].text.contains("num_requests = 40"));
    // The same statistics in ns read the same in ms.
    let mut ns = doc.clone();
    for key in ["time_to_first_token", "inter_token_latency"] {
        for (k, v) in ns[key].as_object_mut().unwrap() {
            if k == "unit" {
                *v = json!("ns");
            } else {
                *v = json!(v.as_f64().unwrap() * 1e6);
            }
        }
    }
    let q = read("e.json", &ns.to_string()).unwrap();
    for (a, b) in p.points.iter().zip(&q.points) {
        assert_eq!(a.label, b.label);
        assert!((a.measured - b.measured).abs() < 1e-9 * a.measured, "{} {} vs {}", a.label, a.measured, b.measured);
    }
    // A request rate: perf_analyzer's constant spacing; flat arguments of older exports.
    let rate = edited(GENAI, json!({"input_config": {"perf_analyzer": {"stimulus": {"request_rate": 3.0}}}}));
    assert!(read("e.json", &rate).unwrap().sims[0].text.contains("arrival = \"deterministic\"\nrate = 3\n"));
    let flat = edited(GENAI, json!({"input_config": {"concurrency": 2}}));
    assert!(read("e.json", &flat).unwrap().sims[0].text.contains("users = 2"));
    // No request count: a stated default.
    let mut no_count = doc.clone();
    no_count.as_object_mut().unwrap().remove("request_count");
    let p = read("e.json", &no_count.to_string()).unwrap();
    assert!(p.sims[0].text.contains("num_requests = 200"));
    assert!(p.notes.iter().any(|n| n.contains("no request_count")), "{:?}", p.notes);
}

#[test]
fn genai_perf_errors_name_the_key_and_the_fix() {
    let e = err("e.json", &edited(GENAI, json!({"time_to_first_token": {"unit": "parsecs", "p50": 1.0}})));
    assert!(e.message.contains("time_to_first_token.unit"), "{e:?}");
    let e = err(
        "e.json",
        &edited(GENAI, json!({"input_config": {"perf_analyzer": {"stimulus": {"fixed_schedule": null}}}})),
    );
    assert!(e.message.contains("fixed_schedule"), "{e:?}");
    let e = err("e.json", &edited(GENAI, json!({"request_count": {"unit": "count", "avg": 0}})));
    assert!(e.message.contains("no requests"), "{e:?}");
    let mut doc: Value = serde_json::from_str(GENAI).unwrap();
    doc.as_object_mut().unwrap().remove("input_sequence_length");
    let e = err("e.json", &doc.to_string());
    assert!(e.message.contains("input_sequence_length"), "{e:?}");
}

#[test]
fn serving_table_rows_become_runs_of_their_model_and_gpu() {
    let p = read("t.csv", TABLE).unwrap();
    assert_eq!(p.sims.len(), 3);
    assert_eq!(p.skipped.len(), 1);
    assert!(p.skipped[0].contains("row 4") && p.skipped[0].contains("no-such-model"), "{:?}", p.skipped);
    for (sim, want) in p.sims.iter().zip(["users = 4", "users = 8", "arrival = \"poisson\"\nrate = 2\n"]) {
        assert!(sim.text.contains(want), "{want} in\n{}", sim.text);
        for key in ["name = \"llama-3.1-8b\"", "gpu = \"h100-sxm\"", "tp = 1", "preset = \"vllm-v1\"", "value = 512"] {
            assert!(sim.text.contains(key), "{key} in\n{}", sim.text);
        }
    }
    assert!(p.sims[2].text.contains("num_requests = 30"));
    let row1 = "row 1 llama-3.1-8b h100-sxm vLLM tp1 concurrency 4";
    assert_eq!(measured(&p, &format!("{row1} TTFT p99")), 144.1);
    assert_eq!(measured(&p, &format!("{row1} ITL p50")), 7.983);
    assert_eq!(p.points.iter().filter(|q| q.group == row1).count(), 6, "means are not fitted");
}

#[test]
fn serving_table_reads_layout_flags_and_engines() {
    let catalog = Catalog::builtin().unwrap();
    let text = "model,gpu,engine,gpus_used,serving_command_effective,successful_requests,total_input_tokens,\
                total_output_tokens,request_rate_rps,tpot_median_ms\n\
                llama-3.1-8b,h100-sxm,vLLM,2,vllm serve x --max-num-seqs 64 --async-scheduling,10,5000,1000,1.5,8.0\n\
                llama-3.1-8b,h100-sxm,SGLang,1,,0,0,0,,8.0\n";
    // Without a scenario: the profile alone, on the row's model and GPU.
    let p = from_text(Path::new("t.csv"), text, &catalog, None, "sglang").unwrap();
    let sim = &p.sims[0].text;
    for want in ["tp = 2", "max_num_seqs = 64", "cpu_overlap = 1.0", "preset = \"sglang\"", "rate = 1.5", "value = 500"]
    {
        assert!(sim.contains(want), "{want} in\n{sim}");
    }
    assert!(p.skipped[0].contains("successful_requests"), "{:?}", p.skipped);
    assert!(p.notes.iter().any(|n| n.contains("2 engines (SGLang, vLLM)")), "{:?}", p.notes);
}

#[test]
fn serving_table_errors_name_the_column_and_the_fix() {
    let e = err(
        "t.csv",
        "model,gpu,engine,successful_requests,total_input_tokens,total_output_tokens,output_tok_s\nx,y,z,1,1,1,1\n",
    );
    assert!(e.message.contains("`tp` nor `gpus_used`"), "{e:?}");
    let e =
        err("t.csv", "model,gpu,engine,tp,successful_requests,total_input_tokens,total_output_tokens\nx,y,z,1,1,1,1\n");
    assert!(e.message.contains("no statistic"), "{e:?}");
    let lab = include_str!("../../../validation/data/gpustack_blocks_h100_corrected.csv");
    let e = err("lab.csv", lab);
    assert!(e.hint.unwrap().contains("validation:gpustack-serve-h100"));
    let e = err("t.csv", "gpu,engine,tp,successful_requests,total_input_tokens,total_output_tokens,ttft_median_ms\n");
    assert!(e.message.contains("`model`"), "{e:?}");
}
