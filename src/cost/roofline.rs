//! The roofline step-time model.
//!
//! Every operator of a layer costs `max(FLOPs / (peak × compute_eff),
//! bytes / (bandwidth × memory_eff))`; a layer is the sum of its operators and
//! the model is `num_layers` identical layers plus the LM head. Tensor
//! parallelism divides FLOPs and weight bytes by `tp` (KV heads are replicated
//! when there are fewer than `tp`) and adds two ring all-reduces per layer.
//! A fixed per-step overhead and a per-new-request overhead are added last.

use super::{StepBatch, StepCost, StepCostModel};
use crate::catalog::{GpuSpec, LlmSpec};
use crate::config::{CostConfig, Dtype, KvDtype};

/// Activation element size (BF16) in bytes.
const ACT: f64 = 2.0;

/// One GEMM operator of a layer, per GPU.
#[derive(Debug, Clone, Copy)]
struct Gemm {
    flops_per_token: f64,
    weight_bytes: f64,
    act_bytes_per_token: f64,
}

/// Precomputed per-GPU constants of the roofline model.
#[derive(Debug, Clone)]
pub struct Roofline {
    layers: f64,
    peak_flops: f64,
    peak_bw: f64,
    dense: Vec<Gemm>,
    /// MoE FFN: (experts, experts per token, one expert's per-GPU weight bytes,
    /// per-token FLOPs of all active experts, activation bytes per token).
    moe: Option<(f64, f64, f64, f64, f64)>,
    attn_flops_per_pair: f64,
    kv_bytes_per_token_layer: f64,
    attn_act_bytes_per_token: f64,
    sliding_window: Option<f64>,
    lm_flops_per_row: f64,
    lm_weight_bytes: f64,
    lm_out_bytes_per_row: f64,
    tp: f64,
    allreduce_bytes_per_token: f64,
    link_bw: f64,
    hop_latency: f64,
    step_overhead: f64,
    per_request_overhead: f64,
    inv_flops_rate: f64,
    inv_bw: f64,
    /// Cache of the token-count-dependent part (GEMMs, all-reduce) of one layer:
    /// (tokens, time, flops, bytes). Steady decode batches hit it every step.
    gemm_cache: (f64, f64, f64, f64),
}

impl Roofline {
    /// Builds the model for `tp` GPUs of `gpu` running `llm` in `dtype`.
    pub fn new(llm: &LlmSpec, gpu: &GpuSpec, tp: u32, dtype: Dtype, kv: KvDtype, cost: &CostConfig) -> Self {
        let tpf = tp as f64;
        let w = dtype.bytes();
        let peak_flops = match dtype {
            Dtype::Fp8 if gpu.fp8_tflops > 0.0 => gpu.fp8_tflops,
            _ => gpu.bf16_tflops,
        } * 1e12;
        let peak_bw = gpu.memory_bandwidth_gbps * 1e9;
        let ce = cost.compute_efficiency.unwrap_or(gpu.compute_efficiency);
        let me = cost.memory_efficiency.unwrap_or(gpu.memory_efficiency);
        let ie = cost.interconnect_efficiency.unwrap_or(gpu.interconnect_efficiency);
        let h = llm.hidden_size as f64;
        let hd = llm.head_dim as f64;
        let q = llm.num_attention_heads as f64 * hd;
        let kvw = llm.num_kv_heads as f64 * hd;
        let f = llm.intermediate_size as f64;
        let gemm = |k_in: f64, n_out: f64| Gemm {
            flops_per_token: 2.0 * k_in * n_out / tpf,
            weight_bytes: k_in * n_out / tpf * w,
            act_bytes_per_token: (k_in + n_out / tpf) * ACT,
        };
        let mut dense = vec![gemm(h, q + 2.0 * kvw), gemm(q, h)];
        // O-projection input is sharded; fix its activation count.
        dense[1].act_bytes_per_token = (q / tpf + h) * ACT;
        let moe = if llm.is_moe() {
            let e = llm.num_experts as f64;
            let k = llm.experts_per_token as f64;
            let expert_params = 3.0 * h * f / tpf;
            dense.push(gemm(h, e)); // router
            Some((e, k, expert_params * w, k * 2.0 * expert_params, (2.0 * h + 3.0 * f / tpf) * k * ACT))
        } else {
            dense.push(gemm(h, 2.0 * f));
            dense.push(Gemm {
                flops_per_token: 2.0 * f * h / tpf,
                weight_bytes: f * h / tpf * w,
                act_bytes_per_token: (f / tpf + h) * ACT,
            });
            None
        };
        let heads_per_gpu = llm.num_attention_heads as f64 / tpf;
        let kv_heads_per_gpu = (llm.num_kv_heads as f64 / tpf).ceil();
        let v = llm.vocab_size as f64;
        Roofline {
            layers: llm.num_layers as f64,
            peak_flops,
            peak_bw,
            dense,
            moe,
            attn_flops_per_pair: 4.0 * heads_per_gpu * hd,
            kv_bytes_per_token_layer: 2.0 * kv_heads_per_gpu * hd * kv.bytes(),
            attn_act_bytes_per_token: 2.0 * heads_per_gpu * hd * ACT,
            sliding_window: llm.sliding_window.map(|s| s as f64),
            lm_flops_per_row: 2.0 * h * v / tpf,
            lm_weight_bytes: h * v / tpf * w,
            lm_out_bytes_per_row: v / tpf * 4.0,
            tp: tpf,
            allreduce_bytes_per_token: h * ACT,
            link_bw: gpu.interconnect_gbps * 1e9 / 2.0 * ie,
            hop_latency: gpu.allreduce_latency_us * 1e-6,
            step_overhead: cost.step_overhead_ms * 1e-3,
            per_request_overhead: cost.per_request_overhead_ms * 1e-3,
            inv_flops_rate: 1.0 / (peak_flops * ce),
            inv_bw: 1.0 / (peak_bw * me),
            gemm_cache: (f64::NAN, 0.0, 0.0, 0.0),
        }
    }

    #[inline]
    fn op(&self, flops: f64, bytes: f64, acc: &mut StepCost) -> f64 {
        acc.flops += flops;
        acc.bytes += bytes;
        (flops * self.inv_flops_rate).max(bytes * self.inv_bw)
    }

    /// GEMMs and all-reduces of one layer for `t` tokens: (time, flops, bytes).
    #[inline]
    fn token_part(&mut self, t: f64) -> (f64, f64, f64) {
        if self.gemm_cache.0 == t {
            let c = self.gemm_cache;
            return (c.1, c.2, c.3);
        }
        let mut acc = StepCost::default();
        let mut lt = 0.0;
        if t > 0.0 {
            for g in &self.dense {
                lt += self.op(t * g.flops_per_token, g.weight_bytes + t * g.act_bytes_per_token, &mut acc);
            }
            if let Some((e, k, expert_bytes, flops_per_token, act)) = self.moe {
                // Expected distinct experts touched by t tokens routed uniformly.
                let touched = e * (1.0 - (1.0 - k / e).powf(t));
                lt += self.op(t * flops_per_token, touched * expert_bytes + t * act, &mut acc);
            }
            lt += 2.0 * self.allreduce_time(t * self.allreduce_bytes_per_token);
        }
        self.gemm_cache = (t, lt, acc.flops, acc.bytes);
        (lt, acc.flops, acc.bytes)
    }

    /// Time of one ring all-reduce of `bytes` across the replica's GPUs.
    pub fn allreduce_time(&self, bytes: f64) -> f64 {
        if self.tp <= 1.0 {
            return 0.0;
        }
        let hops = 2.0 * (self.tp - 1.0);
        hops * self.hop_latency + hops / self.tp * bytes / self.link_bw
    }
}

impl StepCostModel for Roofline {
    #[inline]
    fn step(&mut self, b: &StepBatch) -> StepCost {
        let t = b.tokens() as f64;
        let (mut lt, flops, bytes) = self.token_part(t);
        let mut layer = StepCost { time: 0.0, flops, bytes };
        if b.prefill_tokens > 0 {
            let p = b.prefill_tokens as f64;
            lt += self.op(
                self.attn_flops_per_pair * b.prefill_attn_pairs,
                self.kv_bytes_per_token_layer * (b.prefill_ctx_tokens + p) + p * self.attn_act_bytes_per_token,
                &mut layer,
            );
        }
        if b.decode_seqs > 0 {
            let n = b.decode_seqs as f64;
            let ctx = match self.sliding_window {
                Some(w) => b.decode_ctx_tokens.min(n * w),
                None => b.decode_ctx_tokens,
            };
            lt += self.op(
                self.attn_flops_per_pair * ctx,
                self.kv_bytes_per_token_layer * ctx + n * self.attn_act_bytes_per_token,
                &mut layer,
            );
        }
        let mut cost = StepCost { time: 0.0, flops: layer.flops * self.layers, bytes: layer.bytes * self.layers };
        let mut time = lt * self.layers;
        if b.logits > 0 {
            let r = b.logits as f64;
            time += self.op(r * self.lm_flops_per_row, self.lm_weight_bytes + r * self.lm_out_bytes_per_row, &mut cost);
        }
        cost.time = time + self.step_overhead + self.per_request_overhead * b.new_requests as f64;
        cost
    }

    fn peak_flops(&self) -> f64 {
        self.peak_flops
    }

    fn peak_bandwidth(&self) -> f64 {
        self.peak_bw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn model(tp: u32) -> (Roofline, LlmSpec, GpuSpec) {
        let c = Catalog::builtin().unwrap();
        let llm = c.model("llama-3.1-8b").unwrap().spec.clone();
        let gpu = c.gpu("h100-sxm").unwrap().spec.clone();
        let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
        (Roofline::new(&llm, &gpu, tp, Dtype::Bf16, KvDtype::Bf16, &cost), llm, gpu)
    }

    fn decode(n: u32, ctx: f64) -> StepBatch {
        StepBatch { decode_seqs: n, decode_ctx_tokens: n as f64 * ctx, logits: n, ..Default::default() }
    }

    fn prefill(t: u64) -> StepBatch {
        let tf = t as f64;
        StepBatch {
            prefill_tokens: t,
            prefill_seqs: 1,
            prefill_attn_pairs: tf * (tf + 1.0) / 2.0,
            logits: 1,
            ..Default::default()
        }
    }

    #[test]
    fn small_decode_is_weight_bandwidth_bound() {
        let (mut r, llm, gpu) = model(1);
        // Every weight but the embedding table (a lookup) is read once per step.
        let weights = (llm.total_params() - llm.vocab_size as f64 * llm.hidden_size as f64) * 2.0;
        let ideal = weights / (gpu.memory_bandwidth_gbps * 1e9 * gpu.memory_efficiency);
        let t = r.step(&decode(1, 100.0)).time;
        assert!((t / ideal - 1.0).abs() < 0.03, "decode {t} s vs weights/bandwidth {ideal} s");
        // Doubling a small batch barely changes the time.
        let t2 = r.step(&decode(2, 100.0)).time;
        assert!(t2 / t < 1.02);
    }

    #[test]
    fn long_prefill_is_compute_bound() {
        let (mut r, llm, gpu) = model(1);
        let c = r.step(&prefill(8192));
        let gemm_flops = 2.0 * (llm.active_params() - llm.vocab_size as f64 * llm.hidden_size as f64) * 8192.0;
        let compute = gemm_flops / (gpu.bf16_tflops * 1e12 * gpu.compute_efficiency);
        assert!(c.time >= compute, "prefill {} s below the compute bound {compute} s", c.time);
        assert!(c.time < compute * 1.25, "prefill {} s far above the GEMM compute time {compute} s", c.time);
        // Arithmetic intensity far above the ridge point.
        assert!(c.flops / c.bytes > gpu.bf16_tflops * 1e12 / (gpu.memory_bandwidth_gbps * 1e9));
        let half = r.step(&prefill(4096)).time;
        assert!((c.time / half) > 1.9, "compute-bound time should scale with tokens");
    }

    #[test]
    fn tensor_parallel_halves_gemms_and_adds_communication() {
        let (mut r1, ..) = model(1);
        let (mut r2, ..) = model(2);
        let t1 = r1.step(&prefill(8192)).time;
        let t2 = r2.step(&prefill(8192)).time;
        let comm = 2.0 * 32.0 * r2.allreduce_time(8192.0 * 4096.0 * 2.0);
        assert!(comm > 0.0);
        assert_eq!(r1.allreduce_time(1e9), 0.0);
        assert!((t2 - comm) / t1 > 0.45 && (t2 - comm) / t1 < 0.55, "tp2 compute share {} of tp1", (t2 - comm) / t1);
        let d1 = r1.step(&decode(1, 100.0)).time;
        let d2 = r2.step(&decode(1, 100.0)).time;
        let comm = 2.0 * 32.0 * r2.allreduce_time(4096.0 * 2.0);
        assert!(d2 < d1, "tp2 decode {d2} vs tp1 {d1}");
        assert!(
            (d2 - comm) / d1 > 0.45 && (d2 - comm) / d1 < 0.55,
            "tp2 decode weight reads {} of tp1",
            (d2 - comm) / d1
        );
    }

    #[test]
    fn decode_attention_grows_with_context() {
        let (mut r, ..) = model(1);
        let short = r.step(&decode(64, 100.0)).time;
        let long = r.step(&decode(64, 8000.0)).time;
        assert!(long > short * 1.5, "KV reads must cost: {short} vs {long}");
    }

    #[test]
    fn moe_touches_fewer_expert_bytes_for_small_batches() {
        let c = Catalog::builtin().unwrap();
        let llm = c.model("mixtral-8x7b").unwrap().spec.clone();
        let gpu = c.gpu("h100-sxm").unwrap().spec.clone();
        let mut r = Roofline::new(&llm, &gpu, 2, Dtype::Bf16, KvDtype::Bf16, &CostConfig::default());
        let one = r.step(&decode(1, 100.0));
        let many = r.step(&decode(256, 100.0));
        // One token reads 2 of 8 experts; 256 tokens read nearly all of them.
        assert!(many.bytes > one.bytes * 2.5, "{} vs {}", many.bytes, one.bytes);
    }
}
