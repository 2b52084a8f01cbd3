//! GPU profiles: peak rates, memory, interconnect, price and efficiency factors.

use serde::{Deserialize, Serialize};

/// One GPU model. Loaded from `models/gpu/<name>.toml` or inlined in a
/// scenario as `[hardware.gpu_spec]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Display name, e.g. "H100-SXM".
    pub name: String,
    /// Memory capacity per GPU; the simulator reads it as GiB (2^30 bytes).
    pub memory_gb: f64,
    /// Memory the CUDA driver reports for the device (what engines plan
    /// with), GiB; 0: `memory_gb`. Used by the engine memory plans.
    #[serde(default)]
    pub memory_gib: f64,
    /// Peak memory bandwidth, GB/s (10^9 bytes per second).
    pub memory_bandwidth_gbps: f64,
    /// Dense BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s; 0 when the GPU has no FP8 units
    /// (FP8 weights then compute at the BF16 rate).
    #[serde(default)]
    pub fp8_tflops: f64,
    /// Dense FP4 (NVFP4 / MXFP4) tensor-core peak, TFLOP/s; 0 when the GPU
    /// has no FP4 units (FP4 weights then run weight-only at the BF16 rate).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fp4_tflops: f64,
    /// Interconnect name (informational).
    #[serde(default)]
    pub interconnect: String,
    /// Per-GPU GPU-to-GPU bandwidth as vendors quote it (bidirectional), GB/s.
    pub interconnect_gbps: f64,
    /// Price per GPU-hour in USD: an assumption, overridable per scenario.
    pub price_per_hour: f64,
    /// Fraction of peak FLOP/s reached by large GEMMs and attention.
    pub compute_efficiency: f64,
    /// Fraction of peak memory bandwidth reached by streaming kernels.
    pub memory_efficiency: f64,
    /// Fraction of link bandwidth reached by collectives.
    pub interconnect_efficiency: f64,
    /// Latency per ring hop of an all-reduce, microseconds.
    pub allreduce_latency_us: f64,
    /// GPUs one NVLink (xGMI) domain joins at `interconnect_gbps`: 8 on an
    /// HGX or MI300-series board, 72 in a GB200 NVL72 rack. A tensor- (and
    /// expert-) parallel group must fit inside it.
    #[serde(default = "eight", skip_serializing_if = "is_eight")]
    pub scale_up_gpus: u32,
    /// Board power, W (informational).
    #[serde(default)]
    pub tdp_w: f64,
    /// Where the numbers came from.
    #[serde(default)]
    pub source: String,
    /// Measured kernel performance for the `kernel` cost model; absent:
    /// generic values (see [`KernelSpec::generic`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<KernelSpec>,
    /// Other names it is known by (in published tables, benchmark logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

fn eight() -> u32 {
    8
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_eight(v: &u32) -> bool {
    *v == 8
}

impl GpuSpec {
    /// Memory capacity in bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * GIB
    }

    /// Device memory as CUDA reports it, bytes (`memory_gib`, else `memory_gb` GiB).
    pub fn device_bytes(&self) -> f64 {
        if self.memory_gib > 0.0 { self.memory_gib * GIB } else { self.memory_bytes() }
    }

    /// Checks that every rate is positive and every efficiency in (0, 1].
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("memory_gb", self.memory_gb),
            ("memory_bandwidth_gbps", self.memory_bandwidth_gbps),
            ("bf16_tflops", self.bf16_tflops),
            ("interconnect_gbps", self.interconnect_gbps),
        ];
        for (k, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("`{k}` must be a positive number, got {v}"));
            }
        }
        if !(self.memory_gib >= 0.0 && self.memory_gib.is_finite()) {
            return Err(format!("`memory_gib` must be 0 or positive, got {}", self.memory_gib));
        }
        for (k, v) in [("fp8_tflops", self.fp8_tflops), ("fp4_tflops", self.fp4_tflops)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("`{k}` must be 0 or positive, got {v}"));
            }
        }
        if !(self.price_per_hour >= 0.0 && self.price_per_hour.is_finite()) {
            return Err(format!("`price_per_hour` must be 0 or positive, got {}", self.price_per_hour));
        }
        if !(self.allreduce_latency_us >= 0.0 && self.allreduce_latency_us.is_finite()) {
            return Err(format!("`allreduce_latency_us` must be 0 or positive, got {}", self.allreduce_latency_us));
        }
        if let Some(k) = &self.kernels {
            k.validate()?;
        }
        for (k, v) in [
            ("compute_efficiency", self.compute_efficiency),
            ("memory_efficiency", self.memory_efficiency),
            ("interconnect_efficiency", self.interconnect_efficiency),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!("`{k}` must be in (0, 1], got {v}"));
            }
        }
        Ok(())
    }
}

/// How the kernels of an inference step perform on one GPU: what the
/// `kernel` cost model needs beyond peak rates (docs/cost-model.md). The
/// shipped values are fits to measured kernel timings (NVIDIA
/// AIConfigurator's database), each named in `source`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// Where the values came from.
    pub source: String,
    /// Fraction of the BF16 tensor peak large GEMMs reach.
    pub gemm_efficiency: f64,
    /// Fraction of the FP8 tensor peak large W8A8 GEMMs reach (activation
    /// quantisation included); 0 where the GPU has no FP8 units.
    #[serde(default)]
    pub fp8_gemm_efficiency: f64,
    /// Fraction of the FP4 tensor peak large W4A4 (NVFP4) GEMMs reach
    /// (activation quantisation included); 0 where the GPU has no FP4 units.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fp4_gemm_efficiency: f64,
    /// Fraction of peak memory bandwidth reached by memory-bound kernels
    /// (weights streamed by skinny GEMMs, elementwise kernels).
    pub stream_efficiency: f64,
    /// Fixed time of one GEMM kernel, µs.
    pub gemm_latency_us: f64,
    /// Fixed time of the FP8 activation-quantisation kernel before a W8A8 GEMM, µs.
    #[serde(default)]
    pub fp8_quant_latency_us: f64,
    /// Fixed time of the FP4 activation-quantisation kernel before a W4A4 GEMM, µs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fp4_quant_latency_us: f64,
    /// Fixed time of one elementwise kernel (norm, RoPE, activation), µs.
    pub elementwise_latency_us: f64,
    /// Fraction of the BF16 peak prefill attention reaches on long sequences.
    pub prefill_attention_efficiency: f64,
    /// Sequence length at which prefill attention reaches half that efficiency
    /// (efficiency × s / (s + this)), tokens.
    pub prefill_attention_half_len: f64,
    /// Fixed time of one prefill attention kernel, µs.
    pub prefill_attention_latency_us: f64,
    /// Fraction of peak memory bandwidth decode attention reaches reading the KV cache.
    pub decode_attention_efficiency: f64,
    /// Fixed time of one decode attention kernel, µs.
    pub decode_attention_latency_us: f64,
    /// Time per decoding sequence in one decode attention kernel, ns.
    pub decode_attention_ns_per_seq: f64,
    /// Fraction of the peak the fused MoE kernel's expert GEMMs reach
    /// (rows per expert rounded up to 32); 0: the generic value.
    #[serde(default)]
    pub moe_efficiency: f64,
    /// Fraction of peak bandwidth the fused MoE kernel reaches reading the
    /// touched experts' weights; 0: the generic value.
    #[serde(default)]
    pub moe_stream_efficiency: f64,
    /// Fixed time of one fused MoE layer (routing, permutation, both GEMMs), µs; 0: the generic value.
    #[serde(default)]
    pub moe_latency_us: f64,
    /// The same three constants for TensorRT-LLM's CUTLASS MoE kernels
    /// (`cost.moe_kernel = "cutlass"`): efficiency against the peak; 0: generic.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cutlass_moe_efficiency: f64,
    /// CUTLASS MoE: fraction of peak bandwidth reading the touched experts; 0: generic.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cutlass_moe_stream_efficiency: f64,
    /// CUTLASS MoE: fixed time of one MoE layer, µs (with the efficiencies: 0 and both others 0 mean generic).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cutlass_moe_latency_us: f64,
    /// All-reduce latency and bus bandwidth by tensor-parallel degree.
    #[serde(default)]
    pub allreduce: Vec<AllReduceSpec>,
}

/// The generic fused-MoE constants: the means of the A100 and H100 fits
/// (docs/cost-model.md).
pub const GENERIC_MOE: (f64, f64, f64) = (0.28, 0.76, 20.0);

/// The generic CUTLASS MoE constants (TensorRT-LLM): the medians of the
/// A100, H100, H200, B200 and L40S fits (docs/cost-model.md).
pub const GENERIC_CUTLASS_MOE: (f64, f64, f64) = (0.473, 0.725, 33.7);

/// The generic W4A4 GEMM constants (efficiency against the FP4 peak,
/// activation-quantisation latency in µs): B200's fit to AIConfigurator's
/// NVFP4 GEMM table, the only FP4 kernel measurements (docs/cost-model.md).
pub const GENERIC_FP4: (f64, f64) = (0.499, 2.8);

/// Measured all-reduce performance at one tensor-parallel degree:
/// time = latency + bytes × 2(tp − 1)/tp ÷ bus bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllReduceSpec {
    /// GPUs taking part.
    pub tp: u32,
    /// The engine's custom (one-shot / two-shot, peer-to-peer) all-reduce: latency, µs.
    pub custom_us: f64,
    /// Its bus bandwidth, GB/s.
    pub custom_busbw_gbps: f64,
    /// NCCL's all-reduce: latency, µs.
    pub nccl_us: f64,
    /// Its bus bandwidth, GB/s.
    pub nccl_busbw_gbps: f64,
}

impl KernelSpec {
    /// Values for a GPU without kernel measurements: the medians of the
    /// measured GPUs (A100, H100, H200, B200, L40S) for the efficiencies and
    /// latencies, and all-reduce figures derived from the interconnect
    /// (docs/cost-model.md says how far off this was for each measured GPU
    /// when it was left out).
    pub fn generic(gpu: &GpuSpec) -> KernelSpec {
        let nvlink = gpu.interconnect_gbps >= 300.0;
        // Bus bandwidth: about a third of the quoted bidirectional NVLink
        // figure (A100 600 -> 150-160, H100 900 -> 250-300 measured); PCIe
        // cards reach about a quarter of the quoted figure at tp 2.
        let bw = if nvlink { gpu.interconnect_gbps / 3.5 } else { gpu.interconnect_gbps / 4.0 };
        let allreduce = [2u32, 4, 8]
            .iter()
            .map(|&tp| {
                let hops = (tp as f64).log2();
                AllReduceSpec {
                    tp,
                    custom_us: if nvlink { 4.0 + 0.75 * hops } else { 5.0 + 8.0 * (hops - 1.0) },
                    custom_busbw_gbps: if nvlink { bw } else { bw / hops.powi(2) },
                    nccl_us: if nvlink { 4.0 + 5.0 * hops } else { 7.0 + 8.0 * (hops - 1.0) },
                    nccl_busbw_gbps: if nvlink { bw } else { bw / hops.powi(2) },
                }
            })
            .collect();
        KernelSpec {
            source: "generic: medians of the measured GPUs (no kernel measurements for this GPU)".into(),
            gemm_efficiency: 0.77,
            fp8_gemm_efficiency: if gpu.fp8_tflops > 0.0 { 0.55 } else { 0.0 },
            // FP4: B200's fit, the only GPU with FP4 kernel measurements.
            fp4_gemm_efficiency: if gpu.fp4_tflops > 0.0 { GENERIC_FP4.0 } else { 0.0 },
            fp4_quant_latency_us: GENERIC_FP4.1,
            stream_efficiency: 0.84,
            gemm_latency_us: 3.8,
            fp8_quant_latency_us: 2.3,
            elementwise_latency_us: 3.0,
            prefill_attention_efficiency: 0.62,
            prefill_attention_half_len: 1060.0,
            prefill_attention_latency_us: 13.0,
            decode_attention_efficiency: 0.9,
            decode_attention_latency_us: 11.6,
            decode_attention_ns_per_seq: 65.0,
            moe_efficiency: GENERIC_MOE.0,
            moe_stream_efficiency: GENERIC_MOE.1,
            moe_latency_us: GENERIC_MOE.2,
            cutlass_moe_efficiency: GENERIC_CUTLASS_MOE.0,
            cutlass_moe_stream_efficiency: GENERIC_CUTLASS_MOE.1,
            cutlass_moe_latency_us: GENERIC_CUTLASS_MOE.2,
            allreduce,
        }
    }

    /// Checks ranges; returns a message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        for (k, v) in [
            ("gemm_efficiency", self.gemm_efficiency),
            ("stream_efficiency", self.stream_efficiency),
            ("prefill_attention_efficiency", self.prefill_attention_efficiency),
            ("decode_attention_efficiency", self.decode_attention_efficiency),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!("`kernels.{k}` must be in (0, 1], got {v}"));
            }
        }
        for (k, v) in [
            ("moe_efficiency", self.moe_efficiency),
            ("moe_stream_efficiency", self.moe_stream_efficiency),
            ("cutlass_moe_efficiency", self.cutlass_moe_efficiency),
            ("cutlass_moe_stream_efficiency", self.cutlass_moe_stream_efficiency),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("`kernels.{k}` must be in [0, 1] (0: generic), got {v}"));
            }
        }
        for (k, v) in
            [("fp8_gemm_efficiency", self.fp8_gemm_efficiency), ("fp4_gemm_efficiency", self.fp4_gemm_efficiency)]
        {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("`kernels.{k}` must be in [0, 1], got {v}"));
            }
        }
        for (k, v) in [
            ("gemm_latency_us", self.gemm_latency_us),
            ("fp8_quant_latency_us", self.fp8_quant_latency_us),
            ("fp4_quant_latency_us", self.fp4_quant_latency_us),
            ("elementwise_latency_us", self.elementwise_latency_us),
            ("prefill_attention_half_len", self.prefill_attention_half_len),
            ("prefill_attention_latency_us", self.prefill_attention_latency_us),
            ("decode_attention_latency_us", self.decode_attention_latency_us),
            ("decode_attention_ns_per_seq", self.decode_attention_ns_per_seq),
            ("moe_latency_us", self.moe_latency_us),
            ("cutlass_moe_latency_us", self.cutlass_moe_latency_us),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("`kernels.{k}` must be 0 or positive, got {v}"));
            }
        }
        let mut last = 1;
        for a in &self.allreduce {
            if a.tp <= last {
                return Err(format!("`kernels.allreduce`: tp must rise above 1, entry by entry (got tp = {})", a.tp));
            }
            last = a.tp;
            for (k, v) in [("custom_busbw_gbps", a.custom_busbw_gbps), ("nccl_busbw_gbps", a.nccl_busbw_gbps)] {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(format!("`kernels.allreduce` tp {}: `{k}` must be positive, got {v}", a.tp));
                }
            }
            for (k, v) in [("custom_us", a.custom_us), ("nccl_us", a.nccl_us)] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(format!("`kernels.allreduce` tp {}: `{k}` must be 0 or positive, got {v}", a.tp));
                }
            }
        }
        Ok(())
    }
}

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
