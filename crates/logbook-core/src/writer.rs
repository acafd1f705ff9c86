//! Writing one partition: validate, stream to staged Parquet files, commit.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::SchemaRef;
use chrono::NaiveDate;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::commit::{commit, CommitInfo, PartitionChange, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{layout, DataFile, Operation, RunInfo};
use crate::snapshot::Snapshot;
use crate::table::TableInner;

const EPOCH_DAYS_CE: i32 = 719_163; // days from 0001-01-01 to 1970-01-01

/// Streams the rows of one partition into staged files; nothing is visible
/// until [`PartitionWriter::commit`].
///
/// Memory stays bounded by one row group whatever the partition size: files
/// roll at the table's target size and row groups flush at
/// [`crate::TableOptions::row_group_bytes`]. Dropping a writer without
/// committing leaves only staged files, which vacuum removes later.
pub struct PartitionWriter {
    table: Arc<TableInner>,
    base: Snapshot,
    date: NaiveDate,
    run: RunInfo,
    schema: SchemaRef,
    partition_column: String,
    staging: String,
    open: Option<OpenFile>,
    files: Vec<DataFile>,
    rows: u64,
    failed: bool,
}

struct OpenFile {
    relative: String,
    writer: AsyncArrowWriter<BufWriter>,
    rows: u64,
}

impl PartitionWriter {
    pub(crate) fn new(
        table: Arc<TableInner>,
        base: Snapshot,
        date: NaiveDate,
        run: RunInfo,
    ) -> Result<Self> {
        let schema = base.arrow_schema();
        let Some(partition_column) = base.schema().partition_column().map(str::to_string) else {
            return Err(Error::InvalidInput {
                table: table.name.clone(),
                reason: "is a dimension (SCD2) table; change it with apply_changes, not by replacing partitions".into(),
            });
        };
        let staging = layout::staging_dir(&partition_column, date, table.options.ids.next_id());
        Ok(Self {
            table,
            base,
            date,
            run,
            schema,
            partition_column,
            staging,
            open: None,
            files: Vec::new(),
            rows: 0,
            failed: false,
        })
    }

    /// The partition this writer replaces.
    pub fn date(&self) -> NaiveDate {
        self.date
    }

    /// The table's schema rows must match.
    pub fn schema(&self) -> &crate::schema::TableSchema {
        self.base.schema()
    }

    /// The version this write started from.
    pub fn base_version(&self) -> u64 {
        self.base.version()
    }

    /// The staged directory (relative to the table root) this writer fills.
    pub fn staging_dir(&self) -> &str {
        &self.staging
    }

    /// Rows accepted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Validate `batch` and append it. A batch that fails validation is not
    /// written, and the writer can then only be aborted.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.ensure_usable()?;
        let batch = match self.validate(batch) {
            Ok(b) => b,
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        };
        let max_rows = self.table.options.max_rows_per_file as u64;
        let mut offset = 0usize;
        while offset < batch.num_rows() {
            if self.open.is_none() {
                self.open = Some(self.open_file()?);
            }
            let file = self.open.as_mut().expect("just opened");
            let take = ((max_rows - file.rows) as usize).min(batch.num_rows() - offset);
            let slice = batch.slice(offset, take);
            let result = self.append(slice).await;
            if result.is_err() {
                self.failed = true;
            }
            result?;
            offset += take;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    async fn append(&mut self, slice: RecordBatch) -> Result<()> {
        let opts = &self.table.options;
        let file = self.open.as_mut().expect("caller opened a file");
        let rel = file.relative.clone();
        file.writer
            .write(&slice)
            .await
            .map_err(|e| Error::parquet(&rel, e))?;
        file.rows += slice.num_rows() as u64;
        if file.writer.in_progress_size() >= opts.row_group_bytes {
            file.writer
                .flush()
                .await
                .map_err(|e| Error::parquet(&rel, e))?;
        }
        let full = file.writer.bytes_written() + file.writer.in_progress_size()
            >= opts.target_file_size
            || file.rows >= opts.max_rows_per_file as u64;
        if full {
            self.close_file().await?;
        }
        Ok(())
    }

    /// Commit the partition: it becomes visible atomically, replacing any
    /// earlier contents of the date. Fails with `PartitionConflict` if
    /// another commit replaced the date after this writer's base snapshot.
    ///
    /// A writer whose earlier `write` was refused commits nothing: `commit`
    /// then aborts it (deleting its staged files) and returns the refusal.
    pub async fn commit(mut self) -> Result<CommitInfo> {
        if let Err(e) = self.ensure_usable() {
            self.abort().await?;
            return Err(e);
        }
        if let Err(e) = self.close_file().await {
            self.abort().await?;
            return Err(e);
        }
        let pending = PendingCommit {
            operation: Operation::ReplacePartitions,
            base_version: self.base.version(),
            run: self.run.clone(),
            changes: vec![PartitionChange {
                date: self.date,
                files: std::mem::take(&mut self.files),
                rows: self.rows,
            }],
        };
        let staged: Vec<String> = pending.changes[0]
            .files
            .iter()
            .map(|f| f.path.clone())
            .collect();
        // Own everything the rest needs, so the future does not borrow the writer.
        let table = self.table.clone();
        drop(self);
        match commit(&table, pending).await {
            Ok(info) => {
                if info.already_committed {
                    delete_staged(&table, &staged).await;
                }
                Ok(info)
            }
            Err(failure) => {
                // Only when the commit certainly did not land may its files go.
                if !failure.ambiguous {
                    delete_staged(&table, &staged).await;
                }
                Err(failure.error)
            }
        }
    }

    /// Give up: delete what this writer staged. Nothing was committed.
    pub async fn abort(mut self) -> Result<()> {
        if let Some(mut f) = self.open.take() {
            // Finishing flushes the upload so that it can be deleted below.
            let _ = f.writer.finish().await;
            self.files.push(DataFile {
                path: f.relative,
                size: 0,
                rows: 0,
            });
        }
        let staged: Vec<String> = self.files.iter().map(|f| f.path.clone()).collect();
        let table = self.table.clone();
        drop(self);
        delete_staged(&table, &staged).await;
        Ok(())
    }

    fn ensure_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::WriterClosed {
                table: self.table.name.clone(),
                date: self.date,
                state: "failed (an earlier write was refused); abort it and start again",
            });
        }
        Ok(())
    }

    fn open_file(&self) -> Result<OpenFile> {
        let opts = &self.table.options;
        let relative = format!("{}/part-{:05}.parquet", self.staging, self.files.len());
        let path: Path = self.table.location.path(&relative);
        let sink = BufWriter::with_capacity(self.table.location.store().clone(), path, 16 << 20);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(opts.max_row_group_rows))
            .set_created_by(format!("logbook {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = AsyncArrowWriter::try_new(sink, self.schema.clone(), Some(props))
            .map_err(|e| Error::parquet(&relative, e))?;
        Ok(OpenFile {
            relative,
            writer,
            rows: 0,
        })
    }

    async fn close_file(&mut self) -> Result<()> {
        let Some(mut f) = self.open.take() else {
            return Ok(());
        };
        f.writer
            .finish()
            .await
            .map_err(|e| Error::parquet(&f.relative, e))?;
        self.files.push(DataFile {
            size: f.writer.bytes_written() as u64,
            path: f.relative,
            rows: f.rows,
        });
        Ok(())
    }

    /// Check `batch` against the table schema and the partition date, and
    /// return it re-labelled with the table's schema (field ids).
    fn validate(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let table = &self.table.name;
        let schema = self.base.schema();
        let mismatch = |field: &str, problem: String| Error::SchemaMismatch {
            table: table.clone(),
            date: self.date,
            field: field.to_string(),
            problem,
        };
        let given = batch.schema();
        for col in &schema.columns {
            if given.index_of(&col.name).is_err() {
                return Err(mismatch(&col.name, "is missing from the input".into()));
            }
        }
        let mut columns = Vec::with_capacity(schema.columns.len());
        for (i, field) in given.fields().iter().enumerate() {
            let Some(col) = schema.column(field.name()) else {
                return Err(mismatch(
                    field.name(),
                    "is not a column of the table".into(),
                ));
            };
            let expected = col.ty.arrow_type();
            if field.data_type() != &expected {
                return Err(mismatch(
                    field.name(),
                    format!(
                        "has type {} but the table column is {} ({expected})",
                        field.data_type(),
                        col.ty.name()
                    ),
                ));
            }
            let array = batch.column(i);
            if !col.nullable && array.null_count() > 0 && col.name != self.partition_column {
                return Err(mismatch(
                    field.name(),
                    format!(
                        "has {} null value(s) but is not nullable",
                        array.null_count()
                    ),
                ));
            }
            columns.push((col.id, array.clone()));
        }
        columns.sort_by_key(|(id, _)| schema.columns.iter().position(|c| c.id == *id));
        let arrays: Vec<_> = columns.into_iter().map(|(_, a)| a).collect();
        let index = schema
            .index_of(&self.partition_column)
            .expect("validated schema");
        self.check_partition_values(arrays[index].as_ref())?;
        RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| Error::arrow(format!("table {table}, partition {}", self.date), e))
    }

    fn check_partition_values(&self, array: &dyn Array) -> Result<()> {
        let column = &self.partition_column;
        if array.null_count() > 0 {
            return Err(Error::NullPartitionValue {
                table: self.table.name.clone(),
                date: self.date,
                column: column.clone(),
                count: array.null_count(),
            });
        }
        let want = self.date.num_days_from_ce() - EPOCH_DAYS_CE;
        let values = array.as_primitive::<Date32Type>().values();
        let bad = values.iter().filter(|v| **v != want).count();
        if bad == 0 {
            return Ok(());
        }
        let mut examples: Vec<i32> = values.iter().copied().filter(|v| *v != want).collect();
        examples.sort_unstable();
        examples.dedup();
        let examples = examples
            .iter()
            .take(3)
            .map(|d| {
                NaiveDate::from_num_days_from_ce_opt(d + EPOCH_DAYS_CE)
                    .map_or_else(|| d.to_string(), |d| d.to_string())
            })
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::RowsOutsidePartition {
            table: self.table.name.clone(),
            date: self.date,
            column: column.clone(),
            count: bad,
            examples,
        })
    }
}

/// Delete files this writer staged and that no commit references.
async fn delete_staged(table: &TableInner, files: &[String]) {
    let store: &Arc<dyn ObjectStore> = table.location.store();
    for f in files {
        let path = table.location.path(f);
        if let Err(e) = store.delete(&path).await {
            if !matches!(e, object_store::Error::NotFound { .. }) {
                tracing::warn!(table = %table.name, file = %f, error = %e, "could not delete staged file; vacuum will");
            }
        }
    }
}

use chrono::Datelike as _;
