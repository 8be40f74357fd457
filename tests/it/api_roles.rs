//! Roles in the API and the app (docs/security.md, "Who can read and act"): a viewer's token
//! reads and gets 403 on a write; an operator's (and `api.token`) acts. A browser signs in
//! with either and gets a random session id, never the token; the app shows the role and
//! offers a viewer no retry; every write a browser makes needs the session's CSRF token,
//! and a write from another site is refused. Every answer carries the security headers.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tayga::config::ApiConfig;
use tayga::daemon::api::access::{Access, Roles, CONTENT_SECURITY_POLICY};
use tayga::daemon::api::handlers::AppState;
use tayga::daemon::api::router;
use tayga::daemon::{prepare, Shutdown};
use tayga::store::{now_ns, DeliveryRow, Store};
use tayga::wire::alert::{format_id, AlertKind};
use tayga::workflow::retry::AlertsTopic;

use fantoccini::Locator;

use crate::common::{Browser, TestEnv};
use crate::notifier_support::{alert, row};

pub(crate) const VIEWER: &str = "viewer-2c41";
pub(crate) const OPERATOR: &str = "operator-9a07";
const LEGACY: &str = "legacy-api-token";

/// The API in-process with a viewer token, an operator token and `api.token`.
pub(crate) async fn start(env: &TestEnv, store: Store) -> (String, Shutdown) {
    let api = ApiConfig {
        token: LEGACY.into(),
        operator_tokens: vec![OPERATOR.into()],
        viewer_tokens: vec![VIEWER.into()],
        ..ApiConfig::default()
    };
    let state = AppState {
        store,
        query_timeout: Duration::from_secs(10),
        now_ns,
        alerts_topic: Some(Arc::new(AlertsTopic::new(&env.config))),
    };
    let mut registry = Registry::default();
    let metrics = tayga::daemon::api::metrics::RequestMetrics::register(&mut registry);
    let health: tayga::daemon::HealthFn = Arc::new(|| json!({"api": {"status": "serving"}}));
    let access = Access::new(Roles::from_config(&api).unwrap(), false);
    let app = router::secured(state, Arc::new(registry), metrics, health, access);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap() });
    (base, shutdown)
}

/// Signs in with `token`; the `name=value` pair of the session cookie.
pub(crate) async fn sign_in(http: &reqwest::Client, base: &str, token: &str) -> String {
    let answer = http.post(format!("{base}/login")).form(&[("token", token), ("next", "/deliveries")]).send().await;
    let answer = answer.unwrap();
    assert_eq!(answer.status(), 303);
    let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains("Secure"), "not Secure over plain HTTP: {cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(!pair.contains(token) && !pair.contains(&hex), "the cookie is not the token: {pair}");
    pair
}

/// The value of the CSRF field in a page.
pub(crate) fn csrf_of(page: &str) -> String {
    let at = page.find(r#"name="csrf" value=""#).unwrap_or_else(|| panic!("no CSRF field in {page}"));
    let rest = &page[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// A test's store with one alert whose deliveries to `ops`, `pager` and `mail` failed.
async fn seeded(env: &TestEnv, shutdown: &Shutdown) -> (Store, tayga::wire::alert::Alert) {
    let store = prepare(&env.config, shutdown).await.expect("topics and schema");
    let alert = alert(&env.name, 1, AlertKind::NewTemplate);
    store.insert(&[alert.to_row(alert.last_at, alert.last_at)]).await.unwrap();
    let pair = |target: &str| DeliveryRow {
        alert_id: alert.alert_id,
        target: target.into(),
        status: "failed".into(),
        attempts: 1,
        last_error: "HTTP 404 Not Found".into(),
        created_ns: alert.last_at,
        updated_ns: alert.last_at + 1,
        ..Default::default()
    };
    store.insert(&[pair("ops"), pair("pager"), pair("mail")]).await.unwrap();
    (store, alert)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_read_operators_act_and_browser_writes_need_the_sessions_csrf_token() {
    let env = TestEnv::new("api_roles");
    let shutdown = Shutdown::new();
    let (store, alert) = seeded(&env, &shutdown).await;
    let (base, api) = start(&env, store.clone()).await;
    let id = format_id(alert.alert_id);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let retry = |target: &str| format!("{base}/api/v1/deliveries/{id}/retry?target={target}");

    // The JSON API: a viewer reads and may not write; an operator and api.token act.
    let read = http.get(format!("{base}/api/v1/deliveries?alert_id={id}")).bearer_auth(VIEWER).send().await.unwrap();
    assert_eq!(read.status(), 200);
    for header in ["content-security-policy", "x-content-type-options", "referrer-policy"] {
        assert!(read.headers().contains_key(header), "the JSON answer lacks {header}");
    }
    let refused = http.post(retry("ops")).bearer_auth(VIEWER).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("operator token"), "{body}");
    assert_eq!(row(&store, alert.alert_id, "ops").await.unwrap().status, "failed", "nothing changed");
    let done = http.post(retry("ops")).bearer_auth(OPERATOR).send().await.unwrap();
    assert_eq!(done.status(), 200, "{}", done.text().await.unwrap());
    assert_eq!(row(&store, alert.alert_id, "ops").await.unwrap().status, "pending");
    let done = http.post(retry("pager")).bearer_auth(LEGACY).send().await.unwrap();
    assert_eq!(done.status(), 200, "api.token is an operator's: {}", done.text().await.unwrap());

    // The app, as a viewer: the role is shown, the failed row's retry is disabled, and a
    // hand-made post of the form is refused.
    let viewer = sign_in(&http, &base, VIEWER).await;
    let page = http.get(format!("{base}/deliveries?alert_id={id}")).header("cookie", &viewer).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-security-policy"], CONTENT_SECURITY_POLICY);
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["referrer-policy"], "same-origin");
    let text = page.text().await.unwrap();
    assert!(text.contains(r#"data-role="viewer""#), "{text}");
    assert!(!text.contains(r#"<form class="retry""#), "no retry form for a viewer: {text}");
    assert!(text.contains("disabled") && text.contains("Only an operator may retry"), "{text}");
    let csrf = csrf_of(&text);
    let form = format!("{base}/deliveries/{id}/retry");
    let post = http.post(&form).header("cookie", &viewer).form(&[("target", "mail"), ("csrf", &csrf)]);
    let post = post.send().await.unwrap();
    assert_eq!(post.status(), 403, "a viewer's session may not retry");
    assert!(post.text().await.unwrap().contains("Not allowed"));

    // As an operator: the retry form carries the session's CSRF token; without it, with
    // another session's, or from another site, the post is refused and nothing changes.
    let operator = sign_in(&http, &base, OPERATOR).await;
    let page = http.get(format!("{base}/deliveries?alert_id={id}")).header("cookie", &operator).send().await;
    let text = page.unwrap().text().await.unwrap();
    assert!(text.contains(r#"data-role="operator""#) && text.contains(r#"<form class="retry""#), "{text}");
    let token = csrf_of(&text);
    assert_ne!(token, csrf, "each session has its own CSRF token");
    for (what, fields, origin) in [
        ("no CSRF field", vec![("target", "mail")], None),
        ("another session's token", vec![("target", "mail"), ("csrf", csrf.as_str())], None),
        ("another site", vec![("target", "mail"), ("csrf", token.as_str())], Some("http://evil.example")),
    ] {
        let mut post = http.post(&form).header("cookie", &operator).form(&fields);
        if let Some(origin) = origin {
            post = post.header("origin", origin);
        }
        let answer = post.send().await.unwrap();
        assert_eq!(answer.status(), 403, "{what}");
        assert_eq!(row(&store, alert.alert_id, "mail").await.unwrap().status, "failed", "{what}: nothing changed");
    }
    let cookie_only = http.post(retry("mail")).header("cookie", &operator).send().await.unwrap();
    assert_eq!(cookie_only.status(), 403, "an API write with the cookie alone needs the CSRF header");
    let origin = base.clone();
    let answer = http
        .post(&form)
        .header("cookie", &operator)
        .header("origin", &origin)
        .form(&[("target", "mail"), ("csrf", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303, "the app's own form retries");
    assert!(answer.headers()["location"].to_str().unwrap().contains("retried=mail"));
    assert_eq!(row(&store, alert.alert_id, "mail").await.unwrap().status, "pending");

    // Signing out ends the session on the server, whatever the browser keeps.
    let out = http.post(format!("{base}/logout")).header("cookie", &operator).form(&[("csrf", token.as_str())]);
    let out = out.send().await.unwrap();
    assert_eq!(out.status(), 303);
    assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    let after = http.get(format!("{base}/deliveries")).header("cookie", &operator).send().await.unwrap();
    assert_eq!(after.status(), 303, "the old cookie opens nothing");
    assert!(after.headers()["location"].to_str().unwrap().starts_with("/login"));
    api.trigger();
    shutdown.trigger();
}

/// In Chromium: the sign-in page and the app work under the Content-Security-Policy (no
/// violation logged), a viewer sees its role and a disabled retry, an operator the retry
/// form, and signing out ends the session. First, a page that breaks the policy (an inline
/// script and style) shows that a violation is logged, so the clean pages are clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_works_in_a_browser_under_the_content_security_policy() {
    let env = TestEnv::new("api_roles_csp");
    let shutdown = Shutdown::new();
    let (store, alert) = seeded(&env, &shutdown).await;
    let (base, api) = start(&env, store).await;
    let id = format_id(alert.alert_id);
    let inline = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async {
                axum::response::Html(
                    "<!DOCTYPE html><html><body><p style=\"color: red\">inline</p>\
                     <script>document.title = 'ran';</script></body></html>",
                )
            }),
        )
        .layer(axum::middleware::from_fn(tayga::daemon::api::access::security_headers));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let forbidden = format!("http://{}/", listener.local_addr().unwrap());
    let stopped = shutdown.triggered();
    tokio::spawn(async move { axum::serve(listener, inline).with_graceful_shutdown(stopped).await.unwrap() });

    let browser = Browser::start().await;
    let checks = std::panic::AssertUnwindSafe(async {
        browser.open(&forbidden).await;
        let log = browser.log().await;
        let refused = |what: &str| log.iter().any(|e| e["message"].as_str().unwrap_or_default().contains(what));
        assert!(refused("Content Security Policy") && refused("script-src"), "the inline script is reported: {log:#?}");
        assert_ne!(browser.client.title().await.unwrap(), "ran", "the inline script did not run");

        sign_in_as(&browser, &base, VIEWER).await;
        let text = browser.open(&format!("{base}/deliveries?alert_id={id}")).await;
        assert_eq!(browser.text("header .role").await, "viewer", "{text}");
        assert_eq!(browser.count("form.retry").await, 0, "a viewer gets no retry form");
        assert_eq!(browser.count("button.retry[disabled]").await, 3, "each failed row's retry is disabled");
        browser.assert_clean("the deliveries page, as a viewer").await;
        browser.screenshot("deliveries-viewer").await;
        browser.click_through("form.signout button").await;
        assert!(browser.client.current_url().await.unwrap().path().starts_with("/login"));

        sign_in_as(&browser, &base, OPERATOR).await;
        browser.open(&format!("{base}/deliveries?alert_id={id}")).await;
        assert_eq!(browser.text("header .role").await, "operator");
        assert_eq!(browser.count("form.retry input[name='csrf']").await, 3);
        browser.click_through("tr.delivery[data-target='mail'] form.retry button").await;
        let notice = browser.text("#retried").await;
        assert!(notice.contains("mail"), "{notice}");
        browser.assert_clean("the retry's answer, as an operator").await;
    });
    let outcome = futures_util::FutureExt::catch_unwind(checks).await;
    browser.close().await;
    api.trigger();
    shutdown.trigger();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Types `token` into the sign-in page and submits it; the sign-in page logs nothing.
async fn sign_in_as(browser: &Browser, base: &str, token: &str) {
    browser.open(&format!("{base}/login?next=%2F")).await;
    browser.assert_clean("the sign-in page").await;
    let field = browser.client.find(Locator::Css("input[name='token']")).await.unwrap();
    field.send_keys(token).await.unwrap();
    browser.click_through("section.login button").await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/", "signed in as {token}");
}
