//! Routing across replicas against queueing theory: a central queue in front
//! of c single-server replicas with exponential service is M/M/c (Erlang C);
//! random routing splits the traffic into c independent M/M/1 queues; join
//! the shortest queue lies between the two.

use crate::common;

use common::{mean, run};
use servesim::metrics::{RequestRecord, Status};

/// c = 4 replicas serving one request at a time, exponential service with
/// mean 10 ms (one engine step per request), Poisson arrivals at 320 req/s:
/// offered load a = 3.2 Erlangs, utilisation 0.8.
const CLUSTER: &str = r#"
seed = 21
num_requests = 200000
warmup_s = 20
[model]
name = "llama-3.1-8b"
[hardware]
replicas = 4
[engine]
preset = "legacy"
max_num_seqs = 1
[cost]
model = "exponential"
step_overhead_ms = 0
step_time_ms = 10
[workload]
rate = 320
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 1 }
"#;

/// Erlang C: probability of waiting in M/M/c with offered load a.
fn erlang_c(c: u32, a: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..c {
        term *= a / k as f64;
        sum += term;
    }
    let last = term * a / c as f64 * c as f64 / (c as f64 - a);
    last / (sum + last)
}

fn mean_wait(router: &str) -> f64 {
    let rep = run(CLUSTER, &[&format!("hardware.router=\"{router}\"")]);
    let w: Vec<f64> = rep
        .output
        .records
        .iter()
        .filter(|r| r.arrival >= 20.0 && r.status == Status::Completed)
        .map(RequestRecord::queue_delay)
        .collect();
    mean(&w)
}

#[test]
fn central_queue_is_erlang_c_random_is_mm1_and_jsq_lies_between() {
    let (lambda, mu, c) = (320.0, 100.0, 4u32);
    let a = lambda / mu;
    let erlang = erlang_c(c, a) / (c as f64 * mu - lambda);
    let mm1 = (lambda / c as f64 / mu) / (mu - lambda / c as f64);
    let central = mean_wait("central-queue");
    let random = mean_wait("random");
    let jsq = mean_wait("least-outstanding");
    eprintln!("Wq: central {central:.5} s (Erlang C {erlang:.5}), JSQ {jsq:.5}, random {random:.5} (M/M/1 {mm1:.5})");
    assert!((central / erlang - 1.0).abs() < 0.05, "central queue: Wq {central} vs Erlang C {erlang}");
    assert!((random / mm1 - 1.0).abs() < 0.08, "random: Wq {random} vs M/M/1 {mm1}");
    assert!(central < jsq && jsq < random, "JSQ {jsq} between {central} and {random}");
}

/// Four replicas, multi-turn sessions behind a shared 1,500-token system prompt, prefix caching on.
const PREFIX_CHAT: &str = r#"
seed = 5
duration_s = 240
[model]
name = "llama-3.1-8b"
[hardware]
replicas = 4
router = "prefix-aware"
[engine]
preset = "legacy"
prefix_caching = true
[workload]
rate = 2.0
prompt_tokens = { dist = "lognormal", mean = 600, cv = 0.8 }
output_tokens = { dist = "lognormal", mean = 150, cv = 0.8 }
[[workload.classes]]
name = "chat"
prefix_group = "system"
prefix_tokens = 1500
[workload.sessions]
turns = { dist = "uniform", min = 2, max = 10 }
think_time_s = { dist = "exponential", mean = 10 }
new_tokens = { dist = "lognormal", mean = 100, cv = 1.0 }
"#;

#[test]
fn prefix_aware_routing_finds_cached_prefixes() {
    let aware = run(PREFIX_CHAT, &[]);
    let rr = run(PREFIX_CHAT, &["hardware.router=\"round-robin\""]);
    let hit = |r: &servesim::Report| r.summary.kv_cache.prefix_hit_rate.unwrap();
    assert!(hit(&aware) > hit(&rr) + 0.15, "hit rate {} prefix-aware vs {} round robin", hit(&aware), hit(&rr));
    let mean_ttft = |r: &servesim::Report| r.summary.metrics.ttft.dist.mean;
    assert!(mean_ttft(&aware) < mean_ttft(&rr));
}

#[test]
fn prefix_aware_routing_respects_its_load_cap() {
    // Only the system prompt is shared: without a cap everything follows it to one replica.
    let one_prefix = PREFIX_CHAT.replace("[workload.sessions]", "[unused]").replace(
        "turns = { dist = \"uniform\", min = 2, max = 10 }\nthink_time_s = { dist = \"exponential\", mean = 10 }\nnew_tokens = { dist = \"lognormal\", mean = 100, cv = 1.0 }\n",
        "",
    ).replace("[unused]\n", "").replace("rate = 2.0", "rate = 12.0");
    let share = |cap: &str| {
        let rep = run(&one_prefix, &[&format!("hardware.prefix_load_cap={cap}")]);
        let per = &rep.summary.utilisation.requests_per_replica;
        *per.iter().max().unwrap() as f64 / per.iter().sum::<u64>() as f64
    };
    assert_eq!(share("1000000"), 1.0, "an unbounded cap keeps every request on the prefix's replica");
    let capped = share("2");
    assert!(capped < 0.4, "with a cap of 2 the busiest replica got {capped} of the requests");
}
