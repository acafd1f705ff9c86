//! A warehouse as a DataFusion schema: every table by name, opened when a
//! query first names it, plus the `asof()` and `snapshot()` table
//! functions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::NaiveDate;
use datafusion::catalog::{SchemaProvider, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{plan_err, DataFusionError, Result, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::Expr;
use futures::{StreamExt, TryStreamExt};
use logbook_core::{DimensionMode, Snapshot, Table, Warehouse};
use tokio::sync::OnceCell;

use crate::lineage::Lineage;
use crate::provider::{DimensionView, LogbookTableProvider, ReadPoint};

/// How tables resolve in one session.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// The run's logical date; `None` for analysts' sessions.
    pub logical_date: Option<NaiveDate>,
    /// How dimensions resolve inside a run.
    pub dimensions: Option<DimensionMode>,
    /// Tables pinned to a version (`--version TABLE=N`).
    pub pins: HashMap<String, u64>,
    /// Read every table at the version the session opened it at (its head
    /// then), as if pinned there: a plan kept for later (a Flight ticket's)
    /// reads what it was planned against. Otherwise an unpinned table is
    /// read at its head as each query finds it when prepared, so a session
    /// that lives across commits sees them.
    pub read_as_opened: bool,
    /// Read every unpinned table at this warehouse point (`--as-of-publish`:
    /// each table at its newest version holding no publish after it).
    /// Otherwise a query naming several tables reads them at the point
    /// taken when it is prepared.
    pub point: Option<logbook_core::publish::WarehousePoint>,
    /// A run inside this stage: partitioned tables read as the stage holds
    /// them (its staged dates, the main line elsewhere), and lineage
    /// records the staged runs read.
    pub stage: Option<String>,
}

/// A table as this session sees it.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The table's handle.
    pub table: Table,
    /// The version the session reads, read once: the table's pin (a pinned
    /// scan reads it without asking the log again), or its head when the
    /// session opened it (whose schema the session plans with).
    pub snapshot: Snapshot,
}

/// The tables of a warehouse, each opened when planning first needs it.
///
/// A session opens a table (its head, its root manifest) only when a query
/// names it, once per session: a query over one table of a thousand opens
/// one, and lists nothing. The warehouse's table names are listed only for
/// what needs them all ([`WarehouseSchema::list`]: `SHOW TABLES`,
/// `information_schema`, Flight's `GetTables`); until then
/// `table_names()` gives the tables opened so far. Tables a table function
/// names (`asof('customers', ...)`) are opened by `session::sql()` before
/// planning, since DataFusion plans table functions synchronously.
#[derive(Debug)]
pub struct WarehouseSchema {
    warehouse: Warehouse,
    listed: OnceCell<BTreeSet<String>>,
    /// Every name resolved so far; a cell left empty: no such table.
    opened: Mutex<HashMap<String, Arc<OnceCell<Opened>>>>,
    /// Names a query uses only as table functions (`asof`): DataFusion's
    /// planner looks them up as tables too, and they need no round trip.
    functions: Mutex<BTreeSet<String>>,
    /// The point the query being planned reads several tables at.
    point: ReadPoint,
    options: QueryOptions,
    lineage: Option<Arc<Lineage>>,
}

impl WarehouseSchema {
    /// The tables of `warehouse`, none opened yet but the pinned ones (a
    /// pin to a missing table or version fails here).
    pub async fn open(
        warehouse: &Warehouse,
        options: QueryOptions,
        lineage: Option<Arc<Lineage>>,
    ) -> logbook_core::Result<Self> {
        let schema = Self {
            warehouse: warehouse.clone(),
            listed: OnceCell::new(),
            functions: Mutex::new(BTreeSet::new()),
            point: ReadPoint::default(),
            opened: Mutex::new(HashMap::new()),
            options,
            lineage,
        };
        let pinned: Vec<String> = schema.options.pins.keys().cloned().collect();
        let schema_ref = &schema;
        let opened: Vec<(String, bool)> = futures::stream::iter(pinned)
            .map(|name| async move {
                let found = schema_ref.resolve(&name).await?.is_some();
                Ok::<_, logbook_core::Error>((name, found))
            })
            .buffer_unordered(16)
            .try_collect()
            .await?;
        if let Some((missing, _)) = opened.into_iter().find(|(_, found)| !found) {
            return Err(schema.not_found(&missing));
        }
        Ok(schema)
    }

    /// Table `name` as this session sees it, opened on first use (`None`:
    /// no such table, including a directory at the root holding none).
    pub async fn resolve(&self, name: &str) -> logbook_core::Result<Option<Opened>> {
        Ok(self.resolve_fresh(name).await?.map(|(opened, _)| opened))
    }

    /// The cell holding the point the query being planned reads at.
    pub(crate) fn read_point(&self) -> &ReadPoint {
        &self.point
    }

    /// How tables resolve in this session.
    pub(crate) fn options(&self) -> &QueryOptions {
        &self.options
    }

    /// The warehouse the session reads.
    pub(crate) fn warehouse(&self) -> &Warehouse {
        &self.warehouse
    }

    fn not_found(&self, name: &str) -> logbook_core::Error {
        logbook_core::Error::TableNotFound {
            table: name.to_string(),
            location: self.warehouse.location().uri().to_string(),
        }
    }

    /// [`WarehouseSchema::resolve`], and whether this call opened it (its
    /// head was found just now).
    pub(crate) async fn resolve_fresh(
        &self,
        name: &str,
    ) -> logbook_core::Result<Option<(Opened, bool)>> {
        // A name no table can have (a CTE's, say) is no table.
        if logbook_core::names::validate_table_name(name).is_err() {
            return Ok(None);
        }
        if self
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
        {
            return Ok(None);
        }
        let cell = self
            .opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_string())
            .or_default()
            .clone();
        let mut opened_now = false;
        let opened = cell
            .get_or_try_init(|| async {
                opened_now = true;
                // Opening the table found its head: read that, without
                // probing the log again (a round trip on an object store).
                let table = self.warehouse.table(name).await?;
                let head = table.latest_seen().await?;
                // At the query's point, when it has one: the version a
                // Flight ticket records is then one the point reads.
                let snapshot = match (self.options.pins.get(name), self.point.get()) {
                    (Some(v), _) => head.travel(*v).await?,
                    (None, Some(point)) => head.at_point(point).await?,
                    (None, None) => head,
                };
                Ok::<_, logbook_core::Error>(Opened { snapshot, table })
            })
            .await;
        match opened {
            Ok(opened) => Ok(Some((opened.clone(), opened_now))),
            // A directory at the warehouse's root that holds no table.
            Err(logbook_core::Error::TableNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read `version` of table `name` for a `snapshot()` call, before
    /// each query's planning, checked against the table's head: the one
    /// found opening it, when this query opened it (`head_known`: no
    /// second probe), or the log's, when an earlier query of the session
    /// did (a version committed or expired since is then seen as such).
    pub(crate) async fn travel(
        &self,
        name: &str,
        version: u64,
        head_known: bool,
    ) -> logbook_core::Result<Snapshot> {
        let Some(opened) = self.resolve(name).await? else {
            return Err(self.not_found(name));
        };
        let head = match head_known {
            true => opened.table.latest_seen().await?,
            false => opened.table.latest().await?,
        };
        head.travel(version).await
    }

    /// Say which names the query being prepared uses only as table
    /// functions, never as tables.
    pub(crate) fn functions_only(&self, names: BTreeSet<String>) {
        *self.functions.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// The warehouse's table names, listed once per session (one `LIST` of
    /// its root; a directory there that holds no table resolves to none).
    /// Every table is opened too, 16 at a time (a caller listing every
    /// table asks each for its schema, one after another).
    pub async fn list(&self) -> logbook_core::Result<&BTreeSet<String>> {
        self.listed
            .get_or_try_init(|| async {
                let dirs = self.warehouse.list_table_dirs().await?;
                futures::stream::iter(dirs.clone())
                    .map(|name| async move { self.resolve(&name).await })
                    .buffer_unordered(16)
                    .try_collect::<Vec<_>>()
                    .await?;
                Ok(dirs.into_iter().collect())
            })
            .await
    }

    /// The version of each table opened so far: its pin, or its head when
    /// this session opened it. Pinning a later session to these reads what
    /// this one planned against (a Flight ticket carries them).
    pub fn versions(&self) -> BTreeMap<String, u64> {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        opened
            .iter()
            .filter_map(|(name, cell)| Some((name.clone(), cell.get()?.snapshot.version())))
            .collect()
    }

    /// The tables opened so far.
    pub fn opened(&self) -> Vec<String> {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = opened
            .iter()
            .filter(|(_, cell)| cell.initialized())
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// `name` as this session reads it: its pinned version (or the version
    /// it opened, [`QueryOptions::read_as_opened`]), already read, or its
    /// head at each scan.
    fn base(&self, opened: Opened, name: &str) -> LogbookTableProvider {
        if self.options.pins.contains_key(name) {
            return LogbookTableProvider::of_snapshot(opened.table, opened.snapshot);
        }
        match self.options.read_as_opened {
            true => LogbookTableProvider::as_opened(opened.table, opened.snapshot),
            false => {
                let schema = opened.snapshot.schema().clone();
                LogbookTableProvider::new(opened.table, schema)
            }
        }
    }

    /// The provider for `name` as this session sees it, once opened.
    fn provider(&self, opened: Opened, name: &str) -> LogbookTableProvider {
        let mut p = self.base(opened, name).with_point(self.point.get());
        if !self.options.pins.contains_key(name) {
            p = p.with_stage(self.options.stage.clone());
        }
        if let Some(date) = self.options.logical_date {
            p = p.with_view(
                match self.options.dimensions.unwrap_or(DimensionMode::AsOf) {
                    DimensionMode::AsOf => DimensionView::AsOf(date),
                    DimensionMode::Current => DimensionView::Current,
                },
            );
        }
        self.recorded(p)
    }

    /// `p`, recording its scans into this session's lineage (if any).
    fn recorded(&self, p: LogbookTableProvider) -> LogbookTableProvider {
        match &self.lineage {
            Some(l) => p.with_lineage(l.clone()),
            None => p,
        }
    }

    /// Table `name` for a table function `f`, which plans synchronously:
    /// it must have been opened before planning.
    fn known(&self, f: &str, name: &str) -> Result<Opened> {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        match opened.get(name).map(|cell| cell.get()) {
            Some(Some(t)) => Ok(t.clone()),
            Some(None) => plan_err!("{f}(): no table {name:?} in the warehouse"),
            None => plan_err!(
                "{f}(): table {name} was not opened before planning; run queries through logbook_datafusion::sql(), which opens the tables table functions name"
            ),
        }
    }
}

#[async_trait]
impl SchemaProvider for WarehouseSchema {
    fn table_names(&self) -> Vec<String> {
        match self.listed.get() {
            Some(names) => names.iter().cloned().collect(),
            None => self.opened(),
        }
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let opened = self
            .resolve(name)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(opened.map(|t| Arc::new(self.provider(t, name)) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        match self.listed.get() {
            Some(names) => names.contains(name),
            None => self.opened().iter().any(|n| n == name),
        }
    }
}

fn string_arg(f: &str, args: &[Expr], i: usize) -> Result<String> {
    match args.get(i) {
        Some(Expr::Literal(ScalarValue::Utf8(Some(s)), _)) => Ok(s.clone()),
        _ => plan_err!("{f}(): argument {} must be a table name in quotes", i + 1),
    }
}

/// `asof('customers', DATE '2026-03-15')`: a dimension's rows valid on a date.
#[derive(Debug)]
pub struct AsOfFunction(pub Arc<WarehouseSchema>);

impl TableFunctionImpl for AsOfFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let args = args.exprs();
        let name = string_arg("asof", args, 0)?;
        let date = match args.get(1) {
            Some(Expr::Literal(ScalarValue::Date32(Some(d)), _)) => {
                logbook_core::dates::from_days(*d)
            }
            Some(Expr::Literal(ScalarValue::Utf8(Some(s)), _)) => match s.parse() {
                Ok(d) => d,
                Err(_) => return plan_err!("asof(): {s:?} is not a date (YYYY-MM-DD)"),
            },
            _ => return plan_err!("asof(): argument 2 must be a date, e.g. DATE '2026-03-15'"),
        };
        let opened = self.0.known("asof", &name)?;
        if opened.snapshot.schema().keys().is_none() {
            return plan_err!(
                "asof(): table {name} is not a dimension; use snapshot() for time travel"
            );
        }
        // A run pinned to a version of the dimension reads that version here too.
        let p = self
            .0
            .base(opened, &name)
            .with_view(DimensionView::AsOf(date));
        Ok(Arc::new(self.0.recorded(p)))
    }
}

/// The versions one query's `snapshot()` calls name, read by
/// [`crate::prepare`] for that query alone: an extension of the state it
/// is planned with, so that no other query (a later one naming the version
/// as an expression, or one planned at the same time) finds them.
#[derive(Debug, Default)]
pub(crate) struct Travelled(HashMap<(String, u64), Snapshot>);

impl Extend<((String, u64), Snapshot)> for Travelled {
    fn extend<I: IntoIterator<Item = ((String, u64), Snapshot)>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

/// `snapshot('orders', 12)`: a table as it was at version 12.
#[derive(Debug)]
pub struct SnapshotFunction(pub Arc<WarehouseSchema>);

impl TableFunctionImpl for SnapshotFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let travelled = args.session().config().get_extension::<Travelled>();
        let args = args.exprs();
        let name = string_arg("snapshot", args, 0)?;
        let version = match args.get(1) {
            Some(Expr::Literal(ScalarValue::Int64(Some(v)), _)) if *v >= 0 => *v as u64,
            _ => return plan_err!("snapshot(): argument 2 must be a version number"),
        };
        let Opened { table, .. } = self.0.known("snapshot", &name)?;
        let read = travelled.and_then(|t| t.0.get(&(name.clone(), version)).cloned());
        let Some(snapshot) = read else {
            return plan_err!(
                "snapshot(): version {version} of table {name} was not read before planning: write the version as a number, snapshot('{name}', {version}), and run queries through logbook_datafusion::sql() (or plan with the state logbook_datafusion::prepare() returns), which reads the versions snapshot() names"
            );
        };
        // The table as it was then, with its schema then.
        let p = LogbookTableProvider::of_snapshot(table, snapshot);
        Ok(Arc::new(self.0.recorded(p)))
    }
}
