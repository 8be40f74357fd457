//! How a failed command is told to the operator: one line, each cause once, URLs redacted,
//! and what to do next when the cause is one an operator can fix (a server that is not
//! running, a schema that was never created, a wrong password).

use crate::bus::topics::TopicError;
use crate::store::StoreError;

use super::reach::Unreachable;

pub const BROKER_HINT: &str = "is the broker running? set TAYGA_KAFKA_BROKERS or [kafka] brokers";
pub const CLICKHOUSE_HINT: &str = "is ClickHouse running? set TAYGA_CLICKHOUSE_URL or [clickhouse] url";
pub const MIGRATE_HINT: &str = "run `tayga migrate` to create the database and tables";
pub const PASSWORD_HINT: &str =
    "check [clickhouse] user and password (TAYGA_CLICKHOUSE_USER, TAYGA_CLICKHOUSE_PASSWORD)";

/// The error as one line: the causes joined by `: `, a cause already contained in the text
/// so far left out (thiserror messages often embed their source, and the clickhouse crate's
/// and librdkafka's chains repeat themselves), then the hint, if any.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = flatten(&cause.to_string());
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    if let Some(hint) = hint(err, &line) {
        if !line.contains(hint) {
            line.push_str("; ");
            line.push_str(hint);
        }
    }
    crate::config::redact::text(&line, &[])
}

/// A message on one line, with runs of whitespace (ClickHouse's trailing newline, stack
/// text) folded into one space, and ClickHouse's `e.what()` tail dropped.
fn flatten(text: &str) -> String {
    let text = text.split(", e.what() = ").next().unwrap_or(text);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hint(err: &anyhow::Error, line: &str) -> Option<&'static str> {
    for cause in err.chain() {
        if let Some(u) = cause.downcast_ref::<Unreachable>() {
            return Some(u.hint());
        }
        if let Some(TopicError::Unreachable { .. }) = cause.downcast_ref::<TopicError>() {
            return Some(BROKER_HINT);
        }
    }
    // Server error codes: 81 unknown database, 60 unknown table; 192 unknown user,
    // 193 wrong password, 516 authentication failed (current servers).
    if ["Code: 81,", "Code: 81.", "Code: 60,", "Code: 60."].iter().any(|c| line.contains(c)) {
        return Some(MIGRATE_HINT);
    }
    if ["Code: 192", "Code: 193", "Code: 516"].iter().any(|c| line.contains(c)) {
        return Some(PASSWORD_HINT);
    }
    for cause in err.chain() {
        match cause.downcast_ref::<StoreError>() {
            Some(StoreError::Unreachable { .. }) => return Some(CLICKHOUSE_HINT),
            Some(StoreError::Refused { .. }) => return Some(PASSWORD_HINT),
            Some(StoreError::Untrusted { .. }) => return Some(crate::store::UNTRUSTED_ADVICE),
            _ => {}
        }
    }
    None
}

/// True when the command failed only because its reader went away (`tayga … | head`): that
/// ends the command quietly with exit 0, as ripgrep does.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer failed: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner broke")]
    struct Inner;

    #[test]
    fn a_cause_is_said_once() {
        let err = anyhow::Error::new(Outer(Inner)).context("reading topics");
        assert_eq!(one_line(&err), "reading topics: outer failed: inner broke");
    }

    #[test]
    fn server_codes_get_their_hint_and_one_line() {
        let err = anyhow::anyhow!(
            "bad response: Code: 81, e.displayText() = DB::Exception: Database nope doesn't exist, e.what() = DB::Exception\n"
        )
        .context("reading alerts of database `nope`");
        let line = one_line(&err);
        assert!(!line.contains('\n') && !line.contains("e.what()"), "{line}");
        assert!(line.ends_with(MIGRATE_HINT), "{line}");
    }

    #[test]
    fn refused_credentials_are_one_line_that_says_which_without_the_password() {
        let err = anyhow::Error::new(StoreError::Refused {
            url: "https://127.0.0.1:18443".into(),
            user: "tayga".into(),
            code: 193,
        })
        .context("migrating the ClickHouse schema");
        assert_eq!(
            one_line(&err),
            format!(
                "migrating the ClickHouse schema: ClickHouse at https://127.0.0.1:18443 refused the user `tayga`: \
                 wrong password (code 193); {PASSWORD_HINT}"
            )
        );
    }

    #[test]
    fn urls_in_errors_are_redacted() {
        let err = anyhow::anyhow!("ClickHouse at http://u:hunter2@127.0.0.1:1 did not answer");
        assert!(!one_line(&err).contains("hunter2"));
    }

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        let err = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&err));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
