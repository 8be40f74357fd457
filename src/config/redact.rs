//! The one way a URL is shown or logged: user info and query string hidden, and for webhook
//! targets the path after the host too (Slack-style hooks carry their secret in the path).
//! `config show`, the commands' error lines, the notifier's logs and `last_error`, and
//! `deliveries show` all go through these functions.

/// What replaces a hidden part.
pub const HIDDEN: &str = "<redacted>";

/// `scheme://user:pass@host:port/path?query#frag` → `scheme://<redacted>@host:port/path?<redacted>`.
/// Text that is not a URL is returned as it is.
pub fn url(text: &str) -> String {
    redact(text, false)
}

/// As [`url`], and the path after the host is hidden as well: `https://hooks.example/<redacted>`.
pub fn target_url(text: &str) -> String {
    redact(text, true)
}

fn redact(text: &str, hide_path: bool) -> String {
    let Some(scheme_end) = text.find("://") else { return text.to_string() };
    let (scheme, rest) = (&text[..scheme_end], &text[scheme_end + 3..]);
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
        return text.to_string();
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("{HIDDEN}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (path_part, query) = match tail.find(['?', '#']) {
        Some(q) => (&tail[..q], Some(&tail[q..])),
        None => (tail, None),
    };
    let path = if hide_path && !path_part.is_empty() && path_part != "/" {
        format!("/{HIDDEN}")
    } else {
        path_part.to_string()
    };
    let query = match query {
        Some(q) if q.starts_with('?') && q.len() > 1 => format!("?{HIDDEN}"),
        _ => String::new(),
    };
    format!("{scheme}://{host}{path}{query}")
}

/// Free text (an error message, a log line) with every URL in it passed through [`url`], or
/// through [`target_url`] when it points at the origin (scheme, host, port) of one of
/// `targets` (webhook URLs): a client library may print a target's URL normalised or without
/// its user info, so the whole URL is not what is matched.
pub fn text(message: &str, targets: &[&str]) -> String {
    let origins: Vec<String> = targets.iter().filter_map(|t| origin(t)).collect();
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("://") {
        let start = rest[..at].rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))).map_or(0, |i| i + 1);
        let end =
            rest[at..].find(|c: char| c.is_whitespace() || "()<>\"'`,;".contains(c)).map_or(rest.len(), |i| at + i);
        let found = &rest[start..end];
        out.push_str(&rest[..start]);
        let is_target = origin(found).is_some_and(|o| origins.contains(&o));
        out.push_str(&if is_target { target_url(found) } else { url(found) });
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `scheme://host:port` of a URL, the port made explicit.
fn origin(text: &str) -> Option<String> {
    let u = reqwest::Url::parse(text).ok()?;
    Some(format!("{}://{}:{}", u.scheme(), u.host_str()?, u.port_or_known_default()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_and_query_are_hidden_the_path_is_kept() {
        assert_eq!(url("http://u:pw@ch:8123/x?password=pw"), "http://<redacted>@ch:8123/x?<redacted>");
        assert_eq!(url("http://127.0.0.1:8123"), "http://127.0.0.1:8123");
        assert_eq!(url("not a url"), "not a url");
    }

    #[test]
    fn a_target_hides_its_path_too() {
        assert_eq!(
            target_url("https://hooks.slack.com/services/T000/SECRET?token=abc"),
            "https://hooks.slack.com/<redacted>?<redacted>"
        );
        assert_eq!(target_url("http://127.0.0.1:9/"), "http://127.0.0.1:9/");
    }

    #[test]
    fn urls_in_text_are_redacted_and_targets_lose_their_path() {
        // reqwest prints a URL without its user info: the origin still marks it a target.
        let printed = "https://hooks.example/services/T000/SECRET?token=abc";
        let target = "https://u:pw@hooks.example/services/T000/SECRET?token=abc";
        let msg = format!("error sending request for url ({printed}): connection refused; also http://a:b@h/p");
        let shown = text(&msg, &[target]);
        assert!(!shown.contains("SECRET") && !shown.contains("abc") && !shown.contains("a:b"), "{shown}");
        assert!(shown.contains("https://hooks.example/<redacted>?<redacted>"), "{shown}");
        assert!(shown.contains("http://<redacted>@h/p"), "{shown}");
        assert_eq!(text(&shown, &[target]), shown, "redacting twice changes nothing");
    }
}
