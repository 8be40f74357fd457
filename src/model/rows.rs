//! One struct per table, in the column order of `schema.rs`. The crate's schema validation
//! is off (ClickHouse 18.16 lacks RowBinaryWithNamesAndTypes), so RowBinary is written by
//! field position: `tests/it/store.rs` round-trips a row of every table to prove each
//! struct still matches its table.

use clickhouse::{Row, RowOwned, RowRead, RowWrite};
use serde::{Deserialize, Serialize};

/// A row type and the table it belongs to.
pub trait TableRow: RowOwned + RowRead + RowWrite + Send + Sync {
    const TABLE: &'static str;
    /// The column whose day names the row's partition (`schema::DAY_PARTITIONED`); `None`
    /// for an unpartitioned table.
    const PARTITION_COLUMN: Option<&'static str>;

    /// The value of [`TableRow::PARTITION_COLUMN`], in nanoseconds.
    fn partition_ns(&self) -> Option<u64>;
}

macro_rules! table_row {
    ($ty:ident, $table:literal) => {
        impl TableRow for $ty {
            const TABLE: &'static str = $table;
            const PARTITION_COLUMN: Option<&'static str> = None;

            fn partition_ns(&self) -> Option<u64> {
                None
            }
        }
    };
    ($ty:ident, $table:literal, partitioned by $column:ident) => {
        impl TableRow for $ty {
            const TABLE: &'static str = $table;
            const PARTITION_COLUMN: Option<&'static str> = Some(stringify!($column));

            fn partition_ns(&self) -> Option<u64> {
                Some(self.$column)
            }
        }
    };
}

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct SpanRow {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub service: String,
    pub name: String,
    pub kind: u8,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub status_code: u8,
    pub status_message: String,
    pub attr_keys: Vec<String>,
    pub attr_values: Vec<String>,
    pub resource_keys: Vec<String>,
    pub resource_values: Vec<String>,
    pub scope_name: String,
    pub event_count: u32,
    pub link_count: u32,
    pub ingest_ns: u64,
    // Migration 6: the rest of what OTLP sends (`schema.rs` says how values keep their type).
    pub trace_state: String,
    pub flags: u32,
    pub dropped_attributes_count: u32,
    pub dropped_events_count: u32,
    pub dropped_links_count: u32,
    /// Each attribute's type (`model::attributes::value_type`), beside `attr_values`.
    pub attr_types: Vec<u8>,
    pub resource_types: Vec<u8>,
    pub resource_schema_url: String,
    pub scope_version: String,
    /// The scope's attributes as an OTLP/JSON KeyValue list ('' when none).
    pub scope_attributes: String,
    pub scope_schema_url: String,
    pub event_time_ns: Vec<u64>,
    pub event_names: Vec<String>,
    /// Each event's attributes as an OTLP/JSON KeyValue list ('' when none).
    pub event_attributes: Vec<String>,
    pub event_dropped_attributes: Vec<u32>,
    /// Lowercase hex, as `trace_id`.
    pub link_trace_ids: Vec<String>,
    pub link_span_ids: Vec<String>,
    pub link_trace_states: Vec<String>,
    pub link_attributes: Vec<String>,
    pub link_flags: Vec<u32>,
    pub link_dropped_attributes: Vec<u32>,
}
table_row!(SpanRow, "spans", partitioned by start_ns);

impl SpanRow {
    /// A span with only its place in a trace and its times: the unit tests' traces, which
    /// several layers build.
    #[cfg(test)]
    pub fn sketch(span_id: &str, parent: &str, service: &str, name: &str, start_ns: u64, end_ns: u64) -> SpanRow {
        SpanRow {
            span_id: span_id.into(),
            parent_span_id: parent.into(),
            service: service.into(),
            name: name.into(),
            start_ns,
            end_ns,
            duration_ns: end_ns - start_ns,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct LogRow {
    pub log_id: u64,
    pub service: String,
    pub time_ns: u64,
    pub observed_ns: u64,
    pub severity_number: u8,
    pub severity_text: String,
    pub body: String,
    pub trace_id: String,
    pub span_id: String,
    pub attr_keys: Vec<String>,
    pub attr_values: Vec<String>,
    pub resource_keys: Vec<String>,
    pub resource_values: Vec<String>,
    pub scope_name: String,
    pub ingest_ns: u64,
    // Migration 6, in `logs` and `trace_logs` alike. None of these is part of the log's
    // identity, so a log stored before keeps its id.
    pub event_name: String,
    pub flags: u32,
    pub dropped_attributes_count: u32,
    pub attr_types: Vec<u8>,
    pub resource_types: Vec<u8>,
    /// The body's type (`model::attributes::value_type`).
    pub body_type: u8,
    /// A body that is not a plain scalar (a map, an array, bytes) as its OTLP/JSON AnyValue,
    /// lossless; '' otherwise (then `body` is the value itself).
    pub body_value: String,
    pub resource_schema_url: String,
    pub scope_version: String,
    pub scope_attributes: String,
    pub scope_schema_url: String,
}
table_row!(LogRow, "logs", partitioned by time_ns);

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct TemplateRow {
    pub service: String,
    pub template_id: u64,
    pub template: String,
    pub count: u64,
    pub first_seen_ns: u64,
    pub last_seen_ns: u64,
    pub masking_version: String,
    pub updated_ns: u64,
}
table_row!(TemplateRow, "log_templates");

/// A template retired by a sibling merge, and the live template that took its lines
/// (`survivor_id = absorbed_id`: born again since, live). The newest `merged_ns` wins.
#[derive(Debug, Clone, PartialEq, Eq, Default, Row, Serialize, Deserialize)]
pub struct TemplateMergeRow {
    pub service: String,
    pub absorbed_id: u64,
    pub survivor_id: u64,
    pub merged_ns: u64,
    pub masking_version: String,
}
table_row!(TemplateMergeRow, "log_template_merges");

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct HitRow {
    pub service: String,
    pub log_id: u64,
    pub template_id: u64,
    pub time_ns: u64,
}
table_row!(HitRow, "log_hits", partitioned by time_ns);

/// One assembled trace: the `stories` table's row, and the body of the story document
/// (`crate::wire::story::Story`, which adds the format version the table does not keep) that
/// the assembler publishes and the API answers. Its serde form is both: in RowBinary the
/// flags are UInt8 (clickhouse writes a bool as one byte 0 or 1) and the fingerprint a
/// UInt64; in JSON the flags are booleans and the fingerprint 16 hex digits ([`hex_id`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Row, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StoryRow {
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
table_row!(StoryRow, "stories", partitioned by start_ns);

/// The longest exception message a story keeps, in bytes (cut at a character boundary): a
/// message can hold a whole payload, and the story is the summary; the span keeps it whole.
pub const MAX_EXCEPTION_MESSAGE_BYTES: usize = 1024;

/// `root_operation` of a story whose trace has no span without a parent (`root_service`
/// is then empty).
pub const MISSING_ROOT: &str = "missing root";

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct AlertRow {
    pub alert_id: u64,
    pub kind: String,
    pub service: String,
    pub template_id: u64,
    pub template: String,
    pub first_at: u64,
    pub last_at: u64,
    pub count: u64,
    pub baseline: f64,
    pub threshold: f64,
    pub stored_ns: u64,
    pub updated_ns: u64,
    /// When the logminer judged the alert inactive (0: active, or not judged yet).
    pub resolved_at: u64,
    /// Shape alerts: what the shape changed, as JSON (`wire::alert::ShapeChange`); '' else.
    pub shape: String,
}
table_row!(AlertRow, "log_alerts", partitioned by first_at);

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct AlertPublicationRow {
    pub alert_id: u64,
    pub alert_updated_ns: u64,
    pub published_ns: u64,
}
table_row!(AlertPublicationRow, "log_alert_publications");

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct StateRow {
    pub key: String,
    pub value: String,
    pub updated_ns: u64,
}
table_row!(StateRow, "logminer_state");

/// Where the delivery of one alert state to one target stands: the `notifier_deliveries`
/// table's row, and the body of the API's delivery (`daemon::api::handlers::deliveries::Delivery`,
/// which adds the state the row was delivered for), so the field docs here are the API
/// document's descriptions. Its serde form is both: in RowBinary the ids are UInt64; in JSON
/// `alert_id` is 16 hex digits ([`hex_id`]) and `silence_id` too, or `""` when 0, no silence
/// ([`hex_id_or_empty`]).
#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryRow {
    #[serde(with = "hex_id")]
    #[schema(value_type = String)]
    pub alert_id: u64,
    pub target: String,
    /// `pending`, `delivered`, `failed` or `silenced` (held back by an operator's silence).
    pub status: String,
    pub attempts: u32,
    pub last_error: String,
    pub created_ns: u64,
    pub updated_ns: u64,
    /// Times an operator retried the pair (`tayga deliveries retry`, or this API).
    pub manual_retries: u32,
    /// When the latest manual retry was asked for, Unix ns; 0 when never.
    pub retried_ns: u64,
    /// Who asked: `cli:<user>@<host>` or `api`; empty when never.
    pub retried_by: String,
    /// The silence that held a `silenced` pair back (16 hex digits); empty otherwise.
    #[serde(with = "hex_id_or_empty")]
    #[schema(value_type = String)]
    pub silence_id: u64,
}
table_row!(DeliveryRow, "notifier_deliveries", partitioned by created_ns);

/// An operator's silence (`store::silences`): the alerts it matches and its time span.
#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct SilenceRow {
    pub silence_id: u64,
    pub service: String,
    /// Empty: every kind.
    pub kind: String,
    /// 0: every template.
    pub template_id: u64,
    pub starts_ns: u64,
    pub ends_ns: u64,
    pub comment: String,
    /// `cli:<user>@<host>` or `api`.
    pub created_by: String,
    pub created_ns: u64,
    /// Who expired it early; empty when it runs (or ran) its course.
    pub expired_by: String,
    pub updated_ns: u64,
}
table_row!(SilenceRow, "notifier_silences");

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct MetricSampleRow {
    pub ts_ns: u64,
    pub service: String,
    pub instance: String,
    pub metric: String,
    pub label_keys: Vec<String>,
    pub label_values: Vec<String>,
    pub value: f64,
}
table_row!(MetricSampleRow, "pipeline_metrics", partitioned by ts_ns);

/// One record of ingest's backlog (`store::backlog`): a pending record, or (with
/// `replayed = 1`, no value and a newer `version_ns`) the mark that it was replayed.
#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct BacklogRow {
    /// When ingest wrote it (unique per process); oldest first is replay order.
    pub created_ns: u64,
    /// The writing process's nonce, so two processes never share a key.
    pub nonce: u64,
    /// The record's place in its request.
    pub position: u32,
    pub topic: String,
    pub key: String,
    pub header_keys: Vec<String>,
    pub header_values: Vec<String>,
    /// The record's value (OTLP protobuf), as `Array(UInt8)`.
    #[serde(with = "bytes_column")]
    pub value: Vec<u8>,
    pub value_bytes: u32,
    pub replayed: u8,
    pub version_ns: u64,
}
table_row!(BacklogRow, "ingest_backlog", partitioned by created_ns);

/// Bytes as one RowBinary blob (length, then the bytes: the encoding of `Array(UInt8)`),
/// instead of serde's element-by-element sequence; JSON (the registry's sample rows) gets
/// an array of numbers, which `Array(UInt8)` also reads.
mod bytes_column {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_byte_buf(Visitor)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Row, Serialize, Deserialize)]
pub struct MigrationRow {
    pub version: u32,
    pub name: String,
    pub applied_ns: u64,
}
table_row!(MigrationRow, "schema_migrations");

/// An id as it appears in JSON and on the command line: 16 lowercase hex digits.
pub fn format_hex_id(id: u64) -> String {
    format!("{id:016x}")
}

/// Reads an id written by [`format_hex_id`]: 1 to 16 hex digits in either case (leading zeros
/// may be dropped) and an optional `0x`; surrounding spaces are ignored. Decimal is not
/// accepted: `1234` is read as hex.
pub fn parse_hex_id(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// Serde for a u64 id: hex text ([`format_hex_id`]) in a human-readable format (JSON), the
/// number itself in a binary one (RowBinary, whose serializer says it is not human-readable),
/// so one field is both a UInt64 column and a hex JSON string.
pub mod hex_id {
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&super::format_hex_id(*id))
        } else {
            s.serialize_u64(*id)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        if !d.is_human_readable() {
            return u64::deserialize(d);
        }
        read(&<std::borrow::Cow<'de, str>>::deserialize(d)?)
    }

    pub(super) fn read<E: de::Error>(text: &str) -> Result<u64, E> {
        super::parse_hex_id(text).ok_or_else(|| {
            E::custom(format!("`{text}` is not an id: expected 1 to 16 hexadecimal digits, as in 00c0ffee00c0ffee"))
        })
    }
}

/// The OpenAPI schema of a JSON document that is `head`'s fields with a row flattened in
/// (`#[serde(flatten)]`, which a derive would state as `allOf` of the two): one object with
/// every field, `head`'s required placed at `at` among the row's. Both schemas are derived
/// from structs, so both are objects.
pub fn flattened_schema(
    head: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
    row: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
    at: usize,
) -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{Object, Schema};
    use utoipa::openapi::RefOr;
    let object = |schema: RefOr<Schema>| match schema {
        RefOr::T(Schema::Object(o)) => o,
        _ => unreachable!("a derived struct schema is an object"),
    };
    let (mut document, row): (Object, Object) = (object(head), object(row));
    document.properties.extend(row.properties);
    let mut required = row.required;
    required.splice(at..at, document.required);
    document.required = required;
    document
}

/// Serde for a u64 id where 0 means none (a delivery's silence): as [`hex_id`], but none is
/// `""` in a human-readable format, as the API has always written it; RowBinary keeps the
/// number, 0 included.
pub mod hex_id_or_empty {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        if *id == 0 && s.is_human_readable() {
            s.serialize_str("")
        } else {
            super::hex_id::serialize(id, s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        if !d.is_human_readable() {
            return u64::deserialize(d);
        }
        match <std::borrow::Cow<'de, str>>::deserialize(d)? {
            text if text.is_empty() => Ok(0),
            text => super::hex_id::read(&text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivery reads back from its JSON, no silence (`""`) included; an id that is not hex
    /// is refused.
    #[test]
    fn a_delivery_row_round_trips_through_json() {
        for silence_id in [0, 0xab] {
            let row = DeliveryRow { alert_id: 0x00c0_ffee, target: "ops".into(), silence_id, ..Default::default() };
            let json = serde_json::to_string(&row).unwrap();
            assert_eq!(serde_json::from_str::<DeliveryRow>(&json).unwrap(), row, "{json}");
        }
        let mut json = serde_json::to_value(DeliveryRow::default()).unwrap();
        assert_eq!((&json["alert_id"], &json["silence_id"]), (&"0000000000000000".into(), &"".into()));
        json["silence_id"] = "nope".into();
        assert!(serde_json::from_value::<DeliveryRow>(json).unwrap_err().to_string().contains("`nope` is not an id"));
    }
}
