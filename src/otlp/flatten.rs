//! OTLP requests as rows of the `spans` and `logs` tables. Ingest's direct path and the
//! writer both call these, so a span or log gets the same row, and the same identity,
//! whichever path stored it.

use super::{
    any_value_text, attribute_arrays, hex_id, service_name, ExportLogsServiceRequest, ExportTraceServiceRequest,
};
use crate::identity;
use crate::store::{LogRow, SpanRow};

pub fn span_rows(request: &ExportTraceServiceRequest, ingest_ns: u64) -> Vec<SpanRow> {
    let mut rows = Vec::new();
    for rs in &request.resource_spans {
        let service = service_name(rs.resource.as_ref());
        let (resource_keys, resource_values) =
            attribute_arrays(rs.resource.as_ref().map_or(&[][..], |r| &r.attributes));
        for ss in &rs.scope_spans {
            let scope_name = ss.scope.as_ref().map_or("", |s| s.name.as_str());
            for span in &ss.spans {
                let (attr_keys, attr_values) = attribute_arrays(&span.attributes);
                let status = span.status.as_ref();
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
                    scope_name: scope_name.to_string(),
                    event_count: span.events.len() as u32,
                    link_count: span.links.len() as u32,
                    ingest_ns,
                });
            }
        }
    }
    rows
}

pub fn log_rows(request: &ExportLogsServiceRequest, ingest_ns: u64) -> Vec<LogRow> {
    let mut rows = Vec::new();
    for rl in &request.resource_logs {
        let service = service_name(rl.resource.as_ref());
        let (resource_keys, resource_values) =
            attribute_arrays(rl.resource.as_ref().map_or(&[][..], |r| &r.attributes));
        for sl in &rl.scope_logs {
            let scope_name = sl.scope.as_ref().map_or("", |s| s.name.as_str());
            for log in &sl.log_records {
                let (attr_keys, attr_values) = attribute_arrays(&log.attributes);
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
                    scope_name: scope_name.to_string(),
                    ingest_ns,
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
    fn attribute_order_does_not_change_the_log_id() {
        let x = kv("a", any_value::Value::IntValue(1));
        let y = kv("b", any_value::Value::BoolValue(true));
        let one = log_rows(&request("m", vec![x.clone(), y.clone()]), 0);
        let two = log_rows(&request("m", vec![y, x]), 0);
        assert_eq!(one[0].log_id, two[0].log_id);
        assert_eq!(one[0].attr_values, vec!["1", "true"]);
    }
}
