//! `PointInTimeJoinExec`: an equi-join whose filter is a validity range,
//! answered by binary search in each key's sorted intervals.
//!
//! The interval input (the dimension) is collected once and indexed
//! (`IntervalIndex`); every partition of the point input (the facts)
//! streams through it. Output columns are those of the hash join it
//! replaces, in the same order, with the same embedded projection.

use std::fmt;
use std::sync::Arc;

use arrow_schema::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, JoinSide, JoinType, NullEquality, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{
    EquivalenceProperties, Partitioning, PhysicalExpr, PhysicalExprRef,
};
use datafusion::physical_plan::execution_plan::{
    apply_expression_roots, Boundedness, EmissionType,
};
use datafusion::physical_plan::joins::utils::{build_join_schema, ColumnIndex};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::{
    try_embed_projection, EmbeddedProjection, ProjectionExec,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::pattern::{recognise, Validity};
use super::stream::{collect_and_index, Built, JoinMetrics, Probe};

type SharedBuild = Arc<OnceCell<std::result::Result<Arc<Built>, Arc<DataFusionError>>>>;

/// What a point-in-time join computes, apart from its inputs (what a plan
/// sent to another process carries).
#[derive(Debug, Clone)]
pub struct JoinSpec {
    /// Equi-join keys: (left expression, right expression).
    pub on: Vec<(PhysicalExprRef, PhysicalExprRef)>,
    /// Where the point and the interval bounds are.
    pub validity: Validity,
    /// Inner, or outer on the point side.
    pub join_type: JoinType,
    /// Whether null keys match each other.
    pub nulls_equal: bool,
    /// Output columns as indices into the join schema (none: all).
    pub projection: Option<Vec<usize>>,
}

/// A point-in-time join: `on` keys equal and the point inside `[from, to)`.
pub struct PointInTimeJoinExec {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    spec: JoinSpec,
    /// Every column the join produces, before projection.
    column_indices: Vec<ColumnIndex>,
    schema: SchemaRef,
    build: SharedBuild,
    metrics: ExecutionPlanMetricsSet,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for PointInTimeJoinExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PointInTimeJoinExec")
            .field("spec", &self.spec)
            .finish()
    }
}

impl PointInTimeJoinExec {
    /// The point-in-time join equivalent to `join`, when its filter is a
    /// validity range ([`recognise`]) and its join type keeps the point side
    /// (inner, or outer on the point side). `None` otherwise.
    pub fn try_from_hash_join(join: &HashJoinExec) -> Result<Option<Self>> {
        let Some(filter) = join.filter() else {
            return Ok(None);
        };
        if join.null_aware || join.fetch().is_some() || join.on().is_empty() {
            return Ok(None);
        }
        let (left, right) = (join.left().clone(), join.right().clone());
        let Some(validity) = recognise(filter, &left.schema(), &right.schema()) else {
            return Ok(None);
        };
        let keeps_points = match join.join_type() {
            JoinType::Inner => true,
            JoinType::Left => validity.interval_side == JoinSide::Right,
            JoinType::Right => validity.interval_side == JoinSide::Left,
            _ => false,
        };
        if !keeps_points {
            return Ok(None);
        }
        let spec = JoinSpec {
            on: join.on().to_vec(),
            validity,
            join_type: *join.join_type(),
            nulls_equal: join.null_equality() == NullEquality::NullEqualsNull,
            projection: join.projection.as_ref().map(|p| p.to_vec()),
        };
        Self::try_new(left, right, spec).map(Some)
    }

    /// The join `spec` describes over `left` and `right` (as
    /// [`PointInTimeJoinExec::spec`] gave it, with the same inputs).
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        spec: JoinSpec,
    ) -> Result<Self> {
        let (join_schema, column_indices) =
            build_join_schema(&left.schema(), &right.schema(), &spec.join_type);
        let schema = match &spec.projection {
            Some(p) => Arc::new(join_schema.project(p)?),
            None => Arc::new(join_schema),
        };
        let points = match spec.validity.interval_side {
            JoinSide::Left => &right,
            _ => &left,
        };
        let bounded = !left.boundedness().is_unbounded() && !right.boundedness().is_unbounded();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(points.output_partitioning().partition_count()),
            EmissionType::Incremental,
            if bounded {
                Boundedness::Bounded
            } else {
                Boundedness::Unbounded {
                    requires_infinite_memory: false,
                }
            },
        ));
        Ok(Self {
            left,
            right,
            spec,
            column_indices,
            schema,
            build: Arc::new(OnceCell::new()),
            metrics: ExecutionPlanMetricsSet::new(),
            properties,
        })
    }

    /// What this join computes, apart from its inputs.
    pub fn spec(&self) -> &JoinSpec {
        &self.spec
    }

    fn interval_input(&self) -> &Arc<dyn ExecutionPlan> {
        match self.spec.validity.interval_side {
            JoinSide::Left => &self.left,
            _ => &self.right,
        }
    }

    fn point_input(&self) -> &Arc<dyn ExecutionPlan> {
        match self.spec.validity.interval_side {
            JoinSide::Left => &self.right,
            _ => &self.left,
        }
    }

    /// Key expressions of the interval side and of the point side.
    fn keys(&self) -> (Vec<PhysicalExprRef>, Vec<PhysicalExprRef>) {
        let (l, r): (Vec<_>, Vec<_>) = self.spec.on.iter().cloned().unzip();
        match self.spec.validity.interval_side {
            JoinSide::Left => (l, r),
            _ => (r, l),
        }
    }

    /// The output columns: which input and which column of it.
    fn output_columns(&self) -> Vec<ColumnIndex> {
        match &self.spec.projection {
            Some(p) => p.iter().map(|&i| self.column_indices[i].clone()).collect(),
            None => self.column_indices.clone(),
        }
    }
}

impl DisplayAs for PointInTimeJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let on: Vec<String> = self
            .spec
            .on
            .iter()
            .map(|(l, r)| format!("({l}, {r})"))
            .collect();
        let (points, intervals) = match self.spec.validity.interval_side {
            JoinSide::Left => ("right", "left"),
            _ => ("left", "right"),
        };
        let interval_schema = self.interval_input().schema();
        let name = |schema: &SchemaRef, i: usize| format!("{}@{i}", schema.field(i).name());
        write!(
            f,
            "PointInTimeJoinExec: join_type={}, on=[{}], point={} ({points}), valid=[{}, {}{}) ({intervals})",
            self.spec.join_type,
            on.join(", "),
            name(&self.point_input().schema(), self.spec.validity.point),
            name(&interval_schema, self.spec.validity.from),
            name(&interval_schema, self.spec.validity.to),
            if self.spec.validity.open_end { " or null" } else { "" },
        )?;
        if let Some(p) = &self.spec.projection {
            write!(f, ", projection={p:?}")?;
        }
        Ok(())
    }
}

impl EmbeddedProjection for PointInTimeJoinExec {
    fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        let combined = match (projection, &self.spec.projection) {
            (Some(new), Some(old)) => Some(new.iter().map(|&i| old[i]).collect()),
            (Some(new), None) => Some(new),
            (None, old) => old.clone(),
        };
        let spec = JoinSpec {
            projection: combined,
            ..self.spec.clone()
        };
        Self::try_new(self.left.clone(), self.right.clone(), spec)
    }
}

impl ExecutionPlan for PointInTimeJoinExec {
    fn name(&self) -> &str {
        "PointInTimeJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        match self.spec.validity.interval_side {
            JoinSide::Left => vec![
                Distribution::SinglePartition,
                Distribution::UnspecifiedDistribution,
            ],
            _ => vec![
                Distribution::UnspecifiedDistribution,
                Distribution::SinglePartition,
            ],
        }
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.spec.on.iter().flat_map(|(l, r)| [l, r]), f)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = children.try_into().map_err(|_| {
            DataFusionError::Internal("PointInTimeJoinExec has two children".into())
        })?;
        Ok(Arc::new(Self::try_new(left, right, self.spec.clone())?))
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        try_embed_projection(projection, self)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let probe = self.point_input().execute(partition, context.clone())?;
        let (interval_keys, point_keys) = self.keys();
        let metrics = JoinMetrics::new(&self.metrics, partition);
        let build = self.build.clone();
        let input = self.interval_input().clone();
        let validity = self.spec.validity;
        let nulls_equal = self.spec.nulls_equal;
        let build_metrics = metrics.clone();
        let columns = self.output_columns();
        let interval_side = self.spec.validity.interval_side;
        let output: Vec<usize> = columns
            .iter()
            .filter(|c| c.side == interval_side)
            .map(|c| c.index)
            .collect();
        let built = async move {
            build
                .get_or_init(|| async move {
                    collect_and_index(
                        input,
                        interval_keys,
                        validity,
                        nulls_equal,
                        output,
                        context,
                        build_metrics,
                    )
                    .await
                    .map(Arc::new)
                    .map_err(Arc::new)
                })
                .await
                .clone()
                .map_err(DataFusionError::Shared)
        };
        let probe_side = Probe {
            keys: point_keys,
            point: self.spec.validity.point,
            interval_side: self.spec.validity.interval_side,
            keep_unmatched: self.spec.join_type != JoinType::Inner,
            columns,
            schema: self.schema.clone(),
            metrics,
        };
        let out = futures::stream::once(async move {
            let built = built.await?;
            Ok::<_, DataFusionError>(probe.map(move |batch| probe_side.join(&built, batch?)))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            out,
        )))
    }
}
