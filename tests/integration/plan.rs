//! Capacity search against the M/M/1 oracle, and plan search sanity.

use crate::common;
use servesim::config::load_scenario_str;
use servesim::plan::{capacity, judge, plan};
use servesim::{Catalog, run_setup};
use std::path::Path;

/// The shared single-server queue (10 ms steps, batch of one, one-token
/// outputs) with exponential steps: M/M/1 with μ = 100/s. With an objective on
/// p99 sojourn (= E2E) of 100 ms, sojourn ~ Exp(μ − λ), so
/// p99 = ln(100)/(μ − λ) ≤ 0.1 s ⇔ λ ≤ 100 − 46.05.
fn mm1(extra: &str, sets: &[&str]) -> servesim::config::LoadedScenario {
    let text = format!("{}[slo]\ne2e_ms = 100\npercentile = 99\n{extra}", common::SINGLE_SERVER);
    let mut all =
        vec!["seed=4".to_string(), "num_requests=60000".to_string(), "cost.model=\"exponential\"".to_string()];
    all.extend(sets.iter().map(|s| s.to_string()));
    load_scenario_str(&text, Path::new("mm1.toml"), &all).unwrap()
}

#[test]
fn capacity_matches_the_mm1_percentile_oracle() {
    let loaded = mm1("", &[]);
    let c = capacity(&loaded, &Catalog::builtin().unwrap(), 4, 0.01).unwrap();
    let want = 100.0 - 100f64.ln() / 0.1;
    assert!((c.rate.mean / want - 1.0).abs() < 0.05, "capacity {:?} vs M/M/1 {want}", c.rate);
    assert!(c.rate.ci_lo < c.rate.mean && c.rate.mean < c.rate.ci_hi);
    assert_eq!(c.per_replication.len(), 4);
}

#[test]
fn plan_picks_the_fewest_replicas_that_meet_the_slo() {
    // 4 single-server replicas of 10 ms steps behind least-outstanding routing at 150 req/s.
    let loaded = mm1(
        "[plan]\nrate = 150\nmax_replicas = 16\n",
        &["cost.model=\"constant\"", "slo.e2e_ms=40", "hardware.router=\"least-outstanding\"", "num_requests=20000"],
    );
    let catalog = Catalog::builtin().unwrap();
    let p = plan(&loaded, &catalog).unwrap();
    let c = &p.candidates[0];
    let n = c.replicas.expect("a replica count");
    assert!(n >= 2, "150 req/s cannot fit one server of 100 req/s");
    let slo = loaded.scenario.slo.clone().unwrap();
    let at = |k: u32| {
        let s = loaded
            .derive(
                &[
                    ("hardware.replicas".into(), toml::Value::Integer(k as i64)),
                    ("workload.rate".into(), toml::Value::Float(150.0)),
                ],
                "t",
            )
            .unwrap();
        let setup = servesim::resolve(&s, &catalog).unwrap();
        judge(&run_setup(&setup, s.seed).summary, &slo)
    };
    assert!(at(n).meets);
    assert!(!at(n - 1).meets, "{} replicas already meet the SLO", n - 1);
    assert_eq!(c.gpus, Some(n));
    assert!(c.one_fewer.as_ref().is_some_and(|v| !v.meets));
}

/// The plan table fits an 80-column terminal, and each runner-up says what
/// differs from the winner and what it costs (review: rows were 130–284
/// characters wide, and "Runner-up: 2 replica(s) of mi300x (tp 2)" did not
/// say that only max_num_batched_tokens differed).
#[test]
fn the_plan_table_fits_a_terminal_and_explains_runners_up() {
    let text = include_str!("../../scenarios/plan-70b-chat.toml");
    let loaded = load_scenario_str(text, Path::new("plan-70b-chat.toml"), &["num_requests=1500".into()]).unwrap();
    let p = plan(&loaded, &Catalog::builtin().unwrap()).unwrap();
    for details in [false, true] {
        let out = servesim::plan::format_plan(&p, "plan-70b-chat", details);
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{} characters: {line}", line.chars().count());
        }
        let runner = out.lines().find(|l| l.starts_with("runner-up #2")).expect("a runner-up line");
        assert!(runner.contains("(winner "), "{runner}");
        assert!(out.contains("$/hour") && out.contains("per 1M output tokens"), "{out}");
        // Details name why each failed configuration failed.
        assert_eq!(out.contains("needs 131.4 GiB of weights"), details);
    }
}

/// `capacity` says when its answer rests on too little: a 300-request
/// quickstart judges p99 on a handful of requests and stops at runs too short
/// to certify steady state; 20,000 requests need no warning about p99.
#[test]
fn capacity_warns_when_runs_are_too_short() {
    let text = include_str!("../../scenarios/quickstart.toml");
    let catalog = Catalog::builtin().unwrap();
    let short = load_scenario_str(text, Path::new("quickstart.toml"), &["num_requests=300".into()]).unwrap();
    let c = capacity(&short, &catalog, 1, 0.05).unwrap();
    let w = c.precision_warning.expect("a 300-request search must warn");
    assert!(w.contains("--min-requests 1200"), "{w}");
    assert!(c.tail_requests.is_some_and(|t| t < 10.0), "{:?}", c.tail_requests);
    // Following the advice lengthens every run of the search enough.
    let mut advised = short.clone();
    advised.min_requests = Some(1200);
    let c = capacity(&advised, &catalog, 1, 0.05).unwrap();
    assert!(c.tail_requests.is_some_and(|t| t >= 10.0), "{:?}", c.tail_requests);
    let long = load_scenario_str(text, Path::new("quickstart.toml"), &["num_requests=20000".into()]).unwrap();
    let c = capacity(&long, &catalog, 1, 0.05).unwrap();
    assert!(c.tail_requests.is_some_and(|t| t >= 10.0), "{:?}", c.tail_requests);
    assert!(!c.limited_by[0].is_empty(), "the failing run's reason is kept");
}

/// capacity carries the validated model error into its answer: the search
/// rerun with every step slower by the band finds less, with every step
/// faster finds more, by about the band (capacity of a step-bound engine
/// scales with 1 / step time), and the line printed says so.
#[test]
fn capacity_carries_the_model_error_band() {
    let text = include_str!("../../scenarios/quickstart.toml");
    let catalog = Catalog::builtin().unwrap();
    let sets = [
        "num_requests=1500".to_string(),
        "engine.preset=\"vllm-v1\"".into(),
        "hardware.gpu=\"a100-80gb\"".into(),
        "slo.ttft_ms=2000".into(),
    ];
    let loaded = load_scenario_str(text, Path::new("quickstart.toml"), &sets).unwrap();
    let c = capacity(&loaded, &catalog, 2, 0.02).unwrap();
    let b = c.model_error.band;
    assert!(c.model_error.same_gpu && b > 0.05 && b < 0.6, "{:?}", c.model_error);
    let (lo, hi) = c.model_range.expect("a validated band gives a model range");
    let mean = c.rate.mean;
    assert!(lo < mean && hi > mean, "range [{lo}, {hi}] around {:?}", c.rate);
    // At least the first search's answer / (1 ± band), and not absurdly more:
    // capacity scales with 1 / step time, and faster than that when the
    // objective is an absolute TPOT (a step 1.5× slower misses a fixed 50 ms
    // at a lower load than 1/1.5 of it); the front end is not scaled.
    let first = c.per_replication[0];
    let (slow, fast) = (first / (1.0 + b), first / (1.0 - b));
    assert!(lo <= slow * 1.2 && lo >= first / (1.0 + b).powi(3), "slow {lo} vs {slow}");
    assert!(hi >= fast * 0.8 && hi <= first / (1.0 - b).powi(3), "fast {hi} vs {fast}");
    assert!(c.model_error.describe().contains("throughput") && c.model_error.describe().contains("covers 80%"));
    // Without a validated profile there is no range to give.
    let sets = ["num_requests=300".into(), "engine.preset=\"legacy\"".into()];
    let legacy = load_scenario_str(text, Path::new("quickstart.toml"), &sets).unwrap();
    assert!(capacity(&legacy, &catalog, 1, 0.1).unwrap().model_range.is_none());
}

/// plan carries the validated model error into its answer: the winner rerun
/// with every step slower by its throughput band needs at least as many
/// replicas, and the explanation says how many.
#[test]
fn plan_carries_the_model_error_band() {
    let text = format!("{}\n[plan]\nrate = 8\nmax_replicas = 8\n", include_str!("../../scenarios/quickstart.toml"));
    let sets = [
        "num_requests=1500".to_string(),
        "engine.preset=\"vllm-v1\"".into(),
        "hardware.gpu=\"a100-80gb\"".into(),
        "slo.ttft_ms=2000".into(),
    ];
    let loaded = load_scenario_str(&text, Path::new("quickstart.toml"), &sets).unwrap();
    let p = plan(&loaded, &Catalog::builtin().unwrap()).unwrap();
    let w = p.candidates.iter().find(|c| c.replicas.is_some()).expect("a winner");
    let n = w.replicas.unwrap();
    let k = p.model_error_replicas.expect("a validated band gives a pessimistic size");
    assert!(k >= n && k <= 2 * n, "{k} replicas with the band against {n}");
    let text = servesim::plan::format_plan(&p, "quickstart", false);
    assert!(text.contains("slower (that error)"), "{text}");
}
