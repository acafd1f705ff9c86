//! One Parquet object as parquet's `AsyncFileReader`, counting the bytes it
//! fetches.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::counters::ReadCounters;

/// Reads one Parquet object whose size is known from the manifest, so the
/// footer costs one ranged read and no `HEAD`.
#[derive(Debug, Clone)]
pub struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    counters: Option<Arc<ReadCounters>>,
}

impl ObjectReader {
    /// A reader of `path`, `size` bytes long.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        Self {
            store,
            path,
            size,
            counters: None,
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
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.count(range.end.saturating_sub(range.start));
        self.store
            .get_range(&self.path, range)
            .map_err(external)
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        self.count(ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum());
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(64 * 1024))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}
