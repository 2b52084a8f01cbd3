//! The run summary: one typed result struct, serialised as `summary.json`.
//!
//! Field names follow `vllm bench serve` where the quantity is the same. All
//! latency fields are milliseconds; throughputs are per second of the
//! measurement window. `null` in JSON means "not defined" (e.g. TPOT when no
//! request produced two tokens). The JSON Schema is `schema/summary.schema.json`.

use super::stability::{Stability, assess};
use super::stats::{Distribution, PERCENTILES};
use super::{RequestRecord, Status, hist};
use crate::Setup;
use crate::config::{ArrivalKind, SloConfig};
use crate::sim::SimOutput;
use rayon::prelude::*;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::collections::BTreeMap;

/// A latency distribution serialised under vLLM-style flat keys:
/// `mean_<name>_ms`, `median_<name>_ms`, `std_<name>_ms`, `p<P>_<name>_ms`
/// for P in 50, 90, 95, 99, 99.9, 99.99, `min_<name>_ms`, `max_<name>_ms`,
/// and `<name>_count`.
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
        for (p, v) in PERCENTILES.iter().zip(&d.percentiles) {
            m.serialize_entry(&format!("p{}_{n}_ms", p_word(*p)), v)?;
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
    /// good_requests / measured requests (failed ones count as misses).
    pub attainment: f64,
    /// Fraction of measured requests meeting the TTFT objective.
    pub ttft_attainment: Option<f64>,
    /// Fraction of measured requests meeting the TPOT objective.
    pub tpot_attainment: Option<f64>,
    /// Fraction of measured requests meeting the E2E objective.
    pub e2e_attainment: Option<f64>,
}

/// How busy the hardware was, averaged over replicas and the measurement window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Utilisation {
    /// Fraction of the window a replica was executing a step.
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
    /// Requests routed to each replica.
    pub requests_per_replica: Vec<u64>,
}

/// KV-cache use.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KvSummary {
    /// Blocks per replica.
    pub blocks_per_replica: u64,
    /// Tokens per block.
    pub block_size: u32,
    /// Token capacity per replica.
    pub capacity_tokens_per_replica: u64,
    /// Time-averaged fraction of blocks in use (idle time counts as 0).
    pub mean_occupancy: f64,
    /// Largest fraction of blocks ever in use on any replica.
    pub peak_occupancy: f64,
}

/// What the run cost.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CostSummary {
    /// USD per GPU-hour assumed.
    pub price_per_gpu_hour: f64,
    /// GPUs in the deployment (replicas × tp).
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
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Engine replicas.
    pub replicas: u32,
    /// Requests generated (whole run, warm-up included).
    pub num_requests: u64,
    /// Requests arriving after the warm-up (the ones measured).
    pub measured_requests: u64,
    /// Measured requests completed.
    pub completed: u64,
    /// Measured requests that failed (rejected).
    pub failed: u64,
    /// Failed measured requests by reason.
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Prompt tokens of measured completed requests.
    pub total_input_tokens: u64,
    /// Output tokens of measured completed requests.
    pub total_output_tokens: u64,
    /// Warm-up excluded from the metrics, s.
    pub warmup_s: f64,
    /// Measurement window: from the warm-up's end to the last completion, s.
    pub duration: f64,
    /// Simulated time of the whole run, s.
    pub simulated_time_s: f64,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Requests meeting every SLO per second (null without SLOs).
    pub request_goodput: Option<f64>,
    /// Prompt tokens per second.
    pub input_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Prompt + output tokens per second.
    pub total_token_throughput: f64,
    /// Output tokens per second per GPU.
    pub output_throughput_per_gpu: f64,
    /// Time to first token.
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
    /// Normalised latency: E2E / output tokens (ms per token).
    #[serde(flatten)]
    pub norm_e2el: LatencyMetric,
    /// Upper bound of the relative error of ITL percentiles (pooled in a log histogram).
    pub itl_percentile_relative_error: f64,
    /// SLO attainment (null without `[slo]`).
    pub slo: Option<SloSummary>,
    /// Utilisation.
    pub utilisation: Utilisation,
    /// KV cache.
    pub kv_cache: KvSummary,
    /// Cost.
    pub cost: CostSummary,
    /// false when the queue grows through the run (overload); null when not applicable.
    pub stable: Option<bool>,
    /// The stability verdict and its evidence.
    pub stability: Stability,
    /// Little's law check.
    pub littles_law: LittlesLaw,
}

fn metric(name: &'static str, mut v: Vec<f64>) -> LatencyMetric {
    for x in &mut v {
        *x *= 1e3;
    }
    LatencyMetric { name, dist: Distribution::of(&mut v) }
}

/// Builds the summary of a finished simulation.
pub fn summarize(setup: &Setup, seed: u64, out: &SimOutput) -> Summary {
    let s = &setup.scenario;
    let warmup = s.warmup_s;
    let slo = s.slo.as_ref();
    let n_measured = out.records.iter().filter(|r| r.arrival >= warmup).count();
    let mut cols: [Vec<f64>; 6] = std::array::from_fn(|_| Vec::with_capacity(n_measured));
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let (mut completed, mut in_tok, mut out_tok, mut good) = (0u64, 0u64, 0u64, 0u64);
    let (mut ok_ttft, mut ok_tpot, mut ok_e2e) = (0u64, 0u64, 0u64);
    let mut stab = Vec::with_capacity(n_measured);
    let mut service = Vec::with_capacity(n_measured);
    for r in out.records.iter().filter(|r| r.arrival >= warmup) {
        match r.status {
            Status::Rejected(why) => *failures.entry(why.as_str().to_string()).or_default() += 1,
            Status::InFlight => *failures.entry("unfinished".to_string()).or_default() += 1,
            Status::Completed => {
                completed += 1;
                in_tok += r.prompt as u64;
                out_tok += r.output as u64;
                let (ttft, e2e, tpot) = (r.ttft(), r.e2e(), r.tpot());
                cols[0].push(ttft);
                if !tpot.is_nan() {
                    cols[1].push(tpot);
                }
                cols[2].push(e2e);
                cols[3].push(r.queue_delay());
                cols[4].push(r.preprocess());
                cols[5].push(r.normalized_latency());
                stab.push((r.arrival, r.queue_delay(), r.last_token));
                service.push(e2e - (r.first_scheduled - r.arrival));
                if let Some(slo) = slo {
                    let [a, b, c] = slo_checks(slo, r);
                    ok_ttft += a as u64;
                    ok_tpot += b as u64;
                    ok_e2e += c as u64;
                    good += (a && b && c) as u64;
                }
            }
        }
    }
    let failed = failures.values().sum();
    let [ttft, tpot, e2el, queue, pre, norm] = cols;
    let mut metrics: Vec<(&'static str, Vec<f64>)> = vec![
        ("ttft", ttft),
        ("tpot", tpot),
        ("e2el", e2el),
        ("queue", queue),
        ("preprocess", pre),
        ("norm_e2el", norm),
    ];
    let mut done: Vec<LatencyMetric> = metrics.par_drain(..).map(|(n, v)| metric(n, v)).collect();
    let norm_m = done.pop().unwrap();
    let pre_m = done.pop().unwrap();
    let queue_m = done.pop().unwrap();
    let e2el_m = done.pop().unwrap();
    let tpot_m = done.pop().unwrap();
    let ttft_m = done.pop().unwrap();
    let mut itl = Distribution::of_histogram(&out.itl);
    for x in itl.percentiles.iter_mut().chain([&mut itl.mean, &mut itl.std, &mut itl.min, &mut itl.max]) {
        *x *= 1e3;
    }

    let start = warmup.max(0.0);
    let duration = (out.end_time - start).max(f64::MIN_POSITIVE);
    let n_rep = s.hardware.replicas as f64;
    let num_gpus = s.hardware.replicas * s.hardware.tp;
    let stats = &out.replicas;
    let sum = |f: &dyn Fn(&crate::engine::ReplicaStats) -> f64| stats.iter().map(f).sum::<f64>();
    let busy = sum(&|r| r.busy);
    let per_busy = |x: f64| if busy > 0.0 { x / busy } else { 0.0 };
    let nb = setup.memory.num_blocks as f64;
    let utilisation = Utilisation {
        gpu_busy_fraction: busy / (duration * n_rep),
        mean_batch_size: per_busy(sum(&|r| r.batch_area)),
        mean_tokens_per_step: per_busy(sum(&|r| r.token_area)),
        mean_running: sum(&|r| r.running_area) / (duration * n_rep),
        mean_waiting: sum(&|r| r.waiting_area) / (duration * n_rep),
        mfu: sum(&|r| r.flops) / (duration * n_rep * out.peak_flops),
        mbu: sum(&|r| r.bytes) / (duration * n_rep * out.peak_bandwidth),
        steps: stats.iter().map(|r| r.steps).sum(),
        preemptions: stats.iter().map(|r| r.preemptions).sum(),
        recomputed_tokens: stats.iter().map(|r| r.recomputed_tokens).sum(),
        requests_per_replica: stats.iter().map(|r| r.routed).collect(),
    };
    let kv_cache = KvSummary {
        blocks_per_replica: setup.memory.num_blocks,
        block_size: setup.memory.block_size,
        capacity_tokens_per_replica: setup.memory.kv_capacity_tokens,
        mean_occupancy: sum(&|r| r.kv_area) / (duration * n_rep * nb),
        peak_occupancy: stats.iter().map(|r| r.peak_kv_blocks).max().unwrap_or(0) as f64 / nb,
    };
    let gpu_hours = num_gpus as f64 * duration / 3600.0;
    let total_usd = gpu_hours * setup.price_per_gpu_hour;
    let slo_summary = slo.map(|x| {
        let m = n_measured.max(1) as f64;
        SloSummary {
            ttft_ms: x.ttft_ms,
            tpot_ms: x.tpot_ms,
            e2e_ms: x.e2e_ms,
            good_requests: good,
            attainment: good as f64 / m,
            ttft_attainment: x.ttft_ms.map(|_| ok_ttft as f64 / m),
            tpot_attainment: x.tpot_ms.map(|_| ok_tpot as f64 / m),
            e2e_attainment: x.e2e_ms.map(|_| ok_e2e as f64 / m),
        }
    });
    let cost = CostSummary {
        price_per_gpu_hour: setup.price_per_gpu_hour,
        num_gpus,
        gpu_hours,
        total_usd,
        usd_per_million_output_tokens: total_usd / out_tok as f64 * 1e6,
        usd_per_completed_request: total_usd / completed as f64,
        usd_per_slo_met_request: slo_summary
            .as_ref()
            .filter(|x| x.good_requests > 0)
            .map(|x| total_usd / x.good_requests as f64),
    };
    let med_service = if service.is_empty() { f64::NAN } else { super::stats::percentiles(&mut service, &[50.0])[0] };
    let measured_arrivals: Vec<f64> = out.records.iter().filter(|r| r.arrival >= warmup).map(|r| r.arrival).collect();
    let stability = assess(&stab, &measured_arrivals, med_service, s.workload.arrival == ArrivalKind::Offline);
    let stable = match stability.verdict.as_str() {
        "stable" => Some(true),
        "overloaded" => Some(false),
        _ => None,
    };
    let littles_law = littles_law(&out.records, out.run_end, out.in_system_area);
    Summary {
        servesim_version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: s.name.clone(),
        seed,
        model: setup.llm.name.clone(),
        dtype: s.model.dtype.as_str().to_string(),
        gpu: setup.gpu.name.clone(),
        tp: s.hardware.tp,
        replicas: s.hardware.replicas,
        num_requests: out.records.len() as u64,
        measured_requests: n_measured as u64,
        completed,
        failed,
        failures_by_reason: failures,
        total_input_tokens: in_tok,
        total_output_tokens: out_tok,
        warmup_s: warmup,
        duration,
        simulated_time_s: out.end_time,
        request_throughput: completed as f64 / duration,
        request_goodput: slo_summary.as_ref().map(|x| x.good_requests as f64 / duration),
        input_throughput: in_tok as f64 / duration,
        output_throughput: out_tok as f64 / duration,
        total_token_throughput: (in_tok + out_tok) as f64 / duration,
        output_throughput_per_gpu: out_tok as f64 / duration / num_gpus as f64,
        ttft: ttft_m,
        tpot: tpot_m,
        itl: LatencyMetric { name: "itl", dist: itl },
        e2el: e2el_m,
        queue: queue_m,
        preprocess: pre_m,
        norm_e2el: norm_m,
        itl_percentile_relative_error: hist::RELATIVE_ERROR,
        slo: slo_summary,
        utilisation,
        kv_cache,
        cost,
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
pub fn littles_law(records: &[RequestRecord], end: f64, area: f64) -> LittlesLaw {
    let n = records.len() as f64;
    let sojourn: f64 =
        records.iter().map(|r| if r.status == Status::Completed { r.last_token - r.arrival } else { 0.0 }).sum();
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
