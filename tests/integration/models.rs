//! The architectures of Step 11 (issue 24, section 3): per-layer attention
//! kinds, MLA, linear attention, MXFP4 experts, and the GPUs' NVLink domain.
//! Each expectation is the arithmetic of the model's public config, worked
//! out in docs/research/architectures-and-gpus.md.

use crate::common;

use servesim::Catalog;
use servesim::config::{CostConfig, Dtype, KvDtype};
use servesim::cost::{KernelModel, Layout, StepBatch, StepCostModel};
use servesim::spec::LlmSpec;

fn llm(name: &str) -> LlmSpec {
    Catalog::builtin().unwrap().model(name).unwrap().spec.clone()
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got / want - 1.0).abs() <= rel
}

#[test]
fn parameter_counts_match_the_published_totals() {
    // Model cards / READMEs: gpt-oss 116.8B and 20.9B (biases, 0.03 %, left
    // out), DeepSeek-V3 671B without its MTP module, Qwen3.5-9B's GGUF 8.95B,
    // Qwen3-Next 79.7B from its config, GLM-5 744B (its card; the shapes sum
    // to 743.9B without the MTP layer, the DSA indexer's 9.4M per layer in).
    for (name, total) in [
        ("gpt-oss-120b", 116.8e9),
        ("gpt-oss-20b", 20.9e9),
        ("deepseek-v3", 671.0e9),
        ("qwen3.5-9b", 8.95e9),
        ("qwen3-next-80b-a3b", 79.7e9),
        ("glm-5", 744.0e9),
    ] {
        let p = llm(name).total_params();
        assert!(close(p, total, 0.002), "{name}: {p:.4e} parameters, published {total:.4e}");
    }
}

#[test]
fn kv_bytes_per_token_count_only_the_layers_that_keep_every_token() {
    // gpt-oss-120b: 18 full layers × K and V × 8 heads × 64 × 2 B.
    let oss = llm("gpt-oss-120b");
    assert_eq!(oss.kv_bytes_per_token(36.0, 1.0, 2.0), 36_864.0);
    // Its 18 sliding layers hold the window plus one partly filled block.
    assert_eq!(oss.seq_state_bytes(36.0, 1.0, 2.0, 16), 18.0 * 2048.0 * (128.0 + 16.0));
    // Qwen3.5-9B: 8 full-attention layers × 2 × 4 × 256 × 2 B; its 24
    // DeltaNet layers hold 32 value heads × 128 × 128 in FP32 (48 MiB) plus
    // three convolution inputs of 2·16·128 + 32·128 in BF16.
    let q = llm("qwen3.5-9b");
    assert_eq!(q.kv_bytes_per_token(32.0, 1.0, 2.0), 32_768.0);
    let state = 24.0 * (32.0 * 128.0 * 128.0 * 4.0 + 3.0 * 8192.0 * 2.0);
    assert_eq!(q.seq_state_bytes(32.0, 1.0, 2.0, 16), state);
    // Halved under tp 2 (heads split).
    assert_eq!(q.seq_state_bytes(32.0, 2.0, 2.0, 16), state / 2.0);
    // DeepSeek-V3: MLA's latent (512) and rotary key (64) per layer, 61 layers,
    // replicated on every tensor-parallel GPU.
    let ds = llm("deepseek-v3");
    assert_eq!(ds.kv_bytes_per_token(61.0, 1.0, 2.0), 70_272.0);
    assert_eq!(ds.kv_bytes_per_token(61.0, 8.0, 2.0), 70_272.0);
    assert_eq!(ds.seq_state_bytes(61.0, 8.0, 2.0, 64), 0.0);
    // A uniform model keeps today's arithmetic.
    let l = llm("llama-3.1-8b");
    assert_eq!(l.kv_bytes_per_token(32.0, 1.0, 2.0), 131_072.0);
    assert_eq!(l.seq_state_bytes(32.0, 1.0, 2.0, 16), 0.0);
}

const GPT_OSS: &str = r#"
num_requests = 50
seed = 3
[model]
name = "gpt-oss-120b"
[hardware]
gpu = "h100-sxm"
tp = 1
[engine]
preset = "vllm-v1"
max_model_len = 32768
[workload]
arrival = "poisson"
rate = 5.0
prompt_tokens = { dist = "fixed", value = 1000 }
output_tokens = { dist = "fixed", value = 100 }
"#;

#[test]
fn mxfp4_experts_take_their_own_bytes_and_state_is_reserved_per_sequence() {
    let s = common::setup(GPT_OSS, &[]);
    let m = &s.pools[0].memory;
    // The model card's 60.8 GiB checkpoint: experts at 4.25 bits, the rest BF16.
    assert!(close(m.weights_gib_per_gpu, 60.8, 0.01), "weights {} GiB", m.weights_gib_per_gpu);
    assert_eq!(m.kv_bytes_per_token_per_gpu, 36_864.0);
    assert!(m.formula.contains("per-sequence state"), "{}", m.formula);
    // The same model with every layer attending fully holds more per token and no state.
    let mut full = llm("gpt-oss-120b");
    full.sliding_window = None;
    full.sliding_window_layers = None;
    assert_eq!(full.kv_bytes_per_token(36.0, 1.0, 2.0), 2.0 * 36_864.0);
    let r = servesim::run_setup(&s, 3);
    assert_eq!(r.summary.metrics.completed, r.summary.metrics.measured_requests);
    assert!(r.summary.metrics.completed > 0);
}

fn decode(b: u32, ctx: f64) -> StepBatch {
    StepBatch { decode_seqs: b, decode_ctx_tokens: b as f64 * ctx, logits: b, ..Default::default() }
}

fn step(l: &LlmSpec, gpu: &str, b: &StepBatch) -> f64 {
    let g = Catalog::builtin().unwrap().gpu(gpu).unwrap().spec.clone();
    let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
    KernelModel::new(l, &g, &Layout::tensor(1), Dtype::Bf16, KvDtype::Bf16, &cost).step(b).time
}

#[test]
fn attention_grows_with_context_only_in_the_layers_that_read_it() {
    // Qwen3.5-9B: going from 1K to 32K tokens of context costs only its 8
    // full-attention layers, a quarter of what the same model pays when
    // all 32 layers attend fully.
    let hybrid = llm("qwen3.5-9b");
    let mut dense = hybrid.clone();
    dense.linear_attention = None;
    let grow = |l: &LlmSpec| step(l, "h100-sxm", &decode(64, 32_768.0)) - step(l, "h100-sxm", &decode(64, 1024.0));
    let ratio = grow(&hybrid) / grow(&dense);
    assert!((0.2..0.3).contains(&ratio), "context growth hybrid / all-full = {ratio}");
    // gpt-oss: the sliding layers read at most 128 keys, so long contexts
    // cost about half of what they would with every layer full.
    let oss = llm("gpt-oss-120b");
    let mut full = oss.clone();
    full.sliding_window = None;
    full.sliding_window_layers = None;
    let r = grow(&oss) / grow(&full);
    assert!((0.45..0.55).contains(&r), "context growth sliding / full = {r}");
}

#[test]
fn mla_attention_reads_the_latent_not_per_head_keys() {
    // DeepSeek-V3 at tp 8: decode attention reads 576 elements per token and
    // layer. Its context growth per token is far below a GQA model with 128
    // KV heads of 128 (the config's nominal shape).
    let ds = llm("deepseek-v3");
    let mut gqa = ds.clone();
    gqa.mla = None;
    let g = Catalog::builtin().unwrap().gpu("h200").unwrap().spec.clone();
    let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
    let time = |l: &LlmSpec, ctx: f64| {
        KernelModel::new(l, &g, &Layout::tensor(8), Dtype::Fp8, KvDtype::Bf16, &cost).step(&decode(32, ctx)).time
    };
    let mla = time(&ds, 16_384.0) - time(&ds, 1024.0);
    let nominal = time(&gqa, 16_384.0) - time(&gqa, 1024.0);
    assert!(mla > 0.0 && mla < nominal / 3.0, "MLA {mla} s vs nominal GQA {nominal} s");
}

#[test]
fn tensor_parallelism_stays_inside_the_nvlink_domain() {
    let base = r#"
num_requests = 10
[model]
name = "llama-3.1-405b"
dtype = "fp8"
[hardware]
gpu = "GPU"
tp = 16
[workload]
arrival = "poisson"
rate = 1.0
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
"#;
    let err = common::config_error(&base.replace("GPU", "h100-sxm"), &[]);
    assert!(err.contains("hardware.tp") && err.contains("NVLink domain") && err.contains("gb200"), "{err}");
    // A GB200 NVL72 rack joins 72 GPUs.
    assert_eq!(common::config_error(&base.replace("GPU", "gb200"), &[]), "");
}

#[test]
fn hybrid_fields_are_checked() {
    let mut l = llm("gpt-oss-20b");
    l.sliding_window = None;
    assert!(l.validate().unwrap_err().contains("sliding_window"));
    let mut q = llm("qwen3.5-9b");
    q.linear_attention.as_mut().unwrap().layers = 32;
    assert!(q.validate().unwrap_err().contains("linear_attention.layers"));
    let mut d = llm("llama-3.1-8b");
    d.expert_weight_bits = Some(4.25);
    assert!(d.validate().unwrap_err().contains("MoE"));
}

#[test]
fn a_model_too_big_for_one_domain_gets_a_fix_inside_it() {
    // DeepSeek-V3 in FP8 (627 GiB) does not fit 8 × H100 under any engine;
    // the error says how much the GPUs hold (never a negative amount, as
    // TensorRT-LLM's plan once printed) and suggests no tp beyond the domain.
    let text = GPT_OSS
        .replace("gpt-oss-120b", "deepseek-v3\"\ndtype = \"fp8")
        .replace("tp = 1", "tp = 8")
        .replace("max_model_len = 32768", "max_model_len = 16384");
    for preset in ["vllm-v1", "sglang", "trtllm"] {
        let err = common::config_error(&text.replace("vllm-v1", preset), &[]);
        assert!(err.contains("needs 626.7 GiB") && err.contains("8 × H100-SXM holds"), "{preset}: {err}");
        assert!(!err.contains("holds -") && !err.contains("tp = 16"), "{preset}: {err}");
    }
}

#[test]
fn fp4_weights_use_fp4_tensor_cores_only_where_the_gpu_has_them() {
    // Llama-3.3-70B on one GPU: a 4,096-token prefill is compute-bound, a
    // 64-sequence decode streams the weights.
    let l = llm("llama-3.3-70b");
    let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
    let prefill = StepBatch {
        prefill_tokens: 4096,
        prefill_seqs: 1,
        prefill_attn_pairs: 4096.0 * 4097.0 / 2.0,
        logits: 1,
        ..Default::default()
    };
    let time = |gpu: &str, d: Dtype, b: &StepBatch| {
        let g = Catalog::builtin().unwrap().gpu(gpu).unwrap().spec.clone();
        KernelModel::new(&l, &g, &Layout::tensor(1), d, KvDtype::Bf16, &cost).step(b).time
    };
    // B200 has FP4 units (9 PF dense, twice FP8): the prefill's GEMMs run at
    // about twice the FP8 rate, so the step is clearly shorter.
    let (b_fp8, b_fp4) = (time("b200", Dtype::Fp8, &prefill), time("b200", Dtype::Fp4, &prefill));
    assert!(b_fp4 < 0.75 * b_fp8, "B200 prefill fp4 {b_fp4} s vs fp8 {b_fp8} s");
    // H100 has none: vLLM's Marlin fallback computes in BF16, so an FP4
    // prefill is no faster than BF16 and slower than FP8 ...
    let (h_bf16, h_fp8, h_fp4) = (
        time("h100-sxm", Dtype::Bf16, &prefill),
        time("h100-sxm", Dtype::Fp8, &prefill),
        time("h100-sxm", Dtype::Fp4, &prefill),
    );
    assert!(h_fp4 > h_fp8 && close(h_fp4, h_bf16, 0.05), "H100 prefill fp4 {h_fp4} / fp8 {h_fp8} / bf16 {h_bf16}");
    // ... while its decode still streams 4.5-bit weights: faster than FP8.
    let d = decode(64, 2048.0);
    let (h_fp8_d, h_fp4_d) = (time("h100-sxm", Dtype::Fp8, &d), time("h100-sxm", Dtype::Fp4, &d));
    assert!(h_fp4_d < 0.8 * h_fp8_d, "H100 decode fp4 {h_fp4_d} s vs fp8 {h_fp8_d} s");
    // An FP4 weight takes 4.5 bits (16 E2M1 values share one FP8 scale).
    assert_eq!(Dtype::Fp4.bytes(), 0.5625);
}

#[test]
fn sparse_attention_reads_the_top_k_and_its_indexer_scans_every_token() {
    // GLM-5 (DSA): each token keeps its 576-wide latent (BF16) and a 132 B
    // FP8 index key in all 78 layers.
    let glm = llm("glm-5");
    assert_eq!(glm.kv_bytes_per_token(78.0, 1.0, 2.0), 78.0 * (576.0 * 2.0 + 132.0));
    let mut dense = glm.clone();
    dense.mla.as_mut().unwrap().indexer = None;
    let g = Catalog::builtin().unwrap().gpu("b200").unwrap().spec.clone();
    let cost = CostConfig { step_overhead_ms: 0.0, ..CostConfig::default() };
    let time = |l: &LlmSpec, b: &StepBatch| {
        KernelModel::new(l, &g, &Layout::tensor(8), Dtype::Fp8, KvDtype::Bf16, &cost).step(b).time
    };
    // Below the top-k (2,048 keys) the main attention reads everything and the
    // indexer only adds work.
    assert!(time(&glm, &decode(64, 1024.0)) > time(&dense, &decode(64, 1024.0)));
    // At 64K of context the main attention reads 2,048 keys instead of 65,536:
    // context growth costs far less than dense MLA, but not nothing (the
    // indexer still reads every index key).
    let grow = |l: &LlmSpec| time(l, &decode(64, 65_536.0)) - time(l, &decode(64, 2048.0));
    let (sparse, full) = (grow(&glm), grow(&dense));
    assert!(sparse > 0.0 && sparse < full / 2.0, "context growth: DSA {sparse} s, dense MLA {full} s");
    // A 32K prefill: every query attends to at most 2,048 keys.
    let s = 32_768.0;
    let prefill = StepBatch {
        prefill_tokens: 32_768,
        prefill_seqs: 1,
        prefill_attn_pairs: s * (s + 1.0) / 2.0,
        logits: 1,
        ..Default::default()
    };
    assert!(time(&glm, &prefill) < time(&dense, &prefill), "sparse prefill is cheaper at 32K");
}
