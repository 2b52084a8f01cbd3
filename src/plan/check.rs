//! `plan`'s checks of its winner: the replica count confirmed by runs five
//! times longer, and the count one replica's capacity implies, with the
//! reason the two differ (one question, one answer).

use super::capacity::{CONFIRM_FACTOR, longer, thousands};
use super::{Candidate, LoadKnob, WinnerRuns, bisect_up, judge, simulate, static_fleet};
use crate::error::Result;
use rayon::prelude::*;
use serde::Serialize;

/// Replicas beyond the winner's the confirmation tries.
const EXTRA: u32 = 3;

/// One long run of the winner.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaRun {
    /// Replicas.
    pub replicas: u32,
    /// Requests measured (after the warm-up).
    pub measured_requests: u64,
    /// Whether it meets the SLOs and is stable.
    pub meets: bool,
    /// Why not, or the binding objective and its headroom.
    pub reason: String,
}

/// The winner checked two ways.
#[derive(Debug, Clone, Serialize)]
pub struct PlanCheck {
    /// How many times longer than the search's runs the confirmation runs are.
    pub factor: f64,
    /// The winner's size and up to three more, each over one long run.
    pub runs: Vec<ReplicaRun>,
    /// Fewest replicas that hold over the long run (null: none of those tried).
    pub confirmed_replicas: Option<u32>,
    /// The highest rate one replica of the winner sustains (capacity's
    /// search, one replication), req/s.
    pub one_replica_rate: f64,
    /// The target rate divided by that, rounded up: what sizing by one
    /// replica's capacity gives (null when one replica sustains nothing).
    pub replicas_implied: Option<u32>,
}

impl PlanCheck {
    /// The replica count to plan: the confirmed one, or the winner's when none held.
    pub fn replicas(&self, winner: u32) -> u32 {
        self.confirmed_replicas.unwrap_or(winner)
    }

    /// The check in words, for the winner of `winner` replicas at `rate` req/s.
    pub fn describe(&self, winner: u32, rate: f64) -> String {
        let first = self.runs.first();
        let measured =
            |k: u32| thousands(self.runs.iter().find(|r| r.replicas == k).map_or(0, |r| r.measured_requests));
        let mut o = match self.confirmed_replicas {
            Some(k) if k == winner => format!(
                "Confirmed: {winner} replicas hold the SLOs over a {:.0}× longer run ({} requests).",
                self.factor,
                measured(k)
            ),
            Some(k) => format!(
                "Not confirmed at {winner}: over a {:.0}× longer run {}; {k} hold ({} requests). Plan {k}.",
                self.factor,
                first.map_or("", |r| r.reason.as_str()),
                measured(k)
            ),
            None => format!(
                "Not confirmed: even {} replicas miss the SLOs over a {:.0}× longer run ({}); lengthen the runs \
                 (--min-requests) and plan again.",
                winner + EXTRA,
                self.factor,
                self.runs.last().map_or("", |r| r.reason.as_str())
            ),
        };
        let planned = self.replicas(winner);
        match self.replicas_implied {
            None => o += &format!(" One replica of it meets the SLOs at no rate tried ({rate} req/s target)."),
            Some(k) => {
                o += &format!(
                    " One replica of it sustains {:.2} req/s, so {rate} req/s ÷ that implies {k} replicas, \
                     against {planned} planned: ",
                    self.one_replica_rate
                );
                o += &if k > planned {
                    format!(
                        "{planned} replicas behind one router carry more than {planned}× one replica, because a \
                         request waits only when every replica is busy (the pooling gain of Erlang C)."
                    )
                } else if k < planned {
                    format!(
                        "{planned} replicas carry less than {planned}× one replica, because the router spreads \
                         load unevenly (router imbalance) or the tail needs slack on every replica."
                    )
                } else {
                    "the two agree.".to_string()
                };
            }
        }
        o
    }
}

/// Checks the winner `w` (at `knob_value` of the load knob, `rate` req/s).
pub(super) fn check(
    runs: &WinnerRuns,
    w: &Candidate,
    knob: &LoadKnob,
    knob_value: f64,
    rate: f64,
) -> Result<Option<PlanCheck>> {
    let Some(n) = w.replicas else { return Ok(None) };
    // Sized static, as the search sized it; the fleet's policy is weighed apart.
    let fleet = || if runs.loaded.scenario.fleet.is_some() { static_fleet() } else { Vec::new() };
    let with = |k: u32, load: Vec<(String, toml::Value)>| {
        let mut o = runs.overrides(k, fleet());
        o.extend(load);
        o
    };
    let long: Vec<Result<ReplicaRun>> = (n..=n + EXTRA)
        .into_par_iter()
        .map(|k| {
            let over = longer(runs.loaded, &with(k, Vec::new()), CONFIRM_FACTOR, w.sim_time_s)?;
            let s = simulate(runs.loaded, runs.catalog, &over, runs.seed)?;
            let v = judge(&s, runs.slo);
            Ok(ReplicaRun {
                replicas: k,
                measured_requests: s.metrics.measured_requests,
                meets: v.meets,
                reason: v.outcome(),
            })
        })
        .collect();
    let long: Vec<ReplicaRun> = long.into_iter().collect::<Result<_>>()?;
    let confirmed_replicas = long.iter().find(|r| r.meets).map(|r| r.replicas);
    let one = bisect_up(knob_value / n as f64, 0.02, |x| {
        let s = simulate(runs.loaded, runs.catalog, &with(1, knob.set(x)), runs.seed)?;
        Ok(judge(&s, runs.slo).meets)
    })?;
    let one_replica_rate = one * knob.rate_per_unit.unwrap_or(1.0);
    let replicas_implied = (one_replica_rate > 0.0).then(|| (rate / one_replica_rate - 1e-9).ceil().max(1.0) as u32);
    Ok(Some(PlanCheck { factor: CONFIRM_FACTOR, runs: long, confirmed_replicas, one_replica_rate, replicas_implied }))
}
