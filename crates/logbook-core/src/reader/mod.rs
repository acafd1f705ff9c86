//! Reading data files: parquet's async reader over any object store,
//! columns matched by field id, row groups and rows skipped as a
//! [`FilePruner`] decides.

mod allocator;
mod counters;
mod local;
mod object;
mod select;

use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::PageIndexPolicy;

use crate::error::{Error, Result};
use crate::format::DataFile;
use crate::handle::TableInner;
use crate::schema::{Column, TableSchema};

pub use allocator::tune_allocator;
pub use counters::{ReadCount, ReadCounters};
pub use object::ObjectReader;
pub use select::{FileAccess, FilePruner, ScanHooks, Selection};

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
/// the current one is read ([`LOOKAHEAD_REMOTE`] files ahead on an object
/// store). `hooks` may skip row groups and rows, and count what was read.
pub(crate) fn read_files(
    table: &Arc<TableInner>,
    schema: &TableSchema,
    files: Vec<DataFile>,
    columns: Option<&[&str]>,
    options: ReadOptions,
    hooks: ScanHooks,
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
    let lookahead = match table.location.is_remote() {
        true => LOOKAHEAD_REMOTE,
        false => LOOKAHEAD_LOCAL,
    };
    let output = Arc::new(output_schema(schema, &wanted, options.view_types));
    let all = Arc::new(schema.columns.clone());
    futures::stream::iter(files)
        .map(move |file| {
            let opened = OpenFile {
                table: table.clone(),
                file,
                wanted: wanted.clone(),
                all: all.clone(),
                output: output.clone(),
                options,
                hooks: hooks.clone(),
            };
            opened.open()
        })
        .buffered(lookahead)
        .try_flatten()
        .boxed()
}

/// Files a scan opens ahead of the one it reads (footer, pruning, and the
/// whole object when it is small), on local disk: one, read while the
/// current one is decoded.
const LOOKAHEAD_LOCAL: usize = 2;

/// Files opened ahead on an object store, where each open is one or two
/// round trips: enough that requests, not decoding, overlap. A small file
/// is held whole once open (`object::REMOTE_WHOLE_OBJECT_MAX`), so a scan
/// partition holds up to about 9 MiB of file bytes (the 8 and the one
/// read), outside DataFusion's memory pool, and a `LIMIT` met early may
/// have fetched files it never reads.
const LOOKAHEAD_REMOTE: usize = 8;

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

/// One file of a scan, before it is opened.
struct OpenFile {
    table: Arc<TableInner>,
    file: DataFile,
    wanted: Vec<Column>,
    /// Every column of the schema read with (a pruner may test columns
    /// the scan does not return).
    all: Arc<Vec<Column>>,
    output: SchemaRef,
    options: ReadOptions,
    hooks: ScanHooks,
}

impl OpenFile {
    async fn open(self) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let Self {
            table,
            file,
            wanted,
            all,
            output,
            options,
            hooks,
        } = self;
        let path = table.location.path(&file.path);
        let mut reader = ObjectReader::at(&table.location, path, file.size);
        if let Some(c) = &hooks.counters {
            reader = reader.counting(c.clone());
        }
        let rel = file.path.clone();
        // The page index is optional: files written before logbook wrote it
        // are read whole.
        let index = match hooks.pruner.as_ref().is_some_and(|p| p.wants_page_index()) {
            true => PageIndexPolicy::Optional,
            false => PageIndexPolicy::Skip,
        };
        let load = ArrowReaderOptions::new().with_page_index_policy(index);
        let mut metadata = ArrowReaderMetadata::load_async(&mut reader, load)
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
        let find = |c: &Column| {
            file_schema.fields().iter().position(|f| {
                if has_ids {
                    field_id(f) == Some(c.id)
                } else {
                    f.name() == &c.name
                }
            })
        };
        let sources: Vec<Option<usize>> = wanted.iter().map(find).collect();
        let mut read: Vec<usize> = sources.iter().flatten().copied().collect();
        read.sort_unstable();
        read.dedup();
        let mask = ProjectionMask::roots(metadata.parquet_schema(), read.iter().copied());
        let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_batch_size(options.batch_size.max(1))
            .with_projection(mask);
        let row_groups = builder.metadata().num_row_groups();
        let selection = match &hooks.pruner {
            Some(pruner) => {
                let columns: Vec<(String, usize, u32)> = all
                    .iter()
                    .filter_map(|c| find(c).map(|i| (c.name.clone(), i, c.id)))
                    .collect();
                let access = FileAccess {
                    path: &rel,
                    columns: &columns,
                    file: &file,
                    builder: &mut builder,
                };
                pruner.select(access).await?
            }
            None => Selection::all(),
        };
        let kept = selection
            .row_groups
            .as_ref()
            .map_or(row_groups, |rgs| rgs.len());
        if let Some(c) = &hooks.counters {
            c.add_file(row_groups as u64, kept as u64);
        }
        if kept == 0 {
            return Ok(futures::stream::empty().boxed());
        }
        if let Some(rgs) = selection.row_groups {
            builder = builder.with_row_groups(rgs);
        }
        if let Some(rows) = selection.rows {
            builder = builder.with_row_selection(rows);
        }
        let stream = builder.build().map_err(|e| Error::parquet(&rel, e))?;
        let adapt_rel = rel.clone();
        let counters = hooks.counters;
        Ok(stream
            .map_err(move |e| Error::parquet(&rel, e))
            .and_then(move |batch| {
                if let Some(c) = &counters {
                    c.add_rows(batch.num_rows() as u64);
                }
                let result = adapt(&batch, &read, &sources, &output)
                    .map_err(|e| Error::arrow(format!("table file {adapt_rel}"), e));
                futures::future::ready(result)
            })
            .boxed())
    }
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
