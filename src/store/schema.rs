//! Every ClickHouse DDL statement Tayga runs lives in this file (an architecture invariant).
//!
//! The same statements must run on Debian's ClickHouse 18.16 (our tests' server) and on
//! current releases (production), so they use only what both have: UInt64 nanosecond
//! timestamps, parallel arrays for attributes, ReplacingMergeTree keyed by each row's
//! deterministic identity (docs/design.md#identity), and partitions by day so retention can drop whole
//! partitions. A test executes every statement in chdb-core (current ClickHouse) as well.
//!
//! Migrations are append-only: a released migration is never edited, a change is a new one.

/// One step of the schema, applied once and recorded in `schema_migrations`.
pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub statements: &'static [&'static str],
}

/// The table that records applied migrations. Created before any migration runs.
pub const MIGRATIONS_TABLE_DDL: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    applied_ns UInt64
) ENGINE = MergeTree() ORDER BY version";

/// The day partition of a nanosecond timestamp column, as `YYYYMMDD` (a UInt32), so
/// retention can compare partition ids with a cut-off date.
macro_rules! day_of {
    ($col:literal) => {
        concat!("toYYYYMMDD(toDateTime(intDiv(", $col, ", 1000000000)))")
    };
}

/// The length of a time bucket of the `*_by_time` tables: 15 minutes, in nanoseconds.
pub const BUCKET_NS: u64 = 900_000_000_000;

/// The bucket of a nanosecond timestamp column (a UInt32), as [`BUCKET_NS`] says.
macro_rules! bucket_of {
    ($col:literal) => {
        concat!("toUInt32(intDiv(", $col, ", 900000000000))")
    };
}

/// The columns of `spans_by_time`, and what its view and backfill select from `spans`.
macro_rules! spans_by_time_columns {
    () => {
        "bucket, service, start_ns, trace_id, span_id, parent_span_id, name, end_ns, duration_ns, status_code, attr_keys, attr_values, resource_keys, resource_values, ingest_ns"
    };
}
macro_rules! spans_by_time_select {
    () => {
        concat!(bucket_of!("start_ns"), " AS bucket, service, start_ns, trace_id, span_id, parent_span_id, name, end_ns, duration_ns, status_code, attr_keys, attr_values, resource_keys, resource_values, ingest_ns")
    };
}

/// Every column of `logs`, in its order (`LogRow`).
macro_rules! logs_columns {
    () => {
        "log_id, service, time_ns, observed_ns, severity_number, severity_text, body, trace_id, span_id, attr_keys, attr_values, resource_keys, resource_values, scope_name, ingest_ns, event_name, flags, dropped_attributes_count, attr_types, resource_types, body_type, body_value, resource_schema_url, scope_version, scope_attributes, scope_schema_url"
    };
}

/// What `service_minutes` gets from a block of spans, and from a block of logs.
macro_rules! span_minutes_select {
    () => {
        "intDiv(start_ns, 60000000000) * 60000000000 AS minute_ns, service, toUInt8(0) AS severity_number, sumState(toUInt64(1)) AS spans, sumState(toUInt64(status_code = 2)) AS error_spans, sumState(toUInt64(0)) AS logs, maxState(start_ns) AS last_seen_ns"
    };
}
macro_rules! log_minutes_select {
    () => {
        "intDiv(time_ns, 60000000000) * 60000000000 AS minute_ns, service, severity_number, sumState(toUInt64(0)) AS spans, sumState(toUInt64(0)) AS error_spans, sumState(toUInt64(1)) AS logs, maxState(time_ns) AS last_seen_ns"
    };
}

/// What `shape_minutes` gets from a block of stories: per minute of start and endpoint, each
/// fingerprint's distinct traces, its first trace, its edges and its durations. Truncated
/// stories and stories without a root are no endpoint's shape (`store::shapes`).
macro_rules! shape_minutes_select {
    () => {
        "intDiv(start_ns, 60000000000) * 60000000000 AS minute_ns, root_service, root_operation, fingerprint, uniqExactState(trace_id) AS traces, minState(start_ns) AS first_ns, argMinState(trace_id, start_ns) AS first_trace_id, anyState(edges) AS edges, quantileExactState(0.95)(duration_ns) AS durations FROM stories WHERE truncated = 0 AND root_service != '' GROUP BY minute_ns, root_service, root_operation, fingerprint"
    };
}

/// The columns migration 6 adds to `logs` and to its copy `trace_logs`, which must stay
/// alike (the copy's view inserts `SELECT *` of `logs`).
macro_rules! logs_columns_6 {
    () => {
        "
    ADD COLUMN event_name String DEFAULT '',
    ADD COLUMN flags UInt32 DEFAULT 0,
    ADD COLUMN dropped_attributes_count UInt32 DEFAULT 0,
    ADD COLUMN attr_types Array(UInt8),
    ADD COLUMN resource_types Array(UInt8),
    ADD COLUMN body_type UInt8 DEFAULT 0,
    ADD COLUMN body_value String DEFAULT '',
    ADD COLUMN resource_schema_url String DEFAULT '',
    ADD COLUMN scope_version String DEFAULT '',
    ADD COLUMN scope_attributes String DEFAULT '',
    ADD COLUMN scope_schema_url String DEFAULT ''"
    };
}

// One layout for every migration, kept by hand: rustfmt would re-indent the whole list
// whenever it grows past one element, and migrations are appended by several changes.
#[rustfmt::skip]
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "initial schema",
    statements: &[
        // A span's identity is (trace_id, span_id); ids are lowercase hex as in OTLP/JSON.
        concat!(
            "CREATE TABLE IF NOT EXISTS spans (
    trace_id String,
    span_id String,
    parent_span_id String,
    service String,
    name String,
    kind UInt8,
    start_ns UInt64,
    end_ns UInt64,
    duration_ns UInt64,
    status_code UInt8,
    status_message String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    event_count UInt32,
    link_count UInt32,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("start_ns"),
            "
ORDER BY (trace_id, span_id)"
        ),
        // A log's identity is log_id, a hash of its service and canonical content.
        concat!(
            "CREATE TABLE IF NOT EXISTS logs (
    log_id UInt64,
    service String,
    time_ns UInt64,
    observed_ns UInt64,
    severity_number UInt8,
    severity_text String,
    body String,
    trace_id String,
    span_id String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (service, log_id)"
        ),
        // One row per (service, template); the newest update wins.
        "CREATE TABLE IF NOT EXISTS log_templates (
    service String,
    template_id UInt64,
    template String,
    count UInt64,
    first_seen_ns UInt64,
    last_seen_ns UInt64,
    masking_version String,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
ORDER BY (service, template_id)",
        // Which template each log matched; deduplicated by log_id, counted with uniqExact.
        concat!(
            "CREATE TABLE IF NOT EXISTS log_hits (
    service String,
    log_id UInt64,
    template_id UInt64,
    time_ns UInt64
) ENGINE = ReplacingMergeTree()
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (service, log_id)"
        ),
        // One story per trace; a late span replaces it with a newer version.
        concat!(
            "CREATE TABLE IF NOT EXISTS stories (
    trace_id String,
    fingerprint UInt64,
    root_service String,
    root_operation String,
    start_ns UInt64,
    duration_ns UInt64,
    span_count UInt32,
    services Array(String),
    edges Array(String),
    error UInt8,
    error_spans UInt32,
    log_count UInt32,
    truncated UInt8,
    version_ns UInt64
) ENGINE = ReplacingMergeTree(version_ns)
PARTITION BY ",
            day_of!("start_ns"),
            "
ORDER BY trace_id"
        ),
        // A ReplacingMergeTree by alert_id (docs/design.md#identity); every update is a newer version.
        concat!(
            "CREATE TABLE IF NOT EXISTS log_alerts (
    alert_id UInt64,
    kind String,
    service String,
    template_id UInt64,
    template String,
    first_at UInt64,
    last_at UInt64,
    count UInt64,
    baseline Float64,
    threshold Float64,
    stored_ns UInt64,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
PARTITION BY ",
            day_of!("first_at"),
            "
ORDER BY alert_id"
        ),
        // A mark per published version of an alert; republication looks for missing marks.
        "CREATE TABLE IF NOT EXISTS log_alert_publications (
    alert_id UInt64,
    alert_updated_ns UInt64,
    published_ns UInt64
) ENGINE = ReplacingMergeTree(published_ns)
ORDER BY (alert_id, alert_updated_ns)",
        // The logminer's key/value state: watermarks, heartbeats, masking epoch
        // (docs/design.md#watermarks).
        "CREATE TABLE IF NOT EXISTS logminer_state (
    key String,
    value String,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
ORDER BY key",
        // The state of every (alert, target) pair (docs/design.md#notifier-states); kept 30 days. created_ns is
        // carried unchanged through a pair's updates, so all its versions share a partition.
        concat!(
            "CREATE TABLE IF NOT EXISTS notifier_deliveries (
    alert_id UInt64,
    target String,
    status String,
    attempts UInt32,
    last_error String,
    created_ns UInt64,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
PARTITION BY ",
            day_of!("created_ns"),
            "
ORDER BY (alert_id, target)"
        ),
        // Samples the API's recorder scrapes from every service's /metrics.
        concat!(
            "CREATE TABLE IF NOT EXISTS pipeline_metrics (
    ts_ns UInt64,
    service String,
    instance String,
    metric String,
    label_keys Array(String),
    label_values Array(String),
    value Float64
) ENGINE = MergeTree()
PARTITION BY ",
            day_of!("ts_ns"),
            "
ORDER BY (service, metric, ts_ns)"
        ),
    ],
},
Migration {
    version: 2,
    name: "trace_logs: the logs of a trace by primary key",
    statements: &[
        // `logs` is ordered by (service, log_id), so "the logs of trace T" would scan every
        // log, and even reading them by key costs a granule per service of the trace. This
        // copy of every log that has a trace id, ordered by trace id, puts a trace's logs
        // side by side: one granule. It doubles the storage of traced logs (not of the
        // others); partitioned like `logs`, with the same retention.
        concat!(
            "CREATE TABLE IF NOT EXISTS trace_logs (
    log_id UInt64,
    service String,
    time_ns UInt64,
    observed_ns UInt64,
    severity_number UInt8,
    severity_text String,
    body String,
    trace_id String,
    span_id String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (trace_id, service, log_id)"
        ),
        // Filled on every insert into `logs`, whoever inserts (writer or ingest's direct path).
        "CREATE MATERIALIZED VIEW IF NOT EXISTS trace_logs_mv TO trace_logs AS
SELECT * FROM logs WHERE trace_id != ''",
        // Logs stored before this migration.
        "INSERT INTO trace_logs SELECT * FROM logs WHERE trace_id != ''",
    ],
},
Migration {
    version: 3,
    name: "ingest_backlog: records written directly, kept until replayed to the topics",
    statements: &[
        // Every record ingest writes on the direct path, as it would have been published
        // (topic, key, value, headers), until the broker acknowledged its replay. A replayed
        // record gets a newer version with `replayed = 1` and no value, so merges reclaim
        // the payload; reads take `argMax(replayed, version_ns)`, never FINAL with a WHERE
        // on `replayed` (moved to PREWHERE it would filter before the merge). Drained days
        // are dropped by ingest itself (`store::backlog`), never by the retention sweep.
        concat!(
            "CREATE TABLE IF NOT EXISTS ingest_backlog (
    created_ns UInt64,
    nonce UInt64,
    position UInt32,
    topic String,
    key String,
    header_keys Array(String),
    header_values Array(String),
    value Array(UInt8),
    value_bytes UInt32,
    replayed UInt8,
    version_ns UInt64
) ENGINE = ReplacingMergeTree(version_ns)
PARTITION BY ",
            day_of!("created_ns"),
            "
ORDER BY (created_ns, nonce, position)"
        ),
    ],
},
Migration {
    version: 4,
    name: "log_template_merges: the templates a sibling merge retired",
    statements: &[
        // One row per absorbed template, naming the live template that took its lines
        // (docs/mining.md, "Merging and identity"); a later version of the row (a chain
        // resolved, or the template born again, survivor_id = absorbed_id) replaces it.
        // Small, like log_templates: not partitioned.
        "CREATE TABLE IF NOT EXISTS log_template_merges (
    service String,
    absorbed_id UInt64,
    survivor_id UInt64,
    merged_ns UInt64,
    masking_version String
) ENGINE = ReplacingMergeTree(merged_ns)
ORDER BY (service, absorbed_id)",
    ],
},
Migration {
    version: 5,
    name: "notifier_deliveries: the operator's manual retries",
    statements: &[
        // `tayga deliveries retry` (and its API endpoint) records who reset a failed pair to
        // pending, when, and how many times; the notifier judges a retried pair's age by
        // `retried_ns`. One statement, so a failure leaves no column half added (18.16 has
        // no `ADD COLUMN IF NOT EXISTS`). Existing rows read 0, 0 and ''.
        "ALTER TABLE notifier_deliveries
    ADD COLUMN manual_retries UInt32 DEFAULT 0,
    ADD COLUMN retried_ns UInt64 DEFAULT 0,
    ADD COLUMN retried_by String DEFAULT ''",
    ],
},
Migration {
    version: 6,
    name: "spans and logs keep all an OpenTelemetry SDK sends",
    statements: &[
        // The OTLP fields a span dropped before: its trace state, flags and dropped counts,
        // its scope's version and attributes, both schema URLs, and its events and links.
        // How values keep their type, on 18.16 (no Map, JSON or named Tuple) and current
        // servers alike:
        // - a top-level attribute keeps its text in `*_values` (as before, so every reader
        //   and query of those columns is unchanged) and its OTLP type in the parallel
        //   `*_types` (`model::attributes::value_type`): a number is compared as a number
        //   with `toFloat64OrNull(attr_values[i])` where its type says it is one, and an
        //   array or map is its JSON text;
        // - an attribute list inside a list (an event's, a link's, a scope's) is one String
        //   of JSON, the OTLP/JSON form of its KeyValues (`[{"key":…,"value":{"intValue":…}}]`),
        //   typed and in order: an AnyValue nests to any depth (arrays of maps of arrays),
        //   which no fixed column type holds, and such a list is read with its span, never
        //   filtered on alone;
        // - events and links are parallel arrays, one element per event or link: the shape
        //   of a Nested column, with plain names so every query and row struct names them
        //   the same way on both versions.
        // Rows stored before read '' / 0 / [] (no events, no links, untyped values read as
        // strings). One statement per table, so a failure leaves no column half added.
        "ALTER TABLE spans
    ADD COLUMN trace_state String DEFAULT '',
    ADD COLUMN flags UInt32 DEFAULT 0,
    ADD COLUMN dropped_attributes_count UInt32 DEFAULT 0,
    ADD COLUMN dropped_events_count UInt32 DEFAULT 0,
    ADD COLUMN dropped_links_count UInt32 DEFAULT 0,
    ADD COLUMN attr_types Array(UInt8),
    ADD COLUMN resource_types Array(UInt8),
    ADD COLUMN resource_schema_url String DEFAULT '',
    ADD COLUMN scope_version String DEFAULT '',
    ADD COLUMN scope_attributes String DEFAULT '',
    ADD COLUMN scope_schema_url String DEFAULT '',
    ADD COLUMN event_time_ns Array(UInt64),
    ADD COLUMN event_names Array(String),
    ADD COLUMN event_attributes Array(String),
    ADD COLUMN event_dropped_attributes Array(UInt32),
    ADD COLUMN link_trace_ids Array(String),
    ADD COLUMN link_span_ids Array(String),
    ADD COLUMN link_trace_states Array(String),
    ADD COLUMN link_attributes Array(String),
    ADD COLUMN link_flags Array(UInt32),
    ADD COLUMN link_dropped_attributes Array(UInt32)",
        // A log's new fields. `body` stays the text the miner mines and the log id hashes
        // (so ids of logs stored before do not change); `body_value` is the lossless OTLP/JSON
        // form of a body that is not a plain scalar (a map, an array, bytes), '' otherwise.
        // trace_logs first: its materialized view copies `SELECT *` of each insert into
        // `logs`, so it must have every column `logs` has, in the same order, before `logs`
        // has them.
        concat!("ALTER TABLE trace_logs", logs_columns_6!()),
        concat!("ALTER TABLE logs", logs_columns_6!()),
        // A story keeps the first exception of its error trace (docs/stories.md): its type and
        // message, '' when it has none (and for stories stored before).
        "ALTER TABLE stories
    ADD COLUMN exception_type String DEFAULT '',
    ADD COLUMN exception_message String DEFAULT ''",
    ],
},
Migration {
    version: 7,
    name: "notifier_silences: operators' silences, and the silence a delivery row names",
    statements: &[
        // An operator's silence (docs/notifier.md, "Silences"): which alerts it matches
        // (a service, and optionally a kind and a template), from when until when, why and
        // who. Expiring one early writes a newer version with `ends_ns` moved to then.
        // Small (a handful per week): not partitioned, never expired by age.
        "CREATE TABLE IF NOT EXISTS notifier_silences (
    silence_id UInt64,
    service String,
    kind String,
    template_id UInt64,
    starts_ns UInt64,
    ends_ns UInt64,
    comment String,
    created_by String,
    created_ns UInt64,
    expired_by String,
    updated_ns UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
ORDER BY silence_id",
        // A `silenced` pair names the silence that held it back (0: none). One statement,
        // for the reason migration 5 gives. Existing rows read 0.
        "ALTER TABLE notifier_deliveries
    ADD COLUMN silence_id UInt64 DEFAULT 0",
    ],
},
Migration {
    version: 8,
    name: "resolved notices: when an alert became inactive, and each target's resolved delivery",
    statements: &[
        // When the logminer judged the alert inactive (docs/alerts.md, "An alert's life"):
        // its `last_at` plus the active window, so every replica and every re-run agree on
        // it; 0 while it is active. Existing rows read 0 and are resolved by the next pass
        // that sees them inactive within the republication window.
        "ALTER TABLE log_alerts
    ADD COLUMN resolved_at UInt64 DEFAULT 0",
        // The resolved notice of every (alert, target) pair (docs/notifier.md, "Resolved
        // notices"): the same columns, states and rules as `notifier_deliveries`, in a table
        // of its own. A pair's firing and resolved deliveries are two rows; in one table they
        // would share the ReplacingMergeTree key (alert_id, target) and a merge would keep
        // only the later, and a new key cannot be given to a replicated table in place.
        concat!(
            "CREATE TABLE IF NOT EXISTS notifier_resolved_deliveries (
    alert_id UInt64,
    target String,
    status String,
    attempts UInt32,
    last_error String,
    created_ns UInt64,
    updated_ns UInt64,
    manual_retries UInt32,
    retried_ns UInt64,
    retried_by String,
    silence_id UInt64
) ENGINE = ReplacingMergeTree(updated_ns)
PARTITION BY ",
            day_of!("created_ns"),
            "
ORDER BY (alert_id, target)"
        ),
    ],
},
Migration {
    version: 9,
    name: "explore: spans, logs and hits by time, and the per-minute rollup",
    statements: &[
        // `spans` (by trace id) and `logs` (by service, log id) keep their keys: a trace by id
        // and a log by id stay one granule. A search of a window read their whole day
        // partitions, so these copies order the same rows by time (docs/api.md, "Reading by
        // time"): a 15-minute bucket first (a search of every service reads the buckets its
        // window covers), then the service (one service's rows of a bucket lie together),
        // then the time, then the identity, which keeps every copy of a row on one key so
        // ReplacingMergeTree still deduplicates. Granules of 2,048 rows bound what a window
        // reads beyond its own rows to a few thousand per bucket and service. 18.16 refuses a
        // new ORDER BY on a replicated table, so a new key is a new table, filled by a view
        // on every insert (writer or ingest's direct path) and backfilled here.
        concat!(
            "CREATE TABLE IF NOT EXISTS spans_by_time (
    bucket UInt32,
    service String,
    start_ns UInt64,
    trace_id String,
    span_id String,
    parent_span_id String,
    name String,
    end_ns UInt64,
    duration_ns UInt64,
    status_code UInt8,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    ingest_ns UInt64
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("start_ns"),
            "
ORDER BY (bucket, service, start_ns, trace_id, span_id)
SETTINGS index_granularity = 2048"
        ),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS spans_by_time_mv TO spans_by_time AS SELECT ", spans_by_time_select!(), " FROM spans"),
        concat!("INSERT INTO spans_by_time(", spans_by_time_columns!(), ") SELECT ", spans_by_time_select!(), " FROM spans"),
        // Every column of `logs` (named one by one, so a column added to `logs` later is
        // not copied by accident), after the bucket.
        concat!(
            "CREATE TABLE IF NOT EXISTS logs_by_time (
    bucket UInt32,
    log_id UInt64,
    service String,
    time_ns UInt64,
    observed_ns UInt64,
    severity_number UInt8,
    severity_text String,
    body String,
    trace_id String,
    span_id String,
    attr_keys Array(String),
    attr_values Array(String),
    resource_keys Array(String),
    resource_values Array(String),
    scope_name String,
    ingest_ns UInt64,
    event_name String,
    flags UInt32,
    dropped_attributes_count UInt32,
    attr_types Array(UInt8),
    resource_types Array(UInt8),
    body_type UInt8,
    body_value String,
    resource_schema_url String,
    scope_version String,
    scope_attributes String,
    scope_schema_url String
) ENGINE = ReplacingMergeTree(ingest_ns)
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (bucket, service, time_ns, log_id)
SETTINGS index_granularity = 2048"
        ),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS logs_by_time_mv TO logs_by_time AS SELECT ", bucket_of!("time_ns"), " AS bucket, ", logs_columns!(), " FROM logs"),
        concat!("INSERT INTO logs_by_time(bucket, ", logs_columns!(), ") SELECT ", bucket_of!("time_ns"), " AS bucket, ", logs_columns!(), " FROM logs"),
        // Which template each log matched, by time: the join of a logs search reads the
        // hits of its window only.
        concat!(
            "CREATE TABLE IF NOT EXISTS log_hits_by_time (
    bucket UInt32,
    service String,
    time_ns UInt64,
    log_id UInt64,
    template_id UInt64
) ENGINE = ReplacingMergeTree()
PARTITION BY ",
            day_of!("time_ns"),
            "
ORDER BY (bucket, service, time_ns, log_id)
SETTINGS index_granularity = 2048"
        ),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS log_hits_by_time_mv TO log_hits_by_time AS SELECT ", bucket_of!("time_ns"), " AS bucket, service, time_ns, log_id, template_id FROM log_hits"),
        concat!("INSERT INTO log_hits_by_time(bucket, service, time_ns, log_id, template_id) SELECT ", bucket_of!("time_ns"), " AS bucket, service, time_ns, log_id, template_id FROM log_hits"),
        // Per minute, service and severity (0 for spans): how many spans, error spans and
        // logs were stored, and the latest time seen. Summed at insert by two views, so the
        // services overview and the count charts read a few rows per minute and service,
        // never the raw tables. A row inserted twice (a record the writer re-read after a
        // crash on 18.16, which has no insert tokens, or a direct write replayed) counts twice
        // here, where the raw tables count it once (docs/api.md, "Reading by time").
        concat!(
            "CREATE TABLE IF NOT EXISTS service_minutes (
    minute_ns UInt64,
    service String,
    severity_number UInt8,
    spans AggregateFunction(sum, UInt64),
    error_spans AggregateFunction(sum, UInt64),
    logs AggregateFunction(sum, UInt64),
    last_seen_ns AggregateFunction(max, UInt64)
) ENGINE = AggregatingMergeTree()
PARTITION BY ",
            day_of!("minute_ns"),
            "
ORDER BY (minute_ns, service, severity_number)"
        ),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS service_minutes_spans_mv TO service_minutes AS SELECT ", span_minutes_select!(), " FROM spans GROUP BY minute_ns, service, severity_number"),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS service_minutes_logs_mv TO service_minutes AS SELECT ", log_minutes_select!(), " FROM logs GROUP BY minute_ns, service, severity_number"),
        // The rows stored before, each once (FINAL), though a row the views counted while
        // this ran counts twice.
        concat!("INSERT INTO service_minutes(minute_ns, service, severity_number, spans, error_spans, logs, last_seen_ns) SELECT ", span_minutes_select!(), " FROM spans FINAL GROUP BY minute_ns, service, severity_number"),
        concat!("INSERT INTO service_minutes(minute_ns, service, severity_number, spans, error_spans, logs, last_seen_ns) SELECT ", log_minutes_select!(), " FROM logs FINAL GROUP BY minute_ns, service, severity_number"),
    ],
},
Migration {
    version: 10,
    name: "log_alerts: what a shape alert says about its shape",
    statements: &[
        // A `new_shape` or `shape_slowdown` alert (docs/alerts.md, "Shape alerts") keeps the
        // edges its shape adds and removes against its endpoint's usual shape, a trace of it
        // and its values, as the JSON of `wire::alert::ShapeChange`: read only with its alert,
        // never filtered on. Rows stored before, and log template alerts, read ''.
        "ALTER TABLE log_alerts
    ADD COLUMN shape String DEFAULT ''",
    ],
},
Migration {
    version: 11,
    name: "shape_minutes: the stories' shapes per minute, for the shape rules",
    statements: &[
        // The shape pass read a day of `stories` (ordered by trace id, so any window read
        // whole day partitions) every detection pass. Per minute of start, endpoint and
        // fingerprint, summed at insert by a view: a pass reads the minutes it has not read
        // before, and the rules' windows, never the day (docs/alerts.md, "What a pass
        // reads"). `traces` keeps the trace ids' hashes, so a story stored twice within its
        // minute still counts once, as the raw reads counted it.
        concat!(
            "CREATE TABLE IF NOT EXISTS shape_minutes (
    minute_ns UInt64,
    root_service String,
    root_operation String,
    fingerprint UInt64,
    traces AggregateFunction(uniqExact, String),
    first_ns AggregateFunction(min, UInt64),
    first_trace_id AggregateFunction(argMin, String, UInt64),
    edges AggregateFunction(any, Array(String)),
    durations AggregateFunction(quantileExact(0.95), UInt64)
) ENGINE = AggregatingMergeTree()
PARTITION BY ",
            day_of!("minute_ns"),
            "
ORDER BY (minute_ns, root_service, root_operation, fingerprint)"
        ),
        concat!("CREATE MATERIALIZED VIEW IF NOT EXISTS shape_minutes_mv TO shape_minutes AS SELECT ", shape_minutes_select!()),
        concat!("INSERT INTO shape_minutes(minute_ns, root_service, root_operation, fingerprint, traces, first_ns, first_trace_id, edges, durations) SELECT ", shape_minutes_select!()),
    ],
}];

/// Creates our database (a plain identifier, checked by `Config::validate`), on every server
/// of the cluster if there is one.
pub fn create_database_sql(database: &str, cluster: Option<&Cluster>) -> String {
    format!("CREATE DATABASE IF NOT EXISTS {database}{}", on_cluster(cluster))
}

/// Drops our database and everything in it (tests clean up with it).
pub fn drop_database_sql(database: &str, cluster: Option<&Cluster>) -> String {
    format!("DROP DATABASE IF EXISTS {database}{}", on_cluster(cluster))
}

/// Drops one day partition (`YYYYMMDD`, read back from `system.parts`) of a table: how
/// retention expires rows on every version (`store::retention`). On a cluster, the local
/// table's partition on every shard.
pub fn drop_partition_sql(table: &str, partition: &str, cluster: Option<&Cluster>) -> String {
    mutation_sql(&format!("ALTER TABLE {table} DROP PARTITION {partition}"), cluster).into_owned()
}

/// The cluster layout (`[clickhouse] cluster`, docs/scaling.md). Every table of the
/// single-server schema becomes two, generated from the same statement (no second copy of
/// any table is written by hand):
///
/// - `<table>_local`, created `ON CLUSTER` on every server, with the `Replicated` variant of
///   its engine (ZooKeeper path `/clickhouse/tables/{shard}/<database>/<table>`, replica
///   `{replica}`, both macros of each server's configuration), the same columns, partitions
///   and order;
/// - `<table>`, a `Distributed` table in front of it, sharded by the table's
///   [`SHARDING_KEYS`] entry, so every version of a row lands on one shard and `FINAL` and
///   `argMax` stay right per shard. Every insert and read goes through it, unchanged.
///
/// Statements that change a table in place (`ALTER`: mutations, partition drops) go to the
/// local tables `ON CLUSTER` ([`mutation_sql`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster's name in the servers' `remote_servers`.
    pub name: String,
    /// Our database, which names the ZooKeeper paths (18.16 has no `{database}` macro).
    pub database: String,
}

impl Cluster {
    /// The layout a configuration asks for: `None` for one server.
    pub fn from_config(config: &crate::config::ClickHouseConfig) -> Option<Cluster> {
        (!config.cluster.is_empty())
            .then(|| Cluster { name: config.cluster.clone(), database: config.database.clone() })
    }
}

/// How a table's rows are spread over the shards: an integer expression of the row's
/// identity (or of a prefix of it), so all versions of a row share a shard. Trace id for
/// spans, stories and a trace's logs; service for logs, templates, merges, hits and metrics;
/// alert id for alerts, publications and deliveries.
pub const SHARDING_KEYS: &[(&str, &str)] = &[
    ("schema_migrations", "version"),
    ("spans", "cityHash64(trace_id)"),
    ("logs", "cityHash64(service)"),
    ("log_templates", "cityHash64(service)"),
    ("log_hits", "cityHash64(service)"),
    ("stories", "cityHash64(trace_id)"),
    ("log_alerts", "alert_id"),
    ("log_alert_publications", "alert_id"),
    ("logminer_state", "cityHash64(key)"),
    ("notifier_deliveries", "alert_id"),
    ("pipeline_metrics", "cityHash64(service)"),
    ("trace_logs", "cityHash64(trace_id)"),
    ("ingest_backlog", "cityHash64(created_ns, nonce)"),
    ("log_template_merges", "cityHash64(service)"),
    ("notifier_silences", "silence_id"),
    ("notifier_resolved_deliveries", "alert_id"),
    ("spans_by_time", "cityHash64(trace_id)"),
    ("logs_by_time", "cityHash64(service)"),
    ("log_hits_by_time", "cityHash64(service)"),
    ("service_minutes", "cityHash64(service)"),
    ("shape_minutes", "cityHash64(root_service)"),
];

/// Tables whose replicated copy remembers [`DEDUP_WINDOW`] blocks instead of 18.16's 100:
/// the writer's, filled one insert per record, and the copy its view fills (docs/scaling.md).
const WIDE_DEDUP_WINDOW: &[&str] = &["spans", "logs", "trace_logs", "spans_by_time", "logs_by_time", "service_minutes"];

/// The local table behind a Distributed one.
pub fn local_table(table: &str) -> String {
    format!("{table}_local")
}

fn on_cluster(cluster: Option<&Cluster>) -> String {
    cluster.map(|c| format!(" ON CLUSTER {}", c.name)).unwrap_or_default()
}

/// A statement that changes a table in place (`ALTER TABLE <table> …`: a mutation or a
/// partition drop), as it must run: unchanged on one server; on a cluster, on the local
/// table of every server (a Distributed table has neither parts nor mutations).
pub fn mutation_sql<'a>(sql: &'a str, cluster: Option<&Cluster>) -> std::borrow::Cow<'a, str> {
    let Some(c) = cluster else { return sql.into() };
    let Some(rest) = sql.strip_prefix("ALTER TABLE ") else { return sql.into() };
    let (table, tail) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
    format!("ALTER TABLE {}.{}{}{tail}", c.database, local_table(table), on_cluster(cluster)).into()
}

/// One schema statement (a migration's, or [`MIGRATIONS_TABLE_DDL`]) as it runs: itself on
/// one server; on a cluster, what [`Cluster`] describes, generated from it.
///
/// # Panics
/// On a statement of a shape this does not know (a new kind of DDL needs a rule here; the
/// unit tests translate every migration).
pub fn ddl_statements(sql: &str, cluster: Option<&Cluster>) -> Vec<String> {
    let Some(c) = cluster else { return vec![sql.to_string()] };
    if let Some(rest) = sql.strip_prefix("CREATE TABLE IF NOT EXISTS ") {
        let (table, body) = rest.split_once(' ').expect("CREATE TABLE <name> (…)");
        let (columns, engine) = body.split_once(") ENGINE = ").expect("CREATE TABLE … ENGINE = …");
        let (engine, args_rest) = engine.split_once('(').expect("an engine with arguments");
        let (args, rest) = args_rest.split_once(')').expect("the engine's arguments end");
        let path = format!("'/clickhouse/tables/{{shard}}/{}/{table}', '{{replica}}'", c.database);
        let args = if args.is_empty() { path } else { format!("{path}, {args}") };
        let settings = if WIDE_DEDUP_WINDOW.contains(&table) {
            let join = if rest.contains("\nSETTINGS ") { ", " } else { "\nSETTINGS " };
            format!("{join}replicated_deduplication_window = {DEDUP_WINDOW}")
        } else {
            String::new()
        };
        let (db, on, local) = (&c.database, on_cluster(cluster), local_table(table));
        return vec![
            format!("CREATE TABLE IF NOT EXISTS {db}.{local}{on} {columns}) ENGINE = Replicated{engine}({args}){rest}{settings}"),
            distributed_ddl(table, c),
        ];
    }
    if let Some(rest) = sql.strip_prefix("CREATE MATERIALIZED VIEW IF NOT EXISTS ") {
        // On every server, over the Distributed tables: the view fires where the INSERT into
        // the Distributed source arrives (once per insert), and its Distributed target shards
        // the copy by its own key.
        let (view, body) = rest.split_once(' ').expect("CREATE MATERIALIZED VIEW <name> …");
        let mut words: Vec<String> = body.split(' ').map(String::from).collect();
        for i in 1..words.len() {
            if matches!(words[i - 1].trim(), "TO" | "FROM") {
                words[i] = format!("{}.{}", c.database, words[i]);
            }
        }
        return vec![format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS {}.{view}{} {}",
            c.database,
            on_cluster(cluster),
            words.join(" ")
        )];
    }
    if let Some(rest) = sql.strip_prefix("ALTER TABLE ") {
        // A column change: the local tables, then the Distributed ones, which keep their own
        // copy of the columns. 18.16 refuses an `ALTER … ON CLUSTER` of a Distributed table
        // over replicated shards, so it is created again from the changed local table (both
        // statements idempotent, so a retried migration passes them again).
        let (table, tail) = rest.split_at(rest.find(char::is_whitespace).expect("ALTER TABLE <name> …"));
        let on = on_cluster(cluster);
        return vec![
            format!("ALTER TABLE {}.{}{on}{tail}", c.database, local_table(table)),
            format!("DROP TABLE IF EXISTS {}.{table}{on}", c.database),
            distributed_ddl(table, c),
        ];
    }
    // Data statements (INSERT … SELECT) go through the Distributed tables, once.
    assert!(sql.starts_with("INSERT INTO "), "no cluster rule for: {sql}");
    vec![sql.to_string()]
}

/// The Distributed table in front of a local one, with the local table's columns.
fn distributed_ddl(table: &str, c: &Cluster) -> String {
    let (db, name) = (&c.database, &c.name);
    format!(
        "CREATE TABLE IF NOT EXISTS {db}.{table} ON CLUSTER {name} AS {db}.{local}\nENGINE = Distributed({name}, {db}, {local}, {key})",
        local = local_table(table),
        key = sharding_key(table)
    )
}

/// The sharding key of a table; every table has one (a unit test checks).
fn sharding_key(table: &str) -> &'static str {
    SHARDING_KEYS
        .iter()
        .find(|(t, _)| *t == table)
        .map(|(_, key)| *key)
        .unwrap_or_else(|| panic!("{table} has no sharding key in SHARDING_KEYS"))
}

/// Blocks remembered (docs/design.md#writer) per table for `insert_deduplication_token`.
pub const DEDUP_WINDOW: u32 = 1000;

/// Turns the token window on, one statement per table the writer fills with tokens.
///
/// A table setting applied by the writer at start (`store::insert::enable_token_window`),
/// not a migration: migrations run on every server, 18.16 has no such setting, and the
/// ALTER is idempotent and cheap. Current servers only.
///
/// On a cluster the tables are replicated, whose window is `replicated_deduplication_window`,
/// set at creation ([`ddl_statements`]): nothing to change.
pub fn token_window_statements(cluster: Option<&Cluster>) -> Vec<String> {
    if cluster.is_some() {
        return Vec::new();
    }
    ["spans", "logs"]
        .iter()
        .map(|t| format!("ALTER TABLE {t} MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"))
        .collect()
}

/// A table partitioned by day: `PARTITION BY toYYYYMMDD(toDateTime(intDiv(<column>, 1e9)))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayPartitioned {
    pub table: &'static str,
    /// The nanosecond timestamp whose day names the partition (the row structs' partition
    /// column, `TableRow::PARTITION_COLUMN`, must agree; a unit test checks).
    pub column: &'static str,
    pub retention: RetentionKey,
}

/// Tables whose partitions are days, with their partition column and the retention key
/// that governs each.
pub const DAY_PARTITIONED: &[DayPartitioned] = &[
    DayPartitioned { table: "spans", column: "start_ns", retention: RetentionKey::Spans },
    DayPartitioned { table: "logs", column: "time_ns", retention: RetentionKey::Logs },
    DayPartitioned { table: "trace_logs", column: "time_ns", retention: RetentionKey::Logs },
    DayPartitioned { table: "log_hits", column: "time_ns", retention: RetentionKey::LogHits },
    DayPartitioned { table: "stories", column: "start_ns", retention: RetentionKey::Stories },
    DayPartitioned { table: "log_alerts", column: "first_at", retention: RetentionKey::LogAlerts },
    DayPartitioned { table: "notifier_deliveries", column: "created_ns", retention: RetentionKey::NotifierDeliveries },
    DayPartitioned {
        table: "notifier_resolved_deliveries",
        column: "created_ns",
        retention: RetentionKey::NotifierDeliveries,
    },
    DayPartitioned { table: "pipeline_metrics", column: "ts_ns", retention: RetentionKey::PipelineMetrics },
    DayPartitioned { table: "ingest_backlog", column: "created_ns", retention: RetentionKey::IngestBacklog },
    DayPartitioned { table: "spans_by_time", column: "start_ns", retention: RetentionKey::Spans },
    DayPartitioned { table: "logs_by_time", column: "time_ns", retention: RetentionKey::Logs },
    DayPartitioned { table: "log_hits_by_time", column: "time_ns", retention: RetentionKey::LogHits },
    // Counts of spans and logs: kept as long as the longer of the two.
    DayPartitioned { table: "service_minutes", column: "minute_ns", retention: RetentionKey::Rollup },
    // The stories' shapes per minute: kept as long as the stories.
    DayPartitioned { table: "shape_minutes", column: "minute_ns", retention: RetentionKey::Stories },
];

/// The partition column of a day-partitioned table; `None` for the small unpartitioned ones.
pub fn partition_column(table: &str) -> Option<&'static str> {
    DAY_PARTITIONED.iter().find(|d| d.table == table).map(|d| d.column)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionKey {
    Spans,
    Logs,
    LogHits,
    Stories,
    LogAlerts,
    NotifierDeliveries,
    PipelineMetrics,
    /// The per-minute counts of spans and logs: as long as the longer-kept of the two.
    Rollup,
    /// Never expired by age: a day is dropped only once every record of it was replayed
    /// (`store::backlog::drop_drained_days`), however old it is.
    IngestBacklog,
}

impl RetentionKey {
    pub fn days(self, retention: &crate::config::RetentionConfig) -> u32 {
        match self {
            RetentionKey::Spans => retention.spans_days,
            RetentionKey::Logs => retention.logs_days,
            RetentionKey::LogHits => retention.log_hits_days,
            RetentionKey::Stories => retention.stories_days,
            RetentionKey::LogAlerts => retention.log_alerts_days,
            RetentionKey::NotifierDeliveries => retention.notifier_deliveries_days,
            RetentionKey::PipelineMetrics => retention.pipeline_metrics_days,
            RetentionKey::Rollup => retention.spans_days.max(retention.logs_days),
            RetentionKey::IngestBacklog => 0,
        }
    }
}

/// Every table the schema creates, in creation order (for checks and tests).
pub fn table_names() -> Vec<String> {
    MIGRATIONS
        .iter()
        .flat_map(|m| m.statements.iter())
        .filter_map(|s| s.strip_prefix("CREATE TABLE IF NOT EXISTS "))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

/// Every materialized view the schema creates (`trace_logs_mv`), in creation order.
pub fn view_names() -> Vec<String> {
    MIGRATIONS
        .iter()
        .flat_map(|m| m.statements.iter())
        .filter_map(|s| s.strip_prefix("CREATE MATERIALIZED VIEW IF NOT EXISTS "))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn agrees<T: TableRow>() {
        assert_eq!(T::PARTITION_COLUMN, partition_column(T::TABLE), "{}", T::TABLE);
        assert!(T::PARTITION_COLUMN.is_none_or(|c| T::COLUMN_NAMES.contains(&c)), "{}", T::TABLE);
    }

    #[test]
    fn every_row_struct_names_the_partition_column_of_its_table() {
        agrees::<SpanRow>();
        agrees::<LogRow>();
        agrees::<TemplateRow>();
        agrees::<TemplateMergeRow>();
        agrees::<HitRow>();
        agrees::<StoryRow>();
        agrees::<AlertRow>();
        agrees::<AlertPublicationRow>();
        agrees::<StateRow>();
        agrees::<DeliveryRow>();
        agrees::<SilenceRow>();
        agrees::<MetricSampleRow>();
        agrees::<MigrationRow>();
        agrees::<BacklogRow>();
        let row = SpanRow { start_ns: 7, ..Default::default() };
        assert_eq!(row.partition_ns(), Some(7));
        assert_eq!(StateRow::default().partition_ns(), None);
    }

    #[test]
    fn versions_increase_without_gaps() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            let name = migration.name;
            assert_eq!(migration.version as usize, i + 1, "migration {name} is out of order or leaves a gap");
        }
    }

    #[test]
    fn every_day_partitioned_table_exists_in_the_schema() {
        let tables = table_names();
        for DayPartitioned { table, .. } in DAY_PARTITIONED {
            assert!(tables.iter().any(|t| t == table), "{table} is not created by any migration");
        }
        assert!(tables.contains(&"notifier_deliveries".to_string()));
        assert_eq!(tables.len(), 20);
        assert_eq!(
            view_names(),
            [
                "trace_logs_mv",
                "spans_by_time_mv",
                "logs_by_time_mv",
                "log_hits_by_time_mv",
                "service_minutes_spans_mv",
                "service_minutes_logs_mv",
                "shape_minutes_mv"
            ]
        );
    }

    #[test]
    fn every_day_partitioned_table_is_partitioned_by_its_column_and_no_other_is() {
        let ddl = |table: &str| {
            MIGRATIONS
                .iter()
                .flat_map(|m| m.statements.iter())
                .find(|s| {
                    s.strip_prefix("CREATE TABLE IF NOT EXISTS ").is_some_and(|r| r.starts_with(&format!("{table} ")))
                })
                .unwrap_or_else(|| panic!("no DDL for {table}"))
        };
        for table in table_names() {
            let partition_by = ddl(&table).lines().find_map(|l| l.strip_prefix("PARTITION BY "));
            match partition_column(&table) {
                Some(column) => {
                    let want = format!("toYYYYMMDD(toDateTime(intDiv({column}, 1000000000)))");
                    assert_eq!(partition_by, Some(want.as_str()), "{table}");
                }
                None => assert_eq!(partition_by, None, "{table} is partitioned but not in DAY_PARTITIONED"),
            }
        }
    }

    #[test]
    fn the_token_window_covers_both_tables_the_writer_fills() {
        assert_eq!(
            token_window_statements(None),
            vec![
                "ALTER TABLE spans MODIFY SETTING non_replicated_deduplication_window = 1000",
                "ALTER TABLE logs MODIFY SETTING non_replicated_deduplication_window = 1000",
            ]
        );
        assert!(token_window_statements(Some(&cluster())).is_empty());
    }

    fn cluster() -> Cluster {
        Cluster { name: "tayga".into(), database: "db".into() }
    }

    #[test]
    fn one_server_runs_every_statement_as_written() {
        for s in
            std::iter::once(MIGRATIONS_TABLE_DDL).chain(MIGRATIONS.iter().flat_map(|m| m.statements.iter().copied()))
        {
            assert_eq!(ddl_statements(s, None), vec![s.to_string()]);
        }
        assert_eq!(mutation_sql("ALTER TABLE spans DROP PARTITION 1", None), "ALTER TABLE spans DROP PARTITION 1");
        assert_eq!(create_database_sql("db", None), "CREATE DATABASE IF NOT EXISTS db");
    }

    #[test]
    fn every_table_has_a_sharding_key_and_every_key_a_table() {
        let mut tables = table_names();
        tables.push("schema_migrations".into());
        let mut keyed: Vec<String> = SHARDING_KEYS.iter().map(|(t, _)| t.to_string()).collect();
        tables.sort();
        keyed.sort();
        assert_eq!(tables, keyed);
    }

    #[test]
    fn a_table_on_the_cluster_is_a_replicated_local_table_behind_a_distributed_one() {
        let spans = ddl_statements(MIGRATIONS[0].statements[0], Some(&cluster()));
        assert_eq!(spans.len(), 2);
        assert!(
            spans[0].starts_with("CREATE TABLE IF NOT EXISTS db.spans_local ON CLUSTER tayga (\n    trace_id String,"),
            "{}",
            spans[0]
        );
        assert!(spans[0].contains(") ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/spans', '{replica}', ingest_ns)\nPARTITION BY toYYYYMMDD(toDateTime(intDiv(start_ns, 1000000000)))\nORDER BY (trace_id, span_id)\nSETTINGS replicated_deduplication_window = 1000"), "{}", spans[0]);
        assert_eq!(spans[1], "CREATE TABLE IF NOT EXISTS db.spans ON CLUSTER tayga AS db.spans_local\nENGINE = Distributed(tayga, db, spans_local, cityHash64(trace_id))");
        let hits = ddl_statements(MIGRATIONS[0].statements[3], Some(&cluster()));
        assert!(
            hits[0].contains(
                "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/log_hits', '{replica}')\n"
            ),
            "{}",
            hits[0]
        );
        assert!(!hits[0].contains("SETTINGS"));
        let migrations = ddl_statements(MIGRATIONS_TABLE_DDL, Some(&cluster()));
        assert!(migrations[0].contains("ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db/schema_migrations', '{replica}') ORDER BY version"), "{}", migrations[0]);
    }

    #[test]
    fn the_view_the_alter_and_the_mutations_name_the_right_tables_on_the_cluster() {
        let c = cluster();
        assert_eq!(
            ddl_statements(MIGRATIONS[1].statements[1], Some(&c)),
            vec!["CREATE MATERIALIZED VIEW IF NOT EXISTS db.trace_logs_mv ON CLUSTER tayga TO db.trace_logs AS\nSELECT * FROM db.logs WHERE trace_id != ''"]
        );
        let alter = ddl_statements(MIGRATIONS[4].statements[0], Some(&c));
        assert!(
            alter[0].starts_with(
                "ALTER TABLE db.notifier_deliveries_local ON CLUSTER tayga\n    ADD COLUMN manual_retries"
            ),
            "{}",
            alter[0]
        );
        assert_eq!(alter[1], "DROP TABLE IF EXISTS db.notifier_deliveries ON CLUSTER tayga");
        assert!(
            alter[2].starts_with(
                "CREATE TABLE IF NOT EXISTS db.notifier_deliveries ON CLUSTER tayga AS db.notifier_deliveries_local"
            ),
            "{}",
            alter[2]
        );
        assert_eq!(
            drop_partition_sql("spans", "20261201", Some(&c)),
            "ALTER TABLE db.spans_local ON CLUSTER tayga DROP PARTITION 20261201"
        );
        assert_eq!(
            mutation_sql("ALTER TABLE logminer_state DELETE WHERE key = ?", Some(&c)),
            "ALTER TABLE db.logminer_state_local ON CLUSTER tayga DELETE WHERE key = ?"
        );
        assert_eq!(drop_database_sql("db", Some(&c)), "DROP DATABASE IF EXISTS db ON CLUSTER tayga");
    }

    #[test]
    fn a_table_with_its_own_settings_gets_the_dedup_window_in_the_same_clause_on_the_cluster() {
        let ddl = MIGRATIONS
            .iter()
            .flat_map(|m| m.statements.iter())
            .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS spans_by_time "))
            .unwrap();
        let local = &ddl_statements(ddl, Some(&cluster()))[0];
        assert!(
            local.ends_with(
                "ORDER BY (bucket, service, start_ns, trace_id, span_id)\nSETTINGS index_granularity = 2048, replicated_deduplication_window = 1000"
            ),
            "{local}"
        );
        let view = MIGRATIONS
            .iter()
            .flat_map(|m| m.statements.iter())
            .find(|s| s.starts_with("CREATE MATERIALIZED VIEW IF NOT EXISTS service_minutes_spans_mv "))
            .unwrap();
        let view = &ddl_statements(view, Some(&cluster()))[0];
        assert!(
            view.contains(" TO db.service_minutes AS SELECT ") && view.contains(" FROM db.spans GROUP BY "),
            "{view}"
        );
    }

    #[test]
    fn no_feature_missing_from_clickhouse_18_16_is_used() {
        // INFRA.md lists what 18.16 lacks; any of these in DDL breaks our test server.
        let forbidden = ["DateTime64", "Map(", " TTL ", "CODEC", "INDEX ", "IF NOT EXISTS ADD", "LowCardinality"];
        for m in MIGRATIONS {
            for s in m.statements {
                for f in forbidden {
                    assert!(!s.contains(f), "migration {} uses {f}", m.version);
                }
            }
        }
    }
}
