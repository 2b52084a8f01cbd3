//! Value checks that the type system cannot express. Each failure names the
//! key, what is wrong and what is allowed.

use super::{CostModelKind, EngineConfig, Scenario};

/// `[engine]` keys that describe the front end (before the router): one
/// value for the whole cluster, refused in a pool's engine table.
const FRONTEND_KEYS: &[&str] =
    &["preprocess_ms", "preprocess_us_per_token", "frontend_latency_ms", "frontend_workers", "max_wait_s"];

pub(super) type Check = Result<(), (String, String, String)>;

pub(super) fn fail(key: &str, msg: impl Into<String>, hint: impl Into<String>) -> Check {
    Err((key.to_string(), msg.into(), hint.into()))
}

pub(super) fn positive(key: &str, v: f64) -> Check {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        fail(key, format!("must be a positive number, got {v}"), "use a value > 0")
    }
}

pub(super) fn non_negative(key: &str, v: f64) -> Check {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        fail(key, format!("must be 0 or positive, got {v}"), "use a value >= 0")
    }
}

/// `v` must lie in (`lo`, `hi`].
pub(super) fn within(key: &str, v: f64, lo: f64, hi: f64, hint: &str) -> Check {
    if v > lo && v <= hi { Ok(()) } else { fail(key, format!("must be in ({lo}, {hi}], got {v}"), hint) }
}

/// The scenario name becomes a folder under `output/` (and `<name>-sweep`,
/// `<name>-plan`): it must be one plain path component, so that no name can
/// write outside `output/` or into `output/` itself.
pub fn safe_name(name: &str) -> Check {
    let hint = "give a plain folder name, e.g. name = \"llama-8b-h100\"";
    if name.is_empty() {
        return fail("name", "is empty", hint);
    }
    if name.len() > 100 {
        return fail("name", format!("is {} bytes long (at most 100)", name.len()), hint);
    }
    if let Some(c) =
        name.chars().find(|c| c.is_control() || matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|'))
    {
        return fail("name", format!("contains {c:?}, which cannot be part of a folder name"), hint);
    }
    if name.starts_with('.') {
        return fail("name", format!("{name:?} starts with '.' (a hidden or parent folder)"), hint);
    }
    if name.trim() != name {
        return fail("name", format!("{name:?} starts or ends with a blank"), hint);
    }
    Ok(())
}

/// The most percentiles `percentiles` may list.
pub const MAX_PERCENTILES: usize = 16;

/// Checks the top-level `percentiles` list.
fn percentiles(ps: &[f64]) -> Check {
    if ps.len() > MAX_PERCENTILES {
        return fail(
            "percentiles",
            format!("lists {} percentiles; at most {MAX_PERCENTILES} are reported", ps.len()),
            "keep the percentiles you read, e.g. percentiles = [50, 90, 99, 99.9]",
        );
    }
    for (i, &p) in ps.iter().enumerate() {
        if !(0.0..=100.0).contains(&p) {
            return fail(
                &format!("percentiles[{i}]"),
                format!("must be between 0 and 100, got {p}"),
                "give percentiles as 0-100, e.g. 99.9 (not 0.999)",
            );
        }
        if ps[..i].contains(&p) {
            return fail(&format!("percentiles[{i}]"), format!("{p} is listed twice"), "list each percentile once");
        }
    }
    Ok(())
}

impl Scenario {
    /// Checks every value; returns (key path, problem, fix) for the first bad one.
    /// The sections are checked in this order, so which error fires first is fixed.
    pub fn validate(&self) -> Check {
        self.validate_run()?;
        self.validate_model()?;
        self.validate_hardware()?;
        self.validate_engine()?;
        self.validate_pools()?;
        self.validate_lora_fleet()?;
        self.validate_cost()?;
        self.workload.validate(self.num_requests, self.duration_s, self.warmup_s)?;
        self.validate_plan()?;
        self.validate_sweep()?;
        if let Some(x) = &self.slo {
            slo("slo", x)?;
        }
        Ok(())
    }

    /// `name`, the run length (`num_requests`, `duration_s`, `warmup_s`) and `percentiles`.
    fn validate_run(&self) -> Check {
        safe_name(&self.name)?;
        match (self.num_requests, self.duration_s) {
            (Some(_), Some(_)) => {
                return fail("duration_s", "both num_requests and duration_s are set", "keep one of them");
            }
            (None, None) if self.workload.trace.as_ref().is_none_or(|t| t.repeat) => {
                return fail(
                    "num_requests",
                    "the run length is not set",
                    "set num_requests = N or duration_s = seconds",
                );
            }
            (Some(0), _) => return fail("num_requests", "must be at least 1", "set num_requests >= 1"),
            (_, Some(d)) => positive("duration_s", d)?,
            _ => {}
        }
        non_negative("warmup_s", self.warmup_s)?;
        percentiles(&self.percentiles)?;
        if let Some(d) = self.duration_s
            && self.warmup_s >= d
        {
            return fail(
                "warmup_s",
                format!("a warm-up of {} s leaves nothing of a {d} s run to measure", self.warmup_s),
                "use warmup_s < duration_s",
            );
        }
        Ok(())
    }

    /// `[model]`.
    fn validate_model(&self) -> Check {
        if self.model.name.trim().is_empty() {
            return fail("model.name", "is empty", "name a file in models/llm/, e.g. \"llama-3.1-8b\"");
        }
        Ok(())
    }

    /// `[hardware]`.
    fn validate_hardware(&self) -> Check {
        let h = &self.hardware;
        if h.tp == 0 {
            return fail("hardware.tp", "must be at least 1 GPU", "set tp = 1, 2, 4 or 8");
        }
        if h.pp == 0 {
            return fail(
                "hardware.pp",
                "must be at least 1 pipeline stage",
                "set pp = 1 (no pipeline parallelism) or a stage count such as 2 or 4",
            );
        }
        if h.micro_batches == Some(0) {
            return fail(
                "hardware.micro_batches",
                "must be at least 1",
                "leave it out to use one micro-batch per pipeline stage (pp), or set micro_batches >= 1",
            );
        }
        if h.tp.checked_mul(h.pp).and_then(|g| g.checked_mul(h.replicas)).is_none() {
            return fail(
                "hardware.pp",
                format!("tp × pp × replicas = {} × {} × {} GPUs overflows", h.tp, h.pp, h.replicas),
                "use a realistic GPU count",
            );
        }
        if h.replicas == 0 {
            return fail("hardware.replicas", "must be at least 1", "set replicas >= 1");
        }
        if let Some(p) = h.price_per_gpu_hour {
            non_negative("hardware.price_per_gpu_hour", p)?;
        }
        if let Some(p) = h.usd_per_kwh {
            non_negative("hardware.usd_per_kwh", p)?;
        }
        if let Some(p) = h.grid_gco2_per_kwh {
            non_negative("hardware.grid_gco2_per_kwh", p)?;
        }
        Ok(())
    }

    /// `[engine]` and `[engine.speculative]` (which needs a cost model that prices it).
    fn validate_engine(&self) -> Check {
        let e = &self.engine;
        engine_sizes(e)?;
        engine_scheduling(e)?;
        engine_offload(e)?;
        if let Some(sp) = &e.speculative {
            speculative(sp, self.cost.model)?;
        }
        Ok(())
    }

    /// `[lora]` and `[fleet]`, which describe the replicas of `[hardware]`.
    fn validate_lora_fleet(&self) -> Check {
        let one_pool = |section: &str| match self.pools.is_empty() {
            true => Ok(()),
            false => fail(
                section,
                "applies to the replicas of [hardware], not to [[pools]]",
                format!("describe one pool with hardware.gpu, tp and replicas, or remove [{section}]"),
            ),
        };
        if let Some(l) = &self.lora {
            one_pool("lora")?;
            l.validate()?;
        }
        if let Some(f) = &self.fleet {
            one_pool("fleet")?;
            f.validate(self.hardware.replicas)?;
        }
        Ok(())
    }

    /// `[cost]`.
    fn validate_cost(&self) -> Check {
        let c = &self.cost;
        non_negative("cost.step_overhead_ms", c.step_overhead_ms)?;
        non_negative("cost.per_request_overhead_ms", c.per_request_overhead_ms)?;
        non_negative("cost.per_seq_overhead_ms", c.per_seq_overhead_ms)?;
        non_negative("cost.custom_allreduce_max_kb", c.custom_allreduce_max_kb)?;
        non_negative("cost.eager_launch_us_per_layer", c.eager_launch_us_per_layer)?;
        within(
            "cost.step_time_scale",
            c.step_time_scale,
            0.0,
            10.0,
            "1 keeps the modelled step time; 1.2 makes every step 20% slower",
        )?;
        for (k, v) in [("cost.cpu_overlap", c.cpu_overlap), ("cost.comm_overlap", c.comm_overlap)] {
            if !(0.0..=1.0).contains(&v) {
                return fail(
                    k,
                    format!("must be in [0, 1], got {v}"),
                    "use a fraction: 0 = not hidden, 1 = fully hidden",
                );
            }
        }
        for (k, v) in [
            ("cost.gemm_efficiency_scale", c.gemm_efficiency_scale),
            ("cost.attention_efficiency_scale", c.attention_efficiency_scale),
            ("cost.moe_efficiency_scale", c.moe_efficiency_scale),
            ("cost.w4_moe_efficiency_scale", c.w4_moe_efficiency_scale.unwrap_or(1.0)),
        ] {
            within(k, v, 0.0, 2.0, "1 keeps the GPU's measured kernel efficiency")?;
        }
        for (k, v) in [
            ("cost.compute_efficiency", c.compute_efficiency),
            ("cost.memory_efficiency", c.memory_efficiency),
            ("cost.interconnect_efficiency", c.interconnect_efficiency),
        ] {
            if let Some(v) = v
                && !(v > 0.0 && v <= 1.0)
            {
                return fail(k, format!("must be in (0, 1], got {v}"), "use a fraction such as 0.7");
            }
        }
        match (c.model, c.step_time_ms) {
            (CostModelKind::Roofline | CostModelKind::Kernel, Some(_)) => {
                return fail(
                    "cost.step_time_ms",
                    "only applies to model = \"constant\" or \"exponential\"",
                    "remove it, or change cost.model",
                );
            }
            (CostModelKind::Constant | CostModelKind::Exponential, None) => {
                return fail(
                    "cost.step_time_ms",
                    "is required by this cost model",
                    "set step_time_ms = <ms per engine step>",
                );
            }
            (_, Some(t)) => positive("cost.step_time_ms", t)?,
            _ => {}
        }
        Ok(())
    }

    /// `[plan]`.
    fn validate_plan(&self) -> Check {
        if let Some(p) = &self.plan {
            if let Some(r) = p.rate {
                positive("plan.rate", r)?;
            }
            if p.max_replicas == 0 {
                return fail("plan.max_replicas", "must be at least 1", "set max_replicas = 64, say");
            }
            if p.tp.contains(&0) {
                return fail("plan.tp", "tp values must be at least 1", "use e.g. tp = [1, 2, 4, 8]");
            }
        }
        Ok(())
    }

    /// `[sweep]`.
    fn validate_sweep(&self) -> Check {
        if let Some(sw) = &self.sweep {
            if sw.replications == 0 {
                return fail(
                    "sweep.replications",
                    "must be at least 1",
                    "set replications = 1 or more (3+ gives confidence intervals)",
                );
            }
            for (k, v) in &sw.grid {
                if v.as_array().is_none_or(|a| a.is_empty()) {
                    return fail(
                        &format!("sweep.grid.{k}"),
                        "must be a non-empty list of values",
                        format!("write \"{k}\" = [v1, v2, ...]"),
                    );
                }
            }
        }
        Ok(())
    }
}

/// `[engine]` batch, block and memory sizes.
fn engine_sizes(e: &EngineConfig) -> Check {
    if e.num_scheduler_steps == 0 || e.num_scheduler_steps > 1024 {
        return fail(
            "engine.num_scheduler_steps",
            "must be between 1 and 1024",
            "set num_scheduler_steps = 1 (off) or the steps per schedule, e.g. 8 as vLLM 0.6's benchmarks used",
        );
    }
    if e.max_num_seqs == 0 {
        return fail("engine.max_num_seqs", "must be at least 1", "set max_num_seqs >= 1 (vLLM's default is 256)");
    }
    if e.max_num_batched_tokens == 0 && e.chunked_prefill {
        return fail(
            "engine.max_num_batched_tokens",
            "0 (max(max_model_len, 2048), vLLM V0's rule) applies only without chunked prefill",
            "set a token budget such as 8192",
        );
    }
    if let Some(m) = e.mem_fraction_static
        && !(m > 0.0 && m < 1.0)
    {
        return fail(
            "engine.mem_fraction_static",
            format!("must be in (0, 1), got {m}"),
            "use a fraction such as 0.85, or leave it out for SGLang's automatic value",
        );
    }
    if !(e.kv_cache_free_gpu_memory_fraction > 0.0 && e.kv_cache_free_gpu_memory_fraction < 1.0) {
        return fail(
            "engine.kv_cache_free_gpu_memory_fraction",
            format!("must be in (0, 1), got {}", e.kv_cache_free_gpu_memory_fraction),
            "use 0.9 (TensorRT-LLM's default) or 0.95",
        );
    }
    if !(e.new_token_ratio > 0.0 && e.new_token_ratio <= 1.0) {
        return fail(
            "engine.new_token_ratio",
            format!("must be in (0, 1], got {}", e.new_token_ratio),
            "use 0.7 (SGLang's default)",
        );
    }
    if !(e.min_new_token_ratio > 0.0 && e.min_new_token_ratio <= e.new_token_ratio) {
        return fail(
            "engine.min_new_token_ratio",
            format!("must be in (0, new_token_ratio = {}], got {}", e.new_token_ratio, e.min_new_token_ratio),
            "use 0.098 (SGLang's default, 0.14 × 0.7)",
        );
    }
    if e.new_token_ratio_decay_steps == 0 {
        return fail("engine.new_token_ratio_decay_steps", "must be at least 1", "use 600 (SGLang's default)");
    }
    if e.block_size == 0 || e.block_size > 1024 {
        return fail(
            "engine.block_size",
            format!("must be between 1 and 1024 tokens, got {}", e.block_size),
            "use 16 (vLLM's default)",
        );
    }
    if !(e.gpu_memory_utilization > 0.0 && e.gpu_memory_utilization <= 1.0) {
        return fail(
            "engine.gpu_memory_utilization",
            format!("must be in (0, 1], got {}", e.gpu_memory_utilization),
            "use a fraction such as 0.9",
        );
    }
    if e.max_model_len == Some(0) {
        return fail("engine.max_model_len", "must be at least 1", "leave it out to use the model's context");
    }
    if e.num_gpu_blocks == Some(0) {
        return fail("engine.num_gpu_blocks", "must be at least 1", "leave it out to derive it from memory");
    }
    non_negative("engine.memory_reserve_gb", e.memory_reserve_gb)?;
    Ok(())
}

/// `[engine]` front end, queue and step formation.
fn engine_scheduling(e: &EngineConfig) -> Check {
    non_negative("engine.preprocess_ms", e.preprocess_ms)?;
    non_negative("engine.preprocess_us_per_token", e.preprocess_us_per_token)?;
    non_negative("engine.frontend_latency_ms", e.frontend_latency_ms)?;
    if let Some(a) = e.priority_aging_s {
        positive("engine.priority_aging_s", a)?;
    }
    if !(e.prediction_error.is_finite() && (0.0..=5.0).contains(&e.prediction_error)) {
        return fail(
            "engine.prediction_error",
            format!("must be between 0 and 5, got {}", e.prediction_error),
            "use 0 for known output lengths, e.g. 0.5 for a rough predictor",
        );
    }
    non_negative("engine.batch_timeout_ms", e.batch_timeout_ms)?;
    if !(0.0..0.5).contains(&e.kv_watermark) {
        return fail(
            "engine.kv_watermark",
            format!("must be a fraction in [0, 0.5), got {}", e.kv_watermark),
            "use e.g. 0.01 (vLLM v0's default)",
        );
    }
    if e.chunked_prefill && e.mixed_prefill {
        return fail(
            "engine.mixed_prefill",
            "applies without chunked prefill (whole prompts next to decodes, as Orca)",
            "set chunked_prefill = false, or remove mixed_prefill (chunked prefill already mixes)",
        );
    }
    if e.batching == super::Batching::Static && e.chunked_prefill {
        return fail(
            "engine.batching",
            "static batching prefills whole prompts: it cannot be combined with chunked prefill",
            "set chunked_prefill = false (or use preset = \"static\")",
        );
    }
    if e.batching == super::Batching::Static && e.mixed_prefill {
        return fail(
            "engine.mixed_prefill",
            "static batching admits a whole batch at once: prompts cannot join running decodes",
            "remove mixed_prefill (or use batching = \"continuous\")",
        );
    }
    if e.prefill_first && !e.chunked_prefill {
        return fail(
            "engine.prefill_first",
            "applies with chunked prefill; without it, steps are prefill-first unless mixed_prefill = true",
            "set chunked_prefill = true, or remove prefill_first",
        );
    }
    if let Some(c) = e.max_chunk_tokens {
        if c == 0 {
            return fail("engine.max_chunk_tokens", "must be at least 1", "leave it out to use the whole budget");
        }
        if !e.chunked_prefill {
            return fail(
                "engine.max_chunk_tokens",
                "applies with chunked prefill",
                "set chunked_prefill = true or remove it",
            );
        }
    }
    if e.max_waiting == Some(0) {
        return fail("engine.max_waiting", "must be at least 1", "leave it out for an unbounded queue");
    }
    if let Some(w) = e.max_wait_s {
        positive("engine.max_wait_s", w)?;
    }
    Ok(())
}

/// `[engine]` swap space and the KV offload tiers.
fn engine_offload(e: &EngineConfig) -> Check {
    non_negative("engine.swap_space_gb", e.swap_space_gb)?;
    non_negative("engine.kv_offload_cpu_gb", e.kv_offload_cpu_gb)?;
    non_negative("engine.kv_offload_disk_gb", e.kv_offload_disk_gb)?;
    positive("engine.kv_offload_cpu_gbps", e.kv_offload_cpu_gbps)?;
    positive("engine.kv_offload_disk_gbps", e.kv_offload_disk_gbps)?;
    if (e.kv_offload_cpu_gb > 0.0 || e.kv_offload_disk_gb > 0.0) && !e.prefix_caching {
        return fail(
            "engine.kv_offload_cpu_gb",
            "offload tiers hold the prefix cache's evicted blocks, and prefix caching is off",
            "set engine.prefix_caching = true, or the offload sizes to 0",
        );
    }
    if e.kv_offload_connector == super::OffloadConnector::Vllm && e.kv_offload_disk_gb > 0.0 {
        return fail(
            "engine.kv_offload_disk_gb",
            "vLLM's OffloadingConnector has no disk tier (vLLM 0.11 offloads to host memory only)",
            "set engine.kv_offload_connector = \"lmcache\" for a disk tier, or kv_offload_disk_gb = 0",
        );
    }
    positive("engine.swap_bandwidth_gbps", e.swap_bandwidth_gbps)?;
    Ok(())
}

impl Scenario {
    /// Checks `[[pools]]` and `[disaggregation]`.
    fn validate_pools(&self) -> Check {
        use super::PoolRole;
        let h = &self.hardware;
        let d = super::HardwareConfig::default();
        if !self.pools.is_empty()
            && (h.gpu != d.gpu || h.tp != d.tp || h.replicas != d.replicas || h.gpu_spec.is_some())
        {
            return fail(
                "hardware",
                "with [[pools]], GPUs, tp and replicas are set per pool",
                "move hardware.gpu, tp and replicas into the pools (hardware.router still applies)",
            );
        }
        for (i, p) in self.pools.iter().enumerate() {
            let k = |f: &str| format!("pools[{i}].{f}");
            if p.name.trim().is_empty() {
                return fail(&k("name"), "is empty", "name the pool, e.g. \"prefill\"");
            }
            if self.pools[..i].iter().any(|q| q.name == p.name) {
                return fail(
                    &k("name"),
                    format!("pool name \"{}\" is used twice", p.name),
                    "give each pool its own name",
                );
            }
            if p.tp == 0 {
                return fail(&k("tp"), "must be at least 1 GPU", "set tp = 1, 2, 4 or 8");
            }
            if self.pools.iter().all(|p| p.replicas == 0) {
                return fail(&k("replicas"), "every pool has 0 replicas", "give at least one pool replicas >= 1");
            }
            if let Some(x) = p.price_per_gpu_hour {
                non_negative(&k("price_per_gpu_hour"), x)?;
            }
            // The front end (tokenizer workers, client timeouts) sits before
            // the router, so it is one for the whole cluster.
            for key in FRONTEND_KEYS {
                if p.engine.contains_key(*key) {
                    return fail(
                        &k(&format!("engine.{key}")),
                        "is a front-end setting, shared by every pool (requests meet it before routing)",
                        format!("set engine.{key} in [engine] instead"),
                    );
                }
            }
        }
        // A pool with 0 replicas is left out (so a baseline or sweep can drop it).
        let has = |r: PoolRole| self.pools.iter().any(|p| p.role == r && p.replicas > 0);
        let split = has(PoolRole::Prefill) || has(PoolRole::Decode);
        if split {
            if has(PoolRole::Mixed) {
                return fail(
                    "pools",
                    "mixed pools cannot be combined with prefill/decode pools",
                    "give every pool role = \"prefill\" or \"decode\", or none of them",
                );
            }
            if !has(PoolRole::Prefill) || !has(PoolRole::Decode) {
                return fail(
                    "pools",
                    "disaggregation needs at least one prefill pool and one decode pool",
                    "add the missing pool with role = \"prefill\" or role = \"decode\"",
                );
            }
        }
        if let Some(x) = &self.disaggregation {
            if self.pools.is_empty() {
                return fail(
                    "disaggregation",
                    "applies to prefill and decode pools",
                    "add [[pools]] with role = \"prefill\" and role = \"decode\", or remove [disaggregation]",
                );
            }
            positive("disaggregation.kv_transfer_gbps", x.kv_transfer_gbps)?;
            non_negative("disaggregation.kv_transfer_latency_ms", x.kv_transfer_latency_ms)?;
        }
        Ok(())
    }
}

/// Checks `[engine.speculative]`.
fn speculative(sp: &super::SpeculativeConfig, model: CostModelKind) -> Check {
    if sp.num_tokens > 16 {
        return fail(
            "engine.speculative.num_tokens",
            format!("must be between 0 (off) and 16 proposed tokens, got {}", sp.num_tokens),
            "use e.g. 3 to 5",
        );
    }
    acceptance("engine.speculative.acceptance", sp.acceptance)?;
    match (sp.method, &sp.draft_model) {
        (super::SpecMethod::Draft, None) => {
            return fail(
                "engine.speculative.draft_model",
                "method = \"draft\" needs a draft model",
                "set draft_model = \"<file stem in models/llm/>\", or method = \"mtp\"",
            );
        }
        (super::SpecMethod::Mtp, Some(_)) => {
            return fail(
                "engine.speculative.draft_model",
                "method = \"mtp\" drafts with a head of the target model, not a separate model",
                "remove draft_model, or set method = \"draft\"",
            );
        }
        _ => {}
    }
    if !matches!(model, CostModelKind::Roofline | CostModelKind::Kernel) {
        return fail(
            "engine.speculative",
            "speculative decoding needs the roofline or kernel cost model (it prices the draft steps and the wider \
             verify pass)",
            "set cost.model = \"kernel\" (or \"roofline\"), or remove [engine.speculative]",
        );
    }
    Ok(())
}

/// Checks an acceptance rate α.
pub(super) fn acceptance(key: &str, a: f64) -> Check {
    if (0.0..=1.0).contains(&a) {
        Ok(())
    } else {
        fail(
            key,
            format!("must be a probability in [0, 1], got {a}"),
            "use e.g. 0.7 (measured acceptance rates are 0.5-0.9)",
        )
    }
}

/// Checks an `[slo]` table (or a class's `slo`) whose key is `key`.
pub(super) fn slo(key: &str, slo: &super::SloConfig) -> Check {
    if slo.ttft_ms.is_none() && slo.tpot_ms.is_none() && slo.e2e_ms.is_none() {
        return fail(
            key,
            format!("{key} sets no objective"),
            format!("set ttft_ms, tpot_ms and/or e2e_ms, or remove {key}"),
        );
    }
    if let Some(p) = slo.percentile
        && !super::PERCENTILES.contains(&p)
    {
        return fail(
            &format!("{key}.percentile"),
            format!("must be one of the reported percentiles, got {p}"),
            "use 50, 90, 95, 99, 99.9 or 99.99",
        );
    }
    if let Some(a) = slo.min_attainment
        && !(a > 0.0 && a <= 1.0)
    {
        return fail(
            &format!("{key}.min_attainment"),
            format!("must be a fraction in (0, 1], got {a}"),
            "use e.g. 0.99",
        );
    }
    for (k, v) in [("ttft_ms", slo.ttft_ms), ("tpot_ms", slo.tpot_ms), ("e2e_ms", slo.e2e_ms)] {
        if let Some(v) = v {
            positive(&format!("{key}.{k}"), v)?;
        }
    }
    Ok(())
}

/// A number as an error quotes it: as written when short, in powers of ten
/// when it would run to dozens of digits.
pub fn shown(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e15 { format!("{v:e}") } else { format!("{v}") }
}
