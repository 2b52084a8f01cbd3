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
    /// Peak memory bandwidth, GB/s (10^9 bytes per second).
    pub memory_bandwidth_gbps: f64,
    /// Dense BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s; 0 when the GPU has no FP8 units
    /// (FP8 weights then compute at the BF16 rate).
    #[serde(default)]
    pub fp8_tflops: f64,
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
    /// Board power, W (informational).
    #[serde(default)]
    pub tdp_w: f64,
    /// Where the numbers came from.
    #[serde(default)]
    pub source: String,
}

impl GpuSpec {
    /// Memory capacity in bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * GIB
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
        if !(self.fp8_tflops >= 0.0 && self.fp8_tflops.is_finite()) {
            return Err(format!("`fp8_tflops` must be 0 or positive, got {}", self.fp8_tflops));
        }
        if !(self.price_per_hour >= 0.0 && self.price_per_hour.is_finite()) {
            return Err(format!("`price_per_hour` must be 0 or positive, got {}", self.price_per_hour));
        }
        if !(self.allreduce_latency_us >= 0.0 && self.allreduce_latency_us.is_finite()) {
            return Err(format!("`allreduce_latency_us` must be 0 or positive, got {}", self.allreduce_latency_us));
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

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
