//! The physical extension codec of a logbook cluster: logbook's scan and
//! point-in-time join to bytes and back, everything else handed to
//! Ballista's codec (its shuffle nodes), which hands on to DataFusion's.
//!
//! The client, the scheduler and every executor use the same codec. A
//! decoded scan reads the listed files of the pinned version from the
//! warehouse this process opened with its own credentials
//! ([`logbook_core::Warehouse::table_files`]): decoding does no I/O, and a
//! task reads exactly the files planned, whatever was committed since.
//!
//! Our bytes start with `MAGIC`, whose first byte (field 0, wire type 7)
//! no protobuf message starts with, so they cannot be taken for Ballista's.

use std::sync::Arc;

use arrow_schema::Schema;
use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::common::{DataFusionError, JoinSide, JoinType, Result};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF, WindowUDF};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::limit::LocalLimitExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use logbook_core::{DataFile, TableSchema, Warehouse};
use logbook_datafusion::exec::{LogbookScanExec, ScanParts, ValidityFilter};
use logbook_datafusion::pit::pattern::Validity;
use logbook_datafusion::pit::{JoinSpec, PointInTimeJoinExec};
use prost::Message;

use crate::{scheduled, wire};

/// `plan` stopping after `limit` rows per partition, when there is one.
fn with_limit(plan: Arc<dyn ExecutionPlan>, limit: Option<u64>) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(match limit {
        Some(n) => Arc::new(LocalLimitExec::new(plan, n as usize)),
        None => plan,
    })
}

/// What our encodings start with.
pub(crate) const MAGIC: &[u8] = b"\x07LB1";

/// Encodes logbook's plan nodes; hands every other node to Ballista's codec.
#[derive(Debug)]
pub struct LogbookCodec {
    warehouse: Warehouse,
    /// Whether scans decode in the scheduler's form (`scheduled.rs`).
    scheduler: bool,
    ballista: BallistaPhysicalExtensionCodec,
}

impl LogbookCodec {
    /// A codec whose decoded scans read from `warehouse` (a client's or an
    /// executor's).
    pub fn new(warehouse: Warehouse) -> Self {
        Self {
            warehouse,
            scheduler: false,
            ballista: BallistaPhysicalExtensionCodec::default(),
        }
    }

    /// The scheduler's codec: scans decode as data sources Ballista can
    /// split between tasks, and encode again as scans of each task's files.
    pub fn for_scheduler(warehouse: Warehouse) -> Self {
        Self {
            scheduler: true,
            ..Self::new(warehouse)
        }
    }

    fn encode_scan(
        &self,
        table: &str,
        version: u64,
        parts: ScanParts,
        limit: Option<usize>,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<wire::Scan> {
        let json = |what: &str, e: serde_json::Error| {
            DataFusionError::Internal(format!("encoding the scan of table {table}: {what}: {e}"))
        };
        Ok(wire::Scan {
            table: table.to_string(),
            version,
            limit: limit.map(|l| l as u64),
            table_schema: serde_json::to_vec(&parts.table_schema).map_err(|e| json("schema", e))?,
            groups: parts
                .groups
                .iter()
                .map(|g| serde_json::to_vec(g).map_err(|e| json("files", e)))
                .collect::<Result<_>>()?,
            schema: Some(parts.schema.as_ref().try_into()?),
            validity: parts.validity.map(|v| match v {
                ValidityFilter::Current => wire::Validity {
                    current: true,
                    day: 0,
                },
                ValidityFilter::At(day) => wire::Validity {
                    current: false,
                    day,
                },
            }),
            label: parts.label,
            filters: parts
                .filters
                .iter()
                .map(|f| conv.physical_expr_to_proto(f, self))
                .collect::<Result<_>>()?,
        })
    }

    fn decode_scan(
        &self,
        scan: wire::Scan,
        ctx: &TaskContext,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let table = scan.table.clone();
        let bad = |what: String| {
            DataFusionError::Internal(format!(
                "a cluster plan's scan of table {table} (version {}): {what}",
                scan.version
            ))
        };
        let table_schema: TableSchema = serde_json::from_slice(&scan.table_schema)
            .map_err(|e| bad(format!("its schema does not decode: {e}")))?;
        let groups = scan
            .groups
            .iter()
            .map(|g| serde_json::from_slice::<Vec<DataFile>>(g))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("its file list does not decode: {e}")))?;
        let schema: Schema = scan
            .schema
            .as_ref()
            .ok_or_else(|| bad("it carries no output schema".into()))?
            .try_into()?;
        let mut parts = ScanParts {
            table_schema,
            groups,
            schema: Arc::new(schema),
            validity: scan.validity.map(|v| match v.current {
                true => ValidityFilter::Current,
                false => ValidityFilter::At(v.day),
            }),
            label: scan.label,
            filters: Vec::new(),
        };
        let filter_schema = parts.filter_schema();
        let decode = PhysicalPlanDecodeContext::new(ctx, self);
        parts.filters = scan
            .filters
            .iter()
            .map(|f| conv.proto_to_physical_expr(f, &filter_schema, &decode))
            .collect::<Result<_>>()?;
        if self.scheduler {
            let plan = scheduled::to_data_source(scan.table, scan.version, parts)?;
            return with_limit(plan, scan.limit);
        }
        let source = self
            .warehouse
            .table_files(&scan.table, scan.version)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        with_limit(
            Arc::new(LogbookScanExec::from_parts(source, parts)),
            scan.limit,
        )
    }

    fn encode_join(
        &self,
        join: &PointInTimeJoinExec,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<wire::Join> {
        let spec = join.spec();
        let expr = |e: &Arc<dyn PhysicalExpr>| conv.physical_expr_to_proto(e, self);
        Ok(wire::Join {
            left_keys: spec
                .on
                .iter()
                .map(|(l, _)| expr(l))
                .collect::<Result<_>>()?,
            right_keys: spec
                .on
                .iter()
                .map(|(_, r)| expr(r))
                .collect::<Result<_>>()?,
            interval_right: spec.validity.interval_side == JoinSide::Right,
            point: spec.validity.point as u64,
            from: spec.validity.from as u64,
            to: spec.validity.to as u64,
            open_end: spec.validity.open_end,
            join_type: match spec.join_type {
                JoinType::Inner => "inner",
                JoinType::Left => "left",
                JoinType::Right => "right",
                other => {
                    return Err(DataFusionError::Internal(format!(
                        "a point-in-time join of type {other} cannot be sent to a cluster"
                    )))
                }
            }
            .to_string(),
            nulls_equal: spec.nulls_equal,
            projected: spec.projection.is_some(),
            projection: spec
                .projection
                .iter()
                .flatten()
                .map(|&i| i as u64)
                .collect(),
        })
    }

    fn decode_join(
        &self,
        join: wire::Join,
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let bad = |what: &str| {
            DataFusionError::Internal(format!("a cluster plan's point-in-time join: {what}"))
        };
        let [left, right] = inputs else {
            return Err(bad("it needs two inputs"));
        };
        if join.left_keys.len() != join.right_keys.len() || join.left_keys.is_empty() {
            return Err(bad("its keys do not pair up"));
        }
        let decode = PhysicalPlanDecodeContext::new(ctx, self);
        let (ls, rs) = (left.schema(), right.schema());
        let on = join
            .left_keys
            .iter()
            .zip(&join.right_keys)
            .map(|(l, r)| {
                Ok((
                    conv.proto_to_physical_expr(l, &ls, &decode)?,
                    conv.proto_to_physical_expr(r, &rs, &decode)?,
                ))
            })
            .collect::<Result<_>>()?;
        let join_type = match join.join_type.as_str() {
            "inner" => JoinType::Inner,
            "left" => JoinType::Left,
            "right" => JoinType::Right,
            _ => return Err(bad("its join type is not one a point-in-time join has")),
        };
        let spec = JoinSpec {
            on,
            validity: Validity {
                interval_side: if join.interval_right {
                    JoinSide::Right
                } else {
                    JoinSide::Left
                },
                point: join.point as usize,
                from: join.from as usize,
                to: join.to as usize,
                open_end: join.open_end,
            },
            join_type,
            nulls_equal: join.nulls_equal,
            projection: join
                .projected
                .then(|| join.projection.iter().map(|&i| i as usize).collect()),
        };
        Ok(Arc::new(PointInTimeJoinExec::try_new(
            left.clone(),
            right.clone(),
            spec,
        )?))
    }
}

impl PhysicalExtensionCodec for LogbookCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(ours) = buf.strip_prefix(MAGIC) else {
            return self.ballista.try_decode(buf, inputs, ctx, conv);
        };
        let node = wire::Node::decode(ours).map_err(|e| {
            DataFusionError::Internal(format!("a logbook node of a cluster plan: {e}"))
        })?;
        match node {
            wire::Node {
                scan: Some(scan),
                join: None,
            } => self.decode_scan(scan, ctx, conv),
            wire::Node {
                scan: None,
                join: Some(join),
            } => self.decode_join(join, inputs, ctx, conv),
            _ => Err(DataFusionError::Internal(
                "a logbook node of a cluster plan is neither a scan nor a join".into(),
            )),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let scan = |table: &str, version, parts, limit| {
            Ok::<_, DataFusionError>(wire::Node {
                scan: Some(self.encode_scan(table, version, parts, limit, conv)?),
                join: None,
            })
        };
        let scheduled = node
            .downcast_ref::<DataSourceExec>()
            .and_then(scheduled::from_data_source);
        let message = if let Some(exec) = node.downcast_ref::<LogbookScanExec>() {
            let source = exec.source();
            scan(source.table_name(), source.version(), exec.parts(), None)?
        } else if let Some(found) = scheduled {
            let task = found?;
            scan(&task.table, task.version, task.parts, task.limit)?
        } else if let Some(join) = node.downcast_ref::<PointInTimeJoinExec>() {
            wire::Node {
                scan: None,
                join: Some(self.encode_join(join, conv)?),
            }
        } else {
            return self.ballista.try_encode(node, buf, conv);
        };
        buf.extend_from_slice(MAGIC);
        message
            .encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("encoding a logbook node: {e}")))
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.ballista.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.ballista.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.ballista.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode_udwf(node, buf)
    }
}
