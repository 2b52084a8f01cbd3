//! The running account of a run's finished requests: everything the
//! [`Summary`](super::Summary) needs of them, gathered one request at a time
//! as requests leave the simulation, so that no record has to be kept.
//!
//! Requests are added in id (= arrival) order, whatever order they finish
//! in, so sums are taken in the same order on every run. Up to
//! [`EXACT_LIMIT`] requests, every value is kept and the summary is exact
//! (percentiles as numpy's "linear" method). Past it, the latency columns
//! move into log histograms (percentiles within
//! [`hist::RELATIVE_ERROR`] of the exact ones; mean, min and max exact) and
//! the backlog behind the stability verdict onto a fine time grid
//! ([`FineBacklog`]): memory then stays flat however long the run.

use super::hist::{self, LogHistogram};
use super::stability::{Backlog, FineBacklog};
use super::stats::Distribution;
use super::{RejectReason, RequestRecord, Status};
use crate::config::SloConfig;
use std::collections::{BTreeMap, HashSet};

/// Runs of up to this many requests are summarised exactly; longer runs
/// from histograms and a fine time grid (see the module docs).
pub const EXACT_LIMIT: u64 = 1_000_000;

/// One latency column: every value while exact, then a histogram.
#[derive(Debug, Clone)]
pub(crate) enum Column {
    Exact(Vec<f64>),
    Sketch(Box<LogHistogram>),
}

impl Default for Column {
    fn default() -> Self {
        Column::Exact(Vec::new())
    }
}

impl Column {
    fn push(&mut self, x: f64) {
        match self {
            Column::Exact(v) => v.push(x),
            Column::Sketch(h) => h.add(x, 1),
        }
    }

    /// Moves the values into a histogram.
    fn sketch(&mut self) {
        if let Column::Exact(v) = self {
            let mut h = LogHistogram::new();
            for &x in v.iter() {
                h.add(x, 1);
            }
            *self = Column::Sketch(Box::new(h));
        }
    }

    fn append(&mut self, o: &Column) {
        match (&mut *self, o) {
            (Column::Exact(a), Column::Exact(b)) => a.extend_from_slice(b),
            (Column::Sketch(a), Column::Sketch(b)) => a.merge(b),
            (_, other) => {
                let mut b = other.clone();
                b.sketch();
                self.sketch();
                self.append(&b);
            }
        }
    }

    /// The distribution, in milliseconds, with the percentiles `extra` besides the standard ones.
    pub(crate) fn describe_ms(self, extra: &[f64]) -> Distribution {
        match self {
            Column::Exact(mut v) => {
                for x in &mut v {
                    *x *= 1e3;
                }
                Distribution::of_with(&mut v, extra)
            }
            Column::Sketch(h) => histogram_ms(&h, extra),
        }
    }
}

/// The distribution of a histogram of seconds, in milliseconds, with the
/// percentiles `extra` besides the standard ones.
pub(crate) fn histogram_ms(h: &LogHistogram, extra: &[f64]) -> Distribution {
    let mut d = Distribution::of_histogram(h);
    d.extra = extra.iter().map(|&p| (p, h.percentile(p))).collect();
    let extra_values = d.extra.iter_mut().map(|(_, v)| v);
    for x in d.percentiles.iter_mut().chain(extra_values).chain([&mut d.mean, &mut d.std, &mut d.min, &mut d.max]) {
        *x *= 1e3;
    }
    d
}

/// Per-request observations of one group of measured requests.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns {
    /// ttft, tpot, e2el, queue, preprocess, norm_e2el (seconds).
    pub cols: [Column; 6],
    pub failures: BTreeMap<String, u64>,
    pub measured: u64,
    pub completed: u64,
    pub clipped: u64,
    pub in_tok: u64,
    pub out_tok: u64,
    pub good: u64,
    /// Requests meeting [TTFT, TPOT, E2E], and requests subject to each objective.
    pub ok: [u64; 3],
    pub subject: [u64; 3],
    pub with_slo: u64,
}

impl Columns {
    fn add(&mut self, r: &RequestRecord, slo: Option<&SloConfig>) {
        self.measured += 1;
        self.clipped += r.clipped as u64;
        if let Some(x) = slo {
            self.with_slo += 1;
            for (k, o) in [x.ttft_ms, x.tpot_ms, x.e2e_ms].iter().enumerate() {
                self.subject[k] += o.is_some() as u64;
            }
        }
        match r.status {
            Status::Rejected(why) => *self.failures.entry(why.as_str().to_string()).or_default() += 1,
            Status::InFlight => *self.failures.entry("unfinished".to_string()).or_default() += 1,
            Status::Completed => {
                self.completed += 1;
                self.in_tok += r.prompt as u64;
                self.out_tok += r.output as u64;
                let tpot = r.tpot();
                self.cols[0].push(r.ttft());
                if !tpot.is_nan() {
                    self.cols[1].push(tpot);
                }
                self.cols[2].push(r.e2e());
                self.cols[3].push(r.queue_delay());
                self.cols[4].push(r.preprocess());
                if r.output > 0 {
                    self.cols[5].push(r.normalized_latency());
                }
                if let Some(slo) = slo {
                    let checks = super::record::slo_checks(slo, r);
                    for (k, (c, o)) in checks.iter().zip([slo.ttft_ms, slo.tpot_ms, slo.e2e_ms]).enumerate() {
                        self.ok[k] += (*c && o.is_some()) as u64;
                    }
                    self.good += checks.iter().all(|&c| c) as u64;
                }
            }
        }
    }

    pub(crate) fn append(&mut self, o: &Columns) {
        for (a, b) in self.cols.iter_mut().zip(&o.cols) {
            a.append(b);
        }
        for (k, v) in &o.failures {
            *self.failures.entry(k.clone()).or_default() += v;
        }
        self.measured += o.measured;
        self.completed += o.completed;
        self.clipped += o.clipped;
        self.in_tok += o.in_tok;
        self.out_tok += o.out_tok;
        self.good += o.good;
        self.with_slo += o.with_slo;
        for k in 0..3 {
            self.ok[k] += o.ok[k];
            self.subject[k] += o.subject[k];
        }
    }
}

/// What the stability verdict's backlog needs of one request.
#[derive(Debug, Clone, Copy)]
struct Passage {
    arrival: f64,
    /// When it left the backlog: its first token, or its departure if it never had one.
    left: f64,
    measured: bool,
    shed: bool,
    /// Measured and completed: its time to first token is `left − arrival`
    /// (kept as a flag, not a value: a run keeps a million of these).
    completed: bool,
    /// Tokens it brought (prompt + output).
    work: f32,
}

impl Passage {
    /// Time to first token if it completed and is measured, else NaN.
    #[inline]
    fn delay(&self) -> f64 {
        if self.completed { self.left - self.arrival } else { f64::NAN }
    }
}

/// The backlog's inputs: every passage while exact, then a fine grid.
#[derive(Debug, Clone)]
enum Flow {
    Exact(Vec<Passage>),
    Sketch(Box<FineBacklog>),
}

/// Distinct sessions: a bit per id below 2^27, a set above.
#[derive(Debug, Clone, Default)]
struct Sessions {
    bits: Vec<u64>,
    rest: HashSet<u32>,
    n: u64,
}

impl Sessions {
    fn insert(&mut self, s: u32) {
        let fresh = if s < 1 << 27 {
            let (w, b) = (s as usize / 64, 1u64 << (s % 64));
            if w >= self.bits.len() {
                self.bits.resize(w + 1, 0);
            }
            let fresh = self.bits[w] & b == 0;
            self.bits[w] |= b;
            fresh
        } else {
            self.rest.insert(s)
        };
        self.n += fresh as u64;
    }
}

/// KV moved between prefill and decode pools (disaggregation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Moved {
    /// KV bytes per prompt token, link bandwidth (GB/s) and latency (ms).
    per_token: f64,
    gbps: f64,
    latency_ms: f64,
    pub n: u64,
    pub sum_ms: f64,
    pub max_ms: f64,
    pub sum_bytes: f64,
}

/// The running account of a run's finished requests (see the module docs).
#[derive(Debug, Clone)]
pub struct Tally {
    /// Requests summarised exactly ([`EXACT_LIMIT`]).
    limit: u64,
    warmup: f64,
    max_wait: f64,
    slos: Vec<Option<SloConfig>>,
    pub(crate) groups: Vec<Columns>,
    flow: Flow,
    /// Measured arrival span so far.
    span: (f64, f64),
    /// Σ time in system and count over completed requests (whole run).
    pub(crate) sojourn: f64,
    pub(crate) done: u64,
    /// Requests added, and the arrival of the last.
    count: u64,
    last_arrival: f64,
    sessions: Sessions,
    pub(crate) moved: Option<Moved>,
}

impl Tally {
    /// An empty account: exact up to `limit` requests ([`EXACT_LIMIT`] in
    /// runs; less for tests and studies of the approximation), requests
    /// arriving before `warmup` s left out, `max_wait` the engine's queue
    /// timeout (0: none), `slos` per class, and `link` the KV hand-off link
    /// between prefill and decode pools when they are split: (bytes per
    /// token, GB/s, latency ms). [`crate::Setup::tally`] fills these in.
    pub fn with(limit: u64, warmup: f64, max_wait: f64, slos: Vec<Option<SloConfig>>, link: Option<[f64; 3]>) -> Self {
        Tally {
            limit,
            warmup,
            max_wait,
            groups: vec![Columns::default(); slos.len()],
            slos,
            flow: Flow::Exact(Vec::new()),
            span: (f64::INFINITY, f64::NEG_INFINITY),
            sojourn: 0.0,
            done: 0,
            count: 0,
            last_arrival: 0.0,
            sessions: Sessions::default(),
            moved: link.map(|[per_token, gbps, latency_ms]| Moved { per_token, gbps, latency_ms, ..Moved::default() }),
        }
    }

    /// Makes room for the `n` requests a run will add (as far as they are
    /// kept exactly), so that the columns never move while they grow: each
    /// page is then written once. Only the flow and a lone class's columns
    /// are sized (with several classes the split is not known); the room is
    /// reserved address space until it is written.
    pub fn reserve(&mut self, n: u64) {
        let k = n.min(self.limit) as usize;
        if let Flow::Exact(v) = &mut self.flow {
            v.reserve_exact(k);
        }
        if let [one] = self.groups.as_mut_slice() {
            for c in &mut one.cols {
                if let Column::Exact(v) = c {
                    v.reserve_exact(k);
                }
            }
        }
    }

    /// Whether the summary is exact (at most its limit of requests so far).
    pub fn exact(&self) -> bool {
        matches!(self.flow, Flow::Exact(_))
    }

    /// Requests added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Arrival of the last request added, s (0 before any).
    pub fn last_arrival(&self) -> f64 {
        self.last_arrival
    }

    /// Adds the next request (by id) that has left the simulation, or that
    /// was still in it when the run ended.
    pub fn add(&mut self, r: &RequestRecord) {
        self.count += 1;
        self.last_arrival = r.arrival;
        // The backlog is every queue in front of a first token: a request is
        // in it from its arrival to its first token (or its refusal). With
        // disaggregated pools that spans the prefill queue, the KV transfer
        // and the decode pool's queue; after a replica failure, the retry.
        let left = if r.first_token.is_nan() { self.departure(r) } else { r.first_token };
        if r.status == Status::Completed {
            self.sojourn += r.e2e();
            self.done += 1;
        }
        let measured = r.arrival >= self.warmup;
        let mut passage = Passage {
            arrival: r.arrival,
            left,
            measured,
            shed: false,
            completed: false,
            work: (r.prompt as u64 + r.output as u64) as f32,
        };
        if measured {
            let c = r.class as usize;
            self.groups[c].add(r, self.slos[c].as_ref());
            if r.session != u32::MAX {
                self.sessions.insert(r.session);
            }
            passage.shed = matches!(
                r.status,
                Status::Rejected(RejectReason::QueueFull | RejectReason::TimedOut | RejectReason::RateLimited)
            );
            // Its first token is `left` (r.ttft() = first_token − arrival).
            passage.completed = r.status == Status::Completed;
            self.span = (self.span.0.min(r.arrival), self.span.1.max(r.arrival));
            // Requests that reached a decode pool: the KV of all but their prompt's
            // last token crossed the link (the decode side recomputes that one).
            if let Some(m) = &mut self.moved
                && r.output > 1
                && r.generated > 1
            {
                let bytes = m.per_token * r.prompt.saturating_sub(1) as f64;
                let ms = (bytes / (m.gbps * 1e9) + m.latency_ms * 1e-3) * 1e3;
                m.n += 1;
                m.sum_ms += ms;
                m.max_ms = m.max_ms.max(ms);
                m.sum_bytes += bytes;
            }
        }
        match &mut self.flow {
            Flow::Exact(v) => {
                v.push(passage);
                if self.count > self.limit {
                    self.go_sketch();
                }
            }
            Flow::Sketch(f) => pass(f, &passage),
        }
    }

    /// When a request left the system: its last token, or for a refused
    /// request its arrival (its client's timeout, for one that gave up);
    /// infinite while it is still in.
    fn departure(&self, r: &RequestRecord) -> f64 {
        match r.status {
            Status::Completed => r.last_token,
            Status::Rejected(RejectReason::TimedOut) => r.arrival + self.max_wait,
            Status::Rejected(_) => r.arrival,
            Status::InFlight => f64::INFINITY,
        }
    }

    /// Past [`EXACT_LIMIT`]: histograms and the fine grid from here on.
    fn go_sketch(&mut self) {
        for g in &mut self.groups {
            for c in &mut g.cols {
                c.sketch();
            }
        }
        if let Flow::Exact(v) = std::mem::replace(&mut self.flow, Flow::Exact(Vec::new())) {
            // The grid starts at the first measured arrival (at the warm-up's
            // end if none came yet), so that no fine cell straddles it.
            let origin = if self.span.0.is_finite() { self.span.0 } else { self.warmup.max(0.0) };
            let mut f = Box::new(FineBacklog::new(origin));
            for p in &v {
                pass(&mut f, p);
            }
            self.flow = Flow::Sketch(f);
        }
    }

    /// Distinct measured sessions.
    pub(crate) fn sessions(&self) -> u64 {
        self.sessions.n
    }

    /// The backlog over the measured arrival span.
    pub(crate) fn backlog(&mut self) -> Backlog {
        let span = if self.span.0.is_finite() { self.span } else { (0.0, 0.0) };
        match std::mem::replace(&mut self.flow, Flow::Exact(Vec::new())) {
            Flow::Exact(v) => {
                let mut b = Backlog::new(span.0, span.1);
                for p in &v {
                    b.add(p.arrival, p.left);
                }
                for p in v.iter().filter(|p| p.measured) {
                    b.measure(p.arrival, p.shed, p.delay(), p.work as f64);
                }
                b
            }
            Flow::Sketch(f) => f.into_backlog(span.0, span.1),
        }
    }

    /// The relative error bound of the summary's latency percentiles: 0 when exact.
    pub fn percentile_error(&self) -> f64 {
        if self.exact() { 0.0 } else { hist::RELATIVE_ERROR }
    }
}

fn pass(f: &mut FineBacklog, p: &Passage) {
    f.add(p.arrival, p.left);
    if p.measured {
        f.measure(p.arrival, p.shed, p.delay(), p.work as f64);
    }
}
