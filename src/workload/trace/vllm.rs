//! The result JSON of `vllm bench serve --save-result --save-detailed`.

use super::scan::*;
use super::{Trace, TraceError, TraceRow};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// vLLM benchmark result JSON
// ---------------------------------------------------------------------------------------------

#[derive(serde::Deserialize)]
pub(super) struct VllmDoc {
    pub(super) input_lens: Option<Vec<Value>>,
    pub(super) output_lens: Option<Vec<Value>>,
    pub(super) start_times: Option<Vec<Value>>,
}

/// Line of the first `"key":` in a JSON document (1 when not found).
pub(super) fn key_line(text: &str, key: &str) -> u32 {
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

pub(super) fn parse_vllm(text: &str, skip_bad: bool) -> Result<Trace, TraceError> {
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
