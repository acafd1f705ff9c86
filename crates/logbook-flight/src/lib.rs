//! logbook-flight: an Arrow Flight SQL server over a logbook warehouse.
//!
//! Analysts connect with any Flight SQL client (ADBC drivers for Python, Go,
//! Java and C; the Flight SQL JDBC driver for DBeaver and BI tools) and query
//! every table by name, `asof()` and `snapshot()`, in a run context chosen
//! with `SET logbook.logical_date = 'YYYY-MM-DD'` and
//! `SET logbook.dimensions = 'current'` (or the `x-logbook-logical-date` and
//! `x-logbook-dimensions` headers).
//!
//! - [`settings`]: what a statement runs as, and `SET` parsing.
//! - [`sessions`]: settings kept per client under a cookie.
//! - [`query`]: read-only planning, `?` parameters, error codes.
//! - [`prepared`]: prepared statements and their bound parameters.
//! - [`planned`]: plans kept from `GetFlightInfo` for their `DoGet`.
//! - [`metadata`]: catalogs, schemas, tables, table types, SQL info.
//! - [`results`]: streaming with a row limit and a log line per query.
//! - [`auth`]: the bearer token.
//! - [`service`](mod@service): the protocol calls, mapped onto the above.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use logbook_flight::{serve, ServerOptions};
//! let warehouse = logbook_core::Warehouse::open("./warehouse")?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
//! serve(warehouse, ServerOptions::default(), listener, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod metadata;
pub mod planned;
pub mod prepared;
pub mod query;
pub mod results;
pub mod service;
pub mod sessions;
pub mod settings;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use logbook_core::clock::{IdGenerator, UuidV7};
use logbook_core::Warehouse;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;

pub use auth::BearerAuth;
pub use service::LogbookFlightSql;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The bearer token every call must carry; `None` accepts every call
    /// (only sensible on loopback).
    pub token: Option<String>,
    /// Queries executing at once; more are refused with `ResourceExhausted`.
    pub max_concurrent_queries: usize,
    /// Rows one result may have; a larger result fails with `ResourceExhausted`.
    pub max_result_rows: u64,
    /// Client sessions (`SET` settings) kept; the least recently used goes.
    pub max_sessions: usize,
    /// Prepared statements open at once.
    pub max_prepared_statements: usize,
    /// Plans kept from `GetFlightInfo` for their `DoGet` (0: none, every
    /// fetch plans again); past it the oldest goes and its fetch plans again.
    pub max_kept_plans: usize,
    /// Where session ids and prepared-statement handles come from.
    pub ids: Arc<dyn IdGenerator>,
    /// Run queries on this cluster (planned here, at the versions read
    /// here); `None`: in this process.
    pub cluster: Option<logbook_cluster::Cluster>,
    /// Serve over TLS with this identity (`grpc+tls://`); `None`: plain.
    pub tls: Option<TlsIdentity>,
}

/// A server's TLS identity (shared with the cluster's processes).
pub use logbook_cluster::TlsIdentity;

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            token: None,
            max_concurrent_queries: 16,
            max_result_rows: 100_000_000,
            max_sessions: 10_000,
            max_prepared_statements: 10_000,
            max_kept_plans: 256,
            ids: Arc::new(UuidV7),
            cluster: None,
            tls: None,
        }
    }
}

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listener or the transport failed.
    #[error("the Flight SQL server on {addr} failed: {source}")]
    Transport {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
}

/// The gRPC service for `warehouse`, token check included: mount it on your
/// own tonic server, or call [`serve`].
pub fn service(
    warehouse: Warehouse,
    options: &ServerOptions,
) -> InterceptedService<FlightServiceServer<LogbookFlightSql>, BearerAuth> {
    FlightServiceServer::with_interceptor(
        LogbookFlightSql::new(warehouse, options),
        BearerAuth::new(options.token.as_deref()),
    )
}

/// Serve `warehouse` on `listener` until `shutdown` completes; queries in
/// flight finish first.
pub async fn serve(
    warehouse: Warehouse,
    options: ServerOptions,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_string(), |a: SocketAddr| a.to_string());
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        let identity = tonic::transport::Identity::from_pem(&tls.cert_pem, &tls.key_pem);
        server = server
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|source| ServeError::Transport {
                addr: addr.clone(),
                source,
            })?;
    }
    server
        .add_service(service(warehouse, &options))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|source| ServeError::Transport { addr, source })
}
