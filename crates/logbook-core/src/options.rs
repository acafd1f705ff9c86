//! Knobs a table is opened with: injected clock and ids, file sizes, retries.

use std::sync::Arc;

use crate::clock::{Clock, IdGenerator, SystemClock, UuidV7};

/// How a [`crate::Table`] writes and commits.
///
/// ```
/// use std::sync::Arc;
/// use logbook_core::{TableOptions, clock::ManualClock};
/// let opts = TableOptions::default()
///     .with_clock(Arc::new(ManualClock::new(0)))
///     .with_target_file_size(64 << 20);
/// assert_eq!(opts.target_file_size, 64 << 20);
/// ```
#[derive(Debug, Clone)]
pub struct TableOptions {
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    /// A data file is closed once it reaches about this many bytes.
    pub target_file_size: usize,
    /// A data file holds at most this many rows.
    pub max_rows_per_file: usize,
    /// A row group is flushed once its buffered data reaches this many bytes
    /// (this bounds a writer's memory).
    pub row_group_bytes: usize,
    /// A row group holds at most this many rows.
    pub max_row_group_rows: usize,
    /// How many times a commit retries after losing the race for a version.
    pub max_commit_attempts: usize,
    /// A running writer refreshes its intent marker at most this often (ms).
    pub heartbeat_interval_ms: i64,
    /// A marker whose heartbeat is older than this (ms) is an abandoned run.
    pub running_timeout_ms: i64,
    /// How long a commit waits (ms, on its own monotonic clock from when it
    /// first found it) for the warehouse to decide a multi-table publish
    /// whose part is the table's head, before aborting that publish: a
    /// publisher that died leaves its parts undecided, and no version may
    /// be built on one (`publish` module).
    pub publish_wait_ms: u64,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7),
            target_file_size: 128 << 20,
            max_rows_per_file: usize::MAX,
            row_group_bytes: 64 << 20,
            max_row_group_rows: 1 << 20,
            max_commit_attempts: 100,
            heartbeat_interval_ms: 30_000,
            running_timeout_ms: 10 * 60_000,
            publish_wait_ms: 30_000,
        }
    }
}

impl TableOptions {
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    pub fn with_ids(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.ids = ids;
        self
    }
    pub fn with_target_file_size(mut self, bytes: usize) -> Self {
        self.target_file_size = bytes.max(1);
        self
    }
    pub fn with_max_rows_per_file(mut self, rows: usize) -> Self {
        self.max_rows_per_file = rows.max(1);
        self
    }
    pub fn with_max_commit_attempts(mut self, attempts: usize) -> Self {
        self.max_commit_attempts = attempts.max(1);
        self
    }
    /// Set the heartbeat interval and the timeout after which a running
    /// write counts as abandoned (both in milliseconds).
    pub fn with_running_timeout(mut self, heartbeat_ms: i64, timeout_ms: i64) -> Self {
        self.heartbeat_interval_ms = heartbeat_ms.max(1);
        self.running_timeout_ms = timeout_ms.max(heartbeat_ms.max(1));
        self
    }
    /// Set how long a commit waits for an undecided multi-table publish
    /// before aborting it (see [`TableOptions::publish_wait_ms`]).
    pub fn with_publish_wait(mut self, ms: u64) -> Self {
        self.publish_wait_ms = ms;
        self
    }
}
