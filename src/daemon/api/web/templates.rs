//! `/templates`: every template per service with its count, a per-minute sparkline of the
//! last hour and first/last seen, optionally only those new in the last 24 hours; and
//! `/templates/{service}/{id}`: one template, its minutes over a window, its alerts and its
//! recent lines.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use maud::html;
use serde::Deserialize;

use super::charts::{self, Series, Size, TimeChart};
use super::format::{self, Window, HOUR_NS};
use super::layout::{log_table, respond, shell, template_text, time, window_picker, Nav, PageError, PageResult};
use super::silences::silence_form;
use super::{given, query};
use crate::daemon::api::error::ApiError;
use crate::daemon::api::handlers::alerts::{self, AlertsParams};
use crate::daemon::api::handlers::logs::{self, LogsParams};
use crate::daemon::api::handlers::services::{self, ServicesParams};
use crate::daemon::api::handlers::templates::{self, Template, TemplatesParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::{self, Query, MAX_LIMIT};
use crate::wire::alert::format_id;

/// The "new" filter's only value.
const NEW_24H: &str = "24h";
/// Pages of templates read to find one template of a service.
const FIND_PAGES: usize = 50;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    service: Option<String>,
    /// `24h`: only templates first seen in the last 24 hours.
    new: Option<String>,
}

pub async fn list(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: ListParams = query(&uri)?;
    let service = given(p.service);
    let new_only = match given(p.new).as_deref() {
        None => false,
        Some(NEW_24H) => true,
        Some(other) => return Err(ApiError::bad("new", format!("`{other}` is not a filter: use new=24h")).into()),
    };
    let now = state.now();
    let items = templates::list(
        State(state.clone()),
        Query(TemplatesParams { service: service.clone(), from: None, to: None, limit: Some(MAX_LIMIT), cursor: None }),
    )
    .await?
    .0;
    let truncated = items.next_cursor.is_some();
    let since = now.saturating_sub(24 * HOUR_NS);
    let mut by_service: BTreeMap<&str, Vec<&Template>> = BTreeMap::new();
    for t in items.items.iter().filter(|t| !new_only || t.first_seen_ns >= since) {
        by_service.entry(t.service.as_str()).or_default().push(t);
    }
    let known = services::list(
        State(state.clone()),
        Query(ServicesParams { from: Some(since), to: None, limit: Some(MAX_LIMIT), cursor: None }),
    )
    .await?
    .0
    .items;
    let (from, to) = (now.saturating_sub(HOUR_NS), now);
    let body = html! {
        h1 { "Templates" }
        form.filters method="get" action="/templates" {
            label { "service "
                select name="service" {
                    option value="" { "every service" }
                    @for s in &known {
                        option value=(s.service) selected[service.as_deref() == Some(s.service.as_str())] { (s.service) }
                    }
                }
            }
            label { input type="checkbox" name="new" value=(NEW_24H) checked[new_only]; " new in the last 24 h" }
            button type="submit" { "Filter" }
        }
        @if truncated { p.note { "Showing the " (MAX_LIMIT) " most frequent templates; pick a service to see the rest." } }
        @if by_service.is_empty() {
            p.empty-chart {
                @if new_only { "No template was first seen in the last 24 hours." }
                @else { "No template yet: templates appear once the logminer has mined a service's logs." }
            }
        }
        @for (svc, list) in &by_service {
            section.service-templates {
                h2 { (svc) " " span.count { (list.len()) } }
                table.list.templates {
                    thead { tr { th { "template" } th.num { "count" } th { "last hour" } th { "first seen" } th { "last seen" } } }
                    tbody {
                        @for t in list {
                            @let counts: Vec<(u64, u64)> = t.minutes.iter().map(|m| (m.minute_ns, m.count)).collect();
                            tr.template data-template-id=(t.template_id) {
                                td { a href={ "/templates/" (format::encode(&t.service)) "/" (t.template_id) } { (template_text(&t.template)) }
                                    @if t.first_seen_ns >= since { " " (super::layout::chip("info", "new")) } }
                                td.num { (t.count) }
                                td { (charts::sparkline(&counts, from, to)) }
                                td.nowrap { (time(t.first_seen_ns)) }
                                td.nowrap { (time(t.last_seen_ns)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Templates, "Templates", Some(30), body)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DetailParams {
    window: Option<String>,
}

/// One template of `service`, read from the list the API pages through.
async fn find(state: &AppState, service: &str, id: u64) -> Result<Template, PageError> {
    let wanted = crate::wire::alert::format_id(id);
    let mut cursor = None;
    for _ in 0..FIND_PAGES {
        let page = templates::list(
            State(state.clone()),
            Query(TemplatesParams {
                service: Some(service.to_string()),
                from: None,
                to: None,
                limit: Some(MAX_LIMIT),
                cursor: cursor.take(),
            }),
        )
        .await?
        .0;
        if let Some(t) = page.items.into_iter().find(|t| t.template_id == wanted) {
            return Ok(t);
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Err(ApiError::not_found(format!("template {wanted} of service {service}")).into())
}

pub async fn detail(
    State(state): State<AppState>,
    Path((service, template_id)): Path<(String, String)>,
    uri: Uri,
) -> PageResult {
    let p: DetailParams = query(&uri)?;
    let window = Window::parse(p.window.as_deref())?;
    let id = params::hex_id("template_id", &template_id)?;
    let service = params::text("service", Some(service))?.unwrap_or_default();
    let t = find(&state, &service, id).await?;
    let now = state.now();
    let from = now.saturating_sub(window.ns());
    let counts = templates::minute_series(&state, params::Window { from_ns: from, to_ns: now }, &service, id).await?;
    let chart = TimeChart {
        from_ns: from,
        to_ns: now,
        unit: " lines/min".into(),
        series: vec![Series { name: "lines per minute".into(), points: charts::minutes_filled(&counts, from, now) }],
        rules: vec![],
        empty: "No line in this window.".into(),
        size: Size::Wide,
    };
    let lines_to = t.last_seen_ns.saturating_add(1);
    let lines = logs::list(
        State(state.clone()),
        Query(LogsParams {
            service: Some(service.clone()),
            template_id: Some(t.template_id.clone()),
            q: None,
            from: Some(lines_to.saturating_sub(24 * HOUR_NS)),
            to: Some(lines_to),
            limit: Some(50),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    let its_alerts: Vec<_> = alerts::list(
        State(state.clone()),
        Query(AlertsParams {
            kind: None,
            service: Some(service.clone()),
            state: None,
            limit: Some(MAX_LIMIT),
            cursor: None,
        }),
    )
    .await?
    .0
    .items
    .into_iter()
    .map(|a| a.record)
    .filter(|a| format_id(a.template_id) == t.template_id)
    .collect();
    let base = format!("/templates/{}/{}", format::encode(&service), t.template_id);
    let body = html! {
        p.crumbs { a href="/templates" { "Templates" } " › " a href={ "/templates?service=" (format::encode(&service)) } { (service) } " › " (t.template_id) }
        h1 { "Template of " (service) }
        p.template-line { (template_text(&t.template)) }
        dl.facts {
            dt { "lines" } dd { (t.count) }
            dt { "first seen" } dd { (time(t.first_seen_ns)) }
            dt { "last seen" } dd { (time(t.last_seen_ns)) }
            dt { "masking" } dd { (t.masking_version) }
        }
        details.silence {
            summary { "Silence this template's alerts" }
            (silence_form(&service, None, &t.template_id))
        }
        section {
            h2 { "Lines per minute" }
            (window_picker(&base, window))
            (charts::time_chart(&chart))
        }
        @if !its_alerts.is_empty() {
            section {
                h2 { "Alerts" }
                ul.plain {
                    @for a in &its_alerts {
                        li { a href={ "/alerts/" (format_id(a.alert_id)) } { (a.kind) " · " (time(a.first_at)) } }
                    }
                }
            }
        }
        section #lines {
            h2 { "Recent lines" }
            (log_table(&lines, "No line of this template in the 24 hours before it was last seen (retention may have dropped them)."))
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Templates, "Template", Some(30), body)))
}
