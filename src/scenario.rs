//! Reading a scenario file: the TOML, its engine preset from the catalogue,
//! `--set` overrides, and where in the text an error lies. It sits above
//! `config` (the typed scenario) and `catalog`, which import neither it nor
//! each other back.

use crate::catalog::Catalog;
use crate::config::Scenario;
use crate::error::ConfigError;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A scenario as read from disk, with what is needed to reproduce it.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The parsed, validated scenario with defaults filled in.
    pub scenario: Scenario,
    /// The file it was read from.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// The `--set key=value` overrides applied, in order.
    pub overrides: Vec<String>,
    /// A `--seed` given on the command line.
    pub seed_override: Option<u64>,
    /// `--min-requests` (capacity, plan, sweep): every variant made by
    /// [`LoadedScenario::derive`] runs long enough for about this many
    /// requests to arrive after the warm-up.
    pub min_requests: Option<u64>,
    /// The catalogue its engine presets were looked up in (for variants).
    pub catalog: std::sync::Arc<Catalog>,
}

/// Reads, overrides and validates a scenario file, with the engine presets
/// of the built-in catalogue.
pub fn load_scenario(path: &Path, sets: &[String]) -> Result<LoadedScenario, ConfigError> {
    load_scenario_with(path, sets, &std::sync::Arc::new(Catalog::builtin()?))
}

/// Like [`load_scenario`], with the engine presets (and the GPUs their rules
/// look at) of `catalog`.
pub fn load_scenario_with(
    path: &Path,
    sets: &[String],
    catalog: &std::sync::Arc<Catalog>,
) -> Result<LoadedScenario, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(format!("cannot read scenario: {e}"))
            .file(path)
            .hint("pass the path of a scenario TOML file, e.g. scenarios/quickstart.toml")
    })?;
    load_scenario_str_with(&text, path, sets, catalog)
}

/// Like [`load_scenario`] for a text already in memory; `path` names it in
/// messages and gives the default scenario name.
pub fn load_scenario_str(text: &str, path: &Path, sets: &[String]) -> Result<LoadedScenario, ConfigError> {
    load_scenario_str_with(text, path, sets, &std::sync::Arc::new(Catalog::builtin()?))
}

/// Like [`load_scenario_str`], with the engine presets of `catalog`.
pub fn load_scenario_str_with(
    text: &str,
    path: &Path,
    sets: &[String],
    catalog: &std::sync::Arc<Catalog>,
) -> Result<LoadedScenario, ConfigError> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::from_toml(&e, text, path))?;
    for s in sets {
        apply_set(&mut table, s)?;
    }
    if let Err(mut err) = apply_preset(&mut table, catalog) {
        err = err.file(path);
        if let Some(off) = locate_key(text, "engine.preset") {
            err = err.at_offset(text, off);
        }
        return Err(err);
    }
    if let Err((key, value)) = times_representable(&table) {
        let mut err = ConfigError::new(format!(
            "is {value:e} s: no simulated clock can represent it (beyond {:e} s, about 32 years, the clock \
             cannot resolve a microsecond)",
            crate::limits::MAX_CLOCK_S
        ))
        .file(path)
        .key(key.clone())
        .hint("give a time of at most a few years, in the key's unit");
        if let Some(set) = sets.iter().rev().find(|s| key.starts_with(s.split('=').next().unwrap_or("").trim())) {
            err.message = format!("{} (from --set {set})", err.message);
        } else if let Some(off) = locate_key(text, &key) {
            err = err.at_offset(text, off);
        }
        return Err(err);
    }
    let mut scenario = match Scenario::deserialize(table) {
        Ok(s) => s,
        Err(e) => {
            // Re-parse the file alone to locate the error in it; if the file
            // alone is fine, the error came from an override.
            return Err(match toml::from_str::<Scenario>(text) {
                Err(fe) => ConfigError::from_toml(&fe, text, path),
                Ok(_) => {
                    // Name the first override that breaks the file on its own.
                    let culprit = sets.iter().find(|s| {
                        let mut t: toml::Table = toml::from_str(text).unwrap_or_default();
                        apply_set(&mut t, s).is_err() || Scenario::deserialize(t).is_err()
                    });
                    let mut err = ConfigError::from_toml(&e, "", path);
                    err.line = None;
                    err.column = None;
                    let which = culprit.cloned().unwrap_or_else(|| sets.join(" --set "));
                    err.message = format!("in --set {which}: {}", err.message);
                    if let Some((key, _)) = culprit.and_then(|c| c.split_once('=')) {
                        err = err.key(key.trim());
                        if err.hint.is_none() {
                            err = err.hint(format!(
                                "every key, its type and allowed values are in docs/scenario.md (look up `{}`)",
                                key.trim()
                            ));
                        }
                    }
                    err
                }
            });
        }
    };
    scenario.base_dir = path.parent().map(|p| p.to_path_buf());
    if scenario.name.is_empty() {
        scenario.name = path.file_stem().map_or("scenario".into(), |s| s.to_string_lossy().to_string());
    }
    if let Err((key, message, hint)) = scenario.validate() {
        let mut err = ConfigError::new(message).file(path).key(key.clone()).hint(hint);
        if let Some(set) = sets.iter().rev().find(|s| s.split('=').next().is_some_and(|k| k.trim() == key)) {
            err.message = format!("{} (from --set {set})", err.message);
        } else if let Some(off) = locate_key(text, &key) {
            err = err.at_offset(text, off);
        }
        return Err(err);
    }
    let sha256 = sha256_hex(text.as_bytes());
    Ok(LoadedScenario {
        scenario,
        path: path.to_path_buf(),
        text: text.to_string(),
        sha256,
        overrides: sets.to_vec(),
        seed_override: None,
        min_requests: None,
        catalog: catalog.clone(),
    })
}

/// The first time in a scenario table that no clock can represent: a key
/// named for its unit (`_s`, `_ms`, `_us`, `_h`; at any depth, in lists
/// too) whose value, or whose distribution's mean, median, value, min or
/// max, is beyond [`crate::limits::MAX_CLOCK_S`] in magnitude. Returns the
/// dotted key and the value in seconds.
fn times_representable(table: &toml::Table) -> Result<(), (String, f64)> {
    fn seconds_per_unit(key: &str) -> Option<f64> {
        let unit = key.rsplit('_').next()?;
        match unit {
            _ if key == "zipf_s" || !key.contains('_') => None,
            "s" => Some(1.0),
            "ms" => Some(1e-3),
            "us" => Some(1e-6),
            "h" => Some(3600.0),
            _ => None,
        }
    }
    fn number(v: &toml::Value) -> Option<f64> {
        v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
    }
    fn walk(t: &toml::Table, at: &str) -> Result<(), (String, f64)> {
        for (k, v) in t {
            let here = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            let too_far = |x: f64, scale: f64| x.is_finite() && (x * scale).abs() > crate::limits::MAX_CLOCK_S;
            match (seconds_per_unit(k), v) {
                (Some(scale), toml::Value::Table(d)) => {
                    for part in ["mean", "median", "value", "min", "max"] {
                        if let Some(x) = d.get(part).and_then(number).filter(|x| too_far(*x, scale)) {
                            return Err((format!("{here}.{part}"), x * scale));
                        }
                    }
                }
                (Some(scale), v) => {
                    if let Some(x) = number(v).filter(|x| too_far(*x, scale)) {
                        return Err((here, x * scale));
                    }
                }
                _ => {}
            }
            match v {
                toml::Value::Table(sub) => walk(sub, &here)?,
                toml::Value::Array(a) => {
                    for (i, item) in a.iter().enumerate() {
                        if let toml::Value::Table(sub) = item {
                            walk(sub, &format!("{here}[{i}]"))?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
    walk(table, "")
}

/// SHA-256 of `bytes`, lowercase hex (the manifest's `scenario_sha256`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Lengthens a run so that about `min` requests arrive after the warm-up:
/// a request count grows to `min` plus the warm-up's arrivals; a duration
/// to the warm-up plus `min` ÷ the mean offered rate. A run already long
/// enough, or one whose rate is not known in advance (closed loop, trace
/// replay by duration), is left as it is. Multi-turn sessions count
/// conversations in their rate, so they are lengthened more than needed.
pub fn lengthen(s: &mut Scenario, min: u64) {
    let w = &s.workload;
    let own: Option<Vec<f64>> = w.classes.iter().filter_map(|c| c.own_process()).map(|p| p.mean_rate()).collect();
    let shared = w.classes.is_empty() || w.classes.iter().any(|c| c.own_process().is_none());
    let rate = own.and_then(|own| {
        let common = if shared { w.process().mean_rate()? } else { 0.0 };
        Some(common + own.iter().sum::<f64>()).filter(|r| *r > 0.0)
    });
    let warm = rate.map_or(0.0, |r| r * s.warmup_s.max(0.0));
    match (s.num_requests, s.duration_s, rate) {
        (Some(n), _, _) => s.num_requests = Some(n.max(min + warm.ceil() as u64)),
        (None, Some(d), Some(r)) => s.duration_s = Some(d.max(s.warmup_s.max(0.0) + min as f64 / r)),
        _ => {}
    }
}

/// Applies one `key.path=value` override to a TOML table. The value is read
/// as a TOML value (`3`, `0.5`, `true`, `"x"`, `{ dist = "fixed", value = 8 }`)
/// and, failing that, as a bare string.
pub fn apply_set(table: &mut toml::Table, set: &str) -> Result<(), ConfigError> {
    let Some((key, raw)) = set.split_once('=') else {
        return Err(ConfigError::new(format!("--set {set}: expected key.path=value"))
            .hint("for example --set workload.rate=12 or --set engine.chunked_prefill=false"));
    };
    let key = key.trim();
    let raw = raw.trim();
    set_value(table, key, parse_value(raw))
        .map_err(|e| ConfigError::new(format!("--set {set}: {}", e.message)).hint(e.hint.unwrap_or_default()))
}

/// Reads a command-line value as TOML (`3`, `true`, `"x"`, `{...}`), or as a
/// bare string. A value that would smuggle in more keys (`1\nseed = 3`) is
/// taken as a bare string, which the key's type then refuses.
pub fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) if t.len() == 1 => t.remove("v").unwrap_or(toml::Value::String(raw.to_string())),
        _ => toml::Value::String(raw.to_string()),
    }
}

/// The engine profile of a scenario that names none: vLLM V1 with the kernel
/// cost model, the engine most people serve with and the best validated
/// profile (docs/fidelity.md). servesim's pre-Step-11 roofline engine stays
/// available by name as `legacy`.
pub const DEFAULT_PRESET: &str = "vllm-v1";

/// Fills in the `[engine]` and `[cost]` keys of the engine profile named by
/// `engine.preset` that the scenario does not set (a preset that is not a
/// string is left for deserialisation to report). The profile's rules are
/// judged against the scenario's `hardware.gpu` (or inline `gpu_spec`),
/// `hardware.tp` and `model.dtype`.
/// A scenario that names no preset runs this one (`engine.preset` is filled
/// in, so every header and result names it).
pub fn apply_preset(table: &mut toml::Table, catalog: &Catalog) -> Result<(), ConfigError> {
    if let toml::map::Entry::Vacant(v) = table.entry("engine") {
        v.insert(toml::Value::Table(toml::Table::new()));
    }
    if let Some(toml::Value::Table(engine)) = table.get_mut("engine") {
        engine.entry("preset").or_insert_with(|| toml::Value::String(DEFAULT_PRESET.into()));
    }
    let Some((_, mut engine_keys, cost_keys)) = preset_keys_of(table, catalog)? else { return Ok(()) };
    let chunked = table.get("engine").and_then(|e| e.get("chunked_prefill")).and_then(|v| v.as_bool());
    if chunked == Some(true) {
        // The scenario chunks prompts: the profile's unchunked mixing (TensorRT-LLM
        // batches whole prompts with decodes) gives way, as chunking already mixes.
        engine_keys.remove("mixed_prefill");
    }
    fill(table, "engine", engine_keys);
    fill(table, "cost", cost_keys);
    Ok(())
}

/// The preset named by `engine.preset` of a scenario table, and the
/// `[engine]` and `[cost]` keys it sets for the table's set-up (None: no
/// preset). Its rules are judged against the table's `hardware.gpu` (or
/// inline `gpu_spec`), `hardware.tp` and `model.dtype`.
fn preset_keys_of(
    table: &toml::Table,
    catalog: &Catalog,
) -> Result<Option<(String, toml::Table, toml::Table)>, ConfigError> {
    let default_engine = toml::Table::new();
    let engine = match table.get("engine") {
        Some(toml::Value::Table(e)) => e,
        None => &default_engine,
        Some(_) => return Ok(None),
    };
    let name = match engine.get("preset") {
        Some(toml::Value::String(name)) => name.clone(),
        None => DEFAULT_PRESET.to_string(),
        Some(_) => return Ok(None),
    };
    let hw = table.get("hardware").and_then(|h| h.as_table());
    let inline: Option<crate::spec::GpuSpec> =
        hw.and_then(|h| h.get("gpu_spec")).and_then(|g| crate::spec::GpuSpec::deserialize(g.clone()).ok());
    let gpu_name = hw.and_then(|h| h.get("gpu")).and_then(|g| g.as_str()).unwrap_or("h100-sxm");
    let gpu = inline.or_else(|| catalog.gpu(gpu_name).map(|e| e.spec.clone()));
    let tp = hw.and_then(|h| h.get("tp")).and_then(|t| t.as_integer()).unwrap_or(1).max(1) as u32;
    let dtype = table.get("model").and_then(|m| m.get("dtype")).and_then(|d| d.as_str()).unwrap_or("bf16").to_string();
    let model = table.get("model").and_then(|m| m.as_table());
    let max_model_len = engine.get("max_model_len").and_then(|v| v.as_integer()).map(|v| v as u32).or_else(|| {
        let spec = model.and_then(|m| m.get("spec")).and_then(|s| s.get("max_context")).and_then(|v| v.as_integer());
        spec.map(|v| v as u32).or_else(|| {
            let name = model.and_then(|m| m.get("name")).and_then(|n| n.as_str())?;
            catalog.model(name).map(|e| e.spec.max_context)
        })
    });
    let ctx = crate::catalog::engine::Context { gpu: gpu.as_ref(), tp, dtype: &dtype, max_model_len };
    let (engine_keys, cost_keys) = preset_keys(&name, catalog, &ctx)?;
    Ok(Some((name, engine_keys, cost_keys)))
}

/// Where a scenario's engine settings came from: its preset, or the
/// scenario itself (the file and `--set`) over the preset.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetOrigins {
    /// The preset.
    pub preset: String,
    /// The scenario names no preset: this is the default ([`DEFAULT_PRESET`]).
    pub implicit: bool,
    /// `section.key` the preset set (the scenario left them alone).
    pub from_preset: Vec<String>,
    /// `(section.key, the scenario's value, the preset's value)`: keys the
    /// scenario pins to another value than the preset's.
    pub pinned: Vec<(String, String, String)>,
}

impl LoadedScenario {
    /// Which `[engine]` and `[cost]` keys came from the preset and which the
    /// scenario pins over it (None without a preset).
    pub fn preset_origins(&self) -> Option<PresetOrigins> {
        let mut table: toml::Table = toml::from_str(&self.text).ok()?;
        for s in &self.overrides {
            apply_set(&mut table, s).ok()?;
        }
        let (preset, engine_keys, cost_keys) = preset_keys_of(&table, &self.catalog).ok()??;
        let implicit = table.get("engine").and_then(|e| e.get("preset")).is_none();
        let mut o = PresetOrigins { preset, implicit, from_preset: Vec::new(), pinned: Vec::new() };
        for (section, keys) in [("engine", engine_keys), ("cost", cost_keys)] {
            let own = table.get(section).and_then(|t| t.as_table());
            for (k, v) in keys {
                match own.and_then(|t| t.get(&k)) {
                    None => o.from_preset.push(format!("{section}.{k}")),
                    Some(mine) if mine != &v => {
                        o.pinned.push((format!("{section}.{k}"), mine.to_string(), v.to_string()))
                    }
                    Some(_) => {}
                }
            }
        }
        Some(o)
    }

    /// With `--set engine.preset=…` on a scenario that pins engine keys: a
    /// warning naming them (they stay the scenario's, so the comparison is
    /// not of the presets as they ship).
    pub fn pinned_warning(&self) -> Option<String> {
        if !self.overrides.iter().any(|s| s.trim_start().starts_with("engine.preset")) {
            return None;
        }
        let o = self.preset_origins().filter(|o| !o.pinned.is_empty())?;
        let keys: Vec<String> =
            o.pinned.iter().map(|(k, mine, theirs)| format!("{k} = {mine} ({} sets {theirs})", o.preset)).collect();
        Some(format!(
            "the scenario pins engine keys that --set engine.preset=\"{}\" does not change: {}; remove them from \
             the scenario (or --set them too) to compare the presets as they ship",
            o.preset,
            keys.join(", ")
        ))
    }
}

/// The `[engine]` and `[cost]` keys of preset `name` for the set-up `ctx`.
pub fn preset_keys(
    name: &str,
    catalog: &Catalog,
    ctx: &crate::catalog::engine::Context,
) -> Result<(toml::Table, toml::Table), ConfigError> {
    let Some(entry) = catalog.engine(name) else {
        if let Some(e) = catalog.broken_error("engine", name) {
            return Err(e);
        }
        let known: Vec<&String> = catalog.engines.keys().collect();
        let best = known
            .iter()
            .min_by_key(|k| crate::error::edit_distance(name, k))
            .filter(|k| crate::error::edit_distance(name, k) <= name.len() / 3 + 1);
        let list = known.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        let mut hint = format!("known presets: {list}; or add models/engine/{name}.toml (docs/engines.md)");
        if let Some(b) = best {
            hint = format!("did you mean \"{b}\"? {hint}");
        }
        return Err(ConfigError::new(format!("unknown engine preset \"{name}\"")).key("engine.preset").hint(hint));
    };
    Ok(crate::catalog::engine::resolved_keys(&entry.spec, ctx))
}

/// Inserts `keys` into `table[section]` where not already set.
fn fill(table: &mut toml::Table, section: &str, keys: toml::Table) {
    if keys.is_empty() {
        return;
    }
    let t = table.entry(section.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(t) = t {
        for (k, v) in keys {
            t.entry(k).or_insert(v);
        }
    }
}

/// Splits `name[3]` into ("name", Some(3)).
fn indexed(part: &str) -> Result<(&str, Option<usize>), ConfigError> {
    match part.split_once('[') {
        None => Ok((part, None)),
        Some((name, rest)) => {
            let idx = rest.strip_suffix(']').and_then(|i| i.parse::<usize>().ok()).ok_or_else(|| {
                ConfigError::new(format!("bad index in `{part}`")).hint("write list entries as name[0], name[1], ...")
            })?;
            Ok((name, Some(idx)))
        }
    }
}

/// Sets a dotted key in a TOML table, creating intermediate tables. A
/// segment `name[i]` addresses entry i of an existing array (for example
/// `workload.classes[1].weight`).
pub fn set_value(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ConfigError::new(format!("empty segment in key path `{key}`"))
            .hint("write dotted keys like engine.max_num_seqs"));
    }
    let not_table = |p: &str| {
        ConfigError::new(format!("`{p}` is not a table"))
            .hint(format!("`{p}` holds a value; set `{p}` itself, not a key below it"))
    };
    let check_index = |n: usize, name: &str, i: usize| {
        if i < n {
            Ok(())
        } else {
            Err(ConfigError::new(format!("`{name}` has {n} entries, so there is no `{name}[{i}]`"))
                .hint(format!("use an index from 0 to {}", n.saturating_sub(1))))
        }
    };
    let mut cur = table;
    for p in &parts[..parts.len() - 1] {
        let (name, idx) = indexed(p)?;
        let entry = cur.entry(name.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let entry = match (idx, entry) {
            (None, e) => e,
            (Some(i), toml::Value::Array(arr)) => {
                check_index(arr.len(), name, i)?;
                &mut arr[i]
            }
            (Some(_), _) => {
                return Err(
                    ConfigError::new(format!("`{name}` is not a list")).hint(format!("drop the index after `{name}`"))
                );
            }
        };
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(not_table(p)),
        };
    }
    let (name, idx) = indexed(parts[parts.len() - 1])?;
    match idx {
        None => {
            cur.insert(name.to_string(), value);
        }
        Some(i) => match cur.get_mut(name) {
            Some(toml::Value::Array(arr)) => {
                check_index(arr.len(), name, i)?;
                arr[i] = value;
            }
            _ => {
                return Err(
                    ConfigError::new(format!("`{name}` is not a list")).hint(format!("drop the index after `{name}`"))
                );
            }
        },
    }
    Ok(())
}

/// Whether a scenario table names files (traces, length tables), which are
/// read relative to the scenario file.
pub fn names_files(t: &toml::Table) -> bool {
    fn any(v: &toml::Value) -> bool {
        match v {
            toml::Value::Table(t) => names_files(t),
            toml::Value::Array(a) => a.iter().any(any),
            _ => false,
        }
    }
    t.iter().any(|(k, v)| k == "file" || any(v))
}

/// The byte offset of entry `key` (taken literally: `"engine.max_num_seqs"`)
/// of top-level table `table` in a TOML text.
pub fn locate_entry(text: &str, table: &str, key: &str) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let (_, t) = root.get_ref().iter().find(|(k, _)| k.get_ref().as_ref() == table)?;
    let toml::de::DeValue::Table(t) = t.get_ref() else { return None };
    t.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(k, _)| k.span().start)
}

/// Byte offset in `text` of the dotted `key` (e.g. `engine.max_num_seqs`), if present.
pub fn locate_key(text: &str, key: &str) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut best = None;
    for part in key.split('.') {
        let (name, idx) = indexed(part).ok()?;
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == name) else { break };
        best = Some(v.span().start.max(k.span().start));
        let mut v = v;
        if let (Some(i), toml::de::DeValue::Array(items)) = (idx, v.get_ref()) {
            let Some(item) = items.get(i) else { break };
            best = Some(item.span().start);
            v = item;
        }
        match v.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    best
}

impl LoadedScenario {
    /// The scenario as a TOML table: the file with the `--set` overrides applied.
    pub fn table(&self) -> toml::Table {
        let mut t: toml::Table = toml::from_str(&self.text).unwrap_or_default();
        for s in &self.overrides {
            let _ = apply_set(&mut t, s);
        }
        if let Some(seed) = self.seed_override {
            t.insert("seed".into(), toml::Value::Integer(seed as i64));
        }
        t
    }

    /// A variant of this scenario with more overrides (dotted key → value),
    /// validated; `what` names the variant in errors (e.g. "sweep point 7").
    pub fn derive(&self, extra: &[(String, toml::Value)], what: &str) -> Result<Scenario, ConfigError> {
        let mut t = self.table();
        for (k, v) in extra {
            set_value(&mut t, k, v.clone())
                .map_err(|e| ConfigError { message: format!("{what}: {}", e.message), ..e })?;
        }
        t.remove("sweep");
        apply_preset(&mut t, &self.catalog)
            .map_err(|e| ConfigError { message: format!("{what}: {}", e.message), ..e.file(&self.path) })?;
        let mut s = Scenario::deserialize(t).map_err(|e| {
            let mut err = ConfigError::from_toml(&e, "", &self.path);
            err.message = format!("{what}: {}", err.message);
            err
        })?;
        s.name = self.scenario.name.clone();
        s.base_dir = self.scenario.base_dir.clone();
        if let Some(min) = self.min_requests {
            lengthen(&mut s, min);
        }
        s.validate().map_err(|(key, message, hint)| {
            ConfigError::new(format!("{what}: {message}")).file(&self.path).key(key).hint(hint)
        })?;
        Ok(s)
    }

    /// The scenario as a TOML file that loads back to it: `header` (comment
    /// lines), then its name and seed, then every key of the file with the
    /// overrides applied. Relative file paths in it are read from the
    /// scenario's folder: a line says so when it names files.
    pub fn scenario_toml(&self, header: &str) -> Result<String, ConfigError> {
        let mut t = toml::Table::new();
        t.insert("name".into(), toml::Value::String(self.scenario.name.clone()));
        t.insert("seed".into(), toml::Value::Integer(self.scenario.seed as i64));
        for (k, v) in self.table() {
            t.entry(k).or_insert(v);
        }
        let body =
            toml::to_string(&t).map_err(|e| ConfigError::new(format!("cannot write the scenario as TOML: {e}")))?;
        let mut head = header.to_string();
        if let Some(dir) = self.scenario.base_dir.as_ref().filter(|d| !d.as_os_str().is_empty() && names_files(&t)) {
            head += &format!("# Relative file paths in it are read from {}: save it there.\n", dir.display());
        }
        Ok(format!("{head}\n{body}"))
    }

    /// Places an error of the `[baseline]` run at the baseline entry that
    /// causes it (the one that fails alone, or the entry named by the
    /// error's key): its file and line, and its key when the error has none.
    pub fn locate_baseline(&self, mut err: ConfigError, entries: &[(String, toml::Value)]) -> ConfigError {
        let by_key =
            err.key.as_ref().and_then(|k| entries.iter().find(|(e, _)| e == k || k.starts_with(&format!("{e}."))));
        let culprit = by_key.or_else(|| {
            entries.iter().find(|e| {
                let alone = std::slice::from_ref(*e);
                self.derive(alone, "baseline").is_err_and(|x| x.message == err.message || x.key == err.key)
            })
        });
        let Some((key, _)) = culprit else { return self.locate(err) };
        if err.key.is_none() {
            err = err.key(key.clone());
        }
        err.file = Some(self.path.clone());
        err.line = None;
        err.column = None;
        if let Some(off) = locate_entry(&self.text, "baseline", key) {
            err = err.at_offset(&self.text, off);
        }
        if !err.message.starts_with("baseline") {
            err.message = format!("baseline: {}", err.message);
        }
        err
    }

    /// Places an error about a key of this scenario at its file and line
    /// (or names the `--set` override it came from).
    pub fn locate(&self, mut err: ConfigError) -> ConfigError {
        if err.file.is_some() {
            return err;
        }
        err.file = Some(self.path.clone());
        if let Some(key) = err.key.clone() {
            if let Some(set) =
                self.overrides.iter().rev().find(|s| s.split('=').next().is_some_and(|k| k.trim() == key))
            {
                err.message = format!("{} (from --set {set})", err.message);
            } else {
                if let Some(off) = locate_key(&self.text, &key) {
                    err = err.at_offset(&self.text, off);
                }
                if !self.overrides.is_empty() {
                    err.message = format!("{} (with --set {})", err.message, self.overrides.join(" --set "));
                }
            }
        }
        err
    }
}
