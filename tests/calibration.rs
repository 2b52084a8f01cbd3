//! Calibration of the roofline step-time model against measured step times.
//!
//! Two public data sets (copied under `tests/data/`, licences in its README):
//!
//! * **Splitwise** (`splitwise_perf_model_a100.csv`, MIT, Mutinifni/splitwise-sim
//!   `data/perf_model.csv`): Llama-2-70B at TP 2/4/8 on DGX-A100 80 GB (SXM,
//!   NVLink). `prompt_time` is the prefill of the whole batch (`batch_size`
//!   prompts of `prompt_size` tokens), `token_time` the mean decode step of
//!   the generation at that batch size, both in ms, 5 repetitions per point.
//! * **Sarathi-Serve** figure 2 (`sarathi_figure-2__{decode,prefill}.csv`,
//!   Apache-2.0, microsoft/sarathi-serve): Yi-34B(-200K) at TP 2 on A100 80 GB
//!   PCIe cards joined pairwise by NVLink bridges. `batch_execution_time` is in
//!   **seconds**; decode batches hold `batch_size` requests of 1024 tokens
//!   (about 1020 prompt + 4 output), prefill batches one prompt of
//!   `batch_num_prefill_tokens` tokens.
//!
//! For every measured point the test builds the matching [`StepBatch`], asks
//! [`Roofline`] for the step time under the default cost settings, prints
//! predicted / measured, summarises the error per group, and grid-searches the
//! efficiency factors and step overhead that minimise the median error. Run
//! `cargo test --test calibration -- --nocapture` to see the tables;
//! `docs/calibration.md` discusses them.
//!
//! Error convention: `err = (predicted − measured) / measured`, in percent;
//! bias is the mean signed error (negative = the model is too fast).
//!
//! The assertions only state what the data and the model reliably show (see
//! the comments at each); they are bounds measured with margin, not targets.

use servesim::catalog::{Catalog, GpuSpec, LlmSpec};
use servesim::config::{CostConfig, Dtype, KvDtype};
use servesim::cost::{Roofline, StepBatch, StepCostModel};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Decode,
    Prefill,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Decode => "decode",
            Phase::Prefill => "prefill",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Splitwise,
    Sarathi,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Splitwise => "splitwise",
            Source::Sarathi => "sarathi",
        }
    }
}

/// One replica configuration: a model on `tp` GPUs.
struct Setup {
    llm: LlmSpec,
    gpu: GpuSpec,
    tp: u32,
}

/// One measured step time and the batch that produced it.
struct Point {
    source: Source,
    phase: Phase,
    setup: usize,
    tp: u32,
    /// Prompt tokens per sequence.
    prompt: u32,
    /// Sequences in the step.
    batch: u32,
    /// Requested output tokens (Splitwise `token_size`; 4 for Sarathi decode, 1 for prefill).
    out: u32,
    /// Mean measured step time, ms.
    measured_ms: f64,
    /// Repetitions averaged into `measured_ms`.
    reps: usize,
    step: StepBatch,
    /// Why the point is left out of the statistics and the fit, if it is.
    excluded: Option<&'static str>,
}

impl Point {
    fn label(&self) -> String {
        format!("p={} b={} out={}", self.prompt, self.batch, self.out)
    }
}

struct Data {
    setups: Vec<Setup>,
    points: Vec<Point>,
}

fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Reads a small comma-separated file without quoting: (header, rows).
fn read_csv(name: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let path = data_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines.next().expect("header").split(',').map(|s| s.trim().to_string()).collect();
    let rows = lines.map(|l| l.split(',').map(|s| s.trim().to_string()).collect()).collect();
    (header, rows)
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap_or_else(|| panic!("column {name} missing"))
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|e| panic!("bad number {s:?}: {e}"))
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) }
}

/// Prefill of `b` prompts of `p` tokens each, nothing cached.
fn prefill_step(b: u32, p: u32) -> StepBatch {
    let (bf, pf) = (b as f64, p as f64);
    StepBatch {
        prefill_tokens: b as u64 * p as u64,
        prefill_seqs: b,
        prefill_attn_pairs: bf * pf * (pf + 1.0) / 2.0,
        prefill_ctx_tokens: 0.0,
        logits: b,
        new_requests: b,
        ..Default::default()
    }
}

/// One decode step of `b` sequences, each with `ctx` tokens of context.
fn decode_step(b: u32, ctx: f64) -> StepBatch {
    StepBatch { decode_seqs: b, decode_ctx_tokens: b as f64 * ctx, logits: b, ..Default::default() }
}

/// Yi-34B, which the built-in catalogue lacks, from its public architecture
/// (01-ai/Yi-34B `config.json`): 60 layers, hidden 7168, 56 query heads,
/// 8 KV heads (GQA), head_dim 128, SwiGLU FFN 20480, vocabulary 64000,
/// context 4096, untied embeddings. The Sarathi-Serve run used
/// `01-ai/Yi-34B-200K`, which has the same layer shapes (only the RoPE base
/// and position limit differ); `max_context` does not enter the roofline.
/// Struct-update from Llama-2-70B fills the remaining fields (untied
/// embeddings, dense, full attention -- checked below).
fn yi_34b(base: &LlmSpec) -> LlmSpec {
    let yi = LlmSpec {
        name: "Yi-34B".into(),
        num_layers: 60,
        hidden_size: 7168,
        num_attention_heads: 56,
        num_kv_heads: 8,
        head_dim: 128,
        intermediate_size: 20480,
        vocab_size: 64000,
        max_context: 4096,
        source: "01-ai/Yi-34B config.json (defined inline in tests/calibration.rs)".into(),
        ..base.clone()
    };
    assert!(
        !yi.tie_word_embeddings && !yi.is_moe() && yi.sliding_window.is_none(),
        "Yi-34B: untied, dense, full attention"
    );
    yi
}

/// The Sarathi-Serve machine: A100 80 GB PCIe cards (Azure NC96ads v4) whose
/// tensor-parallel pairs are joined by NVLink bridges. The catalogue's
/// `a100-80gb-pcie` profile models PCIe4 x16 (64 GB/s); a TP-2 all-reduce
/// between bridged cards runs over NVLink3 instead (600 GB/s bidirectional
/// per GPU, the figure the catalogue uses for SXM A100s). Everything else --
/// 1935 GB/s HBM, 312 TFLOP/s, the efficiency factors and the 20 µs per ring
/// hop -- stays as the PCIe profile has it.
fn a100_pcie_nvlink(pcie: &GpuSpec) -> GpuSpec {
    GpuSpec { interconnect: "NVLink3 bridge (pairwise)".into(), interconnect_gbps: 600.0, ..pcie.clone() }
}

fn load() -> Data {
    let cat = Catalog::builtin().expect("built-in catalogue");
    let llama = cat.model("llama-2-70b").expect("llama-2-70b").spec.clone();
    let a100 = cat.gpu("a100-80gb").expect("a100-80gb").spec.clone();
    let pcie = cat.gpu("a100-80gb-pcie").expect("a100-80gb-pcie").spec.clone();
    let mut setups = Vec::new();
    let mut points = Vec::new();

    // --- Splitwise: Llama-2-70B on DGX-A100 80 GB, TP 2/4/8. -------------------
    let (h, rows) = read_csv("splitwise_perf_model_a100.csv");
    let (c_model, c_p, c_b, c_t) =
        (col(&h, "model"), col(&h, "prompt_size"), col(&h, "batch_size"), col(&h, "token_size"));
    let (c_pt, c_tt, c_e2e, c_tp) =
        (col(&h, "prompt_time"), col(&h, "token_time"), col(&h, "e2e_time"), col(&h, "tensor_parallel"));
    // Repetitions grouped by (tp, prompt, batch, token_size): (prompt, token, e2e) times.
    type Reps = Vec<(f64, f64, f64)>;
    let mut groups: BTreeMap<(u32, u32, u32, u32), Reps> = BTreeMap::new();
    for r in rows.iter().filter(|r| r[c_model] == "llama2-70b") {
        let key = (num(&r[c_tp]) as u32, num(&r[c_p]) as u32, num(&r[c_b]) as u32, num(&r[c_t]) as u32);
        groups.entry(key).or_default().push((num(&r[c_pt]), num(&r[c_tt]), num(&r[c_e2e])));
    }
    let mut setup_of_tp = BTreeMap::new();
    for tp in [2, 4, 8] {
        setup_of_tp.insert(tp, setups.len());
        setups.push(Setup { llm: llama.clone(), gpu: a100.clone(), tp });
    }
    // TP 2 at batch 64 is inconsistent with its neighbours: the batch-64
    // prefill (796 ms) is 8x faster than batch 32 (6607 ms) and the decode step
    // is faster than at batch 32. At TP 2 the BF16 weights take ~69 GB of each
    // 80 GB GPU; 64 x 640 tokens of KV cache (327,680 B per token, half per
    // GPU) need another ~6.7 GB per GPU, at or past what is left after
    // activations and the allocator's reserve (vLLM's default 90 % cap leaves
    // ~3 GB). The batch most likely never ran at its nominal size.
    let splitwise_excluded =
        |tp: u32, b: u32| (tp == 2 && b == 64).then_some("TP2 b=64: inconsistent, KV-capacity bound");
    // Prefill: prompt_time does not depend on token_size, so pool all repetitions.
    let mut prefill: BTreeMap<(u32, u32, u32), Vec<f64>> = BTreeMap::new();
    for (&(tp, p, b, _), reps) in &groups {
        prefill.entry((tp, p, b)).or_default().extend(reps.iter().map(|r| r.0));
    }
    for (&(tp, p, b), times) in &prefill {
        points.push(Point {
            source: Source::Splitwise,
            phase: Phase::Prefill,
            setup: setup_of_tp[&tp],
            tp,
            prompt: p,
            batch: b,
            out: 1,
            measured_ms: mean(times),
            reps: times.len(),
            step: prefill_step(b, p),
            excluded: splitwise_excluded(tp, b),
        });
    }
    // Decode: token_time is the mean step over the generation, which starts at
    // context p and grows by one per step. e2e ≈ prompt_time + (n − 1)·token_time
    // gives the tokens n actually generated (generations with token_size ≥ 512
    // stop early), so the mean context is about p + n/2.
    for (&(tp, p, b, t), reps) in &groups {
        let (pt, tt, e2e) = (
            mean(&reps.iter().map(|r| r.0).collect::<Vec<_>>()),
            mean(&reps.iter().map(|r| r.1).collect::<Vec<_>>()),
            mean(&reps.iter().map(|r| r.2).collect::<Vec<_>>()),
        );
        let generated = (((e2e - pt) / tt).round() + 1.0).clamp(1.0, t as f64);
        points.push(Point {
            source: Source::Splitwise,
            phase: Phase::Decode,
            setup: setup_of_tp[&tp],
            tp,
            prompt: p,
            batch: b,
            out: t,
            measured_ms: tt,
            reps: reps.len(),
            step: decode_step(b, p as f64 + generated / 2.0),
            excluded: splitwise_excluded(tp, b),
        });
    }

    // --- Sarathi-Serve figure 2: Yi-34B TP 2 on A100 80 GB PCIe + NVLink bridge.
    let yi = setups.len();
    setups.push(Setup { llm: yi_34b(&llama), gpu: a100_pcie_nvlink(&pcie), tp: 2 });
    let (h, rows) = read_csv("sarathi_figure-2__decode.csv");
    let (c_bs, c_time, c_dec) =
        (col(&h, "batch_size"), col(&h, "batch_execution_time"), col(&h, "batch_num_decode_tokens"));
    for r in &rows {
        let b = num(&r[c_bs]) as u32;
        assert_eq!(num(&r[c_dec]) as u32, b, "decode batch: one token per sequence");
        // 1024-token requests split 255:1 -> 1020 prompt + 4 output; the three
        // decode steps run at contexts 1021..1023.
        points.push(Point {
            source: Source::Sarathi,
            phase: Phase::Decode,
            setup: yi,
            tp: 2,
            prompt: 1020,
            batch: b,
            out: 4,
            measured_ms: num(&r[c_time]) * 1e3,
            reps: 1,
            step: decode_step(b, 1022.0),
            excluded: None,
        });
    }
    let (h, rows) = read_csv("sarathi_figure-2__prefill.csv");
    let (c_pf, c_time, c_id) =
        (col(&h, "batch_num_prefill_tokens"), col(&h, "batch_execution_time"), col(&h, "Batch Id"));
    for r in &rows {
        let p = num(&r[c_pf]) as u32;
        // Batch Id 0 was the first batch the engine ran (the 256-token prompt,
        // slower than the 512-token one): a warm-up effect, not a step time.
        let first = num(&r[c_id]) == 0.0;
        points.push(Point {
            source: Source::Sarathi,
            phase: Phase::Prefill,
            setup: yi,
            tp: 2,
            prompt: p,
            batch: 1,
            out: 1,
            measured_ms: num(&r[c_time]) * 1e3,
            reps: 1,
            step: prefill_step(1, p),
            excluded: first.then_some("first batch run (warm-up)"),
        });
    }
    Data { setups, points }
}

/// Predicted step time of every point, ms.
fn predict(d: &Data, cost: &CostConfig) -> Vec<f64> {
    let mut models: Vec<Roofline> =
        d.setups.iter().map(|s| Roofline::new(&s.llm, &s.gpu, s.tp, Dtype::Bf16, KvDtype::Bf16, cost)).collect();
    d.points.iter().map(|p| models[p.setup].step(&p.step).time * 1e3).collect()
}

fn err_pct(pred: f64, meas: f64) -> f64 {
    100.0 * (pred - meas) / meas
}

#[derive(Clone, Copy, Debug)]
struct Stats {
    n: usize,
    median_abs: f64,
    max_abs: f64,
    bias: f64,
}

fn stats(errs: &[f64]) -> Stats {
    let abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    Stats {
        n: errs.len(),
        median_abs: median(&abs),
        max_abs: abs.iter().cloned().fold(0.0, f64::max),
        bias: mean(errs),
    }
}

/// Errors (%) of the included points selected by `keep`.
fn errs_where(d: &Data, pred: &[f64], keep: impl Fn(&Point) -> bool) -> Vec<f64> {
    d.points
        .iter()
        .zip(pred)
        .filter(|(p, _)| p.excluded.is_none() && keep(p))
        .map(|(p, &x)| err_pct(x, p.measured_ms))
        .collect()
}

/// Selects points.
type Keep = fn(&Point) -> bool;

/// A subset of the points over which factors are fitted.
struct Scope {
    name: &'static str,
    keep: Keep,
}

fn scopes() -> Vec<Scope> {
    vec![
        Scope { name: "splitwise, all TP (A100-80GB SXM)", keep: |p| p.source == Source::Splitwise },
        Scope { name: "splitwise TP2", keep: |p| p.source == Source::Splitwise && p.tp == 2 },
        Scope { name: "splitwise TP4", keep: |p| p.source == Source::Splitwise && p.tp == 4 },
        Scope { name: "splitwise TP8", keep: |p| p.source == Source::Splitwise && p.tp == 8 },
        Scope { name: "sarathi TP2 (A100-80GB PCIe + NVLink)", keep: |p| p.source == Source::Sarathi },
        Scope { name: "both sources", keep: |_| true },
    ]
}

/// Fit objective: the mean of the decode and the prefill median |error| (%),
/// so that neither phase dominates by its number of points.
fn objective(d: &Data, pred: &[f64], keep: Keep) -> (f64, f64, f64) {
    let dec = errs_where(d, pred, |p| keep(p) && p.phase == Phase::Decode);
    let pre = errs_where(d, pred, |p| keep(p) && p.phase == Phase::Prefill);
    let m = |e: &[f64]| if e.is_empty() { 0.0 } else { median(&e.iter().map(|x| x.abs()).collect::<Vec<_>>()) };
    let (md, mp) = (m(&dec), m(&pre));
    (0.5 * (md + mp), md, mp)
}

/// Cost settings: `None` keeps the GPU profile's efficiency.
fn cost(ce: Option<f64>, me: Option<f64>, overhead_ms: f64) -> CostConfig {
    CostConfig { compute_efficiency: ce, memory_efficiency: me, step_overhead_ms: overhead_ms, ..Default::default() }
}

/// Best settings of one scope: objective, decode and prefill median |err|,
/// and the factors (None = profile value).
#[derive(Clone, Copy, Debug)]
struct Fit {
    obj: f64,
    dec: f64,
    pre: f64,
    ce: Option<f64>,
    me: Option<f64>,
    oh: f64,
}

/// Exhaustive search over `ces × mes × ohs`; the best settings per scope.
fn grid_search(d: &Data, scopes: &[Scope], ces: &[Option<f64>], mes: &[Option<f64>], ohs: &[f64]) -> Vec<Fit> {
    let none = Fit { obj: f64::INFINITY, dec: 0.0, pre: 0.0, ce: None, me: None, oh: 0.0 };
    let mut best = vec![none; scopes.len()];
    for &ce in ces {
        for &me in mes {
            for &oh in ohs {
                let pred = predict(d, &cost(ce, me, oh));
                for (s, b) in scopes.iter().zip(best.iter_mut()) {
                    let (obj, dec, pre) = objective(d, &pred, s.keep);
                    if obj < b.obj {
                        *b = Fit { obj, dec, pre, ce, me, oh };
                    }
                }
            }
        }
    }
    best
}

/// The grids: efficiencies in steps of 0.02, overhead in steps of 0.5 ms.
fn grid_ce() -> Vec<Option<f64>> {
    (15..=50).map(|i| Some(i as f64 * 0.02)).collect() // 0.30 ..= 1.00
}
fn grid_me() -> Vec<Option<f64>> {
    (20..=50).map(|i| Some(i as f64 * 0.02)).collect() // 0.40 ..= 1.00
}
fn grid_oh() -> Vec<f64> {
    (0..=60).map(|i| i as f64 * 0.5).collect() // 0 ..= 30 ms
}

/// Markdown table of per-group error statistics for the given predictions.
fn group_table(d: &Data, pred: &[f64]) -> String {
    let mut out = String::from(
        "| source | phase | TP | n | median abs err % | max abs err % | bias % |\n|---|---|---|---|---|---|---|\n",
    );
    let mut row = |src: &str, phase: &str, tp: &str, e: Vec<f64>| {
        if e.is_empty() {
            return;
        }
        let s = stats(&e);
        writeln!(out, "| {src} | {phase} | {tp} | {} | {:.1} | {:.1} | {:+.1} |", s.n, s.median_abs, s.max_abs, s.bias)
            .unwrap();
    };
    for src in [Source::Splitwise, Source::Sarathi] {
        for phase in [Phase::Decode, Phase::Prefill] {
            for tp in [2, 4, 8] {
                row(
                    src.name(),
                    phase.name(),
                    &tp.to_string(),
                    errs_where(d, pred, |p| p.source == src && p.phase == phase && p.tp == tp),
                );
            }
            if src == Source::Splitwise {
                row(src.name(), phase.name(), "all", errs_where(d, pred, |p| p.source == src && p.phase == phase));
            }
        }
    }
    for phase in [Phase::Decode, Phase::Prefill] {
        let (src, ph) = (Source::Splitwise.name(), phase.name());
        row(
            src,
            &format!("{ph}, b=1"),
            "all",
            errs_where(d, pred, |p| p.source == Source::Splitwise && p.phase == phase && p.batch == 1),
        );
        row(
            src,
            &format!("{ph}, b>1"),
            "all",
            errs_where(d, pred, |p| p.source == Source::Splitwise && p.phase == phase && p.batch > 1),
        );
    }
    for phase in [Phase::Decode, Phase::Prefill] {
        row("both", phase.name(), "all", errs_where(d, pred, |p| p.phase == phase));
    }
    out
}

fn show(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "profile".into())
}

/// Least-squares slope of y against x.
fn slope(xy: &[(f64, f64)]) -> f64 {
    let (mx, my) =
        (mean(&xy.iter().map(|p| p.0).collect::<Vec<_>>()), mean(&xy.iter().map(|p| p.1).collect::<Vec<_>>()));
    let num: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let den: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    num / den
}

/// Decode points of a batch sweep: (source, tp) with the prompt and output fixed.
fn batch_sweep(p: &Point, src: Source, tp: u32) -> bool {
    p.source == src
        && p.tp == tp
        && p.phase == Phase::Decode
        && p.excluded.is_none()
        && (src == Source::Sarathi || (p.prompt == 512 && p.out == 128))
}

#[test]
fn calibration_report() {
    let d = load();
    let default = predict(&d, &CostConfig::default());
    let scopes = scopes();
    let full = grid_search(&d, &scopes, &grid_ce(), &grid_me(), &grid_oh());
    let fixed_oh = grid_search(&d, &scopes, &grid_ce(), &grid_me(), &[0.5]);
    let oh_only = grid_search(&d, &scopes, &[None], &[None], &grid_oh());
    let (sw, sa) = (full[0], full[4]);
    let fitted_sw = predict(&d, &cost(sw.ce, sw.me, sw.oh));
    let fitted_sa = predict(&d, &cost(sa.ce, sa.me, sa.oh));
    // Each point under the full fit of its own source.
    let fitted: Vec<f64> = d
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| if p.source == Source::Splitwise { fitted_sw[i] } else { fitted_sa[i] })
        .collect();

    println!(
        "\nPer-point step times (ms). err = (pred - meas) / meas. 'fit' = the full fit of the point's own source."
    );
    println!(
        "{:<9} {:<7} {:>2} {:<22} {:>4} {:>9} {:>9} {:>6} {:>7} {:>9} {:>7}  note",
        "source", "phase", "tp", "point", "reps", "measured", "pred", "ratio", "err%", "pred fit", "err%"
    );
    for (i, p) in d.points.iter().enumerate() {
        println!(
            "{:<9} {:<7} {:>2} {:<22} {:>4} {:>9.1} {:>9.1} {:>6.2} {:>+7.1} {:>9.1} {:>+7.1}  {}",
            p.source.name(),
            p.phase.name(),
            p.tp,
            p.label(),
            p.reps,
            p.measured_ms,
            default[i],
            default[i] / p.measured_ms,
            err_pct(default[i], p.measured_ms),
            fitted[i],
            err_pct(fitted[i], p.measured_ms),
            p.excluded.map(|s| format!("EXCLUDED: {s}")).unwrap_or_default(),
        );
    }
    println!(
        "\nDefault cost settings (profile efficiencies 0.70 / 0.80, 0.5 ms step overhead); excluded points left out:\n{}",
        group_table(&d, &default)
    );
    println!("Fitted settings (each source under its own full fit):\n{}", group_table(&d, &fitted));
    println!("Grid search. objective = mean of the decode and prefill median |err| %; dec / pre = those medians.");
    println!(
        "| scope | search | compute_eff | memory_eff | step_overhead_ms | objective | dec | pre |\n|---|---|---|---|---|---|---|---|"
    );
    for (i, s) in scopes.iter().enumerate() {
        let (o, dd, pp) = objective(&d, &default, s.keep);
        println!("| {} | default | profile | profile | 0.5 | {o:.1} | {dd:.1} | {pp:.1} |", s.name);
        for (name, f) in
            [("overhead only", oh_only[i]), ("efficiencies, overhead 0.5", fixed_oh[i]), ("all three", full[i])]
        {
            println!(
                "| {} | {name} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                s.name,
                show(f.ce),
                show(f.me),
                f.oh,
                f.obj,
                f.dec,
                f.pre
            );
        }
    }

    println!(
        "Cross-check: each source's points under the other source's full fit (different model, GPU variant, engine):"
    );
    for (name, pred, src) in [
        ("splitwise fit on sarathi", &fitted_sw, Source::Sarathi),
        ("sarathi fit on splitwise", &fitted_sa, Source::Splitwise),
    ] {
        for phase in [Phase::Decode, Phase::Prefill] {
            let st = stats(&errs_where(&d, pred, |p| p.source == src && p.phase == phase));
            println!(
                "  {name}, {}: median |err| {:.1} %, max {:.1} %, bias {:+.1} %",
                phase.name(),
                st.median_abs,
                st.max_abs,
                st.bias
            );
        }
    }

    // Diagnostics for the discussion in docs/calibration.md.
    println!("\nDecode step growth with batch size (least-squares slope, ms per extra sequence):");
    for (src, tp) in [(Source::Splitwise, 2), (Source::Splitwise, 4), (Source::Splitwise, 8), (Source::Sarathi, 2)] {
        let pts: Vec<usize> = (0..d.points.len()).filter(|&i| batch_sweep(&d.points[i], src, tp)).collect();
        let meas: Vec<(f64, f64)> = pts.iter().map(|&i| (d.points[i].batch as f64, d.points[i].measured_ms)).collect();
        let pred: Vec<(f64, f64)> = pts.iter().map(|&i| (d.points[i].batch as f64, default[i])).collect();
        println!("  {} TP{tp}: measured {:.3}, predicted {:.3}", src.name(), slope(&meas), slope(&pred));
    }
    println!("Compute efficiency alone fitted to prefill (memory efficiency from the profile, 0.5 ms overhead):");
    let prefill_scopes: [(&str, Keep); 6] = [
        ("splitwise TP2, b=1", |p| {
            p.source == Source::Splitwise && p.phase == Phase::Prefill && p.tp == 2 && p.batch == 1
        }),
        ("splitwise TP4, b=1", |p| {
            p.source == Source::Splitwise && p.phase == Phase::Prefill && p.tp == 4 && p.batch == 1
        }),
        ("splitwise TP8, b=1", |p| {
            p.source == Source::Splitwise && p.phase == Phase::Prefill && p.tp == 8 && p.batch == 1
        }),
        ("splitwise all TP, b=1", |p| p.source == Source::Splitwise && p.phase == Phase::Prefill && p.batch == 1),
        ("splitwise all TP, b>1", |p| p.source == Source::Splitwise && p.phase == Phase::Prefill && p.batch > 1),
        ("sarathi TP2, b=1", |p| p.source == Source::Sarathi && p.phase == Phase::Prefill),
    ];
    let preds: Vec<(f64, Vec<f64>)> =
        grid_ce().into_iter().map(|ce| (ce.unwrap(), predict(&d, &cost(ce, None, 0.5)))).collect();
    for (name, keep) in prefill_scopes {
        let med = |pr: &[f64]| stats(&errs_where(&d, pr, keep));
        let (ce, best) = preds
            .iter()
            .map(|(ce, pr)| (*ce, med(pr)))
            .min_by(|a, b| a.1.median_abs.total_cmp(&b.1.median_abs))
            .unwrap();
        println!(
            "  {name}: compute_eff {ce:.2}: median |err| {:.1} %, max {:.1} %, bias {:+.1} %",
            best.median_abs, best.max_abs, best.bias
        );
    }
    println!(
        "Share of the all-reduce hop latency in the default decode prediction (Llama-2-70B, p=512, b=1, A100-80GB):"
    );
    let cat = Catalog::builtin().unwrap();
    let llama = cat.model("llama-2-70b").unwrap().spec.clone();
    let a100 = cat.gpu("a100-80gb").unwrap().spec.clone();
    let no_latency = GpuSpec { allreduce_latency_us: 0.0, ..a100.clone() };
    for tp in [2, 4, 8] {
        let step = decode_step(1, 576.0);
        let with =
            Roofline::new(&llama, &a100, tp, Dtype::Bf16, KvDtype::Bf16, &CostConfig::default()).step(&step).time * 1e3;
        let without =
            Roofline::new(&llama, &no_latency, tp, Dtype::Bf16, KvDtype::Bf16, &CostConfig::default()).step(&step).time
                * 1e3;
        println!("  TP{tp}: {with:.1} ms, of which hop latency {:.1} ms", with - without);
    }

    // ---- Assertions on the fit. ---------------------------------------------
    // The grids contain the defaults (0.70, 0.80, 0.5 ms), so a fit can only
    // match or beat them.
    for (i, s) in scopes.iter().enumerate() {
        let o = objective(&d, &default, s.keep).0;
        for f in [full[i], fixed_oh[i], oh_only[i]] {
            assert!(f.obj <= o + 1e-9, "{}: fit {} worse than default {o}", s.name, f.obj);
        }
    }
    // With three free factors the Splitwise set is fitted to a few per cent in
    // median (observed: decode 1.8 %, prefill 9.6 %), and the Sarathi set
    // much less well (observed: decode 21.8 %, prefill 6.5 %).
    assert!(sw.dec < 5.0 && sw.pre < 15.0, "splitwise fit {sw:?}");
    assert!(sa.dec < 30.0 && sa.pre < 12.0, "sarathi fit {sa:?}");
    // Even fitted, the model cannot follow how decode time grows with batch
    // size: the worst fitted decode point stays far off (observed 34 % for
    // Splitwise, 60 % for Sarathi). Asserted so that a structural fix shows up.
    let worst = |src: Source| stats(&errs_where(&d, &fitted, |p| p.source == src && p.phase == Phase::Decode)).max_abs;
    assert!(worst(Source::Splitwise) > 20.0 && worst(Source::Sarathi) > 40.0);
}

/// Facts about the measurements themselves that the other tests lean on.
#[test]
fn measured_data_is_consistent() {
    let d = load();
    assert_eq!(d.points.iter().filter(|p| p.source == Source::Splitwise && p.phase == Phase::Decode).count(), 57);
    assert_eq!(d.points.iter().filter(|p| p.source == Source::Splitwise && p.phase == Phase::Prefill).count(), 39);
    assert_eq!(d.points.iter().filter(|p| p.source == Source::Sarathi).count(), 16);
    assert_eq!(d.points.iter().filter(|p| p.excluded.is_some()).count(), 3);
    let used: Vec<&Point> = d.points.iter().filter(|p| p.excluded.is_none()).collect();
    // Longer prompts and bigger batches take longer to prefill; bigger decode
    // batches take longer per step (within a TP degree and a source).
    for a in &used {
        for b in &used {
            if a.source != b.source || a.tp != b.tp || a.phase != b.phase {
                continue;
            }
            let longer = match a.phase {
                Phase::Prefill => {
                    (a.batch == b.batch && a.prompt > b.prompt) || (a.prompt == b.prompt && a.batch > b.batch)
                }
                Phase::Decode => a.prompt == b.prompt && a.out == b.out && a.batch > b.batch,
            };
            // Splitwise decode steps at batch 1 and 2 are within noise of each other.
            let noise = if a.phase == Phase::Decode && a.batch <= 2 { 1.02 } else { 1.0 };
            if longer {
                assert!(
                    a.measured_ms * noise > b.measured_ms,
                    "measured {} {} vs {}",
                    a.source.name(),
                    a.label(),
                    b.label()
                );
            }
        }
    }
    // TP 8 beats TP 2 at every Splitwise point, prefill and decode.
    for a in used.iter().filter(|p| p.tp == 8) {
        let b = used
            .iter()
            .find(|b| b.tp == 2 && b.phase == a.phase && b.prompt == a.prompt && b.batch == a.batch && b.out == a.out);
        if let Some(b) = b {
            assert!(a.measured_ms < b.measured_ms, "measured TP8 {} not faster", a.label());
        }
    }
}

/// The model's predictions keep the orderings the measurements show.
#[test]
fn predictions_are_monotone() {
    let d = load();
    let pred = predict(&d, &CostConfig::default());
    let ix: Vec<usize> = (0..d.points.len()).collect();
    for &i in &ix {
        assert!(pred[i].is_finite() && pred[i] > 0.0);
        for &j in &ix {
            let (a, b) = (&d.points[i], &d.points[j]);
            if a.setup != b.setup || a.phase != b.phase {
                continue;
            }
            let longer = match a.phase {
                Phase::Prefill => {
                    (a.batch == b.batch && a.prompt > b.prompt) || (a.prompt == b.prompt && a.batch > b.batch)
                }
                // Bigger batch, or same batch with a longer context.
                Phase::Decode => a.batch >= b.batch && a.step.decode_ctx_tokens > b.step.decode_ctx_tokens,
            };
            if longer {
                assert!(pred[i] > pred[j], "predicted {} {} vs {}", a.source.name(), a.label(), b.label());
            }
        }
    }
    // TP 8 (and TP 4) predicted faster than TP 2 for every Splitwise batch.
    // (TP 8 is not predicted faster than TP 4 for small decode batches: its
    // 14 ring hops of 10 µs per all-reduce cost more than the weight reads
    // saved. The measured TP 4 and TP 8 steps at batch <= 8 differ by at
    // most ~6 %, TP 8 as often the slower.)
    let s = &d.setups[0];
    assert_eq!(s.tp, 2);
    let mut tp2 = Roofline::new(&s.llm, &s.gpu, 2, Dtype::Bf16, KvDtype::Bf16, &CostConfig::default());
    for (i, a) in d.points.iter().enumerate().filter(|(_, p)| p.source == Source::Splitwise && p.tp != 2) {
        let t2 = tp2.step(&a.step).time * 1e3;
        assert!(pred[i] < t2, "TP{} {} {} not faster than TP2", a.tp, a.phase.name(), a.label());
    }
}

/// Error of the default settings: loose bounds observed with margin. The
/// roofline with the profile factors is optimistic everywhere: every group's
/// bias is negative, and decode on the Sarathi set is off by half or more.
#[test]
fn default_error_bounds() {
    let d = load();
    let pred = predict(&d, &CostConfig::default());
    let group = |src: Source, phase: Phase| stats(&errs_where(&d, &pred, |p| p.source == src && p.phase == phase));
    // (source, phase, observed median |err| %, bound).
    let cases = [
        (Source::Splitwise, Phase::Decode, 26.5, 35.0),
        (Source::Splitwise, Phase::Prefill, 23.4, 30.0),
        (Source::Sarathi, Phase::Decode, 61.3, 70.0),
        (Source::Sarathi, Phase::Prefill, 18.6, 25.0),
    ];
    for (src, phase, observed, bound) in cases {
        let s = group(src, phase);
        assert!(
            s.median_abs < bound,
            "{} {}: median |err| {:.1} % (was {observed} %)",
            src.name(),
            phase.name(),
            s.median_abs
        );
        assert!(
            s.bias < 0.0,
            "{} {}: bias {:+.1} %: the model is no longer optimistic; update docs/calibration.md",
            src.name(),
            phase.name(),
            s.bias
        );
    }
    // No included point is predicted more than 90 % off (observed max 79 %).
    let all = stats(&errs_where(&d, &pred, |_| true));
    assert!(all.max_abs < 90.0, "max |err| {:.1} %", all.max_abs);
}
