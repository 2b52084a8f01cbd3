//! Computing the run summary: [`summarize`] turns a finished simulation's
//! tally and replica counters into the [`Summary`] of `src/metrics/summary.rs`, section
//! by section (requests, utilisation, KV cache, cost, energy, …).

use crate::Setup;
use crate::config::SloConfig;
use crate::fleet::{FleetOutput, SloTimeline};
use crate::metrics::fleet::{FailureSummary, FleetSample, FleetSummary, MAX_WINDOWS, SloWindow};
use crate::metrics::hist;
use crate::metrics::stability::assess;
use crate::metrics::stats::{Distribution, PERCENTILES};
use crate::metrics::summary::{
    ClassMap, ClassSummary, CostSummary, DisaggSummary, EnergySummary, KvSummary, LatencyMetric, LittlesLaw,
    LoraSummary, OffloadSummary, PoolSummary, RequestMetrics, SloSummary, SpecSummary, Summary, Utilisation,
    WorkloadSummary,
};
use crate::metrics::tally::{Columns, Tally, histogram_ms};
use crate::sim::SimOutput;
use crate::workload::WorkloadPlan;
use rayon::prelude::*;

/// What a trace's session column does to prefix caching, in words.
fn prefix_sharing(setup: &crate::Setup, prefix_caching: bool) -> Option<String> {
    let column = setup.scenario.workload.trace.as_ref()?.session_column.as_ref()?;
    Some(format!(
        "the trace's `{column}` column groups requests into sessions: a session's requests share their leading prompt \
         blocks (each prompt is taken to begin with the session's earlier prompt, as a chat history does){}",
        if prefix_caching { "; prefix caching reuses them" } else { "; prefix caching is off, so nothing is reused" }
    ))
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

fn lora_summary(setup: &crate::Setup, stats: &[crate::engine::ReplicaStats]) -> Option<LoraSummary> {
    let c = setup.scenario.lora.as_ref()?;
    let plan = setup.lora_plan(0)?;
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
    let mut tally = std::mem::replace(&mut out.tally, setup.tally());
    let out = &*out;
    let s = &setup.scenario;
    let warmup = s.warmup_s;
    let start = warmup.max(0.0);
    let duration = (out.end_time - start).max(f64::MIN_POSITIVE);
    let percentile_error = tally.percentile_error();
    let extra = extra_percentiles(&s.percentiles);
    let mut backlog = tally.backlog();
    let groups = std::mem::take(&mut tally.groups);
    let classes = class_map(setup, out, &groups, duration, &extra);
    let metrics = pooled_metrics(setup, out, groups, duration, &extra);
    let out_tok = metrics.total_output_tokens;
    let stats = &out.replicas;
    let num_gpus: u32 = setup.pools.iter().map(|p| p.replicas * p.layout.gpus()).sum();
    let fleet_out = out.fleet.as_ref();
    let pools = pool_summaries(setup, stats, duration, fleet_out);
    let utilisation = utilisation(stats, &pools, num_gpus, duration, fleet_out);
    let kv_cache = kv_summary(setup, stats, &pools, num_gpus);
    let speculative = spec_summary(setup, stats);
    let disaggregation = disagg_summary(setup, stats, &tally);
    let energy = energy_summary(setup, stats, duration, out_tok, fleet_out);
    let fleet = out.fleet.as_ref().map(|f| {
        let p = &setup.pools[0];
        let t = out.slo_timeline.clone().unwrap_or_default();
        fleet_summary(setup, f, &t, out.frozen_timeline.as_ref(), duration, p.layout.gpus(), p.price_per_gpu_hour)
    });
    let cost = cost_summary(setup, &pools, &metrics, &energy, duration, num_gpus, fleet_out);
    // The typical wait for a first token (the backlog's time scale), from
    // the distributions already computed.
    let median =
        |m: &LatencyMetric| PERCENTILES.iter().position(|&q| q == 50.0).map_or(f64::NAN, |i| m.dist.percentiles[i]);
    let wait50 = median(&metrics.ttft) / 1e3;
    backlog.time_scale(tally.sojourn / tally.done.max(1) as f64, median(&metrics.e2el) / 1e3, wait50);
    let stability = assess(&backlog, setup.workload.offline);
    let stable = stability.stable();
    let littles_law = littles_law(tally.count(), tally.sojourn, out.run_end, out.in_system_area);
    let workload_summary = workload_summary(&setup.workload, &tally);
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

/// The metrics of each declared class (None when the workload declares none).
fn class_map(setup: &Setup, out: &SimOutput, groups: &[Columns], duration: f64, extra: &[f64]) -> Option<ClassMap> {
    let workload = &setup.workload;
    let n_measured: u64 = groups.iter().map(|g| g.measured).sum();
    workload.declared_classes.then(|| {
        ClassMap(
            groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let c = &workload.classes[i];
                    let mut own = Columns::default();
                    own.append(g);
                    let m = own.finish(&out.itl_by_class[i], duration, c.slo.as_ref(), extra);
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
                                Distribution::of_with(&mut [], extra)
                            },
                        },
                        metrics: m,
                    };
                    (c.name.clone(), summary)
                })
                .collect(),
        )
    })
}

/// The metrics of every measured request, the groups pooled (the last
/// group first, then the others from last to first).
fn pooled_metrics(
    setup: &Setup,
    out: &SimOutput,
    mut groups: Vec<Columns>,
    duration: f64,
    extra: &[f64],
) -> RequestMetrics {
    let s = &setup.scenario;
    let mut all = groups.pop().unwrap_or_default();
    for g in groups.iter().rev() {
        all.append(g);
    }
    // The pooled objectives are `[slo]`'s unless a class sets its own (then null).
    let uniform = s.workload.classes.iter().all(|c| c.slo.is_none());
    all.finish(&out.itl, duration, s.slo.as_ref().filter(|_| uniform), extra)
}

/// The pools' `f`, weighted by their share of the `num_gpus` GPUs (with one
/// pool, exactly that pool's).
fn by_gpus(pools: &[PoolSummary], num_gpus: u32, f: &dyn Fn(&PoolSummary) -> f64) -> f64 {
    pools.iter().filter(|p| p.num_gpus > 0).map(|p| f(p) * (p.num_gpus as f64 / num_gpus as f64)).sum::<f64>()
}

/// How busy the engines were over the window of `duration` seconds.
fn utilisation(
    stats: &[crate::engine::ReplicaStats],
    pools: &[PoolSummary],
    num_gpus: u32,
    duration: f64,
    fleet_out: Option<&crate::fleet::FleetOutput>,
) -> Utilisation {
    let n_rep = stats.len() as f64;
    let sum = |f: &dyn Fn(&crate::engine::ReplicaStats) -> f64| stats.iter().map(f).sum::<f64>();
    let busy = sum(&|r| r.busy);
    let per_busy = |x: f64| if busy > 0.0 { x / busy } else { 0.0 };
    let span = replica_seconds(fleet_out, duration, n_rep);
    // Utilisations are the pools' own, weighted by their share of the GPUs.
    let by_gpus = |f: &dyn Fn(&PoolSummary) -> f64| by_gpus(pools, num_gpus, f);
    Utilisation {
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
    }
}

/// The KV cache: its size, occupancy, prefix caching and offload tiers.
fn kv_summary(setup: &Setup, stats: &[crate::engine::ReplicaStats], pools: &[PoolSummary], num_gpus: u32) -> KvSummary {
    let prefix_caching = setup.pools.iter().any(|p| p.engine.prefix_caching);
    KvSummary {
        blocks_per_replica: setup.common(|p| p.memory.num_blocks),
        block_size: setup.common(|p| p.memory.block_size),
        capacity_tokens_per_replica: setup.common(|p| p.memory.kv_capacity_tokens),
        total_blocks: setup.pools.iter().map(|p| p.replicas as u64 * p.memory.num_blocks).sum(),
        capacity_tokens: setup.pools.iter().map(|p| p.replicas as u64 * p.memory.kv_capacity_tokens).sum(),
        mean_occupancy: by_gpus(pools, num_gpus, &|p| p.kv_mean_occupancy),
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
    }
}

/// Speculative decoding (None when no pool speculates): the first pool that
/// speculates describes it; the counts cover every pool.
fn spec_summary(setup: &Setup, stats: &[crate::engine::ReplicaStats]) -> Option<SpecSummary> {
    let spec_pool = setup.pools.iter().find(|p| crate::config::SpeculativeConfig::active(&p.engine_config).is_some());
    spec_pool.and_then(|p| crate::config::SpeculativeConfig::active(&p.engine_config)).map(|sp| {
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
    })
}

/// The KV transfers between prefill and decode pools (None without a prefill pool).
fn disagg_summary(setup: &Setup, stats: &[crate::engine::ReplicaStats], tally: &Tally) -> Option<DisaggSummary> {
    let split = setup.pools.iter().any(|p| p.role == crate::config::PoolRole::Prefill);
    split.then(|| {
        let link = setup.scenario.disaggregation.clone().unwrap_or_default();
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
    })
}

/// What the run cost: GPU hours at the pools' prices, plus the energy's.
fn cost_summary(
    setup: &Setup,
    pools: &[PoolSummary],
    metrics: &RequestMetrics,
    energy: &EnergySummary,
    duration: f64,
    num_gpus: u32,
    fleet_out: Option<&crate::fleet::FleetOutput>,
) -> CostSummary {
    let gpu_hours = match fleet_out {
        Some(f) => setup.pools[0].layout.gpus() as f64 * f.billed_replica_s / 3600.0,
        None => num_gpus as f64 * duration / 3600.0,
    };
    let one = (setup.pools.len() == 1).then(|| setup.pools[0].price_per_gpu_hour);
    let total_usd = match one {
        Some(price) => gpu_hours * price,
        None => pools.iter().map(|p| p.usd).sum(),
    } + energy.usd;
    CostSummary {
        price_per_gpu_hour: one.unwrap_or(total_usd / gpu_hours),
        num_gpus,
        gpu_hours,
        total_usd,
        usd_per_million_output_tokens: total_usd / metrics.total_output_tokens as f64 * 1e6,
        usd_per_completed_request: total_usd / metrics.completed as f64,
        usd_per_slo_met_request: metrics
            .slo
            .as_ref()
            .filter(|x| x.good_requests > 0)
            .map(|x| total_usd / x.good_requests as f64),
    }
}

/// The offered workload, and the arrivals observed.
fn workload_summary(workload: &WorkloadPlan, tally: &Tally) -> WorkloadSummary {
    let last_arrival = tally.last_arrival();
    WorkloadSummary {
        process: workload.process.clone(),
        offered_rate: workload.offered_rate,
        offered_rate_unit: if workload.sessions.is_some() { "sessions".into() } else { "requests".into() },
        observed_arrival_rate: (tally.count() > 1 && last_arrival > 0.0).then(|| tally.count() as f64 / last_arrival),
        users: workload.closed_loop.as_ref().map(|c| c.0),
        trace: workload.trace.as_ref().map(|t| t.file.clone()),
        skipped_rows: workload.skipped_rows,
        first_skipped_row: workload.first_skipped.clone(),
        sessions: tally.sessions(),
    }
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

/// Builds the fleet summary; `duration` is the window, `gpus` GPUs per replica.
fn fleet_summary(
    setup: &crate::Setup,
    f: &FleetOutput,
    timeline: &SloTimeline,
    frozen: Option<&SloTimeline>,
    duration: f64,
    gpus: u32,
    price: f64,
) -> FleetSummary {
    let cfg = setup.scenario.fleet.clone().unwrap_or_default();
    let gpu_hours = f.billed_replica_s * gpus as f64 / 3600.0;
    let after: Vec<&FleetSample> = f.series.iter().collect();
    let ready = |s: &&FleetSample| s.ready;
    let merge = timeline.buckets.len().div_ceil(MAX_WINDOWS).max(1);
    let slo_over_time: Vec<SloWindow> = timeline
        .buckets
        .chunks(merge)
        .enumerate()
        .map(|(k, c)| {
            let sum = |g: &dyn Fn(&crate::fleet::SloBucket) -> u64| c.iter().map(g).sum::<u64>();
            let (requests, slo_met) = (sum(&|b| b.requests), sum(&|b| b.slo_met));
            let w = timeline.bucket_s * merge as f64;
            let slo_met_frozen =
                frozen.map(|z| z.buckets.iter().skip(k * merge).take(merge).map(|b| b.slo_met).sum::<u64>());
            SloWindow {
                t_start: k as f64 * w,
                t_end: (k + 1) as f64 * w,
                requests,
                completed: sum(&|b| b.completed),
                slo_met,
                attainment: (requests > 0).then(|| slo_met as f64 / requests as f64),
                slo_met_frozen,
                rescued: slo_met_frozen.map(|z| slo_met as i64 - z as i64),
            }
        })
        .collect();
    FleetSummary {
        policy: cfg.policy.as_str().to_string(),
        target: cfg.target,
        // A fleet without a policy is its initial replicas.
        min_replicas: if cfg.policy == crate::config::ScalePolicy::None {
            setup.scenario.hardware.replicas
        } else {
            cfg.min_replicas
        },
        max_replicas: cfg.slots(setup.scenario.hardware.replicas),
        initial_replicas: setup.scenario.hardware.replicas,
        cold_start_s: f.cold_start_s,
        warm_pool: cfg.warm_pool,
        mean_billed_replicas: f.billed_replica_s / duration,
        peak_ready_replicas: after.iter().map(ready).max().unwrap_or(0),
        min_ready_replicas: after.iter().map(ready).min().unwrap_or(0),
        gpu_hours,
        usd: gpu_hours * price,
        scale_ups: f.scale_ups,
        scale_downs: f.scale_downs,
        rescued_requests: frozen.map(|_| slo_over_time.iter().filter_map(|w| w.rescued).sum()),
        slo_gained_requests: frozen
            .map(|_| slo_over_time.iter().filter_map(|w| w.rescued).filter(|&d| d > 0).map(|d| d as u64).sum()),
        slo_lost_requests: frozen
            .map(|_| slo_over_time.iter().filter_map(|w| w.rescued).filter(|&d| d < 0).map(|d| (-d) as u64).sum()),
        failures: FailureSummary {
            mtbf_h: cfg.mtbf_h,
            repair_s: cfg.repair_s,
            on_failure: match cfg.on_failure {
                crate::config::OnFailure::Retry => "retry".into(),
                crate::config::OnFailure::Lost => "lost".into(),
            },
            failures: f.failures,
            lost_requests: f.lost,
            retried_requests: f.retried,
            downtime_replica_s: f.downtime_s,
        },
        replicas_over_time: f.series.clone(),
        slo_over_time,
    }
}
