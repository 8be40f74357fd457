//! `GET /api/v1/logs` (a search, newest first), `GET /api/v1/logs/counts` (its count over
//! time by severity) and `GET /api/v1/logs/{log_id}/context` (the lines around one line).
//! A search is written in the search language (`crate::search`, docs/api.md "Search").

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AppState, Log, Page};
use crate::daemon::api::error::{ApiError, ErrorBody};
use crate::daemon::api::params::{self, Query, Window, DAY_NS, HOUR_NS};
use crate::search::{self, Scope};
use crate::store::query::logs::{self, LogSearch, LogWithTemplate};
use crate::wire::alert::format_id;

/// The widest window a search or a count may cover.
pub const MAX_WINDOW_NS: u64 = 7 * DAY_NS;
/// The hour before `to`, over at most [`MAX_WINDOW_NS`].
pub const WINDOW: params::WindowRule = params::WindowRule { default_ns: HOUR_NS, max_ns: MAX_WINDOW_NS };

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogsParams {
    /// Only this service (the same as `service:NAME` in `q`).
    #[param(max_length = 1024)]
    pub service: Option<String>,
    /// Only logs that matched this template (1 to 16 hex digits; the same as `template:ID`).
    #[param(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub template_id: Option<String>,
    /// A search: words and "quoted phrases" (in the body, ignoring case), `key=value`
    /// (attributes and resource attributes), `service:NAME`, `severity>=LEVEL`,
    /// `template:ID`, `trace:ID` (docs/api.md, "Search"). A query that cannot be read is a
    /// 400 saying what and at which character.
    #[param(max_length = 1024)]
    pub q: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`); at most 7 days before `to`.
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The query of `q` (logs scope) with the `service` and `template_id` parameters added.
pub fn log_query(
    q: Option<String>,
    service: Option<String>,
    template_id: Option<String>,
) -> Result<search::Query, ApiError> {
    let mut query = match params::text("q", q)? {
        Some(q) => search::parse(&q, Scope::Logs).map_err(|e| ApiError::bad("q", e.to_string()))?,
        None => search::Query::default(),
    };
    if let Some(service) = params::text("service", service)? {
        query.services.push(service);
    }
    if let Some(t) = params::text("template_id", template_id)? {
        query.templates.push(params::hex_id("template_id", &t)?);
    }
    Ok(query)
}

#[utoipa::path(get, path = "/api/v1/logs", tag = "logs", params(LogsParams),
    responses((status = 200, body = Page<Log>), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, Query(p): Query<LogsParams>) -> Result<Json<Page<Log>>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let limit = params::limit(p.limit)?;
    let before = params::cursor::<(u64, u64)>(p.cursor)?;
    let search = LogSearch { query: log_query(p.q, p.service, p.template_id)?, before };
    let rows = state.run(logs::logs(&state.store, window, &search, limit)).await?;
    let cursor = rows.last().map(|r| params::next_cursor(&(r.log.time_ns, r.log.log_id)));
    let items: Vec<Log> = rows.into_iter().map(log_of).collect();
    Ok(Json(Page::of(items, limit, cursor)))
}

fn log_of(r: LogWithTemplate) -> Log {
    Log::from_row(&r.log, (r.template_id != 0).then_some(r.template_id))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CountsParams {
    #[param(max_length = 1024)]
    pub service: Option<String>,
    #[param(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub template_id: Option<String>,
    /// The search, as `GET /api/v1/logs` takes it.
    #[param(max_length = 1024)]
    pub q: Option<String>,
    /// Window start, Unix ns (default: one hour before `to`); at most 7 days before `to`.
    pub from: Option<u64>,
    /// Window end, Unix ns (default: now).
    pub to: Option<u64>,
    /// The step, in seconds (default: about 60 steps, whole minutes from a one-hour window
    /// up, else whole seconds). A step that gives more than 1,000 steps over the window is
    /// widened to the smallest multiple of itself that gives at most 1,000; one longer than
    /// the window is the window's length (in whole minutes when it was whole minutes), so
    /// the read stays within the window's bound. `step_ns` says which step was used.
    #[param(minimum = 1)]
    pub step_secs: Option<u64>,
}

/// Lines per step and severity band.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct SeverityBands {
    /// Severity number 0 (not given).
    pub unspecified: u64,
    pub trace: u64,
    pub debug: u64,
    pub info: u64,
    pub warn: u64,
    pub error: u64,
    pub fatal: u64,
}

impl SeverityBands {
    fn add(&mut self, severity_number: u8, count: u64) {
        let band = match severity_number {
            0 => &mut self.unspecified,
            1..=4 => &mut self.trace,
            5..=8 => &mut self.debug,
            9..=12 => &mut self.info,
            13..=16 => &mut self.warn,
            17..=20 => &mut self.error,
            _ => &mut self.fatal,
        };
        *band += count;
    }

    pub fn total(&self) -> u64 {
        self.unspecified + self.trace + self.debug + self.info + self.warn + self.error + self.fatal
    }
}

/// One step of a count over time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct CountStep {
    pub start_ns: u64,
    pub counts: SeverityBands,
}

/// A search's count over time, every step of the window present (zero where nothing matched).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LogCounts {
    /// The window, widened to whole steps.
    pub from_ns: u64,
    pub to_ns: u64,
    pub step_ns: u64,
    pub steps: Vec<CountStep>,
    /// `rollup` when read from the per-minute counts (a query of services and severities
    /// only), `logs` when the lines were counted.
    pub source: String,
}

/// The most steps a count holds.
pub const MAX_STEPS: u64 = 1000;

/// The step for `window`: `step_secs`, or about 60 steps (whole seconds; whole minutes from
/// a one-hour window up, so the rollup answers). A step that would give more than
/// [`MAX_STEPS`] is widened to the smallest multiple of itself that gives at most that many
/// (the answer's `step_ns` says which): a finer count than that is never read, and a
/// multiple keeps whole minutes whole.
pub fn step_for(window: Window, step_secs: Option<u64>) -> Result<u64, ApiError> {
    const SECOND: u64 = 1_000_000_000;
    let span = window.to_ns - window.from_ns;
    let step = match step_secs {
        Some(0) => return Err(ApiError::bad("step_secs", "must be at least 1")),
        Some(s) => s.saturating_mul(SECOND),
        None if span >= HOUR_NS => span.div_ceil(60).div_ceil(60 * SECOND) * 60 * SECOND,
        None => span.div_ceil(60).div_ceil(SECOND) * SECOND,
    };
    // Steps align the window to whole steps, so a step longer than the window would widen
    // the read past the window's bound: it is the window's length instead (whole minutes
    // when the step was, so the rollup still answers).
    let unit = if step.is_multiple_of(60 * SECOND) { 60 * SECOND } else { SECOND };
    let step = step.min(span.div_ceil(unit) * unit);
    Ok(step * span.div_ceil(MAX_STEPS).div_ceil(step).max(1))
}

#[utoipa::path(get, path = "/api/v1/logs/counts", tag = "logs", params(CountsParams),
    responses((status = 200, body = LogCounts), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn counts(State(state): State<AppState>, Query(p): Query<CountsParams>) -> Result<Json<LogCounts>, ApiError> {
    let window = params::window(p.from, p.to, state.now(), WINDOW)?;
    let step_ns = step_for(window, p.step_secs)?;
    let query = log_query(p.q, p.service, p.template_id)?;
    let from_ns = window.from_ns - window.from_ns % step_ns;
    let to_ns = window.to_ns.div_ceil(step_ns).saturating_mul(step_ns);
    let aligned = Window { from_ns, to_ns };
    let rows = state.run(logs::counts(&state.store, aligned, &query, step_ns)).await?;
    let mut steps: Vec<CountStep> = (from_ns..to_ns)
        .step_by(step_ns as usize)
        .map(|start_ns| CountStep { start_ns, counts: SeverityBands::default() })
        .collect();
    for r in rows {
        if let Some(step) = r.start_ns.checked_sub(from_ns).and_then(|d| steps.get_mut((d / step_ns) as usize)) {
            step.counts.add(r.severity_number, r.count);
        }
    }
    let rollup = logs::counted_by_rollup(&query) && step_ns.is_multiple_of(60_000_000_000);
    Ok(Json(LogCounts { from_ns, to_ns, step_ns, steps, source: if rollup { "rollup" } else { "logs" }.into() }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ContextParams {
    /// The line's service and time (Unix ns), as the search returned them: with the id they
    /// find the line by the key of the time-ordered table.
    #[param(max_length = 1024)]
    pub service: String,
    pub time_ns: u64,
    /// Lines each side, 1 to 1000 (default 20).
    #[param(minimum = 1, maximum = 1000)]
    pub lines: Option<u64>,
}

/// A line and the lines around it from the same service and instance.
#[derive(Debug, Serialize, ToSchema)]
pub struct LogContext {
    pub line: Log,
    /// The resource attribute (`service.instance.id`, else `host.name`) the other lines
    /// share with this one; absent when it has neither: then they are the service's.
    pub instance: Option<InstanceKey>,
    /// Oldest first, ending just before the line (within 15 minutes of it).
    pub before: Vec<Log>,
    /// Oldest first, starting just after it (within 15 minutes).
    pub after: Vec<Log>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceKey {
    pub key: String,
    pub value: String,
}

#[utoipa::path(get, path = "/api/v1/logs/{log_id}/context", tag = "logs",
    params(("log_id" = String, Path, description = "16 hex digits", pattern = "^[0-9a-fA-F]{1,16}$"), ContextParams),
    responses((status = 200, body = LogContext), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn context(
    State(state): State<AppState>,
    Path(log_id): Path<String>,
    Query(p): Query<ContextParams>,
) -> Result<Json<LogContext>, ApiError> {
    let log_id = params::hex_id("log_id", &log_id)?;
    let service = params::text("service", Some(p.service))?.unwrap_or_default();
    let lines = match p.lines.unwrap_or(20) {
        n @ 1..=1000 => n,
        n => return Err(ApiError::bad("lines", format!("must be 1 to 1000, is {n}"))),
    };
    let found = state.run(logs::context(&state.store, &service, p.time_ns, log_id, lines)).await?;
    let Some(c) = found else {
        return Err(ApiError::not_found(format!("log {} of {service} at {}", format_id(log_id), p.time_ns)));
    };
    let show = |rows: &[crate::store::LogRow]| rows.iter().map(|r| Log::from_row(r, None)).collect::<Vec<_>>();
    Ok(Json(LogContext {
        line: Log::from_row(&c.line, None),
        instance: c.instance.map(|(key, value)| InstanceKey { key, value }),
        before: show(&c.before),
        after: show(&c.after),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_step_gives_about_sixty_whole_minutes_or_seconds() {
        let w = |span: u64| Window { from_ns: 1_000 * HOUR_NS, to_ns: 1_000 * HOUR_NS + span };
        assert_eq!(step_for(w(HOUR_NS), None).unwrap(), 60_000_000_000);
        assert_eq!(step_for(w(DAY_NS), None).unwrap(), 24 * 60_000_000_000);
        assert_eq!(step_for(w(15 * 60_000_000_000), None).unwrap(), 15_000_000_000);
        assert!(step_for(w(HOUR_NS), Some(0)).is_err());
        // Too fine for the window: widened to a multiple of itself, at most 1000 steps.
        assert_eq!(step_for(w(DAY_NS), Some(1)).unwrap(), 87_000_000_000);
        assert_eq!(step_for(w(7 * DAY_NS), Some(60)).unwrap(), 11 * 60_000_000_000);
        assert_eq!(step_for(w(HOUR_NS), Some(u64::MAX)).unwrap(), HOUR_NS, "a step longer than the window");
        assert_eq!(step_for(w(HOUR_NS + 1), Some(7200)).unwrap(), HOUR_NS + 60_000_000_000, "whole minutes");
        for (span, secs) in [(DAY_NS, 1), (7 * DAY_NS, 7), (HOUR_NS, 3)] {
            let step = step_for(w(span), Some(secs)).unwrap();
            assert!(span.div_ceil(step) <= MAX_STEPS && step.is_multiple_of(secs * 1_000_000_000), "{span} {secs}");
        }
    }

    #[test]
    fn bands_are_the_otlp_severity_ranges() {
        let mut b = SeverityBands::default();
        for n in [0, 4, 5, 12, 13, 17, 20, 21, 24] {
            b.add(n, 1);
        }
        assert_eq!((b.unspecified, b.trace, b.debug, b.info, b.warn, b.error, b.fatal), (1, 1, 1, 1, 1, 2, 2));
        assert_eq!(b.total(), 9);
    }

    #[test]
    fn a_query_that_cannot_be_read_is_a_400_that_says_where() {
        let e = log_query(Some("ok \"open".into()), None, None).unwrap_err();
        assert_eq!(e.to_string(), "parameter `q`: at character 4: this quote is never closed");
    }
}
