//! The one public error type of logbook-core.
//!
//! Every variant names the table, partition, file or field it is about, and
//! [`Error::kind`] tells the caller what to do next.

use chrono::NaiveDate;

/// What a caller should do about an [`Error`]. More kinds may come: match
/// with a fallback that treats an unknown kind as a failure to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input (data, schema, name, option) is wrong: fix it; retrying will not help.
    InvalidInput,
    /// Another writer committed a conflicting change: re-run from a fresh snapshot.
    Conflict,
    /// The table, version or object does not exist.
    NotFound,
    /// The thing to create exists already.
    AlreadyExists,
    /// The table's stored state is damaged or unreadable: run `check`, do not write.
    Corrupt,
    /// The backend cannot give the guarantees logbook needs (e.g. put-if-absent).
    Unsupported,
    /// Storage or I/O failed; retrying the same call may succeed.
    Transient,
}

/// Errors from logbook-core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidName {
        what: &'static str,
        value: String,
        reason: String,
    },

    #[error("invalid schema for table {table}: {reason}")]
    InvalidSchema { table: String, reason: String },

    #[error("table {table}, {what}: field {field:?} {problem}")]
    SchemaMismatch {
        table: String,
        /// What was being written, e.g. `partition 2026-03-15`.
        what: String,
        field: String,
        problem: String,
    },

    #[error(
        "table {table}, partition {date}: {count} row(s) have {column} outside the partition, e.g. {examples}"
    )]
    RowsOutsidePartition {
        table: String,
        date: NaiveDate,
        column: String,
        count: usize,
        examples: String,
    },

    #[error("table {table}, partition {date}: {count} row(s) have a null {column}")]
    NullPartitionValue {
        table: String,
        date: NaiveDate,
        column: String,
        count: usize,
    },

    #[error("table {table}: {reason}")]
    InvalidInput { table: String, reason: String },

    #[error(
        "table {table}, stage {stage}, partition {date}: conflict: version {winning_version} replaced this date on the main line after the stage began at version {base_version}; re-stage the date or publish with --force"
    )]
    StageConflict {
        table: String,
        stage: String,
        date: chrono::NaiveDate,
        base_version: u64,
        winning_version: u64,
    },

    #[error(
        "table {table}, partition {date}: conflict: version {winning_version} replaced this date after this write started from version {base_version}; re-run from the latest snapshot"
    )]
    PartitionConflict {
        table: String,
        date: NaiveDate,
        base_version: u64,
        winning_version: u64,
    },

    #[error(
        "table {table}: conflict: version {winning_version} changed the dimension after this change started from version {base_version}"
    )]
    DimensionConflict {
        table: String,
        base_version: u64,
        winning_version: u64,
    },

    #[error(
        "{what}: backfill slot {slot} (generation {generation}) is no longer this run's (its lease expired and another run took the slot over, or the slot was released); the run stopped without committing: run it again"
    )]
    SlotLost {
        what: String,
        slot: u32,
        generation: u64,
    },

    #[error("table {table}: key {key}: {reason}; nothing was committed")]
    DimensionInvariant {
        table: String,
        key: String,
        reason: String,
    },

    #[error(
        "stage {stage}: publish {seq} was {reason}; nothing was published; run the publish again"
    )]
    PublishAborted {
        stage: String,
        seq: u64,
        reason: String,
    },

    #[error("table {table}: version {version} is a part of multi-table publish {seq}, not decided yet; {what} waits for nothing: run it again")]
    PublishUndecided {
        table: String,
        version: u64,
        seq: u64,
        what: String,
    },

    #[error("table {table}: version {version} is a part of the warehouse's multi-table publish {seq}, decided in the warehouse's publish log; open the table through its warehouse")]
    NoWarehouse {
        table: String,
        version: u64,
        seq: u64,
    },

    #[error("table {table}: gave up committing after {attempts} attempts lost the race for the next version")]
    CommitContention { table: String, attempts: usize },

    #[error("table {table}: {what} was interrupted (the runtime is shutting down); nothing was committed")]
    Interrupted { table: String, what: String },

    #[error("table {table}: partition {date}: the write stalled for {stalled_min} min and vacuum deleted its staged file {path} meanwhile; nothing was committed; run it again")]
    StagedFileLost {
        table: String,
        date: NaiveDate,
        path: String,
        stalled_min: i64,
    },

    #[error("table {table}: {what}: the write stalled for {stalled_min} min and could not keep its staged files from vacuum (its intent marker was claimed by a vacuum, or is gone); nothing was committed; run it again")]
    StagedFilesTaken {
        table: String,
        /// The write: `partition <date>`, or the rewrite's run.
        what: String,
        stalled_min: i64,
    },

    #[error("table {table} not found at {location}")]
    TableNotFound { table: String, location: String },

    #[error("table {table} already exists at {location}")]
    TableExists { table: String, location: String },

    #[error("table {table}: version {version} not found (latest is {latest})")]
    VersionNotFound {
        table: String,
        version: u64,
        latest: u64,
    },

    #[error("table {table}: no version was committed at or before {timestamp}")]
    NoVersionAtTime { table: String, timestamp: String },

    #[error("table {table}: version {version} has expired; time travel reaches back to version {oldest}")]
    VersionExpired {
        table: String,
        version: u64,
        oldest: u64,
    },

    #[error("table {table}: writer for partition {date} is already {state}")]
    WriterClosed {
        table: String,
        date: NaiveDate,
        state: &'static str,
    },

    #[error("table {table}: corrupt {path}: {reason}")]
    Corrupt {
        table: String,
        path: String,
        reason: String,
    },

    #[error("table {table}: the {format} mirror cannot follow the log at {path}: {reason}; turning it off (`logbook alter {table} --mirror` without {format}) and on again starts it from the table's current state")]
    MirrorDiverged {
        table: String,
        /// `delta` or `iceberg`.
        format: String,
        path: String,
        reason: String,
    },

    #[error("table {table}: {path} was written in format version {found} by a newer logbook; this build reads up to version {supported}: upgrade logbook")]
    NewerFormat {
        table: String,
        path: String,
        found: u32,
        supported: u32,
    },

    #[error("unsupported storage location {location}: {reason}")]
    UnsupportedStore { location: String, reason: String },

    #[error("storage error at {path}: {source}")]
    Storage {
        path: String,
        #[source]
        source: object_store::Error,
    },

    #[error("parquet error in {path}: {source}")]
    Parquet {
        path: String,
        #[source]
        source: parquet::errors::ParquetError,
    },

    #[error("arrow error in {context}: {source}")]
    Arrow {
        context: String,
        #[source]
        source: arrow_schema::ArrowError,
    },
}

impl Error {
    /// What the caller should do about this error.
    pub fn kind(&self) -> ErrorKind {
        use Error::*;
        match self {
            InvalidName { .. }
            | InvalidSchema { .. }
            | SchemaMismatch { .. }
            | RowsOutsidePartition { .. }
            | NullPartitionValue { .. }
            | InvalidInput { .. }
            | WriterClosed { .. }
            | DimensionInvariant { .. } => ErrorKind::InvalidInput,
            PartitionConflict { .. } | DimensionConflict { .. } | StageConflict { .. } => {
                ErrorKind::Conflict
            }
            CommitContention { .. }
            | PublishAborted { .. }
            | PublishUndecided { .. }
            | Interrupted { .. }
            | StagedFileLost { .. }
            | StagedFilesTaken { .. }
            | SlotLost { .. } => ErrorKind::Transient,
            TableNotFound { .. }
            | VersionNotFound { .. }
            | NoVersionAtTime { .. }
            | VersionExpired { .. } => ErrorKind::NotFound,
            TableExists { .. } => ErrorKind::AlreadyExists,
            Corrupt { .. } | MirrorDiverged { .. } => ErrorKind::Corrupt,
            UnsupportedStore { .. } | NewerFormat { .. } | NoWarehouse { .. } => {
                ErrorKind::Unsupported
            }
            Storage { source, .. } => match source {
                e if ShortFile::is(e) => ErrorKind::Corrupt,
                object_store::Error::NotFound { .. } => ErrorKind::NotFound,
                object_store::Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
                object_store::Error::NotImplemented { .. } => ErrorKind::Unsupported,
                _ => ErrorKind::Transient,
            },
            Parquet { .. } | Arrow { .. } => ErrorKind::InvalidInput,
        }
    }

    pub(crate) fn storage(path: impl std::fmt::Display, source: object_store::Error) -> Self {
        Error::Storage {
            path: path.to_string(),
            source,
        }
    }

    /// A Parquet error at `path`; a storage error that the Parquet reader or
    /// writer wrapped is unwrapped, so it classifies as a storage error
    /// (transient, not "fix your input").
    pub(crate) fn parquet(
        path: impl std::fmt::Display,
        source: parquet::errors::ParquetError,
    ) -> Self {
        let source = match source {
            parquet::errors::ParquetError::External(e) => match storage_error(e) {
                Ok(storage) => return Error::storage(path, storage),
                Err(e) => parquet::errors::ParquetError::External(e),
            },
            source => source,
        };
        Error::Parquet {
            path: path.to_string(),
            source,
        }
    }

    pub(crate) fn arrow(context: impl std::fmt::Display, source: arrow_schema::ArrowError) -> Self {
        Error::Arrow {
            context: context.to_string(),
            source,
        }
    }
}

/// A data file shorter than the size its manifest records: cut short or
/// replaced behind logbook's back. The readers return it as the source of
/// a storage error (the Parquet reader passes those through), so that it
/// names the object, and [`Error::kind`] classes it
/// [`ErrorKind::Corrupt`]: retrying cannot help.
#[derive(Debug)]
pub(crate) struct ShortFile {
    pub(crate) path: String,
    /// The end of the range that could not be read.
    pub(crate) end: u64,
    /// The size the manifest records.
    pub(crate) size: u64,
    /// The object's size, when the store said.
    pub(crate) found: Option<u64>,
}

impl std::fmt::Display for ShortFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, size) = (&self.path, self.size);
        match self.found {
            Some(found) => write!(
                f,
                "{path} holds {found} bytes of the {size} its manifest records"
            ),
            None => write!(
                f,
                "{path} ends before byte {} of the {size} its manifest records",
                self.end
            ),
        }?;
        write!(f, "; `logbook check` lists the table's damaged files")
    }
}

impl std::error::Error for ShortFile {}

impl ShortFile {
    /// As the store error the readers return.
    pub(crate) fn storage_error(self, store: &'static str) -> object_store::Error {
        object_store::Error::Generic {
            store,
            source: Box::new(self),
        }
    }

    /// Whether `e` is one.
    pub(crate) fn is(e: &object_store::Error) -> bool {
        matches!(e, object_store::Error::Generic { source, .. } if source.is::<ShortFile>())
    }
}

type BoxedError = Box<dyn std::error::Error + Send + Sync>;

/// The object store error inside `e`, boxed directly (our reader) or in an
/// `io::Error` (parquet's async writer over object_store's `BufWriter`).
fn storage_error(e: BoxedError) -> std::result::Result<object_store::Error, BoxedError> {
    let e = match e.downcast::<object_store::Error>() {
        Ok(storage) => return Ok(*storage),
        Err(e) => e,
    };
    let io = e.downcast::<std::io::Error>()?;
    if !io
        .get_ref()
        .is_some_and(|inner| inner.is::<object_store::Error>())
    {
        return Err(io);
    }
    let inner = io.into_inner().expect("checked above");
    Ok(*inner
        .downcast::<object_store::Error>()
        .expect("checked above"))
}

/// Result alias for logbook-core.
pub type Result<T, E = Error> = std::result::Result<T, E>;
