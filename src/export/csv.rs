//! `requests.csv`: one row per request with every timestamp and derived
//! latency. Times are in seconds and latencies in milliseconds, both rounded
//! to the microsecond; an empty cell means "did not happen". A run with
//! latency attribution (`run --attribution`) adds one column per part,
//! `part_<name>_ms` ([`crate::metrics::Part`]), to the nanosecond, for
//! completed requests (empty for the others): the parts before the first
//! token add up to `ttft_ms`, all of them to `e2el_ms`.

use crate::metrics::{Part, Parts, RequestRecord, Status};
use rayon::prelude::*;
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
    "class",
    "session",
    "prefix_tokens",
    "clipped",
];

/// Appends `x` rounded to `10^-D` in fixed point, then a comma.
#[inline]
fn fixed<const D: u32>(out: &mut Vec<u8>, ib: &mut itoa::Buffer, x: f64) {
    if x.is_finite() {
        let v = round_to_i64(x * const { 10i64.pow(D) as f64 });
        if v < 0 {
            out.push(b'-');
        }
        // The digits of |v| once, with the point put in before the last `D`.
        let digits = ib.format(v.unsigned_abs()).as_bytes();
        let d = D as usize;
        if digits.len() > d {
            let (int, frac) = digits.split_at(digits.len() - d);
            out.extend_from_slice(int);
            out.push(b'.');
            out.extend_from_slice(frac);
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', d - digits.len()));
            out.extend_from_slice(digits);
        }
    }
    out.push(b',');
}

/// `y.round() as i64` (halves away from zero) without a call into the C
/// library: below 2^52 in magnitude the fraction `y − trunc(y)` is exact,
/// above it `y` is already whole.
#[inline]
fn round_to_i64(y: f64) -> i64 {
    if y.abs() < 4_503_599_627_370_496.0 {
        let t = y as i64;
        let f = y - t as f64;
        // (Comparisons, not branches: the sign of a fraction is a coin toss.)
        t + (f >= 0.5) as i64 - (f <= -0.5) as i64
    } else {
        y.round() as i64
    }
}

struct Ctx<'a> {
    warmup: f64,
    classes: &'a [String],
}

fn int(out: &mut Vec<u8>, ib: &mut itoa::Buffer, x: u64) {
    out.extend_from_slice(ib.format(x).as_bytes());
    out.push(b',');
}

/// The name of the column of a latency part.
pub fn part_column(p: Part) -> String {
    format!("part_{}_ms", p.as_str())
}

fn row(
    line: &mut Vec<u8>,
    ib: &mut itoa::Buffer,
    id: usize,
    r: &RequestRecord,
    parts: Option<&Parts>,
    ctx: &Ctx,
    slo_met: Option<bool>,
) {
    let warmup = ctx.warmup;
    int(line, ib, id as u64);
    if r.replica != u32::MAX {
        int(line, ib, r.replica as u64);
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
    int(line, ib, (r.arrival >= warmup) as u64);
    int(line, ib, r.prompt as u64);
    int(line, ib, r.output as u64);
    int(line, ib, r.generated as u64);
    int(line, ib, r.preemptions as u64);
    for x in [r.arrival, r.admitted, r.first_scheduled, r.first_token, r.last_token] {
        fixed::<6>(line, ib, x);
    }
    for x in [r.preprocess(), r.queue_delay(), r.ttft(), r.tpot(), r.e2e()] {
        fixed::<3>(line, ib, x * 1e3);
    }
    match slo_met {
        Some(true) => line.push(b'1'),
        Some(false) => line.push(b'0'),
        None => {}
    }
    line.push(b',');
    line.extend_from_slice(ctx.classes.get(r.class as usize).map_or("", |c| c.as_str()).as_bytes());
    line.push(b',');
    if r.session != u32::MAX {
        int(line, ib, r.session as u64);
    } else {
        line.push(b',');
    }
    int(line, ib, r.prefix as u64);
    line.push(if r.clipped { b'1' } else { b'0' });
    if let Some(parts) = parts {
        // Parts are defined for completed requests only (a request still
        // waiting when it was refused, or when the run ended, has an open
        // wait): empty cells otherwise.
        line.push(b',');
        for &x in parts {
            if r.status == Status::Completed {
                fixed::<6>(line, ib, x * 1e3);
            } else {
                line.push(b',');
            }
        }
        line.pop();
    }
    line.push(b'\n');
}

/// Rows per block formatted by one thread.
const BLOCK: usize = 16_384;
/// Rows formatted together before they are written.
const BATCH: usize = BLOCK * 8;

/// Formats the rows of `records` (whose first id is `first_id`) in parallel
/// blocks and writes them in order (the bytes do not depend on the thread
/// count). The blocks are formatted into the buffers of `pool`, kept from
/// one batch to the next so that their memory is not faulted in again.
fn write_rows(
    w: &mut dyn Write,
    records: &[RequestRecord],
    parts: &[Parts],
    first_id: usize,
    ctx: &Ctx,
    slo_met: &(impl Fn(&RequestRecord) -> Option<bool> + Sync),
    pool: &mut Vec<Vec<u8>>,
) -> io::Result<()> {
    let n_blocks = records.len().div_ceil(BLOCK);
    if pool.len() < n_blocks {
        pool.resize_with(n_blocks, Vec::new);
    }
    records.par_chunks(BLOCK).zip(pool.par_iter_mut()).enumerate().for_each(|(b, (chunk, out))| {
        let mut ib = itoa::Buffer::new();
        out.clear();
        // Rows run to about 150–200 bytes: room for all of them at once.
        out.reserve(chunk.len() * 256);
        for (k, r) in chunk.iter().enumerate() {
            let p = parts.get(b * BLOCK + k);
            row(out, &mut ib, first_id + b * BLOCK + k, r, p, ctx, slo_met(r));
        }
    });
    for out in &pool[..n_blocks] {
        w.write_all(out)?;
    }
    Ok(())
}

fn header(w: &mut dyn Write, attribution: bool) -> io::Result<()> {
    w.write_all(COLUMNS.join(",").as_bytes())?;
    if attribution {
        for p in Part::ALL {
            write!(w, ",{}", part_column(p))?;
        }
    }
    w.write_all(b"\n")
}

/// Writes the CSV of every record of a run, with their latency `parts`
/// (by id) when the run attributed them (else `parts` is empty).
/// `slo_met(record)` says whether a completed request met its SLOs (None: no
/// SLOs); `classes` names the class indices.
pub fn write_requests_csv(
    w: &mut dyn Write,
    records: &[RequestRecord],
    parts: &[Parts],
    warmup: f64,
    classes: &[String],
    slo_met: impl Fn(&RequestRecord) -> Option<bool> + Sync,
) -> io::Result<()> {
    let ctx = Ctx { warmup, classes };
    header(w, !parts.is_empty())?;
    let mut pool = Vec::new();
    for (g, recs) in records.chunks(BATCH).enumerate() {
        let p = parts.get(g * BATCH..(g * BATCH + recs.len()).min(parts.len())).unwrap_or(&[]);
        write_rows(w, recs, p, g * BATCH, &ctx, &slo_met, &mut pool)?;
    }
    Ok(())
}

/// `requests.csv` written while the simulation runs: a
/// [`RecordSink`](crate::sim::RecordSink) that buffers the records handed to
/// it (in id order) and writes them in formatted batches, so that a run need
/// not keep its records. The bytes are those of [`write_requests_csv`]. The
/// first write error is kept, later records are dropped, and
/// [`RequestsCsv::finish`] reports it.
pub struct RequestsCsv {
    path: std::path::PathBuf,
    w: io::BufWriter<std::fs::File>,
    buf: Vec<RequestRecord>,
    /// Their latency parts (attribution on).
    buf_parts: Vec<Parts>,
    /// The formatted blocks' buffers, kept from one batch to the next.
    pool: Vec<Vec<u8>>,
    /// Id of `buf[0]`.
    first_id: usize,
    warmup: f64,
    classes: Vec<String>,
    workload: std::sync::Arc<crate::workload::WorkloadPlan>,
    error: Option<io::Error>,
}

impl RequestsCsv {
    /// Creates `path` and writes the header, for the requests of `setup`'s run.
    pub fn create(path: &std::path::Path, setup: &crate::Setup) -> crate::Result<Self> {
        let fail = |e: io::Error| crate::Error::Runtime(format!("cannot write {}: {e}", path.display()));
        let f = std::fs::File::create(path).map_err(fail)?;
        let mut w = io::BufWriter::with_capacity(1 << 20, f);
        header(&mut w, setup.attribution).map_err(fail)?;
        Ok(RequestsCsv {
            path: path.to_path_buf(),
            w,
            buf: Vec::with_capacity(BATCH),
            buf_parts: Vec::new(),
            pool: Vec::new(),
            first_id: 0,
            warmup: setup.scenario.warmup_s,
            classes: setup.workload.classes.iter().map(|c| c.name.clone()).collect(),
            workload: setup.workload.clone(),
            error: None,
        })
    }

    fn flush_rows(&mut self) {
        if self.error.is_none() {
            let ctx = Ctx { warmup: self.warmup, classes: &self.classes };
            let workload = &self.workload;
            let slo = |r: &RequestRecord| crate::metrics::slo_met(workload, r);
            if let Err(e) =
                write_rows(&mut self.w, &self.buf, &self.buf_parts, self.first_id, &ctx, &slo, &mut self.pool)
            {
                self.error = Some(e);
            }
        }
        self.first_id += self.buf.len();
        self.buf.clear();
        self.buf_parts.clear();
    }

    /// Writes what is buffered and syncs the file; the first error met, if any.
    pub fn finish(mut self) -> crate::Result<()> {
        self.flush_rows();
        let res = match self.error.take() {
            Some(e) => Err(e),
            None => self.w.flush().and_then(|_| self.w.get_ref().sync_all()),
        };
        res.map_err(|e| crate::Error::Runtime(format!("cannot write {}: {e}", self.path.display())))
    }
}

impl crate::sim::RecordSink for RequestsCsv {
    fn record(&mut self, id: u32, r: &RequestRecord, parts: Option<&Parts>) {
        debug_assert_eq!(id as usize, self.first_id + self.buf.len(), "records arrive in id order");
        self.buf.push(*r);
        if let Some(p) = parts {
            self.buf_parts.push(*p);
        }
        if self.buf.len() == BATCH {
            self.flush_rows();
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{RngExt, SeedableRng};

    /// Fixed point as it was written before (integer part and zero-padded fraction apart).
    fn two_parts(x: f64, decimals: u32) -> String {
        if !x.is_finite() {
            return ",".into();
        }
        let scale = 10i64.pow(decimals);
        let v = (x * scale as f64).round() as i64;
        let sign = if v < 0 { "-" } else { "" };
        let v = v.unsigned_abs();
        format!("{sign}{}.{:0w$},", v / scale as u64, v % scale as u64, w = decimals as usize)
    }

    #[test]
    fn fixed_point_cells_are_unchanged() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        let mut ib = itoa::Buffer::new();
        let special = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.0005,
            -0.0005,
            0.0004999,
            1e-9,
            -1e-9,
            999.9999995,
            12345.678901,
            0.0025,
            -0.0025,
            0.0000025,
            4_503_599_627.370_495,
            -4_503_599_627.370_497,
            1e13,
            -1e19,
            f64::NAN,
            f64::INFINITY,
        ];
        let random = (0..100_000).map(|_| {
            let m: f64 = rng.random_range(-1.0..1.0);
            m * 10f64.powi(rng.random_range(-8..10))
        });
        for x in special.into_iter().chain(random) {
            let (mut three, mut six) = (Vec::new(), Vec::new());
            super::fixed::<3>(&mut three, &mut ib, x);
            super::fixed::<6>(&mut six, &mut ib, x);
            assert_eq!(String::from_utf8(three).unwrap(), two_parts(x, 3), "{x} to 3 places");
            assert_eq!(String::from_utf8(six).unwrap(), two_parts(x, 6), "{x} to 6 places");
        }
    }

    #[test]
    fn rounding_is_the_libraries() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(6);
        let halves = (-40..40).map(|k| k as f64 + 0.5);
        let edges = [2f64.powi(52), 2f64.powi(52) - 0.5, 2f64.powi(53), 2f64.powi(63), 1e300, 0.49999999999999994];
        let random = (0..100_000).map(|_| {
            let m: f64 = rng.random_range(-1.0..1.0);
            m * 10f64.powi(rng.random_range(-3..19))
        });
        for y in halves.chain(edges.iter().flat_map(|&e| [e, -e])).chain(random) {
            assert_eq!(super::round_to_i64(y), y.round() as i64, "{y}");
        }
    }
}
