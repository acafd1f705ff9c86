//! logbook-datafusion: SQL over logbook tables.
//!
//! - [`provider`]: `TableProvider`s (latest or pinned; dimension views).
//! - [`exec`]: the scan node, with partition pruning and statistics.
//! - [`catalog`]: a warehouse as a schema; `asof()` and `snapshot()`.
//! - [`ffi`]: a table exported to another DataFusion build (stable FFI).
//! - [`functions`]: `logical_date()` and friends; wall-clock refusals.
//! - [`pit`]: point-in-time joins on validity ranges, by binary search.
//! - [`session`](mod@session): a configured `SessionContext`.
//! - [`run`]: a job run for a logical date, with lineage.

pub mod catalog;
pub mod error;
pub mod exec;
pub mod ffi;
pub mod functions;
pub mod lineage;
pub mod pit;
pub mod plain;
pub mod provider;
pub mod prune;
pub mod run;
pub mod session;

pub use catalog::QueryOptions;
/// The DataFusion version this crate builds on.
pub use datafusion;
/// The stable FFI crate [`ffi`] exports through (a host needs its types).
pub use datafusion_ffi;
pub use error::QueryError;
pub use lineage::Lineage;
pub use provider::{DimensionView, LogbookTableProvider};
pub use run::Run;
pub use session::{execute, prepare, session, sql};
