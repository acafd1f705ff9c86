//! What scans read: bytes fetched, files opened, row groups and rows,
//! summed over every file of a scan (shared by its partitions).

use std::sync::atomic::{AtomicU64, Ordering};

/// What scans read, summed over every file they opened.
#[derive(Debug, Default)]
pub struct ReadCounters {
    bytes: AtomicU64,
    files: AtomicU64,
    row_groups: AtomicU64,
    row_groups_read: AtomicU64,
    rows_read: AtomicU64,
}

/// A copy of [`ReadCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCount {
    /// Bytes fetched from the store (footers, indexes, filters, pages).
    pub bytes: u64,
    /// Files opened.
    pub files: u64,
    /// Row groups in those files.
    pub row_groups: u64,
    /// Row groups read (not skipped).
    pub row_groups_read: u64,
    /// Rows decoded from those row groups.
    pub rows_read: u64,
}

impl ReadCounters {
    pub(crate) fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add_file(&self, row_groups: u64, row_groups_read: u64) {
        self.files.fetch_add(1, Ordering::Relaxed);
        self.row_groups.fetch_add(row_groups, Ordering::Relaxed);
        self.row_groups_read
            .fetch_add(row_groups_read, Ordering::Relaxed);
    }

    pub(crate) fn add_rows(&self, n: u64) {
        self.rows_read.fetch_add(n, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn get(&self) -> ReadCount {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReadCount {
            bytes: l(&self.bytes),
            files: l(&self.files),
            row_groups: l(&self.row_groups),
            row_groups_read: l(&self.row_groups_read),
            rows_read: l(&self.rows_read),
        }
    }
}
