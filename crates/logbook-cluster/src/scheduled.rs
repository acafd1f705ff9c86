//! A logbook scan as the scheduler holds it.
//!
//! Ballista's scheduler gives each task its slice of a stage's partitions
//! by rewriting the stage's leaves before sending them, and only for leaves
//! it knows: a `DataSourceExec` over file groups loses the groups other
//! tasks read, while an unknown leaf keeps all of them, and every task
//! would then read every file (the rows of a scan in 16 tasks, 16 times).
//! So the scheduler decodes a logbook scan as a `DataSourceExec` whose file
//! groups are the scan's groups, each file named by its index in the
//! scan's list, over [`ScheduledScan`], a file source that only carries the
//! scan. After the scheduler's rewrite, the codec encodes it again as a
//! logbook scan of the groups left, which an executor decodes as
//! `LogbookScanExec`.
//!
//! Alternative not taken: `LogbookScanExec` as a DataFusion `FileSource`
//! everywhere. It would move logbook's reader (pruning hooks, schema
//! adaptation by field id, its metrics) under DataFusion's file stream for
//! every local query, to serve the scheduler's bookkeeping.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileOpener, FileScanConfig, FileScanConfigBuilder, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema as FileTableSchema;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::ExecutionPlan;
use logbook_datafusion::exec::ScanParts;

/// A logbook scan carried through the scheduler (never executed there).
#[derive(Debug, Clone)]
pub(crate) struct ScheduledScan {
    table: String,
    version: u64,
    /// The scan without its groups (the data source's groups stand for
    /// them): what every task's scan shares.
    parts: Arc<ScanParts>,
    /// Every file of the scan, in the order the groups' indices refer to
    /// (shared: a task's scan copies only its own files).
    files: Arc<Vec<logbook_core::DataFile>>,
    schema: FileTableSchema,
    metrics: ExecutionPlanMetricsSet,
}

/// The scan one task of the scheduler's is sent.
pub(crate) struct TaskScan {
    pub(crate) table: String,
    pub(crate) version: u64,
    pub(crate) parts: ScanParts,
    /// The row limit the scheduler's rules gave it (per partition).
    pub(crate) limit: Option<usize>,
}

/// The scan as a `DataSourceExec` the scheduler can split between tasks.
pub(crate) fn to_data_source(
    table: String,
    version: u64,
    mut parts: ScanParts,
) -> Result<Arc<dyn ExecutionPlan>> {
    let mut files = Vec::new();
    let mut groups = Vec::new();
    for group in std::mem::take(&mut parts.groups) {
        let mut members = Vec::new();
        for file in group {
            members.push(PartitionedFile::new(files.len().to_string(), file.size));
            files.push(file);
        }
        groups.push(FileGroup::new(members));
    }
    let source = ScheduledScan {
        table,
        version,
        schema: FileTableSchema::from(parts.schema.clone()),
        parts: Arc::new(parts),
        files: Arc::new(files),
        metrics: ExecutionPlanMetricsSet::new(),
    };
    // Not a store anything reads: the source is never opened.
    let url = ObjectStoreUrl::parse("logbook://scheduled")?;
    let config = FileScanConfigBuilder::new(url, Arc::new(source))
        .with_file_groups(groups)
        .build();
    Ok(DataSourceExec::from_data_source(config))
}

/// The scan `exec` carries, with the groups the scheduler left it.
pub(crate) fn from_data_source(exec: &DataSourceExec) -> Option<Result<TaskScan>> {
    let config = exec.data_source().downcast_ref::<FileScanConfig>()?;
    let scan = config.file_source().downcast_ref::<ScheduledScan>()?;
    let groups = config
        .file_groups
        .iter()
        .map(|group| {
            group
                .files()
                .iter()
                .map(|f| {
                    let index: Option<usize> = f.object_meta.location.as_ref().parse().ok();
                    index
                        .and_then(|i| scan.files.get(i).cloned())
                        .ok_or_else(|| {
                            DataFusionError::Internal(format!(
                                "the scheduler's scan of table {} names a file it did not list ({})",
                                scan.table, f.object_meta.location
                            ))
                        })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>();
    Some(groups.map(|groups| TaskScan {
        table: scan.table.clone(),
        version: scan.version,
        parts: ScanParts {
            groups,
            ..ScanParts::clone(&scan.parts)
        },
        limit: config.limit,
    }))
}

impl FileSource for ScheduledScan {
    fn create_file_opener(
        &self,
        _store: Arc<dyn datafusion::object_store::ObjectStore>,
        _config: &FileScanConfig,
        _partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        Err(DataFusionError::Internal(format!(
            "the scan of table {} runs on executors, not on the scheduler",
            self.table
        )))
    }

    fn table_schema(&self) -> &FileTableSchema {
        &self.schema
    }

    fn with_batch_size(&self, _batch_size: usize) -> Arc<dyn FileSource> {
        Arc::new(self.clone())
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    /// The filters travel inside the scan (pruning only); none is applied
    /// by this source.
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn file_type(&self) -> &str {
        "logbook"
    }

    /// The groups are the client's: a file moved between them would still
    /// be read once, but keep what was planned.
    fn supports_repartitioning(&self) -> bool {
        false
    }
}
