//! Replicas that come and go during a run: the autoscaling policy, cold
//! starts and a warm pool, and replica failures (`[fleet]`, docs/fleet.md).
//!
//! [`Fleet`] is the bookkeeping only: the state of every replica slot, what
//! each is billed, the policy's decisions. The event loop ([`crate::sim`])
//! owns the replicas and the events, asks the fleet what to do and tells it
//! what happened. Everything is deterministic: failures draw from one PCG
//! stream per slot ([`crate::rng::Stream::Failures`]), the policy reads
//! simulated state only, and slots are chosen by index (a scale-up takes the
//! lowest free slot, a scale-down the highest serving one).

use crate::config::{FleetConfig, OnFailure, RuleKind, ScalePolicy, ScalingRules, SelectRule};
pub use crate::metrics::fleet::FleetSample;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;

/// HPA's tolerance: no scaling while the metric is within 10% of its target.
pub const TOLERANCE: f64 = 0.1;

/// The setup with the fleet frozen at its initial size (its failures
/// kept), when the setup has a scaling policy: the counterfactual that
/// tells which requests met their SLO only because capacity arrived.
pub fn frozen(setup: &crate::Setup) -> Option<crate::Setup> {
    let f = setup.scenario.fleet.as_ref().filter(|f| f.policy != ScalePolicy::None)?;
    let mut s = setup.clone();
    let initial = s.scenario.hardware.replicas;
    let failures = f.failures.iter().filter(|x| x.replica < initial).cloned().collect();
    s.scenario.fleet =
        Some(FleetConfig { policy: ScalePolicy::None, target: None, schedule: Vec::new(), failures, ..f.clone() });
    s.pools[0].replicas = initial;
    Some(s)
}

/// The state of one replica slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Not running, not billed.
    Off,
    /// Billed, loading (cold start or warm start); serves nothing yet.
    Starting,
    /// Serving: the router may send it requests.
    Ready,
    /// Finishing its requests before it stops; takes no new ones.
    Draining,
    /// Failed; serves again after its repair time (billed meanwhile).
    Failed,
}

/// Per arrival-time bucket: requests and how many met their SLO.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SloBucket {
    /// Requests that arrived in the bucket.
    pub requests: u64,
    /// Of them, completed.
    pub completed: u64,
    /// Of them, completed within every objective of their class.
    pub slo_met: u64,
}

/// What the fleet did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetOutput {
    /// The fleet after every change, from t = 0.
    pub series: Vec<FleetSample>,
    /// Replica-seconds billed inside the measurement window (slots while
    /// starting, serving, draining or under repair, plus warm standbys).
    pub billed_replica_s: f64,
    /// Of them, warm standbys'.
    pub warm_replica_s: f64,
    /// Replica-seconds billed per slot inside the window (standbys excluded).
    pub slot_billed_s: Vec<f64>,
    /// Of them, per slot, the seconds spent starting (cold or warm start)
    /// or under repair: billed, holding no step, at the loaded-idle power
    /// ([`crate::energy::LOADED_IDLE`]).
    pub slot_down_s: Vec<f64>,
    /// Scale-up actions (replicas added).
    pub scale_ups: u64,
    /// Scale-down actions (replicas removed).
    pub scale_downs: u64,
    /// Replica failures.
    pub failures: u64,
    /// Requests lost to failures (`on_failure = "lost"`).
    pub lost: u64,
    /// Requests sent again after a failure (`on_failure = "retry"`).
    pub retried: u64,
    /// Replica-seconds spent failed.
    pub downtime_s: f64,
    /// Cold start of one replica, s.
    pub cold_start_s: f64,
    /// Per slot: the [from, to) intervals it took requests (ready), to = run end while open.
    pub serving: Vec<Vec<(f64, f64)>>,
}

/// Requests by arrival-time bucket (counted as they retire).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SloTimeline {
    /// Bucket width, s.
    pub bucket_s: f64,
    /// The buckets from t = 0.
    pub buckets: Vec<SloBucket>,
}

impl SloTimeline {
    /// Buckets of `bucket_s`.
    pub fn new(bucket_s: f64) -> Self {
        SloTimeline { bucket_s, buckets: Vec::new() }
    }

    /// Counts a finished request: `met` is whether it met its SLO (None: no SLO).
    pub fn add(&mut self, r: &crate::metrics::RequestRecord, met: Option<bool>) {
        let b = (r.arrival / self.bucket_s).max(0.0) as usize;
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, SloBucket::default());
        }
        let x = &mut self.buckets[b];
        x.requests += 1;
        if r.status == crate::metrics::Status::Completed {
            x.completed += 1;
            if met == Some(true) {
                x.slo_met += 1;
            }
        }
    }
}

/// The fleet's state and policy.
pub struct Fleet {
    cfg: FleetConfig,
    /// Per slot.
    pub state: Vec<SlotState>,
    /// Per slot: a generation, bumped whenever the slot stops or fails, so
    /// that the events queued for its previous life are recognised as stale.
    pub life: Vec<u32>,
    /// Per slot: billed since (NaN: not billed).
    since: Vec<f64>,
    /// Per slot: ready since (for the utilisation policy).
    ready_since: Vec<f64>,
    /// Per slot: failed since.
    failed_since: Vec<f64>,
    /// Per slot: busy time at the last policy look.
    busy_mark: Vec<f64>,
    /// Per slot: its failure stream.
    rngs: Vec<Pcg64Mcg>,
    /// Standbys ready to take.
    warm: u32,
    window_start: f64,
    last_action: f64,
    /// The policy's recent recommendations (time, replicas).
    history: VecDeque<(f64, u32)>,
    /// The policy's recent scale events (time, replicas added, or removed if negative).
    events: VecDeque<(f64, i64)>,
    /// TTFTs of the first tokens since the last look (`policy = "ttft"`).
    pub ttfts: Vec<f64>,
    /// When the warm pool was last changed (its billing is integrated).
    warm_since: f64,
    out: FleetOutput,
}

/// What the event loop must do after a fleet decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Slot starts; it is ready at this time.
    Start(usize, f64),
    /// Slot stops taking requests and turns off once empty.
    Drain(usize),
    /// A starting slot is cancelled (off at once).
    Cancel(usize),
    /// A warm standby must be replaced: the refill is ready at this time.
    Refill(f64),
}

/// What the policy sees at a look.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotView {
    /// Busy time of the slot's replica so far (steps), s.
    pub busy: f64,
    /// Requests in it (waiting + running).
    pub outstanding: u32,
    /// Tokens still to compute in it.
    pub pending_tokens: u64,
}

impl Fleet {
    /// A fleet of `slots` slots with the first `initial` ready at t = 0;
    /// `cold_start_s` is one replica's cold start.
    pub fn new(
        cfg: &FleetConfig,
        slots: usize,
        initial: usize,
        seed: u64,
        cold_start_s: f64,
        window_start: f64,
    ) -> Self {
        let mut state = vec![SlotState::Off; slots];
        let mut since = vec![f64::NAN; slots];
        for i in 0..initial {
            state[i] = SlotState::Ready;
            since[i] = 0.0;
        }
        let mut f = Fleet {
            cfg: cfg.clone(),
            state,
            life: vec![0; slots],
            since,
            ready_since: vec![0.0; slots],
            failed_since: vec![f64::NAN; slots],
            busy_mark: vec![0.0; slots],
            rngs: (0..slots)
                .map(|i| Pcg64Mcg::seed_from_u64(crate::rng::Stream::Failures(i as u32).seed(seed)))
                .collect(),
            warm: cfg.warm_pool,
            window_start,
            last_action: f64::NEG_INFINITY,
            history: VecDeque::new(),
            events: VecDeque::new(),
            ttfts: Vec::new(),
            warm_since: 0.0,
            out: FleetOutput {
                cold_start_s,
                slot_billed_s: vec![0.0; slots],
                slot_down_s: vec![0.0; slots],
                serving: (0..slots)
                    .map(|i| if i < initial { vec![(0.0, f64::INFINITY)] } else { Vec::new() })
                    .collect(),
                ..FleetOutput::default()
            },
        };
        // Before its first look the policy stands by the initial size: a
        // scale-down waits a full window from the start.
        f.history.push_back((0.0, initial as u32));
        f.sample(0.0);
        f
    }

    /// The configuration.
    pub fn config(&self) -> &FleetConfig {
        &self.cfg
    }

    /// Whether slot `i` takes requests.
    #[inline]
    pub fn is_ready(&self, i: usize) -> bool {
        self.state[i] == SlotState::Ready
    }

    /// Whether any slot takes requests.
    pub fn any_ready(&self) -> bool {
        self.state.contains(&SlotState::Ready)
    }

    /// The event key of slot `i` in its current life.
    #[inline]
    pub fn key(&self, i: usize) -> u32 {
        i as u32 | (self.life[i] & 0xF_FFFF) << 12
    }

    /// The slot a key names, if the key is of its current life.
    #[inline]
    pub fn live(&self, key: u32) -> Option<usize> {
        let i = (key & 0xFFF) as usize;
        (self.key(i) == key).then_some(i)
    }

    /// When slot `i` (just ready) fails next, with random failures on.
    pub fn next_failure(&mut self, i: usize, now: f64) -> Option<f64> {
        let mean = self.cfg.mtbf_h? * 3600.0;
        let u: f64 = self.rngs[i].random();
        Some(now - mean * (1.0f64 - u).ln())
    }

    /// Replicas the policy counts as the fleet's size: starting, ready and failed (under repair).
    fn current(&self) -> u32 {
        self.state.iter().filter(|s| matches!(s, SlotState::Starting | SlotState::Ready | SlotState::Failed)).count()
            as u32
    }

    fn count(&self, s: SlotState) -> u32 {
        self.state.iter().filter(|&&x| x == s).count() as u32
    }

    /// Appends the fleet's state at `t` to the series.
    fn sample(&mut self, t: f64) {
        let s = FleetSample {
            t,
            ready: self.count(SlotState::Ready),
            starting: self.count(SlotState::Starting),
            draining: self.count(SlotState::Draining),
            failed: self.count(SlotState::Failed),
            warm: self.warm,
        };
        match self.out.series.last_mut() {
            Some(last) if last.t == t => *last = s,
            Some(last) if FleetSample { t, ..*last } == s => {}
            _ => self.out.series.push(s),
        }
    }

    /// Slot `i` stops taking requests at `now`.
    fn stop_serving(&mut self, i: usize, now: f64) {
        if let Some(last) = self.out.serving[i].last_mut()
            && last.1 == f64::INFINITY
        {
            last.1 = now.max(last.0);
        }
    }

    /// Billed time of slot `i` from its start to `now`, inside the window.
    fn bill(&mut self, i: usize, now: f64) {
        let from = self.since[i].max(self.window_start);
        if now > from {
            self.out.slot_billed_s[i] += now - from;
        }
        self.since[i] = f64::NAN;
    }

    /// Ends slot `i`'s start or repair at `now` (nothing when it is in
    /// neither): its time inside the window counts as down (loaded-idle power).
    fn end_down(&mut self, i: usize, now: f64) {
        let since = match self.state[i] {
            SlotState::Starting => self.since[i],
            SlotState::Failed => self.failed_since[i],
            _ => return,
        };
        let from = since.max(self.window_start);
        if now > from {
            self.out.slot_down_s[i] += now - from;
        }
    }

    fn bill_warm(&mut self, now: f64) {
        let from = self.warm_since.max(self.window_start);
        if now > from {
            // Standbys, and the refills under way, are all billed: the pool is always full.
            let s = self.cfg.warm_pool as f64 * (now - from);
            self.out.warm_replica_s += s;
        }
        self.warm_since = now;
    }

    /// The policy looks at `now`: `view` per slot, `held` requests (and
    /// their `held_tokens`) waiting at the router for any ready replica.
    /// Returns the actions to take.
    pub fn look(&mut self, now: f64, view: &[SlotView], held: u32, held_tokens: u64) -> Vec<Action> {
        let current = self.current();
        let ready = self.count(SlotState::Ready);
        let (min, max) = (self.cfg.min_replicas, self.state.len() as u32);
        let serving = |s: SlotState| matches!(s, SlotState::Ready | SlotState::Draining);
        let ratio = |total: f64, per: f64| -> Option<f64> {
            // HPA on an average value: desired = ⌈total / target⌉.
            let desired = (total / per).ceil();
            if current > 0 && (total / (per * current as f64) - 1.0).abs() <= TOLERANCE { None } else { Some(desired) }
        };
        let desired: Option<f64> = match self.cfg.policy {
            ScalePolicy::None => None,
            ScalePolicy::Utilisation => {
                let target = self.cfg.target.unwrap_or(1.0);
                let (mut busy, mut span) = (0.0, 0.0);
                for (i, v) in view.iter().enumerate() {
                    if self.state[i] == SlotState::Ready {
                        busy += v.busy - self.busy_mark[i];
                        span += (now - self.ready_since[i]).min(self.cfg.interval_s);
                    }
                }
                if span > 0.0 {
                    let u = busy / span;
                    ((u / target - 1.0).abs() > TOLERANCE).then(|| (ready as f64 * u / target).ceil())
                } else {
                    None
                }
            }
            ScalePolicy::Queue => {
                let total: u64 = view
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| serving(self.state[*i]))
                    .map(|(_, v)| v.outstanding as u64)
                    .sum::<u64>()
                    + held as u64;
                ratio(total as f64, self.cfg.target.unwrap_or(1.0))
            }
            ScalePolicy::PendingTokens => {
                let total: u64 = view
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| serving(self.state[*i]))
                    .map(|(_, v)| v.pending_tokens)
                    .sum::<u64>()
                    + held_tokens;
                ratio(total as f64, self.cfg.target.unwrap_or(1.0))
            }
            ScalePolicy::Ttft => {
                let target = self.cfg.target.unwrap_or(1.0) * 1e-3;
                let p90 = if self.ttfts.is_empty() {
                    None
                } else {
                    let k = ((self.ttfts.len() as f64 * 0.9).ceil() as usize).clamp(1, self.ttfts.len()) - 1;
                    let (_, x, _) = self.ttfts.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
                    Some(*x)
                };
                let busy = held > 0 || view.iter().any(|v| v.outstanding > 0);
                match p90 {
                    Some(x) if x > target => Some(current as f64 + 1.0),
                    Some(x) if x < 0.5 * target => Some(current as f64 - 1.0),
                    None if !busy => Some(current as f64 - 1.0),
                    None if held > 0 => Some(current as f64 + 1.0),
                    _ => None,
                }
            }
            ScalePolicy::Schedule => {
                let t = now % self.cfg.schedule_period_s;
                let row = self.cfg.schedule.iter().rev().find(|e| e.at_s <= t).or(self.cfg.schedule.last());
                row.map(|e| e.replicas as f64)
            }
        };
        for (i, v) in view.iter().enumerate() {
            self.busy_mark[i] = v.busy;
        }
        self.ttfts.clear();
        let mut want = desired.map_or(current, |d| d.clamp(0.0, max as f64) as u32).clamp(min, max);
        if held > 0 && want == 0 {
            // Requests wait for capacity: never scale to (or stay at) zero then.
            want = 1;
        }
        // Stabilisation (HPA): a scale-up acts on the smallest
        // recommendation of its window, a scale-down on the largest of its.
        self.history.push_back((now, want));
        let keep = self.cfg.scale_up_delay_s.max(self.cfg.scale_down_delay_s);
        while self.history.front().is_some_and(|&(t, _)| t < now - keep) {
            self.history.pop_front();
        }
        let over = |w: f64| self.history.iter().filter(move |&&(t, _)| t >= now - w).map(|&(_, x)| x);
        let up = over(self.cfg.scale_up_delay_s).min().unwrap_or(want);
        let down = over(self.cfg.scale_down_delay_s).max().unwrap_or(want);
        // Rate limits (HPA behavior policies), from the replicas at the
        // start of each rule's period.
        let target = if up > current {
            up.min(self.limit(&self.cfg.scale_up, now, current, 1))
        } else if down < current {
            down.max(self.limit(&self.cfg.scale_down, now, current, -1))
        } else {
            current
        };
        if target == current || now - self.last_action < self.cfg.cooldown_s {
            return Vec::new();
        }
        self.last_action = now;
        self.resize(now, current, target)
    }

    /// The most (`sign` 1) or fewest (−1) replicas `rules` allow at `now`
    /// from `current`, as Kubernetes' HPA computes it
    /// (`calculateScaleUpLimitWithScalingRules` and its scale-down twin):
    /// each rule counts from the replicas at the start of its period, the
    /// replicas added (removed) in the period taken off (put back); `max`
    /// picks the rule allowing the largest change, `min` the smallest.
    fn limit(&self, rules: &ScalingRules, now: f64, current: u32, sign: i64) -> u32 {
        if rules.select == SelectRule::Disabled {
            return current;
        }
        let proposals = rules.policies.iter().map(|r| {
            let moved: i64 = self
                .events
                .iter()
                .filter(|&&(t, d)| t > now - r.period_s && d.signum() == sign)
                .map(|&(_, d)| d.abs())
                .sum();
            let start = (current as i64 - sign * moved).max(0) as f64;
            let v = r.value as f64;
            let p = match (r.kind, sign > 0) {
                (RuleKind::Pods, true) => start + v,
                (RuleKind::Percent, true) => (start * (1.0 + v / 100.0)).ceil(),
                (RuleKind::Pods, false) => start - v,
                (RuleKind::Percent, false) => (start * (1.0 - v / 100.0)).trunc(),
            };
            p.max(0.0) as u32
        });
        // Up: `max` allows the most replicas; down: `max` allows the fewest.
        match (rules.select == SelectRule::Max) == (sign > 0) {
            true => proposals.max().unwrap_or(current),
            false => proposals.min().unwrap_or(current),
        }
    }

    /// Moves the fleet from `current` to `target` replicas.
    fn resize(&mut self, now: f64, current: u32, target: u32) -> Vec<Action> {
        let longest = self.cfg.scale_up.policies.iter().chain(&self.cfg.scale_down.policies).map(|r| r.period_s);
        let keep = longest.fold(0.0, f64::max);
        while self.events.front().is_some_and(|&(t, _)| t <= now - keep) {
            self.events.pop_front();
        }
        let before = self.out.scale_ups as i64 - self.out.scale_downs as i64;
        let mut acts = Vec::new();
        if target > current {
            for _ in current..target {
                let Some(i) = self.state.iter().position(|&s| s == SlotState::Off) else { break };
                let ready_at = if self.warm > 0 {
                    self.bill_warm(now);
                    self.warm -= 1;
                    acts.push(Action::Refill(now + self.out.cold_start_s));
                    now + self.cfg.warm_start_s
                } else {
                    now + self.out.cold_start_s
                };
                self.state[i] = SlotState::Starting;
                self.since[i] = now;
                self.out.scale_ups += 1;
                acts.push(Action::Start(i, ready_at));
            }
        } else {
            for _ in target..current {
                // Cancel a start first (the newest), else drain the newest serving slot.
                let i = match self.state.iter().rposition(|&s| s == SlotState::Starting) {
                    Some(i) => {
                        acts.push(Action::Cancel(i));
                        i
                    }
                    None => match self.state.iter().rposition(|&s| s == SlotState::Ready) {
                        Some(i) => {
                            acts.push(Action::Drain(i));
                            i
                        }
                        None => break,
                    },
                };
                self.out.scale_downs += 1;
                if self.state[i] == SlotState::Starting {
                    self.turn_off(i, now);
                } else {
                    self.state[i] = SlotState::Draining;
                    self.stop_serving(i, now);
                }
            }
        }
        let moved = self.out.scale_ups as i64 - self.out.scale_downs as i64 - before;
        if moved != 0 {
            self.events.push_back((now, moved));
        }
        self.sample(now);
        acts
    }

    /// A warm standby has been replaced.
    pub fn refilled(&mut self, now: f64) {
        self.bill_warm(now);
        self.warm = (self.warm + 1).min(self.cfg.warm_pool);
        self.sample(now);
    }

    /// Slot `i` has finished starting (or its repair): it serves from `now`.
    pub fn ready(&mut self, i: usize, now: f64) {
        self.end_down(i, now);
        if self.state[i] == SlotState::Failed {
            self.out.downtime_s += now - self.failed_since[i];
        }
        self.state[i] = SlotState::Ready;
        self.ready_since[i] = now;
        self.out.serving[i].push((now, f64::INFINITY));
        self.sample(now);
    }

    /// A draining slot has emptied: it turns off.
    pub fn turn_off(&mut self, i: usize, now: f64) {
        self.end_down(i, now);
        self.bill(i, now);
        self.state[i] = SlotState::Off;
        self.life[i] = self.life[i].wrapping_add(1);
        self.sample(now);
    }

    /// Slot `i` fails at `now` (it must be ready or draining); returns the
    /// time it is repaired, or None when it was draining (it just turns off).
    pub fn fail(&mut self, i: usize, now: f64, repair_s: f64, lost_here: u64) -> Option<f64> {
        self.out.failures += 1;
        self.stop_serving(i, now);
        match self.cfg.on_failure {
            OnFailure::Retry => self.out.retried += lost_here,
            OnFailure::Lost => self.out.lost += lost_here,
        }
        self.life[i] = self.life[i].wrapping_add(1);
        if self.state[i] == SlotState::Draining {
            self.turn_off(i, now);
            return None;
        }
        self.state[i] = SlotState::Failed;
        self.failed_since[i] = now;
        self.sample(now);
        Some(now + repair_s)
    }

    /// Closes the billing at `end` and returns what the fleet did.
    pub fn finish(mut self, end: f64) -> FleetOutput {
        for i in 0..self.state.len() {
            if self.state[i] == SlotState::Failed {
                self.out.downtime_s += (end - self.failed_since[i]).max(0.0);
            }
            self.end_down(i, end);
            if self.state[i] != SlotState::Off {
                self.bill(i, end);
            }
            self.stop_serving(i, end);
        }
        self.bill_warm(end);
        self.out.billed_replica_s = self.out.slot_billed_s.iter().sum::<f64>() + self.out.warm_replica_s;
        self.out
    }
}
