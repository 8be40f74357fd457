//! Publishing alerts to `<prefix>.alerts` and recording each publication in
//! `log_alert_publications` (docs/design.md#republication). The logminer publishes every alert update this way,
//! and republishes unmarked ones after every detection pass; `tayga alerts republish` uses
//! the same function, so a mark means the same thing whoever wrote it.

use crate::bus::producer::{OutRecord, Publisher};
use crate::store::logminer::mark_published;
use crate::store::{now_ns, AlertRow, Store, StoreError};
use crate::wire::alert::Alert;

/// Why publication stopped early.
#[derive(Debug, thiserror::Error)]
pub enum PublishAlertsError {
    #[error(transparent)]
    Send(#[from] crate::bus::producer::PublishError),
    #[error("alert {alert_id:016x} cannot be encoded: {source}")]
    Encode { alert_id: u64, source: crate::wire::alert::AlertError },
    #[error("recording publications failed: {0}")]
    Mark(#[from] StoreError),
}

/// How far a publication got: the first `published` alerts were acknowledged by the broker
/// (and marked, unless `error` is a [`PublishAlertsError::Mark`]); `error` says why it stopped before the end, if it did.
#[derive(Debug)]
pub struct Publication {
    pub published: usize,
    pub error: Option<PublishAlertsError>,
}

/// Publishes `alerts` one by one, in order, keyed by template id, stopping at the first
/// failed send (docs/design.md#republication), then marks the acknowledged ones. Sending one at a time keeps
/// "oldest first" exact: nothing after a failed alert has been sent.
pub async fn publish_and_mark(publisher: &Publisher, store: &Store, topic: &str, alerts: &[AlertRow]) -> Publication {
    let mut sent: Vec<(u64, u64)> = Vec::with_capacity(alerts.len());
    let mut error = None;
    for row in alerts {
        let encoded = Alert::from_row(row).and_then(|a| Ok((a.key(), a.to_json()?)));
        let (key, value) = match encoded {
            Ok(kv) => kv,
            Err(source) => {
                error = Some(PublishAlertsError::Encode { alert_id: row.alert_id, source });
                break;
            }
        };
        let record = OutRecord { topic, key: &key, value: value.into(), headers: &[] };
        if let Err(e) = publisher.publish_all(vec![record]).await {
            error = Some(e.into());
            break;
        }
        sent.push((row.alert_id, row.updated_ns));
    }
    if let Err(e) = mark_published(store, &sent, now_ns()).await {
        // Published but unmarked: the next pass sends them again, which the notifier
        // deduplicates by alert id.
        return Publication { published: sent.len(), error: Some(e.into()) };
    }
    Publication { published: sent.len(), error }
}
