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

/// `routes`, answering only requests that carry `token`; without a token
/// (loopback only), only requests addressed to a loopback name, so that a
/// web page the operator visits cannot rebind its own name to 127.0.0.1
/// and read the warehouse through the browser.
pub(crate) fn guard(routes: Router, token: Option<String>) -> Router {
    match token {
        None => routes.layer(middleware::from_fn(loopback_host)),
        Some(token) => routes.layer(middleware::from_fn(move |req: Request, next: Next| {
            let token = token.clone();
            async move { check(&token, req, next).await }
        })),
    }
}

async fn loopback_host(req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]") {
        next.run(req).await
    } else {
        (
            StatusCode::FORBIDDEN,
            "without a token the UI answers only requests to localhost, 127.0.0.1 or [::1]",
        )
            .into_response()
    }
}

async fn check(token: &str, req: Request, next: Next) -> Response {
    if let Some(given) = query_token(req.uri().query()) {
        if constant_time_eq(given.as_bytes(), token.as_bytes()) {
            let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            return (
                [(header::SET_COOKIE, cookie)],
                Redirect::to(&same_page(&req)),
            )
                .into_response();
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

/// The page asked for, without the token: a path on this server (never
/// `//other.host`), the other query parameters kept.
fn same_page(req: &Request) -> String {
    let path = format!("/{}", req.uri().path().trim_start_matches(['/', '\\']));
    let rest: Vec<&str> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("token="))
        .collect();
    match rest.is_empty() {
        true => path,
        false => format!("{path}?{}", rest.join("&")),
    }
}

/// The token a request carries, from its bearer header or the cookie.
fn carried(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(v.to_string());
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

/// The `token` query parameter, percent-decoded.
fn query_token(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

/// Compared in constant time, so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}
