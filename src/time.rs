//! Time as Tayga keeps it: nanoseconds since the Unix epoch in UTC, in every table, topic
//! and document (no timestamp crosses a boundary as text). This module holds the units and
//! the one conversion to a calendar date, for the places that must write a time as text
//! (the app, the commands, webhook payloads). Pure.

pub const SECOND_NS: u64 = 1_000_000_000;
pub const MINUTE_NS: u64 = 60 * SECOND_NS;
pub const HOUR_NS: u64 = 60 * MINUTE_NS;
pub const DAY_NS: u64 = 24 * HOUR_NS;

/// Nanoseconds since the Unix epoch, the unit of every timestamp column.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The (year, month, day) of a day counted from 1970-01-01, by Howard Hinnant's
/// days-to-civil algorithm (proleptic Gregorian, any day before or after the epoch).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// An instant split into (`YYYY-MM-DD`, hours, minutes, seconds) in UTC.
pub fn civil(ns: u64) -> (String, u64, u64, u64) {
    let secs = ns / SECOND_NS;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    (format!("{y:04}-{m:02}-{d:02}"), rem / 3600, rem % 3600 / 60, rem % 60)
}

/// An instant as RFC 3339 UTC with milliseconds: `2026-12-01T11:37:38.250Z`.
pub fn rfc3339(ns: u64) -> String {
    let (date, h, m, s) = civil(ns);
    format!("{date}T{h:02}:{m:02}:{s:02}.{:03}Z", (ns % SECOND_NS) / 1_000_000)
}

/// A duration in the unit that keeps it short: `850 µs`, `12.3 ms`, `1.20 s`, `3.5 min`.
pub fn duration(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "–".into();
    }
    if ns == 0.0 {
        "0".into()
    } else if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.0} µs", ns / 1_000.0)
    } else if ns < 1_000_000_000.0 {
        format!("{:.1} ms", ns / 1_000_000.0)
    } else if ns < 60.0 * 1_000_000_000.0 {
        format!("{:.2} s", ns / 1_000_000_000.0)
    } else {
        format!("{:.1} min", ns / 60_000_000_000.0)
    }
}

/// How much of `[from, to)` the intervals cover (each cut to it, overlaps counted once):
/// what a span's children take of it (its self time is the rest).
pub fn covered_ns(intervals: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let mut clipped: Vec<(u64, u64)> =
        intervals.iter().map(|(s, e)| ((*s).max(from), (*e).min(to))).filter(|(s, e)| s < e).collect();
    clipped.sort_unstable();
    let (mut total, mut reach) = (0, from);
    for (s, e) in clipped {
        let s = s.max(reach);
        if e > s {
            total += e - s;
            reach = e;
        }
    }
    total
}

/// The day count from 1970-01-01 of a (year, month, day), the inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An instant as an operator types it, in UTC: RFC 3339 with `Z` (`2026-12-04T03:00:00Z`,
/// fractions allowed), the same without the zone or with a space (`2026-12-04 03:00`, as a
/// browser's date-time field sends it, read as UTC), or Unix nanoseconds.
pub fn parse_instant(text: &str) -> Result<u64, String> {
    let bad = || {
        format!("`{text}` is not a time: expected RFC 3339 UTC (2026-12-04T03:00:00Z), YYYY-MM-DD HH:MM[:SS] in UTC, or Unix ns")
    };
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| bad());
    }
    let t = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')).unwrap_or(t);
    let (date, clock) = t.split_once(['T', 't', ' ']).ok_or_else(bad)?;
    let mut d = date.splitn(3, '-');
    let num = |len: usize, part: Option<&str>| -> Result<u64, String> {
        let p = part.ok_or_else(bad)?;
        if p.len() != len || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        p.parse().map_err(|_| bad())
    };
    let (year, month, day) = (num(4, d.next())?, num(2, d.next())?, num(2, d.next())?);
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => (hms, f),
        Some(_) => return Err(bad()),
        None => (clock, ""),
    };
    let mut c = hms.split(':');
    let (hour, minute) = (num(2, c.next())?, num(2, c.next())?);
    let second = match c.next() {
        Some(s) => num(2, Some(s))?,
        None if fraction.is_empty() => 0,
        None => return Err(bad()),
    };
    if c.next().is_some()
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let days = days_from_civil(year as i64, month as u32, day as u32);
    if days < 0 || civil_from_days(days) != (year as i64, month as u32, day as u32) {
        return Err(bad());
    }
    let nanos: u64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().map_err(|_| bad())? };
    Ok(days as u64 * DAY_NS + (hour * 3600 + minute * 60 + second) * SECOND_NS + nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_as_text() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_588_658_250_000_000), "2025-12-01T11:30:58.250Z");
        assert_eq!(rfc3339(951_782_400 * SECOND_NS), "2000-02-29T00:00:00.000Z", "a leap day");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn instants_read_back() {
        for ns in [0, 951_782_400 * SECOND_NS, 1_764_588_658_250_000_000] {
            assert_eq!(parse_instant(&rfc3339(ns)), Ok(ns));
        }
        assert_eq!(parse_instant("2025-12-01 11:30"), Ok(1_764_588_600 * SECOND_NS));
        assert_eq!(parse_instant("2025-12-01T11:30:58.25"), Ok(1_764_588_658_250_000_000));
        assert_eq!(parse_instant("1764588600000000000"), Ok(1_764_588_600 * SECOND_NS));
        for bad in ["", "yesterday", "2025-02-30T00:00Z", "2025-12-01", "2025-12-01T25:00Z", "2025-12-01T10:00+01:00"] {
            assert!(parse_instant(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
