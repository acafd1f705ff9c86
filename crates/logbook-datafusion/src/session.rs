//! A DataFusion session over a warehouse.

use std::sync::Arc;

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use futures::{StreamExt, TryStreamExt};

use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::{CopyToSource, Statement};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, ObjectName, Query, Statement as SqlStatement, TableFactor,
    Value, Visit, Visitor,
};
use logbook_core::{Snapshot, Table, Warehouse};

use crate::catalog::{
    AsOfFunction, Opened, QueryOptions, SnapshotFunction, Travelled, WarehouseSchema,
};
use crate::error::QueryError;
use crate::functions::{run_time_functions, wall_clock_refusals, ReplayGuard};
use crate::lineage::{Lineage, PlanRecorder};
use crate::pit::with_point_in_time_join;
use crate::provider::Heads;

/// A SQL session over every table of `warehouse`.
///
/// With a logical date (a run context), dimensions resolve at that date (or
/// to current rows), `logical_date()` is defined and wall-clock functions
/// refuse to plan. Without one, dimensions expose their full history.
/// Point-in-time joins on validity ranges are planned as
/// [`PointInTimeJoinExec`](crate::pit::PointInTimeJoinExec).
///
/// A session plans each table with the schema of its head when a query
/// first named it, scans the latest head at each query, reads a pinned
/// version once for the session (its retention is not checked again: keep
/// a pinned session shorter than the vacuum retention), and checks a
/// `snapshot()` version against the head at each query that names it (a
/// view or a `PREPARE`d statement over `snapshot()` keeps the version it
/// was planned with, checked then and not at each `EXECUTE` or read of
/// the view).
///
/// Run SQL through [`sql`] (or plan with the state [`prepare`] returns):
/// the session opens a table when a query names it, and
/// `asof()`/`snapshot()` (planned synchronously) and
/// `SHOW TABLES`/`information_schema` (which read every table) need their
/// tables opened first. Planned with `ctx.sql` directly, a `snapshot()`
/// call fails saying so (the versions it reads belong to one query's
/// planning, never to the session), an `asof()` call finds only tables
/// opened so far, and `SHOW TABLES` lists only those.
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
    let mut config = SessionConfig::new()
        .with_information_schema(true)
        .with_default_catalog_and_schema("logbook", "public");
    config
        .options_mut()
        .execution
        .skip_partial_aggregation_probe_ratio_threshold = SKIP_PARTIAL_AGGREGATION_RATIO;
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

/// A partial aggregate whose groups are more than this share of the rows
/// it has read, checked after each batch once it has read 100,000, stops
/// aggregating and passes rows on to the final one (DataFusion's default
/// is 0.8). Once it stops it does not start again.
///
/// A two-phase aggregate holds each group in every partition's partial
/// table and again in the final one. For a group per customer and month
/// over days of 100,000 orders (78,000 customers a day, so a ratio of
/// 0.78: kept by the default), a process peaked at 179 to 189 MiB;
/// passing rows on, at 119 to 128 MiB, and in 270 against 315 ms
/// (`count(DISTINCT customer)` per month on 9M orders, BENCHMARKS.md,
/// "Analyst queries as whole processes"). Below a ratio of 0.5 a partial
/// table at least halves what crosses the repartition, and is kept.
pub(crate) const SKIP_PARTIAL_AGGREGATION_RATIO: f64 = 0.5;

/// Plan and run `query` in `ctx` (a [`session`]): [`prepare`], then
/// plan with the state it returns and run it with [`execute`]. Every
/// logbook entry point runs SQL through here.
pub async fn sql(ctx: &SessionContext, query: &str) -> Result<DataFrame, QueryError> {
    let state = prepare(ctx, query).await?;
    let plan = state.create_logical_plan(query).await?;
    execute(ctx, state, plan).await
}

/// Run `plan`, planned with `state` (what [`prepare`] returned), as
/// `ctx.sql` would: DDL and statements (`SET`, `PREPARE`) act on `ctx`;
/// a query runs with `state`, so that its scans read the heads `prepare`
/// found for it rather than asking each table's log again.
pub async fn execute(
    ctx: &SessionContext,
    state: SessionState,
    plan: LogicalPlan,
) -> Result<DataFrame, QueryError> {
    match plan {
        LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) => {
            Ok(ctx.execute_logical_plan(plan).await?)
        }
        plan => Ok(DataFrame::new(state, plan)),
    }
}

/// Open, before planning, the tables `query` names, concurrently (on an
/// object store each open is a few round trips; DataFusion's planner opens
/// the tables it meets one after another), including those its table
/// functions name (`asof('customers', ...)`, `snapshot('orders', 12)`,
/// whose version is read here too), which DataFusion plans synchronously.
/// A query that does not parse is left to the planner to report; a version
/// `snapshot()` names that is not there fails here.
///
/// Returns the state to plan `query` with: `ctx`'s, holding the versions
/// read for this query's `snapshot()` calls and for no other, and the head
/// of each table it reads at its latest version, found here once (its
/// scans read those: a query's versions are fixed when it is prepared;
/// run it with [`execute`], since `ctx.execute_logical_plan` would plan
/// it with `ctx`'s state, whose scans ask each log again). A version
/// written as an expression, `snapshot('t', 5 + 0)`, is read by no
/// `prepare`, so it fails to plan instead of finding what an earlier query
/// checked, and two queries prepared on one session each plan with their
/// own. Planned with `ctx.state()` instead, `snapshot()` fails saying so.
#[must_use = "plan the query with the returned state: it holds the versions snapshot() reads"]
pub async fn prepare(ctx: &SessionContext, query: &str) -> Result<SessionState, QueryError> {
    let mut state = ctx.state();
    let Some(schema) = ctx.catalog("logbook").and_then(|c| c.schema("public")) else {
        return Ok(state);
    };
    let Some(schema) = schema.downcast_ref::<WarehouseSchema>() else {
        return Ok(state);
    };
    let dialect = state.config().options().sql_parser.dialect;
    let Ok(statement) = state.sql_to_statement(query, &dialect) else {
        return Ok(state);
    };
    let mut named = NamedTables::default();
    named.statement(&statement);
    if named.lists_all {
        // SHOW TABLES, information_schema: every table, listed and opened
        // concurrently before the planner asks for them one by one.
        schema.list().await?;
    }
    let only_functions = named
        .functions
        .iter()
        .filter(|f| !named.tables.contains(f))
        .cloned()
        .collect();
    schema.functions_only(only_functions);
    let names: BTreeSet<String> = named.tables.into_iter().collect();
    // Several tables: read them all at one warehouse point, taken before
    // any of them is opened (see `logbook_core::publish`).
    let point = match schema.options().point {
        Some(point) => Some(point),
        None if names.len() > 1 || named.lists_all => Some(schema.warehouse().point().await?),
        None => None,
    };
    schema.read_point().set(point);
    let opened: Vec<(String, Opened, bool)> = futures::stream::iter(names)
        .map(|name| async move {
            let found = schema.resolve_fresh(&name).await?;
            Ok::<_, logbook_core::Error>(found.map(|(opened, now)| (name, opened, now)))
        })
        .buffer_unordered(OPEN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?
        .into_iter()
        .flatten()
        .collect();
    // The tables this query opened: their heads were found just now.
    let opened_now: BTreeSet<String> = opened
        .iter()
        .filter(|(_, _, now)| *now)
        .map(|(name, _, _)| name.clone())
        .collect();
    let opened_now = &opened_now;
    let options = schema.options();
    // What each table's scans read at its latest version: the head found
    // opening it (at the point, when there is one); for a table an earlier
    // query opened, the log's now, asked of every table at once.
    // (The head found opening a table is taken from its handle, not from
    // `Opened`, whose snapshot is at the point the session held then, which
    // another query prepared at the same time may have set.)
    let mut heads = Heads::default();
    if !options.read_as_opened {
        let found: Vec<(Table, Snapshot)> = futures::stream::iter(opened)
            .filter(|(name, _, _)| futures::future::ready(!options.pins.contains_key(name)))
            .map(|(_, opened, now)| async move {
                let table = opened.table;
                let head = match now {
                    true => table.latest_seen().await?,
                    false => table.latest().await?,
                };
                let head = match point {
                    Some(point) => head.at_point(point).await?,
                    None => head,
                };
                Ok::<_, logbook_core::Error>((table, head))
            })
            .buffer_unordered(OPEN_CONCURRENCY)
            .try_collect()
            .await?;
        for (table, head) in found {
            heads.insert(&table, point, head);
        }
    }
    state.config_mut().set_extension(Arc::new(heads));
    let travelled: Travelled = futures::stream::iter(named.versions)
        .map(|(name, version)| async move {
            let head_known = opened_now.contains(&name);
            let snapshot = schema.travel(&name, version, head_known).await?;
            Ok::<_, logbook_core::Error>(((name, version), snapshot))
        })
        .buffer_unordered(OPEN_CONCURRENCY)
        .try_collect()
        .await?;
    state.config_mut().set_extension(Arc::new(travelled));
    Ok(state)
}

/// Tables opened at once before planning.
const OPEN_CONCURRENCY: usize = 16;

/// The tables a query may read: relation names (the last part of
/// `logbook.public.t`; a CTE's name is not a table and resolves to none),
/// and the table names `asof(...)` and `snapshot(...)` calls give as their
/// first argument.
#[derive(Default)]
struct NamedTables {
    tables: Vec<String>,
    /// The table functions called.
    functions: BTreeSet<String>,
    /// The versions `snapshot('t', N)` calls name.
    versions: BTreeSet<(String, u64)>,
    /// The names the query's CTEs define (no table is opened for them).
    ctes: BTreeSet<String>,
    /// Whether the statement reads every table (`SHOW TABLES`,
    /// `information_schema`).
    lists_all: bool,
}

impl NamedTables {
    fn statement(&mut self, statement: &Statement) {
        let _ = match statement {
            Statement::Statement(s) => {
                self.lists_all |= matches!(
                    s.as_ref(),
                    SqlStatement::ShowTables { .. } | SqlStatement::ShowColumns { .. }
                );
                s.visit(self)
            }
            Statement::Explain(e) => {
                self.statement(&e.statement);
                ControlFlow::Continue(())
            }
            Statement::CopyTo(copy) => match &copy.source {
                CopyToSource::Query(q) => q.visit(self),
                CopyToSource::Relation(name) => {
                    self.relation(name);
                    ControlFlow::Continue(())
                }
            },
            _ => ControlFlow::Continue(()),
        };
        let ctes = std::mem::take(&mut self.ctes);
        self.tables.retain(|t| !ctes.contains(t));
    }

    /// A relation in `FROM`: a warehouse table when it is unqualified or
    /// qualified by `public` (`logbook.public.t`).
    fn relation(&mut self, name: &ObjectName) {
        let parts: Vec<String> = name
            .0
            .iter()
            .filter_map(|part| part.as_ident())
            .map(|ident| match ident.quote_style {
                Some(_) => ident.value.clone(),
                // Unquoted names are lowercased, as DataFusion's planner does.
                None => ident.value.to_lowercase(),
            })
            .collect();
        match parts.as_slice() {
            [table] => self.tables.push(table.clone()),
            [.., schema, _] if schema == "information_schema" => self.lists_all = true,
            [.., schema, table] if schema == "public" => self.tables.push(table.clone()),
            _ => {}
        }
    }
}

impl Visitor for NamedTables {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            let Some(args) = args else {
                self.relation(name);
                return ControlFlow::Continue(());
            };
            let function = name.to_string().to_ascii_lowercase();
            if function == "asof" || function == "snapshot" {
                self.functions.insert(function.clone());
                let literal = |i: usize| match args.args.get(i) {
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                        Some(&v.value)
                    }
                    _ => None,
                };
                if let Some(Value::SingleQuotedString(table)) = literal(0) {
                    self.tables.push(table.clone());
                    if let (true, Some(Value::Number(n, _))) = (function == "snapshot", literal(1))
                    {
                        if let Ok(version) = n.parse() {
                            self.versions.insert((table.clone(), version));
                        }
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}
