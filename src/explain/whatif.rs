//! Candidate changes for a tail's dominant cause, and their test with
//! common random numbers.

use super::{Cohort, Metric};
use crate::metrics::Part;
use crate::sweep::{Stat, flatten, point_seed};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A configuration change to try, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Dotted-key overrides, as `--set` takes them.
    pub changes: Vec<(String, toml::Value)>,
    /// The cause it addresses, in words.
    pub why: String,
}

/// A tested change: the tail metric with and without it, paired by seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WhatIf {
    /// The overrides, as `key=value` (for `--set`).
    pub change: Vec<String>,
    /// The cause it addresses.
    pub why: String,
    /// The summary metric compared (`p99_ttft_ms`, …; `slo.attainment` for SLO misses).
    pub metric: String,
    /// Lower is better for the metric (false for attainment).
    pub lower_is_better: bool,
    /// The metric without the change: mean over the seeds and 95% interval.
    pub baseline: Stat,
    /// The metric with the change.
    pub variant: Stat,
    /// Variant − baseline, paired by seed (same arrivals and lengths), with its 95% interval.
    pub difference: Stat,
    /// The same for the cost per million output tokens, USD.
    pub cost_difference: Stat,
    /// The whole interval of the difference is an improvement, and the
    /// change does no harm elsewhere (see `harm`).
    pub confirmed: bool,
    /// Paired differences (variant − baseline) of the other metrics a user
    /// judges a change by: the other tails, attainment (overall and per
    /// objective), goodput and throughput; only those the run reports.
    #[serde(default)]
    pub side_effects: Vec<(String, Stat)>,
    /// Runs judged stable (or offline) without and with the change, of the seeds run.
    #[serde(default)]
    pub stable_runs: (u32, u32),
    /// Why a change that improves the target is not confirmed: it makes the
    /// runs less stable, or attainment or goodput fall (null: no harm seen).
    #[serde(default)]
    pub harm: Option<String>,
    /// Why it could not be tested, if so (the change does not resolve, say).
    pub error: Option<String>,
}

fn int(x: i64) -> toml::Value {
    toml::Value::Integer(x)
}

/// The replica-count keys worth growing for the cohort's dominant cause:
/// the only pool, or with disaggregated pools the entry pool for time before
/// the first token (and the decode pool too for a queue wait, which may be
/// in either pool), the decode pool after it.
fn replica_keys(c: &Cohort, rep: &crate::Report) -> Vec<(String, u32)> {
    let s = &rep.setup;
    if s.scenario.pools.is_empty() {
        return vec![("hardware.replicas".into(), s.scenario.hardware.replicas)];
    }
    let key = |p: usize| (format!("pools[{p}].replicas"), s.pools[p].replicas);
    let decode = s.pools.iter().position(|p| p.role == crate::config::PoolRole::Decode);
    let entry = s.pools.iter().position(|p| p.role != crate::config::PoolRole::Decode).unwrap_or(0);
    match decode {
        None => {
            // Several mixed pools: the one that served the slowest request.
            let pool_of = crate::sim::pool_of(s);
            let r = c.examples.first().map_or(0, |e| e.replica as usize);
            vec![key(pool_of.get(r).copied().unwrap_or(0) as usize)]
        }
        Some(d) if !c.excess.before_first_token() => vec![key(d)],
        Some(d) if Part::WAITS.contains(&c.excess) => vec![key(entry), key(d)],
        Some(_) => vec![key(entry)],
    }
}

/// The changes worth trying for the cohort's dominant cause (at most four).
pub fn candidates(c: &Cohort, rep: &crate::Report) -> Vec<Candidate> {
    let sc = &rep.setup.scenario;
    let e = &sc.engine;
    let overloaded = matches!(rep.summary.stability.verdict.as_str(), "overloaded" | "shedding");
    let mut out: Vec<Candidate> = Vec::new();
    let mut add = |changes: Vec<(&str, toml::Value)>, why: &str| {
        let c = Candidate { changes: changes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), why: why.into() };
        if !out.iter().any(|o| o.changes == c.changes) {
            out.push(c);
        }
    };
    let keys = replica_keys(c, rep);
    if overloaded {
        for (k, n) in &keys {
            add(
                vec![(k, int(*n as i64 + 1))],
                "the run is overloaded: the tail is the growing backlog, which only capacity removes",
            );
        }
    }
    if !c.replica_shares.is_empty()
        && !matches!(
            sc.hardware.router,
            crate::config::RouterKind::LeastTokens | crate::config::RouterKind::CentralQueue
        )
    {
        add(
            vec![("hardware.router", toml::Value::String("least-tokens".into()))],
            "the tail sits on a few replicas: route by outstanding tokens",
        );
    }
    // The part the tail exceeds the median by most, and the part the tail
    // is mostly made of when that is another: a cost every request pays
    // (a slow KV link at 84% of TTFT) barely exceeds the median, yet
    // shortening it shortens the tail too.
    let largest = Part::ALL[super::argmax(&c.parts_ms)];
    let total: f64 = c.parts_ms.iter().filter(|x| **x > 0.0).sum();
    let mut causes = vec![c.excess];
    if largest != c.excess && c.parts_ms[largest.idx()] >= 0.5 * total {
        causes.push(largest);
    }
    for &cause in &causes {
        cause_candidates(cause, sc, &mut add);
    }
    let cause = c.excess;
    // Classes that differ in priority, waiting in one first-come-first-served
    // queue: let the urgent ones go first.
    let classes = &rep.setup.workload.classes;
    let waits = Part::WAITS.contains(&cause) || cause == Part::Interference;
    if waits
        && e.queue_order == crate::config::QueueOrder::Fcfs
        && classes.iter().any(|k| k.priority != classes[0].priority)
    {
        add(
            vec![("engine.queue_order", toml::Value::String("priority".into()))],
            "urgent and background classes share one first-come-first-served queue: serve by class priority",
        );
    }
    if matches!(
        cause,
        Part::WaitBatchFull
            | Part::WaitKv
            | Part::WaitPrefills
            | Part::Preempted
            | Part::DecodePreempted
            | Part::CentralQueue
            | Part::WaitBudget
            | Part::Interference
            | Part::WaitStep
            | Part::Prefill
    ) {
        for (k, n) in &keys {
            add(vec![(k, int(*n as i64 + 1))], "the replica is busy: one more replica shares the load (at a cost)");
        }
    }
    out.truncate(4);
    out
}

/// The changes that address `cause` in scenario `sc`.
fn cause_candidates(cause: Part, sc: &crate::config::Scenario, add: &mut impl FnMut(Vec<(&str, toml::Value)>, &str)) {
    let e = &sc.engine;
    let budget = e.max_num_batched_tokens as i64;
    match cause {
        Part::WaitPrefills | Part::Interference | Part::WaitStep => {
            if e.chunked_prefill && sc.pools.is_empty() {
                let cap = (budget / 4).max(64);
                if e.max_chunk_tokens.is_none_or(|m| m as i64 > cap) {
                    add(
                        vec![("engine.max_chunk_tokens", int(cap))],
                        "long prompts take the whole token budget for steps on end: cap each request's chunk so others get a share",
                    );
                }
            }
            if cause == Part::WaitStep && budget >= 1024 {
                add(
                    vec![("engine.max_num_batched_tokens", int(budget / 2))],
                    "new requests wait for long steps to end: a smaller token budget shortens them",
                );
            }
            if e.queue_order == crate::config::QueueOrder::Fcfs && cause == Part::WaitPrefills {
                add(
                    vec![("engine.queue_order", toml::Value::String("shortest-prompt".into()))],
                    "short prompts queue behind long ones: serve the shortest prompt first",
                );
            }
        }
        Part::WaitBudget => {
            add(
                vec![("engine.max_num_batched_tokens", int(budget * 2))],
                "decodes take the token budget: a larger budget leaves room for prompts",
            );
        }
        Part::DecodeStall => {
            if !e.chunked_prefill && e.batching == crate::config::Batching::Continuous {
                add(
                    vec![("engine.chunked_prefill", toml::Value::Boolean(true))],
                    "decodes stall behind whole-prompt steps: chunk prompts into the decode steps",
                );
            } else if budget >= 512 {
                add(
                    vec![("engine.max_num_batched_tokens", int(budget / 2))],
                    "prompt chunks inside decode steps slow every token: a smaller token budget makes smaller chunks",
                );
            }
        }
        Part::DecodeCompute if e.max_num_seqs >= 8 => {
            add(
                vec![("engine.max_num_seqs", int(e.max_num_seqs as i64 / 2))],
                "large decode batches slow each token: cap the batch",
            );
        }
        Part::WaitKv | Part::Preempted | Part::DecodePreempted => {
            add(
                vec![("engine.kv_watermark", toml::Value::Float((e.kv_watermark * 2.0).max(0.05)))],
                "the KV cache fills and preempts: keep more blocks free when admitting",
            );
        }
        Part::WaitBatchFull => {
            add(
                vec![("engine.max_num_seqs", int(e.max_num_seqs as i64 * 2))],
                "requests wait for a free batch slot: allow more sequences at once",
            );
        }
        Part::Transfer => {
            if let Some(d) = &sc.disaggregation {
                add(
                    vec![("disaggregation.kv_transfer_gbps", toml::Value::Float(d.kv_transfer_gbps * 4.0))],
                    "the KV transfer between pools is slow: a faster link",
                );
            }
        }
        Part::Preprocess if e.frontend_workers > 0 => {
            add(
                vec![("engine.frontend_workers", int(e.frontend_workers as i64 * 2))],
                "requests queue for the tokeniser: more front-end workers",
            );
        }
        Part::Prefill if sc.hardware.tp < 8 && sc.pools.is_empty() => {
            add(
                vec![("hardware.tp", int(sc.hardware.tp as i64 * 2))],
                "the prompts' own compute dominates: more GPUs per replica (tensor parallel)",
            );
        }
        _ => {}
    }
}

/// The seed of replication `r` (the run's own seed first).
fn seed_of(seed: u64, r: u32) -> u64 {
    if r == 0 { seed } else { point_seed(seed, 0, r) }
}

/// The metrics a change's side effects are read on.
const SIDE: [&str; 9] = [
    "p99_ttft_ms",
    "p99_tpot_ms",
    "p99_e2el_ms",
    "slo.attainment",
    "slo.ttft_attainment",
    "slo.tpot_attainment",
    "slo.e2e_attainment",
    "request_goodput",
    "output_throughput",
];

/// A fall in attainment (a fraction) larger than this is harm: half a point.
const ATTAINMENT_FALL: f64 = 0.005;
/// A fall in goodput larger than this fraction of the baseline's is harm.
const GOODPUT_FALL: f64 = 0.005;

/// One run's metrics and whether it is a stable service (or offline).
struct Measured {
    flat: Vec<(String, f64)>,
    stable: bool,
}

impl Measured {
    fn of(s: &crate::metrics::Summary) -> Measured {
        Measured { flat: flatten(s), stable: matches!(s.stability.verdict.as_str(), "stable" | "not_applicable") }
    }
}

/// The harm a change does, read on its side effects: fewer stable runs, or
/// attainment (any objective) or goodput falling on average over the seeds.
fn harm(side: &[(String, Stat)], stable: (u32, u32), reps: u32, base_goodput: f64) -> Option<String> {
    let mut why = Vec::new();
    if stable.1 < stable.0 {
        why.push(format!("{} of {reps} runs stable with it, {} without", stable.1, stable.0));
    }
    for (k, d) in side {
        let fell = if k.starts_with("slo.") {
            d.mean < -ATTAINMENT_FALL
        } else if k == "request_goodput" {
            d.mean < -GOODPUT_FALL * base_goodput.abs()
        } else {
            false
        };
        if fell {
            let v = if k.starts_with("slo.") {
                format!("{:.1} pts", d.mean * 100.0)
            } else {
                format!("{:.2} req/s", d.mean)
            };
            why.push(format!("{k} falls by {}", v.trim_start_matches('-')));
        }
    }
    (!why.is_empty()).then(|| why.join(", "))
}

fn get(flat: &[(String, f64)], key: &str) -> f64 {
    flat.iter().find(|m| m.0 == key).map_or(f64::NAN, |m| m.1)
}

/// Tests each candidate: `replications` seeds, each running the scenario
/// with and without the change on the same arrivals and lengths (common
/// random numbers). Best first: confirmed improvements, largest first.
pub fn what_if(
    loaded: &crate::scenario::LoadedScenario,
    catalog: &crate::Catalog,
    rep: &crate::Report,
    target: Metric,
    cands: &[Candidate],
    replications: u32,
) -> crate::Result<Vec<WhatIf>> {
    let reps = replications.max(2);
    let key = target.summary_key();
    let lower = target != Metric::SloMissed;
    const COST: &str = "cost.usd_per_million_output_tokens";
    let mut base_setup = rep.setup.clone();
    base_setup.attribution = false;
    // The run itself is replication 0 of the baseline.
    let base: Vec<Measured> = (0..reps)
        .into_par_iter()
        .map(|r| {
            if r == 0 {
                Measured::of(&rep.summary)
            } else {
                Measured::of(&crate::run_lean(&base_setup, seed_of(rep.seed, r)).summary)
            }
        })
        .collect();
    let base_stable = base.iter().filter(|m| m.stable).count() as u32;
    let base_goodput = Stat::of(&base.iter().map(|m| get(&m.flat, "request_goodput")).collect::<Vec<_>>()).mean;
    let mut out: Vec<WhatIf> = cands
        .iter()
        .map(|c| {
            let change: Vec<String> = c.changes.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut w = WhatIf {
                change,
                why: c.why.clone(),
                metric: key.to_string(),
                lower_is_better: lower,
                baseline: Stat::of(&base.iter().map(|m| get(&m.flat, key)).collect::<Vec<_>>()),
                variant: Stat::of(&[]),
                difference: Stat::of(&[]),
                cost_difference: Stat::of(&[]),
                confirmed: false,
                side_effects: Vec::new(),
                stable_runs: (base_stable, 0),
                harm: None,
                error: None,
            };
            let setup = match loaded.derive(&c.changes, "what-if").and_then(|s| crate::resolve(&s, catalog)) {
                Ok(s) => s,
                Err(e) => {
                    w.error = Some(e.to_string());
                    return w;
                }
            };
            let runs: Vec<Measured> = (0..reps)
                .into_par_iter()
                .map(|r| Measured::of(&crate::run_lean(&setup, seed_of(rep.seed, r)).summary))
                .collect();
            let pair = |k: &str| -> Vec<f64> {
                runs.iter().zip(&base).map(|(v, b)| get(&v.flat, k) - get(&b.flat, k)).collect()
            };
            w.variant = Stat::of(&runs.iter().map(|m| get(&m.flat, key)).collect::<Vec<_>>());
            w.difference = Stat::of(&pair(key));
            w.cost_difference = Stat::of(&pair(COST));
            w.side_effects = SIDE
                .iter()
                .filter(|&&k| k != key)
                .map(|&k| (k.to_string(), Stat::of(&pair(k))))
                .filter(|(_, d)| d.mean.is_finite())
                .collect();
            w.stable_runs.1 = runs.iter().filter(|m| m.stable).count() as u32;
            w.harm = harm(&w.side_effects, w.stable_runs, reps, base_goodput);
            let better = if lower { w.difference.ci_hi < 0.0 } else { w.difference.ci_lo > 0.0 };
            w.confirmed = better && w.harm.is_none();
            w
        })
        .collect();
    // Confirmed changes first, those that cost no more ahead of those that
    // do (a bigger cluster nearly always helps), then by the improvement.
    let gain = |w: &WhatIf| {
        let d = if lower { -w.difference.mean } else { w.difference.mean };
        if d.is_finite() { d } else { f64::NEG_INFINITY }
    };
    let base_cost = Stat::of(&base.iter().map(|m| get(&m.flat, COST)).collect::<Vec<_>>()).mean;
    let cheap = |w: &WhatIf| w.cost_difference.mean.is_nan() || w.cost_difference.mean <= 0.01 * base_cost.abs();
    out.sort_by(|a, b| {
        b.confirmed
            .cmp(&a.confirmed)
            .then((b.confirmed && cheap(b)).cmp(&(a.confirmed && cheap(a))))
            .then(gain(b).total_cmp(&gain(a)))
    });
    Ok(out)
}
