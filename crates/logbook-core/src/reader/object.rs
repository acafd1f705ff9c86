//! One Parquet object as parquet's `AsyncFileReader`, counting the bytes it
//! fetches.
//!
//! The first fetch is the footer's: the object's last 64 KiB, or the whole
//! object when it is small ([`WHOLE_OBJECT_MAX`]). Those bytes are kept,
//! and any later range that lies within them (a column chunk of a small
//! file, a page index or bloom filter near the end) is served from memory:
//! a small file costs one request instead of two.
//!
//! Measured on the analyst workload's `sum(amount)` (45 files of 320 KB,
//! local disk; BENCHMARKS.md) and not kept:
//! - fetching only the part of a range before the kept tail and joining
//!   the two: a third fewer bytes, but the joined copy of each column chunk
//!   cost 45% more page faults and 18% more CPU time;
//! - reading whole objects up to 1 MiB: no faster on local disk, with 2.3
//!   times the bytes. The bound stays where the extra bytes cost no more
//!   than a request on local disk.
//!
//! On an object store the bound is [`REMOTE_WHOLE_OBJECT_MAX`]: there a
//! request is a round trip, and the analyst workload on S3 at 20 ms per
//! request (BENCHMARKS.md) read its 345 KB files in two requests each.
//!
//! A file of a table on local disk is read directly, not through the store
//! (`local.rs` says when and why).
//!
//! Every read is checked against the size the manifest records: fewer
//! bytes than asked (a store clamps a range past the end), or a refusal
//! after which the store says the object is smaller, is a
//! [`crate::error::ShortFile`], classed corrupt. So several ranges of a
//! remote object are fetched here, coalesced as object_store's own
//! `get_ranges` does, each checked before it is sliced.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};
use object_store::path::Path;
use object_store::{coalesce_ranges, ObjectStore, ObjectStoreExt, OBJECT_STORE_COALESCE_DEFAULT};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::counters::ReadCounters;
use super::local::LocalFile;
use crate::error::ShortFile;
use crate::local_read::{YieldOnce, INLINE_MAX};
use crate::storage::StorageLocation;

/// Objects up to this size are fetched whole with their footer, in one
/// request. On an object store a round trip costs far more than this many
/// bytes; on local disk, where a read is a `pread`, the bound was set when
/// reads went through a blocking pool (a hand-off cost tens of
/// microseconds, about what copying this many bytes from the page cache
/// does) and was not measured again.
pub(crate) const WHOLE_OBJECT_MAX: u64 = 256 * 1024;

/// [`WHOLE_OBJECT_MAX`] on an object store, where each request is a
/// round trip over a network: at 20 ms per request and 50 MB/s per
/// connection, a round trip costs as much time as a megabyte.
pub(crate) const REMOTE_WHOLE_OBJECT_MAX: u64 = 1024 * 1024;

/// How long a failed read waits for the store to say the object's size.
const SIZE_QUESTION: std::time::Duration = std::time::Duration::from_secs(5);

/// How much of a larger object's tail the footer fetch takes: most
/// footers, with their page index, fit in it.
const FOOTER_PREFETCH: u64 = 64 * 1024;

/// Reads one Parquet object whose size is known from the manifest, so the
/// footer costs one ranged read and no `HEAD`.
#[derive(Debug, Clone)]
pub struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    counters: Option<Arc<ReadCounters>>,
    /// The object's bytes from `kept_from` to its end, once fetched.
    kept: Option<Bytes>,
    kept_from: u64,
    /// The file behind the object when its table is on local disk.
    local: Option<LocalFile>,
    /// Objects up to this size are fetched whole with their footer.
    whole_max: u64,
    /// Whether the store is a local directory, whose `get_ranges` checks
    /// each range against the file (others are read range by range here).
    on_disk: bool,
}

impl ObjectReader {
    /// A reader of `path`, `size` bytes long.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        Self {
            store,
            path,
            size,
            counters: None,
            kept: None,
            kept_from: size,
            local: None,
            whole_max: WHOLE_OBJECT_MAX,
            on_disk: false,
        }
    }

    /// A reader of the object at `path` of `location`: read from local disk
    /// directly when the location is a local directory, and whole up to
    /// [`REMOTE_WHOLE_OBJECT_MAX`] when it is an object store.
    pub(crate) fn at(location: &StorageLocation, path: Path, size: u64) -> Self {
        let file = location.local_file(&path);
        Self {
            on_disk: file.is_some(),
            local: file.and_then(LocalFile::new),
            whole_max: match location.is_remote() {
                true => REMOTE_WHOLE_OBJECT_MAX,
                false => WHOLE_OBJECT_MAX,
            },
            ..Self::new(location.store().clone(), path, size)
        }
    }

    /// Add every byte fetched to `counters`.
    pub fn counting(mut self, counters: Arc<ReadCounters>) -> Self {
        self.counters = Some(counters);
        self
    }

    fn count(&self, bytes: u64) {
        if let Some(c) = &self.counters {
            c.add_bytes(bytes);
        }
    }

    /// `range` from the kept tail, if it lies within it.
    fn kept(&self, range: &Range<u64>) -> Option<Bytes> {
        let kept = self.kept.as_ref()?;
        let from = self.kept_from;
        (range.start >= from && range.end <= from + kept.len() as u64)
            .then(|| kept.slice((range.start - from) as usize..(range.end - from) as usize))
    }

    /// Fetch the footer's bytes (the tail, or all of a small object) and keep them.
    async fn fetch_tail(&mut self) -> object_store::Result<()> {
        let from = match self.size <= self.whole_max {
            true => 0,
            false => self.size.saturating_sub(FOOTER_PREFETCH),
        };
        if self.kept.is_some() && self.kept_from <= from {
            return Ok(());
        }
        self.count(self.size - from);
        let tail = from..self.size;
        let bytes = self.fetch(vec![tail]).await?.remove(0);
        self.kept = Some(bytes);
        self.kept_from = from;
        Ok(())
    }

    /// `ranges` of the object, in order: from the local file when there
    /// is one and they are small, else from the store.
    fn fetch(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'static, object_store::Result<Vec<Bytes>>> {
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        if let Some(local) = self.local.as_mut().filter(|_| total <= INLINE_MAX) {
            let read = local.read(&self.path, self.size, &ranges);
            return async move {
                YieldOnce::default().await;
                read
            }
            .boxed();
        }
        let (store, path, size) = (self.store.clone(), self.path.clone(), self.size);
        let on_disk = self.on_disk;
        async move {
            let one = |r: Range<u64>| fetch_range(&store, &path, r, size);
            let got = match ranges.as_slice() {
                [r] => one(r.clone()).await.map(|b| vec![b]),
                // A local directory's store checks each range itself.
                _ if on_disk => store.get_ranges(&path, &ranges).await,
                // object_store's own `get_ranges` slices what a remote store
                // returns, and a store clamps a range past the end: a file
                // cut short would panic there. Each read is checked here.
                _ => coalesce_ranges(&ranges, one, OBJECT_STORE_COALESCE_DEFAULT).await,
            };
            match got {
                Err(e)
                    if ShortFile::is(&e) || matches!(e, object_store::Error::NotFound { .. }) =>
                {
                    Err(e)
                }
                // Stores refuse a range past the end in their own words;
                // one question tells a damaged file from a failing store
                // (briefly: a store that is down has spent its retries).
                Err(e) => match tokio::time::timeout(SIZE_QUESTION, store.head(&path)).await {
                    Ok(Ok(meta)) if meta.size < size => {
                        Err(short(&path, ranges_end(&ranges), size, Some(meta.size)))
                    }
                    _ => Err(e),
                },
                Ok(got) => Ok(got),
            }
        }
        .boxed()
    }
}

/// `range` of the object at `path`, whose manifest records `size` bytes:
/// fewer bytes than asked are a [`ShortFile`].
async fn fetch_range(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    range: Range<u64>,
    size: u64,
) -> object_store::Result<Bytes> {
    let bytes = store.get_range(path, range.clone()).await?;
    let found = range.start + bytes.len() as u64;
    match found < range.end {
        true => Err(short(path, range.end, size, Some(found))),
        false => Ok(bytes),
    }
}

/// The object at `path` ends before `end`, short of the manifest's `size`.
fn short(path: &Path, end: u64, size: u64, found: Option<u64>) -> object_store::Error {
    ShortFile {
        path: path.to_string(),
        end,
        size,
        found,
    }
    .storage_error("object store")
}

fn ranges_end(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end).max().unwrap_or(0)
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        if let Some(bytes) = self.kept(&range) {
            return futures::future::ready(Ok(bytes)).boxed();
        }
        self.count(range.end.saturating_sub(range.start));
        self.fetch(vec![range])
            .map_ok(|mut got| got.remove(0))
            .map_err(external)
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        // Serve what is kept; fetch the rest in one call (a store
        // coalesces nearby ranges).
        let served: Vec<Option<Bytes>> = ranges.iter().map(|r| self.kept(r)).collect();
        let missing: Vec<Range<u64>> = ranges
            .iter()
            .zip(&served)
            .filter(|(_, s)| s.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        self.count(missing.iter().map(|r| r.end.saturating_sub(r.start)).sum());
        async move {
            if missing.is_empty() {
                return Ok(served.into_iter().flatten().collect());
            }
            let mut fetched = self.fetch(missing).await.map_err(external)?.into_iter();
            served
                .into_iter()
                .map(|kept| {
                    kept.or_else(|| fetched.next()).ok_or_else(|| {
                        ParquetError::General(format!(
                            "{}: the store returned fewer ranges than asked",
                            self.path
                        ))
                    })
                })
                .collect()
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            self.fetch_tail().await.map_err(external)?;
            let size = self.size;
            let hint = size - self.kept_from;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(hint as usize))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    async fn reader(size: u64) -> (ObjectReader, Vec<u8>, Arc<ReadCounters>) {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let path = Path::from("f.parquet");
        store
            .put(&path, PutPayload::from(data.clone()))
            .await
            .unwrap();
        let counters = Arc::new(ReadCounters::default());
        let reader = ObjectReader::new(store, path, size).counting(counters.clone());
        (reader, data, counters)
    }

    #[tokio::test]
    async fn ranges_within_the_kept_tail_are_served_from_it() {
        let size = WHOLE_OBJECT_MAX + 100_000;
        let (mut r, data, counters) = reader(size).await;
        r.fetch_tail().await.unwrap();
        assert_eq!(counters.get().bytes, FOOTER_PREFETCH);
        let at = |range: &Range<u64>| &data[range.start as usize..range.end as usize];
        let inside = size - 1000..size - 10;
        assert_eq!(r.get_bytes(inside.clone()).await.unwrap(), at(&inside));
        assert_eq!(counters.get().bytes, FOOTER_PREFETCH);
        // A range outside it, or running into it, is fetched whole.
        let (before, across) = (10..20, size - FOOTER_PREFETCH - 500..size - 20);
        let got = r
            .get_byte_ranges(vec![before.clone(), inside.clone(), across.clone()])
            .await
            .unwrap();
        assert_eq!(got[0], at(&before));
        assert_eq!(got[1], at(&inside));
        assert_eq!(got[2], at(&across));
        let fetched = FOOTER_PREFETCH + 10 + (across.end - across.start);
        assert_eq!(counters.get().bytes, fetched);
    }

    /// A local table's small reads do not wait for the blocking pool; large
    /// ones do (they go through the store); a missing or short file fails
    /// as the store's read would, naming the object.
    #[test]
    fn a_local_table_file_is_read_from_disk_directly_when_the_read_is_small() {
        let runtime = crate::local_read::one_blocking_thread_runtime();
        let dir = tempfile::tempdir().unwrap();
        let location = StorageLocation::local(dir.path()).unwrap();
        let size = INLINE_MAX + 100_000;
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        std::fs::create_dir_all(dir.path().join("t/data")).unwrap();
        std::fs::write(dir.path().join("t/data/f.parquet"), &data).unwrap();
        let path = location.path("t/data/f.parquet");
        let counters = Arc::new(ReadCounters::default());
        let mut r = ObjectReader::at(&location, path.clone(), size).counting(counters.clone());
        let at = |range: &Range<u64>| &data[range.start as usize..range.end as usize];
        let wait = std::time::Duration::from_secs(10);
        runtime.block_on(async {
            // The pool's one thread is busy until `release` is sent.
            let (release, busy) = std::sync::mpsc::channel::<()>();
            let pool = tokio::task::spawn_blocking(move || busy.recv());
            let (first, tail) = (10..20, size - 1000..size - 10);
            let got = tokio::time::timeout(wait, r.get_bytes(first.clone())).await;
            assert_eq!(got.expect("not through the pool").unwrap(), at(&first));
            let got = r.get_byte_ranges(vec![first.clone(), tail.clone()]);
            let got = tokio::time::timeout(wait, got).await.expect("not the pool");
            let got = got.unwrap();
            assert_eq!((got[0].as_ref(), got[1].as_ref()), (at(&first), at(&tail)));
            let all = 0..size;
            let short = std::time::Duration::from_millis(100);
            let large = tokio::time::timeout(short, r.get_bytes(all.clone())).await;
            assert!(large.is_err(), "a read over INLINE_MAX waits for the pool");
            release.send(()).unwrap();
            pool.await.unwrap().unwrap();
            assert_eq!(r.get_bytes(all.clone()).await.unwrap(), at(&all));
            assert_eq!(counters.get().bytes, 10 + 10 + 990 + 2 * size);
            // A kept range between two to fetch, over INLINE_MAX in all:
            // each comes back in its place.
            r.fetch_tail().await.unwrap();
            let (head, kept, more) = (0..size - FOOTER_PREFETCH, size - 500..size - 5, 10..19);
            let got = r.get_byte_ranges(vec![head.clone(), kept.clone(), more.clone()]);
            let got = got.await.unwrap();
            assert_eq!(got[0].as_ref(), at(&head));
            assert_eq!(got[1].as_ref(), at(&kept));
            assert_eq!(got[2].as_ref(), at(&more));
        });

        // Gone: not found, naming the object.
        let gone = location.path("t/data/gone.parquet");
        let err = runtime.block_on(ObjectReader::at(&location, gone, 100).get_bytes(0..10));
        let ParquetError::External(e) = err.unwrap_err() else {
            panic!("not the store's error")
        };
        match e.downcast::<object_store::Error>().map(|e| *e) {
            Ok(object_store::Error::NotFound { path, .. }) => {
                assert!(path.ends_with("t/data/gone.parquet"), "{path}")
            }
            other => panic!("{other:?}"),
        }
        // Shorter than its manifest says: the object, the sizes, what to do.
        let mut r = ObjectReader::at(&location, path, size + 50);
        let err = runtime.block_on(r.get_bytes(size..size + 50)).unwrap_err();
        let text = err.to_string();
        let expected = format!("ends before byte {} of the {}", size + 50, size + 50);
        assert!(
            text.contains("t/data/f.parquet") && text.contains(&expected),
            "{text}"
        );
        assert!(text.contains("logbook check"), "{text}");
        let kind = crate::Error::parquet("t/data/f.parquet", err).kind();
        assert_eq!(kind, crate::ErrorKind::Corrupt, "not worth a retry");
    }

    /// An object shorter than its manifest says, read through a store
    /// (which clamps a range past the end, or refuses one starting there):
    /// one range, several coalesced, and one the store refuses all say so,
    /// with the size the store holds, and class as corrupt.
    #[tokio::test]
    async fn an_object_cut_short_is_corrupt_on_every_store_path() {
        let (_, data, _) = reader(1000).await;
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("t/data/f.parquet");
        store.put(&path, PutPayload::from(data)).await.unwrap();
        let one = |r: Range<u64>| std::iter::once(r).collect::<Vec<_>>();
        for ranges in [one(0..2000), vec![0..10, 1500..1600], one(1500..1600)] {
            let mut r = ObjectReader::new(store.clone(), path.clone(), 2000);
            let err = r.get_byte_ranges(ranges.clone()).await.unwrap_err();
            let err = crate::Error::parquet("t/data/f.parquet", err);
            let text = err.to_string();
            assert!(
                text.contains("t/data/f.parquet holds 1000 bytes of the 2000"),
                "{ranges:?}: {text}"
            );
            assert_eq!(err.kind(), crate::ErrorKind::Corrupt, "{ranges:?}: {text}");
        }
    }

    #[tokio::test]
    async fn a_small_object_is_kept_whole() {
        let (mut r, data, counters) = reader(5000).await;
        r.fetch_tail().await.unwrap();
        let got = r.get_byte_ranges(vec![0..10, 4000..5000]).await.unwrap();
        assert_eq!(got[0].as_ref(), &data[0..10]);
        assert_eq!(got[1].as_ref(), &data[4000..5000]);
        assert_eq!(counters.get().bytes, 5000);
    }
}
