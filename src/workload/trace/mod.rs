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

//!
//! One file per format (`csv` for Azure and generic CSV, `mooncake`, `vllm`); `scan` holds
//! what they share (the row builder, number parsing, messages) and `datetime` the calendar
//! arithmetic.

mod csv;
mod datetime;
mod mooncake;
mod scan;
#[cfg(test)]
mod tests;
mod vllm;

use csv::parse_csv;
use mooncake::parse_mooncake;
use scan::AZURE_HEADER;
use std::fmt;
use vllm::parse_vllm;

pub use crate::config::{TimeUnit, TraceFormat};

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
    /// The kept row that the most skipped rows fell behind (their timestamps
    /// earlier than its own), and how many: (line, rows). One far-future
    /// timestamp shows here as the cause of every row skipped after it.
    pub skipped_behind: (u32, u64),
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
