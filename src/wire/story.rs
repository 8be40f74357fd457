//! The story record on `<prefix>.stories` (docs/design.md#topics, #assembler): a versioned JSON document,
//! defined here once and used by the producer (the assembler) and every reader (systems
//! outside Tayga; the app reads the `stories` table, whose row is [`Story::to_row`]). It is a
//! public interface, documented in `docs/stories.md`.
//!
//! Rules of the format (the same as the alert record's, `src/wire/alert.rs`):
//! - `version` is required; a reader rejects a version it does not know. This build writes
//!   version 2 (version 1 and the first exception of an error trace) and reads 1 and 2: a
//!   version 1 document reads with no exception.
//! - Unknown fields are ignored on read, so a producer may add fields within a version.
//! - The fingerprint is a u64 hash written as 16 lowercase hex digits (JavaScript numbers
//!   lose precision above 2^53); it is also the record's key.
//! - Timestamps are integer nanoseconds since the Unix epoch.
//! - A trace may be published more than once (a late span, a re-read after a restart): the
//!   document with the highest `version_ns` for a `trace_id` is the current one.

use serde::{Deserialize, Serialize};

use super::alert::{format_id, hex_id};

/// The version this build writes.
pub const STORY_FORMAT_VERSION: u32 = 2;

/// The versions this build reads: 1 (before stories carried an exception) and 2.
pub const STORY_FORMAT_VERSIONS_READ: [u32; 2] = [1, 2];

/// The longest exception message a story keeps, in bytes (cut at a character boundary): a
/// message can hold a whole payload, and the story is the summary; the span keeps it whole.
pub const MAX_EXCEPTION_MESSAGE_BYTES: usize = 1024;

/// `root_operation` of a story whose trace has no span without a parent (`root_service`
/// is then empty).
pub const MISSING_ROOT: &str = "missing root";

/// One assembled trace, as published on `<prefix>.stories` (keyed by [`Story::key`]), and
/// as the API answers it: one type from topic to table to API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Story {
    /// Always [`STORY_FORMAT_VERSION`] in what this build writes.
    pub version: u32,
    /// 32 lowercase hex digits, as in OTLP/JSON.
    pub trace_id: String,
    /// The shape: `identity::story_fingerprint` of the trace's call edges.
    #[serde(with = "hex_id")]
    #[schema(value_type = String, pattern = "^[0-9a-f]{16}$")]
    pub fingerprint: u64,
    /// The root span's service and operation; `""` and [`MISSING_ROOT`] without a root.
    pub root_service: String,
    pub root_operation: String,
    /// Earliest span start, nanoseconds since the epoch.
    pub start_ns: u64,
    /// Latest span end minus `start_ns`.
    pub duration_ns: u64,
    pub span_count: u32,
    /// Every service with a span in the trace, sorted.
    pub services: Vec<String>,
    /// The call edges, sorted, as text: `parent_service/parent_operation -> service/operation`,
    /// or `ROOT -> service/operation` for a span with no parent span in the trace.
    pub edges: Vec<String>,
    /// True when any span has status ERROR.
    pub error: bool,
    /// How many spans have status ERROR.
    pub error_spans: u32,
    /// Log records carrying this trace id that the assembler saw.
    pub log_count: u32,
    /// The trace grew past `assembler.max_spans_per_trace`: only the first spans are in it.
    pub truncated: bool,
    /// When this version of the story was built (ns): the newest version wins.
    pub version_ns: u64,
    /// Version 2: the first exception of an error trace (the earliest `exception` event of
    /// an error span, else of any span), its `exception.type` and `exception.message` (at
    /// most [`MAX_EXCEPTION_MESSAGE_BYTES`]); both `""` when the trace has no error or no
    /// exception, and in a version 1 document.
    #[serde(default)]
    pub exception_type: String,
    #[serde(default)]
    pub exception_message: String,
}

/// Why a record is not a valid story.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StoryError {
    #[error("not a story document: {0}")]
    Invalid(String),
    #[error("story document has no numeric `version` field")]
    MissingVersion,
    #[error("story format version {found} is not supported by this build (it reads versions 1 and 2); upgrade tayga")]
    UnsupportedVersion { found: u64 },
}

#[derive(Deserialize)]
struct VersionProbe {
    version: Option<serde_json::Value>,
}

impl Story {
    /// The record key: the fingerprint as 16 lowercase hex digits.
    pub fn key(&self) -> String {
        format_id(self.fingerprint)
    }

    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// Reads one record value; the version is checked first.
    pub fn from_json(bytes: &[u8]) -> Result<Story, StoryError> {
        let probe: VersionProbe = serde_json::from_slice(bytes).map_err(|e| StoryError::Invalid(e.to_string()))?;
        match probe.version.as_ref().and_then(serde_json::Value::as_u64) {
            None => return Err(StoryError::MissingVersion),
            Some(v) if STORY_FORMAT_VERSIONS_READ.iter().any(|known| u64::from(*known) == v) => {}
            Some(found) => return Err(StoryError::UnsupportedVersion { found }),
        }
        serde_json::from_slice(bytes).map_err(|e| StoryError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn story() -> Story {
        Story {
            version: STORY_FORMAT_VERSION,
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            fingerprint: 0x00c0_ffee_00c0_ffee,
            root_service: "web".into(),
            root_operation: "GET /".into(),
            start_ns: 1_764_460_800_000_000_000,
            duration_ns: 1500,
            span_count: 2,
            services: vec!["db".into(), "web".into()],
            edges: vec!["ROOT -> web/GET /".into(), "web/GET / -> db/query".into()],
            error: true,
            error_spans: 1,
            log_count: 3,
            truncated: false,
            version_ns: 1_764_460_900_000_000_000,
            exception_type: "Error".into(),
            exception_message: "card declined".into(),
        }
    }

    #[test]
    fn json_round_trip_and_row_round_trip() {
        let s = story();
        let json = s.to_json().unwrap();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(text.contains(r#""fingerprint":"00c0ffee00c0ffee""#), "{text}");
        assert!(text.contains(r#""version":2"#), "{text}");
        assert!(text.contains(r#""exception_type":"Error","exception_message":"card declined""#), "{text}");
        assert_eq!(Story::from_json(&json).unwrap(), s);
        assert_eq!(Story::from_row(&s.to_row()), s);
        assert_eq!(s.key(), "00c0ffee00c0ffee");
    }

    #[test]
    fn versions_are_checked_and_unknown_fields_ignored() {
        let mut v: serde_json::Value = serde_json::to_value(story()).unwrap();
        v["extra"] = serde_json::json!("ignored");
        assert_eq!(Story::from_json(&serde_json::to_vec(&v).unwrap()).unwrap(), story());
        v["version"] = serde_json::json!(3);
        assert_eq!(
            Story::from_json(&serde_json::to_vec(&v).unwrap()),
            Err(StoryError::UnsupportedVersion { found: 3 })
        );
        assert_eq!(Story::from_json(br#"{"trace_id":"x"}"#), Err(StoryError::MissingVersion));
        assert!(matches!(Story::from_json(b"nope"), Err(StoryError::Invalid(_))));
    }

    /// A reader of this build still reads what a producer of version 1 wrote: the same
    /// story, with no exception.
    #[test]
    fn a_version_1_document_reads_with_no_exception() {
        let v1 = br#"{"version":1,"trace_id":"abababababababababababab00000001","fingerprint":"59a2176b778dae71",
            "root_service":"web","root_operation":"GET /","start_ns":1764460800000000000,"duration_ns":1030000,
            "span_count":3,"services":["db","web"],"edges":["ROOT -> web/GET /","web/GET / -> db/query"],
            "error":true,"error_spans":1,"log_count":2,"truncated":false,"version_ns":1764460845123456789}"#;
        let story = Story::from_json(v1).unwrap();
        assert_eq!((story.version, story.fingerprint, story.error_spans), (1, 0x59a2_176b_778d_ae71, 1));
        assert_eq!((story.exception_type.as_str(), story.exception_message.as_str()), ("", ""));
    }
}
