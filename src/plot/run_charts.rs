//! Charts of one run: latency CDFs, time series, and the request timeline.

use super::{Figure, GanttRow, PALETTE, RefLine, Series, XyChart};
use crate::engine::{Span, SpanKind};
use crate::metrics::{RequestRecord, Status};
use crate::sim::TimeSample;

/// Empirical CDF of `v` (ascending), thinned to at most `max_points`.
fn cdf(mut v: Vec<f64>, max_points: usize) -> Vec<(f64, f64)> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max_points).max(1);
    let mut out: Vec<(f64, f64)> = (0..n).step_by(step).map(|i| (v[i], (i + 1) as f64 / n as f64)).collect();
    if out.last().is_some_and(|p| p.1 < 1.0) {
        out.push((v[n - 1], 1.0));
    }
    out
}

/// CDFs of TTFT, TPOT and E2E latency, one line per run (label, records,
/// warm-up), with optional SLO lines (TTFT, TPOT, E2E, ms).
pub fn cdf_figure(title: &str, runs: &[(String, &[RequestRecord], f64)], slo: [Option<f64>; 3]) -> Figure {
    type Metric = fn(&RequestRecord) -> f64;
    let metrics: [(&str, Metric); 3] = [
        ("Time to first token", RequestRecord::ttft),
        ("Time per output token", RequestRecord::tpot),
        ("End-to-end latency", RequestRecord::e2e),
    ];
    let panels = metrics
        .iter()
        .zip(slo)
        .map(|(&(name, f), slo)| XyChart {
            title: format!("CDF of {name}"),
            x_label: format!("{name} (ms)"),
            y_label: "fraction of requests".into(),
            series: runs
                .iter()
                .enumerate()
                .map(|(k, (label, recs, warmup))| {
                    let v = recs
                        .iter()
                        .filter(|r| r.status == Status::Completed && r.arrival >= *warmup)
                        .map(|r| f(r) * 1e3)
                        .collect();
                    Series {
                        name: label.clone(),
                        points: cdf(v, 400),
                        color: PALETTE[k % 10],
                        line: true,
                        markers: false,
                        bold: false,
                    }
                })
                .collect(),
            vlines: slo.map(|s| RefLine { at: s, label: format!(" SLO {s} ms") }).into_iter().collect(),
            legend: plotters::chart::SeriesLabelPosition::LowerRight,
            ..Default::default()
        })
        .collect();
    Figure::Panels { title: title.into(), rows: 1, cols: 3, panels }
}

/// Waiting and running requests, batch size, KV occupancy and completion
/// rate over simulated time.
pub fn timeseries_figure(title: &str, samples: &[TimeSample], warmup: f64) -> Figure {
    let pts = |f: &dyn Fn(&TimeSample) -> f64| samples.iter().map(|s| (s.t, f(s))).collect::<Vec<_>>();
    let mut rate = Vec::new();
    for w in samples.windows(2) {
        let dt = w[1].t - w[0].t;
        if dt > 0.0 {
            rate.push((w[1].t, (w[1].completed - w[0].completed) as f64 / dt));
        }
    }
    // Smooth the completion rate over ~2% of the run.
    let k = (rate.len() / 50).max(1);
    let smooth: Vec<(f64, f64)> =
        rate.windows(k).map(|w| (w[w.len() - 1].0, w.iter().map(|p| p.1).sum::<f64>() / w.len() as f64)).collect();
    let warm = if warmup > 0.0 { vec![RefLine { at: warmup, label: " end of warm-up".into() }] } else { vec![] };
    let panels = vec![
        XyChart {
            title: "Requests in the system".into(),
            x_label: "simulated time (s)".into(),
            y_label: "requests".into(),
            series: vec![
                line("waiting", pts(&|s| s.waiting as f64), 3),
                line("running", pts(&|s| s.running as f64), 0),
            ],
            vlines: warm.clone(),
            ..Default::default()
        },
        XyChart {
            title: "Batch size".into(),
            x_label: "simulated time (s)".into(),
            y_label: "sequences per step".into(),
            series: vec![line("", pts(&|s| s.batch as f64), 4)],
            vlines: warm.clone(),
            ..Default::default()
        },
        XyChart {
            title: "KV cache occupancy".into(),
            x_label: "simulated time (s)".into(),
            y_label: "blocks in use (%)".into(),
            series: vec![line("", pts(&|s| s.kv_used * 100.0), 2)],
            vlines: warm.clone(),
            ..Default::default()
        },
        XyChart {
            title: "Completions".into(),
            x_label: "simulated time (s)".into(),
            y_label: "requests per second".into(),
            series: vec![line("", smooth, 1)],
            vlines: warm,
            ..Default::default()
        },
    ];
    Figure::Panels { title: title.into(), rows: 2, cols: 2, panels }
}

/// Timeline of the first requests: queued, prefill chunks, decode,
/// preempted; a tick at the first token. Times in ms.
pub fn gantt_figure(title: &str, records: &[RequestRecord], spans: &[Span], n: usize) -> Figure {
    let mut rows: Vec<GanttRow> = records
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, r)| {
            let mut segments = Vec::new();
            if r.first_scheduled.is_finite() {
                segments.push((r.arrival * 1e3, r.first_scheduled * 1e3, 0u8));
            }
            GanttRow {
                label: format!("#{i} ({}+{})", r.prompt, r.output),
                segments,
                first_token: r.first_token.is_finite().then_some(r.first_token * 1e3),
            }
        })
        .collect();
    for sp in spans {
        if let Some(row) = rows.get_mut(sp.req as usize) {
            let kind = match sp.kind {
                SpanKind::Prefill => 1,
                SpanKind::Decode => 2,
                SpanKind::Preempted => 3,
            };
            row.segments.push((sp.start * 1e3, sp.end * 1e3, kind));
        }
    }
    Figure::Gantt { title: title.into(), x_label: "simulated time (ms)".into(), rows }
}

/// A plain line series named `name` in palette colour `k`.
fn line(name: &str, points: Vec<(f64, f64)>, k: usize) -> Series {
    Series { name: name.into(), points, color: PALETTE[k], line: true, markers: false, bold: false }
}

/// The fleet over the run: replicas serving and billed as steps over time,
/// and the SLO attainment of each arrival window (with the fleet frozen at
/// its initial size beside it, when the run has a scaling policy).
pub fn fleet_figure(title: &str, f: &crate::metrics::fleet::FleetSummary, end: f64) -> Figure {
    let steps = |v: &dyn Fn(&crate::fleet::FleetSample) -> u32| {
        let mut pts = Vec::new();
        for (k, s) in f.replicas_over_time.iter().enumerate() {
            let next = f.replicas_over_time.get(k + 1).map_or(end, |n| n.t);
            pts.push((s.t, v(s) as f64));
            pts.push((next, v(s) as f64));
        }
        pts
    };
    let mid = |w: &crate::metrics::fleet::SloWindow| (w.t_start + w.t_end) / 2.0;
    let mut slo = vec![line(
        "this fleet",
        f.slo_over_time.iter().filter_map(|w| w.attainment.map(|a| (mid(w), a * 100.0))).collect(),
        0,
    )];
    if f.rescued_requests.is_some() {
        let frozen = f
            .slo_over_time
            .iter()
            .filter(|w| w.requests > 0)
            .filter_map(|w| w.slo_met_frozen.map(|m| (mid(w), m as f64 / w.requests as f64 * 100.0)))
            .collect();
        let n = f.initial_replicas;
        slo.push(line(&format!("frozen at {n} replica{}", if n == 1 { "" } else { "s" }), frozen, 3));
    }
    let panels = vec![
        XyChart {
            title: "Replicas".into(),
            x_label: "simulated time (s)".into(),
            y_label: "replicas".into(),
            series: vec![
                line("serving", steps(&|s| s.ready), 0),
                line("billed", steps(&|s| s.ready + s.starting + s.draining + s.failed + s.warm), 1),
            ],
            ..Default::default()
        },
        XyChart {
            title: "SLO attainment by arrival time".into(),
            x_label: "simulated time (s)".into(),
            y_label: "requests meeting the SLO (%)".into(),
            series: slo,
            ..Default::default()
        },
    ];
    Figure::Panels { title: title.into(), rows: 1, cols: 2, panels }
}
