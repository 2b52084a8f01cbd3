//! A prefill replica's side of disaggregated serving: the KV blocks of
//! requests handed to a decode pool stay allocated until their transfer ends.

use std::collections::HashMap;

/// KV kept for requests being transferred, by request id.
#[derive(Debug, Clone, Default)]
pub(super) struct HandOffs {
    /// (blocks, of which shared from the prefix cache, computed tokens).
    kept: HashMap<u32, (u32, u32, u32)>,
}

impl HandOffs {
    /// Request `req` leaves with its `blocks` (`shared` of them from the
    /// prefix cache) holding `tokens` computed tokens.
    pub(super) fn keep(&mut self, req: u32, blocks: u32, shared: u32, tokens: u32) {
        self.kept.insert(req, (blocks, shared, tokens));
    }

    /// The transfer of `req` is over: what was kept for it.
    pub(super) fn release(&mut self, req: u32) -> Option<(u32, u32, u32)> {
        self.kept.remove(&req)
    }

    /// No transfer in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Blocks kept that are not counted by the prefix cache.
    pub(super) fn own_blocks(&self) -> u64 {
        self.kept.values().map(|&(b, s, _)| (b - s) as u64).sum()
    }
}
