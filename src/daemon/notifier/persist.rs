//! The notifier's use of `notifier_deliveries` and `notifier_resolved_deliveries`
//! (docs/design.md#notifier-states) and of
//! `notifier_silences`: the time limits and retries around the reads and writes of
//! `store::deliveries` and the read of `store::silences`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::store::deliveries;
use crate::store::{DeliveryRow, SilenceRow, Store, StoreError};
use crate::wire::alert::AlertState;

/// One write's own time limit, and how long a failed write is retried (docs/design.md#notifier-stop).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
pub const WRITE_RETRY_FOR: Duration = Duration::from_secs(10);
const WRITE_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// The latest rows of one alert in one state, by target name.
pub async fn latest_by_target(
    store: &Store,
    alert_id: u64,
    state: AlertState,
) -> Result<BTreeMap<String, DeliveryRow>, CallError> {
    let what = format!("reading {}", deliveries::table(state));
    let rows = with_timeout(&what, deliveries::latest_for_alert(store, alert_id, state)).await?;
    Ok(rows.into_iter().map(|r| (r.target.clone(), r)).collect())
}

/// The silences that end after `now_ns` (those not yet started are kept: the cache may be
/// used past their start).
pub async fn running_silences(store: &Store, now_ns: u64) -> Result<Vec<SilenceRow>, CallError> {
    with_timeout("reading notifier_silences", crate::store::silences::list(store, now_ns)).await
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what} did not finish within {secs} s", secs = WRITE_TIMEOUT.as_secs())]
    Timeout { what: String },
}

async fn with_timeout<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(WRITE_TIMEOUT, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(CallError::Timeout { what: what.to_string() }),
    }
}

/// Writes one version of a pair's row: each try is limited to 5 s, and a failed write is
/// retried for up to 10 s more. The error is the last try's.
pub async fn write_row(store: &Store, state: AlertState, row: &DeliveryRow) -> Result<(), CallError> {
    let mut retry_until = None;
    let what = format!("writing {}", deliveries::table(state));
    loop {
        let result = with_timeout(&what, deliveries::write(store, state, row)).await;
        let err = match result {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let until = *retry_until.get_or_insert_with(|| tokio::time::Instant::now() + WRITE_RETRY_FOR);
        let now = tokio::time::Instant::now();
        if now >= until {
            return Err(err);
        }
        tracing::warn!(error = %err, alert_id = %crate::wire::alert::format_id(row.alert_id), target = %row.target, "writing a delivery row failed; retrying");
        tokio::time::sleep(WRITE_RETRY_PAUSE.min(until - now)).await;
    }
}
