//! `notifier_silences`: operators' silences (docs/notifier.md, "Silences"). A silence holds
//! back the delivery of the alerts it matches (a service, and optionally a kind and a
//! template) while it runs; the notifier reads the running ones, `tayga silences` and the
//! API add, list and expire them. The table is a ReplacingMergeTree by `silence_id` with
//! `updated_ns` as the version: expiring a silence writes a newer version whose `ends_ns` is
//! the moment it was expired, and reads take the latest version with `argMax`.

use super::statements::Statement;
use super::{SilenceRow, Store, StoreError};
use crate::wire::alert::{format_id, Alert};

/// The latest version of every silence that ends after a time, optionally one silence,
/// newest first. No aliases, for the reason `store::deliveries::latest_by_alert_sql` gives. Binds: [silence
/// id], ends after (ns).
pub fn silences_sql(one: bool) -> String {
    let filter = if one { "WHERE silence_id = ? " } else { "" };
    format!(
        "SELECT silence_id, argMax(service, updated_ns), argMax(kind, updated_ns), argMax(template_id, updated_ns), \
         argMax(starts_ns, updated_ns), argMax(ends_ns, updated_ns), argMax(comment, updated_ns), \
         argMax(created_by, updated_ns), min(created_ns), argMax(expired_by, updated_ns), max(updated_ns) \
         FROM notifier_silences {filter}GROUP BY silence_id HAVING argMax(ends_ns, updated_ns) > ? \
         ORDER BY min(created_ns) DESC, silence_id"
    )
}

/// Every silence that ends after `ends_after_ns` (0: every silence ever made), newest first.
pub async fn list(store: &Store, ends_after_ns: u64) -> Result<Vec<SilenceRow>, StoreError> {
    store
        .client()
        .query(&silences_sql(false))
        .bind(ends_after_ns)
        .fetch_all()
        .await
        .map_err(|source| store.query_error("reading notifier_silences", source))
}

/// The silence that holds `alert` back at `now_ns`, if any: of those running that match it,
/// the one that ends last (so a delivery row names the silence that will hold it longest).
pub fn matching<'a>(silences: &'a [SilenceRow], alert: &Alert, now_ns: u64) -> Option<&'a SilenceRow> {
    silences.iter().filter(|s| s.is_active(now_ns) && s.matches(alert)).max_by_key(|s| (s.ends_ns, s.silence_id))
}

/// One silence's latest version.
pub async fn get(store: &Store, silence_id: u64) -> Result<Option<SilenceRow>, StoreError> {
    let rows: Vec<SilenceRow> = store
        .client()
        .query(&silences_sql(true))
        .bind(silence_id)
        .bind(0u64)
        .fetch_all()
        .await
        .map_err(|source| store.query_error("reading notifier_silences", source))?;
    Ok(rows.into_iter().next())
}

/// What an operator asks to silence.
#[derive(Debug, Clone, Default)]
pub struct NewSilence {
    pub service: String,
    /// Empty: every kind.
    pub kind: String,
    /// 0: every template.
    pub template_id: u64,
    pub duration_ns: u64,
    pub comment: String,
    /// `cli:<user>@<host>` or `api`.
    pub by: String,
}

/// Why a silence was not added or expired. The refusals say what to do.
#[derive(Debug, thiserror::Error)]
pub enum SilenceError {
    #[error("a silence needs a service")]
    NoService,
    #[error("a silence needs a duration above 0")]
    NoDuration,
    #[error("a silence needs a comment: say why the alerts are held back")]
    NoComment,
    #[error("no silence {0}: `tayga silences list --all` lists every silence")]
    NotFound(String),
    #[error("silence {id} already ended at {ended}: nothing to expire")]
    Ended { id: String, ended: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SilenceError {
    /// A refusal of the request (nothing changed), as opposed to a store that failed.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, SilenceError::Store(_))
    }
}

/// Adds a silence that starts now and runs for the asked duration; returns it as stored.
pub async fn add(store: &Store, new: &NewSilence, now_ns: u64) -> Result<SilenceRow, SilenceError> {
    let row = SilenceRow::new(new, now_ns)?;
    store.insert(std::slice::from_ref(&row)).await?;
    Ok(row)
}

/// Ends a running (or not yet started) silence now; returns its new version.
pub async fn expire(store: &Store, silence_id: u64, by: &str, now_ns: u64) -> Result<SilenceRow, SilenceError> {
    let id = format_id(silence_id);
    let current = get(store, silence_id).await?.ok_or_else(|| SilenceError::NotFound(id.clone()))?;
    if current.ends_ns <= now_ns {
        return Err(SilenceError::Ended { id, ended: crate::time::rfc3339(current.ends_ns) });
    }
    let row = current.expired(now_ns, by);
    store.insert(std::slice::from_ref(&row)).await?;
    Ok(row)
}

impl SilenceRow {
    /// A silence from `now_ns` for `new.duration_ns`, named by `identity::silence_id`.
    pub fn new(new: &NewSilence, now_ns: u64) -> Result<SilenceRow, SilenceError> {
        if new.service.trim().is_empty() {
            return Err(SilenceError::NoService);
        }
        if new.duration_ns == 0 {
            return Err(SilenceError::NoDuration);
        }
        if new.comment.trim().is_empty() {
            return Err(SilenceError::NoComment);
        }
        Ok(SilenceRow {
            silence_id: crate::identity::silence_id(&new.service, &new.kind, new.template_id, now_ns, &new.by),
            service: new.service.clone(),
            kind: new.kind.clone(),
            template_id: new.template_id,
            starts_ns: now_ns,
            ends_ns: now_ns.saturating_add(new.duration_ns),
            comment: new.comment.clone(),
            created_by: new.by.clone(),
            created_ns: now_ns,
            expired_by: String::new(),
            updated_ns: now_ns,
        })
    }

    /// The next version of a silence expired early: it ends now, and says by whom.
    pub fn expired(&self, now_ns: u64, by: &str) -> SilenceRow {
        SilenceRow {
            ends_ns: now_ns.max(self.starts_ns),
            expired_by: by.to_string(),
            updated_ns: now_ns.max(self.updated_ns + 1),
            ..self.clone()
        }
    }

    /// Whether it holds alerts back at `now_ns`.
    pub fn is_active(&self, now_ns: u64) -> bool {
        self.starts_ns <= now_ns && now_ns < self.ends_ns
    }

    /// Whether it matches `alert`: the same service, and the kind and template when it names them.
    pub fn matches(&self, alert: &Alert) -> bool {
        self.service == alert.service
            && (self.kind.is_empty() || self.kind == alert.kind.as_str())
            && (self.template_id == 0 || self.template_id == alert.template_id)
    }

    /// `active` while it runs, `expired` once ended early, `ended` once it ran its course.
    pub fn state(&self, now_ns: u64) -> &'static str {
        if self.is_active(now_ns) {
            "active"
        } else if now_ns < self.starts_ns {
            "pending"
        } else if self.expired_by.is_empty() {
            "ended"
        } else {
            "expired"
        }
    }
}

/// This module's statements with sample binds, for the registry.
pub fn statements() -> Vec<Statement> {
    vec![
        Statement::new("silences.list", silences_sql(false)).binds(["0"]),
        Statement::new("silences.get", silences_sql(true)).binds(["11", "0"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::alert::AlertKind;

    fn alert(service: &str, kind: AlertKind, template_id: u64) -> Alert {
        Alert {
            version: crate::wire::alert::ALERT_FORMAT_VERSION,
            alert_id: 1,
            kind,
            service: service.into(),
            template_id,
            template: "t".into(),
            first_at: 0,
            last_at: 0,
            count: 0,
            baseline: 0.0,
            threshold: 0.0,
            state: Default::default(),
            resolved_at: 0,
            shape: None,
        }
    }

    /// A silence of every alert of checkout for 100 ns.
    fn deploy() -> NewSilence {
        NewSilence {
            service: "checkout".into(),
            duration_ns: 100,
            comment: "deploy".into(),
            by: "api".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_silence_matches_its_service_and_the_kind_and_template_it_names() {
        let new = deploy();
        let any = SilenceRow::new(&new, 1_000).unwrap();
        assert!(any.matches(&alert("checkout", AlertKind::Spike, 7)));
        assert!(any.matches(&alert("checkout", AlertKind::NewTemplate, 8)));
        assert!(!any.matches(&alert("checkout-v2", AlertKind::Spike, 7)));
        let spikes_of_7 =
            SilenceRow::new(&NewSilence { kind: "spike".into(), template_id: 7, ..new.clone() }, 1_000).unwrap();
        assert!(spikes_of_7.matches(&alert("checkout", AlertKind::Spike, 7)));
        assert!(!spikes_of_7.matches(&alert("checkout", AlertKind::Silence, 7)));
        assert!(!spikes_of_7.matches(&alert("checkout", AlertKind::Spike, 8)));
        assert_ne!(any.silence_id, spikes_of_7.silence_id);
    }

    #[test]
    fn a_silence_runs_from_its_start_to_its_end_or_until_expired() {
        let new = deploy();
        let s = SilenceRow::new(&new, 1_000).unwrap();
        assert_eq!((s.starts_ns, s.ends_ns), (1_000, 1_100));
        assert!(s.is_active(1_000) && s.is_active(1_099) && !s.is_active(1_100));
        assert_eq!((s.state(1_050), s.state(1_100)), ("active", "ended"));
        let expired = s.expired(1_040, "cli:ops@box");
        assert_eq!((expired.ends_ns, expired.updated_ns, expired.expired_by.as_str()), (1_040, 1_040, "cli:ops@box"));
        assert_eq!(expired.state(1_040), "expired");
        assert_eq!(expired.silence_id, s.silence_id);
        for (bad, want) in [
            (NewSilence { service: " ".into(), ..new.clone() }, "service"),
            (NewSilence { duration_ns: 0, ..new.clone() }, "duration"),
            (NewSilence { comment: String::new(), ..new.clone() }, "comment"),
        ] {
            let e = SilenceRow::new(&bad, 1).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
