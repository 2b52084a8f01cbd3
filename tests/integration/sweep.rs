//! Sweeps: the grid, determinism across jobs and shards, merging, resuming,
//! confidence intervals and baselines with common random numbers.

use std::path::Path;
use std::process::{Command, Output};

fn servesim(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn ok(args: &[&str]) -> String {
    let o = servesim(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const GRID: [&str; 10] = [
    "--replications",
    "2",
    "--grid",
    "workload.rate=4,8,12",
    "--grid",
    "engine.max_num_seqs=32,256",
    "--set",
    "num_requests=300",
    "--set",
    "warmup_s=0",
];

fn sweep(out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["sweep", "scenarios/quickstart.toml", "--out", out.to_str().unwrap(), "-q"];
    args.extend_from_slice(&GRID);
    args.extend_from_slice(extra);
    ok(&args)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn shards_merge_into_the_unsharded_result_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    let whole = d.path().join("whole");
    sweep(&whole, &["--jobs", "2"]);
    let one_job = d.path().join("one-job");
    sweep(&one_job, &["--jobs", "1"]);
    let mut shards = Vec::new();
    for k in 0..3 {
        let s = d.path().join(format!("shard{k}"));
        sweep(&s, &["--shard", &format!("{k}/3")]);
        shards.push(s);
    }
    let merged = d.path().join("merged");
    let mut args = vec!["merge"];
    let names: Vec<String> = shards.iter().map(|s| s.to_str().unwrap().to_string()).collect();
    args.extend(names.iter().map(|s| s.as_str()));
    args.extend(["--out", merged.to_str().unwrap()]);
    ok(&args);
    // Merging over results already there needs --force (it silently replaced
    // another sweep's results), and then drops the stale report.html.
    std::fs::write(merged.join("report.html"), "an older sweep's report").unwrap();
    let again = servesim(&args);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert!(merged.join("report.html").exists(), "a refused merge changed the folder");
    ok(&[args.as_slice(), &["--force"]].concat());
    assert!(!merged.join("report.html").exists(), "the old report.html was left beside the new results");
    // A missing shard is an error unless --partial.
    let incomplete =
        servesim(&["merge", names[0].as_str(), names[1].as_str(), "--out", d.path().join("m2").to_str().unwrap()]);
    assert_eq!(incomplete.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&incomplete.stderr).contains("missing"));
    ok(&[
        "merge",
        names[0].as_str(),
        names[0].as_str(),
        names[1].as_str(),
        "--partial",
        "--out",
        d.path().join("m3").to_str().unwrap(),
    ]);
    // A shard's torn last line is reported, not dropped silently (issue 26).
    let torn = d.path().join("torn");
    copy_dir(&shards[2], &torn);
    let pts = torn.join("points.jsonl");
    let text = std::fs::read_to_string(&pts).unwrap();
    std::fs::write(&pts, &text[..text.trim_end().len() - 5]).unwrap();
    let torn_name = torn.to_str().unwrap();
    let partial = servesim(&[
        "merge",
        names[0].as_str(),
        names[1].as_str(),
        torn_name,
        "--partial",
        "--out",
        d.path().join("m4").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&partial.stderr);
    assert_eq!(partial.status.code(), Some(0), "{err}");
    assert!(err.contains("points.jsonl:") && err.contains("not a whole point") && err.contains("--resume"), "{err}");
    let whole_merge = servesim(&[
        "merge",
        names[0].as_str(),
        names[1].as_str(),
        torn_name,
        "--out",
        d.path().join("m5").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&whole_merge.stderr);
    assert_eq!(whole_merge.status.code(), Some(2), "{err}");
    assert!(err.contains("missing") && err.contains("not a whole point"), "{err}");
    // A run's folder is results too: merging into it needs --force.
    let run = d.path().join("run");
    let o = servesim(&[
        "run",
        "scenarios/quickstart.toml",
        "--set",
        "num_requests=200",
        "-q",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let into_run = servesim(&[args[..args.len() - 2].to_vec(), vec!["--out", run.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&into_run.stderr);
    assert_eq!(into_run.status.code(), Some(2), "{err}");
    assert!(err.contains("summary.json") && err.contains("--force"), "{err}");
    assert!(!run.join("sweep.csv").exists(), "a refused merge wrote into the run's folder");
    for f in ["sweep.csv", "sweep.json", "tradeoff.svg", "pareto.svg", "hockey.svg"] {
        assert_eq!(read(&whole.join(f)), read(&one_job.join(f)), "{f} depends on --jobs");
        assert_eq!(read(&whole.join(f)), read(&merged.join(f)), "{f}: merged shards differ from the unsharded sweep");
    }
    let csv = String::from_utf8(read(&whole.join("sweep.csv"))).unwrap();
    assert_eq!(csv.lines().count(), 7, "6 points + header");
    let head = csv.lines().next().unwrap();
    for col in
        ["index", "workload.rate", "engine.max_num_seqs", "p99_ttft_ms", "p99_ttft_ms_ci_lo", "request_throughput"]
    {
        assert!(head.split(',').any(|c| c == col), "sweep.csv lacks {col}");
    }
    for f in ["tradeoff.png", "pareto.png", "hockey.png"] {
        assert_eq!(&read(&whole.join(f))[..4], b"\x89PNG");
    }
}

#[test]
fn resume_skips_finished_points_and_refuses_to_clobber() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    sweep(&out, &[]);
    let full = read(&out.join("sweep.csv"));
    // Simulate an interruption: keep two finished points and a torn line.
    let lines: Vec<String> =
        std::fs::read_to_string(out.join("points.jsonl")).unwrap().lines().map(String::from).collect();
    std::fs::write(out.join("points.jsonl"), format!("{}\n{}\n{{\"index\":", lines[0], lines[1])).unwrap();
    let mut args = vec!["sweep", "scenarios/quickstart.toml", "--out", out.to_str().unwrap(), "-q"];
    args.extend_from_slice(&GRID);
    let o = servesim(&args);
    assert_eq!(o.status.code(), Some(2), "an existing sweep must not be overwritten silently");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--resume"));
    sweep(&out, &["--resume"]);
    assert_eq!(read(&out.join("sweep.csv")), full, "resumed sweep differs from the uninterrupted one");
    // A different grid cannot resume this folder.
    let mut other = vec![
        "sweep",
        "scenarios/quickstart.toml",
        "--out",
        out.to_str().unwrap(),
        "--resume",
        "--grid",
        "workload.rate=1,2",
    ];
    other.extend_from_slice(&GRID[4..]);
    assert_eq!(servesim(&other).status.code(), Some(2));
}

#[test]
fn replications_give_confidence_intervals_and_baselines_pair_seeds() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("b.toml");
    let base =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/quickstart.toml")).unwrap();
    // The baseline equals the configuration except for a key that changes nothing.
    std::fs::write(&file, format!("{base}\n[baseline]\n\"cost.per_request_overhead_ms\" = 0.0\n")).unwrap();
    let out = d.path().join("o");
    let stdout = ok(&[
        "sweep",
        file.to_str().unwrap(),
        "--grid",
        "workload.rate=6,12",
        "--replications",
        "4",
        "--set",
        "num_requests=300",
        "--out",
        out.to_str().unwrap(),
        "--report",
    ]);
    // The baseline is visible: a row under each point in the table, and
    // p99 ITL among the report's paired differences (review: missing).
    assert_eq!(stdout.matches("↳ its baseline").count(), 2, "{stdout}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Δ p99_itl_ms") && html.contains("Δ request_goodput"), "no p99 ITL in the baseline table");
    // ... and a line of its own on the charts.
    let svg = std::fs::read_to_string(out.join("hockey.svg")).unwrap();
    assert!(svg.contains("baseline p99"), "the hockey chart draws no baseline");
    let json: serde_json::Value = serde_json::from_slice(&read(&out.join("sweep.json"))).unwrap();
    for p in json["points"].as_array().unwrap() {
        let metrics = p["metrics"].as_array().unwrap();
        let ttft = metrics.iter().find(|m| m[0] == "p99_ttft_ms").unwrap()[1].as_array().unwrap().clone();
        let (mean, lo, hi) = (ttft[0].as_f64().unwrap(), ttft[1].as_f64().unwrap(), ttft[2].as_f64().unwrap());
        assert!(lo < mean && mean < hi, "CI [{lo}, {hi}] around {mean}");
        // Same seeds, same configuration: every paired difference is exactly 0.
        for m in p["vs_baseline"].as_array().unwrap() {
            let v = m[1][0].as_f64();
            assert!(v.is_none_or(|v| v == 0.0), "{}: baseline differs by {v:?}", m[0]);
        }
        assert_eq!(p["replications"], 4);
    }
}

#[test]
fn zip_mode_and_bad_grids() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("z");
    ok(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--zip",
        "--grid",
        "workload.rate=4,8",
        "--grid",
        "engine.max_num_seqs=32,64",
        "--set",
        "num_requests=100",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let csv = String::from_utf8(read(&out.join("sweep.csv"))).unwrap();
    assert_eq!(csv.lines().count(), 3);
    let bad = servesim(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--zip",
        "--grid",
        "workload.rate=4,8",
        "--grid",
        "engine.max_num_seqs=32",
        "--out",
        d.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("equal length"));
    let typo = servesim(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--grid",
        "workload.rte=4,8",
        "--out",
        d.path().join("y").to_str().unwrap(),
    ]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&typo.stderr).contains("did you mean `rate`"),
        "{}",
        String::from_utf8_lossy(&typo.stderr)
    );
    let none = servesim(&["sweep", "scenarios/quickstart.toml", "--out", d.path().join("w").to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(2));
    let shard = servesim(&["sweep", "scenarios/quickstart.toml", "--grid", "workload.rate=4", "--shard", "3/3"]);
    assert_eq!(shard.status.code(), Some(2));
}

#[test]
fn unfit_points_are_reported_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("u");
    let stdout = ok(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--grid",
        "model.name=llama-3.1-8b,llama-3.1-70b",
        "--set",
        "num_requests=100",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("error:"), "{stdout}");
    let csv = String::from_utf8(read(&out.join("sweep.csv"))).unwrap();
    assert!(csv.lines().nth(2).unwrap().contains("needs"), "the 70B point should carry its error");
}

/// A sweep names each point's verdict, and a point that is not a stable
/// service is marked whatever the reason: overloaded, shedding (more than
/// 1% refused by `max_waiting`), failing (more than 1% too long for
/// `max_model_len`) or too short to tell. `--min-requests` lengthens every
/// run and is kept in the manifest.
#[test]
fn sweep_points_carry_their_verdict() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("v");
    let stdout = ok(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--grid",
        "workload.rate=8,40",
        "--grid",
        "engine.max_waiting=20,1000000",
        "--grid",
        "engine.max_model_len=32768,1024",
        "--set",
        "num_requests=3000",
        "--min-requests",
        "4000",
        "--out",
        out.to_str().unwrap(),
    ]);
    let json: serde_json::Value = serde_json::from_slice(&read(&out.join("sweep.json"))).unwrap();
    let verdict = |rate: f64, waiting: i64, len: i64| -> String {
        let p = json["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                let get = |k: &str| p["params"].as_array().unwrap().iter().find(|x| x[0] == k).unwrap()[1].clone();
                get("workload.rate") == rate
                    && get("engine.max_waiting") == waiting
                    && get("engine.max_model_len") == len
            })
            .unwrap();
        p["verdict"].as_str().unwrap().to_string()
    };
    assert_eq!(verdict(8.0, 1_000_000, 32768), "stable");
    assert_eq!(verdict(40.0, 1_000_000, 32768), "overloaded");
    assert_eq!(verdict(40.0, 20, 32768), "shedding");
    // quickstart's lognormal prompts: several percent exceed 1,024 tokens with their output.
    assert_eq!(verdict(8.0, 1_000_000, 1024), "failing");
    assert!(stdout.contains("!! SHEDDING") && stdout.contains("!! FAILING") && stdout.contains("!! OVERLOADED"));
    let csv = String::from_utf8(read(&out.join("sweep.csv"))).unwrap();
    assert!(csv.lines().next().unwrap().contains(",verdict,"));
    // Every run was lengthened to about 4,000 measured requests.
    let measured =
        json["points"][0]["metrics"].as_array().unwrap().iter().find(|m| m[0] == "measured_requests").unwrap()[1][0]
            .as_f64()
            .unwrap();
    assert!(measured > 3500.0, "{measured} measured requests");
    let manifest: serde_json::Value = serde_json::from_slice(&read(&out.join("sweep-manifest.json"))).unwrap();
    assert_eq!(manifest["min_requests"], 4000);
}
