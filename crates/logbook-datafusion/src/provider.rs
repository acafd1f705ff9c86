//! `TableProvider`s for logbook tables: one that follows the latest
//! snapshot and one pinned to a version; dimension views resolved at a date.

use std::sync::Arc;

use arrow_schema::SchemaRef;
use async_trait::async_trait;
use chrono::NaiveDate;
use datafusion::catalog::Session;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use logbook_core::publish::WarehousePoint;
use logbook_core::{DataFile, Snapshot, Table, TableSchema};

use crate::exec::{LogbookScanExec, ValidityFilter};
use crate::lineage::{Lineage, Read};
use crate::prune::{prune_files, DateBounds, ScanPredicate};

/// Which rows of a dimension a provider exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimensionView {
    /// Every interval, with `valid_from` and `valid_to` (analysts' default).
    History,
    /// Rows valid on a business date (a run's `as-of` mode).
    AsOf(NaiveDate),
    /// Rows still valid today (a run's `current` mode).
    Current,
}

/// The version a provider scans.
#[derive(Debug, Clone)]
enum Reads {
    /// The head: the one the query's preparation found ([`Heads`]), else
    /// probed when the scan is planned (a session that lives for days
    /// follows the table, query by query).
    Latest,
    /// One version, read when the query was prepared (a pin, or
    /// `snapshot()`): scans probe and read nothing of the log.
    Snapshot(Snapshot),
    /// The head as the session opened it (a Flight ticket's plan), read
    /// at the query's warehouse point when it has one.
    Opened(Snapshot),
}

/// A logbook table as a DataFusion table.
///
/// [`LogbookTableProvider::latest`] reads the latest snapshot as each query
/// finds it (when it is prepared, or else when its scan is planned);
/// [`LogbookTableProvider::pinned`] always reads one version.
#[derive(Debug, Clone)]
pub struct LogbookTableProvider {
    table: Table,
    schema: TableSchema,
    arrow: SchemaRef,
    reads: Reads,
    view: DimensionView,
    lineage: Option<Arc<Lineage>>,
    /// A run inside this stage reads the table as the stage holds it.
    stage: Option<String>,
    /// The warehouse point the query this provider was planned for reads
    /// at (when it names several tables).
    point: Option<WarehousePoint>,
}

impl LogbookTableProvider {
    /// Follow the latest snapshot of `table`.
    pub async fn latest(table: Table) -> logbook_core::Result<Self> {
        let snap = table.latest().await?;
        Ok(Self::new(table, snap.schema().clone()))
    }

    /// Always read `version` of `table`: read and checked against the
    /// head's retention here, once; scans read that snapshot.
    pub async fn pinned(table: Table, version: u64) -> logbook_core::Result<Self> {
        let snap = table.at_version(version).await?;
        Ok(Self::of_snapshot(table, snap))
    }

    /// Read `snapshot`, already resolved: a scan asks the log nothing.
    pub(crate) fn of_snapshot(table: Table, snapshot: Snapshot) -> Self {
        let mut p = Self::new(table, snapshot.schema().clone());
        p.reads = Reads::Snapshot(snapshot);
        p
    }

    /// Read the head the session opened (`snapshot`), stepped back to the
    /// query's warehouse point when it has one.
    pub(crate) fn as_opened(table: Table, snapshot: Snapshot) -> Self {
        let mut p = Self::new(table, snapshot.schema().clone());
        p.reads = Reads::Opened(snapshot);
        p
    }

    /// Follow the latest snapshot of `table`, whose schema is `schema`.
    pub(crate) fn new(table: Table, schema: TableSchema) -> Self {
        Self {
            // Strings as view types, as DataFusion's own Parquet source reads
            // them: cheaper hash joins and comparisons on string keys.
            arrow: Arc::new(logbook_core::reader::with_view_types(
                &schema.arrow_schema(),
            )),
            table,
            schema,
            reads: Reads::Latest,
            view: DimensionView::History,
            lineage: None,
            stage: None,
            point: None,
        }
    }

    /// Resolve a dimension through `view` (ignored for partitioned tables).
    pub fn with_view(mut self, view: DimensionView) -> Self {
        self.view = view;
        self
    }

    /// Record every scan into `lineage`.
    pub fn with_lineage(mut self, lineage: Arc<Lineage>) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// The rows of a dimension this provider's view keeps (`None`: all).
    fn validity(&self) -> Option<ValidityFilter> {
        if self.schema.partition_column().is_some() {
            return None;
        }
        match self.view {
            DimensionView::History => None,
            DimensionView::Current => Some(ValidityFilter::Current),
            DimensionView::AsOf(d) => Some(ValidityFilter::At(logbook_core::dates::to_days(d))),
        }
    }

    /// The snapshot a scan reads: the one read already, or the head (the
    /// one the query's preparation found, when it did), at the query's
    /// warehouse point when it has one.
    async fn snapshot(&self, state: &dyn Session) -> logbook_core::Result<Snapshot> {
        let point = self.point;
        let prepared = || {
            let heads = state.config().get_extension::<Heads>()?;
            heads.get(&self.table, point)
        };
        let snapshot = match (&self.reads, point, prepared()) {
            (Reads::Latest, _, Some(head)) => head,
            (Reads::Latest, None, None) => self.table.latest().await?,
            (Reads::Latest, Some(p), None) => self.table.at_point(p).await?,
            (Reads::Snapshot(s), _, _) => return Ok(s.clone()),
            (Reads::Opened(s), None, _) => s.clone(),
            (Reads::Opened(s), Some(p), _) => s.at_point(p).await?,
        };
        match &self.stage {
            Some(stage) if self.schema.partition_column().is_some() => {
                snapshot.in_stage(stage).await
            }
            _ => Ok(snapshot),
        }
    }

    /// Read the head at `point` (the query's, when it names several tables).
    pub(crate) fn with_point(mut self, point: Option<WarehousePoint>) -> Self {
        self.point = point;
        self
    }

    /// Read the table as stage `stage` holds it (a run inside the stage):
    /// its staged dates in place of the main line's. Pinned versions and
    /// `snapshot()` are read as they are.
    pub fn with_stage(mut self, stage: Option<String>) -> Self {
        self.stage = stage;
        self
    }
}

/// The warehouse point the query being planned reads its tables at: set
/// by [`crate::prepare`] before it opens them (when the query names more
/// than one table, or from `QueryOptions::point`); each provider planned
/// for the query keeps its value, so its scans step back over publishes
/// decided after it, whenever they are planned, and no query sees part of
/// a multi-table publish. (A view keeps the point of the query that made
/// it.)
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadPoint(Arc<std::sync::Mutex<Option<WarehousePoint>>>);

impl ReadPoint {
    pub(crate) fn set(&self, point: Option<WarehousePoint>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = point;
    }

    pub(crate) fn get(&self) -> Option<WarehousePoint> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn external(e: logbook_core::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

#[async_trait]
impl TableProvider for LogbookTableProvider {
    fn schema(&self) -> SchemaRef {
        self.arrow.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Used to prune partitions, files, row groups and pages; DataFusion
        // still applies every filter.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = self.snapshot(state).await.map_err(external)?;
        let schema: SchemaRef = match projection {
            Some(p) => Arc::new(self.arrow.project(p)?),
            None => self.arrow.clone(),
        };
        let target = state.config().target_partitions().max(1);
        let mut tests: Vec<Expr> = filters.to_vec();
        if let Some(v) = self.validity() {
            tests.push(v.expr());
        }
        let predicate =
            ScanPredicate::new(&tests, &self.arrow, state, self.schema.partition_column())
                .map(Arc::new);
        let prune = |files: Vec<DataFile>| match &predicate {
            Some(p) => prune_files(p, &self.schema, &self.arrow, files),
            None => files,
        };
        let (groups, label, validity) = match self.schema.partition_column() {
            Some(column) => {
                let bounds = DateBounds::from_filters(filters, column);
                let span = bounds.span();
                // Only the manifests of the dates the filters allow are read.
                let parts: Vec<_> = match &span.only {
                    // A contradiction (`date = A AND date = B`) allows none.
                    Some(only) if only.is_empty() => Ok(Vec::new()),
                    Some(only) => {
                        let (from, to) = (only.iter().min().copied(), only.iter().max().copied());
                        snapshot.partitions_between(from, to).await
                    }
                    None => snapshot.partitions_between(span.from, span.to).await,
                }
                .map_err(external)?
                .into_iter()
                .filter(|p| bounds.allows(logbook_core::dates::to_days(p.date)))
                .collect();
                let dates: Vec<NaiveDate> = parts.iter().map(|p| p.date).collect();
                if let Some(l) = &self.lineage {
                    let staged = snapshot.stage().map(|stage| {
                        let dates = parts
                            .iter()
                            .filter_map(|p| {
                                Some((p.date, snapshot.staged_run(p.date)?.to_string()))
                            })
                            .collect();
                        (stage.to_string(), dates)
                    });
                    let read = Read::Partitions {
                        asked: span,
                        found: parts.iter().map(|p| (p.date, p.version)).collect(),
                        staged,
                    };
                    l.record(self.table.name(), snapshot.content_version(), read);
                }
                let label = match (dates.first(), dates.last()) {
                    (Some(a), Some(b)) => format!("dates={} ({a}..={b})", dates.len()),
                    _ => "dates=0".to_string(),
                };
                let files: Vec<DataFile> = parts.into_iter().flat_map(|p| p.files).collect();
                (spread(prune(files), target), label, None)
            }
            None => {
                if let Some(l) = &self.lineage {
                    let at = match self.view {
                        DimensionView::AsOf(d) => Some(d),
                        DimensionView::Current | DimensionView::History => None,
                    };
                    let data_version = snapshot.dimension_version();
                    let read = Read::Dimension { at, data_version };
                    l.record(self.table.name(), snapshot.content_version(), read);
                }
                let label = match self.view {
                    DimensionView::History => "history".to_string(),
                    DimensionView::Current => "current".to_string(),
                    DimensionView::AsOf(d) => format!("as-of {d}"),
                };
                let files = prune(snapshot.dimension_files());
                (spread(files, target), label, self.validity())
            }
        };
        let exec = LogbookScanExec::new(
            snapshot.files(),
            self.schema.clone(),
            groups,
            schema,
            validity,
            label,
        );
        Ok(Arc::new(exec.with_predicate(predicate)))
    }
}

/// Deal files into at most `n` groups, keeping each file's rows in order.
fn spread(files: Vec<DataFile>, n: usize) -> Vec<Vec<DataFile>> {
    let mut groups: Vec<Vec<DataFile>> = vec![Vec::new(); n.min(files.len()).max(1)];
    let len = groups.len();
    for (i, f) in files.into_iter().enumerate() {
        groups[i % len].push(f);
    }
    groups
}

/// The head of each table one query reads at its latest version (at the
/// query's warehouse point when it has one), found by [`crate::prepare`]
/// for that query alone (the head found opening the table, when the query
/// opened it; else the log's, asked of every table at once). A scan of the
/// latest version reads it instead of asking the log again, one round trip
/// per scan on an object store, and every scan of a table in the query
/// reads the same version: the query's versions are fixed when it is
/// prepared. Keyed by the table's location and the point, so that a
/// provider of another session or warehouse planned with this state (a
/// union of two sessions' frames) finds nothing here and asks its own log.
#[derive(Debug, Default)]
pub(crate) struct Heads(std::collections::HashMap<(String, Option<WarehousePoint>), Snapshot>);

impl Heads {
    /// Record `head` as what this query reads of `table` at `point`.
    pub(crate) fn insert(&mut self, table: &Table, point: Option<WarehousePoint>, head: Snapshot) {
        self.0
            .insert((table.location().uri().to_string(), point), head);
    }

    /// The head this query reads of `table` at `point`, if prepared.
    fn get(&self, table: &Table, point: Option<WarehousePoint>) -> Option<Snapshot> {
        let key = (table.location().uri().to_string(), point);
        self.0.get(&key).cloned()
    }
}
