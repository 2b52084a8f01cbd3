//! A prefill replica's side of disaggregated serving: the KV blocks of
//! requests handed to a decode pool stay allocated until their transfer ends.

use std::collections::HashMap;

/// KV held for requests being transferred, by request id.
#[derive(Debug, Clone, Default)]
pub(super) struct HandOffs {
    /// (blocks, of which shared from the prefix cache, computed tokens).
    held: HashMap<u32, (u32, u32, u32)>,
}

impl HandOffs {
    /// Request `req` leaves with its `blocks` (`shared` of them from the
    /// prefix cache) holding `tokens` computed tokens.
    pub(super) fn hold(&mut self, req: u32, blocks: u32, shared: u32, tokens: u32) {
        self.held.insert(req, (blocks, shared, tokens));
    }

    /// The transfer of `req` is over: what it held.
    pub(super) fn release(&mut self, req: u32) -> Option<(u32, u32, u32)> {
        self.held.remove(&req)
    }

    /// No transfer in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Blocks held that are not counted by the prefix cache.
    pub(super) fn own_blocks(&self) -> u64 {
        self.held.values().map(|&(b, s, _)| (b - s) as u64).sum()
    }
}
