//! A query's result on the wire: batches stream as DataFusion produces them
//! (nothing is buffered, so server memory stays bounded whatever the result
//! size), capped at a row limit, with one log line when the stream ends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::FlightData;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use logbook_datafusion::datafusion;
use tokio::sync::OwnedSemaphorePermit;
use tonic::Status;

use crate::query::datafusion_status;

/// What the log line says about a query.
#[derive(Debug, Clone)]
pub struct QueryLog {
    /// The client's address, or `unknown`.
    pub client: String,
    /// The statement as received.
    pub sql: String,
    /// When the server began planning it.
    pub started: Instant,
}

/// A result stream: counts rows, enforces the limit, logs at the end and
/// holds the query's slot until dropped.
struct Limited {
    inner: SendableRecordBatchStream,
    schema: SchemaRef,
    max_rows: u64,
    rows: u64,
    log: QueryLog,
    done: bool,
    _permit: OwnedSemaphorePermit,
}

impl Limited {
    fn finish(&mut self, outcome: &str) {
        if !self.done {
            self.done = true;
            tracing::info!(
                client = %self.log.client,
                rows = self.rows,
                ms = self.log.started.elapsed().as_millis() as u64,
                outcome,
                sql = %self.log.sql,
                "query"
            );
        }
    }
}

impl Stream for Limited {
    type Item = Result<RecordBatch, FlightError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.finish("ok");
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.finish("failed");
                Poll::Ready(Some(Err(FlightError::Tonic(Box::new(datafusion_status(
                    e,
                ))))))
            }
            Poll::Ready(Some(Ok(batch))) => {
                self.rows += batch.num_rows() as u64;
                if self.rows > self.max_rows {
                    let max = self.max_rows;
                    self.finish("over the row limit");
                    return Poll::Ready(Some(Err(FlightError::Tonic(Box::new(
                        Status::resource_exhausted(format!(
                            "the result has more than {max} rows, this server's limit per query: add a LIMIT or a filter (or start the server with a larger --max-result-rows)"
                        )),
                    )))));
                }
                let schema = self.schema.clone();
                Poll::Ready(Some(
                    plain_batch(&schema, batch).map_err(FlightError::Arrow),
                ))
            }
        }
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        self.finish("cancelled by the client");
    }
}

/// Encode `stream` for `DoGet` as `planned` (the schema `GetFlightInfo`
/// announced: clients check that they agree, nullability included), holding
/// `permit` until it ends.
pub fn flight_stream(
    stream: SendableRecordBatchStream,
    planned: &Schema,
    max_rows: u64,
    permit: OwnedSemaphorePermit,
    log: QueryLog,
) -> Pin<Box<dyn Stream<Item = Result<FlightData, Status>> + Send>> {
    let schema = plain_schema(planned);
    let limited = Limited {
        inner: stream,
        schema: schema.clone(),
        max_rows,
        rows: 0,
        log,
        done: false,
        _permit: permit,
    };
    let encoded = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(limited)
        .map(|r| r.map_err(Status::from));
    Box::pin(encoded)
}

/// The schema clients receive: view types (which the scan uses for speed)
/// become their classic forms, which every Arrow client reads.
pub fn plain_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| {
                Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
                    .with_metadata(f.metadata().clone())
            })
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

fn plain_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

fn plain_batch(
    schema: &SchemaRef,
    batch: RecordBatch,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow_cast::cast(c, f.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, StringViewArray};

    #[test]
    fn view_columns_become_plain_strings() {
        let schema = Schema::new(vec![Field::new("s", DataType::Utf8View, true)]);
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![Arc::new(StringViewArray::from(vec![Some("Berlin"), None]))],
        )
        .unwrap();
        let plain = plain_schema(&schema);
        let out = plain_batch(&plain, batch).unwrap();
        assert_eq!(out.column(0).data_type(), &DataType::Utf8);
        assert!(out.column(0).is_null(1));
    }
}
