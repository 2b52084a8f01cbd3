//! Invariants checked on runs that exercise preemption, rejection, both
//! scheduling modes and several replicas: every request ends in exactly one
//! terminal state, completed requests got every token they asked for,
//! timestamps are monotone, and KV blocks in use never exceed capacity
//! (verified after every engine step by `simulate_checked`).

use crate::common;
use common::*;
use servesim::metrics::{RejectReason, Status};
use servesim::sim::simulate_checked;

const TIGHT_KV: &str = r#"
name = "tight-kv"
seed = 3
num_requests = 3000
[model]
name = "llama-3.1-8b"
[engine]
max_num_seqs = 64
max_num_batched_tokens = 2048
num_gpu_blocks = 400
[workload]
arrival = "poisson"
rate = 40
prompt_tokens = { dist = "lognormal", mean = 600, cv = 1.0 }
output_tokens = { dist = "lognormal", mean = 300, cv = 1.0 }
"#;

fn check(sets: &[&str]) -> servesim::Report {
    check_text(TIGHT_KV, sets)
}

fn check_text(text: &str, sets: &[&str]) -> servesim::Report {
    let s = setup(text, sets);
    let out = simulate_checked(&s, s.scenario.seed);
    let summary = servesim::metrics::summarize(&s, s.scenario.seed, &out);
    let cap = s.pools[0].memory.kv_capacity_tokens;
    for (id, r) in out.records.iter().enumerate() {
        match r.status {
            Status::Completed => {
                assert_eq!(r.generated, r.output, "request {id} generated {} of {}", r.generated, r.output);
                let ts = [r.arrival, r.admitted, r.first_scheduled, r.first_token, r.last_token];
                assert!(ts.windows(2).all(|w| w[0] <= w[1]), "request {id} timestamps not monotone: {ts:?}");
                assert!((r.prompt + r.output - 1) as u64 <= cap);
            }
            Status::Rejected(why) => {
                assert!(r.first_scheduled.is_nan() && r.first_token.is_nan(), "rejected request {id} was scheduled");
                let fits =
                    (r.prompt + r.output - 1) as u64 <= cap && r.prompt + r.output <= s.pools[0].memory.max_model_len;
                assert!(!fits || why == RejectReason::ExceedsTokenBudget, "request {id} rejected ({why:?}) but fits");
            }
            Status::InFlight => panic!("request {id} never finished"),
        }
    }
    assert!(summary.kv_cache.peak_occupancy <= 1.0);
    // Pooled ITL: one gap per token after the first, and a request's gaps add
    // up to its time from first to last token (preemptions included).
    let measured = out.records.iter().filter(|r| r.status == Status::Completed && r.arrival >= s.scenario.warmup_s);
    let (count, span) =
        measured.fold((0u64, 0.0), |(c, t), r| (c + r.output as u64 - 1, t + r.last_token - r.first_token));
    assert_eq!(summary.metrics.itl.dist.count, count, "ITL samples");
    let itl_sum = summary.metrics.itl.dist.mean / 1e3 * count as f64;
    assert!((itl_sum - span).abs() <= 1e-9 * span.max(1.0), "ITL gaps sum to {itl_sum} s, requests span {span} s");
    let l = &summary.littles_law;
    assert!(l.relative_error < 1e-9);
    servesim::Report { setup: s.clone(), seed: s.scenario.seed, summary, output: out }
}

#[test]
fn chunked_prefill_with_preemption() {
    let rep = check(&[]);
    assert!(rep.summary.utilisation.preemptions > 0, "the tight cache should force preemptions");
    assert!(rep.summary.metrics.failed > 0, "prompts longer than the cache should be rejected");
    assert!(rep.output.records.iter().any(|r| r.preemptions > 0 && r.status == Status::Completed));
}

#[test]
fn prefill_first_without_chunking() {
    let rep = check(&["engine.chunked_prefill=false"]);
    assert!(rep.summary.utilisation.preemptions > 0);
    assert!(rep.summary.metrics.failures_by_reason.contains_key("exceeds_token_budget"));
}

#[test]
fn several_replicas_and_routers() {
    for router in ["round-robin", "least-outstanding"] {
        let rep = check(&["hardware.replicas=3", &format!("hardware.router=\"{router}\""), "workload.rate=90"]);
        let per = &rep.summary.utilisation.requests_per_replica;
        assert_eq!(per.len(), 3);
        assert!(per.iter().all(|&n| n > 500), "{router}: {per:?}");
    }
}

#[test]
fn ample_kv_means_no_preemption() {
    let rep = check(&["engine.num_gpu_blocks=100000", "workload.rate=5"]);
    assert_eq!(rep.summary.utilisation.preemptions, 0);
    assert_eq!(rep.summary.metrics.failed, 0);
}

#[test]
fn overlong_requests_are_rejected_with_reason() {
    let rep = check(&["engine.num_gpu_blocks=100000", "engine.max_model_len=2048"]);
    let n = rep.summary.metrics.failures_by_reason.get("exceeds_max_model_len").copied().unwrap_or(0);
    let expected = rep.output.records.iter().filter(|r| r.arrival >= 0.0 && r.prompt + r.output > 2048).count() as u64;
    assert_eq!(n, expected);
    assert!(n > 0);
}

#[test]
fn preprocessing_delay_is_applied() {
    let rep = check(&["engine.num_gpu_blocks=100000", "engine.preprocess_ms=5", "engine.preprocess_us_per_token=10"]);
    for r in rep.output.records.iter().filter(|r| r.status == Status::Completed) {
        let want = 0.005 + 10e-6 * r.prompt as f64;
        assert!((r.preprocess() - want).abs() < 1e-9);
    }
}

#[test]
fn offline_batch_starts_together() {
    let text = TIGHT_KV.replace("arrival = \"poisson\"\nrate = 40", "arrival = \"offline\"");
    let rep = check_text(&text, &["num_requests=500", "engine.num_gpu_blocks=100000"]);
    let first_step = rep.output.records.iter().filter(|r| r.first_scheduled == 0.0).count();
    assert!(first_step > 1, "requests arriving together must share the first step, got {first_step}");
    assert_eq!(rep.summary.stable, None, "stability does not apply to offline runs");
    assert_eq!(rep.summary.stability.verdict, "not_applicable");
}
