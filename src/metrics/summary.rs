//! The run summary: one typed result struct, serialised as `summary.json`.
//!
//! Field names follow `vllm bench serve` where the quantity is the same. All
//! latency fields are milliseconds; throughputs are per second of the
//! measurement window. `null` in JSON means "not defined" (e.g. TPOT when no
//! request produced two tokens). The JSON Schema is `schema/summary.schema.json`.
//! The computation that fills it in is in `summarize.rs`.

use super::stability::Stability;
use super::stats::Distribution;
use crate::config::SloConfig;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::collections::BTreeMap;

/// A latency distribution serialised under vLLM-style flat keys:
/// `mean_<name>_ms`, `median_<name>_ms`, `std_<name>_ms`, `p<P>_<name>_ms`
/// for P in 50, 90, 95, 99, 99.9, 99.99 and any other the scenario's
/// `percentiles` asks for (in ascending order), `min_<name>_ms`,
/// `max_<name>_ms`, and `<name>_count`.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMetric {
    /// Key stem, e.g. "ttft".
    pub name: &'static str,
    /// The distribution, in milliseconds.
    pub dist: Distribution,
}

fn p_word(p: f64) -> String {
    if p.fract() == 0.0 { format!("{}", p as i64) } else { format!("{p}") }
}

impl Serialize for LatencyMetric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.name;
        let d = &self.dist;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(&format!("{n}_count"), &d.count)?;
        m.serialize_entry(&format!("mean_{n}_ms"), &d.mean)?;
        m.serialize_entry(&format!("median_{n}_ms"), &d.median())?;
        m.serialize_entry(&format!("std_{n}_ms"), &d.std)?;
        for (p, v) in d.all_percentiles() {
            m.serialize_entry(&format!("p{}_{n}_ms", p_word(p)), &v)?;
        }
        m.serialize_entry(&format!("min_{n}_ms"), &d.min)?;
        m.serialize_entry(&format!("max_{n}_ms"), &d.max)?;
        m.end()
    }
}

/// SLO attainment and goodput (vLLM `--goodput` semantics).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SloSummary {
    /// TTFT objective, ms (null: not set).
    pub ttft_ms: Option<f64>,
    /// TPOT objective, ms (null: not set).
    pub tpot_ms: Option<f64>,
    /// E2E objective, ms (null: not set).
    pub e2e_ms: Option<f64>,
    /// Measured completed requests meeting every set objective.
    pub good_requests: u64,
    /// good_requests / measured requests that have objectives (failed ones count as misses).
    pub attainment: f64,
    /// Fraction of measured requests meeting the TTFT objective (failed ones count as misses).
    pub ttft_attainment: Option<f64>,
    /// Fraction of measured requests meeting the TPOT objective (failed ones count as misses).
    pub tpot_attainment: Option<f64>,
    /// Fraction of measured requests meeting the E2E objective (failed ones count as misses).
    pub e2e_attainment: Option<f64>,
}

/// How busy the hardware was, averaged over replicas and the measurement window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Utilisation {
    /// Fraction of the window a replica was executing a step (with several pools, weighted by their GPUs).
    pub gpu_busy_fraction: f64,
    /// Sequences per step, averaged over busy time.
    pub mean_batch_size: f64,
    /// Tokens per step, averaged over busy time.
    pub mean_tokens_per_step: f64,
    /// Running requests per replica, time-averaged.
    pub mean_running: f64,
    /// Waiting requests per replica, time-averaged.
    pub mean_waiting: f64,
    /// Achieved FLOP/s as a fraction of the GPUs' peak (model FLOPs utilisation), over the window.
    pub mfu: f64,
    /// Achieved memory bandwidth as a fraction of peak (bandwidth utilisation), over the window.
    pub mbu: f64,
    /// Engine steps executed, all replicas, whole run.
    pub steps: u64,
    /// Preemptions (recompute), all replicas, whole run.
    pub preemptions: u64,
    /// Tokens recomputed because of preemptions.
    pub recomputed_tokens: u64,
    /// Preemptions that swapped the KV cache to host memory instead (`preemption = "swap"`).
    pub swapped_out: u64,
    /// Time KV copies between host and GPU added to steps, s (all replicas).
    pub swap_time_s: f64,
    /// Most KV blocks held in host memory at once on any replica.
    pub peak_host_kv_blocks: u64,
    /// Requests routed to each replica.
    pub requests_per_replica: Vec<u64>,
}

/// KV-cache use.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KvSummary {
    /// Blocks per replica (null when pools differ: see `pools[].kv_blocks_per_replica`).
    pub blocks_per_replica: Option<u64>,
    /// Tokens per block (null when pools differ).
    pub block_size: Option<u32>,
    /// Token capacity per replica (null when pools differ).
    pub capacity_tokens_per_replica: Option<u64>,
    /// KV blocks of all replicas of all pools.
    pub total_blocks: u64,
    /// Token capacity of all replicas of all pools.
    pub capacity_tokens: u64,
    /// Time-averaged fraction of blocks in use (idle time counts as 0; with several pools, weighted by their GPUs).
    pub mean_occupancy: f64,
    /// Largest fraction of blocks ever in use on any replica.
    pub peak_occupancy: f64,
    /// Automatic prefix caching on (in at least one pool).
    pub prefix_caching: bool,
    /// Prompt tokens found in the prefix cache ÷ prompt tokens of first admissions (null when off).
    pub prefix_hit_rate: Option<f64>,
    /// Prefill tokens not computed thanks to the cache, recomputes after preemption included.
    pub prefix_saved_tokens: u64,
    /// Cached blocks evicted to make room.
    pub prefix_evictions: u64,
    /// How requests share prefix blocks when a replayed trace's session
    /// column groups them (null otherwise): an assumption the run rests on.
    pub prefix_sharing: Option<String>,
    /// KV offload tiers below GPU memory (null without them).
    pub offload: Option<OffloadSummary>,
}

/// KV offload tiers (host memory, then disk) holding copies of the prefix
/// blocks computed on the GPU (`engine.kv_offload_*`; docs/kv-offload.md).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OffloadSummary {
    /// Host tier per GPU, GiB (0: none).
    pub cpu_gb_per_gpu: f64,
    /// Host-to-GPU bandwidth per GPU, GB/s.
    pub cpu_gbps: f64,
    /// Disk tier per GPU, GiB (0: none).
    pub disk_gb_per_gpu: f64,
    /// Disk-to-GPU bandwidth per GPU, GB/s.
    pub disk_gbps: f64,
    /// Prompt tokens of first admissions found in GPU memory ÷ their prompt tokens.
    pub gpu_hit_rate: f64,
    /// The same, found in the tiers (loaded back instead of computed).
    pub tier_hit_rate: f64,
    /// Blocks loaded back into GPU memory: [host, disk].
    pub loaded_blocks: [u64; 2],
    /// Blocks written to each tier: [host, disk].
    pub stored_blocks: [u64; 2],
    /// Blocks dropped from the last tier.
    pub dropped_blocks: u64,
    /// Time the loads added to engine steps, all replicas, s.
    pub load_time_s: f64,
    /// The connector running the tiers: `lmcache` or `vllm`.
    pub connector: String,
    /// Time the stores added to engine steps (LMCache waits for its copies
    /// to host memory; vLLM copies in the background: 0), all replicas, s.
    pub store_time_s: f64,
}

/// One pool of replicas, as it ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PoolSummary {
    /// Pool name (`default` without `[[pools]]`).
    pub name: String,
    /// `mixed`, `prefill` or `decode`.
    pub role: String,
    /// GPU profile.
    pub gpu: String,
    /// GPUs per replica.
    pub tp: u32,
    /// Replicas.
    pub replicas: u32,
    /// GPUs in the pool.
    pub num_gpus: u32,
    /// USD per GPU-hour.
    pub price_per_gpu_hour: f64,
    /// Cost of the pool over the measurement window, USD.
    pub usd: f64,
    /// Requests routed to the pool (a decode pool: requests handed over to it).
    pub requests: u64,
    /// Prefill pool: requests handed to a decode pool.
    pub handoffs: u64,
    /// Fraction of the window a replica of the pool was executing a step.
    pub gpu_busy_fraction: f64,
    /// Sequences per step, averaged over busy time.
    pub mean_batch_size: f64,
    /// Model FLOPs utilisation of the pool's GPUs over the window.
    pub mfu: f64,
    /// Memory-bandwidth utilisation of the pool's GPUs over the window.
    pub mbu: f64,
    /// KV blocks per replica.
    pub kv_blocks_per_replica: u64,
    /// Time-averaged fraction of the pool's KV blocks in use.
    pub kv_mean_occupancy: f64,
    /// Preemptions in the pool (whole run).
    pub preemptions: u64,
}

/// Prefill/decode disaggregation: the KV transfers.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DisaggSummary {
    /// Link bandwidth of one transfer, GB/s.
    pub kv_transfer_gbps: f64,
    /// Fixed latency of one transfer, ms.
    pub kv_transfer_latency_ms: f64,
    /// KV transfers (whole run).
    pub transfers: u64,
    /// Mean transfer time of measured requests: prompt KV bytes / bandwidth + latency, ms.
    pub mean_transfer_ms: f64,
    /// Longest transfer of a measured request, ms.
    pub max_transfer_ms: f64,
    /// Mean KV bytes moved per measured transfer (all prompt tokens but the last).
    pub mean_transfer_bytes: f64,
}

/// LoRA adapters over the run (`[lora]`; docs/lora.md).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoraSummary {
    /// Distinct adapters the requests name.
    pub adapters: u32,
    /// `zipf` or `uniform`.
    pub popularity: String,
    /// Adapter rank.
    pub rank: u32,
    /// One adapter's size, MB (every linear layer adapted, BF16).
    pub adapter_mb: f64,
    /// Adapter slots in GPU memory per replica (most distinct adapters in a batch).
    pub max_loras: u32,
    /// Adapters cached in host memory per replica.
    pub max_cpu_loras: u32,
    /// A single adapter, merged into the base weights (served as the base model).
    pub merged: bool,
    /// Admissions whose adapter was already in GPU memory ÷ admissions.
    pub gpu_hit_rate: f64,
    /// Admissions that loaded their adapter from host memory.
    pub host_loads: u64,
    /// Admissions that loaded their adapter from storage.
    pub storage_loads: u64,
    /// Time the adapter loads added to steps, all replicas, s.
    pub load_time_s: f64,
    /// Time the adapter computation added to steps, all replicas, s.
    pub compute_time_s: f64,
    /// (load + compute time) ÷ busy time: the adapters' share of the engines' time.
    pub time_share: f64,
    /// Distinct adapters per step, on average.
    pub mean_adapters_per_step: f64,
    /// Times the head of a queue waited because every slot held an adapter in use.
    pub slot_waits: u64,
}

/// Speculative decoding, as it ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpecSummary {
    /// `draft` or `mtp`.
    pub method: String,
    /// The draft model (for `mtp`, the target's one-layer head).
    pub draft_model: String,
    /// Tokens proposed per verify step (k).
    pub num_tokens: u32,
    /// Default acceptance rate α (classes may set their own).
    pub acceptance: f64,
    /// (1 − α^(k+1)) / (1 − α) at the default α: the mean tokens a verify step emits.
    pub expected_tokens_per_step: f64,
    /// Mean of the drawn per-step emissions (before truncation at the output length).
    pub drawn_tokens_per_step: f64,
    /// Output tokens emitted per sequence-step of speculative decoding
    /// (the last step of a request emits only what is left).
    pub tokens_per_step: f64,
}

/// What the run cost.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CostSummary {
    /// USD per GPU-hour assumed.
    pub price_per_gpu_hour: f64,
    /// GPUs in the deployment (replicas × tp × pp).
    pub num_gpus: u32,
    /// GPU-hours over the measurement window.
    pub gpu_hours: f64,
    /// Cost of the window, USD.
    pub total_usd: f64,
    /// USD per million output tokens of measured completed requests.
    pub usd_per_million_output_tokens: f64,
    /// USD per measured completed request.
    pub usd_per_completed_request: f64,
    /// USD per request that met every SLO (null without SLOs or good requests).
    pub usd_per_slo_met_request: Option<f64>,
}

/// Energy of the GPUs over the measurement window ([`crate::energy`];
/// docs/energy.md).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EnergySummary {
    /// The power model, in words: P / TDP = idle + (1 − idle) × min(1, c × MFU + m × MBU) per step, idle between
    /// steps, and the loaded-idle power while starting, under repair, on standby or idle for over a minute.
    pub power_model: String,
    /// Energy of all GPUs over the window, kWh.
    pub kwh: f64,
    /// Mean power of all GPUs over the window, W.
    pub mean_power_w: f64,
    /// Mean power of one GPU over the window, W.
    pub mean_power_w_per_gpu: f64,
    /// Joules per output token of measured completed requests (null without output tokens).
    pub joules_per_output_token: Option<f64>,
    /// Price of electricity, USD per kWh (0: included in the GPU-hour price).
    pub usd_per_kwh: f64,
    /// Energy cost of the window, USD (included in `cost.total_usd`).
    pub usd: f64,
    /// Grid carbon intensity, g CO₂e per kWh (null: not given).
    pub grid_gco2_per_kwh: Option<f64>,
    /// Emissions of the window, kg CO₂e (null without a carbon intensity).
    pub kg_co2: Option<f64>,
}

/// Little's law check over the whole run: time-average number of requests in
/// the system = arrival rate × mean time in system.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LittlesLaw {
    /// Time-averaged requests in the system, L.
    pub mean_in_system: f64,
    /// Arrival rate over the run, λ (requests / simulated time).
    pub arrival_rate: f64,
    /// Mean time in system over all requests (rejected ones count 0), W, seconds.
    pub mean_time_in_system_s: f64,
    /// |L − λW| / L.
    pub relative_error: f64,
}

/// Request-level metrics of a set of measured requests (the whole run, or one class).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RequestMetrics {
    /// Requests arriving after the warm-up (the ones measured).
    pub measured_requests: u64,
    /// Measured requests completed.
    pub completed: u64,
    /// Measured requests that failed (rejected, or unfinished at the end).
    pub failed: u64,
    /// Failed measured requests by reason.
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Measured requests shortened to fit the context window (`on_too_long = "clip"`).
    pub clipped_requests: u64,
    /// Prompt tokens of measured completed requests.
    pub total_input_tokens: u64,
    /// Output tokens of measured completed requests.
    pub total_output_tokens: u64,
    /// Completed requests per second (for prefill-only requests: items per second).
    pub request_throughput: f64,
    /// Requests that completed and met every SLO, per second (null without SLOs; failed requests are misses).
    pub request_goodput: Option<f64>,
    /// Prompt tokens per second.
    pub input_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Prompt + output tokens per second.
    pub total_token_throughput: f64,
    /// Time to first token (for a prefill-only request: time to its result).
    #[serde(flatten)]
    pub ttft: LatencyMetric,
    /// Time per output token after the first: (E2E − TTFT)/(output − 1), per request.
    #[serde(flatten)]
    pub tpot: LatencyMetric,
    /// Inter-token latency: gaps between successive tokens, pooled over requests.
    #[serde(flatten)]
    pub itl: LatencyMetric,
    /// End-to-end latency.
    #[serde(flatten)]
    pub e2el: LatencyMetric,
    /// Queueing delay: admission to first scheduled step.
    #[serde(flatten)]
    pub queue: LatencyMetric,
    /// Preprocessing delay: arrival to admission.
    #[serde(flatten)]
    pub preprocess: LatencyMetric,
    /// Normalised latency: E2E / output tokens (ms per token; prefill-only requests excluded).
    #[serde(flatten)]
    pub norm_e2el: LatencyMetric,
    /// SLO attainment (null without objectives).
    pub slo: Option<SloSummary>,
}

/// One request class's metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClassSummary {
    /// Scheduling priority.
    pub priority: i32,
    /// Every request of the class has output length 0 (embeddings, scoring).
    pub prefill_only: bool,
    /// Long-run mean offered arrival rate of the class, per second (null when not defined).
    pub offered_rate: Option<f64>,
    /// Share of the measured requests that belong to this class.
    pub share: f64,
    /// Prefill-only classes: completed items per second (null otherwise).
    pub items_per_second: Option<f64>,
    /// Prefill-only classes: time to result, arrival to the end of the prefill
    /// (no samples, so null statistics, for other classes).
    #[serde(flatten)]
    pub time_to_result: LatencyMetric,
    /// The class's request metrics.
    #[serde(flatten)]
    pub metrics: RequestMetrics,
}

/// What was offered: the arrival process and the files read.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadSummary {
    /// The arrival process, in words.
    pub process: String,
    /// Long-run mean offered arrival rate, per second (null for closed-loop and offline).
    pub offered_rate: Option<f64>,
    /// What `offered_rate` counts: "requests", or "sessions" with multi-turn sessions.
    pub offered_rate_unit: String,
    /// Arrival rate over the run: requests / time of the last arrival (null with fewer than 2).
    pub observed_arrival_rate: Option<f64>,
    /// Closed-loop users (null for open loop).
    pub users: Option<u32>,
    /// Trace file replayed (null: synthetic).
    pub trace: Option<String>,
    /// Rows of trace and length files skipped as bad (`on_bad_row = "skip"`).
    pub skipped_rows: u64,
    /// The first skipped row's problem (file, line, field).
    pub first_skipped_row: Option<String>,
    /// Distinct sessions seen.
    pub sessions: u64,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    /// servesim version that produced this.
    pub servesim_version: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed of the run.
    pub seed: u64,
    /// Model display name.
    pub model: String,
    /// Weight format.
    pub dtype: String,
    /// GPU display name.
    pub gpu: String,
    /// Tensor-parallel degree (null when pools differ: see `pools[].tp`).
    pub tp: Option<u32>,
    /// Engine replicas.
    pub replicas: u32,
    /// Requests generated (whole run, warm-up included).
    pub num_requests: u64,
    /// Warm-up excluded from the metrics, s.
    pub warmup_s: f64,
    /// Measurement window: from the warm-up's end to the last completion, s.
    pub duration: f64,
    /// Simulated time of the whole run, s.
    pub simulated_time_s: f64,
    /// Output tokens per second per GPU.
    pub output_throughput_per_gpu: f64,
    /// Metrics over every measured request.
    #[serde(flatten)]
    pub metrics: RequestMetrics,
    /// Upper bound of the relative error of ITL percentiles (pooled in a log histogram).
    pub itl_percentile_relative_error: f64,
    /// Upper bound of the relative error of every other latency percentile
    /// (TTFT, TPOT, E2E, queue, preprocessing, normalised E2E): 0 when they
    /// are exact, as in runs of up to [`EXACT_LIMIT`](super::tally::EXACT_LIMIT)
    /// requests; past it they come from log histograms, and the stability
    /// verdict from a fine time grid ([`FineBacklog`](super::stability::FineBacklog)).
    pub latency_percentile_relative_error: f64,
    /// The same metrics per request class, in declaration order (null when no classes are declared).
    pub classes: Option<ClassMap>,
    /// The offered workload.
    pub workload: WorkloadSummary,
    /// Utilisation.
    pub utilisation: Utilisation,
    /// KV cache.
    pub kv_cache: KvSummary,
    /// Speculative decoding (null when off).
    pub speculative: Option<SpecSummary>,
    /// The replica pools (one, `default`, without `[[pools]]`).
    pub pools: Vec<PoolSummary>,
    /// KV transfers between prefill and decode pools (null without disaggregation).
    pub disaggregation: Option<DisaggSummary>,
    /// Cost.
    pub cost: CostSummary,
    /// Energy.
    pub energy: EnergySummary,
    /// LoRA adapters (null without `[lora]`).
    pub lora: Option<LoraSummary>,
    /// The fleet over the run: replicas over time, failures, SLO over time
    /// (null without a `[fleet]` whose replicas may change).
    pub fleet: Option<super::fleet::FleetSummary>,
    /// true when the run reached a steady state without shedding load; false
    /// when it was overloaded (throughout or in a window) or stable only by
    /// shedding; null when inconclusive (run too short) or not applicable (offline).
    pub stable: Option<bool>,
    /// The stability verdict and its evidence.
    pub stability: Stability,
    /// Little's law check.
    pub littles_law: LittlesLaw,
}

/// Class name → metrics, serialised as a JSON object in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassMap(pub Vec<(String, ClassSummary)>);

impl Serialize for ClassMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl ClassMap {
    /// The class called `name`.
    pub fn get(&self, name: &str) -> Option<&ClassSummary> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

impl Summary {
    /// Measured requests that failed (refused, timed out, too long), as a fraction.
    pub fn failed_fraction(&self) -> f64 {
        self.metrics.failed as f64 / self.metrics.measured_requests.max(1) as f64
    }

    /// Measured requests beyond the judged percentile of `slo` (completed
    /// ones × (1 − p/100)); NaN when the objectives are an attainment.
    pub fn tail_requests(&self, slo: &SloConfig) -> f64 {
        if slo.min_attainment.is_some() {
            return f64::NAN;
        }
        self.metrics.completed as f64 * (1.0 - slo.percentile.unwrap_or(99.0) / 100.0)
    }
}
