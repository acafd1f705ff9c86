//! The same protocol on a real directory: put-if-absent is a hard link there.
//! And data files cut short under a reader, on a directory (read on the
//! scan's thread) and through stores.

use std::sync::Arc;

use logbook::{ErrorKind, RunInfo, Warehouse};
use object_store::ObjectStoreExt;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_table_replaces_and_races_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let wh = Warehouse::new(
        logbook::StorageLocation::parse(dir.path().to_str().unwrap()).unwrap(),
        options(),
    );
    let schema = logbook::TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = wh.create_table("orders", schema).await.unwrap();
    let d = date("2026-03-15");
    replace(&t, d, 0..10, "one", "r1").await;
    replace(&t, d, 0..4, "two", "r2").await;
    assert!(dir
        .path()
        .join("orders/_logbook/log/00000000000000000002.json")
        .is_file());
    let staged: Vec<_> = std::fs::read_dir(dir.path().join("orders/data/date=2026-03-15"))
        .unwrap()
        .collect();
    assert_eq!(staged.len(), 2, "one staged directory per run");

    let reopened = wh.table("orders").await.unwrap();
    assert_eq!(rows(&reopened.latest().await.unwrap(), d).await.len(), 4);

    let mut a = t.replace_partition(d, RunInfo::new("a")).await.unwrap();
    let mut b = reopened
        .replace_partition(d, RunInfo::new("b"))
        .await
        .unwrap();
    a.write(&batch(d, 0..1, "a")).await.unwrap();
    b.write(&batch(d, 0..2, "b")).await.unwrap();
    let (ra, rb) = tokio::join!(a.commit(), b.commit());
    let kinds = [
        ra.as_ref().err().map(|e| e.kind()),
        rb.as_ref().err().map(|e| e.kind()),
    ];
    assert!(
        kinds.contains(&None) && kinds.contains(&Some(ErrorKind::Conflict)),
        "{ra:?} {rb:?}"
    );
    assert_eq!(t.latest_version().await.unwrap(), 3);
}

/// Deleting a file on a local directory removes the directories it leaves
/// empty: object_store keeps them, and every `status` walks `running/` and
/// `data/`, so three years of finished writes made it walk thousands of
/// empty directories (BENCHMARKS.md, "Web UI").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_files_leave_no_empty_directories_behind() {
    use logbook::maintenance::{expire, vacuum, Keep};
    let dir = tempfile::tempdir().unwrap();
    let wh = Warehouse::new(
        logbook::StorageLocation::parse(dir.path().to_str().unwrap()).unwrap(),
        options().with_clock(std::sync::Arc::new(logbook::clock::SystemClock)),
    );
    let schema = logbook::TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = wh.create_table("orders", schema).await.unwrap();
    let (d, other) = (date("2026-03-15"), date("2026-03-16"));
    replace(&t, d, 0..10, "one", "r1").await;
    replace(&t, other, 0..3, "one", "r2").await;
    replace(&t, d, 0..4, "two", "r3").await;
    let running = dir.path().join("orders/_logbook/running");
    let left: Vec<_> = std::fs::read_dir(&running)
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "finished writes left {left:?}");

    expire(&t, Keep::Last(1)).await.unwrap();
    let report = vacuum(&t, sweep()).await.unwrap();
    assert!(!report.deleted.is_empty());
    let writes = |date: &str| {
        std::fs::read_dir(dir.path().join(format!("orders/data/date={date}")))
            .unwrap()
            .count()
    };
    assert_eq!(
        writes("2026-03-15"),
        1,
        "the replaced write's directory is gone"
    );
    assert_eq!(writes("2026-03-16"), 1, "the other date's write is kept");
    // Writing into a date whose directories were removed works, and reads.
    replace(&t, d, 0..2, "three", "r4").await;
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 2);
    assert_eq!(rows(&t.latest().await.unwrap(), other).await.len(), 3);
}

/// A data file cut short behind logbook's back (a partial copy, a disk
/// fault) fails a read as corrupt, naming the file and `logbook check`:
/// not transient, which would have a caller retry it forever. Read on the
/// scan's thread from a local directory, and through a store that answers
/// a range past the end with fewer bytes (the in-memory one) alike.
#[tokio::test]
async fn a_data_file_cut_short_reads_as_corrupt_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for uri in [dir.path().to_str().unwrap(), "memory://"] {
        let wh = Warehouse::new(logbook::StorageLocation::parse(uri).unwrap(), options());
        let schema = logbook::TableSchema::parse_spec("orders", SPEC, "date").unwrap();
        let t = wh.create_table("orders", schema).await.unwrap();
        let d = date("2026-03-15");
        replace(&t, d, 0..1000, "one", "r1").await;
        let snap = t.latest().await.unwrap();
        let file = snap.partitions().await.unwrap()[0].files[0].path.clone();
        let (store, path) = (t.location().store().clone(), t.location().path(&file));
        let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
        let cut = bytes.slice(..bytes.len() - 100);
        store.put(&path, cut.into()).await.unwrap();

        let err = snap.read_partition(d).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{uri}: {err}");
        let text = err.to_string();
        assert!(text.contains(&file), "{uri}: {text}");
        assert!(text.contains("logbook check"), "{uri}: {text}");
    }
}

/// Through a store that answers a range past the end with the bytes it has
/// and leaves `get_ranges` to object_store (as the HTTP stores do), a read
/// of several ranges of a file cut short is an error naming what the store
/// holds, not a panic slicing past the end (object_store's coalescing
/// slices the bytes returned without checking their length).
#[tokio::test]
async fn several_ranges_of_a_file_cut_short_are_an_error_through_a_store() {
    use parquet::arrow::async_reader::AsyncFileReader;
    let inner = Arc::new(object_store::memory::InMemory::new());
    let store: Arc<dyn object_store::ObjectStore> =
        Arc::new(crate::counting_store::CountingStore::new(inner));
    let path = object_store::path::Path::from("t/data/f.parquet");
    store.put(&path, vec![7u8; 1000].into()).await.unwrap();
    let mut r = logbook::reader::ObjectReader::new(store, path, 2000);
    let err = r
        .get_byte_ranges(vec![0..10, 1500..1600])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("holds 1000 bytes of the 2000"),
        "{err}"
    );
}
