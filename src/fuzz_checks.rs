//! What each fuzz target checks, on any input bytes: a panic is a finding. The cargo-fuzz
//! targets in `fuzz/` (nightly, coverage-guided, `scripts/fuzz.sh`) call these, and so
//! does the suite's stable replay (`tests/it/fuzz_replay.rs`: the committed seeds, every
//! crash kept as a regression, and a bounded run of seeded mutations), so a target and
//! its regression test can never drift apart. Not part of the product's API.

use std::collections::BTreeMap;

use crate::config::Loaded;
use crate::mine::{CustomRule, Masker, MaskingConfig};
use crate::otlp::decode::{decode, decompress, DecodeError};
use crate::otlp::split::{split_encoded, Grouping, OtlpRequest};
use crate::otlp::{flatten, ExportLogsServiceRequest, ExportTraceServiceRequest};

/// A target's check: returns on any input, panics on a finding.
pub type Check = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` and seed folder.
pub const TARGETS: &[(&str, Check)] = &[
    ("otlp_http_decode", otlp_http_decode),
    ("otlp_split", otlp_split),
    ("masking", masking),
    ("config_load", config_load),
];

/// The body limit the decode target works under.
const DECODE_LIMIT: usize = 1 << 20;

/// OTLP/HTTP bodies as ingest reads them: the content type and encoding headers, the
/// bounded decompression and the protobuf/JSON parse. The first byte picks the headers,
/// the rest is the body. Any input ends in a request or a typed error whose status
/// OTLP/HTTP allows, and never decompresses past the limit.
pub fn otlp_http_decode(data: &[u8]) {
    const CONTENT_TYPES: [Option<&str>; 5] = [
        Some("application/x-protobuf"),
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("text/plain"),
        None,
    ];
    const ENCODINGS: [Option<&str>; 4] = [None, Some("gzip"), Some("identity"), Some("br")];
    fn refused_as_allowed<T>(result: Result<T, DecodeError>) {
        if let Err(e) = result {
            assert!(matches!(e.http_status(), 400 | 413 | 415), "unexpected status for {e}");
            assert!(!e.to_string().is_empty(), "an error without a message");
        }
    }
    let Some((&selector, body)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[(selector & 0x7) as usize % CONTENT_TYPES.len()];
    let encoding = ENCODINGS[((selector >> 3) & 0x3) as usize];
    if let Ok(bytes) = decompress(body, encoding, DECODE_LIMIT) {
        assert!(bytes.len() <= DECODE_LIMIT, "decompressed past the limit");
    }
    if selector & 0x80 == 0 {
        refused_as_allowed(decode::<ExportTraceServiceRequest>(body, content_type, encoding, DECODE_LIMIT));
    } else {
        refused_as_allowed(decode::<ExportLogsServiceRequest>(body, content_type, encoding, DECODE_LIMIT));
    }
}

/// The byte-level record split ingest applies to every request, with a record limit and
/// a grouping taken from the input (small limits force the size-driven cuts). Bytes the
/// split accepts are bytes prost accepts; every item comes out exactly once, in a record
/// or as rejected; every record fits the limit, decodes, and holds the items it counts;
/// the direct path's rows (`flatten`) are one per item.
pub fn otlp_split(data: &[u8]) {
    let [lo, hi, selector, body @ ..] = data else { return };
    let max_bytes = 16 + u16::from_le_bytes([*lo, *hi]) as usize;
    let grouping = if selector & 2 == 0 { Grouping::ByTrace } else { Grouping::ByService };
    if selector & 1 == 0 {
        split_conserves::<ExportTraceServiceRequest>(body, grouping, max_bytes, |r| {
            let rows = flatten::span_rows(r, 1).len();
            let items = r.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            (items, rows)
        });
    } else {
        split_conserves::<ExportLogsServiceRequest>(body, grouping, max_bytes, |r| {
            let rows = flatten::log_rows(r, 1).len();
            let items = r.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
            (items, rows)
        });
    }
}

/// `items_and_rows`: a decoded request's items, and the rows flattening it gives.
fn split_conserves<R: OtlpRequest>(
    body: &[u8],
    grouping: Grouping,
    max_bytes: usize,
    items_and_rows: impl Fn(&R) -> (usize, usize),
) {
    let decoded = R::decode(body);
    let split = split_encoded::<R>(body, grouping, max_bytes);
    let (request, split) = match (decoded, split) {
        (Ok(request), Ok(split)) => (request, split),
        (Err(_), Err(_)) => return,
        (decoded, split) => panic!(
            "the split and prost disagree: prost {}, split {}",
            if decoded.is_ok() { "accepts" } else { "refuses" },
            if split.is_ok() { "accepts" } else { "refuses" },
        ),
    };
    let (items, rows) = items_and_rows(&request);
    assert_eq!(rows, items, "flatten made a row count other than the item count");
    let mut seen = split.rejected.len();
    for record in &split.records {
        assert!(record.request.len() <= max_bytes, "a record over the limit");
        let decoded = R::decode(record.request.as_slice()).expect("a record decodes");
        assert_eq!(items_and_rows(&decoded).0, record.items, "a record's item count is wrong");
        seen += record.items;
    }
    assert_eq!(seen, items, "items lost or doubled by the split");
}

/// The masking rules on any line, with the default rules and with a custom rule whose glob
/// comes from the input (`pattern\nline`, as `[[logminer.masking.custom]]` would give
/// it). The output is words separated by single spaces, and masking is a function.
pub fn masking(data: &[u8]) {
    fn well_formed(masker: &Masker, line: &str) {
        let masked = masker.mask(line);
        assert!(!masked.contains("  "), "double space in {masked:?}");
        assert!(!masked.starts_with(' ') && !masked.ends_with(' '), "edge space in {masked:?}");
        assert_eq!(masked, masker.mask(line), "masking is not deterministic");
        let mut buffer = String::from("left over");
        masker.mask_into(line, &mut buffer);
        assert_eq!(buffer, masked, "mask_into differs from mask");
    }
    let text = String::from_utf8_lossy(data);
    well_formed(&Masker::default(), &text);
    if let Some((pattern, line)) = text.split_once('\n') {
        let config = MaskingConfig {
            enabled: true,
            disable: vec!["num".to_string()],
            custom: vec![CustomRule {
                name: "fuzz".to_string(),
                pattern: pattern.to_string(),
                placeholder: "<FUZZ>".to_string(),
            }],
        };
        if let Ok(custom) = Masker::new(&config) {
            well_formed(&custom, line);
        }
    }
}

/// The config loader on any `tayga.toml` text and environment (the file text, then after
/// a NUL byte `NAME=value` lines): a configuration, or a refusal naming its problems.
pub fn config_load(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (file, env_text) = text.split_once('\0').unwrap_or((&text, ""));
    let env: BTreeMap<String, String> =
        env_text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match Loaded::from_parts(Some(file), &env) {
        Ok(loaded) => {
            // What loaded passed its checks; reporting on it must work too.
            let _ = loaded.problems();
        }
        Err(e) => assert!(!e.problems.is_empty(), "a refusal with no problem named"),
    }
}
