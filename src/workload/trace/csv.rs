//! CSV traces: the Azure LLM inference trace and generic CSV with a column mapping.

use super::datetime::*;
use super::scan::*;
use super::{Columns, TimeUnit, Trace, TraceError, TraceRow};
use std::borrow::Cow;

// ---------------------------------------------------------------------------------------------
// CSV (Azure and generic)
// ---------------------------------------------------------------------------------------------

/// A field of a CSV line: byte range, and whether it is quoted with `""` escapes inside.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) escaped: bool,
}

/// Splits a CSV line into fields. `Err(i)`: field `i` has a malformed quote.
pub(super) fn split_csv(line: &str, out: &mut Vec<Span>) -> Result<(), usize> {
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
pub(super) fn field_text(line: &str, sp: Span) -> Cow<'_, str> {
    let s = line.get(sp.start..sp.end).unwrap_or("");
    if sp.escaped { Cow::Owned(s.replace("\"\"", "\"")) } else { Cow::Borrowed(s) }
}

/// Column indices of a generic CSV trace.
pub(super) struct CsvColumns<'c> {
    pub(super) time: Option<(usize, &'c str)>,
    pub(super) unit: TimeUnit,
    pub(super) prompt: (usize, &'c str),
    pub(super) output: (usize, &'c str),
    pub(super) class: Option<(usize, &'c str)>,
    pub(super) session: Option<(usize, &'c str)>,
}

pub(super) fn time_hint(unit: TimeUnit) -> String {
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

pub(super) fn parse_time(s: &str, unit: TimeUnit) -> Result<i128, String> {
    match unit {
        TimeUnit::Datetime => parse_datetime_ns(s),
        TimeUnit::S => parse_decimal_ns(s, 9),
        TimeUnit::Ms => parse_decimal_ns(s, 6),
        TimeUnit::Us => parse_decimal_ns(s, 3),
    }
}

/// Index of the header column `name`, or an error listing the header's columns.
pub(super) fn column<'c>(names: &[String], header_line: u32, name: &'c str) -> Result<(usize, &'c str), TraceError> {
    match names.iter().position(|n| n == name) {
        Some(i) => Ok((i, name)),
        None => Err(TraceError::new(
            header_line,
            name,
            format!("no column named {} in the header", show(name)),
            format!("the header's columns are: {}; map the field to one of them", show_list(names)),
        )),
    }
}

pub(super) fn parse_csv(text: &str, cols: &Columns, azure: bool, skip_bad: bool) -> Result<Trace, TraceError> {
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
    let cols = CsvColumns {
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
    let t_hint = time_hint(cols.unit);
    let row_hint = format!(
        "every row needs a value for each mapped column, in the header's order ({}); fix the row, or set \
         on_bad_row = \"skip\" to drop it",
        show(&header_shown)
    );

    // The Azure layout (datetime, prompt, output; nothing else) has a fast path.
    let fast = names.len() == 3
        && cols.unit == TimeUnit::Datetime
        && cols.time.is_some_and(|c| c.0 == 0)
        && cols.prompt.0 == 1
        && cols.output.0 == 2
        && cols.class.is_none()
        && cols.session.is_none();
    for (idx, raw) in lines {
        let Some(line) = content(raw) else { continue };
        let ln = line_no(idx);
        if fast && let Some((ns, prompt, output)) = azure_fast(line) {
            match b.order(ns, ln, cols.time.map_or("", |c| c.1)) {
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
        let res = csv_row(line, ln, &cols, &mut spans, &mut b, &t_hint, &row_hint, &names, &mut classes, &mut sessions);
        if let Err(e) = res {
            b.bad(e)?;
        }
    }
    b.trace.num_sessions = u32::try_from(sessions.map.len()).unwrap_or(u32::MAX);
    b.finish()
}

/// Fast path for a row `datetime,count,count`; `None` when anything is unusual (the general path
/// then reads the row and explains any problem).
pub(super) fn azure_fast(line: &str) -> Option<(i128, u32, u32)> {
    let b = line.as_bytes();
    let comma = b.iter().position(|&c| c == b',')?;
    let ns = datetime_ns(&b[..comma]).ok()?;
    let (prompt, i) = count_fast(b, comma + 1)?;
    if b.get(i) != Some(&b',') {
        return None;
    }
    let (output, j) = count_fast(b, i + 1)?;
    if j == b.len() { Some((ns, prompt, output)) } else { None }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn csv_row(
    line: &str,
    ln: u32,
    cols: &CsvColumns<'_>,
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
    if n != names.len() {
        // A row cut short (or two rows run together) must not pass for a complete one.
        let field = names.get(n).map_or("row", |s| s.as_str());
        return Err(TraceError::new(
            ln,
            field,
            format!("the row has {n} fields, the header has {}: it is cut short or merged with another", names.len()),
            row_hint,
        ));
    }
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
    let time = match cols.time {
        Some(c) => {
            let s = get(c)?;
            let ns = parse_time(&s, cols.unit).map_err(|m| TraceError::new(ln, c.1, m, t_hint))?;
            Some((ns, c.1))
        }
        None => None,
    };
    let prompt = parse_count(&get(cols.prompt)?).map_err(|m| TraceError::new(ln, cols.prompt.1, m, HINT_COUNT))?;
    let output = parse_count(&get(cols.output)?).map_err(|m| TraceError::new(ln, cols.output.1, m, HINT_COUNT))?;
    let class = match cols.class {
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
    let session = match cols.session {
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
