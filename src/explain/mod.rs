//! Reading a run backwards: which parts of their latency made the slowest
//! requests slow, which earlier requests caused them, when, and which
//! configuration change would help — tested, not guessed.
//!
//! The analysis ([`analyse`]) works on a run whose requests carry latency
//! parts ([`crate::metrics::parts`]). For each cohort — the slowest 1% of
//! TTFT, of TPOT and of E2E among measured completed requests, and the
//! requests that missed an SLO — it compares the mean of every part with
//! the same means over the median cohort (the middle 10% by rank): the part
//! with the largest excess is what the tail pays for. The slowest requests
//! are then traced to the requests that were prefilling on their replica
//! while they waited, and the tail's arrival times to the windows where
//! they cluster.
//!
//! The suggestion ([`what_if`]) maps the dominant cause to configuration
//! changes (a smaller chunk or token budget, a watermark, one more replica,
//! another router, a queue order, more front-end workers), runs each with
//! common random numbers (the same arrivals and lengths, several seeds) and
//! reports the paired difference of the tail metric with its 95% interval.
//! A change is called confirmed only when the whole interval is an
//! improvement; otherwise the answer says the evidence is inconclusive.

pub mod folder;
mod render;
mod whatif;

pub use folder::{explain_folder, write_explanation};
pub use render::{figure, html, text};
pub use whatif::{Candidate, WhatIf, candidates, what_if};

use crate::metrics::{NUM_PARTS, Part, Parts, RequestRecord, Status};
use serde::{Deserialize, Serialize};

/// A float that may be NaN ("does not apply"), written as JSON null.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_finite() { s.serialize_f64(*x) } else { s.serialize_none() }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// Which latency a cohort is the tail of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// End-to-end latency.
    E2e,
    /// Requests that missed an SLO (their E2E parts).
    SloMissed,
}

impl Metric {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
            Metric::SloMissed => "missed SLO",
        }
    }

    /// The request's value, ms (NaN where it does not apply).
    fn value(self, r: &RequestRecord) -> f64 {
        match self {
            Metric::Ttft => r.ttft() * 1e3,
            Metric::Tpot => r.tpot() * 1e3,
            Metric::E2e | Metric::SloMissed => r.e2e() * 1e3,
        }
    }

    /// The parts that make up the metric (ms; per output token for TPOT).
    fn parts(self, r: &RequestRecord, p: &Parts) -> Parts {
        let mut out = [0.0; NUM_PARTS];
        for part in Part::ALL {
            let include = match self {
                Metric::Ttft => part.before_first_token(),
                Metric::Tpot => !part.before_first_token(),
                Metric::E2e | Metric::SloMissed => true,
            };
            if include {
                out[part.idx()] = p[part.idx()] * 1e3;
            }
        }
        if self == Metric::Tpot {
            let n = r.output.saturating_sub(1).max(1) as f64;
            out.iter_mut().for_each(|x| *x /= n);
        }
        out
    }

    /// The summary metric a what-if compares (lower is better).
    pub fn summary_key(self) -> &'static str {
        match self {
            Metric::Ttft => "p99_ttft_ms",
            Metric::Tpot => "p99_tpot_ms",
            Metric::E2e => "p99_e2el_ms",
            Metric::SloMissed => "slo.attainment",
        }
    }
}

/// One slow request traced to what was going on around it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Example {
    /// Request id.
    pub id: u32,
    /// Replica it ran on.
    pub replica: u32,
    /// Its value of the cohort's metric, ms.
    pub value_ms: f64,
    /// Its largest part, and that part's time, ms.
    pub part: Part,
    /// Time of that part, ms.
    pub part_ms: f64,
    /// Requests prefilling on the same replica while it waited (or, for the
    /// decode tail, while it decoded), largest prompts first: (id, prompt tokens).
    pub around: Vec<(u32, u32)>,
    /// The sentence.
    pub text: String,
}

/// A stretch of the run where the tail's arrivals cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Window {
    /// Start, s.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
    /// Fraction of the cohort that arrived in it.
    pub tail_share: f64,
    /// Fraction of all measured requests that arrived in it.
    pub arrival_share: f64,
}

/// The tail of one metric, taken apart.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cohort {
    /// Which tail.
    pub metric: Metric,
    /// Requests in it.
    pub requests: usize,
    /// The smallest value in it (the p99 for the slowest 1%), ms.
    #[serde(with = "nan_as_null")]
    pub threshold_ms: f64,
    /// Its mean value, ms.
    #[serde(with = "nan_as_null")]
    pub mean_ms: f64,
    /// The median cohort's mean value, ms.
    #[serde(with = "nan_as_null")]
    pub median_ms: f64,
    /// Mean of each part over the cohort, ms ([`Part::ALL`] order).
    pub parts_ms: Vec<f64>,
    /// The same over the median cohort.
    pub median_parts_ms: Vec<f64>,
    /// The largest part of the tail.
    pub dominant: Part,
    /// The part by which the tail exceeds the median cohort most.
    pub excess: Part,
    /// That excess, ms.
    pub excess_ms: f64,
    /// The slowest requests, traced.
    pub examples: Vec<Example>,
    /// Where in time the cohort clusters.
    pub windows: Vec<Window>,
    /// Share of the cohort on each replica (only when some replica holds
    /// far more than its share).
    pub replica_shares: Vec<(u32, f64)>,
}

/// What [`analyse`] found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Analysis {
    /// Scenario name.
    pub scenario: String,
    /// Measured completed requests.
    pub measured: usize,
    /// The run's stability verdict.
    pub verdict: String,
    /// One cohort per tail (TTFT, TPOT, E2E, and missed SLOs when there are SLOs and misses).
    pub cohorts: Vec<Cohort>,
}

/// A run's explanation: the analysis and the what-ifs that test its suggestion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Explanation {
    /// The analysis.
    pub analysis: Analysis,
    /// The tail the suggestion targets.
    pub target: Metric,
    /// The changes tried, best first.
    pub what_ifs: Vec<WhatIf>,
    /// Replications (seeds) per what-if.
    pub replications: u32,
    /// The arrivals are a replayed trace (every seed then sees the same arrivals).
    #[serde(default)]
    pub replayed_trace: bool,
    /// When every objective is met and no tail was asked for: why there is
    /// nothing to fix (the binding objective and its headroom); no what-if is run.
    #[serde(default)]
    pub nothing_to_fix: Option<String>,
}

impl Explanation {
    /// The suggested change: the best what-if, if its interval shows an improvement.
    pub fn suggestion(&self) -> Option<&WhatIf> {
        self.what_ifs.first().filter(|w| w.confirmed)
    }
}

/// Mean of each part over `ids`.
fn mean_parts(metric: Metric, ids: &[usize], records: &[RequestRecord], parts: &[Parts]) -> Vec<f64> {
    let mut sum = [0.0; NUM_PARTS];
    for &i in ids {
        for (s, x) in sum.iter_mut().zip(metric.parts(&records[i], &parts[i])) {
            *s += x;
        }
    }
    sum.iter().map(|s| s / ids.len().max(1) as f64).collect()
}

fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// Requests on replica `replica` whose prefill ([first_scheduled, first_token])
/// overlaps [t0, t1], other than `me`, largest prompts first (at most 3).
fn prefilling(records: &[RequestRecord], replica: u32, me: usize, t0: f64, t1: f64) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = records
        .iter()
        .enumerate()
        .filter(|&(i, r)| {
            i != me
                && r.replica == replica
                && r.first_scheduled < t1
                && r.first_token.max(r.last_token.min(r.first_token)) > t0
                && r.first_scheduled.is_finite()
        })
        .map(|(i, r)| (i as u32, r.prompt))
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(3);
    v
}

fn list_requests(around: &[(u32, u32)]) -> String {
    let ids: Vec<String> = around.iter().map(|(i, _)| format!("#{i}")).collect();
    let prompts: Vec<String> = around.iter().map(|(_, p)| crate::plot::human(*p as f64)).collect();
    let ids = match ids.len() {
        0 => String::new(),
        1 => ids[0].clone(),
        n => format!("{} and {}", ids[..n - 1].join(", "), ids[n - 1]),
    };
    let noun = if around.len() == 1 { "prompt" } else { "prompts" };
    format!("{ids} ({}-token {noun})", prompts.join(", "))
}

/// Traces one slow request. With disaggregated pools a record names its
/// decode replica, so time before the first token (spent mostly in the
/// prefill pool) is not traced to a replica.
fn example(metric: Metric, i: usize, records: &[RequestRecord], parts: &[Parts], disaggregated: bool) -> Example {
    let r = &records[i];
    let p = metric.parts(r, &parts[i]);
    let k = argmax(&p);
    let part = Part::ALL[k];
    let (t0, t1) = if part.before_first_token() { (r.admitted, r.first_token) } else { (r.first_token, r.last_token) };
    let traced = !(disaggregated && part.before_first_token());
    let around = if traced { prefilling(records, r.replica, i, t0, t1) } else { Vec::new() };
    let unit = if metric == Metric::Tpot { " per output token" } else { "" };
    let mut text = format!(
        "request #{i} ({} {} ms; prompt {} tokens, output {}) spent {:.1} ms{unit} {}",
        metric.name(),
        fmt_ms(metric.value(r)),
        r.prompt,
        r.output,
        p[k],
        part.phrase()
    );
    if r.replica != u32::MAX && traced {
        text += &format!(" on replica {}", r.replica);
    } else if !traced {
        text += " (before its first token: in the prefill pool, or queued in the decode pool)";
    }
    if !around.is_empty()
        && matches!(
            part,
            Part::WaitPrefills
                | Part::WaitBudget
                | Part::WaitKv
                | Part::WaitBatchFull
                | Part::Interference
                | Part::DecodeStall
                | Part::Preempted
                | Part::DecodePreempted
        )
    {
        text += &format!("; prefilling there meanwhile: {}", list_requests(&around));
    }
    if r.preemptions > 0 {
        text += &format!("; preempted {} time{}", r.preemptions, if r.preemptions == 1 { "" } else { "s" });
    }
    Example { id: i as u32, replica: r.replica, value_ms: metric.value(r), part, part_ms: p[k], around, text }
}

/// A value in ms with sensible precision.
pub(crate) fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Windows where the cohort's arrivals are at least twice as dense as all
/// measured arrivals (24 equal bins over the measured arrivals; adjacent
/// bins merged; at most 3, largest share first).
fn windows(tail: &[usize], measured: &[usize], records: &[RequestRecord]) -> Vec<Window> {
    const BINS: usize = 24;
    let t = |i: usize| records[i].arrival;
    let (lo, hi) = measured.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &i| (a.min(t(i)), b.max(t(i))));
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || tail.len() < 5 {
        return Vec::new();
    }
    let bin = |x: f64| (((x - lo) / (hi - lo) * BINS as f64) as usize).min(BINS - 1);
    let (mut tc, mut ac) = ([0usize; BINS], [0usize; BINS]);
    tail.iter().for_each(|&i| tc[bin(t(i))] += 1);
    measured.iter().for_each(|&i| ac[bin(t(i))] += 1);
    let dense = |b: usize| {
        let ts = tc[b] as f64 / tail.len() as f64;
        let asr = ac[b] as f64 / measured.len() as f64;
        tc[b] >= 2 && ts >= 2.0 * asr
    };
    let mut out = Vec::new();
    let mut b = 0;
    while b < BINS {
        if !dense(b) {
            b += 1;
            continue;
        }
        let start = b;
        while b < BINS && dense(b) {
            b += 1;
        }
        let (ts, asr) = (tc[start..b].iter().sum::<usize>(), ac[start..b].iter().sum::<usize>());
        out.push(Window {
            start_s: lo + (hi - lo) * start as f64 / BINS as f64,
            end_s: lo + (hi - lo) * b as f64 / BINS as f64,
            tail_share: ts as f64 / tail.len() as f64,
            arrival_share: asr as f64 / measured.len() as f64,
        });
    }
    out.sort_by(|a, b| b.tail_share.total_cmp(&a.tail_share));
    out.truncate(3);
    out
}

/// Replicas holding more than twice their share of the cohort (and at least 5 requests of it).
fn replica_shares(tail: &[usize], records: &[RequestRecord], replicas: usize) -> Vec<(u32, f64)> {
    if replicas < 2 || tail.len() < 10 {
        return Vec::new();
    }
    let mut count = vec![0usize; replicas];
    for &i in tail {
        if let Some(c) = count.get_mut(records[i].replica as usize) {
            *c += 1;
        }
    }
    let mut out: Vec<(u32, f64)> = count
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c >= 5 && c as f64 > 2.0 * tail.len() as f64 / replicas as f64)
        .map(|(r, &c)| (r as u32, c as f64 / tail.len() as f64))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Where a cohort comes from: the run's records and parts, its measured
/// completed requests, its replica count, and whether its pools are disaggregated.
struct Run<'a> {
    records: &'a [RequestRecord],
    parts: &'a [Parts],
    measured: &'a [usize],
    replicas: usize,
    disaggregated: bool,
}

/// Takes one tail apart. `ids`: the measured completed requests it applies to.
fn cohort(metric: Metric, ids: &[usize], run: &Run) -> Option<Cohort> {
    let (records, parts) = (run.records, run.parts);
    let mut by: Vec<(f64, usize)> =
        ids.iter().map(|&i| (metric.value(&records[i]), i)).filter(|(v, _)| v.is_finite()).collect();
    if by.is_empty() {
        return None;
    }
    // Slowest first; ties by id for determinism.
    by.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let n = by.len();
    let tail: Vec<usize> = if metric == Metric::SloMissed {
        by.iter().map(|x| x.1).collect()
    } else {
        by[..n.div_ceil(100)].iter().map(|x| x.1).collect()
    };
    let median: Vec<usize> = if metric == Metric::SloMissed {
        // Against the requests that met their SLOs.
        Vec::new()
    } else {
        let (a, b) = (n * 45 / 100, (n * 55 / 100).max(n * 45 / 100 + 1).min(n));
        by[a..b].iter().map(|x| x.1).collect()
    };
    let parts_ms = mean_parts(metric, &tail, records, parts);
    let median_parts_ms = mean_parts(metric, &median, records, parts);
    let mean_ms = tail.iter().map(|&i| metric.value(&records[i])).sum::<f64>() / tail.len() as f64;
    let median_ms = if median.is_empty() {
        f64::NAN
    } else {
        median.iter().map(|&i| metric.value(&records[i])).sum::<f64>() / median.len() as f64
    };
    let excess: Vec<f64> = parts_ms.iter().zip(&median_parts_ms).map(|(t, m)| t - m).collect();
    let k = argmax(&excess);
    let examples = tail.iter().take(3).map(|&i| example(metric, i, records, parts, run.disaggregated)).collect();
    // Records of a disaggregated run name the decode replica: say nothing of
    // replicas for time before the first token.
    let shares = if run.disaggregated && metric == Metric::Ttft {
        Vec::new()
    } else {
        replica_shares(&tail, records, run.replicas)
    };
    Some(Cohort {
        metric,
        requests: tail.len(),
        threshold_ms: metric.value(&records[*tail.last().unwrap()]),
        mean_ms,
        median_ms,
        dominant: Part::ALL[argmax(&parts_ms)],
        excess: Part::ALL[k],
        excess_ms: excess[k],
        parts_ms,
        median_parts_ms,
        examples,
        windows: windows(&tail, run.measured, records),
        replica_shares: shares,
    })
}

/// Analyses a run that kept its records and their parts.
pub fn analyse(rep: &crate::Report) -> crate::Result<Analysis> {
    let out = &rep.output;
    if !out.kept || out.parts.len() != out.records.len() {
        return Err(crate::ConfigError::new("the run kept no latency parts to explain")
            .hint("simulate with attribution on (Setup.attribution, `servesim run --attribution`)")
            .into());
    }
    let setup = &rep.setup;
    let warmup = setup.scenario.warmup_s;
    let records = &out.records;
    let measured: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].status == Status::Completed && records[i].arrival >= warmup)
        .collect();
    let run = Run {
        records,
        parts: &out.parts,
        measured: &measured,
        replicas: out.replicas.len(),
        disaggregated: setup.pools.iter().any(|p| p.role == crate::config::PoolRole::Decode),
    };
    let mut cohorts: Vec<Cohort> =
        [Metric::Ttft, Metric::Tpot, Metric::E2e].iter().filter_map(|&m| cohort(m, &measured, &run)).collect();
    let missed: Vec<usize> = measured
        .iter()
        .copied()
        .filter(|&i| crate::metrics::slo_met(&setup.workload, &records[i]) == Some(false))
        .collect();
    if !missed.is_empty()
        && let Some(mut c) = cohort(Metric::SloMissed, &missed, &run)
    {
        // Compare the misses with the requests that met their SLOs.
        let met: Vec<usize> = measured
            .iter()
            .copied()
            .filter(|&i| crate::metrics::slo_met(&setup.workload, &records[i]) == Some(true))
            .collect();
        c.median_parts_ms = mean_parts(Metric::SloMissed, &met, records, &out.parts);
        c.median_ms = if met.is_empty() {
            f64::NAN
        } else {
            met.iter().map(|&i| records[i].e2e() * 1e3).sum::<f64>() / met.len() as f64
        };
        let excess: Vec<f64> = c.parts_ms.iter().zip(&c.median_parts_ms).map(|(t, m)| t - m).collect();
        let k = argmax(&excess);
        c.excess = Part::ALL[k];
        c.excess_ms = excess[k];
        cohorts.push(c);
    }
    Ok(Analysis {
        scenario: setup.scenario.name.clone(),
        measured: measured.len(),
        verdict: rep.summary.stability.verdict.clone(),
        cohorts,
    })
}

/// The tail an explanation targets: the metric whose SLO the run misses
/// most (lowest attainment, below 99%; TTFT, then TPOT, then E2E on ties),
/// else TTFT — what an interactive user feels first — unless no request has
/// a first token worth the name (prefill-only runs use E2E).
pub fn target(a: &Analysis, rep: &crate::Report) -> Metric {
    let slo = rep.setup.scenario.slo.clone().unwrap_or_default();
    if let Some(t) = &rep.summary.metrics.slo {
        let attained = [
            (Metric::Ttft, slo.ttft_ms.and(t.ttft_attainment)),
            (Metric::Tpot, slo.tpot_ms.and(t.tpot_attainment)),
            (Metric::E2e, slo.e2e_ms.and(t.e2e_attainment)),
        ];
        let mut worst: Option<(Metric, f64)> = None;
        for (m, a) in attained {
            if let Some(a) = a.filter(|a| *a < 0.99)
                && worst.is_none_or(|w| a < w.1)
            {
                worst = Some((m, a));
            }
        }
        if let Some((m, _)) = worst {
            return m;
        }
    }
    if a.cohorts.iter().any(|c| c.metric == Metric::Ttft) { Metric::Ttft } else { Metric::E2e }
}

/// Options of [`explain`].
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Seeds per what-if (common random numbers: each seed runs both configurations).
    pub replications: u32,
    /// Run the what-ifs (else only the analysis).
    pub what_if: bool,
    /// The tail to explain (`--metric`); None: the objective missed most,
    /// and nothing to fix when every objective is met.
    pub metric: Option<Metric>,
}

impl Default for Options {
    fn default() -> Self {
        Options { replications: 5, what_if: true, metric: None }
    }
}

/// Explains a run: the analysis, then the candidate changes for the
/// target tail's dominant cause, each tested with common random numbers.
/// `loaded` is the scenario the run came from (the changes are applied to it).
pub fn explain(
    rep: &crate::Report,
    loaded: &crate::scenario::LoadedScenario,
    catalog: &crate::Catalog,
    opts: Options,
) -> crate::Result<Explanation> {
    let analysis = analyse(rep)?;
    let target = opts.metric.unwrap_or_else(|| target(&analysis, rep));
    let nothing_to_fix = if opts.metric.is_none() { all_met(rep) } else { None };
    let mut what_ifs = Vec::new();
    if opts.what_if
        && nothing_to_fix.is_none()
        && let Some(c) = analysis.cohorts.iter().find(|c| c.metric == target)
    {
        let cands = candidates(c, rep);
        what_ifs = what_if(loaded, catalog, rep, target, &cands, opts.replications)?;
    }
    Ok(Explanation {
        analysis,
        target,
        what_ifs,
        replications: opts.replications,
        replayed_trace: rep.setup.scenario.workload.trace.is_some(),
        nothing_to_fix,
    })
}

/// When the run is a stable service that meets every objective of its
/// `[slo]` (as `capacity` and `plan` judge it): the binding objective and
/// its headroom. None without objectives, or when one is missed.
fn all_met(rep: &crate::Report) -> Option<String> {
    let slo = crate::plan::slo_of(&rep.setup.scenario).ok()?;
    let v = crate::plan::judge(&rep.summary, &slo);
    (v.meets && !v.binding.is_empty()).then(|| {
        format!(
            "nothing to fix: the run is stable and meets every objective (the closest is {}, {:.0}% headroom); \
             pass --metric ttft|tpot|e2e to explain a tail anyway",
            v.binding,
            v.headroom * 100.0
        )
    })
}
