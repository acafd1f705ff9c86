//! The chain in the worked example: `orders_clean` (v1 keeps cancelled
//! orders: the bug), `daily_revenue` read from it and `daily_kpis` read
//! from that. The fix re-runs all three in one stage, shows `stage diff`,
//! and publishes the three tables as one: no reader ever sees the fixed
//! `orders_clean` beside the old `daily_revenue`.

use chrono::NaiveDate;
use futures::{StreamExt, TryStreamExt};
use logbook_core::lifecycle::{plan, status_in, Selection};
use logbook_core::{TableSchema, Warehouse};
use logbook_datafusion::Run;

use super::{ensure, PARALLEL_RUNS};
use crate::commands::common::query_err;
use crate::commands::CliError;

const STAGE: &str = "fix-orders-clean";

/// The chain's three jobs: table, schema, then the query of each code
/// version (v1: the bug, v2: the fix).
const JOBS: [(&str, &str, &str, &str); 3] = [
    (
        "orders_clean",
        "date:date,order_id:int64,customer:string,amount:float64",
        "SELECT date, order_id, customer, amount FROM orders WHERE date = logical_date()",
        "SELECT date, order_id, customer, amount FROM orders \
         WHERE date = logical_date() AND status = 'ok'",
    ),
    (
        "daily_revenue",
        "date:date,revenue:float64,orders:int64",
        "SELECT date, sum(amount) AS revenue, count(*) AS orders FROM orders_clean \
         WHERE date = logical_date() GROUP BY date",
        "",
    ),
    (
        "daily_kpis",
        "date:date,revenue_per_order:float64",
        "SELECT date, revenue / orders AS revenue_per_order FROM daily_revenue \
         WHERE date = logical_date()",
        "",
    ),
];

pub(super) async fn run(warehouse: &Warehouse, days: &[NaiveDate]) -> Result<(), CliError> {
    for (name, spec, _, _) in JOBS {
        ensure(
            warehouse,
            name,
            TableSchema::parse_spec(name, spec, "date")?,
        )
        .await?;
    }
    // Nightly: every job at v1, in order (a re-run of the demo commits
    // nothing: each run id derives from the query and the data read).
    for (name, _, v1, _) in JOBS {
        runs(warehouse, name, days, "v1", v1, None).await?;
    }
    println!("\nChain orders -> orders_clean -> daily_revenue -> daily_kpis: nightly v1 (keeps cancelled orders)");

    let clean = warehouse.table("orders_clean").await?.latest().await?;
    let fixed = clean
        .partitions()
        .await?
        .iter()
        .all(|p| p.run.as_ref().and_then(|r| r.code_version.as_deref()) == Some("v2"));
    if fixed {
        println!("the fix of orders_clean was published before: nothing to re-run");
        return Ok(());
    }
    // The fix: orders_clean at v2 in a stage, then the rest of the chain
    // in the same stage, each reading its input as the stage holds it.
    let (first, last) = (days[0], days[days.len() - 1]);
    let mut jobs = JOBS.iter();
    if let Some((name, _, _, v2)) = jobs.next() {
        runs(warehouse, name, days, "v2", v2, Some(STAGE)).await?;
    }
    for (name, _, v1, _) in jobs {
        let stale = status_in(warehouse, name, Some(STAGE), Some(first), last).await?;
        let todo = plan(&stale, Selection::Needed);
        println!(
            "plan {name} --stage {STAGE}: {} date(s) stale in the stage",
            todo.steps.len()
        );
        let dates: Vec<NaiveDate> = todo.steps.iter().map(|s| s.date).collect();
        runs(warehouse, name, &dates, "v1", v1, Some(STAGE)).await?;
    }
    let stage = warehouse.stage(STAGE).await?;
    println!("\nstage diff {STAGE} (totals over the staged dates, main line -> stage):");
    for (table, diff) in stage.diff().await? {
        let rows_old: u64 = diff.iter().filter_map(|d| d.old_rows).sum();
        let rows_new: u64 = diff.iter().map(|d| d.new_rows).sum();
        let mut line = format!(
            "  {table:<14} {} date(s), rows {rows_old} -> {rows_new}",
            diff.len()
        );
        let columns: Vec<String> = diff
            .first()
            .map(|d| d.sums.keys().cloned().collect())
            .unwrap_or_default();
        for column in columns.iter().filter(|c| c.as_str() != "order_id") {
            let old: f64 = diff.iter().filter_map(|d| d.sums[column].0).sum();
            let new: f64 = diff.iter().map(|d| d.sums[column].1).sum();
            line.push_str(&format!(", sum({column}) {old:.2} -> {new:.2}"));
        }
        println!("{line}");
    }
    let published = stage.publish(false).await?;
    let seq = published.seq.map_or("-".to_string(), |s| s.to_string());
    println!(
        "stage publish {STAGE}: {} tables as one (publish {seq}); every table shows the fix, or none would",
        published.tables.len()
    );
    Ok(())
}

/// Run `query` (job `name`, `code`) for `days`, a few at a time, on the
/// main line or in `stage`.
async fn runs(
    warehouse: &Warehouse,
    name: &str,
    days: &[NaiveDate],
    code: &str,
    query: &str,
    stage: Option<&str>,
) -> Result<(), CliError> {
    futures::stream::iter(days.iter().copied())
        .map(|day| {
            let run = Run::new(warehouse, name, day).code_version(code).job(name);
            match stage {
                Some(s) => run.stage(s),
                None => run,
            }
            .sql(query)
        })
        .buffer_unordered(PARALLEL_RUNS)
        .try_collect::<Vec<_>>()
        .await
        .map_err(query_err)?;
    Ok(())
}
