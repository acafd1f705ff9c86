//! Reading data files: parquet's async reader over any object store.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryFutureExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::error::{Error, Result};
use crate::format::DataFile;
use crate::table::TableInner;

/// Reads one Parquet object whose size is known from the manifest, so the
/// footer costs one ranged read and no `HEAD`.
#[derive(Debug, Clone)]
pub struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

impl ObjectReader {
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        Self { store, path, size }
    }
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.store
            .get_range(&self.path, range)
            .map_err(external)
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
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

/// Stream the rows of `files` in order, projected to `columns` (all if `None`).
pub(crate) fn read_files(
    table: &Arc<TableInner>,
    files: Vec<DataFile>,
    columns: Option<&[&str]>,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let table = table.clone();
    let columns: Option<Vec<String>> = columns.map(|c| c.iter().map(|s| s.to_string()).collect());
    let stream = futures::stream::iter(files)
        .then(move |file| open_file(table.clone(), file, columns.clone()))
        .try_flatten();
    Ok(stream.boxed())
}

async fn open_file(
    table: Arc<TableInner>,
    file: DataFile,
    columns: Option<Vec<String>>,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let path = table.location.path(&file.path);
    let reader = ObjectReader::new(table.location.store().clone(), path, file.size);
    let rel = file.path.clone();
    let mut builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| Error::parquet(&rel, e))?;
    if let Some(columns) = columns {
        let arrow = builder.schema().clone();
        let indices = columns
            .iter()
            .map(|c| {
                arrow.index_of(c).map_err(|_| Error::InvalidInput {
                    table: table.name.clone(),
                    reason: format!("no column {c:?} in file {rel}"),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        builder = builder.with_projection(mask);
    }
    let stream = builder.build().map_err(|e| Error::parquet(&rel, e))?;
    Ok(stream.map_err(move |e| Error::parquet(&rel, e)).boxed())
}
