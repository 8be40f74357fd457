//! The time range of the Explore pages (Logs, Traces): a preset (`since=15m`) or a custom
//! `from`/`to` (UTC, as a browser's date-time field sends it, or RFC 3339), read from the
//! address so a search is shared by copying it; and the picker that writes it.

use maud::{html, Markup};

use super::format;
use crate::daemon::api::error::ApiError;
use crate::time::{DAY_NS, HOUR_NS, MINUTE_NS};

/// The presets, and how far back each goes.
pub const PRESETS: [(&str, u64); 6] = [
    ("5m", 5 * MINUTE_NS),
    ("15m", 15 * MINUTE_NS),
    ("1h", HOUR_NS),
    ("6h", 6 * HOUR_NS),
    ("24h", DAY_NS),
    ("7d", 7 * DAY_NS),
];
/// The preset an address without a range gets.
pub const DEFAULT_PRESET: &str = "1h";

/// A resolved range `[from_ns, to_ns)`, and the preset it came from (none when custom).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub from_ns: u64,
    pub to_ns: u64,
    pub preset: Option<&'static str>,
}

impl Range {
    /// From the address's `since`, `from` and `to` (empty values are none): `from` (with `to`,
    /// or now) wins over `since`; neither is the last hour.
    pub fn parse(since: Option<&str>, from: Option<&str>, to: Option<&str>, now: u64) -> Result<Range, ApiError> {
        let instant = |name: &str, v: &str| crate::time::parse_instant(v).map_err(|reason| ApiError::bad(name, reason));
        let from = from.filter(|v| !v.is_empty()).map(|v| instant("from", v)).transpose()?;
        let to = to.filter(|v| !v.is_empty()).map(|v| instant("to", v)).transpose()?;
        let range = match (from, since.filter(|v| !v.is_empty())) {
            (Some(from), _) => Range { from_ns: from, to_ns: to.unwrap_or(now), preset: None },
            (None, since) => {
                let name = since.unwrap_or(DEFAULT_PRESET);
                let (preset, back) = PRESETS.iter().find(|(p, _)| *p == name).copied().ok_or_else(|| {
                    ApiError::bad(
                        "since",
                        format!("`{name}` is not a range: use one of 5m, 15m, 1h, 6h, 24h or 7d, or from= and to="),
                    )
                })?;
                let end = to.unwrap_or(now);
                Range { from_ns: end.saturating_sub(back), to_ns: end, preset: to.is_none().then_some(preset) }
            }
        };
        if range.from_ns >= range.to_ns {
            return Err(ApiError::bad("from", "the range's start is not before its end".to_string()));
        }
        Ok(range)
    }

    pub fn len_ns(&self) -> u64 {
        self.to_ns - self.from_ns
    }
}

/// A browser date-time field's value for `ns`: `2026-12-04T03:00:00` (UTC, to the second).
pub fn field_value(ns: u64) -> String {
    format::rfc3339(ns)[..19].to_string()
}

/// The presets as links (each keeping the page's other parameters, `kept`), the current one
/// marked; and the custom range's fields, for inside the page's GET form.
pub fn presets(base: &str, kept: &[(&str, String)], current: &Range) -> Markup {
    html! {
        nav.windows.range aria-label="time range" {
            @for (name, _) in PRESETS {
                a href=(link(base, kept, &[("since", name.to_string())])) class=[(current.preset == Some(name)).then_some("current")] { (name) }
            }
            @if current.preset.is_none() { a.current href=(link(base, kept, &[("from", field_value(current.from_ns)), ("to", field_value(current.to_ns))])) { "custom" } }
        }
    }
}

/// The hidden fields that keep `current` when the page's search form is sent.
pub fn hidden(current: &Range) -> Markup {
    html! {
        @match current.preset {
            Some(p) => { input type="hidden" name="since" value=(p); }
            None => {
                input type="hidden" name="from" value=(field_value(current.from_ns));
                input type="hidden" name="to" value=(field_value(current.to_ns));
            }
        }
    }
}

/// A small form for a custom range (UTC), keeping the page's other parameters (`kept`).
pub fn custom_form(base: &str, kept: &[(&str, String)], current: &Range) -> Markup {
    html! {
        form.filters.custom-range method="get" action=(base) {
            @for (name, value) in kept.iter().filter(|(_, v)| !v.is_empty()) {
                input type="hidden" name=(name) value=(value);
            }
            label title="UTC" { "from "
                input type="datetime-local" step="1" name="from" value=(field_value(current.from_ns));
            }
            label title="UTC" { "to "
                input type="datetime-local" step="1" name="to" value=(field_value(current.to_ns));
                " UTC"
            }
            button.secondary type="submit" { "Apply range" }
        }
    }
}

/// `base?k=v&…`: the kept parameters that have a value, then `extra`, percent-encoded.
pub fn link(base: &str, kept: &[(&str, String)], extra: &[(&str, String)]) -> String {
    let pairs: Vec<String> = kept
        .iter()
        .chain(extra)
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", format::encode(v)))
        .collect();
    if pairs.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", pairs.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_a_preset_or_from_to() {
        let now = 100 * DAY_NS;
        assert_eq!(
            Range::parse(None, None, None, now).unwrap(),
            Range { from_ns: now - HOUR_NS, to_ns: now, preset: Some("1h") }
        );
        assert_eq!(Range::parse(Some("15m"), None, None, now).unwrap().from_ns, now - 15 * MINUTE_NS);
        let custom = Range::parse(Some("15m"), Some("1970-04-10T00:00"), Some("1970-04-10T01:00:00Z"), now).unwrap();
        assert_eq!(custom, Range { from_ns: 99 * DAY_NS, to_ns: 99 * DAY_NS + HOUR_NS, preset: None });
        assert_eq!(field_value(custom.from_ns), "1970-04-10T00:00:00");
        for (since, from, to) in [
            (Some("2w"), None, None),
            (None, Some("yesterday"), None),
            (None, Some("1970-04-10T02:00"), Some("1970-04-10T01:00")),
        ] {
            assert!(Range::parse(since, from, to, now).is_err(), "{since:?} {from:?} {to:?}");
        }
    }

    #[test]
    fn links_keep_what_has_a_value() {
        let kept = [("q", "a b".to_string()), ("service", String::new())];
        assert_eq!(link("/logs", &kept, &[("since", "15m".into())]), "/logs?q=a+b&since=15m");
        assert_eq!(link("/logs", &[], &[]), "/logs");
    }
}
