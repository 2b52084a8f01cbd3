//! Serving-level data sets, predicted by whole simulations: TensorRT-LLM's
//! published offline throughput (trtllm-bench, v0.13) and GPUStack's
//! `vllm bench serve` runs of vLLM, SGLang and TensorRT-LLM on A100s.

use super::{Dataset, Role, Row, Table};
use crate::Catalog;
use rayon::prelude::*;

/// Resolves and simulates a scenario given as TOML text: its summary.
pub fn simulate(catalog: &Catalog, name: &str, text: &str) -> crate::Result<crate::Summary> {
    let cat = std::sync::Arc::new(catalog.clone());
    let loaded = crate::config::load_scenario_str_with(text, std::path::Path::new(name), &[], &cat)?;
    let setup = crate::resolve(&loaded.scenario, catalog)?;
    Ok(crate::run_lean(&setup, loaded.scenario.seed).summary)
}

/// TensorRT-LLM v0.13's `trtllm-bench build` heuristic (tensorrt_llm/bench/build/tuning.py):
/// (max_batch_size, max_num_tokens) for a model on `tp` GPUs of `gpu_gib`
/// each, at average lengths `isl`/`osl`, with KV fraction 0.95.
pub fn trtllm_bench_settings(
    llm: &crate::catalog::LlmSpec,
    tp: u32,
    gpu_gib: f64,
    fp8: bool,
    isl: f64,
    osl: f64,
) -> (u32, u32) {
    let elem = if fp8 { 1.0 } else { 2.0 };
    let gib = 1024f64.powi(3);
    let kv_heads = (tp.max(llm.num_kv_heads)) as f64;
    let bytes_per_token = 2.0 * llm.num_layers as f64 * kv_heads * llm.head_dim as f64 * elem;
    let engine = llm.total_params() * elem / gib;
    let cache = (gpu_gib * tp as f64 - engine) * 0.95 * gib;
    let requests = (cache / (bytes_per_token * (isl + osl))).max(1.0);
    let raw_bs = requests.min(4096.0);
    let raw_tok = (raw_bs * (1.0 + isl / osl)).min(32768.0);
    let bs = if raw_bs < 256.0 {
        (32.0 * (raw_bs / 32.0).ceil()).max(64.0)
    } else if raw_bs < 1024.0 {
        128.0 * (raw_bs / 128.0).ceil()
    } else {
        256.0 * (raw_bs / 256.0).ceil()
    };
    let tok = if raw_tok < 4096.0 {
        (256.0 * (raw_tok / 256.0).ceil()).max(2048.0)
    } else if raw_tok < 8192.0 {
        512.0 * (raw_tok / 512.0).ceil()
    } else {
        1024.0 * (raw_tok / 1024.0).ceil()
    };
    (bs as u32, tok as u32)
}

/// The scenario of one offline-throughput case: `n` requests of `isl`/`osl`
/// tokens, all at t = 0, on `tp` GPUs under `preset`. With a TensorRT-LLM
/// profile the engine is configured as `trtllm-bench` builds it (chunked
/// context, no block reuse, 64-token blocks, batch and token limits from its
/// heuristic, `max_seq_len` = isl + osl); other engines keep their defaults
/// with `max_model_len` = isl + osl. Err: why the case cannot be simulated.
#[allow(clippy::too_many_arguments)]
pub fn offline_scenario(
    catalog: &Catalog,
    model: &str,
    gpu_name: &str,
    fp8: bool,
    tp: u32,
    isl: u32,
    osl: u32,
    n: u32,
    preset: &str,
) -> Result<String, String> {
    let llm = catalog.model(model).ok_or_else(|| format!("{model} is not in the catalogue"))?;
    let gpu = catalog.gpu(gpu_name).ok_or_else(|| format!("GPU {gpu_name} is not in the catalogue"))?;
    let family = catalog.engine(preset).map(|p| p.spec.family.as_str()).unwrap_or(preset);
    let engine = if family == "trtllm" {
        let (bs, tok) = trtllm_bench_settings(
            &llm.spec,
            tp,
            gpu.spec.memory_gib.max(gpu.spec.memory_gb),
            fp8,
            isl as f64,
            osl as f64,
        );
        format!(
            "chunked_prefill = true\nmixed_prefill = false\nprefix_caching = false\nblock_size = 64\n\
             max_num_seqs = {bs}\nmax_num_batched_tokens = {tok}\n"
        )
    } else if isl + osl > llm.spec.max_context {
        return Err(format!("{isl} + {osl} tokens exceed {model}'s context of {}", llm.spec.max_context));
    } else {
        String::new()
    };
    Ok(format!(
        "num_requests = {n}\nseed = 1\n[model]\nname = \"{}\"\ndtype = \"{}\"\n[hardware]\ngpu = \"{}\"\ntp = {tp}\n\
         [engine]\npreset = \"{preset}\"\n{engine}max_model_len = {}\n\
         [workload]\narrival = \"offline\"\nprompt_tokens = {{ dist = \"fixed\", value = {isl} }}\n\
         output_tokens = {{ dist = \"fixed\", value = {osl} }}\n",
        llm.key,
        if fp8 { "fp8" } else { "bf16" },
        gpu.key,
        isl + osl,
    ))
}

/// TensorRT-LLM v0.13 offline maximum throughput on A100 and L40S.
pub fn trtllm(catalog: &Catalog) -> crate::Result<Dataset> {
    let t = Table::parse(include_str!("../../validation/data/trtllm_perf_overview_a100_l40s.csv"), "trtllm");
    let jobs: Vec<&Vec<String>> = t.rows.iter().collect();
    let rows: Vec<crate::Result<Row>> = jobs
        .par_iter()
        .map(|r| {
            let model = t.get(r, "model");
            let gpu_name = t.get(r, "gpu");
            let fp8 = t.get(r, "precision") == "FP8";
            let (tp, isl, osl) = (t.num(r, "tp") as u32, t.num(r, "isl") as u32, t.num(r, "osl") as u32);
            let id = format!("{model} {gpu_name} {} tp{tp} {isl}/{osl}", t.get(r, "precision"));
            let measured = t.num(r, "total_output_tok_s");
            let text = match offline_scenario(
                catalog,
                model,
                gpu_name,
                fp8,
                tp,
                isl,
                osl,
                t.num(r, "num_requests") as u32,
                "trtllm",
            ) {
                Ok(t) => t,
                Err(why) => {
                    let mut row = Row::new(id, "output tok/s", measured, f64::NAN);
                    row.excluded = Some(why);
                    return Ok(row);
                }
            };
            let mut row = match simulate(catalog, &id, &text) {
                Ok(s) => Row::new(id.clone(), "output tok/s", measured, s.metrics.output_throughput),
                Err(e) => {
                    let mut row = Row::new(id.clone(), "output tok/s", measured, f64::NAN);
                    row.excluded =
                        Some(format!("servesim refuses the set-up: {}", e.to_string().lines().next().unwrap_or("")));
                    row
                }
            };
            if row.excluded.is_none() && !row.predicted.is_finite() {
                row.excluded = Some("no prediction".into());
            }
            Ok(row)
        })
        .collect();
    let rows: Vec<Row> = rows.into_iter().collect::<crate::Result<_>>()?;
    Ok(Dataset {
        key: "trtllm-offline".into(),
        title: "TensorRT-LLM v0.13 offline maximum throughput (trtllm-bench, fixed lengths, all requests at t = 0): \
                9 models on A100-SXM4-80GB (FP16) and L40S (FP8), tp 1-8"
            .into(),
        source: "validation/data/trtllm_perf_overview_a100_l40s.csv (NVIDIA TensorRT-LLM docs perf-overview.md, \
                 v0.13.0 data, Apache-2.0)"
            .into(),
        method: "a simulation with the trtllm profile as trtllm-bench configures it: chunked context, no block \
                 reuse, 64-token blocks, max_batch_size and max_num_tokens from trtllm-bench's build heuristic, the \
                 published request counts"
            .into(),
        role: Role::HeldOut,
        note: "held out: nothing was fitted to it".into(),
        rows,
    })
}

/// GPUStack's `vllm bench serve` blocks.
pub fn gpustack(catalog: &Catalog) -> crate::Result<Dataset> {
    let blocks = gpustack_blocks();
    let out: Vec<Vec<Row>> = blocks
        .par_iter()
        .map(|b| {
            let engine = match b.preset {
                "vllm-v1" => "vLLM",
                "sglang" => "SGLang",
                _ => "TRT-LLM",
            };
            let fitted = fitted_block(&b.id);
            let rows = |pred: [f64; 3], why: Option<String>| -> Vec<Row> {
                b.measured
                    .iter()
                    .zip(pred)
                    .map(|(&(m, v), p)| Row {
                        excluded: why.clone(),
                        fitted,
                        ..Row::new(b.id.clone(), &format!("{engine} {m}"), v, p)
                    })
                    .collect()
            };
            match &b.scenario {
                Err(why) => rows([f64::NAN; 3], Some(why.clone())),
                Ok(text) => match simulate(catalog, &b.id, text) {
                    Ok(s) => rows(
                        [s.metrics.ttft.dist.median(), s.metrics.tpot.dist.median(), s.metrics.output_throughput],
                        None,
                    ),
                    Err(e) => rows(
                        [f64::NAN; 3],
                        Some(format!("servesim refuses the set-up: {}", e.to_string().lines().next().unwrap_or(""))),
                    ),
                },
            }
        })
        .collect();
    let rows: Vec<Row> = out.into_iter().flatten().collect();
    Ok(Dataset {
        key: "gpustack-serve".into(),
        title: "GPUStack performance lab: vllm bench serve against vLLM 0.11, SGLang 0.5 and TensorRT-LLM 1.x on A100 \
                SXM 80 GB (1-8 GPUs), all requests sent at once: ShareGPT and random lengths"
            .into(),
        source: "validation/data/gpustack_blocks_corrected.csv (the result blocks of gpustack/gpustack \
                 docs/performance-lab/*/a100.md @47277d79, Apache-2.0, with each block's serving command corrected \
                 from its page; validation/README.md)"
            .into(),
        method: "a simulation per block with the engine's profile (vllm-v1, sglang or trtllm) and the flags of its \
                 serving command; ShareGPT lengths lognormal with the block's mean lengths"
            .into(),
        role: Role::HeldOut,
        note: "held out except the vLLM blocks validation/calibrate.sh fits vllm-v1's overheads and kernel scales to \
               (marked fitted, counted apart)"
            .into(),
        rows,
    })
}

/// The `--rows` filters of validation/calibrate.sh: the GPUStack blocks the
/// shipped vllm-v1 profile was fitted to.
pub fn fitted_filters() -> Vec<&'static str> {
    include_str!("../../validation/calibrate.sh")
        .split("--rows \"")
        .skip(1)
        .filter_map(|t| t.split('"').next())
        .collect()
}

/// Whether a shipped constant was fitted to the GPUStack block `id`.
fn fitted_block(id: &str) -> bool {
    fitted_filters().iter().any(|f| id.contains(f))
}

/// The value after `flag` in a command line (`--flag 8` or `--flag=8`).
fn flag(cmd: &str, names: &[&str]) -> Option<String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        for n in names {
            if let Some(v) = w.strip_prefix(&format!("{n}=")) {
                return Some(v.to_string());
            }
            if w == n {
                return words.get(i + 1).map(|v| v.to_string());
            }
        }
    }
    None
}

/// A GPUStack block: its id, its engine and the measured (metric, value) pairs.
pub struct Block {
    /// `<page> #<block> <engine> <data set>`.
    pub id: String,
    /// The engine's profile: `vllm-v1`, `sglang` or `trtllm`.
    pub preset: &'static str,
    /// TTFT median (ms), TPOT median (ms), output tok/s.
    pub measured: [(&'static str, f64); 3],
    /// The scenario reproducing the block, or why it cannot be simulated.
    pub scenario: Result<String, String>,
}

/// Every GPUStack block of the shipped table.
pub fn gpustack_blocks() -> Vec<Block> {
    let t = Table::parse(include_str!("../../validation/data/gpustack_blocks_corrected.csv"), "gpustack");
    t.rows.iter().map(|r| gpustack_block(&t, r)).collect()
}

/// The calibration problem of the GPUStack blocks whose id contains one of
/// `filters` (all blocks when empty): TTFT and TPOT medians and output
/// throughput of each simulated block.
pub fn gpustack_problem(filters: &[String]) -> crate::calibrate::Problem {
    use crate::calibrate::{How, Point, Problem, Sim, Stat};
    let mut p = Problem { setups: Vec::new(), sims: Vec::new(), points: Vec::new(), skipped: Vec::new() };
    for b in gpustack_blocks() {
        if !filters.is_empty() && !filters.iter().any(|f| b.id.contains(f.as_str())) {
            continue;
        }
        let text = match b.scenario {
            Ok(t) => t,
            Err(why) => {
                p.skipped.push(format!("{}: {why}", b.id));
                continue;
            }
        };
        p.sims.push(Sim { name: b.id.clone(), text });
        let sim = p.sims.len() - 1;
        for ((metric, v), stat) in b.measured.iter().zip([Stat::Ttft(50.0), Stat::Tpot(50.0), Stat::OutputThroughput]) {
            p.points.push(Point {
                label: format!("{} {metric}", b.id),
                group: b.id.clone(),
                measured: *v,
                how: How::Sim { sim, stat },
            });
        }
    }
    p
}

/// One GPUStack block as a scenario.
fn gpustack_block(t: &Table, r: &[String]) -> Block {
    let doc = t.get(r, "doc");
    let engine = t.get(r, "engine");
    let cmd = t.get(r, "serving_command_effective");
    let bench = t.get(r, "bench");
    let n = t.num(r, "successful_requests");
    let id = format!("{} #{} {engine} {bench}", doc.trim_end_matches("__a100.md"), t.get(r, "block"));
    let measured = [
        ("TTFT p50 ms", t.num(r, "ttft_median_ms")),
        ("TPOT p50 ms", t.num(r, "tpot_median_ms")),
        ("output tok/s", t.num(r, "output_tok_s")),
    ];
    let preset = match engine {
        "vLLM" => "vllm-v1",
        "SGLang" => "sglang",
        _ => "trtllm",
    };
    let block = |scenario: Result<String, String>| Block { id: id.clone(), preset, measured, scenario };
    let model = match doc {
        "qwen3-32b__a100.md" => "qwen3-32b",
        "qwen3-14b__a100.md" => "qwen3-14b",
        "qwen3-235b-a22b__a100.md" => "qwen3-235b-a22b-2507",
        "glm-4.5-air__a100.md" => "glm-4.5-air",
        "glm-4.x__a100.md" => "glm-4.6",
        _ => {
            return block(Err(
                "gpt-oss is not modelled (alternating 128-token sliding-window attention with sinks, MXFP4 experts)"
                    .into(),
            ));
        }
    };
    let dtype = match t.get(r, "weights") {
        "FP8 ckpt" => "fp8",
        "AWQ ckpt" => "int4",
        _ => "bf16",
    };
    let tp = t.num(r, "gpus_used") as u32;
    let ep = t.get(r, "expert_parallel") == "True";
    let mut engine_keys = vec![format!("preset = \"{preset}\"")];
    let mut cost_keys = Vec::new();
    if let Some(v) = flag(cmd, &["--max-model-len", "--max_seq_len"]) {
        engine_keys.push(format!("max_model_len = {v}"));
    } else if preset == "vllm-v1" && model == "qwen3-32b" {
        // vLLM refuses Qwen3-32B's 40960-token context on one A100; the page's
        // own vLLM command (section 1) sets --max-model-len 32768.
        engine_keys.push("max_model_len = 32768".into());
    }
    if let Some(v) = flag(cmd, &["--max-num-batched-tokens", "--max_num_tokens"]) {
        engine_keys.push(format!("max_num_batched_tokens = {v}"));
    }
    if let Some(v) = flag(cmd, &["--cuda-graph-max-bs"]) {
        engine_keys.push(format!("cuda_graph_max_bs = {v}"));
    }
    if cmd.contains("--enable_chunked_prefill") {
        engine_keys.push("chunked_prefill = true\nmixed_prefill = false".into());
    }
    if cmd.contains("--async-scheduling") {
        // The scheduler runs one step ahead of the GPU (vllm/v1/core/sched/async_scheduler.py).
        cost_keys.push("cpu_overlap = 1.0".to_string());
    }
    let (inp, outp) = (t.num(r, "total_input_tokens") / n, t.num(r, "total_output_tokens") / n);
    let lengths = if bench.starts_with("SG") {
        // ShareGPT as vllm bench samples it (prompt <= 1024, total <= 2048): the
        // block's mean lengths, the dispersion of the filtered ShareGPT table.
        format!(
            "prompt_tokens = {{ dist = \"lognormal\", mean = {inp:.1}, cv = 0.863 }}\n\
             output_tokens = {{ dist = \"lognormal\", mean = {outp:.1}, cv = 0.642 }}\n"
        )
    } else {
        format!(
            "prompt_tokens = {{ dist = \"fixed\", value = {} }}\noutput_tokens = {{ dist = \"fixed\", value = {} }}\n",
            inp.round(),
            outp.round().max(1.0)
        )
    };
    let arrival = match t.num(r, "max_concurrency") {
        c if c.is_finite() => format!("arrival = \"closed-loop\"\nclosed_loop = {{ users = {c} }}\n"),
        _ => "arrival = \"offline\"\n".into(),
    };
    block(Ok(format!(
        "num_requests = {n}\nseed = 1\n[model]\nname = \"{model}\"\ndtype = \"{dtype}\"\n[hardware]\ngpu = \"a100-80gb\"\n\
         tp = {tp}\nexpert_parallel = {ep}\n[engine]\n{}\n[cost]\n{}\n[workload]\n{arrival}{lengths}on_too_long = \"clip\"\n",
        engine_keys.join("\n"),
        cost_keys.join("\n"),
    )))
}
