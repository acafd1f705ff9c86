//! Reading data files: parquet's async reader over any object store.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryFutureExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
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

/// How data files are decoded.
///
/// ```
/// let options = logbook_core::reader::ReadOptions::default().with_view_types(true);
/// assert_eq!(options.batch_size, 8192);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Rows per batch (at most). The default is DataFusion's, eight times
    /// parquet's, which keeps per-batch overhead in joins and aggregations
    /// small.
    pub batch_size: usize,
    /// Decode strings and binaries as Arrow view types (`Utf8View`,
    /// `BinaryView`), as DataFusion does by default: short strings are
    /// compared and copied inline, which makes hash joins on string keys
    /// much cheaper.
    pub view_types: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            batch_size: 8192,
            view_types: false,
        }
    }
}

impl ReadOptions {
    /// Set [`ReadOptions::batch_size`].
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Set [`ReadOptions::view_types`].
    pub fn with_view_types(mut self, view_types: bool) -> Self {
        self.view_types = view_types;
        self
    }
}

/// `schema` with strings and binaries as view types.
pub fn with_view_types(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let ty = match f.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
                DataType::Binary | DataType::LargeBinary => DataType::BinaryView,
                other => other.clone(),
            };
            f.as_ref().clone().with_data_type(ty)
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Stream the rows of `files` in order, projected to `columns` (all if `None`).
/// The next file's footer is fetched while the current one is read.
pub(crate) fn read_files(
    table: &Arc<TableInner>,
    files: Vec<DataFile>,
    columns: Option<&[&str]>,
    options: ReadOptions,
) -> BoxStream<'static, Result<RecordBatch>> {
    let table = table.clone();
    let columns: Option<Vec<String>> = columns.map(|c| c.iter().map(|s| s.to_string()).collect());
    futures::stream::iter(files)
        .map(move |file| open_file(table.clone(), file, columns.clone(), options))
        .buffered(2)
        .try_flatten()
        .boxed()
}

async fn open_file(
    table: Arc<TableInner>,
    file: DataFile,
    columns: Option<Vec<String>>,
    options: ReadOptions,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let path = table.location.path(&file.path);
    let mut reader = ObjectReader::new(table.location.store().clone(), path, file.size);
    let rel = file.path.clone();
    let mut metadata = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
        .await
        .map_err(|e| Error::parquet(&rel, e))?;
    if options.view_types {
        let hint = Arc::new(with_view_types(metadata.schema()));
        metadata = ArrowReaderMetadata::try_new(
            metadata.metadata().clone(),
            ArrowReaderOptions::new().with_schema(hint),
        )
        .map_err(|e| Error::parquet(&rel, e))?;
    }
    let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_batch_size(options.batch_size.max(1));
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
