//! Arrow streams across the boundary, through the Arrow PyCapsule interface
//! (`__arrow_c_stream__`), never collected whole.
//!
//! In: anything exporting a stream (pyarrow, polars, DuckDB, our own
//! results) is read batch by batch; each batch is handed to Rust with the
//! GIL released while it is written. Out: a DataFusion stream becomes a
//! `RecordBatchReader` whose every `next` runs the plan a step further on
//! the runtime, with view types cast to their classic forms (what every
//! Arrow reader takes).

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use logbook_core::PartitionWriter;
use logbook_datafusion::datafusion::physical_plan::SendableRecordBatchStream;
use logbook_datafusion::plain::{plain_batch, plain_schema};
use pyo3::prelude::*;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::PyRecordBatchReader;

use crate::errors;
use crate::runtime::{wait, wait_here};

/// Stream every batch of `data` into `writer`; the number of rows written.
pub(crate) fn write_all(
    py: Python<'_>,
    writer: &mut PartitionWriter,
    data: AnyRecordBatch,
) -> PyResult<u64> {
    let mut reader = data.into_reader()?;
    let mut rows = 0;
    loop {
        // Ctrl-C between batches: the caller aborts the write.
        py.check_signals()?;
        // Pulled without the GIL: a producer that needs it (a Python
        // generator behind pyarrow) takes it itself, and a query computing
        // the batch (our own `sql()` results) lets other threads run.
        let Some(batch) = py.detach(|| reader.next()) else {
            break;
        };
        let batch = batch.map_err(|e| errors::arrow("reading the input", e))?;
        rows += batch.num_rows() as u64;
        wait(py, || writer.write(&batch)).map_err(errors::core)?;
    }
    Ok(rows)
}

/// Every batch of `data`, collected (dimension changes take them whole).
pub(crate) fn collect(data: AnyRecordBatch) -> PyResult<Vec<RecordBatch>> {
    data.into_reader()?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| errors::arrow("reading the input", e))
}

/// A DataFusion stream as a Python `RecordBatchReader` (it exports
/// `__arrow_c_stream__`; pyarrow, polars and DuckDB read it without copies).
pub(crate) fn export(stream: SendableRecordBatchStream) -> PyRecordBatchReader {
    let schema = plain_schema(stream.schema().as_ref());
    PyRecordBatchReader::new(Box::new(Blocking { schema, stream }))
}

/// A stream of a table's rows (as read by core) as a `RecordBatchReader`.
pub(crate) fn export_rows(
    schema: SchemaRef,
    stream: BoxStream<'static, logbook_core::Result<RecordBatch>>,
) -> PyRecordBatchReader {
    let schema = plain_schema(&schema);
    PyRecordBatchReader::new(Box::new(Blocking { schema, stream }))
}

/// Pulls a stream on the runtime, one batch per `next`.
struct Blocking<S> {
    schema: SchemaRef,
    stream: S,
}

impl<S, E> Iterator for Blocking<S>
where
    S: Stream<Item = Result<RecordBatch, E>> + Unpin + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Called by the consumer on whatever thread it reads from, with or
        // without the GIL: the plan never needs the GIL, and taking it here
        // could deadlock a consumer whose caller holds it while it waits.
        // A panic must not cross the C stream interface (it would abort
        // the process): it becomes an error of this stream.
        let stream = &mut self.stream;
        let next =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait_here(stream.next())));
        let next = match next {
            Ok(next) => next?,
            Err(_) => {
                return Some(Err(ArrowError::ComputeError(
                    "pylogbook: reading the stream panicked".into(),
                )))
            }
        };
        Some(
            next.map_err(|e| ArrowError::ExternalError(Box::new(e)))
                .and_then(|b| plain_batch(&self.schema, b)),
        )
    }
}

impl<S, E> RecordBatchReader for Blocking<S>
where
    S: Stream<Item = Result<RecordBatch, E>> + Unpin + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
