//! Mooncake JSON-lines traces.

use super::scan::*;
use super::{Trace, TraceError, TraceRow};
use serde_json::Value;
use std::borrow::Cow;

// ---------------------------------------------------------------------------------------------
// Mooncake JSON lines
// ---------------------------------------------------------------------------------------------

/// The number fields of one Mooncake line, as text.
#[derive(Default)]
pub(super) struct MoonFields<'a> {
    pub(super) timestamp: Option<Cow<'a, str>>,
    pub(super) input: Option<Cow<'a, str>>,
    pub(super) output: Option<Cow<'a, str>>,
}

// The scanners and the row check are kept out of line: inlined into the loop, they made it
// markedly slower (register pressure).

/// Fastest path: a line laid out exactly as the Mooncake traces are, `{"timestamp": N,
/// "input_length": N, "output_length": N, "hash_ids": [N, N]}` (integers, one space after each
/// colon and comma). `None` when the line differs in any way; [`scan_mooncake`] then reads it.
#[inline(never)]
pub(super) fn scan_mooncake_exact<'a>(
    text: &'a str,
    pos: usize,
    hashes: &mut Vec<u32>,
) -> Option<(MoonFields<'a>, usize)> {
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
    i = hash_list(b, i, hashes)?;
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

/// Skips blanks within a line (a newline ends the line, so it is not skipped).
#[inline(always)]
fn blanks(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\r') {
        *i += 1;
    }
}

/// The counts of a `hash_ids` list that starts just after its `[` at `b[i..]`, pushed to
/// `hashes`; returns the position after the `]`. Both scanners read lists with it: the traces'
/// own `", "` separator is tried first, then blanks anywhere around the commas. `None`: not a
/// list of counts (the caller falls back to a slower reader).
#[inline(always)]
fn hash_list(b: &[u8], mut i: usize, hashes: &mut Vec<u32>) -> Option<usize> {
    blanks(b, &mut i);
    if b.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        let (v, next) = count_fast(b, i)?;
        hashes.push(v);
        i = next;
        if b.get(i..i + 2) == Some(b", ") && b.get(i + 2).is_some_and(u8::is_ascii_digit) {
            i += 2;
            continue;
        }
        blanks(b, &mut i);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b']') => return Some(i + 1),
            _ => return None,
        }
        blanks(b, &mut i);
    }
}

/// Fast scanner for a flat Mooncake object on the line that starts at `text[pos..]`. Pushes the
/// hash ids to `hashes`; returns the fields and the position after the line's `\n`. `None`: the
/// line is not a simple flat object the scanner understands (the caller falls back to serde_json).
#[inline(never)]
pub(super) fn scan_mooncake<'a>(text: &'a str, pos: usize, hashes: &mut Vec<u32>) -> Option<(MoonFields<'a>, usize)> {
    let b = text.as_bytes();
    let ws = |i: &mut usize| blanks(b, i);
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
                    i = hash_list(b, i + 1, hashes)?;
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
pub(super) fn mooncake_slow<'a>(line: &str, ln: u32, hashes: &mut Vec<u32>) -> Result<MoonFields<'a>, TraceError> {
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

pub(super) fn parse_mooncake(text: &str, skip_bad: bool) -> Result<Trace, TraceError> {
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
pub(super) fn mooncake_row(f: MoonFields<'_>, ln: u32, start: usize, b: &mut Builder) -> Result<(), TraceError> {
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
