//! A DataFusion session over a warehouse.

use std::sync::Arc;

use datafusion::execution::context::SessionContext;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionConfig;
use logbook_core::Warehouse;

use crate::catalog::{AsOfFunction, QueryOptions, SnapshotFunction, WarehouseSchema};
use crate::error::QueryError;
use crate::functions::{run_time_functions, wall_clock_refusals, ReplayGuard};
use crate::lineage::{Lineage, PlanRecorder};
use crate::pit::with_point_in_time_join;

/// A SQL session over every table of `warehouse`.
///
/// With a logical date (a run context), dimensions resolve at that date (or
/// to current rows), `logical_date()` is defined and wall-clock functions
/// refuse to plan. Without one, dimensions expose their full history.
/// Point-in-time joins on validity ranges are planned as
/// [`PointInTimeJoinExec`](crate::pit::PointInTimeJoinExec).
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use logbook_core::Warehouse;
/// use logbook_datafusion::{session, QueryOptions};
/// let wh = Warehouse::open("memory://")?;
/// let ctx = session(&wh, QueryOptions::default(), None).await?;
/// let rows = ctx.sql("SELECT 1 AS one").await?.collect().await?;
/// assert_eq!(rows[0].num_rows(), 1);
/// # Ok(()) }
/// ```
pub async fn session(
    warehouse: &Warehouse,
    options: QueryOptions,
    lineage: Option<Arc<Lineage>>,
) -> Result<SessionContext, QueryError> {
    let config = SessionConfig::new()
        .with_information_schema(true)
        .with_default_catalog_and_schema("logbook", "public");
    let in_run = options.logical_date.is_some();
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rules(with_point_in_time_join());
    if in_run {
        state = state.with_analyzer_rule(Arc::new(ReplayGuard));
    }
    if let Some(lineage) = &lineage {
        state = state.with_analyzer_rule(Arc::new(PlanRecorder(lineage.clone())));
    }
    let ctx = SessionContext::new_with_state(state.build());
    let schema = Arc::new(WarehouseSchema::open(warehouse, options.clone(), lineage).await?);
    let catalog = Arc::new(datafusion::catalog::MemoryCatalogProvider::new());
    datafusion::catalog::CatalogProvider::register_schema(
        catalog.as_ref(),
        "public",
        schema.clone(),
    )?;
    ctx.register_catalog("logbook", catalog);
    ctx.register_udtf("asof", Arc::new(AsOfFunction(schema.clone())));
    ctx.register_udtf("snapshot", Arc::new(SnapshotFunction(schema)));
    for f in run_time_functions(options.logical_date) {
        ctx.register_udf(f);
    }
    if in_run {
        for f in wall_clock_refusals() {
            ctx.register_udf(f);
        }
    }
    Ok(ctx)
}
