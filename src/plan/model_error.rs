//! The validated model error carried into `capacity` and `plan`: their
//! searches rerun with every step slower (and faster) by the engine
//! profile's throughput band (`cost.step_time_scale`).

use super::{Candidate, LoadKnob, WinnerRuns, bisect_up, judge, simulate, static_fleet};
use crate::Catalog;
use crate::config::SloConfig;
use crate::error::Result;
use crate::scenario::LoadedScenario;
use crate::sweep::point_seed;

/// The capacity with every step `band` slower and `band` faster (the
/// validated model error carried into the answer): one search each, on the
/// first replication's arrivals. None when no band is validated.
pub(super) fn model_range(
    loaded: &LoadedScenario,
    catalog: &Catalog,
    knob: &LoadKnob,
    slo: &SloConfig,
    tol: f64,
    band: f64,
) -> Result<Option<(f64, f64)>> {
    if !band.is_finite() || band <= 0.0 {
        return Ok(None);
    }
    let seed = point_seed(loaded.scenario.seed, 0, 0);
    let search = |scale: f64| -> Result<f64> {
        bisect_up(knob.start, tol, |rate| {
            let mut over = knob.set(rate);
            over.push(("cost.step_time_scale".into(), toml::Value::Float(scale)));
            Ok(judge(&simulate(loaded, catalog, &over, seed)?, slo).meets)
        })
    };
    // A step can be at most 1/(1 - 0.95) times faster than modelled here.
    let (slow, fast) = rayon::join(|| search(1.0 + band), || search((1.0 - band).max(0.05)));
    Ok(Some((slow?, fast?)))
}

/// The fewest replicas (up to twice the winner's) that meet the SLOs with
/// every step slower by the winner's validated throughput error.
pub(super) fn pessimistic_replicas(runs: &WinnerRuns, w: &Candidate) -> Result<Option<u32>> {
    let band = w.model_error.band;
    let Some(n) = w.replicas.filter(|_| band.is_finite() && band > 0.0) else { return Ok(None) };
    for k in n..=2 * n {
        let mut extra = if runs.loaded.scenario.fleet.is_some() { static_fleet() } else { Vec::new() };
        extra.push(("cost.step_time_scale", toml::Value::Float(1.0 + band)));
        if judge(&runs.run(k, extra)?, runs.slo).meets {
            return Ok(Some(k));
        }
    }
    Ok(None)
}
