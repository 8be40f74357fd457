//! The records on `signals` and `logs` (docs/design.md#topics): the value is an OTLP protobuf export
//! request holding only that record's data, so no timestamp crosses a topic as text; the
//! headers carry the signal kind and the ingest time. Producer (ingest) and consumers
//! (writer, assembler, logminer) use only these functions.

use prost::Message;
use rdkafka::message::{BorrowedHeaders, Header, Headers, OwnedHeaders};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// Header naming the signal kind: `traces` or `logs`.
pub const KIND_HEADER: &str = "tayga-kind";
/// Header holding the ingest time, decimal nanoseconds since the epoch.
pub const INGEST_NS_HEADER: &str = "tayga-ingest-ns";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    Traces,
    Logs,
}

impl SignalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalKind::Traces => "traces",
            SignalKind::Logs => "logs",
        }
    }
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalPayload {
    Traces(ExportTraceServiceRequest),
    Logs(ExportLogsServiceRequest),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SignalRecord {
    pub ingest_ns: u64,
    pub payload: SignalPayload,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("record has no `{KIND_HEADER}` header")]
    MissingKind,
    #[error("record kind `{0}` is neither traces nor logs")]
    UnknownKind(String),
    #[error("record has no value")]
    Empty,
    #[error("record value is not a valid OTLP {kind} request: {reason}")]
    Decode { kind: &'static str, reason: String },
}

/// Headers for a record of `kind` ingested at `ingest_ns`.
pub fn headers(kind: SignalKind, ingest_ns: u64) -> OwnedHeaders {
    owned_headers(&header_pairs(kind, ingest_ns))
}

/// The same headers as (key, value) pairs, as ingest's backlog keeps them.
pub fn header_pairs(kind: SignalKind, ingest_ns: u64) -> [(String, String); 2] {
    [(KIND_HEADER.into(), kind.as_str().into()), (INGEST_NS_HEADER.into(), ingest_ns.to_string())]
}

/// Headers from (key, value) pairs.
pub fn owned_headers<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> OwnedHeaders {
    pairs.iter().fold(OwnedHeaders::new_with_capacity(pairs.len()), |h, (k, v)| {
        h.insert(Header { key: k.as_ref(), value: Some(v.as_ref()) })
    })
}

fn header<'a>(headers: Option<&'a BorrowedHeaders>, key: &str) -> Option<&'a [u8]> {
    headers?.iter().find(|h| h.key == key).and_then(|h| h.value)
}

/// A consumed record's kind, ingest time and value, before its value is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub kind: SignalKind,
    pub ingest_ns: u64,
    pub value: &'a [u8],
}

/// Reads a consumed record's headers. A record that fails here, or whose value then fails
/// to decode, is an error the consumer must report and skip past (it can never become
/// valid by being read again).
pub fn read<'a>(headers: Option<&BorrowedHeaders>, value: Option<&'a [u8]>) -> Result<RawRecord<'a>, RecordError> {
    let kind = header(headers, KIND_HEADER).ok_or(RecordError::MissingKind)?;
    let ingest_ns = header(headers, INGEST_NS_HEADER)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let value = value.ok_or(RecordError::Empty)?;
    let kind = match kind {
        b"traces" => SignalKind::Traces,
        b"logs" => SignalKind::Logs,
        other => return Err(RecordError::UnknownKind(String::from_utf8_lossy(other).into_owned())),
    };
    Ok(RawRecord { kind, ingest_ns, value })
}

impl RawRecord<'_> {
    /// The value as the OTLP request its kind names.
    pub fn decode(&self) -> Result<SignalPayload, RecordError> {
        let error =
            |kind: &'static str| move |e: prost::DecodeError| RecordError::Decode { kind, reason: e.to_string() };
        Ok(match self.kind {
            SignalKind::Traces => {
                SignalPayload::Traces(ExportTraceServiceRequest::decode(self.value).map_err(error("traces"))?)
            }
            SignalKind::Logs => {
                SignalPayload::Logs(ExportLogsServiceRequest::decode(self.value).map_err(error("logs"))?)
            }
        })
    }
}

/// Decodes a consumed record ([`read`], then [`RawRecord::decode`]).
pub fn decode(headers: Option<&BorrowedHeaders>, value: Option<&[u8]>) -> Result<SignalRecord, RecordError> {
    let raw = read(headers, value)?;
    Ok(SignalRecord { ingest_ns: raw.ingest_ns, payload: raw.decode()? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::{Message as _, OwnedMessage, Timestamp};

    fn message(headers: OwnedHeaders, value: Vec<u8>) -> OwnedMessage {
        OwnedMessage::new(Some(value), None, "t".into(), Timestamp::NotAvailable, 0, 0, Some(headers))
    }

    #[test]
    fn round_trip_through_headers_and_value() {
        let request = ExportLogsServiceRequest::default();
        let msg = message(headers(SignalKind::Logs, 1234), request.encode_to_vec());
        let got = decode(msg.headers().map(|h| h.as_borrowed()), msg.payload().or(Some(&[]))).unwrap();
        assert_eq!(got, SignalRecord { ingest_ns: 1234, payload: SignalPayload::Logs(request) });
    }

    #[test]
    fn bad_records_are_named() {
        let msg = message(OwnedHeaders::new().insert(Header { key: KIND_HEADER, value: Some("metrics") }), vec![]);
        assert_eq!(
            decode(msg.headers().map(|h| h.as_borrowed()), Some(&[])),
            Err(RecordError::UnknownKind("metrics".into()))
        );
        let msg = message(headers(SignalKind::Traces, 1), vec![0xff, 0xff]);
        assert!(matches!(
            decode(msg.headers().map(|h| h.as_borrowed()), msg.payload()),
            Err(RecordError::Decode { kind: "traces", .. })
        ));
        assert_eq!(decode(None, Some(&[])), Err(RecordError::MissingKind));
    }
}
