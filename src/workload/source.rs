//! The request source: merges the open-loop streams (the common process,
//! classes with their own process, a replayed trace) with the requests that
//! closed-loop users and multi-turn sessions send after a completion.
//!
//! # Ordering and determinism
//! The next request is the earliest of all sources; at equal times a
//! feedback-scheduled request (a user's or session's next turn) comes first,
//! then the trace, then the open streams in class order. Each random
//! quantity draws from its own PCG-64 stream, named in [`crate::rng`]:
//! arrivals of the common process, class choice, trace sampling, each
//! class's own process, and per class its prompt lengths, output lengths,
//! turns and think times. Changing a length distribution therefore leaves
//! the arrival times unchanged, and vice versa; adding a class with its own
//! process leaves every other class's requests unchanged (with a shared
//! process, the class draw itself depends on the weights).

use super::plan::WorkloadPlan;
use super::process::Process;
use crate::rng::Stream as Named;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// One request as the client sends it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSpec {
    /// Arrival time, seconds.
    pub arrival: f64,
    /// Prompt tokens (including any shared prefix).
    pub prompt: u32,
    /// Output tokens (0: prefill-only).
    pub output: u32,
    /// Class index.
    pub class: u16,
    /// Session (multi-turn conversation or trace session: later requests extend its context); u32::MAX: none.
    pub session: u32,
    /// Leading prompt tokens shared with an earlier request (session
    /// context or the class's system prompt).
    pub prefix: u32,
    /// Row of the replayed trace (`u32::MAX`: not from a trace).
    pub trace_row: u32,
}

/// No session.
pub const NO_SESSION: u32 = u32::MAX;

struct Stream {
    process: Process,
    rng: Pcg64Mcg,
    /// Fixed class, or None: drawn by weight.
    class: Option<u16>,
    /// Next arrival (unscaled process time).
    next: Option<f64>,
    /// vLLM rescaling factor.
    scale: f64,
}

/// A conversation (or a closed-loop user's stream of requests).
#[derive(Debug, Clone, Copy)]
struct Conversation {
    session: u32,
    class: u16,
    /// Turns still to send; 0: the next send starts a new conversation.
    turns_left: u32,
    /// Prompt + output of the last turn sent.
    context: u32,
    /// Closed-loop user that owns it.
    user: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pending {
    t: f64,
    seq: u64,
    slot: u32,
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t.total_cmp(&o.t).then(self.seq.cmp(&o.seq))
    }
}

/// Where the next request comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum From {
    Pending,
    Trace,
    Stream(usize),
}

/// A lazy, deterministic request source.
pub struct Source {
    workload: Arc<WorkloadPlan>,
    streams: Vec<Stream>,
    trace_pos: usize,
    trace_loop: u64,
    trace_next: Option<(f64, usize)>,
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    slots: Vec<Conversation>,
    free_slots: Vec<u32>,
    in_flight: HashMap<u32, u32>,
    next_session: u32,
    share_total: f64,
    /// Per-class streams, indexed by class.
    per_class: Vec<ClassRngs>,
    rng_class: Pcg64Mcg,
    rng_trace: Pcg64Mcg,
    emitted: u64,
    /// The next request's time and source ([`Source::find_earliest`]), kept
    /// current by every change: the event loop asks for it at every event.
    next: Option<(f64, From)>,
}

fn rng(seed: u64, stream: Named) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(stream.seed(seed))
}

/// The random streams one class owns, so that adding a class leaves the
/// lengths, turns and think times of the others unchanged.
struct ClassRngs {
    prompt: Pcg64Mcg,
    output: Pcg64Mcg,
    think: Pcg64Mcg,
    turns: Pcg64Mcg,
}

impl ClassRngs {
    fn new(seed: u64, class: u32) -> Self {
        ClassRngs {
            prompt: rng(seed, Named::Prompt(class)),
            output: rng(seed, Named::Output(class)),
            think: rng(seed, Named::Think(class)),
            turns: rng(seed, Named::Turns(class)),
        }
    }
}

impl Source {
    /// The request stream of a resolved workload with the given seed.
    pub fn new(workload: &Arc<WorkloadPlan>, seed: u64) -> Self {
        let mut streams = Vec::new();
        if let Some(p) = &workload.common {
            let mut st =
                Stream { process: p.clone(), rng: rng(seed, Named::Arrivals), class: None, next: None, scale: 1.0 };
            if let (Some(target), Some(n)) = (workload.rescale_to, workload.num_requests) {
                // Draw the same N arrivals once to find where the last lands.
                let (mut p2, mut r2) = (st.process.clone(), st.rng.clone());
                let mut t = 0.0;
                for _ in 0..n {
                    t = p2.next(t, &mut r2).unwrap_or(t);
                }
                if t > 0.0 {
                    st.scale = target / t;
                }
            }
            streams.push(st);
        }
        for (i, c) in workload.classes.iter().enumerate() {
            if let Some(p) = &c.own {
                streams.push(Stream {
                    process: p.clone(),
                    rng: rng(seed, Named::ClassProcess(i as u32)),
                    class: Some(i as u16),
                    next: None,
                    scale: 1.0,
                });
            }
        }
        for s in &mut streams {
            s.next = s.process.next(0.0, &mut s.rng);
        }
        let mut src = Source {
            workload: workload.clone(),
            streams,
            trace_pos: workload.trace.as_ref().map_or(0, |t| t.lo),
            trace_loop: 0,
            trace_next: None,
            pending: BinaryHeap::new(),
            seq: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            in_flight: HashMap::new(),
            next_session: 0,
            share_total: workload.classes.iter().map(|c| c.weight).sum(),
            per_class: (0..workload.classes.len().max(1) as u32).map(|i| ClassRngs::new(seed, i)).collect(),
            rng_class: rng(seed, Named::Class),
            rng_trace: rng(seed, Named::Trace),
            emitted: 0,
            next: None,
        };
        if let Some((users, _)) = &workload.closed_loop {
            for _ in 0..*users {
                let slot = src.alloc(Conversation { session: 0, class: 0, turns_left: 0, context: 0, user: true });
                src.schedule(0.0, slot);
            }
        }
        src.advance_trace();
        src.next = src.find_earliest();
        src
    }

    /// Whether the caller must report finished requests through [`Source::done`].
    pub fn needs_feedback(&self) -> bool {
        self.workload.needs_feedback()
    }

    /// The resolved workload.
    pub fn workload(&self) -> &WorkloadPlan {
        &self.workload
    }

    fn alloc(&mut self, c: Conversation) -> u32 {
        match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = c;
                i
            }
            None => {
                self.slots.push(c);
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn schedule(&mut self, t: f64, slot: u32) {
        self.seq += 1;
        self.pending.push(Reverse(Pending { t, seq: self.seq, slot }));
    }

    /// Moves the trace cursor to the next kept row.
    fn advance_trace(&mut self) {
        self.trace_next = None;
        let Some(tp) = &self.workload.trace else { return };
        loop {
            if self.trace_pos >= tp.hi {
                if !tp.repeat {
                    return;
                }
                self.trace_pos = tp.lo;
                self.trace_loop += 1;
            }
            let i = self.trace_pos;
            self.trace_pos += 1;
            if tp.sample < 1.0 && self.rng_trace.random::<f64>() >= tp.sample {
                continue;
            }
            let row = &tp.trace.rows[i];
            let t = (row.t - tp.t0) * tp.factor + self.trace_loop as f64 * tp.period;
            self.trace_next = Some((t, i));
            return;
        }
    }

    /// The earliest source and its time.
    #[inline]
    fn earliest(&self) -> Option<(f64, From)> {
        self.next
    }

    /// The earliest source and its time, looked for.
    fn find_earliest(&self) -> Option<(f64, From)> {
        if self.workload.num_requests.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        let mut best: Option<(f64, From)> = self.pending.peek().map(|Reverse(p)| (p.t, From::Pending));
        let mut consider = |t: f64, f: From| {
            if best.is_none_or(|(bt, _)| t < bt) {
                best = Some((t, f));
            }
        };
        if let Some((t, _)) = self.trace_next {
            consider(t, From::Trace);
        }
        for (i, s) in self.streams.iter().enumerate() {
            if let Some(t) = s.next {
                consider(t * s.scale, From::Stream(i));
            }
        }
        best.filter(|(t, _)| self.workload.horizon.is_none_or(|h| *t <= h))
    }

    /// Time of the next request, if any (without taking it).
    #[inline]
    pub fn peek_time(&self) -> Option<f64> {
        self.earliest().map(|(t, _)| t)
    }

    fn pick_class(&mut self) -> u16 {
        let classes = &self.workload.classes;
        if classes.len() == 1 {
            return 0;
        }
        let mut u = self.rng_class.random::<f64>() * self.share_total;
        let mut last = 0;
        for (i, c) in classes.iter().enumerate() {
            if c.weight > 0.0 {
                last = i;
                if u < c.weight {
                    return i as u16;
                }
                u -= c.weight;
            }
        }
        last as u16
    }

    /// Prompt (with the class's shared prefix) and output of a fresh request.
    fn lengths(&mut self, class: u16) -> (u32, u32, u32) {
        let c = &self.workload.classes[class as usize];
        let r = &mut self.per_class[class as usize];
        let (p, o) = match &c.joint {
            Some(pairs) => pairs[r.prompt.random_range(0..pairs.len())],
            None => (c.prompt.sample(&mut r.prompt), c.output.sample(&mut r.output)),
        };
        (p.saturating_add(c.prefix_tokens), o, c.prefix_tokens)
    }

    /// Sends the next turn of the conversation in `slot` at `t`.
    /// A new conversation takes class `fixed`, or one drawn by weight.
    fn send_turn(&mut self, t: f64, slot: u32, fixed: Option<u16>) -> RequestSpec {
        let mut conv = self.slots[slot as usize];
        let (prompt, output, prefix) = if conv.turns_left == 0 {
            // A new conversation.
            conv.class = fixed.unwrap_or_else(|| self.pick_class());
            if self.workload.sessions.is_some() || !conv.user {
                conv.session = self.next_session;
                self.next_session = self.next_session.wrapping_add(1);
            } else {
                // A closed-loop user without multi-turn sessions sends
                // independent requests (as `vllm bench serve
                // --max-concurrency` does): no context carries over, so no
                // session, and no prefix cache hit between its requests.
                // (Until Step 11 the user was the session: under vLLM's
                // prefix caching its next prompt hit the last one's blocks.)
                conv.session = NO_SESSION;
            }
            conv.turns_left = match &self.workload.sessions {
                Some(s) => s.turns.sample(&mut self.per_class[conv.class as usize].turns).max(1),
                None => 1,
            };
            self.lengths(conv.class)
        } else {
            let c = &self.workload.classes[conv.class as usize];
            let r = &mut self.per_class[conv.class as usize];
            let new = match self.workload.sessions.as_ref().and_then(|s| s.new_tokens.as_ref()) {
                Some(d) => d.sample(&mut r.prompt),
                None => match &c.joint {
                    Some(pairs) => pairs[r.prompt.random_range(0..pairs.len())].0,
                    None => c.prompt.sample(&mut r.prompt),
                },
            };
            let output = match &c.joint {
                Some(pairs) => pairs[r.output.random_range(0..pairs.len())].1,
                None => c.output.sample(&mut r.output),
            };
            (conv.context.saturating_add(new), output, conv.context)
        };
        conv.turns_left -= 1;
        conv.context = prompt.saturating_add(output);
        self.slots[slot as usize] = conv;
        self.in_flight.insert(self.emitted as u32, slot);
        RequestSpec {
            arrival: t,
            prompt,
            output,
            class: conv.class,
            session: conv.session,
            prefix,
            trace_row: u32::MAX,
        }
    }

    /// Takes the next request.
    pub fn pop(&mut self) -> Option<RequestSpec> {
        let (t, from) = self.earliest()?;
        let spec = match from {
            From::Pending => {
                let Reverse(p) = self.pending.pop().expect("pending request");
                self.send_turn(t, p.slot, None)
            }
            From::Trace => {
                let workload = self.workload.clone();
                let tp = workload.trace.as_ref().expect("trace");
                let (_, i) = self.trace_next.expect("trace row");
                let row = tp.trace.rows[i];
                let class = if row.class == u32::MAX || tp.class_map.is_empty() {
                    self.pick_class()
                } else {
                    tp.class_map[row.class as usize]
                };
                let session = if row.session == u32::MAX {
                    NO_SESSION
                } else {
                    row.session.wrapping_add((self.trace_loop as u32).wrapping_mul(tp.trace.num_sessions))
                };
                self.advance_trace();
                RequestSpec {
                    arrival: t,
                    prompt: row.prompt,
                    output: row.output,
                    class,
                    session,
                    prefix: 0,
                    trace_row: i as u32,
                }
            }
            From::Stream(k) => {
                let s = &mut self.streams[k];
                let fixed = s.class;
                let next = s.next.expect("stream arrival");
                s.next = s.process.next(next, &mut s.rng);
                if self.workload.sessions.is_some() {
                    let slot =
                        self.alloc(Conversation { session: 0, class: 0, turns_left: 0, context: 0, user: false });
                    self.send_turn(t, slot, fixed)
                } else {
                    let class = fixed.unwrap_or_else(|| self.pick_class());
                    let (prompt, output, prefix) = self.lengths(class);
                    RequestSpec { arrival: t, prompt, output, class, session: NO_SESSION, prefix, trace_row: u32::MAX }
                }
            }
        };
        self.emitted += 1;
        self.next = self.find_earliest();
        Some(spec)
    }

    /// Reports that request `id` (the `id`-th request taken, from 0) finished
    /// at `t` — completed, or refused when `ok` is false. Closed-loop users
    /// and sessions schedule their next request from here.
    pub fn done(&mut self, id: u32, t: f64, ok: bool) {
        let Some(slot) = self.in_flight.remove(&id) else { return };
        let conv = self.slots[slot as usize];
        if ok && conv.turns_left > 0 {
            let rng_think = &mut self.per_class[conv.class as usize].think;
            let think = self.workload.sessions.as_ref().map_or(0.0, |s| s.think.sample(rng_think));
            self.schedule(t + think, slot);
        } else if conv.user {
            self.slots[slot as usize].turns_left = 0;
            let rng_think = &mut self.per_class[conv.class as usize].think;
            let mut think = self.workload.closed_loop.as_ref().map_or(0.0, |(_, th)| th.sample(rng_think));
            if !ok {
                // A refused user retries after its think time, at least 1 ms
                // later (else a run where every request is refused would
                // spin at one instant forever).
                think = think.max(1e-3);
            }
            self.schedule(t + think, slot);
        } else {
            self.free_slots.push(slot);
        }
        self.next = self.find_earliest();
    }
}

impl Iterator for Source {
    type Item = RequestSpec;

    /// The next request (open loop: a closed-loop or session source stops
    /// when it waits for a completion).
    fn next(&mut self) -> Option<RequestSpec> {
        self.pop()
    }
}
