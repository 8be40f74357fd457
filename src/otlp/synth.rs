//! Synthetic OTLP traffic for `tayga loadgen`, the demo and the benchmarks: traces whose
//! spans form a call tree across services, and logs drawn from a few templates with
//! variable parts, so that mining has something to find. Deterministic for a seed.

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::Event;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};

use super::{string_attr, ExportLogsServiceRequest, ExportTraceServiceRequest};

/// The shape of generated requests.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub services: usize,
    pub traces_per_request: usize,
    pub spans_per_trace: usize,
    pub logs_per_request: usize,
    /// Every this many spans, one records an exception as SDKs do (an `exception` event
    /// with its type, message and a stack trace, and an error status); 0: none.
    pub exception_every: usize,
}

const OPERATIONS: &[&str] =
    &["GET /cart", "POST /checkout", "SELECT orders", "charge card", "GET /product/{id}", "publish event"];
const LOG_TEMPLATES: &[&str] = &[
    "user {n} logged in from 10.0.{a}.{b}",
    "payment failed for order {n}: card declined",
    "cache miss for key product:{n}",
    "request to /api/items/{n} took {a} ms",
    "connection pool exhausted, {a} waiting",
];

/// A small xorshift generator: fast, seedable, and enough for synthetic data.
pub struct Synth {
    state: u64,
    shape: Shape,
    service_names: Vec<String>,
    spans_made: usize,
}

impl Synth {
    pub fn new(shape: Shape, seed: u64) -> Synth {
        let services = shape.services.max(1);
        let service_names = (0..services).map(|i| format!("svc-{i}")).collect();
        Synth { state: seed.max(1), shape, service_names, spans_made: 0 }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn resource(&self, service: &str) -> Option<Resource> {
        Some(Resource {
            attributes: vec![string_attr("service.name", service), string_attr("host.name", "loadgen")],
            ..Default::default()
        })
    }

    /// One traces request: `traces_per_request` traces of `spans_per_trace` spans, each span
    /// in the service of its depth, grouped per service as SDKs send them.
    pub fn traces(&mut self, now_ns: u64) -> ExportTraceServiceRequest {
        let mut per_service: Vec<Vec<Span>> = vec![Vec::new(); self.service_names.len()];
        for _ in 0..self.shape.traces_per_request {
            let trace_id: Vec<u8> = [self.next().to_be_bytes(), self.next().to_be_bytes()].concat();
            let mut span_ids: Vec<Vec<u8>> = Vec::new();
            for i in 0..self.shape.spans_per_trace.max(1) {
                let span_id = self.next().to_be_bytes().to_vec();
                // A tree: span i's parent is one of the spans before it.
                let parent = if i == 0 { Vec::new() } else { span_ids[(self.next() as usize) % i].clone() };
                let service = i % self.service_names.len();
                let duration = 1_000_000 + self.next() % 50_000_000;
                self.spans_made += 1;
                let every = self.shape.exception_every;
                let exception = every > 0 && self.spans_made.is_multiple_of(every);
                let error = self.next().is_multiple_of(100) || exception;
                let events =
                    if exception { vec![exception_event(now_ns + duration / 2, self.next())] } else { Vec::new() };
                per_service[service].push(Span {
                    trace_id: trace_id.clone(),
                    span_id: span_id.clone(),
                    parent_span_id: parent,
                    name: OPERATIONS[i % OPERATIONS.len()].to_string(),
                    kind: 2,
                    start_time_unix_nano: now_ns,
                    end_time_unix_nano: now_ns + duration,
                    attributes: vec![string_attr("http.route", "/cart"), int_attr("retry", (self.next() % 3) as i64)],
                    status: error
                        .then(|| Status { code: status::StatusCode::Error as i32, message: "upstream failed".into() }),
                    events,
                    ..Default::default()
                });
                span_ids.push(span_id);
            }
        }
        ExportTraceServiceRequest {
            resource_spans: per_service
                .into_iter()
                .enumerate()
                .filter(|(_, spans)| !spans.is_empty())
                .map(|(i, spans)| ResourceSpans {
                    resource: self.resource(&self.service_names[i]),
                    scope_spans: vec![ScopeSpans { scope: Some(scope()), spans, ..Default::default() }],
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// One logs request: `logs_per_request` logs spread over the services.
    pub fn logs(&mut self, now_ns: u64) -> ExportLogsServiceRequest {
        let mut per_service: Vec<Vec<LogRecord>> = vec![Vec::new(); self.service_names.len()];
        for i in 0..self.shape.logs_per_request {
            let template = LOG_TEMPLATES[(self.next() as usize) % LOG_TEMPLATES.len()];
            let body = template
                .replace("{n}", &(self.next() % 100_000).to_string())
                .replace("{a}", &(self.next() % 256).to_string())
                .replace("{b}", &(self.next() % 256).to_string());
            let trace_id = [self.next().to_be_bytes(), self.next().to_be_bytes()].concat();
            per_service[i % self.service_names.len()].push(LogRecord {
                time_unix_nano: now_ns + i as u64,
                observed_time_unix_nano: now_ns + i as u64,
                severity_number: 9,
                severity_text: "INFO".into(),
                body: Some(AnyValue { value: Some(any_value::Value::StringValue(body)) }),
                trace_id,
                span_id: self.next().to_be_bytes().to_vec(),
                ..Default::default()
            });
        }
        ExportLogsServiceRequest {
            resource_logs: per_service
                .into_iter()
                .enumerate()
                .filter(|(_, logs)| !logs.is_empty())
                .map(|(i, log_records)| ResourceLogs {
                    resource: self.resource(&self.service_names[i]),
                    scope_logs: vec![ScopeLogs { scope: Some(scope()), log_records, ..Default::default() }],
                    ..Default::default()
                })
                .collect(),
        }
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "tayga-loadgen".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

/// An exception as the OpenTelemetry SDKs record it: an `exception` event with the
/// semantic conventions' attributes, a stack trace of a dozen frames.
fn exception_event(time_ns: u64, n: u64) -> Event {
    let frames: Vec<String> = (0..12)
        .map(|f| format!("    at handler{f} (/srv/app/src/checkout/step{f}.js:{}:{})", 10 + f, n % 80))
        .collect();
    Event {
        time_unix_nano: time_ns,
        name: "exception".into(),
        attributes: vec![
            string_attr("exception.type", "UpstreamTimeoutError"),
            string_attr(
                "exception.message",
                &format!("payment provider did not answer within 3000 ms (order {})", n % 100_000),
            ),
            string_attr(
                "exception.stacktrace",
                &format!("UpstreamTimeoutError: payment provider timed out\n{}", frames.join("\n")),
            ),
        ],
        dropped_attributes_count: 0,
    }
}

fn int_attr(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(value)) }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_the_asked_shape() {
        let shape =
            Shape { services: 3, traces_per_request: 10, spans_per_trace: 10, logs_per_request: 7, exception_every: 5 };
        let mut synth = Synth::new(shape, 42);
        let traces = synth.traces(1);
        let spans: Vec<&Span> = traces.resource_spans.iter().flat_map(|r| &r.scope_spans[0].spans).collect();
        assert_eq!(spans.len(), 100);
        let exceptions = spans.iter().filter(|s| s.events.iter().any(|e| e.name == "exception")).count();
        assert_eq!(exceptions, 20, "every fifth span records an exception");
        assert_eq!(traces.resource_spans.len(), 3);
        let logs = synth.logs(1);
        assert_eq!(logs.resource_logs.iter().map(|r| r.scope_logs[0].log_records.len()).sum::<usize>(), 7);
    }
}
