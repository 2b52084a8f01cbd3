//! Request lengths: token-length distributions, think-time distributions,
//! joint (prompt, output) pairs from a file, what to do with requests too
//! long for the context, what clients send as `max_tokens`, and the checks
//! of a distribution.

use super::OnBadRow;
use super::traces::TraceFormat;
use crate::config::validate::{Check, fail, non_negative, positive};
use serde::{Deserialize, Serialize};

/// A length distribution in tokens. Continuous distributions are rounded to
/// the nearest integer and are at least 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    /// Always `value`.
    Fixed {
        /// Tokens.
        value: u32,
    },
    /// Uniform integer in [`min`, `max`].
    Uniform {
        /// Smallest value.
        min: u32,
        /// Largest value.
        max: u32,
    },
    /// Normal with `mean` and `std`, truncated to [`min`, `max`] (exact
    /// inverse-CDF sampling of the truncated law, not clamping).
    Normal {
        /// Mean before truncation, tokens.
        mean: f64,
        /// Standard deviation before truncation, tokens.
        std: f64,
        /// Lower bound (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u32>,
        /// Upper bound (default: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
    },
    /// Lognormal, given by `mean` and `cv` or by `median` and `sigma` (the
    /// standard deviation of the log).
    Lognormal {
        /// Mean tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mean: Option<f64>,
        /// Standard deviation / mean.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cv: Option<f64>,
        /// Median tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        median: Option<f64>,
        /// Standard deviation of ln(length).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sigma: Option<f64>,
    },
    /// Exponential with this mean.
    Exponential {
        /// Mean tokens.
        mean: f64,
    },
    /// Zipf on 1..=`n` with exponent `s`: P(k) ∝ k^−s.
    Zipf {
        /// Largest value.
        n: u32,
        /// Exponent (> 0).
        s: f64,
    },
    /// Resampling of observed values: `values` inline, or a column of a file.
    Empirical {
        /// The observed values.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<u32>,
        /// A CSV (with a header) or trace file, relative to the scenario file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// The column to read: a CSV header name, or for `azure`/`mooncake`
        /// files "prompt" or "output".
        #[serde(default, skip_serializing_if = "Option::is_none")]
        column: Option<String>,
        /// File format (default `csv`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<TraceFormat>,
    },
}

impl LengthDist {
    /// The mean length (before rounding), when known without data.
    pub fn mean(&self) -> Option<f64> {
        match *self {
            LengthDist::Fixed { value } => Some(value as f64),
            LengthDist::Uniform { min, max } => Some((min as f64 + max as f64) / 2.0),
            LengthDist::Normal { mean, .. } => Some(mean),
            LengthDist::Lognormal { mean: Some(m), .. } => Some(m),
            LengthDist::Lognormal { median: Some(m), sigma: Some(s), .. } => Some(m * (s * s / 2.0).exp()),
            LengthDist::Exponential { mean } => Some(mean),
            _ => None,
        }
    }

    /// The smallest length the distribution can produce, when known without data.
    pub fn min_value(&self) -> Option<u32> {
        match *self {
            LengthDist::Fixed { value } => Some(value),
            LengthDist::Uniform { min, .. } => Some(min),
            LengthDist::Normal { min, .. } => Some(min.unwrap_or(1)),
            LengthDist::Zipf { .. } | LengthDist::Lognormal { .. } | LengthDist::Exponential { .. } => Some(1),
            LengthDist::Empirical { ref values, .. } => values.iter().min().copied(),
        }
    }
}

/// A duration distribution in seconds (think times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum TimeDist {
    /// Always `value` seconds.
    Fixed {
        /// Seconds.
        value: f64,
    },
    /// Exponential with this mean, seconds.
    Exponential {
        /// Mean seconds.
        mean: f64,
    },
    /// Uniform in [`min`, `max`] seconds.
    Uniform {
        /// Shortest, s.
        min: f64,
        /// Longest, s.
        max: f64,
    },
    /// Lognormal with this mean and coefficient of variation, seconds.
    Lognormal {
        /// Mean seconds.
        mean: f64,
        /// Standard deviation / mean.
        cv: f64,
    },
}

impl Default for TimeDist {
    fn default() -> Self {
        TimeDist::Fixed { value: 0.0 }
    }
}

impl TimeDist {
    /// Mean, seconds.
    pub fn mean(&self) -> f64 {
        match *self {
            TimeDist::Fixed { value } => value,
            TimeDist::Exponential { mean } | TimeDist::Lognormal { mean, .. } => mean,
            TimeDist::Uniform { min, max } => (min + max) / 2.0,
        }
    }
}

/// What to do with a request longer than the model's context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TooLong {
    /// Refuse it (counted as a failure, as vLLM does).
    #[default]
    Reject,
    /// Shorten the prompt (then the output) to fit, and count it.
    Clip,
}

/// What each request's client sends as `max_tokens`, which the engines that
/// reserve memory for a request's whole output (TensorRT-LLM's
/// GUARANTEED_NO_EVICT, SGLang's admission) reserve against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "MaxTokensRepr", into = "MaxTokensRepr")]
pub enum MaxTokens {
    /// Its own output length, as `vllm bench serve` sends (`max_tokens` =
    /// the sampled output length; benchmarks/datasets.py).
    #[default]
    Output,
    /// Nothing: the engines take max_seq_len − prompt (trtllm-serve,
    /// vLLM) or context − prompt − 1 (SGLang) as the limit.
    None,
    /// A fixed cap, as a chat client sends: outputs longer are cut there.
    Fixed(u32),
}

impl MaxTokens {
    /// The default (`"output"`): nothing to write.
    pub fn is_output(&self) -> bool {
        *self == MaxTokens::Output
    }
}

/// `max_tokens` as TOML writes it: `"output"`, `"none"` or a number.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MaxTokensRepr {
    /// `"output"` or `"none"`.
    Word(String),
    /// A cap in tokens.
    Cap(i64),
}

impl TryFrom<MaxTokensRepr> for MaxTokens {
    type Error = String;
    fn try_from(r: MaxTokensRepr) -> Result<Self, String> {
        match r {
            MaxTokensRepr::Word(w) if w == "output" => Ok(MaxTokens::Output),
            MaxTokensRepr::Word(w) if w == "none" => Ok(MaxTokens::None),
            MaxTokensRepr::Cap(c) if c >= 1 && c <= u32::MAX as i64 => Ok(MaxTokens::Fixed(c as u32)),
            MaxTokensRepr::Cap(c) => Err(format!("max_tokens = {c}: a cap must be at least 1 token")),
            MaxTokensRepr::Word(w) => Err(format!(
                "max_tokens = \"{w}\": expected \"output\" (the output length, as vllm bench serve sends), \
                 \"none\" (the client sends none) or a number of tokens"
            )),
        }
    }
}

impl From<MaxTokens> for MaxTokensRepr {
    fn from(m: MaxTokens) -> Self {
        match m {
            MaxTokens::Output => MaxTokensRepr::Word("output".into()),
            MaxTokens::None => MaxTokensRepr::Word("none".into()),
            MaxTokens::Fixed(c) => MaxTokensRepr::Cap(c as i64),
        }
    }
}

/// `[workload.lengths]`: (prompt, output) pairs resampled jointly from a file,
/// keeping their correlation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JointLengths {
    /// The file, relative to the scenario file.
    pub file: String,
    /// Its format (default `csv`).
    #[serde(default = "csv_format")]
    pub format: TraceFormat,
    /// `csv`: the prompt-length column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_column: Option<String>,
    /// `csv`: the output-length column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_column: Option<String>,
    /// Bad rows: stop with an error, or skip and count them.
    #[serde(default)]
    pub on_bad_row: OnBadRow,
}

fn csv_format() -> TraceFormat {
    TraceFormat::Csv
}

/// Largest mean (or median) length a distribution may ask for, tokens: ten
/// times the longest context of any shipped model (1M), so that a typo such as
/// 1e20 is refused instead of making every request too long to serve.
const MAX_MEAN_TOKENS: f64 = 1e7;

/// A distribution's typical length: finite, at least 1 token, at most [`MAX_MEAN_TOKENS`].
fn typical_tokens(key: &str, what: &str, v: f64) -> Check {
    if v.is_finite() && (1.0..=MAX_MEAN_TOKENS).contains(&v) {
        return Ok(());
    }
    fail(
        key,
        format!("{what} must be between 1 and 10,000,000 tokens, got {}", crate::config::shown(v)),
        format!("set {what} to a length in tokens, e.g. {what} = 1000"),
    )
}

pub(super) fn check_length(key: &str, d: &LengthDist, allow_zero: bool) -> Check {
    let zero_hint = if allow_zero { "" } else { " (a prompt needs at least 1 token)" };
    match d {
        LengthDist::Fixed { value } => {
            if *value == 0 && !allow_zero {
                return fail(key, "a prompt needs at least 1 token", "set value >= 1");
            }
        }
        LengthDist::Uniform { min, max } => {
            if *min == 0 && !allow_zero {
                return fail(key, format!("min must be at least 1 token{zero_hint}"), "set min >= 1");
            }
            if min > max {
                return fail(key, format!("min ({min}) is larger than max ({max})"), "set min <= max");
            }
        }
        LengthDist::Normal { mean, std, min, max } => {
            if !mean.is_finite() || mean.abs() > MAX_MEAN_TOKENS {
                return fail(
                    key,
                    format!("mean must be a finite number of at most 10,000,000 tokens, got {mean}"),
                    "set mean = <tokens>",
                );
            }
            positive(key, *std).map_err(|(k, m, _)| {
                (k, format!("std {m}"), "set std > 0 (use dist = \"fixed\" for no spread)".into())
            })?;
            let lo = min.unwrap_or(1);
            if lo == 0 && !allow_zero {
                return fail(key, "min must be at least 1 token for a prompt", "set min >= 1");
            }
            if let Some(hi) = max
                && *hi < lo
            {
                return fail(key, format!("min ({lo}) is larger than max ({hi})"), "set min <= max");
            }
            // The truncation window must hold some probability mass.
            let z_lo = (lo as f64 - 0.5 - mean) / std;
            let z_hi = max.map_or(f64::INFINITY, |h| (h as f64 + 0.5 - mean) / std);
            if z_lo > 8.0 || z_hi < -8.0 {
                return fail(
                    key,
                    format!(
                        "the window [{lo}, {}] lies more than 8 std from the mean {mean}",
                        max.map_or("∞".into(), |h| h.to_string())
                    ),
                    "move min/max towards the mean or change mean/std",
                );
            }
        }
        LengthDist::Lognormal { mean, cv, median, sigma } => match (mean, cv, median, sigma) {
            (Some(m), Some(c), None, None) => {
                typical_tokens(key, "mean", *m)?;
                if !(c.is_finite() && *c > 0.0 && *c <= 100.0) {
                    return fail(
                        key,
                        format!("cv must be in (0, 100], got {c}"),
                        "set cv > 0 (use dist = \"fixed\" for no spread)",
                    );
                }
            }
            (None, None, Some(m), Some(s)) => {
                typical_tokens(key, "median", *m)?;
                if !(s.is_finite() && *s > 0.0 && *s <= 10.0) {
                    return fail(key, format!("sigma must be in (0, 10], got {s}"), "set sigma > 0");
                }
            }
            _ => {
                return fail(
                    key,
                    "a lognormal needs either mean and cv, or median and sigma",
                    "write { dist = \"lognormal\", mean = 500, cv = 1.0 } or { dist = \"lognormal\", median = 300, sigma = 0.9 }",
                );
            }
        },
        LengthDist::Exponential { mean } => typical_tokens(key, "mean", *mean)?,
        LengthDist::Zipf { n, s } => {
            if *n == 0 {
                return fail(key, "n must be at least 1", "set n = the largest length");
            }
            positive(key, *s).map_err(|(k, m, _)| (k, format!("s {m}"), "set the exponent s > 0, e.g. 1.1".into()))?;
        }
        LengthDist::Empirical { values, file, column, format } => match (values.is_empty(), file) {
            (false, Some(_)) => return fail(key, "both values and file are set", "keep one of them"),
            (true, None) => {
                return fail(
                    key,
                    "an empirical distribution needs values or a file",
                    "write values = [120, 340, ...] or file = \"traces/x.csv\", column = \"prompt_len\"",
                );
            }
            (false, None) => {
                if !allow_zero && values.contains(&0) {
                    return fail(
                        key,
                        "a prompt length of 0 is listed",
                        "remove the 0 values: a prompt needs at least 1 token",
                    );
                }
            }
            (true, Some(_)) => {
                let fmt = format.unwrap_or(TraceFormat::Csv);
                match (fmt, column.as_deref()) {
                    (TraceFormat::Csv, None) => {
                        return fail(key, "a CSV file needs the column to read", "set column = \"<header name>\"");
                    }
                    (TraceFormat::Csv, Some(_)) => {}
                    (_, Some("prompt" | "output")) => {}
                    (_, _) => {
                        return fail(
                            key,
                            format!("column must be \"prompt\" or \"output\" for format = \"{}\"", fmt.as_str()),
                            "set column = \"prompt\" or column = \"output\"",
                        );
                    }
                }
            }
        },
    }
    Ok(())
}

pub(super) fn check_time(key: &str, d: &TimeDist) -> Check {
    match *d {
        TimeDist::Fixed { value } => non_negative(key, value),
        TimeDist::Exponential { mean } => positive(key, mean),
        TimeDist::Uniform { min, max } => {
            non_negative(key, min)?;
            if !(max >= min && max.is_finite()) {
                return fail(key, format!("max ({max}) must be at least min ({min})"), "set min <= max");
            }
            Ok(())
        }
        TimeDist::Lognormal { mean, cv } => {
            positive(key, mean)?;
            if !(cv > 0.0 && cv <= 100.0) {
                return fail(key, format!("cv must be in (0, 100], got {cv}"), "use e.g. cv = 1.0");
            }
            Ok(())
        }
    }
}
