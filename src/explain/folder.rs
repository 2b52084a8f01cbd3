//! Explaining a results folder: the run is simulated again from its
//! manifest (same scenario file, overrides and seed) with attribution on,
//! checked against the folder's own summary.json, and explained; the
//! explanation goes back into the folder.

use super::{Explanation, Options};
use crate::error::{ConfigError, Result};
use std::path::Path;

/// Most requests an explanation holds in memory (every record and its parts).
pub const MAX_REQUESTS: u64 = 1_000_000;

fn read_json(p: &Path) -> Result<serde_json::Value> {
    let t = crate::files::read::read_whole(p, crate::files::read::MAX_WHOLE_BYTES)
        .map_err(|e| e.hint("pass a results folder written by `servesim run` (or a scenario file)"))?;
    serde_json::from_str(&t).map_err(|e| ConfigError::new(format!("{}: {e}", p.display())).into())
}

/// Simulates the run of results folder `dir` again with attribution, checks
/// it reproduces the folder's summary.json, and explains it. Returns the
/// explanation and the re-simulated run.
pub fn explain_folder(
    dir: &Path,
    catalog: &std::sync::Arc<crate::Catalog>,
    opts: Options,
) -> Result<(Explanation, crate::Report)> {
    let m = read_json(&dir.join("manifest.json"))?;
    let file = m["scenario_file"].as_str().unwrap_or_default();
    let overrides: Vec<String> = m["overrides"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let seed = m["seed"]
        .as_u64()
        .ok_or_else(|| ConfigError::new(format!("{}: no seed", dir.join("manifest.json").display())))?;
    let path = scenario_path(dir, file, m["scenario_path"].as_str(), m["scenario_sha256"].as_str());
    let mut loaded = crate::scenario::load_scenario_with(&path, &overrides, catalog).map_err(|e| {
        ConfigError::new(format!("cannot load the run's scenario {file}: {}", e.message))
            .hint("explain simulates the run again from its scenario file, looked up from here and from the results folder's parent folders: keep it where it was")
    })?;
    if m["scenario_sha256"].as_str() != Some(loaded.sha256.as_str()) {
        return Err(ConfigError::new(format!("{file} has changed since the run in {} was made", dir.display()))
            .hint("run the scenario again, then explain the new results folder")
            .into());
    }
    loaded.scenario.seed = seed;
    loaded.seed_override = Some(seed);
    let mut setup = crate::resolve(&loaded.scenario, catalog).map_err(|e| loaded.locate(e))?;
    check_size(&setup)?;
    setup.attribution = true;
    let rep = crate::run_setup(&setup, seed);
    rep.check().map_err(|e| loaded.locate(e))?;
    let before = read_json(&dir.join("summary.json"))?;
    let now = serde_json::to_value(&rep.summary).map_err(|e| crate::Error::Runtime(e.to_string()))?;
    if before != now {
        return Err(ConfigError::new(format!(
            "simulating the run of {} again gives another summary than its summary.json: this servesim or its \
             catalogue differs from the one that made it",
            dir.display()
        ))
        .hint("run the scenario again with this servesim, then explain the new folder")
        .into());
    }
    let x = super::explain(&rep, &loaded, catalog, opts)?;
    Ok((x, rep))
}

/// Where the run's scenario file `file` (as written in the manifest,
/// relative to the folder the run was made from) is now: as written when
/// that resolves from here; else `absolute` (the manifest's
/// `scenario_path`); else under the nearest parent of the results folder
/// where a file with the manifest's SHA-256 sits. So explain works from any
/// working directory.
fn scenario_path(dir: &Path, file: &str, absolute: Option<&str>, sha: Option<&str>) -> std::path::PathBuf {
    let given = Path::new(file);
    if given.is_absolute() || given.is_file() {
        return given.to_path_buf();
    }
    let same = |p: &Path| std::fs::read(p).is_ok_and(|b| sha.is_none_or(|h| crate::scenario::sha256_hex(&b) == h));
    if let Some(a) = absolute.map(Path::new).filter(|a| same(a)) {
        return a.to_path_buf();
    }
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    abs.ancestors().skip(1).map(|up| up.join(given)).find(|p| same(p)).unwrap_or_else(|| given.to_path_buf())
}

/// Refuses runs too large to hold in memory.
pub fn check_size(setup: &crate::Setup) -> Result<()> {
    if let Some(n) = crate::resolve::estimate(setup).requests
        && n as u64 > MAX_REQUESTS
    {
        return Err(ConfigError::new(format!(
            "explain holds every request of the run in memory, at most {MAX_REQUESTS}; this run has about {n}"
        ))
        .hint("explain a shorter run (--set num_requests=... or duration_s=...)")
        .into());
    }
    Ok(())
}

/// Writes explain.json and the chart (attribution.svg, .png) into `dir`;
/// the caller then rewrites report.html, whose "Reading it backwards"
/// section they feed (`export::write_html_report`).
pub fn write_explanation(dir: &Path, x: &Explanation) -> Result<()> {
    crate::files::write_json(&dir.join("explain.json"), x)?;
    crate::plot::save(&super::figure(x), dir, "attribution")?;
    Ok(())
}
