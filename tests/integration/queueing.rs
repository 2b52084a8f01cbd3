//! Queueing-theory oracles. A replica with `max_num_seqs = 1`, one-token
//! outputs and a synthetic step-time model is a single-server FCFS queue:
//! constant steps make it M/D/1, exponential steps M/M/1.

use crate::common;
use common::*;
use servesim::metrics::Status;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

#[test]
fn md1_mean_wait_matches_pollaczek_khinchine() {
    // ρ = λD = 60 × 0.01 = 0.6; Wq = ρD / (2(1 − ρ)) = 7.5 ms.
    let rep = run(SINGLE_SERVER, &["num_requests=400000"]);
    let d = 0.010;
    let rho: f64 = 60.0 * d;
    let wq = rho * d / (2.0 * (1.0 - rho));
    let waits: Vec<f64> = rep.output.records.iter().map(|r| r.queue_delay()).collect();
    let got = mean(&waits);
    assert!(rel(got, wq) < 0.03, "M/D/1 mean wait {got} vs Pollaczek–Khinchine {wq}");
    // TTFT is the wait plus exactly one step.
    let ttft = mean(&rep.output.records.iter().map(|r| r.ttft()).collect::<Vec<_>>());
    assert!((ttft - got - d).abs() < 1e-9);
    // Utilisation ρ.
    assert!(rel(rep.summary.utilisation.gpu_busy_fraction, rho) < 0.01);
}

#[test]
fn mm1_sojourn_mean_and_percentiles() {
    // μ = 100/s, λ = 60/s: sojourn ~ Exp(μ − λ = 40/s).
    let rep = run(SINGLE_SERVER, &["num_requests=400000", "cost.model=\"exponential\""]);
    let rate = 40.0;
    let e2e = &rep.summary.metrics.e2el.dist;
    assert!(rel(e2e.mean / 1e3, 1.0 / rate) < 0.03, "mean sojourn {} ms", e2e.mean);
    for (i, p) in [(0, 0.5), (1, 0.9), (3, 0.99)] {
        let want = -(1.0f64 - p).ln() / rate * 1e3;
        let got = e2e.percentiles[i];
        assert!(rel(got, want) < 0.04, "p{} sojourn {got} ms vs {want} ms", p * 100.0);
    }
}

#[test]
fn littles_law_holds_on_every_kind_of_run() {
    let cases: [&[&str]; 4] = [
        &[],
        &["cost.model=\"exponential\"", "workload.rate=90"],
        &["cost.model=\"roofline\"", "cost.step_time_ms=0", "engine.max_num_seqs=64"],
        &["hardware.replicas=3", "hardware.router=\"least-outstanding\"", "workload.rate=150"],
    ];
    for sets in cases {
        let mut sets: Vec<&str> = sets.to_vec();
        // The roofline case must drop step_time_ms: rebuild the text instead.
        let text = if sets.iter().any(|s| s.contains("roofline")) {
            sets.retain(|s| !s.starts_with("cost."));
            SINGLE_SERVER
                .replace("model = \"constant\"\nstep_overhead_ms = 0\nstep_time_ms = 10", "model = \"roofline\"")
        } else {
            SINGLE_SERVER.to_string()
        };
        let rep = run(&text, &sets);
        let l = &rep.summary.littles_law;
        assert!(
            l.relative_error < 1e-9,
            "{sets:?}: L = {} but λW = {}",
            l.mean_in_system,
            l.arrival_rate * l.mean_time_in_system_s
        );
        assert!(rep.output.records.iter().all(|r| r.status == Status::Completed));
    }
}

#[test]
fn decode_batches_advance_one_token_per_step() {
    // Constant 10 ms steps, light load: every token after the first takes one step.
    let rep = run(
        SINGLE_SERVER,
        &["engine.max_num_seqs=64", "workload.output_tokens={dist=\"fixed\",value=50}", "workload.rate=5"],
    );
    let s = &rep.summary;
    assert!((s.metrics.itl.dist.mean - 10.0).abs() < 1e-6, "ITL mean {}", s.metrics.itl.dist.mean);
    assert!((s.metrics.tpot.dist.mean - 10.0).abs() < 1e-6, "TPOT mean {}", s.metrics.tpot.dist.mean);
    assert!((s.metrics.itl.dist.max - 10.0).abs() < 0.02);
    assert_eq!(s.metrics.itl.dist.count, s.metrics.completed * 49);
}

#[test]
fn overload_is_detected_and_heavy_stable_load_is_not() {
    // ρ = 0.9: heavy but stable; long queues, no trend.
    for seed in ["seed=1", "seed=2", "seed=3"] {
        let rep = run(SINGLE_SERVER, &["num_requests=200000", "workload.rate=90", seed]);
        assert_eq!(rep.summary.stable, Some(true), "ρ = 0.9 flagged: {:?}", rep.summary.stability);
    }
    // ρ = 1.1: the queue grows without bound.
    let rep = run(SINGLE_SERVER, &["num_requests=20000", "workload.rate=110"]);
    assert_eq!(rep.summary.stable, Some(false), "{:?}", rep.summary.stability);
    assert!(rep.summary.stability.explanation.contains("grows"));
    assert!(rep.summary.stability.completion_rate_during_arrivals < rep.summary.stability.offered_rate);
    // 1 − 1/ρ of the arrivals stay behind.
    let g = rep.summary.stability.growth_fraction;
    assert!((g - (1.0 - 1.0 / 1.1)).abs() < 0.02, "growth fraction {g}");
}
