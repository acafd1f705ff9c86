use logbook::{ErrorKind, RunInfo};

use crate::common::*;

#[tokio::test]
async fn replacing_a_date_twice_keeps_only_the_second_run() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    let other = date("2026-03-16");
    replace(&t, other, 0..5, "other", "r0").await;
    let v1 = replace(&t, d, 0..100, "first", "r1").await;
    let v2 = replace(&t, d, 50..80, "second", "r2").await;
    assert_eq!((v1, v2), (2, 3));

    let snap = t.latest().await.unwrap();
    let parts = snap.partitions().await.unwrap();
    assert_eq!(parts.len(), 2, "one partition per date");
    let p = snap.partition(d).await.unwrap().unwrap();
    assert_eq!((p.rows, p.version), (30, 3));
    assert_eq!(p.run.unwrap().run_id, "r2");
    let got = rows(&snap, d).await;
    assert_eq!(got.len(), 30);
    assert!(
        got.iter().all(|(_, n)| n.starts_with("second-")),
        "first run's rows leaked"
    );
    assert_eq!(
        rows(&snap, other).await.len(),
        5,
        "the other date was touched"
    );
}

#[tokio::test]
async fn an_empty_write_commits_an_empty_partition() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    replace(&t, d, 0..10, "x", "r1").await;
    let w = t.replace_partition(d, RunInfo::new("r2")).await.unwrap();
    w.commit().await.unwrap();
    let snap = t.latest().await.unwrap();
    let p = snap
        .partition(d)
        .await
        .unwrap()
        .expect("an empty partition is still a partition");
    assert_eq!((p.rows, p.files.len()), (0, 0));
    assert!(rows(&snap, d).await.is_empty());
    assert!(snap.partition(date("2026-03-14")).await.unwrap().is_none());
}

#[tokio::test]
async fn resubmitting_a_committed_run_id_returns_the_existing_version() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    let v = replace(&t, d, 0..10, "x", "run-7").await;
    let mut w = t.replace_partition(d, RunInfo::new("run-7")).await.unwrap();
    w.write(&batch(d, 0..10, "again")).await.unwrap();
    let staged = w.staging_dir().to_string();
    let info = w.commit().await.unwrap();
    assert!(info.already_committed);
    assert_eq!(info.version, v);
    assert_eq!(
        t.latest_version().await.unwrap(),
        v,
        "a second commit was made"
    );
    let files = data_files(&t).await;
    assert!(
        !files.iter().any(|f| f.starts_with(&staged)),
        "duplicate's staged files kept: {files:?}"
    );
    assert!(rows(&t.latest().await.unwrap(), d)
        .await
        .iter()
        .all(|(_, n)| n.starts_with("x-")));
}

#[tokio::test]
async fn files_roll_at_the_row_limit_and_rows_keep_their_order() {
    let t = memory_table_with("orders", options().with_max_rows_per_file(300)).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("r")).await.unwrap();
    for start in (0..1000).step_by(250) {
        w.write(&batch(d, start..start + 250, "x")).await.unwrap();
    }
    w.commit().await.unwrap();
    let snap = t.latest().await.unwrap();
    let p = snap.partition(d).await.unwrap().unwrap();
    assert_eq!(p.files.len(), 4);
    assert_eq!(
        p.files.iter().map(|f| f.rows).collect::<Vec<_>>(),
        vec![300, 300, 300, 100]
    );
    let ids: Vec<i64> = snap
        .read_partition(d)
        .await
        .unwrap()
        .iter()
        .flat_map(|b| {
            b.column(1)
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
}

#[tokio::test]
async fn opening_a_missing_table_or_creating_one_twice_is_a_clear_error() {
    let wh = logbook::Warehouse::open("memory://").unwrap();
    let e = wh.table("nope").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("nope"), "{e}");
    let schema = logbook::TableSchema::parse_spec("t", SPEC, "date").unwrap();
    wh.create_table("t", schema.clone()).await.unwrap();
    let e = wh.create_table("t", schema).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert_eq!(wh.list_tables().await.unwrap(), vec!["t"]);
    let e = wh.table("../etc").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_late_retry_of_a_superseded_run_does_not_overwrite_the_newer_run() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    let v1 = replace(&t, d, 0..10, "old", "run-1").await;
    replace(&t, d, 0..4, "new", "run-2").await;
    // run-1's orchestrator retries after a timeout, not knowing it landed.
    let mut w = t.replace_partition(d, RunInfo::new("run-1")).await.unwrap();
    w.write(&batch(d, 0..10, "old")).await.unwrap();
    let info = w.commit().await.unwrap();
    assert_eq!((info.version, info.already_committed), (v1, true));
    let got = rows(&t.latest().await.unwrap(), d).await;
    assert!(
        got.len() == 4 && got.iter().all(|(_, n)| n.starts_with("new-")),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_date_remembers_a_bounded_window_of_superseded_runs() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    for i in 0..(logbook::format::RUN_RETRY_WINDOW + 5) {
        replace(&t, d, 0..1, "x", &format!("run-{i}")).await;
    }
    let p = latest_partition(&t, d).await;
    assert_eq!(p.earlier_runs.len(), logbook::format::RUN_RETRY_WINDOW);
    // 21 runs: the current one, and the 16 before it (run-4..run-19).
    assert_eq!(p.version_written_by("run-20"), Some(21));
    assert_eq!(p.version_written_by("run-4"), Some(5));
    assert_eq!(p.version_written_by("run-3"), None, "older than the window");
}

#[tokio::test]
async fn a_store_without_put_if_absent_is_refused_before_anything_is_committed() {
    use crate::fault_store::FaultStore;
    use logbook::{StorageLocation, Table, TableSchema};
    let store = FaultStore::new(std::sync::Arc::new(object_store::memory::InMemory::new()))
        .ignoring_put_if_absent();
    let loc =
        StorageLocation::from_store(std::sync::Arc::new(store.clone()), "t", "memory://lying");
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let err = Table::create(loc.clone(), "t", schema, options())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let msg = err.to_string();
    assert!(
        msg.contains("memory://lying") && msg.contains("put-if-absent"),
        "{msg}"
    );
    assert_eq!(
        Table::open(loc, "t", options()).await.unwrap_err().kind(),
        ErrorKind::NotFound,
        "nothing was created"
    );
}

/// The put-if-absent probe's first create landing with its answer lost
/// (the client retried and met its own object: `AlreadyExists`) is not a
/// failure: the probe's path is its own. The soak's set-up met exactly
/// this behind its 503 proxy.
#[tokio::test]
async fn a_probe_whose_first_create_landed_unanswered_passes() {
    use crate::fault_store::{Fault, FaultStore};
    use logbook::{StorageLocation, Table, TableSchema};
    let store = FaultStore::new(std::sync::Arc::new(object_store::memory::InMemory::new()));
    store.fail_next_create_under("t/_logbook/probe-", Fault::Exists);
    let loc = StorageLocation::from_store(std::sync::Arc::new(store.clone()), "t", "memory://t");
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = Table::create(loc, "t", schema, options()).await.unwrap();
    replace(&t, date("2026-03-15"), 0..3, "x", "r").await;
    assert_eq!(latest_partition(&t, date("2026-03-15")).await.rows, 3);
}

/// Every data file carries the page index (column and offset indexes), so
/// a reader can skip pages by their bounds (issue #18's pruning builds on
/// it): required here, a file without one fails to parse.
#[tokio::test]
async fn data_files_carry_the_page_index() {
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    use parquet::file::page_index::column_index::ColumnIndexMetaData;
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    replace(&t, d, 0..1000, "x", "r").await;
    for file in &latest_partition(&t, d).await.files {
        let bytes = object_bytes(&t, &file.path).await;
        let meta = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", file.path));
        let columns = meta.row_group(0).num_columns();
        let index = meta.column_index().expect("a column index");
        assert_eq!(index[0].len(), columns, "{}", file.path);
        // Page bounds for every column (`NONE`: a location without bounds).
        for (c, column) in index[0].iter().enumerate() {
            assert!(
                !matches!(column, ColumnIndexMetaData::NONE),
                "{}: column {c} has no page bounds",
                file.path
            );
        }
        let offsets = meta.offset_index().expect("an offset index");
        assert_eq!(offsets[0].len(), columns, "{}", file.path);
    }
}

/// Files roll at the target size: the rows a file holds back before
/// choosing its dictionaries (counted at their size in memory, larger than
/// encoded) do not close it early.
#[tokio::test]
async fn files_roll_at_the_target_size() {
    let target = 256 << 10;
    let t = memory_table_with("orders", options().with_target_file_size(target)).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("r")).await.unwrap();
    for start in (0..200_000).step_by(4096) {
        w.write(&batch(d, start..start + 4096, "x")).await.unwrap();
    }
    w.commit().await.unwrap();
    let p = latest_partition(&t, d).await;
    let (last, full) = p.files.split_last().unwrap();
    assert!(full.len() >= 2, "{} files", p.files.len());
    for f in full {
        // Parquet's size estimates of the pages in progress run ahead of
        // their final encoded size, so files close somewhat below it.
        assert!(
            f.size as usize >= target / 2,
            "{}: {} bytes",
            f.path,
            f.size
        );
    }
    assert!(last.size > 0);
}

/// Table `t` on a fault-injecting store, with `options`.
async fn faulty_table(
    options: logbook::TableOptions,
) -> (crate::fault_store::FaultStore, logbook::Table) {
    use logbook::{StorageLocation, Table, TableSchema};
    let store = crate::fault_store::FaultStore::new(std::sync::Arc::new(
        object_store::memory::InMemory::new(),
    ));
    let loc =
        StorageLocation::from_store(std::sync::Arc::new(store.clone()), "t", "memory://faulty");
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = Table::create(loc, "t", schema, options).await.unwrap();
    (store, t)
}

/// A full file is stored (its upload completed) in the background while
/// the next file is written: the encoders do not wait for storage between
/// files. The files are still listed in order, each whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_file_is_written_while_the_last_one_is_stored() {
    let (store, t) = faulty_table(options().with_max_rows_per_file(100)).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("r1")).await.unwrap();
    let gate = store.hold_data_puts();
    // Fills the first file, which closes, and writes half the second.
    let wrote = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        w.write(&batch(d, 0..150, "x")),
    )
    .await;
    assert!(
        wrote.is_ok(),
        "the second file waited for the first one's upload"
    );
    wrote.unwrap().unwrap();
    gate.add_permits(100);
    w.write(&batch(d, 150..250, "x")).await.unwrap();
    w.commit().await.unwrap();
    let p = latest_partition(&t, d).await;
    let sizes: Vec<u64> = p.files.iter().map(|f| f.rows).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let names: Vec<&str> = p
        .files
        .iter()
        .map(|f| &f.path[f.path.len() - 18..])
        .collect();
    assert_eq!(
        names,
        [
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet"
        ]
    );
    let ids: Vec<i64> = rows(&t.latest().await.unwrap(), d)
        .await
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(ids, (0..250).collect::<Vec<_>>());
}

/// A file that fails to close in the background fails the commit, and the
/// files written before and after it are deleted with it: nothing staged
/// is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_fails_to_close_leaves_no_staged_files() {
    let (store, t) = faulty_table(options().with_max_rows_per_file(2)).await;
    let d = date("2026-03-15");
    store.fail_data_put(2);
    let mut w = t.replace_partition(d, RunInfo::new("r1")).await.unwrap();
    // Three files: the first stored, the second failing, the third open.
    w.write(&batch(d, 0..5, "x")).await.unwrap();
    let e = w.commit().await.unwrap_err();
    assert!(e.to_string().contains("part-00001"), "{e}");
    assert!(latest_partition_opt(&t, d).await.is_none());
    assert_eq!(
        data_files(&t).await,
        Vec::<String>::new(),
        "staged files left behind"
    );
}

/// A writer back from a long pause waits for its file still closing, then
/// checks its files before going on: a write dropped during that wait (a
/// timeout around it) leaves the writer unable to commit unchecked files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_while_its_files_are_checked_cannot_be_committed() {
    use logbook::clock::ManualClock;
    use logbook::maintenance::MIN_RETENTION_MS;
    let clock = std::sync::Arc::new(ManualClock::new(1_700_000_000_000));
    let options = options()
        .with_clock(clock.clone())
        .with_max_rows_per_file(2);
    let (store, t) = faulty_table(options).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("r1")).await.unwrap();
    let gate = store.hold_data_puts();
    // The first file fills and closes in the background, held.
    w.write(&batch(d, 0..2, "x")).await.unwrap();
    clock.advance(2 * MIN_RETENTION_MS);
    let one_row = batch(d, 2..3, "x");
    let dropped = tokio::time::timeout(std::time::Duration::from_millis(200), w.write(&one_row));
    assert!(dropped.await.is_err(), "the check waited for the held file");
    gate.add_permits(100);
    let e = w.commit().await.unwrap_err();
    assert!(e.to_string().contains("abort it and start again"), "{e}");
    assert!(latest_partition_opt(&t, d).await.is_none());
}

/// A write dropped midway (a timeout around it, a cancelled task) may have
/// sent part of its rows to the encoders: the writer must not commit
/// without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_midway_cannot_be_committed() {
    // Files of 50 rows: the write is dropped while a full file is being
    // finished, after it left the writer and before it was recorded.
    let t = memory_table_with("orders", options().with_max_rows_per_file(50)).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("r1")).await.unwrap();
    w.write(&batch(d, 0..10, "first")).await.unwrap();
    let big = batch(d, 10..20_010, "big");
    let dropped = tokio::time::timeout(std::time::Duration::ZERO, w.write(&big)).await;
    assert!(dropped.is_err(), "the write was still in progress");
    let e = w.commit().await.unwrap_err();
    assert!(e.to_string().contains("interrupted"), "{e}");
    assert!(latest_partition_opt(&t, d).await.is_none());
}
