//! Who may call the API: anyone on loopback by default; with `api.token` set, only requests
//! carrying `Authorization: Bearer <token>` (every route, `/health` and `/metrics`
//! included). Listening beyond loopback without a token is refused at start.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Why `listen_addr` may not be served with this token, if it may not.
pub fn listen_problem(listen_addr: &str, token: &str) -> Option<String> {
    let addr: SocketAddr = match listen_addr.parse() {
        Ok(a) => a,
        Err(_) => return Some(format!("api.listen_addr `{listen_addr}` is not an ip:port address")),
    };
    if addr.ip().is_loopback() || !token.is_empty() {
        return None;
    }
    Some(format!(
        "api.listen_addr {listen_addr} is not a loopback address and api.token is empty: set a token \
         (TAYGA_API_TOKEN) to serve the API beyond this machine, or listen on 127.0.0.1"
    ))
}

/// Middleware: refuses a request without the right bearer token.
pub async fn require_token(State(token): State<String>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if same(given.as_bytes(), token.as_bytes()) {
        next.run(request).await
    } else {
        ApiError::Unauthorized.into_response()
    }
}

/// Compares in time that depends only on the lengths, so the token cannot be guessed byte
/// by byte from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_needs_a_token() {
        assert_eq!(listen_problem("127.0.0.1:8080", ""), None);
        assert_eq!(listen_problem("[::1]:8080", ""), None);
        assert!(listen_problem("0.0.0.0:8080", "").unwrap().contains("api.token"));
        assert_eq!(listen_problem("0.0.0.0:8080", "s3cret"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"ab", b"abc"));
    }
}
