//! Delivering one alert to one target: the HTTP attempt, the retry ladder, the breaker and
//! the `notifier_deliveries` row written after every attempt.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};

use super::backoff::{backoff_wait, classify_status, parse_retry_after, AttemptOutcome, StatusClass};
use super::breaker::{Breaker, Event, Mode};
use super::metrics::{AttemptLabel, DeliveryResult, NotifierMetrics};
use super::payload::{self, Format, Signer};
use super::persist::write_row;
use crate::config::{NotifierConfig, TargetConfig};
use crate::daemon::Shutdown;
use crate::store::deliveries::Status;
use crate::store::{now_ns, DeliveryRow, Store};
use crate::wire::alert::{format_id, Alert, AlertKind, AlertState};

/// A configured webhook, ready to send to.
pub struct Target {
    pub name: String,
    url: reqwest::Url,
    headers: HeaderMap,
    /// Empty: every kind.
    kinds: Vec<AlertKind>,
    /// Globs of the services sent here; empty: every service.
    services: Vec<String>,
    format: Format,
    /// Signs every request (Standard Webhooks) when the target has secrets.
    signer: Option<Signer>,
    /// PagerDuty's routing key (empty for other formats).
    routing_key: String,
    /// The app's public address, for links in the payload (may be empty).
    public_url: String,
    /// Whether the target is told when an alert it was sent is resolved.
    pub send_resolved: bool,
    breaker: Mutex<Breaker>,
}

impl Target {
    pub fn new(config: &TargetConfig, breaker_cooldown: Duration, public_url: &str) -> anyhow::Result<Target> {
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
        let format = Format::parse(&config.format).ok_or_else(|| {
            anyhow::anyhow!("{at}: format `{}` is not one of {}", config.format, Format::NAMES.join(", "))
        })?;
        let signer = read_secret(&at, "secrets", &config.secrets_file, &config.secrets_env)?
            .map(|secrets| Signer::parse(&secrets).map_err(|e| anyhow::anyhow!("{at}: signing secrets: {e}")))
            .transpose()?;
        let routing_key =
            read_secret(&at, "routing_key", &config.routing_key_file, &config.routing_key_env)?.unwrap_or_default();
        if format == Format::PagerDuty && routing_key.trim().is_empty() {
            anyhow::bail!("{at}: a pagerduty target needs a routing key (routing_key_file or routing_key_env)");
        }
        Ok(Target {
            name: config.name.clone(),
            url,
            headers,
            kinds,
            services: config.services.clone(),
            format,
            signer,
            routing_key: routing_key.trim().to_string(),
            public_url: public_url.to_string(),
            send_resolved: config.send_resolved,
            breaker: Mutex::new(Breaker::new(breaker_cooldown)),
        })
    }

    /// Whether this target takes the alert: its kind and its service pass the filters.
    pub fn accepts(&self, alert: &Alert) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&alert.kind))
            && (self.services.is_empty() || self.services.iter().any(|glob| glob_matches(glob, &alert.service)))
    }

    /// The body this target is sent for `alert`, in its format.
    pub fn body(&self, alert: &Alert) -> Vec<u8> {
        payload::render(self.format, alert, &self.public_url, &self.routing_key)
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

/// A secret from the file or the environment variable a target names (`None` when it
/// names neither). Errors name the file or the variable, never the secret.
fn read_secret(at: &str, what: &str, file: &str, env: &str) -> anyhow::Result<Option<String>> {
    if !file.is_empty() {
        let text =
            std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{at}: cannot read {what}_file {file}: {e}"))?;
        return Ok(Some(text));
    }
    if !env.is_empty() {
        let text = std::env::var(env)
            .map_err(|_| anyhow::anyhow!("{at}: {what}_env names ${env}, which is not set (or not UTF-8)"))?;
        return Ok(Some(text));
    }
    Ok(None)
}

/// Whether `text` matches `glob`: `*` any run of characters (none included), `?` exactly
/// one, anything else itself.
fn glob_matches(glob: &str, text: &str) -> bool {
    let (glob, text): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    // The classic two-pointer match: on a mismatch, let the last `*` take one more char.
    let (mut g, mut t, mut star, mut star_t) = (0, 0, None, 0);
    while t < text.len() {
        if g < glob.len() && (glob[g] == '?' || glob[g] == text[t]) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == '*' {
            star = Some(g);
            star_t = t;
            g += 1;
        } else if let Some(s) = star {
            g = s + 1;
            star_t += 1;
            t = star_t;
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == '*')
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
    /// Whether something that happened at `at_ns` is past `max_age` at `now_ns`: a stale
    /// alert, resolved notice or manual retry is not sent.
    pub fn too_old(&self, at_ns: u64, now_ns: u64) -> bool {
        u128::from(now_ns.saturating_sub(at_ns)) > self.max_age.as_nanos()
    }

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
pub struct DeliveryContext {
    pub store: Store,
    pub http: reqwest::Client,
    pub settings: Settings,
    pub metrics: NotifierMetrics,
    pub shutdown: Shutdown,
}

impl DeliveryContext {
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

/// One HTTP POST of `body` to `target`, signed when the target has secrets: every attempt
/// with its own timestamp, every attempt of one message with the same `webhook-id`.
pub async fn attempt(
    http: &reqwest::Client,
    target: &Target,
    message_id: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> AttemptOutcome {
    let mut headers = target.headers.clone();
    if let Some(signer) = &target.signer {
        let timestamp = crate::time::now_ns() / crate::time::SECOND_NS;
        let signature = signer.signature(message_id, timestamp, &body);
        for (name, value) in [
            ("webhook-id", message_id.to_string()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
    }
    let response = http.post(target.url.clone()).headers(headers).body(body).send().await;
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

/// Delivers one alert to one target under the delivery rules (docs/design.md#notifier), in
/// the alert's state: a firing alert and its resolved notice are two deliveries, each once
/// per target, each with its own row. `existing` is the pair's latest row in that state, if
/// any; `read_at` is when the record was read (for the latency histogram).
pub async fn deliver(
    ctx: Arc<DeliveryContext>,
    target: Arc<Target>,
    alert: Arc<Alert>,
    existing: Option<DeliveryRow>,
    read_at: Instant,
) -> TargetEnd {
    let alert_id = alert.alert_id;
    let id = format_id(alert_id);
    let body = target.body(&alert);
    let state = alert.state;
    let message_id = payload::message_id(alert_id, &target.name, state.as_str());
    let name = target.name.as_str();
    let s = &ctx.settings;
    let mut row = match existing {
        Some(row) if Status::parse(&row.status).is_some_and(Status::is_final) => {
            ctx.metrics.duplicate(&id, name, &row.status);
            return TargetEnd::Final;
        }
        // Pending: carry on from its attempt count (a restart, or a rebalance). Silenced, and
        // no silence holds it back any more: delivered now, from its first attempt.
        Some(row) => DeliveryRow { silence_id: 0, ..row },
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
        persist(&ctx, state, &mut row).await;
        finish(&row, DeliveryResult::failed);
        return TargetEnd::Final;
    }
    loop {
        if ctx.shutdown.is_triggered() {
            return TargetEnd::Interrupted;
        }
        row.attempts += 1;
        // Not raced against shutdown: an attempt in flight finishes (within the timeout).
        let outcome = attempt(&ctx.http, &target, &message_id, body.clone(), s.timeout).await;
        match outcome {
            AttemptOutcome::Delivered => {
                ctx.metrics.attempt(name, AttemptLabel::success);
                row.status = Status::Delivered.as_str().into();
                target.record(Event::Delivered);
                persist(&ctx, state, &mut row).await;
                finish(&row, DeliveryResult::delivered);
                return TargetEnd::Final;
            }
            AttemptOutcome::Permanent { error } => {
                ctx.metrics.attempt(name, AttemptLabel::permanent);
                row.status = Status::Failed.as_str().into();
                row.last_error = error;
                target.record(Event::Permanent);
                persist(&ctx, state, &mut row).await;
                finish(&row, DeliveryResult::failed);
                return TargetEnd::Final;
            }
            AttemptOutcome::Retryable { error, retry_after } => {
                ctx.metrics.attempt(name, AttemptLabel::retryable);
                row.last_error = error;
                if mode == Mode::SingleAttempt || row.attempts >= s.max_attempts {
                    row.status = Status::Failed.as_str().into();
                    target.record(Event::GaveUpRetryable);
                    persist(&ctx, state, &mut row).await;
                    finish(&row, DeliveryResult::failed);
                    return TargetEnd::Final;
                }
                row.status = Status::Pending.as_str().into();
                if !persist(&ctx, state, &mut row).await {
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

/// A pair an operator's silence holds back: nothing is sent, and the pair's row says
/// `silenced` with the silence that matched. A pair already silenced by that silence is
/// left as it is (a republished copy writes nothing).
pub async fn hold_back(
    ctx: Arc<DeliveryContext>,
    target: Arc<Target>,
    alert_id: u64,
    existing: Option<DeliveryRow>,
    silence_id: u64,
) -> TargetEnd {
    let id = format_id(alert_id);
    let mut row = match existing {
        Some(row) if row.silence_id == silence_id => {
            ctx.metrics.silenced(&id, &target.name, &format_id(silence_id));
            return TargetEnd::Final;
        }
        Some(row) => row,
        None => DeliveryRow { alert_id, target: target.name.clone(), created_ns: now_ns(), ..Default::default() },
    };
    row.status = Status::Silenced.as_str().into();
    row.silence_id = silence_id;
    if !persist(&ctx, AlertState::Firing, &mut row).await {
        return TargetEnd::Interrupted;
    }
    ctx.metrics.silenced(&id, &target.name, &format_id(silence_id));
    TargetEnd::Final
}

/// A manual retry read when the later of the alert's `last_at` and the retry is older than
/// `max_age_secs` (the notifier was down, or behind, for longer): nothing is sent, and the
/// pair is failed again, saying why, so the operator can ask once more.
pub async fn expire_manual_retry(
    ctx: Arc<DeliveryContext>,
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
    if !persist(&ctx, AlertState::Firing, &mut row).await {
        return TargetEnd::Interrupted;
    }
    ctx.metrics.manual_retry_expired(&format_id(row.alert_id), &row, read_at.elapsed());
    ctx.metrics.set_breaker(&target.name, target.breaker_open());
    TargetEnd::Final
}

/// Writes the row's next version. While running, a write that keeps failing is retried
/// until it succeeds (the outcome of an attempt must not be forgotten); once shutdown has
/// begun, one more round (5 s + 10 s) is allowed, then the row is given up and logged.
async fn persist(ctx: &DeliveryContext, state: AlertState, row: &mut DeliveryRow) -> bool {
    row.updated_ns = now_ns().max(row.updated_ns + 1);
    loop {
        match write_row(&ctx.store, state, row).await {
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

#[cfg(test)]
mod tests {
    use super::{glob_matches, read_secret};

    #[test]
    fn secrets_come_from_a_file_or_a_variable_and_errors_never_show_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "whsec_c2VjcmV0\n").unwrap();
        let path = file.display().to_string();
        assert_eq!(read_secret("t", "secrets", &path, "").unwrap().as_deref(), Some("whsec_c2VjcmV0\n"));
        // PATH is set wherever the tests run.
        assert_eq!(read_secret("t", "secrets", "", "PATH").unwrap(), std::env::var("PATH").ok());
        assert_eq!(read_secret("t", "secrets", "", "").unwrap(), None);
        let missing = read_secret("t", "secrets", "", "TAYGA_TEST_NO_SUCH_SECRET_VARIABLE").unwrap_err().to_string();
        assert!(missing.contains("$TAYGA_TEST_NO_SUCH_SECRET_VARIABLE"), "{missing}");
        let unreadable = read_secret("t", "secrets", "/nonexistent/secret", "").unwrap_err().to_string();
        assert!(unreadable.contains("/nonexistent/secret"), "{unreadable}");
    }

    #[test]
    fn service_globs() {
        for (glob, text, matches) in [
            ("checkout", "checkout", true),
            ("checkout", "checkout-v2", false),
            ("check*", "checkout", true),
            ("*-prod", "payments-prod", true),
            ("*-prod", "payments-staging", false),
            ("pay?ent", "payment", true),
            ("*", "", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("*é*", "café", true),
        ] {
            assert_eq!(glob_matches(glob, text), matches, "{glob} ~ {text}");
        }
    }
}
