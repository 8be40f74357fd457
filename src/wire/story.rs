//! The story record on `<prefix>.stories` (docs/design.md#topics, #assembler): a versioned JSON document,
//! defined here once and used by the producer (the assembler) and every reader (systems
//! outside Tayga). Its fields but the version are [`StoryRow`] (`crate::model`), the row of
//! the `stories` table the app reads, so a field is added in one place. It is a public
//! interface, documented in `docs/stories.md`.
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

use super::alert::format_id;
pub use crate::model::{StoryRow, MAX_EXCEPTION_MESSAGE_BYTES, MISSING_ROOT};

/// The version this build writes.
pub const STORY_FORMAT_VERSION: u32 = 2;

/// The versions this build reads: 1 (before stories carried an exception) and 2.
pub const STORY_FORMAT_VERSIONS_READ: [u32; 2] = [1, 2];

/// One assembled trace, as published on `<prefix>.stories` (keyed by [`Story::key`]), and
/// as the API answers it: the format version, then the story itself, which is also the
/// `stories` table's row ([`StoryRow`]; the table keeps no version). Flattened, so the
/// document is one JSON object with `version` first, as it always was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Story {
    /// Always [`STORY_FORMAT_VERSION`] in what this build writes.
    pub version: u32,
    #[serde(flatten)]
    pub row: StoryRow,
}

/// The schema the derive would give `Story` were it not flattened (a derive would state it
/// as `allOf` of the row and the version): the row's object with `version` first.
impl utoipa::PartialSchema for Story {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::Schema;
        use utoipa::openapi::RefOr;
        #[derive(utoipa::ToSchema)]
        #[allow(dead_code)]
        struct Version {
            /// Always [`STORY_FORMAT_VERSION`] in what this build writes.
            version: u32,
        }
        let mut story = crate::model::flattened_schema(
            <Version as utoipa::PartialSchema>::schema(),
            <StoryRow as utoipa::PartialSchema>::schema(),
            0,
        );
        // Word for word what the derive gave the type before its fields moved to the row, so
        // the OpenAPI document stayed the same.
        story.description = Some(
            "One assembled trace, as published on `<prefix>.stories` (keyed by [`Story::key`]), and\n\
             as the API answers it: one type from topic to table to API."
                .to_string(),
        );
        RefOr::T(Schema::Object(story))
    }
}

impl utoipa::ToSchema for Story {}

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
    /// The document of `row` in the version this build writes (also how the API shows a
    /// row of the `stories` table).
    pub fn current(row: StoryRow) -> Story {
        Story { version: STORY_FORMAT_VERSION, row }
    }

    /// The record key: the fingerprint as 16 lowercase hex digits.
    pub fn key(&self) -> String {
        format_id(self.row.fingerprint)
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
        Story::current(StoryRow {
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
        })
    }

    #[test]
    fn json_round_trip() {
        let s = story();
        let json = s.to_json().unwrap();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(text.contains(r#""fingerprint":"00c0ffee00c0ffee""#), "{text}");
        assert!(text.contains(r#""version":2"#), "{text}");
        assert!(text.contains(r#""exception_type":"Error","exception_message":"card declined""#), "{text}");
        assert_eq!(Story::from_json(&json).unwrap(), s);
        // Byte for byte what the document was before its fields moved to the row: version first.
        let whole = concat!(
            r#"{"version":2,"trace_id":"0af7651916cd43dd8448eb211c80319c","fingerprint":"00c0ffee00c0ffee","#,
            r#""root_service":"web","root_operation":"GET /","start_ns":1764460800000000000,"duration_ns":1500,"#,
            r#""span_count":2,"services":["db","web"],"edges":["ROOT -> web/GET /","web/GET / -> db/query"],"#,
            r#""error":true,"error_spans":1,"log_count":3,"truncated":false,"version_ns":1764460900000000000,"#,
            r#""exception_type":"Error","exception_message":"card declined"}"#
        );
        assert_eq!(text, whole);
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

    /// The API's schema states the document as it is: every field, `version` first among
    /// the required (the exception fields may be absent, in a version 1 document).
    #[test]
    fn the_schema_is_the_document() {
        use std::collections::BTreeSet;
        use utoipa::openapi::{schema::Schema, RefOr};
        let RefOr::T(Schema::Object(schema)) = <Story as utoipa::PartialSchema>::schema() else {
            panic!("Story's schema is an object");
        };
        let json = serde_json::to_value(story()).unwrap();
        let fields: BTreeSet<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(schema.properties.keys().collect::<BTreeSet<_>>(), fields);
        let optional: BTreeSet<&str> = ["exception_type", "exception_message"].into();
        let required: Vec<&String> = fields.iter().copied().filter(|f| !optional.contains(f.as_str())).collect();
        assert_eq!(schema.required.first().map(String::as_str), Some("version"));
        assert_eq!(schema.required.iter().collect::<BTreeSet<_>>(), required.into_iter().collect());
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
        assert_eq!((story.version, story.row.fingerprint, story.row.error_spans), (1, 0x59a2_176b_778d_ae71, 1));
        assert_eq!((story.row.exception_type.as_str(), story.row.exception_message.as_str()), ("", ""));
    }
}
