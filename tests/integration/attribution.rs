//! Latency attribution (Step 9): every completed request's parts add up to
//! its TTFT and its E2E within a microsecond, in every shipped scenario;
//! no part is negative; attributing leaves the run unchanged; and each wait
//! reason appears where the mechanism behind it is at work.

use rayon::prelude::*;
use servesim::metrics::{Part, Parts, RequestRecord, Status, parts};
use servesim::{Catalog, Report};
use std::path::{Path, PathBuf};

/// Every shipped scenario (not the length tables or traces they read).
fn shipped() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut out = Vec::new();
    for dir in [root.clone(), root.join("cluster")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Runs a shipped scenario (with overrides) keeping records, attribution on or off.
fn run(path: &Path, sets: &[&str], attribution: bool) -> Report {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = servesim::scenario::load_scenario(path, &sets).unwrap_or_else(|e| panic!("{e}"));
    let mut setup = servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap();
    setup.attribution = attribution;
    servesim::run_setup(&setup, setup.scenario.seed)
}

/// Checks the sums of one run; returns the total of each part over its
/// completed requests.
pub(crate) fn check_sums(name: &str, records: &[RequestRecord], parts: &[Parts]) -> Parts {
    assert_eq!(records.len(), parts.len(), "{name}: one set of parts per record");
    let mut total = [0.0; servesim::metrics::NUM_PARTS];
    for (id, (r, p)) in records.iter().zip(parts).enumerate() {
        if r.status != Status::Completed {
            continue;
        }
        let (dt, de) = ((parts::ttft_sum(p) - r.ttft()).abs(), (parts::e2e_sum(p) - r.e2e()).abs());
        assert!(
            dt <= 1e-6,
            "{name}: request {id}: TTFT parts sum to {} s, TTFT is {} s: {p:?}",
            parts::ttft_sum(p),
            r.ttft()
        );
        assert!(de <= 1e-6, "{name}: request {id}: parts sum to {} s, E2E is {} s: {p:?}", parts::e2e_sum(p), r.e2e());
        for (k, &x) in p.iter().enumerate() {
            assert!(x >= -1e-9, "{name}: request {id}: part {:?} is {x} s", Part::ALL[k]);
            total[k] += x;
        }
    }
    total
}

#[test]
fn parts_add_up_in_every_shipped_scenario() {
    let results: Vec<(String, Parts)> = shipped()
        .par_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let rep = run(p, &[], true);
            (name.clone(), check_sums(&name, &rep.output.records, &rep.output.parts))
        })
        .collect();
    if std::env::var_os("SERVESIM_PRINT_PARTS").is_some() {
        for (n, t) in &results {
            let sum: f64 = t.iter().sum();
            let row: Vec<String> = Part::ALL
                .iter()
                .filter(|p| t[p.idx()] > 0.0)
                .map(|p| format!("{}={:.1}%", p.as_str(), 100.0 * t[p.idx()] / sum))
                .collect();
            eprintln!("{n}: {}", row.join(" "));
        }
    }
    // Each mechanism shows up where a shipped scenario exercises it.
    let seen =
        |part: Part| results.iter().filter(|(_, t)| t[part.idx()] > 0.0).map(|(n, _)| n.as_str()).collect::<Vec<_>>();
    for part in [
        Part::WaitStep,
        Part::WaitBatchFull,
        Part::WaitPrefills,
        Part::WaitKv,
        Part::Preempted,
        Part::Transfer,
        Part::Prefill,
        Part::Interference,
        Part::DecodeCompute,
        Part::DecodeStall,
        Part::DecodePreempted,
    ] {
        assert!(!seen(part).is_empty(), "no shipped scenario shows {part:?}");
    }
    for (part, scenario) in [
        (Part::Transfer, "what-if-disaggregation.toml"),
        (Part::WaitKv, "offline-batch.toml"),
        (Part::WaitBatchFull, "overload.toml"),
    ] {
        assert!(seen(part).contains(&scenario), "{part:?} is not seen in {scenario}: {:?}", seen(part));
    }
}

#[test]
fn attribution_leaves_the_run_unchanged() {
    for name in ["quickstart.toml", "overload.toml", "what-if-disaggregation.toml", "what-if-speculative.toml"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name);
        let sets = ["duration_s=60"];
        let sets: &[&str] = if name.contains("what-if") { &sets } else { &[] };
        let (on, off) = rayon::join(|| run(&p, sets, true), || run(&p, sets, false));
        assert_eq!(
            serde_json::to_string(&on.summary).unwrap(),
            serde_json::to_string(&off.summary).unwrap(),
            "{name}: the summary changed with attribution on"
        );
        assert_eq!(on.output.records.len(), off.output.records.len());
        for (a, b) in on.output.records.iter().zip(&off.output.records) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}: a record changed");
        }
        assert!(off.output.parts.is_empty());
    }
}

#[test]
fn stochastic_step_times_stay_the_same_under_attribution() {
    // The exponential step model draws its times: counterfactual predictions
    // must not consume draws (they use the mean).
    let toml = servesim::detection::SINGLE_SERVER.replace("constant", "exponential");
    let mut s = crate::common::setup(&toml, &["workload.rate=60", "num_requests=3000"]);
    let off = servesim::run_setup(&s, 7);
    s.attribution = true;
    let on = servesim::run_setup(&s, 7);
    assert_eq!(serde_json::to_string(&on.summary).unwrap(), serde_json::to_string(&off.summary).unwrap());
    check_sums("exponential", &on.output.records, &on.output.parts);
}

#[test]
fn mechanisms_map_to_their_parts() {
    let q = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/quickstart.toml");
    // A tiny batch limit: waits are "batch full".
    let rep = run(
        &q,
        &["engine.preset=\"legacy\"", "engine.max_num_seqs=4", "num_requests=400", "engine.preprocess_ms=3"],
        true,
    );
    let t = check_sums("max_num_seqs=4", &rep.output.records, &rep.output.parts);
    let completed = rep.output.records.iter().filter(|r| r.status == Status::Completed).count() as f64;
    assert!((t[Part::Preprocess.idx()] / completed - 3e-3).abs() < 1e-9, "{t:?}");
    let waits: f64 = Part::WAITS.iter().map(|p| t[p.idx()]).sum();
    assert!(t[Part::WaitBatchFull.idx()] > 0.8 * waits, "{t:?}");
    // A tiny token budget with long prompts: waits are behind earlier prefills.
    let rep =
        run(&q, &["engine.max_num_batched_tokens=256", "num_requests=400", "workload.prompt_tokens.mean=2000"], true);
    let t = check_sums("budget=256", &rep.output.records, &rep.output.parts);
    assert!(t[Part::WaitPrefills.idx()] + t[Part::WaitBudget.idx()] > 0.5 * t[Part::WaitBatchFull.idx()], "{t:?}");
    assert!(t[Part::Interference.idx()] > 0.0 && t[Part::DecodeStall.idx()] > 0.0, "{t:?}");
}

#[test]
fn requests_that_did_not_complete_have_no_parts_in_the_csv() {
    // A request refused while it waited keeps an open wait: its cells are
    // empty, not the negative clock readings (found in review).
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/overload.toml");
    let rep = run(&p, &["engine.max_wait_s=5", "num_requests=3000"], true);
    let classes: Vec<String> = rep.setup.workload.classes.iter().map(|c| c.name.clone()).collect();
    let mut csv = Vec::new();
    servesim::export::write_requests_csv(&mut csv, &rep.output.records, &rep.output.parts, 0.0, &classes, |_| None)
        .unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let (mut refused, mut completed) = (0, 0);
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let parts = &f[f.len() - servesim::metrics::NUM_PARTS..];
        if f[2] == "completed" {
            completed += 1;
            assert!(parts.iter().all(|x| x.parse::<f64>().is_ok_and(|v| v >= 0.0)), "{line}");
        } else {
            refused += 1;
            assert!(parts.iter().all(|x| x.is_empty()), "{line}");
        }
    }
    assert!(refused > 100 && completed > 100, "{refused} refused, {completed} completed");
}
