//! # servesim — a discrete-event capacity simulator for LLM inference serving
//!
//! servesim follows every request through its life — arrival, preprocessing,
//! queueing, prefill (in chunks), decode, completion — on engine replicas that
//! batch continuously like vLLM, with a paged KV cache and preemption, and
//! reports what each user experienced: distributions (never one average) of
//! time to first token, time per output token, inter-token latency and
//! end-to-end latency, next to throughput, utilisation, cost and whether the
//! run was stable at all.
//!
//! ```no_run
//! use servesim::{Catalog, scenario::load_scenario};
//! let loaded = load_scenario("scenarios/quickstart.toml".as_ref(), &[]).unwrap();
//! let catalog = Catalog::with_dir(None).unwrap();
//! let report = servesim::run(&loaded.scenario, &catalog).unwrap();
//! println!("p99 TTFT = {:.1} ms", report.summary.metrics.ttft.dist.percentiles[3]);
//! ```
//!
//! ## Layout
//! (docs/architecture.md has the full map and the life of one request.)
//! - [`config`]: the scenario (typed, validated, with defaults);
//! - [`spec`]: what an LLM architecture and a GPU are (plain data);
//! - [`catalog`]: the shipped and user LLM architectures, GPU and engine profiles;
//! - [`resolve`](mod@resolve): a scenario against the catalogue, giving the [`Setup`];
//! - [`workload`]: lazy request generation; [`rng`]: every random stream;
//! - [`cost`]: step-time prediction behind the [`cost::StepCostModel`] trait;
//! - [`memory`]: weights, activations and KV capacity;
//! - [`engine`]: one replica's continuous-batching scheduler and KV cache;
//! - [`cluster`]: routing across replicas;
//! - [`sim`]: the event loop;
//! - [`metrics`]: records, statistics, the stability verdict and the [`Summary`];
//! - [`plan`], [`sweep`]: capacity search, capacity plans and parameter sweeps;
//! - [`export`], [`plot`]: one exporter per format (JSON, CSV, manifest,
//!   terminal table, the HTML report) and charts; [`html`]: escaping for
//!   the pages they write;
//! - [`files`]: atomic writes, locked and staged results folders, bounded
//!   reads of what servesim wrote (used by every writer and reader above).
//!
//! ## Where I/O happens
//! Files are read or written only at these edges: [`cli`]; [`scenario`]
//! (the scenario file); [`catalog`] (a user's models folder); [`resolve`](mod@resolve),
//! which reads the trace and length files a workload names, through a
//! process-wide cache in [`workload::plan`]; [`sweep`] (appends
//! `points.jsonl` as points finish, writes the sweep files); [`plot`] and
//! [`export`] (charts and output files), all through [`files`]; [`validate`], [`calibrate`] and
//! [`measured`] (their data sets); [`bench`](mod@bench); [`explain`] (a results folder's
//! manifest and summary, and the explanation it writes back); [`playground`]
//! (a loopback-only HTTP server). The simulation itself — [`sim`],
//! [`engine`], [`cluster`], [`cost`], [`memory`], [`metrics`] and the
//! request [`workload::Source`] — does no I/O: a resolved [`Setup`] and a
//! seed determine the run.
//!
//! ## Determinism
//! A run is a pure function of the resolved scenario and the seed: the same
//! inputs give bit-identical records and byte-identical output files, on any
//! machine and whatever the thread count. Random streams are PCG-64 (MCG)
//! generators from `rand_pcg`, whose output is value-stable across releases,
//! seeded per purpose (arrivals, prompt lengths, output lengths, step times)
//! from the scenario seed. Event ordering at equal times is fixed (see
//! [`sim`]). Threads are only used to compute independent summary statistics.

// Configuration errors carry their location and fix; they are built on the cold
// path only, so their size does not matter.
#![allow(clippy::result_large_err)]
#![warn(missing_docs)]

pub mod bench;
pub mod calibrate;
pub mod catalog;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod config;
pub mod cost;
pub mod detection;
pub mod energy;
pub mod engine;
pub mod error;
pub mod explain;
pub mod export;
pub mod files;
pub mod fleet;
pub mod html;
pub mod limits;
pub mod measured;
pub mod memory;
pub mod metrics;
pub mod plan;
pub mod playground;
pub mod plot;
pub mod resolve;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod spec;
pub mod summarize;
pub mod sweep;
pub mod validate;
pub mod workload;

pub use catalog::Catalog;
pub use error::{ConfigError, Error, Result};
pub use metrics::Summary;

use config::Scenario;
pub use resolve::{Pool, Setup, resolve};
use sim::SimOutput;

/// The result of one run: the summary and the raw observations behind it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The resolved setup that was simulated.
    pub setup: Setup,
    /// The seed used.
    pub seed: u64,
    /// The summary (`summary.json`).
    pub summary: Summary,
    /// Per-request records and per-replica statistics.
    pub output: SimOutput,
}

/// Simulates a resolved setup with the given seed, keeping every
/// per-request record in the report.
pub fn run_setup(setup: &Setup, seed: u64) -> Report {
    run_setup_with(setup, seed, sim::Recording::Keep)
}

/// Simulates a resolved setup with the given seed; `recording` says whether
/// the per-request records are kept or streamed (memory then follows the
/// requests in flight, not the run's length). The summary is the same
/// either way.
pub fn run_setup_with(setup: &Setup, seed: u64, recording: sim::Recording) -> Report {
    let mut output = sim::simulate_recording(setup, seed, recording);
    if let Some(frozen) = fleet::frozen(setup) {
        // The same arrivals with the fleet frozen at its initial size: what
        // the capacity that arrived changed (summary.fleet.rescued_requests).
        output.frozen_timeline = sim::simulate_recording(&frozen, seed, sim::Recording::Stream(None)).slo_timeline;
    }
    let summary = summarize::summarize(setup, seed, &mut output);
    Report { setup: setup.clone(), seed, summary, output }
}

/// The summary of a setup's run, keeping no records: what sweeps, searches
/// and plans need of each run.
pub fn run_lean(setup: &Setup, seed: u64) -> Report {
    run_setup_with(setup, seed, sim::Recording::Stream(None))
}

/// Resolves and simulates a scenario with its own seed. A run whose
/// warm-up leaves no request to measure, or that was stopped, is an error
/// (see [`Report::check`]).
pub fn run(scenario: &Scenario, catalog: &Catalog) -> Result<Report> {
    let setup = resolve(scenario, catalog)?;
    let report = run_setup(&setup, scenario.seed);
    report.check()?;
    Ok(report)
}

impl Report {
    /// Refuses a run that was stopped before its end ([`Report::check_complete`])
    /// or that measured nothing ([`Report::check_measured`]).
    pub fn check(&self) -> std::result::Result<(), ConfigError> {
        self.check_complete()?;
        self.check_measured()
    }

    /// Refuses a run stopped before its last event: its numbers describe
    /// only part of it.
    pub fn check_complete(&self) -> std::result::Result<(), ConfigError> {
        match self.output.stopped {
            None => Ok(()),
            Some(sim::Stopped::Clock(t)) => Err(ConfigError::new(format!(
                "the simulation was stopped: an event fell at {t:.3e} s, beyond the {:e} s the clock can \
                 resolve to a microsecond",
                limits::MAX_CLOCK_S
            ))
            .hint(
                "something takes absurdly long: check bandwidths (disaggregation.kv_transfer_gbps), rates and \
                 step-time settings",
            )),
            Some(sim::Stopped::Requested(t)) => Err(ConfigError::new(format!(
                "the simulation was stopped by --max-wall-time after {t:.1} s of simulated time; its results are \
                 incomplete and were not written"
            ))
            .hint("raise --max-wall-time, or shorten the run")),
            Some(sim::Stopped::Memory(n, t)) => Err(ConfigError::new(format!(
                "the simulation was stopped after {t:.1} s of simulated time: {n} requests were waiting or in \
                 flight at once, about {:.1} GiB, past the memory limit (--max-memory); the run is overloaded \
                 and its backlog grows without bound",
                n as f64 * limits::BYTES_PER_LIVE / 1073741824.0
            ))
            .hint("lower the arrival rate or the run's length, add capacity, or raise --max-memory")),
        }
    }

    /// Refuses a run in which no request arrived after `warmup_s`: with
    /// `num_requests`, the run's end is known only once the arrivals are
    /// drawn, so a warm-up at or beyond it is caught here rather than
    /// printed as a run of zeros.
    pub fn check_measured(&self) -> std::result::Result<(), ConfigError> {
        // Every measured request refused because it can never be served: the
        // run measured the configuration's limits, not a service.
        let m = &self.summary.metrics;
        let never_fit = ["exceeds_max_model_len", "exceeds_kv_capacity", "exceeds_token_budget"];
        let refused: u64 =
            m.failures_by_reason.iter().filter(|(k, _)| never_fit.contains(&k.as_str())).map(|(_, n)| n).sum();
        if m.measured_requests > 0 && m.completed == 0 && refused == m.measured_requests {
            let why: Vec<String> = m.failures_by_reason.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let from = if self.setup.scenario.workload.trace.is_some() { "row of the trace" } else { "request" };
            return Err(ConfigError::new(format!(
                "every measured {from} was refused before it could run ({}): there is no latency to report",
                why.join(", ")
            ))
            .key(if refused == m.failures_by_reason.get("exceeds_max_model_len").copied().unwrap_or(0) {
                "engine.max_model_len"
            } else {
                "workload"
            })
            .hint(
                "raise engine.max_model_len (within the model's context), set workload.on_too_long = \"clip\", or \
                 check the trace's token columns",
            ));
        }
        let warmup = self.setup.scenario.warmup_s;
        if warmup <= 0.0 || self.summary.metrics.measured_requests > 0 {
            return Ok(());
        }
        let last = self.output.last_arrival;
        Err(ConfigError::new(format!(
            "a warm-up of {warmup} s is at or beyond the last arrival ({last:.2} s): no request is measured"
        ))
        .key("warmup_s")
        .hint(format!("use warmup_s < {last:.0}, or raise num_requests so that arrivals continue past the warm-up")))
    }
}
