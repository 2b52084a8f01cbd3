//! Serving policies: waiting-queue orders (priority with aging, shortest
//! prompt, shortest job, earliest deadline) and admission control (queue
//! limit, client timeouts, token rate limits), each compared with the
//! first-come-first-served baseline on the same arrivals.

use crate::common;

use common::{mean, run};
use servesim::Report;
use servesim::metrics::{RequestRecord, Status};

/// A single server (one sequence at a time, 10 ms per step) with two classes.
fn two_classes(extra_engine: &str, hi_rate: f64, lo_rate: f64, n: u64) -> String {
    format!(
        r#"seed = 3
num_requests = {n}
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
max_num_seqs = 1
{extra_engine}
[cost]
model = "constant"
step_overhead_ms = 0
step_time_ms = 10
[workload]
prompt_tokens = {{ dist = "fixed", value = 16 }}
output_tokens = {{ dist = "fixed", value = 1 }}
[[workload.classes]]
name = "hi"
rate = {hi_rate}
slo = {{ ttft_ms = 40 }}
[[workload.classes]]
name = "lo"
rate = {lo_rate}
priority = 1
slo = {{ ttft_ms = 2000 }}
"#
    )
}

fn class_ttfts(rep: &Report, class: u16) -> Vec<f64> {
    rep.output.records.iter().filter(|r| r.class == class && r.status == Status::Completed).map(|r| r.ttft()).collect()
}

fn max_queue(rep: &Report, class: u16) -> f64 {
    rep.output
        .records
        .iter()
        .filter(|r| r.class == class && r.status == Status::Completed)
        .map(RequestRecord::queue_delay)
        .fold(0.0, f64::max)
}

#[test]
fn priority_helps_the_high_class_and_aging_bounds_the_low_class_wait() {
    let fcfs = run(&two_classes("", 60.0, 30.0, 20_000), &[]);
    // As vLLM: the lower value (hi, 0) goes first, and there is no aging by default.
    let strict = run(&two_classes("queue_order = \"priority\"", 60.0, 30.0, 20_000), &[]);
    assert_eq!(strict.setup.pools[0].engine_config.priority_aging_s, None);
    let (hf, hs) = (mean(&class_ttfts(&fcfs, 0)), mean(&class_ttfts(&strict, 0)));
    let (lf, ls) = (mean(&class_ttfts(&fcfs, 1)), mean(&class_ttfts(&strict, 1)));
    assert!(hs < 0.6 * hf, "high-priority mean TTFT {hs} vs FCFS {hf}");
    assert!(ls > 1.2 * lf, "low-priority mean TTFT {ls} vs FCFS {lf}");
    // Same arrivals, same work: the mean over both classes is conserved
    // (work-conserving, equal service times), only its split changes.
    let all = |r: &Report| mean(&r.output.records.iter().map(RequestRecord::ttft).collect::<Vec<_>>());
    assert!((all(&fcfs) / all(&strict) - 1.0).abs() < 1e-9);
    // With aging (one priority level per 50 ms waited), the low class's worst
    // wait is far below strict priority's.
    let aged = run(&two_classes("queue_order = \"priority\"\npriority_aging_s = 0.05", 60.0, 30.0, 20_000), &[]);
    let (ws, wa) = (max_queue(&strict, 1), max_queue(&aged, 1));
    assert!(wa < 0.7 * ws, "low-class worst wait {wa} (aging) vs {ws} (strict)");
    // A low request can be overtaken only by highs that arrive less than 50 ms after it.
    assert!(wa < max_queue(&fcfs, 1) + 0.06 + 0.2, "{wa}");
}

#[test]
fn shortest_job_and_prompt_first_lower_the_mean() {
    // Variable output lengths on one sequence at a time: shortest job first
    // minimises the mean time in system (M/G/1 SPT).
    let base = r#"seed = 5
num_requests = 8000
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
max_num_seqs = 1
[cost]
model = "constant"
step_overhead_ms = 0
step_time_ms = 2
[workload]
rate = 8
prompt_tokens = { dist = "uniform", min = 1, max = 8000 }
output_tokens = { dist = "exponential", mean = 50 }
"#;
    let e2e = |r: &Report| mean(&r.output.records.iter().map(RequestRecord::e2e).collect::<Vec<_>>());
    let fcfs = run(base, &[]);
    let sjf = run(base, &["engine.queue_order=\"shortest-job\""]);
    let noisy = run(base, &["engine.queue_order=\"shortest-job\"", "engine.prediction_error=1.0"]);
    let spf = run(base, &["engine.queue_order=\"shortest-prompt\""]);
    let (f, s, n, p) = (e2e(&fcfs), e2e(&sjf), e2e(&noisy), e2e(&spf));
    assert!(s < 0.8 * f, "SJF {s} vs FCFS {f}");
    assert!(s < n && n < f, "a noisy predictor lies between: {s} < {n} < {f}");
    // Prompt length does not predict the work here (one step per token of output,
    // prefill is one step): shortest prompt first is no better than a coin.
    assert!((p / f - 1.0).abs() < 0.25, "SPF {p} vs FCFS {f}");
    assert_eq!(sjf.summary.metrics.completed, fcfs.summary.metrics.completed);
}

#[test]
fn earliest_deadline_first_serves_the_tight_deadlines() {
    let fcfs = run(&two_classes("", 50.0, 40.0, 20_000), &[]);
    let edf = run(&two_classes("queue_order = \"edf\"", 50.0, 40.0, 20_000), &[]);
    let att = |r: &Report, c: &str| {
        r.summary.classes.as_ref().unwrap().get(c).unwrap().metrics.slo.as_ref().unwrap().attainment
    };
    assert!(att(&edf, "hi") > att(&fcfs, "hi") + 0.05, "{} vs {}", att(&edf, "hi"), att(&fcfs, "hi"));
    assert!(att(&edf, "lo") > 0.99, "the loose deadline is still met: {}", att(&edf, "lo"));
}

#[test]
fn admission_control_refusals_are_counted_and_visible() {
    // Overloaded (rho = 1.2): an unbounded queue grows; limits refuse or drop work.
    let over = two_classes("", 80.0, 40.0, 6000);
    let capped = run(&over, &["engine.max_waiting=20"]);
    let m = &capped.summary.metrics;
    let full = *m.failures_by_reason.get("queue_full").unwrap_or(&0);
    assert!(full > 500, "queue_full {full}");
    assert_eq!(m.failed, full);
    assert!(max_queue(&capped, 0).max(max_queue(&capped, 1)) <= 21.0 * 0.010 + 1e-9, "at most 20 ahead");
    // Client timeouts: nobody waits longer than max_wait_s to be scheduled.
    let timed = run(&over, &["engine.max_wait_s=0.3"]);
    let t = &timed.summary.metrics;
    let out = *t.failures_by_reason.get("timed_out").unwrap_or(&0);
    assert!(out > 500, "timed_out {out}");
    assert!(
        timed
            .output
            .records
            .iter()
            .filter(|r| r.status == Status::Completed)
            .all(|r| r.first_scheduled - r.arrival <= 0.3 + 1e-9)
    );
    assert_eq!(t.completed + t.failed, t.measured_requests);
    // Refusing work makes the survivors' latency look good: the summary must say so.
    // Latencies cover the completed requests only; the failures sit beside them.
    assert!(t.failed > 0 && t.ttft.dist.count == t.completed);
}

#[test]
fn token_rate_limits_cap_a_class() {
    let toml = two_classes("", 30.0, 30.0, 6000)
        .replace("name = \"lo\"\n", "name = \"lo\"\ntoken_rate_limit = 170.0\ntoken_burst = 34.0\n");
    let rep = run(&toml, &[]);
    let lo = rep.summary.classes.as_ref().unwrap().get("lo").unwrap();
    let limited = *lo.metrics.failures_by_reason.get("rate_limited").unwrap_or(&0);
    assert!(limited > 500, "rate_limited {limited}");
    // Accepted tokens never exceed rate × time + burst (17 tokens per request).
    let mut accepted = 0.0;
    for r in rep.output.records.iter().filter(|r| r.class == 1) {
        if r.status != Status::Rejected(servesim::metrics::RejectReason::RateLimited) {
            accepted += 17.0;
            assert!(accepted <= 170.0 * r.arrival + 34.0 + 1e-6, "{accepted} tokens by {}", r.arrival);
        }
    }
    let hi = rep.summary.classes.as_ref().unwrap().get("hi").unwrap();
    assert_eq!(hi.metrics.failed, 0, "the other class is not limited");
}

/// A mixed workload on one H100 (roofline cost): long and short prompts, chat
/// outputs. The cost model is pinned so that the presets differ only in how
/// they schedule (each profile's own kernel speeds and overheads would
/// otherwise enter the comparison).
const MIXED: &str = r#"seed = 9
num_requests = 3000
warmup_s = 10
[model]
name = "llama-3.1-8b"
[cost]
model = "roofline"
step_overhead_ms = 0.5
[workload]
rate = 12
prompt_tokens = { dist = "lognormal", mean = 1500, cv = 1.2 }
output_tokens = { dist = "lognormal", mean = 60, cv = 0.8 }
"#;

fn p99(r: &Report, pick: fn(&RequestRecord) -> f64) -> f64 {
    let mut v: Vec<f64> = r.output.records.iter().filter(|x| x.status == Status::Completed).map(pick).collect();
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    v[(v.len() as f64 * 0.99) as usize]
}

#[test]
fn presets_and_the_batching_tradeoffs() {
    let v1 = run(MIXED, &["engine.preset=\"vllm-v1\""]);
    let v0 = run(MIXED, &["engine.preset=\"vllm-v0\"", "engine.max_model_len=16384"]);
    let sarathi = run(MIXED, &["engine.preset=\"sarathi\""]);
    let orca = run(MIXED, &["engine.preset=\"orca\"", "engine.max_num_batched_tokens=16384"]);
    let stat = run(MIXED, &["engine.preset=\"static\"", "engine.max_num_seqs=32"]);
    // Presets set their knobs; explicit keys win.
    use servesim::engine::BatchPolicy;
    let batching = |r: &servesim::Report| r.setup.pools[0].engine.batching;
    assert!(batching(&v1).chunked() && v1.setup.pools[0].engine.max_num_batched_tokens == 8192);
    assert_eq!(sarathi.setup.pools[0].engine.max_num_batched_tokens, 512);
    assert_eq!(batching(&v0), BatchPolicy::PrefillSteps);
    assert_eq!(v0.setup.pools[0].engine.max_num_batched_tokens, 16384);
    assert_eq!(batching(&orca), BatchPolicy::Mixed);
    assert!(batching(&stat).is_static());
    // Sarathi-Serve's result: chunked prefill with a small budget removes the
    // decode stalls that prefill-only steps cause (p99 TPOT), on the same
    // arrivals, at the price of a slower first token; a chunk as large as
    // vLLM v1's default budget stalls decodes nearly as much as a prefill step.
    let (tv1, tv0, ts) =
        (p99(&v1, RequestRecord::tpot), p99(&v0, RequestRecord::tpot), p99(&sarathi, RequestRecord::tpot));
    assert!(ts < 0.5 * tv0, "p99 TPOT sarathi {ts} vs vllm-v0 {tv0}");
    assert!(tv1 < tv0, "p99 TPOT vllm-v1 {tv1} vs vllm-v0 {tv0}");
    let itl = |r: &Report| r.summary.metrics.itl.dist.percentiles[3];
    assert!(itl(&sarathi) < 0.5 * itl(&v0) && itl(&v1) < itl(&v0));
    let med_ttft = |r: &Report| r.summary.metrics.ttft.dist.median();
    assert!(med_ttft(&sarathi) > med_ttft(&v0), "chunking delays the first token");
    // Static batching: requests wait for a batch to finish, so TTFT is far worse
    // than continuous batching at the same load.
    let ttft = |r: &Report| {
        mean(
            &r.output
                .records
                .iter()
                .filter(|x| x.status == Status::Completed)
                .map(RequestRecord::ttft)
                .collect::<Vec<_>>(),
        )
    };
    let (sf, cf) = (ttft(&stat), ttft(&v1));
    assert!(sf > 3.0 * cf, "static mean TTFT {sf} vs continuous {cf}");
    for r in [&v1, &v0, &sarathi, &orca, &stat] {
        assert_eq!(r.summary.metrics.completed + r.summary.metrics.failed, r.summary.metrics.measured_requests);
    }
}

#[test]
fn static_batches_never_admit_while_running() {
    let rep = run(MIXED, &["engine.preset=\"static\"", "engine.max_num_seqs=8", "num_requests=400"]);
    // Within one replica, a request scheduled while an earlier batch is still
    // running would start before that batch's last finish: never.
    let mut recs: Vec<&RequestRecord> = rep.output.records.iter().filter(|r| r.status == Status::Completed).collect();
    recs.sort_by(|a, b| a.first_scheduled.total_cmp(&b.first_scheduled));
    let mut batch_start = f64::NEG_INFINITY;
    let mut batch_end = f64::NEG_INFINITY;
    let mut size = 0;
    for r in recs {
        if r.first_scheduled == batch_start {
            size += 1;
            assert!(size <= 8);
        } else {
            assert!(r.first_scheduled >= batch_end, "joined a running batch at {}", r.first_scheduled);
            batch_start = r.first_scheduled;
            size = 1;
        }
        batch_end = batch_end.max(r.last_token);
    }
}

#[test]
fn prefix_caching_shares_a_system_prompt_and_session_context() {
    // 2,000 requests sharing a 1,000-token system prompt (62 full blocks of
    // 16) plus 1 new token: every request but the first finds the prompt.
    let n = 2000.0;
    let base = r#"seed = 2
num_requests = 2000
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
[workload]
rate = 20
prompt_tokens = { dist = "fixed", value = 1 }
output_tokens = { dist = "fixed", value = 20 }
[[workload.classes]]
name = "assistant"
weight = 1
prefix_tokens = 1000
"#;
    let off = run(base, &[]);
    let on = run(base, &["engine.prefix_caching=true"]);
    let kv = &on.summary.kv_cache;
    let want = (n - 1.0) / n * 992.0 / 1001.0;
    let hit = kv.prefix_hit_rate.unwrap();
    assert!((hit - want).abs() < 0.005, "hit rate {hit}, expected {want}");
    assert_eq!(kv.prefix_saved_tokens, 1999 * 992);
    assert!(off.summary.kv_cache.prefix_hit_rate.is_none());
    let ttft = |r: &Report| r.summary.metrics.ttft.dist.mean;
    assert!(ttft(&on) < 0.5 * ttft(&off), "mean TTFT {} with caching vs {} without", ttft(&on), ttft(&off));
    // Multi-turn sessions: later turns find their context; KV never exceeds capacity.
    let sessions = r#"seed = 4
num_requests = 3000
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
[workload]
rate = 3
prompt_tokens = { dist = "uniform", min = 200, max = 800 }
output_tokens = { dist = "uniform", min = 50, max = 200 }
[workload.sessions]
turns = { dist = "uniform", min = 2, max = 8 }
think_time_s = { dist = "exponential", mean = 5.0 }
new_tokens = { dist = "uniform", min = 20, max = 100 }
"#;
    let measure = |sets: &[&str]| {
        let s = common::setup(sessions, sets);
        let mut out = servesim::sim::simulate_checked(&s, s.scenario.seed);
        let sum = servesim::summarize::summarize(&s, s.scenario.seed, &mut out);
        let shared: u64 = out.records.iter().map(|r| r.prefix as u64).sum();
        let prompts: u64 = out.records.iter().map(|r| r.prompt as u64).sum();
        (sum, shared as f64 / prompts as f64)
    };
    // Ample cache: later turns find nearly all of their context (less the
    // partial blocks at each turn's boundary).
    let (ample, shareable) = measure(&["engine.prefix_caching=true"]);
    let hit = ample.kv_cache.prefix_hit_rate.unwrap();
    assert!(hit > 0.9 * shareable && hit <= shareable, "hit rate {hit} of a shareable {shareable}");
    // A 48k-token cache (3,000 blocks) cannot hold every open conversation:
    // blocks are evicted, the hit rate falls, KV use stays within capacity
    // (checked after every step).
    let (tight, _) = measure(&["engine.prefix_caching=true", "engine.num_gpu_blocks=3000"]);
    assert!(tight.kv_cache.prefix_evictions > 0);
    assert!(tight.kv_cache.prefix_hit_rate.unwrap() < hit);
    assert!(tight.kv_cache.peak_occupancy <= 1.0);
}

/// Prefix-cache eviction order, near cache capacity. vLLM frees a finished
/// request's blocks tail first, so the least recently used blocks of a
/// cached prompt are its last ones and eviction shortens a cached prefix
/// instead of cutting its head (which leaves the rest unreachable, since only
/// leading blocks match). Six system prompts of 6,000 tokens (375 blocks
/// each, 2,250 in all) in a cache of 1,500 or 2,500 blocks. Measured on this
/// workload: head-first eviction 43.0% and 82.8% hit rate, vLLM's tail-first
/// order 57.7% and 90.7%.
#[test]
fn prefix_eviction_takes_a_prompts_last_blocks_first() {
    let mut toml = String::from(
        r#"seed = 5
duration_s = 600
warmup_s = 60
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[engine]
preset = "vllm-v1"
max_model_len = 8192
[workload]
rate = 2.0
prompt_tokens = { dist = "lognormal", mean = 300, cv = 0.5 }
output_tokens = { dist = "lognormal", mean = 100, cv = 0.5 }
"#,
    );
    for i in 0..6 {
        toml += &format!(
            "[[workload.classes]]\nname = \"c{i}\"\nweight = 1\nprefix_group = \"g{i}\"\nprefix_tokens = 6000\n"
        );
    }
    for (blocks, head_first, tail_first) in [(1500, 0.430, 0.577), (2500, 0.828, 0.907)] {
        let set = format!("engine.num_gpu_blocks={blocks}");
        let r = run(&toml, &[&set]);
        let kv = &r.summary.kv_cache;
        let hit = kv.prefix_hit_rate.unwrap();
        assert!(kv.prefix_evictions > 0, "{blocks} blocks: the cache must be under pressure");
        assert!(
            hit > (head_first + tail_first) / 2.0,
            "{blocks} blocks: hit rate {hit:.3}; head-first eviction gives {head_first}, tail-first {tail_first}"
        );
    }
}

#[test]
fn a_kv_watermark_trades_admissions_for_fewer_preemptions() {
    let tight = r#"seed = 6
num_requests = 3000
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
num_gpu_blocks = 1200
[workload]
rate = 14
prompt_tokens = { dist = "lognormal", mean = 800, cv = 0.8 }
output_tokens = { dist = "lognormal", mean = 300, cv = 0.8 }
"#;
    let s = common::setup(tight, &[]);
    let none = servesim::sim::simulate_checked(&s, s.scenario.seed);
    let s = common::setup(tight, &["engine.kv_watermark=0.1"]);
    assert_eq!(s.pools[0].engine.watermark_blocks, 120);
    let with = servesim::sim::simulate_checked(&s, s.scenario.seed);
    let pre = |o: &servesim::sim::SimOutput| o.replicas.iter().map(|r| r.preemptions).sum::<u64>();
    assert!(pre(&none) > 0, "the tight cache preempts");
    assert!(pre(&with) < pre(&none), "watermark: {} preemptions vs {}", pre(&with), pre(&none));
    assert!(with.records.iter().all(|r| r.status == Status::Completed));
}

#[test]
fn prefill_first_trades_decode_stalls_for_a_faster_first_token() {
    let decode_first = run(MIXED, &["engine.preset=\"sarathi\""]);
    let prefill_first = run(MIXED, &["engine.preset=\"sarathi\"", "engine.prefill_first=true"]);
    let tpot = (p99(&decode_first, RequestRecord::tpot), p99(&prefill_first, RequestRecord::tpot));
    assert!(tpot.1 > 1.5 * tpot.0, "p99 TPOT prefill-first {} vs decode-first {}", tpot.1, tpot.0);
    let med_ttft = |r: &Report| r.summary.metrics.ttft.dist.median();
    assert!(med_ttft(&prefill_first) < med_ttft(&decode_first));
    assert_eq!(prefill_first.summary.metrics.failed, 0);
}

/// The batching settings map to one `BatchPolicy`; the combinations that no
/// policy describes are refused, naming the key.
#[test]
fn impossible_batching_combinations_are_refused() {
    let base = "num_requests = 10\n[model]\nname = \"llama-3.1-8b\"\n[workload]\nrate = 1\n[engine]\n";
    for (engine, key) in [
        ("batching = \"static\"\nchunked_prefill = true", "engine.batching"),
        ("batching = \"static\"\nchunked_prefill = false\nmixed_prefill = true", "engine.mixed_prefill"),
        ("chunked_prefill = true\nmixed_prefill = true", "engine.mixed_prefill"),
        ("chunked_prefill = false\nprefill_first = true", "engine.prefill_first"),
    ] {
        let e =
            servesim::scenario::load_scenario_str(&format!("{base}{engine}\n"), std::path::Path::new("t.toml"), &[])
                .expect_err(engine);
        assert_eq!(e.key.as_deref(), Some(key), "{engine}: {e}");
    }
}

/// Engines that reserve memory for a request's whole output reserve against
/// what its client sends as `max_tokens` (review: against the output it will
/// produce). With no `max_tokens` TensorRT-LLM (GUARANTEED_NO_EVICT) reserves
/// up to the context window and SGLang its 4,096-token clip, so fewer
/// requests run at once than when clients send the output length, as
/// `vllm bench serve` does (the default); vLLM, which reserves nothing,
/// does not care. A fixed cap cuts longer outputs.
#[test]
fn reserving_engines_reserve_what_the_client_sends_as_max_tokens() {
    let text = include_str!("../../scenarios/quickstart.toml");
    // A KV cache of about 100,000 tokens, so that reservations bind
    // (SGLang sizes its pool by mem_fraction_static).
    let kv = |preset: &str| match preset {
        "trtllm" => "engine.num_gpu_blocks=3125".to_string(),
        "sglang" => "engine.mem_fraction_static=0.4".to_string(),
        _ => "engine.max_model_len=32768".to_string(),
    };
    let run = |preset: &str, max_tokens: &str| {
        let sets = [
            format!("engine.preset=\"{preset}\""),
            kv(preset),
            "engine.max_num_batched_tokens=8192".to_string(),
            "workload.rate=12".into(),
            "num_requests=1500".into(),
            format!("workload.max_tokens={max_tokens}"),
        ];
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        let s = crate::common::setup(text, &sets);
        servesim::run_setup(&s, s.scenario.seed).summary
    };
    for preset in ["trtllm", "sglang"] {
        let sent = run(preset, "\"output\"");
        let none = run(preset, "\"none\"");
        assert!(
            none.utilisation.mean_running < 0.8 * sent.utilisation.mean_running
                || none.metrics.ttft.dist.mean > 1.5 * sent.metrics.ttft.dist.mean,
            "{preset}: running {} vs {}, mean TTFT {} vs {}",
            none.utilisation.mean_running,
            sent.utilisation.mean_running,
            none.metrics.ttft.dist.mean,
            sent.metrics.ttft.dist.mean
        );
    }
    let v = (run("vllm-v1", "\"output\""), run("vllm-v1", "\"none\""));
    assert_eq!(v.0.metrics.ttft.dist.mean, v.1.metrics.ttft.dist.mean, "vLLM reserves nothing ahead");
    let capped = run("vllm-v1", "100");
    let mean_out = |s: &servesim::Summary| s.metrics.total_output_tokens as f64 / s.metrics.completed as f64;
    assert!(mean_out(&capped) <= 100.0 && mean_out(&capped) < 0.7 * mean_out(&v.0), "{}", mean_out(&capped));
}
