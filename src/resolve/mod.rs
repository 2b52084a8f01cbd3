//! Scenario resolution: a validated scenario against the catalogue gives the
//! [`Setup`] a run needs — the LLM, each pool's GPU, memory plan, engine
//! limits, step-cost settings and price, the resolved workload, and the
//! cluster-wide limits derived over all pools. Trace files named by the
//! workload are read here, through the process-wide cache of
//! [`crate::workload::plan`]; nothing else does I/O.

mod budget;
pub use budget::{Estimate, check, estimate};

use crate::catalog::{self, Catalog, Origin};
use crate::config::{self, Scenario};
use crate::engine::{BatchPolicy, EngineParams};
use crate::error::{self, ConfigError};
use crate::memory::{self, MemoryPlan};
use crate::spec::{self, GpuSpec, LlmSpec};
use crate::{cost, workload};

/// A scenario resolved against the catalogue: everything a run needs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The scenario, defaults filled in.
    pub scenario: Scenario,
    /// The LLM architecture.
    pub llm: LlmSpec,
    /// Where the LLM came from.
    pub llm_origin: String,
    /// The resolved workload (classes, processes, trace data).
    pub workload: std::sync::Arc<workload::WorkloadPlan>,
    /// The replica pools (one, `default`, without `[[pools]]`), entry pools
    /// first. Every per-replica quantity (GPU, memory plan, engine limits,
    /// price) lives in its pool; cluster-wide limits are derived over all
    /// pools (`scenario.engine.max_model_len` is the smallest pool's).
    pub pools: Vec<Pool>,
    /// Split every request's latency into parts ([`crate::metrics::parts`]):
    /// a run option, not part of the scenario (`run --attribution`,
    /// `explain`, the playground). Off, the run computes none of it.
    pub attribution: bool,
}

impl Setup {
    /// The value every pool shares, or None when pools differ.
    pub fn common<T: PartialEq>(&self, f: impl Fn(&Pool) -> T) -> Option<T> {
        let mut it = self.pools.iter().map(f);
        let first = it.next()?;
        it.all(|x| x == first).then_some(first)
    }

    /// The longest request every pool accepts (prompt + output), tokens.
    pub fn max_model_len(&self) -> u32 {
        self.pools.iter().map(|p| p.memory.max_model_len).min().unwrap_or(0)
    }
}

fn unknown(kind: &str, name: &str, known: Vec<&String>, key: &str) -> ConfigError {
    let best = known
        .iter()
        .min_by_key(|k| error::edit_distance(name, k))
        .filter(|k| error::edit_distance(name, k) <= name.len() / 3 + 1);
    let list = known.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    let mut hint =
        format!("known {kind}s: {list}; or add models/{}/{name}.toml", if kind == "model" { "llm" } else { "gpu" });
    if let Some(b) = best {
        hint = format!("did you mean \"{b}\"? {hint}");
    }
    ConfigError::new(format!("unknown {kind} \"{name}\"")).key(key).hint(hint)
}

/// One pool of identical replicas, resolved.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Pool name (`default` without `[[pools]]`).
    pub name: String,
    /// What its replicas do.
    pub role: config::PoolRole,
    /// The GPU profile.
    pub gpu: GpuSpec,
    /// Where the GPU profile came from.
    pub gpu_origin: String,
    /// GPUs per replica (tensor parallelism).
    pub tp: u32,
    /// Parallel layout of a replica (tp, pipeline stages, expert parallelism).
    pub layout: cost::Layout,
    /// Replicas in the pool.
    pub replicas: u32,
    /// Memory plan of one replica.
    pub memory: MemoryPlan,
    /// Engine limits of one replica.
    pub engine: EngineParams,
    /// The pool's engine settings (the scenario's `[engine]` with the pool's overrides).
    pub engine_config: config::EngineConfig,
    /// The pool's step-cost settings (the scenario's `[cost]` with the pool's overrides).
    pub cost: config::CostConfig,
    /// The KV-cache format in effect in the pool.
    pub kv_dtype: config::KvDtype,
    /// USD per GPU-hour in effect.
    pub price_per_gpu_hour: f64,
    /// Speculative decoding: the draft model (for `mtp`, a one-layer head of the target).
    pub draft: Option<LlmSpec>,
}

/// Resolves a scenario against the catalogue and plans memory.
pub fn resolve(s: &Scenario, catalog: &Catalog) -> Result<Setup, ConfigError> {
    let (llm, llm_origin) =
        pick(s.model.spec.as_ref(), "model.spec", LlmSpec::validate, catalog.model(&s.model.name), || {
            catalog
                .broken_error("llm", &s.model.name)
                .unwrap_or_else(|| unknown("model", &s.model.name, catalog.models.keys().collect(), "model.name"))
        })?;
    let mut pools = Vec::new();
    if s.pools.is_empty() {
        pools.push(resolve_pool(&llm, catalog, s, "default", config::PoolRole::Mixed, "")?);
    } else {
        for (i, p) in s.pools.iter().enumerate().filter(|(_, p)| p.replicas > 0) {
            let prefix = format!("pools[{i}].");
            let gpu = catalog.gpu(&p.gpu).map(|e| e.spec.clone());
            let max_model_len = p
                .engine
                .get("max_model_len")
                .and_then(|v| v.as_integer())
                .map(|v| v as u32)
                .or(s.engine.max_model_len)
                .or(Some(llm.max_context));
            let ctx =
                catalog::engine::Context { gpu: gpu.as_ref(), tp: p.tp, dtype: s.model.dtype.as_str(), max_model_len };
            let (engine, cost) = pool_engine(s, p, &ctx, catalog, &prefix)?;
            let hardware = config::HardwareConfig {
                gpu: p.gpu.clone(),
                gpu_spec: None,
                tp: p.tp,
                replicas: p.replicas,
                price_per_gpu_hour: p.price_per_gpu_hour,
                ..s.hardware.clone()
            };
            let ps = Scenario { hardware, engine, cost, pools: Vec::new(), disaggregation: None, ..s.clone() };
            if let Err((key, msg, hint)) = ps.validate() {
                return Err(ConfigError::new(msg).key(format!("{prefix}{key}")).hint(hint));
            }
            pools.push(resolve_pool(&llm, catalog, &ps, &p.name, p.role, &prefix)?);
        }
    }
    // Entry pools (mixed, prefill) first, decode pools last: the event loop
    // routes by index range. Within a role, pools go by name, so the order
    // they are listed in never changes a result (routers that break ties by
    // replica index, and round robin, see the same replicas either way).
    pools.sort_by(|a, b| {
        (a.role == config::PoolRole::Decode, &a.name).cmp(&(b.role == config::PoolRole::Decode, &b.name))
    });
    if let Some(f) = &s.fleet {
        // Every slot the fleet may use is a replica of the pool; those not
        // running at a given time serve nothing and cost nothing.
        pools[0].replicas = f.slots(s.hardware.replicas);
    }
    let workload = workload::plan::build(s)?;
    let max_model_len = pools.iter().map(|p| p.memory.max_model_len).min().unwrap_or(0);
    if !workload.clip {
        check_fits(s, &workload, max_model_len, &llm.name)?;
    }
    let mut scenario = s.clone();
    scenario.engine.max_model_len = Some(max_model_len);
    let setup = Setup { scenario, llm, llm_origin, workload: std::sync::Arc::new(workload), pools, attribution: false };
    budget::check(&setup, &crate::limits::current())?;
    Ok(setup)
}

/// A pool's engine and cost settings: the scenario's `[engine]` and
/// `[cost]`, then the pool's preset (its keys replace the scenario's), then
/// the keys the pool sets in its `engine` and `cost` tables.
fn pool_engine(
    s: &Scenario,
    p: &config::PoolConfig,
    ctx: &catalog::engine::Context,
    catalog: &Catalog,
    prefix: &str,
) -> Result<(config::EngineConfig, config::CostConfig), ConfigError> {
    use serde::Deserialize;
    let key = format!("{prefix}engine");
    let mut engine = toml::Table::try_from(&s.engine).map_err(|e| ConfigError::new(e.to_string()).key(&key))?;
    let mut cost = toml::Table::try_from(&s.cost).map_err(|e| ConfigError::new(e.to_string()).key(&key))?;
    if let Some(toml::Value::String(name)) = p.engine.get("preset") {
        let (e, c) = crate::scenario::preset_keys(name, catalog, ctx).map_err(|e| e.key(format!("{key}.preset")))?;
        engine.extend(e);
        cost.extend(c);
    }
    engine.extend(p.engine.clone());
    cost.extend(p.cost.clone());
    let engine = config::EngineConfig::deserialize(engine).map_err(|e| {
        ConfigError::new(format!("{key}: {}", e.message()))
            .key(&key)
            .hint("a pool's engine table takes the keys of [engine] (docs/scenario.md)")
    })?;
    let cost = config::CostConfig::deserialize(cost).map_err(|e| {
        ConfigError::new(format!("{prefix}cost: {}", e.message()))
            .key(format!("{prefix}cost"))
            .hint("a pool's cost table takes the keys of [cost] (docs/scenario.md)")
    })?;
    Ok((engine, cost))
}

/// Resolves one pool of the scenario `s` (whose `[hardware]` and `[engine]`
/// are the pool's); `prefix` is put in front of the keys named in errors.
fn resolve_pool(
    llm: &LlmSpec,
    catalog: &Catalog,
    s: &Scenario,
    name: &str,
    role: config::PoolRole,
    prefix: &str,
) -> Result<Pool, ConfigError> {
    let (gpu, gpu_origin) = pick(
        s.hardware.gpu_spec.as_ref(),
        "hardware.gpu_spec",
        GpuSpec::validate,
        catalog.gpu(&s.hardware.gpu),
        || {
            catalog
                .broken_error("gpu", &s.hardware.gpu)
                .unwrap_or_else(|| unknown("gpu", &s.hardware.gpu, catalog.gpus.keys().collect(), "hardware.gpu"))
        },
    )
    .map_err(|e| rekey(e, prefix, "hardware."))?;
    // vLLM V0 without chunked prefill: the budget is max(max_model_len, 2048)
    // (vllm/config.py SchedulerConfig), written as 0.
    let auto;
    let s = if s.engine.max_num_batched_tokens == 0 {
        let mut c = s.clone();
        c.engine.max_num_batched_tokens = s.engine.max_model_len.unwrap_or(llm.max_context).max(2048);
        auto = c;
        &auto
    } else {
        s
    };
    let e = &s.engine;
    if e.max_num_batched_tokens < e.max_num_seqs {
        return Err(ConfigError::new(format!(
            "max_num_batched_tokens ({}) is smaller than max_num_seqs ({}): a full decode batch would not fit one step",
            e.max_num_batched_tokens, e.max_num_seqs
        ))
        .key(format!("{prefix}engine.max_num_batched_tokens"))
        .hint(format!("raise it to at least {} or lower max_num_seqs", e.max_num_seqs)));
    }
    let mut memory = memory::plan(llm, &gpu, s).map_err(|e| rekey(e, prefix, "hardware."))?;
    let draft = match config::SpeculativeConfig::active(e) {
        None => None,
        Some(sp) => {
            let d = match &sp.draft_model {
                Some(name) => match catalog.model(name) {
                    Some(entry) => entry.spec.clone(),
                    None => {
                        return Err(unknown(
                            "model",
                            name,
                            catalog.models.keys().collect(),
                            &format!("{prefix}engine.speculative.draft_model"),
                        ));
                    }
                },
                None => LlmSpec { name: format!("{} MTP head", llm.name), num_layers: 1, ..llm.clone() },
            };
            reserve_draft(&mut memory, &d, s).map_err(|e| rekey(e, prefix, "engine."))?;
            Some(d)
        }
    };
    if let Some(l) = s.lora.as_ref().filter(|l| l.adapters > 1) {
        // vLLM preallocates max_loras adapter slots in GPU memory (at the
        // largest rank): the KV cache gives them room.
        reserve_lora(&mut memory, llm, l, s).map_err(|e| rekey(e, prefix, ""))?;
    }
    // One KV block on one GPU (each GPU swaps its own shard over its own link).
    let block_bytes = memory.kv_bytes_per_token_per_gpu * e.block_size as f64;
    let engine = EngineParams {
        // SGLang caps its running requests by the KV pool (memory.max_running).
        max_num_seqs: memory.max_running.map_or(e.max_num_seqs, |m| m.min(e.max_num_seqs)),
        max_num_batched_tokens: e.max_num_batched_tokens,
        batching: match (e.batching, e.chunked_prefill, e.mixed_prefill) {
            (config::Batching::Static, _, _) => BatchPolicy::Static { timeout: e.batch_timeout_ms * 1e-3 },
            (_, true, _) => BatchPolicy::Chunked { prefill_first: e.prefill_first },
            (_, false, true) => BatchPolicy::Mixed,
            (_, false, false) => BatchPolicy::PrefillSteps,
        },
        block_size: e.block_size,
        num_blocks: memory.num_blocks,
        keyed_queue: e.queue_order != config::QueueOrder::Fcfs,
        max_waiting: e.max_waiting.unwrap_or(u32::MAX),
        max_chunk: e.max_chunk_tokens.unwrap_or(u32::MAX),
        prefix_caching: e.prefix_caching,
        watermark_blocks: (e.kv_watermark * memory.num_blocks as f64).ceil() as u64,
        spec_k: config::SpeculativeConfig::active(e).map_or(0, |s| s.num_tokens),
        scheduler_steps: e.num_scheduler_steps,
        handoff: role == config::PoolRole::Prefill,
        swap_blocks: match e.preemption {
            config::Preemption::Swap => (e.swap_space_gb * spec::GIB / block_bytes).floor() as u64,
            config::Preemption::Recompute => 0,
        },
        swap_block_time: block_bytes / (e.swap_bandwidth_gbps * 1e9),
        offload_blocks: [
            (e.kv_offload_cpu_gb * spec::GIB / block_bytes).floor() as u64,
            (e.kv_offload_disk_gb * spec::GIB / block_bytes).floor() as u64,
        ],
        offload_block_time: [block_bytes / (e.kv_offload_cpu_gbps * 1e9), block_bytes / (e.kv_offload_disk_gbps * 1e9)],
        offload_connector: e.kv_offload_connector,
        admission: e.admission,
        victim: e.preempt_victim,
        preempted_to_back: e.preempted_to == config::QueueEnd::Back,
        new_token_ratio: (
            e.new_token_ratio,
            e.min_new_token_ratio,
            (e.new_token_ratio - e.min_new_token_ratio) / e.new_token_ratio_decay_steps as f64,
        ),
        max_tokens: s.workload.max_tokens,
        max_model_len: memory.max_model_len,
    };
    Ok(Pool {
        name: name.to_string(),
        role,
        price_per_gpu_hour: s.hardware.price_per_gpu_hour.unwrap_or(gpu.price_per_hour),
        gpu,
        gpu_origin,
        tp: s.hardware.tp,
        layout: cost::Layout::from_hardware(&s.hardware),
        replicas: s.hardware.replicas,
        memory,
        engine,
        engine_config: e.clone(),
        cost: s.cost.clone(),
        kv_dtype: s.kv_dtype(),
        draft,
    })
}

/// Takes the draft model's weights and its KV cache (one draft KV entry per
/// target KV entry) out of the KV-cache budget of each GPU.
fn reserve_draft(m: &mut MemoryPlan, d: &LlmSpec, s: &Scenario) -> Result<(), ConfigError> {
    let tp = s.hardware.tp as f64;
    let weights = d.total_params() * s.model.dtype.bytes() / tp;
    let draft_tok = d.kv_bytes_per_token(d.num_layers as f64, tp, s.kv_dtype().bytes());
    let budget = m.kv_gib_per_gpu * spec::GIB - weights;
    let per_block = (m.kv_bytes_per_token_per_gpu + draft_tok) * m.block_size as f64;
    let blocks = if m.blocks_overridden { m.num_blocks } else { (budget / per_block).floor().max(0.0) as u64 };
    let capacity = blocks * m.block_size as u64;
    if s.engine.max_model_len.is_none() {
        m.max_model_len = m.max_model_len.min(capacity.min(u32::MAX as u64) as u32);
    }
    if blocks == 0 || capacity < m.max_model_len as u64 {
        return Err(ConfigError::new(format!(
            "the draft model {} ({:.1} GiB of weights per GPU) leaves KV room for {capacity} tokens, less than \
             max_model_len {}",
            d.name,
            weights / spec::GIB,
            m.max_model_len
        ))
        .key("engine.speculative")
        .hint("use a smaller draft model or method = \"mtp\", lower engine.max_model_len, or use more GPUs (tp)"));
    }
    m.num_blocks = blocks;
    m.kv_capacity_tokens = capacity;
    m.kv_gib_per_gpu = blocks as f64 * per_block / spec::GIB;
    m.max_seqs_at_max_len = capacity / m.max_model_len as u64;
    Ok(())
}

/// Takes the LoRA slots' memory (`max_loras` adapters, sharded over the
/// replica's GPUs) from the KV cache.
fn reserve_lora(m: &mut MemoryPlan, llm: &LlmSpec, l: &config::LoraConfig, s: &Scenario) -> Result<(), ConfigError> {
    let per_gpu = l.max_loras as f64 * 2.0 * crate::engine::lora::adapter_weights(llm, l.rank)
        / s.hardware.gpus_per_replica() as f64;
    let per_block = m.kv_bytes_per_token_per_gpu * m.block_size as f64;
    let lost = (per_gpu / per_block).ceil() as u64;
    if m.blocks_overridden {
        return Ok(());
    }
    if lost >= m.num_blocks {
        return Err(ConfigError::new(format!(
            "{} LoRA slots of rank {} ({:.2} GiB per GPU) leave no room for the KV cache",
            l.max_loras,
            l.rank,
            per_gpu / spec::GIB
        ))
        .key("lora.max_loras")
        .hint("lower lora.max_loras or lora.rank, or use more GPUs (tp)"));
    }
    m.num_blocks -= lost;
    m.kv_capacity_tokens = m.num_blocks * m.block_size as u64;
    m.kv_gib_per_gpu = m.num_blocks as f64 * per_block / spec::GIB;
    m.max_seqs_at_max_len = m.kv_capacity_tokens / m.max_model_len as u64;
    Ok(())
}

/// Puts `prefix` in front of an error's key when it starts with `section`
/// (a pool's `hardware.tp` is `pools[1].tp`, its `engine.x` is `pools[1].engine.x`).
fn rekey(mut e: ConfigError, prefix: &str, section: &str) -> ConfigError {
    if prefix.is_empty() {
        return e;
    }
    if let Some(k) = e.key.take() {
        let k = if section == "hardware." { k.strip_prefix(section).unwrap_or(&k).to_string() } else { k };
        e.key = Some(format!("{prefix}{k}"));
    }
    e
}

/// Fails when some class can never fit the context window (every request
/// of it would be rejected).
fn check_fits(s: &Scenario, w: &workload::WorkloadPlan, max_len: u32, model: &str) -> Result<(), ConfigError> {
    let sc = &s.workload;
    for (i, c) in w.classes.iter().enumerate() {
        let cfg = sc.classes.get(i);
        if c.joint.is_some() {
            continue;
        }
        let prompt = cfg.and_then(|c| c.prompt_tokens.as_ref()).or(sc.prompt_tokens.as_ref());
        let output = cfg.and_then(|c| c.output_tokens.as_ref()).or(sc.output_tokens.as_ref());
        let (Some(p), Some(o)) = (prompt.and_then(|d| d.min_value()), output.and_then(|d| d.min_value())) else {
            continue;
        };
        let shortest = p as u64 + c.prefix_tokens as u64 + o as u64;
        if shortest > max_len as u64 {
            let key =
                if sc.classes.is_empty() { "workload.output_tokens".into() } else { format!("workload.classes[{i}]") };
            return Err(ConfigError::new(format!(
                "every request{} needs at least {shortest} tokens of context (shortest prompt + shortest output) but \
                 max_model_len is {max_len} for {model} on this setup: all of them would be rejected",
                if sc.classes.is_empty() { String::new() } else { format!(" of class \"{}\"", c.name) }
            ))
            .key(key)
            .hint(format!("keep prompt + output within {max_len} tokens, or set workload.on_too_long = \"clip\"")));
        }
    }
    Ok(())
}

/// An inline spec (validated) if given, else the catalogue entry; with where it came from.
fn pick<T: Clone>(
    inline: Option<&T>,
    inline_key: &str,
    validate: fn(&T) -> Result<(), String>,
    entry: Option<&catalog::Entry<T>>,
    missing: impl FnOnce() -> ConfigError,
) -> Result<(T, String), ConfigError> {
    match (inline, entry) {
        (Some(spec), _) => {
            validate(spec).map_err(|m| ConfigError::new(m).key(inline_key))?;
            Ok((spec.clone(), format!("inline [{inline_key}]")))
        }
        (None, Some(e)) => Ok((e.spec.clone(), origin(&e.origin))),
        (None, None) => Err(missing()),
    }
}

fn origin(o: &Origin) -> String {
    match o {
        Origin::Builtin => "built-in catalogue".into(),
        Origin::File(p) => p.display().to_string(),
    }
}

impl Setup {
    /// An empty account of a run of this setup ([`crate::metrics::Tally`]),
    /// exact up to [`crate::metrics::tally::EXACT_LIMIT`] requests.
    pub fn tally(&self) -> crate::metrics::Tally {
        self.tally_exact_up_to(crate::metrics::tally::EXACT_LIMIT)
    }

    /// The same, exact up to `limit` requests (for tests and studies of the approximation).
    pub fn tally_exact_up_to(&self, limit: u64) -> crate::metrics::Tally {
        let s = &self.scenario;
        let split = self.pools.iter().any(|p| p.role == crate::config::PoolRole::Prefill);
        let link = split.then(|| {
            let link = s.disaggregation.clone().unwrap_or_default();
            let l = &self.llm;
            let per_token = l.kv_bytes_per_token(l.num_layers as f64, 1.0, s.kv_dtype().bytes());
            [per_token, link.kv_transfer_gbps, link.kv_transfer_latency_ms]
        });
        let slos = self.workload.classes.iter().map(|c| c.slo.clone()).collect();
        crate::metrics::Tally::with(limit, s.warmup_s, s.engine.max_wait_s.unwrap_or(0.0), slos, link)
    }

    /// The adapters of a run of this setup with `seed` (None without `[lora]`).
    pub fn lora_plan(&self, seed: u64) -> Option<std::sync::Arc<crate::engine::lora::LoraPlan>> {
        let c = self.scenario.lora.as_ref()?;
        let p = &self.pools[0];
        let weights = crate::engine::lora::adapter_weights(&self.llm, c.rank);
        let bytes = weights * 2.0;
        let gpus = p.layout.gpus() as f64;
        let g = &p.gpu;
        Some(std::sync::Arc::new(crate::engine::lora::LoraPlan {
            cdf: c.cdf(),
            seed: crate::rng::Stream::Lora.seed(seed),
            bytes,
            max_loras: c.max_loras,
            max_cpu_loras: c.max_cpu_loras.unwrap_or(c.max_loras),
            // Each GPU copies its shard over its own link.
            host_load_s: bytes / gpus / (c.host_gbps * 1e9),
            storage_load_s: bytes / (c.storage_gbps * 1e9),
            // Shrink and expand: 2 FLOPs per weight per token.
            flops_per_token: 2.0 * weights,
            per_adapter_s: bytes / gpus / (g.memory_bandwidth_gbps * 1e9 * g.memory_efficiency),
            per_flop_s: 1.0 / (g.bf16_tflops * 1e12 * gpus * c.kernel_efficiency),
            merged: c.adapters == 1,
        }))
    }
}
