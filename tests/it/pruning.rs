//! Pruning inside a table: files by the manifest's bounds, row groups by
//! their footers and bloom filters, pages by the page index. Each test
//! reads the scan's own counts (what `EXPLAIN ANALYZE` shows) and checks
//! the answer against the rows written.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use logbook::query::datafusion::physical_plan::{collect, ExecutionPlan};
use logbook::query::datafusion::prelude::SessionContext;
use logbook::query::LogbookTableProvider;
use logbook::schema::SchemaChange;
use logbook::Table;

use crate::common::*;

/// Run `sql` on `table` registered as `t`; the first column of the first
/// row, and the scan's counters summed over every scan of the plan.
async fn run(table: &Table, sql: &str) -> (i64, HashMap<String, usize>) {
    let ctx = SessionContext::new();
    let provider = LogbookTableProvider::latest(table.clone()).await.unwrap();
    ctx.register_table("t", Arc::new(provider)).unwrap();
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let first = batches[0].column(0).as_primitive::<Int64Type>().value(0);
    let mut counts = HashMap::new();
    add_scan_counts(&plan, &mut counts);
    (first, counts)
}

fn add_scan_counts(plan: &Arc<dyn ExecutionPlan>, into: &mut HashMap<String, usize>) {
    if plan.name() == "LogbookScanExec" {
        for m in plan.metrics().unwrap().iter() {
            *into.entry(m.value().name().to_string()).or_default() += m.value().as_usize();
        }
    }
    for child in plan.children() {
        add_scan_counts(child, into);
    }
}

/// Ten dates of ascending ids, 1,000 per date.
async fn ten_dates(table: &Table) {
    for i in 0..10i64 {
        let d = date("2026-03-01") + chrono::Days::new(i as u64);
        replace(table, d, i * 1000..(i + 1) * 1000, "x", &format!("r{i}")).await;
    }
}

#[tokio::test]
async fn a_filter_on_a_non_date_column_opens_only_files_whose_bounds_match() {
    let t = memory_table("orders").await;
    ten_dates(&t).await;
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE id = 4321").await;
    assert_eq!(n, 1);
    assert_eq!(counts["files_pruned"], 9, "{counts:?}");
    assert_eq!(counts["files_opened"], 1, "{counts:?}");

    // Without a filter every file is opened and nothing is pruned.
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE name <> ''").await;
    assert_eq!(n, 10_000);
    assert_eq!(counts["files_opened"], 10, "{counts:?}");
}

#[tokio::test]
async fn row_groups_and_pages_a_filter_rules_out_are_not_read() {
    let mut opts = options();
    opts.max_row_group_rows = 50_000;
    let t = memory_table_with("orders", opts).await;
    let d = date("2026-03-01");
    replace(&t, d, 0..200_000, "x", "r").await;

    let (n, counts) = run(
        &t,
        "SELECT count(*) FROM t WHERE id BETWEEN 120000 AND 120009",
    )
    .await;
    assert_eq!(n, 10);
    assert_eq!(counts["row_groups"], 4, "{counts:?}");
    assert_eq!(counts["row_groups_read"], 1, "{counts:?}");
    assert_eq!(counts["row_groups_pruned_statistics"], 3, "{counts:?}");
    // Pages hold at most 20,000 rows (parquet's default): within the row
    // group left, the pages that cannot match are skipped.
    assert!(counts["pages_pruned"] >= 2, "{counts:?}");
    assert!(counts["rows_read"] <= 20_480, "{counts:?}");

    // The same count without pruning reads every row.
    let (n, counts) = run(
        &t,
        "SELECT count(*) FROM t WHERE id + 0 BETWEEN 120000 AND 120009",
    )
    .await;
    assert_eq!(n, 10);
    assert_eq!(counts["rows_read"], 200_000, "{counts:?}");
}

#[tokio::test]
async fn a_renamed_column_prunes_old_files_by_field_id() {
    let t = memory_table("orders").await;
    ten_dates(&t).await;
    t.alter_schema(SchemaChange::RenameColumn {
        from: "id".into(),
        to: "order_id".into(),
    })
    .await
    .unwrap();
    t.alter_schema(SchemaChange::RenameColumn {
        from: "name".into(),
        to: "id".into(),
    })
    .await
    .unwrap();
    // `id` is now the old `name`: old files' `id` column must not be
    // taken for it.
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE order_id >= 9990").await;
    assert_eq!(n, 10);
    assert_eq!(counts["files_pruned"], 9, "{counts:?}");
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE id = 'x-4321'").await;
    assert_eq!(n, 1);
}
