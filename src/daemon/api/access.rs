//! Who may call the API, and what they may do (docs/security.md, "Who can read and act").
//!
//! - **Open** (no token configured): anyone who reaches the port reads and acts; listening
//!   beyond loopback so is refused at start.
//! - **Tokens**: every request, `/health` and `/metrics` included, carries
//!   `Authorization: Bearer <token>` or the web app's session cookie. A token is a
//!   *viewer*'s (it reads) or an *operator*'s (it also writes: a delivery's retry, and any
//!   other request that is not a GET or HEAD); `api.token` is an operator token. A viewer's
//!   write is a 403, told as JSON under `/api/` and as a page elsewhere.
//! - **Sessions**: `/login` takes either token once and sets a cookie holding a random
//!   session id (never the token), which maps to the role in this process's memory: a
//!   restart signs every browser out. The cookie is `HttpOnly`, `SameSite=Strict`, and
//!   `Secure` when the API serves TLS.
//! - **Forged requests**: a write that rides on something the browser sends by itself (the
//!   cookie, or nothing at all on an open API) must carry the session's CSRF token: the
//!   hidden field [`CSRF_FIELD`] every form of the app gets from `layout::csrf_field`, or
//!   the [`CSRF_HEADER`] header. The guard checks it on every such write, so a form that
//!   forgets the field fails closed. A browser's cross-site write is refused outright.
//!
//! The request's grant (role and CSRF token) is set for the handler's task
//! ([`granted`]), so a page shows the role and hides what the role may not do without
//! any handler passing it along.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::web::layout::PageError;
use crate::config::ApiConfig;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Reads everything the API and the app show.
    Viewer,
    /// Reads and acts: a delivery's retry, and every other write.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        }
    }
}

/// The accepted tokens, each with its role; none: the API is open.
#[derive(Clone, Default)]
pub struct Roles {
    tokens: Vec<(String, Role)>,
}

impl std::fmt::Debug for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        f.debug_struct("Roles").field("tokens", &self.tokens.len()).finish()
    }
}

impl Roles {
    /// One operator token (`api.token` alone); an empty one leaves the API open.
    pub fn operator(token: &str) -> Roles {
        let mut roles = Roles::default();
        roles.add(token, Role::Operator);
        roles
    }

    /// The tokens of `[api]`: `token`, `operator_tokens`, `viewer_tokens` and their files.
    /// Fails, naming the file and line but never a token, when a file cannot be read.
    pub fn from_config(api: &ApiConfig) -> anyhow::Result<Roles> {
        let mut roles = Roles::operator(&api.token);
        for (key, tokens, file, role) in [
            ("api.operator_tokens", &api.operator_tokens, &api.operator_tokens_file, Role::Operator),
            ("api.viewer_tokens", &api.viewer_tokens, &api.viewer_tokens_file, Role::Viewer),
        ] {
            if let Some(i) = tokens.iter().position(|t| t.trim().is_empty()) {
                anyhow::bail!("{key}: entry {} is an empty token", i + 1);
            }
            for token in tokens {
                roles.add(token, role);
            }
            if !file.is_empty() {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| anyhow::anyhow!("{key}_file: cannot read {file}: {e}"))?;
                for line in text.lines() {
                    let token = line.split('#').next().unwrap_or_default().trim();
                    roles.add(token, role);
                }
            }
        }
        Ok(roles)
    }

    fn add(&mut self, token: &str, role: Role) {
        if token.is_empty() {
            return;
        }
        // A token given as both is an operator's: the wider grant wins, whatever the order.
        match self.tokens.iter_mut().find(|(t, _)| t == token) {
            Some((_, r)) => *r = (*r).max(role),
            None => self.tokens.push((token.to_string(), role)),
        }
    }

    /// Whether requests need a token.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The role of `given`, if it is a token: every token is compared, each in time that
    /// depends only on the lengths.
    pub fn role_of(&self, given: &str) -> Option<Role> {
        let mut found = None;
        for (token, role) in &self.tokens {
            if same(given.as_bytes(), token.as_bytes()) {
                found = found.max(Some(*role));
            }
        }
        found
    }
}

/// Why `listen_addr` may not be served, if it may not: beyond loopback needs a token.
pub fn listen_problem(listen_addr: &str, roles: &Roles) -> Option<String> {
    let addr: SocketAddr = match listen_addr.parse() {
        Ok(a) => a,
        Err(_) => return Some(format!("api.listen_addr `{listen_addr}` is not an ip:port address")),
    };
    if addr.ip().is_loopback() || roles.required() {
        return None;
    }
    Some(format!(
        "api.listen_addr {listen_addr} is not a loopback address and api.token is empty (as are \
         api.operator_tokens and api.viewer_tokens): set a token (TAYGA_API_TOKEN) to serve the API \
         beyond this machine, or listen on 127.0.0.1"
    ))
}

/// The web app's session cookie.
pub const SESSION_COOKIE: &str = "tayga_session";
/// The form field that carries the CSRF token (`layout::csrf_field` writes it).
pub const CSRF_FIELD: &str = "csrf";
/// The header a script's write carries the CSRF token in, instead of the form field.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// A session lasts this long from its sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most; past it the oldest is dropped (signing in needs a token, but a
/// script with one could otherwise grow the table without bound).
const MAX_SESSIONS: usize = 10_000;
/// The largest form body the guard reads to find the CSRF field.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// What a request was granted: its role, and the CSRF token its forms carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub role: Role,
    pub csrf: String,
    /// Signed in through a session (it can sign out).
    pub session: bool,
}

impl Granted {
    pub fn may_write(&self) -> bool {
        self.role == Role::Operator
    }
}

tokio::task_local! {
    static GRANTED: Granted;
}

/// The grant of the request being handled, `None` outside the guard (the sign-in page).
pub fn granted() -> Option<Granted> {
    GRANTED.try_with(Granted::clone).ok()
}

struct Session {
    role: Role,
    csrf: String,
    expires: Instant,
}

/// The access rules of one API server: its tokens, its sessions (in memory), whether its
/// cookies are `Secure`, and the CSRF token of an open API's forms.
pub struct Access {
    roles: Roles,
    secure: bool,
    open_csrf: String,
    /// By the SHA-256 of the session id, so a lookup's timing says nothing of the id.
    sessions: Mutex<HashMap<[u8; 32], Session>>,
}

impl Access {
    pub fn new(roles: Roles, secure: bool) -> Arc<Access> {
        Arc::new(Access { roles, secure, open_csrf: random_hex(), sessions: Mutex::default() })
    }

    pub fn roles(&self) -> &Roles {
        &self.roles
    }

    /// A new session for `role`; the `Set-Cookie` value that holds it.
    pub fn sign_in(&self, role: Role) -> String {
        let id = random_hex();
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| *k) {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(digest(&id), Session { role, csrf: random_hex(), expires: now + SESSION_LIFETIME });
        let secure = if self.secure { "; Secure" } else { "" };
        format!(
            "{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            SESSION_LIFETIME.as_secs()
        )
    }

    /// Ends the session `headers` carry; the `Set-Cookie` value that clears the cookie.
    pub fn sign_out(&self, headers: &HeaderMap) -> String {
        if let Some(id) = session_id(headers) {
            self.sessions.lock().unwrap().remove(&digest(id));
        }
        let secure = if self.secure { "; Secure" } else { "" };
        format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
    }

    fn session(&self, headers: &HeaderMap) -> Option<Granted> {
        let id = session_id(headers)?;
        let sessions = self.sessions.lock().unwrap();
        let s = sessions.get(&digest(id)).filter(|s| s.expires > Instant::now())?;
        Some(Granted { role: s.role, csrf: s.csrf.clone(), session: true })
    }
}

/// How a request proved who it is.
enum Credential {
    /// A bearer token: sent on purpose, never by a browser on its own.
    Bearer(Role),
    /// Something a browser sends by itself: the session cookie, or nothing (open API).
    Ambient(Granted),
}

/// Middleware: who the request is and whether it may do what it asks; then the handler,
/// with the grant set for it ([`granted`]).
pub async fn guard(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path == "/login" || path.starts_with("/assets/") {
        // Another site may not sign a browser in to a session of its choosing either.
        if request.method() == Method::POST && cross_site(request.headers()) {
            return refuse(&path, "a sign-in must be asked from this app's own page");
        }
        return next.run(request).await;
    }
    let credential = match credential(&access, request.headers()) {
        Some(c) => c,
        None => return unauthorised(&request),
    };
    let write = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let role = match &credential {
        Credential::Bearer(role) => *role,
        Credential::Ambient(granted) => granted.role,
    };
    // Signing out is not a write to anything but the session itself.
    if write && role != Role::Operator && path != "/logout" {
        return refuse(
            &path,
            "this token may only read (viewer): a retry and every other write need an operator token",
        );
    }
    let (granted, request) = match credential {
        Credential::Bearer(role) => (Granted { role, csrf: String::new(), session: false }, request),
        Credential::Ambient(granted) if write => match forged(&granted, request, &path).await {
            Ok(request) => (granted, request),
            Err(refusal) => return refusal,
        },
        Credential::Ambient(granted) => (granted, request),
    };
    GRANTED.scope(granted, next.run(request)).await
}

fn credential(access: &Access, headers: &HeaderMap) -> Option<Credential> {
    if !access.roles.required() {
        return Some(Credential::Ambient(Granted {
            role: Role::Operator,
            csrf: access.open_csrf.clone(),
            session: false,
        }));
    }
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if let Some(role) = bearer.and_then(|given| access.roles.role_of(given)) {
        return Some(Credential::Bearer(role));
    }
    access.session(headers).map(Credential::Ambient)
}

/// A write carried by what a browser sends by itself is the app's own only with the
/// session's CSRF token. Passes the request on (a form's body without the CSRF field, so
/// the handler reads only its own fields), or answers the refusal.
async fn forged(granted: &Granted, request: Request, path: &str) -> Result<Request, Response> {
    let headers = request.headers();
    // A browser says where a request comes from; another site's is never the app's.
    if cross_site(headers) || !same_origin(&request) {
        return Err(refuse(path, "a write must be asked from this app's own pages"));
    }
    if headers.get(CSRF_HEADER).is_some_and(|v| same(v.as_bytes(), granted.csrf.as_bytes())) {
        return Ok(request);
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let is_form = content_type.starts_with("application/x-www-form-urlencoded");
    if !is_form {
        // An open API's programs (curl, scripts) write without a session or a token. Only
        // a body a page may send to another site without asking (a form's types) could be
        // a forgery, and a browser says where that came from (above).
        let simple = content_type.starts_with("multipart/form-data") || content_type.starts_with("text/plain");
        if !granted.session && !simple && path.starts_with("/api/") {
            return Ok(request);
        }
        return Err(refuse(path, "a write needs this session's CSRF token (the X-CSRF-Token header)"));
    }
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| refuse(path, "the form is too large or was cut off"))?;
    let mut fields: Vec<(String, String)> = form_urlencoded::parse(&bytes).into_owned().collect();
    let given = fields.iter().position(|(k, _)| k == CSRF_FIELD).map(|i| fields.remove(i).1);
    if !given.is_some_and(|g| same(g.as_bytes(), granted.csrf.as_bytes())) {
        return Err(refuse(path, "the form's CSRF token is missing or stale: reload the page and try again"));
    }
    let rest = form_urlencoded::Serializer::new(String::new()).extend_pairs(&fields).finish();
    parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(rest.len()));
    Ok(Request::from_parts(parts, Body::from(rest)))
}

/// No credential: a page load (a GET outside `/api/`, `/health` and `/metrics`) goes to
/// `/login`, which comes back to it; anything else is a 401.
fn unauthorised(request: &Request) -> Response {
    let path = request.uri().path();
    if request.method() == Method::GET && !is_machine_path(path) {
        let back = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let query = form_urlencoded::Serializer::new(String::new()).append_pair("next", back).finish();
        return Redirect::to(&format!("/login?{query}")).into_response();
    }
    ApiError::Unauthorized.into_response()
}

/// A 403: JSON for a program, a page for a browser.
fn refuse(path: &str, why: &str) -> Response {
    let error = ApiError::Forbidden(why.to_string());
    if is_machine_path(path) {
        error.into_response()
    } else {
        PageError(error).into_response()
    }
}

/// Whether a browser says the request comes from another site (`Sec-Fetch-Site`).
fn cross_site(headers: &HeaderMap) -> bool {
    headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes() == b"cross-site" || v.as_bytes() == b"same-site")
}

/// Whether the `Origin` a browser sends with a write, if any, is this server (the scheme
/// aside): the host the browser addressed, as `Host` says, or `X-Forwarded-Host` behind a
/// proxy that rewrites `Host`. `null` (a sandboxed or local page) is not.
fn same_origin(request: &Request) -> bool {
    let Some(origin) = request.headers().get(header::ORIGIN) else { return true };
    let origin = origin.as_bytes();
    let Some(authority) = origin.strip_prefix(b"https://").or_else(|| origin.strip_prefix(b"http://")) else {
        return false;
    };
    // HTTP/2 carries the host in the URI's authority rather than a `Host` header.
    let host = request.headers().get(header::HOST).map(|h| h.as_bytes());
    let host = host.or_else(|| request.uri().authority().map(|a| a.as_str().as_bytes()));
    let forwarded = request.headers().get("x-forwarded-host").map(|h| h.as_bytes());
    [host, forwarded].into_iter().flatten().any(|h| !h.is_empty() && h == authority)
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
        .filter(|id| !id.is_empty())
}

/// Where only programs call: they get a 401, never a sign-in page.
fn is_machine_path(path: &str) -> bool {
    path.starts_with("/api/") || path == "/health" || path == "/metrics"
}

/// What every answer carries (docs/security.md, "The web app"): a Content-Security-Policy
/// the app's own stylesheet and script satisfy (nothing inline, nothing from elsewhere),
/// no MIME sniffing, and no referrer sent to other sites.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Middleware: the security headers on every answer.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// Where a sign-in may send the browser back to: a path of this site only (`//host` and
/// `/\\host` are other sites to a browser).
pub fn safe_return(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\") => n,
        _ => "/",
    }
}

/// 32 random bytes from the operating system, hex-encoded: a session id or a CSRF token.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// Compares in time that depends only on the lengths, so a token cannot be guessed byte
/// by byte from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie_header(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("theme=dark; {pair}").parse().unwrap());
        headers
    }

    #[test]
    fn beyond_loopback_needs_a_token() {
        assert_eq!(listen_problem("127.0.0.1:8080", &Roles::default()), None);
        assert_eq!(listen_problem("[::1]:8080", &Roles::default()), None);
        assert!(listen_problem("0.0.0.0:8080", &Roles::default()).unwrap().contains("api.token"));
        assert_eq!(listen_problem("0.0.0.0:8080", &Roles::operator("s3cret")), None);
    }

    #[test]
    fn each_token_has_its_role_and_the_wider_grant_wins() {
        let api = ApiConfig {
            token: "op".into(),
            viewer_tokens: vec!["view".into(), "both".into()],
            operator_tokens: vec!["both".into()],
            ..ApiConfig::default()
        };
        let roles = Roles::from_config(&api).unwrap();
        assert_eq!(roles.role_of("op"), Some(Role::Operator));
        assert_eq!(roles.role_of("view"), Some(Role::Viewer));
        assert_eq!(roles.role_of("both"), Some(Role::Operator));
        assert_eq!(roles.role_of("vie"), None);
        assert!(!format!("{roles:?}").contains("view"), "Debug never shows a token");
        let bad = ApiConfig { viewer_tokens: vec![" ".into()], ..ApiConfig::default() };
        assert!(Roles::from_config(&bad).err().unwrap().to_string().contains("api.viewer_tokens: entry 1"));
    }

    #[test]
    fn tokens_come_from_files_too() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("viewers");
        std::fs::write(&file, "# read-only dashboards\nv1\n\n  v2  # the wall screen\n").unwrap();
        let api = ApiConfig { viewer_tokens_file: file.to_str().unwrap().into(), ..ApiConfig::default() };
        let roles = Roles::from_config(&api).unwrap();
        assert_eq!((roles.role_of("v1"), roles.role_of("v2")), (Some(Role::Viewer), Some(Role::Viewer)));
        assert_eq!(roles.role_of("# read-only dashboards"), None);
        let missing = ApiConfig { operator_tokens_file: "/nonexistent/ops".into(), ..ApiConfig::default() };
        let e = Roles::from_config(&missing).err().unwrap().to_string();
        assert!(e.starts_with("api.operator_tokens_file: cannot read /nonexistent/ops"), "{e}");
    }

    #[test]
    fn a_session_cookie_holds_a_random_id_that_maps_to_its_role_until_signed_out() {
        let access = Access::new(Roles::operator("s3cret"), true);
        let set = access.sign_in(Role::Viewer);
        assert!(!set.contains("s3cret"));
        for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
            assert!(set.contains(attribute), "{set}");
        }
        let headers = cookie_header(&set);
        let granted = access.session(&headers).unwrap();
        assert_eq!(granted.role, Role::Viewer);
        assert_eq!(granted.csrf.len(), 64);
        let other = access.sign_in(Role::Viewer);
        assert_ne!(access.session(&cookie_header(&other)).unwrap().csrf, granted.csrf, "a CSRF token per session");
        assert!(access.session(&cookie_header("tayga_session=0123")).is_none());
        let cleared = access.sign_out(&headers);
        assert!(cleared.contains("Max-Age=0"), "{cleared}");
        assert!(access.session(&headers).is_none(), "signed out");
        assert!(!Access::new(Roles::default(), false).sign_in(Role::Operator).contains("Secure"));
    }

    #[test]
    fn a_writes_origin_must_be_this_server() {
        let request = |origin: Option<&str>, host: &str, forwarded: Option<&str>| {
            let mut r = Request::builder().method(Method::POST).uri("/deliveries/1/retry").header(header::HOST, host);
            if let Some(o) = origin {
                r = r.header(header::ORIGIN, o);
            }
            if let Some(f) = forwarded {
                r = r.header("x-forwarded-host", f);
            }
            r.body(Body::empty()).unwrap()
        };
        assert!(same_origin(&request(None, "127.0.0.1:8080", None)), "a program sends no Origin");
        assert!(same_origin(&request(Some("http://127.0.0.1:8080"), "127.0.0.1:8080", None)));
        assert!(same_origin(&request(Some("https://tayga.example"), "127.0.0.1:8080", Some("tayga.example"))));
        for other in ["http://evil.example", "null", "http://127.0.0.1:8081", "http://127.0.0.1:8080.evil.example"] {
            assert!(!same_origin(&request(Some(other), "127.0.0.1:8080", None)), "{other}");
        }
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
