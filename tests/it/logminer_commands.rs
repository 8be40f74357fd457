//! The logminer's operator commands (`remine`, `alerts list` / `republish`, `scale
//! logminer`), run as the real binary against the real ClickHouse 18.16 and broker, each
//! test in its own database and topic prefix. The commands' clock is started at a chosen
//! time with `TAYGA_NOW_NS` instead of waiting minutes.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{run, TestEnv};
use serde_json::Value;
use tayga::config::Config;
use tayga::store::logminer::*;
use tayga::store::{now_ns, remine as remine_sql, AlertRow, HitRow, LogRow, Store, TemplateRow};
use tayga::wire::alert::{format_id, AlertKind};
use tayga::workflow::ledger::TemplateLedger;

const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
/// 2025-11-29T10:00:00Z: fixed times keep the printed tables stable.
const T0: u64 = 1_764_410_400_000_000_000;

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

// ---------------------------------------------------------------------------------------
// remine

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remine_refuses_while_a_heartbeat_is_live_and_runs_once_the_logminer_has_been_stopped_for_3_minutes() {
    let env = TestEnv::new("remine_beat");
    let store = env.migrated_store().await;
    let beat = now_ns();
    write_state(&store, &[(heartbeat_key("logminer-7f3a"), beat.to_string())], beat).await.unwrap();

    for dry_run in [true, false] {
        let mut cmd = env.tayga();
        cmd.env("TAYGA_NOW_NS", (beat + 2 * MIN).to_string()).arg("remine");
        if dry_run {
            cmd.arg("--dry-run");
        }
        let (out, stdout, stderr) = run(&mut cmd);
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains("replica `logminer-7f3a` wrote a heartbeat 2m 0s ago"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
    assert!(State::load(&store).await.unwrap().masking_epoch().is_none(), "a refused remine writes nothing");

    let (out, stdout, stderr) = run(env.tayga().env("TAYGA_NOW_NS", (beat + 4 * MIN).to_string()).arg("remine"));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("logs: none stored"), "{stdout}");
    let state = State::load(&store).await.unwrap();
    assert!(state.masking_epoch().is_some(), "the run wrote the masking epoch");
    assert!(state.get_ns(GLOBAL_WATERMARK).unwrap() >= beat + 4 * MIN, "the watermark is on the command's clock");
}

fn log(service: &str, body: &str, time_ns: u64) -> LogRow {
    let mut row = LogRow {
        service: service.into(),
        time_ns,
        observed_ns: time_ns,
        severity_number: 9,
        severity_text: "INFO".into(),
        body: body.into(),
        ingest_ns: time_ns + SEC,
        ..Default::default()
    };
    row.log_id = tayga::identity::log_id(&row.content());
    row
}

/// Stored logs of two services, each at its own time, oldest 2 h before T0.
fn stored_logs() -> Vec<LogRow> {
    let lines = [
        ("web", "user alice logged in from 10.0.0.1"),
        ("web", "GET /api/items/17 returned 200 in 12 ms"),
        ("db", "query took 12 ms rows=5"),
        ("web", "user bob logged in from 10.0.0.2"),
        ("db", "connection pool exhausted, waiting for a free connection"),
        ("web", "GET /api/items/18 returned 404 in 3 ms"),
        ("web", "cache miss for key session:abc"),
        ("db", "query took 40 ms rows=17"),
        ("web", "user carol logged in from 10.0.0.3"),
        ("db", "replication lag is 3 seconds"),
        ("web", "cache miss for key session:def"),
        ("db", "connection pool exhausted, waiting for a free connection"),
        ("web", "payment declined for order 5521: card expired"),
        ("db", "query took 7 ms rows=0"),
    ];
    // Over two days, so the re-mine spans two day partitions.
    lines.iter().enumerate().map(|(i, (s, b))| log(s, b, T0 - 26 * HOUR + i as u64 * 2 * HOUR)).collect()
}

/// What a fresh TemplateLedger makes of the logs in time order: the templates (without `updated_ns`)
/// and, per (service, log id), the template id.
fn mined_offline(config: &Config, logs: &[LogRow]) -> (Vec<TemplateRow>, BTreeMap<(String, u64), u64>) {
    let mut ledger = TemplateLedger::new(config.logminer.mining()).unwrap();
    let mut sorted = logs.to_vec();
    sorted.sort_by(|a, b| (a.time_ns, &a.service, a.log_id).cmp(&(b.time_ns, &b.service, b.log_id)));
    sorted.dedup_by_key(|l| (l.service.clone(), l.log_id));
    for l in &sorted {
        ledger.mine(&l.service, l.log_id, l.time_ns, &l.body, l.time_ns);
    }
    let pending = ledger.pending(0);
    let hits = pending.hits.iter().map(|h| ((h.service.clone(), h.log_id), h.template_id)).collect();
    (comparable(pending.templates), hits)
}

fn comparable(mut templates: Vec<TemplateRow>) -> Vec<TemplateRow> {
    for t in &mut templates {
        t.updated_ns = 0;
    }
    templates.sort_by(|a, b| (&a.service, a.template_id).cmp(&(&b.service, b.template_id)));
    templates
}

/// (service, log id) → template id of every stored hit.
pub(crate) async fn stored_hits(store: &Store) -> BTreeMap<(String, u64), u64> {
    store
        .select_for_tests::<HitRow>("FINAL ORDER BY service, log_id")
        .fetch_all::<HitRow>()
        .await
        .unwrap()
        .into_iter()
        .map(|h| ((h.service, h.log_id), h.template_id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remine_rebuilds_templates_and_hits_from_the_stored_logs_and_raises_the_watermarks() {
    let env = TestEnv::new("remine_rebuild");
    let store = env.migrated_store().await;
    let logs = stored_logs();
    let version = TemplateLedger::new(env.config.logminer.mining()).unwrap().masking_version().to_string();
    let (want_templates, want_hits) = mined_offline(&env.config, &logs);

    // The writer stored three logs twice (at-least-once): they are mined once.
    store.insert(&logs).await.unwrap();
    let copies: Vec<LogRow> = logs[..3].iter().map(|l| LogRow { ingest_ns: l.ingest_ns + SEC, ..l.clone() }).collect();
    store.insert(&copies).await.unwrap();
    // What the logminer had stored: a template of this masking version that the logs no
    // longer produce, one of an older version, and a hit of the first log on the former.
    let stale = TemplateRow {
        service: "web".into(),
        template_id: 999,
        template: "stale".into(),
        count: 5,
        masking_version: version.clone(),
        ..Default::default()
    };
    let older = TemplateRow { template_id: 998, masking_version: "tayga-mask-0".into(), ..stale.clone() };
    let wrong_hit =
        HitRow { service: "web".into(), log_id: logs[0].log_id, template_id: 999, time_ns: logs[0].time_ns };
    store_mined(&store, MinedRows { templates: &[stale, older], hits: &[wrong_hit], ..Default::default() })
        .await
        .unwrap();
    let future = u64::MAX / 2;
    write_state(&store, &[(watermark_key(0), "5".into()), (watermark_key(1), future.to_string())], 1).await.unwrap();

    let started = now_ns();
    let (out, stdout, stderr) = run(env.tayga().args(["--json", "remine"]));
    assert!(out.status.success(), "{stderr}");
    let report = json(&stdout);
    assert_eq!(report["new_epoch"], true, "no masking state yet: a new epoch over every log");
    assert_eq!(report["masking_version"], version.as_str());
    assert_eq!(report["logs"], logs.len());
    assert_eq!(report["hits"], logs.len());
    assert_eq!(report["templates"], want_templates.len());
    assert_eq!(report["services"].as_array().unwrap().len(), 2);

    let got = comparable(load_templates(&store, &version).await.unwrap());
    assert_eq!(got, want_templates, "the stored templates are what a fresh miner makes of the logs");
    assert!(got.iter().all(|t| t.template_id != 999), "the stale template was deleted");
    assert_eq!(load_templates(&store, "tayga-mask-0").await.unwrap().len(), 1, "other versions are kept");
    assert_eq!(stored_hits(&store).await, want_hits, "every log has one hit, on its re-mined template");

    let state = State::load(&store).await.unwrap();
    let watermark = state.get_ns(GLOBAL_WATERMARK).unwrap();
    assert!(watermark >= started && watermark <= now_ns(), "the watermark is the end of the run");
    assert_eq!(report["watermark_ns"], watermark);
    assert_eq!(state.partition_watermarks(), BTreeMap::from([(0, watermark), (1, future)]), "raised, never lowered");
    assert_eq!(state.masking_epoch(), Some((version.clone(), logs[0].time_ns)), "the epoch starts at the oldest log");

    // Again: the same version, so the logs of the epoch; the same result.
    let (out, stdout, stderr) = run(env.tayga().args(["--json", "remine"]));
    assert!(out.status.success(), "{stderr}");
    let again = json(&stdout);
    assert_eq!((again["new_epoch"].clone(), again["since_ns"].clone()), (Value::from(false), logs[0].time_ns.into()));
    assert_eq!(
        (again["logs"].clone(), again["templates"].clone()),
        (report["logs"].clone(), report["templates"].clone())
    );
    assert_eq!(comparable(load_templates(&store, &version).await.unwrap()), want_templates);
    assert_eq!(stored_hits(&store).await, want_hits);
    let state = State::load(&store).await.unwrap();
    assert!(state.get_ns(GLOBAL_WATERMARK).unwrap() >= watermark);
    assert_eq!(state.masking_epoch(), Some((version.clone(), logs[0].time_ns)));

    // Rules changed since: a dry run says a new epoch would begin, and changes nothing.
    write_state(&store, &[(MASKING_VERSION.into(), "tayga-mask-0".into())], now_ns()).await.unwrap();
    let before = (State::load(&store).await.unwrap(), load_templates(&store, &version).await.unwrap());
    let (out, stdout, stderr) = run(env.tayga().args(["remine", "--dry-run"]));
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("remine_dry_run_new_epoch", stdout.replace(&version, "<current>"));
    assert_eq!((State::load(&store).await.unwrap(), load_templates(&store, &version).await.unwrap()), before);
}

#[tokio::test]
async fn stored_logs_are_read_in_time_order_a_page_at_a_time_each_once() {
    let env = TestEnv::new("remine_pages");
    let store = env.migrated_store().await;
    let logs = stored_logs();
    store.insert(&logs).await.unwrap();
    store.insert(&logs[5..9]).await.unwrap(); // copies: read once

    let since = logs[1].time_ns;
    let minutes = remine_sql::minute_counts(&store, since).await.unwrap();
    assert_eq!(minutes.iter().map(|m| m.logs).sum::<u64>(), logs.len() as u64 - 1);
    // Windows of about 3 logs, pages of 2: every boundary is crossed.
    let mut read = Vec::new();
    for window in remine_sql::windows(&minutes, since, 3) {
        let mut after: Option<LogRow> = None;
        loop {
            let page = remine_sql::logs_page(&store, &window, after.as_ref(), 2).await.unwrap();
            let full = page.len() == 2;
            read.extend(page.iter().map(|l| l.log_id));
            after = page.into_iter().last();
            if !full {
                break;
            }
        }
    }
    assert_eq!(read, logs[1..].iter().map(|l| l.log_id).collect::<Vec<_>>());
    let summary = remine_sql::service_summary(&store, 0).await.unwrap();
    assert_eq!(summary.iter().map(|s| (s.service.as_str(), s.logs)).collect::<Vec<_>>(), vec![("db", 6), ("web", 8)]);
}

/// `?` placeholders filled in order, `?fields` with the row's columns, as the client does.

#[test]
fn the_remine_sql_runs_on_current_clickhouse() {
    use clickhouse::Row;
    let mut items: Vec<Value> = tayga::store::migrate::all_statements(None).into_iter().map(Value::String).collect();
    for ingest in [1, 2] {
        items.push(Value::String(format!(
            "INSERT INTO logs (log_id, service, time_ns, observed_ns, severity_number, severity_text, body, trace_id, \
             span_id, attr_keys, attr_values, resource_keys, resource_values, scope_name, ingest_ns) \
             VALUES (42, 'checkout', {T0}, 0, 9, 'INFO', 'cart loaded', '', '', [], [], [], [], '', {ingest})"
        )));
    }
    // chdb is one server: the cluster-only statements run in tests/it/cluster.rs.
    let s: Vec<String> = remine_sql::statements().into_iter().filter(|s| !s.cluster_only).map(|s| s.sql).collect();
    assert_eq!(s.len(), 7, "a new statement needs a line here");
    let cols = LogRow::COLUMN_NAMES;
    items.push(serde_json::json!({"sql": common::fill_placeholders(&s[0], &[], &["0"]), "expect": format!("\"checkout\",1,{T0},{T0}")}));
    items.push(
        serde_json::json!({"sql": common::fill_placeholders(&s[1], &[], &["0"]), "expect": format!("{},1", T0 / MIN)}),
    );
    let t1 = (T0 + 1).to_string();
    let first = common::fill_placeholders(&s[2], cols, &["0", &t1]);
    items.push(serde_json::json!({"sql": format!("SELECT count() FROM ({first})"), "expect": "1"}));
    let next = common::fill_placeholders(&s[3], cols, &["0", &t1, "0", "0", "'a'", "'a'", "0"]);
    items.push(serde_json::json!({"sql": format!("SELECT count() FROM ({next})"), "expect": "1"}));
    items.push(Value::String(common::fill_placeholders(&s[4], &[], &["'v1'"])));
    items.push(Value::String(common::fill_placeholders(&s[5], &[], &["'v1'"])));
    items.push(Value::String(common::fill_placeholders(&s[6], &[], &["currentDatabase()"])));
    common::run_in_chdb("the remine SQL", &items);
}

// ---------------------------------------------------------------------------------------
// alerts

fn alert(id: u64, kind: AlertKind, service: &str, last_at: u64, updated_ns: u64) -> AlertRow {
    AlertRow {
        alert_id: id,
        kind: kind.as_str().into(),
        service: service.into(),
        template_id: id << 8,
        template: format!("template of alert {id}: <*> happened"),
        first_at: last_at - 10 * MIN,
        last_at,
        count: id * 10,
        baseline: 1.5,
        threshold: 7.5,
        stored_ns: updated_ns,
        updated_ns,
        resolved_at: 0,
        shape: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_are_listed_and_unmarked_ones_republished_once_oldest_first() {
    let env = TestEnv::new("alerts_cmd");
    let store = env.migrated_store().await;
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let now = T0.to_string();
    let mut rows = vec![
        alert(1, AlertKind::NewTemplate, "web", T0 - HOUR, T0 - HOUR), // inactive, in the window
        alert(2, AlertKind::Spike, "db", T0 - MIN, T0 - 2 * HOUR),     // active, in the window
        alert(3, AlertKind::Silence, "web", T0 - 30 * HOUR, T0 - 30 * HOUR), // outside 24 h
        alert(4, AlertKind::Spike, "web", T0 - 2 * MIN, T0 - 10 * MIN), // active, published
    ];
    // Alert 2's older version is superseded: only the newest is listed and sent.
    store_alerts(&store, &[AlertRow { last_at: T0 - 3 * HOUR, updated_ns: T0 - 3 * HOUR, ..rows[1].clone() }])
        .await
        .unwrap();
    store_alerts(&store, &rows).await.unwrap();
    mark_published(&store, &[(4, T0 - 10 * MIN)], T0 - 9 * MIN).await.unwrap();
    rows.sort_by_key(|r| std::cmp::Reverse(r.last_at));

    let list = |args: &[&str]| {
        let (out, stdout, stderr) =
            run(env.tayga().env("TAYGA_NOW_NS", &now).args(["--json", "alerts", "list"]).args(args));
        assert!(out.status.success(), "{stderr}");
        json(&stdout)
    };
    let all = list(&[]);
    let ids: Vec<&str> = all.as_array().unwrap().iter().map(|a| a["alert_id"].as_str().unwrap()).collect();
    assert_eq!(ids, rows.iter().map(|r| format_id(r.alert_id)).collect::<Vec<_>>(), "most recently active first");
    let spike = &all[0];
    assert_eq!(spike["alert_id"], format_id(2));
    assert_eq!((spike["kind"].clone(), spike["version"].clone()), ("spike".into(), 1.into()), "the alert document");
    assert_eq!(spike["template_id"], format_id(2 << 8));
    assert_eq!((spike["active"].clone(), spike["published"].clone()), (true.into(), false.into()));
    assert_eq!((all[1]["active"].clone(), all[1]["published"].clone()), (true.into(), true.into()));
    assert_eq!(all[2]["active"], false);
    let ids_of = |v: Value| {
        v.as_array().unwrap().iter().map(|a| a["alert_id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(ids_of(list(&["--active"])), [format_id(2), format_id(4)]);
    assert_eq!(ids_of(list(&["--kind", "spike", "--service", "web"])), [format_id(4)]);
    assert_eq!(ids_of(list(&["--limit", "1"])), [format_id(2)]);
    assert_eq!(list(&["--service", "nobody"]), Value::Array(vec![]));
    let (out, stdout, stderr) = run(env.tayga().env("TAYGA_NOW_NS", &now).args(["alerts", "list"]));
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("alerts_list_table", stdout);
    // On an 80-column terminal: it fits, ages beside times, and a cut list says so.
    let (out, stdout, stderr) = run(env
        .tayga()
        .env("TAYGA_NOW_NS", &now)
        .env("TAYGA_FORCE_TTY", "80")
        .args(["alerts", "list", "--limit", "3"]));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.lines().all(|l| l.chars().count() <= 80), "{stdout}");
    assert!(stdout.ends_with("3 of 4 shown; --limit N shows more, --limit 0 all\n"), "{stdout}");
    insta::assert_snapshot!("alerts_list_80_columns", stdout);
    let (_, _, stderr) = run(env.tayga().env("TAYGA_NOW_NS", &now).args(["alerts", "list", "--limit", "3"]));
    assert!(stderr.contains("3 of 4 shown"), "to a pipe the count goes to stderr: {stderr}");
    let (out, _, stderr) = run(env.tayga().args(["alerts", "list", "--kind", "panic"]));
    assert_eq!(out.status.code(), Some(2), "a bad kind is a usage error: {stderr}");

    // The default window (24 h): alerts 1 and 2, oldest first; 3 is older, 4 is marked.
    let republish = |args: &[&str]| {
        let (out, stdout, stderr) = run(env.tayga().env("TAYGA_NOW_NS", &now).args(["alerts", "republish"]).args(args));
        assert!(out.status.success(), "{stderr}");
        stdout
    };
    let topic = env.config.names().alerts;
    assert_eq!(republish(&[]), format!("published 2 alerts to {topic}\n"));
    let sent = common::read_alerts(&env.config, 2);
    assert_eq!(sent.len(), 2);
    let mut got: Vec<(String, u64, u64)> = sent.iter().map(|(k, a)| (k.clone(), a.alert_id, a.last_at)).collect();
    got.sort();
    let mut want = vec![(format_id(1 << 8), 1, T0 - HOUR), (format_id(2 << 8), 2, T0 - MIN)];
    want.sort();
    assert_eq!(got, want, "keyed by template id, the newest version of each");
    let marks = published_versions(&store, &rows).await.unwrap();
    assert!(marks.contains(&(1, T0 - HOUR)) && marks.contains(&(2, T0 - 2 * HOUR)));

    assert_eq!(republish(&[]), format!("published 0 alerts to {topic}\n"), "marked: nothing is sent again");
    assert_eq!(common::read_alerts(&env.config, 2).len(), 2);
    assert_eq!(republish(&["--since", "2d"]), format!("published 1 alert to {topic}\n"), "a wider window finds 3");
    assert_eq!(republish(&["--alert-id", &format_id(4)]), format!("published 1 alert to {topic}\n"));
    let last = common::read_alerts(&env.config, 4);
    assert_eq!(last.len(), 4, "--alert-id sends even a published alert");
    assert!(last.iter().any(|(k, a)| a.alert_id == 4 && *k == format_id(4 << 8)));

    let (out, _, stderr) = run(env.tayga().args(["alerts", "republish", "--alert-id", "00000000000000ab"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("no such alert: 00000000000000ab"), "{stderr}");
    let (out, _, _) = run(env.tayga().args(["alerts", "republish", "--alert-id", "xyz"]));
    assert_eq!(out.status.code(), Some(2), "a malformed id is a usage error");
    let (out, _, _) = run(env.tayga().args(["deliveries", "show", "--alert-id", "xyz"]));
    assert_eq!(out.status.code(), Some(2), "deliveries reads ids the same way");
}

// ---------------------------------------------------------------------------------------
// scale

/// A directory holding only a stand-in `docker` that records its arguments.
fn fake_docker(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("docker");
    // Only shell built-ins: PATH holds nothing else.
    let record = dir.join("docker-args");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" > '{}'\n", record.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_logminer_checks_partitions_fills_watermark_keys_and_sets_the_env_file() {
    let env = TestEnv::new("scale");
    let store = env.migrated_store().await;
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    write_state(
        &store,
        &[(GLOBAL_WATERMARK.into(), "100".into()), (watermark_key(0), "50".into()), (watermark_key(3), "70".into())],
        1,
    )
    .await
    .unwrap();
    let project = tempfile::tempdir().unwrap();
    let no_docker = tempfile::tempdir().unwrap();
    let scale = |args: &[&str]| {
        run(env
            .tayga()
            .current_dir(project.path())
            .env("PATH", no_docker.path())
            .args(["scale", "logminer"])
            .args(args))
    };

    // Out of 1..=12 is a usage error, refused before any server is asked (the partition
    // rule itself is `scale::check_replicas`'s unit test).
    for n in ["13", "0"] {
        let (out, _, stderr) = run(env
            .tayga()
            .env("TAYGA_KAFKA_BROKERS", "127.0.0.1:1")
            .env("TAYGA_TIMEOUT", "1d")
            .args(["scale", "logminer", n, "--dry-run"]));
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is not in 1..=12"), "{stderr}");
    }

    let before = State::load(&store).await.unwrap();
    let (out, stdout, stderr) = scale(&["2", "--dry-run"]);
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("scale_dry_run", stdout.replace(env.name.as_str(), "PREFIX"));
    assert_eq!(State::load(&store).await.unwrap(), before, "a dry run writes no key");
    assert!(!project.path().join(".env").exists(), "a dry run writes no env file");

    std::fs::write(project.path().join(".env"), "# deployment\nTAYGA_LOG=info\nLOGMINER_REPLICAS=3\n").unwrap();
    let (out, stdout, stderr) = scale(&["2"]);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("docker is not on PATH; run: docker compose up -d --scale logminer=2"), "{stdout}");
    assert!(stdout.contains("logminer replicas: 3 -> 2"), "{stdout}");
    let text = std::fs::read_to_string(project.path().join(".env")).unwrap();
    assert_eq!(text, "# deployment\nTAYGA_LOG=info\nLOGMINER_REPLICAS=2\n", "other lines are kept");
    let state = State::load(&store).await.unwrap();
    let mut want: BTreeMap<i32, u64> = (0..12).map(|p| (p, 100)).collect();
    want.insert(0, 50);
    want.insert(3, 70);
    assert_eq!(state.partition_watermarks(), want, "every partition has its own key, at what it resolved to");
    assert_eq!(state.watermark(&[0, 1, 3]), 50, "a survivor resumes from the slowest");

    // With docker on PATH, Compose is run with the env file it was given.
    let docker = tempfile::tempdir().unwrap();
    fake_docker(docker.path());
    let (out, stdout, stderr) = run(env.tayga().current_dir(project.path()).env("PATH", docker.path()).args([
        "--json",
        "scale",
        "logminer",
        "1",
        "--env-file",
        "prod.env",
    ]));
    assert!(out.status.success(), "{stderr}");
    let report = json(&stdout);
    assert_eq!((report["ran"].clone(), report["watermark_keys"].clone()), (true.into(), Value::Array(vec![])));
    let args = std::fs::read_to_string(docker.path().join("docker-args")).unwrap();
    assert_eq!(args.trim(), "compose --env-file prod.env up -d --scale logminer=1");
    assert_eq!(std::fs::read_to_string(project.path().join("prod.env")).unwrap(), "LOGMINER_REPLICAS=1\n");
}
