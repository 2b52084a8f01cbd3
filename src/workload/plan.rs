//! The resolved workload: every class with its samplers, the arrival
//! processes, the trace window, closed-loop users and sessions — built once
//! from the scenario (reading the trace and length files it names) and shared
//! by every run of it.

use super::dist::{LengthSampler, TimeSampler};
use super::process::Process;
use super::trace::{self, Columns, Trace, TraceFormat};
use crate::config::{
    ArrivalKind, ClassConfig, JointLengths, LengthDist, OnBadRow, Scenario, SloConfig, TooLong, TraceReplay,
};
use crate::error::ConfigError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// One request class, resolved.
#[derive(Debug, Clone)]
pub struct ClassPlan {
    /// Name.
    pub name: String,
    /// Share of the common arrival process (0 with an own process).
    pub weight: f64,
    /// Own arrival process.
    pub own: Option<Process>,
    /// Long-run mean arrival rate of the class, when known.
    pub mean_rate: Option<f64>,
    /// Prompt lengths (without the shared prefix).
    pub prompt: LengthSampler,
    /// Output lengths.
    pub output: LengthSampler,
    /// Joint (prompt, output) pairs, replacing the two samplers.
    pub joint: Option<Arc<[(u32, u32)]>>,
    /// Objectives of this class.
    pub slo: Option<SloConfig>,
    /// Scheduling priority (lower is served first, as vLLM).
    pub priority: i32,
    /// Index of its prefix group (u32::MAX: none).
    pub prefix_group: u32,
    /// Tokens of the shared system prompt.
    pub prefix_tokens: u32,
    /// Every request of the class has output length 0 (embeddings, scoring).
    pub prefill_only: bool,
    /// Token-bucket admission limit: (tokens per second, bucket size).
    pub token_limit: Option<(f64, f64)>,
    /// Speculative decoding: this class's acceptance rate, if it sets one.
    pub spec_acceptance: Option<f64>,
}

/// The trace window being replayed.
#[derive(Debug, Clone)]
pub struct TracePlan {
    /// The parsed trace.
    pub trace: Arc<Trace>,
    /// The file, as written in the scenario.
    pub file: String,
    /// First row of the window.
    pub lo: usize,
    /// One past the last row of the window.
    pub hi: usize,
    /// Trace time of the window start (replay time 0).
    pub t0: f64,
    /// Replay time = (trace time − t0) × factor.
    pub factor: f64,
    /// Probability of keeping each row.
    pub sample: f64,
    /// Loop after the last row.
    pub repeat: bool,
    /// Replay-time shift between loops.
    pub period: f64,
    /// Trace class index → class index (empty: classes drawn by weight).
    pub class_map: Vec<u16>,
    /// Mean arrival rate of the replay (before sampling), per second.
    pub mean_rate: f64,
}

/// Multi-turn sessions, resolved.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// Turns per session.
    pub turns: LengthSampler,
    /// Think time between turns.
    pub think: TimeSampler,
    /// New user tokens per later turn (None: the class's prompt sampler).
    pub new_tokens: Option<LengthSampler>,
}

/// The resolved workload.
#[derive(Debug, Clone)]
pub struct WorkloadPlan {
    /// Classes, in declaration order (one class "default" when none are declared).
    pub classes: Vec<ClassPlan>,
    /// Whether the workload has classes to report: declared ones, or the
    /// labels of a replayed trace's class column.
    pub declared_classes: bool,
    /// The common open-loop process, if any class takes a share of it.
    pub common: Option<Process>,
    /// Closed-loop users and their think time.
    pub closed_loop: Option<(u32, TimeSampler)>,
    /// Multi-turn sessions.
    pub sessions: Option<SessionPlan>,
    /// Trace replay.
    pub trace: Option<TracePlan>,
    /// Most requests to send.
    pub num_requests: Option<u64>,
    /// No request is sent after this time, s.
    pub horizon: Option<f64>,
    /// vLLM rescaling: the last common arrival lands at this time.
    pub rescale_to: Option<f64>,
    /// Clip over-long requests (else reject).
    pub clip: bool,
    /// All requests at t = 0.
    pub offline: bool,
    /// Bad rows skipped in the files read.
    pub skipped_rows: u64,
    /// The first skipped row's problem.
    pub first_skipped: Option<String>,
    /// Long-run mean offered arrival rate, when defined.
    pub offered_rate: Option<f64>,
    /// The arrival process, in words.
    pub process: String,
}

impl WorkloadPlan {
    /// Mean (prompt, output) tokens over the class mix (for a trace, over the replayed window).
    pub fn mean_lengths(&self) -> (f64, f64) {
        if let Some(t) = &self.trace {
            let rows = &t.trace.rows[t.lo..t.hi];
            let n = rows.len().max(1) as f64;
            return (
                rows.iter().map(|r| r.prompt as f64).sum::<f64>() / n,
                rows.iter().map(|r| r.output as f64).sum::<f64>() / n,
            );
        }
        let (mut wp, mut wo, mut wsum) = (0.0, 0.0, 0.0);
        for c in &self.classes {
            let w = c.mean_rate.unwrap_or(c.weight).max(0.0);
            let (p, o) = match &c.joint {
                Some(j) => {
                    let n = j.len().max(1) as f64;
                    (j.iter().map(|x| x.0 as f64).sum::<f64>() / n, j.iter().map(|x| x.1 as f64).sum::<f64>() / n)
                }
                None => (c.prompt.mean(), c.output.mean()),
            };
            wp += w * (p + c.prefix_tokens as f64);
            wo += w * o;
            wsum += w;
        }
        if wsum > 0.0 { (wp / wsum, wo / wsum) } else { (0.0, 0.0) }
    }

    /// Whether the source needs to hear about completions (closed loop, sessions).
    pub fn needs_feedback(&self) -> bool {
        self.closed_loop.is_some() || self.sessions.is_some()
    }
}

type CacheKey = (PathBuf, String);

/// Parsed files, shared across the runs of a sweep (files are read once per process).
fn cache() -> &'static Mutex<HashMap<CacheKey, Arc<Trace>>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<Trace>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Reads and parses a trace or length file (cached by path and options).
pub fn read_trace(
    base: Option<&Path>,
    file: &str,
    format: TraceFormat,
    columns: Option<&Columns>,
    skip_bad: bool,
    key: &str,
) -> Result<Arc<Trace>, ConfigError> {
    let path = match base {
        Some(b) if Path::new(file).is_relative() => b.join(file),
        _ => PathBuf::from(file),
    };
    let ck = (path.clone(), format!("{format:?}|{columns:?}|{skip_bad}"));
    if let Some(t) = cache().lock().expect("cache lock").get(&ck) {
        return Ok(t.clone());
    }
    let text = read_data_file(&path, key)?;
    let t = trace::parse(&text, format, columns, skip_bad).map_err(|e| {
        let mut err = ConfigError::new(if e.field.is_empty() {
            e.message.clone()
        } else {
            format!("field `{}`: {}", e.field, e.message)
        })
        .file(&path)
        .hint(e.hint.clone());
        if e.line > 0 {
            err.line = Some(e.line as usize);
        }
        err
    })?;
    check_skipped(&t, &path, key)?;
    let t = Arc::new(t);
    cache().lock().expect("cache lock").insert(ck, t.clone());
    Ok(t)
}

/// Largest fraction of a file's data rows `on_bad_row = "skip"` may drop:
/// beyond it the file (or its column mapping) is wrong, and a replay of what
/// is left would misrepresent it.
pub const MAX_SKIPPED_FRACTION: f64 = 0.01;

/// Refuses a file of which `on_bad_row = "skip"` dropped more than
/// [`MAX_SKIPPED_FRACTION`], naming the row most of them fell behind when a
/// timestamp jumped ahead (one far-future row dropped half a trace).
fn check_skipped(t: &Trace, path: &Path, key: &str) -> Result<(), ConfigError> {
    let (kept, skipped) = (t.rows.len() as u64, t.skipped);
    let total = kept + skipped;
    if skipped as f64 <= MAX_SKIPPED_FRACTION * total as f64 {
        return Ok(());
    }
    let (line, behind) = t.skipped_behind;
    let blamed = behind * 2 >= skipped;
    let cause = if blamed {
        format!("; {behind} of them are earlier than line {line}, whose timestamp jumps ahead of the rows after it")
    } else {
        String::new()
    };
    let mut err = ConfigError::new(format!(
        "{skipped} of {total} data rows ({:.1}%) are bad, more than the {}% that on_bad_row = \"skip\" may drop{cause} \
         (the first skipped: {})",
        100.0 * skipped as f64 / total as f64,
        MAX_SKIPPED_FRACTION * 100.0,
        t.first_skipped.as_deref().unwrap_or("")
    ))
    .file(path)
    .key(key)
    .hint(if blamed {
        "fix or remove the row named (its timestamp), then replay the file"
    } else {
        "fix the file, or check that the format and column mapping match it"
    });
    if blamed {
        err.line = Some(line as usize);
    }
    Err(err)
}

/// Largest trace or length file read, bytes (2 GiB: about 4·10⁷ CSV rows or
/// 10⁷ Mooncake lines; a larger trace can be split or sampled first).
pub const MAX_DATA_FILE_BYTES: u64 = 2 << 30;

/// Reads a trace or length file: a regular file (not a device, pipe or
/// folder: `/dev/zero` read until memory ran out) of at most
/// [`MAX_DATA_FILE_BYTES`], checked again while reading in case it grows.
fn read_data_file(path: &Path, key: &str) -> Result<String, ConfigError> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let fail = |what: String, hint: &str| ConfigError::new(what).key(key).hint(hint);
    let cannot = |e: std::io::Error| {
        fail(
            format!("cannot read {}: {e}", path.display()),
            "paths are relative to the scenario file's folder; check the file name",
        )
    };
    // Look before opening: opening a named pipe for reading blocks until a
    // writer comes.
    if std::fs::metadata(path).map_err(cannot)?.file_type().is_fifo() {
        return Err(fail(
            format!("{} is not a regular file", path.display()),
            "name a CSV or JSON-lines file (not a folder, device or pipe)",
        ));
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(fail(
            format!("{} is not a regular file", path.display()),
            "name a CSV or JSON-lines file (not a folder, device or pipe)",
        ));
    }
    let too_big = |n: u64| {
        fail(
            format!("{} holds {n} bytes; servesim reads at most {MAX_DATA_FILE_BYTES} (2 GiB)", path.display()),
            "split the file, or keep a sample of its rows",
        )
    };
    if meta.len() > MAX_DATA_FILE_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_DATA_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_DATA_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(
            format!("{} is not UTF-8 text (invalid byte at offset {})", path.display(), e.utf8_error().valid_up_to()),
            "a trace or length file is CSV or JSON-lines text; check that the file is not compressed or binary",
        )
    })
}

/// A row error's hint without its "or set on_bad_row = \"skip\" ..." advice
/// (up to the next `;`), for files that have no such key.
fn without_skip_advice(h: &str) -> String {
    let Some(i) = h.find("or set on_bad_row") else { return h.to_string() };
    let head = h[..i].trim_end().trim_end_matches(',').trim_end();
    let tail = h[i..].find(';').map_or("", |j| &h[i + j..]);
    format!("{head}{tail}")
}

fn csv_columns(prompt: &Option<String>, output: &Option<String>) -> Option<Columns> {
    Some(Columns {
        prompt: prompt.clone().unwrap_or_default(),
        output: output.clone().unwrap_or_default(),
        ..Columns::default()
    })
}

struct Loader<'a> {
    base: Option<&'a Path>,
    skipped: u64,
    first_skipped: Option<String>,
}

impl Loader<'_> {
    fn note(&mut self, t: &Trace, file: &str) {
        self.skipped += t.skipped;
        if self.first_skipped.is_none() {
            self.first_skipped = t.first_skipped.as_ref().map(|s| format!("{file}: {s}"));
        }
    }

    fn joint(&mut self, j: &JointLengths, key: &str) -> Result<Arc<[(u32, u32)]>, ConfigError> {
        let cols = csv_columns(&j.prompt_column, &j.output_column);
        let t = read_trace(self.base, &j.file, j.format, cols.as_ref(), j.on_bad_row == OnBadRow::Skip, key)?;
        self.note(&t, &j.file);
        if let Some(r) = t.rows.iter().find(|r| r.prompt == 0) {
            return Err(ConfigError::new(format!("a prompt length of 0 at line {} of {}", r.line, j.file))
                .key(key)
                .hint("a prompt needs at least 1 token: fix the row, or set on_bad_row = \"skip\" after removing it"));
        }
        Ok(t.rows.iter().map(|r| (r.prompt, r.output)).collect())
    }

    fn length(&mut self, d: &LengthDist, key: &str, allow_zero: bool) -> Result<LengthSampler, ConfigError> {
        let data = match d {
            LengthDist::Empirical { file: Some(f), column, format, .. } => {
                let fmt = format.unwrap_or(TraceFormat::Csv);
                let col = column.clone();
                let cols = csv_columns(&col, &col);
                // An empirical length file has no on_bad_row key: its row errors
                // must not suggest one.
                let t = read_trace(self.base, f, fmt, cols.as_ref(), false, key).map_err(|mut e| {
                    e.hint = e.hint.map(|h| without_skip_advice(&h));
                    e
                })?;
                self.note(&t, f);
                let output = fmt != TraceFormat::Csv && col.as_deref() == Some("output");
                let v: Arc<[u32]> = t.rows.iter().map(|r| if output { r.output } else { r.prompt }).collect();
                if !allow_zero && v.contains(&0) {
                    return Err(ConfigError::new(format!(
                        "column `{}` of {f} holds a 0-token prompt",
                        col.unwrap_or_default()
                    ))
                    .key(key)
                    .hint("a prompt needs at least 1 token: pick another column or clean the file"));
                }
                Some(v)
            }
            _ => None,
        };
        Ok(LengthSampler::new(d, data))
    }
}

fn process_name(s: &Scenario) -> String {
    let w = &s.workload;
    let k = w.arrival_kind();
    let mut name = k.as_str().to_string();
    if !w.rate_schedule.is_empty() {
        name = "poisson (rate schedule)".into();
    }
    if w.diurnal.is_some() {
        name = "poisson (diurnal)".into();
    }
    if w.ramp_up.is_some() {
        name.push_str(" with ramp-up");
    }
    let own = w.classes.iter().filter(|c| c.own_process().is_some()).count();
    if own > 0 {
        name = if own == w.classes.len() {
            "per-class processes".into()
        } else {
            format!("{name} + {own} class process{}", if own > 1 { "es" } else { "" })
        };
    }
    if w.sessions.is_some() {
        name.push_str(", multi-turn sessions");
    }
    if !w.classes.is_empty() {
        name.push_str(&format!(", {} classes", w.classes.len()));
    }
    name
}

/// Resolves the workload of a scenario, reading the files it names
/// (relative to `scenario.base_dir`).
pub fn build(s: &Scenario) -> Result<WorkloadPlan, ConfigError> {
    let w = &s.workload;
    let mut ld = Loader { base: s.base_dir.as_deref(), skipped: 0, first_skipped: None };
    let kind = w.arrival_kind();
    // Workload-level lengths, the default of every class.
    let default_joint = match &w.lengths {
        Some(j) => Some(ld.joint(j, "workload.lengths")?),
        None => None,
    };
    let default_prompt = match &w.prompt_tokens {
        Some(d) => Some(ld.length(d, "workload.prompt_tokens", false)?),
        None => None,
    };
    let default_output = match &w.output_tokens {
        Some(d) => Some(ld.length(d, "workload.output_tokens", true)?),
        None => None,
    };
    let implicit = ClassConfig {
        name: "default".into(),
        weight: Some(1.0),
        arrival: None,
        rate: None,
        cv: None,
        burstiness: None,
        on_off: None,
        rate_schedule: Vec::new(),
        diurnal: None,
        prompt_tokens: None,
        output_tokens: None,
        lengths: None,
        slo: None,
        priority: 0,
        prefix_group: None,
        prefix_tokens: 0,
        token_rate_limit: None,
        token_burst: None,
        spec_acceptance: None,
    };
    let configs: Vec<&ClassConfig> = if w.classes.is_empty() { vec![&implicit] } else { w.classes.iter().collect() };
    let mut groups: Vec<&str> = Vec::new();
    let mut classes = Vec::with_capacity(configs.len());
    for (i, c) in configs.iter().enumerate() {
        let key =
            |k: &str| if w.classes.is_empty() { format!("workload.{k}") } else { format!("workload.classes[{i}].{k}") };
        let joint = match &c.lengths {
            Some(j) => Some(ld.joint(j, &key("lengths"))?),
            None if c.prompt_tokens.is_none() && c.output_tokens.is_none() => default_joint.clone(),
            None => None,
        };
        let pick = |own: Option<LengthSampler>, def: &Option<LengthSampler>| own.or_else(|| def.clone());
        let prompt = match &c.prompt_tokens {
            Some(d) => Some(ld.length(d, &key("prompt_tokens"), false)?),
            None => None,
        };
        let output = match &c.output_tokens {
            Some(d) => Some(ld.length(d, &key("output_tokens"), true)?),
            None => None,
        };
        let prompt = pick(prompt, &default_prompt).unwrap_or(LengthSampler::Fixed(1));
        let output = pick(output, &default_output).unwrap_or(LengthSampler::Fixed(1));
        let prefill_only = joint.is_none()
            && matches!(c.output_tokens.as_ref().or(w.output_tokens.as_ref()), Some(LengthDist::Fixed { value: 0 }));
        let own = c.own_process();
        let prefix_group = match &c.prefix_group {
            Some(g) => match groups.iter().position(|x| x == g) {
                Some(p) => p as u32,
                None => {
                    groups.push(g);
                    (groups.len() - 1) as u32
                }
            },
            None if c.prefix_tokens > 0 => {
                // A shared prompt private to the class.
                groups.push(&c.name);
                (groups.len() - 1) as u32
            }
            None => u32::MAX,
        };
        classes.push(ClassPlan {
            name: c.name.clone(),
            weight: if own.is_some() { 0.0 } else { c.weight.unwrap_or(1.0) },
            own: own.as_ref().map(|p| Process::new(p, None)),
            mean_rate: own.as_ref().and_then(|p| p.mean_rate()),
            prompt,
            output,
            joint,
            slo: c.slo.clone().or_else(|| s.slo.clone()),
            priority: c.priority,
            prefix_group,
            prefix_tokens: c.prefix_tokens,
            prefill_only,
            token_limit: c.token_rate_limit.map(|r| (r, c.token_burst.unwrap_or(r))),
            spec_acceptance: c.spec_acceptance,
        });
    }
    let total_weight: f64 = classes.iter().map(|c| c.weight).sum();
    let common_used = total_weight > 0.0 && !matches!(kind, ArrivalKind::ClosedLoop | ArrivalKind::Trace);
    let common_cfg = w.process();
    let common = common_used.then(|| Process::new(&common_cfg, w.ramp_up.as_ref().zip(s.num_requests)));
    let common_rate = if common_used { common_cfg.mean_rate() } else { None };
    for c in &mut classes {
        if c.weight > 0.0 {
            c.mean_rate = common_rate.map(|r| r * c.weight / total_weight);
        }
    }
    let trace = match &w.trace {
        Some(t) if kind == ArrivalKind::Trace => Some(trace_plan(t, &mut ld, &mut classes, !w.classes.is_empty())?),
        _ => None,
    };
    let own_rates: f64 = classes.iter().filter(|c| c.own.is_some()).filter_map(|c| c.mean_rate).sum();
    let offered_rate = match kind {
        ArrivalKind::ClosedLoop | ArrivalKind::Offline => None,
        ArrivalKind::Trace => trace.as_ref().map(|t| t.mean_rate * t.sample + own_rates),
        _ => common_rate.map(|r| r + own_rates).or(Some(own_rates).filter(|&r| r > 0.0)),
    };
    let sessions = match &w.sessions {
        Some(se) => Some(SessionPlan {
            turns: ld.length(&se.turns, "workload.sessions.turns", false)?,
            think: TimeSampler::new(&se.think_time_s),
            new_tokens: match &se.new_tokens {
                Some(d) => Some(ld.length(d, "workload.sessions.new_tokens", false)?),
                None => None,
            },
        }),
        None => None,
    };
    Ok(WorkloadPlan {
        classes,
        declared_classes: !w.classes.is_empty() || trace.as_ref().is_some_and(|t| !t.class_map.is_empty()),
        common,
        closed_loop: w.closed_loop.as_ref().map(|c| (c.users, TimeSampler::new(&c.think_time_s))),
        sessions,
        trace,
        num_requests: s.num_requests,
        horizon: s.duration_s,
        rescale_to: (w.rescale_to_rate && common_used)
            .then(|| s.num_requests.unwrap_or(1) as f64 / w.rate.unwrap_or(1.0)),
        clip: w.on_too_long == TooLong::Clip,
        offline: kind == ArrivalKind::Offline,
        skipped_rows: ld.skipped,
        first_skipped: ld.first_skipped,
        offered_rate,
        process: process_name(s),
    })
}

fn trace_plan(
    t: &TraceReplay,
    ld: &mut Loader,
    classes: &mut Vec<ClassPlan>,
    declared: bool,
) -> Result<TracePlan, ConfigError> {
    let cols = (t.format == TraceFormat::Csv).then(|| Columns {
        time: t.time_column.clone(),
        time_unit: t.time_unit,
        prompt: t.prompt_column.clone().unwrap_or_default(),
        output: t.output_column.clone().unwrap_or_default(),
        class: t.class_column.clone(),
        session: t.session_column.clone(),
    });
    let tr =
        read_trace(ld.base, &t.file, t.format, cols.as_ref(), t.on_bad_row == OnBadRow::Skip, "workload.trace.file")?;
    ld.note(&tr, &t.file);
    let rows = &tr.rows;
    if let Some(r) = rows.iter().find(|r| r.prompt == 0) {
        return Err(ConfigError::new(format!("row at line {} of {} has a 0-token prompt", r.line, t.file))
            .key("workload.trace.file")
            .hint("a request needs at least one prompt token: fix or remove the row"));
    }
    if let Some(l) = tr.class_names.iter().find(|l| l.contains([',', '"', '\n', '\r'])) {
        return Err(ConfigError::new(format!("class label {l:?} in {} contains a comma, quote or line break", t.file))
            .key("workload.trace.class_column")
            .hint("use class labels made of letters, digits, '-' or '_'"));
    }
    let lo = rows.partition_point(|r| r.t < t.start_s);
    let hi = t.end_s.map_or(rows.len(), |e| rows.partition_point(|r| r.t < e));
    if lo >= hi {
        return Err(ConfigError::new(format!(
            "no row of {} falls in the window [{}, {}) s (the trace spans 0 to {} s)",
            t.file,
            t.start_s,
            t.end_s.map_or("end".into(), |e| e.to_string()),
            rows.last().map_or(0.0, |r| r.t)
        ))
        .key("workload.trace.start_s")
        .hint("pick start_s and end_s inside the trace"));
    }
    let n = hi - lo;
    let span = rows[hi - 1].t - rows[lo].t;
    let raw_rate = if span > 0.0 { (n - 1) as f64 / span } else { f64::INFINITY };
    let factor = match (t.speedup, t.target_rate) {
        (Some(k), _) => 1.0 / k,
        (None, Some(r)) if raw_rate.is_finite() => raw_rate / r,
        (None, Some(_)) => {
            return Err(ConfigError::new("target_rate needs a trace with at least two distinct arrival times")
                .key("workload.trace.target_rate")
                .hint("remove target_rate, or widen the window"));
        }
        _ => 1.0,
    };
    let period = if n > 1 { span * n as f64 / (n - 1) as f64 * factor } else { 0.0 };
    if t.repeat && period <= 0.0 {
        return Err(ConfigError::new(
            "a looped trace must span some time: every row of the window has the same timestamp",
        )
        .key("workload.trace.loop")
        .hint("remove loop = true, or widen the window"));
    }
    // Classes named in the trace map to declared classes by name; undeclared
    // ones become classes of their own.
    let mut class_map = Vec::new();
    for label in &tr.class_names {
        let idx = match classes.iter().position(|c| &c.name == label) {
            Some(i) => i,
            None if declared => {
                let known: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
                return Err(ConfigError::new(format!("the trace names class \"{label}\", which is not declared"))
                    .key("workload.classes")
                    .hint(format!(
                        "declare [[workload.classes]] name = \"{label}\" (declared: {})",
                        known.join(", ")
                    )));
            }
            None => {
                if classes.len() == 1 && classes[0].name == "default" && class_map.is_empty() {
                    classes[0].name = label.clone();
                    0
                } else {
                    let mut c = classes[0].clone();
                    c.name = label.clone();
                    classes.push(c);
                    classes.len() - 1
                }
            }
        };
        class_map.push(idx as u16);
    }
    Ok(TracePlan {
        trace: tr.clone(),
        file: t.file.clone(),
        lo,
        hi,
        t0: t.start_s,
        factor,
        sample: t.sample,
        repeat: t.repeat,
        period,
        class_map,
        mean_rate: raw_rate / factor,
    })
}
