//! Placeholder (replaced by the trace parser).

/// Trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Azure.
    Azure,
    /// Mooncake.
    Mooncake,
    /// CSV.
    Csv,
    /// vLLM JSON.
    VllmJson,
}

/// Unit of a generic CSV time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// Seconds.
    #[default]
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Date-time.
    Datetime,
}

/// Columns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Columns {
    /// x
    pub time: Option<String>,
    /// x
    pub time_unit: TimeUnit,
    /// x
    pub prompt: String,
    /// x
    pub output: String,
    /// x
    pub class: Option<String>,
    /// x
    pub session: Option<String>,
}

/// Row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRow {
    /// x
    pub t: f64,
    /// x
    pub prompt: u32,
    /// x
    pub output: u32,
    /// x
    pub class: u32,
    /// x
    pub session: u32,
    /// x
    pub hash_start: u32,
    /// x
    pub hash_len: u32,
    /// x
    pub line: u32,
}

/// Trace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// x
    pub rows: Vec<TraceRow>,
    /// x
    pub class_names: Vec<String>,
    /// x
    pub num_sessions: u32,
    /// x
    pub hash_ids: Vec<u32>,
    /// x
    pub skipped: u64,
    /// x
    pub first_skipped: Option<String>,
}

/// Error.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceError {
    /// x
    pub line: u32,
    /// x
    pub field: String,
    /// x
    pub message: String,
    /// x
    pub hint: String,
}

/// Parse (placeholder).
pub fn parse(
    _text: &str,
    _format: TraceFormat,
    _columns: Option<&Columns>,
    _skip_bad: bool,
) -> Result<Trace, TraceError> {
    Err(TraceError { line: 0, field: String::new(), message: "not yet".into(), hint: String::new() })
}
