//! Reads of a local directory's files on the calling thread.
//!
//! object_store's `LocalFileSystem` sends every read to tokio's blocking
//! pool, a hand-off to another thread and back that costs more than a
//! page-cache read of a few hundred KiB. Data files' small ranges
//! (`reader::local`) and whole small objects (log entries, the hint,
//! manifests, markers: `StorageLocation::get_bytes`) are
//! read where the caller runs instead, up to [`INLINE_MAX`] bytes; larger
//! reads, and anything unclear, go through the store. Measures in
//! BENCHMARKS.md ("Analyst queries").

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use object_store::path::Path;

/// Reads of at most this many bytes in all are made on the calling
/// thread; larger ones go through the store's blocking pool.
pub(crate) const INLINE_MAX: u64 = 1024 * 1024;

/// The whole of a small local `file` (the object `path`), read on this
/// thread: log entries, manifests and markers, which object_store's local
/// store would each send to the blocking pool. `None` when the file is
/// larger than [`INLINE_MAX`], not a plain file, or fails other than by
/// being missing: the store then reads it and reports its own error.
pub(crate) fn read_small(
    file: &std::path::Path,
    path: &Path,
) -> Option<object_store::Result<Bytes>> {
    use std::io::Read;
    let mut opened = match std::fs::File::open(file) {
        Ok(opened) => opened,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Err(missing(path, e))),
        Err(_) => return None,
    };
    let meta = opened.metadata().ok()?;
    if !meta.is_file() || meta.len() > INLINE_MAX {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    opened.read_to_end(&mut bytes).ok()?;
    Some(Ok(Bytes::from(bytes)))
}

/// Whether the local `file` exists as a plain file (a `stat` on this
/// thread, where the store's `HEAD` goes through the blocking pool);
/// `None` when that is not clear (the store then answers).
pub(crate) fn is_file(file: &std::path::Path) -> Option<bool> {
    match std::fs::metadata(file) {
        Ok(meta) if meta.is_file() => Some(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(false),
        _ => None,
    }
}

/// The store's `NotFound` for the object `path`, as object_store's local
/// store reports a missing file.
pub(crate) fn missing(path: &Path, source: std::io::Error) -> object_store::Error {
    object_store::Error::NotFound {
        path: path.to_string(),
        source: Box::new(source),
    }
}

/// Pending once, having woken itself: the task goes to the back of its
/// worker's queue, where an idle worker may take it, and any executor
/// polls it again at once.
#[derive(Debug, Default)]
pub(crate) struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A runtime whose blocking pool has one thread, for tests that hold it
/// busy to show a read does not wait for it.
#[cfg(test)]
pub(crate) fn one_blocking_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
