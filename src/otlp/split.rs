//! Splitting an OTLP request into the records ingest publishes (seed 000, "Topics and
//! keys"): on `signals`, one record per trace id, with spans and logs that carry no valid
//! trace id keyed by their service; on `logs`, one record per service. A group is split
//! further only to keep every record's encoding at or under the size limit; an item that
//! cannot fit alone is rejected, by name, never dropped silently.
//!
//! Every record is a complete OTLP request (resource and scope kept) holding only its key's
//! items, in the order they came.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::encoding::encoded_len_varint;
use prost::Message;

use super::{hex_id, service_name, valid_trace_id, ExportLogsServiceRequest, ExportTraceServiceRequest};

/// What a record is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKey {
    /// Lowercase hex of a valid trace id.
    Trace(String),
    /// A service name: for data without a valid trace id, and for the `logs` topic.
    Service(String),
}

impl RecordKey {
    /// The Kafka record key.
    pub fn as_str(&self) -> &str {
        match self {
            RecordKey::Trace(s) | RecordKey::Service(s) => s,
        }
    }
}

/// How items are grouped into records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// `signals`: by trace id, falling back to the service.
    ByTrace,
    /// `logs`: by service.
    ByService,
}

/// One record to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<R> {
    pub key: RecordKey,
    pub request: R,
    /// How many spans or logs the request holds.
    pub items: usize,
}

/// An item too large to fit in any record by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub key: RecordKey,
    pub encoded_bytes: usize,
    pub limit: usize,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an item of {} bytes (key {}) exceeds the {}-byte record limit by itself",
            self.encoded_bytes,
            self.key.as_str(),
            self.limit
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Split<R> {
    pub records: Vec<Record<R>>,
    pub rejected: Vec<Rejected>,
}

/// A resource with its scopes, each with its items: the nesting of every OTLP request.
pub type ResourceGroup<I> = (ResourceHead, Vec<(ScopeHead, Vec<I>)>);

/// An OTLP export request: resources holding scopes holding items.
pub trait OtlpRequest: Message + Default + Sized {
    type Item: Message + Clone;

    /// Flattens into resources, scopes and items, each scope naming its resource and each
    /// item its scope (by index).
    fn decompose(self) -> Parts<Self::Item>;
    /// Builds a request from resources that each hold scopes that each hold items.
    fn compose(resources: Vec<ResourceGroup<Self::Item>>) -> Self;
    fn trace_id(item: &Self::Item) -> &[u8];
}

#[derive(Debug, Clone, Default)]
pub struct ResourceHead {
    pub resource: Option<Resource>,
    pub schema_url: String,
}

#[derive(Debug, Clone, Default)]
pub struct ScopeHead {
    pub scope: Option<InstrumentationScope>,
    pub schema_url: String,
}

pub struct Parts<I> {
    pub resources: Vec<ResourceHead>,
    /// (resource index, scope)
    pub scopes: Vec<(usize, ScopeHead)>,
    /// (scope index, item)
    pub items: Vec<(usize, I)>,
}

impl OtlpRequest for ExportTraceServiceRequest {
    type Item = Span;

    fn decompose(self) -> Parts<Span> {
        let mut parts = Parts { resources: Vec::new(), scopes: Vec::new(), items: Vec::new() };
        for rs in self.resource_spans {
            let ri = parts.resources.len();
            parts.resources.push(ResourceHead { resource: rs.resource, schema_url: rs.schema_url });
            for ss in rs.scope_spans {
                let si = parts.scopes.len();
                parts.scopes.push((ri, ScopeHead { scope: ss.scope, schema_url: ss.schema_url }));
                parts.items.extend(ss.spans.into_iter().map(|s| (si, s)));
            }
        }
        parts
    }

    fn compose(resources: Vec<ResourceGroup<Span>>) -> Self {
        ExportTraceServiceRequest {
            resource_spans: resources
                .into_iter()
                .map(|(r, scopes)| ResourceSpans {
                    resource: r.resource,
                    schema_url: r.schema_url,
                    scope_spans: scopes
                        .into_iter()
                        .map(|(s, spans)| ScopeSpans { scope: s.scope, schema_url: s.schema_url, spans })
                        .collect(),
                })
                .collect(),
        }
    }

    fn trace_id(item: &Span) -> &[u8] {
        &item.trace_id
    }
}

impl OtlpRequest for ExportLogsServiceRequest {
    type Item = LogRecord;

    fn decompose(self) -> Parts<LogRecord> {
        let mut parts = Parts { resources: Vec::new(), scopes: Vec::new(), items: Vec::new() };
        for rl in self.resource_logs {
            let ri = parts.resources.len();
            parts.resources.push(ResourceHead { resource: rl.resource, schema_url: rl.schema_url });
            for sl in rl.scope_logs {
                let si = parts.scopes.len();
                parts.scopes.push((ri, ScopeHead { scope: sl.scope, schema_url: sl.schema_url }));
                parts.items.extend(sl.log_records.into_iter().map(|l| (si, l)));
            }
        }
        parts
    }

    fn compose(resources: Vec<ResourceGroup<LogRecord>>) -> Self {
        ExportLogsServiceRequest {
            resource_logs: resources
                .into_iter()
                .map(|(r, scopes)| ResourceLogs {
                    resource: r.resource,
                    schema_url: r.schema_url,
                    scope_logs: scopes
                        .into_iter()
                        .map(|(s, log_records)| ScopeLogs { scope: s.scope, schema_url: s.schema_url, log_records })
                        .collect(),
                })
                .collect(),
        }
    }

    fn trace_id(item: &LogRecord) -> &[u8] {
        &item.trace_id
    }
}

/// The encoded size of a length-delimited field holding `len` bytes (field numbers < 16).
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn string_field_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(s.len())
    }
}

/// Exact sizes of the wrappers, so records can be packed without re-encoding.
struct Sizes {
    /// Per resource: its content without scopes (resource message and schema url fields).
    resource: Vec<usize>,
    /// Per scope: its content without items.
    scope: Vec<usize>,
}

impl Sizes {
    fn of<I>(parts: &Parts<I>) -> Sizes {
        Sizes {
            resource: parts
                .resources
                .iter()
                .map(|r| {
                    r.resource.as_ref().map_or(0, |r| field_len(r.encoded_len())) + string_field_len(&r.schema_url)
                })
                .collect(),
            scope: parts
                .scopes
                .iter()
                .map(|(_, s)| {
                    s.scope.as_ref().map_or(0, |s| field_len(s.encoded_len())) + string_field_len(&s.schema_url)
                })
                .collect(),
        }
    }
}

/// The exact encoded size of a record being filled: the closed resources, and the content
/// of the open resource and open scope, as (index, bytes).
#[derive(Clone, Copy, Default)]
struct SizeState {
    closed: usize,
    open_resource: Option<(usize, usize)>,
    open_scope: Option<(usize, usize)>,
}

impl SizeState {
    /// The state after appending an item of `item_len` encoded bytes in scope `si`.
    fn with_item(self, sizes: &Sizes, scopes: &[(usize, ScopeHead)], si: usize, item_len: usize) -> SizeState {
        let ri = scopes[si].0;
        let item = field_len(item_len);
        match (self.open_resource, self.open_scope) {
            (Some((r, rlen)), Some((s, slen))) if r == ri && s == si => {
                SizeState { open_resource: Some((r, rlen)), open_scope: Some((s, slen + item)), ..self }
            }
            // Same resource, new scope: the open scope closes into the resource.
            (Some((r, rlen)), Some((_, slen))) if r == ri => SizeState {
                open_resource: Some((r, rlen + field_len(slen))),
                open_scope: Some((si, sizes.scope[si] + item)),
                ..self
            },
            // New resource: the open one closes.
            (res, scope) => SizeState {
                closed: self.closed
                    + res.zip(scope).map_or(0, |((_, rlen), (_, slen))| field_len(rlen + field_len(slen))),
                open_resource: Some((ri, sizes.resource[ri])),
                open_scope: Some((si, sizes.scope[si] + item)),
            },
        }
    }

    fn total(&self) -> usize {
        self.closed
            + self
                .open_resource
                .zip(self.open_scope)
                .map_or(0, |((_, rlen), (_, slen))| field_len(rlen + field_len(slen)))
    }
}

/// A record being filled.
struct Builder<I> {
    /// (scope index, item) in order.
    items: Vec<(usize, I)>,
    size: SizeState,
}

impl<I: Message> Builder<I> {
    fn new() -> Self {
        Builder { items: Vec::new(), size: SizeState::default() }
    }

    fn push(&mut self, size: SizeState, si: usize, item: I) {
        self.size = size;
        self.items.push((si, item));
    }

    fn build<R: OtlpRequest<Item = I>>(self, parts: &Parts<I>) -> R {
        let size = self.size;
        let mut resources: Vec<ResourceGroup<I>> = Vec::new();
        let mut last: Option<(usize, usize)> = None; // (resource index, scope index)
        for (si, item) in self.items {
            let ri = parts.scopes[si].0;
            match last {
                Some((r, s)) if r == ri && s == si => {}
                Some((r, _)) if r == ri => {
                    resources.last_mut().unwrap().1.push((parts.scopes[si].1.clone(), Vec::new()))
                }
                _ => resources.push((parts.resources[ri].clone(), vec![(parts.scopes[si].1.clone(), Vec::new())])),
            }
            last = Some((ri, si));
            resources.last_mut().unwrap().1.last_mut().unwrap().1.push(item);
        }
        let request = R::compose(resources);
        // The tracked size is exact: packing depends on it, so every test build checks it.
        debug_assert_eq!(request.encoded_len(), size.total());
        request
    }
}

/// Splits `request` into records of at most `max_bytes` encoded bytes each, grouped as asked.
/// Records come in the order of their keys' first appearance.
pub fn split<R: OtlpRequest>(request: R, grouping: Grouping, max_bytes: usize) -> Split<R> {
    let mut parts = request.decompose();
    let sizes = Sizes::of(&parts);
    let items = std::mem::take(&mut parts.items);

    let mut order: Vec<RecordKey> = Vec::new();
    let mut groups: HashMap<RecordKey, Vec<(usize, R::Item)>> = HashMap::new();
    for (si, item) in items {
        let trace_id = R::trace_id(&item);
        let key = match grouping {
            Grouping::ByTrace if valid_trace_id(trace_id) => RecordKey::Trace(hex_id(trace_id)),
            _ => RecordKey::Service(service_name(parts.resources[parts.scopes[si].0].resource.as_ref()).to_string()),
        };
        groups
            .entry(key.clone())
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push((si, item));
    }

    let mut out = Split { records: Vec::new(), rejected: Vec::new() };
    for key in order {
        let mut builder = Builder::new();
        for (si, item) in groups.remove(&key).unwrap_or_default() {
            let item_len = item.encoded_len();
            let alone = SizeState::default().with_item(&sizes, &parts.scopes, si, item_len);
            if alone.total() > max_bytes {
                out.rejected.push(Rejected { key: key.clone(), encoded_bytes: alone.total(), limit: max_bytes });
                continue;
            }
            let mut grown = builder.size.with_item(&sizes, &parts.scopes, si, item_len);
            if grown.total() > max_bytes {
                let full = std::mem::replace(&mut builder, Builder::new());
                out.records.push(Record { key: key.clone(), items: full.items.len(), request: full.build(&parts) });
                grown = alone;
            }
            builder.push(grown, si, item);
        }
        if !builder.items.is_empty() {
            out.records.push(Record { key, items: builder.items.len(), request: builder.build(&parts) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
    use proptest::prelude::*;

    fn resource(service: &str) -> Option<Resource> {
        Some(crate::otlp::service_resource(service))
    }

    fn span(trace: u8, id: u8, payload: usize) -> Span {
        Span {
            trace_id: if trace == 0 { Vec::new() } else { vec![trace; 16] },
            span_id: vec![id; 8],
            name: "x".repeat(payload),
            ..Default::default()
        }
    }

    fn traces(groups: Vec<(&str, Vec<Vec<Span>>)>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: groups
                .into_iter()
                .map(|(svc, scopes)| ResourceSpans {
                    resource: resource(svc),
                    scope_spans: scopes
                        .into_iter()
                        .enumerate()
                        .map(|(i, spans)| ScopeSpans {
                            scope: Some(InstrumentationScope { name: format!("scope{i}"), ..Default::default() }),
                            spans,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// Every span of a request, with its service and scope name, in order.
    fn flat(req: &ExportTraceServiceRequest) -> Vec<(String, String, Span)> {
        req.resource_spans
            .iter()
            .flat_map(|rs| {
                rs.scope_spans.iter().flat_map(move |ss| {
                    ss.spans.iter().map(move |s| {
                        (
                            service_name(rs.resource.as_ref()).to_string(),
                            ss.scope.as_ref().unwrap().name.clone(),
                            s.clone(),
                        )
                    })
                })
            })
            .collect()
    }

    #[test]
    fn three_traces_make_three_records_keyed_by_trace_id() {
        let req = traces(vec![
            ("a", vec![vec![span(1, 1, 0), span(2, 2, 0)], vec![span(1, 3, 0)]]),
            ("b", vec![vec![span(3, 4, 0), span(2, 5, 0)]]),
        ]);
        let split = split(req, Grouping::ByTrace, 900_000);
        let keys: Vec<&str> = split.records.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["01".repeat(16), "02".repeat(16), "03".repeat(16)]);
        // Trace 2 spans two services: its record keeps both resources.
        let trace2 = flat(&split.records[1].request);
        assert_eq!(trace2.iter().map(|(s, _, _)| s.as_str()).collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(split.rejected.is_empty());
    }

    #[test]
    fn spans_without_a_valid_trace_id_are_keyed_by_service() {
        let mut zero = span(0, 9, 0);
        zero.trace_id = vec![0; 16];
        let req = traces(vec![("a", vec![vec![span(0, 1, 0), zero]]), ("b", vec![vec![span(0, 2, 0)]])]);
        let split = split(req, Grouping::ByTrace, 900_000);
        let keys: Vec<RecordKey> = split.records.iter().map(|r| r.key.clone()).collect();
        assert_eq!(keys, vec![RecordKey::Service("a".into()), RecordKey::Service("b".into())]);
    }

    #[test]
    fn a_span_too_large_alone_is_rejected_by_name() {
        let req = traces(vec![("a", vec![vec![span(1, 1, 2000), span(1, 2, 10)]])]);
        let split = split(req, Grouping::ByTrace, 1000);
        assert_eq!(split.rejected.len(), 1);
        assert_eq!(split.rejected[0].key, RecordKey::Trace("01".repeat(16)));
        assert!(split.rejected[0].to_string().contains("exceeds the 1000-byte record limit"));
        assert_eq!(flat(&split.records[0].request).len(), 1);
    }

    fn arb_request() -> impl Strategy<Value = ExportTraceServiceRequest> {
        let span = (0u8..4, any::<u8>(), 0usize..3000).prop_map(|(t, id, len)| span(t, id, len));
        let scope = prop::collection::vec(span, 0..12);
        let resource = (prop::sample::select(vec!["a", "b", "c"]), prop::collection::vec(scope, 0..3));
        prop::collection::vec(resource, 0..4).prop_map(traces)
    }

    proptest! {
        #[test]
        fn records_fit_the_limit_and_their_union_is_the_request(req in arb_request(), limit in 1500usize..20_000) {
            let want = flat(&req);
            let split = split(req, Grouping::ByTrace, limit);
            let mut got: Vec<(String, String, Span)> = Vec::new();
            for record in &split.records {
                let len = record.request.encoded_len();
                prop_assert!(len <= limit, "record of {} bytes over the {} limit", len, limit);
                for (svc, scope, s) in flat(&record.request) {
                    let expected_key = if valid_trace_id(&s.trace_id) { RecordKey::Trace(hex_id(&s.trace_id)) } else { RecordKey::Service(svc.clone()) };
                    prop_assert_eq!(&record.key, &expected_key);
                    got.push((svc, scope, s));
                }
            }
            // Nothing lost, nothing invented: rejected items are accounted for by count.
            prop_assert_eq!(got.len() + split.rejected.len(), want.len());
            for item in &got {
                prop_assert!(want.contains(item));
            }
            // Only items that cannot fit alone are rejected.
            for r in &split.rejected {
                prop_assert!(r.encoded_bytes > limit);
            }
        }

        #[test]
        fn without_a_size_limit_each_key_is_exactly_one_record(req in arb_request()) {
            let split = split(req, Grouping::ByTrace, usize::MAX);
            let mut keys: Vec<&RecordKey> = split.records.iter().map(|r| &r.key).collect();
            let n = keys.len();
            keys.sort();
            keys.dedup();
            prop_assert_eq!(keys.len(), n);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        /// At the real limit: requests of several megabytes, spans up to 300 KB.
        #[test]
        fn requests_over_900_000_bytes_split_into_records_under_it(
            sizes in prop::collection::vec((1u8..4, 1_000usize..300_000), 4..24)
        ) {
            let spans: Vec<Span> = sizes.iter().enumerate().map(|(i, (t, len))| span(*t, i as u8, *len)).collect();
            let req = traces(vec![("a", vec![spans])]);
            let want = flat(&req);
            prop_assume!(req.encoded_len() > 900_000);
            let split = split(req, Grouping::ByTrace, 900_000);
            prop_assert!(split.rejected.is_empty());
            let mut got = Vec::new();
            for record in &split.records {
                prop_assert!(record.request.encoded_len() <= 900_000);
                prop_assert_eq!(record.items, flat(&record.request).len());
                got.extend(flat(&record.request));
            }
            prop_assert_eq!(got.len(), want.len());
            for item in &want {
                prop_assert!(got.contains(item));
            }
        }
    }

    #[test]
    fn logs_group_by_service_for_the_logs_topic() {
        let log = |trace: u8, body: &str| LogRecord {
            trace_id: vec![trace; 16],
            body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.into())) }),
            ..Default::default()
        };
        let req = ExportLogsServiceRequest {
            resource_logs: vec![
                ResourceLogs {
                    resource: resource("a"),
                    scope_logs: vec![ScopeLogs { log_records: vec![log(1, "x"), log(2, "y")], ..Default::default() }],
                    ..Default::default()
                },
                ResourceLogs {
                    resource: resource("b"),
                    scope_logs: vec![ScopeLogs { log_records: vec![log(1, "z")], ..Default::default() }],
                    ..Default::default()
                },
            ],
        };
        let by_service = split(req.clone(), Grouping::ByService, 900_000);
        let keys: Vec<&str> = by_service.records.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["a", "b"]);
        let by_trace = split(req, Grouping::ByTrace, 900_000);
        assert_eq!(by_trace.records.len(), 2);
        assert_eq!(by_trace.records[0].request.resource_logs.len(), 2, "trace 1 has logs of a and b");
    }
}
