//! `/silences`: the operators' silences (docs/notifier.md, "Silences"), running ones first,
//! with an Expire button on each running one and a form to add one; and the Silence form an
//! alert's and a template's page carry. The forms post to `/silences` and
//! `/silences/{silence_id}/expire`, which call the API's silence handlers (the functions
//! `tayga silences` calls) and come back here.

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use super::format;
use super::layout::{chip, csrf_field, may_write, respond, shell, time, Nav, PageResult};
use super::{given, query};
use crate::daemon::api::handlers::silences::{self, AddParams, Silence, SilencesParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    /// Set by the forms' answers: the silence just added or expired.
    added: Option<String>,
    expired: Option<String>,
}

/// The durations the forms offer, in seconds, with their names.
const DURATIONS: [(u64, &str); 6] = [
    (900, "15 minutes"),
    (3600, "1 hour"),
    (7200, "2 hours"),
    (14_400, "4 hours"),
    (86_400, "1 day"),
    (604_800, "7 days"),
];

pub async fn page(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: PageQuery = query(&uri)?;
    let rows = silences::list(State(state.clone()), Query(SilencesParams { all: Some(true) })).await?.0;
    let (running, over): (Vec<&Silence>, Vec<&Silence>) =
        rows.iter().partition(|s| s.state == "active" || s.state == "pending");
    let body = html! {
        h1 { "Silences" }
        @if let Some(id) = given(p.added) {
            p.notice #added { "Silence " code { (id) } " added: the notifier holds matching alerts back within 5 seconds." }
        }
        @if let Some(id) = given(p.expired) {
            p.notice #expired { "Silence " code { (id) } " expired: matching alerts are delivered again from their next update." }
        }
        p.lead { "A silence holds back the delivery of a service's alerts (or of one kind, one template) for a while. Silenced alerts are still stored and shown; their deliveries read " code { "silenced" } ". An alert still active when its silence ends is delivered with its next update." }
        section #running {
            h2 { "Running" }
            (table(&running, true))
        }
        @if may_write() { section #add {
            h2 { "Add a silence" }
            form.silence method="post" action="/silences" {
                (csrf_field())
                label { "service " input type="text" name="service" required; }
                label { "kind "
                    select name="kind" {
                        option value="" { "any" }
                        @for k in crate::wire::alert::AlertKind::ALL {
                            option value=(k.as_str()) { (k.as_str()) }
                        }
                    }
                }
                label { "template " input type="text" name="template_id" placeholder="any" size="16"; }
                (duration_and_comment())
                button type="submit" { "Silence" }
            }
        } }
        section #over {
            h2 { "Ended" }
            (table(&over, false))
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Silences, "Silences", None, body)))
}

fn table(rows: &[&Silence], running: bool) -> Markup {
    html! {
        @if rows.is_empty() {
            p.empty-chart { @if running { "No silence is running: every alert is delivered." } @else { "None." } }
        } @else {
            table.list.silences {
                thead { tr { th { "silence" } th { "state" } th { "service" } th { "kind" } th { "template" } th { "from" } th { "until" } th { "by" } th { "comment" } @if running { th {} } } }
                tbody {
                    @for s in rows {
                        tr.silence id={ "silence-" (s.silence_id) } data-state=(s.state) {
                            td { code { (s.silence_id) } }
                            td { (chip(if running { "warn" } else { "plain" }, &s.state)) }
                            td.nowrap { (s.service) }
                            td { @if s.kind.is_empty() { span.muted { "any" } } @else { (s.kind) } }
                            td {
                                @if s.template_id.is_empty() { span.muted { "any" } }
                                @else { a href={ "/templates/" (format::encode(&s.service)) "/" (s.template_id) } { code { (s.template_id) } } }
                            }
                            td.nowrap { (time(s.starts_ns)) }
                            td.nowrap { (time(s.ends_ns)) }
                            td { (s.created_by) @if !s.expired_by.is_empty() { span.sub { "expired by " (s.expired_by) } } }
                            td { (s.comment) }
                            @if running {
                                td {
                                    @if may_write() { form.expire method="post" action={ "/silences/" (s.silence_id) "/expire" } {
                                        (csrf_field())
                                        button type="submit" title="End this silence now: matching alerts are delivered again from their next update" { "Expire" }
                                    } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn duration_and_comment() -> Markup {
    html! {
        label { "for "
            select name="duration_secs" {
                @for (secs, name) in DURATIONS {
                    option value=(secs) selected[secs == 7200] { (name) }
                }
            }
        }
        label { "comment " input type="text" name="comment" required placeholder="why"; }
    }
}

/// The Silence form of an alert's or a template's page: silences that service's alerts of
/// that template (and, from an alert, of that kind).
pub fn silence_form(service: &str, kind: Option<&str>, template_id: &str) -> Markup {
    if !may_write() {
        return html! {};
    }
    html! {
        form.silence method="post" action="/silences" {
            (csrf_field())
            input type="hidden" name="service" value=(service);
            @if let Some(k) = kind { input type="hidden" name="kind" value=(k); }
            input type="hidden" name="template_id" value=(template_id);
            (duration_and_comment())
            button type="submit" title="Hold back the delivery of these alerts for a while; they are still stored and shown" { "Silence" }
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddForm {
    service: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    template_id: String,
    duration_secs: u64,
    comment: String,
}

/// The Silence buttons: the API's add, then back to the silences.
pub async fn add(State(state): State<AppState>, Form(form): Form<AddForm>) -> PageResult {
    let params = AddParams {
        service: form.service,
        kind: Some(form.kind),
        template_id: Some(form.template_id),
        duration_secs: form.duration_secs,
        comment: form.comment,
    };
    let done = silences::add(State(state), Query(params)).await?.0;
    Ok(Redirect::to(&format!("/silences?added={}", done.silence_id)).into_response())
}

/// The Expire button: the API's expire, then back to the silences.
pub async fn expire(State(state): State<AppState>, Path(silence_id): Path<String>) -> PageResult {
    let done = silences::expire(State(state), Path(silence_id)).await?.0;
    Ok(Redirect::to(&format!("/silences?expired={}", done.silence_id)).into_response())
}
