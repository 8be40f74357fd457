//! The page shell every page shares (head, navigation, footer), the error page, and the small
//! pieces pages repeat: times, template text with its slots, status chips.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::format;
use crate::daemon::api::access::{self, Role};
use crate::daemon::api::error::ApiError;
use crate::daemon::api::handlers::Log;

/// The stylesheet and script, embedded; their URLs carry a digest so a browser never keeps
/// a stale copy across releases.
pub const STYLE: &str = include_str!("assets/style.css");
pub const SCRIPT: &str = include_str!("assets/app.js");

/// The navigation's sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Logs,
    Traces,
    Alerts,
    Templates,
    Stories,
    Pipeline,
    Deliveries,
    Silences,
}

const SECTIONS: [(Nav, &str, &str); 9] = [
    (Nav::Overview, "/", "Overview"),
    (Nav::Logs, "/logs", "Logs"),
    (Nav::Traces, "/traces", "Traces"),
    (Nav::Alerts, "/alerts", "Alerts"),
    (Nav::Templates, "/templates", "Templates"),
    (Nav::Stories, "/stories", "Stories"),
    (Nav::Pipeline, "/pipeline", "Pipeline"),
    (Nav::Deliveries, "/deliveries", "Deliveries"),
    (Nav::Silences, "/silences", "Silences"),
];

/// A whole page. `refresh`: seconds between live refreshes (the script's; none without it).
pub fn shell(nav: Nav, title: &str, refresh: Option<u32>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · Tayga" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/assets/style.css";
                script src="/assets/app.js" defer {}
            }
            body data-refresh=[refresh] {
                header.top {
                    a.brand href="/" { "Tayga" }
                    nav {
                        @for (section, href, name) in SECTIONS {
                            a href=(href) class=[(section == nav).then_some("current")] { (name) }
                        }
                    }
                    @if let Some(granted) = access::granted() {
                        (role_badge(granted.role, granted.session))
                    }
                    @if refresh.is_some() {
                        label.live title="Reload this page's data every few seconds" {
                            input type="checkbox" id="live" hidden; span { "live" }
                        }
                    }
                }
                main { (body) }
                footer { "Times are shown in your browser's zone; hover one for UTC. " a href="/api/v1/openapi.json" { "API" } }
            }
        }
    }
}

/// The role this page was served to, and a sign-out button for a signed-in browser.
fn role_badge(role: Role, session: bool) -> Markup {
    let title = match role {
        Role::Operator => "This session may read and act (retry deliveries)",
        Role::Viewer => "This session may only read: actions need an operator token",
    };
    html! {
        span.role data-role=(role.as_str()) title=(title) { (role.as_str()) }
        @if session {
            form.signout method="post" action="/logout" {
                (csrf_field())
                button type="submit" { "Sign out" }
            }
        }
    }
}

/// The hidden CSRF field every form that writes (any `method="post"`) carries inside it:
/// `form method="post" … { (csrf_field()) … }`. The API's guard checks it on every write a
/// browser makes and takes it out of the body before the handler reads the form
/// (docs/security.md, "Forms").
pub fn csrf_field() -> Markup {
    let token = access::granted().map(|g| g.csrf).unwrap_or_default();
    html! { input type="hidden" name=(access::CSRF_FIELD) value=(token); }
}

/// Whether this request's role may act: a page offers a write (a retry button, a form)
/// only when it does, and says why not otherwise.
pub fn may_write() -> bool {
    access::granted().is_some_and(|g| g.may_write())
}

/// A page as an HTML response with `status`.
pub fn respond(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// Why a page could not be shown, as an HTML page with the matching status.
#[derive(Debug)]
pub struct PageError(pub ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> PageError {
        PageError(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let (title, advice) = match &self.0 {
            ApiError::BadParam { .. } => (
                "This address has a bad parameter",
                "Fix the value in the address, or start again from the navigation.",
            ),
            ApiError::NotFound { .. } | ApiError::Missing(_) => {
                ("Not found", "It may have expired (retention), or the id is mistyped.")
            }
            ApiError::Conflict(_) => ("Not done", "Nothing was changed; reload the page to see the current state."),
            ApiError::BrokerUnavailable(_) => {
                ("The broker is unavailable", "Nothing was republished; try again once the broker answers.")
            }
            ApiError::Unauthorized => ("Not authorised", "This API needs its bearer token."),
            ApiError::Forbidden(_) => ("Not allowed", "Nothing was changed. Sign in with an operator token to act."),
            ApiError::Unavailable(_) => (
                "ClickHouse is unavailable",
                "Tayga keeps accepting data; this page works again once ClickHouse answers. Reload in a few seconds.",
            ),
            ApiError::Internal(_) => ("The page failed", "The API's log has the details of this failure."),
        };
        // The API logs server-side failures with their detail; the page says what failed.
        if matches!(self.0, ApiError::Internal(_) | ApiError::Unavailable(_) | ApiError::BrokerUnavailable(_)) {
            tracing::warn!(error = %self.0, "a web page failed");
        }
        let body = html! {
            section.error-page {
                h1 { (title) }
                p.reason { (self.0.to_string()) }
                p { (advice) }
                p { a href="/" { "Back to the overview" } }
            }
        };
        respond(status, shell(Nav::Overview, title, None, body))
    }
}

pub type PageResult = Result<Response, PageError>;

/// A time: UTC in the markup, converted to the browser's zone by the script (UTC on hover).
pub fn time(ns: u64) -> Markup {
    if ns == 0 {
        return html! { span.muted { "never" } };
    }
    html! { time datetime=(format::rfc3339(ns)) title=(format::utc(ns)) { (format::utc(ns)) } }
}

/// A template with its variable slots highlighted.
pub fn template_text(template: &str) -> Markup {
    html! {
        code.template {
            @for (slot, text) in format::template_parts(template) {
                @if slot { span.slot { (text) } } @else { (text) }
            }
        }
    }
}

/// A small coloured word: a state, a kind, a status.
pub fn chip(class: &str, text: &str) -> Markup {
    html! { span class={ "chip " (class) } { (text) } }
}

/// The chip of a delivery status.
pub fn status_chip(status: &str) -> Markup {
    let class = match status {
        "delivered" => "ok",
        "failed" => "bad",
        _ => "warn",
    };
    chip(class, status)
}

/// The links to each window of a page, the current one marked.
pub fn window_picker(base: &str, current: format::Window) -> Markup {
    let sep = if base.contains('?') { '&' } else { '?' };
    html! {
        nav.windows aria-label="window" {
            @for w in format::Window::ALL {
                a href={ (base) (sep) "window=" (w.as_str()) } class=[(w == current).then_some("current")] { (w.as_str()) }
            }
        }
    }
}

/// Log lines, newest or oldest first as given, each linked to its trace and template.
pub fn log_table(logs: &[Log], empty: &str) -> Markup {
    if logs.is_empty() {
        return html! { p.empty-chart { (empty) } };
    }
    html! {
        table.list.logs {
            thead { tr { th { "time" } th { "service" } th { "severity" } th { "line" } th { "" } } }
            tbody {
                @for l in logs {
                    tr.log-line {
                        td.nowrap { (time(l.time_ns)) }
                        td { (l.service) }
                        td { (severity(l.severity_number, &l.severity_text)) }
                        td { code.body { (l.body) } }
                        td.links.nowrap {
                            @if !l.trace_id.is_empty() {
                                a href={ "/traces/" (l.trace_id) } { "trace" }
                            }
                            @if let Some(t) = &l.template_id {
                                @if !l.trace_id.is_empty() { " · " }
                                a href={ "/templates/" (format::encode(&l.service)) "/" (t) } { "template" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A log's severity: its text, or the OTLP number's name, as a chip (ERROR and above red).
pub fn severity(number: u8, text: &str) -> Markup {
    let name = match (text, number) {
        ("", 0) => "unset",
        ("", n) => crate::otlp::severity_name(n),
        (text, _) => text,
    };
    let class = match number {
        17.. => "bad",
        13..=16 => "warn",
        _ => "plain",
    };
    chip(class, name)
}
