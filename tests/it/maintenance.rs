//! Compaction, expiry and vacuum beside writers.

use std::sync::Arc;

use chrono::NaiveDate;
use logbook::clock::{Clock, ManualClock, SystemClock};
use logbook::lifecycle::{status, PartitionState};
use logbook::maintenance::{
    compact, expire, vacuum, CompactOptions, Keep, VacuumOptions, MIN_RETENTION_MS,
};
use logbook::{ErrorKind, Operation, RunInfo, StorageLocation, Table, TableSchema, Warehouse};
use object_store::memory::InMemory;

use crate::common::*;
use crate::counting_store::CountingStore;

/// A warehouse whose clock and file ages move together.
pub(crate) fn aged_warehouse() -> (Warehouse, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(SystemClock.now_millis()));
    let store = CountingStore::new(Arc::new(InMemory::new())).with_clock(clock.clone());
    let loc = StorageLocation::from_store(Arc::new(store), "wh", "memory://wh");
    let opts = options().with_clock(clock.clone());
    (Warehouse::new(loc, opts), clock)
}

/// The same warehouse, writing files of at most 2 rows.
pub(crate) fn tiny_files(wh: &Warehouse) -> Warehouse {
    wh.with_options(wh.options().clone().with_max_rows_per_file(2))
}

pub(crate) async fn small_files_table(wh: &Warehouse, dates: &[NaiveDate]) -> Table {
    let tiny = tiny_files(wh)
        .create_table("t", TableSchema::parse_spec("t", SPEC, "date").unwrap())
        .await
        .unwrap();
    for d in dates {
        replace(&tiny, *d, 0..100, "small", &format!("first-{d}")).await;
    }
    wh.table("t").await.unwrap()
}

/// The `(id, name)` rows of `d` in stored order.
async fn ordered_rows(t: &Table, d: NaiveDate) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for b in t.latest().await.unwrap().read_partition(d).await.unwrap() {
        let ids = b
            .column(1)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        let names = b
            .column(2)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        out.extend((0..b.num_rows()).map(|i| (ids.value(i), names.value(i).to_string())));
    }
    out
}

#[tokio::test]
async fn compaction_turns_50_small_files_into_1_with_the_same_rows_in_order() {
    let (wh, _) = aged_warehouse();
    let d = date("2026-03-15");
    let t = small_files_table(&wh, &[d]).await;
    let before = latest_partition(&t, d).await;
    assert_eq!(before.files.len(), 50);
    let rows_before = ordered_rows(&t, d).await;

    let report = compact(&t, &CompactOptions::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(
        (
            report.partitions_compacted,
            report.files_before,
            report.files_after
        ),
        (1, 50, 1)
    );
    let after = latest_partition(&t, d).await;
    assert_eq!(after.files.len(), 1);
    assert_eq!(
        ordered_rows(&t, d).await,
        rows_before,
        "same rows, same order"
    );
    // Data unchanged: same version and run, so nothing downstream is stale.
    assert_eq!((after.version, &after.run), (before.version, &before.run));
    assert_eq!(
        t.latest().await.unwrap().entry().operation,
        Operation::Compact
    );
    let s = status(&wh, "t", None, d).await.unwrap();
    assert_eq!(s.dates[0].state, PartitionState::Complete);
    // Nothing left to do: a second run commits nothing.
    let again = compact(&t, &CompactOptions::default(), &|_| {})
        .await
        .unwrap();
    assert!(again.commits.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replace_during_compaction_wins_and_the_old_rows_never_come_back() {
    let (wh, _) = aged_warehouse();
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    let d2_rows = ordered_rows(&t, d2).await;
    // A replace of d2 that started before the compaction commits after it.
    let mut early = t
        .replace_partition(d2, RunInfo::new("early"))
        .await
        .unwrap();
    early.write(&batch(d2, 0..3, "early")).await.unwrap();

    // While the compaction is between rewriting d1 and committing, a
    // replace of d1 lands.
    let racer = t.clone();
    let progress = move |p: logbook::maintenance::CompactProgress| {
        if p.partitions_done == 1 {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    replace(&racer, d1, 0..7, "fresh", "fresh-d1").await;
                })
            });
        }
    };
    let files_before = data_files(&t).await.len();
    let report = compact(&t, &CompactOptions::default(), &progress)
        .await
        .unwrap();
    assert_eq!(report.dropped, [d1], "d1's compaction is dropped");
    assert_eq!(report.partitions_compacted, 1);
    let snap = t.latest().await.unwrap();
    assert_eq!(
        rows(&snap, d1).await,
        (0..7)
            .map(|i| (i, format!("fresh-{i}")))
            .collect::<Vec<_>>()
    );
    assert_eq!(snap.partition(d2).await.unwrap().unwrap().files.len(), 1);
    assert_eq!(ordered_rows(&t, d2).await, d2_rows);
    // The dropped rewrite's files were deleted: only d1's fresh file and
    // d2's compacted file were added.
    assert_eq!(data_files(&t).await.len(), files_before + 2);

    early.commit().await.unwrap();
    assert_eq!(
        rows(&t.latest().await.unwrap(), d2).await.len(),
        3,
        "the early replace still commits"
    );
}

#[tokio::test]
async fn vacuum_after_expire_deletes_exactly_the_unreferenced_files() {
    let (wh, clock) = aged_warehouse();
    let d = date("2026-03-15");
    let t = small_files_table(&wh, &[d]).await; // v1: 50 files
    let v1_files = data_files(&t).await;
    let v2 = replace(&t, d, 0..4, "second", "second").await; // 2 files
    let v2_files: Vec<String> = data_files(&t)
        .await
        .into_iter()
        .filter(|f| !v1_files.contains(f))
        .collect();
    replace(&t, d, 0..2, "third", "third").await; // v3: 1 file
    let report = expire(&t, Keep::Last(2)).await.unwrap(); // keeps v2, v3 (and the expire commit)
    assert_eq!(report.oldest, v2);
    // A file stays for the retention after the expiry that hid it.
    clock.advance(8 * 24 * MIN_RETENTION_MS);

    // An abandoned write (one closed file), younger than the retention: it must survive.
    let tiny = tiny_files(&wh).table("t").await.unwrap();
    let mut abandoned = tiny
        .replace_partition(date("2026-03-16"), RunInfo::new("crashed"))
        .await
        .unwrap();
    abandoned
        .write(&batch(date("2026-03-16"), 0..3, "x"))
        .await
        .unwrap();
    drop(abandoned);
    let abandoned = |f: &String| f.contains("2026-03-16");
    let abandoned_file: Vec<String> = data_files_once(&t, |f| f.iter().any(abandoned))
        .await
        .into_iter()
        .filter(abandoned)
        .collect();
    assert_eq!(abandoned_file.len(), 1);
    clock.advance(MIN_RETENTION_MS); // its heartbeat stops: abandoned, yet young

    let short = vacuum(
        &t,
        VacuumOptions {
            retention_ms: 60_000,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        short.unwrap_err().kind(),
        ErrorKind::InvalidInput,
        "under an hour needs force"
    );

    let dry = vacuum(
        &t,
        VacuumOptions {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let data_deleted: Vec<&String> = dry
        .deleted
        .iter()
        .filter(|p| p.starts_with("data/"))
        .collect();
    let mut expected: Vec<&String> = v1_files.iter().collect();
    expected.sort();
    assert_eq!(data_deleted, expected, "exactly v1's files");
    assert!(
        dry.deleted
            .iter()
            .any(|p| p.starts_with("_logbook/manifests/")),
        "expired manifests go too"
    );
    assert!(
        !dry.deleted.contains(&abandoned_file[0]),
        "younger than the retention"
    );
    assert_eq!(
        data_files(&t).await.len(),
        v1_files.len() + v2_files.len() + 1 + 1,
        "a dry run deletes nothing"
    );

    let done = vacuum(&t, VacuumOptions::default()).await.unwrap();
    assert_eq!(done.deleted, dry.deleted);
    assert_eq!(
        t.latest().await.unwrap().entry().operation,
        Operation::Vacuum
    );
    // Time travel to a retained version still reads; an expired one is refused.
    assert_eq!(rows(&t.at_version(v2).await.unwrap(), d).await.len(), 4);
    assert_eq!(
        t.at_version(v2 - 1).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 2);
    let remaining = data_files(&t).await;
    assert!(v2_files.iter().all(|f| remaining.contains(f)));
    assert!(remaining.contains(&abandoned_file[0]));
    assert_eq!(remaining.len(), v2_files.len() + 2);
    // History stays readable after expiry.
    assert!(t.history().await.unwrap().len() > 4);
}

#[tokio::test]
async fn vacuum_keeps_the_files_of_live_stages_and_running_writes() {
    let (wh, clock) = aged_warehouse();
    let (d, d2) = (date("2026-03-15"), date("2026-03-16"));
    let t = small_files_table(&wh, &[d]).await;
    let tiny = tiny_files(&wh).table("t").await.unwrap();
    let stage = tiny.stage("s").await.unwrap();
    let mut w = stage
        .replace_partition(d, RunInfo::new("staged"))
        .await
        .unwrap();
    w.write(&batch(d, 0..3, "staged")).await.unwrap();
    w.commit().await.unwrap();
    let mut running = tiny
        .replace_partition(d2, RunInfo::new("slow"))
        .await
        .unwrap();
    running.write(&batch(d2, 0..3, "slow")).await.unwrap();
    let running_dir = format!("date={d2}/");
    let before_vacuum = data_files_once(&t, |f| f.iter().any(|f| f.contains(&running_dir))).await;
    // Everything is now 8 days old; the running write's heartbeat is fresh.
    clock.advance(8 * 24 * MIN_RETENTION_MS);
    running.write(&batch(d2, 3..4, "slow")).await.unwrap();
    let unpublished: Vec<&String> = before_vacuum
        .iter()
        .filter(|f| !f.contains("first"))
        .collect();
    assert!(
        unpublished.len() >= 3,
        "staged and running files exist: {before_vacuum:?}"
    );

    // A replaced version of d makes its 50 old files garbage, to show vacuum
    // does delete old unreferenced files here.
    replace(&t, d, 0..1, "newer", "newer").await;
    expire(&t, Keep::Last(1)).await.unwrap();
    clock.advance(8 * 24 * MIN_RETENTION_MS);
    running.write(&batch(d2, 4..5, "slow")).await.unwrap();
    let report = vacuum(&t, VacuumOptions::default()).await.unwrap();
    assert!(
        report
            .deleted
            .iter()
            .filter(|p| p.starts_with("data/"))
            .count()
            >= 50
    );
    let after = data_files(&t).await;
    let staged: Vec<String> = stage.partitions().await.unwrap()[0]
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    let running_files: Vec<&String> = before_vacuum
        .iter()
        .filter(|f| f.contains(&format!("date={d2}/")))
        .collect();
    assert!(staged.len() == 2 && !running_files.is_empty());
    for f in staged.iter().chain(running_files.iter().copied()) {
        assert!(after.contains(f), "{f}: 16 days old but live, yet deleted");
    }
    stage.publish(true).await.unwrap();
    running.commit().await.unwrap();
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 3);
    assert_eq!(rows(&t.latest().await.unwrap(), d2).await.len(), 5);
}

#[tokio::test]
async fn a_long_compaction_commits_its_progress_every_n_partitions() {
    let (wh, _) = aged_warehouse();
    let dates = [date("2026-03-01"), date("2026-03-02"), date("2026-03-03")];
    let t = small_files_table(&wh, &dates).await;
    let before = t.latest_version().await.unwrap();
    let options = CompactOptions {
        commit_every: 2,
        ..Default::default()
    };
    let seen = std::sync::Mutex::new(Vec::new());
    let report = compact(&t, &options, &|p| {
        seen.lock().unwrap().push(p.partitions_done)
    })
    .await
    .unwrap();
    assert_eq!(
        report.commits,
        vec![before + 1, before + 2],
        "2 partitions, then 1"
    );
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);
    let first = t.at_version(before + 1).await.unwrap();
    assert_eq!(
        first
            .partition(dates[0])
            .await
            .unwrap()
            .unwrap()
            .files
            .len(),
        1
    );
    assert_eq!(
        first
            .partition(dates[2])
            .await
            .unwrap()
            .unwrap()
            .files
            .len(),
        50,
        "not yet"
    );
    for d in dates {
        assert_eq!(
            t.latest()
                .await
                .unwrap()
                .partition(d)
                .await
                .unwrap()
                .unwrap()
                .files
                .len(),
            1
        );
    }
}
