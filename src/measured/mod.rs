//! Measured data sets and runs, as servesim reads them: the shipped
//! reference tables ([`Table`]), GPUStack's result blocks and the run of a
//! serving-results row ([`gpustack`]), the arrival and lengths of a measured
//! run ([`runs`]), offline-throughput cases ([`offline`]), the shapes of
//! measured engine steps, and the `--rows` filters that pick rows. What
//! `servesim validate` judges predictions against and `servesim calibrate`
//! fits to: both use this module, and it uses neither.

pub mod gpustack;
pub mod offline;
pub mod runs;
mod table;

pub use table::{Table, user_table};

use crate::cost::StepBatch;

/// Whether row filters select the row `id`: every filter must match, and a
/// filter matches when the id contains one of its `|`-separated
/// alternatives (no filters: every row).
pub fn selects<S: AsRef<str>>(filters: &[S], id: &str) -> bool {
    filters.iter().all(|f| f.as_ref().split('|').any(|alt| id.contains(alt)))
}

/// Prefill of `b` prompts of `p` tokens each, nothing cached.
pub fn prefill_step(b: u32, p: u32) -> StepBatch {
    let (bf, pf) = (b as f64, p as f64);
    StepBatch {
        prefill_tokens: b as u64 * p as u64,
        prefill_seqs: b,
        prefill_attn_pairs: bf * pf * (pf + 1.0) / 2.0,
        prefill_ctx_tokens: 0.0,
        logits: b,
        new_requests: b,
        ..Default::default()
    }
}

/// One decode step of `b` sequences, each with `ctx` tokens of context.
pub fn decode_step(b: u32, ctx: f64) -> StepBatch {
    StepBatch { decode_seqs: b, decode_ctx_tokens: b as f64 * ctx, logits: b, ..Default::default() }
}
