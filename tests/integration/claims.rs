//! Every number a shipped scenario's header states is checked here: the
//! header must contain the quoted text, and a run (with the `--set`
//! overrides the header names) must give the number within the header's
//! rounding. A header that drifts from what servesim computes fails. (The
//! quickstart said "30 req/s only grows tails" about a run that is overloaded.)

use serde_json::Value;
use servesim::{Catalog, config::load_scenario};
use std::path::Path;

/// What a claim asserts about a run.
enum Is {
    /// The value at this path, within `rel` of `want` (relative).
    About(&'static [&'static str], f64, f64),
    /// The stability verdict.
    Verdict(&'static str),
}
use Is::*;

/// One claim: the scenario, its overrides, the text its header must hold,
/// and what the run must show.
struct Claim {
    scenario: &'static str,
    sets: &'static [&'static str],
    quote: &'static str,
    is: &'static [Is],
}

const P99_TTFT: &[&str] = &["p99_ttft_ms"];
const P99_ITL: &[&str] = &["p99_itl_ms"];
const SLO: &[&str] = &["slo", "attainment"];

fn header(scenario: &str) -> String {
    let text = std::fs::read_to_string(root().join("scenarios").join(format!("{scenario}.toml"))).unwrap();
    // The comment block before the first key, joined into one line.
    text.lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The run's summary; with a leading "baseline" in `sets`, its [baseline]'s.
fn summary(scenario: &str, sets: &[&str]) -> Value {
    let baseline = sets.first() == Some(&"baseline");
    let sets: Vec<String> = sets.iter().filter(|s| **s != "baseline").map(|s| s.to_string()).collect();
    let loaded = load_scenario(&root().join("scenarios").join(format!("{scenario}.toml")), &sets).unwrap();
    let mut s = loaded.scenario.clone();
    if baseline {
        let b = s.baseline.clone().expect("the scenario has a [baseline]");
        let over: Vec<(String, toml::Value)> = b.into_iter().collect();
        s = loaded.derive(&over, "baseline").unwrap();
    }
    let setup = servesim::resolve(&s, &Catalog::builtin().unwrap()).unwrap();
    serde_json::to_value(servesim::run_setup(&setup, s.seed).summary).unwrap()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| &v[*k])
}

fn check(claims: &[Claim]) {
    let mut wrong = Vec::new();
    for c in claims {
        let h = header(c.scenario);
        assert!(h.contains(c.quote), "{}: the header no longer says {:?}", c.scenario, c.quote);
        let s = summary(c.scenario, c.sets);
        for is in c.is {
            match is {
                About(path, want, rel) => {
                    let got = at(&s, path).as_f64().unwrap_or(f64::NAN);
                    let close = (got - want).abs() <= rel * want.abs(); // false for NaN
                    if !close {
                        wrong.push(format!("{} {:?} {:?}: {got} (header: {want})", c.scenario, c.sets, path));
                    }
                }
                Verdict(v) => {
                    let got = at(&s, &["stability", "verdict"]).as_str().unwrap_or("?");
                    if got != *v {
                        wrong.push(format!("{} {:?}: verdict {got} (header: {v})", c.scenario, c.sets));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "scenario headers disagree with the runs:\n{}", wrong.join("\n"));
}

#[test]
fn quickstart() {
    check(&[
        Claim {
            scenario: "quickstart",
            sets: &[],
            quote: "p99 TTFT ≈ 0.19 s",
            is: &[About(P99_TTFT, 190.0, 0.03), Verdict("stable")],
        },
        Claim {
            scenario: "quickstart",
            sets: &["workload.rate=20"],
            quote: "`--set workload.rate=20` to see the TTFT tail double as the GPU fills up (p99 ≈ 0.40 s, still stable)",
            is: &[About(P99_TTFT, 400.0, 0.03), Verdict("stable")],
        },
        Claim {
            scenario: "quickstart",
            sets: &["workload.rate=30"],
            quote: "`--set workload.rate=30` to see overload detected",
            is: &[Verdict("overloaded")],
        },
    ]);
}

#[test]
fn bursty_on_off() {
    check(&[
        Claim {
            scenario: "bursty-on-off",
            sets: &[],
            quote: "p99 TTFT ≈ 9.9 s against 0.2 s for Poisson, and SLO attainment 61%",
            is: &[About(P99_TTFT, 9900.0, 0.01), About(SLO, 0.61, 0.01)],
        },
        Claim {
            scenario: "bursty-on-off",
            sets: &["workload.on_off={on_rate=25.0,off_rate=9.0,on_mean_s=10.0,off_mean_s=30.0}"],
            quote: "(p99 TTFT ≈ 0.7 s)",
            is: &[About(P99_TTFT, 700.0, 0.08)],
        },
    ]);
}

#[test]
fn chat() {
    check(&[
        Claim {
            scenario: "chat",
            sets: &[],
            quote: "(p99 TTFT ≈ 0.41 s overall)",
            is: &[About(P99_TTFT, 410.0, 0.02), About(P99_ITL, 150.0, 0.04)],
        },
        Claim {
            scenario: "chat",
            sets: &["workload.rate=9"],
            quote: "`--set workload.rate=9` overloads",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "chat",
            sets: &["engine.max_num_batched_tokens=2048"],
            quote: "cuts p99 ITL from ~150 ms to ~56 ms",
            is: &[About(P99_ITL, 56.0, 0.02)],
        },
    ]);
}

#[test]
fn code_completion() {
    check(&[
        Claim {
            scenario: "code-completion",
            sets: &[],
            quote: "p99 TTFT ≈ 7.4 s and only ~64% of requests",
            is: &[About(P99_TTFT, 7400.0, 0.01), About(SLO, 0.64, 0.02)],
        },
        Claim {
            scenario: "code-completion",
            sets: &["hardware.replicas=4"],
            quote: "`--set hardware.replicas=4` brings p99 TTFT to ~0.17 s",
            is: &[About(P99_TTFT, 170.0, 0.04)],
        },
    ]);
}

#[test]
fn conversation() {
    check(&[
        Claim {
            scenario: "conversation",
            sets: &[],
            quote: "p99 TTFT ≈ 1.1 s overall",
            is: &[About(P99_TTFT, 1100.0, 0.05)],
        },
        Claim {
            scenario: "conversation",
            sets: &["workload.trace.start_s=1500", "workload.trace.end_s=2100"],
            quote: "~1.7 s inside it",
            is: &[About(P99_TTFT, 1700.0, 0.04)],
        },
        Claim {
            scenario: "conversation",
            sets: &["hardware.replicas=2"],
            quote: "brings p99 TTFT to ~0.38 s and every request within SLO",
            is: &[About(P99_TTFT, 380.0, 0.02), About(SLO, 1.0, 0.0)],
        },
    ]);
}

#[test]
fn embeddings() {
    const QUERY_P50: &[&str] = &["classes", "query", "p50_ttr_ms"];
    const QUERY_P99: &[&str] = &["classes", "query", "p99_ttr_ms"];
    check(&[
        Claim {
            scenario: "embeddings",
            sets: &[],
            quote: "~60 items/s, query TTR p50 ≈ 42 ms, p99 ≈ 167 ms (93% of queries within SLO)",
            is: &[
                About(&["request_throughput"], 60.0, 0.02),
                About(QUERY_P50, 42.0, 0.02),
                About(QUERY_P99, 167.0, 0.01),
                About(&["classes", "query", "slo", "attainment"], 0.93, 0.01),
            ],
        },
        Claim {
            scenario: "embeddings",
            sets: &["hardware.gpu=h100-sxm"],
            quote: "`--set hardware.gpu=h100-sxm`: p99 ≈ 18 ms",
            is: &[About(QUERY_P99, 18.0, 0.03)],
        },
        Claim {
            scenario: "embeddings",
            sets: &["hardware.gpu=l4"],
            quote: "`--set hardware.gpu=l4`: overloaded",
            is: &[Verdict("overloaded")],
        },
    ]);
}

#[test]
fn long_context_and_rag() {
    check(&[
        Claim {
            scenario: "mooncake-long-context",
            sets: &[],
            quote: "p99 ≈ 4.9 s",
            is: &[About(P99_TTFT, 4900.0, 0.02)],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["hardware.tp=1", "hardware.replicas=4"],
            quote: "`--set hardware.tp=1 --set hardware.replicas=4` gives p99 TTFT ≈ 7.8 s",
            is: &[About(P99_TTFT, 7800.0, 0.01)],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["hardware.replicas=1"],
            quote: "`--set hardware.replicas=1` (two GPUs) is overloaded",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["engine.prefix_caching=true"],
            quote: "(hit rate 6.6%, median TTFT 580 → 538 ms",
            is: &[About(&["kv_cache", "prefix_hit_rate"], 0.066, 0.01), About(&["median_ttft_ms"], 538.0, 0.002)],
        },
        Claim { scenario: "rag", sets: &[], quote: "(p99 ≈ 0.47 s overall)", is: &[About(P99_TTFT, 470.0, 0.02)] },
    ]);
}

#[test]
fn w1_and_capacity_70b() {
    check(&[
        Claim {
            scenario: "w1-steady-state",
            sets: &["workload.rate=22"],
            quote: "`--set workload.rate=22` (stable)",
            is: &[Verdict("stable")],
        },
        Claim {
            scenario: "w1-steady-state",
            sets: &["workload.rate=24.5"],
            quote: "`--set workload.rate=24.5` (2% over capacity: overloaded)",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "w1-steady-state",
            sets: &["workload.rate=24"],
            quote: "`--set workload.rate=24` (0.25% over: inconclusive",
            is: &[Verdict("inconclusive")],
        },
        Claim {
            scenario: "capacity-70b",
            sets: &[],
            quote: "two replicas sit behind a least-outstanding-requests router",
            is: &[Verdict("stable")],
        },
        Claim {
            scenario: "capacity-70b",
            sets: &["model.dtype=\"bf16\""],
            quote: "the run is overloaded",
            is: &[Verdict("overloaded")],
        },
    ]);
}

#[test]
fn what_ifs() {
    const HIT: &[&str] = &["kv_cache", "prefix_hit_rate"];
    check(&[
        Claim {
            scenario: "what-if-prefix-cache",
            sets: &[],
            quote: "91.6% with prefix-aware routing, p99 TTFT 129 against 85 ms (195 ms without a cache)",
            is: &[About(HIT, 0.916, 0.002), About(P99_TTFT, 85.0, 0.01)],
        },
        Claim {
            scenario: "what-if-prefix-cache",
            sets: &["hardware.router=\"round-robin\""],
            quote: "Hit rate 61.5% with round robin",
            is: &[About(HIT, 0.615, 0.002), About(P99_TTFT, 129.0, 0.01)],
        },
        Claim {
            scenario: "what-if-prefix-cache",
            sets: &["baseline"],
            quote: "(195 ms without a cache)",
            is: &[About(P99_TTFT, 195.0, 0.01)],
        },
        Claim {
            scenario: "what-if-router",
            sets: &[],
            quote: "p99 TTFT 248 ms against 384 ms for round robin, SLO attainment 99.9% against 98.3%",
            is: &[About(P99_TTFT, 248.0, 0.005), About(SLO, 0.999, 0.0006)],
        },
        Claim {
            scenario: "what-if-router",
            sets: &["baseline"],
            quote: "384 ms for round robin",
            is: &[About(P99_TTFT, 384.0, 0.005), About(SLO, 0.983, 0.0006)],
        },
    ]);
}

#[test]
fn batch_overload_and_classes() {
    const PER_ITEM: &[&str] = &["cost", "usd_per_completed_request"];
    check(&[
        Claim {
            scenario: "offline-summarisation",
            sets: &[],
            quote: "Here: 14.2 req/s ≈ 51,000 papers/hour, $0.059 per 1,000 papers",
            is: &[About(&["request_throughput"], 14.2, 0.004), About(PER_ITEM, 0.059e-3, 0.009)],
        },
        Claim {
            scenario: "offline-summarisation",
            sets: &["hardware.gpu=l40s"],
            quote: "runs 3.9x slower: $0.076 per 1,000 papers",
            is: &[About(&["request_throughput"], 14.16 / 3.9, 0.013), About(PER_ITEM, 0.076e-3, 0.007)],
        },
        Claim {
            scenario: "overload",
            sets: &[],
            quote: "offered 30 req/s when one H100 sustains about 21",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "overload",
            sets: &["workload.rate=18"],
            quote: "Compare with `--set workload.rate=18`",
            is: &[Verdict("stable")],
        },
        Claim {
            scenario: "mixed-classes",
            sets: &[],
            quote: "(96% of chat within SLO overall)",
            is: &[About(&["classes", "chat", "slo", "attainment"], 0.96, 0.006)],
        },
        Claim {
            scenario: "mixed-classes",
            sets: &["hardware.replicas=3"],
            quote: "`--set hardware.replicas=3` meets every SLO",
            is: &[About(SLO, 1.0, 0.0)],
        },
    ]);
}
