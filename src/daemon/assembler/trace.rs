//! One trace as the assembler holds it, and the story built from it. Pure: no I/O, no clock.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::identity::{span_key, story_fingerprint};
use crate::model::attributes::attribute_list;
use crate::wire::story::{Story, StoryRow, MAX_EXCEPTION_MESSAGE_BYTES, MISSING_ROOT};

/// A call edge: the parent's (service, operation), if in the trace, and the child's.
type Edge<'a> = (Option<(&'a str, &'a str)>, (&'a str, &'a str));

/// OTLP `STATUS_CODE_ERROR`.
pub const STATUS_ERROR: u8 = 2;

/// What a story needs of one span. The assembler holds up to
/// `assembler.max_buffered_spans` of them, so each is kept small: ids as 8-byte keys
/// ([`span_key`]), names shared (the buffer hands every span of a service the same copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanInfo {
    /// The parent's [`span_key`]; None for a root span (no parent id).
    pub parent: Option<u64>,
    pub service: Arc<str>,
    pub operation: Arc<str>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub error: bool,
    /// The span's first exception (boxed: most spans have none, and the assembler holds up
    /// to `assembler.max_buffered_spans` of them).
    pub exception: Option<Box<ExceptionInfo>>,
}

/// An exception recorded on a span: the OpenTelemetry `exception` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionInfo {
    pub time_ns: u64,
    /// `exception.type` and `exception.message` ('' when the event lacks one).
    pub r#type: String,
    pub message: String,
}

/// The name of the span event an exception is recorded as (OpenTelemetry semantic conventions).
pub const EXCEPTION_EVENT: &str = "exception";

impl SpanInfo {
    pub fn from_row(row: &crate::store::SpanRow) -> SpanInfo {
        SpanInfo {
            parent: (!row.parent_span_id.is_empty()).then(|| span_key(&row.parent_span_id)),
            service: Arc::from(row.service.as_str()),
            operation: Arc::from(row.name.as_str()),
            start_ns: row.start_ns,
            end_ns: row.end_ns,
            error: row.status_code == STATUS_ERROR,
            exception: first_exception(row).map(Box::new),
        }
    }
}

/// The earliest `exception` event of a span (ties: the first sent).
fn first_exception(row: &crate::store::SpanRow) -> Option<ExceptionInfo> {
    let (i, _) = row
        .event_names
        .iter()
        .enumerate()
        .filter(|(_, name)| *name == EXCEPTION_EVENT)
        .min_by_key(|(i, _)| row.event_time_ns.get(*i).copied().unwrap_or(0))?;
    let attributes = attribute_list(row.event_attributes.get(i).map_or("", String::as_str));
    let text = |key: &str| match attributes.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Some(ExceptionInfo {
        time_ns: row.event_time_ns.get(i).copied().unwrap_or(0),
        r#type: text("exception.type"),
        message: cut_at_char(text("exception.message"), MAX_EXCEPTION_MESSAGE_BYTES),
    })
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut_at_char(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The content of a trace: its spans by span id's key (so a span read twice counts once)
/// and the ids of its logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContent {
    pub spans: HashMap<u64, SpanInfo>,
    pub log_ids: HashSet<u64>,
    pub truncated: bool,
}

impl TraceContent {
    /// Adds a span; false when it was already there.
    pub fn add_span(&mut self, span_id: u64, span: SpanInfo) -> bool {
        match self.spans.entry(span_id) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(span);
                true
            }
        }
    }

    /// The story of this content, stamped `version_ns`. None for a trace with no span
    /// (only logs carried its id): there is nothing to tell.
    pub fn story(&self, trace_id: &str, version_ns: u64) -> Option<Story> {
        if self.spans.is_empty() {
            return None;
        }
        // Deterministic choices: iterate spans in span-id order.
        let mut ids: Vec<&u64> = self.spans.keys().collect();
        ids.sort();
        let mut root: Option<&SpanInfo> = None;
        let mut start_ns = u64::MAX;
        let mut end_ns = 0;
        let mut services = BTreeSet::new();
        let mut error_spans = 0u32;
        // The first exception: of an error span if any has one, else of any span; earliest
        // first, ties by span id (the iteration order).
        let mut exception: Option<(bool, &ExceptionInfo)> = None;
        let mut edges: Vec<Edge<'_>> = Vec::with_capacity(ids.len());
        for id in ids {
            let span = &self.spans[id];
            start_ns = start_ns.min(span.start_ns);
            end_ns = end_ns.max(span.end_ns.max(span.start_ns));
            services.insert(span.service.to_string());
            if span.error {
                error_spans += 1;
            }
            if let Some(e) = span.exception.as_deref() {
                let better = exception.is_none_or(|(on_error, best)| {
                    (span.error && !on_error) || (span.error == on_error && e.time_ns < best.time_ns)
                });
                if better {
                    exception = Some((span.error, e));
                }
            }
            let child = (&*span.service, &*span.operation);
            let parent = if let Some(parent) = span.parent {
                self.spans.get(&parent).map(|p| (&*p.service, &*p.operation))
            } else {
                // The root: the earliest span without a parent (ties: smallest span id).
                if root.is_none_or(|r| span.start_ns < r.start_ns) {
                    root = Some(span);
                }
                None
            };
            edges.push((parent, child));
        }
        let fingerprint = story_fingerprint(edges.iter().copied());
        let edge_text: BTreeSet<String> = edges
            .iter()
            .map(|(parent, (s, o))| match parent {
                Some((ps, po)) => format!("{ps}/{po} -> {s}/{o}"),
                None => format!("ROOT -> {s}/{o}"),
            })
            .collect();
        // Only an error trace tells its exception: a handled one in a trace that succeeded
        // is not why anything failed.
        let (exception_type, exception_message) = match exception {
            Some((_, e)) if error_spans > 0 => (e.r#type.clone(), e.message.clone()),
            _ => (String::new(), String::new()),
        };
        let (root_service, root_operation) = match root {
            Some(r) => (r.service.to_string(), r.operation.to_string()),
            None => (String::new(), MISSING_ROOT.to_string()),
        };
        Some(Story::current(StoryRow {
            trace_id: trace_id.to_string(),
            fingerprint,
            root_service,
            root_operation,
            start_ns,
            duration_ns: end_ns.saturating_sub(start_ns),
            span_count: u32::try_from(self.spans.len()).unwrap_or(u32::MAX),
            services: services.into_iter().collect(),
            edges: edge_text.into_iter().collect(),
            error: error_spans > 0,
            error_spans,
            log_count: u32::try_from(self.log_ids.len()).unwrap_or(u32::MAX),
            truncated: self.truncated,
            version_ns,
            exception_type,
            exception_message,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn span(parent: &str, service: &str, op: &str, start: u64, end: u64) -> SpanInfo {
        SpanInfo {
            parent: (!parent.is_empty()).then(|| span_key(parent)),
            service: service.into(),
            operation: op.into(),
            start_ns: start,
            end_ns: end,
            error: false,
            exception: None,
        }
    }

    fn content(spans: &[(&str, SpanInfo)]) -> TraceContent {
        let mut c = TraceContent::default();
        for (id, s) in spans {
            c.add_span(span_key(id), s.clone());
        }
        c
    }

    #[test]
    fn same_path_same_fingerprint_whatever_ids_and_timing() {
        let a = content(&[
            ("01", span("", "web", "GET /", 100, 900)),
            ("02", span("01", "web", "auth", 110, 200)),
            ("03", span("01", "db", "query", 210, 800)),
        ]);
        let b = content(&[
            ("aa", span("", "web", "GET /", 5_000, 5_100)),
            ("bb", span("aa", "db", "query", 5_010, 5_020)),
            ("cc", span("aa", "web", "auth", 5_030, 5_090)),
            ("dd", span("aa", "db", "query", 5_040, 5_050)), // a repeated call: same edge set
        ]);
        let sa = a.story("t1", 1).unwrap().row;
        let sb = b.story("t2", 2).unwrap().row;
        assert_eq!(sa.fingerprint, sb.fingerprint);
        assert_eq!(sa.edges, sb.edges);
        assert_eq!(sa.edges, vec!["ROOT -> web/GET /", "web/GET / -> db/query", "web/GET / -> web/auth"]);
        assert_eq!((sa.start_ns, sa.duration_ns, sa.span_count), (100, 800, 3));
        assert_eq!((sa.root_service.as_str(), sa.root_operation.as_str()), ("web", "GET /"));
        assert_eq!(sa.services, vec!["db", "web"]);
        assert!(!sa.error);
        let mut c = b.clone();
        c.add_span(span_key("ee"), span("bb", "cache", "get", 5_011, 5_012));
        assert_ne!(c.story("t3", 3).unwrap().row.fingerprint, sb.fingerprint, "one more edge, another shape");
    }

    #[test]
    fn errors_missing_root_logs_and_duplicates() {
        let mut c = content(&[("02", span("01", "api", "call", 10, 20)), ("03", span("02", "db", "q", 11, 12))]);
        let mut bad = span("02", "db", "q", 13, 14);
        bad.error = true;
        assert!(c.add_span(span_key("04"), bad.clone()));
        assert!(!c.add_span(span_key("04"), bad), "a span read twice counts once");
        c.log_ids.extend([7, 8, 7]);
        let s = c.story("t", 9).unwrap().row;
        assert_eq!((s.root_service.as_str(), s.root_operation.as_str()), ("", MISSING_ROOT));
        assert!(s.error);
        assert_eq!((s.error_spans, s.span_count, s.log_count), (1, 3, 2));
        assert_eq!(s.edges, vec!["ROOT -> api/call", "api/call -> db/q"]);
        assert_eq!(TraceContent::default().story("t", 1), None);
    }

    fn failing(mut span: SpanInfo, error: bool, exception: Option<(u64, &str)>) -> SpanInfo {
        span.error = error;
        span.exception = exception.map(|(time_ns, message)| {
            Box::new(ExceptionInfo { time_ns, r#type: "Error".into(), message: message.into() })
        });
        span
    }

    #[test]
    fn an_error_trace_tells_its_first_exception_preferring_an_error_spans() {
        let c = content(&[
            ("01", failing(span("", "web", "GET /", 0, 9), true, Some((8, "upstream failed")))),
            ("02", failing(span("01", "api", "call", 1, 5), false, Some((2, "retried, handled")))),
            ("03", failing(span("01", "db", "q", 2, 4), true, Some((3, "deadlock")))),
        ]);
        let s = c.story("t", 1).unwrap().row;
        assert_eq!((s.exception_type.as_str(), s.exception_message.as_str()), ("Error", "deadlock"));
        let handled_only = content(&[
            ("01", failing(span("", "web", "GET /", 0, 9), true, None)),
            ("02", failing(span("01", "api", "call", 1, 5), false, Some((2, "retried, handled")))),
        ]);
        assert_eq!(
            handled_only.story("t", 1).unwrap().row.exception_message,
            "retried, handled",
            "no error span has one"
        );
        let ok = content(&[("01", failing(span("", "web", "GET /", 0, 9), false, Some((2, "handled"))))]);
        let s = ok.story("t", 1).unwrap().row;
        assert_eq!((s.exception_type.as_str(), s.exception_message.as_str()), ("", ""), "not an error trace");
    }

    #[test]
    fn a_span_rows_first_exception_event_is_read_from_its_attributes() {
        let row = crate::store::SpanRow {
            event_names: vec!["retry".into(), "exception".into(), "exception".into()],
            event_time_ns: vec![1, 5, 3],
            event_attributes: vec![
                String::new(),
                r#"[{"key":"exception.type","value":{"stringValue":"Late"}}]"#.into(),
                format!(
                    r#"[{{"key":"exception.type","value":{{"stringValue":"TypeError"}}}},{{"key":"exception.message","value":{{"stringValue":"{}é"}}}}]"#,
                    "x".repeat(MAX_EXCEPTION_MESSAGE_BYTES - 1)
                ),
            ],
            ..Default::default()
        };
        let e = SpanInfo::from_row(&row).exception.unwrap();
        assert_eq!((e.time_ns, e.r#type.as_str()), (3, "TypeError"), "the earliest");
        assert_eq!(e.message.len(), MAX_EXCEPTION_MESSAGE_BYTES - 1, "cut before the character that does not fit");
        assert_eq!(SpanInfo::from_row(&crate::store::SpanRow::default()).exception, None);
    }
}
