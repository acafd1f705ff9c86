//! A run's identity: the same inputs and the same query commit nothing new;
//! anything else (an edited query, a replaced input date, a damaged or
//! schema-stale partition) commits.

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use logbook::lifecycle::{status, PartitionState};
use logbook::maintenance::expire::{expire, Keep};
use logbook::query::Run;
use logbook::schema::SchemaChange;
use logbook::{ColumnType, CommitInfo, PropertiesChange, Warehouse};
use object_store::ObjectStoreExt;

use crate::common::*;
use crate::lifecycle::orders_batch;
use crate::query::{world, REVENUE};

async fn revenue(wh: &Warehouse, d: &str, query: &str) -> CommitInfo {
    Run::new(wh, "revenue_by_region", date(d))
        .code_version("v1")
        .sql(query)
        .await
        .unwrap()
}

async fn state(wh: &Warehouse, table: &str, d: &str) -> PartitionState {
    let s = status(wh, table, None, date(d)).await.unwrap();
    s.get(date(d)).unwrap().state
}

#[tokio::test]
async fn an_edited_query_with_the_same_code_version_commits_and_whitespace_does_not() {
    let (wh, _) = world().await;
    let first = revenue(&wh, "2026-03-15", REVENUE).await;
    let edited = REVENUE.replace("sum(o.amount)", "sum(o.amount * 2)");
    let second = revenue(&wh, "2026-03-15", &edited).await;
    assert!(!second.already_committed, "{second:?}");
    assert!(second.version > first.version);
    let spaced = edited.replace(' ', "\n   ");
    let third = revenue(&wh, "2026-03-15", &spaced).await;
    assert!(third.already_committed, "{third:?}");
    assert_eq!(third.version, second.version);
}

#[tokio::test]
async fn commits_that_leave_the_dates_read_unchanged_do_not_make_a_rerun_commit() {
    let (wh, _) = world().await;
    let first = revenue(&wh, "2026-03-15", REVENUE).await;
    let orders = wh.table("orders").await.unwrap();
    // Another date of the input, a property change, an expiry, and a
    // dimension property change: none changes what the run read.
    let mut w = orders
        .replace_partition(date("2026-03-20"), logbook::RunInfo::new("o-0320"))
        .await
        .unwrap();
    w.write(&orders_batch("2026-03-20")).await.unwrap();
    w.commit().await.unwrap();
    let change = PropertiesChange {
        depends_on_previous: Some(false),
        ..Default::default()
    };
    orders.alter(change.clone()).await.unwrap();
    expire(&orders, Keep::Last(2)).await.unwrap();
    wh.table("customers")
        .await
        .unwrap()
        .alter(change)
        .await
        .unwrap();
    let again = revenue(&wh, "2026-03-15", REVENUE).await;
    assert!(again.already_committed, "{again:?}");
    assert_eq!(again.version, first.version);
    assert_eq!(
        state(&wh, "revenue_by_region", "2026-03-15").await,
        PartitionState::Complete
    );
    // Replacing the date it read does.
    let mut w = orders
        .replace_partition(date("2026-03-15"), logbook::RunInfo::new("o-0315-fix"))
        .await
        .unwrap();
    w.write(&orders_batch("2026-03-15")).await.unwrap();
    w.commit().await.unwrap();
    let fixed = revenue(&wh, "2026-03-15", REVENUE).await;
    assert!(!fixed.already_committed && fixed.version > first.version);
}

#[tokio::test]
async fn a_corrupt_date_is_repaired_by_rerunning_the_same_run() {
    let (wh, _) = world().await;
    let first = revenue(&wh, "2026-03-15", REVENUE).await;
    let table = wh.table("revenue_by_region").await.unwrap();
    let file = latest_partition(&table, date("2026-03-15")).await.files[0]
        .path
        .clone();
    let loc = table.location();
    loc.store().delete(&loc.path(&file)).await.unwrap();
    assert_eq!(
        state(&wh, "revenue_by_region", "2026-03-15").await,
        PartitionState::Corrupt
    );
    let repaired = revenue(&wh, "2026-03-15", REVENUE).await;
    assert!(!repaired.already_committed, "{repaired:?}");
    assert!(repaired.version > first.version);
    assert_eq!(
        state(&wh, "revenue_by_region", "2026-03-15").await,
        PartitionState::Complete
    );
    let again = revenue(&wh, "2026-03-15", REVENUE).await;
    assert!(again.already_committed && again.version == repaired.version);
}

#[tokio::test]
async fn an_explicit_run_id_repairs_a_corrupt_or_schema_stale_date() {
    let t = memory_table("explicit_repair").await;
    let d = date("2026-03-15");
    let v1 = replace(&t, d, 0..3, "a", "run-x").await;
    let file = latest_partition(&t, d).await.files[0].path.clone();
    t.location()
        .store()
        .delete(&t.location().path(&file))
        .await
        .unwrap();
    let v2 = replace(&t, d, 0..3, "a", "run-x").await;
    assert!(
        v2 > v1,
        "a damaged partition is rewritten by the same run id"
    );
    // A retry once it is whole commits nothing.
    assert_eq!(replace(&t, d, 0..3, "a", "run-x").await, v2);

    t.alter_schema(SchemaChange::AddColumn {
        name: "extra".into(),
        ty: ColumnType::Int64,
    })
    .await
    .unwrap();
    let base = batch(d, 0..3, "a");
    let mut columns = base.columns().to_vec();
    columns.push(Arc::new(Int64Array::from(vec![7, 8, 9])));
    let schema = t.latest().await.unwrap().arrow_schema();
    let widened = RecordBatch::try_new(schema, columns).unwrap();
    let mut w = t
        .replace_partition(d, logbook::RunInfo::new("run-x"))
        .await
        .unwrap();
    w.write(&widened).await.unwrap();
    let info = w.commit().await.unwrap();
    assert!(
        !info.already_committed,
        "a schema-stale partition is rewritten by the same run id: {info:?}"
    );
}

#[tokio::test]
async fn going_back_to_an_earlier_query_is_that_earlier_run_unless_the_code_version_moves() {
    // A run id that wrote the date before, even if superseded since, is
    // never committed again: a late retry must not overwrite a newer run.
    // So a return to an earlier query under the same code version is that
    // earlier run (nothing new, its version reported); a new code version
    // commits it.
    let (wh, _) = world().await;
    let first = revenue(&wh, "2026-03-15", REVENUE).await;
    let edited = REVENUE.replace("sum(o.amount)", "sum(o.amount * 2)");
    let second = revenue(&wh, "2026-03-15", &edited).await;
    let back = revenue(&wh, "2026-03-15", REVENUE).await;
    assert!(
        back.already_committed && back.version == first.version,
        "{back:?}"
    );
    assert!(second.version > first.version);
    let rolled_back = Run::new(&wh, "revenue_by_region", date("2026-03-15"))
        .code_version("v1-revert")
        .sql(REVENUE)
        .await
        .unwrap();
    assert!(!rolled_back.already_committed && rolled_back.version > second.version);
}

#[tokio::test]
async fn a_chain_date_reruns_when_the_previous_date_was_recommitted() {
    let wh = logbook::Warehouse::new(
        logbook::StorageLocation::parse("memory://").unwrap(),
        options(),
    );
    let props = logbook::TableProperties {
        schedule_start: Some(date("2026-03-01")),
        depends_on_previous: true,

        ..Default::default()
    };
    let schema = logbook::TableSchema::parse_spec("chain", "date:date,n:int64", "date").unwrap();
    wh.create_table_with_properties("chain", schema, props)
        .await
        .unwrap();
    let day = |d: &str| {
        Run::new(&wh, "chain", date(d))
            .code_version("v1")
            .sql("SELECT logical_date() AS date, CAST(1 AS BIGINT) AS n")
    };
    day("2026-03-01").await.unwrap();
    let first = day("2026-03-02").await.unwrap();
    assert!(day("2026-03-02").await.unwrap().already_committed);
    // March 1 is recommitted (another query): March 2 builds on it.
    Run::new(&wh, "chain", date("2026-03-01"))
        .code_version("v1")
        .sql("SELECT logical_date() AS date, CAST(2 AS BIGINT) AS n")
        .await
        .unwrap();
    assert_eq!(
        state(&wh, "chain", "2026-03-02").await,
        PartitionState::Stale
    );
    let again = day("2026-03-02").await.unwrap();
    assert!(
        !again.already_committed && again.version > first.version,
        "{again:?}"
    );
    assert_eq!(
        state(&wh, "chain", "2026-03-02").await,
        PartitionState::Complete
    );
}

#[tokio::test]
async fn a_dataframe_job_is_identified_by_the_plans_it_runs() {
    use logbook::query::datafusion::prelude::{col, lit};
    let (wh, _) = world().await;
    let job = |factor: f64| {
        let wh = wh.clone();
        async move {
            let mut rc = Run::new(&wh, "revenue_by_region", date("2026-03-15"))
                .code_version("v1")
                .start()
                .await
                .unwrap();
            let df = rc
                .ctx
                .table("orders")
                .await
                .unwrap()
                .filter(col("date").eq(lit(
                    logbook::query::datafusion::scalar::ScalarValue::Date32(Some(days(date(
                        "2026-03-15",
                    )))),
                )))
                .unwrap()
                .select(vec![
                    col("date"),
                    col("customer").alias("region"),
                    (col("amount") * lit(factor)).alias("revenue"),
                ])
                .unwrap();
            for batch in df.collect().await.unwrap() {
                rc.writer.write(&batch).await.unwrap();
            }
            rc.commit().await.unwrap()
        }
    };
    let first = job(1.0).await;
    assert!(
        job(1.0).await.already_committed,
        "the same job on the same data"
    );
    let changed = job(2.0).await;
    assert!(!changed.already_committed && changed.version > first.version);
}

/// A derived run id is completed at commit with a fingerprint of what the
/// run read; one whose prefix is valid but which would be too long once
/// completed is refused when the run starts, before anything is written
/// or committed.
#[tokio::test]
async fn a_derived_run_id_too_long_to_complete_is_refused_before_writing() {
    let (wh, _) = world().await;
    let target = wh.table("revenue_by_region").await.unwrap();
    let before = target.latest_version().await.unwrap();
    let files = objects(&target, "").await;
    // The prefix `revenue_by_region-2026-03-15-as-of-<code version>` is
    // 120 bytes (valid); completed, 137 (over the 128 allowed).
    let err = Run::new(&wh, "revenue_by_region", date("2026-03-15"))
        .code_version("v".repeat(85))
        .sql(REVENUE)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("run id"), "{err}");
    assert_eq!(target.latest_version().await.unwrap(), before);
    assert_eq!(objects(&target, "").await, files, "nothing written");
}
