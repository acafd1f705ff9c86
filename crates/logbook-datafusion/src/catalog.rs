//! A warehouse as a DataFusion schema: every table by name, plus the
//! `asof()` and `snapshot()` table functions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::NaiveDate;
use datafusion::catalog::{SchemaProvider, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{plan_err, DataFusionError, Result, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::Expr;
use futures::{StreamExt, TryStreamExt};
use logbook_core::{DimensionMode, Table, TableSchema, Warehouse};

use crate::lineage::Lineage;
use crate::provider::{DimensionView, LogbookTableProvider};

/// Tables opened at once when a session starts.
const OPEN_CONCURRENCY: usize = 16;

/// How tables resolve in one session.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// The run's logical date; `None` for analysts' sessions.
    pub logical_date: Option<NaiveDate>,
    /// How dimensions resolve inside a run.
    pub dimensions: Option<DimensionMode>,
    /// Tables pinned to a version (`--version TABLE=N`).
    pub pins: HashMap<String, u64>,
}

/// The tables of a warehouse, opened once when the session starts.
#[derive(Debug)]
pub struct WarehouseSchema {
    tables: BTreeMap<String, (Table, TableSchema)>,
    options: QueryOptions,
    lineage: Option<Arc<Lineage>>,
}

impl WarehouseSchema {
    /// Open every table of `warehouse`.
    pub async fn open(
        warehouse: &Warehouse,
        options: QueryOptions,
        lineage: Option<Arc<Lineage>>,
    ) -> logbook_core::Result<Self> {
        // Opened concurrently: on an object store each open is a few round
        // trips, and a session over N tables should not wait for N in a row.
        let pins = &options.pins;
        let tables: BTreeMap<String, (Table, TableSchema)> =
            futures::stream::iter(warehouse.list_tables().await?)
                .map(|name| async move {
                    let table = warehouse.table(&name).await?;
                    let schema = match pins.get(&name) {
                        Some(v) => table.at_version(*v).await?.schema().clone(),
                        None => table.latest().await?.schema().clone(),
                    };
                    Ok::<_, logbook_core::Error>((name, (table, schema)))
                })
                .buffer_unordered(OPEN_CONCURRENCY)
                .try_collect()
                .await?;
        if let Some(missing) = options.pins.keys().find(|t| !tables.contains_key(*t)) {
            return Err(logbook_core::Error::TableNotFound {
                table: missing.clone(),
                location: warehouse.location().uri().to_string(),
            });
        }
        Ok(Self {
            tables,
            options,
            lineage,
        })
    }

    /// The provider for `name` as this session sees it.
    pub fn provider(&self, name: &str) -> Option<LogbookTableProvider> {
        let (table, schema) = self.tables.get(name)?;
        let mut p = LogbookTableProvider::new(
            table.clone(),
            schema.clone(),
            self.options.pins.get(name).copied(),
        );
        if let Some(date) = self.options.logical_date {
            p = p.with_view(
                match self.options.dimensions.unwrap_or(DimensionMode::AsOf) {
                    DimensionMode::AsOf => DimensionView::AsOf(date),
                    DimensionMode::Current => DimensionView::Current,
                },
            );
        }
        Some(self.recorded(p))
    }

    /// `p`, recording its scans into this session's lineage (if any).
    fn recorded(&self, p: LogbookTableProvider) -> LogbookTableProvider {
        match &self.lineage {
            Some(l) => p.with_lineage(l.clone()),
            None => p,
        }
    }

    fn known(&self, name: &str) -> Result<(Table, TableSchema)> {
        match self.tables.get(name) {
            Some(t) => Ok(t.clone()),
            None => plan_err!(
                "no table {name:?} in the warehouse (tables: {})",
                self.tables.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

#[async_trait]
impl SchemaProvider for WarehouseSchema {
    fn table_names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        Ok(self
            .provider(name)
            .map(|p| Arc::new(p) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.contains_key(name)
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
        let (table, schema) = self.0.known(&name)?;
        if schema.keys().is_none() {
            return plan_err!(
                "asof(): table {name} is not a dimension; use snapshot() for time travel"
            );
        }
        // A run pinned to a version of the dimension reads that version here too.
        let pin = self.0.options.pins.get(&name).copied();
        let p = LogbookTableProvider::new(table, schema, pin).with_view(DimensionView::AsOf(date));
        Ok(Arc::new(self.0.recorded(p)))
    }
}

/// `snapshot('orders', 12)`: a table as it was at version 12.
#[derive(Debug)]
pub struct SnapshotFunction(pub Arc<WarehouseSchema>);

impl TableFunctionImpl for SnapshotFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let args = args.exprs();
        let name = string_arg("snapshot", args, 0)?;
        let version = match args.get(1) {
            Some(Expr::Literal(ScalarValue::Int64(Some(v)), _)) if *v >= 0 => *v as u64,
            _ => return plan_err!("snapshot(): argument 2 must be a version number"),
        };
        let (table, schema) = self.0.known(&name)?;
        let p = LogbookTableProvider::new(table, schema, Some(version));
        Ok(Arc::new(self.0.recorded(p)))
    }
}
