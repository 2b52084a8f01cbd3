//! Execution-time prediction for one engine step.
//!
//! The engine describes a step by a handful of running aggregates
//! ([`StepBatch`]); a [`StepCostModel`] turns them into a duration. Building
//! the aggregates is O(batch) at most (and O(1) for steady decode batches);
//! evaluating them is O(1): the cost never loops over layers or tokens.

mod kernel;
mod roofline;
mod speculative;
mod synthetic;

pub use kernel::{KernelModel, Kernels, Path as GemmPath};
pub use roofline::{DecodeRun, Layout, Roofline};
pub use speculative::Speculative;
pub use synthetic::{ConstantStep, ExponentialStep};

/// What one engine step computes, summed over the sequences in it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepBatch {
    /// Prompt tokens processed (sum of prefill chunk lengths).
    pub prefill_tokens: u64,
    /// Sequences with a prefill chunk in this step.
    pub prefill_seqs: u32,
    /// Causal attention query-key pairs of the prefill chunks:
    /// sum over chunks of `c·p + c(c+1)/2` (chunk length c, cached context p).
    pub prefill_attn_pairs: f64,
    /// Cached context tokens read by the prefill chunks (sum of p).
    pub prefill_ctx_tokens: f64,
    /// Sequences decoding one token each.
    pub decode_seqs: u32,
    /// KV tokens read by decode attention (sum of context lengths).
    pub decode_ctx_tokens: f64,
    /// Sequences that sample a token at the end of the step (LM-head rows).
    pub logits: u32,
    /// Requests admitted in this step (first admissions and re-admissions
    /// after a preemption: each prepares its inputs anew).
    pub new_requests: u32,
    /// Speculative decoding: draft tokens proposed per decoding sequence (k);
    /// each decoding sequence then verifies k + 1 tokens (0: off).
    pub spec_tokens: u32,
    /// A step inside a multi-step window after its first: the host neither
    /// schedules nor prepares inputs (no CPU step overhead).
    pub host_free: bool,
}

impl StepBatch {
    /// (query-key pairs, cached tokens read) of the step's prefill chunks in
    /// one attention layer of `kind`. A query reads at most the window's keys
    /// where the engine keeps only the window (hybrid models); a model whose
    /// every layer slides keeps the prefill cost of full attention (the
    /// Mistral-7B rows of the TensorRT-LLM table fit that, not the capped cost).
    /// Sparse attention (an indexer) caps every query at its top-k keys, in
    /// prefill too, while the KV of every token is kept.
    pub fn prefill_reads(&self, kind: &crate::spec::AttnKind) -> (f64, f64) {
        match kind.window.filter(|_| !kind.kv_per_token || kind.indexer.is_some()) {
            Some(w) => (
                self.prefill_attn_pairs.min(self.prefill_tokens as f64 * w),
                self.prefill_ctx_tokens.min(self.prefill_seqs as f64 * w),
            ),
            None => (self.prefill_attn_pairs, self.prefill_ctx_tokens),
        }
    }

    /// A step of `seqs` decoding sequences reading `ctx_tokens` of KV in
    /// all, each verifying `spec_tokens` draft tokens (0: no speculation).
    pub fn decoding(seqs: u32, ctx_tokens: f64, spec_tokens: u32) -> StepBatch {
        StepBatch {
            decode_seqs: seqs,
            decode_ctx_tokens: ctx_tokens,
            logits: seqs,
            spec_tokens,
            ..StepBatch::default()
        }
    }

    /// Adds a prompt chunk of `c` tokens after `computed` tokens already in
    /// the KV cache; `samples`: the chunk ends the prompt and yields a token.
    #[inline]
    pub fn add_chunk(&mut self, computed: u32, c: u32, samples: bool) {
        let (p, cf) = (computed as f64, c as f64);
        self.prefill_tokens += c as u64;
        self.prefill_seqs += 1;
        self.prefill_attn_pairs += cf * p + cf * (cf + 1.0) / 2.0;
        self.prefill_ctx_tokens += p;
        if samples {
            self.logits += 1;
        }
    }

    /// Tokens through the model in this step.
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs as u64
    }

    /// Tokens the step takes from the scheduler's token budget: each
    /// speculating sequence verifies k + 1 tokens.
    pub fn scheduled_tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs as u64 * (1 + self.spec_tokens as u64)
    }
}

/// The larger of two numbers that are never NaN: one compare and select,
/// where `f64::max` adds NaN handling (the same result for them). For the
/// fast path's inner loops.
#[inline(always)]
pub(crate) fn max_num(a: f64, b: f64) -> f64 {
    if a > b { a } else { b }
}

/// The smaller of two numbers that are never NaN (see [`max_num`]).
#[inline(always)]
pub(crate) fn min_num(a: f64, b: f64) -> f64 {
    if a < b { a } else { b }
}

/// The predicted cost of one step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepCost {
    /// Wall time of the step, seconds.
    pub time: f64,
    /// Floating-point operations per GPU.
    pub flops: f64,
    /// Bytes moved to or from GPU memory, per GPU.
    pub bytes: f64,
}

/// A step-time predictor. Implementations must be deterministic given their
/// own state (random ones carry a seeded generator).
pub trait StepCostModel {
    /// Predicts one step.
    fn step(&mut self, batch: &StepBatch) -> StepCost;
    /// The time `batch` would take as a step that is not run: latency
    /// attribution's counterfactuals (a chunk alone, the decodes alone).
    /// Unlike [`Self::step`] it must not advance a random stream, so that
    /// attributing leaves the run unchanged; a deterministic model predicts
    /// what `step` gives.
    fn predict(&mut self, batch: &StepBatch) -> f64 {
        self.step(batch).time
    }

    /// Pure decode steps of `seqs` sequences ([`StepBatch::decoding`]) priced
    /// from their summed context alone, bit for bit as [`Self::step`] prices
    /// them; `None` (the default) where the model has no such closed form.
    fn decode_run(&mut self, seqs: u32, spec_tokens: u32) -> Option<DecodeRun> {
        let _ = (seqs, spec_tokens);
        None
    }
    /// Peak FLOP/s of one GPU at the model's numeric format (for MFU).
    fn peak_flops(&self) -> f64;
    /// Peak memory bandwidth of one GPU, bytes/s (for MBU).
    fn peak_bandwidth(&self) -> f64;
}
