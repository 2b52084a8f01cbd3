//! `servesim compare A B` (issue 26): paired differences where the runs
//! served the same requests, unpaired ones otherwise, and intervals that
//! cover a zero difference as often as they claim.

use crate::cli::servesim;
use std::path::Path;

/// Runs the quickstart (600 requests) with `extra` into `out`.
fn run(out: &Path, extra: &[&str]) {
    let mut args =
        vec!["run", "scenarios/quickstart.toml", "--num-requests", "600", "-q", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = servesim(&args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

fn compare(a: &Path, b: &Path) -> serde_json::Value {
    let o = servesim(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("compare --json prints JSON")
}

fn excludes_zero(ci: &serde_json::Value) -> bool {
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    lo > 0.0 || hi < 0.0
}

#[test]
fn same_seed_runs_are_paired_and_a_real_change_is_resolved() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    run(&a, &[]);
    // Fewer sequences per step: decode steps get cheaper, queueing grows.
    run(&b, &["--set", "engine.max_num_seqs=12"]);
    let c = compare(&a, &b);
    assert_eq!(c["paired"], true, "{}", c["pairing"]);
    assert!(c["pairing"].as_str().unwrap().contains("same seed 7"), "{}", c["pairing"]);
    assert_eq!(c["differs"], serde_json::json!([["engine.max_num_seqs", "256", "12"]]));
    let lat = c["latencies"].as_array().unwrap();
    let get = |m: &str| lat.iter().find(|l| l["metric"] == m).unwrap_or_else(|| panic!("{m} missing"));
    let queue = get("queue");
    assert!(queue["mean_diff_ms"].as_f64().unwrap() > 0.0 && excludes_zero(&queue["mean_diff_ci_ms"]), "{queue}");
    let tpot = get("TPOT");
    assert!(tpot["b_faster_share"].as_f64().unwrap() > 0.5, "{tpot}");
    // The headline rows agree with the two summaries.
    let row = c["rows"].as_array().unwrap().iter().find(|r| r["key"] == "p99_ttft_ms").unwrap();
    let sa: serde_json::Value = serde_json::from_slice(&std::fs::read(a.join("summary.json")).unwrap()).unwrap();
    assert_eq!(row["a"], sa["p99_ttft_ms"]);
    // The same folder against itself: every difference is exactly 0.
    let same = compare(&a, &a);
    for l in same["latencies"].as_array().unwrap() {
        assert_eq!(l["mean_diff_ms"], 0.0, "{l}");
        assert_eq!(l["p99_diff_ci_ms"], serde_json::json!([0.0, 0.0]), "{l}");
    }
    // The text names both folders and the pairing.
    let o = servesim(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Per-request differences") && text.contains("engine.max_num_seqs"), "{text}");
}

/// Different seeds of one scenario: unpaired, and the 95% intervals of a
/// difference that is truly 0 exclude it rarely (batch means, not
/// per-request samples, which are dependent and would give too narrow ones).
#[test]
fn different_seeds_are_unpaired_and_intervals_cover_zero() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("base");
    run(&base, &["--seed", "100"]);
    let (mut checks, mut excluded) = (0, 0);
    for seed in 1..=8 {
        let other = d.path().join(format!("s{seed}"));
        run(&other, &["--seed", &seed.to_string()]);
        let c = compare(&base, &other);
        assert_eq!(c["paired"], false);
        assert!(c["pairing"].as_str().unwrap().starts_with("unpaired (seeds 100 and"), "{}", c["pairing"]);
        assert_eq!(c["differs"], serde_json::json!([["seed", "100", seed.to_string()]]));
        for l in c["latencies"].as_array().unwrap() {
            assert!(l["median_diff_ms"].is_null() && l["b_faster_share"].is_null());
            for key in ["mean_diff_ci_ms", "p99_diff_ci_ms"] {
                checks += 1;
                excluded += excludes_zero(&l[key]) as u32;
            }
        }
    }
    // 64 intervals at 95%: about 3 expected to miss; 8 or more would say they are too narrow.
    assert!(excluded < 8, "{excluded} of {checks} intervals exclude a zero difference");
}

#[test]
fn compare_refuses_what_is_not_a_run_folder() {
    let d = tempfile::tempdir().unwrap();
    let o = servesim(&["compare", d.path().to_str().unwrap(), "scenarios"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds no summary.json") && err.contains("servesim compare output/a output/b"), "{err}");
}
