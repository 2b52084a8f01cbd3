//! Runs that stream their records instead of keeping them (Step 8: 10⁷
//! requests in bounded memory): the same summary and the same requests.csv
//! bytes as a run that keeps them, memory that follows the requests in
//! flight, and a summary past the exact limit within its stated error.

use crate::common::{self, outcome, servesim_in};
use servesim::metrics::hist;
use servesim::sim::{Recording, SAMPLE, TIMELINE_REQUESTS, simulate, simulate_recording};
use servesim::summarize::summarize;

/// Two classes with their own SLOs, a warm-up, timeouts and a queue limit:
/// every kind of terminal state, at a load near saturation.
const MIXED: &str = r#"
name = "streaming"
seed = 7
num_requests = 6000
warmup_s = 20
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[engine]
preset = "legacy"
max_num_seqs = 64
max_wait_s = 4
max_waiting = 400
[workload]
arrival = "poisson"
rate = 38
prompt_tokens = { dist = "lognormal", mean = 900, cv = 1.2 }
output_tokens = { dist = "lognormal", mean = 220, cv = 1.0 }
[[workload.classes]]
name = "chat"
weight = 3
slo = { ttft_ms = 500, tpot_ms = 40 }
[[workload.classes]]
name = "batch"
weight = 1
priority = 1
"#;

#[test]
fn a_streamed_run_writes_the_same_summary_and_csv_as_a_kept_one() {
    let s = common::setup(MIXED, &[]);
    let kept = servesim::run_setup(&s, s.scenario.seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.csv");
    let mut csv = servesim::export::RequestsCsv::create(&path, &s).unwrap();
    let streamed = servesim::run_setup_with(&s, s.scenario.seed, Recording::Stream(Some(&mut csv)));
    csv.finish().unwrap();
    assert_eq!(serde_json::to_string(&kept.summary).unwrap(), serde_json::to_string(&streamed.summary).unwrap());
    let mut want = Vec::new();
    let workload = s.workload.clone();
    let classes: Vec<String> = workload.classes.iter().map(|c| c.name.clone()).collect();
    servesim::export::write_requests_csv(&mut want, &kept.output.records, &[], s.scenario.warmup_s, &classes, |r| {
        servesim::metrics::slo_met(&workload, r)
    })
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), want, "requests.csv differs when streamed");
    // The run had every terminal state.
    let m = &kept.summary.metrics;
    assert!(m.completed > 0 && m.failures_by_reason.contains_key("timed_out"), "{:?}", m.failures_by_reason);
    // Memory: the streamed run held the requests in flight, not the run.
    let out = &streamed.output;
    assert!(!out.kept && out.records.len() == TIMELINE_REQUESTS as usize);
    assert_eq!(streamed.summary.num_requests, 6000);
    assert!(out.peak_live_records < 1500, "held {} records at once", out.peak_live_records);
    // Short runs keep every record in the chart sample.
    assert_eq!((out.sample.records.len(), out.sample.stride), (6000, 1));
    for (a, b) in out.sample.records.iter().zip(&kept.output.records) {
        assert_eq!(a.arrival.to_bits(), b.arrival.to_bits());
    }
}

/// One-token requests through one server, 5 ms each at 150 req/s: quick
/// enough for a quarter of a million requests in a debug build.
fn quick(n: u64, rate: f64) -> String {
    common::SINGLE_SERVER
        .replace("num_requests = 1000\n", &format!("num_requests = {n}\n"))
        .replace("rate = 60\n", &format!("rate = {rate}\n"))
        .replace("step_time_ms = 10\n", "step_time_ms = 5\n")
}

#[test]
fn the_chart_sample_of_a_long_run_thins_by_doubling() {
    let s = common::setup(&quick(250_000, 150.0), &[]);
    let kept = simulate(&s, s.scenario.seed);
    let streamed = simulate_recording(&s, s.scenario.seed, Recording::Stream(None));
    let stride = streamed.sample.stride as usize;
    assert!(stride.is_power_of_two() && stride > 1, "stride {stride}");
    let sample = &streamed.sample.records;
    assert!((SAMPLE..2 * SAMPLE).contains(&sample.len()), "{} sampled", sample.len());
    for (k, r) in sample.iter().enumerate() {
        assert_eq!(r.arrival.to_bits(), kept.records[k * stride].arrival.to_bits(), "sample {k}");
    }
    assert!(streamed.peak_live_records < 100, "held {} records", streamed.peak_live_records);
}

/// Summarises a kept run again with the exact limit lowered to `limit`.
fn resummarize(text: &str, limit: u64) -> (servesim::Summary, servesim::Summary) {
    let s = common::setup(text, &[]);
    let mut out = simulate(&s, s.scenario.seed);
    let mut sketched = out.clone();
    sketched.tally = s.tally_exact_up_to(limit);
    for r in &out.records {
        sketched.tally.add(r);
    }
    (summarize(&s, s.scenario.seed, &mut out), summarize(&s, s.scenario.seed, &mut sketched))
}

#[test]
fn past_the_exact_limit_percentiles_stay_within_the_stated_error() {
    // A stable run and an overloaded one (a queue that grows throughout).
    for (rate, verdict) in [(150.0, "stable"), (260.0, "overloaded")] {
        let text = quick(40_000, rate);
        let (exact, approx) = resummarize(&text, 5_000);
        assert_eq!(exact.latency_percentile_relative_error, 0.0);
        assert_eq!(approx.latency_percentile_relative_error, hist::RELATIVE_ERROR);
        assert_eq!(exact.stability.verdict, verdict, "{}", exact.stability.explanation);
        assert_eq!(approx.stability.verdict, verdict, "{}", approx.stability.explanation);
        let (e, a) = (&exact.stability, &approx.stability);
        assert!((e.growth_fraction - a.growth_fraction).abs() < 0.01, "{} vs {}", e.growth_fraction, a.growth_fraction);
        let (me, ma) = (&exact.metrics, &approx.metrics);
        assert_eq!(
            (me.measured_requests, me.completed, me.total_output_tokens),
            (ma.measured_requests, ma.completed, ma.total_output_tokens)
        );
        for (x, y) in [(&me.ttft, &ma.ttft), (&me.e2el, &ma.e2el), (&me.queue, &ma.queue)] {
            assert_eq!(x.dist.count, y.dist.count);
            assert!((x.dist.mean - y.dist.mean).abs() <= 1e-9 * x.dist.mean.abs().max(1.0), "{} mean", x.name);
            assert_eq!((x.dist.min, x.dist.max), (y.dist.min, y.dist.max), "{}", x.name);
            for (p, q) in x.dist.percentiles.iter().zip(&y.dist.percentiles) {
                // Bucket width 2^-10 relative, plus the interpolation between order statistics.
                assert!((p - q).abs() <= hist::RELATIVE_ERROR * p.abs() + 1e-6, "{}: {p} vs {q}", x.name);
            }
        }
    }
}

#[test]
fn no_requests_skips_the_csv_and_changes_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.toml");
    std::fs::write(&f, quick(3000, 150.0)).unwrap();
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec!["run", "s.toml", "-q", "--out", out];
        args.extend_from_slice(extra);
        let (code, _, err) = outcome(&servesim_in(dir.path(), &args));
        assert_eq!(code, 0, "{err}");
    };
    run("with", &[]);
    run("without", &["--no-requests"]);
    assert!(dir.path().join("with/requests.csv").exists());
    assert!(!dir.path().join("without/requests.csv").exists());
    let read = |p: &str| std::fs::read(dir.path().join(p)).unwrap();
    assert_eq!(read("with/summary.json"), read("without/summary.json"));
    assert!(dir.path().join("without/cdf.svg").exists(), "charts are still drawn");
    // Replotting needs the records, and says so.
    let (code, _, err) = outcome(&servesim_in(dir.path(), &["plot", "without"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--no-requests"), "{err}");
    // --force --no-requests over a run with requests.csv leaves none behind.
    run("with", &["--force", "--no-requests"]);
    assert!(!dir.path().join("with/requests.csv").exists());
}

#[test]
fn plot_rebuilds_the_runs_chart_sample_from_its_csv() {
    // 250,000 requests: more than 2 × SAMPLE, so the CDF chart comes from a
    // thinned sample, which `plot` rebuilds from requests.csv row by row.
    let text = quick(250_000, 150.0);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), &text).unwrap();
    let (code, _, err) = outcome(&servesim_in(dir.path(), &["run", "s.toml", "-q", "--out", "run"]));
    assert_eq!(code, 0, "{err}");
    let s = common::setup(&text, &[]);
    let run = simulate_recording(&s, s.scenario.seed, Recording::Stream(None));
    let read = servesim::export::RunData::read(&dir.path().join("run")).unwrap();
    assert_eq!(read.cdf.len(), run.sample.records.len());
    assert_eq!(read.records.len(), TIMELINE_REQUESTS as usize);
    for (a, b) in read.cdf.iter().zip(&run.sample.records) {
        // requests.csv holds times to the microsecond.
        assert!((a.arrival - b.arrival).abs() <= 1e-6 && (a.ttft() - b.ttft()).abs() <= 2e-6);
    }
    for c in ["cdf.svg", "timeline.svg", "timeseries.svg"] {
        std::fs::remove_file(dir.path().join("run").join(c)).unwrap();
    }
    let (code, _, err) = outcome(&servesim_in(dir.path(), &["plot", "run"]));
    assert_eq!(code, 0, "{err}");
    assert!(dir.path().join("run/cdf.svg").exists());
    assert!(!err.contains("truncated"), "{err}");
    // A requests.csv cut short is said, whether it ends mid-row or on a row boundary (issue 26).
    let csv = dir.path().join("run/requests.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    std::fs::write(&csv, &text[..text.len() / 2]).unwrap();
    let (code, _, err) = outcome(&servesim_in(dir.path(), &["plot", "run"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("requests.csv: truncated") && err.contains("ends mid-row"), "{err}");
    let cut = text[..text.len() / 2].rfind('\n').unwrap() + 1;
    std::fs::write(&csv, &text[..cut]).unwrap();
    let (_, _, err) = outcome(&servesim_in(dir.path(), &["plot", "run"]));
    assert!(err.contains("requests.csv: truncated") && err.contains("summary.json counts 250000"), "{err}");
    // A requests.csv that is a device (an endless /dev/zero) is refused, not read.
    #[cfg(unix)]
    if std::path::Path::new("/dev/zero").exists() {
        std::fs::remove_file(&csv).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &csv).unwrap();
        let (code, _, err) = outcome(&servesim_in(dir.path(), &["plot", "run"]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_file(&csv).unwrap();
        std::fs::write(&csv, vec![b'7'; 3 << 20]).unwrap();
        let (code, _, err) = outcome(&servesim_in(dir.path(), &["plot", "run"]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("a line over 1 MiB"), "{err}");
    }
}

/// A request that times out while waiting stays in its replica's queue until
/// it reaches the front, but may leave the window of live records long
/// before: the queue must skip it without reading its record (found in
/// review: shortest-prompt-first under overload with timeouts panicked with
/// an index out of bounds once the window had been compacted).
#[test]
fn requests_refused_while_queued_are_skipped_after_they_are_retired() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/overload.toml")).unwrap();
    for order in ["shortest-prompt", "shortest-job", "fcfs"] {
        let sets = [&format!("engine.queue_order=\"{order}\"")[..], "engine.max_wait_s=5", "num_requests=30000"];
        let s = common::setup(&text, &sets);
        let mut kept = servesim::sim::simulate_checked(&s, s.scenario.seed);
        let mut streamed = simulate_recording(&s, s.scenario.seed, Recording::Stream(None));
        let (a, b) = (summarize(&s, s.scenario.seed, &mut kept), summarize(&s, s.scenario.seed, &mut streamed));
        assert!(
            a.metrics.failures_by_reason.get("timed_out").is_some_and(|&n| n > 1000),
            "{order}: {:?}",
            a.metrics.failures_by_reason
        );
        assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap(), "{order}");
    }
}
