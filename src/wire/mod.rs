//! What crosses a topic, defined once for producer and consumers alike: the records of
//! `signals` and `logs` (OTLP protobuf with kind and ingest-time headers, [`record`]), the
//! alert document on `alerts` ([`alert`]) and the story document on `stories` ([`story`]).
//! The alert and story documents are public interfaces (docs/alerts.md, docs/stories.md):
//! versioned JSON that other systems read. This layer knows nothing of tables, topics'
//! names or daemons.

pub mod alert;
pub mod record;
pub mod story;
