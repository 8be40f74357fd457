//! Splitting an OTLP request into the records ingest publishes (docs/design.md#topics): on
//! `signals`, one record per trace id, with spans and logs that carry no valid trace id
//! keyed by their service; on `logs`, one record per service. A group is split
//! further only to keep every record's encoding at or under the size limit; an item that
//! cannot fit alone is rejected, by name, never dropped silently.
//!
//! Every record is a complete OTLP request (resource and scope kept) holding only its key's
//! items, in the order they came.

use std::collections::HashMap;

use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::protobuf::{self, field_len, Msg, Reader, WireError};
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

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Split<R> {
    pub records: Vec<Record<R>>,
    pub rejected: Vec<Rejected>,
}

/// An OTLP export request, as its bytes are split: the nesting (request → resources →
/// scopes → items) is the same for traces and logs, down to the field numbers; only the
/// item's trace id field differs.
pub trait OtlpRequest: Message + Default + Sized {
    /// The request message, for the schema check.
    const MESSAGE: Msg;
    /// The field number of an item's `trace_id`.
    const TRACE_ID_TAG: u32;
    /// The splits ingest makes of a request ([`ingest_split`]): by trace for the signals
    /// topic, and for logs also by service, for the logminer's topic.
    const INGEST_GROUPINGS: &'static [Grouping];
}

impl OtlpRequest for ExportTraceServiceRequest {
    const MESSAGE: Msg = Msg::TraceRequest;
    const TRACE_ID_TAG: u32 = 1;
    const INGEST_GROUPINGS: &'static [Grouping] = &[Grouping::ByTrace];
}

impl OtlpRequest for ExportLogsServiceRequest {
    const MESSAGE: Msg = Msg::LogsRequest;
    const TRACE_ID_TAG: u32 = 9;
    const INGEST_GROUPINGS: &'static [Grouping] = &[Grouping::ByTrace, Grouping::ByService];
}

/// Field numbers shared by both requests: `resource_spans`/`resource_logs` in the request,
/// `resource` and `scope_spans`/`scope_logs` in a resource, `spans`/`log_records` in a scope.
const RESOURCES: u32 = 1;
const RESOURCE: u32 = 1;
const SCOPES: u32 = 2;
const ITEMS: u32 = 2;

/// A resource of the request: every field but its scopes is copied into each record as
/// it came (the resource, the schema url, fields this version does not know).
struct ResourcePart<'a> {
    head: Vec<&'a [u8]>,
    head_len: usize,
    /// The payloads of its `resource` fields: decoding them in sequence is the resource
    /// (protobuf merges a repeated message field).
    resource: Vec<&'a [u8]>,
}

struct ScopePart<'a> {
    resource: usize,
    head: Vec<&'a [u8]>,
    head_len: usize,
}

struct ItemPart<'a> {
    scope: usize,
    payload: &'a [u8],
}

/// A checked request, as slices of its bytes.
struct Parts<'a> {
    resources: Vec<ResourcePart<'a>>,
    scopes: Vec<ScopePart<'a>>,
    items: Vec<ItemPart<'a>>,
}

impl<'a> Parts<'a> {
    /// `bytes` must have passed [`protobuf::check`].
    fn of(bytes: &'a [u8]) -> Parts<'a> {
        let mut parts = Parts { resources: Vec::new(), scopes: Vec::new(), items: Vec::new() };
        let mut request = Reader::new(bytes);
        while let Some(field) = request.next_field() {
            if field.tag != RESOURCES || field.wire_type != protobuf::LEN {
                continue;
            }
            let ri = parts.resources.len();
            let mut resource = ResourcePart { head: Vec::new(), head_len: 0, resource: Vec::new() };
            let mut fields = Reader::new(field.payload);
            while let Some(f) = fields.next_field() {
                if f.tag == SCOPES && f.wire_type == protobuf::LEN {
                    parts.scope(ri, f.payload);
                    continue;
                }
                if f.tag == RESOURCE && f.wire_type == protobuf::LEN {
                    resource.resource.push(f.payload);
                }
                resource.head.push(f.raw);
                resource.head_len += f.raw.len();
            }
            parts.resources.push(resource);
        }
        parts
    }

    fn scope(&mut self, resource: usize, bytes: &'a [u8]) {
        let si = self.scopes.len();
        let mut scope = ScopePart { resource, head: Vec::new(), head_len: 0 };
        let mut fields = Reader::new(bytes);
        while let Some(f) = fields.next_field() {
            if f.tag == ITEMS && f.wire_type == protobuf::LEN {
                self.items.push(ItemPart { scope: si, payload: f.payload });
            } else {
                scope.head.push(f.raw);
                scope.head_len += f.raw.len();
            }
        }
        self.scopes.push(scope);
    }

    fn service(&self, ri: usize) -> String {
        let payloads = &self.resources[ri].resource;
        if payloads.is_empty() {
            return service_name(None).to_string();
        }
        let mut resource = Resource::default();
        for payload in payloads {
            // Checked already: a resource that passed the schema check decodes.
            let _ = resource.merge(*payload);
        }
        service_name(Some(&resource)).to_string()
    }

    /// The items of each key, keys in the order of their first appearance.
    fn groups(&self, grouping: Grouping, trace_id_tag: u32) -> Vec<(RecordKey, Vec<usize>)> {
        let mut groups: Vec<(RecordKey, Vec<usize>)> = Vec::new();
        let mut by_trace: HashMap<&[u8], usize> = HashMap::new();
        let mut by_service: HashMap<String, usize> = HashMap::new();
        let mut resource_group: Vec<Option<usize>> = vec![None; self.resources.len()];
        for (i, item) in self.items.iter().enumerate() {
            let trace_id = match grouping {
                Grouping::ByTrace => protobuf::last_bytes(item.payload, trace_id_tag),
                Grouping::ByService => &[],
            };
            let group = if valid_trace_id(trace_id) {
                *by_trace.entry(trace_id).or_insert_with(|| {
                    groups.push((RecordKey::Trace(hex_id(trace_id)), Vec::new()));
                    groups.len() - 1
                })
            } else {
                let ri = self.scopes[item.scope].resource;
                match resource_group[ri] {
                    Some(g) => g,
                    None => {
                        let service = self.service(ri);
                        let g = *by_service.entry(service.clone()).or_insert_with(|| {
                            groups.push((RecordKey::Service(service), Vec::new()));
                            groups.len() - 1
                        });
                        resource_group[ri] = Some(g);
                        g
                    }
                }
            };
            groups[group].1.push(i);
        }
        groups
    }

    /// The state after appending an item of `item_len` bytes in scope `si`.
    fn with_item(&self, state: SizeState, si: usize, item_len: usize) -> SizeState {
        let ri = self.scopes[si].resource;
        let item = field_len(item_len);
        match (state.open_resource, state.open_scope) {
            (Some((r, rlen)), Some((s, slen))) if r == ri && s == si => {
                SizeState { open_resource: Some((r, rlen)), open_scope: Some((s, slen + item)), ..state }
            }
            // Same resource, new scope: the open scope closes into the resource.
            (Some((r, rlen)), Some((_, slen))) if r == ri => SizeState {
                open_resource: Some((r, rlen + field_len(slen))),
                open_scope: Some((si, self.scopes[si].head_len + item)),
                ..state
            },
            // New resource: the open one closes.
            (res, scope) => SizeState {
                closed: state.closed
                    + res.zip(scope).map_or(0, |((_, rlen), (_, slen))| field_len(rlen + field_len(slen))),
                open_resource: Some((ri, self.resources[ri].head_len)),
                open_scope: Some((si, self.scopes[si].head_len + item)),
            },
        }
    }

    /// The encoding of a record holding `items` (indices, in request order), `total` bytes.
    fn build(&self, items: &[usize], total: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(total);
        let scope_of = |i: usize| self.items[i].scope;
        let resource_of = |i: usize| self.scopes[self.items[i].scope].resource;
        let mut at = 0;
        while at < items.len() {
            let ri = resource_of(items[at]);
            let end = at + items[at..].iter().take_while(|i| resource_of(**i) == ri).count();
            let run = &items[at..end];
            // Each scope run's content length, then the resource's.
            let mut scope_runs: Vec<(usize, usize, usize)> = Vec::new(); // (scope, items, bytes)
            for &i in run {
                let item = field_len(self.items[i].payload.len());
                match scope_runs.last_mut() {
                    Some((s, n, len)) if *s == scope_of(i) => {
                        *n += 1;
                        *len += item;
                    }
                    _ => scope_runs.push((scope_of(i), 1, self.scopes[scope_of(i)].head_len + item)),
                }
            }
            let resource_len =
                self.resources[ri].head_len + scope_runs.iter().map(|(_, _, len)| field_len(*len)).sum::<usize>();
            protobuf::put_len_field(&mut out, RESOURCES, resource_len);
            self.resources[ri].head.iter().for_each(|f| out.extend_from_slice(f));
            let mut next = run.iter();
            for (si, n, len) in scope_runs {
                protobuf::put_len_field(&mut out, SCOPES, len);
                self.scopes[si].head.iter().for_each(|f| out.extend_from_slice(f));
                for &i in next.by_ref().take(n) {
                    let payload = self.items[i].payload;
                    protobuf::put_len_field(&mut out, ITEMS, payload.len());
                    out.extend_from_slice(payload);
                }
            }
            at = end;
        }
        // The tracked size is exact: packing depends on it, so every test build checks it.
        debug_assert_eq!(out.len(), total);
        out
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
    fn total(&self) -> usize {
        self.closed
            + self
                .open_resource
                .zip(self.open_scope)
                .map_or(0, |((_, rlen), (_, slen))| field_len(rlen + field_len(slen)))
    }
}

/// Splits the protobuf encoding of an `R` into records of at most `max_bytes` bytes each,
/// grouped as asked, without decoding it: resource and scope fields are copied as they
/// came, items are grouped by their trace id (or service). Records come in the order of
/// their keys' first appearance, items in request order. Bytes prost would refuse are
/// refused here too.
pub fn split_encoded<R: OtlpRequest>(
    bytes: &[u8],
    grouping: Grouping,
    max_bytes: usize,
) -> Result<Split<Vec<u8>>, WireError> {
    let mut splits = split_encoded_by::<R>(bytes, &[grouping], max_bytes)?;
    Ok(splits.pop().unwrap_or_default())
}

/// [`split_encoded`] once per grouping, checking the bytes once.
pub fn split_encoded_by<R: OtlpRequest>(
    bytes: &[u8],
    groupings: &[Grouping],
    max_bytes: usize,
) -> Result<Vec<Split<Vec<u8>>>, WireError> {
    protobuf::check(bytes, R::MESSAGE)?;
    let parts = Parts::of(bytes);
    Ok(groupings.iter().map(|g| parts.split(*g, R::TRACE_ID_TAG, max_bytes)).collect())
}

/// The records of a request by trace, and for logs by service too.
pub type IngestSplits = (Split<Vec<u8>>, Option<Split<Vec<u8>>>);

/// What ingest makes of a request's bytes, over HTTP and gRPC alike: the records by trace
/// id, and for logs the records by service too (`R::INGEST_GROUPINGS`). Bytes prost would
/// refuse are refused.
pub fn ingest_split<R: OtlpRequest>(bytes: &[u8], max_bytes: usize) -> Result<IngestSplits, WireError> {
    let mut splits = split_encoded_by::<R>(bytes, R::INGEST_GROUPINGS, max_bytes)?.into_iter();
    Ok((splits.next().unwrap_or_default(), splits.next()))
}

/// The service of every resource of an `R` that holds at least one item, once each, in
/// order of appearance (what a token bound to services is judged by).
pub fn item_services<R: OtlpRequest>(bytes: &[u8]) -> Result<Vec<String>, WireError> {
    protobuf::check(bytes, R::MESSAGE)?;
    let parts = Parts::of(bytes);
    let mut resources: Vec<usize> = parts.items.iter().map(|item| parts.scopes[item.scope].resource).collect();
    resources.dedup();
    let mut services: Vec<String> = Vec::new();
    for ri in resources {
        let service = parts.service(ri);
        if !services.contains(&service) {
            services.push(service);
        }
    }
    Ok(services)
}

impl Parts<'_> {
    fn split(&self, grouping: Grouping, trace_id_tag: u32, max_bytes: usize) -> Split<Vec<u8>> {
        let parts = self;
        let mut out = Split { records: Vec::new(), rejected: Vec::new() };
        for (key, items) in parts.groups(grouping, trace_id_tag) {
            let mut record: Vec<usize> = Vec::new();
            let mut size = SizeState::default();
            for i in items {
                let si = parts.items[i].scope;
                let item_len = parts.items[i].payload.len();
                let alone = parts.with_item(SizeState::default(), si, item_len);
                if alone.total() > max_bytes {
                    out.rejected.push(Rejected { key: key.clone(), encoded_bytes: alone.total(), limit: max_bytes });
                    continue;
                }
                let mut grown = parts.with_item(size, si, item_len);
                if grown.total() > max_bytes {
                    let full = std::mem::take(&mut record);
                    out.records.push(Record {
                        key: key.clone(),
                        items: full.len(),
                        request: parts.build(&full, size.total()),
                    });
                    grown = alone;
                }
                size = grown;
                record.push(i);
            }
            if !record.is_empty() {
                out.records.push(Record { key, items: record.len(), request: parts.build(&record, size.total()) });
            }
        }
        out
    }
}

/// [`split_encoded`] for a decoded request: the records decoded again.
pub fn split<R: OtlpRequest>(request: R, grouping: Grouping, max_bytes: usize) -> Split<R> {
    let bytes = request.encode_to_vec();
    let encoded = split_encoded::<R>(&bytes, grouping, max_bytes).expect("prost's own encoding passes the check");
    Split {
        records: encoded
            .records
            .into_iter()
            .map(|r| Record {
                key: r.key,
                items: r.items,
                request: R::decode(r.request.as_slice()).expect("a record is made of checked fields"),
            })
            .collect(),
        rejected: encoded.rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
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
    fn the_services_that_hold_items() {
        let request = ExportTraceServiceRequest {
            resource_spans: ["web", "db", "web", "idle"]
                .iter()
                .map(|svc| ResourceSpans {
                    resource: resource(svc),
                    scope_spans: if *svc == "idle" {
                        Vec::new()
                    } else {
                        vec![ScopeSpans { spans: vec![span(1, 1, 0)], ..Default::default() }]
                    },
                    ..Default::default()
                })
                .collect(),
        };
        let services = item_services::<ExportTraceServiceRequest>(&request.encode_to_vec()).unwrap();
        assert_eq!(
            services,
            vec!["web".to_string(), "db".to_string()],
            "once each; a resource without spans sends nothing"
        );
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

    /// Arbitrary trace requests with resources that carry more than the service name, scopes
    /// with schema urls, spans with and without valid trace ids, over 1..4 services.
    fn arb_rich_request() -> impl Strategy<Value = ExportTraceServiceRequest> {
        let span = (0u8..5, any::<u8>(), 0usize..2000, any::<u64>()).prop_map(|(t, id, len, start)| Span {
            trace_id: match t {
                0 => Vec::new(),
                4 => vec![0; 16],
                t => vec![t; 16],
            },
            span_id: vec![id; 8],
            name: "s".repeat(len),
            start_time_unix_nano: start,
            attributes: vec![crate::otlp::string_attr("k", &id.to_string())],
            ..Default::default()
        });
        let scope = (prop::collection::vec(span, 0..10), "[a-z]{0,3}").prop_map(|(spans, url)| ScopeSpans {
            scope: Some(InstrumentationScope { name: format!("lib{url}"), ..Default::default() }),
            spans,
            schema_url: url,
        });
        let resource =
            (prop::sample::select(vec!["a", "b", "", "d"]), prop::collection::vec(scope, 0..3), any::<bool>())
                .prop_map(|(svc, scope_spans, extra)| {
                    let mut resource = crate::otlp::service_resource(svc);
                    if extra {
                        resource.attributes.push(crate::otlp::string_attr("host.name", "h1"));
                    }
                    ResourceSpans { resource: Some(resource), scope_spans, schema_url: "r".into() }
                });
        prop::collection::vec(resource, 0..4).prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
    }

    proptest! {
        /// The wire-level split on its own: every record decodes, fits, holds only its key's
        /// spans with their own resource and scope, and the records hold exactly the input.
        #[test]
        fn encoded_records_decode_to_exactly_the_input_spans_by_trace(
            req in arb_rich_request(), limit in 600usize..30_000
        ) {
            let bytes = req.encode_to_vec();
            let want = flat(&req);
            let split = split_encoded::<ExportTraceServiceRequest>(&bytes, Grouping::ByTrace, limit).unwrap();
            let mut got = Vec::new();
            for record in &split.records {
                prop_assert!(record.request.len() <= limit, "record of {} bytes over {}", record.request.len(), limit);
                let decoded = ExportTraceServiceRequest::decode(record.request.as_slice()).unwrap();
                // The exact size: prost encodes the decoded record to as many bytes.
                prop_assert_eq!(decoded.encoded_len(), record.request.len());
                let spans = flat(&decoded);
                prop_assert_eq!(spans.len(), record.items);
                for rs in &decoded.resource_spans {
                    let original = req.resource_spans.iter().find(|o| o.resource == rs.resource).unwrap();
                    prop_assert_eq!(&rs.schema_url, &original.schema_url);
                }
                for (svc, _, s) in &spans {
                    let key = if valid_trace_id(&s.trace_id) { RecordKey::Trace(hex_id(&s.trace_id)) } else { RecordKey::Service(svc.clone()) };
                    prop_assert_eq!(&record.key, &key);
                }
                got.extend(spans);
            }
            for r in &split.rejected {
                prop_assert!(r.encoded_bytes > limit);
            }
            prop_assert_eq!(got.len() + split.rejected.len(), want.len());
            if split.rejected.is_empty() {
                // Grouped by key in order of first appearance, each key's spans in request order.
                let mut keyed: Vec<(RecordKey, (String, String, Span))> = want.iter().cloned().map(|item| {
                    let key = if valid_trace_id(&item.2.trace_id) { RecordKey::Trace(hex_id(&item.2.trace_id)) } else { RecordKey::Service(item.0.clone()) };
                    (key, item)
                }).collect();
                let order: Vec<RecordKey> = keyed.iter().map(|(k, _)| k.clone()).fold(Vec::new(), |mut o, k| { if !o.contains(&k) { o.push(k) } o });
                keyed.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap());
                let expected: Vec<(String, String, Span)> = keyed.into_iter().map(|(_, item)| item).collect();
                prop_assert_eq!(got, expected);
            }
        }

        #[test]
        fn without_a_limit_one_encoded_record_per_key(req in arb_rich_request()) {
            let bytes = req.encode_to_vec();
            let split = split_encoded::<ExportTraceServiceRequest>(&bytes, Grouping::ByTrace, usize::MAX).unwrap();
            let mut keys: Vec<&RecordKey> = split.records.iter().map(|r| &r.key).collect();
            let n = keys.len();
            keys.sort();
            keys.dedup();
            prop_assert_eq!(keys.len(), n);
            prop_assert!(split.rejected.is_empty());
        }
    }

    #[test]
    fn bytes_prost_refuses_are_refused() {
        let bytes = traces(vec![("a", vec![vec![span(1, 1, 10)]])]).encode_to_vec();
        assert!(
            split_encoded::<ExportTraceServiceRequest>(&bytes[..bytes.len() - 1], Grouping::ByTrace, 900_000).is_err()
        );
        assert!(split_encoded::<ExportTraceServiceRequest>(b"\x0a\x02\xff\xff", Grouping::ByTrace, 900_000).is_err());
    }

    #[test]
    fn unknown_fields_and_repeated_resources_travel_with_their_records() {
        // A resource sent in two pieces (protobuf merges them) and an unknown field 9 in the
        // resource spans: each record keeps both, so it decodes to the same resource.
        let mut resource_spans = Vec::new();
        let first = crate::otlp::service_resource("svc").encode_to_vec();
        let second = Resource { attributes: vec![crate::otlp::string_attr("host.name", "h")], ..Default::default() }
            .encode_to_vec();
        for part in [&first, &second] {
            protobuf::put_len_field(&mut resource_spans, 1, part.len());
            resource_spans.extend_from_slice(part);
        }
        resource_spans.extend_from_slice(&[0x48, 0x07]); // field 9, varint 7
        for trace in [1u8, 2] {
            let scope = ScopeSpans { spans: vec![span(trace, trace, 3)], ..Default::default() }.encode_to_vec();
            protobuf::put_len_field(&mut resource_spans, 2, scope.len());
            resource_spans.extend_from_slice(&scope);
        }
        let mut request = Vec::new();
        protobuf::put_len_field(&mut request, 1, resource_spans.len());
        request.extend_from_slice(&resource_spans);
        let whole = ExportTraceServiceRequest::decode(request.as_slice()).unwrap();
        let split = split_encoded::<ExportTraceServiceRequest>(&request, Grouping::ByTrace, 900_000).unwrap();
        assert_eq!(split.records.len(), 2);
        for record in &split.records {
            let decoded = ExportTraceServiceRequest::decode(record.request.as_slice()).unwrap();
            assert_eq!(decoded.resource_spans[0].resource, whole.resource_spans[0].resource);
            assert!(record.request.windows(2).any(|w| w == [0x48, 0x07]), "the unknown field is kept");
        }
        let by_service = split_encoded::<ExportTraceServiceRequest>(&request, Grouping::ByService, 900_000).unwrap();
        assert_eq!(by_service.records.len(), 1);
        assert_eq!(by_service.records[0].key, RecordKey::Service("svc".into()));
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
