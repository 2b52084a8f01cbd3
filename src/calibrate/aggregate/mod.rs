//! The serving results `servesim calibrate` reads that hold only aggregate
//! statistics, each turned into measured runs ([`super::runs`]):
//!
//! - [`vllm`]: `vllm bench serve --save-result` without `--save-detailed`;
//! - [`guidellm`]: GuideLLM's report (`guidellm benchmark --output-path
//!   report.json`), one run per benchmark;
//! - [`genai_perf`]: GenAI-Perf's `profile_export_genai_perf.json`;
//! - [`serving_table`]: a table of result blocks in GPUStack's columns, one
//!   run per row.
//!
//! None of them gives per-request lengths: a run is simulated with its mean
//! prompt and output lengths, and the problem's notes say so.

use super::Problem;
use super::Stat;
use super::runs::{self, Run};
use crate::Catalog;
use crate::error::ConfigError;
use crate::measured::runs::{Arrival, Lengths};
use crate::scenario::LoadedScenario;
use serde_json::Value;
use std::path::Path;

/// An error about file `path`, with the fix.
fn bad(path: &Path, message: impl Into<String>, hint: impl Into<String>) -> ConfigError {
    ConfigError::new(message).file(path).hint(hint)
}

fn parse(path: &Path, text: &str, what: &str) -> Result<Value, ConfigError> {
    serde_json::from_str(text).map_err(|e| ConfigError::new(format!("cannot read the {what} JSON: {e}")).file(path))
}

/// The value at `keys` under `v`.
fn at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |v, k| v.get(k))
}

/// The number at `keys` under `v` (a finite JSON number).
fn num(v: &Value, keys: &[&str]) -> Option<f64> {
    at(v, keys).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// The user's scenario as the base of every run, simulated with `preset`.
fn base_table(s: &LoadedScenario, preset: &str) -> toml::Table {
    let mut t = s.table();
    set(&mut t, "engine", "preset", toml::Value::String(preset.into()));
    t
}

/// Sets `section.key` in a scenario table.
fn set(t: &mut toml::Table, section: &str, key: &str, v: toml::Value) {
    let sec = t.entry(section).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(sec) = sec {
        sec.insert(key.into(), v);
    }
}

/// The mean lengths of `n` requests that took `input` and `output` tokens
/// in all, or an error naming the keys.
fn mean_lengths(path: &Path, n: f64, input: f64, output: f64, keys: &str) -> Result<Lengths, ConfigError> {
    let (i, o) = (input / n, output / n);
    if !(i >= 0.5 && o >= 0.0) {
        return Err(bad(
            path,
            format!("{keys} give {i:.2} prompt and {o:.2} output tokens a request"),
            "a run needs at least one prompt token a request; check the file is a complete result",
        ));
    }
    Ok(Lengths::Fixed { input: i, output: o })
}

/// One run of `n` requests with the user's scenario's model, GPU and engine.
fn scenario(s: &LoadedScenario, preset: &str, n: f64, arrival: Arrival, lengths: Lengths) -> String {
    runs::scenario_text(base_table(s, preset), n.round() as u64, &format!("{}{}", arrival.toml(), lengths.toml()))
}

fn lengths_note(what: &str, lengths: Lengths) -> String {
    let (i, o) = match lengths {
        Lengths::Fixed { input, output } | Lengths::ShareGpt { input, output } => (input, output),
    };
    format!(
        "{what} gives no per-request lengths: every request is simulated with the mean lengths, {i:.0} prompt and \
         {o:.0} output tokens"
    )
}

/// `vllm bench serve --save-result` without `--save-detailed`: `completed`,
/// `total_input_tokens`, `total_output_tokens`, the arrival settings
/// (`max_concurrency`, `request_rate`, `burstiness`) and the statistics
/// `median_{ttft,tpot,itl}_ms`, `p<N>_{ttft,tpot,itl}_ms` (`--metric-percentiles`)
/// and `output_throughput` (vllm/benchmarks/serve.py).
pub fn vllm(path: &Path, text: &str, s: &LoadedScenario, preset: &str) -> Result<Problem, ConfigError> {
    let doc = parse(path, text, "result")?;
    const HINT: &str = "give the JSON of vllm bench serve --save-result: it holds completed, total_input_tokens, \
                        total_output_tokens and the median_/pNN_ TTFT, TPOT and ITL statistics";
    let need = |k: &str| num(&doc, &[k]).ok_or_else(|| bad(path, format!("the result has no number `{k}`"), HINT));
    let n = need("completed")?;
    if n < 1.0 {
        return Err(bad(
            path,
            format!("the result holds no completed requests (completed = {n})"),
            "calibrate on a run whose requests completed (see its failed count and errors)",
        ));
    }
    let lengths = mean_lengths(
        path,
        n,
        need("total_input_tokens")?,
        need("total_output_tokens")?,
        "total_input_tokens and \
                     total_output_tokens / completed",
    )?;
    if at(&doc, &["ramp_up_strategy"]).is_some_and(|v| !v.is_null()) {
        return Err(bad(
            path,
            "the run ramped its request rate up (ramp_up_strategy): no one arrival rate describes it",
            "calibrate on a run at a fixed --request-rate or --max-concurrency",
        ));
    }
    let concurrency = num(&doc, &["max_concurrency"]).filter(|c| *c >= 1.0);
    // `request_rate` is a number, or the string "inf" for all at once.
    let rate = num(&doc, &["request_rate"]).filter(|r| *r > 0.0);
    let burstiness = num(&doc, &["burstiness"]).filter(|b| *b > 0.0).unwrap_or(1.0);
    let mut notes = vec![format!(
        "{}; save with --save-detailed to simulate the run's own requests",
        lengths_note("the result", lengths)
    )];
    let arrival = match (concurrency, rate) {
        (Some(c), r) => {
            if let Some(r) = r {
                notes.push(format!(
                    "the run also paced requests at {r} req/s; it is simulated as a closed loop of {c} clients"
                ));
            }
            Arrival::Closed(c.round() as u32)
        }
        (None, Some(r)) if burstiness != 1.0 => Arrival::Gamma(r, burstiness),
        (None, Some(r)) => Arrival::Poisson(r),
        (None, None) => Arrival::Offline,
    };
    let mut measured = Vec::new();
    for (m, stat) in [("ttft", Stat::Ttft as fn(f64) -> Stat), ("tpot", Stat::Tpot), ("itl", Stat::Itl)] {
        let suffix = format!("_{m}_ms");
        let mut values: Vec<(f64, f64)> =
            num(&doc, &[&format!("median{suffix}")]).map(|v| (50.0, v)).into_iter().collect();
        if let Some(obj) = doc.as_object() {
            for (k, v) in obj {
                let p = k.strip_prefix('p').and_then(|k| k.strip_suffix(&suffix)).and_then(|p| p.parse::<f64>().ok());
                if let (Some(p), Some(v)) = (p, v.as_f64()) {
                    values.push((p, v));
                }
            }
        }
        measured.extend(runs::fitted_percentiles(stat, values));
    }
    if let Some(v) = num(&doc, &["output_throughput"]) {
        measured.push((Stat::OutputThroughput, v));
    }
    if measured.is_empty() {
        return Err(bad(path, "the result holds no TTFT, TPOT, ITL or output throughput statistics", HINT));
    }
    let run =
        Run { name: String::new(), group: None, scenario: Ok(scenario(s, preset, n, arrival, lengths)), measured };
    Ok(runs::problem(vec![run], notes))
}

/// GuideLLM's percentile names: `p001` is the 0.1th, `p05` the 5th, `p999`
/// the 99.9th (guidellm/schemas/statistics.py, `Percentiles`).
fn guidellm_percentile(name: &str) -> Option<f64> {
    let d = name.strip_prefix('p')?;
    if !d.chars().all(|c| c.is_ascii_digit()) || d.is_empty() {
        return None;
    }
    let text = if d.len() > 2 { format!("{}.{}", &d[..2], &d[2..]) } else { d.to_string() };
    text.parse().ok()
}

/// The median and percentiles of a GuideLLM `StatusDistributionSummary`'s
/// successful requests.
fn guidellm_stats(metrics: &Value, key: &str, stat: fn(f64) -> Stat) -> Vec<(Stat, f64)> {
    let Some(d) = at(metrics, &[key, "successful"]) else { return Vec::new() };
    let mut values: Vec<(f64, f64)> = num(d, &["median"]).map(|v| (50.0, v)).into_iter().collect();
    if let Some(ps) = d.get("percentiles").and_then(Value::as_object) {
        values.extend(ps.iter().filter_map(|(k, v)| Some((guidellm_percentile(k)?, v.as_f64()?))));
    }
    runs::fitted_percentiles(stat, values)
}

/// GuideLLM's report: each benchmark of `benchmarks` is a run of its
/// strategy (`config.strategy`, `args.strategy` before GuideLLM 0.4) with
/// `metrics.request_totals.successful` requests of the mean
/// `prompt_token_count` and `output_token_count`; its
/// `time_to_first_token_ms` and `inter_token_latency_ms` (per request,
/// (last − first token) / (output − 1): vLLM's TPOT) from the median up and
/// the mean `output_tokens_per_second` are the points.
pub fn guidellm(path: &Path, text: &str, s: &LoadedScenario, preset: &str) -> Result<Problem, ConfigError> {
    let doc = parse(path, text, "GuideLLM report")?;
    const HINT: &str = "give the report of guidellm benchmark --output-path report.json (GuideLLM 0.3 or later)";
    let benches = doc.get("benchmarks").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if benches.is_empty() {
        return Err(bad(path, "the report holds no benchmarks", HINT));
    }
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    for (i, b) in benches.iter().enumerate() {
        let which = format!("benchmark {}", i + 1);
        let strategy = at(b, &["config", "strategy"])
            .or_else(|| at(b, &["args", "strategy"]))
            .ok_or_else(|| bad(path, format!("{which} has no config.strategy"), HINT))?;
        let kind = strategy.get("type_").and_then(Value::as_str).unwrap_or("");
        let positive = |k: &str| {
            num(strategy, &[k])
                .filter(|x| *x > 0.0)
                .ok_or_else(|| bad(path, format!("{which}: the {kind} strategy has no positive `{k}`"), HINT))
        };
        let cap = num(strategy, &["max_concurrency"]).filter(|c| *c >= 1.0);
        let arrival = match kind {
            "synchronous" => Arrival::Closed(1),
            "concurrent" => Arrival::Closed(positive("streams")?.round() as u32),
            "throughput" => cap.map_or(Arrival::Offline, |c| Arrival::Closed(c.round() as u32)),
            "constant" => Arrival::Constant(positive("rate")?),
            "poisson" => Arrival::Poisson(positive("rate")?),
            other => {
                return Err(bad(
                    path,
                    format!("{which}: strategy `{other}` cannot be simulated"),
                    "servesim simulates GuideLLM's synchronous, concurrent, throughput, constant and poisson \
                     strategies; rerun with --profile sweep, concurrent, constant, poisson or throughput",
                ));
            }
        };
        if let (Arrival::Constant(_) | Arrival::Poisson(_), Some(c)) = (arrival, cap) {
            notes.push(format!("{which}: its cap of {c} requests in flight is not simulated"));
        }
        let m = b.get("metrics").ok_or_else(|| bad(path, format!("{which} has no metrics"), HINT))?;
        let n = num(m, &["request_totals", "successful"])
            .or_else(|| num(b, &["request_totals", "successful"]))
            .ok_or_else(|| bad(path, format!("{which} has no metrics.request_totals.successful"), HINT))?;
        if n < 1.0 {
            return Err(bad(
                path,
                format!("{which} completed no requests (request_totals.successful = {n})"),
                "remove the benchmark from the report or rerun it; see its errored requests",
            ));
        }
        let mean = |k: &str| {
            num(m, &[k, "successful", "mean"])
                .ok_or_else(|| bad(path, format!("{which} has no metrics.{k}.successful.mean"), HINT))
        };
        let lengths = mean_lengths(
            path,
            1.0,
            mean("prompt_token_count")?,
            mean("output_token_count")?,
            &format!("{which}'s mean prompt_token_count and output_token_count"),
        )?;
        let mut measured = guidellm_stats(m, "time_to_first_token_ms", Stat::Ttft);
        measured.extend(guidellm_stats(m, "inter_token_latency_ms", Stat::Tpot));
        if let Some(v) = num(m, &["output_tokens_per_second", "successful", "mean"]) {
            measured.push((Stat::OutputThroughput, v));
        }
        let name = format!("{which} ({})", arrival.describe());
        runs.push(Run {
            name: name.clone(),
            group: Some(name),
            scenario: Ok(scenario(s, preset, n, arrival, lengths)),
            measured,
        });
    }
    notes.insert(
        0,
        "GuideLLM's report gives mean lengths: each benchmark is simulated with fixed lengths, its mean \
                     prompt and output tokens"
            .into(),
    );
    notes.push(
        "GuideLLM's inter_token_latency_ms ((last - first token) / (output - 1) per request) is fitted as TPOT; its \
         time_per_output_token_ms counts the first token and is not fitted"
            .into(),
    );
    Ok(runs::problem(runs, notes))
}

/// Milliseconds per `unit` of a GenAI-Perf time statistic.
fn ms_per(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-6),
        "us" | "µs" => Some(1e-3),
        "ms" => Some(1.0),
        "s" | "sec" => Some(1e3),
        _ => None,
    }
}

/// GenAI-Perf's `profile_export_genai_perf.json`: one run of
/// `request_count` requests of the mean `input_sequence_length` and
/// `output_sequence_length`, at the `input_config`'s stimulus (`concurrency`
/// or `request_rate`, perf_analyzer's default constant spacing); its
/// `time_to_first_token` and `inter_token_latency` (per request, (latency −
/// TTFT) / (output − 1): vLLM's TPOT) from p50 up, in the `unit` each
/// states, and the `output_token_throughput` are the points.
pub fn genai_perf(path: &Path, text: &str, s: &LoadedScenario, preset: &str) -> Result<Problem, ConfigError> {
    let doc = parse(path, text, "GenAI-Perf export")?;
    const HINT: &str = "give GenAI-Perf's profile_export_genai_perf.json (genai-perf profile writes it to its \
                        artifacts directory)";
    let mean = |k: &str| num(&doc, &[k, "avg"]).ok_or_else(|| bad(path, format!("the export has no `{k}.avg`"), HINT));
    let lengths = mean_lengths(
        path,
        1.0,
        mean("input_sequence_length")?,
        mean("output_sequence_length")?,
        "input_sequence_length.avg and output_sequence_length.avg",
    )?;
    let mut notes = vec![lengths_note("the export", lengths)];
    let n = match num(&doc, &["request_count", "avg"]) {
        Some(n) if n >= 1.0 => n,
        Some(n) => {
            return Err(bad(
                path,
                format!("the export counts no requests (request_count = {n})"),
                "calibrate on a profile run whose requests completed",
            ));
        }
        None => {
            notes.push("the export has no request_count: 200 requests are simulated".into());
            200.0
        }
    };
    let config = doc
        .get("input_config")
        .ok_or_else(|| bad(path, "the export has no `input_config` (how the requests were sent)", HINT))?;
    // GenAI-Perf 0.0.x wrote the command-line arguments flat; later ones
    // write perf_analyzer.stimulus = { concurrency = N } or { request_rate = R }.
    let stimulus = at(config, &["perf_analyzer", "stimulus"]).unwrap_or(config);
    let arrival = if let Some(c) = num(stimulus, &["concurrency"]).filter(|c| *c >= 1.0) {
        Arrival::Closed(c.round() as u32)
    } else if let Some(r) = num(stimulus, &["request_rate"]).filter(|r| *r > 0.0) {
        Arrival::Constant(r)
    } else {
        let kinds: Vec<&str> = stimulus.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        return Err(bad(
            path,
            format!("the export's stimulus cannot be simulated (input_config stimulus keys: {})", kinds.join(", ")),
            "servesim simulates GenAI-Perf runs at a --concurrency or a --request-rate; sessions and fixed \
             schedules are not read",
        ));
    };
    let mut measured = Vec::new();
    for (key, stat) in [("time_to_first_token", Stat::Ttft as fn(f64) -> Stat), ("inter_token_latency", Stat::Tpot)] {
        let Some(d) = doc.get(key).and_then(Value::as_object) else { continue };
        let unit = d.get("unit").and_then(Value::as_str).unwrap_or("");
        let scale = ms_per(unit).ok_or_else(|| {
            bad(
                path,
                format!("`{key}.unit` is {unit:?}, not a time unit"),
                "GenAI-Perf writes times in ms (ns in raw perf_analyzer exports); give the unit as ns, us, ms or s",
            )
        })?;
        let values =
            d.iter().filter_map(|(k, v)| Some((k.strip_prefix('p')?.parse::<f64>().ok()?, v.as_f64()? * scale)));
        measured.extend(runs::fitted_percentiles(stat, values));
    }
    if measured.is_empty() {
        return Err(bad(path, "the export has no time_to_first_token or inter_token_latency percentiles", HINT));
    }
    if let Some(v) = num(&doc, &["output_token_throughput", "avg"]) {
        measured.push((Stat::OutputThroughput, v));
    }
    let run =
        Run { name: String::new(), group: None, scenario: Ok(scenario(s, preset, n, arrival, lengths)), measured };
    Ok(runs::problem(vec![run], notes))
}

/// The statistic a result-table column holds: `ttft_median_ms`,
/// `tpot_p99_ms`, `itl_median_ms`, `output_tok_s`.
fn column_stat(col: &str) -> Option<Stat> {
    if col == "output_tok_s" {
        return Some(Stat::OutputThroughput);
    }
    let (q, rest) = col.split_once('_')?;
    let stat: fn(f64) -> Stat = match q {
        "ttft" => Stat::Ttft,
        "tpot" => Stat::Tpot,
        "itl" => Stat::Itl,
        _ => return None,
    };
    let p = rest.strip_suffix("_ms")?;
    let p = if p == "median" { 50.0 } else { p.strip_prefix('p')?.parse().ok()? };
    (50.0..100.0).contains(&p).then(|| stat(p))
}

/// The columns a result table must have.
pub const TABLE_COLUMNS: [&str; 6] =
    ["model", "gpu", "engine", "successful_requests", "total_input_tokens", "total_output_tokens"];

/// A table of serving results in GPUStack's columns, one run a row:
/// [`TABLE_COLUMNS`], `tp` or `gpus_used`, the arrival (`max_concurrency`,
/// `request_rate_rps`, else all at once) and statistic columns
/// (`ttft_median_ms`, `ttft_p99_ms`, `tpot_median_ms`, `tpot_p99_ms`,
/// `itl_median_ms`, `output_tok_s`, ...). Each row is simulated with its
/// model, GPU and layout under the `--scenario`'s engine and cost settings
/// (or `preset`'s alone), the flags of its `serving_command_effective` when
/// the table has one, as `servesim validate` reads GPUStack's blocks
/// ([`crate::measured::gpustack::row_run`]).
pub fn serving_table(
    path: &Path,
    text: &str,
    catalog: &Catalog,
    s: Option<&LoadedScenario>,
    preset: &str,
) -> Result<Problem, ConfigError> {
    use crate::measured::gpustack::{excluded, row_run};
    if text.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#')).is_some_and(|h| h.starts_with("doc,block,")) {
        return Err(bad(
            path,
            "this is GPUStack's performance-lab table: its rows name pages, not catalogue models and GPUs",
            "calibrate on it with validation:gpustack-serve (A100) or validation:gpustack-serve-h100, or add the \
             columns model and gpu",
        ));
    }
    let t = crate::measured::user_table(path, text, &TABLE_COLUMNS)?;
    if t.missing(&["tp"]).is_some() && t.missing(&["gpus_used"]).is_some() {
        return Err(bad(path, "the table has neither `tp` nor `gpus_used`", "add a column tp (GPUs per replica)"));
    }
    let stats: Vec<(&str, Stat)> = t.header.iter().filter_map(|c| Some((c.as_str(), column_stat(c)?))).collect();
    if stats.is_empty() {
        return Err(bad(
            path,
            "the table has no statistic to fit",
            "add any of the columns ttft_median_ms, ttft_p99_ms, tpot_median_ms, tpot_p99_ms, itl_median_ms, \
             output_tok_s",
        ));
    }
    let base = match s {
        Some(s) => base_table(s, preset),
        None => {
            let mut t = toml::Table::new();
            set(&mut t, "engine", "preset", toml::Value::String(preset.into()));
            t
        }
    };
    let mut engines: Vec<&str> = t.rows.iter().map(|r| t.get(r, "engine")).collect();
    engines.sort_unstable();
    engines.dedup();
    let mut notes = vec![
        "the table gives mean lengths: each row is simulated with its total tokens / successful_requests, fixed (or \
         lognormal with ShareGPT's spread when its bench starts with SG)"
            .to_string(),
    ];
    if engines.len() > 1 {
        notes.push(format!(
            "the rows name {} engines ({}); every row is simulated with the profile `{preset}`: fit one engine at a \
             time with --rows <engine>",
            engines.len(),
            engines.join(", ")
        ));
    }
    let mut runs = Vec::new();
    for (i, r) in t.rows.iter().enumerate() {
        let (model, gpu, engine) = (t.get(r, "model"), t.get(r, "gpu"), t.get(r, "engine"));
        let row = |detail: &str| format!("row {} {model} {gpu} {engine}{detail}", i + 1);
        let run = excluded(&t, r)
            .map_or(Ok(()), Err)
            .and_then(|_| catalog.model(model).ok_or(format!("model `{model}` is not in the catalogue")))
            .and_then(|llm| {
                let g = catalog.gpu(gpu).ok_or(format!("GPU `{gpu}` is not in the catalogue"))?;
                Ok((llm, g, row_run(&t, r, None)?))
            });
        let (llm, g, run) = match run {
            Ok(x) => x,
            Err(why) => {
                runs.push(Run { name: row(""), group: None, scenario: Err(why), measured: Vec::new() });
                continue;
            }
        };
        let mut table = base.clone();
        set(&mut table, "model", "name", toml::Value::String(llm.key.clone()));
        if let Some(d) = &run.dtype {
            set(&mut table, "model", "dtype", toml::Value::String(d.clone()));
        }
        set(&mut table, "hardware", "gpu", toml::Value::String(g.key.clone()));
        set(&mut table, "hardware", "tp", toml::Value::Integer(run.tp.into()));
        set(&mut table, "hardware", "expert_parallel", toml::Value::Boolean(run.ep));
        if run.pp > 1 {
            set(&mut table, "hardware", "pp", toml::Value::Integer(run.pp.into()));
        } else if let Some(toml::Value::Table(h)) = table.get_mut("hardware") {
            h.remove("pp");
        }
        for (section, lines) in [("engine", &run.engine_keys), ("cost", &run.cost_keys)] {
            for line in lines {
                let Ok(kv) = line.parse::<toml::Table>() else { continue };
                for (k, v) in kv {
                    set(&mut table, section, &k, v);
                }
            }
        }
        let workload = format!("{}{}", run.arrival.toml(), run.lengths.toml());
        let name = row(&format!(" tp{} {}", run.tp, run.arrival.describe()));
        let measured = stats.iter().map(|(c, stat)| (*stat, t.num(r, c))).filter(|(_, v)| !v.is_nan()).collect();
        runs.push(Run {
            name: name.clone(),
            group: Some(name),
            scenario: Ok(runs::scenario_text(table, run.n.round() as u64, &workload)),
            measured,
        });
    }
    Ok(runs::problem(runs, notes))
}

#[cfg(test)]
mod tests;
