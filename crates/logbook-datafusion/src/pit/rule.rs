//! The physical optimizer rule that plans point-in-time joins.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::ExecutionPlan;

use super::exec::PointInTimeJoinExec;

/// Replaces a hash join whose filter is a validity range with a
/// [`PointInTimeJoinExec`]. It must run after DataFusion's join selection
/// (which settles the join's inputs) and before distribution enforcement
/// (so the new node's input requirements are met):
/// [`with_point_in_time_join`] puts it there.
#[derive(Debug, Default)]
pub struct PointInTimeJoinRule;

impl PhysicalOptimizerRule for PointInTimeJoinRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match PointInTimeJoinExec::try_from_hash_join(join)? {
                Some(pit) => Transformed::yes(Arc::new(pit) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "point_in_time_join"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// DataFusion's default physical optimizer rules with
/// [`PointInTimeJoinRule`] right after join selection.
///
/// ```
/// use datafusion::execution::SessionStateBuilder;
/// use logbook_datafusion::pit::with_point_in_time_join;
/// let state = SessionStateBuilder::new()
///     .with_default_features()
///     .with_physical_optimizer_rules(with_point_in_time_join())
///     .build();
/// assert!(state.physical_optimizers().iter().any(|r| r.name() == "point_in_time_join"));
/// ```
pub fn with_point_in_time_join() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let at = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .map_or(0, |i| i + 1);
    rules.insert(at, Arc::new(PointInTimeJoinRule));
    rules
}
