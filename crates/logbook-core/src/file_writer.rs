//! One Parquet file, its columns encoded on all cores while the caller
//! produces the next batch, streamed to the object store row group by row
//! group.
//!
//! Encoding dominates a write (BENCHMARKS.md: a replace costs 1.03x of
//! arrow-rs's `ArrowWriter` alone), and `ArrowWriter` encodes one column
//! after another on the caller's thread. Here each row group's columns are
//! dealt to one worker per core (largest first to the least loaded, by the
//! first batch's sizes); a worker owns its columns' `ArrowColumnWriter`s
//! for the row group, so each column still sees its batches in order and
//! the file is the same as `ArrowWriter` would write. When the row group
//! is full the workers close their columns and the chunks are appended in
//! schema order.
//!
//! Memory stays bounded as before: each worker's queue holds at most
//! [`QUEUED_BATCHES`] batches (shared, not copied, between workers), and
//! the encoded row group is bounded by the caller's flush at
//! `row_group_bytes`, as it was with `AsyncArrowWriter`.
//!
//! Alternatives: several files in flight at once (more, smaller files per
//! partition, and a file's rows no longer in the order written), or row
//! groups encoded concurrently (a row group's memory per core).

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
use tokio::sync::mpsc;

/// Batches a worker may have waiting: the caller runs at most this far
/// ahead of the slowest worker.
pub(crate) const QUEUED_BATCHES: usize = 2;

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
    row_groups: usize,
    /// Bytes handed to `sink` so far.
    flushed: usize,
}

/// A top-level field's leaf column writers, each with its leaf index.
type FieldWriters = Vec<(usize, ArrowColumnWriter)>;

/// The fields a worker encodes, each with its index in the schema.
type WorkerFields = Vec<(usize, FieldWriters)>;

/// The row group being encoded.
struct RowGroup {
    workers: Vec<Worker>,
    rows: usize,
}

struct Worker {
    queue: mpsc::Sender<Arc<RecordBatch>>,
    /// The encoded bytes of this worker's columns so far (as
    /// `ArrowColumnWriter::get_estimated_total_bytes` says).
    encoded: Arc<AtomicUsize>,
    done: tokio::task::JoinHandle<Result<Vec<(usize, ArrowColumnChunk)>>>,
}

impl<S: AsyncWrite + Unpin + Send> FileWriter<S> {
    /// A file of `schema` with `props` (its `max_row_group_row_count` is
    /// honoured), encoded on `workers` threads.
    pub(crate) fn try_new(
        sink: S,
        schema: SchemaRef,
        props: WriterProperties,
        workers: usize,
    ) -> Result<Self> {
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
            row_groups: 0,
            flushed: 0,
        })
    }

    /// Queue `batch`'s rows, ending row groups at the row limit.
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = self.max_rows - self.group.as_ref().map_or(0, |g| g.rows);
            let take = room.min(batch.num_rows() - offset);
            let slice = Arc::new(batch.slice(offset, take));
            if self.group.is_none() {
                self.group = Some(self.start_group(&slice)?);
            }
            let group = self.group.as_mut().expect("just started");
            for w in &group.workers {
                if w.queue.send(slice.clone()).await.is_err() {
                    // The worker stopped on an error: `flush` reports it.
                    break;
                }
            }
            group.rows += take;
            offset += take;
            if group.rows >= self.max_rows {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// The estimated encoded size of the row group in progress.
    pub(crate) fn in_progress_size(&self) -> usize {
        self.group.as_ref().map_or(0, |g| {
            g.workers
                .iter()
                .map(|w| w.encoded.load(Ordering::Relaxed))
                .sum()
        })
    }

    /// Bytes written to the file so far (row groups ended).
    pub(crate) fn bytes_written(&self) -> usize {
        self.flushed + self.buffer.len()
    }

    /// End the row group in progress, if any, and send it to the sink.
    pub(crate) async fn flush(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        let mut chunks = Vec::new();
        let mut failed = None;
        for w in group.workers {
            drop(w.queue);
            match w.done.await {
                Ok(Ok(done)) => chunks.extend(done),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(e) => failed = failed.or(Some(ParquetError::External(Box::new(e)))),
            }
        }
        if let Some(e) = failed {
            return Err(e);
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

    /// End the file: the last row group, the footer; the sink is shut down
    /// (an upload completed).
    pub(crate) async fn finish(&mut self) -> Result<ParquetMetaData> {
        self.flush().await?;
        let metadata = self.file.finish()?;
        self.send().await?;
        self.sink
            .shutdown()
            .await
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(metadata)
    }

    async fn send(&mut self) -> Result<()> {
        let bytes = self.buffer.take();
        self.flushed += bytes.len();
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
        let mut fields: Vec<Vec<(usize, ArrowColumnWriter)>> = (0..self.schema.fields().len())
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
            .map(|columns| self.spawn(columns))
            .collect();
        Ok(RowGroup { workers, rows: 0 })
    }

    fn spawn(&self, mut columns: WorkerFields) -> Worker {
        let (queue, mut batches) = mpsc::channel::<Arc<RecordBatch>>(QUEUED_BATCHES);
        let encoded = Arc::new(AtomicUsize::new(0));
        let schema = self.schema.clone();
        let estimate = encoded.clone();
        let done = tokio::task::spawn_blocking(move || {
            while let Some(batch) = batches.blocking_recv() {
                let mut total = 0;
                for (field, writers) in &mut columns {
                    let leaves = compute_leaves(schema.field(*field), batch.column(*field))?;
                    for ((_, writer), leaf) in writers.iter_mut().zip(leaves) {
                        writer.write(&leaf)?;
                        total += writer.get_estimated_total_bytes();
                    }
                }
                estimate.store(total, Ordering::Relaxed);
            }
            let mut chunks = Vec::new();
            for (_, writers) in columns {
                for (leaf, writer) in writers {
                    chunks.push((leaf, writer.close()?));
                }
            }
            Ok(chunks)
        });
        Worker {
            queue,
            encoded,
            done,
        }
    }
}

/// The bytes the file writer has produced and the sink not yet taken.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().expect("buffer lock"))
    }

    fn len(&self) -> usize {
        self.0.lock().expect("buffer lock").len()
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

    /// The same file `ArrowWriter` writes, byte for byte, whatever the
    /// number of workers: nested columns, nulls, row groups ended at the
    /// row limit across batches, page index and bloom filter included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_are_the_bytes_arrow_writer_writes() {
        let batches = [batch(0, 700), batch(700, 1800), batch(2500, 3)];
        let schema = batches[0].schema();
        let mut expected = Vec::new();
        let mut w = ArrowWriter::try_new(&mut expected, schema.clone(), Some(props())).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
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
