//! `/login` and `/logout`, served only when the API has tokens: a viewer's or an operator's
//! token typed into a form once starts a session (`access.rs`: a random id in the cookie,
//! the role kept in memory), so every page works and an operator's retry buttons too. A
//! wrong token gets the form again with a 401, and nothing is set.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{respond, shell, Nav};
use super::query;
use crate::daemon::api::access::{self, Access};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginQuery {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

/// The sign-in and sign-out routes, over the server's access rules.
pub fn routes(access: Arc<Access>) -> Router {
    Router::new().route("/login", get(page).post(sign_in)).route("/logout", post(sign_out)).with_state(access)
}

async fn page(uri: Uri) -> Response {
    let next = query::<LoginQuery>(&uri).ok().and_then(|q| q.next);
    respond(StatusCode::OK, form(access::safe_return(next.as_deref()), None))
}

async fn sign_in(State(access): State<Arc<Access>>, Form(login): Form<LoginForm>) -> Response {
    let next = access::safe_return(login.next.as_deref()).to_string();
    let Some(role) = access.roles().role_of(&login.token) else {
        return respond(StatusCode::UNAUTHORIZED, form(&next, Some("That is not one of this API's tokens.")));
    };
    ([(header::SET_COOKIE, access.sign_in(role))], Redirect::to(&next)).into_response()
}

/// Ends the session (the guard has checked the form's CSRF token: another site cannot sign
/// a browser out).
async fn sign_out(State(access): State<Arc<Access>>, headers: HeaderMap) -> Response {
    ([(header::SET_COOKIE, access.sign_out(&headers))], Redirect::to("/login")).into_response()
}

fn form(next: &str, problem: Option<&str>) -> Markup {
    let body = html! {
        section.login {
            h1 { "Sign in" }
            p { "This Tayga API has tokens: a viewer's reads, an operator's also retries deliveries (" code { "[api]" } " in tayga.toml). Enter yours once; this browser keeps a session for 12 hours." }
            @if let Some(problem) = problem { p.reason role="alert" { (problem) } }
            form method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label { "Token " input type="password" name="token" autocomplete="current-password" required autofocus; }
                button type="submit" { "Sign in" }
            }
        }
    };
    shell(Nav::Overview, "Sign in", None, body)
}
