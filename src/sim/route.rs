//! Admission and routing: a request goes to the central queue, waits at
//! the router while no replica serves, or is routed to an entry replica
//! (by the router, or towards a replica holding its LoRA adapter); the
//! central queue hands requests to replicas with room.

use super::EventLoop;
use crate::cost::StepCostModel;
use crate::metrics::{Part, RejectReason};

impl<'s, 'k, C: StepCostModel> EventLoop<'s, 'k, C> {
    /// Admits request `id` now: to the central queue, or routed to a replica.
    pub(super) fn admit_now(&mut self, id: u32) {
        if self.central {
            let rec = &mut self.obs.sinks.records[id as usize];
            rec.admitted = self.now;
            let preprocess = self.now - rec.arrival;
            if self.obs.sinks.records.attributing() {
                let p = &mut self.obs.sinks.records.attr(id).parts;
                p[Part::Preprocess.idx()] = preprocess - p[Part::Preempted.idx()];
            }
            self.central_queue.push_back(id);
            self.dispatch();
        } else if !self.router.any_up() {
            // No replica serves (scaled to zero, or all failed): wait at the router.
            let rec = &mut self.obs.sinks.records[id as usize];
            rec.admitted = self.now;
            rec.replica = u32::MAX;
            self.held.push_back(id);
        } else if !self.route(id) {
            self.refuse(id, RejectReason::QueueFull);
        }
    }

    /// Routes request `id` to an entry replica and queues it there; false
    /// when that replica's queue is full.
    pub(super) fn route(&mut self, id: u32) -> bool {
        let rec = &mut self.obs.sinks.records[id as usize];
        let r = if self.router.wants_prefix() {
            self.replicas[0].prefix_ids(id, rec, &mut self.prefix_ids);
            self.router.pick_prefix(&self.prefix_ids)
        } else {
            self.router.pick(rec.session)
        };
        let r = if self.adapter_affinity { self.prefer_adapter(id, r) } else { r };
        let rec = &mut self.obs.sinks.records[id as usize];
        // A request held at the router while no replica was ready was admitted then.
        let held = rec.admitted;
        if held.is_nan() {
            rec.admitted = self.now;
        }
        rec.replica = r as u32;
        let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
        let work = rec.prompt as u64 + rec.output as u64;
        let (arrival, now) = (rec.arrival, self.now);
        self.sampler.activate(r);
        if self.obs.sinks.records.attributing() {
            // (A request sent again after a failure counts from the failure.)
            let p = &mut self.obs.sinks.records.attr(id).parts;
            let lost = p[Part::Preempted.idx()];
            if held.is_nan() {
                p[Part::Preprocess.idx()] = now - arrival - lost;
            } else {
                p[Part::Preprocess.idx()] = held - arrival - lost;
                p[Part::CentralQueue.idx()] = now - held;
            }
        }
        if !self.replicas[r].enqueue(self.now, id, key, work, &mut self.obs.sinks.records) {
            return false;
        }
        self.router.observe(r, &self.replicas[r]);
        self.wake(r);
        true
    }

    /// `lora.router_affinity`: the least loaded entry replica holding
    /// request `id`'s adapter, unless it has more than `prefix_load_cap`
    /// requests above the router's pick `r` (then `r`).
    fn prefer_adapter(&self, id: u32, r: usize) -> usize {
        if self.replicas[r].holds_adapter_of(id) {
            return r;
        }
        let cap = self.setup.scenario.hardware.prefix_load_cap;
        let floor = self.replicas[r].outstanding();
        (0..self.n_entry)
            .filter(|&k| self.fleet.as_ref().is_none_or(|f| f.is_ready(k)) && self.replicas[k].holds_adapter_of(id))
            .min_by_key(|&k| (self.replicas[k].outstanding(), k))
            .filter(|&k| self.replicas[k].outstanding() <= floor + cap)
            .unwrap_or(r)
    }

    /// Central queue: hands its requests, first come first served, to
    /// replicas with room (fewer than `max_num_seqs` outstanding).
    pub(super) fn dispatch(&mut self) {
        while let Some(&id) = self.central_queue.front() {
            if self.obs.sinks.records.refused(id) {
                self.central_queue.pop_front();
                continue;
            }
            if !self.router.any_up() {
                break;
            }
            let r = self.router.pick(u32::MAX);
            if self.replicas[r].outstanding() >= self.replicas[r].params().max_num_seqs {
                break;
            }
            self.central_queue.pop_front();
            let rec = &mut self.obs.sinks.records[id as usize];
            rec.replica = r as u32;
            let work = rec.prompt as u64 + rec.output as u64;
            let key = self.keyer.key(self.replicas[r].stats.pool, id, rec);
            let queued_for = self.now - rec.admitted;
            self.sampler.activate(r);
            if self.obs.sinks.records.attributing() {
                self.obs.sinks.records.attr(id).parts[Part::CentralQueue.idx()] = queued_for;
            }
            if !self.replicas[r].enqueue(self.now, id, key, work, &mut self.obs.sinks.records) {
                // Its waiting queue is full (`max_waiting` below
                // `max_num_seqs`): the request waits on at the router.
                self.obs.sinks.records[id as usize].replica = u32::MAX;
                self.central_queue.push_front(id);
                break;
            }
            self.router.observe(r, &self.replicas[r]);
            self.wake(r);
        }
    }
}
