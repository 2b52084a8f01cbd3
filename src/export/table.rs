//! Terminal output in the spirit of `vllm bench serve`.

use crate::Setup;
use crate::metrics::{LatencyMetric, Summary};
use crate::plan::MIN_TAIL_REQUESTS;
use crate::sweep::Verdict;
use std::fmt::Write;

const W: usize = 50;

fn rule(out: &mut String, title: &str) {
    let pad = W.saturating_sub(title.len() + 2);
    let l = pad / 2;
    let _ = writeln!(out, "{} {title} {}", "-".repeat(l), "-".repeat(pad - l));
}

fn row(out: &mut String, k: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "{:<40} {v}", format!("{k}:"));
}

fn num(x: f64, prec: usize) -> String {
    if x.is_finite() { format!("{x:.prec$}") } else { "n/a".into() }
}

/// The percentiles the table prints when the scenario names none.
const SHOWN: [f64; 3] = [90.0, 99.0, 99.9];

fn latency(out: &mut String, title: &str, short: &str, m: &LatencyMetric, shown: &[f64]) {
    rule(out, title);
    let d = &m.dist;
    row(out, &format!("Mean {short} (ms)"), num(d.mean, 2));
    row(out, &format!("Median {short} (ms)"), num(d.median(), 2));
    for &p in shown {
        row(out, &format!("P{p} {short} (ms)"), num(d.at(p).unwrap_or(f64::NAN), 2));
    }
    row(out, &format!("Max {short} (ms)"), num(d.max, 2));
}

/// The run summary as a text table; `percentiles` are the latency
/// percentiles to print (the scenario's `percentiles`; empty: P90, P99 and
/// P99.9 beside the median), in ascending order.
pub fn format_summary(s: &Summary, percentiles: &[f64]) -> String {
    let mut shown = if percentiles.is_empty() { SHOWN.to_vec() } else { percentiles.to_vec() };
    shown.sort_by(f64::total_cmp);
    let shown = &shown[..];
    let mut o = String::new();
    format_header(&mut o, s);
    format_requests(&mut o, s);
    format_latencies(&mut o, s, shown);
    format_slo(&mut o, s);
    format_classes(&mut o, s);
    format_utilisation(&mut o, s);
    format_cost(&mut o, s);
    if let Some(f) = &s.fleet {
        format_fleet(&mut o, f);
    }
    let _ = writeln!(o, "{}", "=".repeat(W));
    o
}

/// The title, the model and GPUs, the stability verdict and the arrivals.
fn format_header(o: &mut String, s: &Summary) {
    let title = format!(" servesim: {} ", s.scenario);
    let _ = writeln!(o, "{:=^W$}", title);
    let gpus = if s.pools.len() > 1 {
        let pools: Vec<String> =
            s.pools.iter().map(|p| format!("{} × {} ({}, tp {})", p.num_gpus, p.gpu, p.name, p.tp)).collect();
        pools.join(" + ")
    } else {
        format!("{} × {} (tp {})", s.cost.num_gpus, s.gpu, s.pools[0].tp)
    };
    row(o, "Model / GPU", format!("{} {} on {gpus}", s.model, s.dtype));
    match s.stability.verdict.as_str() {
        "overloaded" => {
            let _ = writeln!(o, "!! OVERLOADED: {}", s.stability.explanation);
        }
        "shedding" => {
            let _ = writeln!(o, "!! SHEDDING LOAD: {}", s.stability.explanation);
        }
        "inconclusive" => {
            let _ = writeln!(o, "?? {}", s.stability.explanation);
        }
        _ => {}
    }
    row(o, "Stability", &s.stability.verdict);
    let w = &s.workload;
    row(
        o,
        "Arrivals",
        match (w.offered_rate, w.users) {
            (_, Some(u)) => format!("{} ({u} users)", w.process),
            (Some(r), _) => format!(
                "{} at {} {}/s",
                w.process,
                num(r, 2),
                if w.offered_rate_unit == "sessions" { "sessions" } else { "req" }
            ),
            _ => w.process.clone(),
        },
    );
    if let Some(t) = &w.trace {
        row(o, "Trace", t);
    }
    if w.skipped_rows > 0 {
        row(
            o,
            "Bad rows skipped",
            format!("{} (first: {})", w.skipped_rows, w.first_skipped_row.as_deref().unwrap_or("")),
        );
    }
}

/// Request counts, tokens and throughputs.
fn format_requests(o: &mut String, s: &Summary) {
    let m = &s.metrics;
    row(o, "Successful requests", m.completed);
    row(o, "Failed requests", m.failed);
    for (k, v) in &m.failures_by_reason {
        row(o, &format!("  {k}"), v);
    }
    if m.clipped_requests > 0 {
        row(o, "Clipped to the context window", m.clipped_requests);
    }
    row(o, "Benchmark duration (s)", num(s.duration, 2));
    row(o, "Total input tokens", m.total_input_tokens);
    row(o, "Total generated tokens", m.total_output_tokens);
    row(o, "Request throughput (req/s)", num(m.request_throughput, 2));
    if let Some(g) = m.request_goodput {
        row(o, "Request goodput (req/s)", num(g, 2));
    }
    row(o, "Output token throughput (tok/s)", num(m.output_throughput, 2));
    row(o, "Total token throughput (tok/s)", num(m.total_token_throughput, 2));
    row(o, "Output tok/s per GPU", num(s.output_throughput_per_gpu, 2));
    if s.latency_percentile_relative_error > 0.0 {
        row(
            o,
            "Latency percentiles",
            format!(
                "from histograms, within {}% (over {} requests)",
                num(s.latency_percentile_relative_error * 100.0, 2),
                crate::metrics::tally::EXACT_LIMIT
            ),
        );
    }
}

/// The latency blocks, with the `shown` percentiles.
fn format_latencies(o: &mut String, s: &Summary, shown: &[f64]) {
    let m = &s.metrics;
    latency(o, "Queueing delay", "queue", &m.queue, shown);
    latency(o, "Time to First Token", "TTFT", &m.ttft, shown);
    latency(o, "Time per Output Token (excl. 1st token)", "TPOT", &m.tpot, shown);
    latency(o, "Inter-token Latency", "ITL", &m.itl, shown);
    latency(o, "End-to-end Latency", "E2EL", &m.e2el, shown);
}

/// SLO objectives and attainment (nothing without objectives).
fn format_slo(o: &mut String, s: &Summary) {
    let m = &s.metrics;
    if let Some(slo) = &m.slo {
        rule(o, "SLOs");
        let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v} ms"));
        if s.classes.is_none() {
            row(
                o,
                "Objectives (TTFT / TPOT / E2E)",
                format!("{} / {} / {}", fmt(slo.ttft_ms), fmt(slo.tpot_ms), fmt(slo.e2e_ms)),
            );
        }
        row(o, "SLO attainment (%)", num(slo.attainment * 100.0, 2));
    }
}

/// The per-class table (nothing without declared classes).
fn format_classes(o: &mut String, s: &Summary) {
    if let Some(classes) = &s.classes {
        rule(o, "Per class");
        let _ = writeln!(
            o,
            "{:<14} {:>6} {:>8} {:>9} {:>9} {:>9} {:>7} {:>6}",
            "class", "share", "req/s", "TTFT p50", "TTFT p99", "TPOT p99", "SLO %", "failed"
        );
        for (name, c) in &classes.0 {
            let cm = &c.metrics;
            let _ = writeln!(
                o,
                "{:<14} {:>5.1}% {:>8} {:>9} {:>9} {:>9} {:>7} {:>6}",
                name.chars().take(14).collect::<String>(),
                c.share * 100.0,
                num(cm.request_throughput, 2),
                num(cm.ttft.dist.median(), 1),
                num(cm.ttft.dist.percentiles[3], 1),
                if c.prefill_only { "(prefill)".to_string() } else { num(cm.tpot.dist.percentiles[3], 1) },
                cm.slo.as_ref().map_or("-".to_string(), |x| num(x.attainment * 100.0, 1)),
                cm.failed,
            );
        }
        let _ = writeln!(o, "(latencies in ms; a prefill-only class's TTFT is its time to result)");
    }
}

/// Utilisation, KV cache, prefix caching, LoRA, offload and speculation.
fn format_utilisation(o: &mut String, s: &Summary) {
    rule(o, "Utilisation");
    let u = &s.utilisation;
    row(o, "GPU busy (%)", num(u.gpu_busy_fraction * 100.0, 1));
    row(o, "Mean batch size (seqs / step)", num(u.mean_batch_size, 1));
    row(o, "Mean running / waiting per replica", format!("{} / {}", num(u.mean_running, 1), num(u.mean_waiting, 1)));
    row(o, "MFU / MBU (%)", format!("{} / {}", num(u.mfu * 100.0, 1), num(u.mbu * 100.0, 1)));
    row(
        o,
        "KV cache mean / peak (%)",
        format!("{} / {}", num(s.kv_cache.mean_occupancy * 100.0, 1), num(s.kv_cache.peak_occupancy * 100.0, 1)),
    );
    if u.swapped_out > 0 {
        row(
            o,
            "Preemptions (swapped to host)",
            format!("{} ({}, {} s of copies)", u.preemptions, u.swapped_out, num(u.swap_time_s, 3)),
        );
    } else {
        row(o, "Preemptions", u.preemptions);
    }
    if let Some(h) = s.kv_cache.prefix_hit_rate {
        row(
            o,
            "Prefix cache hit rate (saved tokens)",
            format!("{}% ({})", num(h * 100.0, 1), s.kv_cache.prefix_saved_tokens),
        );
    }
    if let Some(how) = &s.kv_cache.prefix_sharing {
        let _ = writeln!(o, "Prefix sharing: {how}");
    }
    if let Some(l) = &s.lora {
        row(
            o,
            "LoRA adapters in GPU / loads (time %)",
            format!(
                "{}% / {} ({}%)",
                num(l.gpu_hit_rate * 100.0, 1),
                l.host_loads + l.storage_loads,
                num(l.time_share * 100.0, 1)
            ),
        );
    }
    if let Some(x) = &s.kv_cache.offload {
        row(
            o,
            "Hits GPU / offload tiers (load s)",
            format!(
                "{}% / {}% ({})",
                num(x.gpu_hit_rate * 100.0, 1),
                num(x.tier_hit_rate * 100.0, 1),
                num(x.load_time_s, 1)
            ),
        );
    }
    if let Some(sp) = &s.speculative {
        row(
            o,
            "Speculative tokens/step (formula)",
            format!(
                "{} ({}; {} k={} α={})",
                num(sp.tokens_per_step, 2),
                num(sp.expected_tokens_per_step, 2),
                sp.draft_model,
                sp.num_tokens,
                sp.acceptance
            ),
        );
    }
}

/// Cost and energy.
fn format_cost(o: &mut String, s: &Summary) {
    let m = &s.metrics;
    rule(o, "Cost");
    let c = &s.cost;
    row(o, "GPU-hours ($/GPU-hour)", format!("{} (${})", num(c.gpu_hours, 3), num(c.price_per_gpu_hour, 2)));
    row(o, "$ per 1M output tokens", num(c.usd_per_million_output_tokens, 3));
    row(
        o,
        "$ per 1,000 completed requests",
        format!(
            "{} ({} requests/hour)",
            num(c.usd_per_completed_request * 1000.0, 3),
            num(m.request_throughput * 3600.0, 0)
        ),
    );
    if let Some(x) = c.usd_per_slo_met_request {
        row(o, "$ per SLO-meeting request", format!("{x:.6}"));
    }
    let e = &s.energy;
    row(
        o,
        "Energy kWh (W per GPU, J/token)",
        format!(
            "{} ({} W, {} J)",
            num(e.kwh, 3),
            num(e.mean_power_w_per_gpu, 0),
            e.joules_per_output_token.map_or("–".into(), |j| num(j, 3))
        ),
    );
    if let Some(kg) = e.kg_co2 {
        row(o, "Emissions (kg CO2e)", num(kg, 3));
    }
}

/// The fleet block of the terminal summary.
fn format_fleet(o: &mut String, f: &crate::metrics::fleet::FleetSummary) {
    rule(o, "Fleet");
    let target = f.target.map_or(String::new(), |t| format!(", target {t}"));
    if f.policy == "none" {
        row(o, "Policy (replicas)", format!("none ({} static)", f.max_replicas));
    } else {
        row(o, "Policy (replicas min–max)", format!("{}{target} ({}–{})", f.policy, f.min_replicas, f.max_replicas));
    }
    row(
        o,
        "Replicas serving min / peak",
        format!(
            "{} / {} (mean billed {})",
            f.min_ready_replicas,
            f.peak_ready_replicas,
            num(f.mean_billed_replicas, 2)
        ),
    );
    row(
        o,
        "Scale-ups / downs (cold start s)",
        format!("{} / {} ({})", f.scale_ups, f.scale_downs, num(f.cold_start_s, 1)),
    );
    row(o, "Fleet GPU-hours ($)", format!("{} (${})", num(f.gpu_hours, 3), num(f.usd, 2)));
    if let (Some(r), Some(g), Some(l)) = (f.rescued_requests, f.slo_gained_requests, f.slo_lost_requests) {
        row(o, "SLO met vs frozen fleet (net; +gained / -lost)", format!("{r:+} (+{g} / -{l})"));
    }
    let w =
        f.slo_over_time.iter().filter_map(|w| w.attainment.map(|a| (a, w.t_start))).min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((a, t)) = w {
        row(o, "Worst window SLO attainment (%)", format!("{} (from {} s)", num(a * 100.0, 2), num(t, 0)));
    }
    let x = &f.failures;
    if x.failures > 0 || x.mtbf_h.is_some() {
        row(
            o,
            "Failures (lost / retried requests)",
            format!("{} ({} / {})", x.failures, x.lost_requests, x.retried_requests),
        );
        row(o, "Replica downtime (s)", num(x.downtime_replica_s, 1));
    }
}

/// The layout and memory plan of one pool (for `check`).
fn format_pool(o: &mut String, setup: &Setup, p: &crate::Pool) {
    let m = &p.memory;
    let e = &p.engine_config;
    let g = &p.gpu;
    let _ = writeln!(
        o,
        "gpu:   {} ({} GB, {} GB/s, {} BF16 TFLOP/s) from {}",
        g.name, g.memory_gb, g.memory_bandwidth_gbps, g.bf16_tflops, p.gpu_origin
    );
    let _ = writeln!(
        o,
        "layout: {} replica(s) × (tp {} × pp {}) = {} GPU(s)",
        p.replicas,
        p.layout.tp,
        p.layout.pp,
        p.replicas * p.layout.gpus()
    );
    let _ = writeln!(
        o,
        "        {} GPU(s) per replica, {} layer(s) per stage, {} micro-batch(es) per step, expert parallelism {}",
        m.gpus_per_replica,
        m.layers_per_stage,
        p.layout.micro_batches,
        if m.expert_parallel { format!("on ({} whole expert(s) per GPU)", m.experts_per_gpu) } else { "off".into() }
    );
    if let Some(d) = &p.draft {
        let _ =
            writeln!(o, "        speculative decoding with {} (its weights and KV come out of the KV cache)", d.name);
    }
    rule(o, "Memory plan per GPU");
    row(o, "GPU memory (GiB)", num(m.gpu_memory_gib, 2));
    if matches!(m.engine_plan.as_str(), "legacy" | "vllm") {
        // (SGLang and TensorRT-LLM budget by their own fractions: see the formula below.)
        row(o, &format!("Usable at utilisation {} (GiB)", e.gpu_memory_utilization), num(m.usable_gib_per_gpu, 2));
    }
    row(o, "Weights (GiB)", format!("{} (of {} total)", num(m.weights_gib_per_gpu, 2), num(m.weights_gib_total, 2)));
    row(o, "Activations, profiled (GiB)", num(m.activation_gib_per_gpu, 2));
    row(o, "Reserve (GiB)", num(m.reserve_gib_per_gpu, 2));
    row(o, "KV cache (GiB)", num(m.kv_gib_per_gpu, 2));
    rule(o, "KV cache per replica");
    row(o, "KV bytes per token per GPU", num(m.kv_bytes_per_token_per_gpu, 0));
    row(
        o,
        "Blocks × block size",
        format!(
            "{} × {}{}",
            m.num_blocks,
            m.block_size,
            if m.blocks_overridden { " (fixed by engine.num_gpu_blocks)" } else { "" }
        ),
    );
    row(o, "KV capacity (tokens)", m.kv_capacity_tokens);
    row(o, "max_model_len (tokens)", m.max_model_len);
    row(o, "Max concurrent seqs at max_model_len", m.max_seqs_at_max_len);
    let (mp, mo) = setup.workload.mean_lengths();
    let mean_len = mp + mo;
    row(
        o,
        &format!("Concurrent seqs at mean length ({mean_len:.0})"),
        format!("{:.0}", m.kv_capacity_tokens as f64 / mean_len),
    );
    row(o, "Max concurrent seqs (max_num_seqs)", e.max_num_seqs);
    if let Some(r) = m.max_running {
        row(o, "Max running requests (engine limit)", r);
    }
    row(o, "KV cache dtype", &m.kv_dtype);
    if m.engine_plan != "legacy" {
        let _ = writeln!(o, "KV budget as {} computes it:", m.engine_plan);
        let _ = writeln!(o, "  {}", m.formula);
        for l in &m.engine_log {
            let _ = writeln!(o, "  {} would log: {l}", m.engine_plan);
        }
    }
    let fit = m.kv_capacity_tokens as f64 / mean_len;
    if fit < FEW_SEQS {
        let _ = writeln!(
            o,
            "warning: the KV cache holds only {fit:.1} sequences of the mean length ({mean_len:.0} tokens): memory, \
             not compute, will limit the batch; consider more GPUs (hardware.tp), an FP8 KV cache \
             (model.kv_dtype = \"fp8\") or a larger engine.gpu_memory_utilization"
        );
    }
}

/// Below this many sequences of the mean length in the KV cache, `check`
/// warns that memory decides the batch size.
const FEW_SEQS: f64 = 8.0;

/// The resolved configuration and memory plan, for `servesim check`.
pub fn format_check(setup: &Setup) -> String {
    let mut o = String::new();
    let s = &setup.scenario;
    let _ = writeln!(o, "scenario \"{}\" is valid", s.name);
    let _ = writeln!(
        o,
        "model: {} ({:.2} B parameters, {}) from {}",
        setup.llm.name,
        setup.pools[0].memory.params / 1e9,
        s.model.dtype.as_str(),
        setup.llm_origin
    );
    for p in &setup.pools {
        if setup.pools.len() > 1 || !s.pools.is_empty() {
            let _ = writeln!(o, "pool \"{}\" ({}):", p.name, p.role.as_str());
        }
        format_pool(&mut o, setup, p);
    }
    let _ = writeln!(o, "router: {}", s.hardware.router.as_str());
    let _ = writeln!(o, "{}", "-".repeat(W));
    let _ = writeln!(o, "resolved configuration:");
    let _ = write!(o, "{}", toml::to_string_pretty(s).unwrap_or_default());
    o
}

/// A sweep's results as a text table: parameters and headline metrics.
pub fn format_sweep(m: &crate::sweep::SweepManifest, points: &[crate::sweep::PointResult]) -> String {
    let mut o = String::new();
    let keys: Vec<&str> = m.grid.axes.iter().map(|a| a.0.as_str()).collect();
    let cols = crate::sweep::TABLE_COLUMNS;
    let _ = writeln!(
        o,
        "sweep of {}: {} points × {} replication(s); latencies in ms",
        m.scenario, m.total_points, m.replications
    );
    for k in &keys {
        let _ = write!(o, "{:>14} ", k.rsplit('.').next().unwrap_or(k));
    }
    for (h, _) in cols {
        let _ = write!(o, "{h:>10} ");
    }
    let _ = writeln!(o, " verdict");
    for p in points {
        for k in &keys {
            let v = p.params.iter().find(|x| x.0 == *k).map_or(String::new(), |x| match &x.1 {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            });
            let _ = write!(o, "{v:>14} ");
        }
        if let Some(e) = &p.error {
            let _ = writeln!(o, " error: {}", e.lines().next().unwrap_or(""));
            continue;
        }
        for (_, name) in cols {
            let x = p.get(name) * if name == "slo.attainment" { 100.0 } else { 1.0 };
            let _ = write!(o, "{:>10} ", num(x, if x.abs() >= 100.0 { 0 } else { 2 }));
        }
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let failed = p.get("failed") / p.get("measured_requests").max(1.0);
        let verdict = match p.verdict() {
            Verdict::Stable => "stable".to_string(),
            Verdict::NotApplicable => "- (offline)".to_string(),
            Verdict::Inconclusive => "?? run longer".to_string(),
            Verdict::Failing => format!("!! FAILING {}", pct(failed)),
            Verdict::Shedding => format!("!! SHEDDING {}", pct(p.get("stability.shed_fraction"))),
            Verdict::Overloaded => "!! OVERLOADED".to_string(),
        };
        let _ = writeln!(o, " {verdict}");
        if !p.vs_baseline.is_empty() {
            // The baseline beside its point: the point's mean minus the mean paired difference.
            for _ in &keys {
                let _ = write!(o, "{:>14} ", "");
            }
            for (_, name) in cols {
                let x = p.baseline_mean(name) * if name == "slo.attainment" { 100.0 } else { 1.0 };
                let _ = write!(o, "{:>10} ", num(x, if x.abs() >= 100.0 { 0 } else { 2 }));
            }
            let _ = writeln!(o, " ↳ its baseline");
        }
    }
    let flagged = points.iter().filter(|p| p.error.is_none() && !p.verdict().ok()).count();
    if flagged > 0 {
        let _ = writeln!(
            o,
            "{flagged} point(s) were not a stable service (overloaded, shedding or failing more than 1% of \
             requests, or too short to tell): they are marked on the charts and kept off the frontier and knee"
        );
    }
    let percentile = m.loaded().ok().and_then(|l| l.scenario.slo).and_then(|s| s.percentile);
    let thin: Vec<f64> = points.iter().filter_map(|p| p.tail_requests).filter(|&t| t < MIN_TAIL_REQUESTS).collect();
    if !thin.is_empty() {
        let p = percentile.unwrap_or(99.0);
        let _ = writeln!(
            o,
            "warning: {} point(s) judged the p{p} objectives on fewer than {MIN_TAIL_REQUESTS:.0} requests beyond \
             p{p} (as few as {:.0}): {}",
            thin.len(),
            thin.iter().copied().fold(f64::INFINITY, f64::min),
            crate::plan::lengthen_advice(p)
        );
    }
    o
}

/// A run against its baseline: headline metrics side by side.
pub fn format_baseline(run: &Summary, base: &Summary) -> String {
    let mut o = String::new();
    rule(&mut o, "Against the baseline (same arrivals)");
    let (a, b) = (crate::sweep::flatten(run), crate::sweep::flatten(base));
    let get = |f: &[(String, f64)], k: &str| f.iter().find(|m| m.0 == k).map_or(f64::NAN, |m| m.1);
    let _ = writeln!(o, "{:<36} {:>11} {:>11} {:>11}", "metric", "this run", "baseline", "difference");
    for k in crate::sweep::HEADLINE {
        let (x, y) = (get(&a, k), get(&b, k));
        let _ = writeln!(
            o,
            "{:<36} {:>11} {:>11} {:>11}",
            k,
            num(x, 3),
            num(y, 3),
            if (x - y).is_finite() { format!("{:+.3}", x - y) } else { "n/a".into() }
        );
    }
    let _ = writeln!(o, "{}", "=".repeat(W));
    o
}
