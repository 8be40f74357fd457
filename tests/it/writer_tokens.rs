//! The token path's requests, at the HTTP level. ClickHouse 18.16 cannot run it (it has no
//! `insert_deduplication_token`) and chdb-core is not an HTTP server, so a stand-in server
//! records what the writer's sink sends: in token mode one INSERT per record, each with
//! `insert_deduplication_token=<topic>-<partition>-<offset>`, a retry sends only what failed;
//! in batched mode one INSERT per table and no token; a record over more than 50 days is cut
//! into one INSERT per 50 days, each with its own token. (tests/it/writer_chdb.rs proves that
//! current ClickHouse deduplicates such inserts; tests/it/writer.rs runs the batched mode on 18.16.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use prometheus_client::registry::Registry;
use tayga::config::ClickHouseConfig;
use tayga::daemon::writer::batch::{Batch, Rows};
use tayga::daemon::writer::metrics::WriterMetrics;
use tayga::daemon::writer::sink::{InsertMode, Sink};
use tayga::model::encoded::EncodedRows;
use tayga::store::{LogRow, SpanRow, Store};

/// The query text and the URL parameters (settings) of one request.
type Request = (String, BTreeMap<String, String>);

#[derive(Clone, Default)]
struct Seen {
    requests: Arc<Mutex<Vec<Request>>>,
    /// Answer 500 to this many requests first.
    fail: Arc<AtomicUsize>,
}

async fn handle(State(seen): State<Seen>, RawQuery(query): RawQuery, _body: axum::body::Bytes) -> StatusCode {
    let params: BTreeMap<String, String> = reqwest::Url::parse(&format!("http://x/?{}", query.unwrap_or_default()))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let sql = params.get("query").cloned().unwrap_or_default();
    seen.requests.lock().unwrap().push((sql, params));
    if seen.fail.load(Ordering::SeqCst) > 0 {
        seen.fail.fetch_sub(1, Ordering::SeqCst);
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    StatusCode::OK
}

async fn stand_in() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new().route("/", post(handle)).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn sink(url: &str, mode: InsertMode) -> Sink {
    let store = Store::new(&ClickHouseConfig { url: url.into(), database: "d".into(), ..Default::default() });
    Sink { store, mode, topic: "p.signals".into(), metrics: WriterMetrics::new(&mut Registry::default()) }
}

fn spans(rows: Vec<SpanRow>) -> Rows {
    Rows::Spans(Arc::new(EncodedRows::from_rows(&rows)))
}

fn batch() -> Batch {
    let now = Instant::now();
    let mut b = Batch::default();
    b.push(0, 10, spans(vec![SpanRow::default(); 3]), now);
    b.push(4, 7, Rows::Logs(Arc::new(EncodedRows::from_rows(&vec![LogRow::default(); 2]))), now);
    b.push_skipped(4, 8, now);
    b.push(0, 11, spans(vec![SpanRow::default(); 1]), now);
    b
}

fn tokens(seen: &Seen) -> Vec<String> {
    let mut t: Vec<String> = seen
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, p)| p.get("insert_deduplication_token").cloned())
        .collect();
    t.sort();
    t
}

#[tokio::test]
async fn token_mode_sends_one_insert_per_record_with_its_token() {
    let (url, seen) = stand_in().await;
    let sink = sink(&url, InsertMode::Tokens);
    let mut b = batch();
    sink.write(&mut b).await.unwrap();
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "one INSERT per record with rows: {requests:?}");
    assert!(requests.iter().all(|(sql, _)| sql.starts_with("INSERT INTO")), "{requests:?}");
    assert_eq!(tokens(&seen), vec!["p.signals-0-10", "p.signals-0-11", "p.signals-4-7"]);
    assert!(b.records.iter().all(|r| r.stored));
}

#[tokio::test]
async fn a_token_mode_retry_resends_the_same_tokens_for_what_failed() {
    let (url, seen) = stand_in().await;
    let sink = sink(&url, InsertMode::Tokens);
    let mut b = batch();
    seen.fail.store(1, Ordering::SeqCst);
    assert!(sink.write(&mut b).await.is_err());
    let first = tokens(&seen);
    let stored: Vec<bool> = b.records.iter().map(|r| r.stored).collect();
    assert_eq!(stored.iter().filter(|s| !**s).count(), 1, "exactly the failed record is left: {stored:?}");
    seen.requests.lock().unwrap().clear();
    sink.write(&mut b).await.unwrap();
    let retried = tokens(&seen);
    assert_eq!(retried.len(), 1);
    assert!(first.contains(&retried[0]), "the retry reuses the record's token");
}

#[tokio::test]
async fn batched_mode_sends_one_insert_per_table_and_no_token() {
    let (url, seen) = stand_in().await;
    let sink = sink(&url, InsertMode::Batched);
    let mut b = batch();
    sink.write(&mut b).await.unwrap();
    let mut sql: Vec<String> = seen.requests.lock().unwrap().iter().map(|(s, _)| s.clone()).collect();
    sql.sort();
    assert_eq!(sql.len(), 2, "{sql:?}");
    assert!(sql[0].contains("logs") && sql[1].contains("spans"), "{sql:?}");
    assert!(tokens(&seen).is_empty());
    assert!(b.spans_stored && b.logs_stored);
}

#[tokio::test]
async fn a_record_over_more_days_than_one_insert_may_cover_is_cut_with_a_token_per_insert() {
    let (url, seen) = stand_in().await;
    let sink = sink(&url, InsertMode::Tokens);
    let day_ns = 86_400 * 1_000_000_000;
    // 120 days: three inserts of at most 50 days (store::insert), so that current
    // ClickHouse's limit of 100 partitions per insert block holds in any time zone.
    let spans: Vec<SpanRow> = (0..120).map(|d| SpanRow { start_ns: d * day_ns, ..Default::default() }).collect();
    let mut b = Batch::default();
    b.push(2, 5, self::spans(spans), Instant::now());
    sink.write(&mut b).await.unwrap();
    assert_eq!(tokens(&seen), vec!["p.signals-2-5-g0", "p.signals-2-5-g1", "p.signals-2-5-g2"]);
    assert!(b.records[0].stored);
}
