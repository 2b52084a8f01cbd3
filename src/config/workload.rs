//! `[workload]`: arrival processes, length distributions, request classes,
//! closed-loop users, multi-turn sessions and trace replay.

use super::SloConfig;
use crate::workload::trace::{TimeUnit, TraceFormat};
use serde::{Deserialize, Serialize};

/// Arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalKind {
    /// Exponential inter-arrival gaps at `rate`; with `rate_schedule` or
    /// `diurnal`, a non-homogeneous Poisson process.
    #[default]
    Poisson,
    /// Gamma-distributed gaps at `rate` with coefficient of variation `cv`
    /// (or vLLM's `burstiness` = shape = 1/cv²).
    Gamma,
    /// Weibull-distributed gaps at `rate` with coefficient of variation `cv`.
    Weibull,
    /// Constant gaps of 1/`rate`.
    Deterministic,
    /// All requests arrive at t = 0 (offline batch).
    Offline,
    /// Two-state Markov-modulated Poisson process (`[workload.on_off]`).
    OnOff,
    /// `closed_loop.users` users, each sending its next request when the
    /// previous one finished plus a think time.
    ClosedLoop,
    /// Replay of a recorded trace (`[workload.trace]`).
    Trace,
}

impl ArrivalKind {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalKind::Poisson => "poisson",
            ArrivalKind::Gamma => "gamma",
            ArrivalKind::Weibull => "weibull",
            ArrivalKind::Deterministic => "deterministic",
            ArrivalKind::Offline => "offline",
            ArrivalKind::OnOff => "on-off",
            ArrivalKind::ClosedLoop => "closed-loop",
            ArrivalKind::Trace => "trace",
        }
    }
}

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

/// `[workload.on_off]`: a two-state Markov-modulated Poisson process. The
/// process stays in each state for an exponentially distributed time and
/// sends Poisson arrivals at that state's rate; it starts in a state drawn
/// from the stationary distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnOff {
    /// Arrival rate while "on", requests per second.
    pub on_rate: f64,
    /// Arrival rate while "off" (default 0).
    #[serde(default)]
    pub off_rate: f64,
    /// Mean time spent "on" per visit, s.
    pub on_mean_s: f64,
    /// Mean time spent "off" per visit, s.
    pub off_mean_s: f64,
}

impl OnOff {
    /// Long-run mean arrival rate.
    pub fn mean_rate(&self) -> f64 {
        (self.on_rate * self.on_mean_s + self.off_rate * self.off_mean_s) / (self.on_mean_s + self.off_mean_s)
    }
}

/// One point of a piecewise-linear rate schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePoint {
    /// Time, s.
    pub t_s: f64,
    /// Arrival rate at that time, requests per second.
    pub rate: f64,
}

/// `[workload.diurnal]`: rate(t) = rate + amplitude · sin(2π (t − phase_s) / period_s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diurnal {
    /// Swing around the mean `rate`, requests per second (at most `rate`).
    pub amplitude: f64,
    /// Period, s (default one day).
    #[serde(default = "day")]
    pub period_s: f64,
    /// Time of the upward zero crossing, s.
    #[serde(default)]
    pub phase_s: f64,
}

fn day() -> f64 {
    86_400.0
}

/// How the ramp-up interpolates the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RampStrategy {
    /// start + (end − start) · progress.
    Linear,
    /// start · (end / start)^progress.
    Exponential,
}

/// `[workload.ramp_up]`: like `vllm bench serve --ramp-up-strategy`: the
/// i-th of N requests is sent at rate r(i / (N − 1)) going from `start_rate`
/// to `end_rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RampUp {
    /// Interpolation.
    pub strategy: RampStrategy,
    /// Rate of the first request, per second.
    pub start_rate: f64,
    /// Rate of the last request (default: `workload.rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_rate: Option<f64>,
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

/// `[workload.closed_loop]`: a fixed population of users.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedLoop {
    /// Concurrent users (the most requests ever in flight).
    pub users: u32,
    /// Pause between a request's last token and the user's next request.
    #[serde(default)]
    pub think_time_s: TimeDist,
}

/// `[workload.sessions]`: multi-turn conversations. Turn k's prompt is the
/// previous turn's prompt and output plus `new_tokens` of user input, so it
/// shares that whole context as a prefix with the previous turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Turns per session.
    pub turns: LengthDist,
    /// Pause between a turn's last token and the next turn.
    #[serde(default)]
    pub think_time_s: TimeDist,
    /// New user tokens in each later turn (default: the prompt distribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tokens: Option<LengthDist>,
}

/// `[[workload.classes]]`: one kind of request in the mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Name, used in `summary.json` and `requests.csv`.
    pub name: String,
    /// Share of the common arrival process (relative weight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Own arrival process instead of a share: `poisson`, `gamma`, `weibull`,
    /// `deterministic` or `on-off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalKind>,
    /// Own arrival rate, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Own process: gap coefficient of variation (gamma, weibull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Own process: gamma shape (vLLM's burstiness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// Own process: on/off bursts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
    /// Own process: piecewise-linear rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_schedule: Vec<RatePoint>,
    /// Own process: sinusoidal rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diurnal: Option<Diurnal>,
    /// Prompt lengths (default: the workload's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthDist>,
    /// Output lengths (default: the workload's); `fixed` 0 makes the class
    /// prefill-only (embeddings, scoring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Joint (prompt, output) pairs from a file (default: the workload's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lengths: Option<JointLengths>,
    /// Objectives of this class (default: `[slo]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloConfig>,
    /// Scheduling priority (lower is served first, as vLLM; ties by arrival), used by priority scheduling.
    #[serde(default)]
    pub priority: i32,
    /// Classes with the same prefix group share one system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_group: Option<String>,
    /// Tokens of that shared system prompt, added in front of every prompt.
    #[serde(default)]
    pub prefix_tokens: u32,
    /// Admission limit: prompt + output tokens per second accepted for this
    /// class (a token bucket); requests beyond it are refused (`rate_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_rate_limit: Option<f64>,
    /// Bucket size of the limit, tokens (default: one second's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_burst: Option<f64>,
    /// Speculative decoding: acceptance rate α of this class's draft tokens
    /// (default: `engine.speculative.acceptance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_acceptance: Option<f64>,
}

/// `[workload]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Arrival process (default: `trace` with `[workload.trace]`,
    /// `closed-loop` with `[workload.closed_loop]`, else `poisson`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalKind>,
    /// Mean arrival rate, requests (or sessions) per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Gamma and Weibull: coefficient of variation of the inter-arrival gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Gamma: shape parameter as in `vllm bench serve --burstiness` (cv = 1/sqrt(burstiness)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// On/off bursts (`arrival = "on-off"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
    /// Piecewise-linear rate schedule (Poisson arrivals): `[[workload.rate_schedule]]` points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_schedule: Vec<RatePoint>,
    /// Sinusoidal rate around `rate` (Poisson arrivals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diurnal: Option<Diurnal>,
    /// Ramp the rate over the requests, as `vllm bench serve --ramp-up-strategy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up: Option<RampUp>,
    /// Scale arrival times so the last of N requests is sent at exactly N / rate
    /// (what `vllm bench serve` does).
    #[serde(default)]
    pub rescale_to_rate: bool,
    /// Prompt length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthDist>,
    /// Output length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthDist>,
    /// Joint (prompt, output) pairs from a file, instead of the two distributions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lengths: Option<JointLengths>,
    /// Requests longer than the context window: reject or clip.
    #[serde(default)]
    pub on_too_long: TooLong,
    /// What each request's client sends as `max_tokens`: `"output"` (its
    /// output length, `vllm bench serve`'s behaviour), a fixed cap (longer
    /// outputs are cut there), or `"none"`. Engines that reserve memory for
    /// the whole output reserve against it.
    #[serde(default, skip_serializing_if = "MaxTokens::is_output")]
    pub max_tokens: MaxTokens,
    /// Closed-loop users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<ClosedLoop>,
    /// Multi-turn sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Trace replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplay>,
    /// Request classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassConfig>,
}

impl WorkloadConfig {
    /// The arrival process in effect.
    pub fn arrival_kind(&self) -> ArrivalKind {
        match self.arrival {
            Some(a) => a,
            None if self.trace.is_some() => ArrivalKind::Trace,
            None if self.closed_loop.is_some() => ArrivalKind::ClosedLoop,
            None => ArrivalKind::Poisson,
        }
    }

    /// The parameters of the common (workload-level) arrival process.
    pub fn process(&self) -> ProcessConfig<'_> {
        ProcessConfig {
            kind: self.arrival_kind(),
            rate: self.rate,
            cv: self.cv,
            burstiness: self.burstiness,
            on_off: self.on_off.as_ref(),
            rate_schedule: &self.rate_schedule,
            diurnal: self.diurnal.as_ref(),
        }
    }
}

impl ClassConfig {
    /// The class's own arrival process, if it has one.
    pub fn own_process(&self) -> Option<ProcessConfig<'_>> {
        let own = self.arrival.is_some()
            || self.rate.is_some()
            || self.on_off.is_some()
            || !self.rate_schedule.is_empty()
            || self.diurnal.is_some();
        own.then(|| ProcessConfig {
            kind: self.arrival.unwrap_or(if self.on_off.is_some() { ArrivalKind::OnOff } else { ArrivalKind::Poisson }),
            rate: self.rate,
            cv: self.cv,
            burstiness: self.burstiness,
            on_off: self.on_off.as_ref(),
            rate_schedule: &self.rate_schedule,
            diurnal: self.diurnal.as_ref(),
        })
    }
}

/// The keys describing one open-loop arrival process (of the workload or of a class).
#[derive(Debug, Clone, Copy)]
pub struct ProcessConfig<'a> {
    /// Process kind.
    pub kind: ArrivalKind,
    /// Mean rate.
    pub rate: Option<f64>,
    /// Gap CV.
    pub cv: Option<f64>,
    /// Gamma shape.
    pub burstiness: Option<f64>,
    /// On/off parameters.
    pub on_off: Option<&'a OnOff>,
    /// Rate schedule.
    pub rate_schedule: &'a [RatePoint],
    /// Sinusoidal rate.
    pub diurnal: Option<&'a Diurnal>,
}

impl ProcessConfig<'_> {
    /// Long-run mean arrival rate, when defined.
    pub fn mean_rate(&self) -> Option<f64> {
        match self.kind {
            ArrivalKind::OnOff => self.on_off.map(OnOff::mean_rate),
            ArrivalKind::Offline | ArrivalKind::ClosedLoop | ArrivalKind::Trace => None,
            _ if !self.rate_schedule.is_empty() => {
                let p = self.rate_schedule;
                if p.len() == 1 {
                    return Some(p[0].rate);
                }
                let span = p[p.len() - 1].t_s - p[0].t_s;
                let area: f64 = p.windows(2).map(|w| (w[1].t_s - w[0].t_s) * (w[0].rate + w[1].rate) / 2.0).sum();
                Some(area / span)
            }
            _ => self.rate,
        }
    }
}

use super::validate::{Check, fail, non_negative, positive, slo as check_slo};

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

fn check_length(key: &str, d: &LengthDist, allow_zero: bool) -> Check {
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

fn check_time(key: &str, d: &TimeDist) -> Check {
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

fn check_columns(key: &str, format: TraceFormat, prompt: &Option<String>, output: &Option<String>) -> Check {
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

fn check_process(key: &str, p: &ProcessConfig<'_>) -> Check {
    let k = |s: &str| if key.is_empty() { s.to_string() } else { format!("{key}.{s}") };
    let renewal =
        matches!(p.kind, ArrivalKind::Poisson | ArrivalKind::Gamma | ArrivalKind::Weibull | ArrivalKind::Deterministic);
    if !renewal && p.rate.is_some() {
        return fail(
            &k("rate"),
            format!("is not used by arrival = \"{}\"", p.kind.as_str()),
            match p.kind {
                ArrivalKind::OnOff => "set the rates in [on_off] (on_rate, off_rate) and remove rate",
                ArrivalKind::Offline => "remove rate: offline requests all arrive at t = 0",
                ArrivalKind::Trace => {
                    "remove rate: the trace sets the arrivals (scale them with speedup or target_rate)"
                }
                _ => "remove rate, or pick arrival = \"poisson\"",
            },
        );
    }
    if p.on_off.is_some() && p.kind != ArrivalKind::OnOff {
        return fail(
            &k("on_off"),
            "only applies to arrival = \"on-off\"",
            "set arrival = \"on-off\" or remove [on_off]",
        );
    }
    if (!p.rate_schedule.is_empty() || p.diurnal.is_some()) && p.kind != ArrivalKind::Poisson {
        return fail(
            &k(if p.diurnal.is_some() { "diurnal" } else { "rate_schedule" }),
            "a time-varying rate applies to Poisson arrivals only",
            "set arrival = \"poisson\"",
        );
    }
    match p.kind {
        ArrivalKind::Gamma => match (p.cv, p.burstiness) {
            (Some(_), Some(_)) => {
                return fail(&k("burstiness"), "cv and burstiness are both set", "keep one: cv = 1/sqrt(burstiness)");
            }
            (None, None) => {
                return fail(
                    &k("cv"),
                    "gamma arrivals need cv or burstiness",
                    "set cv = 2.0 (burstier than Poisson) or burstiness = 0.25",
                );
            }
            (Some(v), None) if !(0.001..=30.0).contains(&v) => {
                return fail(
                    &k("cv"),
                    format!("must be between 0.001 and 30 for gamma gaps, got {v}"),
                    "use e.g. cv = 2.0",
                );
            }
            (None, Some(b)) if !(0.001..=1e6).contains(&b) => {
                return fail(
                    &k("burstiness"),
                    format!("must be between 0.001 and 1e6, got {b}"),
                    "use e.g. burstiness = 0.25",
                );
            }
            _ => {}
        },
        ArrivalKind::Weibull => {
            if p.burstiness.is_some() {
                return fail(
                    &k("burstiness"),
                    "only applies to arrival = \"gamma\"",
                    "give Weibull gaps their cv instead",
                );
            }
            match p.cv {
                None => {
                    return fail(
                        &k("cv"),
                        "Weibull arrivals need cv",
                        "set cv = 2.0 (burstier than Poisson) or 0.5 (smoother)",
                    );
                }
                Some(v) if !(0.05..=20.0).contains(&v) => {
                    return fail(
                        &k("cv"),
                        format!("must be between 0.05 and 20 for Weibull gaps, got {v}"),
                        "use e.g. cv = 2.0",
                    );
                }
                _ => {}
            }
        }
        _ => {
            if p.cv.is_some() {
                return fail(
                    &k("cv"),
                    "only applies to arrival = \"gamma\" or \"weibull\"",
                    "remove cv, or set arrival = \"gamma\"",
                );
            }
            if p.burstiness.is_some() {
                return fail(
                    &k("burstiness"),
                    "only applies to arrival = \"gamma\"",
                    "remove burstiness, or set arrival = \"gamma\"",
                );
            }
        }
    }
    if p.kind == ArrivalKind::OnOff {
        let Some(o) = p.on_off else {
            return fail(
                &k("on_off"),
                "arrival = \"on-off\" needs [on_off]",
                "add on_off = { on_rate = 20.0, off_rate = 1.0, on_mean_s = 10.0, off_mean_s = 30.0 }",
            );
        };
        non_negative(&k("on_off.on_rate"), o.on_rate)?;
        non_negative(&k("on_off.off_rate"), o.off_rate)?;
        positive(&k("on_off.on_mean_s"), o.on_mean_s)?;
        positive(&k("on_off.off_mean_s"), o.off_mean_s)?;
        if o.on_rate + o.off_rate <= 0.0 {
            return fail(&k("on_off.on_rate"), "both rates are 0: nothing would ever arrive", "set on_rate > 0");
        }
    }
    if renewal {
        if !p.rate_schedule.is_empty() {
            if p.rate.is_some() {
                return fail(
                    &k("rate"),
                    "rate and rate_schedule are both set",
                    "keep one: the schedule gives the rate at every time",
                );
            }
            if p.diurnal.is_some() {
                return fail(&k("diurnal"), "diurnal and rate_schedule are both set", "keep one of them");
            }
            let mut prev = f64::NEG_INFINITY;
            for (i, pt) in p.rate_schedule.iter().enumerate() {
                let key = k(&format!("rate_schedule[{i}]"));
                non_negative(&format!("{key}.t_s"), pt.t_s)?;
                non_negative(&format!("{key}.rate"), pt.rate)?;
                if pt.t_s <= prev {
                    return fail(
                        &format!("{key}.t_s"),
                        format!("times must increase, but {} follows {prev}", pt.t_s),
                        "list the points in time order",
                    );
                }
                prev = pt.t_s;
            }
            if p.rate_schedule.iter().all(|x| x.rate == 0.0) {
                return fail(
                    &k("rate_schedule"),
                    "every rate is 0: nothing would ever arrive",
                    "give some point a rate > 0",
                );
            }
        } else {
            match p.rate {
                None => {
                    return fail(&k("rate"), "is required by this arrival process", "set rate = <requests per second>");
                }
                Some(r) => positive(&k("rate"), r)?,
            }
        }
        if let Some(d) = p.diurnal {
            let rate = p.rate.unwrap_or(0.0);
            non_negative(&k("diurnal.amplitude"), d.amplitude)?;
            if d.amplitude > rate {
                return fail(
                    &k("diurnal.amplitude"),
                    format!("an amplitude of {} above a mean rate of {rate} would make the rate negative", d.amplitude),
                    format!("use amplitude <= {rate}"),
                );
            }
            positive(&k("diurnal.period_s"), d.period_s)?;
            if !d.phase_s.is_finite() {
                return fail(&k("diurnal.phase_s"), "must be a finite number", "use e.g. phase_s = 0");
            }
        }
    }
    Ok(())
}

impl WorkloadConfig {
    /// Checks every workload value, given the run length.
    pub(super) fn validate(&self, num_requests: Option<u64>, duration_s: Option<f64>, warmup_s: f64) -> Check {
        let kind = self.arrival_kind();
        if matches!(kind, ArrivalKind::Offline | ArrivalKind::ClosedLoop)
            && !self.classes.is_empty()
            && self.classes.iter().all(|c| c.own_process().is_some())
        {
            return fail(
                "workload.classes",
                format!(
                    "arrival = \"{}\" sends requests of the classes that have a weight, and none has one",
                    kind.as_str()
                ),
                "give at least one class a weight",
            );
        }
        let uses_common = self.classes.is_empty() || self.classes.iter().any(|c| c.own_process().is_none());
        if uses_common {
            check_process("workload", &self.process())?;
        } else if self.arrival.is_some() || self.rate.is_some() {
            return fail(
                if self.rate.is_some() { "workload.rate" } else { "workload.arrival" },
                "no class uses the common arrival process: every class has its own",
                "remove it, or give some class a weight instead of its own rate",
            );
        }
        match kind {
            ArrivalKind::Offline => {
                if self.sessions.is_some() || self.classes.iter().any(|c| c.own_process().is_some()) {
                    return fail(
                        if self.sessions.is_some() { "workload.sessions" } else { "workload.classes" },
                        "offline requests all arrive at t = 0: later session turns and classes with their own \
                         arrival process cannot be combined with them",
                        "use an open-loop process (e.g. arrival = \"poisson\") or a closed loop instead",
                    );
                }
                if warmup_s > 0.0 {
                    return fail(
                        "warmup_s",
                        "every request of an offline run arrives at t = 0, so a warm-up would exclude all of them",
                        "remove warmup_s (or set it to 0) for arrival = \"offline\"",
                    );
                }
                if duration_s.is_some() {
                    return fail(
                        "duration_s",
                        "offline arrivals need a request count",
                        "use num_requests with arrival = \"offline\"",
                    );
                }
            }
            ArrivalKind::ClosedLoop => match &self.closed_loop {
                None => {
                    return fail(
                        "workload.closed_loop",
                        "arrival = \"closed-loop\" needs [workload.closed_loop]",
                        "add closed_loop = { users = 32, think_time_s = { dist = \"exponential\", mean = 1.0 } }",
                    );
                }
                Some(c) => {
                    if c.users == 0 {
                        return fail("workload.closed_loop.users", "must be at least 1", "set users >= 1");
                    }
                    check_time("workload.closed_loop.think_time_s", &c.think_time_s)?;
                }
            },
            ArrivalKind::Trace => {
                let Some(t) = &self.trace else {
                    return fail(
                        "workload.trace",
                        "arrival = \"trace\" needs [workload.trace]",
                        "add [workload.trace] with file = \"traces/...\" and format = \"azure\", \"mooncake\", \"csv\" or \"vllm-json\"",
                    );
                };
                self.check_trace(t, num_requests, duration_s)?;
            }
            _ => {}
        }
        if self.closed_loop.is_some() && kind != ArrivalKind::ClosedLoop {
            return fail(
                "workload.closed_loop",
                "only applies to arrival = \"closed-loop\"",
                "set arrival = \"closed-loop\" or remove it",
            );
        }
        if self.trace.is_some() && kind != ArrivalKind::Trace {
            return fail(
                "workload.trace",
                "only applies to arrival = \"trace\"",
                "set arrival = \"trace\" or remove [workload.trace]",
            );
        }
        self.check_ramp(num_requests)?;
        // Lengths: the workload's, or every class's own.
        let trace = kind == ArrivalKind::Trace;
        if self.lengths.is_some() && (self.prompt_tokens.is_some() || self.output_tokens.is_some()) {
            return fail(
                "workload.lengths",
                "joint lengths and prompt_tokens/output_tokens are both set",
                "keep [workload.lengths] (pairs from a file) or the two distributions",
            );
        }
        if let Some(j) = &self.lengths {
            check_columns("workload.lengths", j.format, &j.prompt_column, &j.output_column)?;
        }
        for (key, d, zero) in [
            ("workload.prompt_tokens", &self.prompt_tokens, false),
            ("workload.output_tokens", &self.output_tokens, true),
        ] {
            if let Some(d) = d {
                check_length(key, d, zero)?;
            }
        }
        let has_default = self.lengths.is_some() || (self.prompt_tokens.is_some() && self.output_tokens.is_some());
        if !has_default && !trace && self.classes.is_empty() {
            let missing =
                if self.prompt_tokens.is_none() { "workload.prompt_tokens" } else { "workload.output_tokens" };
            return fail(
                missing,
                "is required: it sets the request lengths",
                "write e.g. prompt_tokens = { dist = \"lognormal\", mean = 1000, cv = 1.0 }, or [workload.lengths] to resample a file",
            );
        }
        if let Some(s) = &self.sessions {
            if trace {
                return fail(
                    "workload.sessions",
                    "a replayed trace cannot also generate sessions",
                    "use the trace's session_column (format = \"csv\") instead",
                );
            }
            check_length("workload.sessions.turns", &s.turns, false)?;
            check_time("workload.sessions.think_time_s", &s.think_time_s)?;
            if let Some(n) = &s.new_tokens {
                check_length("workload.sessions.new_tokens", n, false)?;
            }
        }
        self.check_classes(has_default, trace)
    }

    fn check_ramp(&self, num_requests: Option<u64>) -> Check {
        if (self.ramp_up.is_some() || self.rescale_to_rate)
            && (self.sessions.is_some() || self.classes.iter().any(|c| c.own_process().is_some()))
        {
            return fail(
                if self.ramp_up.is_some() { "workload.ramp_up" } else { "workload.rescale_to_rate" },
                "ramp-up and rescaling count the requests of the common process, so they cannot be combined with \
                 sessions or classes that have their own arrival process",
                "remove them, or give every class a weight instead of its own process",
            );
        }
        let renewal = matches!(
            self.arrival_kind(),
            ArrivalKind::Poisson | ArrivalKind::Gamma | ArrivalKind::Weibull | ArrivalKind::Deterministic
        ) && self.rate_schedule.is_empty()
            && self.diurnal.is_none();
        if let Some(r) = &self.ramp_up {
            if !renewal {
                return fail(
                    "workload.ramp_up",
                    "ramp-up applies to poisson, gamma, weibull or deterministic arrivals at a fixed rate",
                    "remove ramp_up, or use a rate_schedule for other shapes",
                );
            }
            if num_requests.is_none() {
                return fail(
                    "workload.ramp_up",
                    "ramp-up goes from the first to the last request, so it needs num_requests",
                    "set num_requests = N",
                );
            }
            positive("workload.ramp_up.start_rate", r.start_rate)?;
            if let Some(e) = r.end_rate {
                positive("workload.ramp_up.end_rate", e)?;
            }
            if self.rescale_to_rate {
                return fail(
                    "workload.rescale_to_rate",
                    "does not apply with a ramp-up (vLLM only rescales a fixed rate)",
                    "remove one of them",
                );
            }
        }
        if self.rescale_to_rate {
            if !renewal {
                return fail(
                    "workload.rescale_to_rate",
                    "applies to poisson, gamma, weibull or deterministic arrivals at a fixed rate",
                    "remove it",
                );
            }
            if num_requests.is_none() {
                return fail(
                    "workload.rescale_to_rate",
                    "needs num_requests (the last request is sent at num_requests / rate)",
                    "set num_requests = N",
                );
            }
        }
        Ok(())
    }

    fn check_trace(&self, t: &TraceReplay, num_requests: Option<u64>, duration_s: Option<f64>) -> Check {
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

    fn check_classes(&self, has_default: bool, trace: bool) -> Check {
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            let key = format!("workload.classes[{i}]");
            let k = |s: &str| format!("{key}.{s}");
            if c.name.trim().is_empty() {
                return fail(&k("name"), "is empty", "name the class, e.g. name = \"chat\"");
            }
            if c.name.contains([',', '"', '\n', '\r']) {
                return fail(
                    &k("name"),
                    format!("class name {:?} contains a comma, quote or line break", c.name),
                    "use letters, digits, '-' or '_'",
                );
            }
            if !seen.insert(c.name.as_str()) {
                return fail(
                    &k("name"),
                    format!("class \"{}\" is defined twice", c.name),
                    "give every class its own name",
                );
            }
            match (c.weight, c.own_process()) {
                (Some(_), Some(_)) => {
                    return fail(
                        &k("weight"),
                        "a class takes a share of the common arrivals (weight) or has its own process (rate, arrival), not both",
                        "keep one of them",
                    );
                }
                (Some(w), None) => positive(&k("weight"), w)?,
                (None, None) if self.classes.len() > 1 && !trace => {
                    return fail(
                        &k("weight"),
                        format!("class \"{}\" has neither a weight nor its own arrival process", c.name),
                        "set weight = <share> or rate = <requests per second>",
                    );
                }
                (None, Some(p)) => {
                    if matches!(p.kind, ArrivalKind::ClosedLoop | ArrivalKind::Trace | ArrivalKind::Offline) {
                        return fail(
                            &k("arrival"),
                            format!("a class's own process cannot be \"{}\"", p.kind.as_str()),
                            "use poisson, gamma, weibull, deterministic or on-off, or give the class a weight",
                        );
                    }
                    check_process(&key, &p)?;
                }
                _ => {}
            }
            if let Some(j) = &c.lengths {
                if c.prompt_tokens.is_some() || c.output_tokens.is_some() {
                    return fail(
                        &k("lengths"),
                        "joint lengths and prompt_tokens/output_tokens are both set",
                        "keep one of them",
                    );
                }
                check_columns(&k("lengths"), j.format, &j.prompt_column, &j.output_column)?;
            }
            if let Some(d) = &c.prompt_tokens {
                check_length(&k("prompt_tokens"), d, false)?;
            }
            if let Some(d) = &c.output_tokens {
                check_length(&k("output_tokens"), d, true)?;
            }
            let own = c.lengths.is_some() || (c.prompt_tokens.is_some() && c.output_tokens.is_some());
            let partial = c.prompt_tokens.is_some() || c.output_tokens.is_some();
            if !trace && !own && !has_default {
                let missing = if c.prompt_tokens.is_none() && (partial || self.prompt_tokens.is_none()) {
                    "prompt_tokens"
                } else {
                    "output_tokens"
                };
                let merged = if missing == "prompt_tokens" {
                    self.prompt_tokens.is_some()
                } else {
                    self.output_tokens.is_some()
                };
                if !merged {
                    return fail(
                        &k(missing),
                        format!("class \"{}\" has no {missing} and the workload sets none", c.name),
                        format!("set {missing} in the class or in [workload]"),
                    );
                }
            }
            if let Some(s) = &c.slo {
                if s.percentile.is_some() || s.min_attainment.is_some() {
                    return fail(
                        &k(if s.percentile.is_some() { "slo.percentile" } else { "slo.min_attainment" }),
                        "the rule for capacity and plan applies to every class alike",
                        "set percentile or min_attainment in [slo], and only objectives (ttft_ms, tpot_ms, e2e_ms) in a class",
                    );
                }
                check_slo(&k("slo"), s)?;
            }
            if let Some(r) = c.token_rate_limit {
                positive(&k("token_rate_limit"), r)?;
            }
            if let Some(b) = c.token_burst {
                positive(&k("token_burst"), b)?;
                if c.token_rate_limit.is_none() {
                    return fail(
                        &k("token_burst"),
                        "applies with token_rate_limit",
                        "set token_rate_limit too, or remove token_burst",
                    );
                }
            }
            if let Some(a) = c.spec_acceptance {
                super::validate::acceptance(&k("spec_acceptance"), a)?;
            }
            if c.prefix_group.is_some() && c.prefix_tokens == 0 {
                return fail(
                    &k("prefix_tokens"),
                    "a prefix group needs the length of its shared prompt",
                    "set prefix_tokens = <tokens of the shared system prompt>",
                );
            }
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
