use std::sync::Arc;

use arrow_array::{Date32Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use logbook::{Error, ErrorKind, RunInfo, Table};

use crate::common::*;

/// A table whose files close every 3 rows, so a writer stages files early.
async fn small_files_table() -> Table {
    memory_table_with("orders", options().with_max_rows_per_file(3)).await
}

/// Write `bad` to a fresh writer for `d`; the write must fail and leave the
/// table exactly as it was, with no staged file behind after abort.
async fn refused(t: &Table, d: chrono::NaiveDate, bad: RecordBatch) -> Error {
    let before = t.latest_version().await.unwrap();
    let files_before = data_files(t).await;
    let mut w = t
        .replace_partition(d, RunInfo::new("bad-run"))
        .await
        .unwrap();
    w.write(&batch(d, 0..5, "good")).await.unwrap();
    // The good rows fill a file, stored in the background.
    data_files_once(t, |f| f.len() > files_before.len()).await;
    let err = w.write(&bad).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let closed = w.commit().await.unwrap_err();
    assert!(closed.to_string().contains("refused"), "{closed}");
    assert_eq!(
        t.latest_version().await.unwrap(),
        before,
        "something was committed"
    );
    assert_eq!(
        data_files(t).await,
        files_before,
        "staged files left behind"
    );
    err
}

#[tokio::test]
async fn rows_outside_the_date_are_refused_with_count_and_examples() {
    let t = small_files_table().await;
    let d = date("2026-03-15");
    let mut mixed = batch(d, 0..10, "x");
    let dates: Vec<i32> = (0..10)
        .map(|i| {
            if i % 3 == 0 {
                days(date("2026-03-16"))
            } else {
                days(d)
            }
        })
        .collect();
    let mut cols = mixed.columns().to_vec();
    cols[0] = Arc::new(Date32Array::from(dates));
    mixed = RecordBatch::try_new(mixed.schema(), cols).unwrap();
    let err = refused(&t, d, mixed).await;
    match &err {
        Error::RowsOutsidePartition {
            table,
            date,
            count,
            examples,
            ..
        } => {
            assert_eq!((table.as_str(), *date, *count), ("orders", d, 4));
            assert!(examples.contains("2026-03-16"), "{err}");
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(err.to_string().contains("orders") && err.to_string().contains("2026-03-15"));
}

#[tokio::test]
async fn nulls_in_the_partition_column_are_refused() {
    let t = small_files_table().await;
    let d = date("2026-03-15");
    let schema = Arc::new(Schema::new(vec![
        Field::new("date", DataType::Date32, true),
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let bad = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Date32Array::from(vec![Some(days(d)), None, None])),
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(StringArray::from(vec!["a", "b", "c"])),
        ],
    )
    .unwrap();
    let err = refused(&t, d, bad).await;
    assert!(
        matches!(err, Error::NullPartitionValue { count: 2, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn wrong_schemas_name_the_field_and_both_types() {
    let t = small_files_table().await;
    let d = date("2026-03-15");
    let wrong_type = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("date", DataType::Date32, false),
            Field::new("id", DataType::Int32, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Date32Array::from(vec![days(d)])),
            Arc::new(Int32Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["a"])),
        ],
    )
    .unwrap();
    let err = refused(&t, d, wrong_type).await;
    let msg = err.to_string();
    assert!(
        msg.contains("\"id\"") && msg.contains("Int32") && msg.contains("int64"),
        "{msg}"
    );

    let missing = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "date",
            DataType::Date32,
            false,
        )])),
        vec![Arc::new(Date32Array::from(vec![days(d)]))],
    )
    .unwrap();
    let msg = refused(&t, d, missing).await.to_string();
    assert!(msg.contains("\"id\"") && msg.contains("missing"), "{msg}");

    let mut extra = batch(d, 0..1, "x").columns().to_vec();
    extra.push(Arc::new(Int64Array::from(vec![9])));
    let mut fields: Vec<Field> = batch(d, 0..1, "x")
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("surprise", DataType::Int64, true));
    let extra = RecordBatch::try_new(Arc::new(Schema::new(fields)), extra).unwrap();
    let msg = refused(&t, d, extra).await.to_string();
    assert!(msg.contains("\"surprise\""), "{msg}");
}

#[tokio::test]
async fn aborting_deletes_staged_files_and_commits_nothing() {
    let t = memory_table_with("orders", options().with_max_rows_per_file(10)).await;
    let d = date("2026-03-15");
    replace(&t, d, 0..5, "kept", "r1").await;
    let committed = data_files(&t).await;
    let mut w = t.replace_partition(d, RunInfo::new("r2")).await.unwrap();
    w.write(&batch(d, 0..35, "dropped")).await.unwrap();
    assert!(
        data_files(&t).await.len() > committed.len(),
        "nothing was staged"
    );
    w.abort().await.unwrap();
    assert_eq!(data_files(&t).await, committed);
    assert_eq!(t.latest_version().await.unwrap(), 1);
    assert!(rows(&t.latest().await.unwrap(), d)
        .await
        .iter()
        .all(|(_, n)| n.starts_with("kept-")));
}

#[tokio::test]
async fn a_conflicting_writer_removes_its_staged_files() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    let mut slow = t.replace_partition(d, RunInfo::new("slow")).await.unwrap();
    slow.write(&batch(d, 0..5, "slow")).await.unwrap();
    let staged = slow.staging_dir().to_string();
    replace(&t, d, 0..5, "fast", "fast").await;
    let err = slow.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(
        err.to_string().contains("2026-03-15") && err.to_string().contains("version 1"),
        "{err}"
    );
    assert!(!data_files(&t).await.iter().any(|f| f.starts_with(&staged)));
}

#[tokio::test]
async fn names_with_nul_or_path_tricks_are_refused() {
    use logbook::{StorageLocation, TableSchema};
    let loc = StorageLocation::parse("memory://").unwrap();
    for name in ["a\0b", "..", "a/b", "a\\b", ""] {
        let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
        let err = Table::create(loc.clone(), name, schema, options())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), logbook::ErrorKind::InvalidInput, "{name:?}");
        assert!(err.to_string().contains("table name"), "{err}");
    }
    let t = memory_table("t").await;
    for run in ["r\0", "../x", "a b"] {
        let err = t
            .replace_partition(date("2026-03-15"), RunInfo::new(run))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("run id"), "{run:?}: {err}");
    }
    assert_eq!(t.latest_version().await.unwrap(), 0);
}
