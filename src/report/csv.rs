//! `requests.csv`: one row per request with every timestamp and derived latency.

use crate::metrics::{RequestRecord, Status};
use std::io::{self, Write};

/// Column names, in order.
pub const COLUMNS: &[&str] = &[
    "id",
    "replica",
    "status",
    "reason",
    "measured",
    "prompt_tokens",
    "output_tokens",
    "generated_tokens",
    "preemptions",
    "arrival_s",
    "admitted_s",
    "first_scheduled_s",
    "first_token_s",
    "finish_s",
    "preprocess_ms",
    "queue_ms",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "slo_met",
];

fn f(buf: &mut ryu::Buffer, out: &mut Vec<u8>, x: f64) {
    if x.is_finite() {
        out.extend_from_slice(buf.format_finite(x).as_bytes());
    }
    out.push(b',');
}

fn u(buf: &mut itoa::Buffer, out: &mut Vec<u8>, x: u64) {
    out.extend_from_slice(buf.format(x).as_bytes());
    out.push(b',');
}

/// Writes the CSV. `slo_met(record)` says whether a completed request met its SLOs (None: no SLOs).
pub fn write_requests_csv(
    w: &mut dyn Write,
    records: &[RequestRecord],
    warmup: f64,
    slo_met: impl Fn(&RequestRecord) -> Option<bool>,
) -> io::Result<()> {
    w.write_all(COLUMNS.join(",").as_bytes())?;
    w.write_all(b"\n")?;
    let mut fb = ryu::Buffer::new();
    let mut ib = itoa::Buffer::new();
    let mut line = Vec::with_capacity(1 << 16);
    for (id, r) in records.iter().enumerate() {
        u(&mut ib, &mut line, id as u64);
        if r.replica != u32::MAX {
            u(&mut ib, &mut line, r.replica as u64);
        } else {
            line.push(b',');
        }
        let (status, reason) = match r.status {
            Status::Completed => ("completed", ""),
            Status::InFlight => ("unfinished", ""),
            Status::Rejected(why) => ("rejected", why.as_str()),
        };
        line.extend_from_slice(status.as_bytes());
        line.push(b',');
        line.extend_from_slice(reason.as_bytes());
        line.push(b',');
        u(&mut ib, &mut line, (r.arrival >= warmup) as u64);
        u(&mut ib, &mut line, r.prompt as u64);
        u(&mut ib, &mut line, r.output as u64);
        u(&mut ib, &mut line, r.generated as u64);
        u(&mut ib, &mut line, r.preemptions as u64);
        for x in [r.arrival, r.admitted, r.first_scheduled, r.first_token, r.last_token] {
            f(&mut fb, &mut line, x);
        }
        for x in [r.preprocess(), r.queue_delay(), r.ttft(), r.tpot(), r.e2e()] {
            f(&mut fb, &mut line, x * 1e3);
        }
        match slo_met(r) {
            Some(true) => line.push(b'1'),
            Some(false) => line.push(b'0'),
            None => {}
        }
        line.push(b'\n');
        if line.len() > (1 << 16) - 512 {
            w.write_all(&line)?;
            line.clear();
        }
    }
    w.write_all(&line)
}
