//! Unit tests of the trace readers.

use super::datetime::*;
use super::scan::*;
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

    // Hash lists in other layouts: each scanner reads them itself (no serde fallback needed for
    // these), and every layout gives the same ids.
    for list in ["[1, 2, 3]", "[1,2,3]", "[ 1 ,  2,\t3 ]", "[1,  2, 3]", "[\t]"] {
        let line = format!("{{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": {list}}}");
        let mut ids = Vec::new();
        let (_, next) = super::mooncake::scan_mooncake(&line, 0, &mut ids).unwrap_or_else(|| panic!("{list}"));
        assert_eq!(next, line.len());
        let want: &[u32] = if list == "[\t]" { &[] } else { &[1, 2, 3] };
        assert_eq!(ids, want, "{list}");
        let t = parse(&line, TraceFormat::Mooncake, None, false).unwrap();
        assert_eq!(t.hash_ids, want, "{list}");
    }
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
    assert!(e.hint.contains("\"prompt\", \"o\", \"t\""), "{e}");
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
    // Rows cut short or run together (length files accepted half-cut rows).
    check("2,1", "o", "the row has 2 fields, the header has 3: it is cut short");
    check("2", "p", "the row has 1 fields, the header has 3");
    check("2,1,1,7", "row", "the row has 4 fields, the header has 3");
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

/// A trace shipped in scenarios/traces/ (missing is a failure, not a skip).
fn shipped(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/traces").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mean_prompt(t: &Trace) -> f64 {
    t.rows.iter().map(|r| f64::from(r.prompt)).sum::<f64>() / t.rows.len() as f64
}

#[test]
fn real_traces() {
    let t = parse(&shipped("AzureLLMInferenceTrace_code.csv"), TraceFormat::Azure, None, false).unwrap();
    assert_eq!(t.rows.len(), 8819);
    assert!((mean_prompt(&t) - 2047.8).abs() < 1.0, "{}", mean_prompt(&t));
    assert_eq!(t.rows[1].t, 0.052);
    assert!(t.rows.windows(2).all(|w| w[0].t <= w[1].t));
    let t = parse(&shipped("AzureLLMInferenceTrace_conv.csv"), TraceFormat::Azure, None, false).unwrap();
    assert_eq!(t.rows.len(), 19366);
    assert!((mean_prompt(&t) - 1154.7).abs() < 1.0, "{}", mean_prompt(&t));
    let t = parse(&shipped("conversation_trace.jsonl"), TraceFormat::Mooncake, None, false).unwrap();
    assert_eq!(t.rows.len(), 12031);
    assert!((mean_prompt(&t) - 12035.0).abs() < 1.0, "{}", mean_prompt(&t));
    assert_eq!(t.rows[0].hashes(&t), (0..14).collect::<Vec<u32>>());
    // Every 512-token block of the prompt has a hash id.
    assert!(t.rows.iter().all(|r| r.hash_len == r.prompt.div_ceil(512)));
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
    println!("azure:    {n} rows, {:.1} MB in {dt:.3} s: {:.2} M rows/s", text.len() as f64 / 1e6, n as f64 / dt / 1e6);

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
    println!("mooncake: {n} rows, {:.1} MB in {dt:.3} s: {:.2} M rows/s", text.len() as f64 / 1e6, n as f64 / dt / 1e6);
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
