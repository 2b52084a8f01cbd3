//! `servesim validate` and `servesim calibrate`: the validation numbers are a
//! snapshot (validation/expected.json), and fitting recovers parameters the
//! model itself was given, from noisy synthetic measurements.

use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use servesim::Catalog;
use servesim::calibrate::{Input, Options, inputs, lm, param_for};
use servesim::scenario::load_scenario_str;
use std::path::{Path, PathBuf};

fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

/// Every data set's statistics, and every row of the smaller ones, equal the
/// committed snapshot. After a deliberate change, rewrite it with
/// `servesim validate --snapshot validation/expected.json` and say in the
/// commit which numbers moved.
#[test]
fn validate_numbers_match_the_snapshot() {
    let catalog = Catalog::builtin().unwrap();
    let sets = servesim::validate::run(&catalog, &[]).unwrap();
    let now = servesim::validate::snapshot(&sets);
    let expected = servesim::validate::band::expected();
    let keys = |s: &[servesim::validate::band::SnapshotSet]| s.iter().map(|d| d.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&now), keys(expected), "data sets differ from validation/expected.json");
    let fix = "if the change is deliberate: servesim validate --snapshot validation/expected.json";
    for (n, e) in now.iter().zip(expected) {
        assert_eq!(n.stats.len(), e.stats.len(), "{}: metrics changed ({fix})", n.key);
        for ((m1, f1, s1), (m2, f2, s2)) in n.stats.iter().zip(&e.stats) {
            assert_eq!((m1, f1, s1.n), (m2, f2, s2.n), "{}: rows counted changed ({fix})", n.key);
            for (a, b, what) in [
                (s1.median_abs, s2.median_abs, "median"),
                (s1.worst_abs, s2.worst_abs, "worst"),
                (s1.bias, s2.bias, "bias"),
            ] {
                assert!(close(a, b), "{} {m1}: {what} |error| {a} vs {b} in the snapshot ({fix})", n.key);
            }
        }
        assert_eq!(n.rows.len(), e.rows.len(), "{}: rows changed ({fix})", n.key);
        for (a, b) in n.rows.iter().zip(&e.rows) {
            assert_eq!(
                (&a.id, &a.metric, a.fitted, &a.excluded),
                (&b.id, &b.metric, b.fitted, &b.excluded),
                "{}",
                n.key
            );
            assert!(
                close(a.measured, b.measured) && close(a.predicted, b.predicted),
                "{} {}: {a:?} vs {b:?}",
                n.key,
                a.id
            );
        }
    }
}

/// The validated error bands that capacity and plan print come from the
/// snapshot's held-out serving rows: per profile, GPU and metric, else from
/// the nearest measured GPU (flagged, with how far it is); a band covers 80%
/// of its rows.
#[test]
fn error_bands_come_from_held_out_rows() {
    use servesim::validate::BandMetric::{Throughput, Tpot, Ttft};
    let catalog = Catalog::builtin().unwrap();
    let b = servesim::validate::band(Some("vllm-v1"), "a100-80gb", Throughput, Some(&catalog));
    assert!(b.same_gpu && b.n >= 20, "{b:?}");
    assert!(b.median_abs > 0.0 && b.median_abs <= b.band && b.band <= b.worst_abs, "{b:?}");
    let h = servesim::validate::band(Some("sglang"), "h100-sxm", Ttft, Some(&catalog));
    assert!(h.same_gpu && h.n >= 10, "{h:?}");
    // H200: no serving rows; the nearest measured class is the H100 (same
    // compute, 1.43x its bandwidth), named with its distance.
    let n = servesim::validate::band(Some("vllm-v1"), "h200", Tpot, Some(&catalog));
    assert!(!n.same_gpu && n.gpu == "h100-sxm", "{n:?}");
    assert!(n.describe().contains("NOT validated on this GPU") && n.describe().contains("memory bandwidth"));
    // Each band covers 80% of the rows it was computed from.
    let snap = servesim::validate::band::expected();
    let bands = servesim::validate::band::table(snap);
    assert!(bands.len() >= 15, "{bands:?}");
    for band in bands {
        let lab = servesim::measured::gpustack::LABS.iter().find(|l| l.gpu == band.gpu).unwrap();
        let label = match band.profile.as_str() {
            "vllm-v1" => "vLLM",
            "sglang" => "SGLang",
            _ => "TRT-LLM",
        };
        let metric = match band.metric {
            Ttft => "TTFT p50 ms",
            Tpot => "TPOT p50 ms",
            Throughput => "output tok/s",
        };
        let errors: Vec<f64> = snap
            .iter()
            .find(|s| s.key == lab.key)
            .unwrap()
            .rows
            .iter()
            .filter(|r| r.excluded.is_none() && !r.fitted && r.predicted.is_finite())
            .filter(|r| r.metric == format!("{label} {metric}"))
            .map(|r| r.error())
            .collect();
        assert_eq!(errors.len(), band.n, "{band:?}");
        let inside = errors.iter().filter(|e| e.abs() <= band.band).count();
        assert!(inside as f64 >= 0.8 * errors.len() as f64, "{band:?}: {inside} of {} inside", errors.len());
        assert!((0.0..=1.0).contains(&band.coverage), "{band:?}");
    }
    let legacy = servesim::validate::band(None, "h100-sxm", Throughput, Some(&catalog));
    assert_eq!(legacy.n, 0);
    assert!(legacy.describe().contains("not validated"));
}

const SCENARIO: &str = r#"
num_requests = 1
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[engine]
preset = "vllm-v1"
[workload]
rate = 1
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 16 }
"#;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("servesim-validation-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Steps of many shapes: prefills of 64-8192 tokens, decodes of 1-256
/// sequences at several contexts, and mixed steps.
fn step_rows() -> Vec<(u32, u32, f64)> {
    let mut rows = Vec::new();
    for p in [64, 256, 1024, 4096, 8192] {
        rows.push((p, 0, 0.0));
    }
    for b in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
        for ctx in [256.0, 2048.0] {
            rows.push((0, b, b as f64 * ctx));
        }
    }
    for (p, b) in [(512, 16), (2048, 64), (256, 128)] {
        rows.push((p, b, b as f64 * 1000.0));
    }
    rows
}

fn write_steps(path: &Path, rows: &[(u32, u32, f64)], seconds: &[f64]) {
    let mut text = String::from("prefill_tokens,decode_seqs,decode_context_tokens,measured_s\n");
    for ((p, b, c), s) in rows.iter().zip(seconds) {
        text += &format!("{p},{b},{c},{s}\n");
    }
    std::fs::write(path, text).unwrap();
}

/// Fitting recovers the step and per-sequence overheads the model was given,
/// from its own step times with 2 % lognormal noise, and the held-out error
/// stays at the noise level.
#[test]
fn calibrate_recovers_known_overheads_from_noisy_steps() {
    let catalog = Catalog::builtin().unwrap();
    let loaded = load_scenario_str(SCENARIO, Path::new("steps.toml"), &[]).unwrap();
    let rows = step_rows();
    let path = tmp("steps.csv");
    write_steps(&path, &rows, &vec![1.0; rows.len()]);
    let problem = inputs::read(&path, &catalog, Some(&loaded), "vllm-v1").unwrap();
    let params: Vec<lm::Param> =
        ["cost.step_overhead_ms", "cost.per_seq_overhead_ms"].iter().map(|k| param_for(k, 0.0).unwrap()).collect();
    let truth = [3.5, 0.12];
    let idx: Vec<usize> = (0..problem.points.len()).collect();
    let exact = problem.predict(&catalog, &params, &truth, &idx).unwrap();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let noise = Normal::new(0.0, 0.02).unwrap();
    let noisy: Vec<f64> = exact.iter().map(|ms| ms * 1e-3 * f64::exp(noise.sample(&mut rng))).collect();
    write_steps(&path, &rows, &noisy);
    let opts = Options {
        input: Input::File(path.clone()),
        scenario: Some(loaded),
        preset: None,
        fit: vec!["step_overhead_ms".into(), "per_seq_overhead_ms".into()],
        folds: 5,
        rows: Vec::new(),
        name: Some("fitted".into()),
    };
    let (calibration, profile) = servesim::calibrate::run(&opts, &catalog).unwrap();
    let got: Vec<f64> = calibration.params.iter().map(|p| p.value).collect();
    assert!((got[0] - truth[0]).abs() < 0.1 * truth[0], "step overhead {} vs {}", got[0], truth[0]);
    assert!((got[1] - truth[1]).abs() < 0.15 * truth[1], "per-sequence overhead {} vs {}", got[1], truth[1]);
    let held = calibration.held_out.expect("held-out folds");
    assert!(held.median_abs < 0.03, "held-out median {:.3}", held.median_abs);
    // The written profile names the fit as the source of each fitted value.
    assert_eq!(profile.name, "fitted");
    assert!(profile.sources["cost.step_overhead_ms"].contains("servesim calibrate"));
    let toml = servesim::calibrate::profile_toml(&profile, &calibration);
    assert!(toml.contains(&format!("step_overhead_ms = {}", (got[0] * 1e6).round() / 1e6)), "{toml}");
}

/// Data that cannot tell two parameters apart is refused with the reason.
#[test]
fn calibrate_refuses_what_the_data_cannot_determine() {
    let catalog = Catalog::builtin().unwrap();
    let loaded = load_scenario_str(SCENARIO, Path::new("steps.toml"), &[]).unwrap();
    // Decode steps of one batch size only: a fixed cost per step and a cost
    // per sequence are the same thing here.
    let rows: Vec<(u32, u32, f64)> = (0..8).map(|i| (0, 32, 32.0 * (500.0 + 10.0 * i as f64))).collect();
    let path = tmp("one-batch.csv");
    write_steps(&path, &rows, &[0.012; 8]);
    let opts = Options {
        input: Input::File(path),
        scenario: Some(loaded),
        preset: None,
        fit: vec!["step_overhead_ms".into(), "per_seq_overhead_ms".into()],
        folds: 4,
        rows: Vec::new(),
        name: None,
    };
    let err = servesim::calibrate::run(&opts, &catalog).unwrap_err().to_string();
    assert!(err.contains("cannot tell") && err.contains("per_seq_overhead_ms"), "{err}");
    // Preprocessing never shows in single steps.
    let loaded = load_scenario_str(SCENARIO, Path::new("steps.toml"), &[]).unwrap();
    let rows = step_rows();
    let path = tmp("steps-pre.csv");
    write_steps(&path, &rows, &vec![0.02; rows.len()]);
    let opts =
        Options { input: Input::File(path), scenario: Some(loaded), fit: vec!["engine.preprocess_ms".into()], ..opts };
    let err = servesim::calibrate::run(&opts, &catalog).unwrap_err().to_string();
    assert!(err.contains("cannot determine `engine.preprocess_ms`"), "{err}");
}

/// A `vllm bench serve --save-detailed` result is simulated with its own
/// requests in a closed loop of its concurrency, and its TTFT, TPOT and ITL
/// percentiles become the points to fit.
#[test]
fn calibrate_reads_a_vllm_bench_result() {
    let catalog = Catalog::builtin().unwrap();
    let n = 40;
    let doc = serde_json::json!({
        "max_concurrency": 4,
        "input_lens": vec![200; n],
        "output_lens": vec![20; n],
        "ttfts": (0..n).map(|i| 0.03 + 0.001 * (i % 7) as f64).collect::<Vec<_>>(),
        "itls": (0..n).map(|i| vec![0.008 + 0.0002 * (i % 5) as f64; 19]).collect::<Vec<_>>(),
    });
    let path = tmp("bench.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let loaded = load_scenario_str(SCENARIO, Path::new("bench.toml"), &[]).unwrap();
    let problem = inputs::read(&path, &catalog, Some(&loaded), "vllm-v1").unwrap();
    assert_eq!(problem.sims.len(), 1);
    assert_eq!(problem.points.len(), 15, "TTFT, TPOT and ITL at 5 percentiles");
    assert!(problem.sims[0].text.contains("closed-loop"));
    let opts = Options {
        input: Input::File(path),
        scenario: Some(loaded),
        preset: None,
        fit: vec!["step_overhead_ms".into()],
        folds: 3,
        rows: Vec::new(),
        name: None,
    };
    let (calibration, _) = servesim::calibrate::run(&opts, &catalog).unwrap();
    let fit = calibration.in_sample.unwrap();
    let before = calibration.before.unwrap();
    assert!(fit.median_abs <= before.median_abs + 1e-9, "the fit is no worse than the profile");
}

/// An offline-throughput table becomes one simulation per row; rows the
/// catalogue cannot simulate are reported, not dropped silently.
#[test]
fn calibrate_reads_an_offline_table() {
    let catalog = Catalog::builtin().unwrap();
    let path = tmp("offline.csv");
    std::fs::write(
        &path,
        "model,gpu,precision,tp,isl,osl,total_output_tok_s\n\
         llama-3.1-8b,h100-sxm,FP8,1,128,128,20000\n\
         llama-3.1-8b,h100-sxm,FP8,1,2048,128,3000\n\
         no-such-model,h100-sxm,FP8,1,128,128,1000\n",
    )
    .unwrap();
    let problem = inputs::read(&path, &catalog, None, "trtllm").unwrap();
    assert_eq!(problem.sims.len(), 2);
    assert_eq!(problem.skipped.len(), 1);
    assert!(problem.skipped[0].contains("no-such-model"));
    assert!(problem.sims[0].text.contains("max_num_seqs"), "trtllm-bench's heuristic sets the batch limits");
}

/// Every run, sweep, capacity and plan names its engine profile, version and
/// cost model and the validated error that applies, or says that none does.
#[test]
fn the_engine_line_names_the_profile_and_its_validation() {
    let catalog = Catalog::builtin().unwrap();
    let line_of = |text: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let loaded = load_scenario_str(text, Path::new("s.toml"), &sets).unwrap();
        servesim::validate::band::engine_line(&loaded.scenario, &catalog)
    };
    let line = |sets: &[&str]| line_of(SCENARIO, sets);
    let legacy = line_of(&SCENARIO.replace("preset = \"vllm-v1\"", "preset = \"legacy\""), &[]);
    assert!(legacy.contains("NOT validated") && legacy.contains("legacy"), "{legacy}");
    // A scenario that names no preset runs the validated default, and says so.
    let default = line_of(&SCENARIO.replace("preset = \"vllm-v1\"", ""), &[]);
    assert!(default.starts_with("Engine: vllm-v1 (vLLM V1 0.11.0)"), "{default}");
    let a100 = line(&["hardware.gpu=\"a100-80gb\""]);
    assert!(a100.contains("vllm-v1 (vLLM V1 0.11.0), kernel cost model; validated on a100-80gb"), "{a100}");
    assert!(a100.contains("throughput ±"), "{a100}");
    let h200 = line(&["hardware.gpu=\"h200\"", "engine.preset=\"sglang\""]);
    assert!(h200.contains("NOT validated on h200; nearest validated class h100-sxm"), "{h200}");
    let v0 = line(&["engine.preset=\"vllm-v0\""]);
    assert!(v0.contains("no serving measurement validates this profile"), "{v0}");
}

/// A Splitwise profile read with --scenario takes the scenario's [cost]
/// keys (and --set ones): they were silently ignored.
#[test]
fn splitwise_input_honours_the_scenarios_cost_keys() {
    let catalog = Catalog::builtin().unwrap();
    let text = std::fs::read_to_string("validation/data/splitwise_perf_model_a100.csv").unwrap();
    let scenario = |extra: &str| {
        let t = format!(
            "num_requests = 1\n[model]\nname = \"llama-2-70b\"\n[hardware]\ngpu = \"a100-80gb\"\ntp = 8\n[engine]\n\
             preset = \"vllm-v0-eager\"\n[cost]\n{extra}\n[workload]\nrate = 1\n\
             prompt_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 16 }}\n"
        );
        load_scenario_str(&t, Path::new("sw.toml"), &[]).unwrap()
    };
    let predict = |s: &servesim::scenario::LoadedScenario| {
        let p = inputs::splitwise(Path::new("splitwise.csv"), &text, &catalog, Some(s), "vllm-v0-eager").unwrap();
        let idx: Vec<usize> = (0..p.points.len()).collect();
        p.predict(&catalog, &[], &[], &idx).unwrap()
    };
    let base = predict(&scenario(""));
    let slower = predict(&scenario("step_overhead_ms = 61.84"));
    // 50 ms more per step (11.84 in the profile), with the CPU not overlapped.
    for (a, b) in base.iter().zip(&slower) {
        assert!((b - a - 50.0).abs() < 1e-6, "{a} -> {b}");
    }
}

/// Calibrates on a fixture of tests/data/calibrate/ (each tool's schema
/// written by hand, its statistics servesim's own predictions with
/// `cost.step_overhead_ms` = 1.2, rounded): the fit of the step overhead
/// from the profile's value lowers the error to about nothing and lands on
/// the overhead that made the numbers.
fn calibrate_recovers_the_fixture_overhead(file: &str) -> servesim::calibrate::CalibrationReport {
    let catalog = Catalog::builtin().unwrap();
    let dir = Path::new("tests/data/calibrate");
    let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let loaded = load_scenario_str(&text, &dir.join("scenario.toml"), &[]).unwrap();
    let opts = Options {
        input: Input::File(dir.join(file)),
        scenario: Some(loaded),
        preset: None,
        fit: vec!["step_overhead_ms".into()],
        folds: 3,
        rows: Vec::new(),
        name: None,
    };
    let (calibration, _) = servesim::calibrate::run(&opts, &catalog).unwrap();
    let sse = |pred: fn(&servesim::calibrate::PointResult) -> f64| -> f64 {
        calibration.points.iter().map(|p| (pred(p) / p.measured).ln().powi(2)).sum()
    };
    let (before, fitted) = (sse(|p| p.before), sse(|p| p.fitted));
    assert!(fitted < 0.01 * before, "{file}: sum of squared log errors {before} -> {fitted}");
    let before = calibration.before.unwrap();
    let fit = calibration.in_sample.unwrap();
    assert!(before.median_abs > 0.05 && fit.median_abs < 0.01, "{file}: {before:?} -> {fit:?}");
    let v = calibration.params[0].value;
    assert!((v - 1.2).abs() < 0.05, "{file}: step overhead {v}");
    assert!(!calibration.notes.is_empty(), "{file}: the mean-lengths note");
    calibration
}

#[test]
fn calibrate_fits_a_vllm_bench_aggregate_result() {
    let c = calibrate_recovers_the_fixture_overhead("vllm_aggregate.json");
    assert_eq!(c.points.len(), 7);
}

#[test]
fn calibrate_fits_a_guidellm_report() {
    let c = calibrate_recovers_the_fixture_overhead("guidellm_report.json");
    assert_eq!(c.points.len(), 39, "13 points in each of 3 benchmarks");
    assert!(c.held_out.is_some(), "benchmarks are held out in turn");
}

#[test]
fn calibrate_fits_a_genai_perf_export() {
    let c = calibrate_recovers_the_fixture_overhead("genai_perf_profile_export_genai_perf.json");
    assert_eq!(c.points.len(), 11);
}

#[test]
fn calibrate_fits_a_serving_results_table() {
    let c = calibrate_recovers_the_fixture_overhead("serving_results.csv");
    assert_eq!(c.points.len(), 18);
    assert_eq!(c.skipped.len(), 1, "the row of a model the catalogue lacks");
    assert!(c.held_out.is_some(), "rows are held out in turn");
}

/// "duplicate key" came bare in 742 of a hostile tester's mutations: the
/// error names the key (with its table) and where it was first set.
#[test]
fn a_duplicate_key_is_named_with_where_it_was_first_set() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key, first) in [
        ("name = \"x\"\n[model]\nname = \"llama-3.1-8b\"\nname = \"qwen\"\n", "`model.name`", "line 3"),
        (
            "[model]\nname = \"llama-3.1-8b\"\n[engine]\nmax_num_seqs = 4\n[engine]\nmax_num_seqs = 5\n",
            "`engine`",
            "line 3",
        ),
        ("seed = 1\nseed = 2\n[model]\nname = \"llama-3.1-8b\"\n", "`seed`", "line 1"),
    ] {
        let p = dir.path().join("s.toml");
        std::fs::write(&p, text).unwrap();
        let e = servesim::scenario::load_scenario(&p, &[]).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("duplicate key") && e.contains(first), "{e}");
    }
}

/// `[baseline]` errors named neither the key nor the line (issue 26).
#[test]
fn baseline_errors_name_the_entry_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.toml");
    for (entry, key, words) in [
        ("\"engine.max_num_seqs\" = 0", "`engine.max_num_seqs`", "at least 1"),
        ("\"engine.max_num_sqs\" = 3", "`engine.max_num_sqs`", "unknown field"),
        ("\"engine.max_num_seqs\" = \"a\"", "`engine.max_num_seqs`", "found string"),
        ("engine = 3", "`engine`", "found the number"),
        ("\"workload.rate\" = -1", "`workload.rate`", "positive"),
    ] {
        let text = format!(
            "name = \"x\"\nnum_requests = 100\n[model]\nname = \"llama-3.1-8b\"\n[workload]\nrate = 2\n\
             prompt_tokens = {{ dist = \"fixed\", value = 100 }}\noutput_tokens = {{ dist = \"fixed\", value = 10 }}\n\
             [baseline]\n\"hardware.router\" = \"random\"\n{entry}\n"
        );
        std::fs::write(&p, text).unwrap();
        let (code, _, se) = crate::common::outcome(&crate::common::servesim_in(dir.path(), &["check", "s.toml"]));
        assert_eq!(code, 2, "{entry}: {se}");
        assert!(se.contains("s.toml:11:1") && se.contains(key) && se.contains(words), "{entry}: {se}");
    }
}
