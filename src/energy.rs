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
