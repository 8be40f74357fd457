//! `/login`, served only when `api.token` is set: the token typed into a form once, then
//! kept by the browser as the session cookie (`access.rs`), so every page and the retry
//! buttons work. A wrong token gets the form again with a 401, and nothing is set.

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Form, Router};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{respond, shell, Nav};
use super::query;
use crate::daemon::api::access;

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

/// The sign-in routes, with the token they check.
pub fn routes(token: String) -> Router {
    Router::new().route("/login", get(page).post(sign_in)).with_state(token)
}

async fn page(uri: Uri) -> Response {
    let next = query::<LoginQuery>(&uri).ok().and_then(|q| q.next);
    respond(StatusCode::OK, form(access::safe_return(next.as_deref()), None))
}

async fn sign_in(State(token): State<String>, Form(login): Form<LoginForm>) -> Response {
    let next = access::safe_return(login.next.as_deref()).to_string();
    if !access::token_matches(&login.token, &token) {
        return respond(StatusCode::UNAUTHORIZED, form(&next, Some("That is not this API's token.")));
    }
    ([(header::SET_COOKIE, access::session_cookie(&token))], Redirect::to(&next)).into_response()
}

fn form(next: &str, problem: Option<&str>) -> Markup {
    let body = html! {
        section.login {
            h1 { "Sign in" }
            p { "This Tayga API has a token (" code { "api.token" } ", " code { "TAYGA_API_TOKEN" } "). Enter it once; this browser keeps it for the session." }
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
