//! GPUStack's performance-lab result blocks ([`LABS`]: A100 SXM 80 GB and
//! H100 SXM), each read into the scenario that reproduces it; and the run of
//! a result row in GPUStack's columns, which `servesim calibrate` also reads
//! from a user's serving-results table.

use super::Table;
use super::runs::{Arrival, Lengths};

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

/// The shortest TPOT a decode step of `model` can take on `gpu`, ms: every
/// GPU reads its share of the weights once per step at the GPU's peak
/// memory bandwidth (0 when the model or GPU is unknown).
fn tpot_floor_ms(model: &str, gpu: &str, tp: u32, pp: u32, dtype: Option<&str>) -> f64 {
    static CATALOG: std::sync::OnceLock<Option<crate::Catalog>> = std::sync::OnceLock::new();
    let Some(c) = CATALOG.get_or_init(|| crate::Catalog::builtin().ok()) else { return 0.0 };
    let (Some(m), Some(g)) = (c.model(model), c.gpu(gpu)) else { return 0.0 };
    let bytes = match dtype {
        Some("fp8") => 1.0,
        Some("int4") => 0.5,
        _ => 2.0,
    };
    let layout = crate::cost::Layout { tp, pp, ..crate::cost::Layout::tensor(tp) };
    crate::memory::weight_bytes_per_gpu(&m.spec, &layout, bytes) / (g.spec.memory_bandwidth_gbps * 1e9) * 1e3
}

/// Why a result row is left out, by its own `excluded` column (empty or
/// absent: it is not).
pub fn excluded(t: &Table, r: &[String]) -> Option<String> {
    (t.missing(&["excluded"]).is_none() && !t.get(r, "excluded").is_empty()).then(|| t.get(r, "excluded").to_string())
}

/// Field `name` of a row, or "" when the table has no such column.
fn opt<'a>(t: &Table, r: &'a [String], name: &str) -> &'a str {
    if t.missing(&[name]).is_none() { t.get(r, name) } else { "" }
}

/// Field `name` of a row as a number (NaN when absent, empty or not a number).
fn opt_num(t: &Table, r: &[String], name: &str) -> f64 {
    opt(t, r, name).trim().parse().unwrap_or(f64::NAN)
}

/// A result row's run, from its own columns: the requests, the layout, the
/// weights, the engine flags of its serving command and its workload.
#[derive(Debug, Clone)]
pub struct RowRun {
    /// Requests completed (`successful_requests`).
    pub n: f64,
    /// Tensor-parallel degree: `tp`, else `gpus_used` / pp.
    pub tp: u32,
    /// Pipeline-parallel degree (from the serving command; 1 without one).
    pub pp: u32,
    /// Whether the experts are spread over the GPUs (`expert_parallel` = True).
    pub ep: bool,
    /// Weight format from `weights` (GPUStack's `FP8 ckpt`, `AWQ ckpt`, else
    /// bf16) or `dtype`; `None` when the table has neither.
    pub dtype: Option<String>,
    /// `[engine]` lines the serving command sets (`max_model_len = 32768`).
    pub engine_keys: Vec<String>,
    /// `[cost]` lines the serving command implies.
    pub cost_keys: Vec<String>,
    /// How the bench sent its requests.
    pub arrival: Arrival,
    /// Its lengths: ShareGPT's for a `bench` starting with `SG`, else fixed.
    pub lengths: Lengths,
}

/// The run of a result row with columns `successful_requests`,
/// `total_input_tokens`, `total_output_tokens`, `tp` or `gpus_used`, and
/// optionally `max_concurrency` (a closed loop), `request_rate_rps` (Poisson),
/// `serving_command_effective`, `weights` or `dtype`, `expert_parallel`,
/// `bench`. `max_model_len`: the engine's context when the command sets
/// none and one must be set. Err: why it cannot be simulated.
pub fn row_run(t: &Table, r: &[String], max_model_len: Option<u32>) -> Result<RowRun, String> {
    let cmd = opt(t, r, "serving_command_effective");
    if cmd.contains("--speculative") {
        return Err("speculative decoding with a draft model whose acceptance rate the page does not give".into());
    }
    let n = opt_num(t, r, "successful_requests");
    if !(n.is_finite() && n >= 1.0) {
        return Err(format!("successful_requests must be a number >= 1, got {:?}", opt(t, r, "successful_requests")));
    }
    let dtype = match (t.missing(&["weights"]), opt(t, r, "weights"), opt(t, r, "dtype")) {
        (None, "FP8 ckpt", _) => Some("fp8".to_string()),
        (None, "AWQ ckpt", _) => Some("int4".to_string()),
        (None, _, _) => Some("bf16".to_string()),
        (Some(_), _, "") => None,
        (Some(_), _, d) => Some(d.to_lowercase()),
    };
    let pp: u32 = flag(cmd, &["-pp", "--pp-size", "--pipeline-parallel-size", "--pp_size"])
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let tp = match opt_num(t, r, "tp") {
        tp if tp.is_finite() && tp >= 1.0 => tp as u32,
        _ => {
            let gpus = opt_num(t, r, "gpus_used");
            if !(gpus.is_finite() && gpus >= 1.0) {
                return Err("the row needs `tp` or `gpus_used`, a number >= 1".into());
            }
            (gpus as u32 / pp).max(1)
        }
    };
    let ep = opt(t, r, "expert_parallel") == "True";
    let mut engine_keys = Vec::new();
    let mut cost_keys = Vec::new();
    if let Some(v) = flag(cmd, &["--max-model-len", "--max_seq_len"]) {
        engine_keys.push(format!("max_model_len = {v}"));
    } else if let Some(v) = max_model_len {
        engine_keys.push(format!("max_model_len = {v}"));
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
    let (inp, outp) = (opt_num(t, r, "total_input_tokens") / n, opt_num(t, r, "total_output_tokens") / n);
    if !(inp.is_finite() && inp >= 0.5 && outp.is_finite() && outp >= 0.0) {
        return Err(
            "total_input_tokens and total_output_tokens must be numbers, at least one prompt token a request".into()
        );
    }
    let lengths = if opt(t, r, "bench").starts_with("SG") {
        Lengths::ShareGpt { input: inp, output: outp }
    } else {
        Lengths::Fixed { input: inp, output: outp }
    };
    let rate = opt_num(t, r, "request_rate_rps");
    let arrival = match opt_num(t, r, "max_concurrency") {
        c if c.is_finite() && c >= 1.0 => Arrival::Closed(c as u32),
        // GuideLLM's constant strategy (Qwen3.5's pages, per the row's notes).
        _ if rate.is_finite() && rate > 0.0 && opt(t, r, "notes").contains("constant-interval") => {
            Arrival::Constant(rate)
        }
        _ if rate.is_finite() && rate > 0.0 => Arrival::Poisson(rate),
        _ => Arrival::Offline,
    };
    Ok(RowRun { n, tp, pp, ep, dtype, engine_keys, cost_keys, arrival, lengths })
}

/// One block as a scenario.
fn block(lab: &Lab, t: &Table, r: &[String]) -> Block {
    let doc = t.get(r, "doc");
    let (page, tag) =
        lab.pages.iter().find_map(|(suffix, tag)| doc.strip_suffix(suffix).map(|p| (p, *tag))).unwrap_or((doc, ""));
    let engine = t.get(r, "engine");
    let bench = t.get(r, "bench");
    let id = format!("{page}{tag} #{} {engine} {bench}", t.get(r, "block"));
    let mut measured = [
        ("TTFT p50 ms", t.num(r, "ttft_median_ms")),
        ("TPOT p50 ms", t.num(r, "tpot_median_ms")),
        ("output tok/s", t.num(r, "output_tok_s")),
    ];
    let preset = match engine {
        "vLLM" => "vllm-v1",
        "SGLang" => "sglang",
        _ => "trtllm",
    };
    let block = |scenario: Result<String, String>, measured| Block { id: id.clone(), preset, measured, scenario };
    if let Some(why) = excluded(t, r) {
        return block(Err(why), measured);
    }
    let model = match model_of(page) {
        Ok(m) => m,
        Err(why) => return block(Err(why), measured),
    };
    // vLLM refuses Qwen3-32B's 40960-token context on one A100; the page's
    // own vLLM command (section 1) sets --max-model-len 32768.
    let context = (preset == "vllm-v1" && model == "qwen3-32b" && lab.gpu == "a100-80gb").then_some(32768);
    let run = match row_run(t, r, context) {
        Ok(run) => run,
        Err(why) => return block(Err(why), measured),
    };
    if measured[1].1 < tpot_floor_ms(model, lab.gpu, run.tp, run.pp, run.dtype.as_deref()) {
        // A median TPOT shorter than reading the weights once cannot be a
        // decode step: the client got its tokens in bursts (Qwen3.5's pages,
        // 0.0-5 ms). The TTFT and throughput of the block still count.
        measured[1].1 = f64::NAN;
    }
    let mut engine_keys = vec![format!("preset = \"{preset}\"")];
    engine_keys.extend(run.engine_keys);
    let pp_key = if run.pp > 1 { format!("pp = {}\n", run.pp) } else { String::new() };
    block(
        Ok(format!(
            "num_requests = {}\nseed = 1\n[model]\nname = \"{model}\"\ndtype = \"{}\"\n[hardware]\ngpu = \"{}\"\n\
         tp = {}\n{pp_key}expert_parallel = {}\n[engine]\n{}\n[cost]\n{}\n[workload]\n{}{}\
         on_too_long = \"clip\"\n",
            run.n,
            run.dtype.as_deref().unwrap_or("bf16"),
            lab.gpu,
            run.tp,
            run.ep,
            engine_keys.join("\n"),
            run.cost_keys.join("\n"),
            run.arrival.toml(),
            run.lengths.toml(),
        )),
        measured,
    )
}
