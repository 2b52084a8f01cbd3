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
/// `metric` names the tail (None: the one explain picks).
fn explain(name: &str, replications: u32, metric: Option<Metric>) -> (servesim::explain::Explanation, f64, f64) {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let path = root().join("scenarios").join(name);
    let loaded = servesim::scenario::load_scenario_with(&path, &[], &catalog).unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let x =
        servesim::explain::explain(&rep, &loaded, &catalog, Options { replications, what_if: true, metric }).unwrap();
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
            (k.to_string(), servesim::scenario::parse_value(v))
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
    // The quickstart meets its objectives (nothing to fix): its TTFT tail is
    // asked for. (what-if-chunked-prefill's smaller token budget shortens
    // its TPOT tail but costs TTFT attainment: a trade, not a fix; see
    // `a_trade_between_objectives_is_not_a_fix`.)
    let cases = [
        ("quickstart.toml", Metric::Ttft, 3, Some(Metric::Ttft)),
        ("overload.toml", Metric::Ttft, 3, None),
        ("mooncake-long-context.toml", Metric::Tpot, 3, None),
    ];
    for (name, metric, replications, asked) in cases {
        let (x, before, after) = explain(name, replications, asked);
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
    let (x, _, _) = explain("overload.toml", 3, None);
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
    // The quickstart meets its objectives: nothing to fix, unless a tail is asked for.
    let (code, so, se) = servesim(root(), &["explain", o, "--no-what-if"]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("Answer: nothing to fix") && !so.contains("Suggested change"), "{so}");
    // From another working directory the folder still finds its scenario
    // (review: explain worked only from the folder the run was made from).
    let (code, so, se) = servesim(tmp.path(), &["explain", o, "--replications", "3", "--metric", "ttft"]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("Slowest 1% of TTFT") && so.contains("Suggested change"), "{so}");
    assert!(!so.contains("nothing to fix"), "{so}");
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

/// Loads W1 with overrides, runs it with attribution, and returns the run.
fn w1(sets: &[&str]) -> (servesim::scenario::LoadedScenario, servesim::Report, std::sync::Arc<Catalog>) {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded =
        servesim::scenario::load_scenario_with(&root().join("scenarios/w1-steady-state.toml"), &sets, &catalog)
            .unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    (loaded, rep, catalog)
}

/// A change that improves the target tail but overloads the run is not
/// confirmed, and its side effects are printed beside it (review: explain
/// "confirmed" max_num_seqs 256 → 128 for a TPOT tail while attainment fell
/// from 96% to 1% and p99 TTFT rose from 24 ms to 34 s).
#[test]
fn a_suggestion_that_does_harm_is_not_confirmed() {
    // 70 req/s of 128/256-token requests on one H100: stable with 256
    // sequences (about 160 in flight), overloaded with 128.
    let sets = ["workload.rate=70", "slo.tpot_ms=9.8", "workload.prompt_tokens={dist=\"fixed\",value=128}"];
    let (loaded, rep, catalog) = w1(&sets);
    assert_eq!(rep.summary.stability.verdict, "stable");
    let halve = servesim::explain::Candidate {
        changes: vec![("engine.max_num_seqs".into(), toml::Value::Integer(128))],
        why: "test".into(),
    };
    let w = &servesim::explain::what_if(&loaded, &catalog, &rep, Metric::Tpot, &[halve], 3).unwrap()[0];
    // The TPOT tail does improve: the old rule confirmed it.
    assert!(w.difference.ci_hi < 0.0, "{w:?}");
    assert!(!w.confirmed, "{w:?}");
    assert_eq!(w.stable_runs.0, 3);
    assert!(w.stable_runs.1 < 3, "{w:?}");
    let harm = w.harm.as_deref().expect("the harm is named");
    assert!(harm.contains("runs stable") && harm.contains("slo.attainment falls"), "{harm}");
    let ttft = w.side_effects.iter().find(|m| m.0 == "p99_ttft_ms").expect("p99 TTFT is a side effect");
    assert!(ttft.1.mean > 1000.0, "{ttft:?}");
    let x = servesim::explain::Explanation {
        analysis: servesim::explain::analyse(&rep).unwrap(),
        target: Metric::Tpot,
        what_ifs: vec![w.clone()],
        replications: 3,
        replayed_trace: false,
        nothing_to_fix: None,
    };
    let t = servesim::explain::text(&x);
    assert!(t.contains("not confirmed: it does harm elsewhere") && t.contains("side effects: p99 TTFT +"), "{t}");
    assert!(t.contains("No change tried is a confirmed improvement"), "{t}");
}

/// When every objective is met the answer is "nothing to fix" (review: it
/// suggested doubling the GPUs); `--metric` still explains a tail, and a
/// zero-width interval on Poisson arrivals is not called a replayed trace.
#[test]
fn nothing_to_fix_when_every_objective_is_met() {
    let sets = ["workload.rate=45", "slo.tpot_ms=12", "workload.prompt_tokens={dist=\"fixed\",value=128}"];
    let (loaded, rep, catalog) = w1(&sets);
    let x =
        servesim::explain::explain(&rep, &loaded, &catalog, Options { replications: 3, ..Options::default() }).unwrap();
    let n = x.nothing_to_fix.as_deref().expect("every objective is met");
    assert!(n.contains("nothing to fix") && n.contains("headroom"), "{n}");
    assert!(x.what_ifs.is_empty() && x.suggestion().is_none());
    assert!(servesim::explain::text(&x).contains("Answer: nothing to fix"));
    let opts = Options { replications: 3, what_if: true, metric: Some(Metric::Ttft) };
    let x = servesim::explain::explain(&rep, &loaded, &catalog, opts).unwrap();
    assert!(x.nothing_to_fix.is_none() && !x.what_ifs.is_empty() && x.target == Metric::Ttft);
    let t = servesim::explain::text(&x);
    assert!(!t.contains("replayed trace"), "{t}");
}

/// No "NaN" and no share above 100% in an explanation: an overloaded
/// replay where no request meets its SLOs, and a tail whose cause exceeds
/// its whole gap over the median (review: "against NaN ms", "(106%)").
#[test]
fn explanations_print_no_nan_and_no_share_above_100_percent() {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let sets = ["workload.trace.target_rate=45".to_string(), "slo.tpot_ms=12".into()];
    let loaded =
        servesim::scenario::load_scenario_with(&root().join("scenarios/code-completion.toml"), &sets, &catalog)
            .unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let opts = Options { replications: 2, what_if: false, metric: None };
    let x = servesim::explain::explain(&rep, &loaded, &catalog, opts).unwrap();
    let t = servesim::explain::text(&x);
    assert!(!t.contains("NaN"), "{t}");
    for w in t.split('(').skip(1) {
        if let Some(pct) = w.split_once("%)").and_then(|(n, _)| n.parse::<f64>().ok()) {
            assert!(pct <= 100.0, "a share of {pct}% in:\n{t}");
        }
    }
    assert!(t.contains("more than the whole"), "the over-100% case is worded: {t}");
}

/// A change that shortens the targeted tail by moving misses onto another
/// objective is not confirmed: what-if-chunked-prefill's 4,096-token budget
/// cuts p99 TPOT by about 1.4 ms, but TTFT attainment falls by more than a
/// point (every objective counts).
#[test]
fn a_trade_between_objectives_is_not_a_fix() {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let path = root().join("scenarios/what-if-chunked-prefill.toml");
    let loaded = servesim::scenario::load_scenario_with(&path, &[], &catalog).unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let x =
        servesim::explain::explain(&rep, &loaded, &catalog, Options { replications: 5, ..Options::default() }).unwrap();
    assert_eq!(x.target, Metric::Tpot);
    let w = x.what_ifs.iter().find(|w| w.change == ["engine.max_num_batched_tokens=4096"]).expect("tried");
    assert!(w.difference.ci_hi < 0.0 && !w.confirmed, "{w:?}");
    assert!(w.harm.as_deref().is_some_and(|h| h.contains("slo.ttft_attainment falls")), "{:?}", w.harm);
    assert!(x.suggestion().is_none());
}

/// A cost every request pays gets its what-if too: with a 0.5 GB/s KV link
/// the transfer is most of the TTFT tail, yet barely more than the median
/// request pays, so the part the tail *exceeds* the median by is another
/// (review: a slow KV link at 84% of TTFT got no what-if).
#[test]
fn a_cost_every_request_pays_gets_its_what_if() {
    let catalog = std::sync::Arc::new(Catalog::builtin().unwrap());
    let sets = ["disaggregation.kv_transfer_gbps=0.5".to_string()];
    let path = root().join("scenarios/what-if-disaggregation.toml");
    let loaded = servesim::scenario::load_scenario_with(&path, &sets, &catalog).unwrap();
    let mut setup = servesim::resolve(&loaded.scenario, &catalog).unwrap();
    setup.attribution = true;
    let rep = servesim::run_setup(&setup, setup.scenario.seed);
    let a = servesim::explain::analyse(&rep).unwrap();
    let c = a.cohorts.iter().find(|c| c.metric == Metric::Ttft).unwrap();
    let total: f64 = c.parts_ms.iter().filter(|x| **x > 0.0).sum();
    let transfer = c.parts_ms[Part::Transfer.idx()];
    assert!(transfer > 0.5 * total, "transfer {transfer} ms of {total} ms");
    let cands = servesim::explain::candidates(c, &rep);
    assert!(
        cands.iter().any(|k| k.changes.iter().any(|(key, _)| key == "disaggregation.kv_transfer_gbps")),
        "excess {:?}; candidates {cands:?}",
        c.excess
    );
}
