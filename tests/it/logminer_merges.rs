//! Sibling merges in the logminer (docs/mining.md, "Merging and identity"), run as `tayga
//! serve logminer` processes against the real ClickHouse 18.16 and broker, with the default
//! mining settings: a merge is stored with the rows of its flush; the absorbed templates
//! are neither announced nor restored after a restart, so the restarted miner gives the
//! same ids; `tayga remine` rebuilds the same merges and ids; and every count follows the
//! survivor, so an absorbed steady template does not fall silent and the survivor does
//! not spike.

use crate::common;
use crate::logminer::{alerts, count, logs_request, prepare, produce, produce_request, templates, Replica, MIN, WAIT};
use crate::logminer_commands::stored_hits;

use std::collections::BTreeMap;

use common::{run, wait_for, TestEnv};
use tayga::otlp::flatten::log_rows;
use tayga::otlp::ExportLogsServiceRequest;
use tayga::store::logminer::{load_templates, minute_counts};
use tayga::store::query::{templates as api, Window};
use tayga::store::{now_ns, LogRow, Store, TemplateMergeRow};

const SEC: u64 = 1_000_000_000;

fn masking_version(env: &TestEnv) -> String {
    tayga::mine::Miner::new(env.config.logminer.mining()).unwrap().masking_version().to_string()
}

/// (absorbed, survivor) of every stored merge row, newest version.
async fn merges(store: &Store, service: &str) -> Vec<(u64, u64)> {
    store
        .select_for_tests::<TemplateMergeRow>("FINAL WHERE service = ? ORDER BY absorbed_id")
        .bind(service)
        .fetch_all::<TemplateMergeRow>()
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.absorbed_id, m.survivor_id))
        .collect()
}

fn invalid_user(user: &str, n: u64) -> String {
    format!("Invalid user {user} from 10.0.0.{n}")
}

async fn new_template_ids(store: &Store, service: &str) -> Vec<u64> {
    alerts(store)
        .await
        .into_iter()
        .filter(|a| a.kind == "new_template" && a.service == service)
        .map(|a| a.template_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_is_stored_unannounced_not_restored_after_a_restart_and_remine_rebuilds_the_same_ids() {
    let env = TestEnv::new("logminer_merge_ids");
    let store = prepare(&env).await;
    let version = masking_version(&env);
    let mut sent: Vec<ExportLogsServiceRequest> = Vec::new();

    // Detection ticks 10 minutes apart and no line starts a pass: only the shutdown pass
    // announces, after the four templates were stored and then absorbed.
    let replica = Replica::start_tick_only(&env, "r1", 600);
    // Logs of the masking epoch the logminer starts, so that remine re-mines them.
    let t0 = wait_for("the masking epoch", WAIT, || {
        let store = store.clone();
        async move { tayga::store::logminer::State::load(&store).await.ok()?.masking_epoch().map(|(_, at)| at + SEC) }
    })
    .await;
    let t0 = t0.max(now_ns());
    let births: Vec<(u64, String)> = ["alice", "bob", "carol", "dave"]
        .iter()
        .enumerate()
        .map(|(i, user)| (t0 + i as u64 * 1_000, invalid_user(user, i as u64)))
        .collect();
    sent.push(logs_request("sshd", &births));
    produce_request(&env.config, "sshd", sent[0].clone()).await;
    let born: Vec<u64> = wait_for("the four templates stored", WAIT, || {
        let store = store.clone();
        async move {
            let t = templates(&store, "sshd").await;
            (t.len() == 4).then(|| t.iter().map(|t| t.template_id).collect())
        }
    })
    .await;
    // A fifth user: four templates that differ in one word, and a fifth value, are a
    // variable. Equal counts: the smallest id survives.
    sent.push(logs_request("sshd", &[(t0 + 10_000, invalid_user("erin", 9))]));
    produce_request(&env.config, "sshd", sent[1].clone()).await;
    let survivor = *born.iter().min().unwrap();
    let mut absorbed: Vec<(u64, u64)> = born.iter().filter(|&&id| id != survivor).map(|&id| (id, survivor)).collect();
    absorbed.sort_unstable();
    wait_for("the merge stored", WAIT, || {
        let (store, absorbed) = (store.clone(), absorbed.clone());
        async move { (merges(&store, "sshd").await == absorbed).then_some(()) }
    })
    .await;
    assert!(replica.stop().await.success());
    assert_eq!(
        new_template_ids(&store, "sshd").await,
        vec![survivor],
        "the absorbed templates were stored after the watermark, and are never announced"
    );
    let live = load_templates(&store, &version).await.unwrap();
    assert_eq!(live.iter().map(|t| t.template_id).collect::<Vec<_>>(), vec![survivor], "absorbed: not restored");
    assert_eq!((live[0].template.as_str(), live[0].count), ("Invalid user <*> from <IP>", 5));
    assert_eq!(live[0].first_seen_ns, born_first_seen(&store, &born).await, "the earliest sighting of any of them");

    // A restart: a fresh miner from what is stored. An absorbed user's own line and a new
    // user go to the survivor, under its id; nothing is born again.
    let replica = Replica::start(&env, "r1", 600);
    sent.push(logs_request(
        "sshd",
        &[(t0 + 20_000, invalid_user("bob", 20)), (t0 + 21_000, invalid_user("frank", 21))],
    ));
    produce_request(&env.config, "sshd", sent[2].clone()).await;
    // Hits are stored before the template rows of their flush: wait for both.
    wait_for("7 hits and the survivor at 7", WAIT, || {
        let (store, version) = (store.clone(), version.clone());
        async move {
            let hits = count(&store, "SELECT count() FROM log_hits FINAL").await;
            let live = load_templates(&store, &version).await.ok()?;
            (hits == 7 && live.iter().any(|t| t.count == 7)).then_some(())
        }
    })
    .await;
    let stored = stored_hits(&store).await;
    for log in log_rows(&sent[2], 0) {
        assert_eq!(stored[&(log.service.clone(), log.log_id)], survivor, "{}", log.body);
    }
    assert_eq!(templates(&store, "sshd").await.len(), 4, "no template was born again");
    let live = load_templates(&store, &version).await.unwrap();
    assert_eq!((live.len(), live[0].template_id, live[0].count), (1, survivor, 7));
    assert!(replica.stop().await.success());
    assert_eq!(new_template_ids(&store, "sshd").await, vec![survivor]);

    // remine, from the logs as the writer stores them: the same merges, hits and ids.
    let logs: Vec<LogRow> = sent.iter().flat_map(|r| log_rows(r, now_ns())).collect();
    store.insert(&logs).await.unwrap();
    let (out, stdout, stderr) = run(env.tayga().args(["--json", "remine"]));
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((report["templates"].as_u64(), report["absorbed"].as_u64()), (Some(1), Some(3)), "{report}");
    assert_eq!(stored_hits(&store).await, stored, "every log on the template the logminer gave it");
    assert_eq!(merges(&store, "sshd").await, absorbed);
    let live = load_templates(&store, &version).await.unwrap();
    assert_eq!((live.len(), live[0].template_id, live[0].count), (1, survivor, 7));
    assert_eq!(live[0].template, "Invalid user <*> from <IP>");
}

async fn born_first_seen(store: &Store, born: &[u64]) -> u64 {
    let all = store
        .select_for_tests::<tayga::store::TemplateRow>("FINAL WHERE service = 'sshd'")
        .fetch_all::<tayga::store::TemplateRow>()
        .await
        .unwrap();
    all.iter().filter(|t| born.contains(&t.template_id)).map(|t| t.first_seen_ns).min().unwrap()
}

const WORKERS: [&str; 8] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];

/// Heartbeats of the eight workers, `per_minute` each, from the minute `start(w)` of each
/// up to minute `until` (exclusive), at `m * MIN + k` for the k-th line of minute m (or from
/// `at(m)` when given).
fn heartbeats(
    start: impl Fn(usize) -> u64,
    until: u64,
    per_minute: u64,
    at: impl Fn(u64) -> u64,
) -> Vec<(u64, String)> {
    let mut lines = Vec::new();
    for m in start(0)..until {
        let mut k = 0;
        for _ in 0..per_minute {
            for (w, name) in WORKERS.iter().enumerate() {
                if m >= start(w) {
                    lines.push((at(m) + k, format!("heartbeat received from worker {name}")));
                    k += 1;
                }
            }
        }
    }
    lines
}

/// When each worker starts: four at minute `m0`, three more a minute apart (too few, with
/// too many lines each, to merge), the eighth at `last`: eight siblings merge.
fn worker_start(m0: u64, last: u64) -> impl Fn(usize) -> u64 {
    move |w| match w {
        0..=3 => m0,
        4..=6 => m0 + w as u64 - 3,
        _ => last,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_follow_the_survivor_so_an_absorbed_steady_template_is_not_silent_and_a_merge_does_not_spike() {
    let env = TestEnv::new("logminer_merge_counts");
    let store = prepare(&env).await;
    let version = masking_version(&env);
    let now = now_ns();
    let this_min = now / MIN;
    // The current minute's lines, never after the wall clock by more than a few ns.
    let current = (this_min * MIN).max(now.saturating_sub(SEC));
    let at = |m: u64| if m == this_min { current } else { m * MIN };

    // fleet: the eighth worker comes 15 minutes ago. Without the merge table the seven
    // absorbed templates (steady for 20+ minutes) would be silent since.
    let mut fleet = heartbeats(worker_start(this_min - 40, this_min - 15), this_min, 3, at);
    let fleet_heartbeats = fleet.len() as u64;
    // Controls: the rules are live here. A steady template that stops is silent; a burst spikes.
    for m in this_min - 40..this_min - 10 {
        for i in 0..3 {
            fleet.push((m * MIN + 30 * SEC + i, format!("cache refresh took {} ms", 10 + i)));
        }
    }
    for m in this_min - 31..this_min {
        for i in 0..2 {
            fleet.push((m * MIN + 40 * SEC + i, format!("payment declined for card {}", 4000 + i)));
        }
    }
    for i in 0..60 {
        fleet.push((current + 1_000 + i, format!("payment declined for card {}", 5000 + i)));
    }
    fleet.sort();
    // burst: the eighth worker comes in the current minute. Without the merge table the
    // survivor's own minute (40 lines) would be 8 times its baseline (5 a minute).
    let burst = heartbeats(worker_start(this_min - 40, this_min), this_min + 1, 5, at);

    let replica = Replica::start(&env, "r1", 1);
    produce(&env.config, "fleet", &fleet).await;
    produce(&env.config, "burst", &burst).await;
    wait_for("the control silence and spike", WAIT, || {
        let store = store.clone();
        async move {
            let a = alerts(&store).await;
            (a.iter().any(|a| a.kind == "silence") && a.iter().any(|a| a.kind == "spike")).then_some(())
        }
    })
    .await;
    // Two more detection passes over everything stored, so an alert they would raise is there.
    let passes = replica.metric("tayga_logminer_pass_duration_seconds_count{pass=\"detection\"}").await.unwrap();
    wait_for("two more detection passes", WAIT, || {
        let r = &replica;
        async move {
            let n = r.metric("tayga_logminer_pass_duration_seconds_count{pass=\"detection\"}").await?;
            (n >= passes + 2.0).then_some(())
        }
    })
    .await;
    assert!(replica.metric("tayga_logminer_absorbed_templates_total").await.unwrap() >= 12.0);

    let live = load_templates(&store, &version).await.unwrap();
    let live_of = |service: &str| live.iter().filter(|t| t.service == service).cloned().collect::<Vec<_>>();
    let heartbeat_of = |service: &str| {
        let t: Vec<_> = live_of(service).into_iter().filter(|t| t.template.starts_with("heartbeat")).collect();
        assert_eq!(t.len(), 1, "one live heartbeat template in {service}: {t:?}");
        t[0].clone()
    };
    let (fleet_t, burst_t) = (heartbeat_of("fleet"), heartbeat_of("burst"));
    assert_eq!(fleet_t.template, "heartbeat received from worker <*>");
    assert_eq!(fleet_t.count, fleet_heartbeats, "the survivor's count holds every absorbed line");
    assert_eq!(burst_t.count, burst.len() as u64);
    assert_eq!(merges(&store, "fleet").await.len(), 6, "seven siblings and the line: six absorbed");
    assert_eq!(merges(&store, "burst").await.len(), 6);

    let silent: Vec<String> =
        alerts(&store).await.into_iter().filter(|a| a.kind == "silence").map(|a| a.template).collect();
    assert_eq!(silent, vec!["cache refresh took <NUM> ms"], "no absorbed heartbeat reads as silent");
    let spikes: Vec<String> =
        alerts(&store).await.into_iter().filter(|a| a.kind == "spike").map(|a| a.template).collect();
    assert_eq!(spikes, vec!["payment declined for card <NUM>"], "the merge in the current minute is no spike");
    let mut announced = new_template_ids(&store, "fleet").await;
    announced.extend(new_template_ids(&store, "burst").await);
    assert_eq!(announced.len(), 4, "fleet's three templates and burst's one: no absorbed template is announced");

    // Minute counts, the logminer's and the API's: the survivor holds every worker's lines,
    // before the merge too.
    let counts = minute_counts(&store, &["fleet".to_string()], &version, 0).await.unwrap();
    let of_survivor: BTreeMap<u64, u64> =
        counts.iter().filter(|c| c.template_id == fleet_t.template_id).map(|c| (c.minute, c.count)).collect();
    assert_eq!(of_survivor[&(this_min - 20)], 7 * 3, "seven workers before the merge");
    assert_eq!(of_survivor[&(this_min - 10)], 8 * 3);
    assert_eq!(of_survivor.values().sum::<u64>(), fleet_heartbeats);
    assert!(counts.iter().all(|c| live.iter().any(|t| t.template_id == c.template_id)), "only live templates count");
    let window = Window { from_ns: 0, to_ns: now + MIN };
    let from_api = api::minute_counts(&store, window, &["fleet".to_string()], &[fleet_t.template_id]).await.unwrap();
    assert_eq!(from_api.iter().map(|c| (c.minute, c.count)).collect::<BTreeMap<_, _>>(), of_survivor);
    let listed = api::templates(&store, Some("fleet"), None, 100).await.unwrap();
    assert_eq!(listed.len(), 3, "absorbed templates are not listed: {listed:?}");
    assert_eq!(listed[0].template_id, fleet_t.template_id);
    drop(replica);
}
