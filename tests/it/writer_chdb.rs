//! The writer's SQL on current ClickHouse (chdb-core, in-process), beside the same SQL on
//! 18.16 in the other writer tests: the read queries of `store::read`, and the token path
//! that 18.16 cannot run: support detection, the deduplication window, and per-record
//! inserts with `insert_deduplication_token` (a replayed token is discarded; a new token
//! for the same identity is stored raw and collapsed by the deduplicated reads).

use crate::common;

use clickhouse::Row;
use serde_json::{json, Value};
use tayga::daemon::writer::sink::token;
use tayga::store::insert::TOKEN_SUPPORT_SQL;
use tayga::store::schema::token_window_statements;
use tayga::store::{migrate, read, LogRow, SpanRow};

fn span_insert(token: &str) -> String {
    format!(
        "INSERT INTO spans SETTINGS insert_deduplication_token = '{token}' VALUES \
         ('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', '', 'checkout', 'GET /cart', 2, \
          1764460800000000000, 1764460800000000500, 500, 0, '', ['http.route'], ['/cart'], \
          ['service.name'], ['checkout'], 'scope', 1, 1, 1764460800000000900, 'k=v', 1, 0, 0, 0, [1], [1], '', '1.0', \
          '', '', [1764460800000000100], ['exception'], \
          ['[{{\"key\":\"exception.message\",\"value\":{{\"stringValue\":\"boom\"}}}}]'], [0], \
          ['1af7651916cd43dd8448eb211c80319c'], ['c7ad6b7169203331'], [''], [''], [1], [0])"
    )
}

fn log_insert(token: &str) -> String {
    format!(
        "INSERT INTO logs SETTINGS insert_deduplication_token = '{token}' VALUES \
         (42, 'checkout', 1764460800000000000, 0, 9, 'INFO', 'cart loaded', \
          '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', [], [], ['service.name'], ['checkout'], '', 1, \
          'cart.loaded', 1, 0, [], [1], 1, '', '', '', '', '')"
    )
}

/// `?fields` and `?` as the client fills them.
fn bound(sql: &str, columns: &[&str]) -> String {
    let fields = columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(",");
    sql.replace("?fields", &fields).replace('?', "'0af7651916cd43dd8448eb211c80319c'")
}

#[test]
fn the_writer_sql_runs_on_current_clickhouse_and_tokens_deduplicate() {
    let mut items: Vec<Value> = migrate::all_statements(None).into_iter().map(|s| json!(s)).collect();
    items.push(json!({"sql": TOKEN_SUPPORT_SQL, "expect": "1"}));
    items.extend(token_window_statements(None).into_iter().map(|s| json!(s)));
    items.push(json!({
        "sql": "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name IN ('spans', 'logs') \
                AND engine_full LIKE '%non_replicated_deduplication_window = 1000%'",
        "expect": "2",
    }));
    // The same record replayed (same token) twice, then the same span under another record.
    let first = token("t.signals", 3, 17);
    items.push(json!(span_insert(&first)));
    items.push(json!(span_insert(&first)));
    items.push(json!(log_insert(&token("t.signals", 4, 2))));
    items.push(json!(log_insert(&token("t.signals", 4, 2))));
    items.push(json!(span_insert(&token("t.signals", 5, 1))));
    let expect = ["2", "1", "1", "1"];
    let statements: Vec<String> = read::statements().into_iter().map(|s| s.sql).collect();
    for (sql, want) in statements.iter().zip(expect) {
        items.push(json!({"sql": sql, "expect": want}));
    }
    items.push(json!(bound(&statements[4], SpanRow::COLUMN_NAMES)));
    items.push(json!(bound(&statements[5], LogRow::COLUMN_NAMES)));
    items.push(json!({
        "sql": format!("SELECT count() FROM ({})", bound(&statements[4], SpanRow::COLUMN_NAMES)),
        "expect": "1",
    }));
    assert_eq!(statements.len(), 6, "a new read query needs a line here");

    common::run_in_chdb("the writer's SQL", &items);
}
