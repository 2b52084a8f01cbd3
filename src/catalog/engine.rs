//! Engine profiles: what a serving engine (vLLM, SGLang, TensorRT-LLM, or a
//! research scheduler) decides for you, with where each value came from.
//!
//! A profile is a catalogue file `models/engine/<name>.toml` that scenarios
//! name with `engine.preset = "<name>"`. It holds:
//! - `[engine]`: scheduler and memory defaults (any `[engine]` key);
//! - `[cost]`: step-cost corrections (any `[cost]` key): per-step, per-sequence
//!   and per-request overheads, kernel efficiencies, overlap;
//! - `[[rules]]`: defaults that depend on the GPU, the parallelism or the
//!   weight format (vLLM picks larger batches on 80 GB Hopper GPUs, say);
//! - `[sources]`: for every key set above, where the value came from (the
//!   engine's code or documentation, a paper, a published measurement, or a
//!   `servesim calibrate` fit).
//!
//! Keys the scenario sets explicitly always win over the profile; a rule's
//! keys win over the profile's base keys.

use crate::spec::GpuSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One engine profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProfile {
    /// Display name, e.g. "vLLM V1".
    pub name: String,
    /// Engine family: `vllm`, `sglang`, `trtllm`, or `research` for
    /// schedulers from papers (Orca, Sarathi-Serve).
    pub family: String,
    /// Engine version the values describe (e.g. "0.11.0"); empty for papers.
    #[serde(default)]
    pub version: String,
    /// What the profile models, in a sentence or two.
    #[serde(default)]
    pub description: String,
    /// `[engine]` keys the engine sets.
    #[serde(default)]
    pub engine: toml::Table,
    /// `[cost]` keys the engine sets.
    #[serde(default)]
    pub cost: toml::Table,
    /// Defaults that depend on the set-up, applied in order after the base keys.
    #[serde(default)]
    pub rules: Vec<ProfileRule>,
    /// Where every value came from: `"engine.max_num_seqs"` → source.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Defaults that apply when a condition on the set-up holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRule {
    /// When the rule applies (every condition given must hold).
    pub when: RuleCondition,
    /// `[engine]` keys it sets.
    #[serde(default)]
    pub engine: toml::Table,
    /// `[cost]` keys it sets.
    #[serde(default)]
    pub cost: toml::Table,
    /// Where the rule came from.
    pub source: String,
}

/// A condition on the set-up a profile is applied to.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleCondition {
    /// GPU memory is at least this many GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gib_at_least: Option<f64>,
    /// GPU memory is below this many GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gib_below: Option<f64>,
    /// The GPU's name contains one of these (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_name_contains: Vec<String>,
    /// The GPU's name contains none of these (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_name_excludes: Vec<String>,
    /// The GPU has (true) or lacks (false) FP8 tensor cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_fp8: Option<bool>,
    /// Tensor-parallel degree is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp_at_least: Option<u32>,
    /// Tensor-parallel degree is at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp_at_most: Option<u32>,
    /// The weight format is one of these (`bf16`, `fp8`, `int4`, `fp4`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dtype: Vec<String>,
    /// The longest accepted request (`engine.max_model_len`, else the
    /// model's context) is above this many tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len_above: Option<u32>,
}

/// The set-up a profile is applied to.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The GPU profile, when known.
    pub gpu: Option<&'a GpuSpec>,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Weight format name (`bf16`, `fp8`, `int4`, `fp4`).
    pub dtype: &'a str,
    /// `engine.max_model_len` if set, else the model's context, when known.
    pub max_model_len: Option<u32>,
}

impl RuleCondition {
    /// Whether the condition holds for `ctx`. Conditions on the GPU fail when
    /// the GPU is unknown.
    pub fn holds(&self, ctx: &Context) -> bool {
        let gpu_conditions = self.gpu_memory_gib_at_least.is_some()
            || self.gpu_memory_gib_below.is_some()
            || !self.gpu_name_contains.is_empty()
            || !self.gpu_name_excludes.is_empty()
            || self.gpu_fp8.is_some();
        if gpu_conditions {
            let Some(g) = ctx.gpu else { return false };
            let name = g.name.to_ascii_lowercase();
            if self.gpu_memory_gib_at_least.is_some_and(|m| g.memory_gb < m)
                || self.gpu_memory_gib_below.is_some_and(|m| g.memory_gb >= m)
                || (!self.gpu_name_contains.is_empty()
                    && !self.gpu_name_contains.iter().any(|s| name.contains(&s.to_ascii_lowercase())))
                || self.gpu_name_excludes.iter().any(|s| name.contains(&s.to_ascii_lowercase()))
                || self.gpu_fp8.is_some_and(|f| f != (g.fp8_tflops > 0.0))
            {
                return false;
            }
        }
        if self.max_model_len_above.is_some_and(|m| ctx.max_model_len.is_none_or(|l| l <= m)) {
            return false;
        }
        self.tp_at_least.is_none_or(|t| ctx.tp >= t)
            && self.tp_at_most.is_none_or(|t| ctx.tp <= t)
            && (self.dtype.is_empty() || self.dtype.iter().any(|d| d.eq_ignore_ascii_case(ctx.dtype)))
    }
}

/// The keys a profile sets for one set-up: `(engine keys, cost keys)`, the
/// base keys overridden by every rule that holds, in order.
pub fn resolved_keys(p: &EngineProfile, ctx: &Context) -> (toml::Table, toml::Table) {
    let mut engine = p.engine.clone();
    let mut cost = p.cost.clone();
    for r in p.rules.iter().filter(|r| r.when.holds(ctx)) {
        engine.extend(r.engine.clone());
        cost.extend(r.cost.clone());
    }
    (engine, cost)
}

impl EngineProfile {
    /// Checks the profile: its keys are valid `[engine]` and `[cost]` keys
    /// (with every rule applied), it does not name another preset, and every
    /// key has a source.
    pub fn validate(&self) -> Result<(), String> {
        use crate::config::{CostConfig, EngineConfig};
        if self.family.trim().is_empty() {
            return Err("`family` is empty: say which engine this is (vllm, sglang, trtllm, research)".into());
        }
        let check = |engine: &toml::Table, cost: &toml::Table, what: &str| -> Result<(), String> {
            if engine.contains_key("preset") {
                return Err(format!("{what}: a profile cannot set `preset` (profiles do not nest)"));
            }
            EngineConfig::deserialize(engine.clone()).map_err(|e| format!("{what} [engine]: {}", e.message()))?;
            CostConfig::deserialize(cost.clone()).map_err(|e| format!("{what} [cost]: {}", e.message()))?;
            Ok(())
        };
        check(&self.engine, &self.cost, "base keys")?;
        let mut engine = self.engine.clone();
        let mut cost = self.cost.clone();
        for (i, r) in self.rules.iter().enumerate() {
            check(&r.engine, &r.cost, &format!("rules[{i}]"))?;
            if r.source.trim().is_empty() {
                return Err(format!("rules[{i}]: `source` is empty: say where the rule comes from"));
            }
            engine.extend(r.engine.clone());
            cost.extend(r.cost.clone());
            check(&engine, &cost, &format!("base keys with rules[..={i}]"))?;
        }
        for (section, t) in [("engine", &self.engine), ("cost", &self.cost)] {
            for k in t.keys() {
                let key = format!("{section}.{k}");
                if self.sources.get(&key).is_none_or(|s| s.trim().is_empty()) {
                    return Err(format!("`{key}` has no source: add `\"{key}\" = \"...\"` to [sources]"));
                }
            }
        }
        Ok(())
    }

    /// Every key the profile may set (base keys and rule keys), as `section.key`.
    pub fn keys(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |section: &str, t: &toml::Table| {
            for k in t.keys() {
                let key = format!("{section}.{k}");
                if !out.contains(&key) {
                    out.push(key);
                }
            }
        };
        add("engine", &self.engine);
        add("cost", &self.cost);
        for r in &self.rules {
            add("engine", &r.engine);
            add("cost", &r.cost);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, mem: f64, fp8: f64) -> GpuSpec {
        let mut g = crate::catalog::Catalog::builtin().unwrap().gpu("h100-sxm").unwrap().spec.clone();
        g.name = name.into();
        g.memory_gb = mem;
        g.fp8_tflops = fp8;
        g
    }

    #[test]
    fn conditions_compose() {
        let h100 = gpu("H100-SXM", 80.0, 1979.0);
        let a100 = gpu("A100-SXM-80GB", 80.0, 0.0);
        let c = RuleCondition {
            gpu_memory_gib_at_least: Some(70.0),
            gpu_name_excludes: vec!["a100".into()],
            ..Default::default()
        };
        let ctx = |g| Context { gpu: Some(g), tp: 1, dtype: "bf16", max_model_len: None };
        assert!(c.holds(&ctx(&h100)));
        assert!(!c.holds(&ctx(&a100)));
        assert!(!c.holds(&Context { gpu: None, tp: 1, dtype: "bf16", max_model_len: None }));
        let fp8 = RuleCondition { gpu_fp8: Some(false), dtype: vec!["fp8".into()], ..Default::default() };
        let at = |g, tp, dtype, len| Context { gpu: g, tp, dtype, max_model_len: len };
        assert!(fp8.holds(&at(Some(&a100), 1, "fp8", None)));
        assert!(!fp8.holds(&at(Some(&h100), 1, "fp8", None)));
        assert!(!fp8.holds(&at(Some(&a100), 1, "bf16", None)));
        let tp = RuleCondition { tp_at_least: Some(4), ..Default::default() };
        assert!(tp.holds(&at(None, 4, "bf16", None)));
        assert!(!tp.holds(&at(None, 2, "bf16", None)));
        let long = RuleCondition { max_model_len_above: Some(32768), ..Default::default() };
        assert!(long.holds(&at(None, 1, "bf16", Some(131072))));
        assert!(!long.holds(&at(None, 1, "bf16", Some(32768))));
        assert!(!long.holds(&at(None, 1, "bf16", None)));
    }

    /// SGLang sizes its CUDA graphs by GPU memory: under 20 GiB it captures
    /// decode batches up to 8 at any tp (review: 24 or 80 were used).
    #[test]
    fn sglang_captures_graphs_up_to_8_on_gpus_under_20_gib() {
        let catalog = crate::catalog::Catalog::builtin().unwrap();
        let p = &catalog.engine("sglang").unwrap().spec;
        let max_bs = |mem: f64, tp: u32| {
            let g = gpu("T4", mem, 0.0);
            let (engine, _) = resolved_keys(p, &Context { gpu: Some(&g), tp, dtype: "bf16", max_model_len: None });
            (engine["cuda_graph_max_bs"].as_integer().unwrap(), engine["max_num_batched_tokens"].as_integer().unwrap())
        };
        assert_eq!(max_bs(16.0, 1), (8, 2048));
        assert_eq!(max_bs(16.0, 4), (8, 2048));
        assert_eq!(max_bs(24.0, 1), (24, 2048));
        assert_eq!(max_bs(24.0, 4).0, 80);
        assert_eq!(max_bs(80.0, 1).0, 256);
    }

    #[test]
    fn validation_requires_sources_and_valid_keys() {
        let mut p: EngineProfile =
            toml::from_str("name = \"x\"\nfamily = \"vllm\"\n[engine]\nmax_num_seqs = 4\n").unwrap();
        assert!(p.validate().unwrap_err().contains("engine.max_num_seqs"));
        p.sources.insert("engine.max_num_seqs".into(), "a test".into());
        p.validate().unwrap();
        p.engine.insert("max_num_seq".into(), toml::Value::Integer(3));
        assert!(p.validate().unwrap_err().contains("max_num_seq"));
    }
}
