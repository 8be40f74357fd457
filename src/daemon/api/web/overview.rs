//! `/`: the services seen in the last 24 hours with links into every area, or, on an empty
//! database, what to do to see something.

use axum::extract::State;
use axum::http::StatusCode;
use maud::{html, Markup};

use super::format;
use super::layout::{self, respond, shell, time, Nav, PageResult};
use crate::daemon::api::handlers::alerts::{self, Activity, AlertsParams};
use crate::daemon::api::handlers::services::{self, ServicesParams};
use crate::daemon::api::handlers::templates::{self, TemplatesParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;

pub async fn page(State(state): State<AppState>) -> PageResult {
    let now = state.now();
    let from = Some(now.saturating_sub(24 * format::HOUR_NS));
    let services =
        services::list(State(state.clone()), Query(ServicesParams { from, to: None, limit: Some(1000), cursor: None }))
            .await?
            .0
            .items;
    let active = alerts::list(
        State(state.clone()),
        Query(AlertsParams {
            kind: None,
            service: None,
            state: Some(Activity::Active),
            limit: Some(1000),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    let any_template = !templates::list(
        State(state.clone()),
        Query(TemplatesParams { service: None, from: None, to: None, limit: Some(1), cursor: None }),
    )
    .await?
    .0
    .items
    .is_empty();
    if services.is_empty() && active.is_empty() && !any_template {
        return Ok(respond(StatusCode::OK, shell(Nav::Overview, "Nothing stored yet", Some(15), empty())));
    }
    let body = html! {
        h1 { "Overview" }
        p.lead {
            (services.len()) " services in the last 24 hours · "
            a href="/alerts" { (active.len()) " active alerts" }
        }
        table.list {
            thead { tr { th { "service" } th.num { "spans" } th.num { "error spans" } th.num { "logs" } th.num { "error logs" } th { "last seen" } th { "" } } }
            tbody {
                @for s in &services {
                    @let q = format::encode(&s.service);
                    tr {
                        td { strong { (s.service) } }
                        td.num { (s.spans) }
                        td.num { (s.error_spans) }
                        td.num { (s.logs) }
                        td.num { (s.error_logs) }
                        td { (time(s.last_seen_ns)) " " span.muted { "(" (format::age(now, s.last_seen_ns)) " ago)" } }
                        td.links {
                            a.logs-link href={ "/logs?q=" (format::encode(&crate::search::Query { services: vec![s.service.clone()], ..Default::default() }.to_string())) } { "logs" } " · "
                            a.traces-link href={ "/traces?service=" (q) } { "traces" } " · "
                            a href={ "/templates?service=" (q) } { "templates" } " · "
                            a href={ "/alerts?service=" (q) } { "alerts" } " · "
                            a href={ "/stories?service=" (q) } { "stories" }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Overview, "Overview", Some(15), body)))
}

/// The empty database: where to send data, or how to make some.
fn empty() -> Markup {
    html! {
        section.empty {
            h1 { "Nothing stored yet" }
            p.lead { "Tayga has no traces, logs or templates in the last 24 hours. Send it some OpenTelemetry data:" }
            ol {
                li {
                    "Point any OTLP exporter at this host: " strong { "OTLP/HTTP on port 4318" } " ("
                    code { "/v1/traces" } ", " code { "/v1/logs" } ") or " strong { "OTLP/gRPC on port 4317" } ". "
                    "With the OpenTelemetry SDKs: " code { "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318" }
                }
                li { "Or run the demo, which sends traffic that raises every kind of alert: " code { "tayga up --demo" } }
            }
            p { "This page refreshes itself (tick " em { "live" } " above); data appears within seconds of arriving." }
            p { (layout::chip("warn", "waiting")) " " a href="/pipeline" { "See the pipeline" } " to check that every service is up." }
        }
    }
}
