//! The notifier's retry rules (docs/design.md#notifier-retries), as pure functions: which
//! responses are retried, how long to wait after a failed attempt, and how a `Retry-After`
//! header is read.

use std::time::{Duration, SystemTime};

/// What one HTTP attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// A 2xx.
    Delivered,
    /// 429, 5xx, a network error or a timeout: tried again after a wait. `retry_after` is
    /// the response's `Retry-After`, when it had a readable one.
    Retryable { error: String, retry_after: Option<Duration> },
    /// Any other status (other 4xx, 3xx, 1xx): failed at once.
    Permanent { error: String },
}

/// The class of an HTTP status (docs/design.md#notifier-retries). Redirects are not followed, so a 3xx
/// is permanent like a 4xx.
pub fn classify_status(status: u16) -> StatusClass {
    match status {
        200..=299 => StatusClass::Delivered,
        429 | 500..=599 => StatusClass::Retryable,
        _ => StatusClass::Permanent,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    Delivered,
    Retryable,
    Permanent,
}

/// The wait after the `failed_attempts`-th failed attempt (1-based):
/// `max(base × 2^(n−1), retry_after)`, capped at `cap`. Never overflows.
pub fn backoff_wait(failed_attempts: u32, base: Duration, cap: Duration, retry_after: Option<Duration>) -> Duration {
    let n = failed_attempts.max(1);
    let factor = 1u32.checked_shl(n - 1).filter(|_| n <= 32);
    let exponential = match factor {
        Some(f) => base.checked_mul(f).unwrap_or(Duration::MAX),
        // 2^32 × any non-zero base is already above any sensible cap.
        None if base.is_zero() => Duration::ZERO,
        None => Duration::MAX,
    };
    exponential.max(retry_after.unwrap_or(Duration::ZERO)).min(cap)
}

/// Reads a `Retry-After` value: delay-seconds (`120`) or an HTTP date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, also the obsolete RFC 850 and asctime forms). A date in
/// the past means no wait. `None` when the value is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Absurdly long digit strings saturate instead of failing.
        return Some(Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn statuses_are_classified_as_the_seed_says() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(classify_status(s), StatusClass::Delivered, "{s}");
        }
        for s in [429, 500, 502, 503, 504, 599] {
            assert_eq!(classify_status(s), StatusClass::Retryable, "{s}");
        }
        for s in [100, 301, 302, 304, 307, 308, 400, 401, 403, 404, 408, 409, 410, 413, 422, 428, 431, 600] {
            assert_eq!(classify_status(s), StatusClass::Permanent, "{s}");
        }
    }

    #[test]
    fn the_default_ladder_is_1_2_4_to_64_seconds() {
        let waits: Vec<u64> = (1..=7).map(|n| backoff_wait(n, S(1), S(300), None).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 64]);
        // docs/design.md#notifier-retries: about 2 minutes of backoff (1 + 2 + … + 64 s) for 8 attempts.
        assert_eq!(waits.iter().sum::<u64>(), 127);
    }

    #[test]
    fn the_wait_is_capped_at_300_seconds() {
        assert_eq!(backoff_wait(9, S(1), S(300), None), S(256));
        assert_eq!(backoff_wait(10, S(1), S(300), None), S(300));
        assert_eq!(backoff_wait(64, S(1), S(300), None), S(300));
        assert_eq!(backoff_wait(u32::MAX, S(1), S(300), None), S(300));
        assert_eq!(backoff_wait(40, S(u64::MAX / 2), S(300), None), S(300));
        assert_eq!(backoff_wait(1, S(1), S(300), Some(S(10_000))), S(300));
    }

    #[test]
    fn retry_after_wins_when_longer() {
        assert_eq!(backoff_wait(1, S(1), S(300), Some(S(30))), S(30));
        assert_eq!(backoff_wait(6, S(1), S(300), Some(S(30))), S(32));
        assert_eq!(backoff_wait(3, S(1), S(300), Some(Duration::ZERO)), S(4));
    }

    #[test]
    fn a_zero_base_means_no_wait_unless_retry_after() {
        assert_eq!(backoff_wait(1, Duration::ZERO, S(300), None), Duration::ZERO);
        assert_eq!(backoff_wait(50, Duration::ZERO, S(300), None), Duration::ZERO);
        assert_eq!(backoff_wait(2, Duration::ZERO, S(300), Some(S(1))), S(1));
    }

    #[test]
    fn retry_after_in_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("120", now), Some(S(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(S(u64::MAX)));
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("1.5", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn retry_after_as_an_http_date() {
        // 2015-10-21T07:28:00Z.
        let at = SystemTime::UNIX_EPOCH + S(1_445_412_480);
        let now = at - S(90);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(S(90)));
        // The obsolete forms HTTP still requires readers to accept.
        assert_eq!(parse_retry_after("Wednesday, 21-Oct-15 07:28:00 GMT", now), Some(S(90)));
        assert_eq!(parse_retry_after("Wed Oct 21 07:28:00 2015", now), Some(S(90)));
        // A date already past: no wait beyond the exponential one.
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", at + S(5)), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 32 Oct 2015 07:28:00 GMT", now), None);
        // Through the formula: an HTTP date 90 s ahead on the 2nd failure waits 90 s; 20
        // minutes ahead is capped at 300 s.
        let wait = backoff_wait(2, S(1), S(300), parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now));
        assert_eq!(wait, S(90));
        let wait = backoff_wait(2, S(1), S(300), parse_retry_after("Wed, 21 Oct 2015 07:48:00 GMT", now));
        assert_eq!(wait, S(300));
    }
}
