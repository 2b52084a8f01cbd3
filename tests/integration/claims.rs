//! Every number a shipped scenario's header states is checked here: the
//! header must contain the quoted text, and a run (with the `--set`
//! overrides the header names) must give the number within the header's
//! rounding. A header that drifts from what servesim computes fails. (The
//! quickstart said "30 req/s only grows tails" about a run that is overloaded.)

use serde_json::Value;
use servesim::{Catalog, scenario::load_scenario};
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

/// The value at `path` (a number indexes an array).
fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| match (v, k.parse::<usize>()) {
        (Value::Array(_), Ok(i)) => &v[i],
        _ => &v[*k],
    })
}

fn check(claims: &[Claim]) {
    check_against(claims, |c| header(c.scenario), "header")
}

/// The README and the user guide it sends readers to (docs/guide.md).
fn readme_and_guide() -> String {
    ["README.md", "docs/guide.md"].map(|f| std::fs::read_to_string(root().join(f)).unwrap()).join("\n")
}

/// Claims the README (or the user guide) makes about a shipped scenario's runs.
fn check_readme(claims: &[Claim]) {
    let readme = readme_and_guide();
    // Joined into one line, as quotes may span line breaks.
    let text = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    check_against(claims, |_| text.clone(), "README")
}

fn check_against(claims: &[Claim], text: impl Fn(&Claim) -> String, source: &str) {
    let mut wrong = Vec::new();
    for c in claims {
        let h = text(c);
        assert!(h.contains(c.quote), "{}: the {source} no longer says {:?}", c.scenario, c.quote);
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
    assert!(wrong.is_empty(), "the {source} disagrees with the runs:\n{}", wrong.join("\n"));
}

#[test]
fn quickstart() {
    check(&[
        Claim {
            scenario: "quickstart",
            sets: &[],
            quote: "median TTFT ≈ 0.09 s, p99 TTFT ≈ 0.45 s",
            is: &[About(&["median_ttft_ms"], 94.0, 0.03), About(P99_TTFT, 447.0, 0.03), Verdict("stable")],
        },
        Claim {
            scenario: "quickstart",
            sets: &["workload.rate=9"],
            quote: "`--set workload.rate=9` to see the TTFT tail grow as the GPU fills up (p99 ≈ 0.77 s, still stable)",
            is: &[About(P99_TTFT, 767.0, 0.03), Verdict("stable")],
        },
        Claim {
            scenario: "quickstart",
            sets: &["workload.rate=20"],
            quote: "`--set workload.rate=20` to see overload detected",
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
            quote: "p99 TTFT ≈ 12 s against 0.43 s for Poisson, and SLO attainment 35% against 99.3%",
            is: &[About(P99_TTFT, 11915.0, 0.01), About(SLO, 0.346, 0.01)],
        },
        Claim {
            scenario: "bursty-on-off",
            sets: &["baseline"],
            quote: "against 0.43 s for Poisson",
            is: &[About(P99_TTFT, 435.0, 0.02), About(SLO, 0.993, 0.002)],
        },
        Claim {
            scenario: "bursty-on-off",
            sets: &["workload.on_off={on_rate=12.5,off_rate=4.5,on_mean_s=10.0,off_mean_s=30.0}"],
            quote: "(p99 TTFT ≈ 0.62 s)",
            is: &[About(P99_TTFT, 618.0, 0.03)],
        },
    ]);
}

#[test]
fn chat() {
    check(&[
        Claim {
            scenario: "chat",
            sets: &[],
            quote: "(p99 TTFT ≈ 0.84 s overall)",
            is: &[About(P99_TTFT, 842.0, 0.02), About(P99_ITL, 212.0, 0.04)],
        },
        Claim {
            scenario: "chat",
            sets: &["workload.rate=6"],
            quote: "`--set workload.rate=6` overloads",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "chat",
            sets: &["engine.max_num_batched_tokens=2048"],
            quote: "cuts p99 ITL from ~210 ms to ~100 ms",
            is: &[About(P99_ITL, 100.0, 0.02)],
        },
    ]);
}

#[test]
fn code_completion() {
    check(&[
        Claim {
            scenario: "code-completion",
            sets: &[],
            quote: "p99 TTFT ≈ 25 s and only ~20% of requests",
            is: &[About(P99_TTFT, 24900.0, 0.01), About(SLO, 0.1997, 0.02)],
        },
        Claim {
            scenario: "code-completion",
            sets: &["hardware.replicas=4"],
            quote: "`--set hardware.replicas=4` brings p99 TTFT to ~1.4 s and SLO attainment to ~81%",
            is: &[About(P99_TTFT, 1433.0, 0.04), About(SLO, 0.809, 0.02)],
        },
    ]);
}

#[test]
fn conversation() {
    check(&[
        Claim {
            scenario: "conversation",
            sets: &[],
            quote: "p99 TTFT ≈ 1.6 s overall",
            is: &[About(P99_TTFT, 1616.0, 0.02)],
        },
        Claim {
            scenario: "conversation",
            sets: &["workload.trace.start_s=1500", "workload.trace.end_s=2100"],
            quote: "~2.3 s inside it",
            is: &[About(P99_TTFT, 2283.0, 0.04)],
        },
        Claim {
            scenario: "conversation",
            sets: &["hardware.replicas=4"],
            quote: "`--set hardware.replicas=4` brings p99 TTFT to ~1.1 s and 98% of requests within SLO",
            is: &[About(P99_TTFT, 1088.0, 0.02), About(SLO, 0.983, 0.005)],
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
            quote: "~35 items/s, query TTR p50 ≈ 104 ms, p99 ≈ 240 ms (46% of queries within SLO)",
            is: &[
                About(&["request_throughput"], 35.2, 0.02),
                About(QUERY_P50, 104.0, 0.02),
                About(QUERY_P99, 240.0, 0.01),
                About(&["classes", "query", "slo", "attainment"], 0.46, 0.01),
            ],
        },
        Claim {
            scenario: "embeddings",
            sets: &["hardware.gpu=h100-sxm"],
            quote: "`--set hardware.gpu=h100-sxm`: p99 ≈ 176 ms",
            is: &[About(QUERY_P99, 176.0, 0.03)],
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
            quote: "p99 ≈ 6.7 s",
            is: &[About(P99_TTFT, 6678.0, 0.02), About(&["median_ttft_ms"], 852.0, 0.002)],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["hardware.tp=1", "hardware.replicas=6"],
            quote: "`--set hardware.tp=1 --set hardware.replicas=6` gives p99 TTFT ≈ 10 s",
            is: &[About(P99_TTFT, 10050.0, 0.01)],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["hardware.replicas=2"],
            quote: "`--set hardware.replicas=2` (four GPUs) is overloaded",
            is: &[Verdict("overloaded")],
        },
        Claim {
            scenario: "mooncake-long-context",
            sets: &["engine.prefix_caching=true"],
            quote: "(hit rate 7.9%, median TTFT 852 → 773 ms",
            is: &[About(&["kv_cache", "prefix_hit_rate"], 0.0787, 0.01), About(&["median_ttft_ms"], 773.4, 0.002)],
        },
        Claim {
            scenario: "rag",
            sets: &[],
            quote: "(p99 ≈ 0.89 s overall)",
            is: &[About(P99_TTFT, 894.0, 0.02), About(&["kv_cache", "prefix_hit_rate"], 0.20, 0.03)],
        },
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
            sets: &[],
            quote: "the pair is stable, yet only 74% of requests meet the SLO",
            is: &[Verdict("stable"), About(SLO, 0.74, 0.01)],
        },
        Claim {
            scenario: "capacity-70b",
            sets: &["model.dtype=\"bf16\"", "engine.max_model_len=16384"],
            quote: "`--set engine.max_model_len=16384` and it runs, but sequences are preempted and recomputed over and over, and the run is overloaded",
            is: &[Verdict("overloaded"), About(&["utilisation", "preemptions"], 845.0, 0.02)],
        },
        Claim {
            scenario: "capacity-70b",
            sets: &["model.dtype=\"bf16\"", "hardware.tp=4", "hardware.replicas=2"],
            quote: "`--set hardware.tp=4 --set hardware.replicas=2` (8 GPUs, BF16) recovers",
            is: &[Verdict("stable")],
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
            quote: "92.6% with prefix-aware routing, p99 TTFT 290 against 188 ms (590 ms without a cache",
            is: &[About(HIT, 0.926, 0.002), About(P99_TTFT, 188.0, 0.01)],
        },
        Claim {
            scenario: "what-if-prefix-cache",
            sets: &["hardware.router=\"round-robin\""],
            quote: "hit rate 66.7% with round robin",
            is: &[About(HIT, 0.667, 0.002), About(P99_TTFT, 290.0, 0.01)],
        },
        Claim {
            scenario: "what-if-prefix-cache",
            sets: &["baseline"],
            quote: "(590 ms without a cache, where SLO attainment falls to 78%)",
            is: &[About(P99_TTFT, 590.0, 0.01), About(SLO, 0.78, 0.007)],
        },
        Claim {
            scenario: "what-if-router",
            sets: &[],
            quote: "p99 TTFT 581 ms against 768 ms for round robin, SLO attainment 95.9% against 89.6%",
            is: &[About(P99_TTFT, 581.0, 0.005), About(SLO, 0.959, 0.0006)],
        },
        Claim {
            scenario: "what-if-energy",
            sets: &[],
            quote: "two replicas: 0.549 J per output token (526 W per GPU), p99 TTFT 304 ms, median TPOT 9.65 ms",
            is: &[
                About(&["energy", "joules_per_output_token"], 0.549, 0.002),
                About(&["energy", "mean_power_w_per_gpu"], 526.0, 0.002),
                About(P99_TTFT, 304.0, 0.005),
                About(&["median_tpot_ms"], 9.65, 0.002),
            ],
        },
        Claim {
            scenario: "what-if-energy",
            sets: &["baseline"],
            quote: "one replica: 0.278 J (526 W), p99 TTFT 585 ms, median TPOT 16.9 ms",
            is: &[
                About(&["energy", "joules_per_output_token"], 0.278, 0.002),
                About(&["energy", "mean_power_w_per_gpu"], 526.0, 0.002),
                About(P99_TTFT, 585.0, 0.005),
                About(&["median_tpot_ms"], 16.9, 0.003),
            ],
        },
        Claim {
            scenario: "what-if-autoscaling",
            sets: &[],
            quote: "Autoscaled: $232.22 for the day (1.61 replicas billed on average), SLO attainment 99.86%, p99 TTFT 1078 ms",
            is: &[
                About(&["fleet", "usd"], 232.22, 0.0001),
                About(&["fleet", "mean_billed_replicas"], 1.61, 0.003),
                About(SLO, 0.9986, 0.00006),
                About(P99_TTFT, 1078.0, 0.001),
                About(&["fleet", "scale_ups"], 21.0, 0.0),
                About(&["fleet", "scale_downs"], 21.0, 0.0),
            ],
        },
        Claim {
            scenario: "what-if-autoscaling",
            sets: &[],
            quote: "requests arriving from 07:15 to 07:30, meets its SLO 98.4% of the time",
            is: &[
                About(&["fleet", "slo_over_time", "29", "t_start"], 26100.0, 1e-9),
                About(&["fleet", "slo_over_time", "29", "attainment"], 0.984, 0.0006),
            ],
        },
        Claim {
            scenario: "what-if-autoscaling",
            sets: &["baseline"],
            quote: "static: $287.83, 99.92%, 992 ms",
            is: &[
                About(&["cost", "total_usd"], 287.83, 0.0001),
                About(SLO, 0.9992, 0.00006),
                About(P99_TTFT, 992.0, 0.001),
            ],
        },
        Claim {
            scenario: "what-if-autoscaling",
            sets: &["fleet.policy=\"utilisation\"", "fleet.target=0.7"],
            quote: "the fleet goes to two replicas at its first look and stays there ($287.83)",
            is: &[
                About(&["fleet", "usd"], 287.83, 0.0002),
                About(&["fleet", "scale_ups"], 1.0, 0.0),
                About(&["fleet", "scale_downs"], 0.0, 0.0),
            ],
        },
        Claim {
            scenario: "what-if-failure",
            sets: &[],
            quote: "Two replicas: 98.60% SLO attainment for the day (99.92% without the failure), p99 TTFT 4.78 s",
            is: &[
                About(SLO, 0.9860, 0.0006),
                About(P99_TTFT, 4780.0, 0.003),
                About(&["fleet", "failures", "retried_requests"], 14.0, 0.0),
            ],
        },
        Claim {
            scenario: "what-if-failure",
            sets: &[],
            quote: "of the requests arriving from 12:00 to 12:15 only 26.5% meet the SLO",
            is: &[
                About(&["fleet", "slo_over_time", "48", "t_start"], 43200.0, 1e-9),
                About(&["fleet", "slo_over_time", "48", "attainment"], 0.265, 0.002),
            ],
        },
        Claim {
            scenario: "what-if-failure",
            sets: &["fleet.failures=[]"],
            quote: "(99.92% without the failure)",
            is: &[About(SLO, 0.9992, 0.00006)],
        },
        Claim {
            scenario: "what-if-failure",
            sets: &["baseline"],
            quote: "three replicas: 99.95%, p99 TTFT 880 ms, for $431.74 a day instead of $287.83",
            is: &[
                About(SLO, 0.9995, 0.00006),
                About(P99_TTFT, 880.0, 0.002),
                About(&["cost", "total_usd"], 431.74, 0.0001),
            ],
        },
        Claim {
            scenario: "what-if-kv-offload",
            sets: &[],
            quote: "34.2% with both (8.4% in GPU memory, 25.7% loaded from the tiers); median TTFT 1,448 → 1,173 ms, SLO attainment 72.7% → 81.4%",
            is: &[
                About(&["kv_cache", "prefix_hit_rate"], 0.342, 0.0015),
                About(&["kv_cache", "offload", "gpu_hit_rate"], 0.084, 0.006),
                About(&["kv_cache", "offload", "tier_hit_rate"], 0.257, 0.002),
                About(&["median_ttft_ms"], 1173.0, 0.001),
                About(SLO, 0.814, 0.0006),
                About(&["kv_cache", "offload", "store_time_s"], 325.0, 0.002),
            ],
        },
        Claim {
            scenario: "what-if-kv-offload",
            sets: &["baseline"],
            quote: "prefix hit rate 8.4% without tiers",
            is: &[
                About(&["kv_cache", "prefix_hit_rate"], 0.084, 0.006),
                About(&["median_ttft_ms"], 1448.0, 0.001),
                About(SLO, 0.727, 0.0006),
            ],
        },
        Claim {
            scenario: "what-if-kv-offload",
            sets: &["engine.kv_offload_disk_gb=0"],
            quote: "14.0% hits, and the stores eat the gain (median TTFT 1,449 ms, attainment 70.1%)",
            is: &[
                About(&["kv_cache", "prefix_hit_rate"], 0.1404, 0.0025),
                About(&["median_ttft_ms"], 1449.0, 0.001),
                About(SLO, 0.701, 0.0006),
            ],
        },
        Claim {
            scenario: "what-if-kv-offload",
            sets: &["engine.kv_offload_disk_gb=0", "engine.kv_offload_connector=\"vllm\""],
            quote: "copies in the background: 13.8% hits, median TTFT 1,322 ms, attainment 78.9%",
            is: &[
                About(&["kv_cache", "prefix_hit_rate"], 0.138, 0.0025),
                About(&["median_ttft_ms"], 1322.0, 0.001),
                About(SLO, 0.789, 0.0006),
            ],
        },
        Claim {
            scenario: "what-if-lora",
            sets: &[],
            quote: "median TTFT 105 ms, p99 TTFT 4.5 s, SLO attainment 92.2%",
            is: &[
                About(&["median_ttft_ms"], 105.0, 0.02),
                About(P99_TTFT, 4500.0, 0.013),
                About(SLO, 0.922, 0.0006),
                About(&["lora", "time_share"], 0.028, 0.012),
                About(&["median_tpot_ms"], 12.73, 0.001),
                About(&["kv_cache", "blocks_per_replica"], 28111.0, 0.0),
            ],
        },
        Claim {
            scenario: "what-if-lora",
            sets: &["lora.adapters=1"],
            quote: "median TPOT 12.08 ms with one merged adapter",
            is: &[About(&["median_tpot_ms"], 12.08, 0.001), About(&["kv_cache", "blocks_per_replica"], 28431.0, 0.0)],
        },
        Claim {
            scenario: "what-if-lora",
            sets: &["baseline"],
            quote: "1.7% fewer KV blocks): p99 TTFT 419 ms, 99.4%",
            is: &[
                About(P99_TTFT, 419.0, 0.003),
                About(SLO, 0.994, 0.0006),
                About(&["kv_cache", "blocks_per_replica"], 27631.0, 0.0),
            ],
        },
        Claim {
            scenario: "what-if-lora",
            sets: &["lora.router_affinity=false"],
            quote: "over both replicas: 65.4%",
            is: &[About(SLO, 0.654, 0.0008)],
        },
        Claim {
            scenario: "what-if-router",
            sets: &["baseline"],
            quote: "768 ms for round robin",
            is: &[About(P99_TTFT, 768.0, 0.005), About(SLO, 0.896, 0.0006)],
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
            quote: "6.5 req/s ≈ 23,400 papers/hour, $0.128 per 1,000 papers",
            is: &[About(&["request_throughput"], 6.51, 0.004), About(PER_ITEM, 0.128e-3, 0.009)],
        },
        Claim {
            scenario: "offline-summarisation",
            sets: &["hardware.gpu=l40s"],
            quote: "runs 2.3x slower: $0.097 per 1,000 papers",
            is: &[About(&["request_throughput"], 6.51 / 2.275, 0.013), About(PER_ITEM, 0.097e-3, 0.007)],
        },
        Claim {
            scenario: "offline-summarisation",
            sets: &["hardware.gpu=a100-80gb"],
            quote: "runs 2.2x slower: $0.17 per 1,000 papers",
            is: &[About(&["request_throughput"], 6.51 / 2.22, 0.013), About(PER_ITEM, 0.170e-3, 0.007)],
        },
        Claim {
            scenario: "overload",
            sets: &[],
            quote: "offered 20 req/s when one H100 sustains about 10",
            is: &[Verdict("overloaded"), About(&["request_throughput"], 10.47, 0.01)],
        },
        Claim {
            scenario: "overload",
            sets: &["workload.rate=9"],
            quote: "Compare with `--set workload.rate=9`",
            is: &[Verdict("stable")],
        },
        Claim {
            scenario: "mixed-classes",
            sets: &[],
            quote: "(97% of chat within SLO overall)",
            is: &[About(&["classes", "chat", "slo", "attainment"], 0.972, 0.006)],
        },
        Claim {
            scenario: "mixed-classes",
            sets: &["hardware.replicas=3"],
            quote: "`--set hardware.replicas=3` cuts chat TPOT p99 to ~16 ms but not the front end's queue (98.3% of chat within SLO)",
            is: &[
                About(&["classes", "chat", "p99_tpot_ms"], 16.25, 0.03),
                About(&["classes", "chat", "slo", "attainment"], 0.983, 0.003),
            ],
        },
    ]);
}

/// The run's report, every record kept.
fn report(scenario: &str, sets: &[&str]) -> servesim::Report {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = load_scenario(&root().join("scenarios").join(format!("{scenario}.toml")), &sets).unwrap();
    let setup = servesim::resolve(&loaded.scenario, &Catalog::builtin().unwrap()).unwrap();
    servesim::run_setup(&setup, loaded.scenario.seed)
}

/// `servesim sweep` of a shipped scenario: sweep.csv's rows as column → value.
fn sweep(scenario: &str) -> Vec<std::collections::HashMap<String, String>> {
    let dir = tempfile::tempdir().unwrap();
    let file = root().join("scenarios").join(format!("{scenario}.toml"));
    let out = dir.path().join("out");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(["sweep", &file.display().to_string(), "-q", "--out", &out.display().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| head.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

fn num(row: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    row.get(key).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// numpy's linear percentile of `v`.
fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    servesim::metrics::stats::percentile_sorted(&v, p)
}

fn near(got: f64, want: f64, rel: f64, what: &str) {
    assert!((got - want).abs() <= rel * want.abs(), "{what}: {got}, the text says {want}");
}

#[test]
fn closed_loop_concurrency() {
    let h = header("closed-loop-concurrency");
    for q in [
        "32 users give 6.9 req/s at TPOT p50 13.7 ms, 128 give ~9.9 req/s at 43 ms",
        "256 give 10.6 req/s at 84 ms",
        "at 512, TTFT p50 ≈ 22 s and no more requests complete than at 256 (~3,000 in each run); \
         the reported throughput even falls (~9 req/s)",
    ] {
        assert!(h.contains(q), "the header no longer says {q:?}");
    }
    let rows = sweep("closed-loop-concurrency");
    let at = |users: &str| rows.iter().find(|r| r["workload.closed_loop.users"] == users).unwrap();
    near(num(at("32"), "request_throughput"), 6.9, 0.01, "32 users: req/s");
    near(num(at("32"), "median_tpot_ms"), 13.7, 0.01, "32 users: TPOT p50");
    near(num(at("128"), "request_throughput"), 9.9, 0.03, "128 users: req/s");
    near(num(at("128"), "median_tpot_ms"), 43.0, 0.03, "128 users: TPOT p50");
    near(num(at("256"), "request_throughput"), 10.6, 0.01, "256 users: req/s");
    near(num(at("256"), "median_tpot_ms"), 84.0, 0.01, "256 users: TPOT p50");
    near(num(at("512"), "median_ttft_ms"), 22_000.0, 0.05, "512 users: TTFT p50");
    near(num(at("512"), "request_throughput"), 9.0, 0.05, "512 users: req/s");
    // "no more requests complete": 512 users finish as many requests as 256 (~3,000);
    // "mostly latency": 256 carry under 10% more than 128; the reported rate falls at 512.
    near(num(at("256"), "completed"), 3000.0, 0.01, "256 users: completed");
    near(num(at("512"), "completed"), 3000.0, 0.01, "512 users: completed");
    assert!(num(at("256"), "request_throughput") < 1.1 * num(at("128"), "request_throughput"));
    assert!(num(at("512"), "request_throughput") < num(at("256"), "request_throughput"));
}

#[test]
fn diurnal_day() {
    let h = header("diurnal-day");
    for q in [
        "(~200,000 requests",
        "The mean uses 60% of this replica, the 14:00 peak 95%",
        "hourly p99 TTFT rises from ~1.1 s at night to ~3.3 s",
        "peaks at 4.0 req/s: the afternoon queue builds for hours (p99 TTFT ~240 s), yet the verdict stays \"stable\": \
         the peak exceeds capacity by only ~1% of arrivals",
        "which sustains ~3.8 req/s",
    ] {
        assert!(h.contains(q), "the header no longer says {q:?}");
    }
    // Hourly p99 TTFT of completed requests, by hour of arrival.
    let hourly = |rep: &servesim::Report| -> Vec<f64> {
        let mut by_hour = vec![Vec::new(); 24];
        for r in rep.output.records.iter().filter(|r| r.status == servesim::metrics::Status::Completed) {
            by_hour[((r.arrival / 3600.0) as usize).min(23)].push(r.ttft() * 1e3);
        }
        by_hour.into_iter().map(|v| pct(v, 99.0)).collect()
    };
    let day = report("diurnal-day", &[]);
    near(day.summary.num_requests as f64, 200_000.0, 0.01, "requests");
    let p = hourly(&day);
    let (low, high) = (p.iter().copied().fold(f64::INFINITY, f64::min), p.iter().copied().fold(0.0, f64::max));
    near(low, 1100.0, 0.08, "lowest hourly p99 TTFT");
    near(high, 3300.0, 0.03, "highest hourly p99 TTFT");
    assert!(p[2] < 1400.0 && (p[13] > 3000.0 || p[14] > 3000.0), "night and 14:00: {p:?}");
    // The mean (2.3 req/s) and peak (3.6) against the stated capacity (3.8 req/s).
    let cap = 3.8;
    near(2.3 / cap, 0.60, 0.01, "mean load");
    near(3.6 / cap, 0.95, 0.01, "peak load");
    let peak = report("diurnal-day", &["workload.diurnal.amplitude=1.7"]);
    assert_eq!(peak.summary.stability.verdict, "stable", "{}", peak.summary.stability.explanation);
    near(peak.summary.metrics.ttft.dist.percentiles[3], 240_000.0, 0.03, "p99 TTFT at amplitude 1.7");
    let p = hourly(&peak);
    assert!(p.iter().filter(|&&x| x > 10_000.0).count() >= 3, "the queue builds for hours: {p:?}");
    // Arrivals above capacity, over the day: ∫(2.3 + 1.7 sin − 3.8)⁺ ÷ ∫ rate.
    let (mut over, mut all) = (0.0, 0.0);
    for i in 0..86_400 {
        let rate = 2.3 + 1.7 * (2.0 * std::f64::consts::PI * i as f64 / 86_400.0).sin();
        over += (rate - cap).max(0.0);
        all += rate;
    }
    near(over / all, 0.01, 0.15, "arrivals above capacity");
}

#[test]
fn multi_turn_chat() {
    let h = header("multi-turn-chat");
    for q in [
        "91% of all prompt tokens repeat the previous turn",
        "`--set engine.prefix_caching=false` every turn prefills its history again: median TTFT 144 ms at turn 1, 302 ms at turn 12",
        "88% of prompt tokens are found in the cache and the median TTFT stays ~63 ms at every turn after the first",
        "`--set 'workload.sessions.turns={dist=\"uniform\",min=10,max=30}'` overloads the GPU",
    ] {
        assert!(h.contains(q), "the header no longer says {q:?}");
    }
    // Median TTFT of measured completed requests by turn (a session's k-th request).
    let by_turn = |rep: &servesim::Report| -> Vec<f64> {
        let mut seen = std::collections::HashMap::new();
        let mut turns: Vec<Vec<f64>> = vec![Vec::new(); 13];
        for r in &rep.output.records {
            let k = seen.entry(r.session).or_insert(0usize);
            *k += 1;
            if r.status == servesim::metrics::Status::Completed && r.arrival >= rep.setup.scenario.warmup_s && *k <= 12
            {
                turns[*k].push(r.ttft() * 1e3);
            }
        }
        turns.into_iter().map(|v| pct(v, 50.0)).collect()
    };
    let plain = report("multi-turn-chat", &["engine.prefix_caching=false"]);
    let recs = &plain.output.records;
    let shared = recs.iter().map(|r| r.prefix as f64).sum::<f64>() / recs.iter().map(|r| r.prompt as f64).sum::<f64>();
    near(shared, 0.91, 0.01, "prompt tokens repeating the previous turn");
    let t = by_turn(&plain);
    near(t[1], 144.0, 0.03, "median TTFT at turn 1");
    near(t[12], 302.0, 0.01, "median TTFT at turn 12");
    let cached = report("multi-turn-chat", &[]);
    near(cached.summary.kv_cache.prefix_hit_rate.unwrap(), 0.88, 0.01, "prefix hit rate");
    for (k, x) in by_turn(&cached).iter().enumerate().skip(2) {
        near(*x, 63.0, 0.06, &format!("cached median TTFT at turn {k}"));
    }
    let long = report("multi-turn-chat", &["workload.sessions.turns={dist=\"uniform\",min=10,max=30}"]);
    assert_eq!(long.summary.stability.verdict, "overloaded", "{}", long.summary.stability.explanation);
}

#[test]
fn router_sweep_ranking() {
    let h = header("what-if-router");
    let quote = "least-tokens 541 ms, least-outstanding 719, round-robin 770, power-of-two 772, central-queue 792, \
                 random 1008, and least-kv 1145";
    assert!(h.contains(quote), "the header no longer says {quote:?}");
    let rows = sweep("what-if-router");
    for (router, want) in [
        ("least-tokens", 541.0),
        ("least-outstanding", 719.0),
        ("round-robin", 770.0),
        ("power-of-two", 772.0),
        ("central-queue", 792.0),
        ("random", 1008.0),
        ("least-kv", 1145.0),
    ] {
        let row = rows.iter().find(|r| r["hardware.router"] == router).unwrap();
        near(num(row, "p99_ttft_ms"), want, 0.003, &format!("{router}: p99 TTFT"));
    }
}

#[test]
fn chunked_prefill_no_chunking_and_offline() {
    let h = header("what-if-chunked-prefill");
    assert!(h.contains("Expect chunked prefill to cut the ITL/TPOT tail (no decode stalls behind whole prompts) at the price of a somewhat later first token"));
    let (on, off) = (summary("what-if-chunked-prefill", &[]), summary("what-if-chunked-prefill", &["baseline"]));
    let get = |v: &Value, k: &str| v[k].as_f64().unwrap();
    for k in ["p99_itl_ms", "max_itl_ms", "p99_tpot_ms"] {
        assert!(get(&on, k) < get(&off, k), "{k}: chunked {} against {}", get(&on, k), get(&off, k));
    }
    assert!(get(&on, "median_ttft_ms") > get(&off, "median_ttft_ms"), "a later first token");
    let h = header("no-chunked-prefill");
    assert!(h.contains("a long ITL tail (p99, max) and worse TPOT than quickstart.toml"));
    let (v0, quick) = (summary("no-chunked-prefill", &[]), summary("quickstart", &[]));
    for k in ["p99_itl_ms", "max_itl_ms", "median_tpot_ms", "p99_tpot_ms"] {
        assert!(get(&v0, k) > get(&quick, k), "{k}: {} against quickstart's {}", get(&v0, k), get(&quick, k));
    }
    assert!(header("offline-batch").contains("Stability does not apply."));
    assert_eq!(summary("offline-batch", &[])["stability"]["verdict"], "not_applicable");
}

#[test]
fn readme_speculative_and_disaggregation() {
    const TPOT50: &[&str] = &["median_tpot_ms"];
    const TPOT99: &[&str] = &["p99_tpot_ms"];
    const TTFT50: &[&str] = &["median_ttft_ms"];
    const ITL50: &[&str] = &["median_itl_ms"];
    const E2E50: &[&str] = &["median_e2el_ms"];
    const OUT: &[&str] = &["output_throughput"];
    check_readme(&[
        Claim {
            scenario: "what-if-speculative",
            sets: &[],
            quote: "At 1 req/s (`servesim run`) median TPOT falls from 19.5 to 12.2 ms and p99 TPOT from 24.6 to 18.0 ms, \
                    median E2E from 4.8 to 3.1 s, while median TTFT rises from 168 to 201 ms (p99 620 → 714 ms",
            is: &[
                About(TPOT50, 12.2, 0.003),
                About(TPOT99, 18.0, 0.003),
                About(E2E50, 3100.0, 0.01),
                About(TTFT50, 201.0, 0.003),
                About(P99_TTFT, 714.0, 0.002),
                About(ITL50, 29.1, 0.002),
                About(P99_ITL, 195.0, 0.001),
                About(OUT, 307.0, 0.002),
                About(&["speculative", "tokens_per_step"], 2.75, 0.002),
            ],
        },
        Claim {
            scenario: "what-if-speculative",
            sets: &["baseline"],
            quote: "median ITL from 17.1 to 29.1 ms (p99 111.9 → 195.0 ms: each gap now carries 2.75 tokens). Output \
                    throughput equals the offered load either way (307 vs 298 tok/s",
            is: &[
                About(TPOT50, 19.5, 0.003),
                About(TPOT99, 24.6, 0.002),
                About(E2E50, 4800.0, 0.01),
                About(TTFT50, 168.0, 0.01),
                About(P99_TTFT, 620.0, 0.002),
                About(ITL50, 17.1, 0.003),
                About(P99_ITL, 111.9, 0.001),
                About(OUT, 298.0, 0.002),
            ],
        },
        Claim {
            scenario: "what-if-disaggregation",
            sets: &[],
            quote: "| median / p99 TTFT (ms) | 175.0 / 500.6 | 143.6 / 331.2 | | median / p99 TPOT (ms) | 8.97 / 10.75 | \
                    10.78 / 15.77 | | median / p99 ITL (ms) | 8.93 / 10.96 | 8.10 / 107.95 | | SLO met (TTFT 500 ms, TPOT \
                    12 ms) | 99.0 % | 77.6 % |",
            is: &[
                About(TTFT50, 175.0, 0.001),
                About(P99_TTFT, 500.6, 0.001),
                About(TPOT50, 8.97, 0.001),
                About(TPOT99, 10.75, 0.001),
                About(ITL50, 8.93, 0.001),
                About(P99_ITL, 10.96, 0.001),
                About(SLO, 0.990, 0.001),
                About(&["slo", "tpot_attainment"], 1.0, 0.0),
                About(&["pools", "0", "mfu"], 0.168, 0.002),
                About(&["pools", "0", "mbu"], 0.057, 0.009),
                About(&["pools", "1", "mfu"], 0.021, 0.024),
                About(&["pools", "1", "mbu"], 0.629, 0.001),
                About(&["pools", "0", "gpu_busy_fraction"], 0.507, 0.002),
                About(&["pools", "1", "gpu_busy_fraction"], 0.995, 0.001),
                About(&["disaggregation", "mean_transfer_ms"], 6.90, 0.001),
                About(&["disaggregation", "max_transfer_ms"], 29.8, 0.002),
                About(&["disaggregation", "mean_transfer_bytes"], 295e6, 0.002),
                About(OUT, 2478.0, 0.0002),
            ],
        },
        Claim {
            scenario: "what-if-disaggregation",
            sets: &["baseline"],
            quote: "| MFU / MBU (%) | prefill 16.8 / 5.7, decode 2.1 / 62.9 | 9.4 / 50.3 | | GPU busy (%) | prefill \
                    50.7, decode 99.5 | 99.3 |",
            is: &[
                About(TTFT50, 143.6, 0.001),
                About(P99_TTFT, 331.2, 0.001),
                About(TPOT50, 10.78, 0.001),
                About(TPOT99, 15.77, 0.001),
                About(ITL50, 8.10, 0.001),
                About(P99_ITL, 107.95, 0.001),
                About(SLO, 0.776, 0.001),
                About(&["pools", "0", "mfu"], 0.094, 0.006),
                About(&["pools", "0", "mbu"], 0.503, 0.001),
                About(&["pools", "0", "gpu_busy_fraction"], 0.993, 0.001),
                About(OUT, 2481.0, 0.0002),
            ],
        },
    ]);
}

#[test]
fn readme_speculative_sweep_table() {
    let readme = readme_and_guide();
    let start = readme.find("| rate (req/s) | median TPOT (ms) | p99 TPOT (ms) | median TTFT (ms)").expect("the table");
    let rows = sweep("what-if-speculative");
    let mut checked = 0;
    for line in readme[start..].lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let row = rows.iter().find(|r| r["workload.rate"] == cells[0]).unwrap_or_else(|| panic!("rate {}", cells[0]));
        for (cell, key, scale) in [
            (cells[1], "median_tpot_ms", 1.0),
            (cells[2], "p99_tpot_ms", 1.0),
            (cells[3], "median_ttft_ms", 1.0),
            (cells[4], "slo.attainment", 100.0),
        ] {
            // "speculation vs baseline"; the baseline is value − vs_baseline.<key>.
            let (a, b) = cell.trim_end_matches(" %").split_once(" vs ").unwrap();
            let decimals = a.split('.').nth(1).map_or(0, str::len) as i32;
            let half = 0.5 * 10f64.powi(-decimals) + 1e-9;
            let (spec, base) = (num(row, key), num(row, key) - num(row, &format!("vs_baseline.{key}")));
            for (text, got) in [(a, spec), (b, base)] {
                let want: f64 = text.parse().unwrap();
                assert!((got * scale - want).abs() <= half, "rate {}: {key} {got} (README {want})", cells[0]);
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 6, "six rates in the README table");
}
