//! Staleness that misses nothing: dates a run asked for that had not landed
//! when it read them, and dimensions read at a date other than the run's.

use logbook::lifecycle::{status, PartitionState, StaleReason};
use logbook::query::Run;
use logbook::{RunInfo, TableSchema, Warehouse};

use crate::common::*;
use crate::dimension::states;
use crate::lifecycle::orders_batch;
use crate::query::world;

/// A one-row-per-date summary of `orders`, computed by `query`.
async fn summary(wh: &Warehouse) {
    let schema = TableSchema::parse_spec("summary", "date:date,n:int64", "date").unwrap();
    wh.create_table("summary", schema).await.unwrap();
}

async fn run_summary(wh: &Warehouse, d: &str, query: &str) {
    Run::new(wh, "summary", date(d))
        .code_version("v1")
        .sql(query)
        .await
        .unwrap();
}

async fn land_orders(wh: &Warehouse, d: &str) {
    let orders = wh.table("orders").await.unwrap();
    let mut w = orders
        .replace_partition(date(d), RunInfo::new(format!("late-{d}")))
        .await
        .unwrap();
    w.write(&orders_batch(d)).await.unwrap();
    w.commit().await.unwrap();
}

/// The state of `d` of `table` and its reasons, as `status` reports them.
async fn state_of(wh: &Warehouse, table: &str, d: &str) -> (PartitionState, Vec<StaleReason>) {
    let s = status(wh, table, None, date(d)).await.unwrap();
    let d = s.get(date(d)).unwrap();
    (d.state, d.reasons.clone())
}

/// Asserts `d` of `summary` is stale because `orders` `input` changed.
async fn assert_stale_by(wh: &Warehouse, d: &str, input: &str) {
    let (state, reasons) = state_of(wh, "summary", d).await;
    assert_eq!(state, PartitionState::Stale, "{reasons:?}");
    assert!(
        reasons.iter().any(|r| matches!(
            r,
            StaleReason::Input { table, date: changed, .. } if table == "orders" && *changed == date(input)
        )),
        "{reasons:?}"
    );
}

async fn assert_complete(wh: &Warehouse, table: &str, d: &str, after: &str) {
    let (state, reasons) = state_of(wh, table, d).await;
    assert_eq!(
        state,
        PartitionState::Complete,
        "after {after}: {reasons:?}"
    );
}

#[tokio::test]
async fn a_date_landing_inside_a_rolling_window_after_the_run_makes_it_stale() {
    // orders has 03-14, 03-15, 03-16 and 03-25; the window of 03-16 is 03-10..=03-16.
    let (wh, _) = world().await;
    summary(&wh).await;
    run_summary(
        &wh,
        "2026-03-16",
        "SELECT logical_date() AS date, count(*) AS n FROM orders \
         WHERE date BETWEEN logical_date() - INTERVAL '6 days' AND logical_date()",
    )
    .await;
    assert_complete(&wh, "summary", "2026-03-16", "the run").await;
    // Outside the window, before and after it: nothing the run asked for.
    land_orders(&wh, "2026-03-09").await;
    land_orders(&wh, "2026-03-17").await;
    assert_complete(&wh, "summary", "2026-03-16", "dates outside the window").await;
    // Inside the window: a date the run asked for and did not find.
    land_orders(&wh, "2026-03-12").await;
    assert_stale_by(&wh, "2026-03-16", "2026-03-12").await;
}

#[tokio::test]
async fn a_date_landing_in_a_month_to_date_read_makes_it_stale() {
    let (wh, _) = world().await;
    summary(&wh).await;
    run_summary(
        &wh,
        "2026-03-16",
        "SELECT logical_date() AS date, count(*) AS n FROM orders \
         WHERE date >= CAST(date_trunc('month', logical_date()) AS DATE) AND date <= logical_date()",
    )
    .await;
    land_orders(&wh, "2026-02-28").await;
    land_orders(&wh, "2026-03-20").await;
    assert_complete(&wh, "summary", "2026-03-16", "dates outside the month").await;
    land_orders(&wh, "2026-03-01").await;
    assert_stale_by(&wh, "2026-03-16", "2026-03-01").await;
}

#[tokio::test]
async fn any_date_landing_after_an_unbounded_scan_makes_it_stale() {
    let (wh, _) = world().await;
    summary(&wh).await;
    run_summary(
        &wh,
        "2026-03-16",
        "SELECT logical_date() AS date, count(*) AS n FROM orders",
    )
    .await;
    assert_complete(&wh, "summary", "2026-03-16", "the run").await;
    land_orders(&wh, "2025-12-01").await;
    assert_stale_by(&wh, "2026-03-16", "2025-12-01").await;
}

#[tokio::test]
async fn a_dimension_read_at_another_date_is_judged_at_that_date() {
    // customers: c-17 Berlin from 01-01, Munich from 03-20; c-04 Hamburg from 01-01.
    let (wh, _) = world().await;
    let query = "SELECT o.date, c.region, sum(o.amount) AS revenue \
        FROM orders o JOIN asof('customers', DATE '2026-03-01') c ON o.customer = c.customer \
        WHERE o.date = logical_date() GROUP BY o.date, c.region";
    Run::new(&wh, "revenue_by_region", date("2026-03-25"))
        .code_version("v1")
        .sql(query)
        .await
        .unwrap();
    let customers = wh.table("customers").await.unwrap();
    // Changes rows from 03-22 on: the run's logical date, not the date it read.
    customers
        .apply_changes(
            date("2026-03-22"),
            &[states(&[("c-04", "Bremen")])],
            RunInfo::new("c3"),
        )
        .await
        .unwrap();
    assert_complete(
        &wh,
        "revenue_by_region",
        "2026-03-25",
        "a change after 03-01",
    )
    .await;
    // Changes c-17 from 02-15 until its move on 03-20: covers 03-01, not 03-25.
    customers
        .apply_changes(
            date("2026-02-15"),
            &[states(&[("c-17", "Hamburg")])],
            RunInfo::new("c4"),
        )
        .await
        .unwrap();
    let (state, reasons) = state_of(&wh, "revenue_by_region", "2026-03-25").await;
    assert_eq!(state, PartitionState::Stale, "{reasons:?}");
    assert!(
        matches!(&reasons[..], [StaleReason::Dimension { table, .. }] if table == "customers"),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn asof_inside_a_pinned_run_reads_the_pinned_version() {
    // Version 1 of customers has c-17 in Berlin for good; version 2 moved it
    // to Munich from 03-20.
    let (wh, _) = world().await;
    let rc = Run::new(&wh, "revenue_by_region", date("2026-03-25"))
        .pin("customers", 1)
        .start()
        .await
        .unwrap();
    let batches = logbook::query::sql(
        &rc.ctx,
        "SELECT region FROM asof('customers', DATE '2026-03-25') WHERE customer = 'c-17'",
    )
    .await
    .unwrap()
    .collect()
    .await
    .unwrap();
    let regions = logbook::query::datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    assert!(
        regions.contains("Berlin") && !regions.contains("Munich"),
        "{regions}"
    );
    rc.writer.abort().await.unwrap();
}
