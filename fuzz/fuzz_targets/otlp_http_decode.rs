//! OTLP/HTTP bodies as ingest reads them: the content type and encoding headers, the
//! bounded decompression and the protobuf/JSON parse (`tayga::otlp::decode`). The first
//! byte picks the headers, the rest is the body. Any input must end in a request or a typed
//! error whose status is one OTLP/HTTP allows; never a panic, never more than the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tayga::otlp::decode::{decode, decompress, DecodeError};
use tayga::otlp::{ExportLogsServiceRequest, ExportTraceServiceRequest};

const LIMIT: usize = 1 << 20;

const CONTENT_TYPES: [Option<&str>; 5] = [
    Some("application/x-protobuf"),
    Some("application/json"),
    Some("application/json; charset=utf-8"),
    Some("text/plain"),
    None,
];
const ENCODINGS: [Option<&str>; 4] = [None, Some("gzip"), Some("identity"), Some("br")];

fn check<T>(result: Result<T, DecodeError>) {
    if let Err(e) = result {
        assert!(matches!(e.http_status(), 400 | 413 | 415), "unexpected status for {e}");
        assert!(!e.to_string().is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[(selector & 0x7) as usize % CONTENT_TYPES.len()];
    let encoding = ENCODINGS[((selector >> 3) & 0x3) as usize];
    if let Ok(bytes) = decompress(body, encoding, LIMIT) {
        assert!(bytes.len() <= LIMIT, "decompressed past the limit");
    }
    if selector & 0x80 == 0 {
        check(decode::<ExportTraceServiceRequest>(body, content_type, encoding, LIMIT));
    } else {
        check(decode::<ExportLogsServiceRequest>(body, content_type, encoding, LIMIT));
    }
});
