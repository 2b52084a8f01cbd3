//! The command-line interface. All argument parsing lives here; commands call
//! the library and the exporters.

use crate::error::{ConfigError, Error};
use clap::{Args, Parser, Subcommand, ValueEnum};
use commands::dispatch;
use std::path::PathBuf;

/// servesim: a discrete-event capacity simulator for LLM inference serving.
#[derive(Debug, Parser)]
#[command(
    name = "servesim",
    version,
    about,
    long_about = None,
    after_help = "Examples:\n  servesim run scenarios/quickstart.toml\n  servesim run --model llama-3.1-70b --gpu h100-sxm --tp 2 --rate 3\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4,6,8\n  servesim capacity scenarios/quickstart.toml\n  servesim explain output/quickstart\n\nEvery command: servesim <command> --help. The user guide: docs/guide.md."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Bounds on a run's work (src/limits.rs); every command takes them.
#[derive(Debug, Args)]
struct LimitArgs {
    /// Most requests one run may simulate (refused before simulating beyond it; default: all 32-bit ids).
    #[arg(long, global = true, value_name = "N", default_value_t = crate::limits::Limits::DEFAULT_MAX_REQUESTS)]
    max_requests: u64,
    /// Most memory one run may need, GiB (refused before simulating beyond it; an overloaded run's
    /// growing backlog is stopped there).
    #[arg(long, global = true, value_name = "GIB", default_value_t = 4.0)]
    max_memory: f64,
    /// Longest projected wall time of one run, seconds (refused before simulating beyond it).
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = crate::limits::Limits::DEFAULT_MAX_PROJECTED_S)]
    max_projected_time: f64,
    /// Latest expected arrival of one run, simulated seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = crate::limits::Limits::DEFAULT_MAX_HORIZON_S)]
    max_horizon: f64,
    /// Stop a command still simulating after this many wall-clock seconds (nothing is written).
    #[arg(long, global = true, value_name = "SECONDS")]
    max_wall_time: Option<f64>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate a scenario and write summary.json, requests.csv and manifest.json.
    #[command(
        after_help = "Examples:\n  servesim run scenarios/quickstart.toml\n  servesim run scenarios/quickstart.toml --set workload.rate=9 --out output/q9\n  servesim run --model llama-3.1-70b --gpu h100-sxm --tp 2 --rate 3 --prompt-tokens 1000 --output-tokens 250\n  servesim run scenarios/overload.toml --json > summary.json"
    )]
    Run(RunArgs),
    /// Validate a scenario; print the resolved configuration and memory plan.
    #[command(
        after_help = "Examples:\n  servesim check scenarios/quickstart.toml\n  servesim check scenarios/quickstart.toml --set hardware.tp=2"
    )]
    Check(ScenarioArgs),
    /// Print the catalogue of models or GPUs.
    #[command(after_help = "Examples:\n  servesim list models\n  servesim list engines")]
    List(ListArgs),
    /// Run a grid of scenario variants in parallel; write sweep.csv, sweep.json and charts.
    #[command(
        after_help = "Examples:\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4,6,8\n  servesim sweep scenarios/quickstart.toml --grid workload.rate=2,4 --grid engine.max_num_seqs=64,256 --report"
    )]
    Sweep(SweepArgs),
    /// Combine the folders of sharded sweeps into one result, as if run unsharded.
    #[command(after_help = "Examples:\n  servesim merge output/shard-0 output/shard-1 --out output/all")]
    Merge(MergeArgs),
    /// The highest request rate one configuration sustains under its SLOs, with a confidence interval.
    #[command(
        after_help = "Examples:\n  servesim capacity scenarios/quickstart.toml\n  servesim capacity scenarios/quickstart.toml -q --json"
    )]
    Capacity(CapacityArgs),
    /// The cheapest configurations of the [plan] search space that carry the target load within the SLOs.
    #[command(
        after_help = "Examples:\n  servesim plan scenarios/plan-70b-chat.toml\n  servesim plan scenarios/plan-70b-chat.toml --details --report"
    )]
    Plan(PlanArgs),
    /// Write a self-contained report.html for a results folder (a run, a sweep or a plan).
    #[command(after_help = "Examples:\n  servesim report output/quickstart")]
    Report(PlotArgs),
    /// Two run folders side by side: headline metrics with B − A, and per-request differences with 95% intervals where both served the same requests.
    #[command(
        after_help = "Examples:\n  servesim compare output/quickstart output/q9\n  servesim compare output/a output/b --percentiles 50,99,99.9 --json"
    )]
    Compare(CompareArgs),
    /// Redraw the charts of a results folder (a run or a sweep).
    #[command(after_help = "Examples:\n  servesim plot output/quickstart")]
    Plot(PlotArgs),
    /// Read a run backwards: which parts of their latency made the slowest requests slow, what caused them, and a change tested with common random numbers.
    #[command(
        after_help = "Examples:\n  servesim explain output/quickstart\n  servesim explain scenarios/overload.toml --metric ttft --json"
    )]
    Explain(ExplainArgs),
    /// Measure simulator speed and memory (see docs/development.md, "Speed").
    #[command(after_help = "Examples:\n  servesim bench\n  servesim bench --sizes 100000,1000000")]
    Bench(crate::bench::BenchArgs),
    /// Compare servesim's predictions with every reference data set shipped in validation/.
    #[command(after_help = "Examples:\n  servesim validate\n  servesim validate --only gpustack-serve-h100 --rows")]
    Validate(ValidateArgs),
    /// Fit an engine profile's overheads to measurements; report held-out error; write the profile.
    #[command(
        after_help = "Examples:\n  servesim calibrate validation:gpustack-serve --rows vLLM --rows \"qwen3-14b #\" --fit step_overhead_ms\n  servesim calibrate result.json --scenario my-setup.toml"
    )]
    Calibrate(CalibrateArgs),
    /// Measure the overload test's error rates on queues of known load (docs/stability.md).
    #[command(
        after_help = "Examples:\n  servesim stability-table --seeds 20\n  servesim stability-table --systems bursty --lengths 20000 --rhos 0.8,1.05"
    )]
    StabilityTable(StabilityTableArgs),
    /// A local web page to feel the latency–throughput tradeoff: controls re-simulate and redraw (docs/playground.md).
    #[command(
        after_help = "Examples:\n  servesim playground scenarios/quickstart.toml\n  servesim playground scenarios/what-if-router.toml --port 9000 --no-open"
    )]
    Playground(PlaygroundArgs),
}

#[derive(Debug, Args)]
struct ExplainArgs {
    /// A results folder written by `servesim run` (its run is simulated again
    /// from the manifest and checked against its summary.json), or a scenario file.
    target: PathBuf,
    /// Override a scenario key when TARGET is a scenario file (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Seeds per what-if (each runs the scenario with and without the change).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..=100))]
    replications: u32,
    /// Only the analysis: do not test the suggested changes.
    #[arg(long)]
    no_what_if: bool,
    /// Print the explanation as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The tail to explain and test changes for (default: the objective
    /// missed most; nothing to fix when every objective is met).
    #[arg(long, value_enum)]
    metric: Option<TailArg>,
}

/// A tail `explain --metric` names.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum TailArg {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// End-to-end latency.
    E2e,
}

#[derive(Debug, Args)]
struct PlaygroundArgs {
    /// Scenario TOML file.
    #[arg(default_value = "scenarios/quickstart.toml")]
    scenario: PathBuf,
    /// Override a scenario key, e.g. --set workload.rate=12 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = crate::playground::DEFAULT_PORT)]
    port: u16,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
}

#[derive(Debug, Args)]
struct StabilityTableArgs {
    /// Queues to run, comma-separated: mm1, md1, w1, and the families bursty,
    /// azure-code, priority, disaggregated, autoscaled.
    #[arg(long, value_delimiter = ',', default_value = "mm1,md1,w1")]
    systems: Vec<String>,
    /// Run lengths in requests, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2000,20000,100000")]
    lengths: Vec<u64>,
    /// Loads ρ, comma-separated (default: 0.8 … 10, the published table's).
    #[arg(long, value_delimiter = ',')]
    rhos: Vec<f64>,
    /// Seeds per case.
    #[arg(long, default_value_t = 50)]
    seeds: u64,
    /// Also write the Markdown table to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CalibrateArgs {
    /// The measurements: a per-step CSV, a Splitwise profile CSV, a `vllm bench serve`
    /// --save-result JSON (with or without --save-detailed), a GuideLLM report JSON, GenAI-Perf's
    /// profile_export_genai_perf.json, an offline-throughput table, a serving-results table
    /// (GPUStack's columns), or validation:gpustack-serve (A100) / validation:gpustack-serve-h100.
    input: String,
    /// Scenario naming the model, GPU, tp and engine (needed by per-step CSVs and the JSON results).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Override a key of --scenario (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Engine profile to start from (default: the scenario's preset, or the engine that measured the data).
    #[arg(long)]
    preset: Option<String>,
    /// Keys to fit, comma-separated (default: the overheads the data determine), e.g.
    /// --fit step_overhead_ms,per_seq_overhead_ms.
    #[arg(long, value_delimiter = ',', value_name = "KEYS")]
    fit: Vec<String>,
    /// Folds for the held-out error (measurements of one set-up stay in one fold).
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Use only measurements whose label contains this text; alternatives separated by `|`
    /// (repeatable: a measurement must match every --rows).
    #[arg(long = "rows", value_name = "TEXT")]
    rows: Vec<String>,
    /// Name of the profile written (default: <preset>-calibrated).
    #[arg(long)]
    name: Option<String>,
    /// Output folder: engine/<name>.toml and calibration.json (default: output/calibrate-<name>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Write the profile even when the fit leaves a parameter weakly determined.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Run only these data sets (repeatable): kernels-gemm, kernels-attention, kernels-allreduce,
    /// kernels-held-out-gpu, kernels-unfitted-gpu, vidur-ops, memory-logs, splitwise, sarathi, trtllm-offline, gpustack-serve,
    /// gpustack-serve-h100.
    #[arg(long = "only", value_name = "DATASET")]
    only: Vec<String>,
    /// Also print every row (measured, predicted, error) of the data sets run.
    #[arg(long)]
    rows: bool,
    /// Write validation.json (every data set with its rows and statistics) into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the snapshot the tests compare with (statistics, and the rows of the smaller data
    /// sets) to this file: validation/expected.json after a deliberate change.
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
    /// Folder with llm/, gpu/ and engine/ TOML files read on top of the built-in catalogue.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SweepArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// A grid axis, e.g. --grid workload.rate=5,10,20 (repeatable; adds to or replaces [sweep.grid]).
    #[arg(long = "grid", value_name = "KEY=V1,V2,...")]
    grid: Vec<String>,
    /// Advance the axes in lock step instead of taking their cartesian product.
    #[arg(long)]
    zip: bool,
    /// Worker threads (default: all cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Replications per point (default: [sweep] replications, else 1).
    #[arg(long, short)]
    replications: Option<u32>,
    /// Run only the points with index ≡ K (mod N), e.g. --shard 0/4.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Continue an interrupted sweep in the same folder, skipping finished points.
    #[arg(long)]
    resume: bool,
    /// Replace results already in the output folder.
    #[arg(long)]
    force: bool,
    /// Output folder (default: output/<scenario name>-sweep).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Do not print the results table.
    #[arg(long, short)]
    quiet: bool,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
}

#[derive(Debug, Args)]
struct CapacityArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// Independent searches (each with its own arrivals); 3 or more give a confidence interval.
    #[arg(long, short, default_value_t = 3)]
    replications: u32,
    /// Relative precision of each search.
    #[arg(long, default_value_t = 0.02)]
    tolerance: f64,
    /// Print the answer only: no engine line, no progress.
    #[arg(long, short)]
    quiet: bool,
    /// Print the result as JSON on stdout (nothing else).
    #[arg(long)]
    json: bool,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
}

#[derive(Debug, Args)]
struct PlanArgs {
    #[command(flatten)]
    s: ScenarioArgs,
    /// Print why each configuration without an answer failed, in full.
    #[arg(long)]
    details: bool,
    /// Lengthen every run so that about N requests arrive after the warm-up
    /// (10 / (1 − p/100) puts 10 requests beyond a p-th percentile: 1000 for p99).
    #[arg(long, value_name = "N")]
    min_requests: Option<u64>,
    /// Output folder for plan.json (default: output/<scenario name>-plan).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Print nothing but errors (plan.json is still written).
    #[arg(long, short)]
    quiet: bool,
    /// Print plan.json on stdout (nothing else; the file is still written).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// Shard result folders.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged result.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Merge even if some points are missing.
    #[arg(long)]
    partial: bool,
    /// Replace the results already in --out.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct PlotArgs {
    /// A results folder written by `run` or `sweep`.
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The reference run's folder.
    a: PathBuf,
    /// The other run's folder (differences are B − A).
    b: PathBuf,
    /// Percentiles of the headline rows, comma-separated (default 50,90,99).
    #[arg(long, value_name = "P,P,...", value_delimiter = ',', num_args = 1..)]
    percentiles: Vec<f64>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args, Default)]
struct ScenarioArgs {
    /// Scenario TOML file.
    scenario: PathBuf,
    /// The scenario's text when it is not read from `scenario` (`run`'s
    /// quick flags without a file: the built-in quickstart).
    #[arg(skip)]
    text: Option<String>,
    /// Override a scenario key, e.g. --set workload.rate=12 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Folder with llm/ and gpu/ TOML files read on top of the built-in catalogue
    /// (default: ./models if it exists).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

mod commands;
mod quick;
use quick::RunScenarioArgs;

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    q: RunScenarioArgs,
    #[arg(skip)]
    s: ScenarioArgs,
    /// Output folder (default: output/<scenario name>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed (overrides the scenario's; 0 to 2^63 - 1, as a scenario file can hold).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    seed: Option<u64>,
    /// Replace results already in the output folder.
    #[arg(long)]
    force: bool,
    /// Do not print the summary table.
    #[arg(long, short)]
    quiet: bool,
    /// Print summary.json on stdout instead of the table (the files are still written).
    #[arg(long)]
    json: bool,
    /// Also write report.html.
    #[arg(long)]
    report: bool,
    /// Do not write requests.csv (one row per request; about 150 bytes a
    /// request). The summary, time series and charts are unchanged.
    #[arg(long)]
    no_requests: bool,
    /// Split every request's latency into parts that add up to its TTFT and
    /// E2E (docs/attribution.md): requests.csv gains a `part_<name>_ms`
    /// column per part, which `servesim explain` reads.
    #[arg(long)]
    attribution: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ListWhat {
    Models,
    Gpus,
    /// Engine profiles (engine.preset).
    Engines,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// What to list.
    what: ListWhat,
    /// Extra catalogue folder (as for `run`).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
}

/// Entry point: parses arguments, runs the command, returns the exit code
/// (0 success, 1 runtime failure, 2 usage or configuration error).
pub fn main() -> i32 {
    // Output piped into a reader that stops early (`servesim run ... | head`)
    // ends the command quietly, as a closed pipe ends any Unix tool, instead
    // of a panic and a backtrace from the print that found the pipe closed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default_hook(info)
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if !(cli.limits.max_horizon.is_finite() && cli.limits.max_horizon > 0.0) {
        eprintln!("error: --max-horizon must be a positive number of seconds, got {}", cli.limits.max_horizon);
        return 2;
    }
    for (flag, x) in [("--max-memory", cli.limits.max_memory), ("--max-projected-time", cli.limits.max_projected_time)]
    {
        if !(x.is_finite() && x > 0.0) {
            eprintln!("error: {flag} must be a positive number, got {x}");
            return 2;
        }
    }
    crate::limits::set(crate::limits::Limits {
        max_requests: cli.limits.max_requests,
        max_horizon_s: cli.limits.max_horizon,
        max_memory_bytes: cli.limits.max_memory * 1024.0 * 1024.0 * 1024.0,
        max_projected_s: cli.limits.max_projected_time,
    });
    if let Some(s) = cli.limits.max_wall_time {
        if !(s.is_finite() && s > 0.0) {
            eprintln!("error: --max-wall-time must be a positive number of seconds, got {s}");
            return 2;
        }
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs_f64(s));
            crate::limits::request_stop();
        });
    }
    let code = match dispatch(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    if std::env::var_os("SERVESIM_PRINT_PEAK_RSS").is_some() {
        eprintln!("peak RSS {:.0} MiB", crate::bench::peak_rss_mib());
    }
    code
}
impl From<clap::Error> for Error {
    fn from(e: clap::Error) -> Self {
        Error::Config(ConfigError::new(e.to_string()))
    }
}
