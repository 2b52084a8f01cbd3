//! `[engine]`: the serving engine's scheduler, memory and queue settings
//! (batching, chunked prefill, KV-cache sizing and offload, preemption,
//! admission, speculative decoding).

use serde::{Deserialize, Serialize};

/// `[engine]`: vLLM-style continuous batching.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// An engine profile of the catalogue (`models/engine/<name>.toml`:
    /// `vllm-v1`, `sglang`, `trtllm`, `vllm-v0`, `sarathi`, `orca`, `static`,
    /// or a profile of your own); it fills the `[engine]` and `[cost]` keys
    /// the scenario does not set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Iteration-level (continuous) or request-level (static) batching.
    pub batching: Batching,
    /// Static batching: a batch starts when `max_num_seqs` requests wait or the
    /// oldest has waited this long, ms.
    pub batch_timeout_ms: f64,
    /// Without chunked prefill: whole prompts join steps next to the decodes
    /// (Orca) instead of running in prefill-only steps (vLLM v0).
    pub mixed_prefill: bool,
    /// Chunked prefill: the largest chunk of one prompt in one step
    /// (vLLM's `long_prefill_token_threshold`); default: the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_chunk_tokens: Option<u32>,
    /// Chunked prefill: prefill-prioritised steps. A step that has prompt
    /// work runs only prompt work and decodes wait (vLLM v0's priority, with
    /// chunks); default: decodes first (vLLM v1, Sarathi-Serve).
    pub prefill_first: bool,
    /// Fraction of KV blocks kept free when admitting a waiting request
    /// (vLLM's watermark; vLLM v0 uses 0.01).
    pub kv_watermark: f64,
    /// Automatic prefix caching: full KV blocks are kept and shared by
    /// identity (system prompts, session context), skipping their prefill.
    pub prefix_caching: bool,
    /// Maximum sequences in a batch (running requests per replica).
    pub max_num_seqs: u32,
    /// Token budget of one engine step (prefill chunk tokens + one per decode).
    pub max_num_batched_tokens: u32,
    /// Multi-step scheduling (vLLM 0.6's `--num-scheduler-steps`): a batch
    /// is scheduled once and runs this many steps; the steps after the first
    /// admit nobody, start no prompt and pay no host-side step cost. Without
    /// chunked prefill only decode batches run several steps. 1: off.
    pub num_scheduler_steps: u32,
    /// Split prefills into chunks that fill the token budget next to decodes.
    pub chunked_prefill: bool,
    /// Tokens per KV-cache block.
    pub block_size: u32,
    /// Fraction of GPU memory the engine may use (weights + activations + KV).
    pub gpu_memory_utilization: f64,
    /// Maximum context (prompt + output) accepted; defaults to the model's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    /// Fixes the number of KV blocks per replica instead of deriving it from memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_gpu_blocks: Option<u64>,
    /// Memory held back per GPU for the CUDA context, graphs and fragmentation, GiB.
    pub memory_reserve_gb: f64,
    /// Fixed preprocessing (HTTP + tokenisation) delay before admission, ms.
    pub preprocess_ms: f64,
    /// Preprocessing delay per prompt token, microseconds.
    pub preprocess_us_per_token: f64,
    /// Front-end latency that occupies no worker (the API server awaiting its
    /// engine and client connections), added after the workers' preprocessing, ms.
    pub frontend_latency_ms: f64,
    /// Processes that preprocess requests (the API server: HTTP handling,
    /// tokenisation), each one request at a time, first come first served;
    /// 0: unlimited (preprocessing is a pure delay). vLLM serves from one
    /// API server process unless `--api-server-count` says otherwise.
    pub frontend_workers: u32,
    /// Order of the waiting queue.
    pub queue_order: QueueOrder,
    /// `priority` order: a waiting request's value drops by one level per
    /// this many seconds waited, so a high value cannot starve (absent, the
    /// default as in vLLM: strict priority).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_aging_s: Option<f64>,
    /// `shortest-job` order: the output length is predicted with a
    /// multiplicative lognormal error of this sigma (0: known exactly).
    pub prediction_error: f64,
    /// Most requests waiting per replica; more are refused (`queue_full`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_waiting: Option<u32>,
    /// A request not scheduled within this many seconds of its arrival is
    /// abandoned by its client (`timed_out`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_s: Option<f64>,
    /// Speculative decoding (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeConfig>,
    /// What happens to a preempted decoding sequence's KV cache.
    pub preemption: Preemption,
    /// `preemption = "swap"`: host memory for swapped-out KV blocks, GiB per GPU
    /// (vLLM's `swap_space`).
    pub swap_space_gb: f64,
    /// `preemption = "swap"`: host-to-GPU copy bandwidth per GPU, GB/s
    /// (PCIe Gen4 x16 ≈ 25 in practice, Gen5 ≈ 50).
    pub swap_bandwidth_gbps: f64,
    /// KV offload tier in host memory: copies of the prefix blocks computed
    /// on the GPU, loaded back instead of recomputed, GiB per GPU (0: none).
    /// Needs `prefix_caching`.
    pub kv_offload_cpu_gb: f64,
    /// Host-to-GPU bandwidth of the host tier, per GPU, GB/s.
    pub kv_offload_cpu_gbps: f64,
    /// KV offload tier on local disk (NVMe) below the host tier, GiB per GPU (0: none).
    pub kv_offload_disk_gb: f64,
    /// Disk-to-GPU bandwidth of the disk tier, per GPU, GB/s.
    pub kv_offload_disk_gbps: f64,
    /// Which KV connector runs the tiers (docs/kv-offload.md): `lmcache`
    /// (stores each computed prompt chunk synchronously after the forward
    /// pass, loads synchronously before it; host and disk tiers) or `vllm`
    /// (vLLM's OffloadingConnector: copies asynchronously, parks a request
    /// while its blocks load; host tier only).
    pub kv_offload_connector: OffloadConnector,
    /// How the KV-cache budget is computed (docs/engines.md): `legacy`
    /// (servesim before Step 5), or as `vllm`, `sglang` or `trtllm` compute it.
    pub memory_plan: MemoryPlanKind,
    /// SGLang `mem_fraction_static`: fraction of GPU memory for weights and
    /// KV cache (`memory_plan = "sglang"`; unset: SGLang's automatic rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_fraction_static: Option<f64>,
    /// TensorRT-LLM `kv_cache_free_gpu_memory_fraction`: fraction of the
    /// memory left after weights and activations given to the KV cache
    /// (`memory_plan = "trtllm"`).
    pub kv_cache_free_gpu_memory_fraction: f64,
    /// KV-cache format when `model.kv_dtype` is not set: `auto` (the
    /// activations' format, BF16, as vLLM and SGLang do), `bf16`, `fp8`, or
    /// `fp8-with-fp8-weights` (FP8 when the weights are FP8: TensorRT-LLM).
    pub kv_cache_dtype: KvCacheDtype,
    /// Largest decode batch captured as a CUDA graph (SGLang reserves memory
    /// for it; 0: none).
    pub cuda_graph_max_bs: u32,
    /// What a waiting request must find free in the KV cache to be admitted
    /// (docs/engines.md): `chunk`, `prompt`, `max-length` or `reserve`.
    pub admission: Admission,
    /// Which running sequence is preempted when KV blocks run out.
    pub preempt_victim: Victim,
    /// Where a preempted request goes back in the waiting queue.
    pub preempted_to: QueueEnd,
    /// `admission = "reserve"` (SGLang): starting fraction of their remaining
    /// output that running requests are assumed to still need.
    pub new_token_ratio: f64,
    /// `admission = "reserve"`: the fraction's floor.
    pub min_new_token_ratio: f64,
    /// `admission = "reserve"`: decode steps over which the fraction falls
    /// linearly from `new_token_ratio` to `min_new_token_ratio`.
    pub new_token_ratio_decay_steps: u32,
}

/// How the KV-cache budget of a replica is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MemoryPlanKind {
    /// `gpu_memory_utilization` × memory − weights − activations at the token
    /// budget − `memory_reserve_gb` (servesim before Step 5).
    #[default]
    Legacy,
    /// vLLM V1: `gpu_memory_utilization` × total memory − weights − the peak
    /// activation of a profiling pass − non-PyTorch memory.
    Vllm,
    /// SGLang: `mem_fraction_static` × memory − weights (activations and
    /// CUDA graphs live in the rest).
    Sglang,
    /// TensorRT-LLM: `kv_cache_free_gpu_memory_fraction` × (memory −
    /// weights − activation buffers − runtime).
    Trtllm,
}

impl MemoryPlanKind {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryPlanKind::Legacy => "legacy",
            MemoryPlanKind::Vllm => "vllm",
            MemoryPlanKind::Sglang => "sglang",
            MemoryPlanKind::Trtllm => "trtllm",
        }
    }
}

/// The KV-cache element format an engine picks by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum KvCacheDtype {
    /// The activations' format (BF16), whatever the weights (vLLM, SGLang).
    #[default]
    Auto,
    /// BF16.
    Bf16,
    /// FP8.
    Fp8,
    /// FP8 when the weights are FP8, else BF16 (TensorRT-LLM).
    Fp8WithFp8Weights,
}

/// The software that moves KV blocks between GPU memory and the offload tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OffloadConnector {
    /// LMCache 0.3: every computed prompt chunk is stored right after the
    /// forward pass, which waits for it; loads finish before the forward
    /// pass; host memory and local disk (written through).
    #[default]
    Lmcache,
    /// vLLM 0.11's OffloadingConnector: every full block is copied to host
    /// memory asynchronously after its step; a request whose blocks are
    /// loaded is parked until they arrive; no disk tier.
    Vllm,
}

impl OffloadConnector {
    /// The scenario name.
    pub fn as_str(self) -> &'static str {
        match self {
            OffloadConnector::Lmcache => "lmcache",
            OffloadConnector::Vllm => "vllm",
        }
    }
}

/// What a waiting request must find free in the KV cache to be admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Blocks for the prompt chunk scheduled now (vLLM V1).
    #[default]
    Chunk,
    /// Blocks for the whole prompt (vLLM V0's `can_allocate`).
    Prompt,
    /// Blocks for the prompt and the whole output, held until the request
    /// ends, so nothing is ever preempted (TensorRT-LLM `GUARANTEED_NO_EVICT`).
    MaxLength,
    /// The prompt and the whole output must fit next to what the running
    /// requests are expected to still need (their remaining output ×
    /// `new_token_ratio`, a fraction that decays while nothing is preempted):
    /// SGLang's admission.
    Reserve,
}

/// Which running sequence is preempted when KV blocks run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// The most recently admitted (vLLM).
    #[default]
    Newest,
    /// The one with the fewest generated tokens, ties to the longest prompt
    /// (SGLang's retraction order).
    FewestGenerated,
}

/// An end of the waiting queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QueueEnd {
    /// The head: served next (vLLM).
    #[default]
    Front,
    /// The tail: behind every waiting request (SGLang).
    Back,
}

/// Preemption mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Preemption {
    /// Free the blocks; the sequence prefills its prompt and output again (vLLM's default).
    #[default]
    Recompute,
    /// Copy a decoding sequence's blocks to host memory and back when it resumes;
    /// falls back to recompute when the host space is full (prefilling sequences always recompute).
    Swap,
}

/// How draft tokens are proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SpecMethod {
    /// A smaller draft model (`draft_model`) runs `num_tokens` decode steps per verify step.
    #[default]
    Draft,
    /// Multi-token prediction: a one-layer head of the target model proposes the tokens
    /// (DeepSeek-V3 MTP, EAGLE-style).
    Mtp,
}

/// `[engine.speculative]`: speculative decoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeConfig {
    /// How draft tokens are proposed.
    #[serde(default)]
    pub method: SpecMethod,
    /// `draft`: the draft model, a file stem in `models/llm/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    /// Tokens proposed per verify step (k); 0 turns speculation off (for
    /// `[baseline]` and sweeps).
    pub num_tokens: u32,
    /// Probability that each proposed token is accepted (α), for classes
    /// that do not set `spec_acceptance`.
    pub acceptance: f64,
}

impl SpeculativeConfig {
    /// The table when it turns speculation on.
    pub fn active(e: &EngineConfig) -> Option<&SpeculativeConfig> {
        e.speculative.as_ref().filter(|s| s.num_tokens > 0)
    }

    /// Mean tokens emitted per verify step with acceptance `alpha`:
    /// (1 − α^(k+1)) / (1 − α).
    pub fn expected_tokens(k: u32, alpha: f64) -> f64 {
        if alpha >= 1.0 { (k + 1) as f64 } else { (1.0 - alpha.powi(k as i32 + 1)) / (1.0 - alpha) }
    }
}

/// Order of a replica's waiting queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum QueueOrder {
    /// First come first served (vLLM's default).
    #[default]
    Fcfs,
    /// Lower class priority value first (as vLLM), ties by arrival; aging only with `priority_aging_s`.
    Priority,
    /// Shortest prompt first.
    ShortestPrompt,
    /// Shortest (predicted) output first.
    ShortestJob,
    /// Earliest deadline first: arrival + the class's TTFT objective.
    Edf,
}

/// Batching granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Batching {
    /// Iteration-level: requests join and leave the batch at every step.
    #[default]
    Continuous,
    /// Request-level (FasterTransformer style): a batch runs until all its requests finish.
    Static,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            preset: None,
            batching: Batching::Continuous,
            batch_timeout_ms: 50.0,
            mixed_prefill: false,
            prefill_first: false,
            max_chunk_tokens: None,
            prefix_caching: false,
            kv_watermark: 0.0,
            max_num_seqs: 256,
            num_scheduler_steps: 1,
            max_num_batched_tokens: 8192,
            chunked_prefill: true,
            block_size: 16,
            gpu_memory_utilization: 0.9,
            max_model_len: None,
            num_gpu_blocks: None,
            memory_reserve_gb: 1.0,
            preprocess_ms: 0.0,
            preprocess_us_per_token: 0.0,
            frontend_latency_ms: 0.0,
            queue_order: QueueOrder::Fcfs,
            priority_aging_s: None,
            prediction_error: 0.0,
            max_waiting: None,
            max_wait_s: None,
            speculative: None,
            preemption: Preemption::Recompute,
            swap_space_gb: 4.0,
            swap_bandwidth_gbps: 25.0,
            kv_offload_cpu_gb: 0.0,
            kv_offload_cpu_gbps: 25.0,
            kv_offload_disk_gb: 0.0,
            kv_offload_disk_gbps: 5.0,
            kv_offload_connector: OffloadConnector::Lmcache,
            frontend_workers: 0,
            memory_plan: MemoryPlanKind::Legacy,
            mem_fraction_static: None,
            kv_cache_free_gpu_memory_fraction: 0.9,
            kv_cache_dtype: KvCacheDtype::Auto,
            cuda_graph_max_bs: 0,
            admission: Admission::Chunk,
            preempt_victim: Victim::Newest,
            preempted_to: QueueEnd::Front,
            new_token_ratio: 0.7,
            min_new_token_ratio: 0.098,
            new_token_ratio_decay_steps: 600,
        }
    }
}
