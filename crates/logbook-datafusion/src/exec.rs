//! The physical scan of a logbook snapshot: files grouped into partitions,
//! read through logbook-core, skipping row groups and pages the scan's
//! predicate rules out, with an optional validity filter for dimensions
//! resolved at a date. `EXPLAIN ANALYZE` shows what was read and skipped.

use std::fmt;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions, Scalar};
use arrow_schema::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{StreamExt, TryStreamExt};
use logbook_core::reader::{FilePruner, ReadCounters, ReadOptions, ScanHooks};
use logbook_core::{DataFile, TableFiles, TableSchema, VALID_FROM, VALID_TO};

use crate::prune::{InsideFiles, ScanPredicate};

/// Which rows of a dimension a scan returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidityFilter {
    /// Rows valid on this day (days since the epoch).
    At(i32),
    /// Rows still valid (`valid_to IS NULL`).
    Current,
}

impl ValidityFilter {
    /// The filter as an expression, so that pruning skips intervals that
    /// ended before the date or start after it.
    pub(crate) fn expr(self) -> datafusion::logical_expr::Expr {
        use datafusion::logical_expr::{col, lit};
        let to = || col(VALID_TO);
        match self {
            ValidityFilter::Current => to().is_null(),
            ValidityFilter::At(day) => {
                let day = || lit(datafusion::scalar::ScalarValue::Date32(Some(day)));
                col(VALID_FROM)
                    .lt_eq(day())
                    .and(to().is_null().or(to().gt(day())))
            }
        }
    }
}

/// What a [`LogbookScanExec`] reads, apart from its table's files: what a plan
/// sent to another process carries to build the same scan there
/// ([`LogbookScanExec::parts`], [`LogbookScanExec::from_parts`]). The files
/// are listed, so a scan built from parts reads exactly the files planned,
/// whatever was committed since.
#[derive(Debug, Clone)]
pub struct ScanParts {
    /// The schema the query was planned with.
    pub table_schema: TableSchema,
    /// The files, one group per output partition.
    pub groups: Vec<Vec<DataFile>>,
    /// The schema the scan outputs.
    pub schema: SchemaRef,
    /// Which rows of a dimension are returned.
    pub validity: Option<ValidityFilter>,
    /// What was pruned to, for display.
    pub label: String,
    /// The planned filters row groups and pages are pruned with, over
    /// [`ScanParts::filter_schema`].
    pub filters: Vec<Arc<dyn PhysicalExpr>>,
}

impl ScanParts {
    /// The schema [`ScanParts::filters`] refer to: the table's columns as
    /// the scan reads them (view types).
    pub fn filter_schema(&self) -> SchemaRef {
        Arc::new(logbook_core::reader::with_view_types(
            &self.table_schema.arrow_schema(),
        ))
    }
}

/// Reads groups of data files of one snapshot; one output partition per group.
pub struct LogbookScanExec {
    /// The table and version the files were listed from.
    source: TableFiles,
    /// The schema the query was planned with; files are adapted to it.
    table_schema: TableSchema,
    groups: Vec<Vec<DataFile>>,
    /// The schema this node outputs.
    schema: SchemaRef,
    /// Columns read from the files (output columns plus validity columns
    /// when filtering).
    read_columns: Vec<String>,
    validity: Option<ValidityFilter>,
    properties: Arc<PlanProperties>,
    /// For display: what was pruned to.
    label: String,
    /// What the scan's filters rule out, tested inside each file.
    predicate: Option<Arc<ScanPredicate>>,
    pruner: Option<Arc<dyn FilePruner>>,
    /// What every partition of this scan read.
    counters: Arc<ReadCounters>,
}

impl fmt::Debug for LogbookScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogbookScanExec")
            .field("label", &self.label)
            .finish()
    }
}

impl LogbookScanExec {
    pub(crate) fn new(
        source: TableFiles,
        table_schema: TableSchema,
        groups: Vec<Vec<DataFile>>,
        schema: SchemaRef,
        validity: Option<ValidityFilter>,
        label: String,
    ) -> Self {
        let mut read_columns: Vec<String> =
            schema.fields().iter().map(|f| f.name().clone()).collect();
        if validity.is_some() {
            for c in [VALID_FROM, VALID_TO] {
                if !read_columns.iter().any(|r| r == c) {
                    read_columns.push(c.to_string());
                }
            }
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            // As many partitions as groups: a scan planned here has at
            // least one (possibly empty); one a cluster's scheduler gave no
            // groups has none, as its task expects.
            Partitioning::UnknownPartitioning(groups.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            source,
            table_schema,
            groups,
            schema,
            read_columns,
            validity,
            properties,
            label,
            predicate: None,
            pruner: None,
            counters: Arc::new(ReadCounters::default()),
        }
    }

    /// Skip row groups and pages `predicate` rules out (its file-level
    /// count comes from planning).
    pub(crate) fn with_predicate(mut self, predicate: Option<Arc<ScanPredicate>>) -> Self {
        self.pruner = predicate.as_ref().map(|p| {
            Arc::new(InsideFiles {
                predicate: p.clone(),
                schema: self.table_arrow(),
            }) as Arc<dyn FilePruner>
        });
        self.predicate = predicate;
        self
    }

    /// The table's columns as this scan reads them (view types), which the
    /// predicate was planned against.
    fn table_arrow(&self) -> SchemaRef {
        Arc::new(logbook_core::reader::with_view_types(
            &self.table_schema.arrow_schema(),
        ))
    }

    /// The table and version the files were listed from.
    pub fn source(&self) -> &TableFiles {
        &self.source
    }

    /// What this scan reads, to build it again elsewhere.
    pub fn parts(&self) -> ScanParts {
        ScanParts {
            table_schema: self.table_schema.clone(),
            groups: self.groups.clone(),
            schema: self.schema.clone(),
            validity: self.validity,
            label: self.label.clone(),
            filters: self
                .predicate
                .as_ref()
                .map(|p| p.conjuncts.clone())
                .unwrap_or_default(),
        }
    }

    /// The scan `parts` describe, reading from `source` (the table and
    /// version the parts were taken from).
    pub fn from_parts(source: TableFiles, parts: ScanParts) -> Self {
        let predicate = ScanPredicate::from_conjuncts(
            parts.filters.clone(),
            &parts.filter_schema(),
            parts.table_schema.partition_column(),
        )
        .map(Arc::new);
        Self::new(
            source,
            parts.table_schema,
            parts.groups,
            parts.schema,
            parts.validity,
            parts.label,
        )
        .with_predicate(predicate)
    }

    /// Every file this scan will open.
    pub fn files(&self) -> impl Iterator<Item = &DataFile> {
        self.groups.iter().flatten()
    }

    fn rows(&self, partition: Option<usize>) -> Option<u64> {
        // Filtered or pruned inside files: fewer rows than the files hold.
        if self.validity.is_some() || self.predicate.is_some() {
            return None;
        }
        let files: Vec<&DataFile> = match partition {
            Some(p) => self.groups.get(p)?.iter().collect(),
            None => self.files().collect(),
        };
        Some(files.iter().map(|f| f.rows).sum())
    }
}

impl DisplayAs for LogbookScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "LogbookScanExec: table={}, version={}, {}, files={}",
            self.source.table_name(),
            self.source.version(),
            self.label,
            self.files().count()
        )
    }
}

impl ExecutionPlan for LogbookScanExec {
    fn name(&self) -> &str {
        "LogbookScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let files = self.groups.get(partition).cloned().unwrap_or_default();
        let columns: Vec<&str> = self.read_columns.iter().map(String::as_str).collect();
        let options = ReadOptions::default()
            .with_batch_size(context.session_config().batch_size())
            .with_view_types(true);
        let hooks = ScanHooks {
            pruner: self.pruner.clone(),
            counters: Some(self.counters.clone()),
        };
        let stream = self
            .source
            .scan_as(&self.table_schema, files, Some(&columns), options, hooks);
        let schema = self.schema.clone();
        let validity = self.validity;
        let out = stream
            .map_err(|e| DataFusionError::External(Box::new(e)))
            .and_then(move |batch| {
                let schema = schema.clone();
                async move { shape(batch, &schema, validity) }
            })
            .boxed();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            out,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let set = ExecutionPlanMetricsSet::new();
        let read = self.counters.get();
        let mut values = vec![
            ("bytes_read", read.bytes),
            ("files_opened", read.files),
            ("row_groups", read.row_groups),
            ("row_groups_read", read.row_groups_read),
            ("rows_read", read.rows_read),
        ];
        if let Some(p) = &self.predicate {
            values.extend(p.counts.values());
        }
        for (name, value) in values {
            MetricBuilder::new(&set)
                .global_counter(name)
                .add(value as usize);
        }
        Some(set.clone_inner())
    }

    #[allow(deprecated)]
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let stats = Statistics::new_unknown(&self.schema);
        Ok(Arc::new(match self.rows(partition) {
            Some(n) => stats.with_num_rows(Precision::Exact(n as usize)),
            None => stats,
        }))
    }
}

/// Filter a file batch by validity, then project it to `schema` by name.
fn shape(
    batch: RecordBatch,
    schema: &SchemaRef,
    validity: Option<ValidityFilter>,
) -> Result<RecordBatch> {
    let batch = match validity {
        Some(v) => {
            let mask = valid_mask(&batch, v)?;
            datafusion::arrow::compute::filter_record_batch(&batch, &mask)?
        }
        None => batch,
    };
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| {
            batch.column_by_name(f.name()).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!("column {} missing from scan", f.name()))
            })
        })
        .collect::<Result<_>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?)
}

fn valid_mask(batch: &RecordBatch, v: ValidityFilter) -> Result<BooleanArray> {
    let col = |name: &str| {
        batch
            .column_by_name(name)
            .cloned()
            .ok_or_else(|| DataFusionError::Internal(format!("{name} missing from dimension scan")))
    };
    let to = col(VALID_TO)?;
    let open = datafusion::arrow::compute::is_null(&to)?;
    Ok(match v {
        ValidityFilter::Current => open,
        ValidityFilter::At(day) => {
            let day = Scalar::new(arrow_array::Date32Array::from(vec![day]));
            let started = datafusion::arrow::compute::kernels::cmp::lt_eq(&col(VALID_FROM)?, &day)?;
            let not_ended = datafusion::arrow::compute::kernels::cmp::gt(&to, &day)?;
            let not_ended = datafusion::arrow::compute::or_kleene(&open, &not_ended)?;
            let mask = datafusion::arrow::compute::and_kleene(&started, &not_ended)?;
            // Nulls (none expected) count as not valid.
            if mask.null_count() > 0 {
                datafusion::arrow::compute::prep_null_mask_filter(&mask)
            } else {
                mask
            }
        }
    })
}
