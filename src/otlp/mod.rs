//! OpenTelemetry data as Tayga handles it: splitting a request into per-key records for the
//! topics (`split`), and flattening it into the rows of the spans and logs tables
//! (`flatten`). Both are pure and shared: ingest's broker path and direct path, the writer
//! and the logminer all use the same functions, so a span or log has one identity
//! wherever it was stored.

pub mod decode;
pub mod flatten;
pub mod protobuf;
pub mod rowbinary;
pub mod split;
pub mod synth;

pub use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;

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

/// Attributes as the parallel key and value arrays of the tables, in their given order.
pub fn attribute_arrays(attributes: &[KeyValue]) -> (Vec<String>, Vec<String>) {
    attributes.iter().map(|kv| (kv.key.clone(), any_value_text(kv.value.as_ref()))).unzip()
}
