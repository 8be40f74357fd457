//! Reading request parameters: query strings into typed structs (unknown names refused,
//! the faulty parameter named), ids, time windows, limits and cursors. Everything here is
//! pure; every value it lets through is later bound, never spliced into SQL.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
/// The window every read takes, and the most rows a page holds (the app pages by them too).
pub use crate::store::query::{Window, MAX_LIMIT};
pub use crate::time::{DAY_NS, HOUR_NS};

/// The page size when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 100;
/// The longest text parameter accepted, in characters (JSON Schema's `maxLength` counts
/// characters, so the document can state the rule exactly).
pub const MAX_TEXT_CHARS: usize = 1024;

/// What the OpenAPI document says of every text parameter ([`text`]): no control character
/// (Unicode category Cc), in the regular-expression dialect JSON Schema and Python share.
pub const TEXT_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";
/// A 64-bit id ([`hex_id`]) and a trace id ([`trace_id`]), as the document states them.
pub const HEX_ID_PATTERN: &str = "^[0-9a-fA-F]{1,16}$";
pub const TRACE_ID_PATTERN: &str = "^[0-9a-fA-F]{32}$";

/// A read's window rule: the span it covers when `from` is absent, and the widest it may
/// cover. A wider window is refused, never narrowed, so that a list is never silently
/// shorter than asked for (docs/api.md, "The contract").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRule {
    pub default_ns: u64,
    pub max_ns: u64,
}

impl WindowRule {
    /// What the document adds to `from`'s description.
    pub fn describe(&self) -> String {
        format!(
            "The window `[from, to)`: `to` defaults to now, `from` to {} before `to`. It must not be \
             empty and may span at most {}; a window that breaks this is a 400 naming `from`.",
            duration_words(self.default_ns),
            duration_words(self.max_ns)
        )
    }
}

/// `3 days`, `1 hour`, `24 hours`: a whole number of days when it is one, else of hours.
fn duration_words(ns: u64) -> String {
    let (n, unit) =
        if ns.is_multiple_of(DAY_NS) && ns > DAY_NS { (ns / DAY_NS, "day") } else { (ns / HOUR_NS, "hour") };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// A query string read into `T` (a struct with `deny_unknown_fields`); a failure is a 400
/// naming the parameter.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query().unwrap_or("")).map(Query)
    }
}

pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let pairs = form_urlencoded::parse(query.as_bytes());
    let deserializer = serde_urlencoded::Deserializer::new(pairs);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // serde names an unknown or duplicated field only in its message.
        let param = if path.is_empty() || path == "." { quoted(&message).unwrap_or("query") } else { path.as_str() };
        ApiError::bad(param, message.clone())
    })
}

/// An extractor's own plain-text refusal (axum's `Path` answers a segment that is not UTF-8
/// once percent-decoded, `/api/v1/alerts/%FF`, with "Invalid UTF-8 in `alert_id`") as the
/// API's error, naming the parameter when the message does.
pub fn rejected(message: &str) -> ApiError {
    let message = message.trim();
    ApiError::bad(quoted(message).unwrap_or("path"), message)
}

/// The first name between backticks in a serde message.
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// A text parameter: at most [`MAX_TEXT_CHARS`], no NUL or other control character.
pub fn text(param: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) if v.chars().count() > MAX_TEXT_CHARS => {
            Err(ApiError::bad(param, format!("is {} characters long, the most is {MAX_TEXT_CHARS}", v.chars().count())))
        }
        Some(v) if v.chars().any(|c| c.is_control()) => Err(ApiError::bad(param, "contains a control character")),
        Some(v) => Ok(Some(v)),
    }
}

/// A trace id: 32 hex digits, returned in lowercase as stored.
pub fn trace_id(param: &str, value: &str) -> Result<String, ApiError> {
    if value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(ApiError::bad(param, "must be 32 hex digits"))
    }
}

/// A 64-bit id (alert, template, fingerprint): 1 to 16 hex digits, as the API writes them
/// ([`HEX_ID_PATTERN`]; no `0x` and no spaces around, which the commands allow).
pub fn hex_id(param: &str, value: &str) -> Result<u64, ApiError> {
    if (1..=16).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        u64::from_str_radix(value, 16).map_err(|_| ApiError::bad(param, "must be 1 to 16 hex digits"))
    } else {
        Err(ApiError::bad(param, "must be 1 to 16 hex digits"))
    }
}

/// The page size: `limit`, or [`DEFAULT_LIMIT`]; 1 to [`MAX_LIMIT`].
pub fn limit(value: Option<u64>) -> Result<u64, ApiError> {
    match value.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MAX_LIMIT => Ok(n),
        n => Err(ApiError::bad("limit", format!("must be 1 to {MAX_LIMIT}, is {n}"))),
    }
}

/// The window `[from, to)`: `to` defaults to now, `from` to `to - rule.default_ns`. An
/// inverted or empty window, or one wider than `rule.max_ns`, is refused.
pub fn window(from: Option<u64>, to: Option<u64>, now_ns: u64, rule: WindowRule) -> Result<Window, ApiError> {
    let to_ns = to.unwrap_or(now_ns);
    let from_ns = from.unwrap_or(to_ns.saturating_sub(rule.default_ns));
    if from_ns >= to_ns {
        return Err(ApiError::bad("from", format!("must be before `to` ({from_ns} is not before {to_ns})")));
    }
    if to_ns - from_ns > rule.max_ns {
        return Err(ApiError::bad("from", format!("the window may span at most {}", duration_words(rule.max_ns))));
    }
    Ok(Window { from_ns, to_ns })
}

/// A cursor is the previous page's last sort key: its parts, each hex-encoded, joined by
/// `.`. Opaque to clients; only [`decode_cursor`] reads it.
fn encode_cursor(parts: &[&str]) -> String {
    parts.iter().map(|p| p.bytes().map(|b| format!("{b:02x}")).collect::<String>()).collect::<Vec<_>>().join(".")
}

/// The `n` parts of a cursor made by [`encode_cursor`]. Any even run of hex digits is a
/// part: one that is not UTF-8 reads with U+FFFD in place of the bad bytes (a cursor is only
/// a key the next page starts after, bound to the statement, so any key is a harmless one),
/// which keeps the rule one the document can state as a pattern.
fn decode_cursor(value: &str, n: usize) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::bad("cursor", "is not a cursor this API returned");
    if value.len() > MAX_TEXT_CHARS {
        return Err(bad());
    }
    let parts: Vec<&str> = value.split('.').collect();
    if parts.len() != n {
        return Err(bad());
    }
    parts
        .into_iter()
        .map(|p| {
            if p.len() % 2 != 0 {
                return Err(bad());
            }
            let bytes = (0..p.len())
                .step_by(2)
                .map(|i| p.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(bad))
                .collect::<Result<Vec<u8>, _>>()?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect()
}

/// A number inside a cursor: 1 to 20 decimal digits; one above `u64::MAX` (which no answer
/// holds) reads as `u64::MAX`, the key after which nothing comes.
fn cursor_number(part: &str) -> Result<u64, ApiError> {
    if part.is_empty() || part.len() > 20 || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad("cursor", "is not a cursor this API returned"));
    }
    Ok(part.parse().unwrap_or(u64::MAX))
}

/// A cursor's number part, hex-encoded (its digits are the bytes 0x30 to 0x39), and a text
/// part, in the patterns [`CursorKey::PATTERN`] is made of.
macro_rules! number_part {
    () => {
        "(3[0-9]){1,20}"
    };
}
macro_rules! text_part {
    () => {
        "([0-9a-fA-F]{2})*"
    };
}

/// A list's sort key, as a cursor carries it.
pub trait CursorKey: Sized {
    const PARTS: usize;
    /// Every cursor [`cursor`] reads as this key, as the document states it.
    const PATTERN: &'static str;
    fn to_parts(&self) -> Vec<String>;
    fn from_parts(parts: &[String]) -> Result<Self, ApiError>;
}

impl CursorKey for String {
    const PARTS: usize = 1;
    const PATTERN: &'static str = concat!("^", text_part!(), "$");
    fn to_parts(&self) -> Vec<String> {
        vec![self.clone()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok(parts[0].clone())
    }
}

impl CursorKey for (u64, u64) {
    const PARTS: usize = 2;
    const PATTERN: &'static str = concat!("^", number_part!(), "\\.", number_part!(), "$");
    fn to_parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.to_string()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok((cursor_number(&parts[0])?, cursor_number(&parts[1])?))
    }
}

impl CursorKey for (u64, String) {
    const PARTS: usize = 2;
    const PATTERN: &'static str = concat!("^", number_part!(), "\\.", text_part!(), "$");
    fn to_parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.clone()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok((cursor_number(&parts[0])?, parts[1].clone()))
    }
}

impl CursorKey for (u64, String, u64) {
    const PARTS: usize = 3;
    const PATTERN: &'static str = concat!("^", number_part!(), "\\.", text_part!(), "\\.", number_part!(), "$");
    fn to_parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.clone(), self.2.to_string()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok((cursor_number(&parts[0])?, parts[1].clone(), cursor_number(&parts[2])?))
    }
}

/// The `cursor` parameter read as `K`; absent on a first page.
pub fn cursor<K: CursorKey>(value: Option<String>) -> Result<Option<K>, ApiError> {
    match text("cursor", value)? {
        None => Ok(None),
        Some(c) => K::from_parts(&decode_cursor(&c, K::PARTS)?).map(Some),
    }
}

/// The cursor of the page after the item whose sort key is `key`.
pub fn next_cursor<K: CursorKey>(key: &K) -> String {
    let parts = key.to_parts();
    encode_cursor(&parts.iter().map(String::as_str).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        limit: Option<u64>,
        service: Option<String>,
    }

    #[test]
    fn a_bad_query_names_its_parameter() {
        let ok: Sample = parse_query("limit=5&service=a%20b").unwrap();
        assert_eq!(ok, Sample { limit: Some(5), service: Some("a b".into()) });
        for (query, param) in [
            ("limit=-1", "limit"),
            ("limit=99999999999999999999999", "limit"),
            ("nope=1", "nope"),
            ("limit=1&limit=2", "limit"),
        ] {
            match parse_query::<Sample>(query) {
                Err(ApiError::BadParam { param: p, .. }) => assert_eq!(p, param, "{query}"),
                other => panic!("{query}: {other:?}"),
            }
        }
    }

    const RULE: WindowRule = WindowRule { default_ns: HOUR_NS, max_ns: DAY_NS };

    #[test]
    fn an_extractors_refusal_names_its_parameter() {
        match rejected("Invalid UTF-8 in `alert_id`") {
            ApiError::BadParam { param, reason } => {
                assert_eq!((param.as_str(), reason.as_str()), ("alert_id", "Invalid UTF-8 in `alert_id`"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(rejected("odd"), ApiError::BadParam { param, .. } if param == "path"));
    }

    #[test]
    fn windows_default_and_refuse_inversions() {
        let w = window(None, None, 10 * HOUR_NS, RULE).unwrap();
        assert_eq!((w.from_ns, w.to_ns), (9 * HOUR_NS, 10 * HOUR_NS));
        assert!(window(Some(5), Some(5), 0, RULE).is_err());
        assert!(window(Some(6), Some(5), 0, RULE).is_err());
        assert!(window(Some(0), Some(2 * DAY_NS), 0, RULE).is_err());
        assert!(window(Some(0), Some(DAY_NS), 0, RULE).is_ok(), "exactly the widest");
        assert!(RULE.describe().contains("at most 24 hours"), "{}", RULE.describe());
        let week = WindowRule { default_ns: DAY_NS, max_ns: 7 * DAY_NS };
        assert!(week.describe().contains("`from` to 24 hours before `to`") && week.describe().contains("7 days"));
    }

    #[test]
    fn limits_are_bounded() {
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(MAX_LIMIT + 1)).is_err());
        assert_eq!(limit(Some(MAX_LIMIT)).unwrap(), MAX_LIMIT);
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(trace_id("id", "0AF7651916CD43DD8448EB211C80319C").unwrap(), "0af7651916cd43dd8448eb211c80319c");
        assert!(trace_id("id", "0af7").is_err());
        assert!(trace_id("id", "0af7651916cd43dd8448eb211c80319'").is_err(), "a quote is not hex");
        assert_eq!(hex_id("id", "ff").unwrap(), 255);
        assert_eq!(hex_id("id", "FFFFFFFFFFFFFFFF").unwrap(), u64::MAX);
        for refused in ["12345678901234567", "", "0xff", " ff", "ff ", "+f", "g"] {
            assert!(hex_id("id", refused).is_err(), "{refused:?} is not what HEX_ID_PATTERN allows");
        }
    }

    #[test]
    fn text_refuses_control_characters_and_huge_values() {
        assert!(text("q", Some("a\0b".into())).is_err());
        assert!(text("q", Some("x".repeat(MAX_TEXT_CHARS + 1))).is_err());
        assert!(text("q", Some("a\u{85}b".into())).is_err(), "a C1 control, as the pattern says");
        let wide = "é".repeat(MAX_TEXT_CHARS);
        assert_eq!(text("q", Some(wide.clone())).unwrap().unwrap(), wide, "characters are counted, not bytes");
        assert_eq!(text("q", Some("l'été \\".into())).unwrap().unwrap(), "l'été \\");
    }

    #[test]
    fn any_cursor_of_its_pattern_is_read() {
        // Hex that is not UTF-8, and a number above u64::MAX: the pattern allows both.
        assert_eq!(cursor::<String>(Some("ff41".into())).unwrap(), Some("\u{fffd}A".to_string()));
        let huge = "39".repeat(20);
        assert_eq!(cursor::<(u64, u64)>(Some(format!("{huge}.30"))).unwrap(), Some((u64::MAX, 0)));
        for refused in ["", "3", "31.", ".31", "31.32.33", "3a.31", "31.3g"] {
            assert!(cursor::<(u64, u64)>(Some(refused.into())).is_err(), "{refused:?}");
        }
        assert!(cursor::<(u64, String)>(Some("31.".into())).is_ok(), "an empty text part");
    }

    proptest! {
        #[test]
        fn cursors_round_trip(parts in proptest::collection::vec(".{0,40}", 1..4)) {
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            let encoded = encode_cursor(&refs);
            prop_assert_eq!(decode_cursor(&encoded, parts.len()).unwrap(), parts);
        }

        #[test]
        fn cursor_keys_round_trip(a in any::<u64>(), b in ".{0,30}", c in any::<u64>()) {
            let key = (a, b, c);
            prop_assert_eq!(cursor::<(u64, String, u64)>(Some(next_cursor(&key))).unwrap(), Some(key));
        }

        #[test]
        fn any_cursor_text_is_decoded_or_refused(text in ".{0,80}") {
            let _ = decode_cursor(&text, 2);
        }
    }
}
