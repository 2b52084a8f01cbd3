//! Same scenario + seed ⇒ byte-identical summary.json and requests.csv,
//! whatever the thread count.

use servesim::Catalog;
use servesim::export::write_run;
use servesim::scenario::load_scenario;
use std::path::Path;

fn files_with_threads(threads: usize, sets: &[&str]) -> (Vec<u8>, Vec<u8>) {
    scenario_files("quickstart", threads, sets)
}

fn scenario_files(name: &str, threads: usize, sets: &[&str]) -> (Vec<u8>, Vec<u8>) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(format!("{name}.toml"));
    let loaded = load_scenario(&path, &sets).unwrap();
    let setup = servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let rep = servesim::run_setup(&setup, setup.scenario.seed);
        write_run(dir.path(), &loaded, &rep, Vec::new()).unwrap();
    });
    (std::fs::read(dir.path().join("summary.json")).unwrap(), std::fs::read(dir.path().join("requests.csv")).unwrap())
}

#[test]
fn byte_identical_across_runs_and_thread_counts() {
    // Enough requests for the CSV to be formatted in several parallel blocks.
    let sets = ["num_requests=40000", "workload.rate=12"];
    let a = files_with_threads(1, &sets);
    let b = files_with_threads(2, &sets);
    let c = files_with_threads(4, &sets);
    assert!(a.0 == b.0 && b.0 == c.0, "summary.json differs between thread counts");
    assert!(a.1 == b.1 && b.1 == c.1, "requests.csv differs between thread counts");
    assert!(a.1.len() > 40000 * 80);
}

#[test]
fn different_seeds_differ() {
    let a = files_with_threads(2, &["num_requests=200", "seed=1"]);
    let b = files_with_threads(2, &["num_requests=200", "seed=2"]);
    assert_ne!(a.1, b.1);
}

#[test]
fn pools_speculation_swap_and_prefix_routing_are_deterministic() {
    for (name, sets) in [
        ("what-if-disaggregation", vec!["duration_s=60"]),
        ("what-if-speculative", vec!["duration_s=60", "workload.rate=4"]),
        (
            "what-if-prefix-cache",
            vec![
                "duration_s=200",
                "engine.preemption=\"swap\"",
                "engine.num_gpu_blocks=3000",
                "engine.max_model_len=32768",
            ],
        ),
    ] {
        let a = scenario_files(name, 1, &sets);
        let b = scenario_files(name, 2, &sets);
        assert!(a == b, "{name}: outputs differ between runs and thread counts");
    }
}

#[test]
fn run_folders_of_earlier_versions_redraw_and_are_replaced_cleanly() {
    // Earlier versions wrote the timeline's spans as trace.json ("trace" now
    // means only a replayed request trace): such a folder still redraws, and
    // a new run into it leaves no stale trace.json beside timeline.json.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/quickstart.toml");
    let loaded = load_scenario(&path, &["num_requests=200".to_string()]).unwrap();
    let setup = servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap();
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), &loaded, &rep, Vec::new()).unwrap();
    let timeline = std::fs::read(dir.path().join("timeline.json")).unwrap();
    assert!(timeline.len() > 100 && !dir.path().join("trace.json").exists());
    std::fs::rename(dir.path().join("timeline.json"), dir.path().join("trace.json")).unwrap();
    let old = servesim::export::RunData::read(dir.path()).unwrap();
    assert_eq!(old.timeline, rep.output.timeline, "the old file name is still read");
    write_run(dir.path(), &loaded, &rep, Vec::new()).unwrap();
    assert!(!dir.path().join("trace.json").exists(), "a stale trace.json was left behind");
    assert_eq!(std::fs::read(dir.path().join("timeline.json")).unwrap(), timeline);
}
