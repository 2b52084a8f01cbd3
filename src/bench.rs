//! `servesim bench`: simulator speed and memory on the reference workload
//! (Llama-3.1-8B BF16 on one H100-SXM, prompt 1024 / output 256, Poisson
//! 10 req/s per replica, chunked prefill with budget 8192, max_num_seqs 256),
//! on the `legacy` engine: the roofline step with no host-side costs, as the
//! peers it is compared with (inference-lab, BLIS) simulate it.
//!
//! Each size runs in a fresh child process so that its peak RSS is its own.

use crate::error::{Error, Result, at};
use crate::scenario::load_scenario_str;
use clap::Args;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Arguments of `servesim bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Request counts to simulate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "50000,500000,1000000,10000000")]
    sizes: Vec<u64>,
    /// Engine replicas (the arrival rate scales with them).
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// Router in front of the replicas (round-robin, least-outstanding, least-tokens, ...).
    #[arg(long, default_value = "round-robin")]
    router: String,
    /// Also time a plain `servesim run` (all output files) of the largest size.
    #[arg(long)]
    with_run: bool,
    /// Internal: simulate one size in this process and print one result line.
    #[arg(long, hide = true)]
    one: Option<u64>,
    /// Instead: time workload generation (10^6 and 10^7 Poisson/lognormal
    /// requests, streamed) and trace parsing (10^6 synthetic rows per format).
    #[arg(long)]
    workload: bool,
    /// Internal: generate this many requests in this process and print one result line.
    #[arg(long, hide = true)]
    gen_only: Option<u64>,
    /// Instead: time a 1,000-point sweep of 10,000-request runs (chat lengths)
    /// with --jobs 1 and --jobs 2, and the redrawing of its charts.
    #[arg(long)]
    sweep: bool,
    /// Instead: time every shipped engine profile on the same chat workload
    /// (Llama-3.1-8B bf16, one H100-SXM, lognormal 1,000 / 250, Poisson
    /// 20 req/s) and compare each with the fastest, per simulated request.
    #[arg(long)]
    profiles: bool,
    /// Requests per profile with --profiles (enough that fixed costs are not what is timed).
    #[arg(long, default_value_t = 20000)]
    profile_requests: u64,
    /// Instead: time formatting requests.csv for the 10^6 requests of the
    /// reference workload (in memory, one thread, best of 3).
    #[arg(long)]
    csv: bool,
    /// Internal: simulate the --profiles workload under this profile in this process.
    #[arg(long, hide = true)]
    one_profile: Option<String>,
    /// Instead: alternate this build with another servesim binary (an older
    /// build) on the reference workload at each of --sizes, --rounds times,
    /// and print both builds' simulation times, their medians, minima and
    /// ratios. Pin it to one core with `taskset -c 0`.
    #[arg(long, value_name = "SERVESIM", conflicts_with_all = ["sweep", "workload", "profiles", "csv", "with_run"])]
    against: Option<std::path::PathBuf>,
    /// Rounds with --against (each runs both builds, in alternating order;
    /// an even count's median is the mean of the middle two).
    #[arg(long, default_value_t = 7, requires = "against", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
}

/// The sweep benchmark: 40 rates × 5 max_num_seqs × 5 token budgets = 1,000 points.
pub fn sweep_toml() -> &'static str {
    r#"name = "bench-sweep"
seed = 1
num_requests = 10000
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[engine]
preset = "legacy"
chunked_prefill = true
[workload]
arrival = "poisson"
rate = 10.0
prompt_tokens = { dist = "lognormal", mean = 1000, cv = 1.0 }
output_tokens = { dist = "lognormal", mean = 250, cv = 0.8 }
[slo]
ttft_ms = 500
tpot_ms = 50
[sweep.grid]
"workload.rate" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40]
"engine.max_num_seqs" = [32, 64, 128, 256, 512]
"engine.max_num_batched_tokens" = [2048, 4096, 8192, 16384, 32768]
"#
}

fn bench_sweep(exe: &Path) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("servesim-bench-sweep-{}", std::process::id()));
    crate::files::create_out_dir(&dir)?;
    let file = dir.join("sweep.toml");
    std::fs::write(&file, sweep_toml()).map_err(at("write", &file))?;
    println!("servesim bench --sweep: 1,000 points × 10,000 requests (Llama-3.1-8B bf16, H100-SXM, chat lengths)");
    let mut walls = Vec::new();
    for jobs in [1, 2] {
        let out = dir.join(format!("out{jobs}"));
        let t0 = Instant::now();
        let st = Command::new(exe)
            .args([
                "sweep",
                &file.display().to_string(),
                "--jobs",
                &jobs.to_string(),
                "--out",
                &out.display().to_string(),
                "--force",
                "-q",
            ])
            .output()?;
        let wall = t0.elapsed().as_secs_f64();
        if !st.status.success() {
            return Err(Error::Runtime(format!("bench sweep failed: {}", String::from_utf8_lossy(&st.stderr))));
        }
        println!("  --jobs {jobs}: {wall:.2} s wall ({:.0} simulated requests/s)", 1e7 / wall);
        walls.push(wall);
    }
    println!("  speed-up with 2 jobs: {:.2}x", walls[0] / walls[1]);
    let t0 = Instant::now();
    let st = Command::new(exe).args(["plot", &dir.join("out2").display().to_string()]).output()?;
    if !st.status.success() {
        return Err(Error::Runtime(format!("bench plot failed: {}", String::from_utf8_lossy(&st.stderr))));
    }
    println!("  redrawing the three sweep charts (SVG + PNG): {:.2} s", t0.elapsed().as_secs_f64());
    let read = |p: std::path::PathBuf| std::fs::read(&p).map_err(at("read", &p));
    let same = read(dir.join("out1/sweep.csv"))? == read(dir.join("out2/sweep.csv"))?;
    println!("  sweep.csv identical for --jobs 1 and 2: {same}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The start of a benchmark scenario: its name, seed and size, Llama-3.1-8B
/// bf16 on an H100-SXM (the `[hardware]` table left open).
fn header(name: &str, n: u64) -> String {
    format!(
        "name = \"bench-{name}\"\nseed = 1\nnum_requests = {n}\n[model]\nname = \"llama-3.1-8b\"\ndtype = \"bf16\"\n[hardware]\ngpu = \"h100-sxm\"\n"
    )
}

/// The reference scenario as TOML.
pub fn scenario_toml(n: u64, replicas: u32, router: &str) -> String {
    format!(
        r#"{}tp = 1
replicas = {replicas}
router = "{router}"
[engine]
preset = "legacy"
max_num_seqs = 256
max_num_batched_tokens = 8192
chunked_prefill = true
[workload]
arrival = "poisson"
rate = {rate}
prompt_tokens = {{ dist = "fixed", value = 1024 }}
output_tokens = {{ dist = "fixed", value = 256 }}
"#,
        header(&n.to_string(), n),
        rate = 10.0 * replicas as f64
    )
}

/// Peak resident set size of this process, MiB (Linux; NaN elsewhere).
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.to_string()))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn one(n: u64, replicas: u32, router: &str) -> Result<()> {
    one_of(n, &scenario_toml(n, replicas, router))
}

/// Simulates scenario `toml` of `n` requests in this process and prints one
/// result line: requests, wall s, peak MiB, steps, events, output tok/s,
/// p99 TTFT ms, simulation s.
fn one_of(n: u64, toml: &str) -> Result<()> {
    let loaded = load_scenario_str(toml, Path::new("bench.toml"), &[])?;
    let catalog = crate::Catalog::builtin()?;
    let t0 = Instant::now();
    let setup = crate::resolve(&loaded.scenario, &catalog)?;
    let mut output = crate::sim::simulate_recording(&setup, loaded.scenario.seed, crate::sim::Recording::Stream(None));
    let t_sim = t0.elapsed().as_secs_f64();
    let summary = crate::summarize::summarize(&setup, loaded.scenario.seed, &mut output);
    let rep = crate::Report { setup, seed: loaded.scenario.seed, summary, output };
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{n} {wall:.4} {:.1} {} {} {:.3} {:.2} {t_sim:.4}",
        peak_rss_mib(),
        rep.summary.utilisation.steps,
        rep.output.events,
        rep.summary.metrics.output_throughput,
        rep.summary.metrics.ttft.dist.percentiles[3]
    );
    Ok(())
}

/// `bench --csv`: simulates the reference workload's 10^6 requests keeping
/// every record, then formats their requests.csv into memory on one thread
/// (the bytes `run` writes), best of 3: the CPU time of the file per 10^6 rows.
fn bench_csv() -> Result<()> {
    let n = 1_000_000;
    let loaded = load_scenario_str(&scenario_toml(n, 1, "round-robin"), Path::new("bench.toml"), &[])?;
    let catalog = crate::Catalog::builtin()?;
    let setup = crate::resolve(&loaded.scenario, &catalog)?;
    let out = crate::sim::simulate(&setup, loaded.scenario.seed);
    let records = out.records.as_slice();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().map_err(|e| Error::Runtime(e.to_string()))?;
    let mut best = f64::INFINITY;
    let mut bytes = 0;
    // (One buffer for the three: its pages are touched before the timed rounds.)
    let mut buf = vec![0u8; 200 << 20];
    for _ in 0..3 {
        buf.clear();
        let t0 = Instant::now();
        pool.install(|| {
            crate::export::write_requests_csv(&mut buf, records, &out.parts, setup.scenario.warmup_s, &[], |r| {
                crate::metrics::slo_met(&setup.workload, r)
            })
        })?;
        best = best.min(t0.elapsed().as_secs_f64());
        bytes = buf.len();
    }
    println!(
        "requests.csv of {} rows ({:.0} MiB), formatted in memory on one thread: best of 3 {best:.3} s = {:.3} s per 10^6 rows",
        records.len(),
        bytes as f64 / 1048576.0,
        best * 1e6 / records.len() as f64
    );
    Ok(())
}

/// The --profiles workload under engine profile `preset`.
pub fn profile_toml(preset: &str, n: u64) -> String {
    format!(
        r#"{}[engine]
preset = "{preset}"
[workload]
arrival = "poisson"
rate = 20.0
prompt_tokens = {{ dist = "lognormal", mean = 1000.0, cv = 1.0 }}
output_tokens = {{ dist = "lognormal", mean = 250.0, cv = 0.8 }}
"#,
        header(preset, n)
    )
}

/// Runs `servesim bench ARGS` in a child process and returns its result line's fields.
fn child(exe: &Path, args: &[&str]) -> Result<Vec<String>> {
    let out = Command::new(exe).arg("bench").args(args).output()?;
    if !out.status.success() {
        return Err(Error::Runtime(format!("bench child failed: {}", String::from_utf8_lossy(&out.stderr))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect())
}

/// Every shipped engine profile on one workload, each in its own process.
fn bench_profiles(exe: &Path, n: u64) -> Result<()> {
    let catalog = crate::Catalog::builtin()?;
    println!(
        "servesim bench --profiles: Llama-3.1-8B bf16, H100-SXM tp1, lognormal 1000 / 250, Poisson 20 req/s, {n} requests, best of 3"
    );
    let mut rows = Vec::new();
    for name in catalog.engines.keys() {
        // Best of three runs, each in a fresh process (a single run of a
        // few tens of milliseconds is at the mercy of a cold start).
        let mut best: Option<(f64, Vec<String>)> = None;
        for _ in 0..3 {
            let f = child(exe, &["--one-profile", name, "--profile-requests", &n.to_string()])?;
            let wall: f64 = f[1].parse().unwrap_or(f64::NAN);
            if best.as_ref().is_none_or(|(b, _)| wall < *b) {
                best = Some((wall, f));
            }
        }
        let (wall, f) = best.expect("three runs");
        rows.push((name.clone(), wall, f[3].clone(), f[6].clone()));
    }
    let fastest = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    println!(
        "{:>14} {:>9} {:>12} {:>12} {:>12} {:>10}",
        "profile", "wall_s", "us_per_req", "steps", "p99_ttft_ms", "vs_best"
    );
    for (name, wall, steps, p99) in rows {
        println!(
            "{name:>14} {wall:>9.3} {:>12.1} {steps:>12} {p99:>12} {:>9.1}x",
            wall / n as f64 * 1e6,
            wall / fastest
        );
    }
    Ok(())
}

/// The `sim_s` of one `bench --sizes n` run of the servesim binary `exe`,
/// read from the column of that name (any build that prints it), or why
/// there is none. `--replicas` and `--router` are passed only when they are
/// not the defaults, so that builds from before those flags can be timed.
fn sim_seconds(exe: &Path, n: u64, a: &BenchArgs) -> std::result::Result<f64, String> {
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "--sizes", &n.to_string()]);
    if a.replicas != 1 {
        cmd.args(["--replicas", &a.replicas.to_string()]);
    }
    if a.router != "round-robin" {
        cmd.args(["--router", &a.router]);
    }
    let out = cmd.output().map_err(|e| format!("cannot run it: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let why = stderr.lines().find(|l| l.starts_with("error:")).or(stderr.lines().find(|l| !l.trim().is_empty()));
        return Err(format!("`bench` failed: {}", why.unwrap_or("no message").trim().trim_start_matches("error: ")));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let cells = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let column = text.lines().map(cells).find_map(|h| h.iter().position(|c| c == "sim_s"));
    let Some(column) = column else { return Err("it printed no table with a `sim_s` column".into()) };
    let row = text.lines().map(cells).find(|r| r.first().and_then(|c| c.parse::<u64>().ok()) == Some(n));
    let Some(row) = row else { return Err(format!("it printed no row for {n} requests")) };
    match row.get(column).and_then(|c| c.parse::<f64>().ok()) {
        Some(t) if t.is_finite() && t > 0.0 => Ok(t),
        Some(_) => Err(format!("{n} requests ran too fast to time (sim_s {}): use a larger --sizes", row[column])),
        None => Err(format!("its row for {n} requests has no number under `sim_s`")),
    }
}

/// The median (the mean of the middle two for an even count) and the
/// smallest of `v`.
fn median_min(v: &[f64]) -> (f64, f64) {
    (crate::metrics::stats::median(v), v.iter().copied().fold(f64::INFINITY, f64::min))
}

/// `bench --against OTHER`: this build and `other` alternated `rounds`
/// times on each size, after one untimed run of each (this build first in
/// odd rounds, `other` first in even ones, so that a drift of the machine
/// weighs on both alike). Ratios are of the times as measured, not as
/// printed.
fn bench_against(exe: &Path, other: &Path, a: &BenchArgs) -> Result<()> {
    let bad_other = |why: String| -> Error {
        crate::error::ConfigError::new(format!("--against {}: {why}", other.display()))
            .hint("give the path of a servesim binary, e.g. an older build's target/release/servesim")
            .into()
    };
    // (A bare name is a file here, not a program looked for on PATH.)
    let other =
        &std::fs::canonicalize(other).ok().filter(|p| p.is_file()).ok_or_else(|| bad_other("no such file".into()))?;
    let this = |n| sim_seconds(exe, n, a).map_err(|why| Error::from(crate::error::ConfigError::new(why)));
    let that = |n| sim_seconds(other, n, a).map_err(bad_other);
    for (k, &n) in a.sizes.iter().enumerate() {
        this(n)?;
        that(n)?;
        if k == 0 {
            println!(
                "servesim bench --against {}: the reference workload, {} replica(s) ({}), {} rounds alternated after one untimed run each; sim_s (resolve + simulate)",
                other.display(),
                a.replicas,
                a.router,
                a.rounds
            );
            println!("{:>10} {:>6} {:>10} {:>10}", "requests", "round", "this_s", "other_s");
        }
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        for round in 1..=a.rounds {
            let (x, y) = if round % 2 == 1 {
                let x = this(n)?;
                (x, that(n)?)
            } else {
                let y = that(n)?;
                (this(n)?, y)
            };
            mine.push(x);
            theirs.push(y);
            println!("{n:>10} {round:>6} {x:>10.4} {y:>10.4}");
        }
        let ((m1, f1), (m2, f2)) = (median_min(&mine), median_min(&theirs));
        println!("{n:>10} {:>6} {m1:>10.4} {m2:>10.4}   this / other {:.3}", "median", m1 / m2);
        println!("{n:>10} {:>6} {f1:>10.4} {f2:>10.4}   this / other {:.3}", "min", f1 / f2);
    }
    Ok(())
}

/// The generation benchmark's workload: Poisson arrivals, lognormal lengths.
fn gen_toml(n: u64) -> String {
    format!(
        "num_requests = {n}\n[model]\nname = \"llama-3.1-8b\"\n[workload]\narrival = \"poisson\"\nrate = 100\n\
         prompt_tokens = {{ dist = \"lognormal\", mean = 1000, cv = 1.0 }}\n\
         output_tokens = {{ dist = \"lognormal\", mean = 250, cv = 0.8 }}\n"
    )
}

/// Generates `n` requests (consuming each as the simulator would) and prints
/// "n wall_s peak_MiB checksum".
fn gen_only(n: u64) -> Result<()> {
    let loaded = load_scenario_str(&gen_toml(n), Path::new("bench.toml"), &[])?;
    let t0 = Instant::now();
    let workload = std::sync::Arc::new(crate::workload::plan::build(&loaded.scenario)?);
    let mut tokens = 0u64;
    let mut count = 0u64;
    for r in crate::workload::Source::new(&workload, 1) {
        tokens += r.prompt as u64 + r.output as u64;
        count += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    println!("{count} {wall:.4} {:.1} {tokens}", peak_rss_mib());
    Ok(())
}

/// Synthetic trace text: `n` rows of the Azure CSV or the Mooncake JSONL format.
pub fn synthetic_trace(n: usize, format: crate::workload::trace::TraceFormat) -> String {
    use crate::workload::trace::TraceFormat;
    use std::fmt::Write;
    let mut s = String::with_capacity(n * 120);
    if format == TraceFormat::Azure {
        s.push_str("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    }
    for i in 0..n {
        let (p, o) = (100 + (i * 7919) % 8000, 5 + (i * 104_729) % 500);
        match format {
            TraceFormat::Azure => {
                let us = i as u64 * 50_000;
                let (sec, frac) = (us / 1_000_000, us % 1_000_000);
                let _ = writeln!(
                    s,
                    "2023-11-16 {:02}:{:02}:{:02}.{frac:06}0,{p},{o}",
                    (sec / 3600) % 24,
                    (sec / 60) % 60,
                    sec % 60
                );
            }
            _ => {
                let _ = write!(
                    s,
                    "{{\"timestamp\": {}, \"input_length\": {p}, \"output_length\": {o}, \"hash_ids\": [",
                    i * 3
                );
                for k in 0..p.div_ceil(512) {
                    let _ = write!(s, "{}{}", if k > 0 { ", " } else { "" }, i * 16 + k);
                }
                s.push_str("]}\n");
            }
        }
    }
    s
}

fn bench_workload(exe: &Path) -> Result<()> {
    println!("servesim bench --workload: request generation (Poisson 100 req/s, lognormal 1000/250 tokens), streamed");
    println!("{:>10} {:>9} {:>16} {:>11}", "requests", "wall_s", "requests_per_s", "peak_MiB");
    for n in [1_000_000u64, 10_000_000] {
        let f = child(exe, &["--gen-only", &n.to_string()])?;
        let wall: f64 = f.get(1).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
        println!("{:>10} {:>9.3} {:>16.0} {:>11}", n, wall, n as f64 / wall, f.get(2).map_or("?", |x| x.as_str()));
    }
    use crate::workload::trace::{TraceFormat, parse};
    println!("trace parsing (1,000,000 synthetic rows, in memory):");
    for (name, fmt) in [("azure csv", TraceFormat::Azure), ("mooncake jsonl", TraceFormat::Mooncake)] {
        let text = synthetic_trace(1_000_000, fmt);
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t0 = Instant::now();
            let t = parse(&text, fmt, None, false).map_err(|e| Error::Runtime(format!("{name}: {}", e.message)))?;
            best = best.min(t0.elapsed().as_secs_f64());
            assert_eq!(t.rows.len(), 1_000_000);
        }
        println!(
            "  {name:<15} {:>6.1} MiB: best of 3 {best:.3} s = {:.2} M rows/s ({:.0} MiB/s)",
            text.len() as f64 / 1048576.0,
            1.0 / best,
            text.len() as f64 / 1048576.0 / best
        );
    }
    Ok(())
}

/// Runs the benchmark and prints a table.
pub fn main(a: BenchArgs) -> Result<()> {
    if let Some(n) = a.one {
        return one(n, a.replicas, &a.router);
    }
    if let Some(n) = a.gen_only {
        return gen_only(n);
    }
    if let Some(p) = &a.one_profile {
        return one_of(a.profile_requests, &profile_toml(p, a.profile_requests));
    }
    if a.csv {
        return bench_csv();
    }
    let exe = std::env::current_exe()?;
    if a.sweep {
        return bench_sweep(&exe);
    }
    if a.workload {
        return bench_workload(&exe);
    }
    if a.profiles {
        return bench_profiles(&exe, a.profile_requests);
    }
    if let Some(other) = &a.against {
        return bench_against(&exe, other, &a);
    }
    println!(
        "servesim bench: Llama-3.1-8B bf16, H100-SXM tp1 × {} replica(s) ({}), prompt 1024 / output 256, Poisson {} req/s",
        a.replicas,
        a.router,
        10 * a.replicas
    );
    println!(
        "{:>10} {:>9} {:>9} {:>14} {:>11} {:>12} {:>12} {:>12}",
        "requests", "wall_s", "sim_s", "sim_req_per_s", "peak_MiB", "steps", "events", "p99_ttft_ms"
    );
    for &n in &a.sizes {
        let f = child(&exe, &["--one", &n.to_string(), "--replicas", &a.replicas.to_string(), "--router", &a.router])?;
        let wall: f64 = f[1].parse().unwrap_or(f64::NAN);
        println!(
            "{:>10} {:>9.3} {:>9} {:>14.0} {:>11} {:>12} {:>12} {:>12}",
            n,
            wall,
            f[7],
            n as f64 / wall,
            f[2],
            f[3],
            f[4],
            f[6]
        );
    }
    if a.with_run {
        let n = *a.sizes.iter().max().unwrap_or(&1_000_000);
        let dir = std::env::temp_dir().join(format!("servesim-bench-{}", std::process::id()));
        crate::files::create_out_dir(&dir)?;
        let file = dir.join("bench.toml");
        std::fs::write(&file, scenario_toml(n, a.replicas, &a.router)).map_err(at("write", &file))?;
        let t0 = Instant::now();
        let st = Command::new(&exe)
            .args([
                "run",
                &file.display().to_string(),
                "--out",
                &dir.join("out").display().to_string(),
                "--force",
                "--quiet",
            ])
            .env("SERVESIM_PRINT_PEAK_RSS", "1")
            .output()?;
        let wall = t0.elapsed().as_secs_f64();
        if !st.status.success() {
            return Err(Error::Runtime(format!("bench run failed: {}", String::from_utf8_lossy(&st.stderr))));
        }
        let size: u64 = ["summary.json", "requests.csv", "manifest.json"]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join("out").join(f)).ok())
            .map(|m| m.len())
            .sum();
        println!(
            "plain `servesim run` of {n} requests (all output files, {:.0} MiB): {wall:.3} s wall, {}",
            size as f64 / 1048576.0,
            String::from_utf8_lossy(&st.stderr).trim()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
