//! logbook-core: a table format over Parquet where each run of a pipeline
//! replaces exactly the partition (logical date) it owns, atomically and
//! idempotently.
//!
//! - [`storage`]: where tables live (local path, `memory://`, `s3://`, ...).
//! - [`format`](mod@format): log entries and manifests as stored.
//! - [`table`], [`snapshot`], [`writer`]: the table API.
//!
//! Internal, in the order a write reaches them: `commit` (the pipeline:
//! conflicts, idempotency, retry) and `log` (the commit point, numbered
//! entries created with put-if-absent); `intent` (markers of running
//! writes) beside them.
//!
//! No query engine here: `logbook-datafusion` builds on this crate.

pub mod answers;
pub mod budget;
pub mod change_index;
pub mod clock;
mod commit;
pub mod dates;
mod dictionary_choice;
pub mod dimension;
pub mod error;
mod file_layout;
mod file_stats;
mod file_writer;
pub mod format;
mod handle;
mod intent;
pub mod lifecycle;
mod local_read;
mod log;
pub mod maintenance;
pub mod mirror;
pub mod names;
pub mod options;
pub mod publish;
pub mod reader;
pub(crate) mod scd2;
pub mod schema;
pub mod snapshot;
pub mod stage;
mod staged_files;
pub mod storage;
pub mod table;
pub mod table_files;
mod validate;
pub mod warehouse;
pub mod writer;

pub use commit::{CommitInfo, ExpectedPartition};
pub use dimension::DimensionCommit;
pub use error::{Error, ErrorKind, Result};
pub use format::{
    ColumnStats, DataFile, DateRange, DateSpan, DimensionMode, InputRead, LogEntry, Mirror,
    MirrorChange, MirrorFormat, Operation, PartitionEntry, PartitionSummary, PropertiesChange,
    RunClass, RunInfo, RunRef, TableProperties,
};
pub use intent::RunMarker;
pub use options::TableOptions;
pub use schema::{ColumnType, TableKind, TableSchema, VALID_FROM, VALID_TO};
pub use snapshot::Snapshot;
pub use stage::{Stage, StageDiff, StageInfo, StagedPartition};
pub use storage::StorageLocation;
pub use table::Table;
pub use table_files::TableFiles;
pub use warehouse::Warehouse;
pub use writer::{Destination, PartitionWriter};
