//! Delivering one alert to one target: the HTTP attempt, the retry ladder, the breaker and
//! the `notifier_deliveries` row written after every attempt.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};

use super::backoff::{backoff_wait, classify_status, parse_retry_after, AttemptOutcome, StatusClass};
use super::breaker::{Breaker, Event, Mode};
use super::metrics::{AttemptLabel, DeliveryResult, NotifierMetrics};
use super::store::write_row;
use crate::config::{NotifierConfig, TargetConfig};
use crate::daemon::Shutdown;
use crate::store::deliveries::Status;
use crate::store::{now_ns, DeliveryRow, Store};
use crate::wire::alert::{format_id, AlertKind};

/// A configured webhook, ready to send to.
pub struct Target {
    pub name: String,
    url: reqwest::Url,
    headers: HeaderMap,
    /// Empty: every kind.
    kinds: Vec<AlertKind>,
    breaker: Mutex<Breaker>,
}

impl Target {
    pub fn new(config: &TargetConfig, breaker_cooldown: Duration) -> anyhow::Result<Target> {
        let at = format!("notifier target `{}`", config.name);
        let url = reqwest::Url::parse(&config.url)
            .map_err(|e| anyhow::anyhow!("{at}: url `{}`: {e}", crate::config::redact::target_url(&config.url)))?;
        let mut headers = HeaderMap::new();
        headers.insert(USER_AGENT, HeaderValue::from_static(concat!("tayga-notifier/", env!("CARGO_PKG_VERSION"))));
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| anyhow::anyhow!("{at}: `{name}` is not a valid header name"))?;
            // The value may be a secret: never print it.
            let value = HeaderValue::from_str(value)
                .map_err(|_| anyhow::anyhow!("{at}: the value of header `{name}` is not a valid header value"))?;
            headers.insert(name, value);
        }
        // The payload is JSON whatever the configured headers say.
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let kinds = config
            .kinds
            .iter()
            .map(|k| k.parse::<AlertKind>().map_err(|e| anyhow::anyhow!("{at}: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Target {
            name: config.name.clone(),
            url,
            headers,
            kinds,
            breaker: Mutex::new(Breaker::new(breaker_cooldown)),
        })
    }

    pub fn accepts(&self, kind: AlertKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }

    /// Whether the breaker is open now (an elapsed cooldown closes it).
    pub fn breaker_open(&self) -> bool {
        self.breaker.lock().expect("breaker lock").is_open(Instant::now())
    }

    fn mode(&self) -> Mode {
        self.breaker.lock().expect("breaker lock").mode(Instant::now())
    }

    fn record(&self, event: Event) {
        self.breaker.lock().expect("breaker lock").record(event, Instant::now());
    }
}

/// The notifier's settings, in the units the code uses.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub max_age: Duration,
    pub breaker_cooldown: Duration,
}

impl Settings {
    pub fn from_config(c: &NotifierConfig) -> Settings {
        Settings {
            max_attempts: c.max_attempts.max(1),
            timeout: Duration::from_secs(c.timeout_secs.max(1)),
            backoff_base: Duration::from_secs(c.backoff_base_secs),
            backoff_cap: Duration::from_secs(c.backoff_cap_secs),
            max_age: Duration::from_secs(c.max_age_secs),
            breaker_cooldown: Duration::from_secs(c.breaker_cooldown_secs),
        }
    }
}

/// What every delivery task shares.
pub struct Ctx {
    pub store: Store,
    pub http: reqwest::Client,
    pub settings: Settings,
    pub metrics: NotifierMetrics,
    pub shutdown: Shutdown,
}

impl Ctx {
    pub fn http_client(settings: &Settings) -> anyhow::Result<reqwest::Client> {
        Ok(reqwest::Client::builder()
            // docs/design.md#notifier-retries: a 3xx is a permanent failure, so redirects are never followed.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .build()?)
    }
}

/// How a target's part of a record ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetEnd {
    /// Delivered or failed (or already so): the record is done for this target.
    Final,
    /// Stopped by shutdown with the pair still pending: the record must be read again.
    Interrupted,
}

/// One HTTP POST of `body` to `target`.
pub async fn attempt(http: &reqwest::Client, target: &Target, body: Vec<u8>, timeout: Duration) -> AttemptOutcome {
    let response = http.post(target.url.clone()).headers(target.headers.clone()).body(body).send().await;
    match response {
        Ok(response) => {
            let status = response.status();
            match classify_status(status.as_u16()) {
                StatusClass::Delivered => AttemptOutcome::Delivered,
                StatusClass::Retryable => AttemptOutcome::Retryable {
                    error: format!("HTTP {status}"),
                    retry_after: response
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now())),
                },
                StatusClass::Permanent => AttemptOutcome::Permanent { error: format!("HTTP {status}") },
            }
        }
        Err(e) if e.is_timeout() => {
            AttemptOutcome::Retryable { error: format!("timed out after {} s", timeout.as_secs()), retry_after: None }
        }
        // reqwest names the URL in its errors; a target's URL may carry its secret (path, query).
        Err(e) => AttemptOutcome::Retryable {
            error: crate::config::redact::text(&format!("network error: {}", error_chain(&e)), &[target.url.as_str()]),
            retry_after: None,
        },
    }
}

/// An error and its sources on one line, without repeating a source already in the text.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Delivers one alert to one target under the delivery rules (docs/design.md#notifier). `existing` is the pair's latest
/// row, if any; `read_at` is when the record was read (for the latency histogram).
pub async fn deliver(
    ctx: Arc<Ctx>,
    target: Arc<Target>,
    alert_id: u64,
    existing: Option<DeliveryRow>,
    body: Arc<Vec<u8>>,
    read_at: Instant,
) -> TargetEnd {
    let id = format_id(alert_id);
    let name = target.name.as_str();
    let s = &ctx.settings;
    let mut row = match existing {
        Some(row) if Status::parse(&row.status).is_some_and(Status::is_final) => {
            ctx.metrics.duplicate(&id, name, &row.status);
            return TargetEnd::Final;
        }
        // Pending: carry on from its attempt count (a restart, or a rebalance).
        Some(row) => row,
        None => DeliveryRow {
            alert_id,
            target: target.name.clone(),
            status: Status::Pending.as_str().into(),
            attempts: 0,
            last_error: String::new(),
            created_ns: now_ns(),
            ..Default::default()
        },
    };
    let mode = target.mode();
    if mode == Mode::SingleAttempt {
        tracing::info!(alert_id = %id, target = name, "breaker open: one attempt, no retries");
    }
    let finish = |row: &DeliveryRow, result: DeliveryResult| {
        ctx.metrics.delivery_finished(&id, row, result, read_at.elapsed());
        ctx.metrics.set_breaker(name, target.breaker_open());
    };
    if row.attempts >= s.max_attempts {
        // Left pending at max_attempts (max_attempts lowered since): nothing more to try.
        row.status = Status::Failed.as_str().into();
        persist(&ctx, &mut row).await;
        finish(&row, DeliveryResult::failed);
        return TargetEnd::Final;
    }
    loop {
        if ctx.shutdown.is_triggered() {
            return TargetEnd::Interrupted;
        }
        row.attempts += 1;
        // Not raced against shutdown: an attempt in flight finishes (within the timeout).
        let outcome = attempt(&ctx.http, &target, body.as_ref().clone(), s.timeout).await;
        match outcome {
            AttemptOutcome::Delivered => {
                ctx.metrics.attempt(name, AttemptLabel::success);
                row.status = Status::Delivered.as_str().into();
                target.record(Event::Delivered);
                persist(&ctx, &mut row).await;
                finish(&row, DeliveryResult::delivered);
                return TargetEnd::Final;
            }
            AttemptOutcome::Permanent { error } => {
                ctx.metrics.attempt(name, AttemptLabel::permanent);
                row.status = Status::Failed.as_str().into();
                row.last_error = error;
                target.record(Event::Permanent);
                persist(&ctx, &mut row).await;
                finish(&row, DeliveryResult::failed);
                return TargetEnd::Final;
            }
            AttemptOutcome::Retryable { error, retry_after } => {
                ctx.metrics.attempt(name, AttemptLabel::retryable);
                row.last_error = error;
                if mode == Mode::SingleAttempt || row.attempts >= s.max_attempts {
                    row.status = Status::Failed.as_str().into();
                    target.record(Event::GaveUpRetryable);
                    persist(&ctx, &mut row).await;
                    finish(&row, DeliveryResult::failed);
                    return TargetEnd::Final;
                }
                row.status = Status::Pending.as_str().into();
                if !persist(&ctx, &mut row).await {
                    return TargetEnd::Interrupted;
                }
                let wait = backoff_wait(row.attempts, s.backoff_base, s.backoff_cap, retry_after);
                ctx.metrics.retrying(&id, &row, wait);
                if !ctx.shutdown.sleep(wait).await {
                    return TargetEnd::Interrupted;
                }
            }
        }
    }
}

/// A manual retry read when the later of the alert's `last_at` and the retry is older than
/// `max_age_secs` (the notifier was down, or behind, for longer): nothing is sent, and the
/// pair is failed again, saying why, so the operator can ask once more.
pub async fn expire_manual_retry(
    ctx: Arc<Ctx>,
    target: Arc<Target>,
    mut row: DeliveryRow,
    read_at: Instant,
) -> TargetEnd {
    let age = Duration::from_nanos(now_ns().saturating_sub(row.retried_ns));
    row.status = Status::Failed.as_str().into();
    row.last_error = format!(
        "manual retry not sent: read {} s after it was asked for, beyond max_age_secs ({})",
        age.as_secs(),
        ctx.settings.max_age.as_secs()
    );
    if !persist(&ctx, &mut row).await {
        return TargetEnd::Interrupted;
    }
    ctx.metrics.manual_retry_expired(&format_id(row.alert_id), &row, read_at.elapsed());
    ctx.metrics.set_breaker(&target.name, target.breaker_open());
    TargetEnd::Final
}

/// Writes the row's next version. While running, a write that keeps failing is retried
/// until it succeeds (the outcome of an attempt must not be forgotten); once shutdown has
/// begun, one more round (5 s + 10 s) is allowed, then the row is given up and logged.
async fn persist(ctx: &Ctx, row: &mut DeliveryRow) -> bool {
    row.updated_ns = now_ns().max(row.updated_ns + 1);
    loop {
        match write_row(&ctx.store, row).await {
            Ok(()) => return true,
            Err(e) if ctx.shutdown.is_triggered() => {
                tracing::error!(
                    error = %e, alert_id = %format_id(row.alert_id), target = %row.target, status = %row.status,
                    attempts = row.attempts, "stopping without writing the delivery row: this alert may be sent again"
                );
                return false;
            }
            Err(e) => {
                tracing::warn!(error = %e, alert_id = %format_id(row.alert_id), target = %row.target, "ClickHouse refuses the delivery row; retrying");
                // Shutdown during the pause: one last round, then give up (above).
                ctx.shutdown.sleep(Duration::from_secs(1)).await;
                row.updated_ns = now_ns().max(row.updated_ns + 1);
            }
        }
    }
}
