//! The fleet's scaling events (`[fleet]`): its first events, a slot becoming
//! ready (held requests go to the router), the scaling policy's look that
//! starts, drains or cancels slots, and a warm standby refilled. Failures
//! are handled in `failure`.

use super::{Event, EventLoop, Kind};
use crate::cost::StepCostModel;
use crate::metrics::RejectReason;

impl<'s, 'k, C: StepCostModel> EventLoop<'s, 'k, C> {
    /// Queues the fleet's first events: the policy's first look, the
    /// scripted failures and the first random failure of each ready slot.
    pub(super) fn start_fleet(&mut self) {
        let Some(f) = self.fleet.as_mut() else { return };
        let mut first = Vec::new();
        if f.config().policy != crate::config::ScalePolicy::None {
            first.push(Event { t: f.config().interval_s, kind: Kind::Tick, key: 0 });
        }
        for (k, x) in f.config().failures.iter().enumerate() {
            first.push(Event { t: x.at_s, kind: Kind::Script, key: k as u32 });
        }
        for i in 0..f.state.len() {
            if f.is_ready(i)
                && let Some(t) = f.next_failure(i, 0.0)
            {
                first.push(Event { t, kind: Kind::Fail, key: f.key(i) });
            }
        }
        for e in first {
            self.push_fleet(e);
        }
    }

    pub(super) fn push_fleet(&mut self, e: Event) {
        self.fleet_events += 1;
        self.queue.push(e);
    }

    /// A fleet event.
    pub(super) fn on_fleet(&mut self, e: Event) {
        let now = self.now;
        match e.kind {
            Kind::Ready => {
                let Some(i) = self.fleet.as_ref().and_then(|f| f.live(e.key)) else { return };
                let f = self.fleet.as_mut().expect("fleet");
                f.ready(i, now);
                self.replicas[i].serving_from(now);
                if let Some(t) = f.next_failure(i, now) {
                    let key = f.key(i);
                    self.push_fleet(Event { t, kind: Kind::Fail, key });
                }
                self.router.set_up(i, true);
                self.observe(i);
                // Requests held while no replica served go to the router now.
                while let Some(id) = self.held.pop_front() {
                    if !self.obs.sinks.records.refused(id) && !self.route(id) {
                        self.refuse(id, RejectReason::QueueFull);
                    }
                }
                if self.central {
                    self.dispatch();
                }
            }
            Kind::Fail | Kind::Script => self.on_failure(e),
            Kind::Tick => self.on_tick(),
            Kind::Refill => self.fleet.as_mut().expect("fleet").refilled(now),
            _ => unreachable!("not a fleet event"),
        }
    }

    /// The scaling policy looks, and the fleet starts, drains or cancels replicas.
    fn on_tick(&mut self) {
        let now = self.now;
        let views: Vec<crate::fleet::SlotView> = self
            .replicas
            .iter()
            .map(|r| crate::fleet::SlotView {
                busy: r.busy_total(),
                outstanding: r.outstanding(),
                pending_tokens: r.pending_tokens(),
            })
            .collect();
        // Requests waiting at the router (held, or in the central queue), and their tokens.
        let (mut held, mut held_tokens) = (0u32, 0u64);
        for &id in self.held.iter().chain(self.central_queue.iter()) {
            if !self.obs.sinks.records.refused(id) {
                let r = &self.obs.sinks.records[id as usize];
                held += 1;
                held_tokens += r.prompt as u64 + r.output as u64;
            }
        }
        let f = self.fleet.as_mut().expect("fleet");
        if let Some(v) = self.obs.sinks.first_tokens.as_mut() {
            f.ttfts.append(v);
        }
        let actions = f.look(now, &views, held, held_tokens);
        let interval = f.config().interval_s;
        for a in actions {
            match a {
                crate::fleet::Action::Start(i, at) => {
                    let key = self.fleet.as_ref().expect("fleet").key(i);
                    self.push_fleet(Event { t: at, kind: Kind::Ready, key });
                }
                crate::fleet::Action::Drain(i) => {
                    self.router.set_up(i, false);
                    self.observe(i);
                }
                crate::fleet::Action::Cancel(_) => {}
                crate::fleet::Action::Refill(at) => self.push_fleet(Event { t: at, kind: Kind::Refill, key: 0 }),
            }
        }
        self.push_fleet(Event { t: now + interval, kind: Kind::Tick, key: 0 });
    }
}
