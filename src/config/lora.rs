//! `[lora]`: requests name LoRA adapters (docs/lora.md).

use super::validate::{Check, fail, positive};
use serde::{Deserialize, Serialize};

/// How requests spread over the adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Popularity {
    /// Adapter k (1-based) with probability ∝ k^−zipf_s: a few adapters take most requests.
    #[default]
    Zipf,
    /// Every adapter alike.
    Uniform,
}

/// `[lora]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// Distinct adapters the requests name (1: a single adapter, merged into
    /// the base weights and served as the base model).
    pub adapters: u32,
    /// How requests spread over them.
    pub popularity: Popularity,
    /// Zipf exponent.
    pub zipf_s: f64,
    /// Adapter rank (vLLM `--max-lora-rank` default 16).
    pub rank: u32,
    /// Adapters held in GPU memory per replica, and most distinct adapters
    /// in one batch (vLLM `--max-loras`, default 1).
    pub max_loras: u32,
    /// Adapters cached in host memory per replica (vLLM `--max-cpu-loras`;
    /// unset: `max_loras`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_loras: Option<u32>,
    /// Host-to-GPU bandwidth for adapter loads, GB/s.
    pub host_gbps: f64,
    /// Storage-to-host bandwidth for adapters not in host memory, GB/s.
    pub storage_gbps: f64,
    /// Fraction of peak FLOP/s the multi-LoRA kernels (Punica's SGMV / vLLM's
    /// shrink–expand) reach on the adapter FLOPs.
    pub kernel_efficiency: f64,
    /// The router prefers a replica holding the request's adapter (unless it
    /// has `hardware.prefix_load_cap` more requests than the least loaded).
    pub router_affinity: bool,
}

impl Default for LoraConfig {
    fn default() -> Self {
        LoraConfig {
            adapters: 1,
            popularity: Popularity::Zipf,
            zipf_s: 1.0,
            rank: 16,
            max_loras: 1,
            max_cpu_loras: None,
            host_gbps: 25.0,
            storage_gbps: 2.0,
            kernel_efficiency: 0.1,
            router_affinity: false,
        }
    }
}

impl LoraConfig {
    /// Checks the values.
    pub(super) fn validate(&self) -> Check {
        if self.adapters == 0 {
            return fail("lora.adapters", "must be at least 1", "set adapters >= 1");
        }
        if self.rank == 0 {
            return fail("lora.rank", "must be at least 1", "use e.g. rank = 16");
        }
        if self.max_loras == 0 {
            return fail("lora.max_loras", "must be at least 1", "use e.g. max_loras = 4");
        }
        if let Some(c) = self.max_cpu_loras
            && c < self.max_loras
        {
            return fail(
                "lora.max_cpu_loras",
                format!("is {c}, below max_loras ({}): vLLM requires max_cpu_loras >= max_loras", self.max_loras),
                "raise it, or leave it unset",
            );
        }
        positive("lora.zipf_s", self.zipf_s)?;
        positive("lora.host_gbps", self.host_gbps)?;
        positive("lora.storage_gbps", self.storage_gbps)?;
        if !(self.kernel_efficiency > 0.0 && self.kernel_efficiency <= 1.0) {
            return fail(
                "lora.kernel_efficiency",
                format!("is {}: a fraction in (0, 1]", self.kernel_efficiency),
                "use e.g. 0.1",
            );
        }
        Ok(())
    }

    /// Cumulative popularity of the adapters (one f64 each, built in place).
    pub fn cdf(&self) -> Vec<f64> {
        let weight = |k: u32| match self.popularity {
            Popularity::Zipf => (k as f64).powf(-self.zipf_s),
            Popularity::Uniform => 1.0,
        };
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=self.adapters)
            .map(|k| {
                acc += weight(k);
                acc
            })
            .collect();
        let total = acc;
        cdf.iter_mut().for_each(|c| *c /= total);
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        cdf
    }
}
