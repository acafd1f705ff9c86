//! Reads of a local table's files on the scan's own thread.
//!
//! object_store's `LocalFileSystem` sends every read to tokio's blocking
//! pool: a hand-off to another thread and back, a context switch or two
//! per range. A page-cache read of a column chunk takes microseconds, less
//! than the hand-off, so [`super::ObjectReader`] reads ranges of up to
//! `INLINE_MAX` (`crate::local_read`) bytes of a local file with `pread`
//! where it is, and larger ones (compaction's, a cold scan's big chunks)
//! through the pool, so that a slow disk or a network mount holds a
//! worker thread for one small read at most.
//!
//! Measured on the analyst workload's time-travel query (`sum(amount)` over
//! 45 files of one table, one process each; BENCHMARKS.md): 639 context
//! switches per process through the pool, 57 without (`perf stat -r 20`);
//! 23.9 against 16.7 ms for the query (medians of 11 alternating rounds,
//! both binaries with [`super::tune_allocator`]'s settings).
//!
//! After each read the task yields once (`local_read::YieldOnce`): with
//! reads that are always ready, a scan kept the tasks it wakes in its worker's own
//! slot, where the idle worker cannot steal them, and the range as-of join
//! (query 6) ran on one core (0.85 CPUs used against 1.5; 521 to 604 ms,
//! against 316 to 360 through the pool; with the yield, 323.1 against
//! 314.2 ms in the recorded run). Alternatives:
//! the pool for every read (object_store's way) and `block_in_place` (which
//! moves the worker's other tasks away on every read) each pay the
//! hand-off this avoids; `tokio::task::yield_now` waits for the worker to
//! go idle before waking the task, which never happens under an executor
//! nested in a tokio task.
//!
//! A file stays open from its first small read while its reader lives, so
//! a scan's small reads of a file deleted under it (by a vacuum past its
//! retention) still succeed on local disk, where an object store's would
//! fail; a large read opens the file again through the store and fails
//! with `NotFound` as before.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;

use crate::error::ShortFile;

/// The file on local disk behind an object, opened at its first read.
#[derive(Debug, Clone)]
pub(crate) struct LocalFile {
    file: PathBuf,
    open: Option<Arc<std::fs::File>>,
}

impl LocalFile {
    /// The local `file`, on platforms where it can be read at an offset
    /// without a seek (others read through the store).
    pub(crate) fn new(file: PathBuf) -> Option<Self> {
        cfg!(unix).then_some(Self { file, open: None })
    }

    /// `ranges` of the file, read on this thread. Errors are the store's,
    /// naming the object `path` of `size` bytes (the manifest's), so that
    /// they classify as the store's would: a missing file is `NotFound`,
    /// one that ends early a [`ShortFile`].
    pub(crate) fn read(
        &mut self,
        path: &Path,
        size: u64,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let error = |source: std::io::Error, range: Option<&Range<u64>>| match source.kind() {
            std::io::ErrorKind::NotFound => crate::local_read::missing(path, source),
            std::io::ErrorKind::UnexpectedEof => ShortFile {
                path: path.to_string(),
                end: range.map_or(size, |r| r.end),
                size,
                found: None,
            }
            .storage_error("LocalFileSystem"),
            _ => object_store::Error::Generic {
                store: "LocalFileSystem",
                source: format!("{path}: {source}").into(),
            },
        };
        let handle = match &self.open {
            Some(handle) => handle.clone(),
            None => {
                let opened = std::fs::File::open(&self.file).map_err(|e| error(e, None))?;
                self.open.insert(Arc::new(opened)).clone()
            }
        };
        ranges
            .iter()
            .map(|range| {
                let mut buf = vec![0u8; range.end.saturating_sub(range.start) as usize];
                read_at(&handle, &mut buf, range.start).map_err(|e| error(e, Some(range)))?;
                Ok(Bytes::from(buf))
            })
            .collect()
    }
}

#[cfg(unix)]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(_: &std::fs::File, _: &mut [u8], _: u64) -> std::io::Result<()> {
    unreachable!("LocalFile::new is None off unix")
}
