//! What the format readers share: the row builder, interned strings, counts and decimal
//! times, line numbers and the hints of error messages.

use super::{Trace, TraceError};
use std::collections::HashMap;

pub(super) const AZURE_HEADER: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

pub(super) const HINT_COUNT: &str = "token counts are non-negative integers (0 to 4294967295); fix the value, or set \
                          on_bad_row = \"skip\" to drop the row";
pub(super) const HINT_DATETIME: &str = "timestamps are UTC dates and times like 2023-11-16 18:17:03.9799600 (YYYY-MM-DD \
                             HH:MM:SS with up to 9 fractional digits; a T separator and a trailing Z are \
                             accepted); fix the value, or set on_bad_row = \"skip\" to drop the row";
pub(super) const HINT_BACKWARDS: &str = "sort the trace by time, or set on_bad_row = \"skip\"";
pub(super) const HINT_MOONCAKE_LINE: &str = "each line must be one JSON object like {\"timestamp\": 0, \"input_length\": \
                                  6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2]}; fix the line, or set \
                                  on_bad_row = \"skip\" to drop it";
pub(super) const HINT_HASH: &str = "hash_ids is a list of prefix-block ids, integers from 0 to 4294967295; fix the line, \
                         or set on_bad_row = \"skip\" to drop it";
pub(super) const HINT_VLLM: &str =
    "the file should be the result JSON of `vllm bench serve --save-result --save-detailed`";

/// A value for a message: quoted, and cut short if long.
pub(super) fn show(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}...")
    }
}

/// At most 12 names, each escaped and cut by [`show`], then how many more:
/// an error quotes a short, printable prefix of whatever file was named.
pub(super) fn show_list(names: &[String]) -> String {
    const MAX: usize = 12;
    let mut out: Vec<String> = names.iter().take(MAX).map(|n| show(n)).collect();
    if names.len() > MAX {
        out.push(format!("... and {} more", names.len() - MAX));
    }
    out.join(", ")
}

/// Seconds from nanoseconds, exact to the nearest double.
fn ns_to_secs(ns: i128) -> f64 {
    match i64::try_from(ns) {
        Ok(v) => v as f64 / 1e9,
        Err(_) => ns as f64 / 1e9,
    }
}

/// 1-based line number of the line at 0-based index `idx`.
pub(super) fn line_no(idx: usize) -> u32 {
    u32::try_from(idx + 1).unwrap_or(u32::MAX)
}

/// Line number (1-based) of byte offset `pos` in `text`.
pub(super) fn line_of_offset(text: &str, pos: usize) -> u32 {
    let pos = pos.min(text.len());
    let newlines = text.as_bytes()[..pos].iter().filter(|&&b| b == b'\n').count();
    line_no(newlines)
}

/// An estimate of how often `byte` occurs in `text`, from its first 64 KiB, to pre-size vectors.
/// At most `text.len() / min_len + 1`, where `min_len` is the fewest bytes an item takes, so an
/// unrepresentative sample cannot reserve far more than the text could hold.
pub(super) fn estimate_count(text: &str, byte: u8, min_len: usize) -> usize {
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
pub(super) fn content(raw: &str) -> Option<&str> {
    let line = raw.strip_suffix('\r').unwrap_or(raw);
    if line.bytes().all(|b| b.is_ascii_whitespace()) { None } else { Some(line) }
}

/// Parses a token count: a non-negative integer up to `u32::MAX` (`12.0` is accepted).
pub(super) fn parse_count(s: &str) -> Result<u32, String> {
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
pub(super) fn parse_decimal_ns(s: &str, scale: u32) -> Result<i128, String> {
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

/// Collects rows, enforces time order and handles bad rows.
pub(super) struct Builder {
    pub(super) trace: Trace,
    pub(super) skip_bad: bool,
    /// Timestamp of the first kept row, ns.
    t0: Option<i128>,
    /// Timestamp and line of the previous kept row.
    pub(super) prev: Option<(i128, u32)>,
    /// Rows skipped for going back behind the previous kept row, counted
    /// for the latest such row, and the most behind any one row: (line, count).
    behind: (u32, u64),
    worst_behind: (u32, u64),
}

impl Builder {
    pub(super) fn new(skip_bad: bool, rows: usize) -> Self {
        Builder {
            trace: Trace { rows: Vec::with_capacity(rows), ..Trace::default() },
            skip_bad,
            t0: None,
            prev: None,
            behind: (0, 0),
            worst_behind: (0, 0),
        }
    }

    /// A bad data row: counted (with `skip_bad`) or returned.
    pub(super) fn bad(&mut self, e: TraceError) -> Result<(), TraceError> {
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
    pub(super) fn order(&mut self, ns: i128, line: u32, field: &str) -> Result<f64, TraceError> {
        if let Some((p, pl)) = self.prev
            && ns < p
        {
            self.behind = if self.behind.0 == pl { (pl, self.behind.1 + 1) } else { (pl, 1) };
            if self.behind.1 > self.worst_behind.1 {
                self.worst_behind = self.behind;
            }
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

    pub(super) fn finish(mut self) -> Result<Trace, TraceError> {
        self.trace.skipped_behind = self.worst_behind;
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
pub(super) struct Interner {
    pub(super) map: HashMap<String, u32>,
}

impl Interner {
    pub(super) fn id(&mut self, s: &str, names: Option<&mut Vec<String>>) -> u32 {
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

/// Digits of a count at `b[i..]` (at most 10, value at most `u32::MAX`): the value and the
/// position after the digits.
#[inline(always)]
pub(super) fn count_fast(b: &[u8], i: usize) -> Option<(u32, usize)> {
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
