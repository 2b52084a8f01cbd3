//! The measurement formats `servesim calibrate` reads, turned into a
//! [`Problem`]:
//!
//! - **per-step CSV**: one engine step a row, with columns `prefill_tokens`,
//!   `decode_seqs`, `decode_context_tokens` (summed over the decoding
//!   sequences) and `measured_s`; optional `prefill_seqs` (default: 1 when
//!   there are prefill tokens), `prefill_context_tokens` (cached tokens the
//!   chunks attend to, default 0), `group` (rows that belong together in a
//!   fold) and `label`. The model, GPU and engine come from `--scenario`.
//! - **Splitwise profile CSV** (`model,hardware,prompt_size,batch_size,
//!   token_size,…,prompt_time,token_time,e2e_time,tensor_parallel`, times in
//!   ms): a prefill point and a decode point per configuration, as
//!   `servesim validate` reads Splitwise's published file.
//! - **`vllm bench serve` result JSON** saved with `--save-result
//!   --save-detailed`: the run is simulated with its own requests (at their
//!   recorded start times, or at `max_concurrency` in a closed loop, or all
//!   at once) and the percentiles 10, 25, 50, 75, 90 of TTFT, TPOT and ITL
//!   are fitted.
//! - **offline-throughput table** (columns `model,gpu,precision,tp,isl,osl`
//!   and `total_output_tok_s`, as vendors publish them): each row is
//!   simulated as an offline run of fixed lengths.
//!
//! Serving results that hold only aggregate statistics ([`super::aggregate`])
//! are simulated at their arrival regime with fixed mean lengths (a note in
//! the problem says so), and their medians and higher percentiles of TTFT,
//! TPOT and ITL and their output throughput are fitted:
//!
//! - **`vllm bench serve --save-result` JSON** without `--save-detailed`
//!   (`completed`, `total_input_tokens`, `total_output_tokens`,
//!   `median_ttft_ms`, `p99_ttft_ms`, ..., `output_throughput`): a closed loop
//!   at `max_concurrency`, else Poisson (gamma with `burstiness`) at a finite
//!   `request_rate`, else all at once;
//! - **GuideLLM report JSON** (`benchmarks`): each benchmark a run of its
//!   strategy (synchronous, concurrent, throughput, constant, poisson);
//! - **GenAI-Perf `profile_export_genai_perf.json`** (`time_to_first_token`,
//!   `inter_token_latency`, ... with their `unit`): a closed loop at the
//!   stimulus's concurrency or constant arrivals at its request rate;
//! - **serving-results table** in GPUStack's columns (`model, gpu, engine,
//!   tp` or `gpus_used`, `successful_requests`, `total_input_tokens`,
//!   `total_output_tokens`, `max_concurrency` or `request_rate_rps`, and
//!   `ttft_median_ms`, `tpot_p99_ms`, `output_tok_s`, ...): each row a run of
//!   its model, GPU and layout under the `--scenario`'s engine settings.

use super::{How, Point, Problem, Sim, Stat, StepSetup};
use crate::Catalog;
use crate::cost::StepBatch;
use crate::error::ConfigError;
use crate::measured::gpustack::Lab;
use crate::measured::user_table;
use std::collections::BTreeMap;
use std::path::Path;

/// The input's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Per-step CSV.
    Steps,
    /// Splitwise's profile CSV.
    Splitwise,
    /// `vllm bench serve` result JSON.
    BenchJson,
    /// Offline-throughput table.
    Offline,
    /// `vllm bench serve --save-result` JSON without `--save-detailed`.
    VllmAggregate,
    /// GuideLLM's report JSON.
    GuideLlm,
    /// GenAI-Perf's `profile_export_genai_perf.json`.
    GenAiPerf,
    /// A table of serving results in GPUStack's columns.
    ServingTable,
}

/// The format of a JSON input: GuideLLM's report (`benchmarks`),
/// GenAI-Perf's export (`time_to_first_token` statistics), a `vllm bench
/// serve` result without per-request arrays (aggregate keys, no `ttfts`),
/// else a `--save-detailed` result (whose reader names what is missing).
fn json_format(text: &str) -> Format {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else { return Format::BenchJson };
    let has = |k: &str| doc.get(k).is_some_and(|v| !v.is_null());
    if doc.get("benchmarks").is_some_and(serde_json::Value::is_array) {
        Format::GuideLlm
    } else if doc.get("time_to_first_token").is_some_and(serde_json::Value::is_object) {
        Format::GenAiPerf
    } else if !has("ttfts")
        && ["completed", "median_ttft_ms", "mean_ttft_ms", "output_throughput"].iter().any(|k| has(k))
    {
        Format::VllmAggregate
    } else {
        Format::BenchJson
    }
}

/// Recognises a file's format from its contents.
pub fn detect(path: &Path, text: &str) -> Result<Format, ConfigError> {
    if text.trim_start().starts_with('{') {
        return Ok(json_format(text));
    }
    let header = text.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#')).unwrap_or("");
    let has = |c: &str| header.split(',').any(|h| h.trim() == c);
    if has("prompt_time") && has("token_time") {
        Ok(Format::Splitwise)
    } else if has("measured_s") && has("prefill_tokens") {
        Ok(Format::Steps)
    } else if has("isl") && has("osl") && has("total_output_tok_s") {
        Ok(Format::Offline)
    } else if has("successful_requests") && has("total_input_tokens") && has("total_output_tokens") {
        Ok(Format::ServingTable)
    } else {
        Err(ConfigError::new("cannot tell the format of this file").file(path).hint(
            "give a per-step CSV (prefill_tokens, decode_seqs, decode_context_tokens, measured_s), Splitwise's profile \
             CSV, a vllm bench serve --save-result JSON (with or without --save-detailed), a GuideLLM report JSON, \
             GenAI-Perf's profile_export_genai_perf.json, an offline table (model, gpu, precision, tp, isl, osl, \
             total_output_tok_s) or a serving-results table (model, gpu, engine, tp, successful_requests, \
             total_input_tokens, total_output_tokens and statistics such as ttft_median_ms)",
        ))
    }
}

/// The model, GPU, layout, formats and `[cost]` table of a scenario, for
/// step points, with the KV capacity (tokens) of its memory plan.
fn setup_of(s: &crate::config::Scenario, catalog: &Catalog) -> Result<(StepSetup, u64), ConfigError> {
    let setup = crate::resolve(s, catalog)?;
    let p = &setup.pools[0];
    let capacity = p.memory.num_blocks * p.memory.block_size as u64;
    Ok((
        StepSetup {
            llm: setup.llm.clone(),
            gpu: p.gpu.clone(),
            layout: p.layout,
            dtype: s.model.dtype,
            kv: p.kv_dtype,
            cost: toml::Table::try_from(&p.cost).map_err(|e| ConfigError::new(e.to_string()))?,
        },
        capacity,
    ))
}

fn need_scenario<'a>(
    s: Option<&'a crate::scenario::LoadedScenario>,
    what: &str,
) -> Result<&'a crate::scenario::LoadedScenario, ConfigError> {
    s.ok_or_else(|| {
        ConfigError::new(format!("{what} needs --scenario: a scenario naming the model, GPU, tp and engine preset"))
            .hint("e.g. servesim calibrate steps.csv --scenario scenarios/quickstart.toml")
    })
}

/// Reads `path` into a calibration problem.
pub fn read(
    path: &Path,
    catalog: &Catalog,
    scenario: Option<&crate::scenario::LoadedScenario>,
    preset: &str,
) -> Result<Problem, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", path.display())).file(path))?;
    from_text(path, &text, catalog, scenario, preset)
}

/// Reads the text of measurements file `path` (already read) into a
/// calibration problem: what [`read`] does after reading the file.
pub fn from_text(
    path: &Path,
    text: &str,
    catalog: &Catalog,
    scenario: Option<&crate::scenario::LoadedScenario>,
    preset: &str,
) -> Result<Problem, ConfigError> {
    match detect(path, text)? {
        Format::Steps => steps(path, text, catalog, need_scenario(scenario, "a per-step CSV")?),
        Format::Splitwise => splitwise(path, text, catalog, scenario, preset),
        Format::BenchJson => bench_json(path, text, need_scenario(scenario, "a vllm bench serve result")?),
        Format::Offline => offline(path, text, catalog, preset),
        Format::VllmAggregate => {
            super::aggregate::vllm(path, text, need_scenario(scenario, "a vllm bench serve result")?, preset)
        }
        Format::GuideLlm => {
            super::aggregate::guidellm(path, text, need_scenario(scenario, "a GuideLLM report")?, preset)
        }
        Format::GenAiPerf => {
            super::aggregate::genai_perf(path, text, need_scenario(scenario, "a GenAI-Perf export")?, preset)
        }
        Format::ServingTable => super::aggregate::serving_table(path, text, catalog, scenario, preset),
    }
}

fn steps(
    path: &Path,
    text: &str,
    catalog: &Catalog,
    s: &crate::scenario::LoadedScenario,
) -> Result<Problem, ConfigError> {
    let t = user_table(path, text, &[])?;
    let (setup, _) = setup_of(&s.scenario, catalog)?;
    let has = |c: &str| t.header.iter().any(|h| h == c);
    let mut points = Vec::new();
    for (i, r) in t.rows.iter().enumerate() {
        let line = i + 2;
        let num = |c: &str, default: Option<f64>| -> Result<f64, ConfigError> {
            if !has(c) {
                return default.ok_or_else(|| ConfigError::new(format!("column `{c}` is missing")).file(path));
            }
            let v = t.num(r, c);
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(ConfigError::new(format!("line {line}: `{c}` must be a number >= 0, got {:?}", t.get(r, c)))
                    .file(path)
                    .hint("fix the value or remove the row"))
            }
        };
        let pt = num("prefill_tokens", None)?;
        let ds = num("decode_seqs", None)?;
        let dc = num("decode_context_tokens", Some(0.0))?;
        let ps = num("prefill_seqs", Some(if pt > 0.0 { 1.0 } else { 0.0 }))?;
        let pc = num("prefill_context_tokens", Some(0.0))?;
        let m = num("measured_s", None)?;
        if m <= 0.0 || (pt == 0.0 && ds == 0.0) {
            return Err(ConfigError::new(format!("line {line}: a step needs work and a positive measured_s"))
                .file(path)
                .hint("remove empty steps"));
        }
        // Chunks of equal length, each attending to its share of cached context.
        let per = if ps > 0.0 { pt / ps } else { 0.0 };
        let pairs = ps * (per * (pc / ps.max(1.0)) + per * (per + 1.0) / 2.0);
        let batch = StepBatch {
            prefill_tokens: pt as u64,
            prefill_seqs: ps as u32,
            prefill_attn_pairs: pairs,
            prefill_ctx_tokens: pc,
            decode_seqs: ds as u32,
            decode_ctx_tokens: dc,
            logits: ps as u32 + ds as u32,
            new_requests: ps as u32,
            ..Default::default()
        };
        let label = if has("label") { t.get(r, "label").to_string() } else { format!("line {line}") };
        let group = if has("group") { t.get(r, "group").to_string() } else { format!("row{i}") };
        points.push(Point { label, group, measured: m * 1e3, how: How::Step { setup: 0, batch } });
    }
    Ok(Problem { setups: vec![setup], sims: Vec::new(), points, skipped: Vec::new(), notes: Vec::new() })
}

/// The calibration problem of the blocks of GPUStack's `lab` that `filters`
/// select ([`crate::measured::selects`]): TTFT and TPOT medians and output throughput of each
/// simulated block.
pub fn gpustack(lab: &Lab, filters: &[String]) -> Problem {
    let mut p =
        Problem { setups: Vec::new(), sims: Vec::new(), points: Vec::new(), skipped: Vec::new(), notes: Vec::new() };
    for b in crate::measured::gpustack::blocks(lab) {
        if !crate::measured::selects(filters, &b.id) {
            continue;
        }
        let text = match b.scenario {
            Ok(t) => t,
            Err(why) => {
                p.skipped.push(format!("{}: {why}", b.id));
                continue;
            }
        };
        p.sims.push(Sim { name: b.id.clone(), text });
        let sim = p.sims.len() - 1;
        for ((metric, v), stat) in b.measured.iter().zip([Stat::Ttft(50.0), Stat::Tpot(50.0), Stat::OutputThroughput]) {
            if !v.is_finite() {
                continue;
            }
            p.points.push(Point {
                label: format!("{} {metric}", b.id),
                group: b.id.clone(),
                measured: *v,
                how: How::Sim { sim, stat },
            });
        }
    }
    p
}

/// The first row's file line, and each row's (prompt, token, e2e) times.
type Reps = (usize, Vec<(f64, f64, f64)>);

/// Splitwise's rows by (model, hardware, tp, prompt, batch, output).
type SplitwiseGroups = BTreeMap<(String, String, u32, u32, u32, u32), Reps>;

/// The rows of Splitwise's profile CSV grouped by configuration, with the
/// broken rows skipped (each with its file line and why).
fn splitwise_groups(path: &Path, text: &str) -> Result<(SplitwiseGroups, Vec<String>), ConfigError> {
    let t = user_table(
        path,
        text,
        &[
            "model",
            "hardware",
            "tensor_parallel",
            "prompt_size",
            "batch_size",
            "token_size",
            "prompt_time",
            "token_time",
            "e2e_time",
        ],
    )?;
    let mut groups: SplitwiseGroups = BTreeMap::new();
    let mut skipped = Vec::new();
    for (i, r) in t.rows.iter().enumerate() {
        let sizes = ["tensor_parallel", "prompt_size", "batch_size", "token_size"].map(|c| t.num(r, c));
        let times = ["prompt_time", "token_time", "e2e_time"].map(|c| t.num(r, c));
        // Sizes are whole numbers of at least 1, times positive: anything
        // else is a broken row (it panicked in the arithmetic below).
        if sizes.iter().any(|x| !(x.is_finite() && *x >= 1.0 && *x < 1e9 && x.fract() == 0.0))
            || times.iter().any(|x| !(x.is_finite() && *x > 0.0))
        {
            skipped.push(format!(
                "{}:{}: sizes must be whole numbers >= 1 and times positive",
                path.display(),
                t.lines[i]
            ));
            continue;
        }
        let key = (
            t.get(r, "model").to_string(),
            t.get(r, "hardware").to_string(),
            sizes[0] as u32,
            sizes[1] as u32,
            sizes[2] as u32,
            sizes[3] as u32,
        );
        groups.entry(key).or_insert_with(|| (t.lines[i], Vec::new())).1.push((times[0], times[1], times[2]));
    }
    Ok((groups, skipped))
}

/// Splitwise's profile CSV as a problem: per (model, hardware, tp) a set-up
/// under `preset` (on the scenario's GPU when one is given), per (prompt,
/// batch) a prefill point and per (prompt, batch, output) a decode point, the
/// repetitions averaged. Generations that stopped early (token_size >= 512)
/// count the tokens actually generated, from e2e ≈ prompt + (n − 1) × token
/// time. Batches whose KV cache the engine could not hold are skipped.
pub fn splitwise(
    path: &Path,
    text: &str,
    catalog: &Catalog,
    scenario: Option<&crate::scenario::LoadedScenario>,
    preset: &str,
) -> Result<Problem, ConfigError> {
    let (groups, mut skipped) = splitwise_groups(path, text)?;
    let mut setups: Vec<(String, String, u32, u64)> = Vec::new();
    let mut setup_specs = Vec::new();
    let mut points = Vec::new();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for ((model, hw, tp, p, b, out), (line, reps)) in &groups {
        let Some(llm) = catalog.model(model) else {
            if !skipped.iter().any(|s: &String| s.starts_with(model.as_str())) {
                skipped
                    .push(format!("{model}: not in the catalogue (add models/llm/<name>.toml with alias \"{model}\")"));
            }
            continue;
        };
        let gpu_name = scenario.map(|s| s.scenario.hardware.gpu.clone()).unwrap_or_else(|| hw.clone());
        let idx = match setups.iter().position(|s| s.0 == *model && s.1 == *hw && s.2 == *tp) {
            Some(i) => i,
            None => {
                let text = format!(
                    "num_requests = 1\n[model]\nname = \"{}\"\n[hardware]\ngpu = \"{gpu_name}\"\ntp = {tp}\n[engine]\npreset = \"{preset}\"\n\
                     max_model_len = 2048\n[workload]\nrate = 1\nprompt_tokens = {{ dist = \"fixed\", value = 16 }}\n\
                     output_tokens = {{ dist = \"fixed\", value = 16 }}\n",
                    llm.key
                );
                let cat = std::sync::Arc::new(catalog.clone());
                // The engine set up for these rows; a row it cannot be (a GPU
                // not in the catalogue, weights that do not fit) is skipped
                // with its file line and why.
                let set_up = crate::scenario::load_scenario_str_with(&text, Path::new("row.toml"), &[], &cat)
                    .and_then(|l| setup_of(&l.scenario, catalog));
                let (mut spec, capacity) = match set_up {
                    Ok(s) => s,
                    Err(e) => {
                        let why = e.key.as_ref().map_or(e.message.clone(), |k| format!("`{k}`: {}", e.message));
                        let what = format!("{model} on {hw} tp {tp} ");
                        if !skipped.iter().any(|s| s.contains(&what)) {
                            skipped.push(format!(
                                "{}:{line}: {what}(and the rows like it) cannot be set up: {why}",
                                path.display()
                            ));
                        }
                        continue;
                    }
                };
                if let Some(user) = scenario {
                    // The scenario's own [cost] keys (and --set ones) apply to
                    // every step, as they do to the scenario's runs.
                    spec.cost = setup_of(&user.scenario, catalog)?.0.cost;
                }
                setup_specs.push(spec);
                setups.push((model.clone(), hw.clone(), *tp, capacity));
                setups.len() - 1
            }
        };
        let group = format!("{model} {hw} tp{tp}");
        let capacity = setups[idx].3;
        if *b as u64 * (*p + *out) as u64 > capacity {
            let why = format!(
                "{group} batch {b} of {p} + {out} tokens: more KV than the engine can hold ({capacity} tokens); the \
                 batch never ran whole"
            );
            skipped.push(why);
            continue;
        }
        let pt = mean(&reps.iter().map(|r| r.0).collect::<Vec<_>>());
        let tt = mean(&reps.iter().map(|r| r.1).collect::<Vec<_>>());
        let e2e = mean(&reps.iter().map(|r| r.2).collect::<Vec<_>>());
        let n = (((e2e - pt) / tt).round() + 1.0).clamp(1.0, *out as f64);
        let label = format!("{group} prefill b={b} p={p}");
        // One prefill point per (prompt, batch): the mean over every output length.
        let prompt_times: Vec<f64> = groups
            .iter()
            .filter(|(k, _)| k.0 == *model && k.1 == *hw && k.2 == *tp && k.3 == *p && k.4 == *b)
            .flat_map(|(_, (_, v))| v.iter().map(|r| r.0))
            .collect();
        // A fold keeps a configuration's prefill and decode points together.
        let fold = format!("{group} b={b} p={p}");
        if !points.iter().any(|q: &Point| q.label == label) {
            points.push(Point {
                label,
                group: fold.clone(),
                measured: mean(&prompt_times),
                how: How::Step { setup: idx, batch: crate::measured::prefill_step(*b, *p) },
            });
        }
        points.push(Point {
            label: format!("{group} decode b={b} p={p} out={out}"),
            group: fold,
            measured: tt,
            how: How::Step { setup: idx, batch: crate::measured::decode_step(*b, *p as f64 + n / 2.0) },
        });
    }
    Ok(Problem { setups: setup_specs, sims: Vec::new(), points, skipped, notes: Vec::new() })
}

/// Per-request TTFT, TPOT and pooled ITL (ms) of a vLLM result.
fn bench_latencies(doc: &serde_json::Value) -> Option<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let ttfts = doc.get("ttfts")?.as_array()?;
    let itls = doc.get("itls")?.as_array()?;
    let mut ttft = Vec::new();
    let mut tpot = Vec::new();
    let mut itl = Vec::new();
    for (t, l) in ttfts.iter().zip(itls) {
        let Some(t) = t.as_f64().filter(|t| *t > 0.0) else { continue };
        ttft.push(t * 1e3);
        let gaps: Vec<f64> = l.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect()).unwrap_or_default();
        if !gaps.is_empty() {
            tpot.push(gaps.iter().sum::<f64>() / gaps.len() as f64 * 1e3);
            itl.extend(gaps.iter().map(|g| g * 1e3));
        }
    }
    Some((ttft, tpot, itl))
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::metrics::stats::percentile_sorted(v, p)
}

fn bench_json(path: &Path, text: &str, s: &crate::scenario::LoadedScenario) -> Result<Problem, ConfigError> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| ConfigError::new(format!("cannot read the result JSON: {e}")).file(path))?;
    let (mut ttft, mut tpot, mut itl) = bench_latencies(&doc).ok_or_else(|| {
        ConfigError::new("the result has no per-request ttfts and itls")
            .file(path)
            .hint("save the run with vllm bench serve --save-result --save-detailed")
    })?;
    let n = doc.get("input_lens").and_then(|v| v.as_array()).map_or(0, |a| a.len());
    if n == 0 || ttft.len() < 10 {
        return Err(ConfigError::new("the result holds fewer than 10 completed requests")
            .file(path)
            .hint("calibrate on a run of at least a few hundred requests"));
    }
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let file = abs.display().to_string().replace('\\', "/");
    let concurrency = doc.get("max_concurrency").and_then(|v| v.as_f64()).filter(|c| *c > 0.0);
    let has_times = doc.get("start_times").and_then(|v| v.as_array()).is_some_and(|a| !a.is_empty());
    let rate = doc.get("request_rate").and_then(|v| v.as_f64()).filter(|r| r.is_finite() && *r > 0.0);
    let lengths = format!("lengths = {{ file = \"{file}\", format = \"vllm-json\" }}\n");
    let workload = if let Some(c) = concurrency {
        // --max-concurrency: a closed loop of that many clients.
        format!("arrival = \"closed-loop\"\nclosed_loop = {{ users = {c} }}\n{lengths}")
    } else if has_times {
        // The recorded start times.
        format!("arrival = \"trace\"\ntrace = {{ file = \"{file}\", format = \"vllm-json\" }}\n")
    } else if let Some(r) = rate {
        format!("arrival = \"poisson\"\nrate = {r}\n{lengths}")
    } else {
        // --request-rate inf: every request at once.
        format!("arrival = \"offline\"\n{lengths}")
    };
    let text = super::runs::scenario_text(s.table(), n as u64, &workload);
    let mut points = Vec::new();
    for (name, v, stat) in [
        ("TTFT", &mut ttft, Stat::Ttft as fn(f64) -> Stat),
        ("TPOT", &mut tpot, Stat::Tpot as fn(f64) -> Stat),
        ("ITL", &mut itl, Stat::Itl as fn(f64) -> Stat),
    ] {
        if v.len() < 10 {
            continue;
        }
        for p in [10.0, 25.0, 50.0, 75.0, 90.0] {
            let stat = stat(p);
            points.push(Point {
                label: format!("{name} p{p}"),
                group: name.to_string(),
                measured: percentile(v, p),
                how: How::Sim { sim: 0, stat },
            });
        }
    }
    Ok(Problem {
        setups: Vec::new(),
        sims: vec![Sim { name: path.display().to_string(), text }],
        points,
        skipped: Vec::new(),
        notes: Vec::new(),
    })
}

fn offline(path: &Path, text: &str, catalog: &Catalog, preset: &str) -> Result<Problem, ConfigError> {
    let t = user_table(path, text, &["model", "gpu", "precision", "tp", "isl", "osl", "total_output_tok_s"])?;
    let mut sims = Vec::new();
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let has_n = t.header.iter().any(|h| h == "num_requests");
    for r in &t.rows {
        let (model, gpu_name, precision) = (t.get(r, "model"), t.get(r, "gpu"), t.get(r, "precision"));
        let fp8 = precision.eq_ignore_ascii_case("fp8");
        let (tp, isl, osl) = (t.num(r, "tp") as u32, t.num(r, "isl") as u32, t.num(r, "osl") as u32);
        let label = format!("{model} {gpu_name} {precision} tp{tp} {isl}/{osl}");
        // The published run's request count when the table has it; else enough
        // requests for a steady state (200k tokens, 200-3000 requests).
        let n = if has_n { t.num(r, "num_requests") as u32 } else { (200_000 / (isl + osl).max(1)).clamp(200, 3000) };
        let text =
            match crate::measured::offline::offline_scenario(catalog, model, gpu_name, fp8, tp, isl, osl, n, preset) {
                Ok(text) => text,
                Err(why) => {
                    skipped.push(format!("{label}: {why}"));
                    continue;
                }
            };
        sims.push(Sim { name: label.clone(), text });
        points.push(Point {
            label,
            group: format!("{model} {gpu_name} tp{tp}"),
            measured: t.num(r, "total_output_tok_s"),
            how: How::Sim { sim: sims.len() - 1, stat: Stat::OutputThroughput },
        });
    }
    Ok(Problem { setups: Vec::new(), sims, points, skipped, notes: Vec::new() })
}
