//! What a commit changes, typed by operation: each operation carries
//! exactly what it needs, and the pipeline matches on it.

use chrono::NaiveDate;

use crate::format::{DataFile, DateRange, Operation, PropertiesChange, RunInfo};
use crate::schema::SchemaChange;

/// A commit waiting to be placed on the log.
#[derive(Debug)]
pub(crate) struct PendingCommit {
    /// The version the work was computed from.
    pub base_version: u64,
    pub run: RunInfo,
    pub change: Change,
    /// Set when the commit is one table's part of a multi-table publish
    /// (`publish` module): the entry then reads as a no-op until decided.
    pub txn: Option<TxnStart>,
}

/// The publish a part belongs to.
#[derive(Debug, Clone)]
pub(crate) struct TxnStart {
    pub seq: u64,
    pub id: uuid::Uuid,
    pub stage: String,
}

impl PendingCommit {
    pub fn new(base_version: u64, run: RunInfo, change: Change) -> Self {
        Self {
            base_version,
            run,
            change,
            txn: None,
        }
    }
}

/// One commit's change.
#[derive(Debug)]
pub(crate) enum Change {
    /// New contents of dates (a run's write).
    Replace(Vec<PartitionChange>),
    /// New contents of dates from a named stage, each with its own run.
    Publish(Vec<PartitionChange>),
    /// The same rows of dates in new files (compaction; each change has
    /// `rewrite_of`). Commutes with everything: a rewrite whose date moved
    /// since it was read is dropped, never a conflict.
    Compact(Vec<PartitionChange>),
    /// New contents of a whole dimension.
    Dimension(DimensionChange),
    /// Applied to the head's properties when the commit is built.
    Properties(PropertiesChange),
    /// Applied to the head's schema when the commit is built.
    Schema(SchemaChange),
    /// Expiry: the oldest version time travel may read from now on (the
    /// head's value is kept when it is larger).
    Retain { from: u64 },
    /// Vacuum: how many files it deleted, recorded in the entry.
    Vacuum { files_removed: u64 },
}

impl Change {
    /// The operation the log entry records.
    pub fn operation(&self) -> Operation {
        match self {
            Change::Replace(_) => Operation::ReplacePartitions,
            Change::Publish(_) => Operation::PublishStage,
            Change::Compact(_) => Operation::Compact,
            Change::Dimension(_) => Operation::ApplyDimension,
            Change::Properties(_) => Operation::SetProperties,
            Change::Schema(_) => Operation::AlterSchema,
            Change::Retain { .. } => Operation::Expire,
            Change::Vacuum { .. } => Operation::Vacuum,
        }
    }

    /// The partitions this commit writes (none for a change that writes
    /// no partition).
    pub fn partitions(&self) -> &[PartitionChange] {
        match self {
            Change::Replace(p) | Change::Publish(p) | Change::Compact(p) => p,
            _ => &[],
        }
    }
}

/// New contents of one partition.
#[derive(Debug, Clone)]
pub(crate) struct PartitionChange {
    pub date: NaiveDate,
    pub files: Vec<DataFile>,
    pub rows: u64,
    /// The run that computed this partition, when it is not the commit's
    /// own run (a published stage keeps each date's lineage).
    pub run: Option<RunInfo>,
    /// Set for compaction: the exact files this change rewrites. The change
    /// is dropped if the head's files for the date differ (the date was
    /// replaced or compacted since), and it keeps the partition's version and
    /// run, because the rows are unchanged.
    pub rewrite_of: Option<Vec<String>>,
    /// The schema version the rows were written under.
    pub schema_version: u32,
    /// What the partition must be at the head when this change commits
    /// (a backfill's guard); anything else is a `PartitionConflict`.
    pub expected: Option<ExpectedPartition>,
}

/// What a write expects the partition it replaces to be when it commits.
///
/// A backfill looks at a date, decides to recompute it and launches the
/// job; a production run may commit the date in between. The backfill
/// passes what it saw, and the commit refuses atomically (inside the commit
/// pipeline, against the head it builds on) if the date moved, so the
/// production run's rows are never overwritten.
///
/// ```
/// use logbook_core::ExpectedPartition;
/// assert_eq!("missing".parse(), Ok(ExpectedPartition::Missing));
/// assert_eq!("12".parse(), Ok(ExpectedPartition::Version(12)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedPartition {
    /// The date has never been committed.
    Missing,
    /// The date was last replaced by this version.
    Version(u64),
}

impl std::str::FromStr for ExpectedPartition {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "missing" => Ok(ExpectedPartition::Missing),
            v => v.parse().map(ExpectedPartition::Version).map_err(|_| {
                format!("expected partition {v:?}: give a version number or `missing`")
            }),
        }
    }
}

impl std::fmt::Display for ExpectedPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedPartition::Missing => f.write_str("missing"),
            ExpectedPartition::Version(v) => write!(f, "{v}"),
        }
    }
}

/// New contents of a whole dimension.
#[derive(Debug, Clone)]
pub(crate) struct DimensionChange {
    pub files: Vec<DataFile>,
    pub rows: u64,
    pub affected: Option<DateRange>,
}
