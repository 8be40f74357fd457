//! Who may send telemetry: the OTLP receivers' tokens (`ingest.auth_tokens`,
//! `ingest.auth_tokens_file`). A request is judged by its header before its body is read,
//! so a client without a token costs ingest nothing; a token bound to services is judged
//! again once the request's resources are known. Tokens are compared in constant time and
//! never logged or echoed.

use std::collections::BTreeSet;

use subtle::ConstantTimeEq as _;

use crate::config::{AuthToken, IngestConfig};

/// The accepted tokens; empty: every request is accepted.
pub struct Auth {
    tokens: Vec<AuthToken>,
    /// Lowercase header name; `authorization` means `Bearer <token>`.
    header: String,
}

/// Why a request was refused. Never carries the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this receiver requires a token: send `{0}`")]
    Missing(String),
    #[error("the token is not accepted")]
    Invalid,
    #[error("the token may not send data of service `{0}`")]
    Service(String),
}

impl Refusal {
    /// The label this refusal is counted under.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing(_) => "missing",
            Refusal::Invalid => "invalid",
            Refusal::Service(_) => "service",
        }
    }
}

/// What an accepted token may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Any,
    Services(BTreeSet<String>),
}

impl Grant {
    /// Whether every one of `services` may be sent; the first that may not, otherwise.
    pub fn allows<'a>(&self, services: impl IntoIterator<Item = &'a str>) -> Result<(), Refusal> {
        match self {
            Grant::Any => Ok(()),
            Grant::Services(allowed) => match services.into_iter().find(|s| !allowed.contains(*s)) {
                Some(service) => Err(Refusal::Service(service.to_string())),
                None => Ok(()),
            },
        }
    }
}

impl Auth {
    /// The configured tokens, those of `auth_tokens_file` included. Fails, naming the
    /// file and line but never a token, when the file cannot be read or a line is not a
    /// token.
    pub fn from_config(config: &IngestConfig) -> anyhow::Result<Auth> {
        let mut tokens = config.auth_tokens.clone();
        if !config.auth_tokens_file.is_empty() {
            let path = &config.auth_tokens_file;
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("ingest.auth_tokens_file: cannot read {path}: {e}"))?;
            tokens.extend(parse_tokens_file(&text).map_err(|line| {
                anyhow::anyhow!("ingest.auth_tokens_file: {path} line {line} is not `TOKEN` or `TOKEN service,…`")
            })?);
        }
        if let Some(i) = tokens.iter().position(|t| t.token().trim().is_empty()) {
            anyhow::bail!("ingest.auth_tokens: entry {} has an empty token", i + 1);
        }
        Ok(Auth { tokens, header: config.auth_header.trim().to_ascii_lowercase() })
    }

    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The header a client must send, as an operator writes it.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// Judges the value of the token header (`None`: absent).
    pub fn check(&self, value: Option<&str>) -> Result<Grant, Refusal> {
        if !self.required() {
            return Ok(Grant::Any);
        }
        let missing = || {
            let how = if self.header == "authorization" { "Authorization: Bearer <token>" } else { &self.header };
            Refusal::Missing(how.to_string())
        };
        let value = value.map(str::trim).filter(|v| !v.is_empty()).ok_or_else(missing)?;
        let presented = if self.header == "authorization" {
            let (scheme, token) = value.split_once(' ').ok_or(Refusal::Invalid)?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Err(Refusal::Invalid);
            }
            token.trim()
        } else {
            value
        };
        // Every token is compared, so the time taken says nothing about which one matched.
        let mut matched = None;
        for token in &self.tokens {
            if bool::from(token.token().as_bytes().ct_eq(presented.as_bytes())) && matched.is_none() {
                matched = Some(token);
            }
        }
        match matched.ok_or(Refusal::Invalid)?.services() {
            None => Ok(Grant::Any),
            Some(services) => Ok(Grant::Services(services.iter().cloned().collect())),
        }
    }
}

/// The tokens of a tokens file, or the number of the first line that is not one.
fn parse_tokens_file(text: &str) -> Result<Vec<AuthToken>, usize> {
    let mut tokens = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (token, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if rest.trim().is_empty() {
            tokens.push(AuthToken::Any(token.to_string()));
            continue;
        }
        let services: Vec<String> =
            rest.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        if services.is_empty() || services.iter().any(|s| s.contains(char::is_whitespace)) {
            return Err(i + 1);
        }
        tokens.push(AuthToken::Bound { token: token.to_string(), services });
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(tokens: Vec<AuthToken>, header: &str) -> Auth {
        let config = IngestConfig { auth_tokens: tokens, auth_header: header.into(), ..Default::default() };
        Auth::from_config(&config).unwrap()
    }

    #[test]
    fn bearer_tokens_any_or_bound_to_services() {
        let a = auth(
            vec![
                AuthToken::Any("open-sesame".into()),
                AuthToken::Bound { token: "web-only".into(), services: vec!["web".into()] },
            ],
            "authorization",
        );
        assert_eq!(a.check(Some("Bearer open-sesame")), Ok(Grant::Any));
        assert_eq!(a.check(Some("bearer  open-sesame ")), Ok(Grant::Any), "the scheme is case-insensitive");
        assert_eq!(a.check(None), Err(Refusal::Missing("Authorization: Bearer <token>".into())));
        assert_eq!(a.check(Some("Bearer open")), Err(Refusal::Invalid));
        assert_eq!(a.check(Some("Basic open-sesame")), Err(Refusal::Invalid));
        assert_eq!(a.check(Some("open-sesame")), Err(Refusal::Invalid), "the bearer scheme is required");
        let grant = a.check(Some("Bearer web-only")).unwrap();
        assert_eq!(grant.allows(["web", "web"]), Ok(()));
        assert_eq!(grant.allows(["web", "db"]), Err(Refusal::Service("db".into())));
        assert!(!Refusal::Invalid.to_string().contains("open"), "a refusal never names a token");
    }

    #[test]
    fn another_header_carries_the_bare_token_and_no_tokens_means_open() {
        let a = auth(vec![AuthToken::Any("k3y".into())], "X-Api-Key");
        assert_eq!(a.check(Some("k3y")), Ok(Grant::Any));
        assert_eq!(a.check(Some("Bearer k3y")), Err(Refusal::Invalid));
        assert_eq!(a.check(None), Err(Refusal::Missing("x-api-key".into())));
        assert_eq!(auth(Vec::new(), "authorization").check(None), Ok(Grant::Any));
    }

    #[test]
    fn tokens_files() {
        let parsed = parse_tokens_file("# ops\nt1\n\nt2 web, api  # bound\n").unwrap();
        assert_eq!(
            parsed,
            vec![
                AuthToken::Any("t1".into()),
                AuthToken::Bound { token: "t2".into(), services: vec!["web".into(), "api".into()] }
            ]
        );
        assert_eq!(parse_tokens_file("t1\nt2 web api\n"), Err(2), "services are separated by commas");
        assert_eq!(parse_tokens_file("t1 ,\n"), Err(1));
    }
}
