//! The operators' silences as the notifier sees them (docs/notifier.md, "Silences"): the
//! running ones, read from `notifier_silences` through `store::silences`, so every replica
//! honours every silence and a restart forgets none. They are cached for
//! [`REFRESH_EVERY`]: a silence added (or expired) takes effect within that time on every
//! replica, without a query per record.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::persist::running_silences;
use crate::daemon::Shutdown;
use crate::store::{SilenceRow, Store};

/// How long a read of the running silences is used before it is read again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// The pause between reads while ClickHouse does not answer.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The running silences, read at most every [`REFRESH_EVERY`].
pub struct Silences {
    store: Store,
    cached: Mutex<Option<(Instant, Arc<Vec<SilenceRow>>)>>,
}

/// A stop came while the silences could not be read: the record must be read again.
#[derive(Debug)]
pub struct Interrupted;

impl Silences {
    pub fn new(store: Store) -> Silences {
        Silences { store, cached: Mutex::new(None) }
    }

    /// The silences running now: the cached read while it is fresh, else a new one. A read
    /// is bounded (5 s) and retried until it succeeds or a stop comes: an alert is never
    /// delivered because the silences could not be read, as it is never delivered without
    /// reading its rows.
    pub async fn running(&self, shutdown: &Shutdown) -> Result<Arc<Vec<SilenceRow>>, Interrupted> {
        if let Some((at, silences)) = self.cached.lock().expect("silences lock").as_ref() {
            if at.elapsed() < REFRESH_EVERY {
                return Ok(silences.clone());
            }
        }
        loop {
            match running_silences(&self.store, crate::store::now_ns()).await {
                Ok(rows) => {
                    let rows = Arc::new(rows);
                    *self.cached.lock().expect("silences lock") = Some((Instant::now(), rows.clone()));
                    return Ok(rows);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the silences; retrying");
                    if shutdown.is_triggered() || !shutdown.sleep(RETRY_PAUSE).await {
                        return Err(Interrupted);
                    }
                }
            }
        }
    }
}
