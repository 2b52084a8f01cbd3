//! Kernel-level data sets: NVIDIA AIConfigurator's measured GEMM, attention
//! and all-reduce times on A100, H100, H200, B200 and L40S.
//!
//! The `[kernels]` constants of these GPUs' catalogue files were fitted to
//! exactly these tables (`servesim calibrate --kernels`), so their errors are
//! in-sample: they say how well the formulas fit, not how well they predict.
//! `kernels-held-out-gpu` predicts each GPU with constants taken from the
//! other four (their medians): the accuracy to expect on a GPU that has no
//! kernel measurements.

use super::{Dataset, Role, Row};
use crate::Catalog;
use crate::cost::{GemmPath, Kernels, StepCost};
use crate::measured::Table;
use crate::spec::{GpuSpec, KernelSpec};

/// (AIConfigurator system, catalogue GPU) pairs.
pub const SYSTEMS: &[(&str, &str)] = &[
    ("a100_sxm", "a100-80gb"),
    ("h100_sxm", "h100-sxm"),
    ("h200_sxm", "h200"),
    ("b200_sxm", "b200"),
    ("l40s", "l40s"),
];

/// The shipped table `validation/data/aic/<system>_<kind>.csv`.
pub fn aic_table(system: &str, kind: &str) -> Table {
    let text = match (system, kind) {
        ("a100_sxm", "gemm") => include_str!("../../validation/data/aic/a100_sxm_gemm.csv"),
        ("h100_sxm", "gemm") => include_str!("../../validation/data/aic/h100_sxm_gemm.csv"),
        ("h200_sxm", "gemm") => include_str!("../../validation/data/aic/h200_sxm_gemm.csv"),
        ("b200_sxm", "gemm") => include_str!("../../validation/data/aic/b200_sxm_gemm.csv"),
        ("l40s", "gemm") => include_str!("../../validation/data/aic/l40s_gemm.csv"),
        ("a100_sxm", "context") => include_str!("../../validation/data/aic/a100_sxm_context_attention.csv"),
        ("h100_sxm", "context") => include_str!("../../validation/data/aic/h100_sxm_context_attention.csv"),
        ("h200_sxm", "context") => include_str!("../../validation/data/aic/h200_sxm_context_attention.csv"),
        ("b200_sxm", "context") => include_str!("../../validation/data/aic/b200_sxm_context_attention.csv"),
        ("l40s", "context") => include_str!("../../validation/data/aic/l40s_context_attention.csv"),
        ("a100_sxm", "generation") => include_str!("../../validation/data/aic/a100_sxm_generation_attention.csv"),
        ("h100_sxm", "generation") => include_str!("../../validation/data/aic/h100_sxm_generation_attention.csv"),
        ("h200_sxm", "generation") => include_str!("../../validation/data/aic/h200_sxm_generation_attention.csv"),
        ("b200_sxm", "generation") => include_str!("../../validation/data/aic/b200_sxm_generation_attention.csv"),
        ("l40s", "generation") => include_str!("../../validation/data/aic/l40s_generation_attention.csv"),
        ("a100_sxm", "nccl") => include_str!("../../validation/data/aic/a100_sxm_nccl_allreduce.csv"),
        ("h100_sxm", "nccl") => include_str!("../../validation/data/aic/h100_sxm_nccl_allreduce.csv"),
        ("h200_sxm", "nccl") => include_str!("../../validation/data/aic/h200_sxm_nccl_allreduce.csv"),
        ("b200_sxm", "nccl") => include_str!("../../validation/data/aic/b200_sxm_nccl_allreduce.csv"),
        ("l40s", "nccl") => include_str!("../../validation/data/aic/l40s_nccl_allreduce.csv"),
        ("a100_sxm", "custom") => include_str!("../../validation/data/aic/a100_sxm_custom_allreduce.csv"),
        ("h100_sxm", "custom") => include_str!("../../validation/data/aic/h100_sxm_custom_allreduce.csv"),
        ("h200_sxm", "custom") => include_str!("../../validation/data/aic/h200_sxm_custom_allreduce.csv"),
        ("b200_sxm", "custom") => include_str!("../../validation/data/aic/b200_sxm_custom_allreduce.csv"),
        ("l40s", "custom") => include_str!("../../validation/data/aic/l40s_custom_allreduce.csv"),
        ("b300_sxm", "gemm") => include_str!("../../validation/data/aic/b300_sxm_gemm.csv"),
        ("gb200", "gemm") => include_str!("../../validation/data/aic/gb200_gemm.csv"),
        _ => panic!("no AIConfigurator table {system} {kind}"),
    };
    Table::parse(text, &format!("aic/{system}_{kind}"))
}

fn gpu(catalog: &Catalog, name: &str) -> GpuSpec {
    catalog.gpu(name).unwrap_or_else(|| panic!("GPU {name} missing from the catalogue")).spec.clone()
}

const SOURCE: &str = "validation/data/aic/*.csv: NVIDIA AIConfigurator kernel database (ai-dynamo/aiconfigurator @095f58a5, \
                      Apache-2.0), vLLM kernels timed under CUDA graphs on one GPU of each system";

/// Predicted GEMM time (ms) of one table row on `k`.
pub fn gemm_row(k: &Kernels, t: &Table, r: &[String]) -> Option<(String, f64, f64)> {
    let path = match t.get(r, "dtype") {
        "bf16" => GemmPath::Bf16,
        "fp8" => GemmPath::W8A8,
        "nvfp4" => GemmPath::W4A4,
        _ => return None,
    };
    if (path == GemmPath::W8A8 && k.k.fp8_gemm_efficiency <= 0.0)
        || (path == GemmPath::W4A4 && k.k.fp4_gemm_efficiency <= 0.0)
    {
        return None;
    }
    let (m, n, kk) = (t.num(r, "m"), t.num(r, "n"), t.num(r, "k"));
    let p = k.gemm(m, n, kk, path, 1.0, &mut StepCost::default()) * 1e3;
    Some((format!("{} m={m} n={n} k={kk}", t.get(r, "dtype")), t.num(r, "latency_ms"), p))
}

/// An attention row's batch, length (column `len`), heads, KV heads, head
/// size and KV bytes per element.
fn attention_shape(t: &Table, r: &[String], len: &str) -> [f64; 6] {
    let kvb = if t.get(r, "kv_cache_dtype") == "fp8" { 1.0 } else { 2.0 };
    let col = |c: &str| t.num(r, c);
    [col("batch_size"), col(len), col("num_heads"), col("num_kv_heads"), col("head_dim"), kvb]
}

/// Predicted prefill attention time (ms) of a context-attention row.
pub fn context_row(k: &Kernels, t: &Table, r: &[String]) -> (String, f64, f64) {
    let [b, s, h, kvh, hd, kvb] = attention_shape(t, r, "seq_len");
    let pairs = b * s * (s + 1.0) / 2.0;
    let bytes = b * s * (h * hd * 4.0 + 2.0 * kvh * hd * (2.0 + kvb));
    let p = (k.prefill_attention_work(h, hd, pairs, b * s, bytes, 1.0) + k.k.prefill_attention_latency_us * 1e-6) * 1e3;
    (format!("prefill b={b} s={s} heads={h}/{kvh} kv={}", t.get(r, "kv_cache_dtype")), t.num(r, "latency_ms"), p)
}

/// Predicted decode attention time (ms) of a generation-attention row.
pub fn generation_row(k: &Kernels, t: &Table, r: &[String]) -> (String, f64, f64) {
    let [b, l, h, kvh, hd, kvb] = attention_shape(t, r, "kv_len");
    let bytes = b * l * 2.0 * kvh * hd * kvb;
    let p =
        (k.decode_attention_work(bytes, 4.0 * h * hd * b * l, b, 1.0) + k.k.decode_attention_latency_us * 1e-6) * 1e3;
    (format!("decode b={b} kv_len={l} heads={h}/{kvh} kv={}", t.get(r, "kv_cache_dtype")), t.num(r, "latency_ms"), p)
}

/// GEMM times, BF16 and FP8.
pub fn gemm(catalog: &Catalog) -> crate::Result<Dataset> {
    let mut rows = Vec::new();
    for &(sys, name) in SYSTEMS {
        let k = Kernels::new(&gpu(catalog, name));
        let t = aic_table(sys, "gemm");
        for r in &t.rows {
            if let Some((id, m, p)) = gemm_row(&k, &t, r) {
                let metric = match id.split(' ').next() {
                    Some("fp8") => "fp8 GEMM ms",
                    Some("nvfp4") => "nvfp4 GEMM ms",
                    _ => "bf16 GEMM ms",
                };
                rows.push(Row::new(format!("{name} {id}"), metric, m, p));
            }
        }
    }
    Ok(Dataset {
        key: "kernels-gemm".into(),
        title: "GEMM times of LLM-sized shapes (m tokens 1-16384, n and k 1024-65536) on A100, H100, H200, B200, L40S"
            .into(),
        source: SOURCE.into(),
        method: "cost::Kernels::gemm with each GPU's [kernels] constants".into(),
        role: Role::InSample,
        note: "in-sample: the [kernels] GEMM constants were fitted to these tables; kernels-held-out-gpu shows the \
               error on a GPU left out"
            .into(),
        rows,
    })
}

/// The BF16-KV prefill and decode attention rows of one GPU's tables, predicted with `k`.
fn attention_rows(k: &Kernels, sys: &str, name: &str, rows: &mut Vec<Row>) {
    let t = aic_table(sys, "context");
    for r in t.rows.iter().filter(|r| t.get(r, "kv_cache_dtype") == "bf16") {
        let (id, m, p) = context_row(k, &t, r);
        rows.push(Row::new(format!("{name} {id}"), "prefill attn ms", m, p));
    }
    let t = aic_table(sys, "generation");
    for r in t.rows.iter().filter(|r| t.get(r, "kv_cache_dtype") == "bf16") {
        let (id, m, p) = generation_row(k, &t, r);
        rows.push(Row::new(format!("{name} {id}"), "decode attn ms", m, p));
    }
}

/// Prefill and decode attention times.
pub fn attention(catalog: &Catalog) -> crate::Result<Dataset> {
    let mut rows = Vec::new();
    for &(sys, name) in SYSTEMS {
        let k = Kernels::new(&gpu(catalog, name));
        attention_rows(&k, sys, name, &mut rows);
    }
    Ok(Dataset {
        key: "kernels-attention".into(),
        title: "Prefill (causal, no prefix) and decode attention times, head_dim 128, BF16 KV cache".into(),
        source: SOURCE.into(),
        method: "cost::Kernels prefill_attention_work / decode_attention_work plus the launch latency".into(),
        role: Role::InSample,
        note: "in-sample: the attention constants were fitted to these tables".into(),
        rows,
    })
}

/// All-reduce times, the engine's custom all-reduce and NCCL.
pub fn allreduce(catalog: &Catalog) -> crate::Result<Dataset> {
    let mut rows = Vec::new();
    for &(sys, name) in SYSTEMS {
        let k = Kernels::new(&gpu(catalog, name));
        for (kind, custom) in [("custom", true), ("nccl", false)] {
            let t = aic_table(sys, kind);
            for r in &t.rows {
                let (n, bytes) = (t.num(r, "num_gpus"), t.num(r, "message_bytes"));
                if bytes > 64.0 * 1024.0 * 1024.0 {
                    continue;
                }
                let p = k.allreduce(bytes, n, custom) * 1e3;
                rows.push(Row::new(
                    format!("{name} {kind} tp={n} bytes={bytes}"),
                    if custom { "custom AR ms" } else { "NCCL AR ms" },
                    t.num(r, "latency_ms"),
                    p,
                ));
            }
        }
    }
    Ok(Dataset {
        key: "kernels-allreduce".into(),
        title: "All-reduce times at 2/4/8 GPUs, 256 B to 64 MiB: vLLM's custom all-reduce and NCCL".into(),
        source: SOURCE.into(),
        method: "cost::Kernels::allreduce: latency + bytes × 2(tp − 1)/tp ÷ bus bandwidth, per measured tp".into(),
        role: Role::InSample,
        note: "in-sample: latency and bus bandwidth per tp were fitted to these tables".into(),
        rows,
    })
}

/// (AIConfigurator system, catalogue GPU) pairs whose catalogue files have
/// no `[kernels]` table: their GEMM tables judge the generic kernel values.
pub const UNFITTED: &[(&str, &str)] = &[("b300_sxm", "b300"), ("gb200", "gb200")];

/// GEMM times (BF16, FP8, NVFP4) on GPUs the kernel constants were not fitted
/// to, predicted as a scenario on them runs: catalogue peaks and generic
/// kernel values ([`KernelSpec::generic`], whose FP4 constants are B200's fit).
pub fn unfitted_gpus(catalog: &Catalog) -> crate::Result<Dataset> {
    let mut rows = Vec::new();
    for &(sys, name) in UNFITTED {
        let g = gpu(catalog, name);
        if g.kernels.is_some() {
            return Err(
                crate::ConfigError::new(format!("GPU {name} has a [kernels] table: it is no longer held out")).into()
            );
        }
        let k = Kernels::new(&g);
        let t = aic_table(sys, "gemm");
        for r in &t.rows {
            if let Some((id, m, p)) = gemm_row(&k, &t, r) {
                let metric = format!("{} GEMM ms", id.split(' ').next().unwrap_or("bf16"));
                rows.push(Row::new(format!("{name} {id}"), &metric, m, p));
            }
        }
    }
    Ok(Dataset {
        key: "kernels-unfitted-gpu".into(),
        title: "GEMM times (BF16, FP8, NVFP4) on B300 and GB200, GPUs without a [kernels] fit".into(),
        source: "validation/data/aic/{b300_sxm,gb200}_gemm.csv: NVIDIA AIConfigurator kernel database \
                 (ai-dynamo/aiconfigurator @095f58a5, Apache-2.0), vLLM 0.24 kernels (torch linear, CUTLASS FP8, \
                 FlashInfer CuTe-DSL NVFP4), every third shape of the B200 subset"
            .into(),
        method:
            "cost::Kernels::gemm with the catalogue's peaks and KernelSpec::generic (what a scenario on these GPUs \
                 uses)"
                .into(),
        role: Role::HeldOut,
        note: "held out: nothing was fitted to these GPUs; the FP4 constants come from B200 alone".into(),
        rows,
    })
}

/// The kernel constants of a GPU taken from other GPUs: the median of each
/// efficiency and latency over `others`, all-reduce from the interconnect.
pub fn spec_from_others(target: &GpuSpec, others: &[KernelSpec]) -> KernelSpec {
    let med = |f: &dyn Fn(&KernelSpec) -> f64| {
        let v: Vec<f64> = others.iter().map(f).filter(|x| *x > 0.0).collect();
        if v.is_empty() { 0.0 } else { crate::metrics::stats::median(&v) }
    };
    let generic = KernelSpec::generic(target);
    KernelSpec {
        source: "medians of the other measured GPUs".into(),
        gemm_efficiency: med(&|k| k.gemm_efficiency),
        fp8_gemm_efficiency: if target.fp8_tflops > 0.0 { med(&|k| k.fp8_gemm_efficiency) } else { 0.0 },
        stream_efficiency: med(&|k| k.stream_efficiency),
        gemm_latency_us: med(&|k| k.gemm_latency_us),
        fp8_quant_latency_us: med(&|k| k.fp8_quant_latency_us),
        // No other GPU has FP4 measurements: a held-out B200 gets none.
        fp4_gemm_efficiency: if target.fp4_tflops > 0.0 { med(&|k| k.fp4_gemm_efficiency) } else { 0.0 },
        fp4_quant_latency_us: med(&|k| k.fp4_quant_latency_us),
        elementwise_latency_us: med(&|k| k.elementwise_latency_us),
        prefill_attention_efficiency: med(&|k| k.prefill_attention_efficiency),
        prefill_attention_half_len: med(&|k| k.prefill_attention_half_len),
        prefill_attention_latency_us: med(&|k| k.prefill_attention_latency_us),
        decode_attention_efficiency: med(&|k| k.decode_attention_efficiency),
        decode_attention_latency_us: med(&|k| k.decode_attention_latency_us),
        decode_attention_ns_per_seq: med(&|k| k.decode_attention_ns_per_seq),
        moe_efficiency: med(&|k| k.moe_efficiency),
        moe_stream_efficiency: med(&|k| k.moe_stream_efficiency),
        moe_latency_us: med(&|k| k.moe_latency_us),
        cutlass_moe_efficiency: med(&|k| k.cutlass_moe_efficiency),
        cutlass_moe_stream_efficiency: med(&|k| k.cutlass_moe_stream_efficiency),
        cutlass_moe_latency_us: med(&|k| k.cutlass_moe_latency_us),
        allreduce: generic.allreduce,
    }
}

/// Each measured GPU predicted with the other four's constants.
pub fn held_out_gpu(catalog: &Catalog) -> crate::Result<Dataset> {
    let specs: Vec<(&str, &str, GpuSpec)> = SYSTEMS.iter().map(|&(s, n)| (s, n, gpu(catalog, n))).collect();
    let mut rows = Vec::new();
    for (sys, name, g) in &specs {
        let others: Vec<KernelSpec> =
            specs.iter().filter(|o| o.1 != *name).filter_map(|o| o.2.kernels.clone()).collect();
        let held = GpuSpec { kernels: Some(spec_from_others(g, &others)), ..g.clone() };
        let k = Kernels::new(&held);
        let t = aic_table(sys, "gemm");
        for r in t.rows.iter().filter(|r| t.get(r, "dtype") == "bf16") {
            if let Some((id, m, p)) = gemm_row(&k, &t, r) {
                rows.push(Row::new(format!("{name} {id}"), "bf16 GEMM ms", m, p));
            }
        }
        attention_rows(&k, sys, name, &mut rows);
    }
    Ok(Dataset {
        key: "kernels-held-out-gpu".into(),
        title: "The kernel tables of each GPU predicted with constants from the other four (leave one GPU out)".into(),
        source: SOURCE.into(),
        method: "cost::Kernels with the medians of the other GPUs' [kernels] constants and the GPU's own peaks".into(),
        role: Role::HeldOut,
        note: "held out: what to expect of a GPU without kernel measurements (KernelSpec::generic)".into(),
        rows,
    })
}
