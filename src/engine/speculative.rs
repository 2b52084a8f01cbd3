//! Speculative decoding's accepted runs: how many tokens each verify step of
//! a sequence emits.

use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// The draws of accepted runs, per class acceptance rate α, deterministic
/// per (seed, request, admission).
#[derive(Debug, Clone)]
pub(super) struct SpecDraws {
    /// Tokens proposed per verify step.
    k: u32,
    /// Acceptance rate per class (empty: no speculation).
    alpha: Arc<[f64]>,
    /// Seed of the draws.
    seed: u64,
}

impl SpecDraws {
    /// No speculation yet: rates and seed come from [`SpecDraws::set`].
    pub(super) fn new(k: u32) -> Self {
        SpecDraws { k, alpha: Arc::from(Vec::new()), seed: 0 }
    }

    /// Sets each class's acceptance rate and the seed of the draws.
    pub(super) fn set(&mut self, alpha: Arc<[f64]>, seed: u64) {
        self.alpha = alpha;
        self.seed = seed;
    }

    /// Tokens emitted by successive verify steps of request `req` of class
    /// `class` (admission `salt`): 1 + the accepted run of the k proposals,
    /// P(run ≥ i) = α^i.
    pub(super) fn draws(&self, req: u32, salt: u32, class: u16) -> impl Iterator<Item = u32> + use<> {
        let k = self.k;
        let alpha = self.alpha.get(class as usize).copied().unwrap_or(0.0);
        let ln_a = alpha.ln();
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(crate::workload::stream_seed(
            self.seed,
            ((req as u64) << 20) ^ salt as u64,
        ));
        std::iter::repeat_with(move || {
            let accepted = if alpha <= 0.0 {
                0
            } else if alpha >= 1.0 {
                k
            } else {
                let u = 1.0 - rng.random::<f64>();
                ((u.ln() / ln_a).floor() as u64).min(k as u64) as u32
            };
            1 + accepted
        })
    }
}
