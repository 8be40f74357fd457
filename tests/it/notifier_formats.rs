//! What a target receives, judged by libraries nobody here wrote: signed requests verified
//! by the Standard Webhooks reference verifier (`standardwebhooks`, PyPI), a Slack message
//! whose blocks parse as Block Kit (`slack-sdk`), a PagerDuty Events API v2 event with the
//! fields the API requires; and routing by service.

use crate::common;
use crate::notifier_support;

use std::time::Duration;

use common::{wait_for, TestEnv};
use notifier_support::*;
use tayga::daemon::notifier::metrics::DeliveryResult;
use tayga::wire::alert::{format_id, AlertKind};

const OLD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEW_SECRET: &str = "whsec_dGF5Z2EtbmV3LXNpZ25pbmcta2V5LTIwMjY=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_slack_and_pagerduty_payloads_pass_their_own_verifiers() {
    let env = TestEnv::new("notify_formats");
    let secrets = tempfile::tempdir().unwrap();
    let secrets_file = secrets.path().join("signing");
    // A rotation in progress: both secrets sign.
    std::fs::write(&secrets_file, format!("{OLD_SECRET}\n{NEW_SECRET}\n")).unwrap();
    let routing_key_file = secrets.path().join("routing_key");
    std::fs::write(&routing_key_file, "R0UT1NGKEY0000000000000000000000\n").unwrap();

    // The signed target answers 503 first: its retry is signed anew, with the same webhook-id.
    let json_hook = Hook::start(vec![Reply::status(503)], Reply::status(200)).await;
    let (slack_hook, pager_hook, other_hook) =
        (Hook::always(200).await, Hook::always(202).await, Hook::always(200).await);
    let mut signed = json_hook.target("signed");
    signed.secrets_file = secrets_file.display().to_string();
    let mut slack = slack_hook.target("slack");
    slack.format = "slack".into();
    slack.services = vec!["check*".into()];
    let mut pager = pager_hook.target("pager");
    pager.format = "pagerduty".into();
    pager.routing_key_file = routing_key_file.display().to_string();
    let mut billing = other_hook.target("billing-only");
    billing.services = vec!["billing-*".into()];
    let mut config = notifier_config(&env.config, vec![signed, slack, pager, billing]);
    config.api.public_url = "https://tayga.example/".into();
    let notifier = Running::start(&config).await;
    let store = env.store();

    let alert = alert("notify_formats", 1, AlertKind::Spike);
    publish(&config, &[&alert]).await;
    for target in ["signed", "slack", "pager"] {
        wait_status(&store, alert.alert_id, target, "delivered").await;
    }
    wait_committed(&config, 1).await;
    wait_for("the skipped target to be counted", Duration::from_secs(10), || async {
        (notifier.count("billing-only", DeliveryResult::skipped) == 1).then_some(())
    })
    .await;
    assert_eq!(other_hook.count(), 0, "a target routed to other services gets nothing");

    // Signed: the reference verifier accepts the request with either secret alone.
    let attempts = json_hook.received();
    assert_eq!(attempts.len(), 2, "a 503, then the delivery");
    let id = attempts[0].headers["webhook-id"].to_str().unwrap().to_string();
    assert!(id.starts_with("msg_"), "{id}");
    assert_eq!(attempts[1].headers["webhook-id"], id.as_str(), "a retry is the same message");
    let signed = &attempts[1];
    assert_eq!(signed.body["alert_id"], format_id(alert.alert_id), "the json format is the alert document");
    assert_eq!(signed.headers["webhook-signature"].to_str().unwrap().split(' ').count(), 2, "one per secret");
    let mut checks: Vec<serde_json::Value> = [OLD_SECRET, NEW_SECRET]
        .iter()
        .map(|secret| {
            serde_json::json!({"check": "signature", "secret": secret, "headers": headers_json(signed), "body_b64": b64(&signed.raw)})
        })
        .collect();
    // A tampered body is refused: the verifier really checks.
    let mut tampered = signed.raw.clone();
    tampered.push(b' ');
    checks.push(serde_json::json!({"check": "signature", "secret": OLD_SECRET, "headers": headers_json(signed), "body_b64": b64(&tampered)}));
    // Unsigned targets carry no signature headers.
    let slack_received = &slack_hook.received()[0];
    assert!(slack_received.headers.get("webhook-signature").is_none());
    checks.push(serde_json::json!({"check": "slack", "body_b64": b64(&slack_received.raw)}));
    let verdicts = verify(&checks);
    assert_eq!(verdicts.len(), 4, "{verdicts:?}");
    assert_eq!(verdicts[..2], ["ok", "ok"], "Standard Webhooks verification with each secret");
    assert!(verdicts[2].starts_with("signature: WebhookVerificationError"), "a tampered body fails: {verdicts:?}");
    assert_eq!(verdicts[3], "ok", "Slack Block Kit");

    let slack = &slack_received.body;
    assert!(slack["text"].as_str().unwrap().contains("[checkout]"), "{slack}");
    let blocks = slack["blocks"].as_array().unwrap();
    let url = &blocks.last().unwrap()["elements"][0]["url"];
    assert_eq!(url, &serde_json::json!(format!("https://tayga.example/alerts/{}", format_id(alert.alert_id))));

    // PagerDuty Events API v2: routing_key, event_action and payload.{summary, source,
    // severity} are required; the dedup key is the alert id, so a resolve can name it.
    let event = &pager_hook.received()[0].body;
    assert_eq!(event["routing_key"], "R0UT1NGKEY0000000000000000000000");
    assert_eq!(event["event_action"], "trigger");
    assert_eq!(event["dedup_key"], format_id(alert.alert_id));
    let payload = &event["payload"];
    assert!(!payload["summary"].as_str().unwrap().is_empty() && payload["summary"].as_str().unwrap().len() <= 1024);
    assert_eq!(payload["source"], "checkout");
    assert!(["critical", "error", "warning", "info"].contains(&payload["severity"].as_str().unwrap()));
    assert_eq!(event["links"][0]["href"], url.clone());
    notifier.stop().await;
}
