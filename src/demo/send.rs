//! Sends the scenario to ingest over OTLP/HTTP (protobuf): the backdated history at once,
//! then each second when it is over, until the shutdown. A refused request is retried a few
//! times (ingest answers 503 while it starts or sheds load), then counted and skipped: a
//! demo that loses a second goes on.

use std::time::Duration;

use prost::Message;

use super::scenario::{Scenario, Second};
use crate::daemon::Shutdown;
use crate::store::now_ns;
use crate::time::SECOND_NS;

/// What was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub seconds: u64,
    pub spans: u64,
    pub logs: u64,
    /// Requests given up on after their retries.
    pub failed_requests: u64,
}

const ATTEMPTS: u32 = 5;

/// Runs `scenario` against the OTLP/HTTP endpoint `base` (`http://host:port`) from scenario
/// time 0 = `origin` (nanoseconds), telling `milestone` each milestone as it is reached.
pub async fn run(
    mut scenario: Scenario,
    base: &str,
    origin: u64,
    shutdown: Shutdown,
    milestone: impl Fn(String),
) -> anyhow::Result<Sent> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let mut milestones = scenario.timeline.milestones().into_iter().peekable();
    let mut sent = Sent::default();
    for t in 0.. {
        // A second is sent once it is over, so no record is stamped in the future.
        let due = origin + (t + 1) * SECOND_NS;
        let now = now_ns();
        if due > now && !shutdown.sleep(Duration::from_nanos(due - now)).await {
            break;
        }
        if shutdown.is_triggered() {
            break;
        }
        while let Some((_, text)) = milestones.next_if(|(at, _)| *at <= t) {
            milestone(text);
        }
        let second: Second = scenario.second(t, origin + t * SECOND_NS);
        for (path, body) in [("/v1/traces", second.traces.encode_to_vec()), ("/v1/logs", second.logs.encode_to_vec())] {
            if !post(&http, &format!("{base}{path}"), body, &shutdown).await {
                sent.failed_requests += 1;
            }
        }
        sent.seconds += 1;
        sent.spans += second.spans as u64;
        sent.logs += second.log_records as u64;
    }
    Ok(sent)
}

/// One request, retried on a refusal or a connection error; `false` when it never got
/// through.
async fn post(http: &reqwest::Client, url: &str, body: Vec<u8>, shutdown: &Shutdown) -> bool {
    for attempt in 1..=ATTEMPTS {
        let outcome = http.post(url).header("content-type", "application/x-protobuf").body(body.clone()).send().await;
        let why = match outcome {
            Ok(r) if r.status().is_success() => return true,
            Ok(r) => format!("HTTP {}", r.status().as_u16()),
            Err(e) => format!("{e}"),
        };
        tracing::warn!(url, attempt, why, "the demo's request was not accepted; retrying");
        if !shutdown.sleep(Duration::from_millis(250 * u64::from(attempt))).await {
            return false;
        }
    }
    false
}
