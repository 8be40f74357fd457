//! The ClickHouse layer against the real server: every row struct matches its table,
//! retention drops only expired day partitions, and every statement also runs on current
//! ClickHouse (chdb-core).

use crate::common;

use common::TestEnv;
use tayga::model::attributes;
use tayga::store::*;

const DAY_NS: u64 = 86_400 * 1_000_000_000;

fn strings(prefix: &str) -> Vec<String> {
    vec![format!("{prefix}-a"), format!("{prefix}-b")]
}

/// Inserts `row` through its struct and reads it back through the same struct.
async fn round_trip<T: TableRow + PartialEq + std::fmt::Debug + Clone>(store: &Store, row: T) {
    store.insert(std::slice::from_ref(&row)).await.unwrap_or_else(|e| panic!("insert into {}: {e}", T::TABLE));
    let back: Vec<T> =
        store.select_for_tests::<T>("").fetch_all().await.unwrap_or_else(|e| panic!("select from {}: {e}", T::TABLE));
    assert_eq!(back, vec![row], "{} does not read back what was written", T::TABLE);
}

#[tokio::test]
async fn every_row_struct_round_trips_through_its_table() {
    let env = TestEnv::new("rows");
    let store = env.migrated_store().await;
    let now = now_ns();
    // Every field differs from its default and from its neighbours, so a swapped or
    // missing column shows up as a mismatch (RowBinary is positional).
    round_trip(
        &store,
        SpanRow {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            parent_span_id: "00f067aa0ba902b7".into(),
            service: "checkout".into(),
            name: "GET /cart".into(),
            kind: 2,
            start_ns: now,
            end_ns: now + 5,
            duration_ns: 5,
            status_code: 2,
            status_message: "boom".into(),
            attr_keys: strings("ak"),
            attr_values: strings("av"),
            resource_keys: strings("rk"),
            resource_values: strings("rv"),
            scope_name: "io.otel".into(),
            event_count: 3,
            link_count: 4,
            ingest_ns: now + 6,
            trace_state: "vendor=1".into(),
            flags: 0x301,
            dropped_attributes_count: 7,
            dropped_events_count: 8,
            dropped_links_count: 9,
            attr_types: vec![3, 4],
            resource_types: vec![1, 7],
            resource_schema_url: "https://opentelemetry.io/schemas/1.21.0".into(),
            scope_version: "1.2.3".into(),
            scope_attributes: r#"[{"key":"s","value":{"intValue":1}}]"#.into(),
            scope_schema_url: "https://opentelemetry.io/schemas/1.22.0".into(),
            event_time_ns: vec![now + 1, now + 2],
            event_names: strings("en"),
            event_attributes: strings("ea"),
            event_dropped_attributes: vec![10, 11],
            link_trace_ids: strings("lt"),
            link_span_ids: strings("ls"),
            link_trace_states: strings("lts"),
            link_attributes: strings("la"),
            link_flags: vec![12, 13],
            link_dropped_attributes: vec![14, 15],
        },
    )
    .await;
    round_trip(
        &store,
        LogRow {
            log_id: u64::MAX - 1,
            service: "checkout".into(),
            time_ns: now,
            observed_ns: now + 1,
            severity_number: 17,
            severity_text: "ERROR".into(),
            body: "payment failed: card 4242 declined ✓".into(),
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            attr_keys: strings("ak"),
            attr_values: strings("av"),
            resource_keys: strings("rk"),
            resource_values: strings("rv"),
            scope_name: "logger".into(),
            ingest_ns: now + 2,
            event_name: "payment.failed".into(),
            flags: 1,
            dropped_attributes_count: 2,
            attr_types: vec![5, 6],
            resource_types: vec![1, 2],
            body_type: 7,
            body_value: r#"{"kvlistValue":{"values":[]}}"#.into(),
            resource_schema_url: "https://opentelemetry.io/schemas/1.21.0".into(),
            scope_version: "0.9".into(),
            scope_attributes: r#"[{"key":"l","value":{"boolValue":true}}]"#.into(),
            scope_schema_url: "https://opentelemetry.io/schemas/1.22.0".into(),
        },
    )
    .await;
    round_trip(
        &store,
        TemplateRow {
            service: "checkout".into(),
            template_id: 42,
            template: "payment failed: card <*> declined".into(),
            count: 7,
            first_seen_ns: now,
            last_seen_ns: now + 1,
            masking_version: "mask-1".into(),
            updated_ns: now + 2,
        },
    )
    .await;
    round_trip(&store, HitRow { service: "checkout".into(), log_id: 9, template_id: 42, time_ns: now }).await;
    round_trip(
        &store,
        StoryRow {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            fingerprint: 77,
            root_service: "frontend".into(),
            root_operation: "GET /".into(),
            start_ns: now,
            duration_ns: 1234,
            span_count: 12,
            services: strings("svc"),
            edges: strings("edge"),
            error: true,
            error_spans: 2,
            log_count: 3,
            truncated: true,
            version_ns: now + 1,
            exception_type: "CardError".into(),
            exception_message: "card 4242 declined ✓".into(),
        },
    )
    .await;
    round_trip(
        &store,
        AlertRow {
            alert_id: 11,
            kind: "spike".into(),
            service: "checkout".into(),
            template_id: 42,
            template: "payment failed: card <*> declined".into(),
            first_at: now,
            last_at: now + 60,
            count: 500,
            baseline: 12.5,
            threshold: 62.5,
            stored_ns: now + 61,
            updated_ns: now + 62,
            resolved_at: 0,
            shape: String::new(),
        },
    )
    .await;
    round_trip(
        &store,
        TemplateMergeRow {
            service: "checkout".into(),
            absorbed_id: u64::MAX - 3,
            survivor_id: 42,
            merged_ns: now + 7,
            masking_version: "tayga-mask-2".into(),
        },
    )
    .await;
    round_trip(&store, AlertPublicationRow { alert_id: 11, alert_updated_ns: now + 62, published_ns: now + 63 }).await;
    round_trip(
        &store,
        StateRow { key: "new_template_watermark_ns:p3".into(), value: now.to_string(), updated_ns: now },
    )
    .await;
    round_trip(
        &store,
        DeliveryRow {
            alert_id: 11,
            target: "ops".into(),
            status: "pending".into(),
            attempts: 3,
            last_error: "HTTP 503".into(),
            created_ns: now,
            updated_ns: now + 1,
            manual_retries: 2,
            retried_ns: now + 1,
            retried_by: "cli:ops@host".into(),
            silence_id: 12,
        },
    )
    .await;
    round_trip(
        &store,
        SilenceRow {
            silence_id: 12,
            service: "checkout".into(),
            kind: "spike".into(),
            template_id: 5,
            starts_ns: now,
            ends_ns: now + 2,
            comment: "deploy".into(),
            created_by: "api".into(),
            created_ns: now,
            expired_by: "cli:ops@host".into(),
            updated_ns: now + 1,
        },
    )
    .await;
    round_trip(
        &store,
        MetricSampleRow {
            ts_ns: now,
            service: "logminer".into(),
            instance: "10.0.0.7:9403".into(),
            metric: "tayga_logminer_templates".into(),
            label_keys: strings("lk"),
            label_values: strings("lv"),
            value: 3.25,
        },
    )
    .await;
    // schema_migrations was written by migrate itself: read it through its struct.
    let migrations: Vec<MigrationRow> = store.select_for_tests::<MigrationRow>("").fetch_all().await.unwrap();
    assert_eq!(migrations.len(), schema::MIGRATIONS.len());
    assert_eq!(migrations.iter().map(|m| m.version).max(), schema::MIGRATIONS.last().map(|m| m.version));
    // trace_logs is a copy of every traced log, filled by a materialized view and read
    // through LogRow: the inserted log comes back whole.
    let logs: Vec<LogRow> = store.select_for_tests::<LogRow>("").fetch_all().await.unwrap();
    let copies: Vec<LogRow> =
        store.query_for_tests("SELECT ?fields FROM trace_logs").fetch_all::<LogRow>().await.unwrap();
    assert_eq!(copies, logs.iter().filter(|l| !l.trace_id.is_empty()).cloned().collect::<Vec<_>>());
    // So is logs_by_time, of every log, with every column.
    let by_time: Vec<LogRow> =
        store.query_for_tests("SELECT ?fields FROM logs_by_time").fetch_all::<LogRow>().await.unwrap();
    assert_eq!(by_time, logs);
}

#[tokio::test]
async fn retention_drops_only_expired_day_partitions() {
    let env = TestEnv::new("retention");
    let store = env.migrated_store().await;
    let now_ns = now_ns();
    let span = |start_ns: u64, span_id: &str| SpanRow {
        trace_id: "t".into(),
        span_id: span_id.into(),
        start_ns,
        ..Default::default()
    };
    store
        .insert(&[span(now_ns - 10 * DAY_NS, "old"), span(now_ns - DAY_NS, "recent"), span(now_ns, "today")])
        .await
        .unwrap();
    let delivery = |created_ns: u64, target: &str| DeliveryRow {
        alert_id: 1,
        target: target.into(),
        created_ns,
        ..Default::default()
    };
    store.insert(&[delivery(now_ns - 31 * DAY_NS, "expired"), delivery(now_ns - 29 * DAY_NS, "kept")]).await.unwrap();

    let retention = tayga::config::RetentionConfig::default(); // spans 7 days, deliveries 30
    let dropped = retention::drop_expired(&store, &retention, now_ns / 1_000_000_000).await.unwrap();
    let tables: Vec<&str> = dropped.iter().map(|d| d.table.as_str()).collect();
    // The time-ordered copy of the spans and their per-minute counts expire with them.
    assert_eq!(tables, vec!["spans", "notifier_deliveries", "spans_by_time", "service_minutes"], "{dropped:?}");

    let spans: Vec<SpanRow> = store.select_for_tests::<SpanRow>("ORDER BY span_id").fetch_all().await.unwrap();
    let ids: Vec<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, vec!["recent", "today"]);
    let deliveries: Vec<DeliveryRow> = store.select_for_tests::<DeliveryRow>("").fetch_all().await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].target, "kept");

    // A second sweep finds nothing more to drop.
    assert!(retention::drop_expired(&store, &retention, now_ns / 1_000_000_000).await.unwrap().is_empty());
}

/// The registry: every statement Tayga runs, on ClickHouse 18.16 (all but the token path,
/// which 18.16 lacks) and on a current engine (chdb-core), in its running order on a
/// database that does not exist yet.
#[tokio::test]
async fn every_registered_statement_runs_on_18_16_and_in_chdb() {
    let env = TestEnv::new("registry");
    let store = env.store();
    let mut default_db = env.config.clickhouse.clone();
    default_db.database = "default".into();
    let server = Store::new(&default_db);
    let all = statements::all(store.database());
    let mut ran = 0;
    for s in all.iter().filter(|s| !s.current_only) {
        let target = if s.server_level { &server } else { &store };
        target
            .query_for_tests(&s.bound())
            .execute()
            .await
            .unwrap_or_else(|e| panic!("{} failed on ClickHouse 18.16: {e}\n{}", s.name, s.bound()));
        ran += 1;
    }
    assert_eq!(all.len() - ran, 4, "only the token window and the token inserts are left to current servers");
    let left: u64 = server
        .query_for_tests("SELECT count() FROM system.databases WHERE name = ?")
        .bind(store.database())
        .fetch_one()
        .await
        .unwrap();
    assert_eq!(left, 0, "the run ends with the database's drop");

    let items: Vec<serde_json::Value> =
        statements::all("tayga_check").iter().map(|s| serde_json::Value::String(s.bound())).collect();
    common::run_in_chdb("the registered statements", &items);
}

const MANY_DAYS: u64 = 240;

fn span_on_day(day: u64) -> SpanRow {
    SpanRow { trace_id: "t".into(), span_id: format!("s{day:03}"), start_ns: day * DAY_NS + 1, ..Default::default() }
}

/// Current ClickHouse refuses an INSERT block over more than 100 partitions; the insert
/// path cuts rows over 240 days into inserts the engine accepts, and keeps every row.
#[test]
fn rows_over_many_days_are_cut_into_inserts_current_clickhouse_accepts() {
    let rows: Vec<SpanRow> = (0..MANY_DAYS).map(span_on_day).collect();
    let days: Vec<u64> = rows.iter().map(|r| r.start_ns / DAY_NS).collect();
    let groups = insert::partition_groups(&days, insert::MAX_UTC_DAYS_PER_INSERT);
    assert!(groups.len() > 1);
    let mut items: Vec<serde_json::Value> =
        migrate::all_statements(None).into_iter().map(serde_json::Value::from).collect();
    for (g, group) in groups.iter().enumerate() {
        let group_rows: Vec<SpanRow> = group.iter().map(|&i| rows[i].clone()).collect();
        items
            .push(serde_json::Value::String(statements::Statement::insert(format!("g{g}"), &group_rows, None).bound()));
    }
    items.push(serde_json::json!({"sql": "SELECT count(), uniqExact(span_id) FROM spans", "expect": "240,240"}));
    common::run_in_chdb("inserts over many days", &items);
}

#[tokio::test]
async fn rows_over_many_days_are_each_stored_once() {
    let env = TestEnv::new("many_days");
    let store = env.migrated_store().await;
    let rows: Vec<SpanRow> = (0..MANY_DAYS).map(span_on_day).collect();
    store.insert(&rows).await.unwrap();
    let back: Vec<SpanRow> = store.select_for_tests::<SpanRow>("ORDER BY span_id").fetch_all().await.unwrap();
    assert_eq!(back, rows);
    let partitions: u64 = store
        .query_for_tests(
            "SELECT uniqExact(partition) FROM system.parts WHERE database = ? AND table = 'spans' AND active",
        )
        .bind(store.database())
        .fetch_one()
        .await
        .unwrap();
    assert_eq!(partitions, MANY_DAYS);
}

fn delivery(status: &str, attempts: u32, created_ns: u64, updated_ns: u64) -> DeliveryRow {
    DeliveryRow {
        alert_id: 11,
        target: "ops".into(),
        status: status.into(),
        attempts,
        last_error: format!("try {attempts}"),
        created_ns,
        updated_ns,
        ..Default::default()
    }
}

fn story(trace_id: &str, span_count: u32, version_ns: u64) -> StoryRow {
    StoryRow { trace_id: trace_id.into(), span_count, start_ns: 1, version_ns, ..Default::default() }
}

/// The notifier's and the assembler's reads give the same answers on both engines: the
/// newest version of each delivery (argMax, no alias shadowing a column) and of each story.
#[tokio::test]
async fn the_deliveries_and_stories_reads_answer_alike_on_18_16_and_in_chdb() {
    let deliveries_rows = [delivery("pending", 1, 100, 100), delivery("delivered", 2, 100, 300)];
    let story_rows = [story("t1", 3, 10), story("t1", 5, 20), story("t2", 1, 10)];
    let spans = [SpanRow { trace_id: "t1".into(), span_id: "a".into(), ..Default::default() }];

    let env = TestEnv::new("reads_alike");
    let store = env.migrated_store().await;
    store.insert(&deliveries_rows).await.unwrap();
    store.insert(&story_rows).await.unwrap();
    store.insert(&spans).await.unwrap();
    let latest = deliveries::latest_for_alert(&store, 11, tayga::wire::alert::AlertState::Firing).await.unwrap();
    assert_eq!(latest, vec![DeliveryRow { created_ns: 100, ..deliveries_rows[1].clone() }]);
    let counts = stories::stored_span_counts(&store, &["t1", "t2", "t3"]).await.unwrap();
    assert_eq!(counts, std::collections::HashMap::from([("t1".to_string(), 5), ("t2".to_string(), 1)]));
    assert_eq!(stories::spans_of_traces(&store, &["t1", "t2"]).await.unwrap(), spans.to_vec());

    let mut items: Vec<serde_json::Value> =
        migrate::all_statements(None).into_iter().map(serde_json::Value::from).collect();
    items.push(statements::Statement::insert("d", &deliveries_rows, None).bound().into());
    items.push(statements::Statement::insert("s", &story_rows, None).bound().into());
    let latest =
        statements::Statement::new("l", deliveries::latest_by_alert_sql(tayga::wire::alert::AlertState::Firing))
            .binds(["11"]);
    items.push(
        serde_json::json!({"sql": latest.bound(), "expect": "11,\"ops\",\"delivered\",2,\"try 2\",100,300,0,0,\"\",0"}),
    );
    let counts = statements::Statement::new("c", stories::span_counts_sql(3)).binds(["'t1'", "'t2'", "'t3'"]);
    items.push(serde_json::json!({
        "sql": format!("SELECT * FROM ({}) ORDER BY trace_id", counts.bound()),
        "expect": "\"t1\",5\n\"t2\",1",
    }));
    common::run_in_chdb("the deliveries and stories reads", &items);
}

/// The writer's rows come from the records' bytes, encoded without the row structs
/// (`otlp::rowbinary`); read back through the structs they are `flatten`'s rows, on a
/// request with every kind of value, and over many days (cut into several inserts).
#[tokio::test]
async fn rows_encoded_from_otlp_bytes_read_back_as_the_flattened_rows() {
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, ArrayValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
    use prost::Message;
    use tayga::otlp::rowbinary::{record_rows, TableRows};
    use tayga::otlp::synth::{Shape, Synth};
    use tayga::wire::record::{RawRecord, SignalKind};

    let env = TestEnv::new("encoded");
    let store = env.migrated_store().await;
    let mut synth = Synth::new(
        Shape { services: 3, traces_per_request: 30, spans_per_trace: 12, logs_per_request: 40, exception_every: 0 },
        7,
    );
    let mut traces = synth.traces(now_ns());
    let odd = [
        Value::IntValue(-3),
        Value::DoubleValue(0.1),
        Value::BoolValue(true),
        Value::BytesValue(vec![1, 255]),
        Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(Value::StringValue("x".into())) }] }),
    ];
    for (i, span) in
        traces.resource_spans.iter_mut().flat_map(|r| &mut r.scope_spans).flat_map(|s| &mut s.spans).enumerate()
    {
        span.attributes.push(KeyValue {
            key: "odd".into(),
            value: Some(AnyValue { value: Some(odd[i % odd.len()].clone()) }),
            ..Default::default()
        });
        // Spread over many days: the insert is cut by partition days, like struct rows.
        span.start_time_unix_nano = (i as u64 % MANY_DAYS) * DAY_NS + 1;
        // Events (an exception's among them) and links, whose columns are arrays of their own.
        if i % 3 == 0 {
            span.events.push(Event {
                time_unix_nano: span.start_time_unix_nano + 1,
                name: "exception".into(),
                attributes: vec![tayga::otlp::string_attr("exception.message", &format!("boom {i}"))],
                dropped_attributes_count: 1,
            });
            span.links.push(Link {
                trace_id: vec![(i as u8).wrapping_add(1); 16],
                span_id: vec![7; 8],
                trace_state: "k=v".into(),
                attributes: vec![tayga::otlp::string_attr("why", "fan-in")],
                dropped_attributes_count: 0,
                flags: 0x301,
            });
            span.trace_state = "a=b".into();
            span.dropped_events_count = 2;
        }
    }
    let mut logs = synth.logs(now_ns());
    for (i, log) in
        logs.resource_logs.iter_mut().flat_map(|r| &mut r.scope_logs).flat_map(|s| &mut s.log_records).enumerate()
    {
        if i % 4 == 0 {
            log.body = Some(AnyValue { value: Some(odd[4].clone()) });
            log.event_name = "browser.click".into();
        }
    }
    let bytes = traces.encode_to_vec();
    let TableRows::Spans(spans) =
        record_rows(&RawRecord { kind: SignalKind::Traces, ingest_ns: 5, value: &bytes }).unwrap()
    else {
        panic!("traces give spans")
    };
    let bytes = logs.encode_to_vec();
    let TableRows::Logs(log_rows) =
        record_rows(&RawRecord { kind: SignalKind::Logs, ingest_ns: 5, value: &bytes }).unwrap()
    else {
        panic!("logs give logs")
    };
    insert::insert_encoded(&store, &[&spans], None).await.unwrap();
    insert::insert_encoded(&store, &[&log_rows], None).await.unwrap();

    let mut want = tayga::otlp::flatten::span_rows(&traces, 5);
    want.sort_by(|a, b| (&a.trace_id, &a.span_id).cmp(&(&b.trace_id, &b.span_id)));
    let back: Vec<SpanRow> = store.select_for_tests::<SpanRow>("ORDER BY trace_id, span_id").fetch_all().await.unwrap();
    assert!(want.len() > 10, "the request has {} spans", want.len());
    assert_eq!(back, want);
    let mut want = tayga::otlp::flatten::log_rows(&logs, 5);
    want.sort_by_key(|r| r.log_id);
    let back: Vec<LogRow> = store.select_for_tests::<LogRow>("ORDER BY log_id").fetch_all().await.unwrap();
    assert!(!want.is_empty());
    assert_eq!(back, want);
}

/// An install migrated before spans kept their events and links upgrades in place with
/// `tayga migrate`: its rows read back whole, with no events, links or types, and the rows
/// written after it (through `logs` and its `trace_logs` copy) keep everything.
#[tokio::test]
async fn an_install_before_events_and_links_upgrades_in_place_and_its_rows_read_back_empty() {
    use tayga::store::query::traces::trace_logs;
    let env = TestEnv::new("upgrade6");
    let http = reqwest::Client::new();
    let server = |sql: String| {
        let request = http.post(&env.config.clickhouse.url).body(sql);
        async move {
            let answer = request.send().await.expect("ClickHouse answers");
            let status = answer.status();
            let text = answer.text().await.unwrap();
            assert!(status.is_success(), "{text}");
        }
    };
    let db = &env.config.clickhouse.database;
    server(format!("CREATE DATABASE {db}")).await;
    let store = env.store();
    store.query_for_tests(schema::MIGRATIONS_TABLE_DDL).execute().await.unwrap();
    for migration in schema::MIGRATIONS.iter().filter(|m| m.version < 6) {
        for sql in migration.statements {
            store.query_for_tests(sql).execute().await.unwrap();
        }
        store
            .insert(&[MigrationRow { version: migration.version, name: migration.name.into(), applied_ns: 1 }])
            .await
            .unwrap();
    }
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let now = now_ns();
    // Rows as the release before stored them: its columns only.
    store
        .query_for_tests(&format!(
            "INSERT INTO spans (trace_id, span_id, service, name, start_ns, end_ns, attr_keys, attr_values, \
             event_count, link_count, ingest_ns) VALUES ('{trace}', 'b7ad6b7169203331', 'api', 'GET /', {now}, {}, \
             ['n'], ['42'], 2, 1, {now})",
            now + 5
        ))
        .execute()
        .await
        .unwrap();
    store
        .query_for_tests(&format!(
            "INSERT INTO logs (log_id, service, time_ns, body, trace_id, ingest_ns) \
             VALUES (7, 'api', {now}, 'before', '{trace}', {now})"
        ))
        .execute()
        .await
        .unwrap();

    let (out, stdout, stderr) = common::run(env.tayga().args(["migrate"]));
    assert!(out.status.success(), "tayga migrate: {stdout}{stderr}");
    assert!(stdout.contains('6'), "migration 6 is applied: {stdout}");

    let spans = read::fetch_trace(&store, trace).await.unwrap();
    assert_eq!(spans.len(), 1);
    let old = &spans[0];
    assert_eq!((old.name.as_str(), old.event_count, old.link_count), ("GET /", 2, 1), "what was stored stays");
    assert!(old.event_names.is_empty() && old.event_time_ns.is_empty() && old.event_attributes.is_empty());
    assert!(old.link_trace_ids.is_empty() && old.link_span_ids.is_empty() && old.link_flags.is_empty());
    assert!(old.attr_types.is_empty() && old.trace_state.is_empty() && old.scope_version.is_empty());
    assert_eq!(
        serde_json::Value::Object(attributes::typed_attributes(&old.attr_keys, &old.attr_values, &old.attr_types)),
        serde_json::json!({"n": "42"}),
        "an untyped value reads as the string it was"
    );
    let logs = trace_logs(&store, trace).await.unwrap();
    assert_eq!(logs.len(), 1, "the log copied to trace_logs before the upgrade");
    assert_eq!((logs[0].body.as_str(), logs[0].body_type, logs[0].event_name.as_str()), ("before", 0, ""));

    // A log written now goes through the view into trace_logs with its new columns.
    let new = LogRow {
        log_id: 8,
        service: "api".into(),
        time_ns: now + 1,
        body: "after".into(),
        trace_id: trace.into(),
        event_name: "order.placed".into(),
        body_type: attributes::value_type::STRING,
        flags: 1,
        ingest_ns: now,
        ..Default::default()
    };
    store.insert(std::slice::from_ref(&new)).await.unwrap();
    let logs = trace_logs(&store, trace).await.unwrap();
    assert_eq!(logs.len(), 2);
    assert_eq!(logs[1], new, "trace_logs keeps every new column of logs");
}
