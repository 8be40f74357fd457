//! Operators' silences against the real ClickHouse and broker (docs/notifier.md,
//! "Silences"): a silenced service's alerts reach no target and their rows say `silenced`
//! with the silence, `tayga deliveries show` and `tayga silences` say so, an expired
//! silence lets the alert's next update through; a silence holds across a notifier restart
//! and on every replica, since each reads it from the store.

use crate::common;
use crate::notifier_support;

use common::{wait_for, TestEnv};
use notifier_support::*;
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::store::silences::{self, NewSilence};
use tayga::wire::alert::{format_id, Alert, AlertKind};

const HOUR_NS: u64 = 3_600_000_000_000;

/// An alert of `service`, unique to the test and `seed`.
fn alert_of(test: &str, seed: u64, service: &str) -> Alert {
    let mut a = alert(test, seed, AlertKind::Spike);
    a.service = service.into();
    a.template_id = tayga::identity::template_id(service, &format!("{test}-{seed}"));
    a
}

/// Alerts of `service` whose keys land on each of the alerts topic's partitions, one each.
fn one_per_partition(test: &str, service: &str, partitions: i32) -> Vec<Alert> {
    let mut by_partition: Vec<Option<Alert>> = vec![None; partitions as usize];
    for seed in 0.. {
        let a = alert_of(test, seed, service);
        let p = tayga::bus::packed::plan::partition_for(a.key().as_bytes(), partitions);
        by_partition[p as usize].get_or_insert(a);
        if by_partition.iter().all(Option::is_some) {
            break;
        }
    }
    by_partition.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silenced_service_reaches_no_target_until_the_silence_is_expired() {
    let env = TestEnv::new("silence_cli");
    let ops = Hook::always(200).await;
    let pager = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![ops.target("ops"), pager.target("pager")]);
    let store = env.store();
    // The silence is added (through the command) before the notifier starts: a new
    // replica reads it from the store.
    tayga::daemon::prepare(&config, &tayga::daemon::Shutdown::new()).await.unwrap();
    let (out, stdout, stderr) =
        tayga(&env, &["--json", "silences", "add", "--service", "checkout", "--for", "1h", "--comment", "deploy 4.2"])
            .await;
    assert!(out.status.success(), "{stderr}");
    let added: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let silence_id = added["silence_id"].as_str().unwrap().to_string();
    assert_eq!((added["state"].as_str(), added["service"].as_str()), (Some("active"), Some("checkout")));
    assert_eq!(added["comment"], "deploy 4.2");

    let notifier = Running::start(&config).await;
    let silenced = alert_of("silence_cli", 1, "checkout");
    let other = alert_of("silence_cli", 2, "web");
    publish(&config, &[&silenced, &other]).await;
    wait_status(&store, other.alert_id, "ops", "delivered").await;
    wait_status(&store, other.alert_id, "pager", "delivered").await;
    for target in ["ops", "pager"] {
        let row = wait_status(&store, silenced.alert_id, target, "silenced").await;
        assert_eq!((format_id(row.silence_id), row.attempts), (silence_id.clone(), 0));
        assert_eq!(notifier.count(target, DeliveryResult::silenced), 1);
    }
    wait_committed(&config, 2).await;
    for hook in [&ops, &pager] {
        let got = hook.received();
        assert_eq!(got.len(), 1, "only the other service's alert is sent");
        assert_eq!(got[0].body["alert_id"], format_id(other.alert_id));
    }

    // A republished copy while the silence runs writes nothing new and sends nothing.
    publish(&config, &[&silenced]).await;
    wait_committed(&config, 3).await;
    assert_eq!(notifier.count("ops", DeliveryResult::silenced), 2);
    assert_eq!(ops.count(), 1);

    // The operator's view: the rows say silenced and name the silence.
    let (out, stdout, stderr) = tayga(&env, &["deliveries", "show", "--alert-id", &format_id(silenced.alert_id)]).await;
    assert!(out.status.success(), "{stderr}");
    let shown = mask_times(&stdout).replace(&silence_id, "<silence>");
    assert_eq!(
        shown,
        "target\tstatus\tattempts\tlast_error\tcreated\tupdated\n\
         ops\tsilenced\t0\t\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n\
         pager\tsilenced\t0\t\tYYYY-MM-DDTHH:MM:SS.mmmZ\tYYYY-MM-DDTHH:MM:SS.mmmZ\n\
         ops: held back by silence <silence> (tayga silences list --all)\n\
         pager: held back by silence <silence> (tayga silences list --all)\n"
    );
    let (out, stdout, _) = tayga(&env, &["--json", "silences", "list"]).await;
    assert!(out.status.success());
    let listed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["silence_id"], silence_id.as_str());

    // Expired: the alert's next update is delivered to both targets, once.
    let (out, stdout, stderr) = tayga(&env, &["silences", "expire", &silence_id]).await;
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with(&format!("silence {silence_id} expired: alerts of service checkout")), "{stdout}");
    let (out, _, stderr) = tayga(&env, &["silences", "expire", &silence_id]).await;
    assert_eq!(out.status.code(), Some(1), "a silence that ended cannot be expired again");
    assert!(stderr.contains("already ended"), "{stderr}");
    let (_, stdout, _) = tayga(&env, &["--json", "silences", "list"]).await;
    assert_eq!(stdout.trim(), "[]", "no silence runs");
    // The notifier reads the silences again within its refresh: until then an update is
    // still held back, so the logminer's updates are stood in for until one is delivered.
    let mut update = silenced.clone();
    wait_for("the update after the silence is delivered", WAIT, || {
        update.last_at += 1_000_000_000;
        let (config, store, update) = (&config, &store, update.clone());
        async move {
            publish(config, &[&update]).await;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let ops = row(store, update.alert_id, "ops").await?;
            (ops.status == "delivered").then_some(())
        }
    })
    .await;
    let pager_row = wait_status(&store, silenced.alert_id, "pager", "delivered").await;
    assert_eq!((pager_row.silence_id, pager_row.attempts), (0, 1));
    assert_eq!(ops.received().iter().filter(|r| r.body["alert_id"] == format_id(silenced.alert_id)).count(), 1);
    notifier.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_holds_across_a_restart_and_on_every_replica() {
    let env = TestEnv::new("silence_replicas");
    let hook = Hook::always(200).await;
    let config = notifier_config(&env.config, vec![hook.target("ops")]);
    let store = env.store();
    tayga::daemon::prepare(&config, &tayga::daemon::Shutdown::new()).await.unwrap();
    let new = NewSilence {
        service: "checkout".into(),
        duration_ns: HOUR_NS,
        comment: "maintenance".into(),
        by: "test".into(),
        ..Default::default()
    };
    let silence = silences::add(&store, &new, tayga::store::now_ns()).await.unwrap();

    // One notifier, then a restart: the new process reads the silence from the store.
    let first = Running::start(&config).await;
    let before = alert_of("silence_replicas", 1000, "checkout");
    publish(&config, &[&before]).await;
    wait_status(&store, before.alert_id, "ops", "silenced").await;
    wait_committed(&config, 1).await;
    first.stop().await;
    let a = Running::start(&config).await;
    let after = alert_of("silence_replicas", 1001, "checkout");
    publish(&config, &[&after]).await;
    let row = wait_status(&store, after.alert_id, "ops", "silenced").await;
    assert_eq!(row.silence_id, silence.silence_id);
    wait_committed(&config, 2).await;

    // A second replica: once the partitions are shared, each replica gets an alert.
    let b = Running::start(&config).await;
    let partitions = tayga::bus::SMALL_TOPIC_PARTITIONS;
    wait_for("both replicas hold partitions", WAIT, || async {
        (a.assigned() > 0 && b.assigned() > 0 && a.assigned() + b.assigned() == i64::from(partitions)).then_some(())
    })
    .await;
    let spread = one_per_partition("silence_replicas", "checkout", partitions);
    publish(&config, &spread.iter().collect::<Vec<_>>()).await;
    for alert in &spread {
        let row = wait_status(&store, alert.alert_id, "ops", "silenced").await;
        assert_eq!(row.silence_id, silence.silence_id);
    }
    wait_committed(&config, 2 + i64::from(partitions)).await;
    assert!(a.count("ops", DeliveryResult::silenced) >= 1 && b.count("ops", DeliveryResult::silenced) >= 1);
    assert_eq!(hook.count(), 0, "no silenced alert reaches the target");
    a.stop().await;
    b.stop().await;
}
