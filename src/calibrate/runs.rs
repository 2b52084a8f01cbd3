//! Measured serving runs known by their aggregate statistics (a
//! `vllm bench serve` result without `--save-detailed`, a GuideLLM report, a
//! GenAI-Perf export, a table of result blocks), turned into one
//! [`Problem`]: each run is simulated at its arrival regime with its mean
//! lengths, and each statistic it reports becomes a point.
//!
//! Every format goes through [`problem`]; the arrival and length sections
//! are [`crate::measured::runs`]'s, which `servesim validate` writes for
//! GPUStack's blocks too.

use super::{How, Point, Problem, Sim, Stat};

/// The keys of a scenario table that a measured run replaces: its
/// workload, request count and run length, and the tables of other commands.
pub const RUN_KEYS: [&str; 7] = ["workload", "num_requests", "duration_s", "warmup_s", "sweep", "plan", "baseline"];

/// The scenario `table` (without [`RUN_KEYS`]) running `n` requests of
/// `workload` (the `[workload]` keys but `on_too_long`), as TOML text.
pub fn scenario_text(mut table: toml::Table, n: u64, workload: &str) -> String {
    for k in RUN_KEYS {
        table.remove(k);
    }
    table.insert("num_requests".into(), toml::Value::Integer(n as i64));
    format!("{}\n[workload]\n{workload}on_too_long = \"clip\"\n", toml::to_string(&table).unwrap_or_default())
}

/// One measured run: how to simulate it and what it measured.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its name in labels and messages (empty for a file of one run: the
    /// labels are then the statistics' names alone).
    pub name: String,
    /// The fold group of its points; `None`: one group per quantity
    /// (TTFT, TPOT, ITL, throughput), for a file of one run.
    pub group: Option<String>,
    /// The scenario as TOML text, or why the run cannot be simulated.
    pub scenario: Result<String, String>,
    /// The statistics measured, in ms (times) and tok/s (throughput).
    pub measured: Vec<(Stat, f64)>,
}

/// The quantity a statistic measures: `TTFT`, `TPOT`, `ITL`, `output tok/s`.
fn quantity(stat: Stat) -> &'static str {
    match stat {
        Stat::OutputThroughput => "output tok/s",
        Stat::Ttft(_) => "TTFT",
        Stat::Tpot(_) => "TPOT",
        Stat::Itl(_) => "ITL",
    }
}

/// The calibration problem of measured runs: a simulation per run that can
/// be simulated, a point per statistic with a positive measured value; the
/// others in `skipped` with the reason, `notes` as given.
pub fn problem(runs: Vec<Run>, notes: Vec<String>) -> Problem {
    let mut p = Problem { setups: Vec::new(), sims: Vec::new(), points: Vec::new(), skipped: Vec::new(), notes };
    for run in runs {
        let text = match run.scenario {
            Ok(t) => t,
            Err(why) => {
                p.skipped.push(format!("{}: {why}", run.name));
                continue;
            }
        };
        let name = if run.name.is_empty() { "the run".to_string() } else { run.name.clone() };
        p.sims.push(Sim { name: name.clone(), text });
        let sim = p.sims.len() - 1;
        for (stat, v) in run.measured {
            let label = if run.name.is_empty() { stat.name() } else { format!("{} {}", run.name, stat.name()) };
            if !(v.is_finite() && v > 0.0) {
                p.skipped.push(format!("{label}: the measured value {v} is not a positive number"));
                continue;
            }
            let group = run.group.clone().unwrap_or_else(|| quantity(stat).to_string());
            p.points.push(Point { label, group, measured: v, how: How::Sim { sim, stat } });
        }
    }
    p
}

/// The percentiles a report gives that are fitted: those from the median
/// up (servesim's summaries hold 50, 90, 95, 99 and 99.9 exactly and
/// interpolate between the median and p90; below the median they would be
/// interpolated from the minimum), each once, in ascending order.
pub fn fitted_percentiles(stat: fn(f64) -> Stat, values: impl IntoIterator<Item = (f64, f64)>) -> Vec<(Stat, f64)> {
    let mut v: Vec<(f64, f64)> = values.into_iter().filter(|(p, _)| (50.0..100.0).contains(p)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.dedup_by(|a, b| a.0 == b.0);
    v.into_iter().map(|(p, x)| (stat(p), x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_from_the_median_up_once_each() {
        let got = fitted_percentiles(Stat::Ttft, [(99.0, 9.0), (50.0, 5.0), (10.0, 1.0), (50.0, 5.5), (100.0, 10.0)]);
        assert_eq!(got, vec![(Stat::Ttft(50.0), 5.0), (Stat::Ttft(99.0), 9.0)]);
    }

    #[test]
    fn runs_become_sims_and_points_or_skipped() {
        let runs = vec![
            Run {
                name: "a".into(),
                group: Some("g".into()),
                scenario: Ok("text".into()),
                measured: vec![(Stat::Ttft(50.0), 12.0), (Stat::OutputThroughput, 0.0)],
            },
            Run { name: "b".into(), group: None, scenario: Err("no such model".into()), measured: vec![] },
            Run { name: String::new(), group: None, scenario: Ok("t2".into()), measured: vec![(Stat::Itl(99.0), 3.0)] },
        ];
        let p = problem(runs, vec!["a note".into()]);
        assert_eq!(p.sims.len(), 2);
        let labels: Vec<(&str, &str)> = p.points.iter().map(|q| (q.label.as_str(), q.group.as_str())).collect();
        assert_eq!(labels, [("a TTFT p50", "g"), ("ITL p99", "ITL")]);
        assert!(matches!(p.points[1].how, How::Sim { sim: 1, .. }));
        assert_eq!(p.skipped.len(), 2, "{:?}", p.skipped);
        assert!(p.skipped[0].contains("a output tok/s") && p.skipped[1].starts_with("b: no such model"));
        assert_eq!(p.notes, ["a note"]);
    }
}
