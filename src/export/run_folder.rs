//! A run's results folder: every file a run writes, written side by side.

use super::{RunView, manifest, run_label, write_requests_csv};
use crate::error::Result;
use crate::files::{write_atomic, write_json};
use crate::plot;
use crate::scenario::LoadedScenario;
use rayon::prelude::*;
use std::path::Path;

/// Writes a run's results folder `dir`, all or nothing ([`crate::files::Staging`]):
/// summary.json, requests.csv, manifest.json (recording `command`), the time
/// series and timeline, and the charts.
pub fn write_run(dir: &Path, loaded: &LoadedScenario, rep: &crate::Report, command: Vec<String>) -> Result<()> {
    let staging = crate::files::Staging::new(dir)?;
    write_run_files(staging.path(), loaded, rep, command)?;
    staging.commit()
}

/// Writes a run's files into `dir` (a staging folder: see [`write_run`]).
/// requests.csv is written only when the run kept its records (a run that
/// streamed them wrote it as it went: [`super::RequestsCsv`]).
pub fn write_run_files(dir: &Path, loaded: &LoadedScenario, rep: &crate::Report, command: Vec<String>) -> Result<()> {
    let workload = rep.setup.workload.clone();
    let class_names: Vec<String> = workload.classes.iter().map(|c| c.name.clone()).collect();
    let warmup = rep.setup.scenario.warmup_s;
    let out = &rep.output;
    let records = &out.records;
    let label = run_label(rep);
    let view = RunView {
        scenario: &rep.setup.scenario,
        label: &label,
        records,
        cdf: if out.kept { records } else { &out.sample.records },
        timeseries: &out.timeseries,
        timeline: &out.timeline,
    };
    // The CSV and the charts are the slow parts: write them side by side.
    let (csv, rest) = rayon::join(
        || {
            if !out.kept {
                return Ok(());
            }
            write_atomic(&dir.join("requests.csv"), |w| {
                write_requests_csv(w, records, &out.parts, warmup, &class_names, |r| {
                    crate::metrics::slo_met(&workload, r)
                })
            })
        },
        || -> Result<()> {
            write_json(&dir.join("summary.json"), &rep.summary)?;
            write_json(&dir.join("timeseries.json"), &rep.output.timeseries)?;
            write_json(&dir.join("timeline.json"), &rep.output.timeline)?;
            if let Some(f) = &rep.summary.fleet {
                let title = format!("{}: the fleet over the run", rep.setup.scenario.name);
                plot::save(&plot::fleet_figure(&title, f, rep.output.end_time), dir, "fleet")?;
            }
            write_run_charts(dir, view)
        },
    );
    csv?;
    rest?;
    let m =
        manifest(&rep.setup, rep.seed, &loaded.path.display().to_string(), &loaded.sha256, &loaded.overrides, command);
    write_json(&dir.join("manifest.json"), &m)
}

/// Writes the run's charts: latency CDFs, time series, request timeline.
pub fn write_run_charts(dir: &Path, run: RunView) -> Result<()> {
    let s = run.scenario;
    let name = &s.name;
    let slo = s.slo.clone().unwrap_or_default();
    let figs = [
        (
            "cdf",
            plot::cdf_figure(
                &format!("{name}: latency distributions"),
                &[(run.label.to_string(), run.cdf, s.warmup_s)],
                [slo.ttft_ms, slo.tpot_ms, slo.e2e_ms],
            ),
        ),
        ("timeseries", plot::timeseries_figure(&format!("{name}: the run over time"), run.timeseries, s.warmup_s)),
        (
            "timeline",
            plot::gantt_figure(
                &format!("{name}: the first {} requests", crate::sim::TIMELINE_REQUESTS),
                run.records,
                run.timeline,
                crate::sim::TIMELINE_REQUESTS as usize,
            ),
        ),
    ];
    let results: Vec<Result<String>> = figs.par_iter().map(|(stem, f)| plot::save(f, dir, stem)).collect();
    results.into_iter().try_for_each(|r| r.map(|_| ()))
}
