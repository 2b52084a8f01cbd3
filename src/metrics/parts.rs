//! Latency attribution: each request's time split into parts that add up
//! exactly to its time to first token and its end-to-end latency.
//!
//! Every instant of a request's life, from arrival to its last token, goes
//! to exactly one part:
//!
//! - before the first token (the parts of TTFT): preprocessing, the central
//!   queue, waiting in a replica's queue (split by why the scheduler did not
//!   take it: a step was in flight, the batch was full, the token budget was
//!   taken by decodes or by other requests' prompt chunks, the KV cache was
//!   full, a static batch was still forming), time lost to preemption
//!   (waiting again, and the compute thrown away), the KV transfer between
//!   pools, its own prefill compute, and interference (the extra time its
//!   steps took because other requests' work shared them);
//! - after it (the parts of E2E − TTFT): decode compute, stalls from other
//!   requests' prompt work (chunks in its steps, or steps it sat out),
//!   preemption loss (waiting and recomputing), and swap copies.
//!
//! How the split is made (docs/attribution.md): each replica keeps running
//! clocks — one per wait reason, advanced at every step formation, and one
//! per decode part, advanced at every step end — and a request reads them
//! when it enters and leaves a state, so attribution costs O(1) per request
//! and per step, not O(requests) per step. A step with a prompt chunk is
//! split by a counterfactual: the chunk's own compute is what the step would
//! have cost with that chunk alone; a decode step's own compute is what it
//! would have cost with its decodes alone. The rest of the step is
//! interference.

use serde::{Deserialize, Serialize};

/// One part of a request's latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Arrival to admission: tokenisation and the front-end workers' queue.
    Preprocess,
    /// Waiting in the router's central queue for a replica with room (or,
    /// with `[fleet]`, for any replica to be ready).
    CentralQueue,
    /// Waiting for the step in flight to end (the scheduler takes new
    /// requests only between steps).
    WaitStep,
    /// Waiting while the batch was full (`max_num_seqs` running, or a static
    /// batch in flight).
    WaitBatchFull,
    /// Waiting while the step's token budget was taken, mostly by decodes.
    WaitBudget,
    /// Waiting while the token budget was taken, mostly by other requests'
    /// prompt chunks (behind earlier prefills).
    WaitPrefills,
    /// Waiting while the KV cache could not hold it (free blocks, the
    /// watermark, reservations, or preemptions under way).
    WaitKv,
    /// Static batching: waiting for the batch to fill or its timeout.
    WaitBatchForming,
    /// Before the first token: waiting again after a preemption, and the
    /// prompt compute the preemption threw away (or, with `[fleet]`
    /// failures, everything before the failure of its replica).
    Preempted,
    /// Disaggregated serving: the prompt's KV cache crossing to the decode pool.
    Transfer,
    /// Its own prefill compute: what its prompt chunks would have cost alone
    /// (with disaggregation, also the decode pool's first step).
    Prefill,
    /// Extra time its prefill steps took because other requests' work
    /// (decodes, other chunks, swap copies) shared them.
    Interference,
    /// After the first token: decode steps as they would have run with only
    /// the decodes in them.
    DecodeCompute,
    /// After the first token: extra decode time from other requests' prompt
    /// work (chunks inside its steps, prompt-only steps it sat out).
    DecodeStall,
    /// After the first token: waiting and recomputing after a preemption.
    DecodePreempted,
    /// After the first token: swap copies (host ↔ GPU) inside its steps.
    DecodeSwap,
}

/// Number of parts.
pub const NUM_PARTS: usize = 16;

/// One request's latency parts, seconds, indexed by [`Part`].
pub type Parts = [f64; NUM_PARTS];

impl Part {
    /// Every part, in column order.
    pub const ALL: [Part; NUM_PARTS] = [
        Part::Preprocess,
        Part::CentralQueue,
        Part::WaitStep,
        Part::WaitBatchFull,
        Part::WaitBudget,
        Part::WaitPrefills,
        Part::WaitKv,
        Part::WaitBatchForming,
        Part::Preempted,
        Part::Transfer,
        Part::Prefill,
        Part::Interference,
        Part::DecodeCompute,
        Part::DecodeStall,
        Part::DecodePreempted,
        Part::DecodeSwap,
    ];

    /// The wait reasons a replica's clocks track, in clock order.
    pub const WAITS: [Part; 6] = [
        Part::WaitStep,
        Part::WaitBatchFull,
        Part::WaitBudget,
        Part::WaitPrefills,
        Part::WaitKv,
        Part::WaitBatchForming,
    ];

    /// Index into [`Parts`].
    #[inline]
    pub fn idx(self) -> usize {
        self as usize
    }

    /// Whether the part lies before the first token (a part of TTFT).
    pub fn before_first_token(self) -> bool {
        self.idx() < Part::DecodeCompute.idx()
    }

    /// snake_case name (CSV column `t_<name>_s`, JSON key).
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Preprocess => "preprocess",
            Part::CentralQueue => "central_queue",
            Part::WaitStep => "wait_step",
            Part::WaitBatchFull => "wait_batch_full",
            Part::WaitBudget => "wait_budget",
            Part::WaitPrefills => "wait_prefills",
            Part::WaitKv => "wait_kv",
            Part::WaitBatchForming => "wait_batch_forming",
            Part::Preempted => "preempted",
            Part::Transfer => "transfer",
            Part::Prefill => "prefill",
            Part::Interference => "interference",
            Part::DecodeCompute => "decode_compute",
            Part::DecodeStall => "decode_stall",
            Part::DecodePreempted => "decode_preempted",
            Part::DecodeSwap => "decode_swap",
        }
    }

    /// Parses the snake_case name.
    pub fn parse(s: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// A phrase for reports: what the time was spent on.
    pub fn phrase(self) -> &'static str {
        match self {
            Part::Preprocess => "preprocessing (tokeniser and front-end queue)",
            Part::CentralQueue => "waiting in the router's central queue",
            Part::WaitStep => "waiting for the step in flight to end",
            Part::WaitBatchFull => "waiting while the batch was full (max_num_seqs)",
            Part::WaitBudget => "waiting while decodes took the token budget",
            Part::WaitPrefills => "queued behind earlier prefills (their chunks took the token budget)",
            Part::WaitKv => "waiting for KV-cache room",
            Part::WaitBatchForming => "waiting for a static batch to form",
            Part::Preempted => "preempted before its first token (re-queued, prompt recomputed)",
            Part::Transfer => "KV transfer to the decode pool",
            Part::Prefill => "its own prefill compute",
            Part::Interference => "interference: other requests' work in its prefill steps",
            Part::DecodeCompute => "decode compute",
            Part::DecodeStall => "decode stalled by other requests' prefills",
            Part::DecodePreempted => "preempted while decoding (re-queued, recomputed)",
            Part::DecodeSwap => "swap copies in its decode steps",
        }
    }
}

/// Attribution state of one request while it is in the system: its parts
/// so far, and the time it entered a state read from its own clock.
#[derive(Debug, Clone, Copy)]
pub struct Attr {
    /// Parts so far. While the request waits in a queue, the wait parts hold
    /// minus the replica's wait clocks at its entry.
    pub parts: Parts,
    /// Preempted or handed off at this time, and not yet back: the wait
    /// that follows is charged as one part (NaN: it waits on the replica's
    /// wait clocks instead).
    pub mark: f64,
}

impl Default for Attr {
    fn default() -> Self {
        Attr { parts: [0.0; NUM_PARTS], mark: f64::NAN }
    }
}

/// Sum of the parts before the first token (equals TTFT for a completed request).
pub fn ttft_sum(p: &Parts) -> f64 {
    p[..Part::DecodeCompute.idx()].iter().sum()
}

/// Sum of all parts (equals E2E for a completed request).
pub fn e2e_sum(p: &Parts) -> f64 {
    p.iter().sum()
}
