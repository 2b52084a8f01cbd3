//! Speculative decoding: a draft proposes `k` tokens per decoding sequence,
//! then the target model verifies all `k + 1` positions in one pass.
//!
//! A verify step is priced as the target model running a prefill chunk of
//! `k + 1` tokens per decoding sequence over its cached context (every
//! position produces logits), next to the step's ordinary prefill chunks;
//! the draft runs `k` decode steps of the same sequences (the first one also
//! prefills the step's new prompt chunks, so the draft's KV cache follows the
//! target's). With the `mtp` method the draft is a one-layer head of the
//! target model. How many tokens a verify step emits is the engine's business
//! (it draws the accepted run per sequence); this model only prices the step.

use super::{StepBatch, StepCost, StepCostModel};

/// A target cost model with a draft model in front of it.
#[derive(Debug, Clone)]
pub struct Speculative<C> {
    /// The model being served.
    pub target: C,
    /// The proposer (none: speculation off, steps priced by the target alone).
    pub draft: Option<C>,
}

impl<C: StepCostModel> Speculative<C> {
    /// Prices steps of `target` with `draft` proposing tokens.
    pub fn new(target: C, draft: Option<C>) -> Self {
        Speculative { target, draft }
    }

    /// The target-model batch of a verify step: each of the `n` decoding
    /// sequences becomes a chunk of `k + 1` query tokens over its context.
    pub fn verify_batch(b: &StepBatch) -> StepBatch {
        let n = b.decode_seqs as f64;
        let c = (b.spec_tokens + 1) as f64;
        // decode_ctx_tokens counts each sequence's newest token; the cached context excludes it.
        let ctx = b.decode_ctx_tokens - n;
        StepBatch {
            prefill_tokens: b.prefill_tokens + b.decode_seqs as u64 * (b.spec_tokens as u64 + 1),
            prefill_seqs: b.prefill_seqs + b.decode_seqs,
            prefill_attn_pairs: b.prefill_attn_pairs + c * ctx + n * c * (c + 1.0) / 2.0,
            prefill_ctx_tokens: b.prefill_ctx_tokens + ctx,
            decode_seqs: 0,
            decode_ctx_tokens: 0.0,
            logits: b.logits + b.decode_seqs * b.spec_tokens,
            new_requests: b.new_requests,
            spec_tokens: 0,
            host_free: b.host_free,
        }
    }
}

impl<C: StepCostModel> StepCostModel for Speculative<C> {
    fn step(&mut self, b: &StepBatch) -> StepCost {
        let Some(draft) = self.draft.as_mut().filter(|_| b.spec_tokens > 0 && b.decode_seqs > 0) else {
            let plain = StepBatch { spec_tokens: 0, ..*b };
            return self.target.step(&plain);
        };
        let mut cost = self.target.step(&Self::verify_batch(b));
        let n = b.decode_seqs;
        for i in 0..b.spec_tokens {
            // Draft step i: every sequence decodes one more proposed token;
            // the first also carries the step's prompt chunks.
            let ctx = b.decode_ctx_tokens + (n as u64 * i as u64) as f64;
            let mut d = StepBatch { decode_seqs: n, decode_ctx_tokens: ctx, logits: n, ..StepBatch::default() };
            if i == 0 {
                d.prefill_tokens = b.prefill_tokens;
                d.prefill_seqs = b.prefill_seqs;
                d.prefill_attn_pairs = b.prefill_attn_pairs;
                d.prefill_ctx_tokens = b.prefill_ctx_tokens;
            }
            let c = draft.step(&d);
            cost.time += c.time;
            cost.flops += c.flops;
            cost.bytes += c.bytes;
        }
        cost
    }

    fn peak_flops(&self) -> f64 {
        self.target.peak_flops()
    }

    fn peak_bandwidth(&self) -> f64 {
        self.target.peak_bandwidth()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::config::{CostConfig, Dtype, KvDtype};
    use crate::cost::Roofline;

    fn roofline(name: &str, layers: Option<u32>) -> Roofline {
        // Draft steps run inside the verify step: no scheduler overhead of their own.
        let cost = CostConfig { step_overhead_ms: if layers.is_some() { 0.0 } else { 0.5 }, ..CostConfig::default() };
        let c = Catalog::builtin().unwrap();
        let mut llm = c.model(name).unwrap().spec.clone();
        if let Some(l) = layers {
            llm.num_layers = l;
        }
        let gpu = c.gpu("h100-sxm").unwrap().spec.clone();
        Roofline::new(&llm, &gpu, 1, Dtype::Bf16, KvDtype::Bf16, &cost)
    }

    fn decode(n: u32, ctx: f64, k: u32) -> StepBatch {
        StepBatch {
            decode_seqs: n,
            decode_ctx_tokens: n as f64 * (ctx + 1.0),
            logits: n,
            spec_tokens: k,
            ..Default::default()
        }
    }

    #[test]
    fn verify_pass_is_a_chunk_of_k_plus_one_tokens_per_sequence() {
        let v = Speculative::<Roofline>::verify_batch(&decode(4, 100.0, 3));
        assert_eq!(v.prefill_tokens, 16);
        assert_eq!(v.prefill_seqs, 4);
        assert_eq!(v.logits, 16);
        assert_eq!(v.prefill_ctx_tokens, 400.0);
        // Per sequence: 4 queries × 100 cached + the causal 4·5/2 among themselves.
        assert_eq!(v.prefill_attn_pairs, 4.0 * (4.0 * 100.0 + 10.0));
        assert_eq!(v.decode_seqs, 0);
    }

    #[test]
    fn small_batches_verify_almost_for_free_large_ones_do_not() {
        let mut s = Speculative::new(roofline("llama-3.1-8b", None), Some(roofline("llama-3.1-8b", Some(1))));
        let mut plain = roofline("llama-3.1-8b", None);
        // Batch 1, memory bound: verifying 5 tokens costs little more than decoding 1.
        let small = s.step(&decode(1, 500.0, 4)).time / plain.step(&decode(1, 500.0, 0)).time;
        // Batch 256: the verify pass moves 5× the tokens through compute-bound GEMMs.
        let large = s.step(&decode(256, 500.0, 4)).time / plain.step(&decode(256, 500.0, 0)).time;
        assert!(small < 1.4, "batch-1 verify+draft / plain = {small}");
        assert!(large > 2.0, "batch-256 verify+draft / plain = {large}");
        // Without speculation in the batch the target prices it unchanged.
        assert_eq!(s.step(&decode(8, 500.0, 0)), plain.step(&decode(8, 500.0, 0)));
    }
}
