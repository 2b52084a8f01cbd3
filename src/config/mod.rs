//! The scenario: a plain, typed description of one simulation, read from TOML.
//!
//! Every key is documented in `docs/scenario.md`. Defaults are filled in by
//! serde, so a resolved [`Scenario`] serialises back to the complete
//! configuration (this is what `manifest.json` and `servesim check` show).

mod engine;
mod fleet;
mod lora;
mod validate;
pub use validate::shown;
mod workload;

pub use engine::{
    Admission, Batching, EngineConfig, KvCacheDtype, MemoryPlanKind, OffloadConnector, Preemption, QueueEnd,
    QueueOrder, SpecMethod, SpeculativeConfig, Victim,
};
pub use fleet::{
    FleetConfig, MAX_SLOTS, OnFailure, RuleKind, ScalePolicy, ScalingRule, ScalingRules, ScheduleEntry,
    ScriptedFailure, SelectRule,
};
pub use lora::{LoraConfig, Popularity};
pub use workload::*;

/// Percentiles reported for every latency metric.
pub const PERCENTILES: [f64; 6] = [50.0, 90.0, 95.0, 99.0, 99.9, 99.99];

use crate::spec::{GpuSpec, LlmSpec};
use serde::{Deserialize, Serialize};

/// One simulation scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario name; results go to `output/<name>/`. Defaults to the file stem.
    #[serde(default)]
    pub name: String,
    /// Free text, recorded in `manifest.json`.
    #[serde(default)]
    pub description: String,
    /// Seed of every random stream in the run.
    #[serde(default)]
    pub seed: u64,
    /// Number of requests to generate (exclusive with `duration_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_requests: Option<u64>,
    /// Generate arrivals during this many seconds (exclusive with `num_requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Requests arriving before this time are simulated but left out of the metrics.
    #[serde(default)]
    pub warmup_s: f64,
    /// Latency percentiles the terminal summary prints, as `vllm bench serve
    /// --metric-percentiles` chooses them (e.g. `[50, 90, 99, 99.9]`). Any not
    /// among the standard six (50, 90, 95, 99, 99.9, 99.99) are added to
    /// summary.json as `p<P>_<metric>_ms`. Empty: the standard table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<f64>,
    /// The LLM and its numeric formats.
    pub model: ModelConfig,
    /// GPUs, parallelism, replicas and routing.
    #[serde(default)]
    pub hardware: HardwareConfig,
    /// Engine (scheduler) knobs, named as vLLM names them.
    #[serde(default)]
    pub engine: EngineConfig,
    /// Step-time model.
    #[serde(default)]
    pub cost: CostConfig,
    /// Traffic.
    pub workload: WorkloadConfig,
    /// Service-level objectives; enable goodput and SLO attainment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloConfig>,
    /// The search space of `servesim plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanConfig>,
    /// A parameter grid for `servesim sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepConfig>,
    /// Engine pools replacing `hardware.gpu`/`tp`/`replicas`: heterogeneous
    /// replicas, or prefill/decode disaggregation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolConfig>,
    /// LoRA adapters the requests name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraConfig>,
    /// Replicas that come and go: autoscaling, cold starts, failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetConfig>,
    /// How KV caches move from prefill to decode pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<DisaggregationConfig>,
    /// Overrides (dotted keys) that define a baseline simulated beside every
    /// configuration with the same arrivals and lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<toml::Table>,
    /// Folder that relative file paths (traces, length tables) are read from:
    /// the scenario file's folder. Not part of the file.
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
}

impl Scenario {
    /// The KV-cache format in effect: `model.kv_dtype` if set, else the
    /// engine's default (`engine.kv_cache_dtype`) for the weight format.
    pub fn kv_dtype(&self) -> KvDtype {
        self.model.kv_dtype.unwrap_or(match self.engine.kv_cache_dtype {
            KvCacheDtype::Auto | KvCacheDtype::Bf16 => KvDtype::Bf16,
            KvCacheDtype::Fp8 => KvDtype::Fp8,
            KvCacheDtype::Fp8WithFp8Weights if self.model.dtype == Dtype::Fp8 => KvDtype::Fp8,
            KvCacheDtype::Fp8WithFp8Weights => KvDtype::Bf16,
        })
    }
}

/// What a pool's replicas do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PoolRole {
    /// Whole requests: prefill and decode (the usual engine).
    #[default]
    Mixed,
    /// Prefill only: after the first token the KV cache moves to a decode pool.
    Prefill,
    /// Decode only: requests arrive with their prompt's KV cache.
    Decode,
}

impl PoolRole {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolRole::Mixed => "mixed",
            PoolRole::Prefill => "prefill",
            PoolRole::Decode => "decode",
        }
    }
}

/// One `[[pools]]` entry: identical replicas with their own GPU, tp and engine settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Pool name (in results).
    pub name: String,
    /// What its replicas do.
    #[serde(default)]
    pub role: PoolRole,
    /// A file stem in `models/gpu/`.
    pub gpu: String,
    /// Tensor-parallel degree: GPUs per replica.
    #[serde(default = "one")]
    pub tp: u32,
    /// Replicas in the pool.
    #[serde(default = "one")]
    pub replicas: u32,
    /// Overrides the GPU profile's hourly price (USD per GPU-hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<f64>,
    /// `[engine]` keys that differ in this pool (a `preset` included).
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub engine: toml::Table,
    /// `[cost]` keys that differ in this pool.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub cost: toml::Table,
}

/// `[disaggregation]`: the link the KV cache crosses from a prefill replica to a decode replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisaggregationConfig {
    /// Bandwidth of one transfer, GB/s (e.g. 50 for 400 Gb/s InfiniBand, 450 for NVLink).
    pub kv_transfer_gbps: f64,
    /// Fixed latency of one transfer (connection setup, first byte), ms.
    pub kv_transfer_latency_ms: f64,
}

impl Default for DisaggregationConfig {
    fn default() -> Self {
        DisaggregationConfig { kv_transfer_gbps: 50.0, kv_transfer_latency_ms: 1.0 }
    }
}

/// How grid axes combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SweepMode {
    /// Every combination of the axes' values.
    #[default]
    Cartesian,
    /// The axes advance in lock step (all lists have the same length).
    Zip,
}

/// `[sweep]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    /// Axes: dotted scenario key → list of values, in order.
    #[serde(default)]
    pub grid: toml::Table,
    /// How the axes combine.
    #[serde(default)]
    pub mode: SweepMode,
    /// Independent runs per point (seeds derived from the scenario seed,
    /// the point index and the replication).
    #[serde(default = "one")]
    pub replications: u32,
}

fn one() -> u32 {
    1
}

/// Bytes per NVFP4 weight: four bits, plus one FP8 scale per block of 16.
pub const FP4_BYTES: f64 = 0.5625;

/// Weight format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 16-bit brain float weights and activations.
    #[default]
    Bf16,
    /// 8-bit float weights and activations (W8A8): FP8 tensor-core rate.
    Fp8,
    /// 4-bit integer weights, 16-bit activations (W4A16): BF16 tensor-core rate.
    Int4,
    /// 4-bit float weights and activations (W4A4, NVFP4: 16 E2M1 values
    /// share one FP8 scale, 4.5 bits per weight): FP4 tensor-core rate on
    /// GPUs with FP4 units (`fp4_tflops` > 0, Blackwell and MI355X);
    /// elsewhere weight-only at the BF16 rate, as vLLM's Marlin FP4 fallback
    /// runs it.
    Fp4,
}

impl Dtype {
    /// Bytes per weight.
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Bf16 => 2.0,
            Dtype::Fp8 => 1.0,
            Dtype::Int4 => 0.5,
            Dtype::Fp4 => FP4_BYTES,
        }
    }
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
            Dtype::Int4 => "int4",
            Dtype::Fp4 => "fp4",
        }
    }
}

/// KV-cache element format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    /// 16-bit KV cache (vLLM's `auto` for BF16 models).
    #[default]
    Bf16,
    /// 8-bit KV cache.
    Fp8,
}

impl KvDtype {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            KvDtype::Bf16 => "bf16",
            KvDtype::Fp8 => "fp8",
        }
    }

    /// Bytes per cached element.
    pub fn bytes(self) -> f64 {
        match self {
            KvDtype::Bf16 => 2.0,
            KvDtype::Fp8 => 1.0,
        }
    }
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A file stem in `models/llm/` (e.g. `llama-3.1-8b`), or a label when `spec` is given.
    pub name: String,
    /// Weight format.
    #[serde(default)]
    pub dtype: Dtype,
    /// KV-cache format; unset: the engine's default (`engine.kv_cache_dtype`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<KvDtype>,
    /// An inline architecture instead of a catalogue file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<LlmSpec>,
}

/// Request router in front of the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RouterKind {
    /// Replicas in turn.
    #[default]
    RoundRobin,
    /// The replica with the fewest requests admitted and not yet finished (ties: lowest index).
    LeastOutstanding,
    /// A replica drawn uniformly at random.
    Random,
    /// The replica with the fewest KV blocks in use.
    LeastKv,
    /// Join the shortest queue by pending tokens (prompt chunks, recomputes and outputs still to compute).
    LeastTokens,
    /// Power of two choices: two replicas at random, the one with fewer outstanding requests.
    PowerOfTwo,
    /// A session's requests go to the replica its first request went to (chosen by least outstanding).
    SessionAffinity,
    /// One queue in front of all replicas: a request is dispatched (first come first served) only when a
    /// replica has fewer than `max_num_seqs` requests, to the least loaded one.
    CentralQueue,
    /// The replica that was sent the longest matching prefix (system prompt, session context, trace
    /// hash blocks), unless it has more than `prefix_load_cap` requests above the least loaded one.
    PrefixAware,
}

/// `[hardware]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HardwareConfig {
    /// A file stem in `models/gpu/` (e.g. `h100-sxm`), or a label when `gpu_spec` is given.
    pub gpu: String,
    /// An inline GPU profile instead of a catalogue file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_spec: Option<GpuSpec>,
    /// Tensor-parallel degree: GPUs per pipeline stage (each layer is split across them).
    pub tp: u32,
    /// Pipeline-parallel degree: stages per replica, each holding a contiguous
    /// ⌈num_layers / pp⌉ (or fewer) layers on its own `tp` GPUs. A replica has `tp × pp` GPUs.
    pub pp: u32,
    /// Micro-batches each engine step is split into as it flows through the
    /// pipeline stages; unset means `pp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub micro_batches: Option<u32>,
    /// Expert parallelism (vLLM `--enable-expert-parallel`): an MoE model's
    /// experts are spread whole across the `tp` GPUs of a stage (⌈experts / tp⌉
    /// each) instead of being tensor-sliced; each MoE layer adds an all-to-all
    /// dispatch and combine. An error for a dense model.
    pub expert_parallel: bool,
    /// Identical engine replicas behind the router.
    pub replicas: u32,
    /// Routing policy.
    pub router: RouterKind,
    /// `prefix-aware` routing: most outstanding requests above the least
    /// loaded replica that the prefix's replica may have and still get it.
    pub prefix_load_cap: u32,
    /// Overrides the GPU profile's hourly price (USD per GPU-hour).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<f64>,
    /// Price of electricity, USD per kWh, added to the cost (unset: the
    /// GPU-hour price already includes power, as a cloud rental's does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_kwh: Option<f64>,
    /// Carbon intensity of the grid, grams of CO₂-equivalent per kWh
    /// (unset: no emissions figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid_gco2_per_kwh: Option<f64>,
}

impl HardwareConfig {
    /// GPUs in one replica: `tp × pp`.
    pub fn gpus_per_replica(&self) -> u32 {
        self.tp * self.pp
    }

    /// GPUs in the deployment: `replicas × tp × pp`.
    pub fn num_gpus(&self) -> u32 {
        self.replicas * self.gpus_per_replica()
    }

    /// Micro-batches per engine step (`micro_batches`, or `pp` when unset).
    pub fn micro_batches(&self) -> u32 {
        self.micro_batches.unwrap_or(self.pp)
    }
}

impl RouterKind {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            RouterKind::RoundRobin => "round-robin",
            RouterKind::LeastOutstanding => "least-outstanding",
            RouterKind::Random => "random",
            RouterKind::LeastKv => "least-kv",
            RouterKind::LeastTokens => "least-tokens",
            RouterKind::PowerOfTwo => "power-of-two",
            RouterKind::SessionAffinity => "session-affinity",
            RouterKind::CentralQueue => "central-queue",
            RouterKind::PrefixAware => "prefix-aware",
        }
    }
}

impl Default for HardwareConfig {
    fn default() -> Self {
        HardwareConfig {
            gpu: "h100-sxm".into(),
            gpu_spec: None,
            tp: 1,
            pp: 1,
            micro_batches: None,
            expert_parallel: false,
            replicas: 1,
            router: RouterKind::default(),
            prefix_load_cap: 8,
            price_per_gpu_hour: None,
            usd_per_kwh: None,
            grid_gco2_per_kwh: None,
        }
    }
}

/// Which step-time model to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CostModelKind {
    /// Per-operator roofline with two efficiency constants (servesim before
    /// Step 5; kept for reproducibility).
    #[default]
    Roofline,
    /// Per-kernel roofline with efficiencies measured per GPU, elementwise
    /// kernels, collectives as engines run them and the engine's CPU
    /// overheads (docs/cost-model.md); what the engine presets use.
    Kernel,
    /// Every step takes `step_time_ms` (a teaching and testing model: M/D/1).
    Constant,
    /// Every step takes an exponentially distributed time with mean `step_time_ms` (M/M/1).
    Exponential,
}

/// Which fused-MoE kernel family the engine runs (its constants are in the
/// GPU's `[kernels]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MoeKernel {
    /// vLLM's and SGLang's Triton `fused_moe` (`moe_*` constants).
    #[default]
    Triton,
    /// TensorRT-LLM's CUTLASS grouped-GEMM MoE (`cutlass_moe_*` constants).
    Cutlass,
}

impl MoeKernel {
    fn is_triton(&self) -> bool {
        *self == MoeKernel::Triton
    }
}

/// `[cost]`: step-time model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// Model kind.
    pub model: CostModelKind,
    /// Fixed time added to every engine step (scheduling, kernel launches), ms.
    pub step_overhead_ms: f64,
    /// Time added to a step for each request scheduled for the first time in it, ms.
    pub per_request_overhead_ms: f64,
    /// Overrides the GPU profile's compute efficiency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_efficiency: Option<f64>,
    /// Overrides the GPU profile's memory-bandwidth efficiency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_efficiency: Option<f64>,
    /// Overrides the GPU profile's interconnect efficiency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interconnect_efficiency: Option<f64>,
    /// Step time of the `constant` and `exponential` models, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_time_ms: Option<f64>,
    /// `kernel` model: CPU time per sequence in a step (scheduling, input
    /// preparation, sampling bookkeeping, output processing), ms.
    pub per_seq_overhead_ms: f64,
    /// `kernel` model: fraction of the step's CPU time hidden under the GPU's
    /// (0: the CPU work runs between GPU steps; 1: asynchronous scheduling
    /// hides it entirely while the GPU is busier).
    pub cpu_overlap: f64,
    /// `kernel` model: fraction of collective time hidden under compute.
    pub comm_overlap: f64,
    /// `kernel` model: all-reduces up to this many KiB use the engine's custom
    /// peer-to-peer all-reduce (vLLM: 8 MiB), larger ones NCCL (0: always NCCL).
    pub custom_allreduce_max_kb: f64,
    /// `kernel` model: the engine's GEMM kernels relative to the measured ones (1: as measured).
    pub gemm_efficiency_scale: f64,
    /// `kernel` model: the engine's attention kernels relative to the measured ones.
    pub attention_efficiency_scale: f64,
    /// `kernel` model: the engine's fused-MoE kernels relative to the measured
    /// ones (scales both their compute and their weight streaming).
    pub moe_efficiency_scale: f64,
    /// `kernel` model: the fused-MoE kernel family whose measured constants apply.
    #[serde(skip_serializing_if = "MoeKernel::is_triton")]
    pub moe_kernel: MoeKernel,
    /// `kernel` model: the fused-MoE kernels of experts stored in a 4-bit
    /// format (a model's `expert_weight_bits` at most 4.5: MXFP4) relative to
    /// the measured ones, in place of `moe_efficiency_scale` (unset: that one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub w4_moe_efficiency_scale: Option<f64>,
    /// `kernel` model: CPU time to launch one layer's kernels on a step that
    /// runs without a CUDA graph (Python dispatch, kernel and NCCL launches),
    /// µs. The GPU cannot run ahead of the launches: such a step takes at
    /// least `layers × this` (0: launches never bound a step).
    pub eager_launch_us_per_layer: f64,
    /// `kernel` model: which steps replay a captured CUDA graph (and pay no
    /// launch time); the others run eagerly.
    pub graph_capture: GraphCapture,
    /// `kernel` and `roofline` models: every step's time multiplied by this
    /// (1: as modelled). `capacity` and `plan` set it to 1 ± the validated
    /// model error to carry that error into their answer.
    pub step_time_scale: f64,
}

/// Which steps an engine runs from captured CUDA graphs (up to the engine's
/// `cuda_graph_max_bs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GraphCapture {
    /// Decode-only steps of at most `cuda_graph_max_bs` sequences (vLLM V0,
    /// SGLang, TensorRT-LLM); prefill and mixed steps run eagerly.
    #[default]
    DecodeBatch,
    /// Steps of at most `cuda_graph_max_bs` tokens, prefill included (vLLM
    /// V1's piecewise graphs, captured by token count).
    Tokens,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            model: CostModelKind::Roofline,
            step_overhead_ms: 0.5,
            per_request_overhead_ms: 0.0,
            compute_efficiency: None,
            memory_efficiency: None,
            interconnect_efficiency: None,
            step_time_ms: None,
            per_seq_overhead_ms: 0.0,
            cpu_overlap: 0.0,
            comm_overlap: 0.0,
            custom_allreduce_max_kb: 0.0,
            gemm_efficiency_scale: 1.0,
            attention_efficiency_scale: 1.0,
            moe_efficiency_scale: 1.0,
            moe_kernel: MoeKernel::Triton,
            w4_moe_efficiency_scale: None,
            eager_launch_us_per_layer: 0.0,
            graph_capture: GraphCapture::DecodeBatch,
            step_time_scale: 1.0,
        }
    }
}

/// `[slo]`: per-request objectives (vLLM `--goodput` semantics: a request is
/// good when it meets every objective that is set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SloConfig {
    /// Time to first token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Time per output token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// For `capacity` and `plan`: the percentile of each metric that must meet
    /// its objective (default 99: p99 TTFT ≤ ttft_ms, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// For `capacity` and `plan`: require this fraction of requests to meet
    /// every objective instead of a percentile rule (e.g. 0.99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_attainment: Option<f64>,
}

/// `[plan]`: the search space of `servesim plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PlanConfig {
    /// Target load, requests per second (default: `workload.rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// GPU types to consider (default: the scenario's).
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Tensor-parallel degrees to consider (default: the scenario's).
    #[serde(default)]
    pub tp: Vec<u32>,
    /// Weight formats to consider (default: the scenario's).
    #[serde(default)]
    pub dtype: Vec<Dtype>,
    /// Most replicas to try per configuration.
    #[serde(default = "max_replicas")]
    pub max_replicas: u32,
    /// More axes (dotted key → values), e.g. "engine.max_num_seqs" = [128, 256].
    #[serde(default)]
    pub knobs: toml::Table,
}

fn max_replicas() -> u32 {
    64
}
