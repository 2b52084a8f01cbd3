//! `[workload.trace]`: replay of recorded arrivals and lengths, bad-row
//! handling, file formats and the checks of a trace's (and a length file's)
//! columns.

use super::WorkloadConfig;
use crate::config::validate::{Check, fail, non_negative, positive};
use serde::{Deserialize, Serialize};

/// Trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Azure LLM inference trace 2023: CSV `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// Mooncake JSON lines: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// Generic CSV with a header row; columns named by [`crate::workload::trace::Columns`].
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

/// What to do with a bad trace row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnBadRow {
    /// Stop with an error naming the file, line and field.
    #[default]
    Error,
    /// Skip it; skipped rows are counted in `summary.json`.
    Skip,
}

/// `[workload.trace]`: replay of recorded arrivals and lengths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceReplay {
    /// The trace file, relative to the scenario file.
    pub file: String,
    /// Its format.
    pub format: TraceFormat,
    /// `csv`: the time column (absent: every row at t = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_column: Option<String>,
    /// `csv`: unit of the time column.
    #[serde(default)]
    pub time_unit: TimeUnit,
    /// `csv`: the prompt-length column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_column: Option<String>,
    /// `csv`: the output-length column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_column: Option<String>,
    /// `csv`: a column naming each request's class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_column: Option<String>,
    /// `csv`: a column naming each request's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_column: Option<String>,
    /// Replay from this trace time (s after the first row); it becomes t = 0.
    #[serde(default)]
    pub start_s: f64,
    /// Replay up to (not including) this trace time, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// Divide every time by this factor (2 = twice the traffic in half the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Instead of `speedup`: scale time so the mean arrival rate is this, per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Start over (shifted by the trace's span plus one mean gap) after the last row.
    #[serde(default, rename = "loop")]
    pub repeat: bool,
    /// Keep each row with this probability (independent thinning).
    #[serde(default = "one_f")]
    pub sample: f64,
    /// Bad rows: stop with an error, or skip and count them.
    #[serde(default)]
    pub on_bad_row: OnBadRow,
}

fn one_f() -> f64 {
    1.0
}

pub(super) fn check_columns(key: &str, format: TraceFormat, prompt: &Option<String>, output: &Option<String>) -> Check {
    match format {
        TraceFormat::Csv if prompt.is_none() || output.is_none() => fail(
            key,
            "a generic CSV needs prompt_column and output_column",
            "name the header columns holding prompt and output token counts",
        ),
        TraceFormat::Csv => Ok(()),
        _ if prompt.is_some() || output.is_some() => fail(
            key,
            format!("column names only apply to format = \"csv\"; \"{}\" has fixed columns", format.as_str()),
            "remove prompt_column/output_column, or use format = \"csv\"",
        ),
        _ => Ok(()),
    }
}

impl WorkloadConfig {
    pub(super) fn check_trace(&self, t: &TraceReplay, num_requests: Option<u64>, duration_s: Option<f64>) -> Check {
        if t.file.trim().is_empty() {
            return fail("workload.trace.file", "is empty", "give the trace's path, relative to the scenario file");
        }
        check_columns("workload.trace", t.format, &t.prompt_column, &t.output_column)?;
        if t.format != TraceFormat::Csv
            && (t.time_column.is_some()
                || t.class_column.is_some()
                || t.session_column.is_some()
                || t.time_unit != TimeUnit::S)
        {
            return fail(
                "workload.trace",
                format!(
                    "time/class/session columns only apply to format = \"csv\"; \"{}\" has fixed columns",
                    t.format.as_str()
                ),
                "remove them, or use format = \"csv\"",
            );
        }
        non_negative("workload.trace.start_s", t.start_s)?;
        if let Some(e) = t.end_s
            && (e <= t.start_s || e.is_nan())
        {
            return fail(
                "workload.trace.end_s",
                format!("must be after start_s ({}), got {e}", t.start_s),
                "use end_s > start_s",
            );
        }
        match (t.speedup, t.target_rate) {
            (Some(_), Some(_)) => {
                return fail("workload.trace.target_rate", "speedup and target_rate are both set", "keep one of them");
            }
            (Some(k), None) => positive("workload.trace.speedup", k)?,
            (None, Some(r)) => positive("workload.trace.target_rate", r)?,
            _ => {}
        }
        if !(t.sample > 0.0 && t.sample <= 1.0) {
            return fail(
                "workload.trace.sample",
                format!("must be a fraction in (0, 1], got {}", t.sample),
                "use e.g. sample = 0.5",
            );
        }
        if t.repeat && num_requests.is_none() && duration_s.is_none() {
            return fail(
                "workload.trace.loop",
                "a looped trace never ends by itself",
                "set num_requests or duration_s",
            );
        }
        Ok(())
    }
}

impl TraceFormat {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Azure => "azure",
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Csv => "csv",
            TraceFormat::VllmJson => "vllm-json",
        }
    }
}
