//! Running a point-in-time join: collecting and indexing the interval
//! input once, then joining each probe batch.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow_schema::SchemaRef;
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::{concat_batches, take};
use datafusion::common::{JoinSide, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_plan::joins::utils::ColumnIndex;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, RecordOutput, Time,
};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use futures::StreamExt;

use super::index::IntervalIndex;
use super::pattern::Validity;

/// The collected interval input and its index, shared by every partition.
pub struct Built {
    batch: RecordBatch,
    index: IntervalIndex,
    _reservation: MemoryReservation,
}

/// The join's metrics for one partition.
#[derive(Clone)]
pub struct JoinMetrics {
    baseline: BaselineMetrics,
    build_time: Time,
    build_rows: Count,
    build_keys: Count,
    build_intervals: Count,
    probe_rows: Count,
}

impl JoinMetrics {
    /// Register the metrics of `partition`.
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            baseline: BaselineMetrics::new(set, partition),
            build_time: MetricBuilder::new(set).subset_time("build_time", partition),
            build_rows: MetricBuilder::new(set).counter("build_input_rows", partition),
            build_keys: MetricBuilder::new(set).counter("build_keys", partition),
            build_intervals: MetricBuilder::new(set).counter("build_intervals", partition),
            probe_rows: MetricBuilder::new(set).counter("input_rows", partition),
        }
    }
}

/// Run every partition of the interval input, concatenate, and index.
pub async fn collect_and_index(
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<PhysicalExprRef>,
    validity: Validity,
    nulls_equal: bool,
    context: Arc<TaskContext>,
    metrics: JoinMetrics,
) -> Result<Built> {
    let reservation =
        MemoryConsumer::new("PointInTimeJoinExec[build]").register(context.memory_pool());
    let mut batches = Vec::new();
    for p in 0..input.output_partitioning().partition_count() {
        let mut stream = input.execute(p, context.clone())?;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            reservation.try_grow(batch.get_array_memory_size())?;
            batches.push(batch);
        }
    }
    let _timer = metrics.build_time.timer();
    let batch = concat_batches(&input.schema(), &batches)?;
    drop(batches);
    let key_arrays = evaluate(&keys, &batch)?;
    let index = IntervalIndex::build(
        &key_arrays,
        batch.column(validity.from),
        batch.column(validity.to),
        validity.open_end,
        nulls_equal,
    )?;
    reservation.try_grow(index.size())?;
    metrics.build_rows.add(batch.num_rows());
    metrics.build_keys.add(index.keys());
    metrics.build_intervals.add(index.intervals());
    Ok(Built {
        batch,
        index,
        _reservation: reservation,
    })
}

fn evaluate(exprs: &[PhysicalExprRef], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// What one output partition needs to join its probe batches.
pub struct Probe {
    pub keys: Vec<PhysicalExprRef>,
    pub point: usize,
    pub interval_side: JoinSide,
    pub keep_unmatched: bool,
    pub columns: Vec<ColumnIndex>,
    pub schema: SchemaRef,
    pub metrics: JoinMetrics,
}

impl Probe {
    pub fn join(&self, built: &Built, batch: RecordBatch) -> Result<RecordBatch> {
        let _timer = self.metrics.baseline.elapsed_compute().timer();
        self.metrics.probe_rows.add(batch.num_rows());
        let keys = evaluate(&self.keys, &batch)?;
        let matches = built
            .index
            .probe(&keys, batch.column(self.point), self.keep_unmatched)?;
        let rows = matches.probe.len();
        let identity = rows == batch.num_rows()
            && matches
                .probe
                .iter()
                .enumerate()
                .all(|(i, &p)| p as usize == i);
        let nulls = matches.found.map(NullBuffer::from);
        let build_rows = UInt32Array::new(matches.build.into(), nulls);
        let probe_rows = UInt32Array::from(matches.probe);
        let columns = self
            .columns
            .iter()
            .map(|c| {
                if c.side == self.interval_side {
                    Ok(take(built.batch.column(c.index), &build_rows, None)?)
                } else if identity {
                    Ok(batch.column(c.index).clone())
                } else {
                    Ok(take(batch.column(c.index), &probe_rows, None)?)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let out = RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?;
        Ok(out.record_output(&self.metrics.baseline))
    }
}
