//! End-to-end tests of the `servesim` binary: commands, files, exit codes and
//! error messages.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built binary in the repository root.
pub(crate) fn servesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run servesim")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs servesim on a scenario text written to a temporary file; returns (code, stdout, stderr).
fn on_scenario(toml: &str, extra: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, toml).unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = servesim(&args);
    let (so, se) = text(&o);
    assert!(!se.contains("panicked"), "servesim panicked: {se}");
    (o.status.code().unwrap_or(-1), so, se)
}

const QUICK: &str = include_str!("../../scenarios/quickstart.toml");

#[test]
fn run_writes_results_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("res");
    let o =
        servesim(&["run", "scenarios/quickstart.toml", "--out", out.to_str().unwrap(), "--set", "num_requests=400"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    for k in [
        "Successful requests:",
        "Mean TTFT (ms):",
        "P99 TPOT (ms):",
        "Median ITL (ms):",
        "SLO attainment (%):",
        "Stability:",
    ] {
        assert!(so.contains(k), "summary lacks {k}:\n{so}");
    }
    for f in ["summary.json", "requests.csv", "manifest.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 401);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["overrides"][0], "num_requests=400");
    assert_eq!(manifest["resolved_scenario"]["engine"]["block_size"], 16);
    assert_eq!(manifest["scenario_sha256"].as_str().unwrap().len(), 64);
    assert!(manifest["pools"][0]["memory_plan"]["num_blocks"].as_u64().unwrap() > 1000);
    // Charts: SVG documents and PNG images.
    for stem in ["cdf", "timeseries", "timeline"] {
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{stem}.svg is not an SVG document");
        assert!(svg.contains("DejaVu Sans"), "{stem}.svg does not name the embedded font");
        let png = std::fs::read(out.join(format!("{stem}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png is not a PNG");
    }
    // No temporary files are left behind.
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 11, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");

    // Running it again replaces the run's results, without --force; a
    // folder whose results servesim did not write is left alone.
    let before = std::fs::read(out.join("summary.json")).unwrap();
    let again =
        servesim(&["run", "scenarios/quickstart.toml", "--out", out.to_str().unwrap(), "--set", "num_requests=50"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again).1);
    assert_ne!(std::fs::read(out.join("summary.json")).unwrap(), before, "the rerun's results are not there");
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    let before = std::fs::read(out.join("summary.json")).unwrap();
    let again =
        servesim(&["run", "scenarios/quickstart.toml", "--out", out.to_str().unwrap(), "--set", "num_requests=50"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).1.contains("already holds results"), "{}", text(&again).1);
    assert_eq!(std::fs::read(out.join("summary.json")).unwrap(), before, "results were touched");
    let forced = servesim(&[
        "run",
        "scenarios/quickstart.toml",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "num_requests=200",
        "--force",
        "-q",
    ]);
    assert_eq!(forced.status.code(), Some(0));
    assert!(forced.stdout.is_empty());
    assert_ne!(std::fs::read(out.join("summary.json")).unwrap(), before);
}

#[test]
fn seed_flag_changes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str, name: &str| {
        let out = dir.path().join(name);
        let o = servesim(&[
            "run",
            "scenarios/quickstart.toml",
            "--out",
            out.to_str().unwrap(),
            "--set",
            "num_requests=100",
            "--seed",
            seed,
            "-q",
        ]);
        assert_eq!(o.status.code(), Some(0));
        std::fs::read_to_string(out.join("requests.csv")).unwrap()
    };
    assert_ne!(run("1", "a"), run("2", "b"));
    assert_eq!(run("1", "c"), run("1", "d"));
}

#[test]
fn check_prints_memory_plan() {
    let o = servesim(&["check", "scenarios/quickstart.toml"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    for k in
        ["is valid", "Weights (GiB)", "KV capacity (tokens)", "Max concurrent seqs", "max_num_batched_tokens = 8192"]
    {
        assert!(so.contains(k), "check output lacks {k}:\n{so}");
    }
}

#[test]
fn list_models_and_gpus() {
    let (m, _) = text(&servesim(&["list", "models"]));
    for k in [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-2-70b",
        "mistral-7b",
        "mixtral-8x7b",
        "qwen2.5-7b",
        "qwen2.5-72b",
    ] {
        assert!(m.contains(k), "{k} missing from list models");
    }
    let (g, _) = text(&servesim(&["list", "gpus"]));
    for k in ["a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "l40s", "l4", "mi300x"] {
        assert!(g.contains(k), "{k} missing from list gpus");
    }
    assert_eq!(servesim(&["list", "cpus"]).status.code(), Some(2));
}

#[test]
fn malformed_toml_names_line_and_column() {
    let bad = QUICK.replace("rate = 5.0", "rate = = 5.0");
    let (code, _, err) = on_scenario(&bad, &[]);
    assert_eq!(code, 2);
    let line = QUICK.lines().position(|l| l.starts_with("rate = 5.0")).unwrap() + 1;
    assert!(err.contains(&format!("bad.toml:{line}:")), "no line {line} in: {err}");
}

#[test]
fn unknown_key_is_named_with_a_suggestion() {
    let bad = QUICK.replace("max_num_seqs = 256", "max_num_seq = 256");
    let (code, _, err) = on_scenario(&bad, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("max_num_seq"), "{err}");
    assert!(err.contains("did you mean `max_num_seqs`"), "{err}");
    let line = QUICK.lines().position(|l| l.starts_with("max_num_seqs")).unwrap() + 1;
    assert!(err.contains(&format!(":{line}:")), "{err}");
}

#[test]
fn impossible_values_say_what_is_allowed() {
    let cases: [(&str, &str, &str); 5] = [
        ("rate = 5.0", "rate = -3.0", "workload.rate"),
        ("tp = 1", "tp = 0", "hardware.tp"),
        ("gpu_memory_utilization = 0.9", "gpu_memory_utilization = 1.5", "engine.gpu_memory_utilization"),
        (
            "output_tokens = { dist = \"lognormal\", mean = 250, cv = 0.8 }",
            "output_tokens = { dist = \"fixed\", value = 200000 }",
            "workload.output_tokens",
        ),
        ("replicas = 1", "replicas = 0", "hardware.replicas"),
    ];
    for (from, to, key) in cases {
        let bad = QUICK.replace(from, to);
        assert_ne!(bad, QUICK);
        let (code, _, err) = on_scenario(&bad, &[]);
        assert_eq!(code, 2, "{to}: {err}");
        assert!(err.contains(key), "{to}: error does not name {key}: {err}");
        assert!(err.contains("fix:"), "{to}: no fix given: {err}");
        let line = QUICK.lines().position(|l| l.starts_with(from.split(' ').next().unwrap())).unwrap() + 1;
        assert!(err.contains(&format!(":{line}:")), "{to}: line {line} not named: {err}");
    }
}

#[test]
fn model_that_does_not_fit_says_how_to_fix_it() {
    let (code, _, err) = on_scenario(QUICK, &["--set", "model.name=llama-3.1-70b"]);
    assert_eq!(code, 2);
    assert!(err.contains("Llama-3.1-70B in bf16 needs"), "{err}");
    assert!(err.contains("tp = 2"), "{err}");
    assert!(err.contains("fp8"), "{err}");
}

#[test]
fn unknown_model_gets_a_suggestion() {
    let (code, _, err) = on_scenario(QUICK, &["--set", "model.name=llama-3.1-8"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown model \"llama-3.1-8\""), "{err}");
    assert!(err.contains("did you mean"), "{err}");
}

#[test]
fn bad_overrides_and_missing_files() {
    let (code, _, err) = on_scenario(QUICK, &["--set", "workload.rte=3"]);
    assert_eq!(code, 2);
    assert!(err.contains("--set workload.rte=3") && err.contains("did you mean `rate`"), "{err}");
    let (code, _, err) = on_scenario(QUICK, &["--set", "novalue"]);
    assert_eq!(code, 2);
    assert!(err.contains("key.path=value"), "{err}");
    let o = servesim(&["run", "scenarios/does-not-exist.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("does-not-exist.toml"));
    assert_eq!(servesim(&["run"]).status.code(), Some(2));
    assert_eq!(servesim(&["frobnicate"]).status.code(), Some(2));
    // A results folder that cannot be made: the error names the path.
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = file.join("sweep");
    let o =
        servesim(&["sweep", "scenarios/quickstart.toml", "--grid", "workload.rate=4", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains(out.to_str().unwrap()), "{}", text(&o).1);
}

#[test]
fn shipped_scenarios_all_check() {
    for e in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let o = servesim(&["check", p.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(0), "{}: {}", p.display(), text(&o).1);
        }
    }
}

#[test]
fn check_prints_each_pool_and_plan_refuses_pools() {
    let o = servesim(&["check", "scenarios/what-if-disaggregation.toml"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    for k in ["pool \"prefill\" (prefill):", "pool \"decode\" (decode):", "router: least-tokens"] {
        assert!(so.contains(k), "check output lacks {k}:\n{so}");
    }
    assert_eq!(so.matches("KV capacity (tokens)").count(), 2);
    let o = servesim(&["plan", "scenarios/what-if-disaggregation.toml"]);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("[[pools]]") && se.contains("pools[0].replicas"), "{se}");
    // A bad pool key exits 2 naming it.
    let bad = include_str!("../../scenarios/what-if-disaggregation.toml")
        .replace("replicas = 2\n\n[[pools]]", "replicas = 2\nengine = { max_num_seqz = 8 }\n\n[[pools]]");
    let (code, _, se) = on_scenario(&bad, &[]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("pools[0].engine") && se.contains("max_num_seqz"), "{se}");
}

#[test]
fn validate_prints_the_table_and_refuses_unknown_data_sets() {
    let o = servesim(&["validate", "--only", "memory-logs"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(so.contains("memory-logs") && so.contains("vLLM KV tokens") && so.contains("median|e|"), "{so}");
    let o = servesim(&["validate", "--only", "memory-log"]);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(se.contains("unknown data set") && se.contains("memory-logs"), "{se}");
}

#[test]
fn list_engines_and_unknown_presets() {
    let o = servesim(&["list", "engines"]);
    let (so, _) = text(&o);
    for p in ["vllm-v1", "vllm-v0", "sglang", "trtllm", "sarathi"] {
        assert!(so.contains(p), "{so}");
    }
    let (code, _, se) = on_scenario(QUICK, &["--set", "engine.preset=\"vllm-v2\""]);
    assert_eq!(code, 2);
    assert!(se.contains("did you mean \"vllm-v1\"") || se.contains("did you mean \"vllm-v0\""), "{se}");
}

#[test]
fn calibrate_writes_a_profile_and_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    // A per-step CSV with a broken value names the file, the line and the column.
    let steps = dir.path().join("steps.csv");
    std::fs::write(&steps, "prefill_tokens,decode_seqs,decode_context_tokens,measured_s\n512,0,0,0.05\n0,x,100,0.01\n")
        .unwrap();
    let o = servesim(&[
        "calibrate",
        steps.to_str().unwrap(),
        "--scenario",
        "scenarios/quickstart.toml",
        "--preset",
        "vllm-v1",
    ]);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("steps.csv") && se.contains("line 3") && se.contains("decode_seqs"), "{se}");
    // A Splitwise row servesim cannot set up (a GPU not in the catalogue) is
    // skipped with its file and line; errors never point at a file servesim
    // made up (they said splitwise.toml:5:14, issue 26).
    let sw = dir.path().join("sw.csv");
    let head = "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,e2e_time,tensor_parallel\n";
    let row = |gpu: &str, tp: &str| format!("llama2-70b,{gpu},512,1,128,196.25,54.88,7168.98,{tp}\n");
    // Rows of the Splitwise A100 profile (validation/data/splitwise_perf_model_a100.csv).
    let good = "llama2-70b,a100-80gb,1024,1,128,377.06,54.89,7352.52,2\n\
                llama2-70b,a100-80gb,2048,1,128,685.57,54.93,7667.07,2\n\
                llama2-70b,a100-80gb,512,16,128,3220.06,66.08,11624.73,2\n\
                llama2-70b,a100-80gb,512,4,128,843.27,60.61,8546.06,2\n";
    let out = dir.path().join("c");
    let calibrate_sw =
        || servesim(&["calibrate", sw.to_str().unwrap(), "--preset", "vllm-v0", "--out", out.to_str().unwrap()]);
    std::fs::write(&sw, format!("{head}{}{}{good}", row("a100-80gb", "2"), row("zz-gpu", "2"))).unwrap();
    let o = calibrate_sw();
    let (so, se) = text(&o);
    let all = format!("{so}{se}");
    assert!(all.contains("sw.csv:3: llama2-70b on zz-gpu tp 2") && all.contains("unknown gpu"), "{all}");
    assert!(!all.contains("splitwise.toml") && !all.contains("row.toml"), "{all}");
    // A tensor-parallel degree that is not a whole number is a broken row, not tp 1.
    std::fs::write(&sw, format!("{head}{}", row("a100-80gb", "1.5"))).unwrap();
    let o = calibrate_sw();
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{so}{se}");
    assert!(format!("{so}{se}").contains("sw.csv:2: sizes must be whole numbers"), "{so}{se}");
    assert!(se.contains("sw.csv"), "the error does not name the file: {se}");
    // A per-step CSV without a scenario is refused with the fix.
    let o = servesim(&["calibrate", steps.to_str().unwrap(), "--preset", "vllm-v1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--scenario"));
    // Missing file and unknown format.
    let o = servesim(&["calibrate", "no-such.csv", "--preset", "vllm-v1"]);
    assert_eq!(o.status.code(), Some(2));
    let odd = dir.path().join("odd.csv");
    std::fs::write(&odd, "a,b\n1,2\n").unwrap();
    let o = servesim(&["calibrate", odd.to_str().unwrap(), "--preset", "vllm-v1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("cannot tell the format"));
    // A good fit writes the profile and the report.
    let mut rows = String::from("prefill_tokens,decode_seqs,decode_context_tokens,measured_s\n");
    for (p, b, t) in [
        (512, 0, 0.045),
        (2048, 0, 0.16),
        (0, 1, 0.009),
        (0, 16, 0.011),
        (0, 64, 0.016),
        (0, 256, 0.034),
        (1024, 32, 0.09),
    ] {
        rows += &format!("{p},{b},{},{t}\n", b * 1000);
    }
    std::fs::write(&steps, rows).unwrap();
    let out = dir.path().join("cal");
    let o = servesim(&[
        "calibrate",
        steps.to_str().unwrap(),
        "--scenario",
        "scenarios/quickstart.toml",
        "--preset",
        "vllm-v1",
        "--fit",
        "step_overhead_ms",
        "--name",
        "mine",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(so.contains("held-out error") && so.contains("cost.step_overhead_ms"), "{so}");
    let profile = std::fs::read_to_string(out.join("engine/mine.toml")).unwrap();
    assert!(profile.contains("fitted by servesim calibrate"), "{profile}");
    assert!(out.join("calibration.json").is_file());
    // The written profile is a valid preset.
    let o = servesim(&[
        "check",
        "scenarios/quickstart.toml",
        "--models",
        out.to_str().unwrap(),
        "--set",
        "engine.preset=\"mine\"",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
}

/// A fit that leaves a parameter weakly determined writes its report but not
/// the profile (exit 2, naming the key and the fix), unless --force.
#[test]
fn calibrate_refuses_to_write_an_undetermined_profile_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cal");
    let args = |force: bool| {
        let mut v = vec![
            "calibrate",
            "validation:gpustack-serve-h100",
            "--rows",
            "TensorRT-LLM",
            "--rows",
            "qwen3-32b #",
            "--fit",
            "gemm_efficiency_scale,engine.preprocess_ms",
            "--folds",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        if force {
            v.push("--force");
        }
        servesim(&v)
    };
    let o = args(false);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("engine.preprocess_ms weakly determined") && se.contains("--force"), "{se}");
    assert!(out.join("calibration.json").is_file());
    assert!(!out.join("engine/trtllm-calibrated.toml").exists());
    let o = args(true);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    assert!(out.join("engine/trtllm-calibrated.toml").is_file());
}

/// A row servesim cannot set up (here vLLM would refuse Qwen3-32B's context
/// on one H100) is skipped with its reason; the fit goes on with the rest.
#[test]
fn calibrate_skips_an_infeasible_row_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cal");
    let o = servesim(&[
        "calibrate",
        "validation:gpustack-serve-h100",
        "--rows",
        "vLLM",
        "--rows",
        "qwen3-32b #1 |qwen3-14b #1 ",
        "--fit",
        "gemm_efficiency_scale",
        "--folds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(so.contains("skipped: qwen3-32b #1 vLLM SG1000: servesim refuses the set-up"), "{so}");
    assert!(so.contains("over 3 points"), "{so}");
}

/// `check` says which engine keys came from the preset and which the
/// scenario pins over it; comparing presets with --set engine.preset on such
/// a scenario warns that the pinned keys stay.
#[test]
fn check_names_preset_keys_and_pinned_ones_warn_on_a_preset_swap() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pin.toml");
    std::fs::write(
        &f,
        "num_requests = 50\n[model]\nname = \"llama-3.1-8b\"\n[hardware]\ngpu = \"h100-sxm\"\n[engine]\n\
         preset = \"vllm-v1\"\nmax_num_seqs = 128\n[workload]\nrate = 2\n\
         prompt_tokens = { dist = \"fixed\", value = 100 }\noutput_tokens = { dist = \"fixed\", value = 10 }\n",
    )
    .unwrap();
    let o = servesim(&["check", f.to_str().unwrap()]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(so.contains("from the preset vllm-v1: engine.batching"), "{so}");
    assert!(so.contains("set by the scenario over the preset: engine.max_num_seqs = 128 (preset: 1024)"), "{so}");
    assert!(!se.contains("warning"), "{se}");
    let o = servesim(&["check", f.to_str().unwrap(), "--set", "engine.preset=\"vllm-v0\""]);
    let (_, se) = text(&o);
    assert!(se.contains("engine.max_num_seqs = 128 (vllm-v0 sets 256)") && se.contains("as they ship"), "{se}");
}

/// A scenario that names no preset runs the validated default, vllm-v1:
/// `check` says the keys came from it by default, and `run` names it first;
/// `legacy` stays available by name and its line says it is not validated.
#[test]
fn a_scenario_without_a_preset_runs_vllm_v1_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("plain.toml");
    std::fs::write(
        &f,
        "num_requests = 50\n[model]\nname = \"llama-3.1-8b\"\n[hardware]\ngpu = \"h100-sxm\"\n[workload]\nrate = 2\n\
         prompt_tokens = { dist = \"fixed\", value = 100 }\noutput_tokens = { dist = \"fixed\", value = 10 }\n",
    )
    .unwrap();
    let o = servesim(&["check", f.to_str().unwrap()]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(
        so.contains("from the preset vllm-v1 (the default: the scenario names no preset): engine.batching"),
        "{so}"
    );
    assert!(so.contains("cost.model") && so.contains("preprocess_ms = 20.5"), "{so}");
    let out = dir.path().join("out");
    let o = servesim(&["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    let first = so.lines().next().unwrap_or_default();
    assert!(first.starts_with("Engine: vllm-v1 (vLLM V1 0.11.0), kernel cost model; validated on h100-sxm"), "{so}");
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"preset\": \"vllm-v1\""), "{manifest}");
    let o = servesim(&[
        "run",
        f.to_str().unwrap(),
        "--out",
        dir.path().join("leg").to_str().unwrap(),
        "--set",
        "engine.preset=\"legacy\"",
    ]);
    let (so, _) = text(&o);
    assert!(
        so.lines()
            .next()
            .unwrap_or_default()
            .starts_with("Engine: legacy (servesim's teaching engine), roofline cost model: NOT validated"),
        "{so}"
    );
}

/// "How does Llama-3.1-70B on two H100s behave at 30 req/s?" without writing
/// TOML (issue 26): quick flags build the scenario on the spot, each mapped to
/// its key; --save-scenario writes the TOML, which reproduces the run.
#[test]
fn quick_flags_run_without_a_scenario_file_and_save_what_they_ran() {
    let d = tempfile::tempdir().unwrap();
    let (dir, saved) = (d.path().join("q"), d.path().join("used.toml"));
    let o = servesim(&[
        "run",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h100-sxm",
        "--tp",
        "2",
        "--rate",
        "3",
        "--prompt-tokens",
        "1000",
        "--output-tokens",
        "250",
        "--num-requests",
        "300",
        "--save-scenario",
        saved.to_str().unwrap(),
        "-q",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let toml = std::fs::read_to_string(&saved).unwrap();
    for line in [
        "name = \"llama-3.1-70b\"",
        "gpu = \"h100-sxm\"",
        "tp = 2",
        "rate = 3.0",
        "num_requests = 300",
        "max_model_len = 4096",
    ] {
        assert!(toml.contains(line), "{line} not in:\n{toml}");
    }
    assert!(
        toml.contains("dist = \"fixed\"") && toml.contains("value = 1000") && toml.contains("value = 250"),
        "{toml}"
    );
    let again = d.path().join("again");
    let o = servesim(&["run", saved.to_str().unwrap(), "-q", "--out", again.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let summary = |p: &Path| std::fs::read(p.join("summary.json")).unwrap();
    assert_eq!(summary(&dir), summary(&again), "the saved scenario does not reproduce the quick run");
    // Quick flags on top of a file override its keys; neither file nor flags is an error.
    let o = servesim(&[
        "run",
        "scenarios/quickstart.toml",
        "--rate",
        "2",
        "--num-requests",
        "200",
        "-q",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let s: serde_json::Value = serde_json::from_slice(&summary(&again)).unwrap();
    assert_eq!(s["num_requests"], 200);
    let o = servesim(&["run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no scenario") && text(&o).1.contains("--model"), "{}", text(&o).1);
}

/// `--percentiles` chooses the latency percentiles printed, as `vllm bench
/// serve --metric-percentiles` does; bad lists exit 2 naming the entry.
#[test]
fn percentiles_flag_chooses_the_printed_percentiles() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("p");
    let o = servesim(&[
        "run",
        "scenarios/quickstart.toml",
        "--num-requests",
        "300",
        "--percentiles",
        "99.9,50,75",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{se}");
    let ttft: Vec<&str> = so.lines().filter(|l| l.starts_with('P') && l.contains(" TTFT (ms)")).collect();
    let names: Vec<&str> = ttft.iter().map(|l| l.split(" TTFT").next().unwrap()).collect();
    assert_eq!(names, ["P50", "P75", "P99.9"], "{so}");
    assert!(!so.contains("P90 TTFT"), "only the asked percentiles are printed:\n{so}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let printed: f64 = ttft[1].split_whitespace().last().unwrap().parse().unwrap();
    assert!((s["p75_ttft_ms"].as_f64().unwrap() - printed).abs() < 0.01, "{printed} vs {}", s["p75_ttft_ms"]);
    for (bad, needle) in [("99,101", "percentiles[1]"), ("90,90", "listed twice"), ("0.5,nan", "percentiles[1]")] {
        let o = servesim(&["run", "scenarios/quickstart.toml", "--percentiles", bad, "--out", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "--percentiles {bad}");
        assert!(text(&o).1.contains(needle), "--percentiles {bad}: {}", text(&o).1);
    }
}

/// `--help` shows examples, for the program and every command (issue 26).
#[test]
fn help_shows_examples_for_every_command() {
    let top = text(&servesim(&["--help"])).0;
    assert!(top.contains("Examples:") && top.contains("servesim run scenarios/quickstart.toml"), "{top}");
    let commands: Vec<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    for c in &commands {
        let help = text(&servesim(&[c, "--help"])).0;
        assert!(
            help.contains("Examples:") && help.contains(&format!("servesim {c}")),
            "{c} --help has no example:\n{help}"
        );
    }
}

/// `bench --profiles` times every shipped engine profile on one workload and
/// compares each with the fastest.
#[test]
fn bench_profiles_times_every_engine_profile() {
    let out = servesim(&["bench", "--profiles", "--profile-requests", "100"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let catalog = servesim::Catalog::builtin().unwrap();
    let mut ratios = Vec::new();
    for name in catalog.engines.keys() {
        let row = text.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()));
        let row = row.unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
        let ratio: f64 = row.split_whitespace().last().unwrap().trim_end_matches('x').parse().unwrap();
        ratios.push(ratio);
    }
    assert!(ratios.iter().all(|&r| r >= 1.0), "{text}");
    assert!(ratios.contains(&1.0), "the fastest reads 1.0x: {text}");
}

/// `bench --against OTHER` alternates this build with another servesim
/// binary round by round and prints both times, their medians, minima and
/// ratios; `sim_s` is read from the column of that name. A path that is no
/// servesim is bad input (exit 2), as is a bad flag for this build.
#[cfg(unix)]
#[test]
fn bench_against_alternates_two_builds() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    };
    // An "older build" whose table has sim_s in another column, and that counts its calls.
    let calls = dir.path().join("calls");
    let fake = script(
        "old-servesim",
        &format!(
            "echo x >> {}\necho 'servesim bench: ...'\necho '  requests  sim_s  wall_s'\necho \"  $3  1.2345  9.9\"",
            calls.display()
        ),
    );
    let out = servesim(&["bench", "--against", &fake, "--sizes", "300,400", "--rounds", "3"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // One untimed run and three rounds per size.
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 8, "{stdout}");
    for n in ["300", "400"] {
        let rows: Vec<Vec<&str>> = stdout
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|c| c.first() == Some(&n))
            .collect();
        assert_eq!(rows.len(), 5, "three rounds, a median and a min for {n}:\n{stdout}");
        let mut this = Vec::new();
        for (k, r) in rows[..3].iter().enumerate() {
            assert_eq!((r[1], r[3]), ((k + 1).to_string().as_str(), "1.2345"), "{stdout}");
            this.push(r[2].parse::<f64>().unwrap());
        }
        assert!(this.iter().all(|&t| t > 0.0 && t.is_finite()), "{stdout}");
        this.sort_by(f64::total_cmp);
        let (median, min) = (&rows[3], &rows[4]);
        assert_eq!((median[1], median[2], median[3]), ("median", format!("{:.4}", this[1]).as_str(), "1.2345"));
        assert_eq!((min[1], min[2], min[3]), ("min", format!("{:.4}", this[0]).as_str(), "1.2345"));
        let ratio: f64 = median.last().unwrap().parse().unwrap();
        assert!((ratio - this[1] / 1.2345).abs() < 0.001, "{stdout}");
    }
    // Against itself, both columns are timed.
    let me = env!("CARGO_BIN_EXE_servesim");
    let out = servesim(&["bench", "--against", me, "--sizes", "300", "--rounds", "2"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let median: Vec<&str> = stdout.lines().find(|l| l.contains("median")).unwrap().split_whitespace().collect();
    assert!(median[2].parse::<f64>().unwrap() > 0.0 && median[3].parse::<f64>().unwrap() > 0.0, "{stdout}");
    let silent = script("silent", "true");
    let failing = script("failing", "echo 'error: no such subcommand' >&2; exit 2");
    let cases = [
        (vec!["--against", "no/such/servesim"], "--against no/such/servesim: no such file"),
        (vec!["--against", "Cargo.toml"], "Cargo.toml: cannot run it"),
        (vec!["--against", &silent], "silent: it printed no table with a `sim_s` column"),
        (vec!["--against", &failing], "failing: `bench` failed: no such subcommand"),
        (vec!["--against", &fake, "--router", "nope"], "unknown variant `nope`"),
    ];
    for (args, why) in cases {
        let mut all = vec!["bench", "--sizes", "300", "--rounds", "1"];
        all.extend(args);
        let out = servesim(&all);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(why), "{all:?}: {stderr}");
    }
}
