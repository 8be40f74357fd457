//! Tayga on a ClickHouse cluster (`[clickhouse] cluster`, docs/scaling.md): two ClickHouse
//! 18.16 servers as two shards of one replica each, with ZooKeeper, started by
//! `scripts/services.sh cluster-start` for each test on ports of its own (a test stops a
//! server; the shared single server is never touched). Every registered statement runs on
//! the cluster; replicated tables deduplicate a record's block read twice on 18.16 (the
//! writer's per-record path) and not a batch cut differently; retention drops partitions on
//! every shard; the writer's outage test and the whole-topic re-read hold with one server
//! stopped and restarted mid-run.
//!
//! Current ClickHouse cannot be tested here as a cluster: chdb-core runs in-process, with no
//! ZooKeeper, Replicated tables or remote servers. There the writer uses tokens, which
//! replicated tables honour within `replicated_deduplication_window` (docs/scaling.md).

use crate::common;
use crate::writer_support;

use std::process::Command;
use std::time::Duration;

use common::{wait_for, TestEnv};
use tayga::store::{insert, migrate, read, retention, schema, statements, SpanRow, Store};
use writer_support::*;

const WAIT: Duration = Duration::from_secs(90);
const CLUSTER: &str = "tayga";

/// ZooKeeper and two ClickHouse servers of this test's own, stopped when dropped.
pub(crate) struct PrivateCluster {
    home: tempfile::TempDir,
    base: u16,
}

impl PrivateCluster {
    /// Ports from `base`: node N answers HTTP on base+N and native TCP on base+10+N (its
    /// interserver port is that + 9); ZooKeeper is base+30. Below the ephemeral range, as
    /// `common::PrivateClickHouse` explains.
    pub(crate) fn start() -> PrivateCluster {
        let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        let seed = std::process::id() as u64
            ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let base = (0..500u64)
            .map(|a| 12_000 + ((seed.wrapping_mul(6364136223846793005).wrapping_add(a * 7919)) % 7_000) as u16)
            .find(|&b| [1, 2, 11, 12, 20, 21, 30].iter().all(|o| free(b + o)))
            .expect("free ports for a private cluster between 12000 and 19031");
        let cluster = PrivateCluster { home: tempfile::tempdir().unwrap(), base };
        cluster.services(&["cluster-start"]);
        cluster
    }

    fn services(&self, args: &[&str]) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/services.sh");
        let out = Command::new(script)
            .args(args)
            .env("TAYGA_HOME", self.home.path())
            .env("TAYGA_CLUSTER_HTTP_BASE", self.base.to_string())
            .env("TAYGA_CLUSTER_TCP_BASE", (self.base + 10).to_string())
            .env("TAYGA_ZK_PORT", (self.base + 30).to_string())
            .output()
            .expect("scripts/services.sh runs");
        assert!(out.status.success(), "services.sh {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn url(&self, node: u16) -> String {
        format!("http://127.0.0.1:{}", self.base + node)
    }

    /// A test environment whose store is this cluster, reached through node 1.
    pub(crate) fn env(&self, test: &str) -> TestEnv {
        let mut env = TestEnv::new(test);
        env.config.clickhouse.url = self.url(1);
        env.config.clickhouse.cluster = CLUSTER.into();
        env
    }

    /// The same database on one node alone, to look at its shard's local tables.
    fn node_store(&self, env: &TestEnv, node: u16) -> Store {
        let mut config = env.config.clickhouse.clone();
        config.url = self.url(node);
        config.cluster = String::new();
        Store::new(&config)
    }

    fn stop_node(&self, node: u16) {
        self.services(&["cluster-stop-node", &node.to_string()]);
    }

    fn start_node(&self, node: u16) {
        self.services(&["cluster-start-node", &node.to_string()]);
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.services(&["cluster-stop"])));
    }
}

async fn count(store: &Store, sql: &str) -> u64 {
    store.query_for_tests(sql).fetch_one::<u64>().await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The registry on the cluster: the schema in its cluster form, every read through the
/// Distributed tables, the mutations and partition drops on the local tables, the
/// cluster-wide `system.parts` and `system.mutations` reads, and the database's drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_registered_statement_runs_on_the_cluster() {
    let cluster = PrivateCluster::start();
    let env = cluster.env("cluster_registry");
    let store = env.store();
    let mut default_db = env.config.clickhouse.clone();
    default_db.database = "default".into();
    let server = Store::new(&default_db);
    let all = statements::all_on(store.database(), store.cluster());
    assert!(all.iter().any(|s| s.cluster_only), "the cluster's own reads are in the list");
    for s in all.iter().filter(|s| !s.current_only) {
        let target = if s.server_level { &server } else { &store };
        target
            .query_for_tests(&s.bound())
            .execute()
            .await
            .unwrap_or_else(|e| panic!("{} failed on the 18.16 cluster: {e}\n{}", s.name, s.bound()));
    }
    for node in [1, 2] {
        let mut config = default_db.clone();
        config.url = cluster.url(node);
        config.cluster = String::new();
        let left = Store::new(&config)
            .query_for_tests("SELECT count() FROM system.databases WHERE name = ?")
            .bind(store.database())
            .fetch_one::<u64>()
            .await
            .unwrap();
        assert_eq!(left, 0, "the database's drop reached node {node}");
    }
}

fn span(trace: &str, span: &str, start_ns: u64) -> SpanRow {
    SpanRow {
        trace_id: trace.into(),
        span_id: span.into(),
        service: "checkout".into(),
        start_ns,
        ingest_ns: 7,
        ..Default::default()
    }
}

/// Which deduplication applies on 18.16: no tokens (the server lacks
/// `insert_deduplication_token`), but the replicated tables discard an INSERT whose block
/// equals one they stored, which the writer's one INSERT per record produces every time a
/// record is read again; a batch cut at other boundaries is a new block, stored again (and
/// collapsed only by identity, in reads and merges).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_tables_deduplicate_a_records_block_but_not_a_batch_cut_differently_on_18_16() {
    let cluster = PrivateCluster::start();
    let env = cluster.env("cluster_dedup");
    let store = env.migrated_store().await;
    assert!(store.server_version().await.unwrap().starts_with("18.16"));
    assert!(!insert::supports_tokens(&store).await.unwrap(), "18.16 has no insert_deduplication_token");

    let now = tayga::store::now_ns();
    let record_a: Vec<SpanRow> = (0..3).map(|i| span("t1", &format!("a{i}"), now + i)).collect();
    let record_b: Vec<SpanRow> = (0..2).map(|i| span("t1", &format!("b{i}"), now + i)).collect();
    let raw = || count(&store, read::COUNT_SPANS_RAW_SQL);

    store.insert(&record_a).await.unwrap();
    store.insert(&record_a).await.unwrap();
    assert_eq!(raw().await, 3, "a record's block read again is discarded");
    store.insert(&record_b).await.unwrap();
    assert_eq!(raw().await, 5);
    let batch: Vec<SpanRow> = record_a.iter().chain(&record_b).cloned().collect();
    store.insert(&batch).await.unwrap();
    assert_eq!(raw().await, 10, "a batch of both is a new block: stored again");
    assert_eq!(count(&store, read::COUNT_SPANS_DEDUP_SQL).await, 5, "identity still counts each span once");

    // The window: the writer's tables remember 1000 blocks, not 18.16's default 100.
    let window: String = store
        .query_for_tests("SELECT engine_full FROM system.tables WHERE database = ? AND name = 'spans_local'")
        .bind(store.database())
        .fetch_one()
        .await
        .unwrap();
    assert!(window.contains(&format!("replicated_deduplication_window = {}", schema::DEDUP_WINDOW)), "{window}");
}

/// Retention drops an expired day on every shard, through `ON CLUSTER`, and keeps the rest;
/// the rows of many traces spread over both shards, each trace's spans on one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_expired_days_on_every_shard() {
    const DAY_NS: u64 = 86_400 * 1_000_000_000;
    let cluster = PrivateCluster::start();
    let env = cluster.env("cluster_retention");
    let store = env.migrated_store().await;
    let now = tayga::store::now_ns();
    let rows: Vec<SpanRow> = (0..40)
        .flat_map(|t| {
            let trace = format!("trace{t}");
            [span(&trace, "old", now - 10 * DAY_NS), span(&trace, "new", now)]
        })
        .collect();
    store.insert(&rows).await.unwrap();
    for node in [1, 2] {
        let local = cluster.node_store(&env, node);
        let (old, traces) = (
            count(&local, "SELECT countIf(span_id = 'old') FROM spans_local").await,
            count(&local, "SELECT uniqExact(trace_id) FROM spans_local").await,
        );
        assert!(old > 0 && old < 40, "node {node} holds {old} of the 40 old spans");
        assert_eq!(count(&local, "SELECT count() FROM spans_local").await, 2 * traces, "a trace on one shard");
    }
    let dropped = retention::drop_expired(&store, &Default::default(), now / 1_000_000_000).await.unwrap();
    // The spans' day, and with it their time-ordered copy's and their per-minute counts'.
    let tables: Vec<&str> = dropped.iter().map(|d| d.table.as_str()).collect();
    assert_eq!(tables, ["spans", "spans_by_time", "service_minutes"], "{dropped:?}");
    assert_eq!(count(&store, "SELECT countIf(span_id = 'old') FROM spans").await, 0);
    assert_eq!(count(&store, "SELECT countIf(span_id = 'old') FROM spans_by_time").await, 0);
    assert_eq!(count(&store, "SELECT countIf(span_id = 'new') FROM spans_by_time").await, 40);
    assert_eq!(count(&store, "SELECT countIf(span_id = 'new') FROM spans").await, 40);
    let applied = migrate::applied_versions(&cluster.node_store(&env, 2)).await.unwrap();
    assert_eq!(applied.len(), schema::MIGRATIONS.len(), "node 2 sees the migrations node 1 applied");
}

/// The writer's outage on the cluster (docs/writer.md): N rows stored; one server (shard 2)
/// stopped; M more records sent, the writer retrying with its partitions paused; the server
/// started; after the drain the deduplicated count is N + M and no row is stored twice. Then the whole topic read again
/// (the group reset to the beginning) adds no row, raw counts included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_of_one_server_and_a_whole_topic_reread_store_every_row_once() {
    let cluster = PrivateCluster::start();
    let env = cluster.env("cluster_outage");
    let config = env.config.clone();
    tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await.expect("topics");
    let mut writer = Daemon::start(&env, &[("TAYGA_WRITER_BATCH_MAX_WAIT_MS", "200")]);
    let store = env.store();
    let producer = producer(&env);

    let (s1, l1) = send_mix(&producer, &env, 0, 100, 4, 4).await;
    let before = wait_for("the first records stored and committed", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == s1 && c.logs == l1 && writer_lag(&config).await? == 0).then_some(c)
    })
    .await;
    let health: serde_json::Value =
        reqwest::get(format!("http://{}/health", writer.metrics_addr)).await.unwrap().json().await.unwrap();
    assert_eq!(health["insert_mode"], "per-record-block", "{health}");

    cluster.stop_node(2);
    let sent = 80;
    let (s2, l2) = send_mix(&producer, &env, 100, sent, 4, 4).await;
    let retries = wait_for("the writer retrying, paused, while shard 2 is down", WAIT, || async {
        let retries = writer.metric("tayga_writer_insert_retries_total").await?;
        let paused = writer.metric("tayga_writer_paused").await?;
        (retries >= 3.0 && paused == 1.0).then_some(retries)
    })
    .await;
    let lag = writer_lag(&config).await.unwrap();
    assert!(lag > 0, "the records of the down shard wait in the broker, uncommitted");

    cluster.start_node(2);
    let after = wait_for("the backlog drained after the server returned", WAIT, || async {
        let c = counts(&store).await?;
        (c.spans == s1 + s2 && c.logs == l1 + l2 && writer_lag(&config).await? == 0).then_some(c)
    })
    .await;
    println!(
        "cluster: rows before outage: {} (raw {})\n   ... {sent} records ({} rows) sent while shard 2 was down, lag {lag}, {retries} retries\nrows after drain: {} (raw {})",
        before.spans + before.logs,
        before.spans_raw + before.logs_raw,
        s2 + l2,
        after.spans + after.logs,
        after.spans_raw + after.logs_raw,
    );
    assert_eq!(after.spans + after.logs, before.spans + before.logs + s2 + l2, "nothing lost");
    assert_eq!((after.spans_raw, after.logs_raw), (after.spans, after.logs), "0 duplicates");

    writer.signal("-TERM");
    let status = writer.exit_within(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", writer.log());

    // The whole topic again: every record's block is one the shards already hold.
    reset_writer_group(&config);
    let records = topic_records(&config).await;
    let writer = Daemon::start(&env, &[("TAYGA_WRITER_BATCH_MAX_WAIT_MS", "200")]);
    wait_for("the whole topic read again", WAIT, || async {
        let read = writer.metric("tayga_writer_consumed_records_total").await.unwrap_or(0.0);
        (read >= records as f64 && writer_lag(&config).await? == 0).then_some(())
    })
    .await;
    let reread = counts(&store).await.unwrap();
    println!(
        "cluster: re-read of {records} records: rows {} (raw {})",
        reread.spans + reread.logs,
        reread.spans_raw + reread.logs_raw
    );
    assert_eq!(reread, after, "the re-read stored no new row");
    drop(writer);
}

/// compose.cluster.yaml, laid over compose.yaml as `docker compose -f compose.yaml -f
/// compose.cluster.yaml` does: every Tayga container is told the cluster, the cluster the
/// servers' configuration defines has the same name and one shard per ClickHouse service of
/// the file, each with its own `shard` macro, and ZooKeeper is a service too. No server is
/// published.
#[test]
fn the_cluster_compose_file_names_one_cluster_for_every_container_and_server() {
    let read = |file: &str| -> serde_yaml::Value {
        let text = std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        doc.apply_merge().unwrap();
        doc
    };
    let (base, cluster) = (read("compose.yaml"), read("compose.cluster.yaml"));
    let services = cluster["services"].as_mapping().unwrap();
    let base_services = base["services"].as_mapping().unwrap();
    let tayga: Vec<&str> = base_services
        .iter()
        .filter(|(_, s)| s["image"].as_str() == Some("tayga:latest"))
        .map(|(n, _)| n.as_str().unwrap())
        .collect();
    assert!(tayga.len() >= 8, "{tayga:?}");
    for name in &tayga {
        let env = &services[*name]["environment"];
        assert_eq!(env["TAYGA_CLICKHOUSE_CLUSTER"].as_str(), Some(CLUSTER), "{name} is not told the cluster");
    }
    for name in services.keys().map(|k| k.as_str().unwrap()) {
        let known = base_services.contains_key(name) || services[name]["image"].is_string();
        assert!(known, "{name} is neither in compose.yaml nor given an image");
        assert!(services[name].get("ports").is_none(), "{name} must not be published");
    }

    let xml = cluster["configs"]["clickhouse_cluster"]["content"].as_str().unwrap();
    assert!(xml.contains(&format!("<{CLUSTER}>")), "the servers define another cluster");
    let hosts: Vec<&str> = xml.split("<host>").skip(1).filter_map(|s| s.split('<').next()).collect();
    assert_eq!(hosts, ["clickhouse", "clickhouse-2", "zookeeper"]);
    let mut shards = Vec::new();
    for host in hosts {
        let service = if base_services.contains_key(host) && !services.contains_key(host) {
            &base_services[host]
        } else {
            &services[host]
        };
        assert!(!service.is_null(), "{host} is not a service");
        if host.starts_with("clickhouse") {
            let mounts = service["configs"].as_sequence().unwrap();
            assert_eq!(mounts[0]["target"].as_str(), Some("/etc/clickhouse-server/config.d/cluster.xml"), "{host}");
            shards.push(service["environment"]["CLICKHOUSE_SHARD"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(shards, ["01", "02"], "each server its own shard");
    let mut config = tayga::config::Config::default();
    config.clickhouse.cluster = CLUSTER.into();
    assert_eq!(config.validate(), Vec::<String>::new());
}
