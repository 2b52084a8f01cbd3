//! Failures and retries (`[fleet]`): a slot fails at random or as
//! scripted, loses what it held (GPU memory, its queue, the step in
//! flight), and its requests are refused or sent again from scratch
//! (`on_failure = "retry"`); it is repaired later.

use super::{Event, EventLoop, Kind};
use crate::cost::StepCostModel;
use crate::metrics::{Part, RejectReason};

impl<'s, 'k, C: StepCostModel> EventLoop<'s, 'k, C> {
    /// A failure event: a slot's random failure (`Fail`, if the life it was
    /// drawn for goes on) or a scripted one (`Script`, if the slot serves).
    pub(super) fn on_failure(&mut self, e: Event) {
        match e.kind {
            Kind::Fail => {
                if let Some(i) = self.fleet.as_ref().and_then(|f| f.live(e.key)) {
                    let repair = self.fleet.as_ref().map_or(0.0, |f| f.config().repair_s);
                    self.fail(i, repair);
                }
            }
            Kind::Script => {
                let f = self.fleet.as_ref().expect("fleet");
                let x = &f.config().failures[e.key as usize];
                let (i, repair) = (x.replica as usize, x.repair_s.unwrap_or(f.config().repair_s));
                if f.state
                    .get(i)
                    .is_some_and(|s| matches!(s, crate::fleet::SlotState::Ready | crate::fleet::SlotState::Draining))
                {
                    self.fail(i, repair);
                }
            }
            _ => unreachable!("not a failure event"),
        }
    }

    /// Slot `i` fails now: its requests are lost or sent again, and it is
    /// repaired after `repair` seconds (a draining slot just turns off).
    fn fail(&mut self, i: usize, repair: f64) {
        let now = self.now;
        if let Some(end) = self.replicas[i].step_end() {
            self.lost_step[i].push(end);
        }
        let ids = self.replicas[i].evacuate(now, &self.obs.sinks.records);
        self.router.set_up(i, false);
        let f = self.fleet.as_mut().expect("fleet");
        let retry = f.config().on_failure == crate::config::OnFailure::Retry;
        if let Some(at) = f.fail(i, now, repair, ids.len() as u64) {
            let key = f.key(i);
            self.push_fleet(Event { t: at, kind: Kind::Ready, key });
        }
        self.observe(i);
        for id in ids {
            if retry {
                self.send_again(id, now);
            } else {
                self.refuse(id, RejectReason::ReplicaFailed);
            }
        }
    }

    /// Request `id`, lost with its replica at `now`, is sent again from
    /// scratch; its time so far counts.
    fn send_again(&mut self, id: u32, now: f64) {
        let rec = &mut self.obs.sinks.records[id as usize];
        rec.replica = u32::MAX;
        rec.admitted = f64::NAN;
        rec.first_scheduled = f64::NAN;
        rec.first_token = f64::NAN;
        rec.last_token = f64::NAN;
        rec.generated = 0;
        let lost = now - rec.arrival;
        if self.obs.sinks.records.attributing() {
            // Everything before the failure was thrown away, as by a
            // preemption (admission counts its preprocessing from here).
            let p = &mut self.obs.sinks.records.attr(id).parts;
            *p = [0.0; crate::metrics::NUM_PARTS];
            p[Part::Preempted.idx()] = lost;
        }
        self.admit_now(id);
    }
}
