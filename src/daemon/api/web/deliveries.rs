//! `/deliveries`: the latest state of every `(alert, target)` pair of the last 7 days
//! (docs/design.md#notifier-states: status, attempts, last error, times, manual retries, the
//! silence that held a silenced pair back), filtered by alert, target
//! or status, and a health panel per target: its recent success rate and its breaker as last
//! observed. A failed row has a retry button for an operator (a viewer sees it disabled): a
//! plain form posting to `/deliveries/{alert_id}/retry`, which calls the API's retry handler
//! (the function `tayga deliveries retry` calls) and comes back here.

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::format::{self, MINUTE_NS};
use super::layout::{chip, csrf_field, may_write, respond, shell, status_chip, template_text, time, Nav, PageResult};
use super::{given, query};
use crate::daemon::api::handlers::alerts::{self, AlertsParams};
use crate::daemon::api::handlers::deliveries::{self, DeliveriesParams, Delivery, RetryParams};
use crate::daemon::api::handlers::pipeline::{self, PipelineParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;
use crate::daemon::api::params::MAX_LIMIT;
use crate::wire::alert::{self as wire, format_id};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    /// `resolved`: the resolved notices' rows instead of the alerts'.
    state: Option<String>,
    alert_id: Option<String>,
    target: Option<String>,
    status: Option<String>,
    /// Set by the retry form's answer: the target just retried.
    retried: Option<String>,
}

/// A target's recent deliveries, by latest status.
#[derive(Debug, Default, PartialEq)]
pub struct Health {
    pub delivered: usize,
    pub failed: usize,
    pub pending: usize,
    /// Held back by an operator's silence: neither a success nor a failure of the target.
    pub silenced: usize,
}

impl Health {
    /// Delivered over finished (pending ones have not ended yet); `None` before any ended.
    pub fn success_rate(&self) -> Option<f64> {
        let done = self.delivered + self.failed;
        (done > 0).then(|| self.delivered as f64 / done as f64)
    }
}

fn health(rows: &[Delivery]) -> BTreeMap<&str, Health> {
    let mut by_target: BTreeMap<&str, Health> = BTreeMap::new();
    for d in rows {
        let h = by_target.entry(d.row.target.as_str()).or_default();
        match d.row.status.as_str() {
            "delivered" => h.delivered += 1,
            "failed" => h.failed += 1,
            "silenced" => h.silenced += 1,
            _ => h.pending += 1,
        }
    }
    by_target
}

pub async fn page(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: DeliveriesQuery = query(&uri)?;
    let (alert_id, target, status) = (given(p.alert_id), given(p.target), given(p.status));
    let retried = given(p.retried);
    let resolved = given(p.state).is_some_and(|s| s == "resolved");
    let rows = deliveries::list(
        State(state.clone()),
        Query(DeliveriesParams {
            state: resolved.then(|| "resolved".to_string()),
            alert_id: alert_id.clone(),
            target: target.clone(),
            status: status.clone(),
            from: None,
            to: None,
            limit: Some(MAX_LIMIT),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    // Every pair of the window, unfiltered, for the per-target panel.
    let all = if alert_id.is_none() && target.is_none() && status.is_none() {
        None
    } else {
        Some(
            deliveries::list(
                State(state.clone()),
                Query(DeliveriesParams {
                    state: None,
                    alert_id: None,
                    target: None,
                    status: None,
                    from: None,
                    to: None,
                    limit: Some(MAX_LIMIT),
                    cursor: None,
                }),
            )
            .await?
            .0
            .items,
        )
    };
    let panel = health(all.as_deref().unwrap_or(&rows));
    let now = state.now();
    let breakers = pipeline::series(
        State(state.clone()),
        Query(PipelineParams {
            service: Some("notifier".into()),
            metric: Some("tayga_notifier_breaker_open".into()),
            from: Some(now.saturating_sub(15 * MINUTE_NS)),
            to: Some(now),
            step_secs: None,
        }),
    )
    .await?
    .0;
    let breaker: HashMap<String, (u64, f64)> =
        breakers.series.iter().filter_map(|s| Some((s.labels.get("target")?.clone(), *s.total.last()?))).collect();
    let alerts: HashMap<u64, wire::Alert> = alerts::list(
        State(state.clone()),
        Query(AlertsParams { kind: None, service: None, state: None, limit: Some(MAX_LIMIT), cursor: None }),
    )
    .await?
    .0
    .items
    .into_iter()
    .map(|a| (a.record.alert_id, a.record))
    .collect();
    let body = html! {
        h1 { "Deliveries" }
        @if let (Some(t), Some(a)) = (&retried, &alert_id) {
            p.notice #retried { "Retry of " strong { (t) } " for alert " code { (a) } " recorded: the row is pending again and the alert was republished; the notifier delivers it once more." }
        }
        p.lead { "Every alert goes to each of its targets once; this is the latest state of each pair from the last 7 days." }
        section #health {
            h2 { "Targets" }
            @if panel.is_empty() {
                p.empty-chart { "No delivery in the last 7 days: no target is configured ([[notifier.targets]] in tayga.toml), or no alert was raised." }
            } @else {
                div.tiles {
                    @for (name, h) in &panel {
                        div.tile.target data-target=(name) {
                            span.label { (name) }
                            span.value { @match h.success_rate() { Some(r) => { (format::percent(r)) } None => { "–" } } }
                            span.sub {
                                (h.delivered) " delivered · " (h.failed) " failed · " (h.pending) " pending"
                                @if h.silenced > 0 { " · " (h.silenced) " silenced" }
                            }
                            span.sub {
                                "breaker "
                                @match breaker.get(*name) {
                                    Some((at, v)) if *v >= 1.0 => { (chip("bad", "open")) " at " (time(*at)) }
                                    Some((at, _)) => { (chip("ok", "closed")) " at " (time(*at)) }
                                    None => { span.muted { "not observed in 15 min" } }
                                }
                            }
                        }
                    }
                }
            }
        }
        section #pairs {
            h2 { "Alerts and targets" }
            form.filters method="get" action="/deliveries" {
                label { "deliveries of "
                    select name="state" {
                        option value="" { "alerts" }
                        option value="resolved" selected[resolved] { "resolved notices" }
                    }
                }
                label { "alert " input type="text" name="alert_id" value=[alert_id.as_deref()] placeholder="any" size="16"; }
                label { "target " input type="text" name="target" value=[target.as_deref()] placeholder="any"; }
                label { "status "
                    select name="status" {
                        option value="" { "any" }
                        @for s in ["pending", "delivered", "failed", "silenced"] {
                            option value=(s) selected[status.as_deref() == Some(s)] { (s) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if rows.is_empty() {
                p.empty-chart { "No delivery matches." }
            } @else {
                table.list.deliveries {
                    thead { tr { th { "alert" } th { "target" } th { "status" } th.num { "attempts" } th { "last error" } th { "created" } th { "updated" } th { "manual retry" } } }
                    tbody {
                        @for delivery in &rows {
                            @let d = &delivery.row;
                            @let alert_id = format_id(d.alert_id);
                            @let silence_id = format_id(d.silence_id);
                            tr.delivery data-status=(d.status) data-target=(d.target) {
                                td {
                                    a href={ "/alerts/" (alert_id) } {
                                        @match alerts.get(&d.alert_id) {
                                            Some(a) => { (a.kind) " · " (a.service) br; (template_text(&a.template)) }
                                            None => { code { (alert_id) } }
                                        }
                                    }
                                }
                                td.nowrap { (d.target) }
                                td { (status_chip(&d.status)) }
                                td.num { (d.attempts) }
                                td.error-text {
                                    (d.last_error)
                                    @if d.silence_id != 0 {
                                        span.sub { "held back by silence " a href={ "/silences#silence-" (silence_id) } { code { (silence_id) } } }
                                    }
                                }
                                td.nowrap { (time(d.created_ns)) }
                                td.nowrap { (time(d.updated_ns)) }
                                td.retries {
                                    @if d.manual_retries > 0 {
                                        span.sub { (format::count(d.manual_retries, "time")) " by " (d.retried_by) ", last " (time(d.retried_ns)) }
                                    }
                                    // A manual retry is of an alert's delivery; a resolved notice is not retried by hand.
                                    @if !resolved && d.status == "failed" && may_write() {
                                        form.retry method="post" action={ "/deliveries/" (alert_id) "/retry" } {
                                            (csrf_field())
                                            input type="hidden" name="target" value=(d.target);
                                            button type="submit" title="Reset this row to pending and republish the alert: the notifier delivers it to this target once more" { "Retry" }
                                        }
                                    } @else if !resolved && d.status == "failed" {
                                        button.retry type="button" disabled title="Only an operator may retry a delivery: sign in with an operator token" { "Retry" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Deliveries, "Deliveries", Some(10), body)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryForm {
    target: String,
}

/// The retry button: the API's retry of one failed `(alert, target)` pair, then back to the
/// alert's deliveries. The guard (`access.rs`) has checked the role and the form's CSRF
/// token before this runs.
pub async fn retry(
    State(state): State<AppState>,
    Path(alert_id): Path<String>,
    Form(form): Form<RetryForm>,
) -> PageResult {
    let target = form.target;
    let done = deliveries::retry(
        State(state),
        Path(alert_id),
        Query(RetryParams { target: Some(target.clone()), dry_run: None }),
    )
    .await?
    .0;
    let back = format!("/deliveries?alert_id={}&retried={}", format::encode(&done.alert_id), format::encode(&target));
    Ok(Redirect::to(&back).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DeliveryRow;

    fn d(target: &str, status: &str) -> Delivery {
        let row = DeliveryRow {
            alert_id: 1,
            target: target.into(),
            status: status.into(),
            attempts: 1,
            ..Default::default()
        };
        Delivery::new(wire::AlertState::Firing, row)
    }

    #[test]
    fn the_success_rate_counts_finished_deliveries_only() {
        let rows = [
            d("a", "delivered"),
            d("a", "failed"),
            d("a", "delivered"),
            d("a", "pending"),
            d("a", "silenced"),
            d("b", "pending"),
        ];
        let h = health(&rows);
        assert_eq!(h["a"], Health { delivered: 2, failed: 1, pending: 1, silenced: 1 });
        assert_eq!(h["a"].success_rate(), Some(2.0 / 3.0));
        assert_eq!(h["b"].success_rate(), None);
    }
}
