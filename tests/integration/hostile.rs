//! Step 8: what a hostile tester found. Each test failed before its fix.

use crate::common::{outcome, servesim_in};
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_scenario_name_cannot_write_outside_output() {
    // The default output folder is output/<name>: names that are paths were
    // written wherever they pointed.
    let work = tempfile::tempdir().unwrap();
    let scenario = root().join("scenarios/quickstart.toml");
    for name in ["../../x", "/tmp/servesim-escape", "..", ".", "a/b", ".hidden", "a\\b", "x\ny", " "] {
        let set = format!("name={}", toml_string(name));
        let o = servesim_in(
            work.path(),
            &["run", scenario.to_str().unwrap(), "-q", "--set", &set, "--set", "num_requests=200"],
        );
        let (code, _, se) = outcome(&o);
        assert_eq!(code, 2, "name {name:?} was accepted: {se}");
        assert!(se.contains("name"), "the error does not name the key: {se}");
        for s in ["sweep", "plan"] {
            let o = servesim_in(work.path(), &[s, scenario.to_str().unwrap(), "--set", &set]);
            assert_eq!(outcome(&o).0, 2, "{s} accepted name {name:?}");
        }
    }
    // Nothing was written: not in the working folder, not beside it.
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "files written: {left:?}");
    assert!(!Path::new("/tmp/servesim-escape").exists());
    // An empty name takes the file's stem; a plain name is used as given.
    let o = servesim_in(
        work.path(),
        &["run", scenario.to_str().unwrap(), "-q", "--set", "name=\"\"", "--set", "num_requests=200"],
    );
    assert_eq!(outcome(&o).0, 0);
    assert!(work.path().join("output/quickstart/summary.json").is_file());
    let o = servesim_in(
        work.path(),
        &["run", scenario.to_str().unwrap(), "-q", "--set", "name=ok-1.2_b", "--set", "num_requests=200"],
    );
    assert_eq!(outcome(&o).0, 0);
    assert!(work.path().join("output/ok-1.2_b/summary.json").is_file());
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

#[test]
fn a_sweep_whose_points_fail_exits_non_zero_and_says_why() {
    // Every point failing (a typo in model.name) used to exit 0.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let args =
        ["sweep", "scenarios/quickstart.toml", "-q", "--set", "num_requests=100", "--out", out.to_str().unwrap()];
    let o = servesim_in(root(), &[&args[..], &["--grid", "model.name=llama-3.1-8bb,qwen-x"]].concat());
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("2 of 2 sweep points failed") && se.contains("unknown model"), "{se}");
    // One failing point of two (a grid may hold configurations that cannot
    // run): the other's results are written, the failure is named, exit 0.
    let o = servesim_in(root(), &[&args[..], &["--force", "--grid", "model.name=llama-3.1-8b,qwen-x"]].concat());
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 0, "{se}");
    assert!(se.contains("warning: 1 of 2 sweep points failed") && se.contains("unknown model"), "{se}");
    assert!(out.join("sweep.csv").is_file());
}

#[test]
fn a_seed_beyond_what_toml_holds_is_refused_up_front() {
    // --seed >= 2^63 broke sweep, capacity and baselines half-way with
    // "integer `-1`, expected u64" (a scenario file cannot hold such a seed).
    let big = "9223372036854775808";
    for cmd in ["run", "sweep", "capacity", "plan"] {
        let scenario = if cmd == "plan" { "scenarios/plan-70b-chat.toml" } else { "scenarios/quickstart.toml" };
        let o = servesim_in(root(), &[cmd, scenario, "--seed", big]);
        let (code, _, se) = outcome(&o);
        assert_eq!(code, 2, "{cmd}: {se}");
        assert!(se.contains("--seed") && se.contains("9223372036854775807"), "{cmd}: {se}");
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let o = servesim_in(
        root(),
        &[
            "run",
            "scenarios/what-if-chunked-prefill.toml",
            "-q",
            "--seed",
            "9223372036854775807",
            "--set",
            "num_requests=200",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 0, "the largest seed runs, with its baseline: {se}");
    let sweep = d.path().join("s");
    let o = servesim_in(
        root(),
        &[
            "sweep",
            "scenarios/quickstart.toml",
            "-q",
            "--seed",
            "9223372036854775807",
            "--replications",
            "2",
            "--grid",
            "workload.rate=2,4",
            "--set",
            "num_requests=200",
            "--out",
            sweep.to_str().unwrap(),
        ],
    );
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 0, "the largest seed sweeps: {se}");
}

#[test]
fn a_length_file_with_a_half_cut_row_is_refused_with_its_line() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("lengths.csv"),
        "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n3772,54,3826,69.85\n2015,15\n",
    )
    .unwrap();
    let scenario = QUICK.replace(
        "prompt_tokens = { dist = \"lognormal\", mean = 1000, cv = 1.0 }",
        "prompt_tokens = { dist = \"empirical\", file = \"lengths.csv\", column = \"num_prefill_tokens\" }",
    );
    assert_ne!(scenario, QUICK);
    let (code, se) = run_text(d.path(), &scenario);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("lengths.csv:3") && se.contains("the row has 2 fields"), "{se}");
    assert!(!se.contains("on_bad_row"), "a length file has no on_bad_row key: {se}");
}

const QUICK: &str = include_str!("../../scenarios/quickstart.toml");

/// Writes `toml` as `s.toml` in `dir` and runs it (50 requests); returns (code, stderr).
fn run_text(dir: &Path, toml: &str) -> (i32, String) {
    let f = dir.join("s.toml");
    std::fs::write(&f, toml).unwrap();
    let out = dir.join("out");
    let o = servesim_in(
        dir,
        &["run", f.to_str().unwrap(), "-q", "--set", "num_requests=200", "--out", out.to_str().unwrap()],
    );
    let (code, _, se) = outcome(&o);
    (code, se)
}

#[test]
fn a_warm_up_beyond_the_last_arrival_and_absurd_means_are_refused() {
    let d = tempfile::tempdir().unwrap();
    // 50 requests at 10 req/s arrive within ~5 s: a 1,000 s warm-up measured
    // nothing and printed a run of zeros with exit code 0.
    let (code, se) = run_text(d.path(), &QUICK.replace("warmup_s = ", "warmup_s = 1000 # was "));
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("warmup_s") && se.contains("no request is measured") && se.contains("s.toml"), "{se}");
    // The library refuses it too.
    let loaded = servesim::scenario::load_scenario(
        &root().join("scenarios/quickstart.toml"),
        &["num_requests=200".to_string(), "warmup_s=1000".to_string()],
    )
    .unwrap();
    let err = servesim::run(&loaded.scenario, &servesim::Catalog::builtin().unwrap()).unwrap_err().to_string();
    assert!(err.contains("no request is measured"), "{err}");
    // A lognormal mean of 1e20 tokens (and its relatives) was accepted.
    for (dist, key) in [
        ("{ dist = \"lognormal\", mean = 1e20, cv = 1.0 }", "mean"),
        ("{ dist = \"lognormal\", median = 1e9, sigma = 1.0 }", "median"),
        ("{ dist = \"exponential\", mean = 1e12 }", "mean"),
        ("{ dist = \"normal\", mean = 1e15, std = 10 }", "mean"),
    ] {
        let s = QUICK.replace("{ dist = \"lognormal\", mean = 1000, cv = 1.0 }", dist);
        let (code, se) = run_text(d.path(), &s);
        assert_eq!(code, 2, "{dist}: {se}");
        assert!(se.contains("prompt_tokens") && se.contains(key) && se.contains("10,000,000"), "{dist}: {se}");
    }
}

#[test]
fn an_override_cannot_smuggle_a_second_key() {
    // `--set 'engine.max_num_seqs=64<newline>duration_s=5'` used to set 64 and
    // drop the rest silently; the value is now a string, which the key refuses.
    let o = crate::common::servesim_in(
        root(),
        &["check", "scenarios/quickstart.toml", "--set", "engine.max_num_seqs=64\nduration_s=5"],
    );
    let (code, _, se) = crate::common::outcome(&o);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("max_num_seqs"), "{se}");
}

#[test]
fn a_trace_must_be_a_regular_text_file() {
    // file = "/dev/zero" read until memory ran out.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("binary.csv"), [0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00]).unwrap();
    std::fs::create_dir(d.path().join("folder.csv")).unwrap();
    // A named pipe: opening it would wait for a writer forever.
    assert!(std::process::Command::new("mkfifo").arg(d.path().join("pipe.csv")).status().unwrap().success());
    let base = std::fs::read_to_string(root().join("scenarios/code-completion.toml")).unwrap();
    for (file, says) in [
        ("/dev/zero", "is not a regular file"),
        ("pipe.csv", "is not a regular file"),
        ("folder.csv", "is not a regular file"),
        ("binary.csv", "is not UTF-8 text"),
        ("missing.csv", "cannot read"),
    ] {
        let s = base.replace("file = \"traces/AzureLLMInferenceTrace_code.csv\"", &format!("file = \"{file}\""));
        assert_ne!(s, base);
        let (code, se) = run_text(d.path(), &s);
        assert_eq!(code, 2, "{file}: {se}");
        assert!(se.contains(says) && se.contains("workload.trace.file"), "{file}: {se}");
    }
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_as_out_is_named_as_such() {
    // It was reported as "File exists".
    let d = tempfile::tempdir().unwrap();
    let link = d.path().join("out");
    std::os::unix::fs::symlink(d.path().join("nowhere"), &link).unwrap();
    for cmd in ["run", "sweep"] {
        let mut args = vec![cmd, "scenarios/quickstart.toml", "-q", "--set", "num_requests=200"];
        if cmd == "sweep" {
            args.extend(["--grid", "workload.rate=5,10"]);
        }
        args.extend(["--out", link.to_str().unwrap()]);
        let o = servesim_in(root(), &args);
        let (code, _, se) = outcome(&o);
        assert_eq!(code, 2, "{cmd}: {se}");
        assert!(se.contains("symbolic link") && se.contains("nowhere") && !se.contains("File exists"), "{cmd}: {se}");
    }
}

#[test]
fn header_errors_quote_a_short_printable_prefix() {
    // The whole first line of whatever file was named was quoted: 26 kB for a
    // wide header, terminal escapes passed through raw.
    let d = tempfile::tempdir().unwrap();
    let wide: Vec<String> = (0..3000).map(|i| format!("col{i}")).collect();
    std::fs::write(d.path().join("wide.csv"), format!("{}\n1,2,3\n", wide.join(","))).unwrap();
    std::fs::write(d.path().join("ctl.csv"), "\u{1b}[31mred\u{7},b,c\n1,2,3\n").unwrap();
    let base = std::fs::read_to_string(root().join("scenarios/code-completion.toml")).unwrap();
    for (file, format) in [
        ("wide.csv", "format = \"csv\"\nprompt_column = \"p\"\noutput_column = \"o\""),
        ("wide.csv", "format = \"azure\""),
        ("ctl.csv", "format = \"azure\""),
        ("ctl.csv", "format = \"csv\"\nprompt_column = \"p\"\noutput_column = \"o\""),
    ] {
        let s = base
            .replace("file = \"traces/AzureLLMInferenceTrace_code.csv\"", &format!("file = \"{file}\""))
            .replace("format = \"azure\"", format);
        let (code, se) = run_text(d.path(), &s);
        assert_eq!(code, 2, "{file}: {se}");
        assert!(se.len() < 1200, "{file}: a {}-byte error", se.len());
        assert!(!se.contains('\u{1b}') && !se.contains('\u{7}'), "{file}: raw control characters: {se:?}");
    }
}

#[test]
fn skipping_bad_rows_cannot_drop_much_of_a_trace() {
    // One far-future timestamp made every later row "go backwards": with
    // on_bad_row = "skip", half the trace was dropped without a word.
    let d = tempfile::tempdir().unwrap();
    let trace = std::fs::read_to_string(root().join("scenarios/traces/AzureLLMInferenceTrace_code.csv")).unwrap();
    let mut lines: Vec<&str> = trace.lines().collect();
    let n = lines.len();
    lines.insert(n / 2, "2031-01-01 00:00:00.000000,100,10");
    std::fs::write(d.path().join("jump.csv"), lines.join("\n") + "\n").unwrap();
    // A few bad rows (well under 1%) are still skipped and counted.
    let mut few: Vec<&str> = trace.lines().collect();
    few.insert(100, "2023-11-16 18:15:46.6805,x,1");
    few.insert(200, "garbage");
    std::fs::write(d.path().join("few.csv"), few.join("\n") + "\n").unwrap();
    let base = std::fs::read_to_string(root().join("scenarios/code-completion.toml")).unwrap();
    let with = |file: &str| {
        base.replace(
            "file = \"traces/AzureLLMInferenceTrace_code.csv\"",
            &format!("file = \"{file}\"\non_bad_row = \"skip\""),
        )
    };
    let (code, se) = run_text(d.path(), &with("jump.csv"));
    assert_eq!(code, 2, "{se}");
    let line = n / 2 + 1;
    assert!(se.contains(&format!("jump.csv:{line}")), "the far-future row is not named: {se}");
    assert!(se.contains("more than the 1%") && se.contains("jumps ahead"), "{se}");
    let f = d.path().join("s.toml");
    std::fs::write(&f, with("few.csv")).unwrap();
    let o = servesim_in(d.path(), &["run", f.to_str().unwrap(), "--set", "duration_s=60", "--out", "o"]);
    let (code, so, se) = outcome(&o);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("Bad rows skipped") && so.contains("2 (first: few.csv: line 101"), "{so}");
}

#[test]
fn no_single_value_makes_a_run_unbounded() {
    let run = |args: &[&str]| {
        let o = servesim_in(root(), args);
        let (code, _, se) = outcome(&o);
        (code, se)
    };
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o");
    let out = out.to_str().unwrap();
    // A vanishing rate: the clock could not resolve the latencies (0.00 ms, "stable", exit 0).
    let (code, se) = run(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "workload.rate=1e-15",
        "--set",
        "num_requests=300",
        "--out",
        out,
    ]);
    assert_eq!(code, 2, "{se}");
    assert!(
        se.contains("workload.rate") && se.contains("cannot resolve a microsecond") && se.contains("years"),
        "{se}"
    );
    // A huge request count is refused with the estimate and the flag that allows it.
    let (code, se) = run(&["run", "scenarios/quickstart.toml", "--set", "num_requests=1000000000", "--out", out]);
    assert_eq!(code, 2, "{se}");
    assert!(
        se.contains("about 1.00e9 requests") && se.contains("time binds") && se.contains("--max-projected-time"),
        "{se}"
    );
    // Memory is flat past 10⁶ requests: the estimate says so, and does not refuse 10⁸.
    let (code, se) = run(&["check", "scenarios/quickstart.toml", "--set", "num_requests=100000000"]);
    assert_eq!(code, 0, "{se}");
    // Every key that multiplies memory is counted, and the one that binds is named (issue 26).
    for (scenario, set, key, binds) in [
        ("quickstart", "lora={adapters=1000000000,rank=16,max_loras=8}", "lora.adapters", "memory binds"),
        ("closed-loop-concurrency", "workload.closed_loop.users=1000000000", "closed_loop.users", "memory binds"),
        ("multi-turn-chat", "workload.rate=1e6", "duration_s", "32-bit"),
        ("multi-turn-chat", "workload.rate=1e5", "duration_s", "time binds"),
    ] {
        let (code, se) = run(&["check", &format!("scenarios/{scenario}.toml"), "--set", set]);
        assert_eq!(code, 2, "{set}: {se}");
        assert!(se.contains(key) && se.contains(binds), "{set}: {se}");
    }
    // An overloaded run whose backlog outgrows --max-memory is stopped, and writes nothing.
    let (code, se) = run(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "num_requests=3000000",
        "--set",
        "workload.rate=100000",
        "--set",
        "warmup_s=1",
        "--set",
        "engine.preset=legacy",
        "--max-memory",
        "0.15",
        "--out",
        out,
        "--force",
    ]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("backlog grows without bound") && se.contains("--max-memory"), "{se}");
    // ... and so is a horizon beyond --max-horizon (2,000 s here), for sweeps and
    // capacity searches as well.
    for cmd in ["run", "sweep", "capacity"] {
        let args: Vec<&str> = [cmd, "scenarios/quickstart.toml"]
            .into_iter()
            .chain(match cmd {
                "sweep" => vec!["-q", "--out", out, "--grid", "workload.rate=5,10"],
                "run" => vec!["-q", "--out", out],
                _ => vec![],
            })
            .chain(["--max-horizon", "1000", "--set", "num_requests=20000"])
            .collect();
        let (code, se) = run(&args);
        assert_eq!(code, 2, "{cmd}: {se}");
        assert!(se.contains("--max-horizon"), "{cmd}: {se}");
    }
    // A KV link of 1e-12 GB/s looped forever: the clock guard stops it.
    let (code, se) = run(&[
        "run",
        "scenarios/what-if-disaggregation.toml",
        "--set",
        "disaggregation.kv_transfer_gbps=1e-12",
        "--out",
        out,
        "--force",
    ]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("the simulation was stopped") && se.contains("kv_transfer_gbps"), "{se}");
    // Under the kernel cost model too: steps taken inline, after the last
    // arrival, go back to the event loop at the clock limit (issue 26).
    let (code, se) = run(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "cost.model=\"kernel\"",
        "--set",
        "cost.attention_efficiency_scale=1e-12",
        "--set",
        "num_requests=300",
        "--out",
        out,
        "--force",
    ]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("the simulation was stopped") && se.contains("beyond the 1e9 s"), "{se}");
    // Times no clock can represent are refused before they hang a run at flat memory.
    for (scenario, set) in [
        ("diurnal-day", "workload.diurnal.phase_s=1e308"),
        ("mixed-classes", "workload.classes[2].on_off.off_mean_s=1e308"),
        ("quickstart", "engine.preprocess_ms=1e300"),
    ] {
        let (code, se) =
            run(&["check", &format!("scenarios/{scenario}.toml"), "--set", "duration_s=120", "--set", set]);
        assert_eq!(code, 2, "{set}: {se}");
        let key = set.split('=').next().unwrap();
        assert!(se.contains(key) && se.contains("no simulated clock can represent it"), "{set}: {se}");
    }
    // --max-wall-time stops a long run and writes nothing.
    let fresh = d.path().join("fresh");
    let (code, se) = run(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "num_requests=20000000",
        "--max-wall-time",
        "0.5",
        "--out",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("--max-wall-time"), "{se}");
    assert!(!fresh.join("summary.json").exists());
}

#[test]
fn a_broken_file_in_models_breaks_only_what_uses_it() {
    // One broken file in ./models/ broke every command.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("models/llm")).unwrap();
    std::fs::create_dir_all(d.path().join("models/gpu")).unwrap();
    std::fs::write(d.path().join("models/llm/broken-model.toml"), "name = \"Broken\"\nhidden_size = [oops\n").unwrap();
    std::fs::write(d.path().join("models/gpu/odd-gpu.toml"), "this is not toml at all").unwrap();
    std::fs::copy(root().join("scenarios/quickstart.toml"), d.path().join("q.toml")).unwrap();
    // A scenario that does not use them runs, with a warning naming each file.
    let o = servesim_in(d.path(), &["run", "q.toml", "-q", "--set", "num_requests=200", "--out", "o"]);
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 0, "{se}");
    assert!(se.contains("broken-model.toml") && se.contains("odd-gpu.toml") && se.contains("warning"), "{se}");
    let o = servesim_in(d.path(), &["list", "models"]);
    assert_eq!(outcome(&o).0, 0);
    // One that names a broken file gets that file's error, not "unknown model".
    let o = servesim_in(
        d.path(),
        &["run", "q.toml", "-q", "--set", "model.name=broken-model", "--set", "num_requests=200", "--out", "p"],
    );
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("error: ") && se.contains("broken-model.toml:2") && !se.contains("unknown model"), "{se}");
    let o = servesim_in(d.path(), &["check", "q.toml", "--set", "hardware.gpu=odd-gpu"]);
    let (code, _, se) = outcome(&o);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("odd-gpu.toml") && !se.contains("unknown gpu"), "{se}");
}

#[test]
fn a_run_folder_is_replaced_all_or_nothing_and_stale_temporaries_go() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "scenarios/what-if-router.toml", "-q", "--set", "duration_s=40", "--out"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        let o = servesim_in(root(), &args);
        let (code, _, se) = outcome(&o);
        assert_eq!(code, 0, "{se}");
    };
    run(&["--report"]);
    for f in ["manifest.json", "summary.json", "baseline-summary.json", "report.html"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // kill -9 left temporaries that later runs never removed: a dead
    // process's are removed now, a live one's (ours) stay.
    std::fs::write(out.join(".requests.csv.tmp-999999999"), "partial").unwrap();
    // A chart temporary from a full disk keeps its extension (issue 26).
    std::fs::write(out.join(".pareto.png.tmp-999999999.png"), "partial").unwrap();
    std::fs::create_dir(out.join(".staging-999999999-0")).unwrap();
    std::fs::write(out.join(".staging-999999999-0/summary.json"), "{}").unwrap();
    let live = format!(".summary.json.tmp-{}", std::process::id());
    std::fs::write(out.join(&live), "ours").unwrap();
    // A new run without --report and without a baseline replaces every file
    // of the old one: nothing of it stays beside the new results. A folder
    // a servesim run wrote is replaced without --force: rerunning is the
    // commonest thing a user does (issue 26).
    std::fs::write(out.join("notes.txt"), "the user's own file").unwrap();
    let rerun = |out: &Path| {
        servesim_in(
            root(),
            &["run", "scenarios/quickstart.toml", "--set", "num_requests=300", "--out", out.to_str().unwrap()],
        )
    };
    let (code, so, se) = outcome(&rerun(&out));
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("(replacing the previous run's)"), "{so}");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(!names.iter().any(|n| n.contains("999999999")), "stale temporaries left: {names:?}");
    assert!(names.contains(&live) && names.contains(&"notes.txt".to_string()), "{names:?}");
    assert!(!names.contains(&"baseline-summary.json".to_string()) && !names.contains(&"report.html".to_string()));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(m.to_string().contains("quickstart"), "the manifest is the new run's");
    // Results servesim did not write (no manifest of a run) still need --force.
    let foreign = d.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("summary.json"), "{\"mine\": 1}").unwrap();
    let (code, _, se) = outcome(&rerun(&foreign));
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("already holds results") && se.contains("--force"), "{se}");
    // A folder another run is writing is refused, not raced (two `run --out X`
    // at once both exited 0 and one set of results disappeared).
    std::fs::write(out.join(".lock"), std::process::id().to_string()).unwrap();
    let (code, _, se) = outcome(&rerun(&out));
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("another run") && se.contains(".lock"), "{se}");
    std::fs::remove_file(out.join(".lock")).unwrap();
    assert_eq!(outcome(&rerun(&out)).0, 0);
    assert!(!out.join(".lock").exists(), "the lock outlived its run");
}

#[test]
fn a_run_that_fails_while_writing_leaves_the_old_results_untouched() {
    // A full disk during --force left a new summary.json beside the old
    // manifest.json. Files are staged and moved into place only when all are
    // written: a failure (here: the staging is dropped) changes nothing.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let o = servesim_in(
        root(),
        &["run", "scenarios/quickstart.toml", "-q", "--set", "num_requests=300", "--out", out.to_str().unwrap()],
    );
    assert_eq!(outcome(&o).0, 0);
    let before: Vec<(String, Vec<u8>)> = {
        let mut v: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    };
    {
        let staging = servesim::files::Staging::new(&out).unwrap();
        std::fs::write(staging.path().join("summary.json"), "{\"half\": true}").unwrap();
        // ... the disk fills here: the staging is dropped, not committed.
    }
    let mut after: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    after.sort();
    assert!(before == after, "the results folder changed");
}

#[test]
fn one_sweep_writes_a_folder_at_a_time_and_duplicates_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let sweep = |extra: &[&str]| {
        let mut args = vec!["sweep", "scenarios/quickstart.toml", "-q", "--set", "num_requests=200"];
        args.extend(["--grid", "workload.rate=4,8", "--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        outcome(&servesim_in(root(), &args))
    };
    assert_eq!(sweep(&[]).0, 0);
    // A sweep in progress holds the folder: a second one (two --resume at
    // once duplicated 67 of 80 points) is refused. Our own pid stands for a
    // live sweep; a dead one's lock is taken over.
    std::fs::write(out.join(".lock"), std::process::id().to_string()).unwrap();
    let (code, _, se) = sweep(&["--resume"]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("another sweep") && se.contains(".lock"), "{se}");
    std::fs::write(out.join(".lock"), "999999999").unwrap();
    let (code, _, se) = sweep(&["--resume"]);
    assert_eq!(code, 0, "{se}");
    assert!(!out.join(".lock").exists(), "the lock outlived the sweep");
    // A points file with a point twice (what two writers leave) is refused by
    // plot and merge instead of drawn twice.
    let points = std::fs::read_to_string(out.join("points.jsonl")).unwrap();
    let first = points.lines().next().unwrap();
    std::fs::write(out.join("points.jsonl"), format!("{points}{first}\n")).unwrap();
    for args in
        [vec!["plot", out.to_str().unwrap()], vec!["merge", out.to_str().unwrap(), "--out", "/tmp/never-written-m"]]
    {
        let (code, _, se) = outcome(&servesim_in(root(), &args));
        assert_eq!(code, 2, "{args:?}: {se}");
        assert!(se.contains("is there twice"), "{args:?}: {se}");
    }
    assert!(!Path::new("/tmp/never-written-m").exists());
}

#[test]
fn type_errors_name_the_key_and_what_is_allowed() {
    // "invalid type: integer `5`, expected internally tagged enum LengthDist"
    // named no key: 1,600 of 4,169 rejected mutations did not.
    let d = tempfile::tempdir().unwrap();
    for (from, to, key, allowed) in [
        (
            "prompt_tokens = { dist = \"lognormal\", mean = 1000, cv = 1.0 }",
            "prompt_tokens = 5",
            "workload.prompt_tokens",
            "a length distribution",
        ),
        ("max_num_seqs = 256", "max_num_seqs = \"many\"", "engine.max_num_seqs", "a whole number"),
        ("tp = 1", "tp = 1.5", "hardware.tp", "a whole number"),
        ("rate = 5.0", "rate = \"fast\"", "workload.rate", "expected a number"),
        ("ttft_ms = 500", "ttft_ms = true", "slo.ttft_ms", "expected a number"),
        ("seed = 7", "seed = [7]", "seed", "a whole number"),
    ] {
        let text = QUICK.replace(from, to);
        assert_ne!(text, QUICK, "{from}");
        let (code, se) = run_text(d.path(), &text);
        assert_eq!(code, 2, "{to}: {se}");
        assert!(se.contains(&format!("`{key}`")) && se.contains(allowed) && se.contains("fix:"), "{to}: {se}");
        assert!(!se.contains("internally tagged") && !se.contains("expected u32"), "{to}: {se}");
    }
}

#[test]
fn long_runs_show_progress_on_a_terminal_only() {
    // A 10^7-request run took 70 s and printed nothing. `script` gives the
    // binary a terminal (util-linux, in every Debian install).
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to provide a terminal");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o");
    let cmd = |extra: &str| {
        format!(
            "{} run scenarios/quickstart.toml --set num_requests=1000000 --force --out {} {extra}",
            env!("CARGO_BIN_EXE_servesim"),
            out.display()
        )
    };
    let on_tty = |extra: &str| {
        let o = Command::new("script").args(["-qec", &cmd(extra), "/dev/null"]).current_dir(root()).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = on_tty("");
    assert!(shown.contains("simulating") && shown.contains("requests"), "no progress on a terminal: {shown:?}");
    assert!(!on_tty("-q").contains("simulating"), "-q must stay quiet");
    // Piped: no progress at all.
    let o = servesim_in(
        root(),
        &[
            "run",
            "scenarios/quickstart.toml",
            "--set",
            "num_requests=1000000",
            "--force",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let (code, so, se) = outcome(&o);
    assert_eq!(code, 0);
    assert!(!so.contains("simulating") && !se.contains("simulating"), "progress when piped: {se}");
}

#[test]
fn calibrate_tables_with_a_cut_row_or_missing_column_are_errors_not_panics() {
    // Found by the calibrate fuzz target: an offline table with a short row
    // panicked in the table reader ("row 37 has 15 fields, header 16").
    let d = tempfile::tempdir().unwrap();
    let offline = std::fs::read_to_string(root().join("validation/data/trtllm_perf_overview_a100_l40s.csv")).unwrap();
    let mut lines: Vec<String> = offline.lines().map(String::from).collect();
    let last = lines.len() - 1;
    let cut = lines[last].rsplit_once(',').unwrap().0.to_string();
    lines[last] = cut;
    let cases = [
        ("cut.csv", lines.join("\n") + "\n", format!("cut.csv:{}", last + 1)),
        (
            "nocol.csv",
            "model,gpu,precision,tp,isl,osl\nm,g,fp8,1,128,128\n"
                .replace("isl,osl", "isl,osl,total_output_tok_s")
                .replace("tp,", ""),
            "column `tp` is missing".to_string(),
        ),
        (
            "split.csv",
            "model,hardware,prompt_time,token_time\nllama,a100,1,2\n".to_string(),
            "column `tensor_parallel` is missing".to_string(),
        ),
    ];
    for (name, text, says) in cases {
        std::fs::write(d.path().join(name), text).unwrap();
        let o = servesim_in(d.path(), &["calibrate", name, "--preset", "trtllm", "--out", "cal"]);
        let (code, _, se) = outcome(&o);
        assert_eq!(code, 2, "{name}: {se}");
        assert!(se.contains(&says), "{name}: {se}");
    }
    // Also found by the fuzzer: a Splitwise row with token_size = 0 panicked
    // in a clamp; such rows are now skipped with their reason.
    let splitwise = std::fs::read_to_string(root().join("validation/data/splitwise_perf_model_a100.csv")).unwrap();
    let mut lines: Vec<String> = splitwise.lines().map(String::from).collect();
    let head: Vec<&str> = lines[0].split(',').collect();
    let k = head.iter().position(|h| *h == "token_size").unwrap();
    let mut f: Vec<String> = lines[1].split(',').map(String::from).collect();
    f[k] = "0".into();
    lines[1] = f.join(",");
    std::fs::write(d.path().join("zero.csv"), lines.join("\n") + "\n").unwrap();
    let o = servesim_in(
        d.path(),
        &[
            "calibrate",
            "zero.csv",
            "--scenario",
            root().join("scenarios/quickstart.toml").to_str().unwrap(),
            "--out",
            "cal2",
        ],
    );
    let (code, so, se) = outcome(&o);
    assert!(code == 0 || code == 2, "{se}");
    assert!(format!("{so}{se}").contains("sizes must be whole numbers") || code == 2, "{so}{se}");
}
