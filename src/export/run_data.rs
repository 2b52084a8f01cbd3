//! What the run charts need, from a fresh run or read back from its folder.

use crate::config::Scenario;
use crate::engine::Span;
use crate::error::{ConfigError, Result};
use crate::metrics::{RecordSample, RejectReason, RequestRecord, Status};
use crate::sim::TimeSample;
use std::path::Path;

/// The data behind a run's charts.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The resolved scenario.
    pub scenario: Scenario,
    /// "model dtype on N × GPU", for legends.
    pub label: String,
    /// The first [`TIMELINE_REQUESTS`](crate::sim::TIMELINE_REQUESTS) records (the timeline).
    pub records: Vec<RequestRecord>,
    /// The records behind the latency CDFs: a sample of at most
    /// 2 × [`SAMPLE`](crate::sim::SAMPLE), the same as the run's own.
    pub cdf: Vec<RequestRecord>,
    /// Sampled cluster state.
    pub timeseries: Vec<TimeSample>,
    /// Spans of the requests followed for the timeline.
    pub timeline: Vec<Span>,
    /// What the reader noticed and the charts cannot show (requests.csv
    /// cut short, say), for the command to print.
    pub notes: Vec<String>,
}

/// Borrowed view of the same data (no copy of the records).
#[derive(Debug, Clone, Copy)]
pub struct RunView<'a> {
    /// The resolved scenario.
    pub scenario: &'a Scenario,
    /// Legend label.
    pub label: &'a str,
    /// Per-request records by id from the first (at least the first
    /// [`TIMELINE_REQUESTS`](crate::sim::TIMELINE_REQUESTS), for the timeline).
    pub records: &'a [RequestRecord],
    /// The records behind the latency CDFs: all, or a sample of a long run
    /// ([`SimOutput::sample`](crate::sim::SimOutput::sample)).
    pub cdf: &'a [RequestRecord],
    /// Sampled cluster state.
    pub timeseries: &'a [TimeSample],
    /// Spans of the requests followed for the timeline.
    pub timeline: &'a [Span],
}

/// The legend label of a run.
pub fn run_label(rep: &crate::Report) -> String {
    let s = &rep.setup.scenario;
    let gpus: Vec<String> =
        rep.setup.pools.iter().map(|p| format!("{} × {}", p.replicas * p.layout.gpus(), p.gpu.name)).collect();
    format!("{} {} on {}", rep.setup.llm.name, s.model.dtype.as_str(), gpus.join(" + "))
}

impl RunData {
    /// A borrowed view.
    pub fn view(&self) -> RunView<'_> {
        RunView {
            scenario: &self.scenario,
            label: &self.label,
            records: &self.records,
            cdf: &self.cdf,
            timeseries: &self.timeseries,
            timeline: &self.timeline,
        }
    }

    /// Reads `manifest.json`, `requests.csv`, `timeseries.json` and `timeline.json` from a run folder
    /// (`trace.json` in folders written by earlier versions).
    pub fn read(dir: &Path) -> Result<Self> {
        let read = |f: &str| crate::files::read::read_whole(&dir.join(f), crate::files::read::MAX_WHOLE_BYTES);
        let bad = |f: &str, e: String| ConfigError::new(format!("{}: {e}", dir.join(f).display()));
        let m: serde_json::Value =
            serde_json::from_str(&read("manifest.json")?).map_err(|e| bad("manifest.json", e.to_string()))?;
        let scenario: Scenario =
            serde_json::from_value(m["resolved_scenario"].clone()).map_err(|e| bad("manifest.json", e.to_string()))?;
        let label = format!(
            "{} {} on {} × {}",
            m["model"]["name"].as_str().unwrap_or("?"),
            scenario.model.dtype.as_str(),
            scenario.hardware.num_gpus(),
            m["gpu"]["name"].as_str().unwrap_or("?")
        );
        let timeseries =
            serde_json::from_str(&read("timeseries.json")?).map_err(|e| bad("timeseries.json", e.to_string()))?;
        // Folders written by earlier versions call the timeline file trace.json.
        let timeline_file = if dir.join("timeline.json").exists() || !dir.join("trace.json").exists() {
            "timeline.json"
        } else {
            "trace.json"
        };
        let timeline = serde_json::from_str(&read(timeline_file)?).map_err(|e| bad(timeline_file, e.to_string()))?;
        if !dir.join("requests.csv").exists() && dir.join("summary.json").exists() {
            return Err(ConfigError::new(format!(
                "{} has no requests.csv (the run was made with --no-requests): its charts cannot be redrawn",
                dir.display()
            ))
            .hint("run the scenario again without --no-requests")
            .into());
        }
        // Read row by row, keeping the timeline's records and the CDFs'
        // sample: a run of 10^7 requests is redrawn in bounded memory.
        let path = dir.join("requests.csv");
        let (file, _) = crate::files::read::open_regular(&path)?;
        let class_names: Vec<&str> = scenario.workload.classes.iter().map(|c| c.name.as_str()).collect();
        let mut records = Vec::new();
        let mut sample = RecordSample::new(crate::sim::SAMPLE);
        let mut line = String::new();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut notes = Vec::new();
        let mut rows = 0u64;
        for n in 0.. {
            if crate::files::read::read_line(&mut reader, &mut line, || format!("{}:{}", path.display(), n + 1))? == 0 {
                break;
            }
            if n == 0 {
                continue;
            }
            if !line.ends_with('\n') {
                notes.push(format!(
                    "{}: truncated: line {} ends mid-row (the file was cut short); the charts show the {rows} \
                     whole rows before it",
                    path.display(),
                    n + 1
                ));
                break;
            }
            rows += 1;
            let f: Vec<&str> = line.trim_end_matches(['\n', '\r']).split(',').collect();
            let err = |what: &str| bad("requests.csv", format!("line {}: {what}", n + 1));
            if f.len() < 14 {
                return Err(err("too few columns").into());
            }
            let t = |i: usize| {
                if f[i].is_empty() {
                    Ok(f64::NAN)
                } else {
                    f[i].parse::<f64>().map_err(|_| err(&format!("column {} is not a number", i + 1)))
                }
            };
            let u = |i: usize| f[i].parse::<u32>().map_err(|_| err(&format!("column {} is not an integer", i + 1)));
            let status = match (f[2], RejectReason::parse(f[3])) {
                ("completed", _) => Status::Completed,
                ("rejected", Some(r)) => Status::Rejected(r),
                _ => Status::InFlight,
            };
            let r = RequestRecord {
                arrival: t(9)?,
                admitted: t(10)?,
                first_scheduled: t(11)?,
                first_token: t(12)?,
                last_token: t(13)?,
                prompt: u(5)?,
                output: u(6)?,
                generated: u(7)?,
                preemptions: u(8)?,
                replica: if f[1].is_empty() { u32::MAX } else { u(1)? },
                session: f.get(21).and_then(|x| x.parse().ok()).unwrap_or(u32::MAX),
                prefix: f.get(22).and_then(|x| x.parse().ok()).unwrap_or(0),
                class: f.get(20).and_then(|n| class_names.iter().position(|c| c == n)).unwrap_or(0) as u16,
                clipped: f.get(23) == Some(&"1"),
                trace_row: u32::MAX,
                status,
            };
            let id = n as u64 - 1;
            if id < crate::sim::TIMELINE_REQUESTS as u64 {
                records.push(r);
            }
            sample.offer(id, &r);
        }
        // The summary counts every request the run wrote a row for.
        let expected = read("summary.json")
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["num_requests"].as_u64());
        if let Some(want) = expected.filter(|w| *w > rows && notes.is_empty()) {
            notes.push(format!(
                "{}: truncated: {rows} rows, but summary.json counts {want} requests; the charts show the rows \
                 there are",
                path.display()
            ));
        }
        Ok(RunData { scenario, label, records, cdf: sample.records, timeseries, timeline, notes })
    }
}
