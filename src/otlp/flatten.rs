//! OTLP requests as rows of the `spans` and `logs` tables. Ingest's direct path and the
//! writer both call these, so a span or log gets the same row, and the same identity,
//! whichever path stored it.

use super::{
    any_value_text, attribute_arrays, hex_id, service_name, structured_body, typed_list, value_type,
    ExportLogsServiceRequest, ExportTraceServiceRequest,
};
use crate::identity;
use crate::model::{LogRow, SpanRow};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};

pub fn span_rows(request: &ExportTraceServiceRequest, ingest_ns: u64) -> Vec<SpanRow> {
    let mut rows = Vec::new();
    for rs in &request.resource_spans {
        let service = service_name(rs.resource.as_ref());
        let (resource_keys, resource_values, resource_types) =
            attribute_arrays(rs.resource.as_ref().map_or(&[][..], |r| &r.attributes));
        for ss in &rs.scope_spans {
            let scope = ScopeColumns::of(ss.scope.as_ref());
            for span in &ss.spans {
                let (attr_keys, attr_values, attr_types) = attribute_arrays(&span.attributes);
                let status = span.status.as_ref();
                let events = EventColumns::of(&span.events);
                let links = LinkColumns::of(&span.links);
                rows.push(SpanRow {
                    trace_id: hex_id(&span.trace_id),
                    span_id: hex_id(&span.span_id),
                    parent_span_id: hex_id(&span.parent_span_id),
                    service: service.to_string(),
                    name: span.name.clone(),
                    kind: u8::try_from(span.kind).unwrap_or(0),
                    start_ns: span.start_time_unix_nano,
                    end_ns: span.end_time_unix_nano,
                    duration_ns: span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano),
                    status_code: status.map_or(0, |s| u8::try_from(s.code).unwrap_or(0)),
                    status_message: status.map_or(String::new(), |s| s.message.clone()),
                    attr_keys,
                    attr_values,
                    resource_keys: resource_keys.clone(),
                    resource_values: resource_values.clone(),
                    scope_name: scope.name.clone(),
                    event_count: span.events.len() as u32,
                    link_count: span.links.len() as u32,
                    ingest_ns,
                    trace_state: span.trace_state.clone(),
                    flags: span.flags,
                    dropped_attributes_count: span.dropped_attributes_count,
                    dropped_events_count: span.dropped_events_count,
                    dropped_links_count: span.dropped_links_count,
                    attr_types,
                    resource_types: resource_types.clone(),
                    resource_schema_url: rs.schema_url.clone(),
                    scope_version: scope.version.clone(),
                    scope_attributes: scope.attributes.clone(),
                    scope_schema_url: ss.schema_url.clone(),
                    event_time_ns: events.time_ns,
                    event_names: events.names,
                    event_attributes: events.attributes,
                    event_dropped_attributes: events.dropped_attributes,
                    link_trace_ids: links.trace_ids,
                    link_span_ids: links.span_ids,
                    link_trace_states: links.trace_states,
                    link_attributes: links.attributes,
                    link_flags: links.flags,
                    link_dropped_attributes: links.dropped_attributes,
                });
            }
        }
    }
    rows
}

/// A scope as the rows keep it: name, version, attributes (OTLP/JSON).
#[derive(Debug, Default)]
pub struct ScopeColumns {
    pub name: String,
    pub version: String,
    pub attributes: String,
}

impl ScopeColumns {
    pub fn of(scope: Option<&InstrumentationScope>) -> ScopeColumns {
        scope.map_or_else(ScopeColumns::default, |s| ScopeColumns {
            name: s.name.clone(),
            version: s.version.clone(),
            attributes: typed_list(&s.attributes),
        })
    }
}

/// A span's events as the parallel `event_*` columns.
#[derive(Debug, Default)]
pub struct EventColumns {
    pub time_ns: Vec<u64>,
    pub names: Vec<String>,
    pub attributes: Vec<String>,
    pub dropped_attributes: Vec<u32>,
}

impl EventColumns {
    pub fn of(events: &[Event]) -> EventColumns {
        let mut columns = EventColumns::default();
        for event in events {
            columns.push(event);
        }
        columns
    }

    pub fn push(&mut self, event: &Event) {
        self.time_ns.push(event.time_unix_nano);
        self.names.push(event.name.clone());
        self.attributes.push(typed_list(&event.attributes));
        self.dropped_attributes.push(event.dropped_attributes_count);
    }
}

/// A span's links as the parallel `link_*` columns.
#[derive(Debug, Default)]
pub struct LinkColumns {
    pub trace_ids: Vec<String>,
    pub span_ids: Vec<String>,
    pub trace_states: Vec<String>,
    pub attributes: Vec<String>,
    pub flags: Vec<u32>,
    pub dropped_attributes: Vec<u32>,
}

impl LinkColumns {
    pub fn of(links: &[Link]) -> LinkColumns {
        let mut columns = LinkColumns::default();
        for link in links {
            columns.push(link);
        }
        columns
    }

    pub fn push(&mut self, link: &Link) {
        self.trace_ids.push(hex_id(&link.trace_id));
        self.span_ids.push(hex_id(&link.span_id));
        self.trace_states.push(link.trace_state.clone());
        self.attributes.push(typed_list(&link.attributes));
        self.flags.push(link.flags);
        self.dropped_attributes.push(link.dropped_attributes_count);
    }
}

pub fn log_rows(request: &ExportLogsServiceRequest, ingest_ns: u64) -> Vec<LogRow> {
    let mut rows = Vec::new();
    for rl in &request.resource_logs {
        let service = service_name(rl.resource.as_ref());
        let (resource_keys, resource_values, resource_types) =
            attribute_arrays(rl.resource.as_ref().map_or(&[][..], |r| &r.attributes));
        for sl in &rl.scope_logs {
            let scope = ScopeColumns::of(sl.scope.as_ref());
            for log in &sl.log_records {
                let (attr_keys, attr_values, attr_types) = attribute_arrays(&log.attributes);
                let mut row = LogRow {
                    log_id: 0,
                    service: service.to_string(),
                    time_ns: event_time_ns(log.time_unix_nano, log.observed_time_unix_nano),
                    observed_ns: log.observed_time_unix_nano,
                    severity_number: u8::try_from(log.severity_number).unwrap_or(0),
                    severity_text: log.severity_text.clone(),
                    body: any_value_text(log.body.as_ref()),
                    trace_id: hex_id(&log.trace_id),
                    span_id: hex_id(&log.span_id),
                    attr_keys,
                    attr_values,
                    resource_keys: resource_keys.clone(),
                    resource_values: resource_values.clone(),
                    scope_name: scope.name.clone(),
                    ingest_ns,
                    event_name: log.event_name.clone(),
                    flags: log.flags,
                    dropped_attributes_count: log.dropped_attributes_count,
                    attr_types,
                    resource_types: resource_types.clone(),
                    body_type: value_type(log.body.as_ref()),
                    body_value: structured_body(log.body.as_ref()),
                    resource_schema_url: rl.schema_url.clone(),
                    scope_version: scope.version.clone(),
                    scope_attributes: scope.attributes.clone(),
                    scope_schema_url: sl.schema_url.clone(),
                };
                row.log_id = identity::log_id(&row.content());
                rows.push(row);
            }
        }
    }
    rows
}

/// When the event happened: its own time, or when it was observed if it has none (OTLP
/// allows either to be 0).
pub fn event_time_ns(time_unix_nano: u64, observed_time_unix_nano: u64) -> u64 {
    if time_unix_nano != 0 {
        time_unix_nano
    } else {
        observed_time_unix_nano
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;

    fn kv(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
    }

    fn request(body: &str, attrs: Vec<KeyValue>) -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", any_value::Value::StringValue("api".into()))],
                    ..Default::default()
                }),
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord {
                        time_unix_nano: 0,
                        observed_time_unix_nano: 42,
                        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.into())) }),
                        attributes: attrs,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn the_log_id_ignores_when_and_how_a_log_was_ingested() {
        let a = log_rows(&request("disk full", vec![]), 1);
        let b = log_rows(&request("disk full", vec![]), 2);
        assert_eq!(a[0].log_id, b[0].log_id);
        assert_eq!(a[0].time_ns, 42, "falls back to the observed time");
        assert_ne!(a[0].log_id, log_rows(&request("disk fine", vec![]), 1)[0].log_id);
    }

    #[test]
    fn a_span_keeps_its_events_links_and_typed_values() {
        use crate::model::attributes::{attribute_list, typed_attributes};
        use crate::otlp::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::{ArrayValue, InstrumentationScope};
        use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span};
        let exception = span::Event {
            time_unix_nano: 5,
            name: "exception".into(),
            attributes: vec![
                kv("exception.type", any_value::Value::StringValue("Error".into())),
                kv("exception.message", any_value::Value::StringValue("card declined".into())),
                kv("retries", any_value::Value::IntValue(3)),
            ],
            dropped_attributes_count: 1,
        };
        let link = span::Link {
            trace_id: vec![0xab; 16],
            span_id: vec![0xcd; 8],
            trace_state: "v=1".into(),
            attributes: vec![kv("why", any_value::Value::StringValue("batch".into()))],
            dropped_attributes_count: 0,
            flags: 0x301,
        };
        let list = any_value::Value::ArrayValue(ArrayValue {
            values: vec![AnyValue { value: Some(any_value::Value::DoubleValue(1.5)) }],
        });
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                schema_url: "r".into(),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "lib".into(),
                        version: "2.0".into(),
                        attributes: vec![kv("a", any_value::Value::BoolValue(true))],
                        dropped_attributes_count: 0,
                    }),
                    spans: vec![Span {
                        trace_state: "t=1".into(),
                        flags: 1,
                        attributes: vec![kv("n", any_value::Value::IntValue(-7)), kv("l", list)],
                        events: vec![exception],
                        dropped_events_count: 2,
                        links: vec![link],
                        ..Default::default()
                    }],
                    schema_url: "s".into(),
                }],
                ..Default::default()
            }],
        };
        let row = &span_rows(&request, 0)[0];
        assert_eq!((row.trace_state.as_str(), row.flags, row.dropped_events_count), ("t=1", 1, 2));
        assert_eq!((row.scope_name.as_str(), row.scope_version.as_str()), ("lib", "2.0"));
        assert_eq!((row.resource_schema_url.as_str(), row.scope_schema_url.as_str()), ("r", "s"));
        assert_eq!(serde_json::Value::Object(attribute_list(&row.scope_attributes)), serde_json::json!({"a": true}));
        assert_eq!(
            serde_json::Value::Object(typed_attributes(&row.attr_keys, &row.attr_values, &row.attr_types)),
            serde_json::json!({"n": -7, "l": [1.5]}),
            "a number reads back as a number, an array as the same JSON"
        );
        assert_eq!(
            (row.event_count, row.event_names.clone(), row.event_time_ns.clone()),
            (1, vec!["exception".into()], vec![5])
        );
        assert_eq!(
            serde_json::Value::Object(attribute_list(&row.event_attributes[0])),
            serde_json::json!({"exception.type": "Error", "exception.message": "card declined", "retries": 3})
        );
        assert_eq!(row.event_dropped_attributes, vec![1]);
        assert_eq!(row.link_trace_ids, vec!["ab".repeat(16)]);
        assert_eq!(row.link_span_ids, vec!["cd".repeat(8)]);
        assert_eq!((row.link_trace_states.clone(), row.link_flags.clone()), (vec!["v=1".into()], vec![0x301]));
        assert_eq!(
            serde_json::Value::Object(attribute_list(&row.link_attributes[0])),
            serde_json::json!({"why": "batch"})
        );
    }

    #[test]
    fn a_structured_body_is_kept_whole_beside_the_text_the_miner_reads() {
        use opentelemetry_proto::tonic::common::v1::KeyValueList;
        let mut req = request("", vec![]);
        let map = any_value::Value::KvlistValue(KeyValueList {
            values: vec![kv("z", any_value::Value::BytesValue(vec![1, 2])), kv("a", any_value::Value::IntValue(1))],
        });
        req.resource_logs[0].scope_logs[0].log_records[0].body = Some(AnyValue { value: Some(map) });
        req.resource_logs[0].scope_logs[0].log_records[0].event_name = "order.placed".into();
        let row = &log_rows(&req, 0)[0];
        assert_eq!(row.body, r#"{"a":1,"z":"0102"}"#, "the text: JSON, keys sorted, bytes as hex");
        assert_eq!(row.body_type, crate::model::attributes::value_type::MAP);
        assert_eq!(
            row.body_value,
            r#"{"kvlistValue":{"values":[{"key":"z","value":{"bytesValue":"AQI="}},{"key":"a","value":{"intValue":1}}]}}"#,
            "the value: in order, typed"
        );
        assert_eq!(row.event_name, "order.placed");
        let plain = log_rows(&request("just text", vec![]), 0);
        assert_eq!(
            (plain[0].body_type, plain[0].body_value.as_str()),
            (crate::model::attributes::value_type::STRING, "")
        );
    }

    #[test]
    fn attribute_order_does_not_change_the_log_id() {
        let x = kv("a", any_value::Value::IntValue(1));
        let y = kv("b", any_value::Value::BoolValue(true));
        let one = log_rows(&request("m", vec![x.clone(), y.clone()]), 0);
        let two = log_rows(&request("m", vec![y, x]), 0);
        assert_eq!(one[0].log_id, two[0].log_id);
        assert_eq!(one[0].attr_values, vec!["1", "true"]);
    }
}
