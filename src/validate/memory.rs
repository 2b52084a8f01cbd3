//! Engine start-up logs: the KV capacity an engine logged for a model on a
//! GPU, against servesim's memory plan for the same settings.

use super::{Dataset, Role, Row};
use crate::Catalog;
use crate::measured::Table;

/// A scenario with these settings, resolved: (KV capacity the engine would
/// log, in tokens).
fn predict(catalog: &Catalog, t: &Table, r: &[String]) -> crate::Result<f64> {
    let engine = t.get(r, "engine");
    let (preset, fraction_key) = match engine {
        "vllm" => ("vllm-v1", "gpu_memory_utilization"),
        "sglang" => ("sglang", "mem_fraction_static"),
        other => panic!("engine {other} in memory logs"),
    };
    let text = format!(
        "num_requests = 1\n[model]\nname = \"{}\"\ndtype = \"{}\"\nkv_dtype = \"{}\"\n[hardware]\ngpu = \"{}\"\ntp = {}\npp = {}\n\
         [engine]\npreset = \"{preset}\"\n{fraction_key} = {}\nmax_num_batched_tokens = {}\nmax_num_seqs = {}\nmax_model_len = 2048\n\
         [workload]\nrate = 1\nprompt_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 16 }}\n",
        t.get(r, "model"),
        t.get(r, "dtype"),
        t.get(r, "kv_dtype"),
        t.get(r, "gpu"),
        t.get(r, "tp"),
        t.get(r, "pp"),
        t.get(r, "memory_fraction"),
        t.get(r, "max_num_batched_tokens"),
        t.get(r, "max_num_seqs"),
    );
    let cat = std::sync::Arc::new(catalog.clone());
    let loaded = crate::scenario::load_scenario_str_with(&text, std::path::Path::new("memory-log.toml"), &[], &cat)?;
    let setup = crate::resolve(&loaded.scenario, catalog)?;
    let m = &setup.pools[0].memory;
    // vLLM's "GPU KV cache size" counts its null block too.
    let logged_blocks = if engine == "vllm" { m.num_blocks + 1 } else { m.num_blocks };
    Ok((logged_blocks * m.block_size as u64) as f64)
}

/// Every logged KV capacity against the memory plan.
pub fn logs(catalog: &Catalog) -> crate::Result<Dataset> {
    let t = Table::parse(include_str!("../../validation/data/engine_memory_logs.csv"), "engine_memory_logs");
    let mut rows = Vec::new();
    for r in &t.rows {
        let p = predict(catalog, &t, r)?;
        let metric = if t.get(r, "engine") == "vllm" { "vLLM KV tokens" } else { "SGLang KV tokens" };
        let mut row = Row::new(
            format!("{} ({} {})", t.get(r, "id"), t.get(r, "engine"), t.get(r, "version")),
            metric,
            t.num(r, "kv_tokens"),
            p,
        );
        if t.get(r, "engine") == "vllm" && t.get(r, "note").contains("version and gpu_memory_utilization not logged") {
            // The log names neither the version nor the memory fraction, and an
            // LMCache connector was loaded: the settings to predict it are unknown.
            row.excluded = Some("the log gives neither vLLM's version nor gpu_memory_utilization".into());
        }
        rows.push(row);
    }
    Ok(Dataset {
        key: "memory-logs".into(),
        title: "KV-cache capacity logged by vLLM V1 (0.8-0.19) and SGLang (0.4-0.5) at start-up, 9 models, 5 GPUs"
            .into(),
        source: "validation/data/engine_memory_logs.csv (public start-up logs: GitHub issues, PRs and repositories; \
                 each row names its log)"
            .into(),
        method: "the vllm and sglang memory plans (src/memory.rs) with each log's settings".into(),
        role: Role::HeldOut,
        note: "held out except vLLM's memory_reserve_gb (0 GiB), chosen on the four vLLM 0.10.1 A100 Qwen2-7B rows \
               (the first four)"
            .into(),
        rows,
    })
}
