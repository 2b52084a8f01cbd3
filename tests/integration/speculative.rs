//! Speculative decoding: the emitted-tokens formula, α = 0 never helping,
//! where speculation helps (small memory-bound batches) and where it hurts
//! (large batches), and the engine's invariants with speculative sequences.

use crate::common;

use common::{mean, run, setup};
use servesim::Report;
use servesim::config::SpeculativeConfig;
use servesim::metrics::Status;

/// Llama-3.1-70B on 4 × H100, chat-like lengths; `spec` is the
/// The `legacy` engine: the speculation trade-off measured without host costs.
const LEGACY: &[&str] = &["engine.preset=\"legacy\""];

/// `[engine.speculative]` table body (empty: off).
fn scenario(rate: f64, spec: &str) -> String {
    let spec = if spec.is_empty() { String::new() } else { format!("[engine.speculative]\n{spec}") };
    format!(
        r#"seed = 5
duration_s = 60
[model]
name = "llama-3.1-70b"
[hardware]
gpu = "h100-sxm"
tp = 4
{spec}
[workload]
rate = {rate}
prompt_tokens = {{ dist = "lognormal", median = 800, sigma = 0.6 }}
output_tokens = {{ dist = "lognormal", mean = 300, cv = 0.6 }}
"#
    )
}

fn completed(rep: &Report, f: impl Fn(&servesim::metrics::RequestRecord) -> f64) -> Vec<f64> {
    rep.output.records.iter().filter(|r| r.status == Status::Completed && r.output > 1).map(f).collect()
}

#[test]
fn emitted_tokens_per_step_match_the_formula() {
    for (k, alpha) in [(4u32, 0.7f64), (2, 0.5), (6, 0.9)] {
        let spec = format!("method = \"mtp\"\nnum_tokens = {k}\nacceptance = {alpha}");
        let rep = run(&scenario(2.0, &spec), &["duration_s=200"]);
        let sp = rep.summary.speculative.clone().expect("speculative summary");
        let want = SpeculativeConfig::expected_tokens(k, alpha);
        assert_eq!(sp.expected_tokens_per_step, want);
        let draws = rep.output.replicas.iter().map(|r| r.spec_draws).sum::<u64>();
        assert!(draws > 10_000, "{draws} draws");
        // The sample mean of `draws` i.i.d. emissions: within 4 standard errors (σ ≤ k/2).
        let tol = 4.0 * (k as f64 / 2.0) / (draws as f64).sqrt();
        assert!(
            (sp.drawn_tokens_per_step - want).abs() < tol,
            "k = {k}, α = {alpha}: drawn {} vs formula {want} (tolerance {tol})",
            sp.drawn_tokens_per_step
        );
        // Each request's last step emits only what is left: slightly below.
        assert!(sp.tokens_per_step < sp.drawn_tokens_per_step && sp.tokens_per_step > want * 0.95);
        // Every completed request emitted exactly its output.
        for r in rep.output.records.iter().filter(|r| r.status == Status::Completed) {
            assert_eq!(r.generated, r.output);
        }
    }
}

#[test]
fn acceptance_is_per_class() {
    let toml = scenario(2.0, "method = \"mtp\"\nnum_tokens = 4\nacceptance = 0.2")
        + "[[workload.classes]]\nname = \"code\"\nspec_acceptance = 0.95\n";
    let rep = run(&toml, &[]);
    let sp = rep.summary.speculative.unwrap();
    // The only class overrides the default α.
    let want = SpeculativeConfig::expected_tokens(4, 0.95);
    assert!((sp.drawn_tokens_per_step - want).abs() < 0.05, "{} vs {want}", sp.drawn_tokens_per_step);
}

#[test]
fn zero_acceptance_is_never_faster() {
    for rate in [0.5, 6.0] {
        let off = run(&scenario(rate, ""), &[]);
        for spec in ["method = \"mtp\"", "draft_model = \"llama-3.1-8b\""] {
            let on = run(&scenario(rate, &format!("{spec}\nnum_tokens = 3\nacceptance = 0.0")), &[]);
            assert_eq!(on.summary.speculative.as_ref().unwrap().tokens_per_step, 1.0);
            for (name, f) in [
                ("TPOT", servesim::metrics::RequestRecord::tpot as fn(&_) -> f64),
                ("E2E", servesim::metrics::RequestRecord::e2e),
            ] {
                let (a, b) = (mean(&completed(&off, f)), mean(&completed(&on, f)));
                assert!(b > a, "rate {rate}, {spec}: mean {name} {b} with α = 0 vs {a} without");
            }
        }
    }
}

#[test]
fn helps_small_batches_and_hurts_large_ones() {
    let draft = "draft_model = \"llama-3.1-8b\"\nnum_tokens = 4\nacceptance = 0.7";
    // Light load: small, memory-bound batches; verifying 5 tokens costs about as much as decoding 1.
    let (off, on) = (run(&scenario(0.5, ""), LEGACY), run(&scenario(0.5, draft), LEGACY));
    let (a, b) = (mean(&completed(&off, |r| r.tpot())), mean(&completed(&on, |r| r.tpot())));
    assert!(b < 0.8 * a, "light load: mean TPOT {b} s with speculation vs {a} s without");
    // Overload: large compute-bound batches; the wider verify pass and the
    // draft's steps cost more than the accepted tokens save.
    let (off, on) = (run(&scenario(12.0, ""), LEGACY), run(&scenario(12.0, draft), LEGACY));
    let (a, b) = (off.summary.metrics.output_throughput, on.summary.metrics.output_throughput);
    assert!(b < a, "overload: {b} tok/s with speculation vs {a} without");
    assert!(on.summary.metrics.tpot.dist.median() > off.summary.metrics.tpot.dist.median());
}

#[test]
fn speculative_sequences_keep_the_engine_invariants_under_preemption() {
    // A small cache forces preemptions of speculative sequences, whose
    // accepted tokens are recounted from their draws.
    // With swap, they resume with their KV and fresh draws.
    for mode in ["recompute", "swap"] {
        let s = setup(
            &scenario(6.0, "method = \"mtp\"\nnum_tokens = 4\nacceptance = 0.8"),
            &["engine.preset=\"legacy\"", "engine.num_gpu_blocks=1200", &format!("engine.preemption=\"{mode}\"")],
        );
        let out = servesim::sim::simulate_checked(&s, 9);
        let pre: u64 = out.replicas.iter().map(|r| r.preemptions).sum();
        assert!(pre > 0, "{mode}: no preemptions with a small cache");
        let swapped: u64 = out.replicas.iter().map(|r| r.swaps_out).sum();
        assert_eq!(swapped > 0, mode == "swap");
        let done: Vec<_> = out.records.iter().filter(|r| r.status == Status::Completed).collect();
        assert_eq!(done.len(), out.records.len(), "every request completes");
        assert!(done.iter().all(|r| r.generated == r.output));
    }
}

/// Each speculating sequence takes k + 1 tokens of the step's budget: with
/// Sarathi's 512-token budget, k = 4 and a burst of 256 requests, no step
/// runs more than 512 tokens (before the fix, decodes counted one token each
/// and steps ran at about three times the budget).
#[test]
fn speculating_sequences_take_k_plus_one_tokens_of_the_budget() {
    let text = format!(
        "{}\n[engine]\npreset = \"sarathi\"\nmax_num_seqs = 256\n",
        scenario(1.0, "method = \"mtp\"\nnum_tokens = 4\nacceptance = 0.7")
    )
    .replace("rate = 1\n", "arrival = \"offline\"\n")
    .replace("duration_s = 60", "num_requests = 256");
    let rep = run(&text, &[]);
    let peak = rep.output.replicas.iter().map(|r| r.peak_step_tokens).max().unwrap();
    assert!(peak <= 512, "a step scheduled {peak} tokens against a 512-token budget");
    assert!(peak >= 400, "the budget should be nearly full at times: {peak}");
    assert_eq!(rep.summary.metrics.completed, 256);
    // Without speculation the same budget holds 256 decodes at once.
    let plain = run(&text.replace("num_tokens = 4", "num_tokens = 0"), &[]);
    assert!(plain.output.replicas[0].peak_step_tokens <= 512);
}
