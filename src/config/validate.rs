//! Value checks that the type system cannot express. Each failure names the
//! key, what is wrong and what is allowed.

use super::{ArrivalKind, CostModelKind, LengthDist, Scenario};

type Check = Result<(), (String, String, String)>;

fn fail(key: &str, msg: impl Into<String>, hint: impl Into<String>) -> Check {
    Err((key.to_string(), msg.into(), hint.into()))
}

fn positive(key: &str, v: f64) -> Check {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        fail(key, format!("must be a positive number, got {v}"), "use a value > 0")
    }
}

fn non_negative(key: &str, v: f64) -> Check {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        fail(key, format!("must be 0 or positive, got {v}"), "use a value >= 0")
    }
}

fn length(key: &str, d: &LengthDist) -> Check {
    match *d {
        LengthDist::Fixed { value } => {
            if value == 0 && key.ends_with("prompt_tokens") {
                return fail(key, "a prompt needs at least 1 token", "set value >= 1");
            }
            if value == 0 {
                return fail(key, "output length 0 is not supported yet", "set value >= 1");
            }
            Ok(())
        }
        LengthDist::Uniform { min, max } => {
            if min == 0 {
                return fail(key, "min must be at least 1 token", "set min >= 1");
            }
            if min > max {
                return fail(key, format!("min ({min}) is larger than max ({max})"), "set min <= max");
            }
            Ok(())
        }
        LengthDist::Lognormal { mean, cv } => {
            if !(mean.is_finite() && mean >= 1.0) {
                return fail(key, format!("mean must be at least 1 token, got {mean}"), "set mean >= 1");
            }
            if !(cv.is_finite() && cv > 0.0) {
                return fail(
                    key,
                    format!("cv must be positive, got {cv}"),
                    "set cv > 0 (use dist = \"fixed\" for no spread)",
                );
            }
            Ok(())
        }
    }
}

impl Scenario {
    /// Checks every value; returns (key path, problem, fix) for the first bad one.
    pub fn validate(&self) -> Check {
        match (self.num_requests, self.duration_s) {
            (Some(_), Some(_)) => {
                return fail("duration_s", "both num_requests and duration_s are set", "keep one of them");
            }
            (None, None) => {
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
        if let Some(d) = self.duration_s
            && self.warmup_s >= d
        {
            return fail(
                "warmup_s",
                format!("a warm-up of {} s leaves nothing of a {d} s run to measure", self.warmup_s),
                "use warmup_s < duration_s",
            );
        }
        if self.model.name.trim().is_empty() {
            return fail("model.name", "is empty", "name a file in models/llm/, e.g. \"llama-3.1-8b\"");
        }
        let h = &self.hardware;
        if h.tp == 0 {
            return fail("hardware.tp", "must be at least 1 GPU", "set tp = 1, 2, 4 or 8");
        }
        if h.replicas == 0 {
            return fail("hardware.replicas", "must be at least 1", "set replicas >= 1");
        }
        if let Some(p) = h.price_per_gpu_hour {
            non_negative("hardware.price_per_gpu_hour", p)?;
        }
        let e = &self.engine;
        if e.max_num_seqs == 0 {
            return fail("engine.max_num_seqs", "must be at least 1", "set max_num_seqs >= 1 (vLLM's default is 256)");
        }
        if e.max_num_batched_tokens == 0 {
            return fail("engine.max_num_batched_tokens", "must be at least 1", "set a token budget such as 8192");
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
        non_negative("engine.preprocess_ms", e.preprocess_ms)?;
        non_negative("engine.preprocess_us_per_token", e.preprocess_us_per_token)?;
        let c = &self.cost;
        non_negative("cost.step_overhead_ms", c.step_overhead_ms)?;
        non_negative("cost.per_request_overhead_ms", c.per_request_overhead_ms)?;
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
            (CostModelKind::Roofline, Some(_)) => {
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
        let w = &self.workload;
        match w.arrival {
            ArrivalKind::Offline => {
                if w.rate.is_some() {
                    return fail(
                        "workload.rate",
                        "is not used by arrival = \"offline\" (all requests arrive at t = 0)",
                        "remove rate, or pick arrival = \"poisson\"",
                    );
                }
                if self.warmup_s > 0.0 {
                    return fail(
                        "warmup_s",
                        "every request of an offline run arrives at t = 0, so a warm-up would exclude all of them",
                        "remove warmup_s (or set it to 0) for arrival = \"offline\"",
                    );
                }
                if self.duration_s.is_some() {
                    return fail(
                        "duration_s",
                        "offline arrivals need a request count",
                        "use num_requests with arrival = \"offline\"",
                    );
                }
            }
            _ => match w.rate {
                None => {
                    return fail(
                        "workload.rate",
                        "is required by this arrival process",
                        "set rate = <requests per second>",
                    );
                }
                Some(r) => positive("workload.rate", r)?,
            },
        }
        match w.arrival {
            ArrivalKind::Gamma => match (w.cv, w.burstiness) {
                (Some(_), Some(_)) => {
                    return fail(
                        "workload.burstiness",
                        "cv and burstiness are both set",
                        "keep one: cv = 1/sqrt(burstiness)",
                    );
                }
                (None, None) => {
                    return fail(
                        "workload.cv",
                        "gamma arrivals need cv or burstiness",
                        "set cv = 2.0 (burstier than Poisson) or burstiness = 0.25",
                    );
                }
                (Some(v), None) => positive("workload.cv", v)?,
                (None, Some(b)) => positive("workload.burstiness", b)?,
            },
            _ => {
                if w.cv.is_some() {
                    return fail(
                        "workload.cv",
                        "only applies to arrival = \"gamma\"",
                        "remove cv, or set arrival = \"gamma\"",
                    );
                }
                if w.burstiness.is_some() {
                    return fail(
                        "workload.burstiness",
                        "only applies to arrival = \"gamma\"",
                        "remove burstiness, or set arrival = \"gamma\"",
                    );
                }
            }
        }
        length("workload.prompt_tokens", &w.prompt_tokens)?;
        length("workload.output_tokens", &w.output_tokens)?;
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
        if let Some(slo) = &self.slo {
            if slo.ttft_ms.is_none() && slo.tpot_ms.is_none() && slo.e2e_ms.is_none() {
                return fail("slo", "[slo] sets no objective", "set ttft_ms, tpot_ms and/or e2e_ms, or remove [slo]");
            }
            if let Some(p) = slo.percentile
                && !crate::metrics::stats::PERCENTILES.contains(&p)
            {
                return fail(
                    "slo.percentile",
                    format!("must be one of the reported percentiles, got {p}"),
                    "use 50, 90, 95, 99, 99.9 or 99.99",
                );
            }
            if let Some(a) = slo.min_attainment
                && !(a > 0.0 && a <= 1.0)
            {
                return fail("slo.min_attainment", format!("must be a fraction in (0, 1], got {a}"), "use e.g. 0.99");
            }
            for (k, v) in [("slo.ttft_ms", slo.ttft_ms), ("slo.tpot_ms", slo.tpot_ms), ("slo.e2e_ms", slo.e2e_ms)] {
                if let Some(v) = v {
                    positive(k, v)?;
                }
            }
        }
        Ok(())
    }
}
