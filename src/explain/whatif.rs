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
    /// The whole interval of the difference is an improvement.
    pub confirmed: bool,
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
    let budget = e.max_num_batched_tokens as i64;
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
    let cause = c.excess;
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

/// The seed of replication `r` (the run's own seed first).
fn seed_of(seed: u64, r: u32) -> u64 {
    if r == 0 { seed } else { point_seed(seed, 0, r) }
}

fn get(flat: &[(String, f64)], key: &str) -> f64 {
    flat.iter().find(|m| m.0 == key).map_or(f64::NAN, |m| m.1)
}

/// Tests each candidate: `replications` seeds, each running the scenario
/// with and without the change on the same arrivals and lengths (common
/// random numbers). Best first: confirmed improvements, largest first.
pub fn what_if(
    loaded: &crate::config::LoadedScenario,
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
    let base: Vec<Vec<(String, f64)>> = (0..reps)
        .into_par_iter()
        .map(|r| {
            if r == 0 {
                flatten(&rep.summary)
            } else {
                flatten(&crate::run_lean(&base_setup, seed_of(rep.seed, r)).summary)
            }
        })
        .collect();
    let mut out: Vec<WhatIf> = cands
        .iter()
        .map(|c| {
            let change: Vec<String> = c.changes.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut w = WhatIf {
                change,
                why: c.why.clone(),
                metric: key.to_string(),
                lower_is_better: lower,
                baseline: Stat::of(&base.iter().map(|f| get(f, key)).collect::<Vec<_>>()),
                variant: Stat::of(&[]),
                difference: Stat::of(&[]),
                cost_difference: Stat::of(&[]),
                confirmed: false,
                error: None,
            };
            let setup = match loaded.derive(&c.changes, "what-if").and_then(|s| crate::resolve(&s, catalog)) {
                Ok(s) => s,
                Err(e) => {
                    w.error = Some(e.to_string());
                    return w;
                }
            };
            let runs: Vec<Vec<(String, f64)>> = (0..reps)
                .into_par_iter()
                .map(|r| flatten(&crate::run_lean(&setup, seed_of(rep.seed, r)).summary))
                .collect();
            let pair = |k: &str| -> Vec<f64> { runs.iter().zip(&base).map(|(v, b)| get(v, k) - get(b, k)).collect() };
            w.variant = Stat::of(&runs.iter().map(|f| get(f, key)).collect::<Vec<_>>());
            w.difference = Stat::of(&pair(key));
            w.cost_difference = Stat::of(&pair(COST));
            w.confirmed = if lower { w.difference.ci_hi < 0.0 } else { w.difference.ci_lo > 0.0 };
            w
        })
        .collect();
    // Confirmed changes first, those that cost no more ahead of those that
    // do (a bigger cluster nearly always helps), then by the improvement.
    let gain = |w: &WhatIf| {
        let d = if lower { -w.difference.mean } else { w.difference.mean };
        if d.is_finite() { d } else { f64::NEG_INFINITY }
    };
    let base_cost = Stat::of(&base.iter().map(|f| get(f, COST)).collect::<Vec<_>>()).mean;
    let cheap = |w: &WhatIf| w.cost_difference.mean.is_nan() || w.cost_difference.mean <= 0.01 * base_cost.abs();
    out.sort_by(|a, b| {
        b.confirmed
            .cmp(&a.confirmed)
            .then((b.confirmed && cheap(b)).cmp(&(a.confirmed && cheap(a))))
            .then(gain(b).total_cmp(&gain(a)))
    });
    Ok(out)
}
