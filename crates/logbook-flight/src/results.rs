//! A query's result on the wire: batches stream as DataFusion produces them
//! (nothing is buffered, so server memory stays bounded whatever the result
//! size), capped at a row limit, with one log line when the stream ends.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::FlightData;
use arrow_schema::{Schema, SchemaRef};
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use logbook_datafusion::datafusion;
use logbook_datafusion::plain::{plain_batch, plain_schema};
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
    /// When its fetch began (a plan kept from `GetFlightInfo` was made
    /// before).
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
