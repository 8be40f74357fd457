//! Time in operator commands: the clock, and times and durations as an operator reads and
//! writes them.
//!
//! [`Clock`] is what commands that apply time rules read (`remine`'s heartbeat rule, what
//! `alerts list --active` and `alerts republish --since` count from). Tests start it at a
//! chosen time with `TAYGA_NOW_NS` instead of waiting minutes; from there it advances with
//! the real clock, so "after the re-mine" is still later than "before". It is an environment
//! variable, not a hidden option, because clap_complete lists hidden options in completions.

use std::time::{Duration, Instant};

use crate::store::now_ns;
use crate::time::civil_from_days;

/// The variable that starts the clock of a command at a chosen time (for tests).
pub const NOW_VAR: &str = "TAYGA_NOW_NS";

#[derive(Debug, thiserror::Error)]
#[error("${NOW_VAR} must be nanoseconds since the Unix epoch, is `{text}`")]
pub struct ClockError {
    text: String,
}

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Option<(u64, Instant)>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock { start: None }
    }

    /// A clock that reads `ns` now and advances in real time.
    pub fn starting_at(ns: u64) -> Clock {
        Clock { start: Some((ns, Instant::now())) }
    }

    /// Starts at `TAYGA_NOW_NS` (nanoseconds since the epoch) when it is set, else the
    /// system clock.
    pub fn from_env() -> Result<Clock, ClockError> {
        match std::env::var(NOW_VAR) {
            Err(_) => Ok(Clock::system()),
            Ok(text) => text.trim().parse().map(Clock::starting_at).map_err(|_| ClockError { text }),
        }
    }

    /// Nanoseconds since the Unix epoch.
    pub fn now_ns(&self) -> u64 {
        match self.start {
            None => now_ns(),
            Some((ns, at)) => ns.saturating_add(at.elapsed().as_nanos() as u64),
        }
    }
}

/// Nanoseconds since the epoch as RFC 3339 UTC with milliseconds: `2026-11-29T10:00:00.123Z`.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let millis = (ns % 1_000_000_000) / 1_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A time for a table on a terminal: how long ago it was, then RFC 3339 to the second,
/// `3m 5s ago (2026-11-29T10:00:00Z)`. The age comes first so a cut column keeps it.
pub fn format_time_ago(ns: u64, now_ns: u64) -> String {
    let time = format_time(ns - ns % 1_000_000_000).replace(".000Z", "Z");
    // A row version stamped a moment after the clock's reading is now, not "in 0s".
    if ns >= now_ns.saturating_add(1_000_000_000) {
        return format!("in {} ({time})", format_age(Duration::from_nanos(ns - now_ns)));
    }
    format!("{} ago ({time})", format_age(Duration::from_nanos(now_ns.saturating_sub(ns))))
}

/// A time in a table: on a terminal that cuts to fit, only its age (`3m ago`), so the
/// columns that need the room get it; with `--wide`, the age and the time; to a pipe, RFC
/// 3339 with milliseconds.
pub fn table_time(ns: u64, now_ns: u64, layout: super::table::Layout) -> String {
    use super::table::Layout;
    match layout {
        Layout::Terminal(Some(_)) if ns >= now_ns.saturating_add(1_000_000_000) => {
            format!("in {}", format_age_short(Duration::from_nanos(ns - now_ns)))
        }
        Layout::Terminal(Some(_)) => {
            format!("{} ago", format_age_short(Duration::from_nanos(now_ns.saturating_sub(ns))))
        }
        Layout::Terminal(None) => format_time_ago(ns, now_ns),
        Layout::Pipe => format_time(ns),
    }
}

/// An age in its largest unit: `42s`, `3m`, `5h`, `2d`.
pub fn format_age_short(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// A short age for one-line messages: `45s`, `2m 5s`, `3h 0m`, `2d 4h`.
pub fn format_age(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(1_445_412_480_123_456_789), "2015-10-21T07:28:00.123Z");
        assert_eq!(format_time(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_time(4_102_444_799_000_000_000), "2099-12-31T23:59:59.000Z");
    }

    #[test]
    fn times_in_tables_carry_their_age() {
        let now = 1_445_412_480_123_456_789;
        assert_eq!(format_time_ago(now - 125_000_000_000, now), "2m 5s ago (2015-10-21T07:25:55Z)");
        assert_eq!(format_time_ago(now + 1_000_000_000, now), "in 1s (2015-10-21T07:28:01Z)");
        assert_eq!(format_time_ago(now + 1_000, now), "0s ago (2015-10-21T07:28:00Z)");
        use crate::cmd::table::Layout;
        assert_eq!(table_time(now - 125_000_000_000, now, Layout::Terminal(Some(80))), "2m ago");
        assert_eq!(table_time(now - 125_000_000_000, now, Layout::Terminal(None)), "2m 5s ago (2015-10-21T07:25:55Z)");
        assert_eq!(table_time(now, now, Layout::Pipe), "2015-10-21T07:28:00.123Z");
        assert_eq!(table_time(now + 7_200_000_000_000, now, Layout::Terminal(Some(80))), "in 2h");
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(format_age(Duration::from_secs(45)), "45s");
        assert_eq!(format_age(Duration::from_secs(125)), "2m 5s");
        assert_eq!(format_age(Duration::from_secs(3 * 3600 + 59)), "3h 0m");
        assert_eq!(format_age(Duration::from_secs(2 * 86_400 + 4 * 3600)), "2d 4h");
    }

    #[test]
    fn an_injected_clock_starts_where_told_and_moves_forward() {
        let clock = Clock::starting_at(1_000);
        let a = clock.now_ns();
        let b = clock.now_ns();
        assert!(a >= 1_000 && b >= a && a < 60_000_000_000);
        assert!(Clock::system().now_ns() > 1_700_000_000_000_000_000);
    }
}
