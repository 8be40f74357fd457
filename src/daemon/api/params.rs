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
/// The longest text parameter accepted, in bytes.
pub const MAX_TEXT_BYTES: usize = 1024;

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

/// The first name between backticks in a serde message.
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// A text parameter: at most [`MAX_TEXT_BYTES`], no NUL or other control byte.
pub fn text(param: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) if v.len() > MAX_TEXT_BYTES => {
            Err(ApiError::bad(param, format!("is {} bytes long, the most is {MAX_TEXT_BYTES}", v.len())))
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

/// A 64-bit id (alert, template, fingerprint): 1 to 16 hex digits, as the API writes them.
pub fn hex_id(param: &str, value: &str) -> Result<u64, ApiError> {
    crate::wire::alert::parse_id(value).map_err(|_| ApiError::bad(param, "must be 1 to 16 hex digits"))
}

/// The page size: `limit`, or [`DEFAULT_LIMIT`]; 1 to [`MAX_LIMIT`].
pub fn limit(value: Option<u64>) -> Result<u64, ApiError> {
    match value.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MAX_LIMIT => Ok(n),
        n => Err(ApiError::bad("limit", format!("must be 1 to {MAX_LIMIT}, is {n}"))),
    }
}

/// The window `[from, to)`: `to` defaults to now, `from` to `to - default_span`. An inverted
/// or empty window, or one wider than `max_span`, is refused.
pub fn window(
    from: Option<u64>,
    to: Option<u64>,
    now_ns: u64,
    default_span: u64,
    max_span: u64,
) -> Result<Window, ApiError> {
    let to_ns = to.unwrap_or(now_ns);
    let from_ns = from.unwrap_or(to_ns.saturating_sub(default_span));
    if from_ns >= to_ns {
        return Err(ApiError::bad("from", format!("must be before `to` ({from_ns} is not before {to_ns})")));
    }
    if to_ns - from_ns > max_span {
        return Err(ApiError::bad("from", format!("the window may span at most {} hours", max_span / HOUR_NS)));
    }
    Ok(Window { from_ns, to_ns })
}

/// A cursor is the previous page's last sort key: its parts, each hex-encoded, joined by
/// `.`. Opaque to clients; only [`decode_cursor`] reads it.
fn encode_cursor(parts: &[&str]) -> String {
    parts.iter().map(|p| p.bytes().map(|b| format!("{b:02x}")).collect::<String>()).collect::<Vec<_>>().join(".")
}

/// The `n` parts of a cursor made by [`encode_cursor`].
fn decode_cursor(value: &str, n: usize) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::bad("cursor", "is not a cursor this API returned");
    if value.len() > MAX_TEXT_BYTES * 2 {
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
            String::from_utf8(bytes).map_err(|_| bad())
        })
        .collect()
}

/// A number inside a cursor.
fn cursor_number(part: &str) -> Result<u64, ApiError> {
    part.parse().map_err(|_| ApiError::bad("cursor", "is not a cursor this API returned"))
}

/// A list's sort key, as a cursor carries it.
pub trait CursorKey: Sized {
    const PARTS: usize;
    fn to_parts(&self) -> Vec<String>;
    fn from_parts(parts: &[String]) -> Result<Self, ApiError>;
}

impl CursorKey for String {
    const PARTS: usize = 1;
    fn to_parts(&self) -> Vec<String> {
        vec![self.clone()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok(parts[0].clone())
    }
}

impl CursorKey for (u64, u64) {
    const PARTS: usize = 2;
    fn to_parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.to_string()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok((cursor_number(&parts[0])?, cursor_number(&parts[1])?))
    }
}

impl CursorKey for (u64, String) {
    const PARTS: usize = 2;
    fn to_parts(&self) -> Vec<String> {
        vec![self.0.to_string(), self.1.clone()]
    }
    fn from_parts(parts: &[String]) -> Result<Self, ApiError> {
        Ok((cursor_number(&parts[0])?, parts[1].clone()))
    }
}

impl CursorKey for (u64, String, u64) {
    const PARTS: usize = 3;
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

    #[test]
    fn windows_default_and_refuse_inversions() {
        let w = window(None, None, 10 * HOUR_NS, HOUR_NS, DAY_NS).unwrap();
        assert_eq!((w.from_ns, w.to_ns), (9 * HOUR_NS, 10 * HOUR_NS));
        assert!(window(Some(5), Some(5), 0, HOUR_NS, DAY_NS).is_err());
        assert!(window(Some(6), Some(5), 0, HOUR_NS, DAY_NS).is_err());
        assert!(window(Some(0), Some(2 * DAY_NS), 0, HOUR_NS, DAY_NS).is_err());
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
        assert!(hex_id("id", "12345678901234567").is_err());
    }

    #[test]
    fn text_refuses_control_characters_and_huge_values() {
        assert!(text("q", Some("a\0b".into())).is_err());
        assert!(text("q", Some("x".repeat(MAX_TEXT_BYTES + 1))).is_err());
        assert_eq!(text("q", Some("l'été \\".into())).unwrap().unwrap(), "l'été \\");
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
