//! The roofline step-time model.
//!
//! Every operator of a layer costs `max(FLOPs / (peak × compute_eff),
//! bytes / (bandwidth × memory_eff))`; a layer is the sum of its operators and
//! the model is `num_layers` identical layers plus the LM head. Tensor
//! parallelism divides FLOPs and weight bytes by `tp` (KV heads are replicated
//! when there are fewer than `tp`) and adds two ring all-reduces per layer.
//! A fixed per-step overhead and a per-new-request overhead are added last.
//!
//! Pipeline parallelism ([`Layout::pp`] stages, [`Layout::micro_batches`] m):
//! the step's batch is split into m equal micro-batches that flow through the
//! stages synchronously (GPipe-style, within one engine step). The largest
//! stage (⌈num_layers / pp⌉ layers) sets the pace:
//! `time = (m + pp − 1) × stage(batch / m) + (pp − 1) × p2p(batch / m) +
//! min(m, rows) × lm_head(rows / min(m, rows))`, the LM head running on the
//! last stage for the micro-batches that sample. Every micro-batch reads the
//! stage's weights again.
//!
//! Expert parallelism ([`Layout::expert_parallel`]): each GPU of a stage holds
//! ⌈E / tp⌉ whole experts; it reads the touched ones among them, runs its share
//! of the routed tokens, and each MoE layer adds an all-to-all dispatch and
//! combine. See `docs/parallelism.md`.

use super::{StepBatch, StepCost, StepCostModel};
use crate::config::{CostConfig, Dtype, HardwareConfig, KvDtype};
use crate::spec::{AttnKind, GpuSpec, LlmSpec};

/// How one replica is spread over its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Tensor-parallel degree: GPUs per pipeline stage.
    pub tp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// Micro-batches a step is split into across the pipeline.
    pub micro_batches: u32,
    /// MoE experts spread whole across a stage's GPUs instead of sliced.
    pub expert_parallel: bool,
}

impl Layout {
    /// Tensor parallelism only: `tp` GPUs, one stage, one micro-batch, sliced experts.
    pub fn tensor(tp: u32) -> Self {
        Layout { tp, pp: 1, micro_batches: 1, expert_parallel: false }
    }

    /// The layout of a scenario's `[hardware]` (`micro_batches` defaults to `pp`).
    pub fn from_hardware(h: &HardwareConfig) -> Self {
        Layout { tp: h.tp, pp: h.pp, micro_batches: h.micro_batches(), expert_parallel: h.expert_parallel }
    }

    /// GPUs of one replica: `tp × pp`.
    pub fn gpus(&self) -> u32 {
        self.tp * self.pp
    }

    /// Layers of the largest pipeline stage: ⌈num_layers / pp⌉.
    pub fn layers_per_stage(&self, num_layers: u32) -> u32 {
        num_layers.div_ceil(self.pp.max(1))
    }

    /// Whole experts on each GPU under expert parallelism: ⌈experts / tp⌉
    /// (0 for a dense model or without expert parallelism).
    pub fn experts_per_gpu(&self, llm: &LlmSpec) -> u32 {
        if self.expert_parallel && llm.is_moe() { llm.num_experts.div_ceil(self.tp.max(1)) } else { 0 }
    }
}

/// Activation element size (BF16) in bytes.
const ACT: f64 = 2.0;

/// One GEMM operator of a layer, per GPU.
#[derive(Debug, Clone, Copy)]
struct Gemm {
    flops_per_token: f64,
    weight_bytes: f64,
    act_bytes_per_token: f64,
}

/// The MoE FFN of one layer, per GPU.
#[derive(Debug, Clone, Copy)]
struct Moe {
    /// Routed experts per layer (E).
    experts: f64,
    /// Experts per token (k).
    k: f64,
    /// Experts whose weights this GPU holds (slices of all E under tensor
    /// parallelism, ⌈E / tp⌉ whole ones under expert parallelism).
    experts_here: f64,
    /// Bytes of one held expert on this GPU (a 1/tp slice or a whole expert).
    expert_bytes: f64,
    /// FLOPs per token of the routed experts' work done on this GPU.
    flops_per_token: f64,
    /// Activation bytes per token on this GPU.
    act_bytes_per_token: f64,
    /// Bytes per token of one all-to-all exchange (0 without expert parallelism).
    a2a_bytes_per_token: f64,
}

/// Precomputed per-GPU constants of the roofline model.
#[derive(Debug, Clone)]
pub struct Roofline {
    /// Layers of the whole model.
    layers: f64,
    /// Layers of the largest pipeline stage (it sets the pipeline's pace).
    stage_layers: f64,
    /// Pipeline stages.
    pp: f64,
    /// 1 / pp.
    inv_pp: f64,
    /// pp = 1 and one micro-batch per step.
    single_stage: bool,
    /// Micro-batches per step (at most the step's token count).
    micro_batches: f64,
    peak_flops: f64,
    peak_bw: f64,
    dense: Vec<Gemm>,
    moe: Option<Moe>,
    /// Each attention kind with its share of the layers.
    attn: Vec<(f64, AttnKind)>,
    lm_flops_per_row: f64,
    lm_weight_bytes: f64,
    /// 1 / the LM head's compute rate: it stays in BF16 in quantised checkpoints.
    lm_inv_flops_rate: f64,
    lm_out_bytes_per_row: f64,
    tp: f64,
    allreduce_bytes_per_token: f64,
    link_bw: f64,
    hop_latency: f64,
    step_overhead: f64,
    /// `cost.step_time_scale`.
    time_scale: f64,
    per_request_overhead: f64,
    inv_flops_rate: f64,
    inv_bw: f64,
    /// Cache of the token-count-dependent part (GEMMs, all-reduce, all-to-all) of one layer:
    /// (tokens, time, flops, bytes). Steady decode batches hit it every step.
    gemm_cache: (f64, f64, f64, f64),
}

impl Roofline {
    /// Builds the model for `tp` GPUs of `gpu` running `llm` in `dtype`
    /// (one pipeline stage, tensor-sliced experts): [`Layout::tensor`].
    pub fn new(llm: &LlmSpec, gpu: &GpuSpec, tp: u32, dtype: Dtype, kv: KvDtype, cost: &CostConfig) -> Self {
        Self::with_layout(llm, gpu, &Layout::tensor(tp), dtype, kv, cost)
    }

    /// Builds the model for one replica laid out as `layout` on `gpu`.
    pub fn with_layout(
        llm: &LlmSpec,
        gpu: &GpuSpec,
        layout: &Layout,
        dtype: Dtype,
        kv: KvDtype,
        cost: &CostConfig,
    ) -> Self {
        let tp = layout.tp.max(1);
        let tpf = tp as f64;
        let w = dtype.bytes();
        let peak_flops = match dtype {
            Dtype::Fp8 if gpu.fp8_tflops > 0.0 => gpu.fp8_tflops,
            Dtype::Fp4 if gpu.fp4_tflops > 0.0 => gpu.fp4_tflops,
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
        if llm.mla.is_some() || llm.linear_attention.is_some() || llm.attn_output_gate {
            // Other projection shapes: one GEMM with the layers' mean attention weights.
            dense.truncate(0);
            dense.push(gemm(h, llm.attn_params_per_layer() / h));
        }
        let moe = if llm.is_moe() {
            let e = llm.num_experts as f64;
            let k = llm.experts_per_token as f64;
            let expert_params = llm.ffn_params_per_expert();
            let fe = llm.expert_ffn_size() as f64;
            let ew = llm.expert_bytes_per_weight(w);
            dense.push(gemm(h, e)); // router
            Some(if layout.expert_parallel {
                // Whole experts, ⌈E/tp⌉ per GPU; with uniform routing this GPU
                // runs the share experts_here / E of the token-expert pairs.
                let here = layout.experts_per_gpu(llm) as f64;
                let share = here / e;
                Moe {
                    experts: e,
                    k,
                    experts_here: here,
                    expert_bytes: expert_params * ew,
                    flops_per_token: k * share * 2.0 * expert_params,
                    act_bytes_per_token: (2.0 * h + 3.0 * fe) * k * share * ACT,
                    a2a_bytes_per_token: k * h * ACT,
                }
            } else {
                Moe {
                    experts: e,
                    k,
                    experts_here: e,
                    expert_bytes: expert_params / tpf * ew,
                    flops_per_token: k * 2.0 * expert_params / tpf,
                    act_bytes_per_token: (2.0 * h + 3.0 * fe / tpf) * k * ACT,
                    a2a_bytes_per_token: 0.0,
                }
            })
        } else {
            dense.push(gemm(h, 2.0 * f));
            dense.push(Gemm {
                flops_per_token: 2.0 * f * h / tpf,
                weight_bytes: f * h / tpf * w,
                act_bytes_per_token: (f / tpf + h) * ACT,
            });
            None
        };
        let v = llm.vocab_size as f64;
        Roofline {
            layers: llm.num_layers as f64,
            stage_layers: layout.layers_per_stage(llm.num_layers) as f64,
            pp: layout.pp.max(1) as f64,
            inv_pp: 1.0 / layout.pp.max(1) as f64,
            single_stage: layout.pp <= 1 && layout.micro_batches <= 1,
            micro_batches: layout.micro_batches.max(1) as f64,
            peak_flops,
            peak_bw,
            dense,
            moe,
            attn: llm
                .attention_kinds(tpf, kv.bytes())
                .into_iter()
                .map(|k| (if k.layers == llm.num_layers as f64 { 1.0 } else { k.layers / llm.num_layers as f64 }, k))
                .collect(),
            lm_flops_per_row: 2.0 * h * v / tpf,
            // Quantised checkpoints keep the LM head in BF16 (vLLM, ModelOpt, AWQ).
            lm_weight_bytes: h * v / tpf * w.max(2.0),
            lm_inv_flops_rate: 1.0 / (gpu.bf16_tflops * 1e12 * ce),
            lm_out_bytes_per_row: v / tpf * 4.0,
            tp: tpf,
            allreduce_bytes_per_token: h * ACT,
            link_bw: gpu.interconnect_gbps * 1e9 / 2.0 * ie,
            hop_latency: gpu.allreduce_latency_us * 1e-6,
            step_overhead: cost.step_overhead_ms * 1e-3,
            time_scale: cost.step_time_scale,
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

    /// Attention of one layer of `kind` (roofline of its FLOPs and bytes).
    /// Adds its time to `lt`.
    fn attention(&self, kind: &AttnKind, b: &StepBatch, inv_m: f64, acc: &mut StepCost, lt: &mut f64) {
        let heads = kind.heads;
        if kind.is_linear() {
            // The recurrent state is read and written once per sequence per step.
            let seqs = (b.prefill_seqs + b.decode_seqs) as f64 * inv_m;
            let t = b.tokens() as f64 * inv_m;
            let act = 3.0 * heads * kind.decode_head_dim * ACT;
            *lt += self.op(t * kind.state_flops_per_token, 2.0 * seqs * kind.state_bytes_per_seq + t * act, acc);
            return;
        }
        if b.prefill_tokens > 0 {
            let p = b.prefill_tokens as f64 * inv_m;
            let hd = kind.prefill_head_dim;
            let (pairs, ctx) = b.prefill_reads(kind);
            *lt += self.op(
                4.0 * heads * hd * pairs * inv_m,
                kind.kv_bytes_per_token * (ctx * inv_m + p) + p * (2.0 * heads * hd * ACT),
                acc,
            );
            if let Some((per_pair, idx_bytes)) = kind.indexer {
                // The sparse-attention indexer scores every causal pair.
                let by = idx_bytes * (b.prefill_ctx_tokens * inv_m + p);
                *lt += self.op(per_pair * b.prefill_attn_pairs * inv_m, by, acc);
            }
        }
        if b.decode_seqs > 0 {
            let n = b.decode_seqs as f64;
            let hd = kind.decode_head_dim;
            let ctx = match kind.window {
                Some(w) => b.decode_ctx_tokens.min(n * w),
                None => b.decode_ctx_tokens,
            } * inv_m;
            *lt += self.op(
                4.0 * heads * hd * ctx,
                kind.kv_bytes_per_token * ctx + n * inv_m * (2.0 * heads * hd * ACT),
                acc,
            );
            if let Some((per_pair, idx_bytes)) = kind.indexer {
                // ... and reads every cached index key.
                let keys = b.decode_ctx_tokens * inv_m;
                *lt += self.op(per_pair * keys, idx_bytes * keys, acc);
            }
        }
    }

    /// The LM head over `rows` sampled sequences (BF16 weights at the BF16 rate).
    #[inline]
    fn lm_head(&self, rows: f64, acc: &mut StepCost) -> f64 {
        let flops = rows * self.lm_flops_per_row;
        let bytes = self.lm_weight_bytes + rows * self.lm_out_bytes_per_row;
        acc.flops += flops;
        acc.bytes += bytes;
        (flops * self.lm_inv_flops_rate).max(bytes * self.inv_bw)
    }

    /// GEMMs, all-reduces and all-to-alls of one layer for `t` tokens: (time, flops, bytes).
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
            if let Some(m) = self.moe {
                // Expected distinct experts touched by t tokens routed uniformly;
                // this GPU reads the touched ones among those it holds.
                let p_touched = 1.0 - (1.0 - m.k / m.experts).powf(t);
                let touched = m.experts_here * p_touched;
                lt += self.op(t * m.flops_per_token, touched * m.expert_bytes + t * m.act_bytes_per_token, &mut acc);
                if m.a2a_bytes_per_token > 0.0 {
                    // Dispatch tokens to their experts' GPUs, then combine the outputs.
                    lt += 2.0 * self.all_to_all_time(t * m.a2a_bytes_per_token);
                }
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

    /// Time of one all-to-all among a stage's `tp` GPUs in which each GPU
    /// holds `bytes` and keeps the 1/tp meant for itself: `tp − 1` exchange
    /// rounds of latency plus `bytes × (tp − 1) / tp` over the link.
    pub fn all_to_all_time(&self, bytes: f64) -> f64 {
        if self.tp <= 1.0 {
            return 0.0;
        }
        let rounds = self.tp - 1.0;
        rounds * self.hop_latency + rounds / self.tp * bytes / self.link_bw
    }

    /// Time to send `bytes` of activations from one pipeline stage to the next:
    /// one hop of latency plus the bytes over the link (0 without a pipeline).
    pub fn p2p_time(&self, bytes: f64) -> f64 {
        if self.pp <= 1.0 {
            return 0.0;
        }
        self.hop_latency + bytes / self.link_bw
    }
}

impl Roofline {
    /// The host-side overheads of a step (none inside a multi-step window).
    #[inline]
    fn host(&self, b: &StepBatch) -> f64 {
        if b.host_free { 0.0 } else { self.step_overhead + self.per_request_overhead * b.new_requests as f64 }
    }
}

/// Pure decode steps of one batch of `seqs` sequences, priced as a function
/// of their summed context alone: what [`Roofline::step`] computes for
/// [`StepBatch::decoding`], with every term that does not depend on the
/// context worked out once. [`DecodeRun::cost`] performs the remaining
/// operations in the same order as `step`, so its result is the same to the
/// last bit (test `decode_runs_price_as_steps`). Built by
/// [`StepCostModel::decode_run`] for a run of steady decode steps.
#[derive(Debug, Clone, Copy)]
pub struct DecodeRun {
    /// One layer's GEMMs and collectives for the batch's tokens: (time, flops, bytes).
    token_part: (f64, f64, f64),
    /// Attention kinds (each over every layer): 4·heads·head_dim (FLOPs per
    /// context token), KV bytes per context token, the queries' and outputs'
    /// bytes, and the window's cap on the summed context (∞: none).
    attn: [(f64, f64, f64, f64); 2],
    kinds: usize,
    layers: f64,
    /// The LM head over the batch's rows: (time, flops, bytes).
    lm: (f64, f64, f64),
    host: f64,
    time_scale: f64,
    inv_flops_rate: f64,
    inv_bw: f64,
}

impl DecodeRun {
    /// The step's cost when its sequences' summed context is `ctx` tokens.
    #[inline(always)]
    pub fn cost(&self, ctx: f64) -> StepCost {
        let (mut lt, mut flops, mut bytes) = self.token_part;
        for &(per_ctx, kv_bytes, act_bytes, cap) in &self.attn[..self.kinds] {
            let c = super::min_num(ctx, cap);
            let (f, b) = (per_ctx * c, kv_bytes * c + act_bytes);
            flops += f;
            bytes += b;
            lt += super::max_num(f * self.inv_flops_rate, b * self.inv_bw);
        }
        let (lm_t, lm_f, lm_b) = self.lm;
        StepCost {
            time: (lt * self.layers + lm_t + self.host) * self.time_scale,
            flops: flops * self.layers + lm_f,
            bytes: bytes * self.layers + lm_b,
        }
    }
}

impl Roofline {
    /// The [`DecodeRun`] of `seqs` decoding sequences, when the model prices
    /// their steps in closed form: one stage, one micro-batch, at most two
    /// attention kinds, each over every layer, none linear or indexed.
    fn decode_run_of(&mut self, seqs: u32, spec_tokens: u32) -> Option<DecodeRun> {
        let plain = |k: &AttnKind| !k.is_linear() && k.indexer.is_none();
        if !self.single_stage
            || seqs == 0
            || self.attn.len() > 2
            || !self.attn.iter().all(|(share, k)| *share == 1.0 && plain(k))
        {
            return None;
        }
        let b = StepBatch::decoding(seqs, 0.0, spec_tokens);
        let n = seqs as f64;
        let token_part = self.token_part(n);
        let mut attn = [(0.0, 0.0, 0.0, f64::INFINITY); 2];
        for (slot, (_, k)) in attn.iter_mut().zip(&self.attn) {
            let (heads, hd) = (k.heads, k.decode_head_dim);
            *slot = (
                4.0 * heads * hd,
                k.kv_bytes_per_token,
                n * 1.0 * (2.0 * heads * hd * ACT),
                k.window.map_or(f64::INFINITY, |w| n * w),
            );
        }
        let mut lm = StepCost::default();
        let lm_t = self.lm_head(b.logits as f64, &mut lm);
        Some(DecodeRun {
            token_part,
            attn,
            kinds: self.attn.len(),
            layers: self.layers,
            lm: (lm_t, lm.flops, lm.bytes),
            host: self.host(&b),
            time_scale: self.time_scale,
            inv_flops_rate: self.inv_flops_rate,
            inv_bw: self.inv_bw,
        })
    }
}

impl StepCostModel for Roofline {
    #[inline]
    fn step(&mut self, b: &StepBatch) -> StepCost {
        let t = b.tokens() as f64;
        // Micro-batches: at most one per token; each gets 1/m of every aggregate.
        // (No division on the common single-micro-batch path: it runs every step.)
        let (m, inv_m) = if self.micro_batches == 1.0 || t <= 1.0 {
            (1.0, 1.0)
        } else {
            (self.micro_batches.min(t), 1.0 / self.micro_batches.min(t))
        };
        let tm = t * inv_m;
        let (mut lt, flops, bytes) = self.token_part(tm);
        let mut layer = StepCost { time: 0.0, flops, bytes };
        for i in 0..self.attn.len() {
            let (share, kind) = self.attn[i];
            if share == 1.0 {
                self.attention(&kind, b, inv_m, &mut layer, &mut lt);
            } else {
                let mut one = StepCost::default();
                let mut t = 0.0;
                self.attention(&kind, b, inv_m, &mut one, &mut t);
                lt += share * t;
                layer.flops += share * one.flops;
                layer.bytes += share * one.bytes;
            }
        }
        // FLOPs and bytes: every layer runs every micro-batch once, spread over
        // the pp stages (StepCost is per GPU: the mean over the replica's GPUs).
        if self.single_stage {
            // One stage, one micro-batch: the layers run once, in sequence (the hot path).
            let mut cost = StepCost { time: 0.0, flops: layer.flops * self.layers, bytes: layer.bytes * self.layers };
            let mut time = lt * self.layers;
            if b.logits > 0 {
                time += self.lm_head(b.logits as f64, &mut cost);
            }
            cost.time = (time + self.host(b)) * self.time_scale;
            return cost;
        }
        let per_gpu = m * self.inv_pp;
        let mut cost = StepCost {
            time: 0.0,
            flops: layer.flops * self.layers * per_gpu,
            bytes: layer.bytes * self.layers * per_gpu,
        };
        // The pace of the pipeline: the largest stage's layers, m + pp − 1 slots.
        let mut time = (m + self.pp - 1.0) * (lt * self.stage_layers)
            + (self.pp - 1.0) * self.p2p_time(tm * self.allreduce_bytes_per_token);
        if b.logits > 0 {
            // The LM head runs on the last stage for the micro-batches that
            // sample (at most one per row), lengthening the tail of the pipeline.
            let r = b.logits as f64;
            let (slots, rs) = if m == 1.0 { (1.0, r) } else { (m.min(r), r / m.min(r)) };
            let mut lm = StepCost::default();
            time += slots * self.lm_head(rs, &mut lm);
            cost.flops += lm.flops * slots * self.inv_pp;
            cost.bytes += lm.bytes * slots * self.inv_pp;
        }
        cost.time = (time + self.host(b)) * self.time_scale;
        cost
    }

    fn decode_run(&mut self, seqs: u32, spec_tokens: u32) -> Option<DecodeRun> {
        self.decode_run_of(seqs, spec_tokens)
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
    fn decode_runs_price_as_steps() {
        // Every shipped model and GPU, several layouts, dtypes and overheads:
        // a DecodeRun gives what `step` gives for the same decode batch, to the last bit.
        let c = Catalog::builtin().unwrap();
        let mut runs = 0;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (mi, m) in c.models.values().enumerate() {
            for (gi, g) in c.gpus.values().enumerate() {
                let (llm, gpu) = (&m.spec, &g.spec);
                let tp = [1, 2, 4, 8][(mi + gi) % 4];
                let layout =
                    Layout { tp, pp: 1 + (gi % 5 == 4) as u32, micro_batches: 1, expert_parallel: mi % 2 == 1 };
                let dtype = [Dtype::Bf16, Dtype::Fp8, Dtype::Int4][(mi * 7 + gi) % 3];
                let kv = if gi % 2 == 0 { KvDtype::Bf16 } else { KvDtype::Fp8 };
                let cost = CostConfig {
                    step_overhead_ms: (gi % 3) as f64 * 0.7,
                    step_time_scale: 1.0 + (mi % 3) as f64 * 0.15,
                    ..CostConfig::default()
                };
                let mut r = Roofline::with_layout(llm, gpu, &layout, dtype, kv, &cost);
                for _ in 0..20 {
                    let n = 1 + (next() % 512) as u32;
                    let spec = (next() % 3) as u32;
                    let Some(run) = r.decode_run(n, spec) else { continue };
                    runs += 1;
                    for _ in 0..10 {
                        let ctx = (n as u64 * (1 + next() % 20_000)) as f64;
                        let want = r.step(&StepBatch::decoding(n, ctx, spec));
                        let got = run.cost(ctx);
                        assert_eq!(
                            (got.time.to_bits(), got.flops.to_bits(), got.bytes.to_bits()),
                            (want.time.to_bits(), want.flops.to_bits(), want.bytes.to_bits()),
                            "{} on {} tp{tp} pp{}: {n} seqs, ctx {ctx}",
                            llm.name,
                            gpu.name,
                            layout.pp
                        );
                    }
                }
            }
        }
        // Most set-ups have the closed form (pipelines and linear or indexed attention do not).
        assert!(runs > 1000, "only {runs} decode runs built");
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

    fn laid_out(name: &str, layout: Layout) -> Roofline {
        let c = Catalog::builtin().unwrap();
        let llm = c.model(name).unwrap().spec.clone();
        let gpu = c.gpu("h100-sxm").unwrap().spec.clone();
        let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
        Roofline::with_layout(&llm, &gpu, &layout, Dtype::Bf16, KvDtype::Bf16, &cost)
    }

    fn pipe(tp: u32, pp: u32, m: u32) -> Layout {
        Layout { tp, pp, micro_batches: m, expert_parallel: false }
    }

    #[test]
    fn one_micro_batch_runs_the_stages_one_after_the_other() {
        let mut flat = laid_out("llama-3.1-8b", pipe(1, 1, 1));
        let mut two = laid_out("llama-3.1-8b", pipe(1, 2, 1));
        for b in [decode(1, 100.0), decode(32, 1000.0), prefill(4096)] {
            let (f, p) = (flat.step(&b), two.step(&b));
            let p2p = two.p2p_time(b.tokens() as f64 * 4096.0 * 2.0);
            assert!(p2p > 0.0);
            // Two stages of 16 layers each, no overlap: as long as the flat model.
            let ratio = (p.time - p2p) / f.time;
            assert!((ratio - 1.0).abs() < 1e-9, "pp2 × m1 step {} vs flat {}: ratio {ratio}", p.time, f.time);
            // Per GPU, half the FLOPs and bytes (each GPU runs half the layers).
            assert!((p.flops / f.flops - 0.5).abs() < 1e-9, "flops per GPU {} vs {}", p.flops, f.flops);
            assert!((p.bytes / f.bytes - 0.5).abs() < 1e-9, "bytes per GPU {} vs {}", p.bytes, f.bytes);
        }
    }

    #[test]
    fn more_micro_batches_shrink_the_bubble_of_a_compute_bound_prefill() {
        let mut flat = laid_out("llama-3.1-8b", pipe(1, 1, 1));
        let full = flat.step(&prefill(8192)).time;
        let mut last = f64::INFINITY;
        for m in [1u32, 2, 4, 8, 16] {
            let t = laid_out("llama-3.1-8b", pipe(1, 4, m)).step(&prefill(8192)).time;
            // Compute bound: a stage of a quarter of the model on 1/m of the
            // tokens takes full / (4m); m + 3 of them run back to back.
            let ideal = (m + 3) as f64 / (4 * m) as f64 * full;
            assert!((t / ideal - 1.0).abs() < 0.08, "m = {m}: {t} s vs {ideal} s");
            assert!(t < last, "m = {m} did not shrink the step: {t} vs {last}");
            last = t;
        }
        assert!(last < 0.35 * full, "16 micro-batches over 4 stages: {last} vs flat {full}");
    }

    #[test]
    fn decode_micro_batches_read_the_stage_weights_again() {
        let mut one = laid_out("llama-3.1-8b", pipe(1, 2, 1));
        let mut four = laid_out("llama-3.1-8b", pipe(1, 2, 4));
        let b = decode(8, 100.0);
        let (c1, c4) = (one.step(&b), four.step(&b));
        let ratio = c4.bytes / c1.bytes;
        assert!((3.8..4.0).contains(&ratio), "4 micro-batches read {ratio}× the bytes");
        // Memory bound: 4 + 1 slots of a stage instead of 2 (and 4 LM heads instead of 1).
        let r = c4.time / c1.time;
        assert!((2.45..2.8).contains(&r), "decode m4 {} vs m1 {}: {r}", c4.time, c1.time);
        // A single sequence cannot be split: one micro-batch.
        assert_eq!(four.step(&decode(1, 100.0)).time, one.step(&decode(1, 100.0)).time);
    }

    fn ep(tp: u32, on: bool) -> Layout {
        Layout { tp, pp: 1, micro_batches: 1, expert_parallel: on }
    }

    #[test]
    fn expert_parallelism_adds_all_to_all_and_keeps_balanced_expert_reads() {
        let mut tp = laid_out("mixtral-8x7b", ep(2, false));
        let mut ex = laid_out("mixtral-8x7b", ep(2, true));
        for n in [1u32, 64] {
            let b = decode(n, 100.0);
            let (a, e) = (tp.step(&b), ex.step(&b));
            // 8 experts over 2 GPUs: 4 whole ones each, the same expected bytes
            // as a half of every expert (activations differ a little).
            assert!((e.bytes / a.bytes - 1.0).abs() < 0.02, "n = {n}: EP bytes {} vs TP {}", e.bytes, a.bytes);
            assert!((e.flops / a.flops - 1.0).abs() < 1e-9);
            let a2a = 32.0 * 2.0 * ex.all_to_all_time(n as f64 * 2.0 * 4096.0 * 2.0);
            assert!(a2a > 0.0);
            let extra = e.time - a.time;
            assert!(extra > 0.8 * a2a && extra < 1.2 * a2a, "n = {n}: EP adds {extra} s, all-to-alls {a2a} s");
        }
        assert_eq!(laid_out("mixtral-8x7b", ep(1, true)).all_to_all_time(1e6), 0.0);
    }

    #[test]
    fn uneven_experts_load_the_fullest_gpu() {
        let c = Catalog::builtin().unwrap();
        let mut llm = c.model("mixtral-8x7b").unwrap().spec.clone();
        llm.num_experts = 6;
        let gpu = c.gpu("h100-sxm").unwrap().spec.clone();
        let cost = CostConfig::default();
        let mk = |on| Roofline::with_layout(&llm, &gpu, &ep(4, on), Dtype::Bf16, KvDtype::Bf16, &cost);
        let (mut tp, mut ex) = (mk(false), mk(true));
        // 256 tokens touch every expert: TP reads 6 quarter-experts per GPU, EP
        // reads ⌈6/4⌉ = 2 whole ones on the fullest GPU: half an expert more.
        let b = decode(256, 100.0);
        let (a, e) = (tp.step(&b), ex.step(&b));
        let expert = 3.0 * 4096.0 * 14336.0 * 2.0 * 32.0;
        let extra = (e.bytes - a.bytes) / expert;
        assert!((extra - 0.5).abs() < 0.02, "EP reads {extra} experts more per GPU");
        // Its share of the routed tokens is 2/6 instead of 1/4.
        assert!(e.flops > a.flops);
    }
}
