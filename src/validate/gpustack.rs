//! GPUStack's performance-lab result blocks: `vllm bench serve` (and the
//! SGLang / TensorRT-LLM equivalents) against vLLM 0.11, SGLang 0.5 and
//! TensorRT-LLM 1.x, one simulation per block, on each GPU the lab measured
//! ([`crate::measured::gpustack::LABS`]: A100 SXM 80 GB and H100 SXM).

use super::{Dataset, Role, Row};
use crate::Catalog;
use crate::measured::gpustack::{Lab, blocks};
use rayon::prelude::*;

/// The engine's name in metric labels.
fn engine_label(preset: &str) -> &'static str {
    match preset {
        "vllm-v1" => "vLLM",
        "sglang" => "SGLang",
        _ => "TRT-LLM",
    }
}

/// One lab's blocks, simulated: the data set `validate` reports.
pub fn dataset(catalog: &Catalog, lab: &Lab) -> crate::Result<Dataset> {
    let blocks = blocks(lab);
    let fitted = super::fitted_filters(&format!("validation:{}", lab.key));
    let out: Vec<Vec<Row>> = blocks
        .par_iter()
        .map(|b| {
            let engine = engine_label(b.preset);
            let fitted = fitted.iter().any(|filters| crate::measured::selects(filters, &b.id));
            let rows = |pred: [f64; 3], why: Option<String>| -> Vec<Row> {
                b.measured
                    .iter()
                    .zip(pred)
                    .filter(|((_, v), _)| v.is_finite())
                    .map(|(&(m, v), p)| Row {
                        excluded: why.clone(),
                        fitted,
                        ..Row::new(b.id.clone(), &format!("{engine} {m}"), v, p)
                    })
                    .collect()
            };
            match &b.scenario {
                Err(why) => rows([f64::NAN; 3], Some(why.clone())),
                Ok(text) => match super::simulate(catalog, &b.id, text) {
                    Ok(s) => rows(
                        [s.metrics.ttft.dist.median(), s.metrics.tpot.dist.median(), s.metrics.output_throughput],
                        None,
                    ),
                    Err(e) => rows(
                        [f64::NAN; 3],
                        Some(format!("servesim refuses the set-up: {}", e.to_string().lines().next().unwrap_or(""))),
                    ),
                },
            }
        })
        .collect();
    let rows: Vec<Row> = out.into_iter().flatten().collect();
    Ok(Dataset {
        key: lab.key.into(),
        title: lab.title.into(),
        source: lab.source.into(),
        method: "a simulation per block with the engine's profile (vllm-v1, sglang or trtllm) and the flags of its \
                 serving command; ShareGPT lengths lognormal with the block's mean lengths, random lengths fixed, \
                 the bench's concurrency or Poisson request rate"
            .into(),
        role: Role::HeldOut,
        note: "held out except the blocks validation/calibrate.sh fits the engine profiles to (marked fitted, counted \
               apart)"
            .into(),
        rows,
    })
}
