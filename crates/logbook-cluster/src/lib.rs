//! logbook SQL on Apache Ballista: more than one machine for a query.
//!
//! - [`client`]: a query is planned where it is asked (every table version
//!   pinned there), and its physical plan runs on the cluster.
//! - [`codec`]: logbook's scan and point-in-time join as bytes; a decoded
//!   scan reads the planned files from the warehouse the receiving process
//!   opened with its own credentials.
//! - [`scheduler`] and [`executor`]: Ballista's processes with that codec,
//!   started from the `logbook` binary (`logbook cluster scheduler`,
//!   `logbook cluster executor`).
//! - [`tls`]: mutual TLS between them and their clients.
//!
//! The guarantee: a query on a cluster returns the rows the same query
//! returns in one process at the versions it planned with, whatever
//! commits land while it runs; an executor lost mid-query gives its tasks
//! to another executor (Ballista's task retry) or fails the query with the
//! reason, never wrong rows. Design notes: `docs/distributed-sql-design.md`.

pub mod client;
pub mod codec;
pub mod error;
pub mod executor;
mod scheduled;
pub mod scheduler;
pub mod tls;
mod wire;

pub use client::{Cluster, PlannedQuery};
pub use codec::LogbookCodec;
pub use error::ClusterError;
pub use executor::{run_executor, ExecutorOptions};
pub use scheduler::{run_scheduler, SchedulerOptions};
pub use tls::{ClusterTls, TlsIdentity};
