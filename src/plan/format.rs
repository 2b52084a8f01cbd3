//! `servesim plan`'s terminal output: the ranked table of configurations,
//! the winner and what it rests on, and the runners-up's differences.

use super::{Candidate, Plan, Verdict};
use std::fmt::Write;

/// Width of the terminal `plan` writes for.
const COLS: usize = 80;
/// Ranked configurations shown without `--details`.
const TOP: usize = 10;

/// `text` broken into lines of at most `COLS` characters (at spaces).
fn wrap(text: &str) -> String {
    wrap_to(text, COLS)
}

/// `text` broken into lines of at most `width` characters (at spaces).
fn wrap_to(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The swept keys other than GPU, tp and dtype (a plan's engine knobs).
fn knob_keys(p: &Plan) -> Vec<String> {
    const FIXED: [&str; 3] = ["hardware.gpu", "hardware.tp", "model.dtype"];
    let mut keys: Vec<String> = Vec::new();
    for c in &p.candidates {
        for (k, _) in &c.config {
            if !FIXED.contains(&k.as_str()) && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}

fn value<'a>(c: &'a Candidate, key: &str) -> &'a str {
    c.config.iter().find(|x| x.0 == key).map_or("", |x| x.1.as_str())
}

/// "p99 TPOT 10%": the binding objective and its headroom.
fn binding(v: &Verdict) -> String {
    format!("{} {:.0}%", v.binding, v.headroom * 100.0)
}

/// What a runner-up changes relative to the winner, and what it costs more.
fn difference(w: &Candidate, r: &Candidate) -> String {
    let mut diff: Vec<String> = Vec::new();
    for (k, v) in &r.config {
        let wv = value(w, k);
        if wv != v {
            diff.push(format!("{} {v} (winner {wv})", k.rsplit('.').next().unwrap_or(k)));
        }
    }
    if r.replicas != w.replicas {
        diff.push(format!("{} replicas (winner {})", r.replicas.unwrap_or(0), w.replicas.unwrap_or(0)));
    }
    let (rc, wc) = (r.usd_per_hour.unwrap_or(f64::NAN), w.usd_per_hour.unwrap_or(f64::NAN));
    let cost = if (rc - wc).abs() < 0.005 {
        format!("same cost (${rc:.2}/hour)")
    } else {
        format!("+${:.2}/hour (+{:.0}%)", rc - wc, (rc / wc - 1.0) * 100.0)
    };
    let tok = match (r.usd_per_million_output_tokens, w.usd_per_million_output_tokens) {
        (Some(a), Some(b)) => format!(", ${a:.3} vs ${b:.3} per 1M output tokens"),
        _ => String::new(),
    };
    let what = if diff.is_empty() { "the same configuration".to_string() } else { diff.join(", ") };
    let room = r
        .verdict
        .as_ref()
        .map_or(String::new(), |v| format!("; binding {}, {:.0}% headroom", v.binding, v.headroom * 100.0));
    format!("{what}: {cost}{tok}{room}")
}

/// The plan as a ranked table that fits an 80-column terminal, with the
/// difference of each runner-up from the winner; `details` adds every
/// candidate's full configuration and the reason each failed one failed.
pub fn format_plan(p: &Plan, scenario: &str, details: bool) -> String {
    let mut o = String::new();
    o += &wrap(&format!("plan for {scenario}: cheapest configurations carrying {} req/s within the SLOs", p.rate));
    let ok = format_ranked(&mut o, p, details);
    format_failed(&mut o, p, details);
    let Some(w) = ok.first() else {
        o += &wrap(
            "\nno configuration in the search space meets the SLOs at this load: widen [plan] (more GPUs types, \
             tp, max_replicas) or relax [slo].",
        );
        return o;
    };
    format_winner(&mut o, p, w);
    for (i, r) in ok.iter().enumerate().skip(1).take(3) {
        o += &wrap(&format!("runner-up #{}: {}", i + 1, difference(w, r)));
    }
    format_failure_headroom(&mut o, p, w);
    format_fleet_choices(&mut o, p);
    if let Some(warn) = &p.precision_warning {
        o += &wrap(&format!("warning: {warn}"));
    }
    o
}

/// The last part of a configuration key (`engine.max_num_seqs` → `max_num_seqs`).
fn short(k: &str) -> String {
    k.rsplit('.').next().unwrap_or(k).to_string()
}

/// The ranked table of the candidates that carry the load (the first
/// [`TOP`] without `details`); returns them, cheapest first.
fn format_ranked<'a>(o: &mut String, p: &'a Plan, details: bool) -> Vec<&'a Candidate> {
    let knobs = knob_keys(p);
    if !knobs.is_empty() {
        let names: Vec<String> = knobs.iter().map(|k| short(k)).collect();
        let _ = writeln!(o, "config = {}", names.join(" / "));
    }
    let _ = writeln!(
        o,
        "{:>4}  {:<11} {:>2} {:<5} {:>4} {:>4} {:>8} {:>8}  {:<13} config",
        "rank", "GPU", "tp", "dtype", "repl", "GPUs", "$/hour", "$/1M tok", "binding"
    );
    let ok: Vec<&Candidate> = p.candidates.iter().filter(|c| c.replicas.is_some() && c.verdict.is_some()).collect();
    let shown = if details { ok.len() } else { ok.len().min(TOP) };
    for (i, c) in ok.iter().enumerate().take(shown) {
        let cfg: Vec<&str> = knobs.iter().map(|k| value(c, k)).collect();
        let line = format!(
            "{:>4}  {:<11} {:>2} {:<5} {:>4} {:>4} {:>8.2} {:>8.3}  {:<13} {}",
            i + 1,
            c.gpu,
            c.tp,
            value(c, "model.dtype"),
            c.replicas.unwrap_or(0),
            c.gpus.unwrap_or(0),
            c.usd_per_hour.unwrap_or(f64::NAN),
            c.usd_per_million_output_tokens.unwrap_or(f64::NAN),
            c.verdict.as_ref().map(binding).unwrap_or_default(),
            cfg.join(" / ")
        );
        let mut line: String = line.trim_end().to_string();
        if line.chars().count() > COLS {
            line = line.chars().take(COLS - 1).collect::<String>() + "…";
        }
        let _ = writeln!(o, "{line}");
    }
    if shown < ok.len() {
        let _ = writeln!(o, "   … {} more that carry the load (--details lists them)", ok.len() - shown);
    }
    ok
}

/// The candidates that cannot carry the load, counted (and, with `details`, each with its reason).
fn format_failed(o: &mut String, p: &Plan, details: bool) {
    let failed: Vec<&Candidate> = p.candidates.iter().filter(|c| c.replicas.is_none()).collect();
    if !failed.is_empty() {
        let fit = failed.iter().filter(|c| !c.note.starts_with("does not meet")).count();
        *o += &wrap(&format!(
            "{} configuration(s) cannot carry the load: {} do not fit or are refused, {} miss the SLOs at the \
             replica limit{}",
            failed.len(),
            fit,
            failed.len() - fit,
            if details { ":" } else { " (--details says why)." }
        ));
        if details {
            for c in &failed {
                let cfg: Vec<String> = c.config.iter().map(|(k, v)| format!("{}={v}", short(k))).collect();
                *o += &wrap_to(&format!("  - {}", cfg.join(" ")), COLS);
                for l in wrap_to(&c.note, COLS - 6).lines() {
                    let _ = writeln!(o, "      {l}");
                }
            }
        }
    }
}

/// The winner, its check, the model's error and what one replica fewer does.
fn format_winner(o: &mut String, p: &Plan, w: &Candidate) {
    let v = w.verdict.as_ref().expect("a ranked candidate has a verdict");
    o.push('\n');
    *o += &wrap(&format!(
        "winner: {} replica(s) of {} × {} (tp {}) = {} GPUs at ${:.2}/hour, ${:.3} per million output tokens. \
         The binding objective is {}: {:.0}% headroom at this size.",
        w.replicas.unwrap_or(0),
        w.gpus.unwrap_or(0) / w.replicas.unwrap_or(1).max(1),
        w.gpu,
        w.tp,
        w.gpus.unwrap_or(0),
        w.usd_per_hour.unwrap_or(f64::NAN),
        w.usd_per_million_output_tokens.unwrap_or(f64::NAN),
        v.binding,
        v.headroom * 100.0
    ));
    if let Some(c) = &p.check {
        *o += &wrap(&c.describe(w.replicas.unwrap_or(0), p.rate));
    }
    *o += &wrap(&format!(
        "The simulation is exact for the model; the {}. A headroom smaller than that error is within the \
         model's uncertainty.",
        w.model_error.describe()
    ));
    if w.model_error.band.is_finite() && w.model_error.band > 0.0 {
        *o += &wrap(&match p.model_error_replicas {
            Some(k) if Some(k) == w.replicas => format!(
                "With every step {:.0}% slower (that error), it still meets the SLOs.",
                w.model_error.band * 100.0
            ),
            Some(k) => format!(
                "With every step {:.0}% slower (that error), it needs {k} replicas.",
                w.model_error.band * 100.0
            ),
            None => format!(
                "With every step {:.0}% slower (that error), even twice its replicas miss the SLOs.",
                w.model_error.band * 100.0
            ),
        });
    }
    *o += &wrap(&match &w.one_fewer {
        Some(f) => format!("With one replica fewer it fails: {}.", f.reason),
        None => "It is already the smallest deployment of this configuration.".to_string(),
    });
}

/// N+1: whether the winner holds the SLOs through a replica failure.
fn format_failure_headroom(o: &mut String, p: &Plan, w: &Candidate) {
    if let Some(h) = &p.failure_headroom {
        *o += &wrap(&match h.replicas_needed {
            Some(k) if k == w.replicas.unwrap_or(0) => format!(
                "N+1: it holds the SLOs through a replica failure at {:.0} s ({:.0} s to repair, requests retried).",
                h.at_s, h.repair_s
            ),
            Some(k) => format!(
                "N+1: a replica failure at {:.0} s ({:.0} s to repair, requests retried) breaks the SLOs ({}); {k} \
                 replicas hold them through it.",
                h.at_s, h.repair_s, h.at_winner.reason
            ),
            None => format!(
                "N+1: a replica failure at {:.0} s ({:.0} s to repair) breaks the SLOs ({}) even with two replicas more.",
                h.at_s, h.repair_s, h.at_winner.reason
            ),
        });
    }
}

/// The winner's fleet choices, cheapest that meets the SLOs first (nothing without a policy).
fn format_fleet_choices(o: &mut String, p: &Plan) {
    if !p.fleet_choices.is_empty() {
        *o += "\nfleet choices for the winner over the run (cheapest that meets the SLOs first):\n";
        let _ = writeln!(o, "  {:<16} {:>7} {:>11} {:>9}  verdict", "policy", "min–max", "mean repl.", "$/hour");
        for c in &p.fleet_choices {
            let v = if c.verdict.meets { format!("meets ({})", binding(&c.verdict)) } else { c.verdict.reason.clone() };
            let line = format!(
                "  {:<16} {:>7} {:>11.2} {:>9.2}  {v}",
                c.policy,
                format!("{}–{}", c.min_replicas, c.max_replicas),
                c.mean_billed_replicas,
                c.usd_per_hour
            );
            let _ = writeln!(o, "{}", line.chars().take(COLS).collect::<String>());
        }
        if let Some(best) = p.fleet_choices.first().filter(|c| c.verdict.meets) {
            *o += &wrap(&format!(
                "cheapest that holds the SLOs: {} {}–{} replicas at ${:.2}/hour on average.",
                best.policy, best.min_replicas, best.max_replicas, best.usd_per_hour
            ));
        }
    }
}
