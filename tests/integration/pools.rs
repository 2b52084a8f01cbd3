//! Replica pools: heterogeneous pools with their own engine settings, and
//! prefill/decode disaggregation (KV transfer time, conservation of
//! requests across pools, invariants with KV held during transfers).

use crate::common;

use common::{run, setup};
use servesim::metrics::Status;
use servesim::scenario::load_scenario_str;
use std::path::Path;

/// One prefill and one decode replica with a constant 10 ms step; `extra` is appended.
fn split(prompt: u32, output: u32, n: u64, rate: f64, extra: &str) -> String {
    format!(
        r#"seed = 2
num_requests = {n}
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
[cost]
model = "constant"
step_overhead_ms = 0
step_time_ms = 10
[[pools]]
name = "p"
role = "prefill"
gpu = "h100-sxm"
[[pools]]
name = "d"
role = "decode"
gpu = "h100-sxm"
[workload]
rate = {rate}
prompt_tokens = {{ dist = "fixed", value = {prompt} }}
output_tokens = {{ dist = "fixed", value = {output} }}
{extra}
"#
    )
}

#[test]
fn kv_transfer_time_is_bytes_over_bandwidth_plus_latency() {
    for (gbps, lat_ms) in [(50.0, 1.0), (12.5, 0.0), (400.0, 5.0)] {
        let link = format!("[disaggregation]\nkv_transfer_gbps = {gbps}\nkv_transfer_latency_ms = {lat_ms}");
        let rep = run(&split(1000, 3, 1, 1.0, &link), &[]);
        // Llama-3.1-8B: 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 bytes per
        // token, for the 999 prompt tokens whose KV the decode side receives.
        let bytes = 999.0 * 2.0 * 32.0 * 8.0 * 128.0 * 2.0;
        let transfer = bytes / (gbps * 1e9) + lat_ms * 1e-3;
        let r = &rep.output.records[0];
        assert_eq!(r.status, Status::Completed);
        // Prefill step (10 ms, its token not sent on), transfer, then three
        // 10 ms decode steps: the first (last prompt token recomputed) shows
        // the client its first token, as vLLM's disaggregated prefill does.
        // TTFT includes the transfer; the first ITL does not.
        let ttft = 0.010 + transfer + 0.010;
        assert!((r.ttft() - ttft).abs() < 1e-12, "TTFT {} vs {ttft}", r.ttft());
        let want = ttft + 0.020;
        assert!((r.e2e() - want).abs() < 1e-12, "e2e {} vs {want}", r.e2e());
        let itl = &rep.summary.metrics.itl.dist;
        assert!((itl.max - 10.0).abs() < 0.1 && itl.count == 2, "two ITLs of one decode step each: {itl:?}");
        let d = rep.summary.disaggregation.as_ref().expect("disaggregation summary");
        assert!((d.mean_transfer_ms - transfer * 1e3).abs() < 1e-9);
        assert_eq!(d.mean_transfer_bytes, bytes);
        assert_eq!(d.transfers, 1);
    }
}

/// The wait for a decode slot is part of TTFT: with one decode slot, the
/// second of two requests shows its first token only after the first
/// request has finished decoding (before the fix, its TTFT ended at the
/// prefill pool and the wait fell into its first ITL).
#[test]
fn the_decode_queue_counts_in_ttft() {
    let toml = split(100, 50, 2, 1000.0, "")
        .replace("role = \"decode\"\n", "role = \"decode\"\nengine = { max_num_seqs = 1 }\n");
    let rep = run(&toml, &[]);
    let (a, b) = (&rep.output.records[0], &rep.output.records[1]);
    assert!(a.status == Status::Completed && b.status == Status::Completed);
    assert!(
        b.first_token >= a.last_token,
        "second TTFT ends at {} before the first finishes at {}",
        b.first_token,
        a.last_token
    );
    assert!(b.ttft() > 0.5, "TTFT {} includes 50 decode steps of the first request", b.ttft());
}

#[test]
fn requests_are_conserved_across_pools() {
    // Roofline costs, a mix of one-token and longer outputs, a small prefill cache.
    let toml = split(700, 1, 3000, 40.0, "")
        .replace("[cost]\nmodel = \"constant\"\nstep_overhead_ms = 0\nstep_time_ms = 10\n", "")
        .replace(
            "output_tokens = { dist = \"fixed\", value = 1 }",
            "output_tokens = { dist = \"uniform\", min = 1, max = 200 }",
        )
        .replace("role = \"prefill\"\n", "role = \"prefill\"\nengine = { num_gpu_blocks = 300 }\n");
    let s = setup(&toml, &[]);
    // Invariants after every step: KV blocks (those held for transfers included) never exceed capacity.
    let out = servesim::sim::simulate_checked(&s, 4);
    let (p, d) = (&out.replicas[0], &out.replicas[1]);
    let n = out.records.len() as u64;
    assert_eq!(p.routed, n, "every request enters at the prefill pool");
    let one_token = out.records.iter().filter(|r| r.output == 1).count() as u64;
    assert!(one_token > 0);
    assert_eq!(p.handoffs, n - one_token, "every longer request is handed over");
    assert_eq!(d.routed, p.handoffs, "the decode pool receives exactly the handoffs");
    assert!(out.records.iter().all(|r| r.status == Status::Completed && r.generated == r.output));
    // One-token requests finish at the prefill pool, the rest at the decode pool.
    assert!(out.records.iter().all(|r| r.replica == if r.output == 1 { 0 } else { 1 }));
    let rep = servesim::run_setup(&s, 4);
    let pools = &rep.summary.pools;
    assert_eq!((pools[0].name.as_str(), pools[1].name.as_str()), ("p", "d"));
    assert_eq!(pools[1].requests, pools[0].handoffs);
    // The prefill pool computes prompts (compute bound), the decode pool reads weights and KV.
    assert!(pools[0].mfu > pools[1].mfu && pools[1].mbu > pools[0].mbu, "{pools:?}");
}

#[test]
fn heterogeneous_pools_have_their_own_gpus_and_engine_settings() {
    let toml = r#"
seed = 1
duration_s = 60
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
[hardware]
router = "least-outstanding"
[[pools]]
name = "fast"
gpu = "h100-sxm"
replicas = 2
[[pools]]
name = "slow"
gpu = "a100-80gb"
tp = 2
replicas = 2
engine = { max_num_seqs = 64, preset = "sarathi" }
[workload]
rate = 30
prompt_tokens = { dist = "lognormal", median = 600, sigma = 0.5 }
output_tokens = { dist = "lognormal", mean = 200, cv = 0.5 }
"#;
    let s = setup(toml, &[]);
    assert_eq!(s.pools.len(), 2);
    // Pools are laid out by name (the listing order never matters).
    assert_eq!((s.pools[0].name.as_str(), s.pools[1].name.as_str()), ("fast", "slow"));
    assert_eq!((s.pools[0].engine.max_num_seqs, s.pools[1].engine.max_num_seqs), (256, 64));
    // The pool's preset sets its token budget; the scenario's [engine] keeps the default.
    assert_eq!((s.pools[0].engine.max_num_batched_tokens, s.pools[1].engine.max_num_batched_tokens), (8192, 512));
    assert_ne!(s.pools[0].memory.num_blocks, s.pools[1].memory.num_blocks);
    let rep = servesim::run_setup(&s, 1);
    let sum = &rep.summary;
    assert_eq!(sum.cost.num_gpus, 2 + 4);
    assert_eq!(sum.replicas, 4);
    let usd: f64 = sum.pools.iter().map(|p| p.usd).sum();
    assert!((sum.cost.total_usd - usd).abs() < 1e-12);
    for p in &sum.pools {
        assert!(p.requests > 100, "pool {} got {} requests", p.name, p.requests);
        assert!(p.gpu_busy_fraction > 0.0);
    }
    // Every replica ran with its own pool's KV capacity.
    let peak_a100 = rep.output.replicas.iter().filter(|r| r.pool == 1).map(|r| r.num_blocks).max();
    assert_eq!(peak_a100, Some(s.pools[1].memory.num_blocks));
}

#[test]
fn pool_configuration_errors_name_the_key() {
    let base = split(100, 10, 10, 1.0, "");
    let err = |text: &str| {
        let loaded = match load_scenario_str(text, Path::new("t.toml"), &[]) {
            Ok(l) => l,
            Err(e) => return e,
        };
        servesim::resolve(&loaded.scenario, &servesim::Catalog::builtin().unwrap()).expect_err("an error")
    };
    let e = err(&base.replace("role = \"decode\"", "role = \"mixed\""));
    assert_eq!(e.key.as_deref(), Some("pools"), "{e}");
    let e = err(&base.replace("[[pools]]\nname = \"p\"", "[hardware]\nreplicas = 2\n[[pools]]\nname = \"p\""));
    assert_eq!(e.key.as_deref(), Some("hardware"), "{e}");
    let e = err(&base.replace("role = \"decode\"\n", "role = \"decode\"\nengine = { max_num_seqz = 4 }\n"));
    assert_eq!(e.key.as_deref(), Some("pools[1].engine"), "{e}");
    assert!(e.to_string().contains("max_num_seqz"), "{e}");
    let e = err(&base.replace("role = \"decode\"\n", "role = \"decode\"\nengine = { block_size = 0 }\n"));
    assert_eq!(e.key.as_deref(), Some("pools[1].engine.block_size"), "{e}");
    let e = err(&base.replace("gpu = \"h100-sxm\"\n[[pools]]", "gpu = \"h100-sxn\"\n[[pools]]"));
    assert_eq!(e.key.as_deref(), Some("pools[0].gpu"), "{e}");
    // The front end (preprocessing, tokenizer workers, client timeouts) is one
    // for the whole cluster: a pool may not set it.
    let e = err(&base.replace("role = \"decode\"\n", "role = \"decode\"\nengine = { max_wait_s = 2.0 }\n"));
    assert_eq!(e.key.as_deref(), Some("pools[1].engine.max_wait_s"), "{e}");
}

#[test]
fn speculation_can_be_set_in_one_pool() {
    let toml = r#"
seed = 1
duration_s = 60
[model]
name = "llama-3.1-8b"
[[pools]]
name = "spec"
gpu = "h100-sxm"
engine = { speculative = { method = "mtp", num_tokens = 4, acceptance = 0.7 } }
[[pools]]
name = "vanilla"
gpu = "h100-sxm"
[workload]
rate = 4
prompt_tokens = { dist = "fixed", value = 500 }
output_tokens = { dist = "fixed", value = 300 }
"#;
    let rep = run(toml, &[]);
    let sp = rep.summary.speculative.as_ref().expect("speculation reported");
    assert!((sp.drawn_tokens_per_step - sp.expected_tokens_per_step).abs() < 0.1, "{sp:?}");
    // Round robin: the speculating replica finishes its requests' decodes faster.
    let tpot = |r: u32| {
        let v: Vec<f64> = rep.output.records.iter().filter(|x| x.replica == r).map(|x| x.tpot()).collect();
        common::mean(&v)
    };
    assert!(tpot(0) < 0.7 * tpot(1), "TPOT {} with speculation vs {} without", tpot(0), tpot(1));
}

/// The order of `[[pools]]` never changes a result. Llama-3.1-8B on an H200
/// pool and an L4 pool with 60,000-token prompts clipped to fit: every
/// request completes whichever pool is listed first (before the fix, the
/// clip length came from the first pool alone: 0 of 50 completed with the
/// H200 first, 50 of 50 with the L4 first).
#[test]
fn the_order_of_pools_does_not_change_the_result() {
    let pool = |gpu: &str| format!("[[pools]]\nname = \"{gpu}\"\ngpu = \"{gpu}\"\n");
    let text = |first: &str, second: &str| {
        format!(
            "seed = 3\nnum_requests = 50\n[model]\nname = \"llama-3.1-8b\"\n[engine]\npreset = \"legacy\"\n[hardware]\nrouter = \"round-robin\"\n{}{}\
             [workload]\nrate = 0.5\non_too_long = \"clip\"\nprompt_tokens = {{ dist = \"fixed\", value = 60000 }}\n\
             output_tokens = {{ dist = \"fixed\", value = 100 }}\n",
            pool(first),
            pool(second)
        )
    };
    let a = run(&text("h200", "l4"), &[]);
    let b = run(&text("l4", "h200"), &[]);
    assert_eq!(a.summary.metrics.completed, 50, "H200 first: {:?}", a.summary.metrics.failures_by_reason);
    assert_eq!(b.summary.metrics.completed, 50, "L4 first: {:?}", b.summary.metrics.failures_by_reason);
    // Pools are laid out by role and name, not by listing order: the two
    // runs are the same run.
    let json = |r: &servesim::Report| serde_json::to_string(&r.summary).unwrap();
    assert_eq!(json(&a), json(&b));
    // The summary describes both pools: no top-level tp or per-replica KV
    // figure taken from one of them.
    let kv = &a.summary.kv_cache;
    assert_eq!(kv.blocks_per_replica, None);
    let per_pool: u64 = a.summary.pools.iter().map(|p| p.replicas as u64 * p.kv_blocks_per_replica).sum();
    assert_eq!(kv.total_blocks, per_pool);
    let mut tp2 = text("h200", "l4");
    tp2 = tp2.replacen("gpu = \"h200\"\n", "gpu = \"h200\"\ntp = 2\n", 1);
    let c = run(&tp2, &[]);
    assert_eq!((a.summary.tp, c.summary.tp), (Some(1), None));
}

/// Queue order is a per-pool engine setting: a pool that sets
/// `queue_order` orders its own queue by it (before, every pool took the
/// order of the scenario's [engine]).
#[test]
fn a_pools_queue_order_is_its_own() {
    let text = |order: &str| {
        format!(
            "seed = 8\nnum_requests = 4000\n[model]\nname = \"llama-3.1-8b\"\n[engine]\nmax_num_seqs = 8\n\
             [[pools]]\nname = \"only\"\ngpu = \"h100-sxm\"\nengine = {{ queue_order = \"{order}\" }}\n\
             [workload]\nrate = 12\nprompt_tokens = {{ dist = \"uniform\", min = 100, max = 4000 }}\n\
             output_tokens = {{ dist = \"fixed\", value = 200 }}\n"
        )
    };
    let fcfs = run(&text("fcfs"), &[]);
    let short = run(&text("shortest-prompt"), &[]);
    let (f, s) = (&fcfs.summary.metrics.ttft.dist, &short.summary.metrics.ttft.dist);
    assert!(s.median() < 0.8 * f.median(), "shortest-prompt median TTFT {} vs FCFS {}", s.median(), f.median());
}

/// Requests piling up in front of the decode pool count in the stability
/// verdict: the backlog lasts until a request's first token, not until its
/// prefill. Two prefill and one decode H100 for Llama-3.1-8B, 2,000/500
/// tokens at 15 req/s: the prefill pool keeps up, the decode pool carries
/// about 7 req/s. Before the fix this run was called "stable" while p99
/// TTFT reached 96 s.
#[test]
fn a_queue_in_front_of_the_decode_pool_is_overload() {
    let toml = r#"seed = 1
duration_s = 120
warmup_s = 10
[model]
name = "llama-3.1-8b"
[hardware]
router = "least-tokens"
[[pools]]
name = "prefill"
role = "prefill"
gpu = "h100-sxm"
replicas = 2
[[pools]]
name = "decode"
role = "decode"
gpu = "h100-sxm"
replicas = 1
[disaggregation]
kv_transfer_gbps = 50
kv_transfer_latency_ms = 1
[workload]
arrival = "poisson"
rate = 15
prompt_tokens = { dist = "fixed", value = 2000 }
output_tokens = { dist = "fixed", value = 500 }
"#;
    let s = run(toml, &[]).summary;
    assert_eq!(s.stability.verdict, "overloaded", "{}", s.stability.explanation);
    assert!(s.metrics.request_throughput < 10.0, "{}", s.metrics.request_throughput);
    // At a rate both pools carry, the same split is stable.
    let s = run(toml, &["workload.rate=5"]).summary;
    assert_eq!(s.stability.verdict, "stable", "{}", s.stability.explanation);
}
