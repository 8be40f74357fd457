//! What the tables keep, as Rust data: one struct per table in its column order (`rows`),
//! the same rows already in RowBinary (`encoded`), and how an attribute value keeps its OTLP
//! type beside its text (`attributes`). No SQL and no client: the store reads and writes
//! these, and the pure OTLP code makes them straight from a request, without knowing the
//! store.

pub mod attributes;
pub mod encoded;
pub mod rows;

pub use rows::*;
