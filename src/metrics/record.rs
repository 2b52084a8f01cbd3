//! Per-request records: every timestamp of a request's life.

use serde::Serialize;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// prompt + output exceeds `max_model_len`.
    ExceedsMaxModelLen,
    /// prompt + output − 1 tokens can never fit in one replica's KV cache.
    ExceedsKvCapacity,
    /// Without chunked prefill, the prompt exceeds `max_num_batched_tokens`.
    ExceedsTokenBudget,
    /// The replica's waiting queue was full (`engine.max_waiting`).
    QueueFull,
    /// Not scheduled within `engine.max_wait_s` of arrival: the client gave up.
    TimedOut,
    /// Over its class's token rate limit.
    RateLimited,
    /// Lost with the replica serving it (`fleet.on_failure = "lost"`).
    ReplicaFailed,
}

impl RejectReason {
    /// Parses the snake_case name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            RejectReason::ExceedsMaxModelLen,
            RejectReason::ExceedsKvCapacity,
            RejectReason::ExceedsTokenBudget,
            RejectReason::QueueFull,
            RejectReason::TimedOut,
            RejectReason::RateLimited,
            RejectReason::ReplicaFailed,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// snake_case name used in CSV and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::ExceedsMaxModelLen => "exceeds_max_model_len",
            RejectReason::ExceedsKvCapacity => "exceeds_kv_capacity",
            RejectReason::ExceedsTokenBudget => "exceeds_token_budget",
            RejectReason::QueueFull => "queue_full",
            RejectReason::TimedOut => "timed_out",
            RejectReason::RateLimited => "rate_limited",
            RejectReason::ReplicaFailed => "replica_failed",
        }
    }
}

/// Where a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still in the system (only seen mid-run).
    InFlight,
    /// All output tokens delivered.
    Completed,
    /// Refused at arrival.
    Rejected(RejectReason),
}

/// One request's life. Times are seconds from the start of the simulation;
/// NaN means "did not happen".
#[derive(Debug, Clone, Copy)]
pub struct RequestRecord {
    /// Client sends the request.
    pub arrival: f64,
    /// Preprocessing done; the request enters a replica's waiting queue.
    pub admitted: f64,
    /// Start of the first engine step that computes part of its prompt.
    pub first_scheduled: f64,
    /// End of the step that produced its first output token.
    pub first_token: f64,
    /// End of the step that produced its last output token (= finish). While
    /// a preempted request waits, the time of the latest token it produced.
    pub last_token: f64,
    /// Prompt tokens.
    pub prompt: u32,
    /// Output tokens requested.
    pub output: u32,
    /// Output tokens generated so far.
    pub generated: u32,
    /// Times it was preempted (recompute).
    pub preemptions: u32,
    /// Replica it was routed to (u32::MAX: none).
    pub replica: u32,
    /// Session it belongs to (u32::MAX: none).
    pub session: u32,
    /// Leading prompt tokens shared with an earlier request.
    pub prefix: u32,
    /// Class index.
    pub class: u16,
    /// Its prompt (or output) was shortened to fit the context window.
    pub clipped: bool,
    /// Row of the replayed trace it came from (`u32::MAX`: not from a trace);
    /// gives the prefix-block hashes of Mooncake traces.
    pub trace_row: u32,
    /// Terminal state.
    pub status: Status,
}

impl RequestRecord {
    /// A request that has just arrived.
    pub fn new(arrival: f64, prompt: u32, output: u32) -> Self {
        RequestRecord {
            arrival,
            admitted: f64::NAN,
            first_scheduled: f64::NAN,
            first_token: f64::NAN,
            last_token: f64::NAN,
            prompt,
            output,
            generated: 0,
            preemptions: 0,
            replica: u32::MAX,
            session: u32::MAX,
            prefix: 0,
            class: 0,
            clipped: false,
            trace_row: u32::MAX,
            status: Status::InFlight,
        }
    }

    /// Time to first token, seconds; for a prefill-only request (output 0),
    /// the time to its result.
    pub fn ttft(&self) -> f64 {
        self.first_token - self.arrival
    }
    /// End-to-end latency, seconds.
    pub fn e2e(&self) -> f64 {
        self.last_token - self.arrival
    }
    /// Time per output token after the first (vLLM's TPOT), seconds; NaN for one-token outputs.
    pub fn tpot(&self) -> f64 {
        if self.output > 1 { (self.e2e() - self.ttft()) / (self.output - 1) as f64 } else { f64::NAN }
    }
    /// Waiting in the replica queue before the first step, seconds.
    pub fn queue_delay(&self) -> f64 {
        self.first_scheduled - self.admitted
    }
    /// Preprocessing (arrival to admission), seconds.
    pub fn preprocess(&self) -> f64 {
        self.admitted - self.arrival
    }
    /// E2E divided by output tokens, seconds per token (NaN for prefill-only requests).
    pub fn normalized_latency(&self) -> f64 {
        if self.output > 0 { self.e2e() / self.output as f64 } else { f64::NAN }
    }
}

/// Whether a completed request meets each objective: [TTFT, TPOT, E2E]
/// (an objective that is not set is met). The TPOT objective does not apply
/// to one-token outputs, as in vLLM.
pub fn slo_checks(slo: &crate::config::SloConfig, r: &RequestRecord) -> [bool; 3] {
    let tpot = r.tpot();
    [
        slo.ttft_ms.is_none_or(|x| r.ttft() * 1e3 <= x),
        slo.tpot_ms.is_none_or(|x| tpot.is_nan() || tpot * 1e3 <= x),
        slo.e2e_ms.is_none_or(|x| r.e2e() * 1e3 <= x),
    ]
}

/// Whether a completed request met every objective of its class (None: its class has none).
pub fn slo_met(workload: &crate::workload::WorkloadPlan, r: &RequestRecord) -> Option<bool> {
    let slo = workload.classes.get(r.class as usize)?.slo.as_ref()?;
    (r.status == Status::Completed).then(|| slo_checks(slo, r).iter().all(|&x| x))
}

/// The records of the requests still in the system, indexed by request id:
/// the window from the oldest unfinished request to the newest arrival.
/// Finished requests leave it from the front, in id order ([`Self::retire`]),
/// so memory follows the requests in flight, not the length of the run.
#[derive(Debug, Clone, Default)]
pub struct LiveRecords {
    /// Records of ids `base + start ..`; the first `start` slots are already retired.
    slots: Vec<RequestRecord>,
    start: usize,
    /// Id of `slots[0]`.
    base: usize,
    /// Most records held at once.
    peak: usize,
    /// Latency attribution ([`super::parts`]): one entry per slot when on,
    /// none when off.
    attrs: Vec<super::parts::Attr>,
    attributing: bool,
}

impl LiveRecords {
    /// Requests recorded so far (retired or not): the next request's id.
    pub fn len(&self) -> usize {
        self.base + self.slots.len()
    }

    /// Whether no request was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty window that also keeps each request's latency parts.
    pub fn with_attribution(on: bool) -> Self {
        LiveRecords { attributing: on, ..LiveRecords::default() }
    }

    /// Whether each request's latency parts are kept.
    #[inline]
    pub fn attributing(&self) -> bool {
        self.attributing
    }

    /// The attribution state of request `id` (in the window; attribution on).
    #[inline]
    pub fn attr(&mut self, id: u32) -> &mut super::parts::Attr {
        debug_assert!(id as usize >= self.base + self.start, "request {id} was already retired");
        &mut self.attrs[id as usize - self.base]
    }

    /// Records a new request under the next id.
    pub fn push(&mut self, r: RequestRecord) {
        self.slots.push(r);
        if self.attributing {
            self.attrs.push(super::parts::Attr::default());
        }
        self.peak = self.peak.max(self.slots.len() - self.start);
    }

    /// Records held now (requests in flight, and finished ones waiting
    /// behind an older request still in flight).
    pub fn live(&self) -> usize {
        self.slots.len() - self.start
    }

    /// The most records held at once so far (requests in flight, and
    /// finished ones waiting behind an older request still in flight).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// The record of `id`, unless it has already been retired (finished).
    pub fn get(&self, id: u32) -> Option<&RequestRecord> {
        (id as usize).checked_sub(self.base + self.start).and_then(|i| self.slots.get(self.start + i))
    }

    /// Whether request `id` was refused (timed out, say) or has left: a
    /// queue that still lists it skips it. A request refused while waiting
    /// stays in its replica's queue until it reaches the front, and may be
    /// retired long before.
    pub fn refused(&self, id: u32) -> bool {
        self.get(id).is_none_or(|r| matches!(r.status, Status::Rejected(_)))
    }

    /// Hands the finished requests at the front of the window to `out`, in
    /// id order, and forgets them; stops at the first one still in flight.
    #[inline]
    pub fn retire(&mut self, out: impl FnMut(u32, &RequestRecord, Option<&super::Parts>)) {
        // (Called after every event: most often the front is still in flight.)
        if self.slots.get(self.start).is_none_or(|r| r.status == Status::InFlight) {
            return;
        }
        self.retire_front(out);
    }

    fn retire_front(&mut self, mut out: impl FnMut(u32, &RequestRecord, Option<&super::Parts>)) {
        while let Some(r) = self.slots.get(self.start) {
            if r.status == Status::InFlight {
                break;
            }
            out((self.base + self.start) as u32, r, self.attrs.get(self.start).map(|a| &a.parts));
            self.start += 1;
        }
        // Compact once the retired prefix outweighs the live part (amortised O(1)).
        if self.start >= 4096 && self.start * 2 >= self.slots.len() {
            self.slots.drain(..self.start);
            if self.attributing {
                self.attrs.drain(..self.start);
            }
            self.base += self.start;
            self.start = 0;
        }
    }

    /// Hands every record still held to `out`, in id order (the end of a run:
    /// requests still in flight included).
    pub fn retire_all(&mut self, mut out: impl FnMut(u32, &RequestRecord, Option<&super::Parts>)) {
        for (i, r) in self.slots[self.start..].iter().enumerate() {
            out((self.base + self.start + i) as u32, r, self.attrs.get(self.start + i).map(|a| &a.parts));
        }
        self.base += self.slots.len();
        self.slots.clear();
        self.attrs.clear();
        self.start = 0;
    }
}

impl std::ops::Index<usize> for LiveRecords {
    type Output = RequestRecord;
    /// The record of a request in the window (panics for a retired one: the
    /// simulation only touches requests in flight).
    #[inline]
    fn index(&self, id: usize) -> &RequestRecord {
        debug_assert!(id >= self.base + self.start, "request {id} was already retired");
        &self.slots[id - self.base]
    }
}

impl std::ops::IndexMut<usize> for LiveRecords {
    #[inline]
    fn index_mut(&mut self, id: usize) -> &mut RequestRecord {
        debug_assert!(id >= self.base + self.start, "request {id} was already retired");
        &mut self.slots[id - self.base]
    }
}

/// A systematic sample of a run's records, for charts: every `stride`-th
/// request by id, the stride doubling (and every other sampled record
/// dropped) whenever `2 × cap` are held, so that between `cap` and `2 × cap`
/// records are kept (all of them for runs of fewer than `2 × cap`).
#[derive(Debug, Clone)]
pub struct RecordSample {
    /// The sampled records, by id.
    pub records: Vec<RequestRecord>,
    /// Ids in `records` are the multiples of this.
    pub stride: u64,
    cap: usize,
}

impl RecordSample {
    /// An empty sample of between `cap` and `2 × cap` records.
    pub fn new(cap: usize) -> Self {
        RecordSample { records: Vec::new(), stride: 1, cap: cap.max(1) }
    }

    /// Offers the record of request `id` (ids in increasing order).
    pub fn offer(&mut self, id: u64, r: &RequestRecord) {
        // (The stride is a power of two: a mask, not a division.)
        if id & (self.stride - 1) == 0 {
            self.records.push(*r);
            if self.records.len() >= 2 * self.cap {
                let mut i = 0;
                self.records.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
    }
}
