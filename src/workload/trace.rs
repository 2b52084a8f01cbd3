//! Request traces: arrival times and token counts of real workloads.
//!
//! [`parse`] reads a trace that the caller has already loaded into memory and returns one
//! [`TraceRow`] per request, in file order, with times relative to the first kept row. Four
//! formats are understood (see [`TraceFormat`]):
//!
//! - **Azure** — the Azure LLM inference trace 2023 (`TIMESTAMP,ContextTokens,GeneratedTokens`,
//!   timestamps like `2023-11-16 18:17:03.9799600`);
//! - **Mooncake** — JSON lines `{"timestamp": ms, "input_length": n, "output_length": n,
//!   "hash_ids": [...]}`, where `hash_ids` name the 512-token prefix blocks of the prompt;
//! - **Csv** — any CSV with a header row, its columns named by a [`Columns`] mapping;
//! - **VllmJson** — the result file of `vllm bench serve --save-result --save-detailed`.
//!
//! Calendar timestamps are converted to integer nanoseconds before the first row's time is
//! subtracted, so relative times are exact to the nanosecond (`18:17:04.0319600` is exactly 0.052 s
//! after `18:17:03.9799600`) rather than rounded through epoch seconds held in doubles, which
//! resolve only about 0.24 µs. The readers work on bytes without per-row allocation and parse
//! millions of rows per second.
//!
//! Bad input never panics: every problem is a [`TraceError`] naming the line and the field, with
//! a hint on how to fix it. With `skip_bad`, bad data rows are counted and dropped instead.

use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

/// Trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Azure LLM inference trace 2023: CSV `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// Mooncake JSON lines: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// Generic CSV with a header row; columns named by [`Columns`].
    Csv,
    /// The detailed result JSON of `vllm bench serve` (`input_lens`, `output_lens`, `start_times`).
    VllmJson,
}

/// Unit of a generic CSV time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// Seconds (a non-negative decimal number).
    #[default]
    S,
    /// Milliseconds (a non-negative decimal number).
    Ms,
    /// Microseconds (a non-negative decimal number).
    Us,
    /// A UTC date and time, `YYYY-MM-DD HH:MM:SS[.fraction]` (or with `T` and a trailing `Z`).
    Datetime,
}

/// Column mapping for the generic CSV format (names of header columns).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Columns {
    /// Arrival time column; `None`: no timestamps (every row at t = 0, as for length tables).
    pub time: Option<String>,
    /// Unit of the time column.
    pub time_unit: TimeUnit,
    /// Prompt (input) token count column.
    pub prompt: String,
    /// Output (generated) token count column.
    pub output: String,
    /// Optional request class column (string labels).
    pub class: Option<String>,
    /// Optional session column (string ids; an empty value means the row has no session).
    pub session: Option<String>,
}

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRow {
    /// Arrival time, seconds since the first kept row's timestamp (the first row is at 0.0).
    pub t: f64,
    /// Prompt tokens.
    pub prompt: u32,
    /// Output tokens.
    pub output: u32,
    /// Index into [`Trace::class_names`], or `u32::MAX` when the trace has no class column.
    pub class: u32,
    /// Dense index of the session id (first seen = 0), or `u32::MAX` when there is none.
    pub session: u32,
    /// Start of this row's prefix-block ids in [`Trace::hash_ids`] (Mooncake only; 0 otherwise).
    pub hash_start: u32,
    /// Number of this row's prefix-block ids (Mooncake only; 0 otherwise).
    pub hash_len: u32,
    /// 1-based line number in the file (for messages).
    pub line: u32,
}

impl TraceRow {
    /// This row's prefix-block hash ids within `trace` (empty for formats without them).
    pub fn hashes<'a>(&self, trace: &'a Trace) -> &'a [u32] {
        let start = self.hash_start as usize;
        start.checked_add(self.hash_len as usize).and_then(|end| trace.hash_ids.get(start..end)).unwrap_or(&[])
    }
}

/// A parsed trace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// The kept requests, in file order (non-decreasing `t`).
    pub rows: Vec<TraceRow>,
    /// Class labels, in first-seen order; [`TraceRow::class`] indexes this.
    pub class_names: Vec<String>,
    /// Number of distinct session ids.
    pub num_sessions: u32,
    /// Prefix-block hash ids of all rows, back to back; see [`TraceRow::hash_start`].
    pub hash_ids: Vec<u32>,
    /// Rows skipped because they were bad (only with skip_bad = true).
    pub skipped: u64,
    /// The first skipped row's problem, as "line N, field F: message".
    pub first_skipped: Option<String>,
}

/// A bad row or header: where and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceError {
    /// 1-based line number in the file (0 when the problem is not in the file).
    pub line: u32,
    /// The column, key or array element at fault (empty when the problem is the whole file).
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl TraceError {
    fn new(line: u32, field: impl Into<String>, message: impl Into<String>, hint: impl Into<String>) -> Self {
        TraceError { line, field: field.into(), message: message.into(), hint: hint.into() }
    }

    /// "line N, field F: message", leaving out the parts that are not set.
    fn location_and_message(&self) -> String {
        let mut s = String::new();
        if self.line > 0 {
            s.push_str(&format!("line {}", self.line));
        }
        if !self.field.is_empty() {
            if !s.is_empty() {
                s.push_str(", ");
            }
            s.push_str(&format!("field {}", self.field));
        }
        if s.is_empty() { self.message.clone() } else { format!("{s}: {}", self.message) }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.location_and_message())?;
        if !self.hint.is_empty() {
            write!(f, " (hint: {})", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for TraceError {}

/// Parses a trace. With `skip_bad`, bad data rows are counted in `Trace::skipped` instead of failing
/// (a bad header, a missing mapped column, or an unreadable JSON document is always an error).
///
/// `columns` is required for [`TraceFormat::Csv`] and ignored for the other formats.
pub fn parse(text: &str, format: TraceFormat, columns: Option<&Columns>, skip_bad: bool) -> Result<Trace, TraceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match format {
        TraceFormat::Azure => {
            let cols = Columns {
                time: Some(AZURE_HEADER[0].to_string()),
                time_unit: TimeUnit::Datetime,
                prompt: AZURE_HEADER[1].to_string(),
                output: AZURE_HEADER[2].to_string(),
                class: None,
                session: None,
            };
            parse_csv(text, &cols, true, skip_bad)
        }
        TraceFormat::Csv => match columns {
            Some(cols) => parse_csv(text, cols, false, skip_bad),
            None => Err(TraceError::new(
                0,
                "columns",
                "the csv trace format needs a column mapping, and none was given",
                "name the header columns that hold the prompt and output token counts (and the time, \
                 class and session, if any)",
            )),
        },
        TraceFormat::Mooncake => parse_mooncake(text, skip_bad),
        TraceFormat::VllmJson => parse_vllm(text, skip_bad),
    }
}

// ---------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------

const AZURE_HEADER: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

const HINT_COUNT: &str = "token counts are non-negative integers (0 to 4294967295); fix the value, or set \
                          on_bad_row = \"skip\" to drop the row";
const HINT_DATETIME: &str = "timestamps are UTC dates and times like 2023-11-16 18:17:03.9799600 (YYYY-MM-DD \
                             HH:MM:SS with up to 9 fractional digits; a T separator and a trailing Z are \
                             accepted); fix the value, or set on_bad_row = \"skip\" to drop the row";
const HINT_BACKWARDS: &str = "sort the trace by time, or set on_bad_row = \"skip\"";
const HINT_MOONCAKE_LINE: &str = "each line must be one JSON object like {\"timestamp\": 0, \"input_length\": \
                                  6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2]}; fix the line, or set \
                                  on_bad_row = \"skip\" to drop it";
const HINT_HASH: &str = "hash_ids is a list of prefix-block ids, integers from 0 to 4294967295; fix the line, \
                         or set on_bad_row = \"skip\" to drop it";
const HINT_VLLM: &str = "the file should be the result JSON of `vllm bench serve --save-result --save-detailed`";

/// A value for a message: quoted, and cut short if long.
fn show(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}...")
    }
}

/// 1-based line number of the line at 0-based index `idx`.
fn line_no(idx: usize) -> u32 {
    u32::try_from(idx + 1).unwrap_or(u32::MAX)
}

/// Line number (1-based) of byte offset `pos` in `text`.
fn line_of_offset(text: &str, pos: usize) -> u32 {
    let pos = pos.min(text.len());
    let newlines = text.as_bytes()[..pos].iter().filter(|&&b| b == b'\n').count();
    line_no(newlines)
}

/// An estimate of how often `byte` occurs in `text`, from its first 64 KiB, to pre-size vectors.
/// At most `text.len() / min_len + 1`, where `min_len` is the fewest bytes an item takes, so an
/// unrepresentative sample cannot reserve far more than the text could hold.
fn estimate_count(text: &str, byte: u8, min_len: usize) -> usize {
    const SAMPLE: usize = 1 << 16;
    let b = text.as_bytes();
    let sample = &b[..b.len().min(SAMPLE)];
    if sample.is_empty() {
        return 0;
    }
    let n = sample.iter().filter(|&&c| c == byte).count() as u128;
    let est = usize::try_from(n * b.len() as u128 / sample.len() as u128).unwrap_or(usize::MAX);
    est.saturating_add(est / 16 + 1).min(b.len() / min_len.max(1) + 1)
}

/// A line without its trailing `\r`, or `None` when it is blank.
fn content(raw: &str) -> Option<&str> {
    let line = raw.strip_suffix('\r').unwrap_or(raw);
    if line.bytes().all(|b| b.is_ascii_whitespace()) { None } else { Some(line) }
}

/// Parses a token count: a non-negative integer up to `u32::MAX` (`12.0` is accepted).
fn parse_count(s: &str) -> Result<u32, String> {
    let t = s.trim_ascii();
    if t.is_empty() {
        return Err("missing value".to_string());
    }
    let b = t.as_bytes();
    let mut v: u64 = 0;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = v * 10 + u64::from(b[i] - b'0');
        if v > u64::from(u32::MAX) {
            return Err(format!("token count {} is larger than {}", show(t), u32::MAX));
        }
        i += 1;
    }
    if i > 0 && (i == b.len() || (b[i] == b'.' && b[i + 1..].iter().all(|&c| c == b'0'))) {
        return Ok(v as u32);
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() => {
            if x < 0.0 {
                Err(format!("negative token count {}", show(t)))
            } else if x.fract() != 0.0 {
                Err(format!("fractional token count {}", show(t)))
            } else if x > f64::from(u32::MAX) {
                Err(format!("token count {} is larger than {}", show(t), u32::MAX))
            } else {
                Ok(x as u32)
            }
        }
        _ => Err(format!("not a token count: {}", show(t))),
    }
}

/// Parses a non-negative decimal time in a unit of `10^-(9 - scale)` seconds (scale 9: seconds,
/// 6: ms, 3: µs) into integer nanoseconds. Digits below a nanosecond are dropped.
fn parse_decimal_ns(s: &str, scale: u32) -> Result<i128, String> {
    let t = s.trim_ascii();
    if t.is_empty() {
        return Err("missing value".to_string());
    }
    let b = t.as_bytes();
    let unit = 10i128.pow(scale);
    let mut i = 0;
    let mut int: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() && int < 1_000_000_000_000_000_000_000 {
        int = int * 10 + i128::from(b[i] - b'0');
        i += 1;
    }
    let int_digits = i;
    let mut ns = int * unit;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let mut place = unit;
        while i < b.len() && b[i].is_ascii_digit() {
            place /= 10;
            ns += i128::from(b[i] - b'0') * place;
            frac_digits += 1;
            i += 1;
        }
    }
    if i == b.len() && int_digits + frac_digits > 0 {
        return Ok(ns);
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() => {
            if x < 0.0 {
                Err(format!("negative timestamp {}", show(t)))
            } else {
                let v = (x * unit as f64).round();
                if v >= 1e30 { Err(format!("timestamp {} is too large", show(t))) } else { Ok(v as i128) }
            }
        }
        _ => Err(format!("cannot read timestamp {}", show(t))),
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Why a timestamp could not be read.
enum DtError {
    Shape,
    TooManyDigits,
    Month(u32),
    Day(u32, u32, u32),
    Time(u32, u32, u32),
}

/// Reads `YYYY-MM-DD HH:MM:SS[.f{0,9}][Z]` (or `T` instead of the space), UTC, into nanoseconds
/// since the Unix epoch.
fn datetime_ns(b: &[u8]) -> Result<i128, DtError> {
    let Some(h) = b.get(..19) else { return Err(DtError::Shape) };
    let d = |i: usize| u32::from(h[i].wrapping_sub(b'0'));
    let mut not_digit = false;
    for i in [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18] {
        not_digit |= d(i) > 9;
    }
    if not_digit || h[4] != b'-' || h[7] != b'-' || (h[10] != b' ' && h[10] != b'T') || h[13] != b':' || h[16] != b':' {
        return Err(DtError::Shape);
    }
    let year = d(0) * 1000 + d(1) * 100 + d(2) * 10 + d(3);
    let (month, day) = (d(5) * 10 + d(6), d(8) * 10 + d(9));
    let (hour, min, sec) = (d(11) * 10 + d(12), d(14) * 10 + d(15), d(17) * 10 + d(18));
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let mut n = 0;
        while let Some(&c) = b.get(i) {
            let x = c.wrapping_sub(b'0');
            if x > 9 {
                break;
            }
            if n == 9 {
                return Err(DtError::TooManyDigits);
            }
            nanos = nanos * 10 + u32::from(x);
            n += 1;
            i += 1;
        }
        nanos *= 10u32.pow(9 - n);
    }
    if b.get(i) == Some(&b'Z') {
        i += 1;
    }
    if i != b.len() {
        return Err(DtError::Shape);
    }
    if !(1..=12).contains(&month) {
        return Err(DtError::Month(month));
    }
    if day < 1 || i64::from(day) > days_in_month(i64::from(year), i64::from(month)) {
        return Err(DtError::Day(year, month, day));
    }
    if hour > 23 || min > 59 || sec > 59 {
        return Err(DtError::Time(hour, min, sec));
    }
    let days = days_from_civil(i64::from(year), i64::from(month), i64::from(day));
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec);
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

/// [`datetime_ns`] on a field (surrounding blanks allowed), with a message on failure.
fn parse_datetime_ns(s: &str) -> Result<i128, String> {
    let t = s.trim_ascii();
    if t.is_empty() {
        return Err("missing value".to_string());
    }
    datetime_ns(t.as_bytes()).map_err(|e| match e {
        DtError::Shape => format!("cannot read timestamp {}: expected YYYY-MM-DD HH:MM:SS[.fraction]", show(t)),
        DtError::TooManyDigits => format!("timestamp {} has more than 9 fractional digits", show(t)),
        DtError::Month(m) => format!("timestamp {}: month {m} does not exist", show(t)),
        DtError::Day(y, m, d) => format!("timestamp {}: day {d} does not exist in {y}-{m:02}", show(t)),
        DtError::Time(h, m, s) => format!("timestamp {}: time of day {h:02}:{m:02}:{s:02} does not exist", show(t)),
    })
}

/// Seconds from nanoseconds, exact to the nearest double.
fn ns_to_secs(ns: i128) -> f64 {
    match i64::try_from(ns) {
        Ok(v) => v as f64 / 1e9,
        Err(_) => ns as f64 / 1e9,
    }
}

/// Collects rows, enforces time order and handles bad rows.
struct Builder {
    trace: Trace,
    skip_bad: bool,
    /// Timestamp of the first kept row, ns.
    t0: Option<i128>,
    /// Timestamp and line of the previous kept row.
    prev: Option<(i128, u32)>,
}

impl Builder {
    fn new(skip_bad: bool, rows: usize) -> Self {
        Builder { trace: Trace { rows: Vec::with_capacity(rows), ..Trace::default() }, skip_bad, t0: None, prev: None }
    }

    /// A bad data row: counted (with `skip_bad`) or returned.
    fn bad(&mut self, e: TraceError) -> Result<(), TraceError> {
        if !self.skip_bad {
            return Err(e);
        }
        self.trace.skipped += 1;
        if self.trace.first_skipped.is_none() {
            self.trace.first_skipped = Some(e.location_and_message());
        }
        Ok(())
    }

    /// Checks that `ns` is not earlier than the previous kept row; records it as the latest kept
    /// time and returns the relative time in seconds. The caller must then push the row.
    fn order(&mut self, ns: i128, line: u32, field: &str) -> Result<f64, TraceError> {
        if let Some((p, pl)) = self.prev
            && ns < p
        {
            return Err(TraceError::new(
                line,
                field,
                format!("timestamp goes backwards (previous row at line {pl} has a later time)"),
                HINT_BACKWARDS,
            ));
        }
        self.prev = Some((ns, line));
        let t0 = *self.t0.get_or_insert(ns);
        Ok(ns_to_secs(ns - t0))
    }

    fn finish(self) -> Result<Trace, TraceError> {
        if !self.trace.rows.is_empty() {
            return Ok(self.trace);
        }
        if self.trace.skipped > 0 {
            let first = self.trace.first_skipped.as_deref().unwrap_or("");
            return Err(TraceError::new(
                1,
                "",
                format!("all {} data rows are bad and were skipped (the first: {first})", self.trace.skipped),
                "check that the trace format and column mapping match the file",
            ));
        }
        Err(TraceError::new(1, "", "the trace has no data rows", "give a trace with at least one request"))
    }
}

/// Dense ids of strings in first-seen order.
#[derive(Default)]
struct Interner {
    map: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, s: &str, names: Option<&mut Vec<String>>) -> u32 {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = u32::try_from(self.map.len()).unwrap_or(u32::MAX - 1);
        self.map.insert(s.to_string(), id);
        if let Some(names) = names {
            names.push(s.to_string());
        }
        id
    }
}

// ---------------------------------------------------------------------------------------------
// CSV (Azure and generic)
// ---------------------------------------------------------------------------------------------

/// A field of a CSV line: byte range, and whether it is quoted with `""` escapes inside.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

/// Splits a CSV line into fields. `Err(i)`: field `i` has a malformed quote.
fn split_csv(line: &str, out: &mut Vec<Span>) -> Result<(), usize> {
    out.clear();
    let b = line.as_bytes();
    let mut i = 0;
    loop {
        // Leading blanks before a quote are allowed.
        let mut q = i;
        while q < b.len() && (b[q] == b' ' || b[q] == b'\t') {
            q += 1;
        }
        if q < b.len() && b[q] == b'"' {
            let mut j = q + 1;
            let mut escaped = false;
            let end = loop {
                match b[j..].iter().position(|&c| c == b'"') {
                    None => return Err(out.len()),
                    Some(k) if b.get(j + k + 1) == Some(&b'"') => {
                        escaped = true;
                        j += k + 2;
                    }
                    Some(k) => break j + k,
                }
            };
            out.push(Span { start: q + 1, end, escaped });
            i = end + 1;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            if i == b.len() {
                return Ok(());
            }
            if b[i] != b',' {
                return Err(out.len() - 1);
            }
            i += 1;
        } else {
            match b[i..].iter().position(|&c| c == b',') {
                Some(k) => {
                    out.push(Span { start: i, end: i + k, escaped: false });
                    i += k + 1;
                }
                None => {
                    out.push(Span { start: i, end: b.len(), escaped: false });
                    return Ok(());
                }
            }
        }
    }
}

/// The text of a field (unescaped if needed).
fn field_text(line: &str, sp: Span) -> Cow<'_, str> {
    let s = line.get(sp.start..sp.end).unwrap_or("");
    if sp.escaped { Cow::Owned(s.replace("\"\"", "\"")) } else { Cow::Borrowed(s) }
}

/// Column indices of a generic CSV trace.
struct CsvPlan<'c> {
    time: Option<(usize, &'c str)>,
    unit: TimeUnit,
    prompt: (usize, &'c str),
    output: (usize, &'c str),
    class: Option<(usize, &'c str)>,
    session: Option<(usize, &'c str)>,
}

fn time_hint(unit: TimeUnit) -> String {
    let name = match unit {
        TimeUnit::Datetime => return HINT_DATETIME.to_string(),
        TimeUnit::S => "seconds",
        TimeUnit::Ms => "milliseconds",
        TimeUnit::Us => "microseconds",
    };
    format!(
        "the time column holds non-negative numbers of {name} (check time_unit); fix the value, or set \
         on_bad_row = \"skip\" to drop the row"
    )
}

fn parse_time(s: &str, unit: TimeUnit) -> Result<i128, String> {
    match unit {
        TimeUnit::Datetime => parse_datetime_ns(s),
        TimeUnit::S => parse_decimal_ns(s, 9),
        TimeUnit::Ms => parse_decimal_ns(s, 6),
        TimeUnit::Us => parse_decimal_ns(s, 3),
    }
}

/// Index of the header column `name`, or an error listing the header's columns.
fn column<'c>(names: &[String], header_line: u32, name: &'c str) -> Result<(usize, &'c str), TraceError> {
    match names.iter().position(|n| n == name) {
        Some(i) => Ok((i, name)),
        None => Err(TraceError::new(
            header_line,
            name,
            format!("no column named {} in the header", show(name)),
            format!("the header's columns are: {}; map the field to one of them", names.join(", ")),
        )),
    }
}

fn parse_csv(text: &str, cols: &Columns, azure: bool, skip_bad: bool) -> Result<Trace, TraceError> {
    let mut lines = text.split('\n').enumerate();
    let mut spans: Vec<Span> = Vec::with_capacity(8);

    // Header: the first non-blank line.
    let (header_line, header) = loop {
        match lines.next() {
            Some((idx, raw)) => {
                if let Some(l) = content(raw) {
                    break (line_no(idx), l);
                }
            }
            None => {
                return Err(TraceError::new(
                    1,
                    "",
                    "the trace is empty (no header and no data rows)",
                    "give a CSV file with a header row and at least one request",
                ));
            }
        }
    };
    if let Err(i) = split_csv(header, &mut spans) {
        return Err(TraceError::new(
            header_line,
            "header",
            format!("column {} of the header has a malformed quote", i + 1),
            "quote a header name as \"name\", with \"\" for a quote inside it",
        ));
    }
    let names: Vec<String> = spans.iter().map(|&sp| field_text(header, sp).trim_ascii().to_string()).collect();
    let header_shown = names.join(",");

    if azure && (names.len() < 3 || names[..3] != AZURE_HEADER) {
        return Err(TraceError::new(
            header_line,
            "header",
            format!("expected the Azure trace header \"{}\", found {}", AZURE_HEADER.join(","), show(&header_shown)),
            "an Azure LLM inference trace starts with TIMESTAMP,ContextTokens,GeneratedTokens; for other CSV \
             layouts use format = \"csv\" with a column mapping",
        ));
    }
    let with = |name| column(&names, header_line, name);
    let plan = CsvPlan {
        time: cols.time.as_deref().map(with).transpose()?,
        unit: cols.time_unit,
        prompt: with(&cols.prompt)?,
        output: with(&cols.output)?,
        class: cols.class.as_deref().map(with).transpose()?,
        session: cols.session.as_deref().map(with).transpose()?,
    };

    let mut b = Builder::new(skip_bad, estimate_count(text, b'\n', 8));
    let mut classes = Interner::default();
    let mut sessions = Interner::default();
    let t_hint = time_hint(plan.unit);
    let row_hint = format!(
        "every row needs a value for each mapped column, in the header's order ({}); fix the row, or set \
         on_bad_row = \"skip\" to drop it",
        show(&header_shown)
    );

    // The Azure layout (datetime, prompt, output first; nothing else mapped) has a fast path.
    let fast = plan.unit == TimeUnit::Datetime
        && plan.time.is_some_and(|c| c.0 == 0)
        && plan.prompt.0 == 1
        && plan.output.0 == 2
        && plan.class.is_none()
        && plan.session.is_none();
    for (idx, raw) in lines {
        let Some(line) = content(raw) else { continue };
        let ln = line_no(idx);
        if fast && let Some((ns, prompt, output)) = azure_fast(line) {
            match b.order(ns, ln, plan.time.map_or("", |c| c.1)) {
                Ok(t) => b.trace.rows.push(TraceRow {
                    t,
                    prompt,
                    output,
                    class: u32::MAX,
                    session: u32::MAX,
                    hash_start: 0,
                    hash_len: 0,
                    line: ln,
                }),
                Err(e) => b.bad(e)?,
            }
            continue;
        }
        let res = csv_row(line, ln, &plan, &mut spans, &mut b, &t_hint, &row_hint, &names, &mut classes, &mut sessions);
        if let Err(e) = res {
            b.bad(e)?;
        }
    }
    b.trace.num_sessions = u32::try_from(sessions.map.len()).unwrap_or(u32::MAX);
    b.finish()
}

/// Digits of a count at `b[i..]` (at most 10, value at most `u32::MAX`): the value and the
/// position after the digits.
#[inline(always)]
fn count_fast(b: &[u8], i: usize) -> Option<(u32, usize)> {
    // Up to 7 digits followed by a non-digit, 8 bytes at a time (SWAR).
    if let Some(chunk) = b.get(i..i + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let x = u64::from_le_bytes(chunk) ^ 0x3030_3030_3030_3030;
        // High bit of each byte set where the byte is not a digit.
        let not_digit = (((x & LOW7) + 0x7676_7676_7676_7676) | x) & HIGH;
        if not_digit != 0 {
            let n = (not_digit.trailing_zeros() / 8) as usize;
            if n == 0 {
                return None;
            }
            // The n digit values, left-padded with zero digits to 8, most significant first.
            let v = x << (8 * (8 - n));
            let v = v.wrapping_mul(10).wrapping_add(v >> 8);
            const MASK: u64 = 0x0000_00ff_0000_00ff;
            let v = ((v & MASK).wrapping_mul(100 + (1_000_000 << 32)))
                .wrapping_add(((v >> 16) & MASK).wrapping_mul(1 + (10_000 << 32)))
                >> 32;
            return Some((v as u32, i + n));
        }
    }
    let rest = b.get(i..)?;
    let mut v: u64 = 0;
    let mut n = 0;
    for &c in rest.iter().take(10) {
        let x = c.wrapping_sub(b'0');
        if x > 9 {
            break;
        }
        v = v * 10 + u64::from(x);
        n += 1;
    }
    if n == 0 { None } else { Some((u32::try_from(v).ok()?, i + n)) }
}

/// Fast path for a row `datetime,count,count[,...]`; `None` when anything is unusual (the general
/// path then reads the row and explains any problem).
fn azure_fast(line: &str) -> Option<(i128, u32, u32)> {
    let b = line.as_bytes();
    let comma = b.iter().position(|&c| c == b',')?;
    let ns = datetime_ns(&b[..comma]).ok()?;
    let (prompt, i) = count_fast(b, comma + 1)?;
    if b.get(i) != Some(&b',') {
        return None;
    }
    let (output, j) = count_fast(b, i + 1)?;
    match b.get(j) {
        None | Some(b',') => Some((ns, prompt, output)),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn csv_row(
    line: &str,
    ln: u32,
    plan: &CsvPlan<'_>,
    spans: &mut Vec<Span>,
    b: &mut Builder,
    t_hint: &str,
    row_hint: &str,
    names: &[String],
    classes: &mut Interner,
    sessions: &mut Interner,
) -> Result<(), TraceError> {
    if let Err(i) = split_csv(line, spans) {
        let field = names.get(i).cloned().unwrap_or_else(|| format!("column {}", i + 1));
        return Err(TraceError::new(
            ln,
            field,
            "malformed quoted value (a quote must close before the next comma)",
            "quote a value as \"text\", with \"\" for a quote inside it; fix the row, or set on_bad_row = \"skip\" \
             to drop it",
        ));
    }
    let n = spans.len();
    let get = |(i, name): (usize, &str)| -> Result<Cow<'_, str>, TraceError> {
        match spans.get(i) {
            Some(&sp) => Ok(field_text(line, sp)),
            None => Err(TraceError::new(
                ln,
                name,
                format!("missing value (the row has {n} fields, the header has {})", names.len()),
                row_hint,
            )),
        }
    };
    let time = match plan.time {
        Some(c) => {
            let s = get(c)?;
            let ns = parse_time(&s, plan.unit).map_err(|m| TraceError::new(ln, c.1, m, t_hint))?;
            Some((ns, c.1))
        }
        None => None,
    };
    let prompt = parse_count(&get(plan.prompt)?).map_err(|m| TraceError::new(ln, plan.prompt.1, m, HINT_COUNT))?;
    let output = parse_count(&get(plan.output)?).map_err(|m| TraceError::new(ln, plan.output.1, m, HINT_COUNT))?;
    let class = match plan.class {
        Some(c) => {
            let s = get(c)?;
            if s.trim_ascii().is_empty() {
                return Err(TraceError::new(
                    ln,
                    c.1,
                    "missing value",
                    "every row needs a class label; fix the row, or set on_bad_row = \"skip\" to drop it",
                ));
            }
            Some(s)
        }
        None => None,
    };
    let session = match plan.session {
        Some(c) => Some(get(c)?),
        None => None,
    };
    let t = match time {
        Some((ns, field)) => b.order(ns, ln, field)?,
        None => 0.0,
    };
    let class = class.map_or(u32::MAX, |s| classes.id(s.trim_ascii(), Some(&mut b.trace.class_names)));
    let session = session.map_or(u32::MAX, |s| {
        let s = s.trim_ascii();
        if s.is_empty() { u32::MAX } else { sessions.id(s, None) }
    });
    b.trace.rows.push(TraceRow { t, prompt, output, class, session, hash_start: 0, hash_len: 0, line: ln });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Mooncake JSON lines
// ---------------------------------------------------------------------------------------------

/// The number fields of one Mooncake line, as text.
#[derive(Default)]
struct MoonFields<'a> {
    timestamp: Option<Cow<'a, str>>,
    input: Option<Cow<'a, str>>,
    output: Option<Cow<'a, str>>,
}

// The scanners and the row check are kept out of line: inlined into the loop, they made it
// markedly slower (register pressure).

/// Fastest path: a line laid out exactly as the Mooncake traces are, `{"timestamp": N,
/// "input_length": N, "output_length": N, "hash_ids": [N, N]}` (integers, one space after each
/// colon and comma). `None` when the line differs in any way; [`scan_mooncake`] then reads it.
#[inline(never)]
fn scan_mooncake_exact<'a>(text: &'a str, pos: usize, hashes: &mut Vec<u32>) -> Option<(MoonFields<'a>, usize)> {
    let b = text.as_bytes();
    let mut i = pos;
    let lit = |i: &mut usize, s: &[u8]| -> Option<()> {
        if b.get(*i..)?.starts_with(s) {
            *i += s.len();
            Some(())
        } else {
            None
        }
    };
    let digits = |i: &mut usize| -> Option<Cow<'a, str>> {
        let s = *i;
        let n = b.get(s..)?.iter().take_while(|c| c.is_ascii_digit()).count();
        *i += n;
        if n == 0 { None } else { text.get(s..*i).map(Cow::Borrowed) }
    };
    lit(&mut i, b"{\"timestamp\": ")?;
    let timestamp = digits(&mut i)?;
    lit(&mut i, b", \"input_length\": ")?;
    let input = digits(&mut i)?;
    lit(&mut i, b", \"output_length\": ")?;
    let output = digits(&mut i)?;
    lit(&mut i, b", \"hash_ids\": [")?;
    if b.get(i) == Some(&b']') {
        i += 1;
    } else {
        loop {
            let (v, next) = count_fast(b, i)?;
            hashes.push(v);
            i = next;
            match b.get(i..i + 2)? {
                b", " => i += 2,
                [b']', _] => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    lit(&mut i, b"}")?;
    if b.get(i) == Some(&b'\r') {
        i += 1;
    }
    let next = match b.get(i) {
        None => b.len(),
        Some(b'\n') => i + 1,
        _ => return None,
    };
    Some((MoonFields { timestamp: Some(timestamp), input: Some(input), output: Some(output) }, next))
}

/// Fast scanner for a flat Mooncake object on the line that starts at `text[pos..]`. Pushes the
/// hash ids to `hashes`; returns the fields and the position after the line's `\n`. `None`: the
/// line is not a simple flat object the scanner understands (the caller falls back to serde_json).
#[inline(never)]
fn scan_mooncake<'a>(text: &'a str, pos: usize, hashes: &mut Vec<u32>) -> Option<(MoonFields<'a>, usize)> {
    let b = text.as_bytes();
    // Blanks within a line (a newline ends the line, so it is not skipped).
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\r') {
            *i += 1;
        }
    };
    let mut f = MoonFields::default();
    let mut seen_hashes = false;
    let mut i = pos;
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    ws(&mut i);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let ks = i + 1;
            let ke = ks + b.get(ks..)?.iter().position(|&c| c == b'"' || c == b'\\' || c == b'\n')?;
            if b[ke] != b'"' {
                return None;
            }
            let key = &b[ks..ke];
            i = ke + 1;
            ws(&mut i);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
            ws(&mut i);
            let number = |i: &mut usize| -> Option<Cow<'a, str>> {
                let s = *i;
                while *i < b.len() && matches!(b[*i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    *i += 1;
                }
                if *i == s { None } else { text.get(s..*i).map(Cow::Borrowed) }
            };
            match key {
                b"timestamp" => f.timestamp = Some(number(&mut i)?),
                b"input_length" => f.input = Some(number(&mut i)?),
                b"output_length" => f.output = Some(number(&mut i)?),
                b"hash_ids" => {
                    if seen_hashes || b.get(i) != Some(&b'[') {
                        return None;
                    }
                    seen_hashes = true;
                    i += 1;
                    ws(&mut i);
                    if b.get(i) == Some(&b']') {
                        i += 1;
                    } else {
                        loop {
                            let (v, next) = count_fast(b, i)?;
                            hashes.push(v);
                            i = next;
                            match b.get(i) {
                                Some(b',') => {
                                    i += 1;
                                    if b.get(i) == Some(&b' ') {
                                        i += 1;
                                    }
                                }
                                Some(b']') => {
                                    i += 1;
                                    break;
                                }
                                _ => {
                                    ws(&mut i);
                                    match b.get(i) {
                                        Some(b',') => i += 1,
                                        Some(b']') => {
                                            i += 1;
                                            break;
                                        }
                                        _ => return None,
                                    }
                                }
                            }
                            ws(&mut i);
                        }
                    }
                }
                _ => match b.get(i)? {
                    b'"' => {
                        i += 1;
                        loop {
                            match b.get(i)? {
                                b'\\' => i += 2,
                                b'"' => break,
                                b'\n' => return None,
                                _ => i += 1,
                            }
                        }
                        i += 1;
                    }
                    b't' | b'f' | b'n' => {
                        while i < b.len() && b[i].is_ascii_alphabetic() {
                            i += 1;
                        }
                    }
                    _ => {
                        number(&mut i)?;
                    }
                },
            }
            ws(&mut i);
            match b.get(i) {
                Some(b',') => {
                    i += 1;
                    ws(&mut i);
                }
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    ws(&mut i);
    match b.get(i) {
        None => Some((f, b.len())),
        Some(b'\n') => Some((f, i + 1)),
        _ => None,
    }
}

/// Slow path: reads a Mooncake line with serde_json, for lines the scanner does not handle,
/// and explains what is wrong with a bad one.
fn mooncake_slow<'a>(line: &str, ln: u32, hashes: &mut Vec<u32>) -> Result<MoonFields<'a>, TraceError> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| TraceError::new(ln, "json", format!("not a valid JSON object: {e}"), HINT_MOONCAKE_LINE))?;
    let Value::Object(obj) = v else {
        return Err(TraceError::new(ln, "json", "the line is JSON but not an object", HINT_MOONCAKE_LINE));
    };
    let number = |key: &str| -> Result<Option<Cow<'a, str>>, TraceError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(Some(Cow::Owned(n.to_string()))),
            Some(other) => Err(TraceError::new(
                ln,
                key,
                format!("expected a number, found {}", show(&other.to_string())),
                HINT_MOONCAKE_LINE,
            )),
        }
    };
    let f = MoonFields {
        timestamp: number("timestamp")?,
        input: number("input_length")?,
        output: number("output_length")?,
    };
    match obj.get("hash_ids") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ids)) => {
            for (k, id) in ids.iter().enumerate() {
                match id.as_u64().and_then(|x| u32::try_from(x).ok()) {
                    Some(x) => hashes.push(x),
                    None => {
                        return Err(TraceError::new(
                            ln,
                            "hash_ids",
                            format!("element {k} ({}) is not an integer from 0 to {}", show(&id.to_string()), u32::MAX),
                            HINT_HASH,
                        ));
                    }
                }
            }
        }
        Some(other) => {
            return Err(TraceError::new(
                ln,
                "hash_ids",
                format!("expected a list of integers, found {}", show(&other.to_string())),
                HINT_HASH,
            ));
        }
    }
    Ok(f)
}

fn parse_mooncake(text: &str, skip_bad: bool) -> Result<Trace, TraceError> {
    let mut b = Builder::new(skip_bad, estimate_count(text, b'\n', 48));
    b.trace.hash_ids.reserve(estimate_count(text, b',', 3));
    let mut pos = 0;
    let mut idx = 0;
    while pos < text.len() {
        let ln = line_no(idx);
        idx += 1;
        let start = b.trace.hash_ids.len();
        let mut fast = scan_mooncake_exact(text, pos, &mut b.trace.hash_ids);
        if fast.is_none() {
            b.trace.hash_ids.truncate(start);
            fast = scan_mooncake(text, pos, &mut b.trace.hash_ids);
        }
        let res = match fast {
            Some((f, next)) => {
                pos = next;
                mooncake_row(f, ln, start, &mut b)
            }
            None => {
                b.trace.hash_ids.truncate(start);
                let end = text.get(pos..).and_then(|r| r.find('\n')).map_or(text.len(), |k| pos + k);
                let raw = text.get(pos..end).unwrap_or("");
                pos = end + 1;
                let Some(line) = content(raw) else { continue };
                mooncake_slow(line, ln, &mut b.trace.hash_ids).and_then(|f| mooncake_row(f, ln, start, &mut b))
            }
        };
        if let Err(e) = res {
            b.trace.hash_ids.truncate(start);
            b.bad(e)?;
        }
    }
    b.finish()
}

/// Checks one Mooncake row (its hash ids are `hash_ids[start..]`) and keeps it.
#[inline(never)]
fn mooncake_row(f: MoonFields<'_>, ln: u32, start: usize, b: &mut Builder) -> Result<(), TraceError> {
    let missing = |key: &str| TraceError::new(ln, key, "missing value", HINT_MOONCAKE_LINE);
    let ts = f.timestamp.ok_or_else(|| missing("timestamp"))?;
    let ns = parse_decimal_ns(&ts, 6).map_err(|m| {
        TraceError::new(
            ln,
            "timestamp",
            m,
            "timestamp is the arrival in milliseconds since the start of the trace, a non-negative number; fix \
             the value, or set on_bad_row = \"skip\" to drop the line",
        )
    })?;
    let input = f.input.ok_or_else(|| missing("input_length"))?;
    let prompt = parse_count(&input).map_err(|m| TraceError::new(ln, "input_length", m, HINT_COUNT))?;
    let output = f.output.ok_or_else(|| missing("output_length"))?;
    let output = parse_count(&output).map_err(|m| TraceError::new(ln, "output_length", m, HINT_COUNT))?;
    let end = b.trace.hash_ids.len();
    let (Ok(hash_start), Ok(hash_end)) = (u32::try_from(start), u32::try_from(end)) else {
        return Err(TraceError::new(
            ln,
            "hash_ids",
            format!("the trace has more than {} hash ids in all", u32::MAX),
            "split the trace into smaller files",
        ));
    };
    let t = b.order(ns, ln, "timestamp")?;
    b.trace.rows.push(TraceRow {
        t,
        prompt,
        output,
        class: u32::MAX,
        session: u32::MAX,
        hash_start,
        hash_len: hash_end - hash_start,
        line: ln,
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// vLLM benchmark result JSON
// ---------------------------------------------------------------------------------------------

#[derive(serde::Deserialize)]
struct VllmDoc {
    input_lens: Option<Vec<Value>>,
    output_lens: Option<Vec<Value>>,
    start_times: Option<Vec<Value>>,
}

/// Line of the first `"key":` in a JSON document (1 when not found).
fn key_line(text: &str, key: &str) -> u32 {
    let pat = format!("\"{key}\"");
    let mut from = 0;
    while let Some(k) = text.get(from..).and_then(|s| s.find(&pat)) {
        let pos = from + k;
        let after = text[pos + pat.len()..].trim_start();
        if after.starts_with(':') {
            return line_of_offset(text, pos);
        }
        from = pos + pat.len();
    }
    1
}

fn parse_vllm(text: &str, skip_bad: bool) -> Result<Trace, TraceError> {
    let doc: VllmDoc = serde_json::from_str(text).map_err(|e| {
        TraceError::new(
            u32::try_from(e.line()).unwrap_or(u32::MAX),
            "json",
            format!("cannot read the vLLM result JSON: {e}"),
            HINT_VLLM,
        )
    })?;
    let need = |arr: Option<Vec<Value>>, key: &str| {
        arr.ok_or_else(|| {
            TraceError::new(
                1,
                key,
                format!("the result has no {key} array"),
                format!("{HINT_VLLM}; the per-request arrays are only written with --save-detailed"),
            )
        })
    };
    let input = need(doc.input_lens, "input_lens")?;
    let output = need(doc.output_lens, "output_lens")?;
    let (in_line, out_line) = (key_line(text, "input_lens"), key_line(text, "output_lens"));
    if output.len() != input.len() {
        return Err(TraceError::new(
            out_line,
            "output_lens",
            format!("output_lens has {} elements but input_lens has {}", output.len(), input.len()),
            "the per-request arrays of one result have equal lengths; use the file as vLLM wrote it",
        ));
    }
    let st_line = key_line(text, "start_times");
    if let Some(st) = &doc.start_times
        && st.len() != input.len()
    {
        return Err(TraceError::new(
            st_line,
            "start_times",
            format!("start_times has {} elements but input_lens has {}", st.len(), input.len()),
            "the per-request arrays of one result have equal lengths; use the file as vLLM wrote it",
        ));
    }
    let mut b = Builder::new(skip_bad, input.len());
    let mut t0: Option<f64> = None;
    let mut prev: Option<(f64, usize)> = None;
    let count = |v: &Value, line: u32, field: String| -> Result<u32, TraceError> {
        match v {
            Value::Number(n) => parse_count(&n.to_string()).map_err(|m| TraceError::new(line, field, m, HINT_COUNT)),
            other => Err(TraceError::new(
                line,
                field,
                format!("expected a token count, found {}", show(&other.to_string())),
                HINT_COUNT,
            )),
        }
    };
    for k in 0..input.len() {
        let row = (|| -> Result<TraceRow, TraceError> {
            let prompt = count(&input[k], in_line, format!("input_lens[{k}]"))?;
            let out = count(&output[k], out_line, format!("output_lens[{k}]"))?;
            let mut t = 0.0;
            if let Some(st) = &doc.start_times {
                let field = format!("start_times[{k}]");
                let hint = "start_times are request start times in seconds; fix the value, or set on_bad_row = \
                            \"skip\" to drop the request";
                let x = match st[k].as_f64() {
                    Some(x) if x >= 0.0 => x,
                    Some(x) => return Err(TraceError::new(st_line, field, format!("negative timestamp {x}"), hint)),
                    None => {
                        return Err(TraceError::new(
                            st_line,
                            field,
                            format!("expected a time in seconds, found {}", show(&st[k].to_string())),
                            hint,
                        ));
                    }
                };
                if let Some((p, pk)) = prev
                    && x < p
                {
                    return Err(TraceError::new(
                        st_line,
                        field,
                        format!("timestamp goes backwards (previous row, start_times[{pk}], has a later time)"),
                        HINT_BACKWARDS,
                    ));
                }
                prev = Some((x, k));
                t = x - *t0.get_or_insert(x);
            }
            Ok(TraceRow {
                t,
                prompt,
                output: out,
                class: u32::MAX,
                session: u32::MAX,
                hash_start: 0,
                hash_len: 0,
                line: in_line,
            })
        })();
        match row {
            Ok(r) => b.trace.rows.push(r),
            Err(e) => b.bad(e)?,
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn azure(text: &str) -> Result<Trace, TraceError> {
        parse(text, TraceFormat::Azure, None, false)
    }

    fn csv(text: &str, cols: &Columns, skip: bool) -> Result<Trace, TraceError> {
        parse(text, TraceFormat::Csv, Some(cols), skip)
    }

    fn cols(time: Option<&str>, unit: TimeUnit) -> Columns {
        Columns {
            time: time.map(str::to_string),
            time_unit: unit,
            prompt: "p".to_string(),
            output: "o".to_string(),
            class: None,
            session: None,
        }
    }

    fn err_of(r: Result<Trace, TraceError>) -> TraceError {
        match r {
            Ok(t) => panic!("expected an error, got {} rows", t.rows.len()),
            Err(e) => e,
        }
    }

    #[test]
    fn azure_happy_path_exact_times() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:17:03.9799600,4808,10\n\
                    2023-11-16 18:17:04.0319600,3180,8\n\
                    2023-11-16 18:17:04.0319600,0,0\n\
                    2023-11-16 19:00:00,1,2";
        let t = azure(text).unwrap();
        assert_eq!(t.rows.len(), 4);
        let r = &t.rows;
        assert_eq!(r[0].t, 0.0);
        assert_eq!(r[1].t, 0.052);
        assert_eq!(r[2].t, 0.052);
        assert_eq!(r[3].t, 42.0 * 60.0 + 56.02004);
        assert_eq!((r[0].prompt, r[0].output, r[0].line), (4808, 10, 2));
        assert_eq!((r[1].prompt, r[1].output, r[1].line), (3180, 8, 3));
        assert_eq!((r[2].prompt, r[2].output), (0, 0));
        assert_eq!((r[0].class, r[0].session, r[0].hash_start, r[0].hash_len), (u32::MAX, u32::MAX, 0, 0));
        assert!(t.class_names.is_empty());
        assert_eq!((t.num_sessions, t.skipped, t.first_skipped.clone()), (0, 0, None));
        assert!(r[0].hashes(&t).is_empty());
    }

    #[test]
    fn azure_crlf_bom_extra_columns_blank_lines() {
        let text = "\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens,Extra\r\n\
                    2023-11-16T18:17:03.5Z,10,1,x\r\n\
                    \r\n\
                    2023-11-16 18:17:04,20,2,y\r\n";
        let t = azure(text).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[1].t, 0.5);
        assert_eq!((t.rows[1].prompt, t.rows[1].output, t.rows[1].line), (20, 2, 4));
    }

    #[test]
    fn azure_bad_header() {
        let e = err_of(azure("time,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n"));
        assert_eq!((e.line, e.field.as_str()), (1, "header"));
        assert!(e.message.contains("TIMESTAMP,ContextTokens,GeneratedTokens"), "{e}");
        assert!(e.hint.contains("format = \"csv\""), "{e}");
        // Not skippable.
        assert!(parse("a,b\n1,2\n", TraceFormat::Azure, None, true).is_err());
    }

    #[test]
    fn datetime_conversion() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert_eq!(days_from_civil(1, 1, 1), -719_162);
        assert_eq!(days_from_civil(9999, 12, 31), 2_932_896);
        assert_eq!(parse_datetime_ns("1970-01-01 00:00:00"), Ok(0));
        assert_eq!(parse_datetime_ns("2023-11-16 18:17:03.9799600"), Ok(1_700_158_623_979_960_000));
        assert_eq!(parse_datetime_ns("2023-11-16T18:17:03.979960000Z"), Ok(1_700_158_623_979_960_000));
        assert_eq!(parse_datetime_ns("2023-11-16 18:17:03."), Ok(1_700_158_623_000_000_000));
        let d = |a: &str, b: &str| {
            let t = azure(&format!("TIMESTAMP,ContextTokens,GeneratedTokens\n{a},1,1\n{b},1,1\n")).unwrap();
            t.rows[1].t
        };
        // Year, month and day boundaries, leap days.
        assert_eq!(d("2023-12-31 23:59:59.5", "2024-01-01 00:00:00.25"), 0.75);
        assert_eq!(d("2023-01-31 23:59:59", "2023-02-01 00:00:00"), 1.0);
        assert_eq!(d("2023-02-28 23:59:59", "2023-03-01 00:00:00"), 1.0);
        assert_eq!(d("2024-02-28 23:59:59", "2024-02-29 00:00:01"), 2.0);
        assert_eq!(d("2024-02-29 23:00:00", "2024-03-01 01:00:00"), 7200.0);
        assert_eq!(d("2000-02-28 12:00:00", "2000-03-01 12:00:00"), 2.0 * 86400.0);
        assert_eq!(d("1900-02-28 12:00:00", "1900-03-01 12:00:00"), 86400.0);
        assert_eq!(d("2023-06-30 23:59:59.999999999", "2023-07-01 00:00:00.000000001"), 2e-9);
        // Invalid dates and shapes.
        for bad in [
            "2023-02-29 00:00:00",
            "2023-13-01 00:00:00",
            "2023-04-31 00:00:00",
            "2023-11-16 24:00:00",
            "2023-11-16 18:60:00",
            "2023-11-16 18:17:03.1234567890",
            "2023-11-16",
            "2023/11/16 18:17:03",
            "2023-11-16 18:17:03+01:00",
            "16.11.2023 18:17",
            "2023-11-16 18:17:03 x",
        ] {
            assert!(parse_datetime_ns(bad).is_err(), "{bad}");
        }
        assert!(parse_datetime_ns("2023-02-29 00:00:00").unwrap_err().contains("day 29"));
    }

    #[test]
    fn mooncake_happy_path() {
        let text = "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2]}\n\
                    \n\
                    {\"hash_ids\":[0,3],\"output_length\":7,\"extra\":\"a\\\"b\",\"flag\":true,\"x\":null,\
                    \"input_length\":900,\"timestamp\":3000}\r\n\
                    {\"timestamp\": 3000.5, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": []}\n\
                    {\"timestamp\": 4000, \"input_length\": 5, \"output_length\": 6}\n";
        let t = parse(text, TraceFormat::Mooncake, None, false).unwrap();
        assert_eq!(t.rows.len(), 4);
        let r = &t.rows;
        assert_eq!((r[0].t, r[0].prompt, r[0].output, r[0].line), (0.0, 6758, 500, 1));
        assert_eq!((r[1].t, r[1].prompt, r[1].output, r[1].line), (3.0, 900, 7, 3));
        assert_eq!((r[2].t, r[2].prompt, r[2].output), (3.0005, 1, 2));
        assert_eq!((r[3].t, r[3].hash_len), (4.0, 0));
        assert_eq!(r[0].hashes(&t), &[0, 1, 2]);
        assert_eq!(r[1].hashes(&t), &[0, 3]);
        assert!(r[2].hashes(&t).is_empty());
        assert_eq!(t.hash_ids, vec![0, 1, 2, 0, 3]);

        // The exact layout with CRLF, one that falls off the exact path after its hash ids (the
        // ids must not be pushed twice), and a last line without a newline.
        let text = "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [9]}\r\n\
                    {\"timestamp\": 6, \"input_length\": 3, \"output_length\": 4, \"hash_ids\": [10, 11], \"x\": 1}\n\
                    {\"timestamp\": 7, \"input_length\": 5, \"output_length\": 6, \"hash_ids\": [4294967295]}";
        let t = parse(text, TraceFormat::Mooncake, None, false).unwrap();
        let got: Vec<_> = t.rows.iter().map(|r| (r.t, r.prompt, r.output, r.line, r.hash_start, r.hash_len)).collect();
        assert_eq!(got, vec![(0.0, 1, 2, 1, 0, 1), (0.001, 3, 4, 2, 1, 2), (0.002, 5, 6, 3, 3, 1)]);
        assert_eq!(t.hash_ids, vec![9, 10, 11, u32::MAX]);
        assert_eq!((r[0].class, r[0].session), (u32::MAX, u32::MAX));
    }

    #[test]
    fn mooncake_fallback_and_errors() {
        // Nested unknown values and escaped keys go through serde_json.
        let text = "{\"meta\": {\"a\": [1, 2]}, \"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \
                    \"hash_ids\": [7]}\n\
                    {\"time\\u0073tamp\": 2, \"input_length\": 4, \"output_length\": 5, \"hash_ids\": [8, 9]}\n";
        let t = parse(text, TraceFormat::Mooncake, None, false).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!((t.rows[1].t, t.rows[1].prompt), (0.001, 4));
        assert_eq!(t.rows[0].hashes(&t), &[7]);
        assert_eq!(t.rows[1].hashes(&t), &[8, 9]);

        let good = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n";
        let case = |line: &str| err_of(parse(&format!("{good}{line}\n"), TraceFormat::Mooncake, None, false));
        let e = case("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [4294967296]}");
        assert_eq!((e.line, e.field.as_str()), (2, "hash_ids"));
        let e = case("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-1]}");
        assert_eq!((e.line, e.field.as_str()), (2, "hash_ids"));
        let e = case("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": 5}");
        assert_eq!((e.line, e.field.as_str()), (2, "hash_ids"));
        let e = case("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1");
        assert_eq!((e.line, e.field.as_str()), (2, "json"));
        assert!(e.message.starts_with("not a valid JSON object"), "{e}");
        let e = case("[1, 2]");
        assert_eq!((e.line, e.field.as_str()), (2, "json"));
        let e = case("{\"timestamp\": 1, \"output_length\": 1}");
        assert_eq!((e.line, e.field.as_str(), e.message.as_str()), (2, "input_length", "missing value"));
        let e = case("{\"input_length\": 1, \"output_length\": 1}");
        assert_eq!((e.line, e.field.as_str()), (2, "timestamp"));
        let e = case("{\"timestamp\": \"1\", \"input_length\": 1, \"output_length\": 1}");
        assert_eq!((e.line, e.field.as_str()), (2, "timestamp"));
        assert!(e.message.contains("expected a number"), "{e}");
        let e = case("{\"timestamp\": -5, \"input_length\": 1, \"output_length\": 1}");
        assert_eq!((e.line, e.field.as_str()), (2, "timestamp"));
        assert!(e.message.contains("negative timestamp"), "{e}");
        let e = case("{\"timestamp\": 1, \"input_length\": 1.5, \"output_length\": 1}");
        assert_eq!((e.line, e.field.as_str()), (2, "input_length"));
        assert!(e.message.contains("fractional"), "{e}");
        let e = case("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 4294967296}");
        assert_eq!((e.line, e.field.as_str()), (2, "output_length"));
        assert!(e.message.contains("larger than 4294967295"), "{e}");

        // A skipped line leaves no hash ids behind.
        let text = format!(
            "{good}{{\"timestamp\": 1, \"input_length\": -1, \"output_length\": 1, \"hash_ids\": [5, 6]}}\n\
             {{\"timestamp\": 2, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [7]}}\n"
        );
        let t = parse(&text, TraceFormat::Mooncake, None, true).unwrap();
        assert_eq!((t.rows.len(), t.skipped), (2, 1));
        assert_eq!(t.hash_ids, vec![1, 7]);
        assert_eq!(t.rows[1].hashes(&t), &[7]);
        assert_eq!(t.first_skipped.as_deref(), Some("line 2, field input_length: negative token count \"-1\""));
    }

    #[test]
    fn csv_class_session_and_quotes() {
        let c = Columns {
            time: Some("ts".to_string()),
            time_unit: TimeUnit::Ms,
            prompt: "p".to_string(),
            output: "o".to_string(),
            class: Some("kind".to_string()),
            session: Some("user".to_string()),
        };
        let text = "ts,\"p\",o,kind,user\n\
                    100,10,1,chat,u1\n\
                    150.5,20,2,\"code, \"\"fast\"\"\",u2\n\
                    200,30,3,chat,\"u1\"\n\
                    250,40,4,batch,\n";
        let t = csv(text, &c, false).unwrap();
        assert_eq!(t.class_names, vec!["chat", "code, \"fast\"", "batch"]);
        assert_eq!(t.num_sessions, 2);
        let got: Vec<_> = t.rows.iter().map(|r| (r.t, r.prompt, r.output, r.class, r.session, r.line)).collect();
        assert_eq!(
            got,
            vec![(0.0, 10, 1, 0, 0, 2), (0.0505, 20, 2, 1, 1, 3), (0.1, 30, 3, 0, 0, 4), (0.15, 40, 4, 2, u32::MAX, 5)]
        );
    }

    #[test]
    fn csv_time_units_and_no_time() {
        let text = "p,o,t\n1,2,1.5\n3,4,2.25\n";
        let t = csv(text, &cols(Some("t"), TimeUnit::S), false).unwrap();
        assert_eq!((t.rows[0].t, t.rows[1].t), (0.0, 0.75));
        let t = csv(text, &cols(Some("t"), TimeUnit::Ms), false).unwrap();
        assert_eq!(t.rows[1].t, 0.00075);
        let t = csv(text, &cols(Some("t"), TimeUnit::Us), false).unwrap();
        assert_eq!(t.rows[1].t, 0.00000075);
        let t = csv("p,o,t\n1,2,1e3\n3,4,1500\n", &cols(Some("t"), TimeUnit::Ms), false).unwrap();
        assert_eq!(t.rows[1].t, 0.5);
        let t = csv(
            "t,p,o\n2023-11-16 18:17:03.9799600,1,2\n2023-11-16 18:17:04.0319600,3,4\n",
            &cols(Some("t"), TimeUnit::Datetime),
            false,
        )
        .unwrap();
        assert_eq!(t.rows[1].t, 0.052);
        // No time column: a length table; order does not matter.
        let t = csv("p,o\n5,6\n 7 ,8.0\n", &cols(None, TimeUnit::S), false).unwrap();
        let got: Vec<_> = t.rows.iter().map(|r| (r.t, r.prompt, r.output)).collect();
        assert_eq!(got, vec![(0.0, 5, 6), (0.0, 7, 8)]);
    }

    #[test]
    fn csv_mapping_errors() {
        let e = err_of(parse("p,o\n1,2\n", TraceFormat::Csv, None, false));
        assert_eq!((e.line, e.field.as_str()), (0, "columns"));
        let e = err_of(csv("\n\nprompt,o,t\n1,2,3\n", &cols(Some("t"), TimeUnit::S), true));
        assert_eq!((e.line, e.field.as_str()), (3, "p"));
        assert!(e.message.contains("no column named \"p\""), "{e}");
        assert!(e.hint.contains("prompt, o, t"), "{e}");
        let mut c = cols(None, TimeUnit::S);
        c.session = Some("sess".to_string());
        let e = err_of(csv("p,o\n1,2\n", &c, false));
        assert_eq!((e.line, e.field.as_str()), (1, "sess"));
    }

    #[test]
    fn row_errors_name_line_and_field() {
        let c = cols(Some("t"), TimeUnit::S);
        let case = |row: &str| err_of(csv(&format!("t,p,o\n1,1,1\n{row}\n"), &c, false));
        let check = |row: &str, field: &str, msg: &str| {
            let e = case(row);
            assert_eq!((e.line, e.field.as_str()), (3, field), "{row}: {e}");
            assert!(e.message.contains(msg), "{row}: {e}");
            assert!(!e.hint.is_empty());
        };
        check("2,1", "o", "missing value (the row has 2 fields, the header has 3)");
        check("2", "p", "missing value");
        check("2,,1", "p", "missing value");
        check("2,abc,1", "p", "not a token count: \"abc\"");
        check("2,-3,1", "p", "negative token count");
        check("2,3.5,1", "p", "fractional token count");
        check("2,1,4294967296", "o", "larger than 4294967295");
        check("2,1,1e10", "o", "larger than 4294967295");
        check("x,1,1", "t", "cannot read timestamp");
        check("-1,1,1", "t", "negative timestamp");
        check("0.5,1,1", "t", "timestamp goes backwards (previous row at line 2 has a later time)");
        check("2,\"1,1", "p", "malformed quoted value");
        let e = case("2,abc,1");
        assert_eq!(e.hint, HINT_COUNT);
        assert!(e.hint.starts_with("token counts are non-negative integers"));
        let e = case("0.5,1,1");
        assert_eq!(e.hint, "sort the trace by time, or set on_bad_row = \"skip\"");
        assert_eq!(
            e.to_string(),
            "line 3, field t: timestamp goes backwards (previous row at line 2 has a later time) (hint: sort the \
             trace by time, or set on_bad_row = \"skip\")"
        );
        // Azure: bad timestamp and a row going backwards.
        let e = err_of(azure("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n2023-11-16,1,1\n"));
        assert_eq!((e.line, e.field.as_str()), (3, "TIMESTAMP"));
        assert!(e.hint.contains("2023-11-16 18:17:03.9799600"));
        let e = err_of(azure(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n2023-11-16 18:17:02.999,1,1\n",
        ));
        assert_eq!((e.line, e.field.as_str()), (3, "TIMESTAMP"));
        assert!(e.message.contains("goes backwards"));
    }

    #[test]
    fn skip_bad_counts_and_first_skipped() {
        let c = cols(Some("t"), TimeUnit::S);
        let text = "t,p,o\n1,10,1\n2,x,1\n0.5,20,2\n3,30\n1.5,40,4\n";
        let t = csv(text, &c, true).unwrap();
        assert_eq!(t.skipped, 3);
        assert_eq!(t.first_skipped.as_deref(), Some("line 3, field p: not a token count: \"x\""));
        let got: Vec<_> = t.rows.iter().map(|r| (r.t, r.prompt, r.line)).collect();
        // The backwards row (0.5 < 1) is skipped; 1.5 is compared with the previous KEPT row (1).
        assert_eq!(got, vec![(0.0, 10, 2), (0.5, 40, 6)]);
        // The first kept row sets t = 0 even when earlier rows were skipped.
        let t = csv("t,p,o\nbad,1,1\n5,1,1\n7,1,1\n", &c, true).unwrap();
        assert_eq!((t.rows[0].t, t.rows[1].t, t.skipped), (0.0, 2.0, 1));
    }

    #[test]
    fn empty_and_all_skipped() {
        let c = cols(Some("t"), TimeUnit::S);
        let e = err_of(csv("t,p,o\n", &c, false));
        assert_eq!((e.line, e.message.as_str()), (1, "the trace has no data rows"));
        let e = err_of(csv("", &c, false));
        assert_eq!(e.line, 1);
        let e = err_of(azure("TIMESTAMP,ContextTokens,GeneratedTokens\r\n\r\n"));
        assert_eq!(e.line, 1);
        let e = err_of(parse("\n\n", TraceFormat::Mooncake, None, true));
        assert_eq!((e.line, e.message.as_str()), (1, "the trace has no data rows"));
        let e = err_of(csv("t,p,o\n1,x,1\n2,y,1\n", &c, true));
        assert_eq!(e.line, 1);
        assert_eq!(
            e.message,
            "all 2 data rows are bad and were skipped (the first: line 2, field p: not a token count: \"x\")"
        );
        let e = err_of(parse("{}\n{\"a\": 1}\n", TraceFormat::Mooncake, None, true));
        assert!(e.message.starts_with("all 2 data rows are bad"), "{e}");
    }

    #[test]
    fn vllm_json() {
        let text = "{\n  \"duration\": 10.0,\n  \"input_lens\": [10, 20, 30],\n  \"output_lens\": [1, 2, 3],\n  \
                    \"ttfts\": [0.1, 0.2, 0.3],\n  \"start_times\": [1700000000.25, 1700000000.5, 1700000001.25]\n}";
        let t = parse(text, TraceFormat::VllmJson, None, false).unwrap();
        let got: Vec<_> = t.rows.iter().map(|r| (r.t, r.prompt, r.output, r.line)).collect();
        assert_eq!(got, vec![(0.0, 10, 1, 3), (0.25, 20, 2, 3), (1.0, 30, 3, 3)]);
        // No start times: all at t = 0.
        let t = parse("{\"input_lens\": [1, 2], \"output_lens\": [3, 4]}", TraceFormat::VllmJson, None, false).unwrap();
        assert_eq!((t.rows[1].t, t.rows[1].prompt, t.rows[1].output), (0.0, 2, 4));
        // Errors.
        let e = err_of(parse("{\"input_lens\": [1, 2],\n\"output_lens\": [3]}", TraceFormat::VllmJson, None, false));
        assert_eq!((e.line, e.field.as_str()), (2, "output_lens"));
        let e = err_of(parse(
            "{\"input_lens\": [1], \"output_lens\": [3],\n \"start_times\": [1, 2]}",
            TraceFormat::VllmJson,
            None,
            false,
        ));
        assert_eq!((e.line, e.field.as_str()), (2, "start_times"));
        let e = err_of(parse("{\"output_lens\": [3]}", TraceFormat::VllmJson, None, true));
        assert_eq!(e.field, "input_lens");
        assert!(e.hint.contains("--save-detailed"));
        let e = err_of(parse("{\"input_lens\": [1,\n", TraceFormat::VllmJson, None, true));
        assert_eq!((e.line, e.field.as_str()), (2, "json"));
        let doc = "{\"ttfts\": [],\n\"input_lens\": [1, 2.5, 3, 4],\n\"output_lens\": [1, 1, null, 1],\n\
                   \"start_times\": [5, 6, 7, 4]}";
        let e = err_of(parse(doc, TraceFormat::VllmJson, None, false));
        assert_eq!((e.line, e.field.as_str()), (2, "input_lens[1]"));
        let t = parse(doc, TraceFormat::VllmJson, None, true).unwrap();
        assert_eq!((t.rows.len(), t.skipped), (1, 3));
        assert_eq!(t.first_skipped.as_deref(), Some("line 2, field input_lens[1]: fractional token count \"2.5\""));
        let doc = "{\"input_lens\": [1, 1], \"output_lens\": [1, 1], \"start_times\": [5, 4]}";
        let e = err_of(parse(doc, TraceFormat::VllmJson, None, false));
        assert_eq!(e.field, "start_times[1]");
        assert!(e.message.contains("goes backwards"), "{e}");
    }

    #[test]
    fn display_and_serde_names() {
        let e = TraceError::new(0, "", "boom", "");
        assert_eq!(e.to_string(), "boom");
        let e = TraceError::new(4, "x", "bad", "fix it");
        assert_eq!(e.to_string(), "line 4, field x: bad (hint: fix it)");
        assert_eq!(serde_json::to_string(&TraceFormat::VllmJson).unwrap(), "\"vllm-json\"");
        assert_eq!(serde_json::from_str::<TimeUnit>("\"datetime\"").unwrap(), TimeUnit::Datetime);
        assert_eq!(serde_json::from_str::<TimeUnit>("\"us\"").unwrap(), TimeUnit::Us);
    }

    #[test]
    fn garbage_never_panics() {
        let inputs = [
            "\"",
            ",,,\n\"\"\"",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n\"",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:0é,1,1",
            "{\"timestamp\": 1e999, \"input_length\": 1, \"output_length\": 1}",
            "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1,",
            "{\"timestamp",
            "{\"x\": \"\\",
            "{\"x\": tru",
            "\u{feff}",
            "é,ü\n1,2",
        ];
        for s in inputs {
            for f in [TraceFormat::Azure, TraceFormat::Mooncake, TraceFormat::Csv, TraceFormat::VllmJson] {
                let c = cols(Some("é"), TimeUnit::Datetime);
                let _ = parse(s, f, Some(&c), true);
                let _ = parse(s, f, Some(&c), false);
            }
        }
    }

    /// Random edits of valid traces in every format: parsing must never panic, and whatever it
    /// accepts must be well formed.
    #[test]
    fn mutated_inputs_never_panic() {
        let seeds = [
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n\
             2023-11-16 18:17:04.03,3180,8\n",
            "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2]}\n\
             {\"timestamp\": 3, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [12345678, 4294967295]}\n",
            "ts,p,o,kind,user\n100,10,1,chat,u1\n150.5,20,2,\"code, \"\"fast\"\"\",u2\n",
            "{\"input_lens\": [1, 2], \"output_lens\": [3, 4], \"start_times\": [1.5, 2.5]}",
        ];
        let alphabet = "0123456789,.\"{}[]: -\n\r\tZTe+\\xé".as_bytes();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as usize
        };
        let c = Columns {
            time: Some("ts".into()),
            time_unit: TimeUnit::Ms,
            prompt: "p".into(),
            output: "o".into(),
            class: Some("kind".into()),
            session: Some("user".into()),
        };
        for it in 0..20_000 {
            let mut v = seeds[it % seeds.len()].as_bytes().to_vec();
            for _ in 0..1 + rnd() % 4 {
                let pos = rnd() % (v.len() + 1);
                let byte = alphabet[rnd() % alphabet.len()];
                match rnd() % 3 {
                    0 if pos < v.len() => {
                        v.remove(pos);
                    }
                    1 => v.insert(pos, byte),
                    _ if pos < v.len() => v[pos] = byte,
                    _ => {}
                }
            }
            let Ok(s) = String::from_utf8(v) else { continue };
            for f in [TraceFormat::Azure, TraceFormat::Mooncake, TraceFormat::Csv, TraceFormat::VllmJson] {
                for skip in [false, true] {
                    if let Ok(t) = parse(&s, f, Some(&c), skip) {
                        assert!(!t.rows.is_empty());
                        assert!(t.rows.windows(2).all(|w| w[0].t <= w[1].t), "{s:?}");
                        for r in &t.rows {
                            assert!(r.t >= 0.0 && r.t.is_finite(), "{s:?}");
                            assert!((r.hash_start + r.hash_len) as usize <= t.hash_ids.len(), "{s:?}");
                        }
                    }
                }
            }
        }
    }

    fn real(path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn mean_prompt(t: &Trace) -> f64 {
        t.rows.iter().map(|r| f64::from(r.prompt)).sum::<f64>() / t.rows.len() as f64
    }

    #[test]
    fn real_traces() {
        let dir = "/work/shared/data/traces";
        if let Some(text) = real(&format!("{dir}/azure2023/AzureLLMInferenceTrace_code.csv")) {
            let t = parse(&text, TraceFormat::Azure, None, false).unwrap();
            assert_eq!(t.rows.len(), 8819);
            assert!((mean_prompt(&t) - 2047.8).abs() < 1.0, "{}", mean_prompt(&t));
            assert_eq!(t.rows[1].t, 0.052);
            assert!(t.rows.windows(2).all(|w| w[0].t <= w[1].t));
        }
        if let Some(text) = real(&format!("{dir}/azure2023/AzureLLMInferenceTrace_conv.csv")) {
            let t = parse(&text, TraceFormat::Azure, None, false).unwrap();
            assert_eq!(t.rows.len(), 19366);
            assert!((mean_prompt(&t) - 1154.7).abs() < 1.0, "{}", mean_prompt(&t));
        }
        if let Some(text) = real(&format!("{dir}/mooncake/conversation_trace.jsonl")) {
            let t = parse(&text, TraceFormat::Mooncake, None, false).unwrap();
            assert_eq!(t.rows.len(), 12031);
            assert!((mean_prompt(&t) - 12035.0).abs() < 1.0, "{}", mean_prompt(&t));
            assert_eq!(t.rows[0].hashes(&t), (0..14).collect::<Vec<u32>>());
            // Every 512-token block of the prompt has a hash id.
            assert!(t.rows.iter().all(|r| r.hash_len == r.prompt.div_ceil(512)));
        }
    }

    #[test]
    #[ignore = "speed measurement; run with --release -- --ignored --nocapture speed"]
    fn speed() {
        use std::fmt::Write;
        use std::time::Instant;
        let n = 1_000_000u64;
        let mut text = String::with_capacity(40 * n as usize);
        text.push_str("TIMESTAMP,ContextTokens,GeneratedTokens\n");
        for i in 0..n {
            let ns = i * 387_123_457;
            let s = ns / 1_000_000_000;
            let _ = writeln!(
                text,
                "2023-11-{:02} {:02}:{:02}:{:02}.{:07},{},{}",
                16 + s / 86_400,
                s / 3600 % 24,
                s / 60 % 60,
                s % 60,
                ns % 1_000_000_000 / 100,
                1 + i * 7919 % 8000,
                1 + i * 104_729 % 700
            );
        }
        let start = Instant::now();
        let t = std::hint::black_box(parse(&text, TraceFormat::Azure, None, false)).unwrap();
        let dt = start.elapsed().as_secs_f64();
        assert_eq!(t.rows.len(), n as usize);
        println!(
            "azure:    {n} rows, {:.1} MB in {dt:.3} s: {:.2} M rows/s",
            text.len() as f64 / 1e6,
            n as f64 / dt / 1e6
        );

        let mut text = String::with_capacity(250 * n as usize);
        let mut next_id = 0u64;
        for i in 0..n {
            let _ = write!(
                text,
                "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [",
                i * 3,
                12_000 + i % 800,
                1 + i * 104_729 % 700
            );
            // Realistic ids: a shared 3-block prefix, then fresh ids (at most 6 digits, as in the
            // real trace).
            for k in 0..25 {
                let id = if k < 3 { k } else { next_id % 200_000 };
                next_id += 1;
                let sep = if k == 0 { "" } else { ", " };
                let _ = write!(text, "{sep}{id}");
            }
            text.push_str("]}\n");
        }
        let start = Instant::now();
        let t = std::hint::black_box(parse(&text, TraceFormat::Mooncake, None, false)).unwrap();
        let dt = start.elapsed().as_secs_f64();
        assert_eq!((t.rows.len(), t.hash_ids.len()), (n as usize, 25 * n as usize));
        println!(
            "mooncake: {n} rows, {:.1} MB in {dt:.3} s: {:.2} M rows/s",
            text.len() as f64 / 1e6,
            n as f64 / dt / 1e6
        );
    }

    #[test]
    fn count_fast_matches_scalar() {
        for text in [
            "0,",
            "7 ",
            "12]",
            "123456,",
            "1234567,",
            "12345678,",
            "4294967295,",
            "4294967296,",
            "99999999999,",
            "x",
            "",
            "1",
            "0000001,",
        ] {
            let padded = format!("{text}        ");
            for t in [text.to_string(), padded] {
                let b = t.as_bytes();
                let expect = {
                    let n = b.iter().take_while(|c| c.is_ascii_digit()).count().min(10);
                    if n == 0 {
                        None
                    } else {
                        std::str::from_utf8(&b[..n])
                            .unwrap()
                            .parse::<u64>()
                            .ok()
                            .and_then(|v| u32::try_from(v).ok())
                            .map(|v| (v, n))
                    }
                };
                assert_eq!(count_fast(b, 0), expect, "{t:?}");
            }
        }
    }
}
