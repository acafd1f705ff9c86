//! Schema evolution: columns tracked by field id; older partitions adapt on
//! read; adding a column makes older partitions stale until recomputed.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{
    Array, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use logbook::lifecycle::{status, PartitionState, StaleReason};
use logbook::maintenance::{compact, CompactOptions};
use logbook::query::{session, QueryOptions};
use logbook::schema::{ColumnType, SchemaChange};
use logbook::{ErrorKind, RunInfo, StorageLocation, Table, TableSchema, Warehouse};

use crate::common::*;

async fn warehouse_with_t() -> (Warehouse, Table) {
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), options());
    let tiny = wh.with_options(wh.options().clone().with_max_rows_per_file(2));
    let t = tiny
        .create_table("t", TableSchema::parse_spec("t", SPEC, "date").unwrap())
        .await
        .unwrap();
    for d in ["2026-03-01", "2026-03-02"] {
        replace(&t, date(d), 0..3, "old", &format!("old-{d}")).await;
    }
    let t = wh.table("t").await.unwrap();
    (wh, t)
}

fn with_tip(d: &str, tips: &[f64]) -> RecordBatch {
    let n = tips.len();
    RecordBatch::try_from_iter([
        (
            "date",
            Arc::new(Date32Array::from(vec![days(date(d)); n])) as _,
        ),
        (
            "id",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as _,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("new-{i}")),
            )) as _,
        ),
        ("tip", Arc::new(Float64Array::from(tips.to_vec())) as _),
    ])
    .unwrap()
}

fn add(name: &str, ty: ColumnType) -> SchemaChange {
    SchemaChange::AddColumn {
        name: name.into(),
        ty,
    }
}

/// The values of `column` in partition `d` at the latest version.
async fn column(t: &Table, d: &str, column: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for b in t
        .latest()
        .await
        .unwrap()
        .read_partition(date(d))
        .await
        .unwrap()
    {
        let c = b
            .column_by_name(column)
            .unwrap_or_else(|| panic!("no {column} in {:?}", b.schema()));
        for i in 0..c.len() {
            out.push(c.is_valid(i).then(|| {
                logbook::query::datafusion::arrow::util::display::array_value_to_string(c, i)
                    .unwrap()
            }));
        }
    }
    out
}

#[tokio::test]
async fn an_added_column_reads_null_in_old_partitions_which_are_stale_until_rewritten() {
    let (wh, t) = warehouse_with_t().await;
    let before = t.latest_version().await.unwrap();
    t.alter_schema(add("tip", ColumnType::Float64))
        .await
        .unwrap();
    let schema = t.latest().await.unwrap().schema().clone();
    assert_eq!((schema.version, schema.column("tip").unwrap().id), (1, 4));

    // Writes must match the current schema, and say which version it is.
    let mut w = t
        .replace_partition(date("2026-03-03"), RunInfo::new("no-tip"))
        .await
        .unwrap();
    let err = w
        .write(&batch(date("2026-03-03"), 0..2, "x"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("tip") && err.to_string().contains("schema version 1"),
        "{err}"
    );
    w.abort().await.unwrap();

    let mut w = t
        .replace_partition(date("2026-03-03"), RunInfo::new("new-3"))
        .await
        .unwrap();
    w.write(&with_tip("2026-03-03", &[1.5, 2.5])).await.unwrap();
    w.commit().await.unwrap();
    assert_eq!(
        column(&t, "2026-03-01", "tip").await,
        vec![None, None, None]
    );
    assert_eq!(
        column(&t, "2026-03-03", "tip").await,
        vec![Some("1.5".into()), Some("2.5".into())]
    );
    assert_eq!(
        column(&t, "2026-03-01", "name").await[0].as_deref(),
        Some("old-0")
    );

    let s = status(&wh, "t", None, date("2026-03-03")).await.unwrap();
    let stale = |d: &str| s.get(date(d)).unwrap().reasons.clone();
    assert_eq!(
        stale("2026-03-01"),
        vec![StaleReason::Schema {
            columns: vec!["tip".into()]
        }]
    );
    assert_eq!(
        s.get(date("2026-03-03")).unwrap().state,
        PartitionState::Complete
    );

    // Compaction writes the current schema but changes no data: still stale.
    compact(&t, &CompactOptions::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(
        column(&t, "2026-03-01", "tip").await,
        vec![None, None, None]
    );
    let s = status(&wh, "t", None, date("2026-03-03")).await.unwrap();
    assert_eq!(
        s.get(date("2026-03-01")).unwrap().state,
        PartitionState::Stale
    );

    // Rewriting the date clears it.
    let mut w = t
        .replace_partition(date("2026-03-01"), RunInfo::new("backfill-1"))
        .await
        .unwrap();
    w.write(&with_tip("2026-03-01", &[9.0])).await.unwrap();
    w.commit().await.unwrap();
    let s = status(&wh, "t", None, date("2026-03-03")).await.unwrap();
    assert_eq!(
        s.get(date("2026-03-01")).unwrap().state,
        PartitionState::Complete
    );

    // SQL sees the evolved table; time travel sees the old schema.
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let rows = ctx
        .sql("SELECT date, count(tip) AS n FROM t GROUP BY date ORDER BY date")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let counts: Vec<i64> = rows
        .iter()
        .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(counts, vec![1, 0, 2]);
    let old = t.at_version(before).await.unwrap();
    assert_eq!(old.schema().spec(), SPEC);
    let old_rows = old.read_partition(date("2026-03-01")).await.unwrap();
    assert_eq!(old_rows[0].num_columns(), 3);
}

#[tokio::test]
async fn a_dropped_then_re_added_column_never_leaks_old_values() {
    let (_, t) = warehouse_with_t().await;
    t.alter_schema(SchemaChange::DropColumn {
        name: "name".into(),
    })
    .await
    .unwrap();
    assert!(t
        .latest()
        .await
        .unwrap()
        .read_partition(date("2026-03-01"))
        .await
        .unwrap()[0]
        .column_by_name("name")
        .is_none());
    t.alter_schema(add("name", ColumnType::String))
        .await
        .unwrap();
    let schema = t.latest().await.unwrap().schema().clone();
    assert_eq!(
        schema.column("name").unwrap().id,
        4,
        "a new id, never the dropped one's"
    );
    assert_eq!(
        column(&t, "2026-03-01", "name").await,
        vec![None, None, None]
    );
}

#[tokio::test]
async fn renames_and_widenings_read_old_files_and_do_not_stale_them() {
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), options());
    let t = wh
        .create_table(
            "m",
            TableSchema::parse_spec("m", "date:date,qty:int32,price:float64", "date").unwrap(),
        )
        .await
        .unwrap();
    let d = date("2026-03-01");
    let mut w = t.replace_partition(d, RunInfo::new("m1")).await.unwrap();
    w.write(
        &RecordBatch::try_from_iter([
            ("date", Arc::new(Date32Array::from(vec![days(d); 2])) as _),
            ("qty", Arc::new(Int32Array::from(vec![3, 4])) as _),
            ("price", Arc::new(Float64Array::from(vec![1.0, 2.0])) as _),
        ])
        .unwrap(),
    )
    .await
    .unwrap();
    w.commit().await.unwrap();
    t.alter_schema(SchemaChange::WidenColumn {
        name: "qty".into(),
        ty: ColumnType::Int64,
    })
    .await
    .unwrap();
    t.alter_schema(SchemaChange::RenameColumn {
        from: "price".into(),
        to: "unit_price".into(),
    })
    .await
    .unwrap();
    let b = &t.latest().await.unwrap().read_partition(d).await.unwrap()[0];
    assert_eq!(
        b.column_by_name("qty")
            .unwrap()
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        vec![3, 4]
    );
    assert_eq!(
        b.column_by_name("unit_price")
            .unwrap()
            .as_primitive::<Float64Type>()
            .values()
            .to_vec(),
        vec![1.0, 2.0]
    );
    let s = status(&wh, "m", None, d).await.unwrap();
    assert_eq!(s.dates[0].state, PartitionState::Complete);
    let log = t.history().await.unwrap();
    assert_eq!(
        log.last().unwrap().change.as_deref(),
        Some("rename column price to unit_price")
    );
}

#[tokio::test]
async fn unsafe_schema_changes_are_refused_and_commit_nothing() {
    let (wh, t) = warehouse_with_t().await;
    let dim = wh
        .create_table(
            "d",
            TableSchema::parse_dimension_spec("d", "k:string,v:string", &["k"]).unwrap(),
        )
        .await
        .unwrap();
    let cases: Vec<(&Table, SchemaChange, &str)> = vec![
        (&t, add("name", ColumnType::String), "already exists"),
        (
            &t,
            SchemaChange::DropColumn {
                name: "date".into(),
            },
            "partition column",
        ),
        (
            &dim,
            SchemaChange::DropColumn { name: "k".into() },
            "key column",
        ),
        (
            &dim,
            SchemaChange::DropColumn {
                name: "valid_to".into(),
            },
            "validity column",
        ),
        (
            &t,
            SchemaChange::WidenColumn {
                name: "id".into(),
                ty: ColumnType::Int32,
            },
            "not a safe widening",
        ),
        (
            &t,
            SchemaChange::WidenColumn {
                name: "date".into(),
                ty: ColumnType::Timestamp,
            },
            "not a safe widening",
        ),
        (
            &t,
            SchemaChange::RenameColumn {
                from: "id".into(),
                to: "name".into(),
            },
            "already exists",
        ),
        (
            &t,
            SchemaChange::DropColumn {
                name: "nope".into(),
            },
            "no column \"nope\"",
        ),
    ];
    for (table, change, needle) in cases {
        let before = table.latest_version().await.unwrap();
        let err = table.alter_schema(change.clone()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{change}");
        let msg = err.to_string();
        assert!(
            msg.contains(needle) && msg.contains(table.name()),
            "{change}: {msg}"
        );
        assert_eq!(
            table.latest_version().await.unwrap(),
            before,
            "{change} committed"
        );
    }
}
