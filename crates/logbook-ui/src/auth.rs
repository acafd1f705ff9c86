//! The optional bearer token. A browser cannot send a header on a link, so
//! opening any page with `?token=T` sets an HTTP-only, same-site cookie and
//! redirects to the page without it (the token leaves the address bar).

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Router;
use subtle::ConstantTimeEq;

const COOKIE: &str = "logbook_ui_token";

/// `routes`, answering only requests that carry `token` (all when `None`).
pub(crate) fn guard(routes: Router, token: Option<String>) -> Router {
    match token {
        None => routes,
        Some(token) => routes.layer(middleware::from_fn(move |req: Request, next: Next| {
            let token = token.clone();
            async move { check(&token, req, next).await }
        })),
    }
}

async fn check(token: &str, req: Request, next: Next) -> Response {
    if let Some(given) = query_token(req.uri().query()) {
        if constant_time_eq(given.as_bytes(), token.as_bytes()) {
            let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            let to = req.uri().path().to_string();
            return ([(header::SET_COOKIE, cookie)], Redirect::to(&to)).into_response();
        }
        return refused();
    }
    if carried(req.headers()).is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes())) {
        return next.run(req).await;
    }
    refused()
}

fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        "a token is required: open the page with ?token=... or send Authorization: Bearer ...",
    )
        .into_response()
}

/// The token a request carries, from its header or the cookie.
fn carried(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return v.strip_prefix("Bearer ").map(str::to_string);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        })
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token=").map(str::to_string))
}

/// Compared in constant time, so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}
