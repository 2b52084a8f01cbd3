//! The steady-decode fast path must change nothing: every record, every
//! summary field and every chart input are bit-identical with and without it.

use crate::common;
use common::setup;
use servesim::sim::{simulate, simulate_without_fast_path};
use servesim::summarize::summarize;

fn same(text: &str, sets: &[&str]) {
    let s = setup(text, sets);
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
    let (sa, sb) = (summarize(&s, seed, &mut a), summarize(&s, seed, &mut b));
    assert_eq!(serde_json::to_string(&sa).unwrap(), serde_json::to_string(&sb).unwrap(), "{sets:?}: summaries differ");
    assert_eq!(a.timeline, b.timeline);
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
