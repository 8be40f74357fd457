//! Rows and the types of lower layers: an alert as its `log_alerts` row, a story as its
//! `stories` row, a log row as the content its id is computed from. The formats
//! (`crate::wire::alert`, `crate::wire::story`) and `crate::identity` know nothing of tables, so the
//! conversions live here, beside the rows.

use super::{AlertRow, LogRow, StoryRow};
use crate::identity::LogContent;
use crate::wire::alert::{Alert, AlertError, AlertKind, AlertState, ShapeChange};
use crate::wire::story::{Story, STORY_FORMAT_VERSION};

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

impl Story {
    /// The row of the `stories` table.
    pub fn to_row(&self) -> StoryRow {
        StoryRow {
            trace_id: self.trace_id.clone(),
            fingerprint: self.fingerprint,
            root_service: self.root_service.clone(),
            root_operation: self.root_operation.clone(),
            start_ns: self.start_ns,
            duration_ns: self.duration_ns,
            span_count: self.span_count,
            services: self.services.clone(),
            edges: self.edges.clone(),
            error: u8::from(self.error),
            error_spans: self.error_spans,
            log_count: self.log_count,
            truncated: u8::from(self.truncated),
            version_ns: self.version_ns,
            exception_type: self.exception_type.clone(),
            exception_message: self.exception_message.clone(),
        }
    }

    /// A story read back from its row.
    pub fn from_row(row: &StoryRow) -> Story {
        Story {
            version: STORY_FORMAT_VERSION,
            trace_id: row.trace_id.clone(),
            fingerprint: row.fingerprint,
            root_service: row.root_service.clone(),
            root_operation: row.root_operation.clone(),
            start_ns: row.start_ns,
            duration_ns: row.duration_ns,
            span_count: row.span_count,
            services: row.services.clone(),
            edges: row.edges.clone(),
            error: row.error != 0,
            error_spans: row.error_spans,
            log_count: row.log_count,
            truncated: row.truncated != 0,
            version_ns: row.version_ns,
            exception_type: row.exception_type.clone(),
            exception_message: row.exception_message.clone(),
        }
    }
}
