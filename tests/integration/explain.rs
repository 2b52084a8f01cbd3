//! `servesim explain` (Step 9): on the quickstart, overload, the chunked
//! prefill what-if and the Mooncake replay it names a cause, and its
//! suggested change — run with common random numbers — improves the tail it
//! targets and shrinks that cause; the CLI reads a results folder back,
//! refuses one it cannot reproduce, and adds "Reading it backwards" to
//! report.html.

use servesim::Catalog;
use servesim::explain::{Metric, Options};
use servesim::metrics::Part;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Explains a shipped scenario in-process; returns the explanation, the
/// cause's mean in the target tail, and the same with the suggestion applied.
/// `replications` seeds test the what-if (the CLI's default is 5).
fn explain(name: &str, replications: u32) -> (servesim::explain::Explanation, f64, f64) {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let path = root().join("scenarios").join(name);
    let loaded = servesim::config::load_scenario_with(&path, &[], &catalog).unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let x = servesim::explain::explain(&rep, &loaded, &catalog, Options { replications, what_if: true }).unwrap();
    let w =
        x.suggestion().unwrap_or_else(|| panic!("{name}: no confirmed suggestion:\n{}", servesim::explain::text(&x)));
    let cohort = x.analysis.cohorts.iter().find(|c| c.metric == x.target).unwrap();
    let cause = cohort.excess;
    // The suggested change, simulated with attribution on the same seed.
    let sets: Vec<(String, toml::Value)> = w
        .change
        .iter()
        .map(|s| {
            let (k, v) = s.split_once('=').unwrap();
            (k.to_string(), servesim::config::parse_value(v))
        })
        .collect();
    let mut variant = servesim::resolve(&loaded.derive(&sets, "test").unwrap(), &catalog).unwrap();
    variant.attribution = true;
    let vrep = servesim::run_setup(&variant, variant.scenario.seed);
    let va = servesim::explain::analyse(&vrep).unwrap();
    let after = va.cohorts.iter().find(|c| c.metric == x.target).unwrap().parts_ms[cause.idx()];
    (x.clone(), cohort.parts_ms[cause.idx()], after)
}

#[test]
fn explain_names_a_cause_its_what_if_confirms() {
    // The chunked-prefill what-if's suggestion (a 4,096-token budget) saves
    // under 2 % of its TPOT tail under vllm-v1: three seeds leave it
    // inconclusive, the CLI's five confirm it.
    let cases = [
        ("quickstart.toml", Metric::Ttft, 3),
        ("overload.toml", Metric::Ttft, 3),
        ("what-if-chunked-prefill.toml", Metric::Tpot, 5),
        ("mooncake-long-context.toml", Metric::Tpot, 3),
    ];
    for (name, metric, replications) in cases {
        let (x, before, after) = explain(name, replications);
        assert_eq!(x.target, metric, "{name}");
        let w = x.suggestion().unwrap();
        assert!(w.confirmed && w.difference.ci_hi < 0.0, "{name}: {w:?}");
        let cohort = x.analysis.cohorts.iter().find(|c| c.metric == x.target).unwrap();
        // The cause is a real part of the tail, and the change shrinks it.
        assert!(cohort.excess_ms > 0.0, "{name}: {cohort:?}");
        assert!(
            after < before,
            "{name}: {:?} was {before} ms in the tail, {after} ms with {:?}",
            cohort.excess,
            w.change
        );
        let t = servesim::explain::text(&x);
        assert!(t.contains("what it pays for") && t.contains("Suggested change: --set"), "{name}:\n{t}");
    }
}

#[test]
fn overload_is_explained_as_a_full_batch_fixed_by_capacity() {
    let (x, _, _) = explain("overload.toml", 3);
    let c = &x.analysis.cohorts[0];
    assert_eq!(c.metric, Metric::Ttft);
    assert_eq!(c.excess, Part::WaitBatchFull, "{c:?}");
    assert_eq!(x.suggestion().unwrap().change, vec!["hardware.replicas=2".to_string()]);
    assert_eq!(x.analysis.verdict, "overloaded");
    // The slowest requests are traced to named earlier requests.
    assert!(c.examples[0].text.contains("prefilling there meanwhile: #"), "{}", c.examples[0].text);
}

fn servesim(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let o = crate::common::servesim_in(cwd, args);
    crate::common::outcome(&o)
}

#[test]
fn cli_explains_a_results_folder_and_refuses_what_it_cannot_reproduce() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let (code, _, se) =
        servesim(root(), &["run", "scenarios/quickstart.toml", "--attribution", "--out", o, "-q", "--report"]);
    assert_eq!(code, 0, "{se}");
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with("part_decode_swap_ms"), "{}", csv.lines().next().unwrap());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Reading it backwards") && html.contains("servesim explain"));
    let (code, so, se) = servesim(root(), &["explain", o, "--replications", "3"]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("Slowest 1% of TTFT") && so.contains("Suggested change"), "{so}");
    let x: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("explain.json")).unwrap()).unwrap();
    assert_eq!(x["target"], "ttft");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("id=\"reading-it-backwards\"")
            && html.contains("where the tail")
            && html.contains("paired difference")
    );
    assert!(out.join("attribution.svg").exists() && out.join("attribution.png").exists());
    // A summary that the run does not reproduce is refused (exit 2), naming the fix.
    let s = std::fs::read_to_string(out.join("summary.json")).unwrap().replacen("\"seed\": 7", "\"seed\": 8", 1);
    std::fs::write(out.join("summary.json"), s).unwrap();
    let (code, _, se) = servesim(root(), &["explain", o]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("gives another summary") && se.contains("run the scenario again"), "{se}");
    // --set does not apply to a folder.
    let (code, _, se) = servesim(root(), &["explain", o, "--set", "workload.rate=3"]);
    assert_eq!(code, 2, "{se}");
    // A scenario file is simulated and explained (analysis only here).
    let (code, so, se) = servesim(root(), &["explain", "scenarios/quickstart.toml", "--no-what-if", "--json"]);
    assert_eq!(code, 0, "{se}");
    let x: serde_json::Value = serde_json::from_str(&so).unwrap();
    assert!(x["what_ifs"].as_array().unwrap().is_empty());
    assert_eq!(x["analysis"]["cohorts"][0]["metric"], "ttft");
}
