//! `run`'s quick flags: a scenario built on the spot, as `vllm bench serve`
//! users expect, each flag mapped to its scenario key.

use super::ScenarioArgs;
use crate::error::{ConfigError, Result};
use clap::Args;
use std::path::PathBuf;

/// `run`'s scenario: a file, or none with the quick flags.
#[derive(Debug, Args)]
pub(super) struct RunScenarioArgs {
    /// Scenario TOML file (leave it out to build one from the quick flags
    /// on top of scenarios/quickstart.toml).
    pub(super) scenario: Option<PathBuf>,
    /// Override a scenario key, e.g. --set workload.rate=12 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(super) set: Vec<String>,
    /// Folder with llm/ and gpu/ TOML files read on top of the built-in catalogue
    /// (default: ./models if it exists).
    #[arg(long, value_name = "DIR")]
    pub(super) models: Option<PathBuf>,
    /// The LLM, from the catalogue (model.name; `servesim list models`).
    #[arg(long, value_name = "NAME", help_heading = "Quick scenario (no TOML)")]
    pub(super) model: Option<String>,
    /// The GPU, from the catalogue (hardware.gpu; `servesim list gpus`).
    #[arg(long, value_name = "NAME", help_heading = "Quick scenario (no TOML)")]
    pub(super) gpu: Option<String>,
    /// Tensor-parallel degree (hardware.tp).
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) tp: Option<u32>,
    /// Engine replicas (hardware.replicas).
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) replicas: Option<u32>,
    /// Poisson request rate, req/s (workload.rate; `vllm bench serve --request-rate`).
    #[arg(long, value_name = "REQ_PER_S", help_heading = "Quick scenario (no TOML)")]
    pub(super) rate: Option<f64>,
    /// Prompt tokens of every request (workload.prompt_tokens, fixed; `--random-input-len`).
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) prompt_tokens: Option<u32>,
    /// Output tokens of every request (workload.output_tokens, fixed; `--random-output-len`).
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) output_tokens: Option<u32>,
    /// Context window the engine is started with (engine.max_model_len;
    /// `vllm serve --max-model-len`). Without a scenario file it defaults to
    /// the smallest power of two of at least 4,096 and twice the prompt and
    /// output, so that a large model on few GPUs starts.
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) max_model_len: Option<u32>,
    /// Requests to simulate (num_requests; `--num-prompts`).
    #[arg(long, value_name = "N", help_heading = "Quick scenario (no TOML)")]
    pub(super) num_requests: Option<u64>,
    /// Latency percentiles to print, comma-separated, e.g. 50,90,99,99.9
    /// (the scenario key `percentiles`; `vllm bench serve --metric-percentiles`).
    /// Any beyond 50, 90, 95, 99, 99.9 and 99.99 are added to summary.json.
    #[arg(long, value_name = "P,P,...", value_delimiter = ',', num_args = 1..)]
    pub(super) percentiles: Vec<f64>,
    /// Write the scenario this run used (file and every override applied) as TOML.
    #[arg(long, value_name = "FILE", help_heading = "Quick scenario (no TOML)")]
    pub(super) save_scenario: Option<PathBuf>,
}

impl RunScenarioArgs {
    /// The quick flags as `--set` overrides, in the order the flags are listed.
    pub(super) fn quick_sets(&self) -> Vec<String> {
        let q = |s: &String| toml::Value::String(s.clone()).to_string();
        let fixed = |n: u32| format!("{{dist=\"fixed\",value={n}}}");
        let mut sets: Vec<String> = [
            ("model.name", self.model.as_ref().map(q)),
            ("hardware.gpu", self.gpu.as_ref().map(q)),
            ("hardware.tp", self.tp.map(|n| n.to_string())),
            ("hardware.replicas", self.replicas.map(|n| n.to_string())),
            ("workload.rate", self.rate.map(|r| format!("{r:?}"))),
            ("workload.prompt_tokens", self.prompt_tokens.map(fixed)),
            ("workload.output_tokens", self.output_tokens.map(fixed)),
            ("num_requests", self.num_requests.map(|n| n.to_string())),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
        .collect();
        let context = match (self.max_model_len, &self.scenario) {
            (Some(n), _) => Some(n),
            (None, None) if !sets.is_empty() => {
                // The quickstart's lengths (lognormal means 1,000 and 250) where no flag gives them.
                let want = 2 * (self.prompt_tokens.unwrap_or(1000) as u64 + self.output_tokens.unwrap_or(250) as u64);
                Some(want.max(4096).next_power_of_two().min(u32::MAX as u64 / 2 + 1) as u32)
            }
            (None, _) => None,
        };
        if let Some(n) = context {
            sets.push(format!("engine.max_model_len={n}"));
        }
        sets
    }

    /// The scenario arguments: the file, or the built-in quickstart named
    /// "quick" when the quick flags stand alone; quick flags go before `--set`.
    pub(super) fn scenario_args(&self) -> Result<ScenarioArgs> {
        let quick = self.quick_sets();
        let (scenario, text, mut sets) = match &self.scenario {
            Some(p) => (p.clone(), None, quick),
            None if !quick.is_empty() => {
                let mut sets = vec!["name=\"quick\"".to_string()];
                sets.extend(quick);
                (PathBuf::from("quick.toml"), Some(QUICKSTART.to_string()), sets)
            }
            None => {
                return Err(ConfigError::new("no scenario: give a scenario file, or the quick flags")
                    .hint(
                        "servesim run scenarios/quickstart.toml, or servesim run --model llama-3.1-8b --gpu h100-sxm \
                         --rate 5 --prompt-tokens 1000 --output-tokens 250",
                    )
                    .into());
            }
        };
        if !self.percentiles.is_empty() {
            let list: Vec<String> = self.percentiles.iter().map(|&p| toml::Value::Float(p).to_string()).collect();
            sets.push(format!("percentiles=[{}]", list.join(",")));
        }
        sets.extend(self.set.iter().cloned());
        Ok(ScenarioArgs { scenario, text, set: sets, models: self.models.clone() })
    }
}

/// The scenario `run`'s quick flags start from.
const QUICKSTART: &str = include_str!("../../scenarios/quickstart.toml");
