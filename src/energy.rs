//! GPU power and energy (Step 10).
//!
//! A GPU draws an idle floor plus a dynamic part driven by how hard a step
//! works its compute units and its memory:
//!
//! P / TDP = idle + (1 − idle) · min(1, c · u_compute + m · u_memory)
//!
//! where u_compute is the step's FLOPs per GPU over its duration and the
//! GPU's peak FLOP/s (the step's MFU), and u_memory its bytes per GPU over
//! the duration and the peak bandwidth (its MBU). Between steps a GPU draws
//! the idle floor. Energy is the integral over the measurement window.
//!
//! A GPU not serving draws less than that floor: the floor was fitted on
//! busy engines, whose clocks stay up between steps. A replica that is
//! starting (cold or warm start) or under repair, a warm standby, and a
//! serving replica idle for longer than [`LONG_IDLE_S`] between steps draw
//! the loaded-idle power [`LOADED_IDLE`] × TDP: a process holding a CUDA
//! context and the model's weights, running nothing (docs/energy.md).
//!
//! The three constants were fitted to the measured average power of
//! Llama-2-70B requests at tensor parallelism 2 and 4 on DGX-A100 (Splitwise,
//! ISCA 2024, `validation/data/splitwise_perf_model_a100.csv`), and judged on
//! the rows held out of the fit: Llama-2-70B at tp 8 and BLOOM-176B at tp 8
//! (`servesim validate --only splitwise-power`; docs/energy.md). The board
//! power (`tdp_w`) of each GPU comes from its vendor's datasheet
//! (models/gpu/*.toml).

/// The power model's constants, as fractions of the board power (TDP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerModel {
    /// Power of a GPU holding the model but running no step, / TDP.
    pub idle: f64,
    /// Weight of compute utilisation (MFU) in the dynamic part.
    pub compute: f64,
    /// Weight of memory-bandwidth utilisation (MBU) in the dynamic part.
    pub memory: f64,
}

/// The shipped constants (fitted as the module docs say).
pub const POWER: PowerModel = PowerModel { idle: IDLE, compute: COMPUTE, memory: MEMORY };

const IDLE: f64 = 0.32;

/// Power of a GPU holding a CUDA context and the model but running no work
/// for a while, / TDP: 112-117 W of 700 W on H100 and H200 (0.16-0.17),
/// 0.15-0.17 on A100, 0.23 on L40S (Vadari, "The Model Parking Tax",
/// arXiv:2605.23918, 2026: nvidia-smi power of loaded, idle vLLM and
/// SGLang servers). One constant for every GPU: the H100/A100 figure.
pub const LOADED_IDLE: f64 = 0.16;

/// Seconds without a step after which a serving replica's GPUs leave the
/// serving floor for [`LOADED_IDLE`]. An assumption, not a measurement:
/// the Splitwise fit of `IDLE` includes gaps of seconds between requests,
/// and no published measurement we have times the drop; "idle for minutes"
/// is where the loaded-idle figure was measured.
pub const LONG_IDLE_S: f64 = 60.0;
const COMPUTE: f64 = 1.75;
const MEMORY: f64 = 0.95;

impl PowerModel {
    /// The dynamic activity of a step, in [0, 1]: (c · MFU + m · MBU), capped.
    #[inline]
    pub fn activity(&self, mfu: f64, mbu: f64) -> f64 {
        let a = self.compute * mfu + self.memory * mbu;
        if a.is_finite() { a.clamp(0.0, 1.0) } else { 0.0 }
    }

    /// Power of one GPU, as a fraction of its TDP, at activity `a`.
    #[inline]
    pub fn fraction(&self, a: f64) -> f64 {
        self.idle + (1.0 - self.idle) * a
    }
}
