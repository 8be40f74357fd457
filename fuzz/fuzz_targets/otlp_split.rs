//! The record split ingest applies to every request (`tayga::otlp::split::split`), on any
//! request protobuf can decode, with a record limit taken from the input (small limits
//! force the size-driven cuts). Every item must come out exactly once, in a record or as
//! rejected; every record must fit the limit; the split's own size tracking is checked by
//! its debug assertion (cargo fuzz builds with debug assertions). The rows the direct path
//! would insert (`flatten`) are made too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tayga::otlp::split::{split, Grouping};
use tayga::otlp::{flatten, ExportLogsServiceRequest, ExportTraceServiceRequest};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let max_bytes = 16 + u16::from_le_bytes([data[0], data[1]]) as usize;
    let selector = data[2];
    let body = &data[3..];
    if selector & 1 == 0 {
        let Ok(request) = ExportTraceServiceRequest::decode(body) else { return };
        let spans: usize = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        let rows = flatten::span_rows(&request, 1);
        assert_eq!(rows.len(), spans);
        let grouping = if selector & 2 == 0 { Grouping::ByTrace } else { Grouping::ByService };
        let out = split(request, grouping, max_bytes);
        let mut seen = out.rejected.len();
        for record in &out.records {
            assert!(record.request.encoded_len() <= max_bytes, "a record over the limit");
            let n: usize =
                record.request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            assert_eq!(n, record.items, "a record's item count is wrong");
            seen += n;
        }
        assert_eq!(seen, spans, "spans lost or doubled by the split");
    } else {
        let Ok(request) = ExportLogsServiceRequest::decode(body) else { return };
        let logs: usize = request.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
        let rows = flatten::log_rows(&request, 1);
        assert_eq!(rows.len(), logs);
        let grouping = if selector & 2 == 0 { Grouping::ByTrace } else { Grouping::ByService };
        let out = split(request, grouping, max_bytes);
        let mut seen = out.rejected.len();
        for record in &out.records {
            assert!(record.request.encoded_len() <= max_bytes, "a record over the limit");
            let n: usize =
                record.request.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
            assert_eq!(n, record.items, "a record's item count is wrong");
            seen += n;
        }
        assert_eq!(seen, logs, "logs lost or doubled by the split");
    }
});
