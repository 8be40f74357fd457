//! What a target receives: the alert in the target's format (Tayga's JSON document, a
//! Slack message or a PagerDuty Events API v2 event) and, when the target has signing
//! secrets, the Standard Webhooks 1.0 headers that let a receiver tell Tayga's request from
//! anyone's. Pure: no I/O; docs/alerts.md documents each format with an example.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::wire::alert::{format_id, Alert, AlertKind, AlertState};

/// The body a target is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The alert document itself (docs/alerts.md), versioned.
    Json,
    /// A Slack incoming-webhook message with Block Kit blocks.
    Slack,
    /// A PagerDuty Events API v2 event.
    PagerDuty,
}

impl Format {
    pub const NAMES: [&'static str; 3] = ["json", "slack", "pagerduty"];

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "json" | "" => Some(Format::Json),
            "slack" => Some(Format::Slack),
            "pagerduty" => Some(Format::PagerDuty),
            _ => None,
        }
    }
}

/// Where an alert can be opened, when the app's public address is known.
pub fn alert_url(public_url: &str, alert: &Alert) -> Option<String> {
    let base = public_url.trim().trim_end_matches('/');
    (!base.is_empty()).then(|| format!("{base}/alerts/{}", format_id(alert.alert_id)))
}

/// The body of one request to a target.
pub fn render(format: Format, alert: &Alert, public_url: &str, routing_key: &str) -> Vec<u8> {
    let link = alert_url(public_url, alert);
    let value = match format {
        // The document as published: a non-finite number cannot be in it (the logminer
        // checks before publishing), so this never falls back in practice.
        Format::Json => return alert.to_json().unwrap_or_else(|_| serde_json::to_vec(&json!({})).unwrap_or_default()),
        Format::Slack => slack(alert, link.as_deref()),
        Format::PagerDuty => pagerduty(alert, link.as_deref(), routing_key),
    };
    serde_json::to_vec(&value).unwrap_or_default()
}

/// One line that says what happened, for notifications and summaries.
pub fn summary(alert: &Alert) -> String {
    let what = match alert.kind {
        AlertKind::NewTemplate => "new log template",
        AlertKind::Spike => "log template spiking",
        AlertKind::Silence => "steady log template went silent",
        AlertKind::NewShape => "new path of",
        AlertKind::ShapeSlowdown => "slower path of",
    };
    let resolved = if alert.state == AlertState::Resolved { "RESOLVED " } else { "" };
    let subject = one_line(&alert.template, 200);
    let line = match &alert.shape {
        Some(s) if alert.kind == AlertKind::NewShape && !s.edges_added.is_empty() => {
            format!("[{}] {what} {subject} (+ {})", alert.service, one_line(&s.edges_added.join(", "), 200))
        }
        _ if alert.kind.is_shape() => format!("[{}] {what} {subject}", alert.service),
        _ => format!("[{}] {what}: {subject}", alert.service),
    };
    format!("{resolved}{line}")
}

/// What the alert's numbers say, by kind.
fn values(alert: &Alert) -> String {
    match alert.kind {
        AlertKind::NewTemplate => format!("{} line(s) so far", alert.count),
        AlertKind::Spike => format!(
            "{} lines in a minute; usual {:.1}/min, threshold {:.1}",
            alert.count, alert.baseline, alert.threshold
        ),
        AlertKind::Silence => format!("no line since it stopped; usual {:.1}/min", alert.baseline),
        AlertKind::NewShape => {
            let (added, removed, share) =
                alert.shape.as_ref().map_or((0, 0, 0.0), |s| (s.edges_added.len(), s.edges_removed.len(), s.share));
            format!(
                "{} trace(s), {:.0}% of the endpoint's; {added} edge(s) added, {removed} removed",
                alert.count,
                share * 100.0
            )
        }
        AlertKind::ShapeSlowdown => format!(
            "p95 {:.0} ms over {} traces; usual {:.0} ms, threshold {:.0} ms",
            alert.shape.as_ref().and_then(|s| s.p95_ms).unwrap_or(0.0),
            alert.count,
            alert.baseline,
            alert.threshold
        ),
    }
}

fn one_line(text: &str, max_chars: usize) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if flat.chars().count() <= max_chars {
        flat
    } else {
        flat.chars().take(max_chars - 1).chain(['…']).collect()
    }
}

/// Slack's mrkdwn needs `&`, `<` and `>` escaped; backticks would end the code span.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('`', "'")
}

/// The template with its variable slots (`<*>`, `<IP>`, …) in bold, outside code.
fn template_with_slots(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start..].find('>') else { break };
        let slot = &rest[start..start + len + 1];
        let is_slot = slot.len() > 2 && slot[1..slot.len() - 1].chars().all(|c| c == '*' || c.is_ascii_uppercase());
        out.push_str(&slack_escape(&rest[..start]));
        if is_slot {
            out.push_str(&format!("*{}*", slack_escape(slot)));
        } else {
            out.push_str(&slack_escape(slot));
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(&slack_escape(rest));
    out
}

fn slack(alert: &Alert, link: Option<&str>) -> Value {
    let title = match alert.kind {
        AlertKind::NewTemplate => "New log template",
        AlertKind::Spike => "Log template spike",
        AlertKind::Silence => "Log template silence",
        AlertKind::NewShape => "New trace shape",
        AlertKind::ShapeSlowdown => "Trace shape slowdown",
    };
    let (resolved, period) = match alert.state {
        AlertState::Firing => ("", format!("*Since*\n{}", crate::time::rfc3339(alert.first_at))),
        AlertState::Resolved => (
            "Resolved: ",
            format!(
                "*From – to*\n{} – {}",
                crate::time::rfc3339(alert.first_at),
                crate::time::rfc3339(alert.resolved_at)
            ),
        ),
    };
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": format!("{resolved}{title}: {}", one_line(&alert.service, 100))}}),
        json!({"type": "section", "fields": [
            {"type": "mrkdwn", "text": format!("*Kind*\n{}", alert.kind)},
            {"type": "mrkdwn", "text": format!("*Service*\n{}", slack_escape(&alert.service))},
            {"type": "mrkdwn", "text": format!("*Values*\n{}", values(alert))},
            {"type": "mrkdwn", "text": period},
        ]}),
        // Section text is limited to 3,000 characters.
        json!({"type": "section", "text": {"type": "mrkdwn", "text": one_line(&template_with_slots(&alert.template), 2900)}}),
        json!({"type": "context", "elements": [
            {"type": "mrkdwn", "text": format!("alert `{}` · template `{}`", format_id(alert.alert_id), format_id(alert.template_id))},
        ]}),
    ];
    if let Some(link) = link {
        blocks.push(json!({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Open in Tayga"}, "url": link},
        ]}));
    }
    // The text is the notification's fallback, read as mrkdwn too.
    json!({"text": slack_escape(&summary(alert)), "blocks": blocks})
}

/// PagerDuty's severities, by kind: a silence or a spike is something breaking; a new
/// template is something to look at.
fn severity(kind: AlertKind) -> &'static str {
    match kind {
        AlertKind::Spike | AlertKind::Silence | AlertKind::ShapeSlowdown => "error",
        AlertKind::NewTemplate | AlertKind::NewShape => "warning",
    }
}

fn pagerduty(alert: &Alert, link: Option<&str>, routing_key: &str) -> Value {
    if alert.state == AlertState::Resolved {
        // Events API v2: a resolve needs only the routing key and the incident's dedup key.
        return json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": format_id(alert.alert_id),
        });
    }
    let mut event = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        // One incident per alert: PagerDuty folds a repeat into it, and a later resolve
        // names the same key.
        "dedup_key": format_id(alert.alert_id),
        "payload": {
            "summary": one_line(&summary(alert), 1024),
            "source": alert.service,
            "severity": severity(alert.kind),
            "timestamp": crate::time::rfc3339(alert.first_at),
            "component": alert.service,
            "group": format_id(alert.template_id),
            "class": alert.kind.as_str(),
            "custom_details": {
                "template": alert.template,
                "count": alert.count,
                "baseline": alert.baseline,
                "threshold": alert.threshold,
                "first_at": crate::time::rfc3339(alert.first_at),
                "last_at": crate::time::rfc3339(alert.last_at),
            },
        },
        "client": "Tayga",
    });
    if let Some(link) = link {
        event["client_url"] = json!(link);
        event["links"] = json!([{"href": link, "text": "Open the alert in Tayga"}]);
    }
    event
}

/// A target's signing keys (Standard Webhooks: `whsec_` and the key in base64). Several
/// keys sign every request, each signature beside the others, so a receiver can move from
/// an old secret to a new one without a request that verifies with neither.
pub struct Signer {
    keys: Vec<Vec<u8>>,
}

/// Why a signing secret cannot be used. The secret itself is never part of the message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    #[error("no signing secret in it")]
    Empty,
    #[error("secret {position} is not `whsec_` followed by base64 (as Standard Webhooks secrets are written)")]
    Malformed { position: usize },
}

impl Signer {
    /// Secrets separated by white space or newlines (a file or a variable may hold several
    /// during a rotation).
    pub fn parse(secrets: &str) -> Result<Signer, SecretError> {
        let keys = secrets
            .split_whitespace()
            .enumerate()
            .map(|(i, secret)| {
                secret
                    .strip_prefix("whsec_")
                    .and_then(|key| BASE64.decode(key).ok())
                    .filter(|key| !key.is_empty())
                    .ok_or(SecretError::Malformed { position: i + 1 })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Signer { keys })
    }

    /// The `webhook-signature` value of `body` sent as message `id` at `timestamp` (Unix
    /// seconds): `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per key, space-separated.
    pub fn signature(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        let signed = [id.as_bytes(), b".", timestamp.to_string().as_bytes(), b".", body].concat();
        self.keys
            .iter()
            .map(|key| {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
                mac.update(&signed);
                format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The `webhook-id` of an alert's delivery to a target in a state: the same on every
/// attempt and every replica, so a receiver deduplicates retries by it.
pub fn message_id(alert_id: u64, target: &str, state: &str) -> String {
    format!("msg_{}", format_id(crate::identity::webhook_message_id(alert_id, target, state)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::alert::ALERT_FORMAT_VERSION;

    fn alert(kind: AlertKind) -> Alert {
        Alert {
            version: ALERT_FORMAT_VERSION,
            alert_id: 0x00c0_ffee_00c0_ffee,
            kind,
            service: "checkout".into(),
            template_id: 0x1234,
            template: "payment <*> declined for <IP> & <user>".into(),
            first_at: 1_764_588_658_000_000_000,
            last_at: 1_764_588_718_000_000_000,
            count: 42,
            baseline: 3.5,
            threshold: 17.5,
            state: AlertState::Firing,
            resolved_at: 0,
            shape: None,
        }
    }

    fn resolved(kind: AlertKind) -> Alert {
        Alert { state: AlertState::Resolved, resolved_at: 1_764_589_018_000_000_000, ..alert(kind) }
    }

    #[test]
    fn a_resolved_notice_says_so_in_every_format() {
        let a = resolved(AlertKind::Spike);
        assert_eq!(Alert::from_json(&render(Format::Json, &a, "", "")).unwrap(), a);
        let message: Value = serde_json::from_slice(&render(Format::Slack, &a, "", "")).unwrap();
        assert!(message["text"].as_str().unwrap().starts_with("RESOLVED [checkout]"), "{message}");
        assert_eq!(message["blocks"][0]["text"]["text"], "Resolved: Log template spike: checkout");
        assert!(message["blocks"][1].to_string().contains("2025-12-01T11:36:58.000Z"), "{message}");
        let event: Value = serde_json::from_slice(&render(Format::PagerDuty, &a, "", "R0UTINGKEY")).unwrap();
        assert_eq!(
            event,
            json!({"routing_key": "R0UTINGKEY", "event_action": "resolve", "dedup_key": "00c0ffee00c0ffee"})
        );
        let trigger: Value =
            serde_json::from_slice(&render(Format::PagerDuty, &alert(AlertKind::Spike), "", "R0UTINGKEY")).unwrap();
        assert_eq!(trigger["dedup_key"], event["dedup_key"], "a resolve names the incident its trigger opened");
    }

    fn new_shape() -> Alert {
        Alert {
            version: kind_version(AlertKind::NewShape),
            kind: AlertKind::NewShape,
            template: "POST /checkout".into(),
            count: 31,
            baseline: 0.0,
            threshold: 0.0,
            shape: Some(crate::wire::alert::ShapeChange {
                usual_fingerprint: 7,
                edges_added: vec!["checkout/POST /checkout -> postgres/lock row".into()],
                edges_removed: vec![],
                share: 0.5,
                trace_id: "ab".into(),
                p95_ms: None,
                new_edges: vec!["checkout/POST /checkout -> postgres/lock row".into()],
            }),
            ..alert(AlertKind::Spike)
        }
    }

    fn kind_version(kind: AlertKind) -> u32 {
        kind.format_version()
    }

    #[test]
    fn a_shape_alert_names_its_added_edges_everywhere() {
        let a = new_shape();
        assert_eq!(
            summary(&a),
            "[checkout] new path of POST /checkout (+ checkout/POST /checkout -> postgres/lock row)"
        );
        let json: Value = serde_json::from_slice(&render(Format::Json, &a, "", "")).unwrap();
        assert_eq!(json["version"], 2);
        assert_eq!(json["shape"]["edges_added"][0], "checkout/POST /checkout -> postgres/lock row");
        let slack: Value = serde_json::from_slice(&render(Format::Slack, &a, "", "")).unwrap();
        assert!(slack["text"].as_str().unwrap().contains("postgres/lock row"), "{slack}");
        assert!(slack.to_string().contains("1 edge(s) added, 0 removed"), "{slack}");
        let pd: Value = serde_json::from_slice(&render(Format::PagerDuty, &a, "", "k")).unwrap();
        assert_eq!(pd["payload"]["severity"], "warning");
        let slow = Alert {
            kind: AlertKind::ShapeSlowdown,
            baseline: 120.0,
            threshold: 240.0,
            shape: Some(crate::wire::alert::ShapeChange { p95_ms: Some(900.0), ..Default::default() }),
            ..new_shape()
        };
        assert_eq!(summary(&slow), "[checkout] slower path of POST /checkout");
        let slack: Value = serde_json::from_slice(&render(Format::Slack, &slow, "", "")).unwrap();
        assert!(slack.to_string().contains("p95 900 ms over 31 traces; usual 120 ms, threshold 240 ms"), "{slack}");
    }

    #[test]
    fn json_is_the_alert_document() {
        let a = alert(AlertKind::Spike);
        let body = render(Format::Json, &a, "", "");
        assert_eq!(Alert::from_json(&body).unwrap(), a);
    }

    #[test]
    fn slack_marks_slots_escapes_text_and_links_only_with_a_public_url() {
        let a = alert(AlertKind::NewTemplate);
        let message: Value = serde_json::from_slice(&render(Format::Slack, &a, "https://tayga.example/", "")).unwrap();
        assert_eq!(
            message["text"],
            "[checkout] new log template: payment &lt;*&gt; declined for &lt;IP&gt; &amp; &lt;user&gt;"
        );
        let blocks = message["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[2]["text"]["text"], "payment *&lt;*&gt;* declined for *&lt;IP&gt;* &amp; &lt;user&gt;");
        assert_eq!(blocks.last().unwrap()["elements"][0]["url"], "https://tayga.example/alerts/00c0ffee00c0ffee");
        let message: Value = serde_json::from_slice(&render(Format::Slack, &a, "", "")).unwrap();
        assert!(message["blocks"].as_array().unwrap().iter().all(|b| b["type"] != "actions"));
    }

    #[test]
    fn pagerduty_events_carry_what_the_events_api_requires() {
        let a = alert(AlertKind::Silence);
        let event: Value = serde_json::from_slice(&render(Format::PagerDuty, &a, "", "R0UTINGKEY")).unwrap();
        assert_eq!(event["routing_key"], "R0UTINGKEY");
        assert_eq!(event["event_action"], "trigger");
        assert_eq!(event["dedup_key"], "00c0ffee00c0ffee");
        assert_eq!(event["payload"]["severity"], "error");
        assert_eq!(event["payload"]["source"], "checkout");
        assert_eq!(event["payload"]["timestamp"], "2025-12-01T11:30:58.000Z");
        assert!(event["payload"]["summary"].as_str().unwrap().len() <= 1024);
        assert!(event.get("links").is_none());
    }

    #[test]
    fn signatures_follow_standard_webhooks() {
        // The example of the Standard Webhooks specification's reference libraries.
        let signer = Signer::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signer.signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let two = Signer::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\nwhsec_c2Vjb25k").unwrap();
        let both = two.signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert!(both.starts_with("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,"), "{both}");
        assert_eq!(Signer::parse(" \n").err(), Some(SecretError::Empty));
        assert_eq!(Signer::parse("whsec_b2s= plain").err(), Some(SecretError::Malformed { position: 2 }));
        assert_eq!(Signer::parse("whsec_!!").err(), Some(SecretError::Malformed { position: 1 }));
    }

    #[test]
    fn message_ids_are_stable_per_alert_target_and_state() {
        assert_eq!(message_id(7, "ops", "firing"), message_id(7, "ops", "firing"));
        assert_ne!(message_id(7, "ops", "firing"), message_id(7, "pager", "firing"));
        assert_ne!(message_id(7, "ops", "firing"), message_id(7, "ops", "resolved"));
        assert!(message_id(7, "ops", "firing").starts_with("msg_"));
    }
}
