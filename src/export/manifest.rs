//! `manifest.json`: enough to reproduce a run.

use crate::Setup;
use crate::config::Scenario;
use crate::memory::MemoryPlan;
use crate::spec::{GpuSpec, LlmSpec};
use serde::Serialize;

/// Provenance of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// servesim version.
    pub servesim_version: String,
    /// The command line, as typed.
    pub command: Vec<String>,
    /// Path of the scenario file, as given on the command line.
    pub scenario_file: String,
    /// The same, absolute (where it resolved when the run was made): how
    /// `explain` finds it from another working directory.
    pub scenario_path: String,
    /// SHA-256 of the scenario file.
    pub scenario_sha256: String,
    /// `--set` overrides applied on top of the file, in order.
    pub overrides: Vec<String>,
    /// Seed used.
    pub seed: u64,
    /// The fully resolved scenario (defaults filled in).
    pub resolved_scenario: Scenario,
    /// The LLM architecture used, and where it came from.
    pub model: LlmSpec,
    /// Source of the model profile.
    pub model_origin: String,
    /// The replica pools as resolved (one, `default`, without `[[pools]]`).
    pub pools: Vec<ManifestPool>,
    /// Files written next to this one.
    pub files: Vec<String>,
}

/// One pool of the run, as resolved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ManifestPool {
    /// Pool name (`default` without `[[pools]]`).
    pub name: String,
    /// `mixed`, `prefill` or `decode`.
    pub role: String,
    /// The GPU profile used.
    pub gpu: GpuSpec,
    /// Source of the GPU profile.
    pub gpu_origin: String,
    /// GPUs per replica (tensor parallelism).
    pub tp: u32,
    /// Replicas in the pool.
    pub replicas: u32,
    /// USD per GPU-hour in effect.
    pub price_per_gpu_hour: f64,
    /// Memory plan of one replica.
    pub memory_plan: MemoryPlan,
}

/// Builds the manifest of a run.
pub fn manifest(
    setup: &Setup,
    seed: u64,
    scenario_file: &str,
    sha256: &str,
    overrides: &[String],
    command: Vec<String>,
) -> Manifest {
    Manifest {
        servesim_version: env!("CARGO_PKG_VERSION").to_string(),
        command,
        scenario_file: scenario_file.to_string(),
        scenario_path: std::fs::canonicalize(scenario_file)
            .map_or_else(|_| scenario_file.to_string(), |p| p.display().to_string()),
        scenario_sha256: sha256.to_string(),
        overrides: overrides.to_vec(),
        seed,
        resolved_scenario: setup.scenario.clone(),
        model: setup.llm.clone(),
        model_origin: setup.llm_origin.clone(),
        pools: setup
            .pools
            .iter()
            .map(|p| ManifestPool {
                name: p.name.clone(),
                role: p.role.as_str().to_string(),
                gpu: p.gpu.clone(),
                gpu_origin: p.gpu_origin.clone(),
                tp: p.tp,
                replicas: p.replicas,
                price_per_gpu_hour: p.price_per_gpu_hour,
                memory_plan: p.memory.clone(),
            })
            .collect(),
        files: crate::files::RUN_FILES.iter().map(|s| s.to_string()).collect(),
    }
}
