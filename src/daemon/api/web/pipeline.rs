//! `/pipeline`: the pipeline's own health over a window (15 min, 1 h, 6 h, 24 h), from the
//! recorder's samples as `GET /api/v1/pipeline` combines them (docs/design.md#replica-metrics: counter rates and
//! quantiles sum the replicas; the data lag, the template count and `up` take the largest
//! replica; other gauges are summed): throughput per stage, consumer lag per group, errors
//! per stage, up per instance, the ingest leg in use, data freshness, and the logminer's
//! replicas with their count.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use maud::{html, Markup};
use serde::Deserialize;

use super::charts::{self, Series as ChartSeries, Size, TimeChart};
use super::format::{self, Window};
use super::layout::{chip, respond, shell, time, window_picker, Nav, PageResult};
use super::query;
use crate::daemon::api::handlers::pipeline::{self, PipelineParams, Series};
use crate::daemon::api::handlers::services::{self, ServicesParams};
use crate::daemon::api::handlers::AppState;
use crate::daemon::api::params::Query;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineQuery {
    window: Option<String>,
}

/// A line of a stage's throughput chart: its name, metric and the labels it must carry.
struct Line {
    name: &'static str,
    metric: &'static str,
    labels: &'static [(&'static str, &'static str)],
}

/// The five stages and what each one's throughput is.
const STAGES: [(&str, &[Line]); 5] = [
    (
        "ingest",
        &[
            Line { name: "spans/s", metric: "tayga_ingest_accepted_items_total", labels: &[("signal", "traces")] },
            Line { name: "logs/s", metric: "tayga_ingest_accepted_items_total", labels: &[("signal", "logs")] },
        ],
    ),
    (
        "writer",
        &[
            Line { name: "records/s", metric: "tayga_writer_consumed_records_total", labels: &[] },
            Line { name: "rows/s", metric: "tayga_writer_written_rows_total", labels: &[] },
        ],
    ),
    (
        "assembler",
        &[
            Line { name: "records/s", metric: "tayga_assembler_consumed_records_total", labels: &[] },
            Line { name: "stories/s", metric: "tayga_assembler_emitted_stories_total", labels: &[] },
        ],
    ),
    (
        "logminer",
        &[
            Line { name: "records/s", metric: "tayga_logminer_consumed_records_total", labels: &[] },
            Line { name: "lines/s", metric: "tayga_logminer_mined_logs_total", labels: &[] },
        ],
    ),
    (
        "notifier",
        &[
            Line { name: "records/s", metric: "tayga_notifier_consumed_records_total", labels: &[] },
            Line { name: "deliveries/s", metric: "tayga_notifier_deliveries_total", labels: &[] },
        ],
    ),
];

/// The consumer groups whose lag is charted (ingest consumes nothing).
const GROUPS: [&str; 4] = ["writer", "assembler", "logminer", "notifier"];

/// The combined totals of every series of `service` whose metric `matches` and whose labels
/// include `labels`, summed per step (label sets add up: each is already combined over
/// replicas by its own rule).
fn summed(
    series: &[Series],
    service: &str,
    matches: impl Fn(&str) -> bool,
    labels: &[(&str, &str)],
) -> Vec<(u64, f64)> {
    let mut steps: BTreeMap<u64, f64> = BTreeMap::new();
    for s in series.iter().filter(|s| {
        s.service == service
            && matches(&s.metric)
            && labels.iter().all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
    }) {
        for (t, v) in &s.total {
            *steps.entry(*t).or_default() += v;
        }
    }
    steps.into_iter().collect()
}

fn latest(points: &[(u64, f64)]) -> Option<f64> {
    points.last().map(|p| p.1)
}

/// One series' per-instance latest values.
fn latest_by_instance(series: &[Series], service: &str, metric: &str) -> BTreeMap<String, f64> {
    series
        .iter()
        .filter(|s| s.service == service && s.metric == metric)
        .flat_map(|s| s.instances.iter().filter_map(|i| Some((i.instance.clone(), latest(&i.points)?))))
        .collect()
}

/// Which ingest leg carries traffic now: the broker when its path is up, else the direct one.
fn ingest_leg(series: &[Series]) -> Option<&'static str> {
    let up = |path| latest(&summed(series, "ingest", |m| m == "tayga_ingest_path_up", &[("path", path)]));
    match (up("broker"), up("direct")) {
        (Some(v), _) if v >= 1.0 => Some("broker"),
        (_, Some(v)) if v >= 1.0 => Some("direct"),
        (None, None) => None,
        _ => Some("none"),
    }
}

/// The logminer's replicas: those the recorder scraped and found up at the last step.
fn replicas(series: &[Series]) -> BTreeMap<String, f64> {
    latest_by_instance(series, "logminer", "up")
}

pub async fn page(State(state): State<AppState>, uri: Uri) -> PageResult {
    let p: PipelineQuery = query(&uri)?;
    let window = Window::parse(p.window.as_deref())?;
    let now = state.now();
    let from = now.saturating_sub(window.ns());
    let data = pipeline::series(
        State(state.clone()),
        Query(PipelineParams { service: None, metric: None, from: Some(from), to: Some(now), step_secs: None }),
    )
    .await?
    .0;
    let services = services::list(
        State(state.clone()),
        Query(ServicesParams {
            from: Some(now.saturating_sub(24 * format::HOUR_NS)),
            to: None,
            limit: Some(1000),
            cursor: None,
        }),
    )
    .await?
    .0
    .items;
    let newest = services.iter().map(|s| s.last_seen_ns).max();
    let s = &data.series;
    let chart = |series: Vec<ChartSeries>, unit: &str, empty: &str| {
        charts::time_chart(&TimeChart {
            from_ns: data.from_ns,
            to_ns: data.to_ns,
            unit: unit.to_string(),
            series,
            rules: vec![],
            empty: empty.to_string(),
            size: Size::Card,
        })
    };
    let no_samples = "No samples in this window: the API's recorder scrapes every service's /metrics; is the service running and its metrics address configured?";
    let replicas = replicas(s);
    let replicas_up = replicas.values().filter(|v| **v >= 1.0).count();
    let templates = latest(&summed(s, "logminer", |m| m == "tayga_logminer_templates", &[]));
    let mined = latest(&summed(s, "logminer", |m| m == "tayga_logminer_mined_logs_total", &[]));
    let replica_templates = latest_by_instance(s, "logminer", "tayga_logminer_templates");
    let replica_mined = latest_by_instance(s, "logminer", "tayga_logminer_mined_logs_total");
    let lag_series: Vec<ChartSeries> = GROUPS
        .iter()
        .map(|g| ChartSeries {
            name: format!("tayga-{g}"),
            points: summed(s, g, |m| m == format!("tayga_{g}_lag_records"), &[]),
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    let error_series: Vec<ChartSeries> = STAGES
        .iter()
        .map(|(stage, _)| ChartSeries {
            name: stage.to_string(),
            points: summed(s, stage, |m| m.ends_with("_errors_total"), &[]),
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    let body = html! {
        h1 { "Pipeline" }
        (window_picker("/pipeline", window))
        @if data.truncated { p.note { "More samples matched than one answer holds; the newest are missing. Pick a shorter window." } }
        div.tiles {
            div.tile #ingest-leg {
                span.label { "ingest leg" }
                span.value { @match ingest_leg(s) {
                    Some("broker") => { (chip("ok", "broker")) }
                    Some("direct") => { (chip("warn", "direct to ClickHouse")) }
                    Some(_) => { (chip("bad", "none: both paths down")) }
                    None => { span.muted { "not scraped" } }
                } }
            }
            div.tile #freshness {
                span.label { "data freshness" }
                span.value { @match newest { Some(n) => { (format::age(now, n)) } None => { span.muted { "no data in 24 h" } } } }
                @if let Some(n) = newest { span.sub { "newest row " (time(n)) } }
            }
            div.tile #logminer-replicas {
                span.label { "logminer replicas" }
                span.value { (replicas_up) }
                span.sub { (replicas.len()) " scraped" }
            }
            div.tile #logminer-templates {
                span.label { "templates" }
                span.value { @match templates { Some(t) => { (format::number(t)) } None => { "–" } } }
                span.sub { "the largest of " (format::count(replicas_up as u64, "replica")) " up" }
            }
            div.tile #logminer-rate {
                span.label { "lines mined" }
                span.value { @match mined { Some(r) => { (format::number(r)) "/s" } None => { "–" } } }
                span.sub { "summed over " (format::count(replicas_up as u64, "replica")) " up" }
            }
        }
        section {
            h2 { "Throughput" }
            div.grid {
                @for (stage, lines) in &STAGES {
                    @let series: Vec<ChartSeries> = lines.iter().map(|l| ChartSeries {
                        name: l.name.to_string(),
                        points: summed(s, stage, |m| m == l.metric, l.labels),
                    }).filter(|c| !c.points.is_empty()).collect();
                    div.card data-stage=(stage) {
                        h3 { (stage) " " (up_summary(s, stage)) }
                        (chart(series, "/s", no_samples))
                    }
                }
            }
        }
        div.grid {
            section.card #lag {
                h2 { "Consumer lag" }
                (chart(lag_series, " records", no_samples))
            }
            section.card #errors {
                h2 { "Errors" }
                (chart(error_series, "/s", "No error counted in this window."))
            }
        }
        section #instances {
            h2 { "Instances" }
            table.list {
                thead { tr { th { "service" } th { "instance" } th { "up" } th.num { "templates" } th.num { "lines/s" } } }
                tbody {
                    @for (service, instances) in instances(s) {
                        @for (instance, up) in instances {
                            tr.instance {
                                td { (service) }
                                td { code { (instance) } }
                                td { @if up >= 1.0 { (chip("ok", "up")) } @else { (chip("bad", "down")) } }
                                td.num { @if let Some(t) = replica_templates.get(&instance).filter(|_| service == "logminer") { (format::number(*t)) } }
                                td.num { @if let Some(r) = replica_mined.get(&instance).filter(|_| service == "logminer") { (format::number(*r)) } }
                            }
                        }
                    }
                }
            }
            p.note { "The logminer's template count is its largest replica's; rates are summed over replicas." }
        }
        p.muted { "Window " (time(data.from_ns)) " to " (time(data.to_ns)) ", one point per " (data.step_secs) " s." }
    };
    Ok(respond(StatusCode::OK, shell(Nav::Pipeline, "Pipeline", Some(10), body)))
}

/// Every scraped instance of every service with its last `up`.
fn instances(series: &[Series]) -> Vec<(String, BTreeMap<String, f64>)> {
    let mut services: Vec<String> = series.iter().filter(|s| s.metric == "up").map(|s| s.service.clone()).collect();
    services.sort();
    services.dedup();
    services
        .into_iter()
        .map(|svc| {
            let up = latest_by_instance(series, &svc, "up");
            (svc, up)
        })
        .collect()
}

/// `n/m up` for a stage.
fn up_summary(series: &[Series], stage: &str) -> Markup {
    let up = latest_by_instance(series, stage, "up");
    let live = up.values().filter(|v| **v >= 1.0).count();
    match (live, up.len()) {
        (_, 0) => chip("plain", "not scraped"),
        (l, n) if l == n => chip("ok", &format!("{l}/{n} up")),
        (l, n) => chip("bad", &format!("{l}/{n} up")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::api::handlers::pipeline::InstanceSeries;
    use crate::daemon::api::recorder::rules::Rule;

    fn series(service: &str, metric: &str, labels: &[(&str, &str)], total: Vec<(u64, f64)>) -> Series {
        Series {
            service: service.into(),
            metric: metric.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            rule: Rule::Sum,
            instances: vec![InstanceSeries { instance: "127.0.0.1:1".into(), points: total.clone() }],
            total,
        }
    }

    #[test]
    fn label_sets_add_up_and_filters_pick_their_labels() {
        let s = vec![
            series("notifier", "tayga_notifier_deliveries_total", &[("target", "a")], vec![(1, 1.0), (2, 2.0)]),
            series("notifier", "tayga_notifier_deliveries_total", &[("target", "b")], vec![(2, 3.0)]),
            series("ingest", "tayga_ingest_path_up", &[("path", "broker")], vec![(2, 0.0)]),
            series("ingest", "tayga_ingest_path_up", &[("path", "direct")], vec![(2, 1.0)]),
        ];
        assert_eq!(summed(&s, "notifier", |m| m == "tayga_notifier_deliveries_total", &[]), vec![(1, 1.0), (2, 5.0)]);
        assert_eq!(
            summed(&s, "notifier", |m| m == "tayga_notifier_deliveries_total", &[("target", "b")]),
            vec![(2, 3.0)]
        );
        assert_eq!(ingest_leg(&s), Some("direct"));
        assert_eq!(ingest_leg(&s[..2]), None);
    }
}
