//! The worked example: 90 days of orders, a customer who moves from Berlin
//! to Munich mid-period, a nightly revenue job with a bug, and the fix
//! backfilled twice: as the corrected original (dimensions as of each day)
//! and as a restated history (today's dimensions). Then a chain
//! (`chain.rs`): a cleaning job with a bug and two tables derived from it,
//! fixed by re-running all three in one stage, published as one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type};
use arrow_array::RecordBatch;
use chrono::NaiveDate;
use futures::{StreamExt, TryStreamExt};
use logbook_core::{DimensionMode, ErrorKind, RunInfo, Table, TableSchema, Warehouse};
use logbook_datafusion::{session, QueryOptions, Run};

use super::common::query_err;
use super::CliError;
use crate::input;

mod chain;

const ORDERS: &str = include_str!("../../../../../fixtures/worked/orders.csv");
const CUSTOMERS: [(&str, &str); 2] = [
    (
        "2026-01-01",
        include_str!("../../../../../fixtures/worked/customers-2026-01-01.csv"),
    ),
    (
        "2026-02-15",
        include_str!("../../../../../fixtures/worked/customers-2026-02-15.csv"),
    ),
];
const FIRST_DAY: (i32, u32, u32) = (2026, 1, 1);
const DAYS: u64 = 90;
/// Runs on different dates commute, so a few run at once; a bound keeps a
/// backfill from taking the whole machine.
const PARALLEL_RUNS: usize = 2;

/// v1 has the bug: it counts cancelled orders.
const REVENUE_V1: &str = "SELECT o.date, c.region, sum(o.amount) AS revenue, count(*) AS orders \
    FROM orders o JOIN customers c ON o.customer = c.customer \
    WHERE o.date = logical_date() GROUP BY o.date, c.region";
const REVENUE_V2: &str = "SELECT o.date, c.region, sum(o.amount) AS revenue, count(*) AS orders \
    FROM orders o JOIN customers c ON o.customer = c.customer \
    WHERE o.date = logical_date() AND o.status = 'ok' GROUP BY o.date, c.region";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Warehouse directory for the demo (default: --warehouse).
    dir: Option<PathBuf>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let warehouse = match args.dir {
        Some(dir) => Warehouse::open(&dir.to_string_lossy())?,
        None => warehouse.clone(),
    };
    println!("warehouse: {}", warehouse.location().uri());
    let days: Vec<NaiveDate> = (0..DAYS)
        .map(|i| first_day() + chrono::Days::new(i))
        .collect();

    let orders_spec = "date:date,order_id:int64,customer:string,amount:float64,status:string";
    let orders = ensure(
        &warehouse,
        "orders",
        TableSchema::parse_spec("orders", orders_spec, "date")?,
    )
    .await?;
    let customers_schema = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )?;
    let customers = ensure(&warehouse, "customers", customers_schema).await?;
    for name in ["revenue_by_region", "revenue_by_region_restated"] {
        let spec = "date:date,region:string,revenue:float64,orders:int64";
        ensure(
            &warehouse,
            name,
            TableSchema::parse_spec(name, spec, "date")?,
        )
        .await?;
    }

    load_orders(&orders).await?;
    for (effective, body) in CUSTOMERS {
        let effective: NaiveDate = effective.parse().expect("fixture date");
        let batches = read_csv(&customers, &format!("customers-{effective}.csv"), body).await?;
        let r = customers
            .apply_changes(
                effective,
                &batches,
                RunInfo::new(format!("customers-{effective}")),
            )
            .await?;
        println!(
            "customers at {effective}: {} key(s) changed (version {})",
            r.changed_keys, r.version
        );
    }

    let nightly = backfill(
        &warehouse,
        "revenue_by_region",
        &days,
        DimensionMode::AsOf,
        "v1",
        REVENUE_V1,
    )
    .await?;
    println!(
        "nightly runs (v1, counts cancelled orders): revenue_by_region up to version {nightly}"
    );
    let fixed = backfill(
        &warehouse,
        "revenue_by_region",
        &days,
        DimensionMode::AsOf,
        "v2",
        REVENUE_V2,
    )
    .await?;
    println!("backfill v2 as corrected original (dimensions as of each day): revenue_by_region version {fixed}");
    let restated = backfill(
        &warehouse,
        "revenue_by_region_restated",
        &days,
        DimensionMode::Current,
        "v2",
        REVENUE_V2,
    )
    .await?;
    println!(
        "backfill v2 restated (today's dimensions): revenue_by_region_restated version {restated}"
    );

    compare(&warehouse, nightly).await?;
    chain::run(&warehouse, &days).await?;
    println!("\nTry: logbook partitions revenue_by_region --json | head -40");
    println!("     logbook sql \"SELECT * FROM asof('customers', DATE '2026-02-01')\"");
    Ok(())
}

fn first_day() -> NaiveDate {
    NaiveDate::from_ymd_opt(FIRST_DAY.0, FIRST_DAY.1, FIRST_DAY.2).expect("valid date")
}

/// Create table `name`, or open it if an earlier demo created it.
async fn ensure(warehouse: &Warehouse, name: &str, schema: TableSchema) -> Result<Table, CliError> {
    match warehouse.create_table(name, schema).await {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(warehouse.table(name).await?),
        Err(e) => Err(e.into()),
    }
}

async fn read_csv(table: &Table, name: &str, body: &str) -> Result<Vec<RecordBatch>, CliError> {
    let dir = std::env::temp_dir().join(format!("logbook-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Input(e.to_string()))?;
    let path = dir.join(name);
    std::fs::write(&path, body).map_err(|e| CliError::Input(e.to_string()))?;
    let schema = table.latest().await?.schema().clone();
    let skip = [logbook_core::VALID_FROM, logbook_core::VALID_TO];
    let batches = input::open(&path, &schema, table.name(), &skip)?.collect::<Result<Vec<_>, _>>();
    let _ = std::fs::remove_dir_all(&dir);
    batches
}

/// One commit per day of orders (idempotent: run ids are per date).
async fn load_orders(orders: &Table) -> Result<(), CliError> {
    let all = read_csv(orders, "orders.csv", ORDERS).await?;
    let all = arrow_select::concat::concat_batches(&all[0].schema(), &all)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let dates = all.column(0).as_primitive::<Date32Type>();
    let mut committed = 0;
    for day in (0..DAYS).map(|i| first_day() + chrono::Days::new(i)) {
        let want = logbook_core::dates::to_days(day);
        let mask: arrow_array::BooleanArray = dates.iter().map(|d| Some(d == Some(want))).collect();
        let rows = arrow_select::filter::filter_record_batch(&all, &mask)
            .map_err(|e| CliError::Input(e.to_string()))?;
        let mut w = orders
            .replace_partition(day, RunInfo::new(format!("orders-{day}")))
            .await?;
        w.write(&rows).await?;
        if !w.commit().await?.already_committed {
            committed += 1;
        }
    }
    println!("orders: {DAYS} days loaded ({committed} new commits)");
    Ok(())
}

/// Run `query` for every day into `target`, a few at a time. Returns the
/// table's version afterwards.
async fn backfill(
    warehouse: &Warehouse,
    target: &str,
    days: &[NaiveDate],
    mode: DimensionMode,
    code: &str,
    query: &str,
) -> Result<u64, CliError> {
    futures::stream::iter(days.iter().copied())
        .map(|day| {
            Run::new(warehouse, target, day)
                .dimensions(mode)
                .code_version(code)
                .job("revenue_by_region")
                .sql(query)
        })
        .buffer_unordered(PARALLEL_RUNS)
        .try_collect::<Vec<_>>()
        .await
        .map_err(query_err)?;
    Ok(warehouse.table(target).await?.latest_version().await?)
}

/// Region totals around the move, from the nightly v1, the corrected
/// original and the restated history, with each partition's mode.
async fn compare(warehouse: &Warehouse, nightly_version: u64) -> Result<(), CliError> {
    let ctx = session(warehouse, QueryOptions::default(), None)
        .await
        .map_err(query_err)?;
    let window = "date BETWEEN DATE '2026-02-12' AND DATE '2026-02-18'";
    let sources = [
        format!("SELECT date, region, revenue FROM snapshot('revenue_by_region', {nightly_version}) WHERE {window}"),
        format!("SELECT date, region, revenue FROM revenue_by_region WHERE {window}"),
        format!("SELECT date, region, revenue FROM revenue_by_region_restated WHERE {window}"),
    ];
    let mut grid: BTreeMap<(NaiveDate, String), [Option<f64>; 3]> = BTreeMap::new();
    for (i, sql) in sources.iter().enumerate() {
        let batches = logbook_datafusion::sql(&ctx, sql)
            .await
            .map_err(query_err)?
            .collect()
            .await
            .map_err(|e| query_err(e.into()))?;
        for b in batches {
            let d = b.column(0).as_primitive::<Date32Type>();
            let r = b.column(1).as_string_view();
            let v = b.column(2).as_primitive::<Float64Type>();
            for j in 0..b.num_rows() {
                let key = (
                    logbook_core::dates::from_days(d.value(j)),
                    r.value(j).to_string(),
                );
                grid.entry(key).or_default()[i] = Some(v.value(j));
            }
        }
    }
    let modes = |table: &str| {
        let warehouse = warehouse.clone();
        let table = table.to_string();
        async move {
            let snap = warehouse.table(&table).await?.latest().await?;
            let parts = snap.partitions().await?;
            Ok::<_, CliError>(
                parts
                    .into_iter()
                    .map(|p| {
                        (
                            p.date,
                            p.run
                                .and_then(|r| r.dimensions)
                                .map_or("-".to_string(), |m| m.to_string()),
                        )
                    })
                    .collect::<BTreeMap<_, _>>(),
            )
        }
    };
    let (original, restated) = (
        modes("revenue_by_region").await?,
        modes("revenue_by_region_restated").await?,
    );
    println!("\nRevenue by region around the move of c-17 (Berlin -> Munich on 2026-02-15):");
    println!(
        "{:<10}  {:<8}  {:>10}  {:>22}  {:>18}",
        "date", "region", "nightly v1", "v2 corrected original", "v2 restated"
    );
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for ((date, region), [v1, orig, rest]) in &grid {
        println!(
            "{date}  {region:<8}  {:>10}  {:>13} ({:<6})  {:>9} ({:<7})",
            cell(*v1),
            cell(*orig),
            original.get(date).map_or("-", String::as_str),
            cell(*rest),
            restated.get(date).map_or("-", String::as_str),
        );
    }
    Ok(())
}
