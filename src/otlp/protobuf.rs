//! The protobuf wire format of OTLP export requests, read in place: ingest splits a request
//! into records by walking its bytes (`split::split_encoded`) instead of decoding it into
//! owned structs and encoding every record again. A request is first checked against the
//! OTLP schema exactly as prost decodes it (same wire types, UTF-8 strings, nesting limit,
//! unknown fields and groups skipped), so a body accepted here is one prost accepts, and a
//! record is one every consumer can decode.

use prost::encoding::encoded_len_varint;

/// Why bytes are not a valid OTLP message (the same inputs prost refuses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("invalid varint")]
    Varint,
    #[error("invalid key value: {0}")]
    Key(u64),
    #[error("invalid wire type value: {0}")]
    WireTypeValue(u64),
    #[error("invalid tag value: 0")]
    Tag,
    #[error("invalid wire type: {actual} (expected {expected})")]
    WireType { actual: u8, expected: u8 },
    #[error("buffer underflow")]
    Underflow,
    #[error("invalid string value: data is not UTF-8 encoded")]
    Utf8,
    #[error("recursion limit reached")]
    RecursionLimit,
    #[error("unexpected end group tag")]
    EndGroup,
}

/// prost's nesting limit (`prost::RECURSION_LIMIT`).
const RECURSION_LIMIT: u32 = 100;

pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
pub const FIXED32: u8 = 5;

/// The OTLP messages of trace and logs requests, for the schema check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    TraceRequest,
    ResourceSpans,
    ScopeSpans,
    Span,
    Event,
    Link,
    Status,
    LogsRequest,
    ResourceLogs,
    ScopeLogs,
    LogRecord,
    Resource,
    EntityRef,
    Scope,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Varint,
    Fixed32,
    Fixed64,
    Bytes,
    Str,
    Message(Msg),
}

impl Kind {
    fn wire_type(self) -> u8 {
        match self {
            Kind::Varint => VARINT,
            Kind::Fixed32 => FIXED32,
            Kind::Fixed64 => FIXED64,
            Kind::Bytes | Kind::Str | Kind::Message(_) => LEN,
        }
    }
}

/// The kind of field `tag` of `msg` (opentelemetry-proto 0.33's messages); `None` for a
/// field the schema does not know, which is skipped as prost skips it.
fn field(msg: Msg, tag: u32) -> Option<Kind> {
    use Kind as K;
    Some(match (msg, tag) {
        (Msg::TraceRequest, 1) => K::Message(Msg::ResourceSpans),
        (Msg::ResourceSpans, 1) | (Msg::ResourceLogs, 1) => K::Message(Msg::Resource),
        (Msg::ResourceSpans, 2) => K::Message(Msg::ScopeSpans),
        (Msg::ResourceSpans | Msg::ResourceLogs | Msg::ScopeSpans | Msg::ScopeLogs, 3) => K::Str,
        (Msg::ScopeSpans | Msg::ScopeLogs, 1) => K::Message(Msg::Scope),
        (Msg::ScopeSpans, 2) => K::Message(Msg::Span),
        (Msg::Span, 1 | 2 | 4) => K::Bytes,
        (Msg::Span, 3 | 5) => K::Str,
        (Msg::Span, 6 | 10 | 12 | 14) => K::Varint,
        (Msg::Span, 7 | 8) => K::Fixed64,
        (Msg::Span, 9) => K::Message(Msg::KeyValue),
        (Msg::Span, 11) => K::Message(Msg::Event),
        (Msg::Span, 13) => K::Message(Msg::Link),
        (Msg::Span, 15) => K::Message(Msg::Status),
        (Msg::Span, 16) => K::Fixed32,
        (Msg::Event, 1) => K::Fixed64,
        (Msg::Event, 2) => K::Str,
        (Msg::Event, 3) => K::Message(Msg::KeyValue),
        (Msg::Event, 4) => K::Varint,
        (Msg::Link, 1 | 2) => K::Bytes,
        (Msg::Link, 3) => K::Str,
        (Msg::Link, 4) => K::Message(Msg::KeyValue),
        (Msg::Link, 5) => K::Varint,
        (Msg::Link, 6) => K::Fixed32,
        (Msg::Status, 2) => K::Str,
        (Msg::Status, 3) => K::Varint,
        (Msg::LogsRequest, 1) => K::Message(Msg::ResourceLogs),
        (Msg::ResourceLogs, 2) => K::Message(Msg::ScopeLogs),
        (Msg::ScopeLogs, 2) => K::Message(Msg::LogRecord),
        (Msg::LogRecord, 1 | 11) => K::Fixed64,
        (Msg::LogRecord, 2 | 7) => K::Varint,
        (Msg::LogRecord, 3 | 12) => K::Str,
        (Msg::LogRecord, 5) => K::Message(Msg::AnyValue),
        (Msg::LogRecord, 6) => K::Message(Msg::KeyValue),
        (Msg::LogRecord, 8) => K::Fixed32,
        (Msg::LogRecord, 9 | 10) => K::Bytes,
        (Msg::Resource, 1) => K::Message(Msg::KeyValue),
        (Msg::Resource, 2) => K::Varint,
        (Msg::Resource, 3) => K::Message(Msg::EntityRef),
        (Msg::EntityRef, 1..=4) => K::Str,
        (Msg::Scope, 1 | 2) => K::Str,
        (Msg::Scope, 3) => K::Message(Msg::KeyValue),
        (Msg::Scope, 4) => K::Varint,
        (Msg::KeyValue, 1) => K::Str,
        (Msg::KeyValue, 2) => K::Message(Msg::AnyValue),
        (Msg::KeyValue, 3) => K::Varint,
        (Msg::AnyValue, 1) => K::Str,
        (Msg::AnyValue, 2 | 3 | 8) => K::Varint,
        (Msg::AnyValue, 4) => K::Fixed64,
        (Msg::AnyValue, 5) => K::Message(Msg::ArrayValue),
        (Msg::AnyValue, 6) => K::Message(Msg::KeyValueList),
        (Msg::AnyValue, 7) => K::Bytes,
        (Msg::ArrayValue, 1) => K::Message(Msg::AnyValue),
        (Msg::KeyValueList, 1) => K::Message(Msg::KeyValue),
        _ => return None,
    })
}

/// A cursor over a message's bytes.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

/// One field of a message: its tag, wire type, the whole field (key included) and, for a
/// length-delimited field, its payload.
#[derive(Clone, Copy)]
pub struct Field<'a> {
    pub tag: u32,
    pub wire_type: u8,
    pub raw: &'a [u8],
    pub payload: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }

    fn done(&self) -> bool {
        self.at >= self.buf.len()
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        // Most varints (keys, lengths of short fields) are one byte.
        if let Some(&b) = self.buf.get(self.at).filter(|&&b| b < 0x80) {
            self.at += 1;
            return Ok(u64::from(b));
        }
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.at) else { return Err(WireError::Varint) };
            self.at += 1;
            // The tenth byte may only carry the top bit of a u64 (as prost checks).
            if i == 9 && b >= 0x02 {
                return Err(WireError::Varint);
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(WireError::Varint)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], WireError> {
        let rest = (self.buf.len() - self.at) as u64;
        if n > rest {
            return Err(WireError::Underflow);
        }
        let slice = &self.buf[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(slice)
    }

    fn key(&mut self) -> Result<(u32, u8), WireError> {
        let key = self.varint()?;
        if key > u64::from(u32::MAX) {
            return Err(WireError::Key(key));
        }
        let wire_type = key & 7;
        if wire_type > 5 {
            return Err(WireError::WireTypeValue(wire_type));
        }
        let tag = (key as u32) >> 3;
        if tag == 0 {
            return Err(WireError::Tag);
        }
        Ok((tag, wire_type as u8))
    }

    /// The next field of a message whose fields were already checked ([`check`]).
    pub fn next_field(&mut self) -> Option<Field<'a>> {
        if self.done() {
            return None;
        }
        let start = self.at;
        let (tag, wire_type) = self.key().ok()?;
        let payload = self.skip(tag, wire_type, RECURSION_LIMIT).ok()?;
        Some(Field { tag, wire_type, raw: &self.buf[start..self.at], payload })
    }

    /// Moves past one field's value; the payload of a length-delimited one.
    fn skip(&mut self, tag: u32, wire_type: u8, depth: u32) -> Result<&'a [u8], WireError> {
        match wire_type {
            VARINT => self.varint().map(|_| &[][..]),
            FIXED64 => self.take(8),
            FIXED32 => self.take(4),
            LEN => {
                let len = self.varint()?;
                self.take(len)
            }
            START_GROUP => loop {
                let (inner, inner_type) = self.key()?;
                if inner_type == END_GROUP {
                    if inner != tag {
                        return Err(WireError::EndGroup);
                    }
                    break Ok(&[][..]);
                }
                if depth <= 1 {
                    return Err(WireError::RecursionLimit);
                }
                self.skip(inner, inner_type, depth - 1)?;
            },
            _ => Err(WireError::EndGroup),
        }
    }
}

/// Checks that `buf` decodes as `msg`, with the rules prost applies: a known field must have
/// its wire type, strings must be UTF-8, messages nest at most [`RECURSION_LIMIT`] deep,
/// unknown fields (and groups) are skipped.
pub fn check(buf: &[u8], msg: Msg) -> Result<(), WireError> {
    check_message(buf, msg, RECURSION_LIMIT)
}

/// `depth` is prost's remaining recursion budget for this message's fields.
fn check_message(buf: &[u8], msg: Msg, depth: u32) -> Result<(), WireError> {
    let mut r = Reader::new(buf);
    while !r.done() {
        let (tag, wire_type) = r.key()?;
        match field(msg, tag) {
            Some(kind) => {
                if wire_type != kind.wire_type() {
                    return Err(WireError::WireType { actual: wire_type, expected: kind.wire_type() });
                }
                let payload = r.skip(tag, wire_type, depth)?;
                match kind {
                    Kind::Str => {
                        std::str::from_utf8(payload).map_err(|_| WireError::Utf8)?;
                    }
                    Kind::Message(inner) => {
                        if depth == 0 {
                            return Err(WireError::RecursionLimit);
                        }
                        check_message(payload, inner, depth - 1)?;
                    }
                    _ => {}
                }
            }
            None => {
                if depth == 0 {
                    return Err(WireError::RecursionLimit);
                }
                r.skip(tag, wire_type, depth)?;
            }
        }
    }
    Ok(())
}

/// The value of the last occurrence of length-delimited field `tag` (proto3: the last one
/// wins), or empty.
pub fn last_bytes(buf: &[u8], tag: u32) -> &[u8] {
    let mut r = Reader::new(buf);
    let mut found: &[u8] = &[];
    while let Some(f) = r.next_field() {
        if f.tag == tag && f.wire_type == LEN {
            found = f.payload;
        }
    }
    found
}

/// The encoded size of a length-delimited field with a one-byte key holding `len` bytes.
pub fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// Appends a length-delimited field with a one-byte key (field numbers below 16).
pub fn put_len_field(out: &mut Vec<u8>, tag: u32, len: usize) {
    debug_assert!(tag < 16);
    out.push(((tag << 3) as u8) | LEN);
    prost::encoding::encode_varint(len as u64, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};
    use proptest::prelude::*;
    use prost::Message;

    fn agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        let ours = check(bytes, Msg::TraceRequest).is_ok();
        let prost = ExportTraceServiceRequest::decode(bytes).is_ok();
        prop_assert_eq!(ours, prost, "traces: ours {} prost {} on {:?}", ours, prost, bytes);
        let ours = check(bytes, Msg::LogsRequest).is_ok();
        let prost = ExportLogsServiceRequest::decode(bytes).is_ok();
        prop_assert_eq!(ours, prost, "logs: ours {} prost {} on {:?}", ours, prost, bytes);
        Ok(())
    }

    /// A valid trace request with every kind of field, nested values included.
    fn sample() -> Vec<u8> {
        use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValue, KeyValueList};
        use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
        let value = |v| Some(AnyValue { value: Some(v) });
        let attrs = vec![
            crate::otlp::string_attr("k", "v"),
            KeyValue { key: "i".into(), value: value(any_value::Value::IntValue(-3)), ..Default::default() },
            KeyValue { key: "d".into(), value: value(any_value::Value::DoubleValue(1.5)), ..Default::default() },
            KeyValue {
                key: "a".into(),
                value: value(any_value::Value::ArrayValue(ArrayValue {
                    values: vec![AnyValue {
                        value: Some(any_value::Value::KvlistValue(KeyValueList {
                            values: vec![crate::otlp::string_attr("x", "y")],
                        })),
                    }],
                })),
                ..Default::default()
            },
        ];
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(crate::otlp::service_resource("svc")),
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        trace_id: vec![1; 16],
                        span_id: vec![2; 8],
                        name: "n".into(),
                        kind: 2,
                        start_time_unix_nano: 5,
                        flags: 1,
                        attributes: attrs.clone(),
                        events: vec![span::Event { name: "e".into(), attributes: attrs.clone(), ..Default::default() }],
                        links: vec![span::Link { trace_id: vec![3; 16], flags: 7, ..Default::default() }],
                        status: Some(Status { message: "m".into(), code: 2 }),
                        ..Default::default()
                    }],
                    schema_url: "s".into(),
                    ..Default::default()
                }],
                schema_url: "r".into(),
            }],
        }
        .encode_to_vec()
    }

    #[test]
    fn a_valid_request_passes_and_damaged_ones_fail_as_prost_fails() {
        let bytes = sample();
        assert!(check(&bytes, Msg::TraceRequest).is_ok());
        for cut in 0..bytes.len() {
            agrees(&bytes[..cut]).unwrap();
        }
    }

    #[test]
    fn nesting_stops_where_prost_stops() {
        // AnyValue { array_value: ArrayValue { values: [AnyValue { ... }] } }, n levels deep,
        // inside a log record's body.
        for levels in [45usize, 46, 47, 48, 49, 50] {
            let mut any: Vec<u8> = Vec::new();
            for _ in 0..levels {
                let mut array = Vec::new();
                put_len_field(&mut array, 1, any.len());
                array.extend_from_slice(&any);
                let mut next = Vec::new();
                put_len_field(&mut next, 5, array.len());
                next.extend_from_slice(&array);
                any = next;
            }
            let mut log = Vec::new();
            put_len_field(&mut log, 5, any.len());
            log.extend_from_slice(&any);
            let mut scope = Vec::new();
            put_len_field(&mut scope, 2, log.len());
            scope.extend_from_slice(&log);
            let mut resource = Vec::new();
            put_len_field(&mut resource, 2, scope.len());
            resource.extend_from_slice(&scope);
            let mut request = Vec::new();
            put_len_field(&mut request, 1, resource.len());
            request.extend_from_slice(&resource);
            agrees(&request).unwrap();
            // The boundary is inside the range: the shallowest passes, the deepest does not.
            match levels {
                45 => assert!(check(&request, Msg::LogsRequest).is_ok()),
                50 => assert_eq!(check(&request, Msg::LogsRequest), Err(WireError::RecursionLimit)),
                _ => {}
            }
        }
    }

    proptest! {
        #[test]
        fn accepts_exactly_what_prost_accepts(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6)
        ) {
            let mut bytes = sample();
            for (at, byte, op) in edits {
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => { bytes.remove(i); }
                }
                if bytes.is_empty() { break; }
            }
            agrees(&bytes)?;
        }

        #[test]
        fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            agrees(&bytes)?;
        }
    }
}
