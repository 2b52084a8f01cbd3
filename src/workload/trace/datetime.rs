//! UTC calendar timestamps to integer nanoseconds, exactly.

use super::scan::show;

/// Days from 1970-01-01 to the given proleptic Gregorian date (H. Hinnant's algorithm).
pub(super) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(super) fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Why a timestamp could not be read.
pub(super) enum DtError {
    Shape,
    TooManyDigits,
    Month(u32),
    Day(u32, u32, u32),
    Time(u32, u32, u32),
}

/// Reads `YYYY-MM-DD HH:MM:SS[.f{0,9}][Z]` (or `T` instead of the space), UTC, into nanoseconds
/// since the Unix epoch.
pub(super) fn datetime_ns(b: &[u8]) -> Result<i128, DtError> {
    let Some(h) = b.get(..19) else { return Err(DtError::Shape) };
    let d = |i: usize| u32::from(h[i].wrapping_sub(b'0'));
    let mut not_digit = false;
    for i in [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18] {
        not_digit |= d(i) > 9;
    }
    if not_digit || h[4] != b'-' || h[7] != b'-' || (h[10] != b' ' && h[10] != b'T') || h[13] != b':' || h[16] != b':' {
        return Err(DtError::Shape);
    }
    let year = d(0) * 1000 + d(1) * 100 + d(2) * 10 + d(3);
    let (month, day) = (d(5) * 10 + d(6), d(8) * 10 + d(9));
    let (hour, min, sec) = (d(11) * 10 + d(12), d(14) * 10 + d(15), d(17) * 10 + d(18));
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let mut n = 0;
        while let Some(&c) = b.get(i) {
            let x = c.wrapping_sub(b'0');
            if x > 9 {
                break;
            }
            if n == 9 {
                return Err(DtError::TooManyDigits);
            }
            nanos = nanos * 10 + u32::from(x);
            n += 1;
            i += 1;
        }
        nanos *= 10u32.pow(9 - n);
    }
    if b.get(i) == Some(&b'Z') {
        i += 1;
    }
    if i != b.len() {
        return Err(DtError::Shape);
    }
    if !(1..=12).contains(&month) {
        return Err(DtError::Month(month));
    }
    if day < 1 || i64::from(day) > days_in_month(i64::from(year), i64::from(month)) {
        return Err(DtError::Day(year, month, day));
    }
    if hour > 23 || min > 59 || sec > 59 {
        return Err(DtError::Time(hour, min, sec));
    }
    let days = days_from_civil(i64::from(year), i64::from(month), i64::from(day));
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec);
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

/// [`datetime_ns`] on a field (surrounding blanks allowed), with a message on failure.
pub(super) fn parse_datetime_ns(s: &str) -> Result<i128, String> {
    let t = s.trim_ascii();
    if t.is_empty() {
        return Err("missing value".to_string());
    }
    datetime_ns(t.as_bytes()).map_err(|e| match e {
        DtError::Shape => format!("cannot read timestamp {}: expected YYYY-MM-DD HH:MM:SS[.fraction]", show(t)),
        DtError::TooManyDigits => format!("timestamp {} has more than 9 fractional digits", show(t)),
        DtError::Month(m) => format!("timestamp {}: month {m} does not exist", show(t)),
        DtError::Day(y, m, d) => format!("timestamp {}: day {d} does not exist in {y}-{m:02}", show(t)),
        DtError::Time(h, m, s) => format!("timestamp {}: time of day {h:02}:{m:02}:{s:02} does not exist", show(t)),
    })
}
