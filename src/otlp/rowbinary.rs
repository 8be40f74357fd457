//! A record's OTLP protobuf bytes straight to the RowBinary rows of the `spans` or `logs`
//! table, without decoding into owned structs: the writer's hot path. The rows are the ones
//! `flatten` makes from the decoded request, byte for byte (a property test below holds the
//! two together), so a span or log has the same row, and identity, on either path.
//!
//! The fast path reads only what it can read exactly like prost does. A record it cannot
//! (bytes prost refuses, or a singular message field given twice, which prost merges) is
//! reported as [`NotCanonical`], and the caller decodes it the ordinary way: the answer is
//! the same, only slower. Protobuf writers never emit those shapes, so the slow path is for
//! hand-made or hostile bytes.

use prost::Message;

use super::flatten::{EventColumns, LinkColumns, ScopeColumns};
use super::protobuf::{self, Msg, Reader, LEN, VARINT};
use super::{any_value_text, flatten, push_hex, structured_body, value_type, UNKNOWN_SERVICE};
use crate::identity;
use crate::model::attributes::value_type as types;
use crate::model::encoded::{put_len, put_str, put_strings, put_u32, put_u32s, put_u64, put_u64s, EncodedRows};
use crate::model::{LogRow, SpanRow, TableRow};
use crate::wire::record::{RawRecord, RecordError, SignalKind, SignalPayload};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope};
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};

/// The record cannot be read by the fast path: decode it (prost) instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the record is not in the canonical shape the fast path reads; decode it instead")]
pub struct NotCanonical;

type Result<T> = std::result::Result<T, NotCanonical>;

/// The rows of a record of `kind`: by the fast path, or by decoding when it is
/// [`NotCanonical`]. An error is the record's: prost refused it.
pub fn record_rows(record: &RawRecord<'_>) -> std::result::Result<TableRows, RecordError> {
    Ok(match record.kind {
        SignalKind::Traces => {
            let mut rows = EncodedRows::with_capacity(record.value.len());
            if span_rows_into(record.value, record.ingest_ns, &mut rows).is_err() {
                let SignalPayload::Traces(request) = record.decode()? else { unreachable!("decoded as its kind") };
                rows = EncodedRows::from_rows(&flatten::span_rows(&request, record.ingest_ns));
            }
            TableRows::Spans(rows)
        }
        SignalKind::Logs => {
            let mut rows = EncodedRows::with_capacity(record.value.len());
            if log_rows_into(record.value, record.ingest_ns, &mut rows).is_err() {
                let SignalPayload::Logs(request) = record.decode()? else { unreachable!("decoded as its kind") };
                rows = EncodedRows::from_rows(&flatten::log_rows(&request, record.ingest_ns));
            }
            TableRows::Logs(rows)
        }
    })
}

/// The encoded rows of one record, by table.
#[derive(Debug, Clone, PartialEq)]
pub enum TableRows {
    Spans(EncodedRows<SpanRow>),
    Logs(EncodedRows<LogRow>),
}

/// Appends the span rows of an encoded `ExportTraceServiceRequest` to `rows`. On error
/// nothing of this record is left in `rows`.
pub fn span_rows_into(record: &[u8], ingest_ns: u64, rows: &mut EncodedRows<SpanRow>) -> Result<()> {
    all_or_nothing(record, Msg::TraceRequest, rows, |scratch, resource, scopes, rows| {
        for scope in scopes {
            for span in &scope.items {
                write_span(span, resource, &scope, ingest_ns, scratch, rows)?;
            }
        }
        Ok(())
    })
}

/// Appends the log rows of an encoded `ExportLogsServiceRequest` to `rows`. On error
/// nothing of this record is left in `rows`.
pub fn log_rows_into(record: &[u8], ingest_ns: u64, rows: &mut EncodedRows<LogRow>) -> Result<()> {
    all_or_nothing(record, Msg::LogsRequest, rows, |scratch, resource, scopes, rows| {
        let resource_keys: Vec<String> = resource.attrs.iter().map(|a| owned(a.key)).collect();
        let resource_values: Vec<String> = resource.attrs.iter().map(|a| a.value.to_owned_string()).collect();
        for scope in scopes {
            for log in &scope.items {
                write_log(log, resource, (&resource_keys, &resource_values), &scope, ingest_ns, scratch, rows)?;
            }
        }
        Ok(())
    })
}

/// Checks `record` as a `request`, then hands each resource with its scopes to `write`; on
/// any error the rows written for this record are removed again.
fn all_or_nothing<'a, T: TableRow>(
    record: &'a [u8],
    request: Msg,
    rows: &mut EncodedRows<T>,
    mut write: impl FnMut(&mut Scratch<'a>, &Resource<'a>, Vec<Scope<'a>>, &mut EncodedRows<T>) -> Result<()>,
) -> Result<()> {
    let before = rows.len();
    let result = protobuf::check(record, request).map_err(|_| NotCanonical).and_then(|()| {
        let mut scratch = Scratch::default();
        for_each_resource(record, &mut scratch, |scratch, resource, scopes| write(scratch, resource, scopes, rows))
    });
    if result.is_err() {
        rows.truncate_to(before);
    }
    result
}

/// One attribute: its key, its value as the tables' text (`any_value_text`) and its type
/// (`otlp::value_type`).
struct Attr<'a> {
    key: &'a [u8],
    value: Text<'a>,
    kind: u8,
}

/// A value's text: a string or bool value borrowed, an int kept as a number; anything else
/// (doubles, bytes, arrays, maps) decoded with prost and rendered by `any_value_text`, which
/// allocates.
enum Text<'a> {
    Borrowed(&'a [u8]),
    /// An int value, written in decimal as serde_json writes it.
    Int(i64),
    Owned(String),
}

impl Text<'_> {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Text::Borrowed(s) => put_str(out, s),
            Text::Int(i) => put_decimal(out, *i),
            Text::Owned(s) => put_str(out, s.as_bytes()),
        }
    }

    fn to_owned_string(&self) -> String {
        match self {
            Text::Borrowed(s) => owned(s),
            Text::Int(i) => i.to_string(),
            Text::Owned(s) => s.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Text::Borrowed(s) if s.is_empty()) || matches!(self, Text::Owned(s) if s.is_empty())
    }
}

/// A resource, read once for all the rows under it.
struct Resource<'a> {
    service: String,
    attrs: Vec<Attr<'a>>,
    /// `resource_keys` and `resource_values`, already encoded.
    encoded: Vec<u8>,
    /// `resource_types`, already encoded.
    encoded_types: Vec<u8>,
    /// The ResourceSpans' / ResourceLogs' `schema_url`.
    schema_url: &'a [u8],
}

/// Buffers reused from row to row.
#[derive(Default)]
struct Scratch<'a> {
    attrs: Vec<Attr<'a>>,
}

/// A scope, its ScopeSpans' / ScopeLogs' `schema_url`, and the payloads of its spans or log
/// records.
struct Scope<'a> {
    columns: ScopeColumns,
    schema_url: &'a [u8],
    items: Vec<&'a [u8]>,
}

/// Walks request → resources → scopes, handing each resource with its scopes to `each`.
/// The request was checked, so every field has its schema's wire type and strings are UTF-8.
fn for_each_resource<'a>(
    request: &'a [u8],
    scratch: &mut Scratch<'a>,
    mut each: impl FnMut(&mut Scratch<'a>, &Resource<'a>, Vec<Scope<'a>>) -> Result<()>,
) -> Result<()> {
    let mut r = Reader::new(request);
    while let Some(f) = r.next_field() {
        if f.tag != 1 {
            continue;
        }
        // ResourceSpans / ResourceLogs: resource = 1, scope_spans / scope_logs = 2,
        // schema_url = 3.
        let mut resource: Option<&[u8]> = None;
        let mut scopes = Vec::new();
        let mut schema_url: &[u8] = &[];
        let mut fields = Reader::new(f.payload);
        while let Some(f) = fields.next_field() {
            match f.tag {
                1 => once(&mut resource, f.payload)?,
                2 => scopes.push(scope(f.payload)?),
                3 => schema_url = f.payload,
                _ => {}
            }
        }
        let mut resource = read_resource(resource.unwrap_or_default())?;
        resource.schema_url = schema_url;
        each(scratch, &resource, scopes)?;
    }
    Ok(())
}

/// A ScopeSpans / ScopeLogs: its InstrumentationScope (field 1, decoded: one per scope, and
/// its attributes are kept whole), its items (field 2) and its schema_url (field 3).
fn scope(payload: &[u8]) -> Result<Scope<'_>> {
    let mut scope: Option<&[u8]> = None;
    let mut items = Vec::new();
    let mut schema_url: &[u8] = &[];
    let mut fields = Reader::new(payload);
    while let Some(f) = fields.next_field() {
        match f.tag {
            1 => once(&mut scope, f.payload)?,
            2 => items.push(f.payload),
            3 => schema_url = f.payload,
            _ => {}
        }
    }
    let columns = match scope {
        Some(scope) => ScopeColumns::of(Some(&InstrumentationScope::decode(scope).map_err(|_| NotCanonical)?)),
        None => ScopeColumns::default(),
    };
    Ok(Scope { columns, schema_url, items })
}

fn read_resource(payload: &[u8]) -> Result<Resource<'_>> {
    let mut attrs = Vec::new();
    let mut fields = Reader::new(payload);
    while let Some(f) = fields.next_field() {
        if f.tag == 1 {
            attrs.push(attr(f.payload)?);
        }
    }
    // `service_name`: the first `service.name` decides, and only a non-empty string counts.
    let service = match attrs.iter().find(|a| a.key == b"service.name") {
        Some(a) if a.kind == types::STRING && !a.value.is_empty() => a.value.to_owned_string(),
        _ => UNKNOWN_SERVICE.to_string(),
    };
    let mut encoded = Vec::new();
    put_attrs(&mut encoded, &attrs);
    let mut encoded_types = Vec::new();
    put_types(&mut encoded_types, &attrs);
    Ok(Resource { service, attrs, encoded, encoded_types, schema_url: &[] })
}

/// One KeyValue: key = 1, value = 2 (an AnyValue).
fn attr(payload: &[u8]) -> Result<Attr<'_>> {
    let mut key: &[u8] = &[];
    let mut value: Option<&[u8]> = None;
    let mut fields = Reader::new(payload);
    while let Some(f) = fields.next_field() {
        match f.tag {
            1 => key = f.payload,
            2 => once(&mut value, f.payload)?,
            _ => {}
        }
    }
    let (value, kind) = any_text(value)?;
    Ok(Attr { key, value, kind })
}

/// `any_value_text` of an AnyValue payload (`None`: the field is absent), and its type
/// (`otlp::value_type`).
fn any_text(value: Option<&[u8]>) -> Result<(Text<'_>, u8)> {
    let Some(value) = value else { return Ok((Text::Borrowed(b""), types::EMPTY)) };
    let mut fields = Reader::new(value);
    let Some(first) = fields.next_field() else { return Ok((Text::Borrowed(b""), types::EMPTY)) };
    // The common kinds, when they are the only field: a string, a bool, an int.
    if fields.next_field().is_none() {
        match (first.tag, first.wire_type) {
            (1, LEN) => return Ok((Text::Borrowed(first.payload), types::STRING)),
            (2, VARINT) => {
                return Ok((Text::Borrowed(if varint(first.raw) != 0 { b"true" } else { b"false" }), types::BOOL))
            }
            (3, VARINT) => return Ok((Text::Int(varint(first.raw) as i64), types::INT)),
            _ => {}
        }
    }
    // Other kinds, or several fields (a oneof: prost keeps or merges the last): decoding
    // the one value gives exactly prost's answer.
    let decoded = AnyValue::decode(value).map_err(|_| NotCanonical)?;
    Ok((Text::Owned(any_value_text(Some(&decoded))), value_type(Some(&decoded))))
}

fn write_span<'a>(
    span: &'a [u8],
    resource: &Resource<'a>,
    scope: &Scope<'a>,
    ingest_ns: u64,
    scratch: &mut Scratch<'a>,
    rows: &mut EncodedRows<SpanRow>,
) -> Result<()> {
    let (mut trace_id, mut span_id, mut parent, mut name): (&[u8], &[u8], &[u8], &[u8]) = (&[], &[], &[], &[]);
    let mut trace_state: &[u8] = &[];
    let (mut kind, mut start, mut end) = (0u64, 0u64, 0u64);
    let (mut flags, mut dropped_attributes, mut dropped_events, mut dropped_links) = (0u32, 0u32, 0u32, 0u32);
    let mut status: Option<&[u8]> = None;
    // Events and links are decoded one by one (each is its own message, so decoding it
    // alone is what prost does within the span); spans carry few of them.
    let (mut events, mut links) = (EventColumns::default(), LinkColumns::default());
    scratch.attrs.clear();
    let mut fields = Reader::new(span);
    while let Some(f) = fields.next_field() {
        match f.tag {
            1 => trace_id = f.payload,
            2 => span_id = f.payload,
            3 => trace_state = f.payload,
            4 => parent = f.payload,
            5 => name = f.payload,
            6 => kind = varint(f.raw),
            7 => start = fixed64(f.payload),
            8 => end = fixed64(f.payload),
            9 => scratch.attrs.push(attr(f.payload)?),
            10 => dropped_attributes = varint(f.raw) as u32,
            11 => events.push(&Event::decode(f.payload).map_err(|_| NotCanonical)?),
            12 => dropped_events = varint(f.raw) as u32,
            13 => links.push(&Link::decode(f.payload).map_err(|_| NotCanonical)?),
            14 => dropped_links = varint(f.raw) as u32,
            15 => once(&mut status, f.payload)?,
            16 => flags = fixed32(f.payload),
            _ => {}
        }
    }
    let (mut status_code, mut status_message): (u64, &[u8]) = (0, &[]);
    if let Some(status) = status {
        let mut fields = Reader::new(status);
        while let Some(f) = fields.next_field() {
            match f.tag {
                2 => status_message = f.payload,
                3 => status_code = varint(f.raw),
                _ => {}
            }
        }
    }
    let out = rows.buffer();
    put_hex(out, trace_id);
    put_hex(out, span_id);
    put_hex(out, parent);
    put_str(out, resource.service.as_bytes());
    put_str(out, name);
    out.push(enum_u8(kind));
    put_u64(out, start);
    put_u64(out, end);
    put_u64(out, end.saturating_sub(start));
    out.push(enum_u8(status_code));
    put_str(out, status_message);
    put_attrs(out, &scratch.attrs);
    out.extend_from_slice(&resource.encoded);
    put_str(out, scope.columns.name.as_bytes());
    put_u32(out, events.names.len() as u32);
    put_u32(out, links.trace_ids.len() as u32);
    put_u64(out, ingest_ns);
    put_str(out, trace_state);
    put_u32(out, flags);
    put_u32(out, dropped_attributes);
    put_u32(out, dropped_events);
    put_u32(out, dropped_links);
    put_types(out, &scratch.attrs);
    out.extend_from_slice(&resource.encoded_types);
    put_schemas_and_scope(out, resource, scope);
    put_u64s(out, &events.time_ns);
    put_strings(out, &events.names);
    put_strings(out, &events.attributes);
    put_u32s(out, &events.dropped_attributes);
    put_strings(out, &links.trace_ids);
    put_strings(out, &links.span_ids);
    put_strings(out, &links.trace_states);
    put_strings(out, &links.attributes);
    put_u32s(out, &links.flags);
    put_u32s(out, &links.dropped_attributes);
    rows.end_row(start);
    Ok(())
}

fn write_log<'a>(
    log: &'a [u8],
    resource: &Resource<'a>,
    (resource_keys, resource_values): (&[String], &[String]),
    scope: &Scope<'a>,
    ingest_ns: u64,
    scratch: &mut Scratch<'a>,
    rows: &mut EncodedRows<LogRow>,
) -> Result<()> {
    let (mut time, mut observed, mut severity) = (0u64, 0u64, 0u64);
    let (mut severity_text, mut trace_id, mut span_id): (&[u8], &[u8], &[u8]) = (&[], &[], &[]);
    let mut event_name: &[u8] = &[];
    let (mut flags, mut dropped_attributes) = (0u32, 0u32);
    let mut body: Option<&[u8]> = None;
    scratch.attrs.clear();
    let mut fields = Reader::new(log);
    while let Some(f) = fields.next_field() {
        match f.tag {
            1 => time = fixed64(f.payload),
            2 => severity = varint(f.raw),
            3 => severity_text = f.payload,
            5 => once(&mut body, f.payload)?,
            6 => scratch.attrs.push(attr(f.payload)?),
            7 => dropped_attributes = varint(f.raw) as u32,
            8 => flags = fixed32(f.payload),
            9 => trace_id = f.payload,
            10 => span_id = f.payload,
            11 => observed = fixed64(f.payload),
            12 => event_name = f.payload,
            _ => {}
        }
    }
    let time_ns = flatten::event_time_ns(time, observed);
    let (body_text, body_type) = any_text(body)?;
    let body_value = match body_type {
        types::BYTES | types::ARRAY | types::MAP => {
            let decoded = AnyValue::decode(body.unwrap_or_default()).map_err(|_| NotCanonical)?;
            structured_body(Some(&decoded))
        }
        _ => String::new(),
    };
    let trace_hex = super::hex_id(trace_id);
    let span_hex = super::hex_id(span_id);
    let attr_keys: Vec<String> = scratch.attrs.iter().map(|a| owned(a.key)).collect();
    let attr_values: Vec<String> = scratch.attrs.iter().map(|a| a.value.to_owned_string()).collect();
    let severity_number = enum_u8(severity);
    let body_text = body_text.to_owned_string();
    let severity_text_str = owned(severity_text);
    let log_id = identity::log_id(&identity::LogContent {
        service: &resource.service,
        time_ns,
        severity_number,
        severity_text: &severity_text_str,
        body: &body_text,
        trace_id: &trace_hex,
        span_id: &span_hex,
        attr_keys: &attr_keys,
        attr_values: &attr_values,
        resource_keys,
        resource_values,
        scope_name: &scope.columns.name,
    });
    let out = rows.buffer();
    put_u64(out, log_id);
    put_str(out, resource.service.as_bytes());
    put_u64(out, time_ns);
    put_u64(out, observed);
    out.push(severity_number);
    put_str(out, severity_text);
    put_str(out, body_text.as_bytes());
    put_str(out, trace_hex.as_bytes());
    put_str(out, span_hex.as_bytes());
    put_attrs(out, &scratch.attrs);
    out.extend_from_slice(&resource.encoded);
    put_str(out, scope.columns.name.as_bytes());
    put_u64(out, ingest_ns);
    put_str(out, event_name);
    put_u32(out, flags);
    put_u32(out, dropped_attributes);
    put_types(out, &scratch.attrs);
    out.extend_from_slice(&resource.encoded_types);
    out.push(body_type);
    put_str(out, body_value.as_bytes());
    put_schemas_and_scope(out, resource, scope);
    rows.end_row(time_ns);
    Ok(())
}

/// An id as the RowBinary string of its lowercase hex (`otlp::hex_id`).
fn put_hex(out: &mut Vec<u8>, id: &[u8]) {
    put_len(out, id.len() * 2);
    push_hex(out, id);
}

/// Attributes as the tables' two parallel arrays, keys then values.
fn put_attrs(out: &mut Vec<u8>, attrs: &[Attr<'_>]) {
    put_len(out, attrs.len());
    for a in attrs {
        put_str(out, a.key);
    }
    put_len(out, attrs.len());
    for a in attrs {
        a.value.put(out);
    }
}

/// `resource_schema_url`, `scope_version`, `scope_attributes`, `scope_schema_url`: the same
/// four columns, in this order, in both tables.
fn put_schemas_and_scope(out: &mut Vec<u8>, resource: &Resource<'_>, scope: &Scope<'_>) {
    put_str(out, resource.schema_url);
    put_str(out, scope.columns.version.as_bytes());
    put_str(out, scope.columns.attributes.as_bytes());
    put_str(out, scope.schema_url);
}

/// Attributes' types, as the tables' `Array(UInt8)`.
fn put_types(out: &mut Vec<u8>, attrs: &[Attr<'_>]) {
    put_len(out, attrs.len());
    out.extend(attrs.iter().map(|a| a.kind));
}

/// `v` in decimal, as a RowBinary string, without allocating.
fn put_decimal(out: &mut Vec<u8>, v: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = v.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    put_str(out, &digits[at..]);
}

/// A singular message field: prost merges a second occurrence into the first, which the
/// fast path does not reproduce.
fn once<'a>(slot: &mut Option<&'a [u8]>, payload: &'a [u8]) -> Result<()> {
    if slot.replace(payload).is_some() {
        return Err(NotCanonical);
    }
    Ok(())
}

/// A string field as an owned `String` (the record was checked: strings are UTF-8).
fn owned(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A varint field's value, from the whole field (key included).
fn varint(raw: &[u8]) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    let mut seen_key = false;
    for &b in raw {
        if !seen_key {
            seen_key = b < 0x80;
            continue;
        }
        value |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b < 0x80 {
            break;
        }
    }
    value
}

fn fixed64(bytes: &[u8]) -> u64 {
    bytes.try_into().map_or(0, u64::from_le_bytes)
}

fn fixed32(bytes: &[u8]) -> u32 {
    bytes.try_into().map_or(0, u32::from_le_bytes)
}

/// An enum field as the tables keep it: prost reads the varint as an `i32`, and the row
/// takes it when it fits a `u8`, else 0.
fn enum_u8(value: u64) -> u8 {
    u8::try_from(value as i32).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::flatten::{log_rows, span_rows};
    use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};
    use opentelemetry_proto::tonic::common::v1::{any_value, ArrayValue, KeyValue, KeyValueList};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource as OtlpResource;
    use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
    use proptest::prelude::*;

    fn arb_value() -> impl Strategy<Value = Option<AnyValue>> {
        use any_value::Value as V;
        let scalar = prop_oneof![
            "[a-z0-9 .]{0,8}".prop_map(V::StringValue),
            any::<bool>().prop_map(V::BoolValue),
            any::<i64>().prop_map(V::IntValue),
            any::<f64>().prop_map(V::DoubleValue),
            prop::collection::vec(any::<u8>(), 0..4).prop_map(V::BytesValue),
        ];
        let value = scalar.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(|values| V::ArrayValue(ArrayValue {
                    values: values.into_iter().map(|v| AnyValue { value: Some(v) }).collect()
                })),
                prop::collection::vec(("[a-c]", inner), 0..3).prop_map(|kvs| V::KvlistValue(KeyValueList {
                    values: kvs
                        .into_iter()
                        .map(|(k, v)| KeyValue {
                            key: k,
                            value: Some(AnyValue { value: Some(v) }),
                            ..Default::default()
                        })
                        .collect()
                })),
            ]
        });
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(AnyValue { value: None })),
            8 => value.prop_map(|v| Some(AnyValue { value: Some(v) })),
        ]
    }

    fn arb_attrs() -> impl Strategy<Value = Vec<KeyValue>> {
        prop::collection::vec(
            (prop::sample::select(vec!["service.name", "k", "host.name", ""]), arb_value())
                .prop_map(|(key, value)| KeyValue { key: key.into(), value, ..Default::default() }),
            0..4,
        )
    }

    fn arb_resource() -> impl Strategy<Value = Option<OtlpResource>> {
        prop::option::of(arb_attrs().prop_map(|attributes| OtlpResource { attributes, ..Default::default() }))
    }

    fn arb_scope() -> impl Strategy<Value = Option<InstrumentationScope>> {
        prop::option::of(("[a-z]{0,4}", "[0-9.]{0,4}", arb_attrs(), 0u32..3).prop_map(
            |(name, version, attributes, dropped_attributes_count)| InstrumentationScope {
                name,
                version,
                attributes,
                dropped_attributes_count,
            },
        ))
    }

    fn arb_schema_url() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "https://opentelemetry.io/schemas/1.21.0"]).prop_map(String::from)
    }

    fn arb_events() -> impl Strategy<Value = Vec<span::Event>> {
        prop::collection::vec(
            (any::<u64>(), "[a-z]{0,6}", arb_attrs(), any::<u32>()).prop_map(
                |(time_unix_nano, name, attributes, dropped_attributes_count)| span::Event {
                    time_unix_nano,
                    name,
                    attributes,
                    dropped_attributes_count,
                },
            ),
            0..3,
        )
    }

    fn arb_links() -> impl Strategy<Value = Vec<span::Link>> {
        prop::collection::vec(
            (
                prop::collection::vec(any::<u8>(), 0..17),
                prop::collection::vec(any::<u8>(), 0..9),
                "[a-z=,]{0,6}",
                arb_attrs(),
                any::<u32>(),
                any::<u32>(),
            )
                .prop_map(
                    |(trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags)| span::Link {
                        trace_id,
                        span_id,
                        trace_state,
                        attributes,
                        dropped_attributes_count,
                        flags,
                    },
                ),
            0..3,
        )
    }

    fn arb_traces() -> impl Strategy<Value = ExportTraceServiceRequest> {
        let span = (
            prop::collection::vec(any::<u8>(), 0..17),
            prop::collection::vec(any::<u8>(), 0..9),
            "[a-z/]{0,6}",
            -2i32..300,
            any::<u64>(),
            any::<u64>(),
            arb_attrs(),
            arb_events(),
            arb_links(),
            prop::option::of((-1i32..4, "[a-z]{0,5}")),
            ("[a-z=,]{0,6}", any::<u32>(), any::<[u32; 3]>()),
        )
            .prop_map(
                |(trace_id, span_id, name, kind, start, end, attributes, events, links, status, extra)| {
                    let (trace_state, flags, [dropped_attributes, dropped_events, dropped_links]) = extra;
                    Span {
                        trace_id,
                        span_id: span_id.clone(),
                        trace_state,
                        parent_span_id: span_id.into_iter().rev().collect(),
                        flags,
                        name,
                        kind,
                        start_time_unix_nano: start,
                        end_time_unix_nano: end,
                        attributes,
                        dropped_attributes_count: dropped_attributes,
                        events,
                        dropped_events_count: dropped_events,
                        links,
                        dropped_links_count: dropped_links,
                        status: status.map(|(code, message)| Status { code, message }),
                    }
                },
            );
        let scope = (arb_scope(), prop::collection::vec(span, 0..4), arb_schema_url())
            .prop_map(|(scope, spans, schema_url)| ScopeSpans { scope, spans, schema_url });
        let resource = (arb_resource(), prop::collection::vec(scope, 0..3), arb_schema_url())
            .prop_map(|(resource, scope_spans, schema_url)| ResourceSpans { resource, scope_spans, schema_url });
        prop::collection::vec(resource, 0..3).prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
    }

    fn arb_logs() -> impl Strategy<Value = ExportLogsServiceRequest> {
        let log = (
            prop::sample::select(vec![0u64, 5, 1_700_000_000_000_000_000]),
            any::<u64>(),
            -1i32..30,
            "[A-Z]{0,5}",
            arb_value(),
            arb_attrs(),
            prop::collection::vec(any::<u8>(), 0..17),
            ("[a-z.]{0,6}", any::<u32>(), any::<u32>()),
        )
            .prop_map(|(time, observed, severity, severity_text, body, attributes, trace_id, extra)| {
                let (event_name, flags, dropped_attributes_count) = extra;
                LogRecord {
                    time_unix_nano: time,
                    observed_time_unix_nano: observed,
                    severity_number: severity,
                    severity_text,
                    body,
                    attributes,
                    dropped_attributes_count,
                    flags,
                    span_id: trace_id.iter().take(8).copied().collect(),
                    trace_id,
                    event_name,
                }
            });
        let scope = (arb_scope(), prop::collection::vec(log, 0..4), arb_schema_url())
            .prop_map(|(scope, log_records, schema_url)| ScopeLogs { scope, log_records, schema_url });
        let resource = (arb_resource(), prop::collection::vec(scope, 0..3), arb_schema_url())
            .prop_map(|(resource, scope_logs, schema_url)| ResourceLogs { resource, scope_logs, schema_url });
        prop::collection::vec(resource, 0..3).prop_map(|resource_logs| ExportLogsServiceRequest { resource_logs })
    }

    /// The slow path's answer: prost, `flatten`, and the row structs' own encoding.
    fn spans_by_decoding(bytes: &[u8]) -> Option<EncodedRows<SpanRow>> {
        let request = ExportTraceServiceRequest::decode(bytes).ok()?;
        Some(EncodedRows::from_rows(&span_rows(&request, 7)))
    }

    fn logs_by_decoding(bytes: &[u8]) -> Option<EncodedRows<LogRow>> {
        let request = ExportLogsServiceRequest::decode(bytes).ok()?;
        Some(EncodedRows::from_rows(&log_rows(&request, 7)))
    }

    fn fast_spans(bytes: &[u8]) -> Result<EncodedRows<SpanRow>> {
        let mut rows = EncodedRows::default();
        span_rows_into(bytes, 7, &mut rows).map(|()| rows)
    }

    fn fast_logs(bytes: &[u8]) -> Result<EncodedRows<LogRow>> {
        let mut rows = EncodedRows::default();
        log_rows_into(bytes, 7, &mut rows).map(|()| rows)
    }

    /// Flips, cuts and splices that keep most bytes valid protobuf.
    fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
        for &(at, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = at % bytes.len();
            match op % 4 {
                0 => bytes[at] ^= 1 << (op % 8),
                1 => bytes.truncate(at),
                2 => {
                    let copy = bytes[at..].to_vec();
                    bytes.extend_from_slice(&copy);
                }
                _ => bytes[at] = op,
            }
        }
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn span_rows_are_the_decoded_requests_rows_byte_for_byte(request in arb_traces()) {
            let bytes = request.encode_to_vec();
            prop_assert_eq!(fast_spans(&bytes).unwrap(), spans_by_decoding(&bytes).unwrap());
        }

        #[test]
        fn log_rows_are_the_decoded_requests_rows_byte_for_byte(request in arb_logs()) {
            let bytes = request.encode_to_vec();
            prop_assert_eq!(fast_logs(&bytes).unwrap(), logs_by_decoding(&bytes).unwrap());
        }

        /// On any bytes the fast path gives prost's rows, or sends the record to prost
        /// (which then decides): never different rows, never rows where prost refuses.
        #[test]
        fn damaged_records_give_the_decoded_rows_or_fall_back(
            traces in arb_traces(),
            logs in arb_logs(),
            edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        ) {
            let bytes = mutate(traces.encode_to_vec(), &edits);
            match (fast_spans(&bytes), spans_by_decoding(&bytes)) {
                (Ok(fast), Some(slow)) => prop_assert_eq!(fast, slow),
                (Ok(_), None) => prop_assert!(false, "rows from bytes prost refuses"),
                (Err(NotCanonical), _) => {}
            }
            let bytes = mutate(logs.encode_to_vec(), &edits);
            match (fast_logs(&bytes), logs_by_decoding(&bytes)) {
                (Ok(fast), Some(slow)) => prop_assert_eq!(fast, slow),
                (Ok(_), None) => prop_assert!(false, "rows from bytes prost refuses"),
                (Err(NotCanonical), _) => {}
            }
        }
    }

    /// A request of one resource and scope whose spans are given as raw bytes.
    fn request_of_spans(spans: &[Vec<u8>]) -> Vec<u8> {
        let nest = |tag: u32, parts: &[Vec<u8>]| {
            let mut out = Vec::new();
            for part in parts {
                protobuf::put_len_field(&mut out, tag, part.len());
                out.extend_from_slice(part);
            }
            out
        };
        nest(1, &[nest(2, &[nest(2, spans)])])
    }

    #[test]
    fn ints_are_written_as_serde_json_writes_them() {
        for v in [0, 7, -7, 1234567890, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_decimal(&mut out, v);
            let mut want = Vec::new();
            put_str(&mut want, serde_json::Value::from(v).to_string().as_bytes());
            assert_eq!(out, want, "{v}");
        }
    }

    #[test]
    fn a_status_given_twice_falls_back_and_leaves_no_rows_of_its_record() {
        let plain = Span { name: "kept".into(), ..Default::default() }.encode_to_vec();
        let mut rows = EncodedRows::default();
        span_rows_into(&request_of_spans(std::slice::from_ref(&plain)), 0, &mut rows).unwrap();
        assert_eq!(rows.len(), 1);

        // status { code: 2 } then status { message: "m" }: prost merges the two.
        let mut doubled = Span { name: "x".into(), ..Default::default() }.encode_to_vec();
        doubled.extend_from_slice(&[(15 << 3) | 2, 2, 0x18, 0x02, (15 << 3) | 2, 3, 0x12, 0x01, b'm']);
        let record = request_of_spans(&[plain.clone(), doubled]);
        let decoded = ExportTraceServiceRequest::decode(record.as_slice()).unwrap();
        let status = decoded.resource_spans[0].scope_spans[0].spans[1].status.clone().unwrap();
        assert_eq!((status.code, status.message.as_str()), (2, "m"), "prost merged them");

        assert_eq!(span_rows_into(&record, 0, &mut rows), Err(NotCanonical));
        assert_eq!(rows.len(), 1, "the first record's row stays, none of the second's");
        let first = span_rows(&ExportTraceServiceRequest::decode(request_of_spans(&[plain]).as_slice()).unwrap(), 0);
        assert_eq!(rows, EncodedRows::from_rows(&first));
    }
}
