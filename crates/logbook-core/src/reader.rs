//! Reading data files: parquet's async reader over any object store.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
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
use crate::handle::TableInner;
use crate::schema::{Column, TableSchema};

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

/// Stream the rows of `files` in order as rows of `schema` (the schema of the
/// snapshot being read), projected to `columns` of it (all if `None`).
///
/// Columns are found in each file by field id, not by name, so files
/// written under an older schema adapt: a column added since reads as
/// null, a widened one is cast, a renamed one appears under its new name,
/// and a dropped one is not read. The next file's footer is fetched while
/// the current one is read.
pub(crate) fn read_files(
    table: &Arc<TableInner>,
    schema: &TableSchema,
    files: Vec<DataFile>,
    columns: Option<&[&str]>,
    options: ReadOptions,
) -> BoxStream<'static, Result<RecordBatch>> {
    let table = table.clone();
    let wanted: Vec<Column> = match columns {
        Some(names) => {
            let found: Result<Vec<Column>> = names
                .iter()
                .map(|n| {
                    schema
                        .column(n)
                        .cloned()
                        .ok_or_else(|| Error::InvalidInput {
                            table: table.name.clone(),
                            reason: format!("no column {n:?} (columns: {})", schema.spec()),
                        })
                })
                .collect();
            match found {
                Ok(found) => found,
                Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
            }
        }
        None => schema.columns.clone(),
    };
    let output = Arc::new(output_schema(schema, &wanted, options.view_types));
    futures::stream::iter(files)
        .map(move |file| open_file(table.clone(), file, wanted.clone(), output.clone(), options))
        .buffered(2)
        .try_flatten()
        .boxed()
}

/// The Arrow schema of the rows a scan returns.
fn output_schema(schema: &TableSchema, wanted: &[Column], view_types: bool) -> Schema {
    let all = schema.arrow_schema();
    let fields: Vec<Field> = wanted
        .iter()
        .map(|c| {
            all.field_with_name(&c.name)
                .expect("column of the schema")
                .clone()
        })
        .collect();
    let out = Schema::new(fields);
    if view_types {
        with_view_types(&out)
    } else {
        out
    }
}

/// The field id a file's Arrow field carries, if any.
fn field_id(field: &Field) -> Option<u32> {
    field
        .metadata()
        .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

async fn open_file(
    table: Arc<TableInner>,
    file: DataFile,
    wanted: Vec<Column>,
    output: SchemaRef,
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
    // Where each wanted column is in the file: by field id; by name for
    // files without ids.
    let file_schema = metadata.schema().clone();
    let has_ids = file_schema.fields().iter().any(|f| field_id(f).is_some());
    let sources: Vec<Option<usize>> = wanted
        .iter()
        .map(|c| {
            file_schema.fields().iter().position(|f| {
                if has_ids {
                    field_id(f) == Some(c.id)
                } else {
                    f.name() == &c.name
                }
            })
        })
        .collect();
    let mut read: Vec<usize> = sources.iter().flatten().copied().collect();
    read.sort_unstable();
    read.dedup();
    let mask = ProjectionMask::roots(metadata.parquet_schema(), read.iter().copied());
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_batch_size(options.batch_size.max(1))
        .with_projection(mask);
    let stream = builder.build().map_err(|e| Error::parquet(&rel, e))?;
    let adapt_rel = rel.clone();
    Ok(stream
        .map_err(move |e| Error::parquet(&rel, e))
        .and_then(move |batch| {
            let result = adapt(&batch, &read, &sources, &output)
                .map_err(|e| Error::arrow(format!("table file {adapt_rel}"), e));
            futures::future::ready(result)
        })
        .boxed())
}

/// Build a batch of `output` from a batch holding the file columns `read`
/// (in file order): each output column comes from its source file column,
/// cast when its type changed, or is all null when the file lacks it.
fn adapt(
    batch: &RecordBatch,
    read: &[usize],
    sources: &[Option<usize>],
    output: &SchemaRef,
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = sources
        .iter()
        .zip(output.fields())
        .map(|(source, field)| match source {
            Some(i) => {
                let at = read.iter().position(|r| r == i).expect("read");
                let col = batch.column(at);
                if col.data_type() == field.data_type() {
                    Ok(col.clone())
                } else {
                    arrow_cast::cast(col, field.data_type())
                }
            }
            None => Ok(new_null_array(field.data_type(), rows)),
        })
        .collect::<std::result::Result<_, _>>()?;
    RecordBatch::try_new_with_options(
        output.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}
