//! logbook: a table format over Parquet, built so that re-running
//! yesterday's job is as safe as running today's.
//!
//! This facade re-exports the public API of the workspace crates.

pub use logbook_core::*;
