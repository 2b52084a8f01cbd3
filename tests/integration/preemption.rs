//! Preemption: none when the KV cache is ample; by recompute (with its cost
//! in recomputed tokens) when it is short; by swap to host memory, within
//! the host's capacity and falling back to recompute beyond it.

use crate::common;

use common::setup;
use servesim::metrics::Status;
use servesim::sim::simulate_checked;

/// Llama-3.1-8B on one H100 with long decodes; `blocks` KV blocks.
fn scenario(blocks: u64, engine: &str) -> String {
    format!(
        r#"seed = 11
num_requests = 400
[model]
name = "llama-3.1-8b"
[engine]
preset = "legacy"
num_gpu_blocks = {blocks}
{engine}
[workload]
rate = 20
prompt_tokens = {{ dist = "lognormal", median = 600, sigma = 0.5 }}
output_tokens = {{ dist = "lognormal", mean = 400, cv = 0.5 }}
"#
    )
}

fn totals(out: &servesim::sim::SimOutput) -> (u64, u64, u64, u64, u64) {
    let sum = |f: &dyn Fn(&servesim::engine::ReplicaStats) -> u64| out.replicas.iter().map(f).sum::<u64>();
    (
        sum(&|r| r.preemptions),
        sum(&|r| r.recomputed_tokens),
        sum(&|r| r.swaps_out),
        sum(&|r| r.swapped_blocks),
        out.replicas.iter().map(|r| r.peak_host_blocks).max().unwrap_or(0),
    )
}

fn all_complete(out: &servesim::sim::SimOutput) {
    assert!(out.records.iter().all(|r| r.status == Status::Completed && r.generated == r.output));
}

#[test]
fn no_preemption_when_kv_is_ample_and_recompute_when_short() {
    // Invariants (KV in use never above capacity) are checked after every step.
    let ample = simulate_checked(&setup(&scenario(20_000, ""), &[]), 11);
    all_complete(&ample);
    assert_eq!(totals(&ample).0, 0, "preemptions with an ample cache");
    let short = simulate_checked(&setup(&scenario(900, ""), &[]), 11);
    all_complete(&short);
    let (pre, recomputed, swapped, ..) = totals(&short);
    assert!(pre > 20, "{pre} preemptions with a short cache");
    // Each preemption throws away at least one prompt's KV, to be computed again.
    assert!(recomputed > pre * 100, "{recomputed} tokens recomputed for {pre} preemptions");
    assert_eq!(swapped, 0);
    let steps = |o: &servesim::sim::SimOutput| o.replicas.iter().map(|r| r.steps).sum::<u64>();
    assert!(steps(&short) > steps(&ample), "recomputation costs steps");
    assert!(short.end_time > ample.end_time);
}

#[test]
fn swap_respects_host_capacity_and_falls_back_to_recompute() {
    // Llama-3.1-8B: 128 KiB of KV per token, 2 MiB per 16-token block.
    let block_bytes = 131072.0 * 16.0;
    let ample = "preemption = \"swap\"\nswap_space_gb = 8";
    let s = setup(&scenario(900, ample), &[]);
    assert_eq!(s.pools[0].engine.swap_blocks, (8.0 * 1024.0 * 1024.0 * 1024.0 / block_bytes) as u64);
    let out = simulate_checked(&s, 11);
    all_complete(&out);
    let (pre, recomputed, swapped, copied, peak) = totals(&out);
    assert!(swapped > 20, "{swapped} swaps");
    assert!(peak > 0 && peak <= s.pools[0].engine.swap_blocks);
    // Only sequences preempted while still prefilling recompute.
    assert!(swapped <= pre);
    let recompute_only = totals(&simulate_checked(&setup(&scenario(900, ""), &[]), 11)).1;
    assert!(recomputed * 4 < recompute_only, "swap recomputed {recomputed} tokens vs {recompute_only}");
    // Copies take bytes / bandwidth: every swapped block goes out and comes back.
    let time: f64 = out.replicas.iter().map(|r| r.swap_time).sum();
    assert!((time - copied as f64 * block_bytes / 25e9).abs() < 1e-9 * time.max(1.0));
    assert_eq!(copied % 2, 0, "{copied} blocks copied: out and back in");

    // A host space of 40 blocks holds two or three swapped sequences: the rest recompute.
    let tiny = setup(&scenario(900, "preemption = \"swap\"\nswap_space_gb = 0.078125"), &[]);
    assert_eq!(tiny.pools[0].engine.swap_blocks, 40);
    let out = simulate_checked(&tiny, 11);
    all_complete(&out);
    let (pre, recomputed, swapped, _, peak) = totals(&out);
    assert!(peak <= 40, "host peak {peak} blocks over capacity 40");
    assert!(swapped > 0 && swapped < pre, "{swapped} of {pre} preemptions swapped");
    assert!(recomputed > 0);
}
