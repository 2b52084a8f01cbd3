//! The run summary: one typed result struct, serialised as `summary.json`.
//!
//! Field names follow `vllm bench serve` where the quantity is the same. All
//! latency fields are milliseconds; throughputs are per second of the
//! measurement window. `null` in JSON means "not defined" (e.g. TPOT when no
//! request produced two tokens). The JSON Schema is `schema/summary.schema.json`.

use super::stability::{Stability, assess};
use super::stats::{Distribution, PERCENTILES};
use super::tally::{Columns, Tally, histogram_ms};
use super::{RequestRecord, Status, hist};
use crate::Setup;
use crate::config::SloConfig;
use crate::sim::SimOutput;
use crate::workload::WorkloadPlan;
use rayon::prelude::*;
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

/// What a trace's session column does to prefix caching, in words.
fn prefix_sharing(setup: &crate::Setup, prefix_caching: bool) -> Option<String> {
    let column = setup.scenario.workload.trace.as_ref()?.session_column.as_ref()?;
    Some(format!(
        "the trace's `{column}` column groups requests into sessions: a session's requests share their leading prompt \
         blocks (each prompt is taken to begin with the session's earlier prompt, as a chat history does){}",
        if prefix_caching { "; prefix caching reuses them" } else { "; prefix caching is off, so nothing is reused" }
    ))
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

/// Replica-seconds of a window of `duration` with `n` replicas; a fleet's
/// slots count while billed, standbys aside (a fleet has one pool).
fn replica_seconds(fleet: Option<&crate::fleet::FleetOutput>, duration: f64, n: f64) -> f64 {
    fleet.map_or(duration * n, |f| f.slot_billed_s.iter().sum::<f64>().max(f64::MIN_POSITIVE))
}

/// Per-pool utilisation and cost.
fn pool_summaries(
    setup: &crate::Setup,
    stats: &[crate::engine::ReplicaStats],
    duration: f64,
    fleet: Option<&crate::fleet::FleetOutput>,
) -> Vec<PoolSummary> {
    setup
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let rs: Vec<&crate::engine::ReplicaStats> = stats.iter().filter(|r| r.pool as usize == i).collect();
            let sum = |f: &dyn Fn(&crate::engine::ReplicaStats) -> f64| rs.iter().map(|r| f(r)).sum::<f64>();
            let n = p.replicas as f64;
            let busy = sum(&|r| r.busy);
            let (pf, pb) = rs.first().map_or((f64::NAN, f64::NAN), |r| (r.peak_flops, r.peak_bandwidth));
            let num_gpus = p.replicas * p.layout.gpus();
            let span = replica_seconds(fleet, duration, n);
            let usd = match fleet {
                Some(f) => p.layout.gpus() as f64 * f.billed_replica_s / 3600.0 * p.price_per_gpu_hour,
                None => num_gpus as f64 * duration / 3600.0 * p.price_per_gpu_hour,
            };
            PoolSummary {
                name: p.name.clone(),
                role: p.role.as_str().to_string(),
                gpu: p.gpu.name.clone(),
                tp: p.tp,
                replicas: p.replicas,
                num_gpus,
                price_per_gpu_hour: p.price_per_gpu_hour,
                usd,
                requests: rs.iter().map(|r| r.routed).sum(),
                handoffs: rs.iter().map(|r| r.handoffs).sum(),
                gpu_busy_fraction: busy / span,
                mean_batch_size: if busy > 0.0 { sum(&|r| r.batch_area) / busy } else { 0.0 },
                mfu: sum(&|r| r.flops) / (span * pf),
                mbu: sum(&|r| r.bytes) / (span * pb),
                kv_blocks_per_replica: p.memory.num_blocks,
                kv_mean_occupancy: sum(&|r| r.kv_area) / (span * p.memory.num_blocks as f64),
                preemptions: rs.iter().map(|r| r.preemptions).sum(),
            }
        })
        .collect()
}

/// The GPUs' energy over a window of `duration` seconds ([`crate::energy`]):
/// each GPU draws the serving floor while on and the dynamic part while its
/// replica runs steps; starting, under repair, on warm standby or idle for
/// longer than a minute between steps it draws the loaded-idle power.
fn energy_summary(
    setup: &crate::Setup,
    stats: &[crate::engine::ReplicaStats],
    duration: f64,
    out_tok: u64,
    fleet: Option<&crate::fleet::FleetOutput>,
) -> EnergySummary {
    let m = crate::energy::POWER;
    let mut joules = 0.0;
    let mut gpus = 0.0;
    for (i, r) in stats.iter().enumerate() {
        let p = &setup.pools[r.pool as usize];
        let g = p.layout.gpus();
        gpus += g as f64;
        // A fleet's slot is on while billed (starting, serving, draining,
        // under repair); starting and under repair it runs nothing.
        let on = fleet.map_or(duration, |f| f.slot_billed_s[i]);
        let down = fleet.map_or(0.0, |f| f.slot_down_s[i]);
        let parked = (down + r.long_idle_s).min(on);
        joules += g as f64
            * p.gpu.tdp_w
            * (m.idle * (on - parked) + crate::energy::LOADED_IDLE * parked + (1.0 - m.idle) * r.activity_area);
    }
    if let Some(f) = fleet {
        // Warm standbys hold the model and run nothing; a fleet's mean power is per billed GPU.
        let p = &setup.pools[0];
        joules += p.layout.gpus() as f64 * p.gpu.tdp_w * crate::energy::LOADED_IDLE * f.warm_replica_s;
        // The mean number of billed GPUs, unrounded: 1.4999 stays 1.4999.
        gpus = p.layout.gpus() as f64 * f.billed_replica_s / duration;
    }
    let h = &setup.scenario.hardware;
    let kwh = joules / 3.6e6;
    let usd_per_kwh = h.usd_per_kwh.unwrap_or(0.0);
    EnergySummary {
        power_model: format!(
            "P/TDP = {} + {:.2} × min(1, {} × MFU + {} × MBU) per step, {} between steps (fitted to Splitwise A100 power); {} starting, under repair, on standby or idle over {} s (loaded idle; docs/energy.md)",
            m.idle,
            1.0 - m.idle,
            m.compute,
            m.memory,
            m.idle,
            crate::energy::LOADED_IDLE,
            crate::energy::LONG_IDLE_S
        ),
        kwh,
        mean_power_w: joules / duration,
        mean_power_w_per_gpu: if gpus > 0.0 { joules / duration / gpus } else { 0.0 },
        joules_per_output_token: (out_tok > 0).then(|| joules / out_tok as f64),
        usd_per_kwh,
        usd: kwh * usd_per_kwh,
        grid_gco2_per_kwh: h.grid_gco2_per_kwh,
        kg_co2: h.grid_gco2_per_kwh.map(|g| kwh * g / 1e3),
    }
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

fn lora_summary(setup: &crate::Setup, stats: &[crate::engine::ReplicaStats]) -> Option<LoraSummary> {
    let c = setup.scenario.lora.as_ref()?;
    let plan = crate::engine::lora::plan(setup, 0)?;
    let l: Vec<&crate::engine::lora::LoraStats> = stats.iter().map(|r| &r.lora).collect();
    let sum = |f: &dyn Fn(&crate::engine::lora::LoraStats) -> u64| l.iter().map(|x| f(x)).sum::<u64>();
    let (hits, host, storage) = (sum(&|x| x.gpu_hits), sum(&|x| x.host_loads), sum(&|x| x.storage_loads));
    let load: f64 = l.iter().map(|x| x.load_time).sum();
    let compute: f64 = l.iter().map(|x| x.compute_time).sum();
    // The loads and adapter time are counted over the whole run: so is the busy time.
    let busy: f64 = stats.iter().map(|r| r.busy_whole_run).sum();
    let steps: u64 = stats.iter().map(|r| r.steps).sum();
    Some(LoraSummary {
        adapters: c.adapters,
        popularity: match c.popularity {
            crate::config::Popularity::Zipf => "zipf".into(),
            crate::config::Popularity::Uniform => "uniform".into(),
        },
        rank: c.rank,
        adapter_mb: plan.bytes / 1e6,
        max_loras: c.max_loras,
        max_cpu_loras: plan.max_cpu_loras,
        merged: plan.merged,
        gpu_hit_rate: hits as f64 / (hits + host + storage).max(1) as f64,
        host_loads: host,
        storage_loads: storage,
        load_time_s: load,
        compute_time_s: compute,
        time_share: if busy > 0.0 { (load + compute) / busy } else { 0.0 },
        mean_adapters_per_step: sum(&|x| x.adapter_steps) as f64 / steps.max(1) as f64,
        slot_waits: sum(&|x| x.slot_waits),
    })
}

/// The offload tiers over all replicas (null when no pool has one).
fn offload_summary(setup: &crate::Setup, stats: &[crate::engine::ReplicaStats]) -> Option<OffloadSummary> {
    let p = setup.pools.iter().find(|p| p.engine.offload_blocks != [0, 0])?;
    let e = &p.engine_config;
    let query = stats.iter().map(|r| r.prefix_query_tokens).sum::<u64>().max(1) as f64;
    let tier = stats.iter().map(|r| r.offload_hit_tokens).sum::<u64>() as f64;
    let hit = stats.iter().map(|r| r.prefix_hit_tokens).sum::<u64>() as f64;
    let sum2 = |f: &dyn Fn(&crate::engine::OffloadStats) -> [u64; 2]| {
        stats.iter().map(|r| f(&r.offload)).fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
    };
    Some(OffloadSummary {
        cpu_gb_per_gpu: e.kv_offload_cpu_gb,
        cpu_gbps: e.kv_offload_cpu_gbps,
        disk_gb_per_gpu: e.kv_offload_disk_gb,
        disk_gbps: e.kv_offload_disk_gbps,
        gpu_hit_rate: (hit - tier) / query,
        tier_hit_rate: tier / query,
        loaded_blocks: sum2(&|o| o.loaded_blocks),
        stored_blocks: sum2(&|o| o.stored_blocks),
        dropped_blocks: stats.iter().map(|r| r.offload.dropped_blocks).sum(),
        load_time_s: stats.iter().map(|r| r.offload.load_time).sum(),
        connector: e.kv_offload_connector.as_str().into(),
        store_time_s: stats.iter().map(|r| r.offload.store_time).sum(),
    })
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

/// The finished account of one group of measured requests.
impl Columns {
    /// The metrics; `slo` gives the objectives shown (null when they differ by class).
    /// `extra`: the percentiles reported besides the standard ones.
    fn finish(self, itl: &hist::LogHistogram, duration: f64, slo: Option<&SloConfig>, extra: &[f64]) -> RequestMetrics {
        let Columns { cols, failures, measured, completed, clipped, in_tok, out_tok, good, ok, subject, with_slo } =
            self;
        let [ttft, tpot, e2el, queue, pre, norm] = cols;
        let metrics = vec![
            ("ttft", ttft),
            ("tpot", tpot),
            ("e2el", e2el),
            ("queue", queue),
            ("preprocess", pre),
            ("norm_e2el", norm),
        ];
        let mut done: Vec<LatencyMetric> =
            metrics.into_par_iter().map(|(name, c)| LatencyMetric { name, dist: c.describe_ms(extra) }).collect();
        let norm_m = done.pop().expect("6 metrics");
        let pre_m = done.pop().expect("6 metrics");
        let queue_m = done.pop().expect("6 metrics");
        let e2el_m = done.pop().expect("6 metrics");
        let tpot_m = done.pop().expect("6 metrics");
        let ttft_m = done.pop().expect("6 metrics");
        let itl_d = histogram_ms(itl, extra);
        let slo_summary = (with_slo > 0).then(|| {
            let frac = |n: u64, of: u64| if of > 0 { Some(n as f64 / of as f64) } else { None };
            SloSummary {
                ttft_ms: slo.and_then(|x| x.ttft_ms),
                tpot_ms: slo.and_then(|x| x.tpot_ms),
                e2e_ms: slo.and_then(|x| x.e2e_ms),
                good_requests: good,
                attainment: good as f64 / with_slo.max(1) as f64,
                ttft_attainment: frac(ok[0], subject[0]),
                tpot_attainment: frac(ok[1], subject[1]),
                e2e_attainment: frac(ok[2], subject[2]),
            }
        });
        RequestMetrics {
            measured_requests: measured,
            completed,
            failed: failures.values().sum(),
            failures_by_reason: failures,
            clipped_requests: clipped,
            total_input_tokens: in_tok,
            total_output_tokens: out_tok,
            request_throughput: completed as f64 / duration,
            request_goodput: slo_summary.as_ref().map(|x| x.good_requests as f64 / duration),
            input_throughput: in_tok as f64 / duration,
            output_throughput: out_tok as f64 / duration,
            total_token_throughput: (in_tok + out_tok) as f64 / duration,
            ttft: ttft_m,
            tpot: tpot_m,
            itl: LatencyMetric { name: "itl", dist: itl_d },
            e2el: e2el_m,
            queue: queue_m,
            preprocess: pre_m,
            norm_e2el: norm_m,
            slo: slo_summary,
        }
    }
}

/// Whether a completed request met every objective of its class (None: its class has none).
pub fn slo_met(workload: &WorkloadPlan, r: &RequestRecord) -> Option<bool> {
    let slo = workload.classes.get(r.class as usize)?.slo.as_ref()?;
    (r.status == Status::Completed).then(|| slo_checks(slo, r).iter().all(|&x| x))
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

/// The percentiles of `asked` (the scenario's `percentiles`) that are not
/// among the standard ones, ascending and without repeats.
pub fn extra_percentiles(asked: &[f64]) -> Vec<f64> {
    let mut extra: Vec<f64> = asked.iter().copied().filter(|p| !PERCENTILES.contains(p)).collect();
    extra.sort_by(f64::total_cmp);
    extra.dedup();
    extra
}

/// Builds the summary of a finished simulation from its [`Tally`]
/// (taken out of `out`: a second call would see an empty one).
pub fn summarize(setup: &Setup, seed: u64, out: &mut SimOutput) -> Summary {
    let mut tally = std::mem::replace(&mut out.tally, Tally::new(setup));
    let out = &*out;
    let s = &setup.scenario;
    let workload = &setup.workload;
    let warmup = s.warmup_s;
    let start = warmup.max(0.0);
    let duration = (out.end_time - start).max(f64::MIN_POSITIVE);
    let percentile_error = tally.percentile_error();
    let extra = extra_percentiles(&s.percentiles);
    let mut backlog = tally.backlog();
    let mut groups = std::mem::take(&mut tally.groups);
    let n_measured: u64 = groups.iter().map(|g| g.measured).sum();
    let classes = workload.declared_classes.then(|| {
        ClassMap(
            groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let c = &workload.classes[i];
                    let mut own = Columns::default();
                    own.append(g);
                    let m = own.finish(&out.itl_by_class[i], duration, c.slo.as_ref(), &extra);
                    let prefill_only = c.prefill_only;
                    let summary = ClassSummary {
                        priority: c.priority,
                        prefill_only,
                        offered_rate: c.mean_rate,
                        share: g.measured as f64 / n_measured.max(1) as f64,
                        items_per_second: prefill_only.then_some(m.request_throughput),
                        time_to_result: LatencyMetric {
                            name: "ttr",
                            dist: if prefill_only {
                                m.e2el.dist.clone()
                            } else {
                                Distribution::of_with(&mut [], &extra)
                            },
                        },
                        metrics: m,
                    };
                    (c.name.clone(), summary)
                })
                .collect(),
        )
    });
    let mut all = groups.pop().unwrap_or_default();
    for g in groups.iter().rev() {
        all.append(g);
    }
    // The pooled objectives are `[slo]`'s unless a class sets its own (then null).
    let uniform = s.workload.classes.iter().all(|c| c.slo.is_none());
    let metrics = all.finish(&out.itl, duration, s.slo.as_ref().filter(|_| uniform), &extra);
    let out_tok = metrics.total_output_tokens;
    let completed = metrics.completed;
    let stats = &out.replicas;
    let n_rep = stats.len() as f64;
    let num_gpus: u32 = setup.pools.iter().map(|p| p.replicas * p.layout.gpus()).sum();
    let sum = |f: &dyn Fn(&crate::engine::ReplicaStats) -> f64| stats.iter().map(f).sum::<f64>();
    let busy = sum(&|r| r.busy);
    let per_busy = |x: f64| if busy > 0.0 { x / busy } else { 0.0 };
    let fleet_out = out.fleet.as_ref();
    let pools = pool_summaries(setup, stats, duration, fleet_out);
    let span = replica_seconds(fleet_out, duration, n_rep);
    // Utilisations are the pools' own, weighted by their share of the GPUs
    // (with one pool, exactly that pool's).
    let by_gpus = |f: &dyn Fn(&PoolSummary) -> f64| {
        pools.iter().filter(|p| p.num_gpus > 0).map(|p| f(p) * (p.num_gpus as f64 / num_gpus as f64)).sum::<f64>()
    };
    let utilisation = Utilisation {
        gpu_busy_fraction: by_gpus(&|p| p.gpu_busy_fraction),
        mean_batch_size: per_busy(sum(&|r| r.batch_area)),
        mean_tokens_per_step: per_busy(sum(&|r| r.token_area)),
        mean_running: sum(&|r| r.running_area) / span,
        mean_waiting: sum(&|r| r.waiting_area) / span,
        mfu: by_gpus(&|p| p.mfu),
        mbu: by_gpus(&|p| p.mbu),
        steps: stats.iter().map(|r| r.steps).sum(),
        preemptions: stats.iter().map(|r| r.preemptions).sum(),
        recomputed_tokens: stats.iter().map(|r| r.recomputed_tokens).sum(),
        swapped_out: stats.iter().map(|r| r.swaps_out).sum(),
        swap_time_s: sum(&|r| r.swap_time),
        peak_host_kv_blocks: stats.iter().map(|r| r.peak_host_blocks).max().unwrap_or(0),
        requests_per_replica: stats.iter().map(|r| r.routed).collect(),
    };
    let prefix_caching = setup.pools.iter().any(|p| p.engine.prefix_caching);
    let kv_cache = KvSummary {
        blocks_per_replica: setup.common(|p| p.memory.num_blocks),
        block_size: setup.common(|p| p.memory.block_size),
        capacity_tokens_per_replica: setup.common(|p| p.memory.kv_capacity_tokens),
        total_blocks: setup.pools.iter().map(|p| p.replicas as u64 * p.memory.num_blocks).sum(),
        capacity_tokens: setup.pools.iter().map(|p| p.replicas as u64 * p.memory.kv_capacity_tokens).sum(),
        mean_occupancy: by_gpus(&|p| p.kv_mean_occupancy),
        peak_occupancy: stats.iter().map(|r| r.peak_kv_blocks as f64 / r.num_blocks as f64).fold(0.0, f64::max),
        prefix_caching,
        prefix_hit_rate: prefix_caching.then(|| {
            stats.iter().map(|r| r.prefix_hit_tokens).sum::<u64>() as f64
                / stats.iter().map(|r| r.prefix_query_tokens).sum::<u64>().max(1) as f64
        }),
        prefix_saved_tokens: stats.iter().map(|r| r.prefix_saved_tokens).sum(),
        prefix_evictions: stats.iter().map(|r| r.prefix_evictions).sum(),
        prefix_sharing: prefix_sharing(setup, prefix_caching),
        offload: offload_summary(setup, stats),
    };
    // The first pool that speculates describes it; the counts cover every pool.
    let spec_pool = setup.pools.iter().find(|p| crate::config::SpeculativeConfig::active(&p.engine_config).is_some());
    let speculative = spec_pool.and_then(|p| crate::config::SpeculativeConfig::active(&p.engine_config)).map(|sp| {
        let total = |f: &dyn Fn(&crate::engine::ReplicaStats) -> u64| stats.iter().map(f).sum::<u64>() as f64;
        SpecSummary {
            method: match sp.method {
                crate::config::SpecMethod::Draft => "draft".into(),
                crate::config::SpecMethod::Mtp => "mtp".into(),
            },
            draft_model: spec_pool.and_then(|p| p.draft.as_ref()).map_or_else(String::new, |d| d.name.clone()),
            num_tokens: sp.num_tokens,
            acceptance: sp.acceptance,
            expected_tokens_per_step: crate::config::SpeculativeConfig::expected_tokens(sp.num_tokens, sp.acceptance),
            drawn_tokens_per_step: total(&|r| r.spec_draw_tokens) / total(&|r| r.spec_draws),
            tokens_per_step: total(&|r| r.spec_seq_tokens) / total(&|r| r.spec_seq_steps),
        }
    });
    let split = setup.pools.iter().any(|p| p.role == crate::config::PoolRole::Prefill);
    let disaggregation = split.then(|| {
        let link = s.disaggregation.clone().unwrap_or_default();
        let m = tally.moved.clone().unwrap_or_default();
        let nm = m.n.max(1) as f64;
        DisaggSummary {
            kv_transfer_gbps: link.kv_transfer_gbps,
            kv_transfer_latency_ms: link.kv_transfer_latency_ms,
            transfers: stats.iter().map(|r| r.handoffs).sum(),
            mean_transfer_ms: m.sum_ms / nm,
            max_transfer_ms: m.max_ms,
            mean_transfer_bytes: m.sum_bytes / nm,
        }
    });
    let gpu_hours = match fleet_out {
        Some(f) => setup.pools[0].layout.gpus() as f64 * f.billed_replica_s / 3600.0,
        None => num_gpus as f64 * duration / 3600.0,
    };
    let one = (setup.pools.len() == 1).then(|| setup.pools[0].price_per_gpu_hour);
    let energy = energy_summary(setup, stats, duration, out_tok, fleet_out);
    let fleet = out.fleet.as_ref().map(|f| {
        let p = &setup.pools[0];
        let t = out.slo_timeline.clone().unwrap_or_default();
        super::fleet::summarize(
            setup,
            f,
            &t,
            out.frozen_timeline.as_ref(),
            duration,
            p.layout.gpus(),
            p.price_per_gpu_hour,
        )
    });
    let total_usd = match one {
        Some(price) => gpu_hours * price,
        None => pools.iter().map(|p| p.usd).sum(),
    } + energy.usd;
    let cost = CostSummary {
        price_per_gpu_hour: one.unwrap_or(total_usd / gpu_hours),
        num_gpus,
        gpu_hours,
        total_usd,
        usd_per_million_output_tokens: total_usd / out_tok as f64 * 1e6,
        usd_per_completed_request: total_usd / completed as f64,
        usd_per_slo_met_request: metrics
            .slo
            .as_ref()
            .filter(|x| x.good_requests > 0)
            .map(|x| total_usd / x.good_requests as f64),
    };
    // The typical wait for a first token (the backlog's time scale), from
    // the distributions already computed.
    let median =
        |m: &LatencyMetric| PERCENTILES.iter().position(|&q| q == 50.0).map_or(f64::NAN, |i| m.dist.percentiles[i]);
    let wait50 = median(&metrics.ttft) / 1e3;
    backlog.time_scale(tally.sojourn / tally.done.max(1) as f64, median(&metrics.e2el) / 1e3, wait50);
    let stability = assess(&backlog, workload.offline);
    let stable = stability.stable();
    let littles_law = littles_law(tally.count(), tally.sojourn, out.run_end, out.in_system_area);
    let last_arrival = tally.last_arrival();
    let workload_summary = WorkloadSummary {
        process: workload.process.clone(),
        offered_rate: workload.offered_rate,
        offered_rate_unit: if workload.sessions.is_some() { "sessions".into() } else { "requests".into() },
        observed_arrival_rate: (tally.count() > 1 && last_arrival > 0.0).then(|| tally.count() as f64 / last_arrival),
        users: workload.closed_loop.as_ref().map(|c| c.0),
        trace: workload.trace.as_ref().map(|t| t.file.clone()),
        skipped_rows: workload.skipped_rows,
        first_skipped_row: workload.first_skipped.clone(),
        sessions: tally.sessions(),
    };
    Summary {
        servesim_version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: s.name.clone(),
        seed,
        model: setup.llm.name.clone(),
        dtype: s.model.dtype.as_str().to_string(),
        gpu: setup.pools.iter().map(|p| p.gpu.name.as_str()).collect::<Vec<_>>().join(" + "),
        tp: setup.common(|p| p.tp),
        replicas: out.replicas.len() as u32,
        num_requests: tally.count(),
        warmup_s: warmup,
        duration,
        simulated_time_s: out.end_time,
        output_throughput_per_gpu: out_tok as f64 / duration / num_gpus as f64,
        metrics,
        itl_percentile_relative_error: hist::RELATIVE_ERROR,
        latency_percentile_relative_error: percentile_error,
        classes,
        workload: workload_summary,
        utilisation,
        kv_cache,
        speculative,
        pools,
        disaggregation,
        cost,
        energy,
        lora: lora_summary(setup, stats),
        fleet,
        stable,
        stability,
        littles_law,
    }
}

/// Whether a completed request meets each objective: [TTFT, TPOT, E2E]
/// (an objective that is not set is met). The TPOT objective does not apply
/// to one-token outputs, as in vLLM.
pub fn slo_checks(slo: &SloConfig, r: &RequestRecord) -> [bool; 3] {
    let tpot = r.tpot();
    [
        slo.ttft_ms.is_none_or(|x| r.ttft() * 1e3 <= x),
        slo.tpot_ms.is_none_or(|x| tpot.is_nan() || tpot * 1e3 <= x),
        slo.e2e_ms.is_none_or(|x| r.e2e() * 1e3 <= x),
    ]
}

/// Little's law over the whole run.
/// `n` requests arrived over `[0, end]`, the completed ones spent `sojourn`
/// seconds in the system in all, and ∫ requests in the system dt is `area`.
pub fn littles_law(n: u64, sojourn: f64, end: f64, area: f64) -> LittlesLaw {
    let n = n as f64;
    let l = area / end;
    let lambda = n / end;
    let w = sojourn / n;
    LittlesLaw {
        mean_in_system: l,
        arrival_rate: lambda,
        mean_time_in_system_s: w,
        relative_error: (l - lambda * w).abs() / l,
    }
}
