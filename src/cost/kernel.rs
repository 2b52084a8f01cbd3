//! The `kernel` step-time model: a roofline per kernel with shape-dependent
//! efficiencies measured on real GPUs, the elementwise work, collectives as
//! engines run them, and the engine's CPU overheads.
//!
//! One engine step is the GPU time of its kernels plus the engine's CPU time,
//! overlapped as far as the engine overlaps them:
//!
//! ```text
//! step = gpu' + cpu − cpu_overlap × min(gpu', cpu)
//! gpu' = max(gpu, launch)   launch = layers × eager_launch_us_per_layer on a step
//!                           not replayed from a CUDA graph, else 0
//! cpu  = step_overhead + per_seq_overhead × sequences + per_request_overhead × new requests
//! gpu  = Σ layers (GEMMs + attention + elementwise + collectives) + LM head + sampler
//! ```
//!
//! Each GEMM of `m` tokens, `n` outputs and `k` inputs (per GPU, after
//! tensor-parallel slicing) takes `smax(tc, tm) + latency`, where
//! `tc = 2 m' n k / (peak × gemm_efficiency)` with `m'` the tokens rounded up
//! to the 64-row MMA tile (from 64 on), `tm = (weight bytes + activation
//! bytes) / (bandwidth × stream_efficiency)`, and `smax(a, b) = (a³ + b³)^⅓`
//! a smooth maximum (real kernels near the ridge point are slower than
//! either bound). W8A8 FP8 GEMMs run at the FP8 peak and add the activation
//! quantisation kernel; FP8 weights on GPUs without FP8 units (and INT4)
//! stream their narrow weights but compute at the BF16 rate (Marlin-style
//! W8A16 / W4A16). Prefill attention runs at `efficiency × s / (s + s½)` of
//! the BF16 peak for an effective sequence length `s`; decode attention
//! streams the KV cache at `decode_attention_efficiency` of the bandwidth and
//! pays a fixed and a per-sequence time. Every constant is per GPU, in its
//! catalogue file, with its source; `docs/cost-model.md` derives each term.
//!
//! Pipeline and expert parallelism follow [`super::Roofline`]: the largest
//! stage sets the pace of `m + pp − 1` micro-batch slots, and expert
//! parallelism adds two all-to-alls per MoE layer.

use super::{Layout, StepBatch, StepCost, StepCostModel};
use crate::config::{CostConfig, Dtype, FP4_BYTES, KvDtype, MoeKernel};
use crate::spec::{AttnKind, GpuSpec, KernelSpec, LlmSpec};

/// Activation element size (BF16), bytes.
const ACT: f64 = 2.0;
/// MMA tile height tokens are rounded up to in compute-bound GEMMs.
const TILE_M: f64 = 64.0;
/// Rows per expert are rounded up to this block in the fused MoE kernel.
const MOE_TILE: f64 = 32.0;
/// Elementwise kernels per layer: two fused residual-add + RMSNorm, rotary
/// embedding, and the FFN activation (as vLLM fuses them).
const ELEMENTWISE_PER_LAYER: f64 = 4.0;
/// Kernels of sampling a step's logits (softmax, top-k/top-p, sampling, gather).
const SAMPLER_KERNELS: f64 = 5.0;

/// Smooth maximum of two times: (a³ + b³)^⅓.
#[inline]
fn smax(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        return b;
    }
    if b == 0.0 {
        return a;
    }
    (a * a * a + b * b * b).cbrt()
}

/// How a GEMM's weights are stored and multiplied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Path {
    /// BF16 weights and activations.
    Bf16,
    /// FP8 weights and activations on FP8 tensor cores (plus activation quantisation).
    W8A8,
    /// NVFP4 weights and activations on FP4 tensor cores (plus activation quantisation).
    W4A4,
    /// Narrow weights (FP8 without FP8 units, INT4, FP4 without FP4 units), BF16 compute.
    WeightOnly(f64),
}

/// The kernel formulas of one GPU: its measured kernel constants and peaks.
#[derive(Debug, Clone)]
pub struct Kernels {
    /// The GPU's kernel constants.
    pub k: KernelSpec,
    /// BF16 tensor peak, FLOP/s.
    pub peak_bf16: f64,
    /// FP8 tensor peak, FLOP/s (0: none).
    pub peak_fp8: f64,
    /// FP4 tensor peak, FLOP/s (0: none).
    pub peak_fp4: f64,
    /// Memory bandwidth, bytes/s.
    pub bw: f64,
}

impl Kernels {
    /// The formulas for `gpu` (its `[kernels]`, or generic values).
    pub fn new(gpu: &GpuSpec) -> Self {
        Kernels {
            k: gpu.kernels.clone().unwrap_or_else(|| KernelSpec::generic(gpu)),
            peak_bf16: gpu.bf16_tflops * 1e12,
            peak_fp8: gpu.fp8_tflops * 1e12,
            peak_fp4: gpu.fp4_tflops * 1e12,
            bw: gpu.memory_bandwidth_gbps * 1e9,
        }
    }

    /// Time of one GEMM `y[m, n] = x[m, k] · Wᵀ`, seconds, with the engine's
    /// GEMM efficiency scale `scale`; adds its FLOPs and bytes to `acc`.
    pub fn gemm(&self, m: f64, n: f64, kk: f64, path: Path, scale: f64, acc: &mut StepCost) -> f64 {
        if m <= 0.0 {
            return 0.0;
        }
        let (peak, eff, wbytes) = match path {
            Path::Bf16 => (self.peak_bf16, self.k.gemm_efficiency, 2.0),
            Path::W8A8 => (self.peak_fp8, self.k.fp8_gemm_efficiency, 1.0),
            Path::W4A4 => (self.peak_fp4, self.k.fp4_gemm_efficiency, FP4_BYTES),
            Path::WeightOnly(b) => (self.peak_bf16, self.k.gemm_efficiency, b),
        };
        let flops = 2.0 * m * n * kk;
        let bytes = n * kk * wbytes + m * (n + kk) * ACT;
        acc.flops += flops;
        acc.bytes += bytes;
        let mp = if m < TILE_M { m } else { (m / TILE_M).ceil() * TILE_M };
        let stream = self.bw * self.k.stream_efficiency;
        let mut t = smax(2.0 * mp * n * kk / (peak * eff * scale), bytes / stream) + self.k.gemm_latency_us * 1e-6;
        // Dynamic activation quantisation: read BF16, write FP8 (or FP4 and its block scales).
        let quant = match path {
            Path::W8A8 => Some((self.k.fp8_quant_latency_us, 3.0)),
            Path::W4A4 => Some((self.k.fp4_quant_latency_us, ACT + FP4_BYTES)),
            _ => None,
        };
        if let Some((lat, per)) = quant {
            acc.bytes += m * kk * per;
            t += lat * 1e-6 + m * kk * per / stream;
        }
        t
    }

    /// Time of one fused MoE layer: `rows` token-expert pairs spread over
    /// `touched` experts, each with gate/up `(n, k)` and down `(n, k)`
    /// matrices of `wbytes` per weight, seconds; adds FLOPs and bytes to `acc`.
    #[allow(clippy::too_many_arguments)]
    pub fn moe(
        &self,
        rows: f64,
        touched: f64,
        up: (f64, f64),
        down: (f64, f64),
        path: Path,
        scale: f64,
        acc: &mut StepCost,
    ) -> f64 {
        if rows <= 0.0 {
            return 0.0;
        }
        // A GPU without a fused-MoE fit (efficiency 0) gets the generic constants.
        let (eff, stream, lat) = if self.k.moe_efficiency > 0.0 {
            (self.k.moe_efficiency, self.k.moe_stream_efficiency, self.k.moe_latency_us)
        } else {
            crate::spec::GENERIC_MOE
        };
        let (peak, wbytes, eff) = match path {
            Path::Bf16 => (self.peak_bf16, 2.0, eff),
            // FP8 experts: the FP8 peak, scaled as dense FP8 GEMMs are against BF16 ones.
            Path::W8A8 => (self.peak_fp8, 1.0, eff * self.k.fp8_gemm_efficiency / self.k.gemm_efficiency),
            // FP4 experts: likewise against the FP4 peak.
            Path::W4A4 => (self.peak_fp4, FP4_BYTES, eff * self.k.fp4_gemm_efficiency / self.k.gemm_efficiency),
            Path::WeightOnly(b) => (self.peak_bf16, b, eff),
        };
        let per = rows / touched.max(1e-9);
        let padded = (per / MOE_TILE).ceil() * MOE_TILE;
        let params = up.0 * up.1 + down.0 * down.1;
        let flops = 2.0 * rows * params;
        let bytes = touched * params * wbytes + rows * (up.1 + up.0 + down.0) * ACT;
        acc.flops += flops;
        acc.bytes += bytes;
        lat * 1e-6 + smax(2.0 * touched * padded * params / (peak * eff * scale), bytes / (self.bw * stream * scale))
    }

    /// Time of prefill attention over `pairs` causal query-key pairs of
    /// `tokens` query tokens with `heads` query heads of `head_dim` per GPU,
    /// moving `bytes` (KV read and written, queries, outputs), seconds; `scale`
    /// is the engine's attention efficiency scale. No launch latency.
    pub fn prefill_attention_work(
        &self,
        heads: f64,
        head_dim: f64,
        pairs: f64,
        tokens: f64,
        bytes: f64,
        scale: f64,
    ) -> f64 {
        // The fresh-prompt length with the same work per query token.
        let s = (2.0 * pairs / tokens).max(1.0);
        let eff = self.k.prefill_attention_efficiency * scale * s / (s + self.k.prefill_attention_half_len);
        smax(4.0 * heads * head_dim * pairs / (self.peak_bf16 * eff), bytes / (self.bw * 0.8))
    }

    /// Time of a linear-attention (recurrent) kernel doing `flops` over
    /// `bytes` of state and activations, seconds; no launch latency.
    pub fn linear_attention_work(&self, flops: f64, bytes: f64, scale: f64) -> f64 {
        smax(
            flops / (self.peak_bf16 * self.k.prefill_attention_efficiency * scale),
            bytes / (self.bw * self.k.stream_efficiency),
        )
    }

    /// Time of decode attention reading `bytes` of KV cache for `seqs`
    /// sequences doing `flops`, seconds; no launch latency.
    pub fn decode_attention_work(&self, bytes: f64, flops: f64, seqs: f64, scale: f64) -> f64 {
        smax(bytes / (self.bw * self.k.decode_attention_efficiency * scale), flops / (self.peak_bf16 * 0.5))
            + seqs * self.k.decode_attention_ns_per_seq * 1e-9
    }

    /// Time of one all-reduce of `bytes` among `tp` GPUs, seconds: the custom
    /// all-reduce (when `custom`) or NCCL's.
    pub fn allreduce(&self, bytes: f64, tp: f64, custom: bool) -> f64 {
        if tp <= 1.0 || bytes <= 0.0 {
            return 0.0;
        }
        let (a, bw) = self.collective(tp, custom);
        a * 1e-6 + bytes * 2.0 * (tp - 1.0) / tp / (bw * 1e9)
    }

    /// (latency µs, bus bandwidth GB/s) of the custom or NCCL all-reduce among
    /// `tp` GPUs, interpolated in log2(tp) between measured degrees.
    pub fn collective(&self, tp: f64, custom: bool) -> (f64, f64) {
        let pick = |a: &crate::spec::AllReduceSpec| {
            if custom { (a.custom_us, a.custom_busbw_gbps) } else { (a.nccl_us, a.nccl_busbw_gbps) }
        };
        let table = &self.k.allreduce;
        let Some(first) = table.first() else { return (10.0, 100.0) };
        if tp <= first.tp as f64 {
            return pick(first);
        }
        for w in table.windows(2) {
            let (lo, hi) = (w[0].tp as f64, w[1].tp as f64);
            if tp <= hi {
                let f = (tp.log2() - lo.log2()) / (hi.log2() - lo.log2());
                let (a0, b0) = pick(&w[0]);
                let (a1, b1) = pick(&w[1]);
                return (a0 + f * (a1 - a0), b0 + f * (b1 - b0));
            }
        }
        pick(table.last().unwrap_or(first))
    }
}

/// One weight matrix per GPU: `y[m, n] = x[m, k] · Wᵀ`.
#[derive(Debug, Clone, Copy)]
struct Gemm {
    n: f64,
    k: f64,
    path: Path,
    /// How many of it a step runs per token batch (layers holding it).
    count: f64,
}

/// The routed experts of the MoE layers, per GPU.
#[derive(Debug, Clone, Copy)]
struct Moe {
    /// Routed experts (E).
    experts: f64,
    /// Experts per token (k).
    k: f64,
    /// Experts this GPU holds (all E sliced, or ⌈E/tp⌉ whole ones).
    here: f64,
    /// Share of the token-expert pairs this GPU computes.
    share: f64,
    /// Gate+up and down of one held expert: (n, k) per GEMM.
    up: (f64, f64),
    down: (f64, f64),
    path: Path,
    /// MoE layers of the stage.
    layers: f64,
    /// Bytes per token of one all-to-all (0 without expert parallelism).
    a2a_bytes_per_token: f64,
}

/// The `kernel` cost model of one replica.
#[derive(Debug, Clone)]
pub struct KernelModel {
    kern: Kernels,
    /// Peak of the weights' format, for MFU.
    peak_flops: f64,
    gemm_eff: f64,
    moe_eff: f64,
    attn_eff: f64,
    /// The sparse-attention indexer's FP8 logits run at the FP8 peak where
    /// the GPU has FP8 units: its time per FLOP relative to the BF16 peak.
    index_rate: f64,
    /// Layers of the largest pipeline stage.
    layers: f64,
    /// Layers of the whole model (FLOP and byte accounting).
    model_layers: f64,
    pp: f64,
    micro_batches: f64,
    gemms: Vec<Gemm>,
    moe: Option<Moe>,
    lm_head: Gemm,
    vocab_per_gpu: f64,
    /// The stage's layers of each attention kind: (layers, kind).
    attn: Vec<(f64, AttnKind)>,
    elementwise_bytes_per_token: f64,
    hidden: f64,
    tp: f64,
    custom_max_bytes: f64,
    comm_overlap: f64,
    step_overhead: f64,
    per_seq: f64,
    per_request: f64,
    cpu_overlap: f64,
    /// CPU time to launch one layer's kernels eagerly, seconds.
    eager_launch: f64,
    /// Which steps replay a CUDA graph.
    graph_capture: crate::config::GraphCapture,
    /// Largest captured graph (sequences or tokens; 0: none).
    graph_max: f64,
    /// `cost.step_time_scale`.
    time_scale: f64,
    /// (tokens, time, flops, bytes) of the token-count-dependent part of one stage.
    cache: (f64, f64, f64, f64),
}

impl KernelModel {
    /// Builds the model for one replica laid out as `layout` on `gpu`.
    pub fn new(llm: &LlmSpec, gpu: &GpuSpec, layout: &Layout, dtype: Dtype, kv: KvDtype, cost: &CostConfig) -> Self {
        let mut kern = Kernels::new(gpu);
        if cost.moe_kernel == MoeKernel::Cutlass && llm.expert_weight_bits.is_none() {
            // TensorRT-LLM's MoE kernels: their own fitted constants (generic without a fit).
            // Fitted on BF16 experts; 4-bit experts (MXFP4) run other kernels and keep the Triton ones.
            let k = &mut kern.k;
            (k.moe_efficiency, k.moe_stream_efficiency, k.moe_latency_us) = if k.cutlass_moe_efficiency > 0.0 {
                (k.cutlass_moe_efficiency, k.cutlass_moe_stream_efficiency, k.cutlass_moe_latency_us)
            } else {
                crate::spec::GENERIC_CUTLASS_MOE
            };
        }
        let tp = layout.tp.max(1) as f64;
        let fp8_units = gpu.fp8_tflops > 0.0 && kern.k.fp8_gemm_efficiency > 0.0;
        let fp4_units = gpu.fp4_tflops > 0.0 && kern.k.fp4_gemm_efficiency > 0.0;
        let path = match dtype {
            Dtype::Bf16 => Path::Bf16,
            Dtype::Fp8 if fp8_units => Path::W8A8,
            Dtype::Fp8 => Path::WeightOnly(1.0),
            Dtype::Int4 => Path::WeightOnly(0.5),
            Dtype::Fp4 if fp4_units => Path::W4A4,
            // vLLM's Marlin FP4 fallback (marlin_utils_fp4.py): FP4 weights, BF16 compute.
            Dtype::Fp4 => Path::WeightOnly(FP4_BYTES),
        };
        let h = llm.hidden_size as f64;
        let hd = llm.head_dim as f64;
        let q = llm.num_attention_heads as f64 * hd;
        let kvw = llm.num_kv_heads as f64 * hd;
        let stage = layout.layers_per_stage(llm.num_layers) as f64;
        let total = llm.num_layers as f64;
        // The stage's share of dense and MoE layers.
        let moe_frac = if llm.is_moe() { llm.moe_layers() as f64 / total } else { 0.0 };
        let moe_layers = stage * moe_frac;
        let dense_layers = stage - moe_layers;
        let gated = llm.ffn.matrices() - 1.0;
        let g = |n: f64, kk: f64, count: f64| Gemm { n, k: kk, path, count };
        // Linear-attention layers of the stage; the others run softmax attention.
        let lin = llm.linear_attention.as_ref().map_or(0.0, |l| l.layers as f64);
        let soft = if lin == 0.0 { stage } else { stage * (total - lin) / total };
        let mut gemms = attention_gemms(llm, path, tp, soft, stage - soft);
        let f = llm.intermediate_size as f64;
        if dense_layers > 0.0 {
            gemms.push(g(gated * f / tp, h, dense_layers));
            gemms.push(g(h, f / tp, dense_layers));
        }
        // Experts stored apart from model.dtype (MXFP4) run weight-only at the BF16 rate.
        let expert_path = match llm.expert_weight_bits {
            Some(bits) => Path::WeightOnly(bits / 8.0),
            None => path,
        };
        let moe = llm.is_moe().then(|| {
            let fe = llm.expert_ffn_size() as f64;
            let e = llm.num_experts as f64;
            // The router stays in BF16 (quantised checkpoints exclude it).
            gemms.push(Gemm { n: e, k: h, path: Path::Bf16, count: moe_layers });
            if llm.shared_experts > 0 {
                let fs = fe * llm.shared_experts as f64;
                gemms.push(g(gated * fs / tp, h, moe_layers));
                gemms.push(g(h, fs / tp, moe_layers));
            }
            if layout.expert_parallel {
                let here = layout.experts_per_gpu(llm) as f64;
                Moe {
                    experts: e,
                    k: llm.experts_per_token as f64,
                    here,
                    share: here / e,
                    up: (gated * fe, h),
                    down: (h, fe),
                    path: expert_path,
                    layers: moe_layers,
                    a2a_bytes_per_token: llm.experts_per_token as f64 * h * ACT,
                }
            } else {
                Moe {
                    experts: e,
                    k: llm.experts_per_token as f64,
                    here: e,
                    share: 1.0,
                    up: (gated * fe / tp, h),
                    down: (h, fe / tp),
                    path: expert_path,
                    layers: moe_layers,
                    a2a_bytes_per_token: 0.0,
                }
            }
        });
        // Per token and layer: two fused add+RMSNorm (read x and residual, write
        // both), RoPE on q and k in place, the FFN activation (read gate and up,
        // write the product); per MoE layer the routed rows' activation instead.
        let act_width = if dense_layers > 0.0 || !llm.is_moe() { f / tp } else { 0.0 };
        let moe_act = if llm.is_moe() {
            llm.experts_per_token as f64 * llm.expert_ffn_size() as f64 / tp * moe_frac
        } else {
            0.0
        };
        let elementwise =
            (2.0 * 4.0 * h + 2.0 * (q + kvw) / tp + (gated + 1.0) * (act_width * (1.0 - moe_frac) + moe_act)) * ACT;
        KernelModel {
            peak_flops: match path {
                Path::W8A8 => kern.peak_fp8,
                Path::W4A4 => kern.peak_fp4,
                _ => kern.peak_bf16,
            },
            gemm_eff: cost.gemm_efficiency_scale,
            moe_eff: match llm.expert_weight_bits {
                Some(bits) if bits <= 4.5 => cost.w4_moe_efficiency_scale.unwrap_or(cost.moe_efficiency_scale),
                _ => cost.moe_efficiency_scale,
            },
            attn_eff: cost.attention_efficiency_scale,
            index_rate: if fp8_units { kern.peak_bf16 / kern.peak_fp8 } else { 1.0 },
            layers: stage,
            model_layers: total,
            pp: layout.pp.max(1) as f64,
            micro_batches: layout.micro_batches.max(1) as f64,
            gemms,
            moe,
            // The LM head stays in BF16 in quantised checkpoints.
            lm_head: Gemm { n: llm.vocab_size as f64 / tp, k: h, path: Path::Bf16, count: 1.0 },
            vocab_per_gpu: llm.vocab_size as f64 / tp,
            attn: llm
                .attention_kinds(tp, kv.bytes())
                .into_iter()
                .map(|k| (if k.layers == total { stage } else { stage * k.layers / total }, k))
                .collect(),
            elementwise_bytes_per_token: elementwise,
            hidden: h,
            tp,
            custom_max_bytes: cost.custom_allreduce_max_kb * 1024.0,
            comm_overlap: cost.comm_overlap,
            step_overhead: cost.step_overhead_ms * 1e-3,
            per_seq: cost.per_seq_overhead_ms * 1e-3,
            per_request: cost.per_request_overhead_ms * 1e-3,
            cpu_overlap: cost.cpu_overlap,
            eager_launch: cost.eager_launch_us_per_layer * 1e-6,
            graph_capture: cost.graph_capture,
            graph_max: 0.0,
            time_scale: cost.step_time_scale,
            cache: (f64::NAN, 0.0, 0.0, 0.0),
            kern,
        }
    }

    /// The engine captures CUDA graphs up to `max` sequences or tokens
    /// (`engine.cuda_graph_max_bs`; 0: every step runs eagerly).
    pub fn with_graphs(mut self, max: u32) -> Self {
        self.graph_max = max as f64;
        self
    }

    /// The time the CPU needs to launch the step's kernels: none for a step
    /// replayed from a CUDA graph, the stage's layers × the eager launch time otherwise.
    fn launch(&self, b: &StepBatch) -> f64 {
        if self.eager_launch == 0.0 {
            return 0.0;
        }
        let graphed = match self.graph_capture {
            crate::config::GraphCapture::DecodeBatch => b.prefill_tokens == 0 && b.decode_seqs as f64 <= self.graph_max,
            crate::config::GraphCapture::Tokens => b.tokens() as f64 <= self.graph_max,
        };
        if graphed { 0.0 } else { self.layers * self.eager_launch }
    }

    /// Time of one GEMM over `m` rows; adds its FLOPs and bytes to `acc`.
    fn gemm(&self, m: f64, n: f64, kk: f64, path: Path, acc: &mut StepCost) -> f64 {
        self.kern.gemm(m, n, kk, path, self.gemm_eff, acc)
    }

    /// Time of one all-reduce of `bytes` among the stage's GPUs.
    pub fn allreduce_time(&self, bytes: f64) -> f64 {
        self.kern.allreduce(bytes, self.tp, bytes <= self.custom_max_bytes) * (1.0 - self.comm_overlap)
    }

    /// All-to-all among the stage's GPUs (expert parallelism): each GPU sends
    /// (tp − 1)/tp of `bytes` at the NCCL bus bandwidth.
    fn all_to_all_time(&self, bytes: f64) -> f64 {
        if self.tp <= 1.0 || bytes <= 0.0 {
            return 0.0;
        }
        let (a, bw) = self.kern.collective(self.tp, false);
        (a * 1e-6 + bytes * (self.tp - 1.0) / self.tp / (bw * 1e9)) * (1.0 - self.comm_overlap)
    }

    /// GEMMs, MoE experts, elementwise kernels and collectives of one stage
    /// for `t` tokens: (time, flops, bytes), cached by token count.
    fn token_part(&mut self, t: f64) -> (f64, f64, f64) {
        if self.cache.0 == t {
            return (self.cache.1, self.cache.2, self.cache.3);
        }
        let mut acc = StepCost::default();
        let mut time = 0.0;
        if t > 0.0 {
            for g in &self.gemms {
                let mut one = StepCost::default();
                time += g.count * self.gemm(t, g.n, g.k, g.path, &mut one);
                acc.flops += g.count * one.flops;
                acc.bytes += g.count * one.bytes;
            }
            if let Some(m) = self.moe {
                // The fused MoE kernel over the touched experts this GPU holds:
                // t·k·share rows spread over them, each one's weights read once.
                let touched = m.here * (1.0 - (1.0 - m.k / m.experts).powf(t));
                let rows = t * m.k * m.share;
                let mut one = StepCost::default();
                let mut lt = self.kern.moe(rows, touched, m.up, m.down, m.path, self.moe_eff, &mut one);
                lt += 2.0 * self.all_to_all_time(t * m.a2a_bytes_per_token);
                time += m.layers * lt;
                acc.flops += m.layers * one.flops;
                acc.bytes += m.layers * one.bytes;
            }
            let stream = self.kern.bw * self.kern.k.stream_efficiency;
            let eb = t * self.elementwise_bytes_per_token;
            time += self.layers * (ELEMENTWISE_PER_LAYER * self.kern.k.elementwise_latency_us * 1e-6 + eb / stream);
            acc.bytes += self.layers * eb;
            time += self.layers * 2.0 * self.allreduce_time(t * self.hidden * ACT);
        }
        self.cache = (t, time, acc.flops, acc.bytes);
        (time, acc.flops, acc.bytes)
    }

    /// Attention of one stage: (time, flops, bytes).
    fn attention(&self, b: &StepBatch, inv_m: f64) -> (f64, f64, f64) {
        let (mut time, mut flops, mut bytes) = (0.0, 0.0, 0.0);
        for (layers, kind) in &self.attn {
            let (t, f, by) =
                if kind.is_linear() { self.linear_attention(kind, b, inv_m) } else { self.softmax(kind, b, inv_m) };
            time += t * layers;
            flops += f * layers;
            bytes += by * layers;
        }
        (time, flops, bytes)
    }

    /// Softmax (or MLA) attention of one layer of `kind`: (time, flops, bytes).
    fn softmax(&self, kind: &AttnKind, b: &StepBatch, inv_m: f64) -> (f64, f64, f64) {
        let mut time = 0.0;
        let (mut flops, mut bytes) = (0.0, 0.0);
        let k = &self.kern.k;
        let (heads, kv) = (kind.heads, kind.kv_bytes_per_token);
        if b.prefill_tokens > 0 {
            let p = b.prefill_tokens as f64 * inv_m;
            let hd = kind.prefill_head_dim;
            let (pairs, ctx) = b.prefill_reads(kind);
            let pairs = pairs * inv_m;
            let f = 4.0 * heads * hd * pairs;
            let by = kv * (ctx * inv_m + p) + p * 2.0 * heads * hd * ACT;
            time += self.kern.prefill_attention_work(heads, hd, pairs, p, by, self.attn_eff)
                + k.prefill_attention_latency_us * 1e-6;
            flops += f;
            bytes += by;
            if let Some((per_pair, idx_bytes)) = kind.indexer {
                // The indexer scores every causal (query, key) pair.
                let pairs = b.prefill_attn_pairs * inv_m;
                let (f, by) = (per_pair * pairs, idx_bytes * (b.prefill_ctx_tokens * inv_m + p));
                // The attention kernel's formula costs 4·heads·head_dim FLOPs per pair at the BF16 peak.
                let width = per_pair / 4.0 * self.index_rate;
                time += self.kern.prefill_attention_work(1.0, width, pairs, p, by, self.attn_eff)
                    + k.prefill_attention_latency_us * 1e-6;
                flops += f;
                bytes += by;
            }
        }
        if b.decode_seqs > 0 {
            let n = b.decode_seqs as f64 * inv_m;
            let hd = kind.decode_head_dim;
            let ctx = match kind.window {
                Some(w) => b.decode_ctx_tokens.min(b.decode_seqs as f64 * w),
                None => b.decode_ctx_tokens,
            } * inv_m;
            let by = kv * ctx + n * 2.0 * heads * hd * ACT;
            let f = 4.0 * heads * hd * ctx;
            time += self.kern.decode_attention_work(by, f, n, self.attn_eff);
            if let Some((per_pair, idx_bytes)) = kind.indexer {
                // The indexer reads every cached index key.
                let keys = b.decode_ctx_tokens * inv_m;
                let (f, by) = (per_pair * keys, idx_bytes * keys);
                time += self.kern.decode_attention_work(by, f * self.index_rate, n, self.attn_eff)
                    + k.decode_attention_latency_us * 1e-6;
                flops += f;
                bytes += by;
            }
            // One attention launch serves prefill and decode tokens together.
            if b.prefill_tokens == 0 {
                time += k.decode_attention_latency_us * 1e-6;
            }
            flops += f;
            bytes += by;
        }
        (time, flops, bytes)
    }

    /// Linear attention (Gated DeltaNet) of one layer of `kind`: each
    /// sequence's state is read and written once per step, and each token
    /// costs the recurrence's FLOPs. (The chunked prefill form, with chunks of
    /// C = 64, costs 2C(d_k + d_v) + 6·d_k·d_v per token and value head: the
    /// same 8·d_k·d_v at d_k = d_v = 128.) Prefill runs at the prefill
    /// attention efficiency, decode at the decode one: estimates, no kernel
    /// table measures these kernels yet.
    fn linear_attention(&self, kind: &AttnKind, b: &StepBatch, inv_m: f64) -> (f64, f64, f64) {
        let k = &self.kern.k;
        let act = 3.0 * kind.heads * kind.decode_head_dim * ACT;
        let (mut time, mut flops, mut bytes) = (0.0, 0.0, 0.0);
        if b.prefill_tokens > 0 {
            let p = b.prefill_tokens as f64 * inv_m;
            let f = p * kind.state_flops_per_token;
            let by = 2.0 * b.prefill_seqs as f64 * inv_m * kind.state_bytes_per_seq + p * act;
            time += self.kern.linear_attention_work(f, by, self.attn_eff) + k.prefill_attention_latency_us * 1e-6;
            flops += f;
            bytes += by;
        }
        if b.decode_seqs > 0 {
            let n = b.decode_seqs as f64 * inv_m;
            let f = n * kind.state_flops_per_token;
            let by = 2.0 * n * kind.state_bytes_per_seq + n * act;
            time += self.kern.decode_attention_work(by, f, n, self.attn_eff) + k.decode_attention_latency_us * 1e-6;
            flops += f;
            bytes += by;
        }
        (time, flops, bytes)
    }

    /// LM head and sampling of `rows` sequences on the last stage.
    fn head(&self, rows: f64, acc: &mut StepCost) -> f64 {
        if rows <= 0.0 {
            return 0.0;
        }
        let mut t = self.gemm(rows, self.lm_head.n, self.lm_head.k, Path::Bf16, acc);
        // FP32 logits, probabilities and a top-k/top-p pass over the vocabulary.
        let sb = rows * self.vocab_per_gpu * 4.0 * 3.0;
        acc.bytes += sb;
        t += SAMPLER_KERNELS * self.kern.k.elementwise_latency_us * 1e-6
            + sb / (self.kern.bw * self.kern.k.stream_efficiency);
        t
    }

    /// The engine's CPU time for a step with these sequences.
    fn cpu(&self, b: &StepBatch) -> f64 {
        self.step_overhead
            + self.per_seq * (b.prefill_seqs + b.decode_seqs) as f64
            + self.per_request * b.new_requests as f64
    }

    /// The GPU time of a step (no CPU overhead), seconds.
    pub fn gpu_time(&mut self, b: &StepBatch) -> StepCost {
        let t = b.tokens() as f64;
        let m = if self.micro_batches <= 1.0 || t <= 1.0 { 1.0 } else { self.micro_batches.min(t) };
        let inv_m = 1.0 / m;
        let (tt, tf, tb) = self.token_part(t * inv_m);
        let (at, af, ab) = self.attention(b, inv_m);
        let stage = tt + at;
        let mut cost = StepCost { time: 0.0, flops: (tf + af) * m / self.pp, bytes: (tb + ab) * m / self.pp };
        let mut time = (m + self.pp - 1.0) * stage;
        if self.pp > 1.0 {
            // Activations handed to the next stage over the link.
            let (a, bw) = self.kern.collective(self.tp.max(2.0), false);
            time += (self.pp - 1.0) * (a * 1e-6 + t * inv_m * self.hidden * ACT / (bw * 1e9));
        }
        // Embedding lookup and final norm: one pass over the step's tokens.
        time += 2.0 * self.kern.k.elementwise_latency_us * 1e-6 + 2.0 * t * self.hidden * ACT / self.kern.bw;
        if b.logits > 0 {
            let r = b.logits as f64;
            let (slots, rs) = if m == 1.0 { (1.0, r) } else { (m.min(r), r / m.min(r)) };
            let mut lm = StepCost::default();
            time += slots * self.head(rs, &mut lm);
            cost.flops += lm.flops * slots / self.pp;
            cost.bytes += lm.bytes * slots / self.pp;
        }
        cost.time = time;
        cost
    }

    /// Layers of the whole model (for per-GPU accounting checks).
    pub fn model_layers(&self) -> f64 {
        self.model_layers
    }
}

/// The attention projections of one stage's `soft` softmax-attention layers
/// and `linear` linear-attention layers, on one GPU of a `tp`-way group.
fn attention_gemms(llm: &LlmSpec, path: Path, tp: f64, soft: f64, linear: f64) -> Vec<Gemm> {
    let h = llm.hidden_size as f64;
    let q = llm.num_attention_heads as f64 * llm.head_dim as f64;
    let kvw = llm.num_kv_heads as f64 * llm.head_dim as f64;
    let g = |n: f64, kk: f64, count: f64| Gemm { n, k: kk, path, count };
    let mut gemms = match &llm.mla {
        // MLA: the query down/up projections, the latent and rotary-key
        // projection (replicated, as vLLM's fused_qkv_a_proj), the latent's
        // up-projection to per-head keys and values (the same FLOPs as the
        // weight-absorbed decode form), the output projection.
        Some(m) => {
            let nh = llm.num_attention_heads as f64;
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let (rq, rkv) = (m.q_lora_rank as f64, m.kv_lora_rank as f64);
            let mut v = Vec::with_capacity(6);
            if rq > 0.0 {
                v.push(g(rq, h, soft));
                v.push(g(nh * qk / tp, rq, soft));
            } else {
                v.push(g(nh * qk / tp, h, soft));
            }
            v.push(g(rkv + m.qk_rope_head_dim as f64, h, soft));
            v.push(g(nh * (m.qk_nope_head_dim + m.v_head_dim) as f64 / tp, rkv, soft));
            v.push(g(h, nh * m.v_head_dim as f64 / tp, soft));
            if let Some(i) = &m.indexer {
                // The DSA indexer's query (from the query latent), key and
                // head-weight projections, replicated on every GPU.
                let (n, d) = (i.heads as f64, i.head_dim as f64);
                v.push(g(n * d, if rq > 0.0 { rq } else { h }, soft));
                v.push(g(d + n, h, soft));
            }
            v
        }
        None => {
            let gate = if llm.attn_output_gate { q } else { 0.0 };
            vec![g((q + gate + 2.0 * kvw) / tp, h, soft), g(h, q / tp, soft)]
        }
    };
    if let Some(la) = &llm.linear_attention {
        // Gated DeltaNet: q, k, v and the z gate, the a and b projections
        // (one per value head each), the output projection.
        let qk = 2.0 * (la.key_heads * la.key_head_dim) as f64;
        let v = (la.value_heads * la.value_head_dim) as f64;
        let nv = la.value_heads as f64;
        gemms.push(g((qk + 2.0 * v + 2.0 * nv) / tp, h, linear));
        gemms.push(g(h, v / tp, linear));
    }
    gemms
}

impl StepCostModel for KernelModel {
    fn step(&mut self, b: &StepBatch) -> StepCost {
        let mut c = self.gpu_time(b);
        // Kernels run behind their launches: an eager step lasts at least its launch time.
        let gpu = c.time.max(self.launch(b));
        let cpu = if b.host_free { 0.0 } else { self.cpu(b) };
        c.time = (gpu + cpu - self.cpu_overlap * gpu.min(cpu)) * self.time_scale;
        c
    }

    fn peak_flops(&self) -> f64 {
        self.peak_flops
    }

    fn peak_bandwidth(&self) -> f64 {
        self.kern.bw
    }
}
