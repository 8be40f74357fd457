//! Deterministic identities (docs/design.md#identity). Every row Tayga writes is named by a hash of
//! its content, so a record read twice writes nothing new. These functions are the only
//! place identities are computed: producers and consumers on every replica must agree, so
//! the hash must never depend on the process, the platform or the crate's hasher seed.

use xxhash_rust::xxh3::xxh3_64;

/// Joins fields with a separator that cannot occur in UTF-8 text, so ("ab","c") and
/// ("a","bc") never hash alike.
fn hash_fields(fields: &[&[u8]]) -> u64 {
    let mut buf = Vec::with_capacity(fields.iter().map(|f| f.len() + 1).sum());
    for field in fields {
        buf.extend_from_slice(field);
        buf.push(0xFF);
    }
    xxh3_64(&buf)
}

/// A template's id: a hash of its service and its template text.
pub fn template_id(service: &str, template: &str) -> u64 {
    hash_fields(&[b"template", service.as_bytes(), template.as_bytes()])
}

/// How the assembler keys a span id in memory (8 bytes, not the 16-character text): an
/// id of 16 lowercase hex digits (every valid OTLP span id, as rows spell it) is its value,
/// so keys order as the texts do; any other text (a client's malformed id) is a hash of it,
/// so spans that name it as their parent still find it.
pub fn span_key(id: &str) -> u64 {
    let hex = id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match u64::from_str_radix(id, 16) {
        Ok(value) if hex => value,
        _ => hash_fields(&[b"span", id.as_bytes()]),
    }
}

/// The id of one message to a webhook (its `webhook-id`): a hash of the alert, the target
/// and the alert's state (`firing`, …), so every attempt and every replica sends the same
/// id and a receiver can deduplicate on it.
pub fn webhook_message_id(alert_id: u64, target: &str, state: &str) -> u64 {
    hash_fields(&[b"webhook", &alert_id.to_be_bytes(), target.as_bytes(), state.as_bytes()])
}

/// An operator's silence's id: a hash of what it matches, when it was made and by whom, so
/// two silences made alike at the same nanosecond by the same operator are one.
pub fn silence_id(service: &str, kind: &str, template_id: u64, created_ns: u64, created_by: &str) -> u64 {
    hash_fields(&[
        b"silence",
        service.as_bytes(),
        kind.as_bytes(),
        &template_id.to_le_bytes(),
        &created_ns.to_le_bytes(),
        created_by.as_bytes(),
    ])
}

/// What a `new_shape` alert is about: an endpoint (root service and operation) and the call
/// edges it took for the first time (sorted, as the story's `edges` text), so one change is
/// one alert whichever combination with the endpoint's other branches shows it, on any
/// replica and after any re-read.
pub fn new_path_subject(service: &str, operation: &str, new_edges: &[String]) -> u64 {
    let mut fields: Vec<&[u8]> = vec![b"new_path", service.as_bytes(), operation.as_bytes()];
    fields.extend(new_edges.iter().map(|e| e.as_bytes()));
    hash_fields(&fields)
}

/// An alert's id: a hash of its kind, its subject (the template) and its start
/// (docs/design.md#identity), so the same alert gets the same id on any replica and after a re-read.
/// A template is new only once, so a `new_template` alert's start is not part of it; a
/// spike starts at the first minute over its threshold, a silence at the template's last
/// log. Callers pass the start as they define it, in nanoseconds.
pub fn alert_id(kind: crate::wire::alert::AlertKind, template_id: u64, start_ns: u64) -> u64 {
    let start = match kind {
        crate::wire::alert::AlertKind::NewTemplate => 0u64,
        _ => start_ns,
    };
    hash_fields(&[b"alert", kind.as_str().as_bytes(), &template_id.to_le_bytes(), &start.to_le_bytes()])
}

/// What a log's id is computed from: the fields of its `logs` row that the application
/// emitted.
#[derive(Debug, Clone, Copy)]
pub struct LogContent<'a> {
    pub service: &'a str,
    pub time_ns: u64,
    pub severity_number: u8,
    pub severity_text: &'a str,
    pub body: &'a str,
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub attr_keys: &'a [String],
    pub attr_values: &'a [String],
    pub resource_keys: &'a [String],
    pub resource_values: &'a [String],
    pub scope_name: &'a str,
}

/// A log's id: a hash of its service and its canonical content: what the application
/// emitted (time, severity, body, trace context, attributes, resource, scope), not when or
/// how Tayga received it. Attributes are sorted by key, since their order carries no meaning.
pub fn log_id(row: &LogContent<'_>) -> u64 {
    fn sorted_pairs(keys: &[String], values: &[String]) -> Vec<u8> {
        let mut pairs: Vec<(&String, &String)> = keys.iter().zip(values).collect();
        pairs.sort();
        let mut out = Vec::new();
        for (k, v) in pairs {
            out.extend_from_slice(k.as_bytes());
            out.push(0xFE);
            out.extend_from_slice(v.as_bytes());
            out.push(0xFE);
        }
        out
    }
    let time = row.time_ns.to_le_bytes();
    hash_fields(&[
        b"log",
        row.service.as_bytes(),
        &time,
        &[row.severity_number],
        row.severity_text.as_bytes(),
        row.body.as_bytes(),
        row.trace_id.as_bytes(),
        row.span_id.as_bytes(),
        &sorted_pairs(row.attr_keys, row.attr_values),
        &sorted_pairs(row.resource_keys, row.resource_values),
        row.scope_name.as_bytes(),
    ])
}

/// A story's fingerprint: a hash of the SET of call edges of a trace's shape
/// (docs/stories.md states this exactly; it is an interface). Each edge is
/// `(parent, child)`, where `child` is a span's `(service, operation)` and `parent` is its
/// parent span's `(service, operation)`, or `None` when the span has no parent span in the
/// trace (a root, or a span whose parent never arrived). Each edge is encoded as bytes:
/// `C parent_service FF parent_operation FF child_service FF child_operation FF` for a
/// call, `R child_service FF child_operation FF` for a root (`C` = 0x43, `R` = 0x52,
/// `FF` = 0xFF, which never occurs in UTF-8). The encodings are sorted bytewise and
/// deduplicated, so order and repetition do not matter; the fingerprint is the XXH3-64
/// (with hash seed zero) of `story FF` followed by the sorted encodings, concatenated.
pub fn story_fingerprint<'a>(edges: impl IntoIterator<Item = (Option<(&'a str, &'a str)>, (&'a str, &'a str))>) -> u64 {
    let mut encoded: Vec<Vec<u8>> = edges
        .into_iter()
        .map(|(parent, (service, operation))| {
            let mut e = Vec::with_capacity(service.len() + operation.len() + 8);
            match parent {
                Some((ps, po)) => {
                    e.push(b'C');
                    for f in [ps, po] {
                        e.extend_from_slice(f.as_bytes());
                        e.push(0xFF);
                    }
                }
                None => e.push(b'R'),
            }
            for f in [service, operation] {
                e.extend_from_slice(f.as_bytes());
                e.push(0xFF);
            }
            e
        })
        .collect();
    encoded.sort_unstable();
    encoded.dedup();
    let mut buf = b"story\xFF".to_vec();
    for e in encoded {
        buf.extend_from_slice(&e);
    }
    xxh3_64(&buf)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_hex_span_id_keys_as_its_value_in_the_texts_order() {
        assert_eq!(span_key("00000000000000ff"), 255);
        assert!(span_key("0a00000000000000") < span_key("f000000000000000"));
        assert_ne!(span_key("FF"), span_key("ff"), "other texts are hashed");
        assert_eq!(span_key("xyz"), span_key("xyz"));
    }
    use super::*;

    #[test]
    fn template_id_is_stable_across_builds() {
        // A changed value here means every stored template id changes: that is a migration.
        assert_eq!(template_id("checkout", "user <*> logged in"), template_id("checkout", "user <*> logged in"));
        assert_ne!(template_id("a", "bc"), template_id("ab", "c"));
    }

    #[test]
    fn alert_ids_name_kind_subject_and_start() {
        use crate::wire::alert::AlertKind::*;
        assert_eq!(alert_id(NewTemplate, 7, 1), alert_id(NewTemplate, 7, 2), "a template is new once");
        assert_ne!(alert_id(Spike, 7, 1), alert_id(Spike, 7, 2), "a later spike is another alert");
        assert_ne!(alert_id(Spike, 7, 1), alert_id(Silence, 7, 1));
        assert_ne!(alert_id(Spike, 7, 1), alert_id(Spike, 8, 1));
        // A change here renames every stored alert: the notifier would deliver them again.
        assert_eq!(alert_id(Spike, 0x1234, 60_000_000_000), alert_id(Spike, 0x1234, 60_000_000_000));
    }

    #[test]
    fn story_fingerprint_is_a_hash_of_the_edge_set() {
        let a = [(None, ("web", "GET /")), (Some(("web", "GET /")), ("db", "query"))];
        let b = [(Some(("web", "GET /")), ("db", "query")), (None, ("web", "GET /")), (None, ("web", "GET /"))];
        assert_eq!(story_fingerprint(a), story_fingerprint(b), "order and repetition do not matter");
        assert_ne!(story_fingerprint(a), story_fingerprint([(None, ("web", "GET /"))]));
        // Field boundaries and edge kinds are unambiguous.
        assert_ne!(story_fingerprint([(None, ("ab", "c"))]), story_fingerprint([(None, ("a", "bc"))]));
        assert_ne!(story_fingerprint([(Some(("x", "y")), ("a", "b"))]), story_fingerprint([(None, ("a", "b"))]));
        // The documented value (docs/stories.md): a change here changes every stored fingerprint.
        let mut bytes = b"story\xFF".to_vec();
        bytes.extend_from_slice(b"Cweb\xFFGET /\xFFdb\xFFquery\xFF");
        bytes.extend_from_slice(b"Rweb\xFFGET /\xFF");
        assert_eq!(story_fingerprint(a), xxh3_64(&bytes));
        assert_eq!(format!("{:016x}", story_fingerprint(a)), "59a2176b778dae71");
    }
}
