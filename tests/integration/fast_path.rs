//! The steady-decode fast path must change nothing: every record, every
//! summary field and every chart input are bit-identical with and without it.

use crate::common;
use common::setup;
use servesim::sim::{simulate, simulate_without_fast_path};
use servesim::summarize::summarize;

fn same(text: &str, sets: &[&str]) {
    same_with(text, sets, false);
}

/// The same, with latency attribution on or off.
fn same_with(text: &str, sets: &[&str], attribution: bool) {
    let mut s = setup(text, sets);
    s.attribution = attribution;
    let seed = s.scenario.seed;
    let (mut a, mut b) = (simulate(&s, seed), simulate_without_fast_path(&s, seed));
    assert_eq!(a.records.len(), b.records.len());
    for (i, (x, y)) in a.records.iter().zip(&b.records).enumerate() {
        let bits = |r: &servesim::metrics::RequestRecord| {
            [r.arrival, r.admitted, r.first_scheduled, r.first_token, r.last_token].map(f64::to_bits)
        };
        assert_eq!(bits(x), bits(y), "{sets:?}: request {i} differs");
        assert_eq!((x.generated, x.preemptions, x.replica), (y.generated, y.preemptions, y.replica));
    }
    // Latency attribution (each request's parts, for `explain`), by bits.
    let parts = |o: &servesim::sim::SimOutput| -> Vec<u64> { o.parts.iter().flatten().map(|x| x.to_bits()).collect() };
    assert_eq!(a.parts.len(), b.parts.len());
    assert_eq!(parts(&a), parts(&b), "{sets:?}: attribution differs");
    let (sa, sb) = (summarize(&s, seed, &mut a), summarize(&s, seed, &mut b));
    assert_eq!(serde_json::to_string(&sa).unwrap(), serde_json::to_string(&sb).unwrap(), "{sets:?}: summaries differ");
    // (By bits: a span still open at the end, such as a preemption, ends at NaN.)
    let spans = |t: &[servesim::engine::Span]| -> Vec<_> {
        t.iter().map(|x| (x.req, x.kind, x.start.to_bits(), x.end.to_bits())).collect()
    };
    assert_eq!(spans(&a.timeline), spans(&b.timeline), "{sets:?}: timelines differ");
    assert_eq!(a.end_time.to_bits(), b.end_time.to_bits());
}

const QUICK: &str = include_str!("../../scenarios/quickstart.toml");

#[test]
fn fast_path_is_exact() {
    same(QUICK, &[]);
    same(QUICK, &["workload.rate=30", "num_requests=3000"]);
    same(QUICK, &["engine.chunked_prefill=false", "engine.max_num_batched_tokens=16384"]);
    same(QUICK, &["engine.num_gpu_blocks=600", "engine.max_model_len=8192", "workload.rate=20"]);
    same(QUICK, &["engine.preset=\"legacy\"", "workload.rate=30", "num_requests=3000"]);
    same(QUICK, &["hardware.replicas=3", "hardware.router=\"least-outstanding\"", "workload.rate=40"]);
    same(QUICK, &["engine.max_num_seqs=8", "workload.rate=20", "num_requests=1000"]);
}

const DISAGG: &str = include_str!("../../scenarios/what-if-disaggregation.toml");
const SPEC: &str = include_str!("../../scenarios/what-if-speculative.toml");
const LORA: &str = include_str!("../../scenarios/what-if-lora.toml");
const PREFIX: &str = include_str!("../../scenarios/what-if-prefix-cache.toml");
const OFFLOAD: &str = include_str!("../../scenarios/what-if-kv-offload.toml");
const CLOSED: &str = include_str!("../../scenarios/closed-loop-concurrency.toml");

#[test]
fn fast_path_is_exact_with_joiners_swaps_and_attribution() {
    // Joiners run on the fast path: prompts that finish their prefill, and on
    // a decode pool requests handed over (their first token comes from
    // their first decode step); swap preemption (508 swaps out in the second
    // case); attribution splits each fast step as the general path does.
    same_with(QUICK, &["workload.rate=20", "num_requests=1500"], true);
    same_with(
        QUICK,
        &[
            "engine.preemption=\"swap\"",
            "engine.swap_space_gb=4",
            "engine.num_gpu_blocks=600",
            "engine.max_model_len=8192",
            "workload.rate=20",
            "num_requests=1500",
        ],
        true,
    );
    same_with(DISAGG, &["duration_s=30"], true);
    same_with(SPEC, &["duration_s=30"], true);
    same_with(LORA, &["num_requests=1500"], true);
    same_with(PREFIX, &["duration_s=60", "warmup_s=10"], true);
}

#[test]
fn fast_path_is_exact_with_offload_closed_loop_central_queue_sglang_and_trtllm() {
    // Where the fast path hands a step back to the general scheduler and
    // takes over again: completions that store blocks in the offload tiers
    // (the next step waits for them), closed-loop users who send their next
    // request at once, a central queue that dispatches into the room freed,
    // and the engine profiles whose admission differs from the default
    // vllm-v1 (covered above): SGLang's reserve ratio, TensorRT-LLM's whole
    // prompts, with and without KV pressure.
    let trace = "workload.trace.file=\"scenarios/traces/conversation_trace.jsonl\"";
    same(OFFLOAD, &[trace, "duration_s=40"]);
    same(OFFLOAD, &[trace, "duration_s=40", "engine.kv_offload_connector=\"vllm\"", "engine.kv_offload_disk_gb=0"]);
    same(CLOSED, &["duration_s=40"]);
    same(QUICK, &["hardware.replicas=2", "hardware.router=\"central-queue\"", "workload.rate=30", "num_requests=2000"]);
    for preset in ["sglang", "trtllm"] {
        let p = format!("engine.preset=\"{preset}\"");
        same(QUICK, &[&p, "workload.rate=25", "num_requests=2000"]);
        same(
            QUICK,
            &[&p, "engine.num_gpu_blocks=600", "engine.max_model_len=8192", "workload.rate=20", "num_requests=1500"],
        );
    }
}
