//! Step-level data sets: measured engine step times (Splitwise, Sarathi-Serve)
//! and per-layer operator times (Vidur's profiles), predicted by the
//! `kernel` cost model for one step at a time.

use super::{Dataset, Role, Row};
use crate::Catalog;
use crate::config::{CostConfig, Dtype, KvDtype};
use crate::cost::{GemmPath, KernelModel, Kernels, Layout, StepCost, StepCostModel};
use crate::measured::{Table, decode_step, prefill_step};
use crate::spec::{GpuSpec, LlmSpec};

fn model(catalog: &Catalog, name: &str) -> LlmSpec {
    catalog.model(name).unwrap_or_else(|| panic!("model {name} missing from the catalogue")).spec.clone()
}

fn gpu(catalog: &Catalog, name: &str) -> GpuSpec {
    catalog.gpu(name).unwrap_or_else(|| panic!("GPU {name} missing from the catalogue")).spec.clone()
}

/// The `[cost]` settings of engine profile `preset` for `gpu` at `tp`.
pub fn profile_cost(catalog: &Catalog, preset: &str, gpu: &GpuSpec, tp: u32) -> CostConfig {
    use serde::Deserialize;
    let ctx = crate::catalog::engine::Context { gpu: Some(gpu), tp, dtype: "bf16", max_model_len: None };
    let (_, cost) = crate::scenario::preset_keys(preset, catalog, &ctx).expect("shipped preset");
    CostConfig::deserialize(cost).expect("profile cost keys")
}

/// The engine the Splitwise step times are compared with: vLLM V0 run
/// eagerly, as in 2023 (its host costs are fitted to the TP 2 and 4 rows).
const STEP_PRESET: &str = "vllm-v0-eager";

/// Splitwise's profile of Llama-2-70B on DGX-A100 at tp 2/4/8, read as
/// `servesim calibrate` reads it and predicted with the profile's values.
pub fn splitwise(catalog: &Catalog) -> crate::Result<Dataset> {
    let text = include_str!("../../validation/data/splitwise_perf_model_a100.csv");
    let p = crate::calibrate::inputs::splitwise(
        std::path::Path::new("validation/data/splitwise_perf_model_a100.csv"),
        text,
        catalog,
        None,
        STEP_PRESET,
    )?;
    let idx: Vec<usize> = (0..p.points.len()).collect();
    let pred = p.predict(catalog, &[], &[], &idx)?;
    let mut rows: Vec<Row> = p
        .points
        .iter()
        .zip(pred)
        .map(|(q, v)| {
            let metric = if q.label.contains(" prefill ") { "prefill ms" } else { "decode ms" };
            let fitted = super::fitted_filters("validation/data/splitwise_perf_model_a100.csv")
                .iter()
                .any(|f| crate::measured::selects(f, &q.label));
            Row {
                fitted,
                ..Row::new(q.label.trim_start_matches("llama2-70b a100-80gb ").to_string(), metric, q.measured, v)
            }
        })
        .collect();
    for why in p.skipped {
        let mut row = Row::new(why.split(':').next().unwrap_or("").to_string(), "prefill ms", f64::NAN, f64::NAN);
        row.excluded = Some(why);
        rows.push(row);
    }
    Ok(Dataset {
        key: "splitwise".into(),
        title: "Splitwise (ISCA '24): Llama-2-70B prefill and decode step times on DGX-A100 80 GB, tp 2/4/8".into(),
        source: "validation/data/splitwise_perf_model_a100.csv (Mutinifni/splitwise-sim data/perf_model.csv, MIT)"
            .into(),
        method: format!("one step of the kernel cost model with the {STEP_PRESET} profile's overheads"),
        role: Role::HeldOut,
        note:
            "the vllm-v0-eager profile's host costs are fitted to the TP 2 and 4 rows (marked fitted, counted apart); \
               TP 8 is held out. The measuring engine (2023) is not named in the data"
                .into(),
        rows,
    })
}

/// Sarathi-Serve's figure 2: Yi-34B tp 2 on A100 80 GB PCIe with NVLink bridges.
pub fn sarathi(catalog: &Catalog) -> crate::Result<Dataset> {
    let llm = model(catalog, "yi-34b");
    let pcie = gpu(catalog, "a100-80gb-pcie");
    // The tp 2 pair talks over an NVLink bridge: take the A100 SXM's
    // measured tp 2 all-reduce instead of PCIe's.
    let sxm = gpu(catalog, "a100-80gb");
    let mut kernels = pcie.kernels.clone().expect("a100-80gb-pcie kernels");
    kernels.allreduce = sxm.kernels.clone().expect("a100-80gb kernels").allreduce;
    let g = GpuSpec { kernels: Some(kernels), interconnect_gbps: 600.0, ..pcie };
    let cost = profile_cost(catalog, "sarathi", &g, 2);
    let mut m = KernelModel::new(&llm, &g, &Layout::tensor(2), Dtype::Bf16, KvDtype::Bf16, &cost);
    let mut rows = Vec::new();
    let t = Table::parse(include_str!("../../validation/data/sarathi_figure-2__decode.csv"), "sarathi decode");
    for r in &t.rows {
        let b = t.num(r, "batch_size") as u32;
        // 1024-token requests split 255:1: 1020 prompt + 4 output tokens.
        let pred = m.step(&decode_step(b, 1022.0)).time * 1e3;
        rows.push(Row::new(
            format!("decode b={b} ctx=1022"),
            "decode ms",
            t.num(r, "batch_execution_time") * 1e3,
            pred,
        ));
    }
    let t = Table::parse(include_str!("../../validation/data/sarathi_figure-2__prefill.csv"), "sarathi prefill");
    for r in &t.rows {
        let p = t.num(r, "batch_num_prefill_tokens") as u32;
        let pred = m.step(&prefill_step(1, p)).time * 1e3;
        let mut row = Row::new(format!("prefill p={p}"), "prefill ms", t.num(r, "batch_execution_time") * 1e3, pred);
        if t.num(r, "Batch Id") == 0.0 {
            row.excluded = Some("the engine's first batch (warm-up)".into());
        }
        rows.push(row);
    }
    Ok(Dataset {
        key: "sarathi".into(),
        title: "Sarathi-Serve (OSDI '24) figure 2: Yi-34B tp 2 decode and prefill batch times, A100 80 GB PCIe".into(),
        source: "validation/data/sarathi_figure-2__{decode,prefill}.csv (microsoft/sarathi-serve osdi-experiments, \
                 Apache-2.0)"
            .into(),
        method: "one step of the kernel cost model with the sarathi profile's overheads (Vidur's CPU profile of \
                 that engine)"
            .into(),
        role: Role::HeldOut,
        note: "held out: no constant was fitted to it".into(),
        rows,
    })
}

/// Vidur's per-layer operator profiles (Sarathi-Serve kernels, FP16, one GPU
/// running a 1/tp shard): linear layers, norms, RoPE, activation.
pub fn vidur(catalog: &Catalog) -> crate::Result<Dataset> {
    let t = Table::parse(include_str!("../../validation/data/vidur_ops_median.csv"), "vidur ops");
    let mut rows = Vec::new();
    for r in &t.rows {
        let (g, mname) = (t.get(r, "gpu"), t.get(r, "model"));
        let gpu_name = if g == "a100" { "a100-80gb" } else { "h100-sxm" };
        let llm_name = match mname {
            "Llama-2-7b-hf" => "llama-2-7b",
            "Llama-2-70b-hf" => "llama-2-70b",
            "Meta-Llama-3-8B" => "llama-3-8b",
            "CodeLlama-34b-Instruct-hf" => continue,
            _ => continue,
        };
        let llm = model(catalog, llm_name);
        let k = Kernels::new(&gpu(catalog, gpu_name));
        let (tp, m) = (t.num(r, "tp"), t.num(r, "tokens"));
        let h = llm.hidden_size as f64;
        let q = llm.num_attention_heads as f64 * llm.head_dim as f64;
        let kv = llm.num_kv_heads as f64 * llm.head_dim as f64;
        let f = llm.intermediate_size as f64;
        let gemm = |n: f64, kk: f64| k.gemm(m, n, kk, GemmPath::Bf16, 1.0, &mut StepCost::default()) * 1e3;
        let stream = k.bw * k.k.stream_efficiency;
        let ew = |bytes: f64| (k.k.elementwise_latency_us * 1e-6 + bytes / stream) * 1e3;
        let id = |op: &str| format!("{g} {llm_name} tp{tp} tokens={m} {op}");
        let ops: [(&str, &str, f64); 7] = [
            ("qkv", "attn_pre_proj_ms", gemm((q + 2.0 * kv) / tp, h)),
            ("o", "attn_post_proj_ms", gemm(h, q / tp)),
            ("gate_up", "mlp_up_proj_ms", gemm(2.0 * f / tp, h)),
            ("down", "mlp_down_proj_ms", gemm(h, f / tp)),
            ("rmsnorm", "input_layernorm_ms", ew(m * 2.0 * h * 2.0)),
            ("rope", "attn_rope_ms", ew(m * 2.0 * (q + kv) / tp * 2.0)),
            ("silu_mul", "mlp_act_ms", ew(m * 3.0 * f / tp * 2.0)),
        ];
        for (op, col, pred) in ops {
            let metric = if matches!(op, "rmsnorm" | "rope" | "silu_mul") { "elementwise ms" } else { "GEMM ms" };
            rows.push(Row::new(id(op), metric, t.num(r, col), pred));
        }
    }
    Ok(Dataset {
        key: "vidur-ops".into(),
        title: "Vidur's per-layer operator times (Sarathi-Serve kernels, FP16): A100 Llama-2-7B/70B, Llama-3-8B; H100 \
                Llama-2-7B/70B"
            .into(),
        source: "validation/data/vidur_ops_median.csv (medians from microsoft/vidur data/profiling/compute/*/mlp.csv \
                 @7d47513, MIT)"
            .into(),
        method: "cost::Kernels GEMM and elementwise formulas with the A100 / H100 [kernels] constants".into(),
        role: Role::HeldOut,
        note: "held out: a different engine's kernels timed by a different profiler; nothing was fitted to it".into(),
        rows,
    })
}
