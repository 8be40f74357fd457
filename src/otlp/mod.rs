//! OpenTelemetry data as Tayga handles it: splitting a request into per-key records for the
//! topics (`split`), and flattening it into the rows of the spans and logs tables
//! (`flatten`). Both are pure and shared: ingest's broker path and direct path, the writer
//! and the logminer all use the same functions, so a span or log has one identity
//! wherever it was stored.

pub mod critical;
pub mod decode;
pub mod flatten;
pub mod grpc;
pub mod protobuf;
pub mod rowbinary;
pub mod split;
pub mod synth;
pub mod tree;

pub use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// The name of an OTLP severity number's range (`ERROR` for 17 to 20, as the data model
/// names them); `UNSET` for 0.
pub fn severity_name(number: u8) -> &'static str {
    match number {
        0 => "UNSET",
        1..=4 => "TRACE",
        5..=8 => "DEBUG",
        9..=12 => "INFO",
        13..=16 => "WARN",
        17..=20 => "ERROR",
        _ => "FATAL",
    }
}

/// The service of data with no `service.name` resource attribute (the OpenTelemetry default).
pub const UNKNOWN_SERVICE: &str = "unknown_service";

/// A string attribute, as SDKs send `service.name` and most span attributes.
pub fn string_attr(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..Default::default()
    }
}

/// A resource that names only its service.
pub fn service_resource(service: &str) -> Resource {
    Resource { attributes: vec![string_attr("service.name", service)], ..Default::default() }
}

/// The `service.name` of a resource.
pub fn service_name(resource: Option<&Resource>) -> &str {
    resource
        .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(any_value::Value::StringValue(s)) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        })
        .unwrap_or(UNKNOWN_SERVICE)
}

/// A trace id is valid when it has 16 bytes and is not all zero (OTLP spec).
pub fn valid_trace_id(id: &[u8]) -> bool {
    id.len() == 16 && id.iter().any(|b| *b != 0)
}

/// Lowercase hex, as OTLP/JSON writes ids.
pub fn hex_id(id: &[u8]) -> String {
    let mut out = Vec::with_capacity(id.len() * 2);
    push_hex(&mut out, id);
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// Appends `id` as lowercase hex ([`hex_id`] without the allocation).
pub fn push_hex(out: &mut Vec<u8>, id: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(id.len() * 2);
    for b in id {
        out.push(DIGITS[(b >> 4) as usize]);
        out.push(DIGITS[(b & 0xf) as usize]);
    }
}

/// An attribute value as text for the string arrays of the tables: scalars as themselves,
/// bytes as hex, arrays and maps as JSON.
pub fn any_value_text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        None => String::new(),
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(other) => any_value_json(other).to_string(),
    }
}

fn any_value_json(value: &any_value::Value) -> serde_json::Value {
    use any_value::Value as V;
    match value {
        V::StringValue(s) => serde_json::Value::String(s.clone()),
        V::BoolValue(b) => serde_json::Value::Bool(*b),
        V::IntValue(i) => serde_json::Value::from(*i),
        V::DoubleValue(d) => {
            serde_json::Number::from_f64(*d).map_or(serde_json::Value::Null, serde_json::Value::Number)
        }
        V::BytesValue(b) => serde_json::Value::String(hex_id(b)),
        // A reference into a profiles string table; logs and spans never carry one.
        V::StringValueStrindex(i) => serde_json::Value::from(*i),
        V::ArrayValue(a) => serde_json::Value::Array(
            a.values.iter().map(|v| v.value.as_ref().map_or(serde_json::Value::Null, any_value_json)).collect(),
        ),
        V::KvlistValue(kv) => serde_json::Value::Object(
            kv.values
                .iter()
                .map(|kv| {
                    (
                        kv.key.clone(),
                        kv.value
                            .as_ref()
                            .and_then(|v| v.value.as_ref())
                            .map_or(serde_json::Value::Null, any_value_json),
                    )
                })
                .collect(),
        ),
    }
}

/// Attributes as the parallel key, value and type arrays of the tables, in their given order.
pub fn attribute_arrays(attributes: &[KeyValue]) -> (Vec<String>, Vec<String>, Vec<u8>) {
    let mut keys = Vec::with_capacity(attributes.len());
    let mut values = Vec::with_capacity(attributes.len());
    let mut types = Vec::with_capacity(attributes.len());
    for kv in attributes {
        keys.push(kv.key.clone());
        values.push(any_value_text(kv.value.as_ref()));
        types.push(value_type(kv.value.as_ref()));
    }
    (keys, values, types)
}

/// The type of a value as the tables keep it (`model::attributes::value_type`).
pub fn value_type(value: Option<&AnyValue>) -> u8 {
    use crate::model::attributes::value_type as t;
    use any_value::Value as V;
    match value.and_then(|v| v.value.as_ref()) {
        None => t::EMPTY,
        Some(V::StringValue(_)) => t::STRING,
        Some(V::BoolValue(_)) => t::BOOL,
        Some(V::IntValue(_) | V::StringValueStrindex(_)) => t::INT,
        Some(V::DoubleValue(_)) => t::DOUBLE,
        Some(V::BytesValue(_)) => t::BYTES,
        Some(V::ArrayValue(_)) => t::ARRAY,
        Some(V::KvlistValue(_)) => t::MAP,
    }
}

/// A value in its OTLP/JSON form (`store::attributes`): typed, lossless, in order. An int is
/// written as a JSON number (OTLP/JSON readers take a number or a string), a double that
/// JSON cannot hold as the proto3 JSON strings `NaN`, `Infinity`, `-Infinity`.
pub fn typed_json(value: Option<&AnyValue>) -> serde_json::Value {
    use any_value::Value as V;
    use serde_json::{json, Value};
    match value.and_then(|v| v.value.as_ref()) {
        None => Value::Object(Default::default()),
        Some(V::StringValue(s)) => json!({ "stringValue": s }),
        Some(V::BoolValue(b)) => json!({ "boolValue": b }),
        Some(V::IntValue(i)) => json!({ "intValue": i }),
        Some(V::StringValueStrindex(i)) => json!({ "intValue": i }),
        Some(V::DoubleValue(d)) => {
            let number = serde_json::Number::from_f64(*d).map_or_else(
                || {
                    Value::String(
                        if d.is_nan() {
                            "NaN"
                        } else if *d > 0.0 {
                            "Infinity"
                        } else {
                            "-Infinity"
                        }
                        .into(),
                    )
                },
                Value::Number,
            );
            json!({ "doubleValue": number })
        }
        Some(V::BytesValue(b)) => {
            use base64::Engine;
            json!({ "bytesValue": base64::engine::general_purpose::STANDARD.encode(b) })
        }
        Some(V::ArrayValue(a)) => {
            json!({ "arrayValue": { "values": a.values.iter().map(|v| typed_json(Some(v))).collect::<Vec<_>>() } })
        }
        Some(V::KvlistValue(kv)) => json!({ "kvlistValue": { "values": typed_pairs(&kv.values) } }),
    }
}

fn typed_pairs(attributes: &[KeyValue]) -> serde_json::Value {
    serde_json::Value::Array(
        attributes
            .iter()
            .map(|kv| serde_json::json!({ "key": kv.key, "value": typed_json(kv.value.as_ref()) }))
            .collect(),
    )
}

/// An attribute list in its OTLP/JSON form, as the tables keep the lists inside a list (an
/// event's, a link's, a scope's): `''` when empty.
pub fn typed_list(attributes: &[KeyValue]) -> String {
    if attributes.is_empty() {
        return String::new();
    }
    typed_pairs(attributes).to_string()
}

/// A log body's OTLP/JSON form when its text is not the value itself (a map, an array,
/// bytes), `''` otherwise.
pub fn structured_body(body: Option<&AnyValue>) -> String {
    use crate::model::attributes::value_type as t;
    match value_type(body) {
        t::BYTES | t::ARRAY | t::MAP => typed_json(body).to_string(),
        _ => String::new(),
    }
}
