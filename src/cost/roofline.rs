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
    flops_rate: f64,
    bw: f64,
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
            flops_rate: peak_flops * ce,
            bw: peak_bw * me,
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
        }
    }

    #[inline]
    fn op(&self, flops: f64, bytes: f64, acc: &mut StepCost) -> f64 {
        acc.flops += flops;
        acc.bytes += bytes;
        (flops / self.flops_rate).max(bytes / self.bw)
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
    fn step(&mut self, b: &StepBatch) -> StepCost {
        let t = b.tokens() as f64;
        let mut layer = StepCost::default();
        let mut lt = 0.0;
        if t > 0.0 {
            for g in &self.dense {
                lt += self.op(t * g.flops_per_token, g.weight_bytes + t * g.act_bytes_per_token, &mut layer);
            }
            if let Some((e, k, expert_bytes, flops_per_token, act)) = self.moe {
                // Expected distinct experts touched by t tokens routed uniformly.
                let touched = e * (1.0 - (1.0 - k / e).powf(t));
                lt += self.op(t * flops_per_token, touched * expert_bytes + t * act, &mut layer);
            }
        }
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
        if t > 0.0 {
            lt += 2.0 * self.allreduce_time(t * self.allreduce_bytes_per_token);
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
