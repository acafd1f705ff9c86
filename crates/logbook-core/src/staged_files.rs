//! Staged data files: stream batches into Parquet files under one fresh
//! directory, rolling at a target size. Nothing here is visible to readers
//! until a commit lists the files.
//!
//! A full file closes in the background (its last row group encoded, its
//! footer written, its upload completed and made durable) while the next
//! one is written, so the encoders never wait for storage between files.
//! At most one file is closing at a time: the next close, `finish`,
//! `settle` and `abort` wait for it first, so files are listed in order.
//! Memory holds that file's last row group and its upload buffers (up to
//! 16 MiB, plus the parts in flight) beside the file being written. A
//! `finish` that fails deletes what it wrote, as `abort` does; a
//! `finish` or `abort` dropped midway leaves the closing file to complete
//! on its own, an orphan for vacuum.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use futures::StreamExt;
use object_store::buffered::BufWriter;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::file_layout::FileLayout;
use crate::file_writer::{slice_bytes, FileWriter};
use crate::format::{DataFile, TableProperties};
use crate::handle::TableInner;
use crate::schema::TableSchema;

/// Files being written under one staging directory.
pub(crate) struct StagedFiles {
    table: Arc<TableInner>,
    dir: String,
    schema: SchemaRef,
    open: Option<OpenFile>,
    /// The last file closed, still closing in the background.
    closing: Option<Closing>,
    /// Files opened so far (each gets the next number).
    opened: usize,
    files: Vec<DataFile>,
    target_file_size: usize,
    layout: FileLayout,
    /// Rows waiting to be sorted into the next row group (sorted tables).
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    /// Set while `write` or `finish` runs: left set when one is dropped
    /// before it completes (its rows may be half written), so that the
    /// files can no longer be finished without them.
    busy: bool,
}

/// A file closing on a task of its own.
struct Closing {
    relative: String,
    /// `None` once its outcome was taken (a failed close being deleted).
    task: Option<JoinHandle<Result<DataFile>>>,
}

struct OpenFile {
    relative: String,
    writer: FileWriter<BufWriter>,
    rows: u64,
    /// Float columns that held a NaN: Parquet statistics leave NaN out, so
    /// their bounds are not bounds (see `file_stats`).
    nan_columns: std::collections::BTreeSet<usize>,
}

impl StagedFiles {
    /// Files of `schema` laid out as `properties` say (see `file_layout`).
    pub fn new(
        table: Arc<TableInner>,
        dir: String,
        schema: &TableSchema,
        properties: &TableProperties,
    ) -> Self {
        Self {
            dir,
            schema: schema.file_schema(),
            open: None,
            closing: None,
            opened: 0,
            files: Vec::new(),
            target_file_size: table.options.target_file_size,
            layout: FileLayout::new(schema, properties),
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            busy: false,
            table,
        }
    }

    /// Roll files at `bytes` instead of the table's target size.
    pub fn with_target_file_size(mut self, bytes: usize) -> Self {
        self.target_file_size = bytes.max(1);
        self
    }

    /// The files closed so far (each fully stored); the one closing in
    /// the background is listed after [`StagedFiles::settle`].
    pub fn written(&self) -> &[DataFile] {
        &self.files
    }

    /// Wait for the file closing in the background, if any, and list it
    /// among the files written. A file that failed to close is deleted and
    /// its error returned.
    pub async fn settle(&mut self) -> Result<()> {
        // Awaited in place, not taken first: a caller dropped midway
        // leaves the task here for `abort` to clean up after.
        let Some(Closing { relative, task }) = self.closing.as_mut() else {
            return Ok(());
        };
        let Some(running) = task.as_mut() else {
            // It failed, and the call deleting it was dropped: never list
            // the files as whole.
            return Err(Error::Interrupted {
                table: self.table.name.clone(),
                what: format!("closing {relative}"),
            });
        };
        let joined = running.await;
        *task = None;
        let relative = relative.clone();
        let closed = match joined {
            Ok(closed) => closed,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::Interrupted {
                table: self.table.name.clone(),
                what: format!("closing {relative}"),
            }),
        };
        match closed {
            Ok(file) => {
                self.closing = None;
                self.files.push(file);
                Ok(())
            }
            Err(e) => {
                // Forgotten only once deleted: `abort` deletes it otherwise.
                delete_files(&self.table, std::slice::from_ref(&relative)).await;
                self.closing = None;
                Err(e)
            }
        }
    }

    /// The staging directory, relative to the table root.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Append `batch` (already in the table's schema), rolling files at the
    /// table's target size and row limit. Columns are stored under their
    /// file names ([`crate::schema::TableSchema::file_schema`]). A sorted
    /// table's rows are buffered until a row group's worth is sorted.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.enter()?;
        let done = self.write_batch(batch).await;
        self.busy = false;
        done
    }

    /// Refuse to go on after a call that was dropped midway.
    fn enter(&mut self) -> Result<()> {
        if self.busy {
            return Err(Error::parquet(
                &self.dir,
                parquet::errors::ParquetError::General(
                    "an earlier write to these files was interrupted; write them again".into(),
                ),
            ));
        }
        self.busy = true;
        Ok(())
    }

    async fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
            .map_err(|e| Error::arrow(&self.dir, e))?;
        if !self.layout.sorts() {
            return self.write_rows(&batch).await;
        }
        let opts = &self.table.options;
        self.pending_rows += batch.num_rows();
        self.pending_bytes += slice_bytes(&batch);
        self.pending.push(batch);
        if self.pending_rows >= opts.max_row_group_rows
            || self.pending_bytes >= opts.row_group_bytes
        {
            self.write_sorted(false).await?;
        }
        Ok(())
    }

    /// Sort the buffered rows and write them as whole row groups; rows
    /// beyond the last full row group (the largest keys) stay buffered,
    /// unless `all`.
    async fn write_sorted(&mut self, all: bool) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let sorted = self.layout.sorted(&self.schema, &self.pending, &self.dir)?;
        let group = self.table.options.max_row_group_rows.max(1);
        let full = match all || self.pending_bytes >= self.table.options.row_group_bytes {
            true => sorted.num_rows(),
            false => sorted.num_rows() / group * group,
        };
        // The tail is copied out, so the sorted batch is freed once written.
        let tail: arrow_array::UInt32Array = (full as u32..sorted.num_rows() as u32).collect();
        let rest = arrow_select::take::take_record_batch(&sorted, &tail)
            .map_err(|e| Error::arrow(&self.dir, e))?;
        self.pending_rows = rest.num_rows();
        self.pending_bytes = slice_bytes(&rest);
        self.pending = vec![rest];
        for at in (0..full).step_by(group) {
            self.write_rows(&sorted.slice(at, group.min(full - at)))
                .await?;
            if let Some(f) = self.open.as_mut() {
                f.writer
                    .flush()
                    .await
                    .map_err(|e| Error::parquet(&f.relative, e))?;
            }
        }
        Ok(())
    }

    async fn write_rows(&mut self, batch: &RecordBatch) -> Result<()> {
        let max_rows = self.table.options.max_rows_per_file as u64;
        let mut offset = 0usize;
        while offset < batch.num_rows() {
            if self.open.is_none() {
                self.open = Some(self.open_file()?);
            }
            let file = self.open.as_ref().expect("just opened");
            let take = ((max_rows - file.rows) as usize).min(batch.num_rows() - offset);
            self.append(batch.slice(offset, take)).await?;
            offset += take;
        }
        Ok(())
    }

    async fn append(&mut self, slice: RecordBatch) -> Result<()> {
        let opts = &self.table.options;
        let file = self.open.as_mut().expect("caller opened a file");
        file.nan_columns
            .extend(crate::file_stats::nan_columns(&slice));
        let rel = &file.relative;
        file.writer
            .write(&slice)
            .await
            .map_err(|e| Error::parquet(rel, e))?;
        file.rows += slice.num_rows() as u64;
        if file.writer.in_progress_size() >= opts.row_group_bytes {
            file.writer
                .flush()
                .await
                .map_err(|e| Error::parquet(rel, e))?;
        }
        let full = file.writer.bytes_written() + file.writer.in_progress_size()
            >= self.target_file_size
            || file.rows >= opts.max_rows_per_file as u64;
        if full {
            self.close_file().await?;
        }
        Ok(())
    }

    /// Close the open file and return every file written.
    /// Files that fail to finish are deleted, all of them.
    pub async fn finish(mut self) -> Result<Vec<DataFile>> {
        self.enter()?;
        let done = async {
            self.write_sorted(true).await?;
            self.close_file().await?;
            self.settle().await
        };
        match done.await {
            Ok(()) => Ok(std::mem::take(&mut self.files)),
            Err(e) => {
                self.abort().await;
                Err(e)
            }
        }
    }

    /// Delete everything written (nothing was committed).
    pub async fn abort(mut self) {
        if let Some(closing) = self.closing.take() {
            // Its upload completes (or fails) before it is deleted below.
            if let Some(task) = closing.task {
                let _ = task.await;
            }
            self.files.push(DataFile::new(closing.relative, 0, 0));
        }
        if let Some(mut f) = self.open.take() {
            // Finishing flushes the upload so that it can be deleted below.
            let _ = f.writer.finish().await;
            self.files.push(DataFile::new(f.relative, 0, 0));
        }
        let paths: Vec<String> = self.files.iter().map(|f| f.path.clone()).collect();
        delete_files(&self.table, &paths).await;
    }

    fn open_file(&mut self) -> Result<OpenFile> {
        let opts = &self.table.options;
        let relative = format!("{}/part-{:05}.parquet", self.dir, self.opened);
        self.opened += 1;
        let path = self.table.location.path(&relative);
        let sink = BufWriter::with_capacity(self.table.location.store().clone(), path, 16 << 20);
        let props = self.layout.writer_properties(opts);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Rows held back for the dictionary choice count at their size in
        // memory: kept to a quarter of the sizes that end files and row
        // groups, they never end one early.
        let held = (self.target_file_size / 4).min(opts.row_group_bytes / 4);
        let writer = FileWriter::try_new(sink, self.schema.clone(), props, cores)
            .map_err(|e| Error::parquet(&relative, e))?
            .with_sample_bytes(held);
        Ok(OpenFile {
            relative,
            writer,
            rows: 0,
            nan_columns: Default::default(),
        })
    }

    /// Start closing the open file in the background, once the previous
    /// one has closed.
    async fn close_file(&mut self) -> Result<()> {
        if self.open.is_none() {
            return Ok(());
        }
        self.settle().await?;
        let Some(f) = self.open.take() else {
            return Ok(());
        };
        self.closing = Some(Closing {
            relative: f.relative.clone(),
            task: Some(tokio::spawn(f.close(self.schema.clone()))),
        });
        Ok(())
    }
}

impl OpenFile {
    /// Finish the file: the last row group, the footer, the upload.
    async fn close(mut self, schema: SchemaRef) -> Result<DataFile> {
        let footer = self
            .writer
            .finish()
            .await
            .map_err(|e| Error::parquet(&self.relative, e))?;
        Ok(DataFile {
            size: self.writer.bytes_written() as u64,
            stats: crate::file_stats::from_footer(&schema, &footer, &self.nan_columns),
            path: self.relative,
            rows: self.rows,
        })
    }
}

/// Delete staged files that no commit references (best effort: vacuum
/// removes whatever is left).
///
/// Through the store's `delete_stream`: S3 deletes up to 1,000 keys per
/// request and a local disk 10 at a time. One at a time, a publish of 90
/// dates spent 90 round trips forgetting its stage records after it
/// had landed.
///
/// Returns whether every file is gone.
pub(crate) async fn delete_files(table: &TableInner, files: &[String]) -> bool {
    let store: &Arc<dyn ObjectStore> = table.location.store();
    let paths: Vec<object_store::path::Path> =
        files.iter().map(|f| table.location.path(f)).collect();
    let mut deleted = store.delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed());
    // Gone only if the store answered for every file: a stream that ends
    // early says nothing about the rest.
    let (mut gone, mut failed) = (0, None);
    while let Some(done) = deleted.next().await {
        match done {
            // A data file's own write directory only (no other writer
            // creates it; the date's is shared). Stage records and markers
            // keep theirs: their writers do not retry a lost race.
            Ok(path) => {
                gone += 1;
                let f = table.location.relative(&path);
                if f.starts_with("data/") {
                    table.location.remove_empty_parents(&f, 1);
                }
            }
            Err(object_store::Error::NotFound { .. }) => gone += 1,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if gone == files.len() {
        return true;
    }
    let first = files.first().map_or("", String::as_str);
    match failed {
        Some(e) => {
            tracing::warn!(table = %table.name, files = files.len(), gone, first = %first, error = %e, "could not delete staged files; vacuum will")
        }
        None => {
            tracing::warn!(table = %table.name, files = files.len(), gone, first = %first, "the store answered for only some staged files; vacuum deletes the rest")
        }
    }
    false
}

/// Where in `files` the first file is that is missing or not of its
/// recorded size (one `HEAD` each, concurrently): what a re-run repairs,
/// and what a writer back from a pause must not commit.
pub(crate) async fn first_damaged(table: &TableInner, files: &[DataFile]) -> Result<Option<usize>> {
    let store = table.location.store();
    let heads = files.iter().map(|f| async move {
        match store.head(&table.location.path(&f.path)).await {
            Ok(meta) if meta.size == f.size => Ok(false),
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(true),
            Err(e) => Err(Error::storage(&f.path, e)),
        }
    });
    let damaged = futures::future::try_join_all(heads).await?;
    Ok(damaged.iter().position(|d| *d))
}
