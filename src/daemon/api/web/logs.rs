//! `/logs`: the log search of Explore. A query box (the query language of `tayga logs`) and a
//! time range, both in the address; the matches per time bucket stacked by severity; the
//! matching lines, newest first, in keyset pages, each with its template's slots highlighted
//! and links to its trace, its template and its context; and a *follow* box with which the
//! script polls the page and puts new lines on top. `/logs/context`: the lines before and
//! after one line, from the same service and instance.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use maud::{html, Markup};
use serde::Deserialize;

use super::charts;
use super::format;
use super::layout::{respond, severity, shell, time, Nav, PageResult};
use super::range::{self, Range};
use super::{given, query};
use crate::daemon::api::handlers::logs::{self as log_handlers, ContextParams, CountsParams, LogsParams};
use crate::daemon::api::handlers::templates::{self, TemplatesParams};
use crate::daemon::api::handlers::{AppState, Log};
use crate::daemon::api::params::{Query, MAX_LIMIT};

/// Lines on one page.
const PAGE: u64 = 100;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    q: Option<String>,
    since: Option<String>,
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
}

/// The severity bands the chart stacks, bottom up, as the counts handler gives them: (name, colour class).
const SEVERITIES: [(&str, &str); 7] = [
    ("unset", "sev-unset"),
    ("trace", "sev-trace"),
    ("debug", "sev-debug"),
    ("info", "sev-info"),
    ("warn", "sev-warn"),
    ("error", "sev-error"),
    ("fatal", "sev-fatal"),
];

/// A line's body cut into (is a slot, text) parts by its template: the template's literal
/// parts are found in order in the body and what lies between them is a slot. A body its
/// template does not fit (spacing changed by masking) is one literal part.
pub fn line_parts<'a>(template: &str, body: &'a str) -> Vec<(bool, &'a str)> {
    let parts = format::template_parts(template);
    let mut out = Vec::new();
    let mut at = 0;
    let mut slot_open = false;
    for (slot, text) in &parts {
        if *slot {
            slot_open = true;
            continue;
        }
        let found =
            if slot_open { body[at..].find(text).map(|i| at + i) } else { body[at..].starts_with(text).then_some(at) };
        let Some(start) = found else { return vec![(false, body)] };
        if start > at {
            out.push((true, &body[at..start]));
        }
        out.push((false, &body[start..start + text.len()]));
        at = start + text.len();
        slot_open = false;
    }
    if at < body.len() {
        if !slot_open {
            return vec![(false, body)];
        }
        out.push((true, &body[at..]));
    }
    out
}

/// The templates of `services`, by (service, id), for highlighting lines.
async fn templates_of(state: &AppState, services: &[String]) -> HashMap<(String, String), String> {
    let mut texts = HashMap::new();
    for service in services {
        let page = templates::list(
            State(state.clone()),
            Query(TemplatesParams {
                service: Some(service.clone()),
                from: None,
                to: None,
                limit: Some(MAX_LIMIT),
                cursor: None,
            }),
        )
        .await;
        // Highlighting is a help: a page whose templates cannot be read shows plain lines.
        if let Ok(page) = page {
            texts.extend(page.0.items.into_iter().map(|t| ((t.service, t.template_id), t.template)));
        }
    }
    texts
}

/// The lines as the page lists them: time, service, severity, the body (slots highlighted
/// when its template is known), and links to its trace, template and context.
pub fn lines_table(logs: &[Log], templates: &HashMap<(String, String), String>, focus: Option<&str>) -> Markup {
    html! {
        table.list.logs #log-lines {
            thead { tr { th { "time" } th { "service" } th { "severity" } th.body { "line" } th { "" } } }
            tbody {
                @for l in logs {
                    @let template = l.template_id.as_ref().and_then(|t| templates.get(&(l.service.clone(), t.clone())));
                    tr.log-line.focus[focus == Some(l.log_id.as_str())] data-log-id=(l.log_id) {
                        td.nowrap { (time(l.time_ns)) }
                        td.nowrap { (l.service) }
                        td { (severity(l.severity_number, &l.severity_text)) }
                        td.body { code.body {
                            @match template {
                                Some(t) => { @for (slot, text) in line_parts(t, &l.body) { @if slot { span.slot { (text) } } @else { (text) } } }
                                None => { (l.body) }
                            }
                        } }
                        td.links.nowrap {
                            @if !l.trace_id.is_empty() { a.trace-link href={ "/traces/" (l.trace_id) } { "trace" } " · " }
                            @if let Some(t) = &l.template_id { a.template-link href={ "/templates/" (format::encode(&l.service)) "/" (t) } { "template" } " · " }
                            a.context-link href={ "/logs/context?service=" (format::encode(&l.service)) "&log=" (l.log_id) "&t=" (l.time_ns) } { "context" }
                        }
                    }
                }
            }
        }
    }
}

/// Reads one page of matching lines (newest first) and the next page's cursor.
async fn search(
    state: &AppState,
    text: Option<&str>,
    range: &Range,
    cursor: Option<String>,
    limit: u64,
) -> Result<(Vec<Log>, Option<String>), super::layout::PageError> {
    let page = log_handlers::list(
        State(state.clone()),
        Query(LogsParams {
            service: None,
            template_id: None,
            q: text.map(str::to_string),
            from: Some(range.from_ns),
            to: Some(range.to_ns),
            limit: Some(limit),
            cursor,
        }),
    )
    .await?
    .0;
    Ok((page.items, page.next_cursor))
}

/// The matches per step and severity over the range, and the step.
async fn counts(
    state: &AppState,
    text: Option<&str>,
    range: &Range,
) -> Result<(Vec<(u64, Vec<u64>)>, u64), super::layout::PageError> {
    let counted = log_handlers::counts(
        State(state.clone()),
        Query(CountsParams {
            service: None,
            template_id: None,
            q: text.map(str::to_string),
            from: Some(range.from_ns),
            to: Some(range.to_ns),
            step_secs: None,
        }),
    )
    .await?
    .0;
    let steps = counted
        .steps
        .iter()
        .map(|s| {
            let c = &s.counts;
            (s.start_ns, vec![c.unspecified, c.trace, c.debug, c.info, c.warn, c.error, c.fatal])
        })
        .collect();
    Ok((steps, counted.step_ns))
}

pub async fn page(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: LogsQuery = query(&uri)?;
    let text = given(p.q);
    let range = Range::parse(p.since.as_deref(), p.from.as_deref(), p.to.as_deref(), state.now())?;
    let cursor = given(p.cursor);
    let (lines, next_cursor) = search(&state, text.as_deref(), &range, cursor.clone(), PAGE).await?;
    let (buckets, bucket) = counts(&state, text.as_deref(), &range).await?;
    let mut services: Vec<String> = lines.iter().map(|l| l.service.clone()).collect();
    services.sort();
    services.dedup();
    let templates = templates_of(&state, &services).await;
    let kept = vec![("q", text.clone().unwrap_or_default())];
    let range_params = match range.preset {
        Some(p) => vec![("since", p.to_string())],
        None => vec![("from", range::field_value(range.from_ns)), ("to", range::field_value(range.to_ns))],
    };
    let next = next_cursor.map(|c| {
        let mut all = range_params.clone();
        all.push(("cursor", c));
        range::link("/logs", &kept, &all)
    });
    let newest = range::link("/logs", &kept, &range_params);
    let series: Vec<(&str, &str)> = SEVERITIES.to_vec();
    // Following makes sense only for a range that ends now, on the first page.
    let followable = range.preset.is_some() && cursor.is_none();
    let body = html! {
        h1 { "Logs" }
        form.filters.search #log-search method="get" action="/logs" {
            input.query type="search" name="q" value=[text.as_deref()] placeholder="\"payment declined\" service:checkout severity>=warn http.route=/pay" aria-label="query";
            (range::hidden(&range))
            button type="submit" { "Search" }
        }
        p.query-help {
            "Words and " code { "\"phrases\"" } " match the line; " code { "key=value" } " an attribute or resource attribute; "
            code { "service:NAME" } ", " code { "severity>=warn" } ", " code { "template:ID" } ", " code { "trace:ID" } ". Every term narrows."
        }
        div.range-row {
            (range::presets("/logs", &kept, &range))
            (range::custom_form("/logs", &kept, &range))
        }
        section #count-chart {
            h2 { "Matches over time" }
            (charts::stacked_bars(&buckets, bucket, &series, range.from_ns, range.to_ns, "No line matches in this range."))
        }
        section #log-results data-follow=[followable.then_some("2")] {
            h2 {
                (format::count(lines.len() as u64, "line")) @if cursor.is_some() { " (older page)" } " "
                @if followable {
                    label.follow title="Put new lines on top as they are stored" { input type="checkbox" #follow; " follow" }
                    " " span #live-status {}
                }
            }
            @if lines.is_empty() {
                p.empty-chart { "No line matches in this range. Widen the range, or drop a term." }
            } @else {
                (lines_table(&lines, &templates, None))
            }
            p.pager {
                @if cursor.is_some() { a href=(newest) { "Newest" } }
                @if let Some(next) = &next { a.next href=(next) { "Older lines →" } }
            }
        }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Logs, "Logs", None, body)))
}

/// Lines shown on each side of a line in its context.
const CONTEXT: u64 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextQuery {
    service: String,
    /// The line's id (16 hex digits).
    log: String,
    /// The line's time, Unix ns.
    t: u64,
}

/// `/logs/context`: the [`CONTEXT`] lines before and after one line from the same service
/// and instance, oldest first, the line itself marked.
pub async fn context(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: ContextQuery = query(&uri)?;
    let c = log_handlers::context(
        State(state.clone()),
        Path(p.log.clone()),
        Query(ContextParams { service: p.service.clone(), time_ns: p.t, lines: Some(CONTEXT) }),
    )
    .await?
    .0;
    let focus = c.line.log_id.clone();
    let mut lines = c.before;
    lines.push(c.line);
    lines.extend(c.after);
    let templates = templates_of(&state, std::slice::from_ref(&p.service)).await;
    let around = range::link(
        "/logs",
        &[("q", crate::search::Query { services: vec![p.service.clone()], ..Default::default() }.to_string())],
        &[
            ("from", range::field_value(p.t.saturating_sub(5 * format::MINUTE_NS))),
            ("to", range::field_value(p.t + 5 * format::MINUTE_NS)),
        ],
    );
    let body = html! {
        p.crumbs { a href="/logs" { "Logs" } " › context of a line of " (p.service) }
        h1 { "Context" }
        p.lead {
            "The lines of " strong { (p.service) }
            @if let Some(i) = &c.instance { " from the same instance (" code { (i.key) "=" (i.value) } ")" }
            " just before and after it (within 15 minutes), oldest first; the line itself is marked. "
            a href=(around) { "All of " (p.service) " around it" }
        }
        section #context { (lines_table(&lines, &templates, Some(&focus))) }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Logs, "Context", None, body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, template: Option<&str>, trace: &str) -> Log {
        Log {
            log_id: id.into(),
            service: "pay ments".into(),
            time_ns: 1,
            severity_number: 17,
            severity_text: String::new(),
            body: "declined order 42".into(),
            trace_id: trace.into(),
            span_id: String::new(),
            attributes: Default::default(),
            typed_attributes: Default::default(),
            template_id: template.map(str::to_string),
            event_name: String::new(),
            flags: 0,
            dropped_attributes_count: 0,
            structured_body: None,
        }
    }

    #[test]
    fn each_line_links_its_trace_template_and_context_with_its_slots_marked() {
        let templates = HashMap::from([(
            ("pay ments".to_string(), "00000000000000aa".to_string()),
            "declined order <NUM>".to_string(),
        )]);
        let html = lines_table(
            &[line("0000000000000001", Some("00000000000000aa"), &"ab".repeat(16)), line("0000000000000002", None, "")],
            &templates,
            Some("0000000000000002"),
        )
        .into_string();
        assert_eq!(html.matches("class=\"trace-link\"").count(), 1, "only the line with a trace: {html}");
        assert!(html.contains(&format!("href=\"/traces/{}\"", "ab".repeat(16))));
        assert!(html.contains("href=\"/templates/pay+ments/00000000000000aa\""), "{html}");
        assert!(html.contains("href=\"/logs/context?service=pay+ments&amp;log=0000000000000002&amp;t=1\""), "{html}");
        assert_eq!(html.matches("<span class=\"slot\">42</span>").count(), 1, "{html}");
        assert_eq!(html.matches("focus").count(), 1, "the focused line is marked");
    }

    #[test]
    fn slots_are_found_in_the_line() {
        let parts =
            line_parts("payment failed for order <NUM>: card <*>", "payment failed for order 51642: card declined");
        assert_eq!(
            parts,
            vec![(false, "payment failed for order "), (true, "51642"), (false, ": card "), (true, "declined")]
        );
        assert_eq!(line_parts("user <*> in", "user ann in"), vec![(false, "user "), (true, "ann"), (false, " in")]);
        assert_eq!(line_parts("a <*> b", "x y z"), vec![(false, "x y z")], "a line its template does not fit");
        assert_eq!(line_parts("plain", "plain and more"), vec![(false, "plain and more")]);
        assert_eq!(line_parts("<*> starts", "it starts"), vec![(true, "it"), (false, " starts")]);
    }
}
