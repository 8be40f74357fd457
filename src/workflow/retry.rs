//! The operator's manual retry of a failed delivery (docs/design.md#manual-retry,
//! docs/notifier.md "Manual retry"): `tayga deliveries retry` and `POST /api/v1/deliveries/{alert_id}/retry` both
//! call [`retry`], so the rule lives once.
//!
//! A retry resets the chosen `failed` (alert, target) rows to `pending` (with the attempts
//! starting over and who and when recorded, [`DeliveryRow::manual_retry`]), then republishes
//! the alert's stored document to the alerts topic with [`MANUAL_RETRY_HEADER`]. The
//! notifier's usual decision then delivers it exactly once more to those targets: a pending
//! row means "deliver", every other target's final row means "duplicate". Only an operator
//! calls this; the notifier never resets a final row on its own, so the
//! once-per-target rule (docs/design.md#notifier-states) holds for everything it does by itself.
//!
//! A retry is of firing deliveries (`notifier_deliveries`); a failed resolved notice is not
//! retried by hand.
//!
//! The rows are written before the record is published: the other order would let the
//! notifier read the record while the row still says `failed`, and send nothing.
//!
//! [`MANUAL_RETRY_HEADER`]: crate::wire::alert::MANUAL_RETRY_HEADER

use std::sync::Mutex;

use crate::bus::producer::{OutRecord, PublishError, Publisher};
use crate::bus::topics::{partition_counts, TopicError};
use crate::config::{Config, KafkaConfig};
use crate::store::deliveries::{latest_for_alert, Status};
use crate::store::logminer::{alerts, AlertQuery};
use crate::store::{DeliveryRow, Store, StoreError};
use crate::wire::alert::{format_id, manual_retry_headers, Alert, AlertError, AlertState};

/// What the operator asked for.
#[derive(Debug, Clone)]
pub struct RetryRequest<'a> {
    pub alert_id: u64,
    /// `None`: every failed target of the alert.
    pub target: Option<&'a str>,
    /// Check and report what would be retried; write and publish nothing.
    pub dry_run: bool,
    /// Who asks, recorded in `retried_by`: `cli:<user>@<host>` or `api`.
    pub by: &'a str,
    /// The retry's time, recorded in `retried_ns` and the record's header.
    pub now_ns: u64,
}

/// What a retry did (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq)]
pub struct Retried {
    pub alert_id: u64,
    pub topic: String,
    pub dry_run: bool,
    /// The reset rows as written (in a dry run: as they would be written), by target.
    pub retried: Vec<DeliveryRow>,
    /// The alert's other targets, left as they are (delivered, or pending).
    pub untouched: Vec<DeliveryRow>,
}

/// Why nothing was retried. Each message is one operator line: what, which input, what to do.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error(
        "alert {} has no deliveries, so there is nothing to retry: the notifier has not read it, skipped it \
         (stale, or no target takes its kind), or its rows expired",
        format_id(*alert_id)
    )]
    UnknownAlert { alert_id: u64 },
    #[error("alert {} has no delivery to target `{target}`; its targets: {}", format_id(*alert_id), known.join(", "))]
    UnknownTarget { alert_id: u64, target: String, known: Vec<String> },
    #[error("only a failed delivery can be retried: alert {} is {}{}", format_id(*alert_id), states_text(states), pending_hint(states))]
    NotFailed { alert_id: u64, states: Vec<(String, String)> },
    #[error(
        "alert {} is not in log_alerts (alerts are kept 90 days), so there is no document to republish",
        format_id(*alert_id)
    )]
    AlertMissing { alert_id: u64 },
    #[error("alert {} in log_alerts cannot be republished: {source}", format_id(*alert_id))]
    Encode { alert_id: u64, source: AlertError },
    #[error("topic {topic} does not exist; create it with `tayga topics create`")]
    NoTopic { topic: String },
    #[error(transparent)]
    Broker(#[from] TopicError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{source}; the rows were set back to failed, so the retry can be asked for again")]
    Publish { source: Box<PublishError> },
    #[error(
        "{source}; setting the rows back to failed also failed ({restore}): they stay pending until the alert is \
         republished (`tayga alerts republish --alert-id {}`)",
        format_id(*alert_id)
    )]
    PublishUnrestored { alert_id: u64, source: Box<PublishError>, restore: Box<StoreError> },
}

impl RetryError {
    /// A refusal of the request as asked (unknown alert or target, a row that is not
    /// failed, no stored document), as opposed to a service that failed.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RetryError::UnknownAlert { .. }
                | RetryError::UnknownTarget { .. }
                | RetryError::NotFailed { .. }
                | RetryError::AlertMissing { .. }
        )
    }
}

fn states_text(states: &[(String, String)]) -> String {
    states.iter().map(|(target, status)| format!("{status} to `{target}`")).collect::<Vec<_>>().join(", ")
}

fn pending_hint(states: &[(String, String)]) -> &'static str {
    if states.iter().any(|(_, s)| s == Status::Pending.as_str()) {
        " (a pending delivery is still being tried, or waits for the notifier)"
    } else {
        ""
    }
}

/// The pure rule: which of an alert's latest rows a retry resets, and which it leaves.
/// With a target, that target's row must exist and be failed; without, at least one row must
/// be failed, and every failed one is chosen.
pub fn choose(
    alert_id: u64,
    rows: Vec<DeliveryRow>,
    target: Option<&str>,
) -> Result<(Vec<DeliveryRow>, Vec<DeliveryRow>), RetryError> {
    if rows.is_empty() {
        return Err(RetryError::UnknownAlert { alert_id });
    }
    let failed = |r: &DeliveryRow| Status::parse(&r.status) == Some(Status::Failed);
    let state = |r: &DeliveryRow| (r.target.clone(), r.status.clone());
    let (chosen, untouched): (Vec<_>, Vec<_>) = match target {
        Some(t) => {
            let Some(row) = rows.iter().find(|r| r.target == t) else {
                let known = rows.iter().map(|r| r.target.clone()).collect();
                return Err(RetryError::UnknownTarget { alert_id, target: t.to_string(), known });
            };
            if !failed(row) {
                return Err(RetryError::NotFailed { alert_id, states: vec![state(row)] });
            }
            rows.into_iter().partition(|r| r.target == t)
        }
        None => {
            if !rows.iter().any(failed) {
                return Err(RetryError::NotFailed { alert_id, states: rows.iter().map(state).collect() });
            }
            rows.into_iter().partition(failed)
        }
    };
    Ok((chosen, untouched))
}

/// The alerts topic, with a producer made on the first real retry (a refusal or a dry run
/// never connects to the broker for it).
pub struct AlertsTopic {
    kafka: KafkaConfig,
    pub topic: String,
    publisher: Mutex<Option<Publisher>>,
}

impl AlertsTopic {
    pub fn new(config: &Config) -> AlertsTopic {
        AlertsTopic { kafka: config.kafka.clone(), topic: config.names().alerts, publisher: Mutex::new(None) }
    }

    /// Says plainly that the topic is missing, instead of failing the send after a timeout.
    async fn ensure_exists(&self) -> Result<(), RetryError> {
        let topics = partition_counts(&self.kafka, Some(&self.topic)).await?;
        if topics.contains_key(&self.topic) {
            Ok(())
        } else {
            Err(RetryError::NoTopic { topic: self.topic.clone() })
        }
    }

    fn publisher(&self) -> Result<Publisher, PublishError> {
        let mut slot = self.publisher.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        let p = Publisher::new(&self.kafka).map_err(|source| PublishError { topic: self.topic.clone(), source })?;
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Publishes the alert as the logminer does (keyed by template id), with the retry's header.
    async fn publish(&self, alert: &Alert, retried_ns: u64) -> Result<(), PublishError> {
        let value = alert.to_json().expect("checked by the caller");
        let key = alert.key();
        let headers = manual_retry_headers(retried_ns);
        let record = OutRecord { topic: &self.topic, key: &key, value: value.into(), headers: &headers };
        self.publisher()?.publish_all(vec![record]).await
    }
}

/// Checks the request against the alert's latest rows, and unless it is a dry run, resets
/// the chosen rows to pending and republishes the alert. Nothing is written when the request
/// is refused; if the publication fails, the rows are set back to failed.
pub async fn retry(store: &Store, topic: &AlertsTopic, req: &RetryRequest<'_>) -> Result<Retried, RetryError> {
    let alert_id = req.alert_id;
    let rows = latest_for_alert(store, alert_id, AlertState::Firing).await?;
    let (chosen, untouched) = choose(alert_id, rows, req.target)?;
    let stored = alerts(store, &AlertQuery { alert_id: Some(alert_id), ..Default::default() }).await?;
    let row = stored.into_iter().next().ok_or(RetryError::AlertMissing { alert_id })?;
    // The firing document, even once the alert is resolved: the reset pairs are firing
    // deliveries, and a resolved record would send them the resolved notice instead.
    let alert = Alert::from_row(&row)
        .map(|a| a.as_firing())
        .and_then(|a| a.to_json().map(|_| a))
        .map_err(|source| RetryError::Encode { alert_id, source })?;
    let reset: Vec<DeliveryRow> = chosen.iter().map(|r| r.manual_retry(req.now_ns, req.by)).collect();
    let done = |retried| Retried { alert_id, topic: topic.topic.clone(), dry_run: req.dry_run, retried, untouched };
    if req.dry_run {
        return Ok(done(reset));
    }
    topic.ensure_exists().await?;
    store.insert(&reset).await?;
    match topic.publish(&alert, req.now_ns).await {
        Ok(()) => Ok(done(reset)),
        Err(source) => {
            let source = Box::new(source);
            let restored: Vec<DeliveryRow> = chosen
                .into_iter()
                .zip(&reset)
                .map(|(old, new)| DeliveryRow { updated_ns: new.updated_ns + 1, ..old })
                .collect();
            match store.insert(&restored).await {
                Ok(()) => Err(RetryError::Publish { source }),
                Err(restore) => Err(RetryError::PublishUnrestored { alert_id, source, restore: Box::new(restore) }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &str, status: &str) -> DeliveryRow {
        DeliveryRow { alert_id: 9, target: target.into(), status: status.into(), ..Default::default() }
    }

    fn targets(rows: &[DeliveryRow]) -> Vec<&str> {
        rows.iter().map(|r| r.target.as_str()).collect()
    }

    #[test]
    fn without_a_target_every_failed_one_is_chosen() {
        let rows = vec![row("ops", "failed"), row("pager", "delivered"), row("chat", "failed")];
        let (chosen, untouched) = choose(9, rows, None).unwrap();
        assert_eq!((targets(&chosen), targets(&untouched)), (vec!["ops", "chat"], vec!["pager"]));
    }

    #[test]
    fn a_named_target_must_be_failed() {
        let rows = || vec![row("ops", "failed"), row("pager", "delivered"), row("chat", "pending")];
        let (chosen, untouched) = choose(9, rows(), Some("ops")).unwrap();
        assert_eq!((targets(&chosen), targets(&untouched)), (vec!["ops"], vec!["pager", "chat"]));
        let delivered = choose(9, rows(), Some("pager")).unwrap_err();
        assert_eq!(
            delivered.to_string(),
            "only a failed delivery can be retried: alert 0000000000000009 is delivered to `pager`"
        );
        let pending = choose(9, rows(), Some("chat")).unwrap_err().to_string();
        assert!(pending.ends_with("(a pending delivery is still being tried, or waits for the notifier)"), "{pending}");
        let unknown = choose(9, rows(), Some("mail")).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "alert 0000000000000009 has no delivery to target `mail`; its targets: ops, pager, chat"
        );
        assert!(unknown.is_refusal());
    }

    #[test]
    fn nothing_failed_or_no_rows_is_refused() {
        let err = choose(9, vec![row("ops", "delivered"), row("pager", "delivered")], None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "only a failed delivery can be retried: alert 0000000000000009 is delivered to `ops`, delivered to `pager`"
        );
        let err = choose(9, Vec::new(), None).unwrap_err();
        assert!(matches!(err, RetryError::UnknownAlert { alert_id: 9 }));
        assert!(err.to_string().starts_with("alert 0000000000000009 has no deliveries"), "{err}");
    }
}
