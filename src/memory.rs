//! The memory plan of one replica: weights, activations, reserve, KV cache.

use crate::config::{MemoryPlanKind, Scenario};
use crate::cost::Layout;
use crate::error::ConfigError;
use crate::spec::{GIB, GpuSpec, LlmSpec};
use serde::Serialize;

/// How one replica's GPU memory is spent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryPlan {
    /// Tensor-parallel degree: GPUs per pipeline stage.
    pub tp: u32,
    /// Pipeline stages per replica.
    pub pp: u32,
    /// GPUs per replica: `tp × pp`.
    pub gpus_per_replica: u32,
    /// Layers held by the largest pipeline stage: ⌈num_layers / pp⌉.
    pub layers_per_stage: u32,
    /// Whole experts held by each GPU under expert parallelism (⌈num_experts / tp⌉);
    /// 0 for a dense model or when experts are tensor-sliced.
    pub experts_per_gpu: u32,
    /// Whether MoE experts are spread whole across GPUs (`hardware.expert_parallel`).
    pub expert_parallel: bool,
    /// Memory per GPU, GiB.
    pub gpu_memory_gib: f64,
    /// `gpu_memory_utilization` × memory per GPU, GiB.
    pub usable_gib_per_gpu: f64,
    /// Model parameters.
    pub params: f64,
    /// All weights of the model, GiB.
    pub weights_gib_total: f64,
    /// Weights held by each GPU of the most loaded pipeline stage, GiB.
    pub weights_gib_per_gpu: f64,
    /// Peak activation memory reserved per GPU (profiled at `max_num_batched_tokens`), GiB.
    pub activation_gib_per_gpu: f64,
    /// Fixed reserve per GPU (`engine.memory_reserve_gb`), GiB.
    pub reserve_gib_per_gpu: f64,
    /// KV cache per GPU, GiB.
    pub kv_gib_per_gpu: f64,
    /// KV bytes per token on each GPU (its stage's layers only).
    pub kv_bytes_per_token_per_gpu: f64,
    /// Tokens per KV block.
    pub block_size: u32,
    /// KV blocks per replica.
    pub num_blocks: u64,
    /// KV capacity per replica, tokens.
    pub kv_capacity_tokens: u64,
    /// Longest accepted prompt + output, tokens.
    pub max_model_len: u32,
    /// Sequences of `max_model_len` tokens that fit at once.
    pub max_seqs_at_max_len: u64,
    /// True when `engine.num_gpu_blocks` fixed the block count.
    pub blocks_overridden: bool,
    /// Whose rule computed the KV budget: `legacy`, `vllm`, `sglang` or `trtllm`.
    pub engine_plan: String,
    /// The KV-cache element format.
    pub kv_dtype: String,
    /// Device memory the budget starts from (what CUDA reports), GiB.
    pub device_gib: f64,
    /// The KV budget per GPU as a formula with this plan's numbers.
    pub formula: String,
    /// What the engine itself would log about its KV cache.
    pub engine_log: Vec<String>,
    /// The most sequences the engine runs at once, when the memory plan
    /// limits it (SGLang's `max_running_requests`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
}

/// Activation memory a profiling pass at the step's token budget would need, bytes per GPU.
fn activation_bytes(llm: &LlmSpec, s: &Scenario) -> f64 {
    let tp = s.hardware.tp as f64;
    let t = s.engine.max_num_batched_tokens as f64;
    let h = llm.hidden_size as f64;
    let qkv = (llm.num_attention_heads + 2 * llm.num_kv_heads) as f64 * llm.head_dim as f64 / tp;
    let ffn = 3.0 * llm.intermediate_size as f64 * llm.experts_active() / tp;
    let logits = s.engine.max_num_seqs as f64 * llm.vocab_size as f64 / tp * 8.0;
    t * (4.0 * h + qkv + ffn) * 2.0 + logits
}

/// Weight bytes held by each GPU of the most loaded pipeline stage.
///
/// A stage holds ⌈num_layers / pp⌉ layers. Without a pipeline the single stage
/// also holds the embedding, the LM head and the final norm; with one the first
/// stage holds the embedding and the last the LM head (both keep a copy when
/// tied), so the most loaded stage holds one vocabulary × hidden matrix on top
/// of its layers (and the final norm). Everything is split across the stage's
/// `tp` GPUs except, under expert parallelism, the experts: each GPU holds
/// ⌈num_experts / tp⌉ whole ones.
///
/// Quantised checkpoints (FP8, INT4) keep the embedding and the LM head in
/// 16 bits: engines quantise the linear layers of the transformer blocks only
/// (vLLM's `Fp8Config` and compressed-tensors, ModelOpt, AWQ).
pub fn weight_bytes_per_gpu(llm: &LlmSpec, layout: &Layout, bytes_per_weight: f64) -> f64 {
    let tp = layout.tp.max(1) as f64;
    let eb = llm.expert_bytes_per_weight(bytes_per_weight);
    // Bytes the 16-bit embedding and LM head add beyond `bytes_per_weight` each.
    let edge_extra =
        |edge_params: f64| if bytes_per_weight < 2.0 { edge_params * (2.0 - bytes_per_weight) } else { 0.0 };
    if layout.pp <= 1 && !(layout.expert_parallel && llm.is_moe()) {
        // Everything on one stage, everything sliced: the whole model / tp.
        // Routed experts stored in their own format (gpt-oss MXFP4) save this much.
        let experts_apart = llm.routed_expert_params() * (bytes_per_weight - eb);
        if bytes_per_weight >= 2.0 {
            return (llm.total_params() * bytes_per_weight - experts_apart) / tp;
        }
        return (llm.total_params() * bytes_per_weight + edge_extra(llm.embedding_params()) - experts_apart) / tp;
    }
    let layers = layout.layers_per_stage(llm.num_layers) as f64;
    let h = llm.hidden_size as f64;
    // A stage holds its share of the MoE layers (all layers of a uniform model).
    let moe_share = if llm.is_moe() { llm.moe_layers() as f64 / llm.num_layers as f64 } else { 1.0 };
    let experts = llm.experts_stored() * llm.ffn_params_per_expert();
    let per_layer_shared = if llm.shared_experts == 0 && llm.dense_layers == 0 {
        llm.attn_params_per_layer() + llm.router_params_per_layer() + 2.0 * h
    } else {
        // Per layer on average: the router and shared experts of the MoE
        // layers, the dense FFN of the leading dense layers.
        llm.attn_params_per_layer()
            + 2.0 * h
            + moe_share * (llm.router_params_per_layer() + llm.shared_experts as f64 * llm.ffn_params_per_expert())
            + (1.0 - moe_share) * llm.dense_ffn_params()
    };
    let edge = if layout.pp <= 1 { llm.embedding_params() } else { llm.vocab_size as f64 * h };
    let sliced = layers * per_layer_shared + edge + h;
    let stage_moe = if llm.dense_layers > 0 { layers * moe_share } else { layers };
    let experts_here = if layout.expert_parallel && llm.is_moe() {
        stage_moe * layout.experts_per_gpu(llm) as f64 * llm.ffn_params_per_expert()
    } else {
        stage_moe * experts / tp
    };
    let params = if layout.expert_parallel && llm.is_moe() {
        sliced / tp + experts_here
    } else {
        (sliced + stage_moe * experts) / tp
    };
    params * bytes_per_weight + edge_extra(edge) / tp - experts_here * (bytes_per_weight - eb)
}

/// Peak activation memory per GPU of one forward pass over `t` tokens, bytes
/// (BF16 activations): the residual stream and its normalised copy, plus the
/// larger of the attention block's and the FFN block's live intermediates
/// (for an MoE layer, the routed rows `t × k` through the experts' gate/up
/// and activation, and the router logits).
pub fn forward_activation_bytes(llm: &LlmSpec, tp: u32, t: f64) -> f64 {
    let tp = tp.max(1) as f64;
    let h = llm.hidden_size as f64;
    let q = llm.num_attention_heads as f64 * llm.head_dim as f64;
    let kv = llm.num_kv_heads as f64 * llm.head_dim as f64;
    let stream = 2.0 * t * h * ACT_BYTES;
    let attn = t * (2.0 * q + 2.0 * kv) / tp * ACT_BYTES;
    let gated = llm.ffn.matrices() - 1.0;
    let dense_ffn = t * (gated + 1.0) * llm.intermediate_size as f64 / tp * ACT_BYTES;
    let ffn = if llm.is_moe() {
        let rows = t * llm.experts_active();
        let fe = llm.expert_ffn_size() as f64;
        let moe = rows * (gated + 1.0) * fe / tp * ACT_BYTES + t * llm.num_experts as f64 * 4.0 + rows * h * ACT_BYTES;
        if llm.dense_layers > 0 { moe.max(dense_ffn) } else { moe }
    } else {
        dense_ffn
    };
    stream + attn.max(ffn)
}

/// Peak memory per GPU of sampling `rows` sequences over the vocabulary,
/// bytes: FP32 logits, probabilities and a sort for top-k/top-p (values and
/// 64-bit indices), as vLLM's dummy sampler run exercises it.
pub fn sampler_bytes(llm: &LlmSpec, rows: f64) -> f64 {
    rows * llm.vocab_size as f64 * (4.0 + 4.0 + 4.0 + 8.0)
}

/// Activation element size (BF16), bytes.
const ACT_BYTES: f64 = 2.0;

/// Plans memory for `s` on `gpu`; errors when the model does not fit.
pub fn plan(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario) -> Result<MemoryPlan, ConfigError> {
    let tp = s.hardware.tp;
    let pp = s.hardware.pp;
    check_layout(llm, gpu, s)?;
    let layout = Layout::from_hardware(&s.hardware);
    let e = &s.engine;
    let params = llm.total_params();
    let w = s.model.dtype.bytes();
    let weights = weight_bytes_per_gpu(llm, &Layout::tensor(1), w);
    let per_gpu_w = weight_bytes_per_gpu(llm, &layout, w);
    let kv_dtype = s.kv_dtype();
    let layers_per_stage = layout.layers_per_stage(llm.num_layers);
    let kv_tok = llm.kv_bytes_per_token(layers_per_stage as f64, tp as f64, kv_dtype.bytes());
    let mut budget = Budget::new(llm, gpu, s, per_gpu_w);
    // Sliding-window KV and linear-attention state a sequence holds whatever its
    // length: reserved for the sequences the engine may run at once (at most
    // max_num_seqs, at most half the cache), which then caps them.
    let seq_state = llm.seq_state_bytes(layers_per_stage as f64, tp as f64, kv_dtype.bytes(), e.block_size);
    let state_seqs = budget.hold_seq_state(seq_state, e.max_num_seqs);
    let kv_bytes = budget.kv;
    if kv_bytes <= 0.0 {
        return Err(no_fit(llm, gpu, s, weights, budget.usable, budget.act + budget.reserve));
    }
    // vLLM keeps one block as the null block (vllm/v1/core/block_pool.py:157).
    let null_blocks = u64::from(e.memory_plan == MemoryPlanKind::Vllm);
    let (num_blocks, overridden) = match e.num_gpu_blocks {
        Some(n) => (n, true),
        None => {
            ((kv_bytes / (kv_tok * e.block_size as f64)).floor().max(null_blocks as f64) as u64 - null_blocks, false)
        }
    };
    if num_blocks == 0 {
        return Err(no_fit(llm, gpu, s, weights, budget.usable, budget.act + budget.reserve));
    }
    let capacity = num_blocks * e.block_size as u64;
    let max_model_len = max_model_len(llm, e, capacity)?;
    let kv_gib = (num_blocks as f64 * e.block_size as f64 * kv_tok) / GIB;
    let max_running = max_running(e, capacity, max_model_len, state_seqs);
    let engine_log = budget.log(e, capacity, num_blocks, kv_gib, max_model_len, per_gpu_w, max_running);
    Ok(MemoryPlan {
        tp,
        pp,
        gpus_per_replica: layout.gpus(),
        layers_per_stage,
        experts_per_gpu: layout.experts_per_gpu(llm),
        expert_parallel: layout.expert_parallel,
        gpu_memory_gib: budget.memory / GIB,
        usable_gib_per_gpu: budget.usable / GIB,
        params,
        weights_gib_total: weights / GIB,
        weights_gib_per_gpu: per_gpu_w / GIB,
        activation_gib_per_gpu: budget.act / GIB,
        reserve_gib_per_gpu: budget.reserve / GIB,
        kv_gib_per_gpu: kv_gib,
        kv_bytes_per_token_per_gpu: kv_tok,
        block_size: e.block_size,
        num_blocks,
        kv_capacity_tokens: capacity,
        max_model_len,
        max_seqs_at_max_len: capacity / max_model_len as u64,
        blocks_overridden: overridden,
        engine_plan: e.memory_plan.as_str().to_string(),
        kv_dtype: kv_dtype.as_str().to_string(),
        device_gib: budget.memory / GIB,
        formula: budget.formula,
        engine_log,
        max_running,
    })
}

/// Refuses a parallel layout the model or the GPU cannot take: tp beyond one
/// NVLink domain or not dividing the attention heads, more pipeline stages
/// than layers, expert parallelism on a dense model.
fn check_layout(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario) -> Result<(), ConfigError> {
    let tp = s.hardware.tp;
    let pp = s.hardware.pp;
    if tp > gpu.scale_up_gpus {
        return Err(ConfigError::new(format!(
            "tp = {tp} spans more GPUs than one {} NVLink domain joins ({}): servesim models tensor-parallel \
             collectives inside one domain only",
            gpu.name, gpu.scale_up_gpus
        ))
        .key("hardware.tp")
        .hint(format!(
            "use tp <= {} and pipeline stages (pp) or more replicas beyond it, or a GPU with a larger domain \
             (gb200: 72)",
            gpu.scale_up_gpus
        )));
    }
    if !llm.num_attention_heads.is_multiple_of(tp) {
        return Err(ConfigError::new(format!(
            "tp = {tp} does not divide the {} attention heads of {}",
            llm.num_attention_heads, llm.name
        ))
        .key("hardware.tp")
        .hint("use a tp that divides the head count, e.g. 1, 2, 4 or 8"));
    }
    if pp > llm.num_layers {
        return Err(ConfigError::new(format!(
            "pp = {pp} pipeline stages for the {} layers of {}: some stages would hold no layer",
            llm.num_layers, llm.name
        ))
        .key("hardware.pp")
        .hint(format!("use pp <= {} (a divisor of {} balances the stages)", llm.num_layers, llm.num_layers)));
    }
    if s.hardware.expert_parallel && !llm.is_moe() {
        return Err(ConfigError::new(format!(
            "expert_parallel = true but {} is a dense model (num_experts = 0): there are no experts to spread",
            llm.name
        ))
        .key("hardware.expert_parallel")
        .hint("remove expert_parallel (or set it to false), or use a mixture-of-experts model such as mixtral-8x7b"));
    }
    Ok(())
}

/// The longest sequence the engine admits: `max_model_len` when set (refused
/// beyond the model's context, except by TensorRT-LLM, or beyond the KV
/// cache's `capacity` tokens); else the model's context (vLLM refuses to
/// start when the cache cannot hold it; the others cap it at the capacity).
fn max_model_len(llm: &LlmSpec, e: &crate::config::EngineConfig, capacity: u64) -> Result<u32, ConfigError> {
    Ok(match e.max_model_len {
        // TensorRT-LLM builds an engine for any max_seq_len (trtllm-bench sets it to the data set's
        // longest request); vLLM and SGLang refuse lengths beyond the model's config.
        Some(m) if m > llm.max_context && e.memory_plan != MemoryPlanKind::Trtllm => {
            return Err(ConfigError::new(format!(
                "max_model_len {m} exceeds {}'s context of {} tokens",
                llm.name, llm.max_context
            ))
            .key("engine.max_model_len")
            .hint(format!("use max_model_len <= {}", llm.max_context)));
        }
        Some(m) if m as u64 > capacity => {
            return Err(ConfigError::new(format!(
                "max_model_len {m} is larger than the KV cache can hold ({capacity} tokens per replica)"
            ))
            .key("engine.max_model_len")
            .hint(format!(
                "use max_model_len <= {capacity}, raise gpu_memory_utilization, or use more GPUs (tp or pp)"
            )));
        }
        Some(m) => m,
        None if e.memory_plan == MemoryPlanKind::Vllm && llm.max_context as u64 > capacity => {
            // vLLM V1 refuses to start rather than shrink max_model_len
            // (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory).
            return Err(ConfigError::new(format!(
                "vLLM would refuse to start: {}'s max seq len ({}) is larger than the maximum number of tokens \
                 that can be stored in KV cache ({capacity})",
                llm.name, llm.max_context
            ))
            .key("engine.max_model_len")
            .hint(format!(
                "set engine.max_model_len <= {capacity} (vLLM's --max-model-len), raise gpu_memory_utilization, or \
                 use more GPUs (tp or pp)"
            )));
        }
        None if e.memory_plan == MemoryPlanKind::Vllm => llm.max_context,
        None => llm.max_context.min(capacity.min(u32::MAX as u64) as u32),
    })
}

/// The engine's cap on running sequences, if any: SGLang's
/// `max_running_requests`, and the sequences per-sequence state was held
/// for (`state_seqs`), the smaller of the two.
fn max_running(
    e: &crate::config::EngineConfig,
    capacity: u64,
    max_model_len: u32,
    state_seqs: Option<u32>,
) -> Option<u32> {
    let sglang = (e.memory_plan == MemoryPlanKind::Sglang).then(|| {
        // SGLang: max_running_requests = min(KV tokens // 2, request pool), the pool
        // min(max(KV / context × 512, 2048), 4096) (model_runner.py:1553-1562, tp_worker.py:278-290).
        let pool = ((capacity as f64 / max_model_len as f64 * 512.0) as u64).clamp(2048, 4096);
        (capacity / 2).min(pool).min(e.max_num_seqs as u64).max(1) as u32
    });
    match (sglang, state_seqs) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The KV-cache budget of one GPU under an engine's memory plan.
struct Budget {
    /// Device memory the plan starts from, bytes.
    memory: f64,
    /// Memory the fraction leaves to weights, activations and KV, bytes.
    usable: f64,
    /// Activation peak charged, bytes.
    act: f64,
    /// Fixed reserve charged, bytes.
    reserve: f64,
    /// KV-cache bytes.
    kv: f64,
    /// The computation in words.
    formula: String,
    /// SGLang's `mem_fraction_static` in effect.
    mfs: f64,
}

impl Budget {
    /// Holds KV memory for the per-sequence state (`seq_state` bytes each:
    /// sliding-window KV, linear-attention state) of the sequences the engine
    /// may run at once (at most `max_num_seqs`, at most half the cache), and
    /// says so in the formula; returns that number of sequences (None
    /// without such state or without room for KV).
    fn hold_seq_state(&mut self, seq_state: f64, max_num_seqs: u32) -> Option<u32> {
        (seq_state > 0.0 && self.kv > 0.0).then(|| {
            let n = (max_num_seqs as f64).min((self.kv * 0.5 / seq_state).floor()).max(1.0);
            self.kv -= n * seq_state;
            self.formula += &format!(
                "; {:.2} GiB of it is held for per-sequence state ({:.1} MiB × {n:.0} sequences: sliding-window KV, \
                 linear-attention state), leaving {:.2} GiB for KV blocks",
                n * seq_state / GIB,
                seq_state / (1024.0 * 1024.0),
                self.kv / GIB
            );
            n as u32
        })
    }

    fn new(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario, weights: f64) -> Budget {
        let e = &s.engine;
        let tp = s.hardware.tp;
        let g = |b: f64| b / GIB;
        match e.memory_plan {
            MemoryPlanKind::Legacy => {
                let act = activation_bytes(llm, s);
                utilisation_budget(gpu.memory_bytes(), e, weights, act, |u, m, w, a, r, kv| {
                    format!("{u} × {m:.2} GiB − {w:.2} weights − {a:.2} activations − {r:.2} reserve = {kv:.2} GiB")
                })
            }
            MemoryPlanKind::Vllm => {
                // vllm/v1/worker/gpu_worker.py determine_available_memory: a dummy
                // forward of the token budget, then a dummy sampler over
                // min(max_num_seqs, budget) rows; the peak of the two.
                let t = e.max_num_batched_tokens as f64;
                let rows = (e.max_num_seqs.min(e.max_num_batched_tokens)) as f64;
                let act = forward_activation_bytes(llm, tp, t).max(sampler_bytes(llm, rows));
                utilisation_budget(gpu.device_bytes(), e, weights, act, |u, m, w, a, r, kv| {
                    format!(
                        "gpu_memory_utilization {u} × {m:.2} GiB − {w:.2} weights − {a:.2} peak activation (forward \
                         of {t:.0} tokens, sampler of {rows:.0} rows) − {r:.2} non-PyTorch = {kv:.2} GiB"
                    )
                })
            }
            MemoryPlanKind::Sglang => {
                // SGLang: KV = free after weights − free at start × (1 − mem_fraction_static)
                // (model_runner.py:1317-1322); free at start = device memory − the CUDA
                // context and NCCL (memory_reserve_gb).
                let memory = gpu.device_bytes();
                let mfs = e.mem_fraction_static.unwrap_or_else(|| sglang_mem_fraction(gpu, e, tp, s.hardware.pp));
                let reserve = e.memory_reserve_gb * GIB;
                let free0 = memory - reserve;
                let usable = free0 * mfs;
                let kv = usable - weights;
                let formula = format!(
                    "mem_fraction_static {mfs} × ({:.2} GiB − {:.2} context) − {:.2} weights = {:.2} GiB \
                     (activations and CUDA graphs live in the other {:.1} %)",
                    g(memory),
                    g(reserve),
                    g(weights),
                    g(kv),
                    (1.0 - mfs) * 100.0
                );
                Budget { memory, usable, act: 0.0, reserve, kv, formula, mfs }
            }
            MemoryPlanKind::Trtllm => {
                // TensorRT-LLM 1.x KvCacheCreator: (total − peak of a max_num_tokens
                // profiling pass, NCCL and CUDA graphs included) × free fraction.
                let memory = gpu.device_bytes();
                let t = e.max_num_batched_tokens as f64;
                let act = forward_activation_bytes(llm, tp, t);
                let reserve = e.memory_reserve_gb * GIB;
                let free = memory - weights - act - reserve;
                let f = e.kv_cache_free_gpu_memory_fraction;
                let kv = free * f;
                let formula = format!(
                    "kv_cache_free_gpu_memory_fraction {f} × ({:.2} GiB − {:.2} weights − {:.2} activations of \
                     {t:.0} tokens − {:.2} runtime) = {:.2} GiB",
                    g(memory),
                    g(weights),
                    g(act),
                    g(reserve),
                    g(kv)
                );
                Budget { memory, usable: free, act, reserve, kv, formula, mfs: 0.0 }
            }
        }
    }

    /// The lines the engine would log about its KV cache.
    #[allow(clippy::too_many_arguments)]
    fn log(
        &self,
        e: &crate::config::EngineConfig,
        capacity: u64,
        blocks: u64,
        kv_gib: f64,
        max_model_len: u32,
        weights: f64,
        max_running: Option<u32>,
    ) -> Vec<String> {
        match e.memory_plan {
            MemoryPlanKind::Legacy => Vec::new(),
            MemoryPlanKind::Vllm => vec![
                format!("Model loading took {:.4} GiB", weights / GIB),
                format!("Available KV cache memory: {:.2} GiB", self.kv / GIB),
                format!("GPU KV cache size: {} tokens", (blocks + 1) * e.block_size as u64),
                format!(
                    "Maximum concurrency for {max_model_len} tokens per request: {:.2}x",
                    (blocks + 1) as f64 / (max_model_len as f64 / e.block_size as f64).ceil()
                ),
            ],
            MemoryPlanKind::Sglang => vec![
                format!("mem_fraction_static={}", self.mfs),
                format!(
                    "KV Cache is allocated. #tokens: {capacity}, K size: {:.2} GB, V size: {:.2} GB",
                    kv_gib / 2.0,
                    kv_gib / 2.0
                ),
                format!(
                    "max_total_num_tokens={capacity}, chunked_prefill_size={}, max_running_requests={}, context_len={max_model_len}",
                    e.max_num_batched_tokens,
                    max_running.unwrap_or(e.max_num_seqs)
                ),
            ],
            MemoryPlanKind::Trtllm => vec![format!(
                "[MemUsageChange] Allocated {kv_gib:.2} GiB for max tokens in paged KV cache ({capacity})."
            )],
        }
    }
}

/// A budget of `gpu_memory_utilization` × `memory` less weights, activations
/// and the reserve; `formula` writes it from (utilisation, memory GiB,
/// weights GiB, activations GiB, reserve GiB, KV GiB).
fn utilisation_budget(
    memory: f64,
    e: &crate::config::EngineConfig,
    weights: f64,
    act: f64,
    formula: impl Fn(f64, f64, f64, f64, f64, f64) -> String,
) -> Budget {
    let usable = memory * e.gpu_memory_utilization;
    let reserve = e.memory_reserve_gb * GIB;
    let kv = usable - weights - act - reserve;
    let f = formula(e.gpu_memory_utilization, memory / GIB, weights / GIB, act / GIB, reserve / GIB, kv / GIB);
    Budget { memory, usable, act, reserve, kv, formula: f, mfs: 0.0 }
}

/// SGLang's automatic `mem_fraction_static` (server_args.py:785-829): the
/// reserve in MiB is 512 + 1.5 × max(chunk, 2048) + 2 × cuda_graph_max_bs +
/// 128 × tp × pp, at least 10 GiB on GPUs above 60 GiB; the fraction is
/// (memory − reserve) / memory, rounded to 3 decimals.
pub fn sglang_mem_fraction(gpu: &GpuSpec, e: &crate::config::EngineConfig, tp: u32, pp: u32) -> f64 {
    let mib = gpu.memory_gb * 1024.0;
    let chunk = e.max_num_batched_tokens.max(2048) as f64;
    let mut reserve = 512.0 + 1.5 * chunk + 2.0 * e.cuda_graph_max_bs as f64 + 128.0 * (tp * pp) as f64;
    if mib > 60.0 * 1024.0 {
        reserve = reserve.max(10.0 * 1024.0);
    }
    ((mib - reserve) / mib * 1000.0).round() / 1000.0
}

fn no_fit(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario, weights: f64, usable: f64, other: f64) -> ConfigError {
    let layout = Layout::from_hardware(&s.hardware);
    let (tp, pp) = (layout.tp, layout.pp);
    let dt = s.model.dtype.bytes();
    // TensorRT-LLM's plan counts the memory left after the weights (and the
    // activations and reserve): the GPU's share before them is that plus them.
    let usable = if s.engine.memory_plan == MemoryPlanKind::Trtllm {
        usable + weight_bytes_per_gpu(llm, &layout, dt) + other
    } else {
        usable
    };
    // A layout "fits" when it leaves at least 1 GiB per GPU for the KV cache.
    let fits = |l: Layout, wbytes: f64| weight_bytes_per_gpu(llm, &l, wbytes) + other < usable - GIB;
    let mut fix = Vec::new();
    if let Some(t) = [2u32, 4, 8, 16, 32, 64].into_iter().find(|&t| {
        t > tp
            && t <= gpu.scale_up_gpus
            && llm.num_attention_heads.is_multiple_of(t)
            && fits(Layout { tp: t, ..layout }, dt)
    }) {
        fix.push(format!("use tp = {t} or more"));
    }
    if let Some(p) = [2u32, 4, 8, 16]
        .into_iter()
        .find(|&p| p > pp && p <= llm.num_layers && fits(Layout { pp: p, micro_batches: p, ..layout }, dt))
    {
        fix.push(format!("pipeline stages pp = {p} (hardware.pp)"));
    }
    if dt > 1.0 && fits(layout, 1.0) {
        fix.push("dtype = \"fp8\"".to_string());
    } else if dt > 0.5 && fits(layout, 0.5) {
        fix.push("dtype = \"int4\"".to_string());
    }
    fix.push("a GPU with more memory".to_string());
    let gpus = layout.gpus();
    ConfigError::new(format!(
        "{} in {} needs {:.1} GiB of weights; {gpus} × {} holds {:.1} GiB ({:.0} GiB each at gpu_memory_utilization {}), \
         of which {:.1} GiB per GPU go to activations and the reserve: no room is left for the KV cache",
        llm.name,
        s.model.dtype.as_str(),
        weights / GIB,
        gpu.name,
        usable * gpus as f64 / GIB,
        gpu.memory_gb,
        s.engine.gpu_memory_utilization,
        other / GIB,
    ))
    .key("hardware.tp")
    .hint(fix.join(", or "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::scenario::load_scenario_str;
    use std::path::Path;

    fn plan_for(model: &str, sets: &[&str]) -> Result<MemoryPlan, ConfigError> {
        let text = format!(
            "num_requests = 10\n[model]\nname = \"{model}\"\n[workload]\nrate = 1\n\
             prompt_tokens = {{ dist = \"fixed\", value = 100 }}\noutput_tokens = {{ dist = \"fixed\", value = 10 }}\n"
        );
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let s = load_scenario_str(&text, Path::new("t.toml"), &sets)?.scenario;
        let c = Catalog::builtin().unwrap();
        let llm = c.model(model).unwrap().spec.clone();
        let gpu = c.gpu(&s.hardware.gpu).unwrap().spec.clone();
        plan(&llm, &gpu, &s)
    }

    #[test]
    fn two_stages_halve_the_weights_and_the_kv_per_token_per_gpu() {
        let one = plan_for("llama-3.1-70b", &["model.dtype=\"fp8\"", "hardware.tp=2"]).unwrap();
        let two = plan_for("llama-3.1-70b", &["model.dtype=\"fp8\"", "hardware.tp=2", "hardware.pp=2"]).unwrap();
        assert_eq!((two.gpus_per_replica, two.layers_per_stage, two.pp), (4, 40, 2));
        // 40 layers + one vocabulary matrix per stage: half of everything (the
        // final norm, counted on both stages, is the only excess).
        assert!((two.weights_gib_per_gpu / one.weights_gib_per_gpu - 0.5).abs() < 1e-6);
        assert_eq!(two.kv_bytes_per_token_per_gpu, one.kv_bytes_per_token_per_gpu / 2.0);
        // Half the KV per token and more free memory per GPU: more than twice the tokens.
        assert!(
            two.kv_capacity_tokens > 2 * one.kv_capacity_tokens,
            "{} vs {}",
            two.kv_capacity_tokens,
            one.kv_capacity_tokens
        );
    }

    #[test]
    fn per_gpu_weights_times_gpus_cover_the_model() {
        for (model, sets) in [
            ("llama-3.1-70b", vec!["hardware.tp=4"]),
            ("llama-3.1-70b", vec!["hardware.tp=2", "hardware.pp=2"]),
            ("llama-3.1-70b", vec!["hardware.tp=1", "hardware.pp=3", "model.dtype=\"fp8\""]),
            ("llama-3.1-8b", vec!["hardware.pp=4"]),
            ("mixtral-8x7b", vec!["hardware.tp=2", "hardware.expert_parallel=true"]),
            ("mixtral-8x7b", vec!["hardware.tp=2", "hardware.pp=2", "hardware.expert_parallel=true"]),
        ] {
            let p = plan_for(model, &sets).unwrap_or_else(|e| panic!("{model} {sets:?}: {e}"));
            let cover = p.weights_gib_per_gpu * p.gpus_per_replica as f64 / p.weights_gib_total;
            // Exact for one or two even stages; beyond, every stage is sized as the
            // most loaded one: a vocabulary matrix on the middle stages too, and
            // the largest stage's layers when they do not divide evenly.
            let llm = Catalog::builtin().unwrap().model(model).unwrap().spec.clone();
            let (pp, l) = (p.pp as f64, llm.num_layers as f64);
            // (FP8 checkpoints keep the vocabulary matrices in BF16: twice the bytes per parameter.)
            let edge = if sets.iter().any(|s| s.contains("fp8")) { 2.0 } else { 1.0 };
            let vh = edge * llm.vocab_size as f64 * llm.hidden_size as f64 / p.params;
            let bound = 1.0 + (pp - 2.0).max(0.0) * vh + (p.layers_per_stage as f64 * pp - l) / l;
            assert!(
                cover >= 1.0 - 1e-6 && cover <= bound + 1e-4,
                "{model} {sets:?}: per-GPU × GPUs = {cover}, bound {bound}"
            );
            if p.pp <= 2 {
                assert!((cover - 1.0).abs() < 1e-4, "{model} {sets:?}: {cover}");
            }
        }
    }

    #[test]
    fn expert_parallel_holds_whole_experts() {
        let tp = plan_for("mixtral-8x7b", &["hardware.tp=2"]).unwrap();
        let ep = plan_for("mixtral-8x7b", &["hardware.tp=2", "hardware.expert_parallel=true"]).unwrap();
        assert_eq!((tp.experts_per_gpu, ep.experts_per_gpu), (0, 4));
        assert!(ep.expert_parallel && !tp.expert_parallel);
        // 4 whole experts of 8 hold as much as half of every expert.
        assert!((ep.weights_gib_per_gpu / tp.weights_gib_per_gpu - 1.0).abs() < 1e-9);
        // tp = 16 (a GB200 NVL72 domain) over 8 experts: one whole expert each (8 GPUs idle in the FFN),
        // more than the 1/16 of every expert tensor parallelism would hold.
        let ep16 =
            plan_for("mixtral-8x7b", &["hardware.tp=16", "hardware.gpu=\"gb200\"", "hardware.expert_parallel=true"])
                .unwrap();
        let tp16 = plan_for("mixtral-8x7b", &["hardware.tp=16", "hardware.gpu=\"gb200\""]).unwrap();
        assert_eq!(ep16.experts_per_gpu, 1);
        assert!(ep16.weights_gib_per_gpu > tp16.weights_gib_per_gpu * 1.5);
    }

    #[test]
    fn bad_layouts_name_their_key() {
        let e = plan_for("llama-3.1-8b", &["hardware.expert_parallel=true"]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("hardware.expert_parallel"));
        assert!(e.hint.unwrap().contains("mixture-of-experts"));
        let e = plan_for("llama-3.1-8b", &["hardware.pp=33"]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("hardware.pp"));
        assert!(e.hint.unwrap().contains("pp <= 32"));
        // 405B in BF16 on 8 × H100 does not fit; 2 stages of 8 do.
        let e = plan_for("llama-3.1-405b", &["hardware.tp=8"]).unwrap_err();
        assert!(e.hint.unwrap().contains("pp = 2"), "no pp suggested");
    }
}
