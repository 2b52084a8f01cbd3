//! The scenario of one offline-throughput case (`trtllm-bench`, vendors'
//! tables of `isl`/`osl` throughput): what `servesim validate` simulates
//! TensorRT-LLM's published table with and `servesim calibrate` an offline
//! table.

use crate::Catalog;

/// TensorRT-LLM v0.13's `trtllm-bench build` heuristic (tensorrt_llm/bench/build/tuning.py):
/// (max_batch_size, max_num_tokens) for a model on `tp` GPUs of `gpu_gib`
/// each, at average lengths `isl`/`osl`, with KV fraction 0.95.
pub fn trtllm_bench_settings(
    llm: &crate::spec::LlmSpec,
    tp: u32,
    gpu_gib: f64,
    fp8: bool,
    isl: f64,
    osl: f64,
) -> (u32, u32) {
    let elem = if fp8 { 1.0 } else { 2.0 };
    let gib = 1024f64.powi(3);
    let kv_heads = (tp.max(llm.num_kv_heads)) as f64;
    let bytes_per_token = 2.0 * llm.num_layers as f64 * kv_heads * llm.head_dim as f64 * elem;
    let engine = llm.total_params() * elem / gib;
    let cache = (gpu_gib * tp as f64 - engine) * 0.95 * gib;
    let requests = (cache / (bytes_per_token * (isl + osl))).max(1.0);
    let raw_bs = requests.min(4096.0);
    let raw_tok = (raw_bs * (1.0 + isl / osl)).min(32768.0);
    let bs = if raw_bs < 256.0 {
        (32.0 * (raw_bs / 32.0).ceil()).max(64.0)
    } else if raw_bs < 1024.0 {
        128.0 * (raw_bs / 128.0).ceil()
    } else {
        256.0 * (raw_bs / 256.0).ceil()
    };
    let tok = if raw_tok < 4096.0 {
        (256.0 * (raw_tok / 256.0).ceil()).max(2048.0)
    } else if raw_tok < 8192.0 {
        512.0 * (raw_tok / 512.0).ceil()
    } else {
        1024.0 * (raw_tok / 1024.0).ceil()
    };
    (bs as u32, tok as u32)
}

/// The scenario of one offline-throughput case: `n` requests of `isl`/`osl`
/// tokens, all at t = 0, on `tp` GPUs under `preset`. With a TensorRT-LLM
/// profile the engine is configured as `trtllm-bench` builds it (chunked
/// context, no block reuse, 64-token blocks, batch and token limits from its
/// heuristic, `max_seq_len` = isl + osl); other engines keep their defaults
/// with `max_model_len` = isl + osl. Err: why the case cannot be simulated.
#[allow(clippy::too_many_arguments)]
pub fn offline_scenario(
    catalog: &Catalog,
    model: &str,
    gpu_name: &str,
    fp8: bool,
    tp: u32,
    isl: u32,
    osl: u32,
    n: u32,
    preset: &str,
) -> Result<String, String> {
    let llm = catalog.model(model).ok_or_else(|| format!("{model} is not in the catalogue"))?;
    let gpu = catalog.gpu(gpu_name).ok_or_else(|| format!("GPU {gpu_name} is not in the catalogue"))?;
    let family = catalog.engine(preset).map(|p| p.spec.family.as_str()).unwrap_or(preset);
    let engine = if family == "trtllm" {
        let (bs, tok) = trtllm_bench_settings(
            &llm.spec,
            tp,
            gpu.spec.memory_gib.max(gpu.spec.memory_gb),
            fp8,
            isl as f64,
            osl as f64,
        );
        format!(
            "chunked_prefill = true\nmixed_prefill = false\nprefix_caching = false\nblock_size = 64\n\
             max_num_seqs = {bs}\nmax_num_batched_tokens = {tok}\n"
        )
    } else if isl + osl > llm.spec.max_context {
        return Err(format!("{isl} + {osl} tokens exceed {model}'s context of {}", llm.spec.max_context));
    } else {
        String::new()
    };
    Ok(format!(
        "num_requests = {n}\nseed = 1\n[model]\nname = \"{}\"\ndtype = \"{}\"\n[hardware]\ngpu = \"{}\"\ntp = {tp}\n\
         [engine]\npreset = \"{preset}\"\n{engine}max_model_len = {}\n\
         [workload]\narrival = \"offline\"\nprompt_tokens = {{ dist = \"fixed\", value = {isl} }}\n\
         output_tokens = {{ dist = \"fixed\", value = {osl} }}\n",
        llm.key,
        if fp8 { "fp8" } else { "bf16" },
        gpu.key,
        isl + osl,
    ))
}
