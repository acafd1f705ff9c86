//! Planning a client's SQL: the same DataFusion session as `logbook sql`,
//! read-only, with `?` parameters, and errors mapped to gRPC codes that carry
//! the planner's message.

use std::collections::BTreeMap;

use arrow_schema::{DataType, Field, Schema};
use datafusion::common::{DataFusionError, ParamValues, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SQLOptions;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use logbook_core::{ErrorKind, Warehouse};
use logbook_datafusion::catalog::WarehouseSchema;
use logbook_datafusion::{datafusion, session, QueryError};
use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::settings::Settings;

/// What a `DoGet` ticket carries: the statement and the settings it was
/// planned with, so the fetch runs exactly what was described.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TicketBody {
    /// The SQL text, `?` already numbered.
    pub sql: String,
    /// The caller's settings when it asked for the statement.
    pub settings: Settings,
    /// The prepared statement whose bound parameters to use, and the
    /// digest of those parameters then ([`crate::prepared::Prepared::params_digest`]).
    pub prepared: Option<(String, u64)>,
    /// The version of each table the statement was planned against: the
    /// fetch reads these, never a commit that landed in between.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, u64>,
    /// The plan `GetFlightInfo` kept for this fetch (see
    /// [`crate::planned`]); without it, or once it is gone, the fetch plans
    /// again at `versions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

impl TicketBody {
    /// The bytes of a ticket.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a ticket serializes")
    }

    /// The statement the ticket describes, whatever plan it names: a kept
    /// plan answers only the ticket it was kept for.
    pub fn statement(&self) -> Vec<u8> {
        Self {
            plan: None,
            ..self.clone()
        }
        .encode()
    }

    /// Read a ticket this server issued.
    pub fn decode(bytes: &[u8]) -> Result<Self, Status> {
        serde_json::from_slice(bytes)
            .map_err(|e| Status::invalid_argument(format!("not a ticket this server issued: {e}")))
    }
}

/// Plan `sql` read-only over `warehouse` with `settings`, binding `params`.
pub async fn plan(
    warehouse: &Warehouse,
    sql: &str,
    settings: &Settings,
    params: Option<&[ScalarValue]>,
) -> Result<DataFrame, Status> {
    Ok(plan_at(warehouse, sql, settings, params, &BTreeMap::new())
        .await?
        .df)
}

/// A planned statement, and the version of every table it reads.
pub struct Planned {
    /// The plan, ready to run.
    pub df: DataFrame,
    /// Each table the plan reads, at the version it reads (a ticket carries
    /// them, so the fetch reads what was planned, whatever commits since).
    pub versions: BTreeMap<String, u64>,
}

/// [`plan`], reading each table in `pins` at that version.
pub async fn plan_at(
    warehouse: &Warehouse,
    sql: &str,
    settings: &Settings,
    params: Option<&[ScalarValue]>,
    pins: &BTreeMap<String, u64>,
) -> Result<Planned, Status> {
    let mut options = settings.query_options()?;
    options.pins = pins.clone().into_iter().collect();
    let ctx = session(warehouse, options, None)
        .await
        .map_err(query_status)?;
    let state = logbook_datafusion::prepare(&ctx, sql)
        .await
        .map_err(query_status)?;
    let plan = state
        .create_logical_plan(sql)
        .await
        .map_err(|e| query_status(e.into()))?;
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(&plan)
        .map_err(|e| {
            Status::permission_denied(format!("this server is read-only: {}", e.strip_backtrace()))
        })?;
    let df = logbook_datafusion::execute(&ctx, state, plan)
        .await
        .map_err(query_status)?;
    let df = match params {
        Some(values) => df
            .with_param_values(ParamValues::List(
                values.iter().cloned().map(Into::into).collect(),
            ))
            .map_err(|e| query_status(e.into()))?,
        None => df,
    };
    let versions = ctx
        .catalog("logbook")
        .and_then(|c| c.schema("public"))
        .and_then(|s| {
            s.downcast_ref::<WarehouseSchema>()
                .map(WarehouseSchema::versions)
        })
        .unwrap_or_default();
    Ok(Planned { df, versions })
}

/// The parameters a statement takes (`$1`, `$2`, ...) with the types the
/// planner inferred (`Null` where it could not).
pub fn parameter_schema(df: &DataFrame) -> Result<Schema, Status> {
    let types = df
        .logical_plan()
        .get_parameter_types()
        .map_err(|e| query_status(e.into()))?;
    let ordered: BTreeMap<usize, (String, Option<DataType>)> = types
        .into_iter()
        .map(|(name, t)| {
            let n = name.trim_start_matches('$').parse().unwrap_or(usize::MAX);
            (n, (name, t))
        })
        .collect();
    Ok(Schema::new(
        ordered
            .into_values()
            .map(|(name, t)| Field::new(name, t.unwrap_or(DataType::Null), true))
            .collect::<Vec<_>>(),
    ))
}

/// Number JDBC/ODBC-style `?` placeholders `$1`, `$2`, ... (DataFusion's
/// form); quoted text and comments are left alone.
///
/// ```
/// use logbook_flight::query::number_placeholders;
/// assert_eq!(
///     number_placeholders("SELECT '?' AS q WHERE a = ? AND b = ?"),
///     "SELECT '?' AS q WHERE a = $1 AND b = $2"
/// );
/// ```
pub fn number_placeholders(sql: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    if !tokens
        .iter()
        .any(|t| matches!(t, Token::Placeholder(p) if p == "?"))
    {
        return sql.to_string();
    }
    let mut n = 0;
    tokens
        .into_iter()
        .map(|t| match t {
            Token::Placeholder(p) if p == "?" => {
                n += 1;
                format!("${n}")
            }
            other => other.to_string(),
        })
        .collect()
}

/// A query-layer error as the client should see it: the planner's or the
/// table layer's message, with a code that says whether to fix or retry.
pub fn query_status(e: QueryError) -> Status {
    match e {
        QueryError::Logbook(e) => logbook_status(&e),
        QueryError::Sql(e) => datafusion_status(e),
    }
}

fn logbook_status(e: &logbook_core::Error) -> Status {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::InvalidInput => Status::invalid_argument(msg),
        ErrorKind::NotFound => Status::not_found(msg),
        ErrorKind::Conflict | ErrorKind::AlreadyExists => Status::aborted(msg),
        ErrorKind::Corrupt => Status::data_loss(msg),
        ErrorKind::Unsupported => Status::unimplemented(msg),
        ErrorKind::Transient => Status::unavailable(msg),
        _ => Status::internal(msg),
    }
}

/// A query the cluster could not take or run: planning errors as without
/// a cluster; a cluster that cannot be reached or a job that failed is
/// "internal" with Ballista's reason (it does not say whether a retry can
/// help: a file vacuumed away fails again).
pub fn cluster_status(e: logbook_cluster::ClusterError) -> Status {
    use logbook_cluster::ClusterError;
    match e {
        ClusterError::Plan(e) => datafusion_status(e),
        ClusterError::Config(msg) => Status::failed_precondition(msg),
        other => Status::internal(other.to_string()),
    }
}

/// A DataFusion error: planning mistakes are the client's to fix.
pub fn datafusion_status(e: DataFusionError) -> Status {
    if let Some(inner) = find_logbook(&e) {
        return logbook_status(inner);
    }
    let msg = e.strip_backtrace();
    match e.find_root() {
        DataFusionError::Plan(_)
        | DataFusionError::SQL(..)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_) => Status::invalid_argument(msg),
        DataFusionError::ResourcesExhausted(_) => Status::resource_exhausted(msg),
        _ => Status::internal(msg),
    }
}

fn find_logbook(e: &DataFusionError) -> Option<&logbook_core::Error> {
    match e.find_root() {
        DataFusionError::External(inner) => inner.downcast_ref(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_in_strings_and_comments_stay() {
        assert_eq!(
            number_placeholders("SELECT ? -- why?\n, '?'"),
            "SELECT $1 -- why?\n, '?'"
        );
        assert_eq!(number_placeholders("SELECT $1"), "SELECT $1");
    }

    #[test]
    fn a_ticket_round_trips_and_garbage_is_refused() {
        let t = TicketBody {
            sql: "SELECT 1".into(),
            settings: Settings::default(),
            prepared: Some(("p1".into(), 3)),
            versions: [("orders".to_string(), 7)].into(),
            plan: Some("k1".into()),
        };
        let back = TicketBody::decode(&t.encode()).unwrap();
        assert_eq!(back.sql, "SELECT 1");
        assert_eq!(back.prepared, Some(("p1".into(), 3)));
        assert_eq!(back.plan.as_deref(), Some("k1"));
        assert_eq!(
            TicketBody::decode(b"nope").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[tokio::test]
    async fn writes_are_refused_with_the_reason() {
        let wh = Warehouse::open("memory://").unwrap();
        for sql in [
            "CREATE TABLE t AS SELECT 1",
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
            "COPY (SELECT 1) TO '/tmp/x.csv'",
        ] {
            let err = plan(&wh, sql, &Settings::default(), None)
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::PermissionDenied, "{sql}: {err:?}");
            assert!(err.message().contains("read-only"), "{sql}: {err:?}");
        }
        let err = plan(&wh, "SELEC 1", &Settings::default(), None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
    }

    #[tokio::test]
    async fn parameters_bind_in_order() {
        let wh = Warehouse::open("memory://").unwrap();
        let sql = number_placeholders("SELECT ? + 1 AS a, ? AS b");
        let df = plan(
            &wh,
            &sql,
            &Settings::default(),
            Some(&[ScalarValue::Int64(Some(41)), ScalarValue::from("x")]),
        )
        .await
        .unwrap();
        let rows = df.collect().await.unwrap();
        let a = rows[0]
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        assert_eq!(a.value(0), 42);
    }
}
