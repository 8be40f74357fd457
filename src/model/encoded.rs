//! Rows of the `spans` and `logs` tables already in ClickHouse's RowBinary format, in the
//! column order of their structs (`rows.rs`). The writer builds them straight from the
//! records' protobuf bytes (`otlp::rowbinary`) instead of decoding each record into owned
//! structs, flattening those into rows and serializing the rows: that was as much CPU as
//! ClickHouse spent storing them (docs/writer.md). [`EncodeRow`] writes a row struct the
//! same way, for the records that take the decoding path; `tests/it/store.rs` reads encoded
//! rows back through the clickhouse crate and compares them with the structs.
//!
//! RowBinary: integers little-endian, a `String` as its LEB128 length and bytes, an
//! `Array(T)` as its LEB128 length and elements.

use std::marker::PhantomData;

use super::{LogRow, SpanRow, TableRow};

/// Rows of `T`'s table, encoded, with where each ends and the partition column of each.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRows<T> {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    partition_ns: Vec<u64>,
    table: PhantomData<fn() -> T>,
}

impl<T> Default for EncodedRows<T> {
    fn default() -> Self {
        EncodedRows { bytes: Vec::new(), ends: Vec::new(), partition_ns: Vec::new(), table: PhantomData }
    }
}

impl<T: TableRow> EncodedRows<T> {
    /// Room for rows made from about `source_bytes` of protobuf (the rows repeat each
    /// resource's attributes and write ids as hex, so they come out larger).
    pub fn with_capacity(source_bytes: usize) -> Self {
        EncodedRows { bytes: Vec::with_capacity(source_bytes * 2), ..Default::default() }
    }

    /// The buffer the next row is written to; [`EncodedRows::end_row`] closes it.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Closes the row written since the last one ended.
    pub fn end_row(&mut self, partition_ns: u64) {
        self.ends.push(self.bytes.len());
        self.partition_ns.push(partition_ns);
    }

    /// Forgets the row written since the last one ended (a record that fell back to
    /// decoding after part of a row was written).
    pub fn truncate_to(&mut self, rows: usize) {
        self.ends.truncate(rows);
        self.partition_ns.truncate(rows);
        self.bytes.truncate(self.ends.last().copied().unwrap_or(0));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn partition_ns(&self) -> &[u64] {
        &self.partition_ns
    }

    /// Row `i`'s bytes.
    pub fn row(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

impl<T: EncodeRow> EncodedRows<T> {
    /// Rows given as structs.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a T>) -> Self
    where
        T: 'a,
    {
        let mut encoded = EncodedRows::default();
        for row in rows {
            row.encode(&mut encoded.bytes);
            encoded.end_row(row.partition_ns().unwrap_or(0));
        }
        encoded
    }
}

/// A row struct written as RowBinary, field by field in its table's column order.
pub trait EncodeRow: TableRow {
    fn encode(&self, out: &mut Vec<u8>);
}

impl EncodeRow for SpanRow {
    fn encode(&self, out: &mut Vec<u8>) {
        put_str(out, self.trace_id.as_bytes());
        put_str(out, self.span_id.as_bytes());
        put_str(out, self.parent_span_id.as_bytes());
        put_str(out, self.service.as_bytes());
        put_str(out, self.name.as_bytes());
        out.push(self.kind);
        put_u64(out, self.start_ns);
        put_u64(out, self.end_ns);
        put_u64(out, self.duration_ns);
        out.push(self.status_code);
        put_str(out, self.status_message.as_bytes());
        put_strings(out, &self.attr_keys);
        put_strings(out, &self.attr_values);
        put_strings(out, &self.resource_keys);
        put_strings(out, &self.resource_values);
        put_str(out, self.scope_name.as_bytes());
        put_u32(out, self.event_count);
        put_u32(out, self.link_count);
        put_u64(out, self.ingest_ns);
        put_str(out, self.trace_state.as_bytes());
        put_u32(out, self.flags);
        put_u32(out, self.dropped_attributes_count);
        put_u32(out, self.dropped_events_count);
        put_u32(out, self.dropped_links_count);
        put_bytes(out, &self.attr_types);
        put_bytes(out, &self.resource_types);
        put_str(out, self.resource_schema_url.as_bytes());
        put_str(out, self.scope_version.as_bytes());
        put_str(out, self.scope_attributes.as_bytes());
        put_str(out, self.scope_schema_url.as_bytes());
        put_u64s(out, &self.event_time_ns);
        put_strings(out, &self.event_names);
        put_strings(out, &self.event_attributes);
        put_u32s(out, &self.event_dropped_attributes);
        put_strings(out, &self.link_trace_ids);
        put_strings(out, &self.link_span_ids);
        put_strings(out, &self.link_trace_states);
        put_strings(out, &self.link_attributes);
        put_u32s(out, &self.link_flags);
        put_u32s(out, &self.link_dropped_attributes);
    }
}

impl EncodeRow for LogRow {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.log_id);
        put_str(out, self.service.as_bytes());
        put_u64(out, self.time_ns);
        put_u64(out, self.observed_ns);
        out.push(self.severity_number);
        put_str(out, self.severity_text.as_bytes());
        put_str(out, self.body.as_bytes());
        put_str(out, self.trace_id.as_bytes());
        put_str(out, self.span_id.as_bytes());
        put_strings(out, &self.attr_keys);
        put_strings(out, &self.attr_values);
        put_strings(out, &self.resource_keys);
        put_strings(out, &self.resource_values);
        put_str(out, self.scope_name.as_bytes());
        put_u64(out, self.ingest_ns);
        put_str(out, self.event_name.as_bytes());
        put_u32(out, self.flags);
        put_u32(out, self.dropped_attributes_count);
        put_bytes(out, &self.attr_types);
        put_bytes(out, &self.resource_types);
        out.push(self.body_type);
        put_str(out, self.body_value.as_bytes());
        put_str(out, self.resource_schema_url.as_bytes());
        put_str(out, self.scope_version.as_bytes());
        put_str(out, self.scope_attributes.as_bytes());
        put_str(out, self.scope_schema_url.as_bytes());
    }
}

/// A length (of a string or an array) as LEB128.
pub fn put_len(out: &mut Vec<u8>, mut len: usize) {
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
}

pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len());
    out.extend_from_slice(s);
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_strings(out: &mut Vec<u8>, items: &[String]) {
    put_len(out, items.len());
    for s in items {
        put_str(out, s.as_bytes());
    }
}

/// An `Array(UInt8)`: its length, then the bytes.
pub fn put_bytes(out: &mut Vec<u8>, items: &[u8]) {
    put_str(out, items);
}

pub fn put_u32s(out: &mut Vec<u8>, items: &[u32]) {
    put_len(out, items.len());
    for v in items {
        put_u32(out, *v);
    }
}

pub fn put_u64s(out: &mut Vec<u8>, items: &[u64]) {
    put_len(out, items.len());
    for v in items {
        put_u64(out, *v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_leb128() {
        let mut out = Vec::new();
        put_len(&mut out, 0);
        put_len(&mut out, 127);
        put_len(&mut out, 128);
        put_len(&mut out, 300);
        assert_eq!(out, [0x00, 0x7f, 0x80, 0x01, 0xac, 0x02]);
    }

    #[test]
    fn rows_keep_their_bounds_and_partition_days() {
        let a = SpanRow { trace_id: "ab".into(), start_ns: 7, ..Default::default() };
        let b = SpanRow { name: "n".repeat(200), start_ns: 9, ..Default::default() };
        let encoded = EncodedRows::from_rows([&a, &b]);
        assert_eq!(encoded.len(), 2);
        assert_eq!(encoded.partition_ns(), [7, 9]);
        let mut one = Vec::new();
        a.encode(&mut one);
        assert_eq!(encoded.row(0), one.as_slice());
        assert_eq!(encoded.row(0).len() + encoded.row(1).len(), encoded.bytes().len());
        let mut cut = encoded.clone();
        cut.buffer().extend_from_slice(b"half a row");
        cut.truncate_to(1);
        assert_eq!(cut.bytes(), one.as_slice());
    }
}
