//! Serving-level data sets, predicted by whole simulations: TensorRT-LLM's
//! published offline throughput (trtllm-bench, v0.13) and GPUStack's
//! `vllm bench serve` runs (in [`super::gpustack`]).

use super::{Dataset, Role, Row};
use crate::Catalog;
use crate::measured::Table;
use crate::measured::offline::offline_scenario;
use rayon::prelude::*;

/// Resolves and simulates a scenario given as TOML text: its summary.
pub fn simulate(catalog: &Catalog, name: &str, text: &str) -> crate::Result<crate::Summary> {
    let cat = std::sync::Arc::new(catalog.clone());
    let loaded = crate::scenario::load_scenario_str_with(text, std::path::Path::new(name), &[], &cat)?;
    let setup = crate::resolve(&loaded.scenario, catalog)?;
    Ok(crate::run_lean(&setup, loaded.scenario.seed).summary)
}

/// TensorRT-LLM v0.13 offline maximum throughput on A100 and L40S.
pub fn trtllm(catalog: &Catalog) -> crate::Result<Dataset> {
    let t = Table::parse(include_str!("../../validation/data/trtllm_perf_overview_a100_l40s.csv"), "trtllm");
    let jobs: Vec<&Vec<String>> = t.rows.iter().collect();
    let rows: Vec<crate::Result<Row>> = jobs
        .par_iter()
        .map(|r| {
            let model = t.get(r, "model");
            let gpu_name = t.get(r, "gpu");
            let fp8 = t.get(r, "precision") == "FP8";
            let (tp, isl, osl) = (t.num(r, "tp") as u32, t.num(r, "isl") as u32, t.num(r, "osl") as u32);
            let id = format!("{model} {gpu_name} {} tp{tp} {isl}/{osl}", t.get(r, "precision"));
            let measured = t.num(r, "total_output_tok_s");
            let text = match offline_scenario(
                catalog,
                model,
                gpu_name,
                fp8,
                tp,
                isl,
                osl,
                t.num(r, "num_requests") as u32,
                "trtllm",
            ) {
                Ok(t) => t,
                Err(why) => {
                    let mut row = Row::new(id, "output tok/s", measured, f64::NAN);
                    row.excluded = Some(why);
                    return Ok(row);
                }
            };
            let mut row = match simulate(catalog, &id, &text) {
                Ok(s) => Row::new(id.clone(), "output tok/s", measured, s.metrics.output_throughput),
                Err(e) => {
                    let mut row = Row::new(id.clone(), "output tok/s", measured, f64::NAN);
                    row.excluded =
                        Some(format!("servesim refuses the set-up: {}", e.to_string().lines().next().unwrap_or("")));
                    row
                }
            };
            if row.excluded.is_none() && !row.predicted.is_finite() {
                row.excluded = Some("no prediction".into());
            }
            Ok(row)
        })
        .collect();
    let rows: Vec<Row> = rows.into_iter().collect::<crate::Result<_>>()?;
    Ok(Dataset {
        key: "trtllm-offline".into(),
        title: "TensorRT-LLM v0.13 offline maximum throughput (trtllm-bench, fixed lengths, all requests at t = 0): \
                9 models on A100-SXM4-80GB (FP16) and L40S (FP8), tp 1-8"
            .into(),
        source: "validation/data/trtllm_perf_overview_a100_l40s.csv (NVIDIA TensorRT-LLM docs perf-overview.md, \
                 v0.13.0 data, Apache-2.0)"
            .into(),
        method: "a simulation with the trtllm profile as trtllm-bench configures it: chunked context, no block \
                 reuse, 64-token blocks, max_batch_size and max_num_tokens from trtllm-bench's build heuristic, the \
                 published request counts"
            .into(),
        role: Role::HeldOut,
        note: "held out: nothing was fitted to it".into(),
        rows,
    })
}
