//! How the app writes values: UTC times (the small script shows them in the browser's zone),
//! durations, rates, ages, the windows a page can be asked for, and a template's text cut
//! into literal parts and variable slots. Pure.

use crate::daemon::api::error::ApiError;

use crate::time::civil;
pub use crate::time::{duration, rfc3339, HOUR_NS, MINUTE_NS, SECOND_NS};

/// The same instant as a person reads it: `2026-12-01 11:37:38 UTC`.
pub fn utc(ns: u64) -> String {
    let (date, h, m, s) = civil(ns);
    format!("{date} {h:02}:{m:02}:{s:02} UTC")
}

/// `HH:MM` in UTC, for chart axes.
pub fn utc_clock(ns: u64) -> String {
    let (_, h, m, _) = civil(ns);
    format!("{h:02}:{m:02}")
}

/// How long ago `then` was at `now`: `4 s`, `12 min`, `3 h`, `2 d`.
pub fn age(now_ns: u64, then_ns: u64) -> String {
    let secs = now_ns.saturating_sub(then_ns) / SECOND_NS;
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7_199 => format!("{} min", secs / 60),
        7_200..=172_799 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

/// A number as a chart or a tile shows it: at most three significant decimals, no noise.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1_000_000.0 {
        format!("{:.2} M", v / 1_000_000.0)
    } else if a >= 10_000.0 {
        format!("{:.1} k", v / 1_000.0)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trimmed(format!("{v:.2}"))
    } else {
        trimmed(format!("{v:.3}"))
    }
}

/// A decimal without its trailing zeros.
fn trimmed(mut text: String) -> String {
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    text
}

/// `1 line`, `2 lines`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A share of 1 as a percentage: `12.5 %`.
pub fn percent(share: f64) -> String {
    if share.is_finite() {
        format!("{:.1} %", share * 100.0)
    } else {
        "–".into()
    }
}

/// The windows a page can show; `1h` when the URL names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    M15,
    #[default]
    H1,
    H6,
    H24,
}

impl Window {
    pub const ALL: [Window; 4] = [Window::M15, Window::H1, Window::H6, Window::H24];

    pub fn as_str(self) -> &'static str {
        match self {
            Window::M15 => "15m",
            Window::H1 => "1h",
            Window::H6 => "6h",
            Window::H24 => "24h",
        }
    }

    pub fn ns(self) -> u64 {
        match self {
            Window::M15 => 15 * MINUTE_NS,
            Window::H1 => HOUR_NS,
            Window::H6 => 6 * HOUR_NS,
            Window::H24 => 24 * HOUR_NS,
        }
    }

    /// The `window` parameter; anything else is a 400 that lists the choices.
    pub fn parse(value: Option<&str>) -> Result<Window, ApiError> {
        match value {
            None | Some("") => Ok(Window::default()),
            Some(v) => Window::ALL.into_iter().find(|w| w.as_str() == v).ok_or_else(|| {
                ApiError::bad("window", format!("`{v}` is not a window: use one of 15m, 1h, 6h or 24h"))
            }),
        }
    }
}

/// The length of the slot at the start of `text`, if one starts there: Drain's `<*>` or a
/// masking placeholder (`<NUM>`, `<IP>`, `<HEX_ID>`: capitals, digits and underscores).
fn slot_len(text: &str) -> Option<usize> {
    if text.starts_with("<*>") {
        return Some(3);
    }
    let inner = text.strip_prefix('<')?;
    let end = inner.find('>')?;
    let name = &inner[..end];
    let first = name.chars().next()?;
    (first.is_ascii_uppercase() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .then_some(end + 2)
}

/// A template's text as (is a slot, text) parts, in order; empty parts are left out.
pub fn template_parts(template: &str) -> Vec<(bool, &str)> {
    let mut parts = Vec::new();
    let mut literal_start = 0;
    let mut i = 0;
    while i < template.len() {
        match template[i..].starts_with('<').then(|| slot_len(&template[i..])).flatten() {
            Some(len) => {
                if i > literal_start {
                    parts.push((false, &template[literal_start..i]));
                }
                parts.push((true, &template[i..i + len]));
                i += len;
                literal_start = i;
            }
            None => i += template[i..].chars().next().map_or(1, char::len_utf8),
        }
    }
    if literal_start < template.len() {
        parts.push((false, &template[literal_start..]));
    }
    parts
}

/// A query-string value, percent-encoded.
pub fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc() {
        // 2026-12-01T11:37:38.123Z
        let ns = 1_796_125_058_123_000_000;
        assert_eq!(rfc3339(ns), "2026-12-01T11:37:38.123Z");
        assert_eq!(utc(ns), "2026-12-01 11:37:38 UTC");
        assert_eq!(utc_clock(ns), "11:37");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400 * SECOND_NS), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn durations_rates_and_ages_stay_short() {
        assert_eq!(duration(850_000.0), "850 µs");
        assert_eq!(duration(12_340_000.0), "12.3 ms");
        assert_eq!(duration(1_200_000_000.0), "1.20 s");
        assert_eq!(duration(f64::NAN), "–");
        assert_eq!(age(200 * SECOND_NS, 196 * SECOND_NS), "4 s");
        assert_eq!(age(3 * HOUR_NS, 0), "3 h");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(2.81), "2.81");
        assert_eq!(count(1u64, "line"), "1 line");
        assert_eq!(count(3u32, "attempt"), "3 attempts");
        assert_eq!(number(12_345.0), "12.3 k");
        assert_eq!(percent(0.125), "12.5 %");
    }

    #[test]
    fn windows_parse_or_name_the_choices() {
        assert_eq!(Window::parse(None).unwrap(), Window::H1);
        assert_eq!(Window::parse(Some("6h")).unwrap().ns(), 6 * HOUR_NS);
        match Window::parse(Some("7x")) {
            Err(ApiError::BadParam { param, reason }) => {
                assert_eq!(param, "window");
                assert!(reason.contains("15m, 1h, 6h or 24h"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn slots_are_cut_out_of_templates() {
        assert_eq!(
            template_parts("user <*> logged in from <*>"),
            vec![(false, "user "), (true, "<*>"), (false, " logged in from "), (true, "<*>")]
        );
        assert_eq!(template_parts("<*><*>"), vec![(true, "<*>"), (true, "<*>")]);
        assert_eq!(
            template_parts("rhost=<IP> took <NUM>.<NUM> ms <b> é<HEX_ID>"),
            vec![
                (false, "rhost="),
                (true, "<IP>"),
                (false, " took "),
                (true, "<NUM>"),
                (false, "."),
                (true, "<NUM>"),
                (false, " ms <b> é"),
                (true, "<HEX_ID>")
            ]
        );
        assert_eq!(template_parts("plain"), vec![(false, "plain")]);
        assert!(template_parts("").is_empty());
    }
}
