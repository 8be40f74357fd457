//! The built-in scenario of `tayga up --demo`, pure: what four services (frontend →
//! checkout → payment → database) send in each second of scenario time. docs/demo.md tells
//! the story; this file is its script.
//!
//! Scenario time starts `history_secs` before the command started: that steady history is
//! sent at once (backdated, as a late agent would), so the detection rules have the
//! baseline minutes they judge by, then every second is sent when it is due. The logminer
//! judges by data time (the newest log time it read), so the history counts like live
//! traffic. Its events:
//!
//! - **silence**: checkout's `inventory reserved for order …` stops `silence_before_secs`
//!   before the start while checkout keeps logging;
//! - at `incident_after_secs` after the start, three things at once: payment logs a new
//!   error shape (`charge declined by acme-pay: …`, a new template, and error spans);
//!   frontend's `cache miss for key product:…` bursts for `burst_secs` (a spike); and every
//!   other checkout waits on a row lock in the database for about a second (slow, and a
//!   new call edge: a new story shape).

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status, ResourceSpans, ScopeSpans, Span, Status};

use crate::otlp::{service_resource, string_attr, ExportLogsServiceRequest, ExportTraceServiceRequest};
use crate::time::SECOND_NS;

/// The services, in call order.
pub const SERVICES: [&str; 4] = ["frontend", "checkout", "payment", "database"];
const FRONTEND: usize = 0;
const CHECKOUT: usize = 1;
const PAYMENT: usize = 2;
const DATABASE: usize = 3;

/// When things happen, in seconds of scenario time (0 = `history_secs` before the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// Steady traffic sent at start, backdated.
    pub history_secs: u64,
    /// The silent template's last log, this long before the start.
    pub silence_before_secs: u64,
    /// The error, the burst and the slow path begin this long after the start (at the next
    /// minute boundary, once [`Timeline::aligned`]).
    pub incident_after_secs: u64,
    /// How long the burst lasts.
    pub burst_secs: u64,
}

impl Default for Timeline {
    /// Tuned to the demo's detection settings (`shortcuts` in `demo/mod.rs`): 4 minutes of
    /// history hold the 3 baseline minutes of the spike rule and the 2 active minutes of
    /// the silence rule; a template last seen 75 s before the start is silent for a whole
    /// minute at most 45 s after it; the incident starts 10 to 70 s after the start.
    fn default() -> Timeline {
        Timeline { history_secs: 240, silence_before_secs: 75, incident_after_secs: 10, burst_secs: 15 }
    }
}

/// What a second of scenario time is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// Still part of the backdated history.
    pub history: bool,
    /// The inventory template has stopped.
    pub silent: bool,
    /// Errors and the slow path are on.
    pub incident: bool,
    /// The cache-miss burst is on.
    pub burst: bool,
}

impl Timeline {
    /// This timeline for a run that starts at `start_ns`, and its origin (scenario time 0),
    /// both on minute boundaries: the history grows (by less than a minute) so that its
    /// first minute is whole, and the incident waits for the next minute, so that the new
    /// templates' first minute is whole too. The spike rule judges whole minutes against
    /// the minutes before: a template's partial first minute would make its first whole one
    /// look like a spike.
    pub fn aligned(&self, start_ns: u64) -> (Timeline, u64) {
        let start = start_ns / SECOND_NS;
        let origin = (start - self.history_secs) / 60 * 60;
        let incident = (start + self.incident_after_secs).div_ceil(60) * 60;
        let timeline = Timeline { history_secs: start - origin, incident_after_secs: incident - start, ..*self };
        (timeline, origin * SECOND_NS)
    }

    pub fn phase(&self, t: u64) -> Phase {
        let start = self.history_secs;
        let incident = start + self.incident_after_secs;
        Phase {
            history: t < start,
            silent: t + self.silence_before_secs >= start,
            incident: t >= incident,
            burst: t >= incident && t < incident + self.burst_secs,
        }
    }

    /// What an operator is told, and when (scenario seconds), in order.
    pub fn milestones(&self) -> Vec<(u64, String)> {
        let start = self.history_secs;
        let incident = start + self.incident_after_secs;
        vec![
            (
                start,
                format!(
                    "sent {} s of steady history (backdated); checkout's `inventory reserved` logs stopped {} s ago \
                     while checkout keeps logging (silence)",
                    self.history_secs, self.silence_before_secs
                ),
            ),
            (
                incident,
                "payment starts failing with a new error (new_template), frontend's cache misses burst (spike), \
                 and every other checkout waits on a row lock (a new, slow story shape)"
                    .into(),
            ),
            (incident + self.burst_secs, "the cache-miss burst is over; the rest goes on until Ctrl-C".into()),
        ]
    }
}

/// One second of traffic: a traces request and a logs request, with their sizes.
#[derive(Debug, Clone, Default)]
pub struct Second {
    pub traces: ExportTraceServiceRequest,
    pub logs: ExportLogsServiceRequest,
    pub spans: usize,
    pub log_records: usize,
}

/// The scenario's state: a seeded generator and the order counter.
pub struct Scenario {
    pub timeline: Timeline,
    state: u64,
    order: u64,
}

/// Checkouts and product views per second.
const CHECKOUTS_PER_SEC: u64 = 2;
const VIEWS_PER_SEC: u64 = 2;
/// Cache misses per second during the burst (steady: one view in two misses).
const BURST_MISSES_PER_SEC: u64 = 60;
const MS: u64 = 1_000_000;

impl Scenario {
    pub fn new(timeline: Timeline, seed: u64) -> Scenario {
        Scenario { timeline, state: seed.max(1), order: 10_000 }
    }

    fn next(&mut self) -> u64 {
        // xorshift64: seeded and reproducible.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// `lo..=hi` milliseconds, in nanoseconds.
    fn ms(&mut self, lo: u64, hi: u64) -> u64 {
        (lo + self.next() % (hi - lo + 1)) * MS
    }

    fn id(&mut self, bytes: usize) -> Vec<u8> {
        let mut id: Vec<u8> = [self.next().to_be_bytes(), self.next().to_be_bytes()].concat();
        id.truncate(bytes);
        id
    }

    /// The traffic of scenario second `t`, which starts at `start_ns`.
    pub fn second(&mut self, t: u64, start_ns: u64) -> Second {
        let phase = self.timeline.phase(t);
        let mut out = Batch::default();
        let slots = CHECKOUTS_PER_SEC + VIEWS_PER_SEC;
        for slot in 0..slots {
            let at = start_ns + slot * (1_000_000_000 / slots) + self.ms(0, 40);
            if slot % 2 == 0 {
                let n = slot / 2;
                self.checkout(&mut out, at, phase, n);
            } else {
                self.view(&mut out, at, phase, slot / 2 == 0);
            }
        }
        if phase.burst {
            for i in 0..BURST_MISSES_PER_SEC {
                let at = start_ns + i * (1_000_000_000 / BURST_MISSES_PER_SEC);
                let key = self.next() % 5000;
                out.log(FRONTEND, &[], &[], at, 9, format!("cache miss for key product:{key}"));
            }
        }
        let (active, idle) = (1 + self.next() % 8, 2 + self.next() % 10);
        out.log(DATABASE, &[], &[], start_ns + 500 * MS, 9, format!("pool stats: {active} active, {idle} idle"));
        out.finish()
    }

    /// frontend `POST /checkout` → checkout `place order` → database `SELECT cart`, then
    /// payment `charge card` → payment's call to the provider → database `INSERT payment`.
    /// During the incident, every third charge is declined (an error) and every other one
    /// waits on a row lock first (a new edge: payment → database `lock payment row`).
    fn checkout(&mut self, out: &mut Batch, at: u64, phase: Phase, n: u64) {
        self.order += 1;
        let order = self.order;
        let trace = self.id(16);
        let declined = phase.incident && order.is_multiple_of(3);
        let locked = phase.incident && n == 0;
        let (root, place, charge) = (self.id(8), self.id(8), self.id(8));

        let place_start = at + self.ms(1, 3);
        let cart_start = place_start + self.ms(1, 2);
        let cart_end = cart_start + self.ms(2, 6);
        out.span(DATABASE, &trace, &place, "SELECT cart", cart_start, cart_end, SpanKind::Client, None);

        let charge_start = cart_end + self.ms(1, 2);
        let mut cursor = charge_start + self.ms(1, 2);
        if locked {
            let waited = self.ms(800, 1400);
            out.span(DATABASE, &trace, &charge, "lock payment row", cursor, cursor + waited, SpanKind::Client, None);
            out.log(
                PAYMENT,
                &trace,
                &charge,
                cursor + waited,
                13,
                format!("payment row locked, waited {} ms", waited / MS),
            );
            cursor += waited + self.ms(1, 2);
        }
        let provider = self.id(8);
        let call = self.ms(25, 70);
        let failure = declined.then_some("gateway timeout");
        out.span_with_id(
            PAYMENT,
            &trace,
            &charge,
            &provider,
            "POST acme-pay /charges",
            cursor,
            cursor + call,
            SpanKind::Client,
            failure,
        );
        cursor += call;
        let charge_end = if declined {
            out.log(
                PAYMENT,
                &trace,
                &charge,
                cursor,
                17,
                format!("charge declined by acme-pay: gateway timeout after {} ms (order {order})", call / MS),
            );
            cursor + self.ms(1, 2)
        } else {
            let insert_start = cursor + self.ms(1, 2);
            let insert_end = insert_start + self.ms(3, 8);
            out.span(DATABASE, &trace, &charge, "INSERT payment", insert_start, insert_end, SpanKind::Client, None);
            out.log(
                PAYMENT,
                &trace,
                &charge,
                insert_end,
                9,
                format!("card authorised for order {order} in {} ms", (insert_end - charge_start) / MS),
            );
            insert_end + self.ms(1, 2)
        };
        out.span_with_id(
            PAYMENT,
            &trace,
            &place,
            &charge,
            "charge card",
            charge_start,
            charge_end,
            SpanKind::Server,
            failure,
        );

        let place_end = charge_end + self.ms(1, 3);
        let items = 1 + self.next() % 5;
        out.log(CHECKOUT, &trace, &place, place_end, 9, format!("order {order} placed with {items} items"));
        if !phase.silent {
            out.log(CHECKOUT, &trace, &place, place_end, 9, format!("inventory reserved for order {order}"));
        }
        out.span_with_id(
            CHECKOUT,
            &trace,
            &root,
            &place,
            "place order",
            place_start,
            place_end,
            SpanKind::Server,
            failure,
        );

        let end = place_end + self.ms(1, 3);
        let status = if declined { 502 } else { 200 };
        out.log(FRONTEND, &trace, &root, end, 9, format!("POST /checkout answered {status} in {} ms", (end - at) / MS));
        out.span_with_id(FRONTEND, &trace, &[], &root, "POST /checkout", at, end, SpanKind::Server, failure);
    }

    /// frontend `GET /product/{id}` → database `SELECT product`; one view in two misses
    /// the cache (`miss`).
    fn view(&mut self, out: &mut Batch, at: u64, _phase: Phase, miss: bool) {
        let trace = self.id(16);
        let root = self.id(8);
        let product = self.next() % 5000;
        let select_start = at + self.ms(1, 2);
        let select_end = select_start + self.ms(1, 4);
        if miss {
            out.log(FRONTEND, &trace, &root, select_start, 9, format!("cache miss for key product:{product}"));
        }
        out.span(DATABASE, &trace, &root, "SELECT product", select_start, select_end, SpanKind::Client, None);
        let end = select_end + self.ms(1, 3);
        out.span_with_id(FRONTEND, &trace, &[], &root, "GET /product/{id}", at, end, SpanKind::Server, None);
    }
}

/// Spans and logs per service, as SDKs group them.
#[derive(Default)]
struct Batch {
    spans: [Vec<Span>; 4],
    logs: [Vec<LogRecord>; 4],
    next_span: u64,
}

impl Batch {
    #[allow(clippy::too_many_arguments)]
    fn span(
        &mut self,
        service: usize,
        trace: &[u8],
        parent: &[u8],
        name: &str,
        start: u64,
        end: u64,
        kind: SpanKind,
        error: Option<&str>,
    ) {
        self.next_span += 1;
        let mut id = trace[..8].to_vec();
        id.iter_mut().zip(self.next_span.to_be_bytes()).for_each(|(b, n)| *b ^= n ^ 0x5a);
        self.span_with_id(service, trace, parent, &id, name, start, end, kind, error);
    }

    #[allow(clippy::too_many_arguments)]
    fn span_with_id(
        &mut self,
        service: usize,
        trace: &[u8],
        parent: &[u8],
        id: &[u8],
        name: &str,
        start: u64,
        end: u64,
        kind: SpanKind,
        error: Option<&str>,
    ) {
        self.spans[service].push(Span {
            trace_id: trace.to_vec(),
            span_id: id.to_vec(),
            parent_span_id: parent.to_vec(),
            name: name.to_string(),
            kind: kind as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            status: error.map(|message| Status { code: status::StatusCode::Error as i32, message: message.into() }),
            ..Default::default()
        });
    }

    fn log(&mut self, service: usize, trace: &[u8], span: &[u8], at: u64, severity: i32, body: String) {
        let severity_text = match severity {
            17.. => "ERROR",
            13.. => "WARN",
            _ => "INFO",
        };
        self.logs[service].push(LogRecord {
            time_unix_nano: at,
            observed_time_unix_nano: at,
            severity_number: severity,
            severity_text: severity_text.into(),
            body: Some(AnyValue { value: Some(any_value::Value::StringValue(body)) }),
            trace_id: trace.to_vec(),
            span_id: span.to_vec(),
            ..Default::default()
        });
    }

    fn finish(self) -> Second {
        let spans = self.spans.iter().map(Vec::len).sum();
        let log_records = self.logs.iter().map(Vec::len).sum();
        let resource = |i: usize| {
            let mut r = service_resource(SERVICES[i]);
            r.attributes.push(string_attr("deployment.environment", "demo"));
            Some(r)
        };
        let traces = ExportTraceServiceRequest {
            resource_spans: self
                .spans
                .into_iter()
                .enumerate()
                .filter(|(_, s)| !s.is_empty())
                .map(|(i, spans)| ResourceSpans {
                    resource: resource(i),
                    scope_spans: vec![ScopeSpans { scope: Some(scope()), spans, ..Default::default() }],
                    ..Default::default()
                })
                .collect(),
        };
        let logs = ExportLogsServiceRequest {
            resource_logs: self
                .logs
                .into_iter()
                .enumerate()
                .filter(|(_, l)| !l.is_empty())
                .map(|(i, log_records)| ResourceLogs {
                    resource: resource(i),
                    scope_logs: vec![ScopeLogs { scope: Some(scope()), log_records, ..Default::default() }],
                    ..Default::default()
                })
                .collect(),
        };
        Second { traces, logs, spans, log_records }
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope { name: "tayga-demo".into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    const START: u64 = 1_800_000_000_000_000_000;

    fn run(seconds: std::ops::Range<u64>) -> Vec<(u64, Second)> {
        let mut s = Scenario::new(Timeline::default(), 7);
        seconds.map(|t| (t, s.second(t, START + t * 1_000_000_000))).collect()
    }

    fn bodies(second: &Second, service: &str) -> Vec<String> {
        second
            .logs
            .resource_logs
            .iter()
            .filter(|r| crate::otlp::service_name(r.resource.as_ref()) == service)
            .flat_map(|r| r.scope_logs[0].log_records.iter())
            .map(|l| crate::otlp::any_value_text(l.body.as_ref()))
            .collect()
    }

    fn spans(second: &Second) -> Vec<(String, Span)> {
        second
            .traces
            .resource_spans
            .iter()
            .flat_map(|r| {
                let service = crate::otlp::service_name(r.resource.as_ref()).to_string();
                r.scope_spans[0].spans.iter().map(move |s| (service.clone(), s.clone()))
            })
            .collect()
    }

    #[test]
    fn children_start_after_and_end_before_their_parents() {
        for (_, second) in run(230..280) {
            let all = spans(&second);
            let by_id: HashMap<&[u8], &Span> = all.iter().map(|(_, s)| (s.span_id.as_slice(), s)).collect();
            assert_eq!(by_id.len(), all.len(), "span ids are unique");
            for (_, span) in &all {
                assert!(span.end_time_unix_nano > span.start_time_unix_nano, "{} has a real duration", span.name);
                if span.parent_span_id.is_empty() {
                    continue;
                }
                let parent = by_id[span.parent_span_id.as_slice()];
                assert_eq!(parent.trace_id, span.trace_id);
                assert!(
                    span.start_time_unix_nano > parent.start_time_unix_nano
                        && span.end_time_unix_nano < parent.end_time_unix_nano,
                    "{} lies inside {}",
                    span.name,
                    parent.name
                );
            }
        }
    }

    #[test]
    fn the_inventory_template_stops_while_checkout_keeps_logging() {
        let t = Timeline::default();
        let last_steady = t.history_secs - t.silence_before_secs - 1;
        for (second_t, second) in run(last_steady - 2..t.history_secs + 5) {
            let checkout = bodies(&second, "checkout");
            let inventory = checkout.iter().filter(|b| b.starts_with("inventory reserved")).count();
            assert!(checkout.iter().any(|b| b.contains("placed with")), "checkout keeps logging at {second_t}");
            assert_eq!(inventory > 0, second_t <= last_steady, "inventory logs at {second_t}");
        }
    }

    #[test]
    fn the_incident_brings_a_new_error_a_burst_and_a_slow_new_edge() {
        let t = Timeline::default();
        let incident = t.history_secs + t.incident_after_secs;
        let seconds = run(incident - 20..incident + t.burst_secs + 5);
        let mut misses = BTreeMap::new();
        for (second_t, second) in &seconds {
            let payment = bodies(second, "payment");
            let errors = payment.iter().filter(|b| b.starts_with("charge declined by acme-pay")).count();
            let all = spans(second);
            let locks: Vec<&Span> = all.iter().map(|(_, s)| s).filter(|s| s.name == "lock payment row").collect();
            if *second_t < incident {
                assert_eq!((errors, locks.len()), (0, 0), "quiet before the incident ({second_t})");
            } else {
                assert!(locks.iter().all(|s| s.end_time_unix_nano - s.start_time_unix_nano >= 800 * MS));
                assert_eq!(locks.len(), 1, "one slow checkout a second ({second_t})");
                // The checkout waited on the lock: it is on the trace's critical path, which
                // the shape diff's waterfalls mark.
                let trace: Vec<&Span> =
                    all.iter().map(|(_, s)| s).filter(|s| s.trace_id == locks[0].trace_id).collect();
                let ids: Vec<(String, String)> = trace
                    .iter()
                    .map(|s| (crate::otlp::hex_id(&s.span_id), crate::otlp::hex_id(&s.parent_span_id)))
                    .collect();
                let path = crate::otlp::critical::critical_path(trace.len(), |i| {
                    (ids[i].0.as_str(), ids[i].1.as_str(), trace[i].start_time_unix_nano, trace[i].end_time_unix_nano)
                });
                let names: Vec<&str> = path.spans.iter().map(|i| trace[*i].name.as_str()).collect();
                assert_eq!(names[0], "POST /checkout", "{names:?}");
                assert!(names.contains(&"lock payment row"), "{names:?}");
            }
            misses.insert(*second_t, bodies(second, "frontend").iter().filter(|b| b.starts_with("cache miss")).count());
        }
        let errors: usize = seconds[20..]
            .iter()
            .map(|(_, s)| bodies(s, "payment").iter().filter(|b| b.contains("declined")).count())
            .sum();
        assert!(errors >= 10, "the new error repeats: {errors}");
        let steady: usize = (incident - 20..incident).map(|s| misses[&s]).sum();
        let burst: usize = (incident..incident + t.burst_secs).map(|s| misses[&s]).sum();
        assert_eq!(steady, 20, "one miss a second before the burst");
        assert!(burst >= (BURST_MISSES_PER_SEC * t.burst_secs) as usize, "{burst}");
    }

    #[test]
    fn aligned_timelines_start_and_break_on_minutes() {
        for offset in [0, 1, 29, 59] {
            let start_ns = (1_800_000_000 + offset) * SECOND_NS + 123;
            let (t, origin) = Timeline::default().aligned(start_ns);
            assert_eq!(origin % (60 * SECOND_NS), 0);
            assert_eq!(origin + t.history_secs * SECOND_NS, start_ns / SECOND_NS * SECOND_NS);
            assert!((240..300).contains(&t.history_secs), "{t:?}");
            let incident = origin / SECOND_NS + t.history_secs + t.incident_after_secs;
            assert_eq!(incident % 60, 0);
            assert!((10..70).contains(&t.incident_after_secs), "{t:?}");
        }
    }

    #[test]
    fn the_history_holds_the_baseline_minutes_the_demo_rules_need() {
        let t = Timeline::default();
        let rules = crate::demo::rules();
        // Spike: full baseline minutes of cache misses before the burst.
        assert!(t.history_secs + t.incident_after_secs >= (rules.spike_baseline_min + 1) * 60);
        // Silence: active minutes before the gap, and a whole silent minute within 45 s.
        assert!(t.history_secs - t.silence_before_secs >= rules.silence_min_active_minutes * 60);
        assert!(t.silence_before_secs + 45 >= (rules.silence_after_min + 1) * 60);
        // Half the burst in one minute (it may straddle two) still reaches the threshold
        // over the steady 60 misses a minute.
        let half = (BURST_MISSES_PER_SEC * t.burst_secs / 2 + 60) as f64;
        assert!(half >= rules.spike_factor * 60.0 && half >= rules.spike_min_count as f64);
    }
}
