//! `/alerts`: active and inactive alerts (docs/design.md#active-alerts: an alert whose
//! `last_at` stopped advancing is inactive), and `/alerts/{id}`: one alert with its count against its
//! baseline, the lines that raised it and a chip per delivery target.

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use maud::{html, Markup};
use serde::Deserialize;

use super::charts::{self, Rule, Series, Size, TimeChart};
use super::format::{self, HOUR_NS, MINUTE_NS};
use super::layout::{chip, log_table, respond, shell, status_chip, template_text, time, Nav, PageResult};
use super::silences::silence_form;
use super::{given, query};
use crate::daemon::api::error::ApiError;
use crate::daemon::api::handlers::alerts::{self, Activity, Alert, AlertsParams};
use crate::daemon::api::handlers::deliveries::Delivery;
use crate::daemon::api::handlers::shapes::{self, DiffParams, ShapeDiff};
use crate::daemon::api::handlers::templates::minute_series;
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::{Query, Window};
use crate::wire::alert::{self as wire, format_id, AlertKind, AlertState};

/// Alerts listed per state.
const LISTED: u64 = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    kind: Option<String>,
    service: Option<String>,
}

pub async fn list(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: ListParams = query(&uri)?;
    let (kind, service) = (given(p.kind), given(p.service));
    let params = |s| AlertsParams {
        kind: kind.clone(),
        service: service.clone(),
        state: Some(s),
        limit: Some(LISTED),
        cursor: None,
    };
    let active = alerts::list(State(state.clone()), Query(params(Activity::Active))).await?.0.items;
    let inactive = alerts::list(State(state.clone()), Query(params(Activity::Inactive))).await?.0.items;
    let body = html! {
        h1 { "Alerts" }
        form.filters method="get" action="/alerts" {
            label { "kind "
                select name="kind" {
                    option value="" { "any" }
                    @for k in AlertKind::ALL {
                        option value=(k.as_str()) selected[kind.as_deref() == Some(k.as_str())] { (k.as_str()) }
                    }
                }
            }
            label { "service " input type="text" name="service" value=[service.as_deref()] placeholder="any"; }
            button type="submit" { "Filter" }
        }
        section #active {
            h2 { "Active " span.count { (active.len()) } }
            (alert_table(&active, "No active alert: nothing new, spiking or silent in the last 5 minutes."))
        }
        section #inactive {
            h2 { "Inactive " span.count { (inactive.len()) } }
            (alert_table(&inactive, "No inactive alert."))
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Alerts, "Alerts", Some(10), body)))
}

fn kind_chip(kind: AlertKind) -> Markup {
    let class = match kind {
        AlertKind::Spike => "bad",
        AlertKind::Silence | AlertKind::ShapeSlowdown => "warn",
        AlertKind::NewTemplate | AlertKind::NewShape => "info",
    };
    chip(class, kind.as_str())
}

/// A new path's diff against its endpoint's usual shape, over the window around the alert
/// (none for a slowdown: its usual shape is itself), or why there is none.
type AlertDiff = Option<(Result<ShapeDiff, String>, (u64, u64))>;

async fn alert_diff(state: &AppState, a: &wire::Alert) -> Result<AlertDiff, ApiError> {
    let Some(s) = a.shape.as_ref().filter(|_| a.kind == AlertKind::NewShape) else { return Ok(None) };
    // Each side's newest story up to a little after the alert, within a day before it.
    let to = (a.last_at.max(a.first_at) + 10 * MINUTE_NS).min(state.now()).max(a.first_at + 1);
    let from = a.first_at.saturating_sub(24 * HOUR_NS).min(to - 1);
    let usual = format_id(s.usual_fingerprint);
    let asked = shapes::diff(
        State(state.clone()),
        Path((usual, format_id(a.template_id))),
        Query(DiffParams { from: Some(from), to: Some(to) }),
    )
    .await;
    match asked {
        Ok(d) => Ok(Some((Ok(d.0), (from, to)))),
        Err(ApiError::NotFound { what }) => Ok(Some((Err(format!("No diff to show, not found: {what}.")), (from, to)))),
        Err(e) => Err(e),
    }
}

/// A shape alert's path: the edges it took for the first time, how its shape differs from
/// the endpoint's usual one (edges added and removed, calls and self time per edge, in a
/// trace of each), and what to open: the full diff, a trace, the shape's traces, and for a
/// slowdown the endpoint's traces slower than its threshold around the alert.
fn shape_section(a: &wire::Alert, diff: &AlertDiff) -> Markup {
    let Some(s) = &a.shape else { return html! {} };
    let stories = format!("/stories?service={}", format::encode(&a.service));
    let (usual, shape) = (format_id(s.usual_fingerprint), format_id(a.template_id));
    let slow = (a.kind == AlertKind::ShapeSlowdown).then(|| {
        let from = a.first_at.saturating_sub(15 * MINUTE_NS);
        let to = a.last_at.max(a.first_at) + 10 * MINUTE_NS;
        format!(
            "/traces?service={}&operation={}&min={}ms&from={from}&to={to}",
            format::encode(&a.service),
            format::encode(&a.template),
            a.threshold.round() as u64
        )
    });
    html! {
        section #shape {
            h2 { "Path" }
            @if !s.new_edges.is_empty() {
                p { "Calls this endpoint never made before:" }
                ul.edges.new { @for e in &s.new_edges { li { code { (e) } } } }
            }
            @if a.kind == AlertKind::NewShape {
                p { "Against its usual shape " code { (usual) } ":" }
                @match diff {
                    Some((Ok(d), _)) => { (super::shapes::edge_changes(d)) }
                    other => {
                        ul.edges.diff {
                            @for e in &s.edges_added { li.added data-edge=(e) { "+ " code { (e) } } }
                            @for e in &s.edges_removed { li.removed data-edge=(e) { "− " code { (e) } } }
                        }
                        @if let Some((Err(why), _)) = other { p.note { (why) } }
                    }
                }
            }
            p {
                @if let Some((Ok(_), window)) = diff {
                    a #shape-diff href=(super::shapes::diff_href(&usual, &shape, Some(*window))) { "the full diff, two waterfalls on one scale" } " · "
                }
                @if let Some(href) = &slow {
                    a #slow-traces href=(href) { "the endpoint's traces slower than " (format::number(a.threshold.round())) " ms around the alert" } " · "
                }
                @if !s.trace_id.is_empty() { a #shape-trace href={ "/traces/" (s.trace_id) } { "a trace of this shape" } " · " }
                a #shape-traces href={ "/stories/" (shape) } { "the shape's traces" } " · "
                a href=(stories) { "the endpoint's shapes" }
            }
        }
    }
}

/// What raised the alert, in words.
fn values(a: &wire::Alert) -> String {
    match a.kind {
        AlertKind::Spike => format!(
            "{} lines/min against a baseline of {} (threshold {})",
            a.count,
            format::number(a.baseline),
            format::number(a.threshold)
        ),
        AlertKind::Silence => format!("no line; it logged {} a minute before", format::number(a.baseline)),
        AlertKind::NewShape => format!(
            "{} on the new path in its first minutes ({}% of the endpoint's)",
            format::count(a.count, "trace"),
            format::number(a.shape.as_ref().map_or(0.0, |s| (s.share * 1000.0).round() / 10.0))
        ),
        AlertKind::ShapeSlowdown => format!(
            "p95 {} ms over {} against a usual {} ms (threshold {} ms)",
            format::number(a.shape.as_ref().and_then(|s| s.p95_ms).unwrap_or(0.0).round()),
            format::count(a.count, "trace"),
            format::number(a.baseline.round()),
            format::number(a.threshold.round())
        ),
        AlertKind::NewTemplate => format!("{} since first seen", format::count(a.count, "line")),
    }
}

fn alert_table(items: &[Alert], empty: &str) -> Markup {
    if items.is_empty() {
        return html! { p.empty-chart { (empty) } };
    }
    html! {
        table.list.alerts {
            thead { tr { th { "kind" } th { "service" } th { "template" } th { "first seen" } th { "last seen" } th { "values" } } }
            tbody {
                @for (a, r) in items.iter().map(|a| (a, &a.record)) {
                    tr.alert data-alert-id=(format_id(r.alert_id)) {
                        td {
                            (kind_chip(r.kind))
                            @if !a.silenced_by.is_empty() {
                                " " a.silenced href={ "/silences#silence-" (a.silenced_by) } title={ "held back by silence " (a.silenced_by) } { (chip("plain", "silenced")) }
                            }
                        }
                        td { (r.service) }
                        td { a.template-link href={ "/alerts/" (format_id(r.alert_id)) } { (template_text(&r.template)) } }
                        td.nowrap { (time(r.first_at)) }
                        td.nowrap { (time(r.last_at)) }
                        td { (values(r)) }
                    }
                }
            }
        }
    }
}

/// The silences that hold any of an alert's deliveries back, each once.
fn silenced_by(deliveries: &[Delivery]) -> std::collections::BTreeSet<String> {
    deliveries.iter().filter(|d| d.row.silence_id != 0).map(|d| format_id(d.row.silence_id)).collect()
}

pub async fn detail(State(state): State<AppState>, Path(alert_id): Path<String>) -> PageResult {
    let d = alerts::by_id(State(state.clone()), Path(alert_id)).await?.0;
    let (judged, a) = (&d.alert, &d.alert.record);
    let (alert_id, template_id) = (format_id(a.alert_id), format_id(a.template_id));
    let to = (a.last_at.max(a.first_at) + 10 * MINUTE_NS).min(state.now() + MINUTE_NS);
    let from = a.first_at.saturating_sub(HOUR_NS).max(to.saturating_sub(24 * HOUR_NS));
    let window = Window { from_ns: from, to_ns: to.max(from + MINUTE_NS) };
    let counts = minute_series(&state, window, &a.service, a.template_id).await?;
    let mut rules = Vec::new();
    if a.kind != AlertKind::NewTemplate {
        rules.push(Rule { name: "baseline".into(), value: a.baseline });
        if a.threshold > 0.0 {
            rules.push(Rule { name: "threshold".into(), value: a.threshold });
        }
    }
    let chart = TimeChart {
        from_ns: window.from_ns,
        to_ns: window.to_ns,
        unit: " lines/min".into(),
        series: vec![Series {
            name: "lines per minute".into(),
            points: charts::minutes_filled(&counts, window.from_ns, window.to_ns),
        }],
        rules,
        empty: "No line of this template in the hour around the alert.".into(),
        size: Size::Wide,
    };
    let template_href = format!("/templates/{}/{}", format::encode(&a.service), template_id);
    let shape_kind = a.kind.is_shape();
    let diff = alert_diff(&state, a).await?;
    let body = html! {
        p.crumbs { a href="/alerts" { "Alerts" } " › " (alert_id) }
        h1 { (kind_chip(a.kind)) " " (a.service) " "
            @if judged.active { (chip("bad", "active")) } @else { (chip("plain", "inactive")) }
            @if !judged.silenced_by.is_empty() { " " (chip("plain", "silenced")) } }
        @if shape_kind {
            p.template-line { "endpoint " code { (a.template) } " · shape " code { (template_id) } }
        } @else {
            p.template-line { a href=(template_href) { (template_text(&a.template)) } }
        }
        dl.facts {
            dt { "first seen" } dd { (time(a.first_at)) }
            dt { "last seen" } dd { (time(a.last_at)) }
            @if a.resolved_at > 0 { dt { "resolved" } dd { (time(a.resolved_at)) } }
            dt { "values" } dd { (values(a)) }
            dt { "published" } dd { @if judged.published { "yes, to the alerts topic" } @else { "not yet (the logminer republishes it)" } }
        }
        section {
            h2 { "Deliveries" }
            @if d.deliveries.is_empty() {
                p.empty-chart { "No delivery yet: no target takes this kind, or the notifier has not read it." }
            } @else {
                p.chips {
                    @for del in &d.deliveries {
                        a.delivery href={ "/deliveries?alert_id=" (alert_id) } title=(del.row.last_error) {
                            (del.row.target) @if del.state != AlertState::Firing { " " span.muted { (del.state.as_str()) } } " " (status_chip(&del.row.status)) " " span.muted { (format::count(del.row.attempts, "attempt")) }
                        }
                    }
                }
                @if !judged.silenced_by.is_empty() {
                    p.silenced #silenced-now { "Silenced now by " a href={ "/silences#silence-" (judged.silenced_by) } { code { (judged.silenced_by) } } ": its updates reach no target while it runs." }
                }
                @for id in silenced_by(&d.deliveries) {
                    p.silenced { "Held back by silence " a href={ "/silences#silence-" (id) } { code { (id) } } ": not delivered while it runs." }
                }
            }
            h3 { "Silence this alert's kind on this template" }
            (silence_form(&a.service, Some(a.kind.as_str()), &template_id))
        }
        @if shape_kind {
            (shape_section(a, &diff))
        } @else {
            section {
                h2 { "Lines per minute" }
                (charts::time_chart(&chart))
            }
            section #samples {
                h2 { "Sample lines" }
                (log_table(&d.sample_lines, "No line of this template is stored in the alert's window (retention may have dropped it)."))
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Alerts, &format!("{} alert, {}", a.kind, a.service), Some(15), body)))
}
