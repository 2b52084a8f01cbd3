//! The engine step being formed or in flight: its batch, its cost, and the
//! prompt chunks it computes.

use super::running::Seq;
use crate::cost::{StepBatch, StepCost};

/// One replica's current step.
#[derive(Debug, Clone, Default)]
pub(super) struct Step {
    /// A step is in flight.
    pub(super) busy: bool,
    /// When it started.
    pub(super) start: f64,
    /// It advances the decode group.
    pub(super) decodes: bool,
    /// Its prompt chunks: (slot, tokens).
    pub(super) chunks: Vec<(u32, u32)>,
    /// What it computes.
    pub(super) batch: StepBatch,
    /// What it costs.
    pub(super) cost: StepCost,
    /// Of its time, swap copies, s.
    pub(super) swap_time: f64,
    /// Attribution: prefilling sequences with no chunk in it (slot,
    /// request, why), when attributing.
    pub(super) stalled: Vec<(u32, u32, super::attribution::Block)>,
}

impl Step {
    /// Starts forming a new step.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.batch = StepBatch::default();
        self.chunks.clear();
        self.decodes = false;
        self.swap_time = 0.0;
        self.stalled.clear();
    }

    /// Adds `c` prompt tokens of sequence `s` (in slot `i`) to the step.
    #[inline]
    pub(super) fn push_chunk(&mut self, i: u32, s: &Seq, c: u32) {
        self.batch.add_chunk(s.computed, c, s.samples_after(c));
        self.chunks.push((i, c));
    }

    /// Chunk tokens of the latest chunk added (0 when none).
    #[inline]
    pub(super) fn last_chunk(&self) -> u32 {
        self.chunks.last().map_or(0, |c| c.1)
    }
}
