//! Who may call the API: anyone on loopback by default; with `api.token` set, only requests
//! carrying `Authorization: Bearer <token>` (every route, `/health` and `/metrics`
//! included), or the web app's session cookie, which `/login` sets once the token is typed
//! in (a browser cannot send a bearer header on a page load). Listening beyond loopback
//! without a token is refused at start.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

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

/// The web app's session cookie: the token, hex-encoded (a cookie value may not hold every
/// character a token may), `HttpOnly` so no script reads it, `SameSite=Strict` so no other
/// site's form or script can post with it.
pub const SESSION_COOKIE: &str = "tayga_session";

/// The `Set-Cookie` value that signs a browser in with `token`.
pub fn session_cookie(token: &str) -> String {
    format!("{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", hex(token.as_bytes()))
}

/// Middleware: refuses a request without the right bearer token or session cookie. A page
/// load (a GET outside `/api/`, `/health` and `/metrics`) is sent to `/login` instead, which
/// comes back to it; the sign-in page and the stylesheet it uses need nothing.
pub async fn require_token(State(token): State<String>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/login" || path.starts_with("/assets/") {
        return next.run(request).await;
    }
    if is_authorised(request.headers(), &token) {
        return next.run(request).await;
    }
    if request.method() == Method::GET && !is_machine_path(path) {
        let back = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let query = form_urlencoded::Serializer::new(String::new()).append_pair("next", back).finish();
        return Redirect::to(&format!("/login?{query}")).into_response();
    }
    ApiError::Unauthorized.into_response()
}

/// Whether `headers` carry the token, as a bearer header or as the session cookie.
pub fn is_authorised(headers: &HeaderMap, token: &str) -> bool {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if bearer.is_some_and(|given| token_matches(given, token)) {
        return true;
    }
    let expected = hex(token.as_bytes());
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
        .any(|given| same(given.as_bytes(), expected.as_bytes()))
}

/// Whether `given` is the token (in time that depends only on the lengths).
pub fn token_matches(given: &str, token: &str) -> bool {
    same(given.as_bytes(), token.as_bytes())
}

/// Where only programs call: they get a 401, never a sign-in page.
fn is_machine_path(path: &str) -> bool {
    path.starts_with("/api/") || path == "/health" || path == "/metrics"
}

/// Where a sign-in may send the browser back to: a path of this site only (`//host` and
/// `/\\host` are other sites to a browser).
pub fn safe_return(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\") => n,
        _ => "/",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    fn the_session_cookie_signs_in_and_a_bearer_header_still_does() {
        let mut headers = HeaderMap::new();
        assert!(!is_authorised(&headers, "s3 cret;"));
        let cookie = session_cookie("s3 cret;");
        let pair = cookie.split(';').next().unwrap();
        headers.insert(header::COOKIE, format!("theme=dark; {pair}").parse().unwrap());
        assert!(is_authorised(&headers, "s3 cret;"));
        assert!(!is_authorised(&headers, "other"));
        let mut bearer = HeaderMap::new();
        bearer.insert(header::AUTHORIZATION, "Bearer other".parse().unwrap());
        assert!(is_authorised(&bearer, "other"));
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    }

    #[test]
    fn a_sign_in_returns_only_to_this_site() {
        assert_eq!(safe_return(Some("/alerts?since=1h")), "/alerts?since=1h");
        for away in ["//evil.example/", "/\\\\evil.example", "https://evil.example/", "", "alerts"] {
            assert_eq!(safe_return(Some(away)), "/", "{away}");
        }
        assert_eq!(safe_return(None), "/");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"ab", b"abc"));
    }
}
