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
}
