//! Rows and the types of lower layers: an alert as its `log_alerts` row, a log row as the
//! content its id is computed from. The alert format (`crate::wire::alert`) and
//! `crate::identity` know nothing of tables, so the conversions live here, beside the rows.
//! (A story needs none: its document is its `stories` row with the format version,
//! `crate::wire::story::Story`.)

use super::{AlertRow, LogRow};
use crate::identity::LogContent;
use crate::wire::alert::{Alert, AlertError, AlertKind, AlertState, ShapeChange};

impl LogRow {
    /// What [`crate::identity::log_id`] hashes.
    pub fn content(&self) -> LogContent<'_> {
        LogContent {
            service: &self.service,
            time_ns: self.time_ns,
            severity_number: self.severity_number,
            severity_text: &self.severity_text,
            body: &self.body,
            trace_id: &self.trace_id,
            span_id: &self.span_id,
            attr_keys: &self.attr_keys,
            attr_values: &self.attr_values,
            resource_keys: &self.resource_keys,
            resource_values: &self.resource_values,
            scope_name: &self.scope_name,
        }
    }
}

impl Alert {
    /// The alert stored in `log_alerts`.
    pub fn from_row(row: &AlertRow) -> Result<Alert, AlertError> {
        let kind: AlertKind = row.kind.parse()?;
        Ok(Alert {
            version: kind.format_version(),
            alert_id: row.alert_id,
            kind,
            service: row.service.clone(),
            template_id: row.template_id,
            template: row.template.clone(),
            first_at: row.first_at,
            last_at: row.last_at,
            count: row.count,
            baseline: row.baseline,
            threshold: row.threshold,
            state: if row.resolved_at > 0 { AlertState::Resolved } else { AlertState::Firing },
            resolved_at: row.resolved_at,
            shape: if kind.is_shape() { ShapeChange::from_column(&row.shape) } else { None },
        })
    }

    /// A `log_alerts` row for this alert.
    pub fn to_row(&self, stored_ns: u64, updated_ns: u64) -> AlertRow {
        AlertRow {
            alert_id: self.alert_id,
            kind: self.kind.as_str().to_string(),
            service: self.service.clone(),
            template_id: self.template_id,
            template: self.template.clone(),
            first_at: self.first_at,
            last_at: self.last_at,
            count: self.count,
            baseline: self.baseline,
            threshold: self.threshold,
            stored_ns,
            updated_ns,
            resolved_at: self.resolved_at,
            shape: self.shape.as_ref().map(ShapeChange::to_column).unwrap_or_default(),
        }
    }
}
