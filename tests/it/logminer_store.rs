//! The logminer's queries (`store::logminer`) against the real ClickHouse 18.16: state
//! keys, new-template candidates, minute counts with re-read hits counted once, what a
//! merge changes in them (absorbed templates neither restored nor announced, their hits
//! counted for the survivor), alert versions and publication marks.

use crate::common;

use common::TestEnv;
use tayga::store::logminer::*;
use tayga::store::{AlertRow, HitRow, TemplateMergeRow, TemplateRow};
use tayga::wire::alert::AlertKind;

const MIN: u64 = 60_000_000_000;

fn template(service: &str, id: u64, first: u64) -> TemplateRow {
    TemplateRow {
        service: service.into(),
        template_id: id,
        template: format!("t{id}"),
        count: 1,
        first_seen_ns: first,
        last_seen_ns: first,
        masking_version: "v1".into(),
        updated_ns: first,
    }
}

fn merge(service: &str, absorbed_id: u64, survivor_id: u64, merged_ns: u64, version: &str) -> TemplateMergeRow {
    TemplateMergeRow { service: service.into(), absorbed_id, survivor_id, merged_ns, masking_version: version.into() }
}

fn alert(id: u64, service: &str, kind: AlertKind, updated: u64) -> AlertRow {
    AlertRow {
        alert_id: id,
        kind: kind.as_str().into(),
        service: service.into(),
        template_id: id,
        template: "t".into(),
        first_at: 10 * MIN,
        last_at: updated,
        count: 1,
        baseline: 0.0,
        threshold: 0.0,
        stored_ns: updated,
        updated_ns: updated,
        resolved_at: 0,
        shape: String::new(),
    }
}

#[tokio::test]
async fn the_logminer_queries_run_on_the_real_server() {
    let env = TestEnv::new("logminer_store");
    let store = env.migrated_store().await;

    // State: newest version wins, heartbeats are listed, old ones deleted.
    write_state(&store, &[(watermark_key(3), "5".into()), (heartbeat_key("old"), "1".into())], 1).await.unwrap();
    write_state(&store, &[(watermark_key(3), "7".into()), (heartbeat_key("live"), "100".into())], 100).await.unwrap();
    let state = State::load(&store).await.unwrap();
    assert_eq!(state.watermark(&[3]), 7);
    assert_eq!(state.heartbeats().len(), 2);
    delete_heartbeats_before(&store, 50).await.unwrap();
    common::wait_for("the old heartbeat to be deleted", std::time::Duration::from_secs(30), || {
        let store = store.clone();
        async move {
            let s = State::load(&store).await.ok()?;
            (s.heartbeats().iter().map(|h| h.replica.clone()).collect::<Vec<_>>() == ["live"]).then_some(())
        }
    })
    .await;

    // Candidates: only owned services, only (after, up_to], only this masking version.
    let mut other_version = template("a", 9, 15);
    other_version.masking_version = "v0".into();
    let hits: Vec<HitRow> = (0..6)
        .map(|i| HitRow { service: "a".into(), log_id: i % 4, template_id: 1, time_ns: 10 * MIN + i % 4 })
        .collect();
    let templates = [template("a", 1, 10), template("a", 2, 20), template("b", 3, 15), other_version];
    store_mined(&store, MinedRows { templates: &templates, hits: &hits, ..Default::default() }).await.unwrap();
    let got = new_template_candidates(&store, &["a".to_string()], "v1", 10, 20).await.unwrap();
    assert_eq!(got.iter().map(|t| t.template_id).collect::<Vec<_>>(), vec![2]);
    assert_eq!(load_templates(&store, "v1").await.unwrap().len(), 3);

    // Minute counts count a re-read log once.
    let a = ["a".to_string(), "zzz".to_string()];
    let counts = minute_counts(&store, &a, "v1", 0).await.unwrap();
    assert_eq!(counts, vec![MinuteCount { service: "a".into(), template_id: 1, minute: 10, count: 4 }]);

    // Template 5 absorbed 1 and 4 (4 after 6 had absorbed it, then 4 was re-pointed), 2 was
    // absorbed and born again, and a merge of another version or service changes nothing.
    let hits5: Vec<HitRow> = (10..13)
        .map(|i| HitRow { service: "a".into(), log_id: i, template_id: if i == 10 { 4 } else { 5 }, time_ns: 10 * MIN })
        .collect();
    let merges = [
        merge("a", 1, 5, 30, "v1"),
        merge("a", 4, 6, 25, "v1"),
        merge("a", 2, 5, 30, "v1"),
        merge("a", 3, 5, 30, "v0"),
        merge("b", 2, 5, 50, "v1"),
    ];
    let live = [template("a", 4, 21), template("a", 5, 22)];
    store_mined(&store, MinedRows { hits: &hits5, merges: &merges, templates: &live }).await.unwrap();
    let newer = [merge("a", 4, 5, 31, "v1"), merge("a", 2, 2, 40, "v1")];
    store_mined(&store, MinedRows { merges: &newer, ..Default::default() }).await.unwrap();
    let ids = |rows: Vec<TemplateRow>| rows.iter().map(|t| (t.service.clone(), t.template_id)).collect::<Vec<_>>();
    let live = ids(load_templates(&store, "v1").await.unwrap());
    let want = [("b", 3), ("a", 2), ("a", 5)].map(|(s, id)| (s.to_string(), id)).to_vec();
    assert_eq!(live, want, "1 and 4 are not restored; least recently seen first");
    let in_force: Vec<(String, u64, u64)> = load_merges(&store, "v1")
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.service, m.absorbed_id, m.survivor_id))
        .collect();
    let want = [("a", 1, 5), ("a", 4, 5), ("b", 2, 5)].map(|(s, a, v)| (s.to_string(), a, v)).to_vec();
    assert_eq!(in_force, want, "per service then id; a's 2 lives again, v0 is another epoch");
    let got = ids(new_template_candidates(&store, &["a".to_string()], "v1", 0, 100).await.unwrap());
    assert_eq!(got, [2, 5].map(|id| ("a".to_string(), id)).to_vec(), "absorbed templates are never announced");
    let counts = minute_counts(&store, &a, "v1", 0).await.unwrap();
    let counts: Vec<(u64, u64)> = counts.iter().map(|c| (c.template_id, c.count)).collect();
    assert_eq!(counts, vec![(5, 7)], "the 4 logs of 1, the one of 4 and the 2 of 5, all on the survivor");
    assert_eq!(
        minute_counts(&store, &a, "v0", 0).await.unwrap().iter().map(|c| c.template_id).collect::<Vec<_>>(),
        vec![1, 4, 5],
        "another masking version's merges do not apply"
    );

    // Alerts: the newest version is read; unmarked versions are found oldest first.
    store_alerts(&store, &[alert(1, "a", AlertKind::Spike, 11 * MIN), alert(2, "b", AlertKind::NewTemplate, 12 * MIN)])
        .await
        .unwrap();
    store_alerts(&store, &[alert(1, "a", AlertKind::Spike, 13 * MIN)]).await.unwrap();
    let all = alerts(&store, &AlertQuery::default()).await.unwrap();
    assert_eq!(all.iter().map(|a| (a.alert_id, a.last_at)).collect::<Vec<_>>(), vec![(1, 13 * MIN), (2, 12 * MIN)]);
    let spikes =
        alerts(&store, &AlertQuery { kind: Some(AlertKind::Spike), service: Some("a".into()), ..Default::default() })
            .await
            .unwrap();
    assert_eq!(spikes.len(), 1);
    let of_a = alerts(&store, &AlertQuery { services: Some(vec!["a".into(), "zzz".into()]), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(of_a.iter().map(|a| a.alert_id).collect::<Vec<_>>(), vec![1]);
    let unmarked = unmarked_alerts(&store, None, 0, 10).await.unwrap();
    assert_eq!(unmarked.iter().map(|a| a.alert_id).collect::<Vec<_>>(), vec![2, 1]);
    mark_published(&store, &[(2, 12 * MIN)], 1).await.unwrap();
    let unmarked = unmarked_alerts(&store, Some(&["a".to_string(), "b".to_string()]), 0, 10).await.unwrap();
    assert_eq!(unmarked.iter().map(|a| a.alert_id).collect::<Vec<_>>(), vec![1]);
    assert!(unmarked_alerts(&store, Some(&[]), 0, 10).await.unwrap().is_empty());
    let marks = published_versions(&store, &all).await.unwrap();
    assert!(marks.contains(&(2, 12 * MIN)) && !marks.contains(&(1, 13 * MIN)));
}

/// The same queries run on a current ClickHouse engine (chdb-core), with answers checked
/// where a wrong answer is plausible (tuple NOT IN, has() over a bound array).
#[test]
fn the_logminer_queries_run_on_current_clickhouse() {
    use serde_json::{json, Value};
    let fill = common::fill_placeholders;
    let mut items: Vec<Value> = tayga::store::migrate::all_statements(None).into_iter().map(Value::String).collect();
    items
        .push(Value::String("INSERT INTO log_hits VALUES ('a', 1, 7, 600000000000), ('a', 1, 7, 600000000000)".into()));
    items.push(Value::String(
        "INSERT INTO log_alerts VALUES (5, 'spike', 'a', 7, 't', 1, 2, 3, 0, 0, 9, 9, 0, ''), (6, 'spike', 'a', 7, 't', 1, 2, 3, 0, 0, 9, 9, 0, '')"
            .into(),
    ));
    items.push(Value::String("INSERT INTO log_alert_publications VALUES (5, 9, 10)".into()));
    // Template 7 absorbed 8 (whose hit counts for 7) and 9 (born again since).
    items
        .push(Value::String("INSERT INTO log_hits VALUES ('a', 2, 8, 600000000001), ('a', 3, 3, 600000000001)".into()));
    items.push(Value::String(
        "INSERT INTO log_template_merges VALUES ('a', 8, 7, 1, 'v1'), ('a', 9, 7, 1, 'v1'), ('a', 9, 9, 2, 'v1')"
            .into(),
    ));
    items.push(Value::String(
        "INSERT INTO log_templates VALUES ('a', 7, 't', 1, 5, 5, 'v1', 1), ('a', 8, 't', 1, 5, 5, 'v1', 1), \
         ('a', 9, 't', 1, 5, 5, 'v1', 1)"
            .into(),
    ));
    let s: Vec<String> = statements().into_iter().map(|s| s.sql).collect();
    assert_eq!(s.len(), 12, "a new statement needs a line here");
    let template_ids = |sql: String| format!("SELECT groupArray(template_id) FROM ({sql})");
    items.push(Value::String(fill(&s[0], &[], &["0"])));
    items.push(json!({"sql": template_ids(fill(&s[1], &[], &["'v1'", "'v1'"])), "expect": "\"[7,9]\""}));
    items.push(json!({"sql": format!("SELECT absorbed_id, survivor_id FROM ({})", fill(&s[2], &[], &["'v1'"])), "expect": "8,7"}));
    items.push(
        json!({"sql": template_ids(fill(&s[3], &[], &["['a']", "'v1'", "0", "9", "'v1'"])), "expect": "\"[7,9]\""}),
    );
    items.push(json!({"sql": fill(&s[4], &[], &["['a','b']", "0", "'v1'", "['a','b']"]), "expect": "\"a\",3,10,1\n\"a\",7,10,2"}));
    items.push(json!({"sql": fill(&s[5], &[], &["[5,8]"]), "expect": "5"}));
    items.push(json!({"sql": format!("SELECT alert_id FROM ({})", fill(&s[6], &[], &["0", "['a']"])), "expect": "6"}));
    items.push(
        json!({"sql": format!("SELECT alert_id FROM ({})", fill(&s[7], &[], &["['a']", "9", "0"])), "expect": "5\n6"}),
    );
    items.push(Value::String(fill(&s[8], &[], &["[5]"])));
    items.push(Value::String(fill(&s[9], &[], &["0", "[5]", "'a'", "['a']", "'spike'", "0", "9", "9", "9", "0"])));
    items.push(Value::String(fill(&s[10], &[], &[])));
    items.push(json!({
        "sql": fill(&s[11], &[], &["0", "[5, 6]", "'a'", "['a']", "'spike'", "0", "9", "9", "9", "0"]),
        "expect": "0"
    }));
    common::run_in_chdb("the logminer SQL", &items);
}
