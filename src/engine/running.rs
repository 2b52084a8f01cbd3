//! The running sequences of one replica: slots reused through a free list
//! and linked in admission order, so that the newest (the first to be
//! preempted) is last.

/// No slot.
pub(super) const NIL: u32 = u32::MAX;

/// Where a running sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The slot holds no sequence.
    Free,
    /// Computing its prompt (or a recompute), chunk by chunk.
    Prefill,
    /// In the decode group, one token (or verify step) per decode step.
    Decode,
}

/// One running sequence.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seq {
    /// Request id.
    pub(super) req: u32,
    /// Output tokens the request asks for.
    pub(super) output: u32,
    /// Output tokens generated when it was last touched (decoding
    /// sequences are not touched per step).
    pub(super) generated: u32,
    /// Tokens to prefill (prompt + tokens generated before a preemption).
    pub(super) target: u32,
    /// Tokens of `target` already in the KV cache.
    pub(super) computed: u32,
    /// Blocks held while prefilling.
    pub(super) blocks: u32,
    /// Decode step at which it joined the decode group, and its KV length then.
    pub(super) d0: u64,
    pub(super) kv0: u32,
    /// Bumped whenever the slot is reused or freed (stale finish entries are skipped).
    pub(super) version: u32,
    prev: u32,
    next: u32,
    pub(super) phase: Phase,
    /// Arrived after the warm-up (its latencies are measured).
    pub(super) measured: bool,
    pub(super) class: u16,
    /// Leading blocks held through the prefix cache (shared, reference-counted).
    pub(super) shared: u32,
    /// When its latest token came out.
    pub(super) last_token: f64,
    /// Speculative decoding: verify steps to emit the tokens left at decode join.
    pub(super) units: u32,
    /// Speculative decoding: blocks for the tokens accepted beyond one per
    /// verify step, and whether they are held yet (taken at the next decode step).
    pub(super) extra: u32,
    pub(super) extra_held: bool,
    /// Preemptions before this admission (selects the acceptance draws).
    pub(super) salt: u32,
    /// `admission = "max-length"`: blocks the sequence holds at its end
    /// (prompt + output); the part not yet used sits in the KV reserve.
    pub(super) resv_final: u32,
    /// `admission = "reserve"`: its `max_tokens` beyond its real output, clipped.
    pub(super) limit_extra: u32,
}

impl Seq {
    /// A sequence starting its prefill: `target` tokens to have in the KV
    /// cache, `computed` of them there already, holding `blocks` blocks of
    /// which `shared` come from the prefix cache.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prefill(
        req: u32,
        output: u32,
        generated: u32,
        target: u32,
        computed: u32,
        blocks: u32,
        shared: u32,
        class: u16,
        measured: bool,
        last_token: f64,
        salt: u32,
    ) -> Seq {
        Seq {
            req,
            output,
            generated,
            target,
            computed,
            blocks,
            d0: 0,
            kv0: 0,
            version: 0,
            prev: NIL,
            next: NIL,
            phase: Phase::Prefill,
            measured,
            class,
            shared,
            last_token,
            units: 0,
            extra: 0,
            extra_held: false,
            salt,
            resv_final: 0,
            limit_extra: 0,
        }
    }
}

impl Seq {
    /// Whether a chunk of `c` more tokens ends its prompt and samples a token.
    #[inline]
    pub(super) fn samples_after(&self, c: u32) -> bool {
        self.computed + c == self.target && self.output > 0
    }
}

/// The running sequences, in admission order.
#[derive(Debug, Clone)]
pub(super) struct Running {
    slots: Vec<Seq>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    len: u32,
}

impl Running {
    /// No sequence.
    #[inline]
    pub(super) fn new() -> Self {
        Running { slots: Vec::new(), free: Vec::new(), head: NIL, tail: NIL, len: 0 }
    }

    /// Running sequences.
    #[inline]
    pub(super) fn len(&self) -> u32 {
        self.len
    }

    /// No sequence runs.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The newest sequence (`NIL` when none).
    #[inline]
    pub(super) fn newest(&self) -> u32 {
        self.tail
    }

    /// Adds `s` as the newest sequence; returns its slot.
    #[inline]
    pub(super) fn add(&mut self, s: Seq) -> u32 {
        let i = if let Some(i) = self.free.pop() {
            let version = self.slots[i as usize].version.wrapping_add(1);
            self.slots[i as usize] = Seq { version, ..s };
            i
        } else {
            self.slots.push(s);
            (self.slots.len() - 1) as u32
        };
        let s = &mut self.slots[i as usize];
        s.prev = self.tail;
        s.next = NIL;
        if self.tail != NIL {
            self.slots[self.tail as usize].next = i;
        } else {
            self.head = i;
        }
        self.tail = i;
        self.len += 1;
        i
    }

    /// Removes sequence `i` and frees its slot.
    #[inline]
    pub(super) fn remove(&mut self, i: u32) {
        let Seq { prev, next, .. } = self.slots[i as usize];
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
        self.len -= 1;
        let s = &mut self.slots[i as usize];
        s.phase = Phase::Free;
        s.version = s.version.wrapping_add(1);
        self.free.push(i);
    }

    /// The sequences, oldest first, with their slots.
    #[inline]
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &Seq)> {
        let mut i = self.head;
        std::iter::from_fn(move || {
            if i == NIL {
                return None;
            }
            let s = &self.slots[i as usize];
            let at = i;
            i = s.next;
            Some((at, s))
        })
    }
}

impl std::ops::Index<u32> for Running {
    type Output = Seq;
    #[inline]
    fn index(&self, i: u32) -> &Seq {
        &self.slots[i as usize]
    }
}

impl std::ops::IndexMut<u32> for Running {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Seq {
        &mut self.slots[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(req: u32) -> Seq {
        Seq::prefill(req, 1, 0, 1, 0, 1, 0, 0, true, 0.0, 0)
    }

    #[test]
    fn admission_order_slot_reuse_and_versions() {
        let mut r = Running::new();
        let a = r.add(seq(10));
        let b = r.add(seq(11));
        let c = r.add(seq(12));
        assert_eq!(r.newest(), c);
        r.remove(b);
        assert_eq!(r.iter().map(|(_, s)| s.req).collect::<Vec<_>>(), [10, 12]);
        let v = r[b].version;
        let d = r.add(seq(13));
        assert_eq!(d, b, "a freed slot is reused");
        assert!(r[d].version > v, "and its version moves on");
        assert_eq!(r.iter().map(|(i, _)| i).collect::<Vec<_>>(), [a, c, d]);
        r.remove(d);
        r.remove(a);
        assert_eq!((r.len(), r.newest()), (1, c));
    }
}
