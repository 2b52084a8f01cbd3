//! An explanation in words (terminal), in HTML (report.html's "Reading it
//! backwards") and as a chart (the parts of the tail against the median).

use super::{Cohort, Explanation, Metric, fmt_ms};
use crate::metrics::Part;
use crate::plot::{Figure, PALETTE};
use plotters::style::RGBColor;

/// Colour of each part in the chart: waits in greys and warm tones, own
/// compute in blue, interference and stalls in reds.
fn color(p: Part) -> RGBColor {
    match p {
        Part::Preprocess => RGBColor(190, 190, 190),
        Part::CentralQueue => RGBColor(150, 150, 150),
        Part::WaitStep => RGBColor(220, 220, 170),
        Part::WaitBatchFull => PALETTE[1],
        Part::WaitBudget => PALETTE[8],
        Part::WaitPrefills => PALETTE[5],
        Part::WaitKv => PALETTE[4],
        Part::WaitBatchForming => PALETTE[6],
        Part::Preempted => RGBColor(120, 40, 120),
        Part::Transfer => PALETTE[9],
        Part::Prefill => PALETTE[0],
        Part::Interference => PALETTE[3],
        Part::DecodeCompute => PALETTE[2],
        Part::DecodeStall => RGBColor(240, 150, 150),
        Part::DecodePreempted => RGBColor(90, 20, 90),
        Part::DecodeSwap => PALETTE[7],
    }
}

/// The parts of a cohort with their share, largest first, down to 2% of it.
fn breakdown(parts: &[f64]) -> Vec<(Part, f64, f64)> {
    let total: f64 = parts.iter().filter(|x| **x > 0.0).sum();
    let mut v: Vec<(Part, f64, f64)> = Part::ALL
        .iter()
        .zip(parts)
        .filter(|(_, x)| **x > 0.0 && **x >= 0.02 * total)
        .map(|(p, &x)| (*p, x, x / total))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

fn cohort_title(c: &Cohort) -> String {
    let unit = if c.metric == Metric::Tpot { " per output token" } else { "" };
    match c.metric {
        Metric::SloMissed if c.median_ms.is_finite() => format!(
            "Requests that missed an SLO ({}; mean E2E {} ms against {} ms for those that met it)",
            c.requests,
            fmt_ms(c.mean_ms),
            fmt_ms(c.median_ms)
        ),
        Metric::SloMissed => {
            format!(
                "Requests that missed an SLO ({}, every measured request; mean E2E {} ms)",
                c.requests,
                fmt_ms(c.mean_ms)
            )
        }
        m => format!(
            "Slowest 1% of {} ({} request{}, {} ≥ {} ms{unit}; mean {} ms against {} ms for the median cohort)",
            m.name(),
            c.requests,
            if c.requests == 1 { "" } else { "s" },
            m.name(),
            fmt_ms(c.threshold_ms),
            fmt_ms(c.mean_ms),
            fmt_ms(c.median_ms)
        ),
    }
}

/// Sentences about one cohort (without its title).
fn cohort_lines(c: &Cohort) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<String> = breakdown(&c.parts_ms)
        .iter()
        .map(|(p, x, s)| format!("{} {} ms ({:.0}%)", p.as_str(), fmt_ms(*x), 100.0 * s))
        .collect();
    out.push(format!("made of: {}", parts.join(", ")));
    let gap = c.mean_ms - c.median_ms;
    if gap.is_finite() && gap > 0.0 && c.excess_ms > 0.0 {
        let against =
            if c.metric == Metric::SloMissed { "the requests that met their SLOs" } else { "the median cohort" };
        let share = c.excess_ms / gap;
        // Other parts can be shorter than the median's, so one part's excess
        // may exceed the whole gap: say so rather than print a share over 100%.
        out.push(if share > 1.0 + 5e-3 {
            format!(
                "what it pays for: {} — {} ms more than {against}, more than the whole {} ms gap (its other parts \
                 are shorter than {against}'s)",
                c.excess.phrase(),
                fmt_ms(c.excess_ms),
                fmt_ms(gap)
            )
        } else {
            format!(
                "what it pays for: {} — {} ms of the {} ms it has over {against} ({:.0}%)",
                c.excess.phrase(),
                fmt_ms(c.excess_ms.min(gap)),
                fmt_ms(gap),
                100.0 * share.min(1.0)
            )
        });
    }
    for e in &c.examples {
        out.push(format!("e.g. {}", e.text));
    }
    for w in &c.windows {
        out.push(format!(
            "clusters in {:.0}–{:.0} s: {:.0}% of this tail arrived then, against {:.0}% of all requests",
            w.start_s,
            w.end_s,
            100.0 * w.tail_share,
            100.0 * w.arrival_share
        ));
    }
    for (r, s) in &c.replica_shares {
        out.push(format!("replica {r} holds {:.0}% of this tail", 100.0 * s));
    }
    out
}

fn signed(x: f64) -> String {
    if x >= 0.0 { format!("+{}", fmt_ms(x)) } else { format!("−{}", fmt_ms(-x)) }
}

/// One what-if in words.
fn what_if_line(w: &super::WhatIf, trace: bool) -> String {
    if let Some(e) = &w.error {
        return format!("--set {}: could not be run: {e}", w.change.join(" --set "));
    }
    let d = &w.difference;
    let (unit, scale) = if w.metric == "slo.attainment" { (" pts", 100.0) } else { (" ms", 1.0) };
    let better = if w.lower_is_better { d.ci_hi < 0.0 } else { d.ci_lo > 0.0 };
    let harm = w.harm.as_deref().map(|h| format!("not confirmed: it does harm elsewhere ({h})"));
    let verdict = if w.confirmed {
        "confirmed".to_string()
    } else if let Some(h) = harm.filter(|_| better) {
        h
    } else if d.ci_lo.is_finite() && (if w.lower_is_better { d.ci_lo > 0.0 } else { d.ci_hi < 0.0 }) {
        "worse".to_string()
    } else {
        "inconclusive (the interval includes no change)".to_string()
    };
    let cost = if w.cost_difference.mean.is_finite() && w.cost_difference.mean.abs() >= 0.0005 {
        format!("; cost per million output tokens {}$", if w.cost_difference.mean >= 0.0 { "+" } else { "−" })
            + &format!("{:.3}", w.cost_difference.mean.abs())
    } else {
        String::new()
    };
    let same = if d.ci_lo != d.ci_hi {
        ""
    } else if trace {
        " (every seed gives the same runs: a replayed trace fixes the arrivals)"
    } else if d.mean == 0.0 {
        " (the same on every seed: the change does not alter these runs)"
    } else {
        " (the same difference on every seed)"
    };
    format!(
        "--set {}: {} {}{unit} → {}{unit}, paired difference {}{unit} [{}, {}] (95%){same}: {verdict}{cost}{} — {}",
        w.change.join(" --set "),
        w.metric,
        fmt_ms(w.baseline.mean * scale),
        fmt_ms(w.variant.mean * scale),
        signed(d.mean * scale),
        signed(d.ci_lo * scale),
        signed(d.ci_hi * scale),
        side_effects(w),
        w.why
    )
}

/// A side-effect metric's name and how its difference reads.
fn side_label(key: &str) -> (&'static str, f64, &'static str) {
    match key {
        "p99_ttft_ms" => ("p99 TTFT", 1.0, " ms"),
        "p99_tpot_ms" => ("p99 TPOT", 1.0, " ms"),
        "p99_e2el_ms" => ("p99 E2E", 1.0, " ms"),
        "slo.attainment" => ("attainment", 100.0, " pts"),
        "slo.ttft_attainment" => ("TTFT attainment", 100.0, " pts"),
        "slo.tpot_attainment" => ("TPOT attainment", 100.0, " pts"),
        "slo.e2e_attainment" => ("E2E attainment", 100.0, " pts"),
        "request_goodput" => ("goodput", 1.0, " req/s"),
        "output_throughput" => ("output", 1.0, " tok/s"),
        _ => ("", 1.0, ""),
    }
}

/// "; side effects: p99 TTFT +34.2 s, …, stable runs 5 → 0 of 5" (the
/// metrics that moved).
fn side_effects(w: &super::WhatIf) -> String {
    let mut v: Vec<String> = w
        .side_effects
        .iter()
        .filter(|(_, d)| d.mean.abs() > 1e-9)
        .map(|(k, d)| {
            let (name, scale, unit) = side_label(k);
            let name = if name.is_empty() { k.as_str() } else { name };
            if unit == " ms" {
                format!("{name} {} ms", signed(d.mean * scale))
            } else {
                format!("{name} {}{:.2}{unit}", if d.mean >= 0.0 { "+" } else { "−" }, (d.mean * scale).abs())
            }
        })
        .collect();
    if w.stable_runs.0 != w.stable_runs.1 {
        v.push(format!("stable runs {} → {}", w.stable_runs.0, w.stable_runs.1));
    }
    if v.is_empty() { String::new() } else { format!("; side effects: {}", v.join(", ")) }
}

/// The explanation as terminal text.
pub fn text(x: &Explanation) -> String {
    let a = &x.analysis;
    let mut o =
        format!("Reading it backwards: {} ({} measured requests; verdict: {})\n", a.scenario, a.measured, a.verdict);
    if let Some(n) = &x.nothing_to_fix {
        o += &format!("Answer: {n}.\n");
    }
    for c in &a.cohorts {
        o += &format!("\n{}\n", cohort_title(c));
        for l in cohort_lines(c) {
            o += &format!("  {l}\n");
        }
    }
    if !x.what_ifs.is_empty() {
        o += &format!(
            "\nWhat would help the {} tail, tested with common random numbers ({} seeds; the same arrivals and lengths with and without each change):\n",
            x.target.name(),
            x.replications.max(2)
        );
        for w in &x.what_ifs {
            o += &format!("  {}\n", what_if_line(w, x.replayed_trace));
        }
        match x.suggestion() {
            Some(w) => o += &format!("Suggested change: --set {}\n", w.change.join(" --set ")),
            None => o += "No change tried is a confirmed improvement: inconclusive.\n",
        }
    }
    o
}

use crate::html::esc;

/// The explanation as an HTML section (`svg`: the chart, inline).
pub fn html(x: &Explanation, svg: &str) -> String {
    let a = &x.analysis;
    let mut o = String::from("<h2 id=\"reading-it-backwards\">Reading it backwards</h2>\n");
    o += "<p>From the slowest results back to what caused them: each request's latency is split into parts that add up exactly to its TTFT and E2E (docs/attribution.md); the tail's parts are set against the median cohort's, and the slowest requests are traced to what their replica was doing.</p>\n";
    if let Some(n) = &x.nothing_to_fix {
        o += &format!("<p><b>Answer:</b> {}.</p>\n", esc(n));
    }
    o += svg;
    for c in &a.cohorts {
        o += &format!("<h3>{}</h3>\n<ul>", esc(&cohort_title(c)));
        for l in cohort_lines(c) {
            o += &format!("<li>{}</li>", esc(&l));
        }
        o += "</ul>\n";
    }
    if !x.what_ifs.is_empty() {
        o += &format!(
            "<h3>What would help the {} tail, tested</h3>\n<p>Each change was simulated with common random numbers: {} seeds, the same arrivals and lengths with and without it; the difference is paired by seed, with its 95% interval.</p>\n<ul>",
            x.target.name(),
            x.replications.max(2)
        );
        for w in &x.what_ifs {
            o += &format!("<li>{}</li>", esc(&what_if_line(w, x.replayed_trace)));
        }
        o += "</ul>\n";
        o += &match x.suggestion() {
            Some(w) => {
                format!("<p><b>Suggested change:</b> <code>--set {}</code></p>\n", esc(&w.change.join(" --set ")))
            }
            None => "<p><b>No change tried is a confirmed improvement</b>: inconclusive.</p>\n".to_string(),
        };
    }
    o
}

/// The chart: for each tail, its mean parts against the median cohort's
/// (one panel per tail, each on its own scale).
pub fn figure(x: &Explanation) -> Figure {
    let panels = x
        .analysis
        .cohorts
        .iter()
        .map(|c| {
            let (tail, typical, unit) = match c.metric {
                Metric::SloMissed => ("missed an SLO".to_string(), "met their SLOs".to_string(), "E2E"),
                Metric::Tpot => ("slowest 1%".to_string(), "median cohort".to_string(), "TPOT, per output token"),
                m => ("slowest 1%".to_string(), "median cohort".to_string(), m.name()),
            };
            (
                format!("{}: {} requests", c.metric.name(), c.requests),
                format!("mean {unit} (ms)"),
                vec![(typical, c.median_parts_ms.clone()), (tail, c.parts_ms.clone())],
            )
        })
        .collect();
    Figure::Stacked {
        title: format!("{}: where the tail's time goes", x.analysis.scenario),
        categories: Part::ALL.iter().map(|p| (p.as_str().to_string(), color(*p))).collect(),
        panels,
    }
}
