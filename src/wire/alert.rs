//! The alert record on `<prefix>.alerts` (docs/design.md#topics): a versioned JSON document, defined
//! here once and used by the producer (the logminer) and every consumer (the notifier, and
//! systems outside Tayga). It is a public interface, documented in `docs/alerts.md`.
//!
//! Rules of the format:
//! - `version` is required. A reader rejects a version it does not know, clearly, instead of
//!   guessing at its meaning; version 1 is the only one today.
//! - Unknown fields are ignored on read, so a producer may add fields within a version.
//! - Ids (`alert_id`, `template_id`) are u64 hashes in ClickHouse. In JSON they are written as
//!   16 lowercase hex digits ([`format_id`]), because JavaScript's numbers lose precision above
//!   2^53. [`parse_id`] reads them back.
//! - Timestamps (`first_at`, `last_at`) are integer nanoseconds since the Unix epoch: no
//!   timestamp crosses a topic as text.
//!
//! The webhook payload the notifier sends is this same document.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The version this build writes, and the only one it reads.
pub const ALERT_FORMAT_VERSION: u32 = 1;

/// What an alert says happened (docs/logminer.md, "The alert rules"). Adding a kind is a new format version:
/// consumers switch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A template first seen after the watermark.
    NewTemplate,
    /// A template's minute count far above its own recent baseline.
    Spike,
    /// A template that logged steadily stopped while its service still logs.
    Silence,
}

impl AlertKind {
    pub const ALL: [AlertKind; 3] = [AlertKind::NewTemplate, AlertKind::Spike, AlertKind::Silence];

    /// The name used in JSON, in `log_alerts.kind` and in `notifier.targets[].kinds`.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::NewTemplate => "new_template",
            AlertKind::Spike => "spike",
            AlertKind::Silence => "silence",
        }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlertKind {
    type Err = AlertError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlertKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| AlertError::UnknownKind(s.to_string()))
    }
}

/// One alert, as published on `<prefix>.alerts` and sent to webhooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Always [`ALERT_FORMAT_VERSION`] in what this build writes.
    pub version: u32,
    /// Deterministic: a hash of the alert's kind, subject and start (docs/design.md#identity).
    #[serde(with = "hex_id")]
    pub alert_id: u64,
    pub kind: AlertKind,
    pub service: String,
    #[serde(with = "hex_id")]
    pub template_id: u64,
    pub template: String,
    /// Nanoseconds since the Unix epoch.
    pub first_at: u64,
    pub last_at: u64,
    /// Log lines of the template in the alert's window (for a silence: 0).
    pub count: u64,
    /// The template's usual count per minute.
    pub baseline: f64,
    /// The count that raised the alert (spike) or the rule's bound.
    pub threshold: f64,
    /// `firing` while the alert is active; `resolved` once the logminer judged it inactive
    /// (docs/alerts.md, "An alert's life"). Absent in documents written before it existed:
    /// they read as firing.
    #[serde(default)]
    pub state: AlertState,
    /// When the alert became inactive (nanoseconds since the Unix epoch); only in a
    /// resolved document.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resolved_at: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where an alert is in its life: each state is delivered to a target at most once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    #[default]
    Firing,
    Resolved,
}

impl AlertState {
    /// The name in JSON, in a delivery's `webhook-id`, and in the delivery history.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }
}

impl fmt::Display for AlertState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Alert {
    /// This alert as it was while firing: a resolved document with its resolution left out
    /// (an operator's retry of a firing delivery republishes this).
    pub fn as_firing(&self) -> Alert {
        Alert { state: AlertState::Firing, resolved_at: 0, ..self.clone() }
    }
}

/// Why a record is not a valid alert.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AlertError {
    #[error("not an alert document: {0}")]
    Invalid(String),
    #[error("alert document has no `version` field")]
    MissingVersion,
    #[error("alert format version {found} is not supported by this build (it reads version {ALERT_FORMAT_VERSION}); upgrade tayga")]
    UnsupportedVersion { found: u64 },
    #[error("unknown alert kind `{0}` (expected new_template, spike or silence)")]
    UnknownKind(String),
    #[error("`{value}` is not an id: expected 1 to 16 hexadecimal digits, as in 00c0ffee00c0ffee")]
    BadId { value: String },
    #[error("alert field `{0}` is not a finite number")]
    NotFinite(&'static str),
}

#[derive(Deserialize)]
struct VersionProbe {
    version: Option<serde_json::Value>,
}

impl Alert {
    /// Reads one record value. The version is checked first, so a document of a newer
    /// version is reported as such rather than as a confusing field error.
    pub fn from_json(bytes: &[u8]) -> Result<Alert, AlertError> {
        let probe: VersionProbe = serde_json::from_slice(bytes).map_err(|e| AlertError::Invalid(e.to_string()))?;
        match probe.version {
            None | Some(serde_json::Value::Null) => return Err(AlertError::MissingVersion),
            Some(serde_json::Value::Number(n)) => match n.as_u64() {
                Some(v) if v == u64::from(ALERT_FORMAT_VERSION) => {}
                Some(found) => return Err(AlertError::UnsupportedVersion { found }),
                None => return Err(AlertError::Invalid(format!("`version` must be a positive integer, found {n}"))),
            },
            Some(other) => {
                return Err(AlertError::Invalid(format!("`version` must be a positive integer, found {other}")))
            }
        }
        serde_json::from_slice(bytes).map_err(|e| {
            let text = e.to_string();
            if text.contains("unknown variant") {
                // Name the kind plainly: "unknown variant `x`, expected one of …".
                let kind = text.split('`').nth(1).unwrap_or_default().to_string();
                AlertError::UnknownKind(kind)
            } else {
                AlertError::Invalid(text)
            }
        })
    }

    /// The record value: compact JSON. Fails only on non-finite numbers, which JSON cannot
    /// carry.
    pub fn to_json(&self) -> Result<Vec<u8>, AlertError> {
        if !self.baseline.is_finite() {
            return Err(AlertError::NotFinite("baseline"));
        }
        if !self.threshold.is_finite() {
            return Err(AlertError::NotFinite("threshold"));
        }
        Ok(serde_json::to_vec(self).expect("an alert always serialises"))
    }

    /// The record key on `<prefix>.alerts` (the template id: docs/design.md#topics), in the id form.
    pub fn key(&self) -> String {
        format_id(self.template_id)
    }
}

/// The header on a record republished by an operator's manual retry (`tayga deliveries
/// retry`): when the retry was asked for, in decimal Unix nanoseconds. The document is the
/// alert's as stored, unchanged, so a reader that ignores the header sees one more
/// republished copy; Tayga's notifier judges the retried pairs' age by this time instead of
/// `last_at` (docs/notifier.md). Headers are outside the versioned document: adding one is
/// compatible within version 1.
pub const MANUAL_RETRY_HEADER: &str = "tayga-manual-retry-ns";

/// The headers of a manual retry's record.
pub fn manual_retry_headers(retried_ns: u64) -> [(String, String); 1] {
    [(MANUAL_RETRY_HEADER.to_string(), retried_ns.to_string())]
}

/// The retry time a record carries, if it is a manual retry's (an unreadable value reads as
/// none: the record is then an ordinary copy).
pub fn manual_retry_ns(headers: Option<&rdkafka::message::BorrowedHeaders>) -> Option<u64> {
    use rdkafka::message::Headers;
    let header = headers?.iter().find(|h| h.key == MANUAL_RETRY_HEADER)?;
    std::str::from_utf8(header.value?).ok()?.parse().ok()
}

/// An id as it appears in JSON and on the command line: 16 lowercase hex digits.
pub fn format_id(id: u64) -> String {
    format!("{id:016x}")
}

/// Reads an id written by [`format_id`]. Accepts 1 to 16 hex digits in either case (leading
/// zeros may be dropped) and an optional `0x`; surrounding spaces are ignored. Decimal is
/// not accepted: `1234` is read as hex.
pub fn parse_id(text: &str) -> Result<u64, AlertError> {
    let bad = || AlertError::BadId { value: text.to_string() };
    let t = text.trim();
    let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    u64::from_str_radix(digits, 16).map_err(|_| bad())
}

/// Serde for ids as hex strings.
pub mod hex_id {
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_id(*id))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        super::parse_id(&text).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_manual_retry_header_reads_back_and_its_absence_is_an_ordinary_copy() {
        let headers = crate::wire::record::owned_headers(&manual_retry_headers(1_764_410_400_000_000_123));
        assert_eq!(manual_retry_ns(Some(headers.as_borrowed())), Some(1_764_410_400_000_000_123));
        assert_eq!(manual_retry_ns(None), None);
        assert_eq!(manual_retry_ns(Some(rdkafka::message::OwnedHeaders::new().as_borrowed())), None);
        let garbled = rdkafka::message::OwnedHeaders::new()
            .insert(rdkafka::message::Header { key: MANUAL_RETRY_HEADER, value: Some("soon") });
        assert_eq!(manual_retry_ns(Some(garbled.as_borrowed())), None);
    }

    fn sample() -> Alert {
        Alert {
            version: 1,
            alert_id: 0x00c0_ffee_0000_0001,
            kind: AlertKind::Spike,
            service: "checkout".into(),
            template_id: 0xfedc_ba98_7654_3210,
            template: "payment failed: card <*> declined".into(),
            first_at: 1_764_410_400_000_000_000,
            last_at: 1_764_410_460_000_000_000,
            count: 412,
            baseline: 12.5,
            threshold: 62.5,
            state: AlertState::Firing,
            resolved_at: 0,
        }
    }

    #[test]
    fn the_documented_example_reads() {
        // Keep in step with docs/alerts.md.
        let doc = r#"{"version":1,"alert_id":"00c0ffee00000001","kind":"spike","service":"checkout",
            "template_id":"fedcba9876543210","template":"payment failed: card <*> declined",
            "first_at":1764410400000000000,"last_at":1764410460000000000,
            "count":412,"baseline":12.5,"threshold":62.5}"#;
        assert_eq!(Alert::from_json(doc.as_bytes()).unwrap(), sample());
    }

    #[test]
    fn a_firing_document_says_so_and_a_resolved_one_says_when() {
        let firing: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        assert_eq!(firing["state"], "firing");
        assert!(firing.get("resolved_at").is_none(), "{firing}");
        let resolved = Alert { state: AlertState::Resolved, resolved_at: 1_764_410_760_000_000_000, ..sample() };
        let json: serde_json::Value = serde_json::from_slice(&resolved.to_json().unwrap()).unwrap();
        assert_eq!(
            (json["state"].as_str(), json["resolved_at"].as_u64()),
            (Some("resolved"), Some(1_764_410_760_000_000_000))
        );
        assert_eq!(Alert::from_json(&resolved.to_json().unwrap()).unwrap(), resolved);
        assert_eq!(resolved.as_firing(), sample());
    }

    #[test]
    fn ids_are_16_lowercase_hex_digits_in_json() {
        let json: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        assert_eq!(json["alert_id"], "00c0ffee00000001");
        assert_eq!(json["template_id"], "fedcba9876543210");
        assert_eq!(json["kind"], "spike");
        assert_eq!(json["first_at"], 1_764_410_400_000_000_000u64);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let mut json: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        json["severity"] = "high".into();
        json["labels"] = serde_json::json!({"team": "payments"});
        assert_eq!(Alert::from_json(json.to_string().as_bytes()).unwrap(), sample());
    }

    #[test]
    fn an_unknown_version_is_rejected_clearly() {
        let mut json: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        json["version"] = 2.into();
        // A v2 document may have changed anything else too: the version is checked first.
        json["kind"] = "something_new".into();
        let err = Alert::from_json(json.to_string().as_bytes()).unwrap_err();
        assert_eq!(err, AlertError::UnsupportedVersion { found: 2 });
        assert!(err.to_string().contains("version 2 is not supported"), "{err}");

        json.as_object_mut().unwrap().remove("version");
        assert_eq!(Alert::from_json(json.to_string().as_bytes()).unwrap_err(), AlertError::MissingVersion);
        json["version"] = "1".into();
        assert!(matches!(Alert::from_json(json.to_string().as_bytes()), Err(AlertError::Invalid(_))));
    }

    #[test]
    fn bad_documents_are_named() {
        assert!(matches!(Alert::from_json(b"not json"), Err(AlertError::Invalid(_))));
        let mut json: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        json["kind"] = "panic".into();
        assert_eq!(Alert::from_json(json.to_string().as_bytes()).unwrap_err(), AlertError::UnknownKind("panic".into()));
        json["kind"] = "spike".into();
        json["alert_id"] = 12345.into();
        assert!(matches!(Alert::from_json(json.to_string().as_bytes()), Err(AlertError::Invalid(_))));
        json["alert_id"] = "xyz".into();
        let err = Alert::from_json(json.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("`xyz` is not an id"), "{err}");
    }

    #[test]
    fn non_finite_values_cannot_be_written() {
        let mut alert = sample();
        alert.baseline = f64::NAN;
        assert_eq!(alert.to_json().unwrap_err(), AlertError::NotFinite("baseline"));
    }

    #[test]
    fn id_helpers() {
        assert_eq!(format_id(0), "0000000000000000");
        assert_eq!(format_id(u64::MAX), "ffffffffffffffff");
        assert_eq!(parse_id("00c0ffee00000001").unwrap(), 0x00c0_ffee_0000_0001);
        assert_eq!(parse_id("C0FFEE").unwrap(), 0xc0ffee);
        assert_eq!(parse_id(" 0xff ").unwrap(), 255);
        for bad in ["", "0x", "12345678901234567", "-1", "g", "1 2", "+1"] {
            assert!(parse_id(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn rows_convert_both_ways() {
        let row = sample().to_row(5, 6);
        assert_eq!(row.kind, "spike");
        assert_eq!((row.stored_ns, row.updated_ns), (5, 6));
        assert_eq!(Alert::from_row(&row).unwrap(), sample());
        let mut row = row;
        row.kind = "other".into();
        assert!(Alert::from_row(&row).is_err());
    }

    /// Values as the logminer computes them (counts per minute, a few decimals). serde_json's
    /// default float parser may be one ULP off on arbitrary 17-digit doubles; that is not a
    /// property of the format, so it is not what this test is about.
    fn decimal() -> impl Strategy<Value = f64> {
        (any::<i32>(), 0i32..4).prop_map(|(m, e)| f64::from(m) / 10f64.powi(e))
    }

    fn any_alert() -> impl Strategy<Value = Alert> {
        (
            any::<u64>(),
            prop::sample::select(AlertKind::ALL.to_vec()),
            ".{0,20}",
            any::<u64>(),
            ".{0,60}",
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            decimal(),
            decimal(),
            prop_oneof![Just(0u64), any::<u64>()],
        )
            .prop_map(
                |(
                    alert_id,
                    kind,
                    service,
                    template_id,
                    template,
                    first_at,
                    last_at,
                    count,
                    baseline,
                    threshold,
                    resolved_at,
                )| {
                    let state = if resolved_at > 0 { AlertState::Resolved } else { AlertState::Firing };
                    Alert {
                        version: ALERT_FORMAT_VERSION,
                        alert_id,
                        kind,
                        service,
                        template_id,
                        template,
                        first_at,
                        last_at,
                        count,
                        baseline,
                        threshold,
                        state,
                        resolved_at,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn every_alert_round_trips(alert in any_alert()) {
            let bytes = alert.to_json().unwrap();
            prop_assert_eq!(Alert::from_json(&bytes).unwrap(), alert);
        }

        #[test]
        fn every_id_round_trips(id in any::<u64>()) {
            let text = format_id(id);
            prop_assert_eq!(text.len(), 16);
            prop_assert!(text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            prop_assert_eq!(parse_id(&text).unwrap(), id);
            prop_assert_eq!(parse_id(&text.to_uppercase()).unwrap(), id);
        }

        #[test]
        fn reading_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = Alert::from_json(&bytes);
        }
    }
}
