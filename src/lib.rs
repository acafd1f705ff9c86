//! logbook: a table format over Parquet, built so that re-running
//! yesterday's job is as safe as running today's.
//!
//! This facade re-exports the public API of the workspace crates. The
//! README follows; its Rust example is compiled as a doctest.
#![doc = include_str!("../README.md")]

pub use logbook_core::*;

/// SQL over logbook tables (DataFusion): sessions, providers, runs.
pub use logbook_datafusion as query;

/// The Arrow Flight SQL server (`logbook serve`).
pub use logbook_flight as flight;

/// logbook SQL on an Apache Ballista cluster (`logbook cluster`).
pub use logbook_cluster as cluster;
