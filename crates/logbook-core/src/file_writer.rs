//! One Parquet file, its columns encoded on all cores while the caller
//! produces the next batch, streamed to the object store row group by row
//! group.
//!
//! Encoding dominates a write, and `ArrowWriter` encodes one column after
//! another on the caller's thread. Here each row group's columns are dealt
//! to one worker per core (largest first to the least loaded, by the first
//! batch's sizes). A worker is a thread of its own that owns its columns'
//! `ArrowColumnWriter`s for the row group and takes batches from a queue
//! of [`QUEUED_BATCHES`], so each column sees its batches in order and the
//! file is the same as `ArrowWriter` would write. The caller runs up to
//! the queue's length ahead of the slowest worker, which evens out batches
//! that cost the workers unevenly. When the row group is full the workers
//! close their columns and the chunks are appended in schema order.
//!
//! Why threads of their own, not tokio's blocking pool: a worker waits for
//! its next batch, and many files open at once (compaction rewrites one
//! partition per core) would hold every blocking thread the store's own
//! reads and writes need, and stop. Encoding each batch as a blocking task
//! that hands the columns back avoids that too, but measured slower (the
//! columns' dictionaries move between threads at every batch).
//!
//! Before the first row group is encoded, the writer holds its first rows
//! back (at most [`crate::dictionary_choice::SAMPLE_ROWS`]) and decides
//! from them which columns go without a dictionary (see
//! `dictionary_choice`); later row groups of the file follow the same
//! choice.
//!
//! Memory stays bounded: the rows held back for the choice (at most
//! [`SAMPLE_ROWS`] and the caller's byte limit; a held slice keeps its
//! batch's buffers alive), a few batches queued per worker (shared, not
//! copied, between workers), and the encoded row group bounded by the
//! caller's flush at `row_group_bytes`, as it was with `AsyncArrowWriter`.
//!
//! Not cancel-safe: a `write` or `flush` future dropped before it completes
//! leaves the writer failed (every later call errors), never a file
//! missing rows.
//!
//! Alternatives: several files encoded at once (more, smaller files per
//! partition, and a file's rows no longer in the order written), or row
//! groups encoded concurrently (a row group's memory per core). A full
//! file does finish its upload while the next is encoded (see
//! `staged_files`).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::dictionary_choice::{plain_columns, without_dictionary, SAMPLE_BYTES, SAMPLE_ROWS};

/// A Parquet file being written to `sink` (see the module doc).
pub(crate) struct FileWriter<S> {
    sink: S,
    buffer: SharedBuffer,
    file: SerializedFileWriter<SharedBuffer>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    max_rows: usize,
    workers: usize,
    group: Option<RowGroup>,
    /// Rows of the row group in progress, whether encoding or held back.
    group_rows: usize,
    /// The first rows, held back until the file's dictionaries are chosen
    /// (`None` once they are).
    sample: Option<Sample>,
    /// Bytes of rows (in memory) held back at most.
    sample_bytes: usize,
    row_groups: usize,
    /// Set while a call is in progress and left set if it fails or is
    /// dropped: the writer may then miss rows and refuses further calls.
    failed: bool,
}

/// A top-level field's leaf column writers, each with its leaf index.
type FieldWriters = Vec<(usize, ArrowColumnWriter)>;

/// The fields a worker encodes, each with its index in the schema.
type WorkerFields = Vec<(usize, FieldWriters)>;

/// The row group being encoded.
struct RowGroup {
    workers: Vec<Worker>,
}

/// Rows held back before the first row group starts.
#[derive(Default)]
struct Sample {
    batches: Vec<Arc<RecordBatch>>,
    rows: usize,
    bytes: usize,
}

/// Batches a worker may have waiting: the caller runs at most this far
/// ahead of the slowest worker.
pub(crate) const QUEUED_BATCHES: usize = 2;

/// Some of a row group's columns, encoded batch by batch on a thread of
/// its own (see the module doc).
struct Worker {
    queue: mpsc::Sender<Arc<RecordBatch>>,
    /// The encoded bytes of the worker's columns as of its last batch.
    encoded: Arc<AtomicUsize>,
    done: oneshot::Receiver<Result<WorkerFields>>,
}

impl Worker {
    fn start(mut fields: WorkerFields, schema: SchemaRef) -> Result<Self> {
        let (queue, mut batches) = mpsc::channel::<Arc<RecordBatch>>(QUEUED_BATCHES);
        let (send_done, done) = oneshot::channel();
        let encoded = Arc::new(AtomicUsize::new(0));
        let estimate = encoded.clone();
        std::thread::Builder::new()
            .name("logbook-encode".into())
            .spawn(move || {
                let result = (|| {
                    while let Some(batch) = batches.blocking_recv() {
                        let total = encode(&mut fields, &schema, &batch)?;
                        estimate.store(total, Ordering::Relaxed);
                    }
                    Ok(fields)
                })();
                // The writer may have been dropped: nobody to tell.
                let _ = send_done.send(result);
            })
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Self {
            queue,
            encoded,
            done,
        })
    }

    /// The columns, once every batch queued is encoded.
    async fn finish(self) -> Result<WorkerFields> {
        drop(self.queue);
        self.done
            .await
            .map_err(|_| ParquetError::General("an encoding thread stopped".into()))?
    }
}

/// Encode `batch` into `fields`; their estimated encoded size.
fn encode(fields: &mut WorkerFields, schema: &SchemaRef, batch: &RecordBatch) -> Result<usize> {
    let mut encoded = 0;
    for (field, writers) in fields {
        let leaves = compute_leaves(schema.field(*field), batch.column(*field))?;
        for ((_, writer), leaf) in writers.iter_mut().zip(leaves) {
            writer.write(&leaf)?;
            encoded += writer.get_estimated_total_bytes();
        }
    }
    Ok(encoded)
}

impl<S: AsyncWrite + Unpin + Send> FileWriter<S> {
    /// A file of `schema` with `props` (its `max_row_group_row_count` is
    /// honoured), encoded by `workers` workers.
    pub(crate) fn try_new(
        sink: S,
        schema: SchemaRef,
        props: WriterProperties,
        workers: usize,
    ) -> Result<Self> {
        if props.max_row_group_bytes().is_some() || props.content_defined_chunking().is_some() {
            return Err(ParquetError::NYI(
                "max_row_group_bytes and content-defined chunking (logbook ends row groups itself)"
                    .into(),
            ));
        }
        let max_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
        let buffer = SharedBuffer::default();
        // Through `ArrowWriter`, so the file carries the Arrow schema as
        // `ArrowWriter`'s files do.
        let (file, factory) = ArrowWriter::try_new(buffer.clone(), schema.clone(), Some(props))?
            .into_serialized_writer()?;
        Ok(Self {
            sink,
            buffer,
            file,
            factory,
            schema,
            max_rows,
            workers: workers.max(1),
            group: None,
            group_rows: 0,
            sample: Some(Sample::default()),
            sample_bytes: SAMPLE_BYTES,
            row_groups: 0,
            failed: false,
        })
    }

    /// Hold back at most `bytes` of rows (in memory) for the dictionary
    /// choice (default [`SAMPLE_BYTES`]): a caller that ends files or row
    /// groups by their size keeps this well below those sizes, since held
    /// rows count at their size in memory, not encoded.
    pub(crate) fn with_sample_bytes(mut self, bytes: usize) -> Self {
        self.sample_bytes = bytes.min(SAMPLE_BYTES);
        self
    }

    fn begin(&mut self) -> Result<()> {
        if self.failed {
            return Err(ParquetError::General(
                "an earlier write to this file failed or was interrupted".into(),
            ));
        }
        self.failed = true;
        Ok(())
    }

    /// Queue `batch`'s rows, ending row groups at the row limit.
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.begin()?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (self.max_rows - self.group_rows).min(batch.num_rows() - offset);
            let slice = Arc::new(batch.slice(offset, take));
            self.group_rows += take;
            offset += take;
            match self.sample.as_mut() {
                Some(sample) => {
                    sample.rows += take;
                    sample.bytes += slice_bytes(&slice);
                    sample.batches.push(slice);
                    if sample.rows >= SAMPLE_ROWS || sample.bytes >= self.sample_bytes {
                        self.choose_dictionaries().await?;
                    }
                }
                None => self.encode(slice).await?,
            }
            if self.group_rows >= self.max_rows {
                self.end_group().await?;
            }
        }
        self.failed = false;
        Ok(())
    }

    /// Hand `slice` to the row group's workers, starting the row group.
    async fn encode(&mut self, slice: Arc<RecordBatch>) -> Result<()> {
        let mut group = match self.group.take() {
            Some(group) => group,
            None => self.start_group(&slice)?,
        };
        for i in 0..group.workers.len() {
            if group.workers[i].queue.send(slice.clone()).await.is_err() {
                // The worker stopped on an error: report it now.
                let failed = group.workers.swap_remove(i);
                failed.finish().await?;
                return Err(ParquetError::General("an encoding worker stopped".into()));
            }
        }
        self.group = Some(group);
        Ok(())
    }

    /// Choose the file's dictionaries from the rows held back, then encode
    /// them (see `dictionary_choice`).
    async fn choose_dictionaries(&mut self) -> Result<()> {
        let Some(sample) = self.sample.take() else {
            return Ok(());
        };
        let props = self.file.properties();
        let plain = plain_columns(
            &self.schema,
            self.file.schema_descr(),
            props,
            &sample.batches,
        )?;
        if !plain.is_empty() {
            // A factory of the same file whose columns have those settings.
            let chosen = Arc::new(without_dictionary(props, &plain));
            let root = self.file.schema_descr().root_schema_ptr();
            let settings = SerializedFileWriter::new(std::io::sink(), root, chosen)?;
            self.factory = ArrowRowGroupWriterFactory::new(&settings, self.schema.clone());
        }
        for slice in sample.batches {
            self.encode(slice).await?;
        }
        Ok(())
    }

    /// The estimated encoded size of the row group in progress (batches
    /// queued or being encoded not yet counted: a flush by size comes at
    /// most [`QUEUED_BATCHES`] + 1 batches late).
    /// Rows held back for the dictionary choice count at their size in
    /// memory.
    pub(crate) fn in_progress_size(&self) -> usize {
        let encoding = self.group.as_ref().map_or(0, |g| {
            g.workers
                .iter()
                .map(|w| w.encoded.load(Ordering::Relaxed))
                .sum()
        });
        encoding + self.sample.as_ref().map_or(0, |s| s.bytes)
    }

    /// Bytes written to the file so far (row groups ended).
    pub(crate) fn bytes_written(&self) -> usize {
        self.file.bytes_written()
    }

    /// End the row group in progress, if any, and send it to the sink.
    pub(crate) async fn flush(&mut self) -> Result<()> {
        self.begin()?;
        self.end_group().await?;
        self.failed = false;
        Ok(())
    }

    /// End the file: the last row group, the footer; the sink is shut down
    /// (an upload completed).
    pub(crate) async fn finish(&mut self) -> Result<ParquetMetaData> {
        self.begin()?;
        self.end_group().await?;
        let metadata = self.file.finish()?;
        self.send().await?;
        self.sink
            .shutdown()
            .await
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        self.failed = false;
        Ok(metadata)
    }

    async fn end_group(&mut self) -> Result<()> {
        self.choose_dictionaries().await?;
        self.group_rows = 0;
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        // Each worker's columns closed on a blocking thread (closing
        // compresses the last pages), all at once.
        let mut closing = Vec::new();
        for worker in group.workers {
            let fields = worker.finish().await?;
            closing.push(tokio::task::spawn_blocking(move || close(fields)));
        }
        let mut chunks = Vec::new();
        for task in closing {
            chunks.extend(
                task.await
                    .map_err(|e| ParquetError::External(Box::new(e)))??,
            );
        }
        chunks.sort_by_key(|(leaf, _)| *leaf);
        let mut row_group = self.file.next_row_group()?;
        for (_, chunk) in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.row_groups += 1;
        self.send().await
    }

    async fn send(&mut self) -> Result<()> {
        let bytes = self.buffer.take();
        self.sink
            .write_all(&bytes)
            .await
            .map_err(|e| ParquetError::External(Box::new(e)))
    }

    /// Column writers for the next row group, dealt to the workers.
    fn start_group(&self, first: &RecordBatch) -> Result<RowGroup> {
        let writers = self.factory.create_column_writers(self.row_groups)?;
        // Each leaf's top-level field, for `compute_leaves`.
        let descr = self.file.schema_descr();
        let mut fields: Vec<FieldWriters> = (0..self.schema.fields().len())
            .map(|_| Vec::new())
            .collect();
        for (leaf, writer) in writers.into_iter().enumerate() {
            fields[descr.get_column_root_idx(leaf)].push((leaf, writer));
        }
        // Largest field first, each to the least loaded worker.
        let mut order: Vec<usize> = (0..fields.len()).collect();
        let size = |i: usize| first.column(i).get_array_memory_size();
        order.sort_by_key(|i| std::cmp::Reverse(size(*i)));
        let n = self.workers.min(fields.len()).max(1);
        let mut load = vec![0usize; n];
        let mut assigned: Vec<WorkerFields> = (0..n).map(|_| Vec::new()).collect();
        let mut fields: Vec<Option<FieldWriters>> = fields.into_iter().map(Some).collect();
        for i in order {
            let w = (0..n).min_by_key(|w| load[*w]).expect("one worker");
            load[w] += size(i).max(1);
            assigned[w].push((i, fields[i].take().expect("each field once")));
        }
        let workers = assigned
            .into_iter()
            .map(|fields| Worker::start(fields, self.schema.clone()))
            .collect::<Result<_>>()?;
        Ok(RowGroup { workers })
    }
}

/// The bytes `batch`'s rows take (not the whole buffers a slice shares).
pub(crate) fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

/// A worker's columns closed into chunks, with their leaf indexes.
fn close(fields: WorkerFields) -> Result<Vec<(usize, ArrowColumnChunk)>> {
    let mut chunks = Vec::new();
    for (_, writers) in fields {
        for (leaf, writer) in writers {
            chunks.push((leaf, writer.close()?));
        }
    }
    Ok(chunks)
}

/// The bytes the file writer has produced and the sink not yet taken.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().expect("buffer lock"))
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray, StructArray};
    use arrow_schema::{DataType, Field, Fields};

    fn batch(from: i64, rows: usize) -> RecordBatch {
        let ids = Int64Array::from_iter_values(from..from + rows as i64);
        let names =
            StringArray::from_iter((0..rows).map(|i| (i % 7 != 0).then(|| format!("n{}", i % 13))));
        let amounts = Float64Array::from_iter_values((0..rows).map(|i| i as f64 * 0.5));
        let inner = Fields::from(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, true),
        ]);
        let nested = StructArray::new(
            inner,
            vec![
                Arc::new(ids.clone()) as ArrayRef,
                Arc::new(names.clone()) as ArrayRef,
            ],
            None,
        );
        let mut list = ListBuilder::new(Int32Builder::new());
        for i in 0..rows {
            for j in 0..(i % 3) {
                list.values().append_value(j as i32);
            }
            list.append(i % 5 != 0);
        }
        RecordBatch::try_from_iter([
            ("id", Arc::new(ids) as ArrayRef),
            ("nested", Arc::new(nested) as ArrayRef),
            ("name", Arc::new(names) as ArrayRef),
            ("tags", Arc::new(list.finish()) as ArrayRef),
            ("amount", Arc::new(amounts) as ArrayRef),
        ])
        .unwrap()
    }

    fn props() -> WriterProperties {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
            .set_column_bloom_filter_enabled("name".into(), true)
            .build()
    }

    /// What `ArrowWriter` writes for `batches` with [`props`] (row groups
    /// of 1,000 rows: every dictionary fits, `dictionary_choice` keeps
    /// them all).
    fn arrow_writer_bytes(batches: &[RecordBatch]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut w = ArrowWriter::try_new(&mut bytes, batches[0].schema(), Some(props())).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        bytes
    }

    /// The same file `ArrowWriter` writes with the same dictionaries, byte
    /// for byte, whatever the number of workers: nested columns, nulls, row
    /// groups ended at the row limit across batches, page index and bloom
    /// filter included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_are_the_bytes_arrow_writer_writes() {
        let batches = [batch(0, 700), batch(700, 1800), batch(2500, 3)];
        let schema = batches[0].schema();
        let expected = arrow_writer_bytes(&batches);
        for workers in [1, 2, 3, 8] {
            let mut w = FileWriter::try_new(Vec::new(), schema.clone(), props(), workers).unwrap();
            for b in &batches {
                w.write(b).await.unwrap();
            }
            let meta = w.finish().await.unwrap();
            assert_eq!(meta.num_row_groups(), 3, "workers={workers}");
            assert_eq!(w.bytes_written(), expected.len(), "workers={workers}");
            assert!(w.sink == expected, "workers={workers}: the bytes differ");
        }
    }

    /// Workers do not use tokio's blocking threads: many workers on a
    /// runtime with one blocking thread finish (workers waiting for their
    /// next batch on blocking threads would wait forever), with the same
    /// bytes.
    #[test]
    fn many_workers_share_one_blocking_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_time()
            .build()
            .unwrap();
        // Ten batches per row group: more than a worker could queue.
        let batches: Vec<RecordBatch> = (0..20).map(|i| batch(i * 100, 100)).collect();
        let schema = batches[0].schema();
        let expected = arrow_writer_bytes(&batches);
        let written = rt.block_on(async {
            let mut w = FileWriter::try_new(Vec::new(), schema, props(), 5).unwrap();
            let all = async {
                for b in &batches {
                    w.write(b).await.unwrap();
                }
                w.finish().await.unwrap();
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), all)
                .await
                .expect("the writer finished");
            w.sink
        });
        assert!(written == expected, "the bytes differ");
    }

    /// A write that fails leaves the writer failed: later calls error
    /// instead of finishing a file without the lost rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_a_failed_write_the_file_cannot_be_finished() {
        let b = batch(0, 10);
        let mut w = FileWriter::try_new(Vec::new(), b.schema(), props(), 2).unwrap();
        w.write(&b).await.unwrap();
        // A batch whose columns do not match the schema's types.
        let wrong = RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
            ("nested", b.column(1).slice(0, 1)),
            ("name", b.column(2).slice(0, 1)),
            ("tags", b.column(3).slice(0, 1)),
            ("amount", b.column(4).slice(0, 1)),
        ])
        .unwrap();
        let failed = async {
            w.write(&wrong).await?;
            w.flush().await
        };
        assert!(failed.await.is_err());
        assert!(w.finish().await.is_err());
    }

    /// In row groups large enough for a column's dictionary to pass its
    /// limit, a column of distinct values goes without one (the same bytes
    /// as `ArrowWriter` told so), and a repeating one keeps it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn distinct_columns_are_written_without_a_dictionary() {
        let batches: Vec<RecordBatch> = (0..3).map(|i| batch(i * 8192, 8192)).collect();
        let large_groups = || {
            WriterProperties::builder()
                .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
                .build()
        };
        let mut w =
            FileWriter::try_new(Vec::new(), batches[0].schema(), large_groups(), 2).unwrap();
        for b in &batches {
            w.write(b).await.unwrap();
        }
        let meta = w.finish().await.unwrap();
        let dictionary = |name: &str| {
            let columns = meta.row_group(0).columns();
            let c = columns
                .iter()
                .find(|c| c.column_path().string() == name)
                .unwrap();
            c.dictionary_page_offset().is_some()
        };
        assert!(!dictionary("id"), "distinct ids kept a dictionary");
        assert!(dictionary("name"), "13 names lost their dictionary");
        let plain = [parquet::schema::types::ColumnPath::from("id")];
        let told = without_dictionary(&large_groups(), &plain);
        let mut expected = Vec::new();
        let mut a = ArrowWriter::try_new(&mut expected, batches[0].schema(), Some(told)).unwrap();
        for b in &batches {
            a.write(b).unwrap();
        }
        a.close().unwrap();
        assert!(w.sink == expected, "the bytes differ");
    }

    /// A file finished before any row (nothing to choose dictionaries
    /// from) is a valid empty file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_without_rows_finishes() {
        let b = batch(0, 10);
        let mut w = FileWriter::try_new(Vec::new(), b.schema(), props(), 2).unwrap();
        w.write(&b.slice(0, 0)).await.unwrap();
        assert_eq!(w.finish().await.unwrap().num_row_groups(), 0);
    }

    /// Row groups end where the caller flushes, as with `ArrowWriter`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flush_ends_the_row_group() {
        let b = batch(0, 10);
        let mut w = FileWriter::try_new(Vec::new(), b.schema(), props(), 2).unwrap();
        w.write(&b).await.unwrap();
        w.flush().await.unwrap();
        w.flush().await.unwrap();
        w.write(&b).await.unwrap();
        assert_eq!(w.finish().await.unwrap().num_row_groups(), 2);
    }
}
