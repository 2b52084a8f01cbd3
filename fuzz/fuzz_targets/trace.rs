//! Every trace and length reader: any bytes in any format (with and without
//! skipping bad rows) must give a trace or an error naming line and field.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servesim::workload::trace::{Columns, TimeUnit, TraceFormat, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let csv = Columns {
        time: Some("t".into()),
        time_unit: TimeUnit::S,
        prompt: "p".into(),
        output: "o".into(),
        class: Some("c".into()),
        session: Some("s".into()),
    };
    let lengths =
        Columns { prompt: "num_prefill_tokens".into(), output: "num_decode_tokens".into(), ..Columns::default() };
    for skip in [false, true] {
        let _ = parse(text, TraceFormat::Azure, None, skip);
        let _ = parse(text, TraceFormat::Mooncake, None, skip);
        let _ = parse(text, TraceFormat::VllmJson, None, skip);
        let _ = parse(text, TraceFormat::Csv, Some(&csv), skip);
        let _ = parse(text, TraceFormat::Csv, Some(&lengths), skip);
    }
});
