//! logbook-ui: a read-only web UI over a warehouse (`logbook ui`).
//!
//! Pages are rendered on the server (`pages`); the only client code is a
//! small vendored script that re-reads a table's status every few seconds
//! while a backfill runs and recolours the calendar. Every page has a JSON
//! twin under `/api/` ([`api`]) that serves exactly what the CLI's `--json`
//! prints for the same question, because both call the same functions
//! (`logbook_core::answers`, `lifecycle::status`, `Stage::diff`).
//!
//! Read-only by construction: only `GET` (and `HEAD`) routes exist, so any
//! other method is refused with 405; table and stage names are validated
//! as the CLI validates them before anything is read, and a stage is
//! opened only if listed; every user-supplied string is escaped by the
//! templates; a request asks about at most ten years of dates. Like
//! `logbook serve`, it listens on loopback unless given a token, and then
//! answers only requests addressed to a loopback name (DNS rebinding).

pub mod api;
mod auth;
mod error;
mod pages;
pub mod summaries;

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::routing::get;
use axum::Router;
use logbook_core::Warehouse;

pub use error::UiError;

/// Requests answered at once; each may read a table's whole status, so
/// more wait rather than compete for the store.
pub const MAX_CONCURRENT_REQUESTS: usize = 8;

/// How the UI serves.
#[derive(Debug, Clone, Default)]
pub struct UiOptions {
    /// A bearer token every request must carry (header, or the cookie set
    /// by opening any page with `?token=`).
    pub token: Option<String>,
}

/// What every handler shares.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub(crate) warehouse: Warehouse,
    pub(crate) summaries: Arc<summaries::Summaries>,
}

/// The UI's routes over `warehouse`. The home page's first count starts
/// at its first visit (see [`summaries`]).
pub fn router(warehouse: Warehouse, options: UiOptions) -> Router {
    app(warehouse, options).0
}

fn app(warehouse: Warehouse, options: UiOptions) -> (Router, Arc<summaries::Summaries>) {
    let summaries = summaries::Summaries::new(warehouse.clone());
    let state = Arc::new(AppState {
        warehouse,
        summaries: summaries.clone(),
    });
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS));
    let routes = Router::new()
        .route("/", get(pages::home))
        .route("/tables/{table}", get(pages::table))
        .route("/tables/{table}/partitions/{date}", get(pages::partition))
        .route("/tables/{table}/stages/{stage}", get(pages::stage))
        .route("/assets/ui.css", get(pages::css))
        .route("/assets/ui.js", get(pages::js))
        .route("/api/tables", get(api::tables))
        .route("/api/runs", get(api::runs))
        .route("/api/tables/{table}/status", get(api::status))
        .route("/api/tables/{table}/log", get(api::log))
        .route("/api/tables/{table}/partitions", get(api::partitions))
        .route("/api/tables/{table}/partitions/{date}", get(api::partition))
        .route("/api/tables/{table}/schema", get(api::schema))
        .route("/api/tables/{table}/stages/{stage}", get(api::stage))
        .with_state(state)
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let permits = permits.clone();
            async move {
                // Requests beyond the limit wait their turn.
                let _permit = permits.acquire_owned().await;
                next.run(req).await
            }
        }));
    (auth::guard(routes, options.token), summaries)
}

/// Serve [`router`] on `listener` until `shutdown` completes, counting the
/// home page's tables from the start.
pub async fn serve(
    warehouse: Warehouse,
    options: UiOptions,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (router, summaries) = app(warehouse, options);
    summaries.warm();
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
