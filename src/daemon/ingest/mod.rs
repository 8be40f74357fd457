//! `tayga serve ingest` (issue 3). Built so far: the failover policy between the broker and
//! the direct ClickHouse path. The OTLP pieces it uses are in `crate::otlp`.

pub mod failover;
