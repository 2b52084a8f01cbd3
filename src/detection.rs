//! The overload test's error rates, measured: runs queues of known load
//! (M/M/1, M/D/1 and the W1 engine scenario) at loads ρ below and above
//! capacity, over several run lengths and seeds, plus loads that exceed
//! capacity only mid-run, and counts each verdict. `servesim
//! stability-table` prints the table; docs/stability.md publishes it; the
//! tests assert its targets on a smaller grid.

use crate::scenario::load_scenario_str;
use crate::{Catalog, Result, resolve, run_lean};
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;

/// A single-server FCFS queue: batch of one, one-token outputs, 10 ms
/// service (μ = 100 req/s); `cost.model` makes it M/D/1 or M/M/1. The
/// queueing-theory tests use it too. It runs the `legacy` engine: a real
/// engine's front end would add its own service time to the oracle's.
pub const SINGLE_SERVER: &str = r#"
name = "single-server"
seed = 1
num_requests = 1000
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
max_num_seqs = 1
[cost]
model = "constant"
step_overhead_ms = 0
step_time_ms = 10
[workload]
arrival = "poisson"
rate = 60
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 1 }
"#;

/// W1: Llama-3.1-8B BF16 on one H100, 1,024 in / 256 out, Poisson.
const W1: &str = include_str!("../scenarios/w1-steady-state.toml");

/// W1's capacity, req/s: the rate at which its completions saturate, measured
/// with `servesim run scenarios/w1-steady-state.toml --set workload.rate=26
/// --set num_requests=1000000` (completion rate while arrivals lasted:
/// 23.94 req/s). Runs of 10⁶ requests are judged stable at 23.9 req/s and
/// no longer at 24.0 (docs/stability.md).
pub const W1_CAPACITY: f64 = 23.94;

/// W1's engine with two classes of different priority (1:3), served by
/// priority (vLLM's rule: the lower value first).
const PRIORITY_CLASSES: &str = "\n[[workload.classes]]\nname = \"urgent\"\nweight = 1\npriority = 0\n\
    [[workload.classes]]\nname = \"background\"\nweight = 3\npriority = 1\n";

/// W1's model, engine and lengths on one prefill and one decode H100.
const DISAGGREGATED: &str = r#"
name = "detection-disaggregated"
seed = 1
num_requests = 20000
warmup_s = 10
[model]
name = "llama-3.1-8b"
dtype = "bf16"
[hardware]
router = "least-tokens"
[[pools]]
name = "prefill"
role = "prefill"
gpu = "h100-sxm"
replicas = 1
[[pools]]
name = "decode"
role = "decode"
gpu = "h100-sxm"
replicas = 1
[disaggregation]
kv_transfer_gbps = 50
kv_transfer_latency_ms = 1
[engine]
preset = "legacy"
max_num_seqs = 256
max_num_batched_tokens = 8192
chunked_prefill = true
[workload]
arrival = "poisson"
rate = 20.0
prompt_tokens = { dist = "fixed", value = 1024 }
output_tokens = { dist = "fixed", value = 256 }
"#;

/// W1 scaled between one and two replicas on queue length.
const AUTOSCALED: &str = "\n[fleet]\npolicy = \"queue\"\ntarget = 20\nmin_replicas = 1\nmax_replicas = 2\n";

/// Seconds between the windows of the Azure code trace that successive
/// seeds replay (the trace spans 3,436 s; replays loop).
const TRACE_OFFSET_S: f64 = 397.0;

/// A queue the table runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum System {
    /// Poisson arrivals, exponential service, one server.
    MM1,
    /// Poisson arrivals, constant service, one server.
    MD1,
    /// The W1 engine scenario.
    W1,
    /// W1's engine under gamma arrivals (cv 4) with lognormal lengths (cv
    /// 2.5 prompts, 2.0 outputs).
    Bursty,
    /// The Azure LLM inference code trace (inter-arrival CV ≈ 13) replayed
    /// on Qwen2.5-7B and one H100 (`scenarios/code-completion.toml`),
    /// scaled by `target_rate` and looped; each seed starts at another point.
    AzureCode,
    /// W1 with an urgent and a background class served by priority.
    Priority,
    /// W1's engine and lengths on a prefill and a decode H100.
    Disaggregated,
    /// W1 autoscaled between one and two replicas on queue length.
    Autoscaled,
}

/// Requests per second each family completes when saturated: measured with
/// `servesim run` at a load far above it over 10⁶ requests (10⁵ for the
/// trace), completions over the measurement window, 2026-12-06.
pub mod measured_capacity {
    /// Gamma (cv 4) W1 with lognormal lengths: `--set workload.rate=80`.
    pub const BURSTY: f64 = 17.88;
    /// The Azure code trace on Qwen2.5-7B: `--set workload.trace.target_rate=200 --set workload.trace.loop=true`.
    pub const AZURE_CODE: f64 = 11.33;
    /// W1 with priority classes: as W1 (23.83 req/s over 10⁶ requests at 80 req/s).
    pub const PRIORITY: f64 = 23.83;
    /// One prefill and one decode H100.
    pub const DISAGGREGATED: f64 = 47.25;
    /// Two W1 replicas (the fleet's largest size).
    pub const AUTOSCALED: f64 = 47.83;
}

impl System {
    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            System::MM1 => "M/M/1",
            System::MD1 => "M/D/1",
            System::W1 => "W1 engine",
            System::Bursty => "bursty W1",
            System::AzureCode => "Azure code trace",
            System::Priority => "W1, 2 priority classes",
            System::Disaggregated => "disaggregated 1P+1D",
            System::Autoscaled => "autoscaled 1-2 W1",
        }
    }

    /// The `--systems` name.
    pub fn key(self) -> &'static str {
        match self {
            System::MM1 => "mm1",
            System::MD1 => "md1",
            System::W1 => "w1",
            System::Bursty => "bursty",
            System::AzureCode => "azure-code",
            System::Priority => "priority",
            System::Disaggregated => "disaggregated",
            System::Autoscaled => "autoscaled",
        }
    }

    /// Every system, in table order.
    pub const ALL: [System; 8] = [
        System::MM1,
        System::MD1,
        System::W1,
        System::Bursty,
        System::AzureCode,
        System::Priority,
        System::Disaggregated,
        System::Autoscaled,
    ];

    /// The families users run beyond the Poisson queues.
    pub const FAMILIES: [System; 5] =
        [System::Bursty, System::AzureCode, System::Priority, System::Disaggregated, System::Autoscaled];

    /// Requests per second at ρ = 1.
    fn capacity(self) -> f64 {
        use measured_capacity as m;
        match self {
            System::MM1 | System::MD1 => 100.0,
            System::W1 => W1_CAPACITY,
            System::Bursty => m::BURSTY,
            System::AzureCode => m::AZURE_CODE,
            System::Priority => m::PRIORITY,
            System::Disaggregated => m::DISAGGREGATED,
            System::Autoscaled => m::AUTOSCALED,
        }
    }

    fn text(self) -> String {
        match self {
            System::MM1 => SINGLE_SERVER.replace("model = \"constant\"", "model = \"exponential\""),
            System::MD1 => SINGLE_SERVER.to_string(),
            System::W1 | System::Bursty => W1.to_string(),
            System::AzureCode => include_str!("../scenarios/code-completion.toml").to_string(),
            System::Priority => format!("{W1}{PRIORITY_CLASSES}"),
            System::Disaggregated => DISAGGREGATED.to_string(),
            System::Autoscaled => format!("{W1}{AUTOSCALED}"),
        }
    }

    /// Where the scenario text is taken to live (relative files resolve from it).
    fn path(self) -> std::path::PathBuf {
        match self {
            System::AzureCode => Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/code-completion.toml"),
            _ => Path::new("detection.toml").to_path_buf(),
        }
    }

    /// Overrides that set the load to `rate` req/s for `seed`.
    fn load(self, rate: f64, seed: u64) -> Vec<String> {
        match self {
            System::AzureCode => vec![
                format!("workload.trace.target_rate={rate}"),
                "workload.trace.loop=true".into(),
                format!("workload.trace.start_s={}", (seed - 1) as f64 * TRACE_OFFSET_S % 3400.0),
            ],
            System::Bursty => vec![
                format!("workload.rate={rate}"),
                "workload.arrival=\"gamma\"".into(),
                "workload.cv=4".into(),
                "workload.prompt_tokens={dist=\"lognormal\",mean=1024,cv=2.5}".into(),
                "workload.output_tokens={dist=\"lognormal\",mean=256,cv=2.0}".into(),
            ],
            System::Priority => vec![format!("workload.rate={rate}"), "engine.queue_order=\"priority\"".into()],
            _ => vec![format!("workload.rate={rate}")],
        }
    }
}

/// The load over the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Load {
    /// Constant rate ρ × capacity.
    Steady(f64),
    /// One sinusoidal cycle over the run, lowest at its start and end:
    /// ρ(t) = mean − swing·cos(2πt/T). The peak is mean + swing.
    Peak {
        /// Mean load.
        mean: f64,
        /// Swing either side of the mean.
        swing: f64,
    },
}

impl Load {
    /// Display form.
    pub fn label(self) -> String {
        match self {
            Load::Steady(r) => format!("{r}"),
            Load::Peak { mean, swing } => format!("{mean}±{swing} (peak {:.2})", mean + swing),
        }
    }

    /// Whether the run is overloaded (at its peak), i.e. what the right verdict is.
    pub fn overloaded(self) -> bool {
        match self {
            Load::Steady(r) => r > 1.0,
            Load::Peak { mean, swing } => mean + swing > 1.0,
        }
    }
}

/// One case of the table: a queue, a load and a run length.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Case {
    /// The queue.
    pub system: System,
    /// Its load.
    pub load: Load,
    /// Requests per run (warm-up excluded from the verdict by the scenario).
    pub requests: u64,
}

/// How often each verdict was reached for one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The case.
    pub case: Case,
    /// Runs (seeds).
    pub runs: u32,
    /// Runs judged "stable".
    pub stable: u32,
    /// Runs judged "overloaded".
    pub overloaded: u32,
    /// Runs judged "inconclusive".
    pub inconclusive: u32,
    /// Runs judged anything else ("shedding", "not_applicable").
    pub other: u32,
}

/// The loads of the published table.
pub const RHOS: [f64; 9] = [0.8, 0.9, 0.95, 0.98, 1.02, 1.05, 1.2, 2.0, 10.0];

/// The table's cases: every system at every ρ and length, and two peaks
/// (one that stays under capacity, one that exceeds it for a third of the run).
pub fn cases(systems: &[System], rhos: &[f64], lengths: &[u64]) -> Vec<Case> {
    let mut out = Vec::new();
    for &system in systems {
        for &requests in lengths {
            for &r in rhos {
                out.push(Case { system, load: Load::Steady(r), requests });
            }
            for (mean, swing) in [(0.6, 0.3), (0.7, 0.6)] {
                out.push(Case { system, load: Load::Peak { mean, swing }, requests });
            }
        }
    }
    out
}

/// The families' cases: steady loads only (a trace's own swings stand in
/// for the peaks), at every ρ and length.
pub fn family_cases(systems: &[System], rhos: &[f64], lengths: &[u64]) -> Vec<Case> {
    let mut out = Vec::new();
    for &system in systems {
        for &requests in lengths {
            for &r in rhos {
                out.push(Case { system, load: Load::Steady(r), requests });
            }
        }
    }
    out
}

/// The verdict of one run of `case` with `seed`.
pub fn verdict(case: &Case, seed: u64, catalog: &Catalog) -> Result<String> {
    let cap = case.system.capacity();
    let mut sets = vec![format!("num_requests={}", case.requests), format!("seed={seed}")];
    match case.load {
        Load::Steady(r) => sets.extend(case.system.load(r * cap, seed)),
        Load::Peak { mean, swing } => {
            let rate = mean * cap;
            let period = case.requests as f64 / rate;
            sets.push(format!("workload.rate={rate}"));
            // rate + a·sin(2π(t − T/4)/T) = rate − a·cos(2πt/T).
            sets.push(format!(
                "workload.diurnal={{amplitude={},period_s={period},phase_s={}}}",
                swing * cap,
                period / 4.0
            ));
        }
    }
    let loaded = load_scenario_str(&case.system.text(), &case.system.path(), &sets)?;
    let setup = resolve(&loaded.scenario, catalog)?;
    Ok(run_lean(&setup, seed).summary.stability.verdict)
}

/// Runs every case with seeds 1..=`seeds`, in parallel; rows in case order.
pub fn table(cases: &[Case], seeds: u64, catalog: &Catalog) -> Result<Vec<Row>> {
    let jobs: Vec<(usize, u64)> = (0..cases.len()).flat_map(|c| (1..=seeds).map(move |s| (c, s))).collect();
    let verdicts: Vec<Result<String>> = jobs.par_iter().map(|&(c, s)| verdict(&cases[c], s, catalog)).collect();
    let mut rows: Vec<Row> =
        cases.iter().map(|&case| Row { case, runs: 0, stable: 0, overloaded: 0, inconclusive: 0, other: 0 }).collect();
    for (&(c, _), v) in jobs.iter().zip(verdicts) {
        let row = &mut rows[c];
        row.runs += 1;
        match v?.as_str() {
            "stable" => row.stable += 1,
            "overloaded" => row.overloaded += 1,
            "inconclusive" => row.inconclusive += 1,
            _ => row.other += 1,
        }
    }
    Ok(rows)
}

/// The table as Markdown: fraction of runs per verdict, wrong verdicts in bold.
pub fn markdown(rows: &[Row]) -> String {
    let mut o = String::from(
        "| system | ρ | requests | runs | stable | overloaded | inconclusive | other |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let pct = |n: u32, of: u32, wrong: bool| {
        let s = format!("{:.0}%", n as f64 / of as f64 * 100.0);
        if wrong && n > 0 { format!("**{s}**") } else { s }
    };
    for r in rows {
        let over = r.case.load.overloaded();
        o += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case.system.name(),
            r.case.load.label(),
            r.case.requests,
            r.runs,
            pct(r.stable, r.runs, over),
            pct(r.overloaded, r.runs, !over),
            pct(r.inconclusive, r.runs, false),
            pct(r.other, r.runs, false),
        );
    }
    o
}
