//! SCD2 dimensions: intervals, back-dated changes, deletes, snapshots, invariants.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::{Array, RecordBatch, StringArray};
use futures::TryStreamExt;
use logbook::{DateRange, Error, ErrorKind, Operation, RunInfo, Table, TableSchema, Warehouse};

use crate::common::*;

pub async fn customers() -> Table {
    let wh = Warehouse::new(
        logbook::StorageLocation::parse("memory://").unwrap(),
        options(),
    );
    let schema = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    wh.create_table("customers", schema).await.unwrap()
}

pub fn states(rows: &[(&str, &str)]) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "customer",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))) as _,
        ),
        (
            "region",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))) as _,
        ),
    ])
    .unwrap()
}

/// `(customer, region, valid_from, valid_to)` rows of the latest version.
async fn intervals(t: &Table) -> Vec<(String, String, String, Option<String>)> {
    let snap = t.latest().await.unwrap();
    let batches: Vec<RecordBatch> = snap
        .scan_dimension()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in batches {
        let c = b.column_by_name("customer").unwrap().as_string::<i32>();
        let r = b.column_by_name("region").unwrap().as_string::<i32>();
        let f = b
            .column_by_name("valid_from")
            .unwrap()
            .as_primitive::<Date32Type>();
        let to = b
            .column_by_name("valid_to")
            .unwrap()
            .as_primitive::<Date32Type>();
        for i in 0..b.num_rows() {
            out.push((
                c.value(i).to_string(),
                r.value(i).to_string(),
                logbook::dates::from_days(f.value(i)).to_string(),
                to.is_valid(i)
                    .then(|| logbook::dates::from_days(to.value(i)).to_string()),
            ));
        }
    }
    out
}

fn iv(c: &str, r: &str, from: &str, to: Option<&str>) -> (String, String, String, Option<String>) {
    (c.into(), r.into(), from.into(), to.map(Into::into))
}

#[tokio::test]
async fn a_move_closes_the_old_interval_and_reapplying_is_a_no_op() {
    let t = customers().await;
    t.apply_changes(
        date("2026-01-01"),
        &[states(&[("c-17", "Berlin"), ("c-04", "Hamburg")])],
        RunInfo::new("l1"),
    )
    .await
    .unwrap();
    let moved = t
        .apply_changes(
            date("2026-03-20"),
            &[states(&[("c-17", "Munich")])],
            RunInfo::new("l2"),
        )
        .await
        .unwrap();
    assert_eq!(moved.changed_keys, 1);
    assert_eq!(
        moved.affected,
        Some(DateRange {
            from: date("2026-03-20"),
            to: None
        })
    );
    assert_eq!(
        intervals(&t).await,
        vec![
            iv("c-04", "Hamburg", "2026-01-01", None),
            iv("c-17", "Berlin", "2026-01-01", Some("2026-03-20")),
            iv("c-17", "Munich", "2026-03-20", None),
        ]
    );
    let again = t
        .apply_changes(
            date("2026-03-20"),
            &[states(&[("c-17", "Munich")])],
            RunInfo::new("l3"),
        )
        .await
        .unwrap();
    assert_eq!(
        (again.changed_keys, again.version),
        (0, moved.version),
        "re-applying committed"
    );
    let last = t.history().await.unwrap().pop().unwrap();
    assert_eq!(last.operation, Operation::ApplyDimension);
    assert_eq!(last.affected, moved.affected);
}

#[tokio::test]
async fn a_back_dated_change_splits_the_covering_interval_and_keeps_later_ones() {
    let t = customers().await;
    t.apply_changes(
        date("2026-01-01"),
        &[states(&[("c-17", "Berlin")])],
        RunInfo::new("l1"),
    )
    .await
    .unwrap();
    t.apply_changes(
        date("2026-05-01"),
        &[states(&[("c-17", "Munich")])],
        RunInfo::new("l2"),
    )
    .await
    .unwrap();
    // Discovered later: the customer was in Potsdam from February to May.
    let c = t
        .apply_changes(
            date("2026-02-10"),
            &[states(&[("c-17", "Potsdam")])],
            RunInfo::new("l3"),
        )
        .await
        .unwrap();
    assert_eq!(
        c.affected,
        Some(DateRange {
            from: date("2026-02-10"),
            to: Some(date("2026-05-01"))
        })
    );
    assert_eq!(
        intervals(&t).await,
        vec![
            iv("c-17", "Berlin", "2026-01-01", Some("2026-02-10")),
            iv("c-17", "Potsdam", "2026-02-10", Some("2026-05-01")),
            iv("c-17", "Munich", "2026-05-01", None),
        ]
    );
    // A correction on the same effective date replaces the state in place.
    t.apply_changes(
        date("2026-02-10"),
        &[states(&[("c-17", "Leipzig")])],
        RunInfo::new("l4"),
    )
    .await
    .unwrap();
    assert_eq!(
        intervals(&t).await[1],
        iv("c-17", "Leipzig", "2026-02-10", Some("2026-05-01"))
    );
    // Before the first known state: a new interval up to the first one.
    t.apply_changes(
        date("2025-12-01"),
        &[states(&[("c-17", "Bonn")])],
        RunInfo::new("l5"),
    )
    .await
    .unwrap();
    assert_eq!(
        intervals(&t).await[0],
        iv("c-17", "Bonn", "2025-12-01", Some("2026-01-01"))
    );
}

#[tokio::test]
async fn deletes_and_full_snapshots() {
    let t = customers().await;
    t.apply_changes(
        date("2026-01-01"),
        &[states(&[("a", "X"), ("b", "Y"), ("c", "Z")])],
        RunInfo::new("l1"),
    )
    .await
    .unwrap();
    // Full state at March 1: b changed, c is gone, d appeared, a unchanged.
    let s = t
        .apply_snapshot(
            date("2026-03-01"),
            &[states(&[("a", "X"), ("b", "Y2"), ("d", "W")])],
            RunInfo::new("l2"),
        )
        .await
        .unwrap();
    assert_eq!(s.changed_keys, 3);
    assert_eq!(
        intervals(&t).await,
        vec![
            iv("a", "X", "2026-01-01", None),
            iv("b", "Y", "2026-01-01", Some("2026-03-01")),
            iv("b", "Y2", "2026-03-01", None),
            iv("c", "Z", "2026-01-01", Some("2026-03-01")),
            iv("d", "W", "2026-03-01", None),
        ]
    );
    let keys = RecordBatch::try_from_iter([(
        "customer",
        Arc::new(StringArray::from(vec!["a", "zz"])) as _,
    )])
    .unwrap();
    let del = t
        .apply_deletes(
            date("2026-04-01"),
            std::slice::from_ref(&keys),
            RunInfo::new("l3"),
        )
        .await
        .unwrap();
    assert_eq!(del.changed_keys, 1, "an unknown key is not a change");
    assert_eq!(
        intervals(&t).await[0],
        iv("a", "X", "2026-01-01", Some("2026-04-01"))
    );
    let again = t
        .apply_deletes(date("2026-04-01"), &[keys], RunInfo::new("l4"))
        .await
        .unwrap();
    assert_eq!(again.changed_keys, 0);
}

#[tokio::test]
async fn bad_changes_are_refused_and_nothing_is_committed() {
    let t = customers().await;
    let before = t.latest_version().await.unwrap();
    let err = t
        .apply_changes(
            date("2026-01-01"),
            &[states(&[("c-1", "A"), ("c-1", "B")])],
            RunInfo::new("l1"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::DimensionInvariant { key, .. } if key == "c-1"),
        "{err}"
    );
    let with_validity = RecordBatch::try_from_iter([
        ("customer", Arc::new(StringArray::from(vec!["c-1"])) as _),
        ("region", Arc::new(StringArray::from(vec!["A"])) as _),
        (
            "valid_from",
            Arc::new(arrow_array::Date32Array::from(vec![1])) as _,
        ),
    ])
    .unwrap();
    let err = t
        .apply_changes(date("2026-01-01"), &[with_validity], RunInfo::new("l2"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("valid_from") && err.to_string().contains("managed"),
        "{err}"
    );
    let null_key = RecordBatch::try_from_iter([
        (
            "customer",
            Arc::new(StringArray::from(vec![None::<&str>])) as _,
        ),
        ("region", Arc::new(StringArray::from(vec!["A"])) as _),
    ])
    .unwrap();
    let err = t
        .apply_changes(date("2026-01-01"), &[null_key], RunInfo::new("l3"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("customer"), "{err}");
    assert_eq!(t.latest_version().await.unwrap(), before);

    let facts = memory_table("orders").await;
    let err = facts
        .apply_changes(
            date("2026-01-01"),
            &[states(&[("a", "b")])],
            RunInfo::new("x"),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a dimension"), "{err}");
    let err = t
        .replace_partition(date("2026-01-01"), RunInfo::new("x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("dimension"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_dimension_changes_all_land() {
    let t = customers().await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let h = Table::open(t.location().clone(), "customers", options())
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let key = format!("k{i}");
            h.apply_changes(
                date("2026-01-01"),
                &[states(&[(&key, "R")])],
                RunInfo::new(format!("l{i}")),
            )
            .await
            .unwrap()
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().changed_keys, 1);
    }
    assert_eq!(
        intervals(&t).await.len(),
        6,
        "a change was lost in the race"
    );
}
