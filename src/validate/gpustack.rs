//! GPUStack's performance-lab result blocks: `vllm bench serve` (and the
//! SGLang / TensorRT-LLM equivalents) against vLLM 0.11, SGLang 0.5 and
//! TensorRT-LLM 1.x, one simulation per block, on each GPU the lab measured
//! ([`LABS`]: A100 SXM 80 GB and H100 SXM).

use super::{Dataset, Role, Row, Table};
use crate::Catalog;
use rayon::prelude::*;

/// One GPU's pages of the performance lab.
pub struct Lab {
    /// The data set's key in `validate`.
    pub key: &'static str,
    /// The corrected blocks (CSV text).
    pub csv: &'static str,
    /// The catalogue GPU the blocks ran on.
    pub gpu: &'static str,
    /// Page-name suffixes stripped from the block ids, with the tag each leaves
    /// (`qwen3.5-9b__h100-latency.md` → `qwen3.5-9b-latency`).
    pub pages: &'static [(&'static str, &'static str)],
    /// What was measured.
    pub title: &'static str,
    /// Where the file comes from.
    pub source: &'static str,
}

/// The labs `validate` and `calibrate` know.
pub const LABS: &[Lab] = &[
    Lab {
        key: "gpustack-serve",
        csv: include_str!("../../validation/data/gpustack_blocks_corrected.csv"),
        gpu: "a100-80gb",
        pages: &[("__a100.md", "")],
        title: "GPUStack performance lab: vllm bench serve against vLLM 0.11, SGLang 0.5 and TensorRT-LLM 1.x on \
                A100 SXM 80 GB (1-8 GPUs), all requests sent at once: ShareGPT and random lengths",
        source: "validation/data/gpustack_blocks_corrected.csv (the result blocks of gpustack/gpustack \
                 docs/performance-lab/*/a100.md @47277d79, Apache-2.0, with each block's serving command corrected \
                 from its page; validation/README.md)",
    },
    Lab {
        key: "gpustack-serve-h100",
        csv: include_str!("../../validation/data/gpustack_blocks_h100_corrected.csv"),
        gpu: "h100-sxm",
        pages: &[("__h100-latency.md", "-latency"), ("__h100.md", "")],
        title: "GPUStack performance lab: vllm bench serve against vLLM 0.11, SGLang 0.5 and TensorRT-LLM 1.x on \
                H100 SXM (1-8 GPUs): bursts of 1,000 ShareGPT prompts, random lengths, concurrency 1-8 and \
                request-rate sweeps",
        source: "validation/data/gpustack_blocks_h100_corrected.csv (the result blocks of gpustack/gpustack \
                 docs/performance-lab/*/h100.md and h100-latency.md, Apache-2.0, each block's serving command and \
                 bench settings corrected from its page; validation/README.md)",
    },
];

/// The lab of data set `key`.
pub fn lab(key: &str) -> Option<&'static Lab> {
    LABS.iter().find(|l| l.key == key)
}

/// The engine's name in metric labels.
fn engine_label(preset: &str) -> &'static str {
    match preset {
        "vllm-v1" => "vLLM",
        "sglang" => "SGLang",
        _ => "TRT-LLM",
    }
}

/// One lab's blocks, simulated: the data set `validate` reports.
pub fn dataset(catalog: &Catalog, lab: &Lab) -> crate::Result<Dataset> {
    let blocks = blocks(lab);
    let fitted = super::fitted_filters(&format!("validation:{}", lab.key));
    let out: Vec<Vec<Row>> = blocks
        .par_iter()
        .map(|b| {
            let engine = engine_label(b.preset);
            let fitted = fitted.iter().any(|filters| super::selects(filters, &b.id));
            let rows = |pred: [f64; 3], why: Option<String>| -> Vec<Row> {
                b.measured
                    .iter()
                    .zip(pred)
                    .filter(|((_, v), _)| v.is_finite())
                    .map(|(&(m, v), p)| Row {
                        excluded: why.clone(),
                        fitted,
                        ..Row::new(b.id.clone(), &format!("{engine} {m}"), v, p)
                    })
                    .collect()
            };
            match &b.scenario {
                Err(why) => rows([f64::NAN; 3], Some(why.clone())),
                Ok(text) => match super::simulate(catalog, &b.id, text) {
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
        key: lab.key.into(),
        title: lab.title.into(),
        source: lab.source.into(),
        method: "a simulation per block with the engine's profile (vllm-v1, sglang or trtllm) and the flags of its \
                 serving command; ShareGPT lengths lognormal with the block's mean lengths, random lengths fixed, \
                 the bench's concurrency or Poisson request rate"
            .into(),
        role: Role::HeldOut,
        note: "held out except the blocks validation/calibrate.sh fits the engine profiles to (marked fitted, counted \
               apart)"
            .into(),
        rows,
    })
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

/// Every block of a lab.
pub fn blocks(lab: &Lab) -> Vec<Block> {
    let t = Table::parse(lab.csv, lab.key);
    t.rows.iter().map(|r| block(lab, &t, r)).collect()
}

/// The calibration problem of the blocks of `lab` that `filters` select
/// ([`super::selects`]): TTFT and TPOT medians and output throughput of each
/// simulated block.
pub fn problem(lab: &Lab, filters: &[String]) -> crate::calibrate::Problem {
    use crate::calibrate::{How, Point, Problem, Sim, Stat};
    let mut p = Problem { setups: Vec::new(), sims: Vec::new(), points: Vec::new(), skipped: Vec::new() };
    for b in blocks(lab) {
        if !super::selects(filters, &b.id) {
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
            if !v.is_finite() {
                continue;
            }
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

/// The catalogue model of a page, or why it is not simulated.
fn model_of(page: &str) -> Result<&'static str, String> {
    Ok(match page {
        "qwen3-32b" => "qwen3-32b",
        "qwen3-14b" => "qwen3-14b",
        "qwen3-8b" => "qwen3-8b",
        "qwen3-235b-a22b" => "qwen3-235b-a22b-2507",
        "glm-4.5-air" => "glm-4.5-air",
        "glm-4.x" => "glm-4.6",
        "gpt-oss-120b" => "gpt-oss-120b",
        "gpt-oss-20b" => "gpt-oss-20b",
        "qwen3.5-9b" => "qwen3.5-9b",
        p => return Err(format!("{p} is not in the catalogue")),
    })
}

/// One block as a scenario.
fn block(lab: &Lab, t: &Table, r: &[String]) -> Block {
    let doc = t.get(r, "doc");
    let (page, tag) =
        lab.pages.iter().find_map(|(suffix, tag)| doc.strip_suffix(suffix).map(|p| (p, *tag))).unwrap_or((doc, ""));
    let engine = t.get(r, "engine");
    let cmd = t.get(r, "serving_command_effective");
    let bench = t.get(r, "bench");
    let n = t.num(r, "successful_requests");
    let id = format!("{page}{tag} #{} {engine} {bench}", t.get(r, "block"));
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
    if t.missing(&["excluded"]).is_none() && !t.get(r, "excluded").is_empty() {
        return block(Err(t.get(r, "excluded").to_string()));
    }
    let model = match model_of(page) {
        Ok(m) => m,
        Err(why) => return block(Err(why)),
    };
    if cmd.contains("--speculative") {
        return block(Err(
            "speculative decoding with a draft model whose acceptance rate the page does not give".into()
        ));
    }
    let dtype = match t.get(r, "weights") {
        "FP8 ckpt" => "fp8",
        "AWQ ckpt" => "int4",
        _ => "bf16",
    };
    let gpus = t.num(r, "gpus_used") as u32;
    let pp: u32 = flag(cmd, &["-pp", "--pp-size", "--pipeline-parallel-size", "--pp_size"])
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let tp = (gpus / pp).max(1);
    let ep = t.get(r, "expert_parallel") == "True";
    let mut engine_keys = vec![format!("preset = \"{preset}\"")];
    let mut cost_keys = Vec::new();
    if let Some(v) = flag(cmd, &["--max-model-len", "--max_seq_len"]) {
        engine_keys.push(format!("max_model_len = {v}"));
    } else if preset == "vllm-v1" && model == "qwen3-32b" && lab.gpu == "a100-80gb" {
        // vLLM refuses Qwen3-32B's 40960-token context on one A100; the page's
        // own vLLM command (section 1) sets --max-model-len 32768.
        engine_keys.push("max_model_len = 32768".into());
    }
    if let Some(v) = flag(cmd, &["--max-num-batched-tokens", "--max_num_tokens"]) {
        engine_keys.push(format!("max_num_batched_tokens = {v}"));
    }
    if let Some(v) = flag(cmd, &["--max-num-seqs", "--max_batch_size", "--max-running-requests"]) {
        engine_keys.push(format!("max_num_seqs = {v}"));
    }
    if let Some(v) = flag(cmd, &["--gpu-memory-utilization"]) {
        engine_keys.push(format!("gpu_memory_utilization = {v}"));
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
    let rate = if t.missing(&["request_rate_rps"]).is_none() { t.num(r, "request_rate_rps") } else { f64::NAN };
    let arrival = match t.num(r, "max_concurrency") {
        c if c.is_finite() => format!("arrival = \"closed-loop\"\nclosed_loop = {{ users = {c} }}\n"),
        _ if rate.is_finite() => format!("arrival = \"poisson\"\nrate = {rate}\n"),
        _ => "arrival = \"offline\"\n".into(),
    };
    let pp_key = if pp > 1 { format!("pp = {pp}\n") } else { String::new() };
    block(Ok(format!(
        "num_requests = {n}\nseed = 1\n[model]\nname = \"{model}\"\ndtype = \"{dtype}\"\n[hardware]\ngpu = \"{}\"\n\
         tp = {tp}\n{pp_key}expert_parallel = {ep}\n[engine]\n{}\n[cost]\n{}\n[workload]\n{arrival}{lengths}\
         on_too_long = \"clip\"\n",
        lab.gpu,
        engine_keys.join("\n"),
        cost_keys.join("\n"),
    )))
}
