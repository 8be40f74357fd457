//! The ClickHouse layer against the real server: every row struct matches its table,
//! retention drops only expired day partitions, and every statement also runs on current
//! ClickHouse (chdb-core).

use crate::common;

use common::TestEnv;
use tayga::store::*;

const DAY_NS: u64 = 86_400 * 1_000_000_000;

fn strings(prefix: &str) -> Vec<String> {
    vec![format!("{prefix}-a"), format!("{prefix}-b")]
}

/// Inserts `row` through its struct and reads it back through the same struct.
async fn round_trip<T: TableRow + PartialEq + std::fmt::Debug + Clone>(store: &Store, row: T) {
    store.insert(std::slice::from_ref(&row)).await.unwrap_or_else(|e| panic!("insert into {}: {e}", T::TABLE));
    let back: Vec<T> =
        store.select::<T>("").fetch_all().await.unwrap_or_else(|e| panic!("select from {}: {e}", T::TABLE));
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
            error: 1,
            error_spans: 2,
            log_count: 3,
            truncated: 1,
            version_ns: now + 1,
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
    let migrations: Vec<MigrationRow> = store.select::<MigrationRow>("").fetch_all().await.unwrap();
    assert_eq!(migrations.len(), 1);
    assert_eq!(migrations[0].version, 1);
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
    assert_eq!(tables, vec!["spans", "notifier_deliveries"], "{dropped:?}");

    let spans: Vec<SpanRow> = store.select::<SpanRow>("ORDER BY span_id").fetch_all().await.unwrap();
    let ids: Vec<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, vec!["recent", "today"]);
    let deliveries: Vec<DeliveryRow> = store.select::<DeliveryRow>("").fetch_all().await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].target, "kept");

    // A second sweep finds nothing more to drop.
    assert!(retention::drop_expired(&store, &retention, now_ns / 1_000_000_000).await.unwrap().is_empty());
}

/// Every statement Tayga runs against ClickHouse also runs on a current engine.
#[test]
fn every_statement_runs_on_current_clickhouse_in_chdb() {
    let mut statements: Vec<String> = migrate::all_statements().into_iter().map(String::from).collect();
    statements.push(
        retention::EXPIRED_PARTITIONS_SQL
            .replacen('?', "'tayga_check'", 1)
            .replacen('?', "'spans'", 1)
            .replacen('?', "1764460800", 1)
            .replacen('?', "7", 1),
    );
    let items: Vec<serde_json::Value> = statements.into_iter().map(serde_json::Value::String).collect();
    common::run_in_chdb("the schema and retention statements", &items);
}
