//! The memory plan of one replica: weights, activations, reserve, KV cache.

use crate::catalog::{GIB, GpuSpec, LlmSpec};
use crate::config::Scenario;
use crate::cost::Layout;
use crate::error::ConfigError;
use serde::Serialize;

/// How one replica's GPU memory is spent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryPlan {
    /// Tensor-parallel degree: GPUs per pipeline stage.
    pub tp: u32,
    /// Pipeline stages per replica.
    pub pp: u32,
    /// GPUs per replica: `tp × pp`.
    pub gpus_per_replica: u32,
    /// Layers held by the largest pipeline stage: ⌈num_layers / pp⌉.
    pub layers_per_stage: u32,
    /// Whole experts held by each GPU under expert parallelism (⌈num_experts / tp⌉);
    /// 0 for a dense model or when experts are tensor-sliced.
    pub experts_per_gpu: u32,
    /// Whether MoE experts are spread whole across GPUs (`hardware.expert_parallel`).
    pub expert_parallel: bool,
    /// Memory per GPU, GiB.
    pub gpu_memory_gib: f64,
    /// `gpu_memory_utilization` × memory per GPU, GiB.
    pub usable_gib_per_gpu: f64,
    /// Model parameters.
    pub params: f64,
    /// All weights of the model, GiB.
    pub weights_gib_total: f64,
    /// Weights held by each GPU of the most loaded pipeline stage, GiB.
    pub weights_gib_per_gpu: f64,
    /// Peak activation memory reserved per GPU (profiled at `max_num_batched_tokens`), GiB.
    pub activation_gib_per_gpu: f64,
    /// Fixed reserve per GPU (`engine.memory_reserve_gb`), GiB.
    pub reserve_gib_per_gpu: f64,
    /// KV cache per GPU, GiB.
    pub kv_gib_per_gpu: f64,
    /// KV bytes per token on each GPU (its stage's layers only).
    pub kv_bytes_per_token_per_gpu: f64,
    /// Tokens per KV block.
    pub block_size: u32,
    /// KV blocks per replica.
    pub num_blocks: u64,
    /// KV capacity per replica, tokens.
    pub kv_capacity_tokens: u64,
    /// Longest accepted prompt + output, tokens.
    pub max_model_len: u32,
    /// Sequences of `max_model_len` tokens that fit at once.
    pub max_seqs_at_max_len: u64,
    /// True when `engine.num_gpu_blocks` fixed the block count.
    pub blocks_overridden: bool,
}

/// Activation memory a profiling pass at the step's token budget would need, bytes per GPU.
fn activation_bytes(llm: &LlmSpec, s: &Scenario) -> f64 {
    let tp = s.hardware.tp as f64;
    let t = s.engine.max_num_batched_tokens as f64;
    let h = llm.hidden_size as f64;
    let qkv = (llm.num_attention_heads + 2 * llm.num_kv_heads) as f64 * llm.head_dim as f64 / tp;
    let ffn = 3.0 * llm.intermediate_size as f64 * llm.experts_active() / tp;
    let logits = s.engine.max_num_seqs as f64 * llm.vocab_size as f64 / tp * 8.0;
    t * (4.0 * h + qkv + ffn) * 2.0 + logits
}

/// Weight bytes held by each GPU of the most loaded pipeline stage.
///
/// A stage holds ⌈num_layers / pp⌉ layers. Without a pipeline the single stage
/// also holds the embedding, the LM head and the final norm; with one the first
/// stage holds the embedding and the last the LM head (both keep a copy when
/// tied), so the most loaded stage holds one vocabulary × hidden matrix on top
/// of its layers (and the final norm). Everything is split across the stage's
/// `tp` GPUs except, under expert parallelism, the experts: each GPU holds
/// ⌈num_experts / tp⌉ whole ones.
pub fn weight_bytes_per_gpu(llm: &LlmSpec, layout: &Layout, bytes_per_weight: f64) -> f64 {
    let tp = layout.tp.max(1) as f64;
    if layout.pp <= 1 && !(layout.expert_parallel && llm.is_moe()) {
        // Everything on one stage, everything sliced: the whole model / tp.
        return llm.total_params() * bytes_per_weight / tp;
    }
    let layers = layout.layers_per_stage(llm.num_layers) as f64;
    let h = llm.hidden_size as f64;
    let experts = llm.experts_stored() * llm.ffn_params_per_expert();
    let per_layer_shared = llm.attn_params_per_layer() + llm.router_params_per_layer() + 2.0 * h;
    let edge = if layout.pp <= 1 { llm.embedding_params() } else { llm.vocab_size as f64 * h };
    let sliced = layers * per_layer_shared + edge + h;
    let params = if layout.expert_parallel && llm.is_moe() {
        sliced / tp + layers * layout.experts_per_gpu(llm) as f64 * llm.ffn_params_per_expert()
    } else {
        (sliced + layers * experts) / tp
    };
    params * bytes_per_weight
}

/// Plans memory for `s` on `gpu`; errors when the model does not fit.
pub fn plan(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario) -> Result<MemoryPlan, ConfigError> {
    let tp = s.hardware.tp;
    let pp = s.hardware.pp;
    if !llm.num_attention_heads.is_multiple_of(tp) {
        return Err(ConfigError::new(format!(
            "tp = {tp} does not divide the {} attention heads of {}",
            llm.num_attention_heads, llm.name
        ))
        .key("hardware.tp")
        .hint("use a tp that divides the head count, e.g. 1, 2, 4 or 8"));
    }
    if pp > llm.num_layers {
        return Err(ConfigError::new(format!(
            "pp = {pp} pipeline stages for the {} layers of {}: some stages would hold no layer",
            llm.num_layers, llm.name
        ))
        .key("hardware.pp")
        .hint(format!("use pp <= {} (a divisor of {} balances the stages)", llm.num_layers, llm.num_layers)));
    }
    if s.hardware.expert_parallel && !llm.is_moe() {
        return Err(ConfigError::new(format!(
            "expert_parallel = true but {} is a dense model (num_experts = 0): there are no experts to spread",
            llm.name
        ))
        .key("hardware.expert_parallel")
        .hint("remove expert_parallel (or set it to false), or use a mixture-of-experts model such as mixtral-8x7b"));
    }
    let layout = Layout::from_hardware(&s.hardware);
    let e = &s.engine;
    let params = llm.total_params();
    let weights = params * s.model.dtype.bytes();
    let per_gpu_w = weight_bytes_per_gpu(llm, &layout, s.model.dtype.bytes());
    let mem = gpu.memory_bytes();
    let usable = mem * e.gpu_memory_utilization;
    let act = activation_bytes(llm, s);
    let reserve = e.memory_reserve_gb * GIB;
    let kv_heads_per_gpu = (llm.num_kv_heads as f64 / tp as f64).ceil();
    let layers_per_stage = layout.layers_per_stage(llm.num_layers);
    let kv_tok = 2.0 * layers_per_stage as f64 * kv_heads_per_gpu * llm.head_dim as f64 * s.model.kv_dtype.bytes();
    let kv_bytes = usable - per_gpu_w - act - reserve;
    if kv_bytes <= 0.0 {
        return Err(no_fit(llm, gpu, s, weights, usable, act + reserve));
    }
    let (num_blocks, overridden) = match e.num_gpu_blocks {
        Some(n) => (n, true),
        None => ((kv_bytes / (kv_tok * e.block_size as f64)).floor() as u64, false),
    };
    if num_blocks == 0 {
        return Err(no_fit(llm, gpu, s, weights, usable, act + reserve));
    }
    let capacity = num_blocks * e.block_size as u64;
    let max_model_len = match e.max_model_len {
        Some(m) if m > llm.max_context => {
            return Err(ConfigError::new(format!(
                "max_model_len {m} exceeds {}'s context of {} tokens",
                llm.name, llm.max_context
            ))
            .key("engine.max_model_len")
            .hint(format!("use max_model_len <= {}", llm.max_context)));
        }
        Some(m) if m as u64 > capacity => {
            return Err(ConfigError::new(format!(
                "max_model_len {m} is larger than the KV cache can hold ({capacity} tokens per replica)"
            ))
            .key("engine.max_model_len")
            .hint(format!(
                "use max_model_len <= {capacity}, raise gpu_memory_utilization, or use more GPUs (tp or pp)"
            )));
        }
        Some(m) => m,
        None => llm.max_context.min(capacity.min(u32::MAX as u64) as u32),
    };
    Ok(MemoryPlan {
        tp,
        pp,
        gpus_per_replica: layout.gpus(),
        layers_per_stage,
        experts_per_gpu: layout.experts_per_gpu(llm),
        expert_parallel: layout.expert_parallel,
        gpu_memory_gib: mem / GIB,
        usable_gib_per_gpu: usable / GIB,
        params,
        weights_gib_total: weights / GIB,
        weights_gib_per_gpu: per_gpu_w / GIB,
        activation_gib_per_gpu: act / GIB,
        reserve_gib_per_gpu: reserve / GIB,
        kv_gib_per_gpu: (num_blocks as f64 * e.block_size as f64 * kv_tok) / GIB,
        kv_bytes_per_token_per_gpu: kv_tok,
        block_size: e.block_size,
        num_blocks,
        kv_capacity_tokens: capacity,
        max_model_len,
        max_seqs_at_max_len: capacity / max_model_len as u64,
        blocks_overridden: overridden,
    })
}

fn no_fit(llm: &LlmSpec, gpu: &GpuSpec, s: &Scenario, weights: f64, usable: f64, other: f64) -> ConfigError {
    let layout = Layout::from_hardware(&s.hardware);
    let (tp, pp) = (layout.tp, layout.pp);
    // A layout "fits" when it leaves at least 1 GiB per GPU for the KV cache.
    let fits = |l: Layout, wbytes: f64| weight_bytes_per_gpu(llm, &l, wbytes) + other < usable - GIB;
    let dt = s.model.dtype.bytes();
    let mut fix = Vec::new();
    if let Some(t) = [2u32, 4, 8, 16]
        .into_iter()
        .find(|&t| t > tp && llm.num_attention_heads.is_multiple_of(t) && fits(Layout { tp: t, ..layout }, dt))
    {
        fix.push(format!("use tp = {t} or more"));
    }
    if let Some(p) = [2u32, 4, 8, 16]
        .into_iter()
        .find(|&p| p > pp && p <= llm.num_layers && fits(Layout { pp: p, micro_batches: p, ..layout }, dt))
    {
        fix.push(format!("pipeline stages pp = {p} (hardware.pp)"));
    }
    if dt > 1.0 && fits(layout, 1.0) {
        fix.push("dtype = \"fp8\"".to_string());
    } else if dt > 0.5 && fits(layout, 0.5) {
        fix.push("dtype = \"int4\"".to_string());
    }
    fix.push("a GPU with more memory".to_string());
    let gpus = layout.gpus();
    ConfigError::new(format!(
        "{} in {} needs {:.1} GiB of weights; {gpus} × {} holds {:.1} GiB ({:.0} GiB each at gpu_memory_utilization {}), \
         of which {:.1} GiB per GPU go to activations and the reserve: no room is left for the KV cache",
        llm.name,
        s.model.dtype.as_str(),
        weights / GIB,
        gpu.name,
        usable * gpus as f64 / GIB,
        gpu.memory_gb,
        s.engine.gpu_memory_utilization,
        other / GIB,
    ))
    .key("hardware.tp")
    .hint(fix.join(", or "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::config::load_scenario_str;
    use std::path::Path;

    fn plan_for(model: &str, sets: &[&str]) -> Result<MemoryPlan, ConfigError> {
        let text = format!(
            "num_requests = 10\n[model]\nname = \"{model}\"\n[workload]\nrate = 1\n\
             prompt_tokens = {{ dist = \"fixed\", value = 100 }}\noutput_tokens = {{ dist = \"fixed\", value = 10 }}\n"
        );
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let s = load_scenario_str(&text, Path::new("t.toml"), &sets)?.scenario;
        let c = Catalog::builtin().unwrap();
        let llm = c.model(model).unwrap().spec.clone();
        let gpu = c.gpu(&s.hardware.gpu).unwrap().spec.clone();
        plan(&llm, &gpu, &s)
    }

    #[test]
    fn two_stages_halve_the_weights_and_the_kv_per_token_per_gpu() {
        let one = plan_for("llama-3.1-70b", &["model.dtype=\"fp8\"", "hardware.tp=2"]).unwrap();
        let two = plan_for("llama-3.1-70b", &["model.dtype=\"fp8\"", "hardware.tp=2", "hardware.pp=2"]).unwrap();
        assert_eq!((two.gpus_per_replica, two.layers_per_stage, two.pp), (4, 40, 2));
        // 40 layers + one vocabulary matrix per stage: half of everything (the
        // final norm, counted on both stages, is the only excess).
        assert!((two.weights_gib_per_gpu / one.weights_gib_per_gpu - 0.5).abs() < 1e-6);
        assert_eq!(two.kv_bytes_per_token_per_gpu, one.kv_bytes_per_token_per_gpu / 2.0);
        // Half the KV per token and more free memory per GPU: more than twice the tokens.
        assert!(
            two.kv_capacity_tokens > 2 * one.kv_capacity_tokens,
            "{} vs {}",
            two.kv_capacity_tokens,
            one.kv_capacity_tokens
        );
    }

    #[test]
    fn per_gpu_weights_times_gpus_cover_the_model() {
        for (model, sets) in [
            ("llama-3.1-70b", vec!["hardware.tp=4"]),
            ("llama-3.1-70b", vec!["hardware.tp=2", "hardware.pp=2"]),
            ("llama-3.1-70b", vec!["hardware.tp=1", "hardware.pp=3", "model.dtype=\"fp8\""]),
            ("llama-3.1-8b", vec!["hardware.pp=4"]),
            ("mixtral-8x7b", vec!["hardware.tp=2", "hardware.expert_parallel=true"]),
            ("mixtral-8x7b", vec!["hardware.tp=2", "hardware.pp=2", "hardware.expert_parallel=true"]),
        ] {
            let p = plan_for(model, &sets).unwrap_or_else(|e| panic!("{model} {sets:?}: {e}"));
            let cover = p.weights_gib_per_gpu * p.gpus_per_replica as f64 / p.weights_gib_total;
            // Exact for one or two even stages; beyond, every stage is sized as the
            // most loaded one: a vocabulary matrix on the middle stages too, and
            // the largest stage's layers when they do not divide evenly.
            let llm = Catalog::builtin().unwrap().model(model).unwrap().spec.clone();
            let (pp, l) = (p.pp as f64, llm.num_layers as f64);
            let vh = llm.vocab_size as f64 * llm.hidden_size as f64 / p.params;
            let bound = 1.0 + (pp - 2.0).max(0.0) * vh + (p.layers_per_stage as f64 * pp - l) / l;
            assert!(
                cover >= 1.0 - 1e-6 && cover <= bound + 1e-4,
                "{model} {sets:?}: per-GPU × GPUs = {cover}, bound {bound}"
            );
            if p.pp <= 2 {
                assert!((cover - 1.0).abs() < 1e-4, "{model} {sets:?}: {cover}");
            }
        }
    }

    #[test]
    fn expert_parallel_holds_whole_experts() {
        let tp = plan_for("mixtral-8x7b", &["hardware.tp=2"]).unwrap();
        let ep = plan_for("mixtral-8x7b", &["hardware.tp=2", "hardware.expert_parallel=true"]).unwrap();
        assert_eq!((tp.experts_per_gpu, ep.experts_per_gpu), (0, 4));
        assert!(ep.expert_parallel && !tp.expert_parallel);
        // 4 whole experts of 8 hold as much as half of every expert.
        assert!((ep.weights_gib_per_gpu / tp.weights_gib_per_gpu - 1.0).abs() < 1e-9);
        // tp = 16 over 8 experts: one whole expert each (8 GPUs idle in the FFN),
        // more than the 1/16 of every expert tensor parallelism would hold.
        let ep16 = plan_for("mixtral-8x7b", &["hardware.tp=16", "hardware.expert_parallel=true"]).unwrap();
        let tp16 = plan_for("mixtral-8x7b", &["hardware.tp=16"]).unwrap();
        assert_eq!(ep16.experts_per_gpu, 1);
        assert!(ep16.weights_gib_per_gpu > tp16.weights_gib_per_gpu * 1.5);
    }

    #[test]
    fn bad_layouts_name_their_key() {
        let e = plan_for("llama-3.1-8b", &["hardware.expert_parallel=true"]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("hardware.expert_parallel"));
        assert!(e.hint.unwrap().contains("mixture-of-experts"));
        let e = plan_for("llama-3.1-8b", &["hardware.pp=33"]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("hardware.pp"));
        assert!(e.hint.unwrap().contains("pp <= 32"));
        // 405B in BF16 on 8 × H100 does not fit; 2 stages of 8 do.
        let e = plan_for("llama-3.1-405b", &["hardware.tp=8"]).unwrap_err();
        assert!(e.hint.unwrap().contains("pp = 2"), "no pp suggested");
    }
}
