//! Pruning inside a table: files by the manifest's bounds, row groups by
//! their footers and bloom filters, pages by the page index. Each test
//! reads the scan's own counts (what `EXPLAIN ANALYZE` shows) and checks
//! the answer against the rows written.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, UInt32Array};
use logbook::query::datafusion::physical_plan::collect;
use logbook::query::datafusion::prelude::SessionContext;
use logbook::query::LogbookTableProvider;
use logbook::schema::SchemaChange;
use logbook::{RunInfo, StorageLocation, Table, TableProperties, TableSchema};

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

    // A date filter prunes partitions; pages are not tested on the date
    // (constant in a file), so no page index is fetched for it.
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE date = DATE '2026-03-02'").await;
    assert_eq!(n, 1000);
    assert_eq!(counts["files_opened"], 1, "{counts:?}");
    assert_eq!(counts["pages_tested"], 0, "{counts:?}");

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
    // Pages hold about 20,000 rows (parquet's default): within the row
    // group left, every page but the one holding the ids is skipped.
    assert!(counts["pages_tested"] >= 3, "{counts:?}");
    assert_eq!(
        counts["pages_pruned"],
        counts["pages_tested"] - 1,
        "{counts:?}"
    );
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

/// `EXPLAIN ANALYZE` of `sql` on `table` registered as `t`: the scan's
/// line, with each `name=value` it shows (`12.34 K` read as 12,340).
async fn explain_analyze(table: &Table, sql: &str) -> (String, HashMap<String, f64>) {
    let ctx = SessionContext::new();
    let provider = LogbookTableProvider::latest(table.clone()).await.unwrap();
    ctx.register_table("t", Arc::new(provider)).unwrap();
    let text = explain_analyze_text(&ctx, sql).await;
    let line = text
        .lines()
        .find(|l| l.contains("LogbookScanExec"))
        .unwrap_or_else(|| panic!("no scan in {text}"))
        .to_string();
    let metrics = line.split_once("metrics=[").expect("metrics shown").1;
    let values = metrics
        .trim_end_matches(']')
        .split(", ")
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let (n, scale) = match v.split_once(' ') {
                Some((n, "K")) => (n, 1e3),
                Some((n, "M")) => (n, 1e6),
                Some((n, "B")) => (n, 1e9),
                _ => (v, 1.0),
            };
            Some((k.to_string(), n.parse::<f64>().ok()? * scale))
        })
        .collect();
    (line, values)
}

/// What an analyst sees: `EXPLAIN ANALYZE` names the files, row groups
/// and pages pruned and the bytes read, and a selective filter reads a
/// fraction of the bytes of the same query with pruning defeated.
#[tokio::test]
async fn explain_analyze_shows_what_was_pruned_and_the_bytes_read() {
    let mut opts = options();
    opts.max_row_group_rows = 50_000;
    let t = memory_table_with("orders", opts).await;
    replace(&t, date("2026-03-01"), 0..200_000, "x", "r1").await;
    replace(&t, date("2026-03-02"), 300_000..301_000, "x", "r2").await;

    let (line, pruned) = explain_analyze(
        &t,
        "SELECT count(*) FROM t WHERE id BETWEEN 120000 AND 120009",
    )
    .await;
    assert_eq!(pruned["files_pruned"], 1.0, "{line}");
    assert_eq!(pruned["files_opened"], 1.0, "{line}");
    assert_eq!(pruned["row_groups_pruned_statistics"], 3.0, "{line}");
    assert!(pruned["pages_pruned"] >= 2.0, "{line}");
    assert!(pruned["bytes_read"] > 0.0, "{line}");

    let (line, whole) = explain_analyze(
        &t,
        "SELECT count(*) FROM t WHERE id + 0 BETWEEN 120000 AND 120009",
    )
    .await;
    assert_eq!(whole["files_opened"], 2.0, "{line}");
    assert!(
        pruned["bytes_read"] * 4.0 < whole["bytes_read"],
        "pruned {pruned:?}, whole {whole:?}"
    );
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

/// A table of `SPEC` with `properties`, its ids written in a scrambled
/// order over 4 row groups of one date.
async fn scrambled(name: &str, properties: TableProperties) -> Table {
    scrambled_in(name, properties, 40_000).await
}

/// [`scrambled`], handed to the writer `chunk` rows at a time.
async fn scrambled_in(name: &str, properties: TableProperties, chunk: usize) -> Table {
    let mut opts = options();
    opts.max_row_group_rows = 10_000;
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child(name)
        .unwrap();
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    let t = Table::create_with_properties(loc, name, schema, properties, opts)
        .await
        .unwrap();
    let d = date("2026-03-01");
    let b = batch(d, 0..40_000, "x");
    // A permutation of 0..40,000 (7,919 is prime to it).
    let order = UInt32Array::from_iter_values((0..40_000u32).map(|i| i * 7_919 % 40_000));
    let b = logbook::query::datafusion::arrow::compute::take_record_batch(&b, &order).unwrap();
    let mut w = t.replace_partition(d, RunInfo::new("r")).await.unwrap();
    for at in (0..b.num_rows()).step_by(chunk) {
        w.write(&b.slice(at, chunk.min(b.num_rows() - at)))
            .await
            .unwrap();
    }
    w.commit().await.unwrap();
    t
}

fn schema() -> TableSchema {
    TableSchema::parse_spec("t", SPEC, "date").unwrap()
}

#[tokio::test]
async fn a_bloom_filter_skips_row_groups_bounds_cannot() {
    let plain = scrambled("plain", TableProperties::default()).await;
    let with = TableProperties::default()
        .with_bloom_filters("bloom", &schema(), &["name"])
        .unwrap();
    let bloom = scrambled("bloom", with).await;
    // Every row group's bounds on `name` span nearly all values.
    let sql = "SELECT count(*) FROM t WHERE name = 'x-31337'";
    let (n, without) = run(&plain, sql).await;
    assert_eq!(n, 1);
    assert_eq!(without["row_groups_read"], 4, "{without:?}");
    let (n, counts) = run(&bloom, sql).await;
    assert_eq!(n, 1);
    assert_eq!(counts["row_groups_pruned_bloom_filter"], 3, "{counts:?}");
    assert_eq!(counts["row_groups_read"], 1, "{counts:?}");
}

#[tokio::test]
async fn a_sorted_table_reads_fewer_rows_for_the_same_filter() {
    let unsorted = scrambled("unsorted", TableProperties::default()).await;
    let with = TableProperties::default()
        .with_sort_by("sorted", &schema(), &["id"])
        .unwrap();
    let sorted = scrambled("sorted", with).await;
    let sql = "SELECT count(*) FROM t WHERE id BETWEEN 31000 AND 31099";
    let (n, a) = run(&unsorted, sql).await;
    assert_eq!(n, 100);
    let (m, b) = run(&sorted, sql).await;
    assert_eq!(m, 100);
    // Unsorted, every row group spans nearly all ids.
    assert_eq!(a["rows_read"], 40_000, "unsorted: {a:?}");
    // Sorted (the writer got all rows in one batch, so they were sorted
    // together and each row group holds one range of ids).
    assert_eq!(b["row_groups_pruned_statistics"], 3, "sorted: {b:?}");
    assert!(b["rows_read"] <= 10_000, "sorted: {b:?}");
}

#[tokio::test]
async fn layout_columns_must_be_columns_of_the_table() {
    let err = TableProperties::default()
        .with_sort_by("orders", &schema(), &["customer"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("orders") && err.contains("customer"), "{err}");
    let err = TableProperties::default()
        .with_bloom_filters("orders", &schema(), &["id", "id"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("named twice"), "{err}");
    // Ids set by hand are checked when the table is created: nothing is
    // written.
    let store = StorageLocation::parse("memory://").unwrap();
    let loc = store.child("orders").unwrap();
    let props = TableProperties {
        sort_by: vec![99],
        ..Default::default()
    };
    let err = Table::create_with_properties(loc.clone(), "orders", schema(), props, options())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("orders") && err.contains("field id 99"),
        "{err}"
    );
    let listed: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(loc.store().list(None))
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn a_sorted_table_written_in_small_batches_sorts_each_row_group_and_keeps_every_row() {
    let with = TableProperties::default()
        .with_sort_by("sorted", &schema(), &["name", "id"])
        .unwrap();
    let t = scrambled_in("sorted", with, 999).await;
    let (n, _) = run(&t, "SELECT count(DISTINCT id) FROM t").await;
    assert_eq!(n, 40_000);
    let file = &latest_partition(&t, date("2026-03-01")).await.files[0];
    let bytes = object_bytes(&t, &file.path).await;
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
    assert_eq!(reader.metadata().num_row_groups(), 4);
    let mut row = 0;
    let groups: Vec<i64> = reader
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect();
    let names: Vec<String> = reader
        .build()
        .unwrap()
        .flat_map(|b| {
            let b = b.unwrap();
            let names = b.column(2).as_string::<i32>().clone();
            (0..names.len()).map(move |i| names.value(i).to_string())
        })
        .collect();
    for rows in groups {
        let group = &names[row..row + rows as usize];
        assert!(
            group.windows(2).all(|w| w[0] <= w[1]),
            "a row group out of order"
        );
        row += rows as usize;
    }
    assert_eq!(row, 40_000);
}

/// A table `name` of `spec` (a date and one more column) with bloom
/// filters on `blooms`, holding `values` on 2026-03-01.
async fn one_date(name: &str, spec: &str, blooms: &[&str], values: arrow_array::ArrayRef) -> Table {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child(name)
        .unwrap();
    let schema = TableSchema::parse_spec(name, spec, "date").unwrap();
    let props = TableProperties::default()
        .with_bloom_filters(name, &schema, blooms)
        .unwrap();
    let t = Table::create_with_properties(loc, name, schema.clone(), props, options())
        .await
        .unwrap();
    let d = date("2026-03-01");
    let b = arrow_array::RecordBatch::try_new(
        schema.arrow_schema(),
        vec![
            Arc::new(arrow_array::Date32Array::from(vec![days(d); values.len()])),
            values,
        ],
    )
    .unwrap();
    let mut w = t.replace_partition(d, RunInfo::new("r")).await.unwrap();
    w.write(&b).await.unwrap();
    w.commit().await.unwrap();
    t
}

/// Parquet writers leave NaN out of a float column's bounds, and
/// DataFusion orders NaN above every number: a row group whose footer says
/// `max = 2` may still hold a row matching `x > 5`.
#[tokio::test]
async fn a_nan_is_found_although_footer_bounds_leave_it_out() {
    let x = Arc::new(arrow_array::Float64Array::from(vec![1.0, f64::NAN, 2.0]));
    let t = one_date("m", "date:date,x:float64", &[], x).await;
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE x > 5").await;
    assert_eq!(n, 1);
}

/// Older files hashed an int32 column's values as 4 bytes: after the
/// column is widened to int64, a lookup must still find their rows.
#[tokio::test]
async fn a_bloom_filter_written_before_a_widening_still_finds_its_values() {
    let k = Arc::new(arrow_array::Int32Array::from_iter_values(
        (0..1000).map(|i| i * 3),
    ));
    let t = one_date("w", "date:date,k:int32", &["k"], k).await;
    let (n, before) = run(&t, "SELECT count(*) FROM t WHERE k = 2997").await;
    assert_eq!(n, 1);
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE k = 2998").await;
    assert_eq!(n, 0);
    t.alter_schema(SchemaChange::WidenColumn {
        name: "k".into(),
        ty: logbook::ColumnType::Int64,
    })
    .await
    .unwrap();
    let (n, after) = run(&t, "SELECT count(*) FROM t WHERE k = 2997").await;
    assert_eq!(n, 1, "before: {before:?}, after: {after:?}");
}

/// A column added after a file was written is all null in it: `IS NULL`
/// keeps the file, `IS NOT NULL` and `OR`/`NOT` are answered from rows.
#[tokio::test]
async fn null_tests_and_disjunctions_on_an_added_column_keep_old_files() {
    let t = memory_table("orders").await;
    ten_dates(&t).await;
    t.alter_schema(SchemaChange::AddColumn {
        name: "tip".into(),
        ty: logbook::ColumnType::Float64,
    })
    .await
    .unwrap();
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE tip IS NULL AND id < 1500").await;
    assert_eq!(n, 1500);
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE tip IS NOT NULL").await;
    assert_eq!(n, 0);
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE id = 5 OR id = 9005").await;
    assert_eq!(n, 2);
    assert_eq!(counts["files_pruned"], 8, "{counts:?}");
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE NOT (id >= 10)").await;
    assert_eq!(n, 10);
}

/// A column dropped and added again under its old name is a new column (a
/// new field id): the old column's values in old files neither answer a
/// filter on it nor prune (their bounds say "never null"; the new column
/// is null in every old row).
#[tokio::test]
async fn a_column_dropped_and_added_again_is_not_pruned_by_its_old_values() {
    let t = memory_table("orders").await;
    ten_dates(&t).await;
    t.alter_schema(SchemaChange::DropColumn {
        name: "name".into(),
    })
    .await
    .unwrap();
    t.alter_schema(SchemaChange::AddColumn {
        name: "name".into(),
        ty: logbook::ColumnType::String,
    })
    .await
    .unwrap();
    let (n, counts) = run(&t, "SELECT count(*) FROM t WHERE name IS NULL").await;
    assert_eq!(n, 10_000, "{counts:?}");
    assert_eq!(counts["files_pruned"], 0, "{counts:?}");
    let (n, _) = run(&t, "SELECT count(*) FROM t WHERE name = 'x' OR id < 0").await;
    assert_eq!(n, 0);
}
