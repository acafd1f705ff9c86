//! What vacuum must never delete: the files of a rewrite in progress, of a
//! writer that shares its run id with another, of a version superseded
//! within the retention; and what a writer that stalled past the retention
//! must do before committing.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::NaiveDate;
use logbook::lifecycle::{check, CheckDepth};
use logbook::maintenance::{
    compact, expire, vacuum, CompactOptions, CompactProgress, Keep, VacuumOptions, MIN_RETENTION_MS,
};
use logbook::{ErrorKind, RunInfo, Table};

use crate::common::*;
use crate::maintenance::{aged_warehouse, small_files_table, tiny_files};

const HOUR: i64 = MIN_RETENTION_MS;

/// The shortest retention vacuum allows without force.
fn one_hour() -> VacuumOptions {
    VacuumOptions {
        retention_ms: HOUR,
        ..Default::default()
    }
}

/// Table `t`, writing files of at most 2 rows.
async fn tiny_table(wh: &logbook::Warehouse) -> Table {
    let schema = logbook::TableSchema::parse_spec("t", SPEC, "date").unwrap();
    tiny_files(wh).create_table("t", schema).await.unwrap()
}

/// The files of `d`'s partition now.
async fn partition_files(t: &Table, d: NaiveDate) -> Vec<String> {
    let files = latest_partition(t, d).await.files;
    files.into_iter().map(|f| f.path).collect()
}

/// `files`, unreferenced since just now, survive a vacuum with the default
/// retention and are gone after one more retention.
async fn assert_kept_for_one_retention(
    t: &Table,
    clock: &logbook::clock::ManualClock,
    files: &[String],
    why: &str,
) {
    vacuum(t, VacuumOptions::default()).await.unwrap();
    let now = data_files(t).await;
    assert!(files.iter().all(|f| now.contains(f)), "{why}, yet deleted");
    clock.advance(8 * 24 * HOUR);
    vacuum(t, VacuumOptions::default()).await.unwrap();
    let now = data_files(t).await;
    assert!(
        files.iter().all(|f| !now.contains(f)),
        "{why}: kept too long"
    );
}

async fn assert_whole(t: &Table, what: &str) {
    let report = check(t, &t.latest().await.unwrap(), CheckDepth::Full)
        .await
        .unwrap();
    assert!(report.problems.is_empty(), "{what}: {:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacuum_during_a_compaction_keeps_the_files_it_is_writing() {
    let (wh, clock) = aged_warehouse();
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    let (vacuumed, ticking) = (t.clone(), clock.clone());
    // d1 is rewritten; two hours pass; d2 is rewritten (the compaction's
    // marker is refreshed); then, before the commit, a vacuum runs with
    // the shortest retention: d1's rewritten files are two hours old and
    // referenced by nothing yet.
    let progress = move |p: CompactProgress| {
        if p.partitions_done == 1 {
            ticking.advance(2 * HOUR);
        }
        if p.partitions_done == 2 {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    vacuum(&vacuumed, one_hour()).await.unwrap();
                })
            });
        }
    };
    let options = CompactOptions {
        parallelism: 1,
        ..Default::default()
    };
    let report = compact(&t, &options, &progress).await.unwrap();
    assert_eq!(report.partitions_compacted, 2);
    assert_whole(&t, "after the compaction").await;
}

/// A compaction of two partitions that stalls for two hours once `done`
/// of them are rewritten (its marker not refreshed), while a vacuum takes
/// the files it wrote, fails instead of committing files that are gone,
/// and leaves the table whole.
async fn assert_stalled_compaction_refuses_to_commit(done: usize) {
    let (wh, clock) = aged_warehouse();
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    let before = partition_files(&t, d1).await;
    let (vacuumed, ticking) = (t.clone(), clock.clone());
    let progress = move |p: CompactProgress| {
        if p.partitions_done == done {
            ticking.advance(2 * HOUR);
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let report = vacuum(&vacuumed, one_hour()).await.unwrap();
                    assert!(!report.deleted.is_empty(), "rewritten files went");
                })
            });
        }
    };
    let options = CompactOptions {
        parallelism: 1,
        ..Default::default()
    };
    let err = compact(&t, &options, &progress).await.unwrap_err();
    assert_refused(&t, &err, d1, &before).await;
}

/// A compaction refused (`err`: run it again) committed nothing: `d1`
/// still has the files it had `before`, and the table is whole.
async fn assert_refused(t: &Table, err: &logbook::Error, d1: NaiveDate, before: &[String]) {
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(err.to_string().contains("run it again"), "{err}");
    assert_eq!(partition_files(t, d1).await, before, "nothing committed");
    assert_whole(t, "after the refused compaction").await;
}

/// The pause after every rewrite, just before the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_stalled_past_the_retention_refuses_to_commit_vacuumed_files() {
    assert_stalled_compaction_refuses_to_commit(2).await;
}

/// The pause between two partitions' rewrites: the second refreshes the
/// marker, but the first's files went meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_that_stalled_between_partitions_refuses_to_commit_vacuumed_files() {
    assert_stalled_compaction_refuses_to_commit(1).await;
}

/// A compaction that lost a file of its second partition while it stalled
/// says so: the error names that partition and that file, not the first
/// one the compaction planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_compaction_names_the_partition_whose_file_went() {
    let (wh, clock) = aged_warehouse();
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    let before = data_files(&t).await;
    let (lost, ticking) = (t.clone(), clock.clone());
    let taken = Arc::new(std::sync::Mutex::new(Vec::new()));
    let noted = taken.clone();
    // Both partitions are rewritten; then two hours pass and d2's new
    // files go (as a vacuum would take them).
    let progress = move |p: CompactProgress| {
        if p.partitions_done == 2 {
            ticking.advance(2 * HOUR);
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    use object_store::ObjectStoreExt;
                    let new: Vec<String> = data_files(&lost)
                        .await
                        .into_iter()
                        .filter(|f| !before.contains(f) && f.contains("date=2026-03-02"))
                        .collect();
                    assert!(!new.is_empty(), "d2 was rewritten");
                    let loc = lost.location();
                    for f in &new {
                        loc.store().delete(&loc.path(f)).await.unwrap();
                    }
                    noted.lock().unwrap().extend(new);
                })
            });
        }
    };
    let options = CompactOptions {
        parallelism: 1,
        ..Default::default()
    };
    let err = compact(&t, &options, &progress).await.unwrap_err();
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Transient, "{text}");
    assert!(text.contains("partition 2026-03-02"), "{text}");
    let taken = taken.lock().unwrap().clone();
    assert!(taken.iter().any(|f| text.contains(f.as_str())), "{text}");
    assert_whole(&t, "after the refused compaction").await;
}

/// A writer that wrote three files, then waited two hours on its source,
/// while a vacuum with the shortest retention took them (its marker was dead).
async fn stalled_writer() -> (Table, logbook::PartitionWriter, NaiveDate) {
    let (wh, clock) = aged_warehouse();
    let t = tiny_table(&wh).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("slow")).await.unwrap();
    w.write(&batch(d, 0..6, "slow")).await.unwrap();
    clock.advance(2 * HOUR);
    let report = vacuum(&t, one_hour()).await.unwrap();
    assert!(!report.deleted.is_empty(), "the stalled write's files went");
    (t, w, d)
}

#[tokio::test]
async fn a_writer_stalled_past_the_retention_refuses_to_commit_vacuumed_files() {
    let (t, w, d) = stalled_writer().await;
    let err = w.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(err.to_string().contains("run it again"), "{err}");
    assert!(latest_partition_opt(&t, d).await.is_none());
    assert_whole(&t, "after the refused commit").await;
}

/// `aged_warehouse` on a store that can also pause at a chosen operation.
fn aged_faulty_warehouse() -> (
    logbook::Warehouse,
    Arc<logbook::clock::ManualClock>,
    crate::fault_store::FaultStore,
) {
    use logbook::clock::{Clock, SystemClock};
    let clock = Arc::new(logbook::clock::ManualClock::new(SystemClock.now_millis()));
    let counted =
        crate::counting_store::CountingStore::new(Arc::new(object_store::memory::InMemory::new()))
            .with_clock(clock.clone());
    let store = crate::fault_store::FaultStore::new(Arc::new(counted));
    let loc = logbook::StorageLocation::from_store(Arc::new(store.clone()), "wh", "memory://wh");
    let wh = logbook::Warehouse::new(loc, options().with_clock(clock.clone()));
    (wh, clock, store)
}

/// A writer of `d` that staged three files on `aged_faulty_warehouse`.
async fn slow_writer() -> (
    Table,
    Arc<logbook::clock::ManualClock>,
    crate::fault_store::FaultStore,
    logbook::PartitionWriter,
    NaiveDate,
) {
    let (wh, clock, store) = aged_faulty_warehouse();
    let t = tiny_table(&wh).await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("slow")).await.unwrap();
    w.write(&batch(d, 0..6, "slow")).await.unwrap();
    data_files_once(&t, |f| f.len() == 3).await;
    (t, clock, store, w, d)
}

/// A writer back from a long stall at the worst moment: after a vacuum
/// last looked at the markers (the writer's was stale) and before it
/// deletes. The writer refreshes its marker, checks its files (all there
/// yet) and tries to commit, while the vacuum goes on. `hold` pauses the
/// vacuum (by a store hook) where the writer comes back. Returns the
/// writer's commit, once the vacuum is done; the table is whole whatever
/// the outcome: never a version naming files the vacuum deleted.
async fn writer_back_during_a_vacuum(
    hold: impl FnOnce(&crate::fault_store::FaultStore, crate::fault_store::Hook),
) -> (Table, NaiveDate, logbook::Result<u64>) {
    let (t, clock, store, mut w, d) = slow_writer().await;
    clock.advance(2 * HOUR);
    let (sent, outcome) = tokio::sync::oneshot::channel();
    hold(
        &store,
        Box::pin(async move {
            let committed = async {
                w.write(&batch(d, 6..7, "slow")).await?;
                w.commit().await
            };
            let _ = sent.send(committed.await.map(|c| c.version));
        }),
    );
    vacuum(&t, one_hour()).await.unwrap();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(10), outcome)
        .await
        .expect("the writer came back during the vacuum")
        .unwrap();
    assert_whole(&t, "after the writer and the vacuum").await;
    (t, d, outcome)
}

/// The vacuum claimed the writer's directory first: the writer, back
/// before the deletes, fails (run it again) rather than committing files
/// being deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_back_after_a_vacuum_claimed_its_files_fails() {
    let (t, d, outcome) =
        writer_back_during_a_vacuum(|store, hook| store.before_next_delete(hook)).await;
    let e = outcome.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("run it again"), "{e}");
    assert!(latest_partition_opt(&t, d).await.is_none());
}

/// The writer claimed its directory back first: the vacuum keeps its
/// files, and the writer's commit stands whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_back_before_a_vacuum_claims_its_files_keeps_them() {
    let (t, d, outcome) = writer_back_during_a_vacuum(|store, hook| {
        store.before_next_create("_logbook/claims/", hook)
    })
    .await;
    outcome.unwrap();
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 7);
}

/// A compaction back from a long stall while a vacuum that found its
/// marker stale is about to delete its rewritten files: the compaction
/// fails (run it again) instead of committing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_back_after_a_vacuum_claimed_its_files_fails() {
    let (wh, clock, store) = aged_faulty_warehouse();
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    let before = partition_files(&t, d1).await;
    // Once both partitions are rewritten, two hours pass; a vacuum starts
    // and stops at its first delete (its looks at the markers done) until
    // the compaction has tried to commit.
    let (reached, at_delete) = tokio::sync::oneshot::channel::<()>();
    let (go_on, resume) = tokio::sync::oneshot::channel::<()>();
    store.before_next_delete(Box::pin(async move {
        let _ = reached.send(());
        let _ = resume.await;
    }));
    let vacuumed = t.clone();
    let (ticking, at_delete) = (clock.clone(), std::sync::Mutex::new(Some(at_delete)));
    let running = std::sync::Mutex::new(None);
    let progress = |p: CompactProgress| {
        if p.partitions_done == 2 {
            ticking.advance(2 * HOUR);
            let v = vacuumed.clone();
            let rt = tokio::runtime::Handle::current();
            *running.lock().unwrap() = Some(tokio::task::spawn_blocking(move || {
                rt.block_on(vacuum(&v, one_hour())).unwrap()
            }));
            let at_delete = at_delete.lock().unwrap().take().unwrap();
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(at_delete)
                    .unwrap()
            });
        }
    };
    let options = CompactOptions {
        parallelism: 1,
        ..Default::default()
    };
    let outcome = compact(&t, &options, &progress).await;
    go_on.send(()).unwrap();
    let vacuum_task = running.lock().unwrap().take().unwrap();
    vacuum_task.await.unwrap();
    assert_refused(&t, &outcome.unwrap_err(), d1, &before).await;
}

/// A writer whose marker puts failed for a while (a beat only warns)
/// measures its pause from the last heartbeat stored, which is what a
/// vacuum sees, not from the last one tried: here its beats fail for 40
/// minutes while rows still arrive, then it waits 25 more, and a vacuum
/// takes its files meanwhile. It must not commit them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_beats_failed_counts_its_pause_from_the_last_stored_one() {
    let (t, clock, store, mut w, d) = slow_writer().await;
    store.fail_puts_under(Some("_logbook/running/"));
    let mut outcome = Ok(());
    for _ in 0..2 {
        clock.advance(HOUR / 3);
        outcome = outcome.and(w.write(&batch(d, 6..7, "slow")).await);
    }
    store.fail_puts_under(None);
    clock.advance(HOUR * 25 / 60);
    vacuum(&t, one_hour()).await.unwrap();
    let committed = match outcome {
        Ok(()) => async {
            w.write(&batch(d, 7..8, "slow")).await?;
            w.commit().await
        }
        .await
        .map(|_| ()),
        Err(e) => Err(e),
    };
    assert!(committed.is_err(), "committed after its files were taken");
    assert!(latest_partition_opt(&t, d).await.is_none());
    assert_whole(&t, "after the refused commit").await;
}

/// A writer that claimed its directory back after a long pause and died
/// before storing its marker again does not keep its files forever: a
/// vacuum a retention later replaces the claim and takes them, marker and
/// all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_claimed_and_died_leaves_its_files_to_vacuum() {
    let (t, clock, store, mut w, d) = slow_writer().await;
    let dir = w.staging_dir().to_string();
    clock.advance(2 * HOUR);
    store.fail_puts_under(Some("_logbook/running/"));
    assert!(w.write(&batch(d, 6..7, "slow")).await.is_err());
    drop(w);
    store.fail_puts_under(None);
    assert!(
        !objects(&t, "_logbook/claims").await.is_empty(),
        "it claimed"
    );
    clock.advance(2 * HOUR);
    vacuum(&t, one_hour()).await.unwrap();
    let left: Vec<String> = data_files(&t).await;
    assert!(left.iter().all(|f| !f.starts_with(&dir)), "{left:?}");
    assert!(objects(&t, "_logbook/running").await.is_empty());
    assert_whole(&t, "after the vacuum").await;
}

/// A writer back from a long pause whose claim landed but whose answer
/// was lost tries again, finds its own claim, and goes on to commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_answer_was_lost_is_found_again_as_the_writers_own() {
    let (t, clock, store, mut w, d) = slow_writer().await;
    clock.advance(2 * HOUR);
    store.fail_next_create_under("_logbook/claims/", crate::fault_store::Fault::After);
    w.write(&batch(d, 6..7, "slow")).await.unwrap();
    w.commit().await.unwrap();
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 7);
    assert_whole(&t, "after the commit").await;
}

#[tokio::test]
async fn two_writers_with_the_same_run_id_keep_their_own_files() {
    let (wh, clock) = aged_warehouse();
    let t = tiny_table(&wh).await;
    let d = date("2026-03-15");
    let mut w1 = t.replace_partition(d, RunInfo::new("same")).await.unwrap();
    let mut w2 = t.replace_partition(d, RunInfo::new("same")).await.unwrap();
    w1.write(&batch(d, 0..4, "one")).await.unwrap();
    w2.write(&batch(d, 0..4, "two")).await.unwrap();
    let w1_dir = w1.staging_dir().to_string();
    clock.advance(2 * HOUR);
    // Both are alive: each beats.
    w1.write(&batch(d, 4..5, "one")).await.unwrap();
    w2.write(&batch(d, 4..5, "two")).await.unwrap();
    vacuum(&t, one_hour()).await.unwrap();
    // Its first file was stored before the vacuum; the second may still
    // be on its way (closed in the background).
    data_files_once(&t, |f| {
        f.iter().filter(|f| f.starts_with(&w1_dir)).count() >= 2
    })
    .await;
    w1.commit().await.unwrap();
    assert_whole(&t, "after the first writer's commit").await;
}

#[tokio::test]
async fn files_superseded_within_the_retention_stay_whatever_their_age() {
    let (wh, clock) = aged_warehouse();
    let d = date("2026-03-15");
    let t = small_files_table(&wh, &[d]).await;
    let v1 = partition_files(&t, d).await;
    // The files are 8 days old when a replace supersedes them and expiry
    // drops their version from time travel, seconds before a vacuum.
    clock.advance(8 * 24 * HOUR);
    replace(&t, d, 0..3, "new", "new").await;
    expire(&t, Keep::Last(1)).await.unwrap();
    assert_kept_for_one_retention(&t, &clock, &v1, "superseded seconds ago").await;
    assert_whole(&t, "after both vacuums").await;
}

/// Every data file of `t` that no version references.
async fn unreferenced(t: &Table, under: NaiveDate) -> Vec<String> {
    let latest = t.latest_version().await.unwrap();
    let mut referenced = std::collections::HashSet::new();
    for v in 0..=latest {
        for p in t.at_version(v).await.unwrap().partitions().await.unwrap() {
            referenced.extend(p.files.into_iter().map(|f| f.path));
        }
    }
    data_files(t)
        .await
        .into_iter()
        .filter(|f| f.contains(&format!("date={under}/")) && !referenced.contains(f))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_dropped_by_a_lost_commit_attempt_is_reported_and_discarded() {
    use crate::fault_store::FaultStore;
    let faults = FaultStore::new(Arc::new(object_store::memory::InMemory::new()));
    let loc = logbook::StorageLocation::from_store(Arc::new(faults.clone()), "wh", "memory://wh");
    let wh = logbook::Warehouse::new(loc, options());
    let (d1, d2, d3) = (date("2026-03-01"), date("2026-03-02"), date("2026-03-03"));
    let t = small_files_table(&wh, &[d1, d2]).await;
    // Once both rewrites are done: production replaces d1 (so the commit
    // drops d1's rewrite), and another writer takes the version the
    // compaction's first attempt tries to create (so it retries).
    let (racer, hooks) = (t.clone(), faults.clone());
    let progress = move |p: CompactProgress| {
        if p.partitions_done == 2 {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    replace(&racer, d1, 0..7, "fresh", "fresh-d1").await;
                })
            });
            let other = racer.clone();
            hooks.before_next_log_create(Box::pin(async move {
                replace(&other, d3, 0..2, "other", "other-d3").await;
            }));
        }
    };
    let options = CompactOptions {
        parallelism: 1,
        ..Default::default()
    };
    let report = compact(&t, &options, &progress).await.unwrap();
    assert_eq!(report.dropped, [d1], "{report:?}");
    assert_eq!(report.partitions_compacted, 1, "{report:?}");
    assert!(unreferenced(&t, d1).await.is_empty(), "d1's rewrite leaked");
    assert_whole(&t, "after the compaction").await;
}

#[tokio::test]
async fn a_writer_that_stalls_mid_stream_fails_once_its_files_were_vacuumed() {
    let (t, mut w, d) = stalled_writer().await;
    // The source comes back: the next batch finds the loss.
    let err = w.write(&batch(d, 6..8, "slow")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(w.commit().await.is_err());
    assert!(latest_partition_opt(&t, d).await.is_none());
}

#[tokio::test]
async fn files_of_a_version_expired_seconds_ago_stay_for_the_retention() {
    let (wh, clock) = aged_warehouse();
    let d = date("2026-03-15");
    let t = small_files_table(&wh, &[d]).await;
    let v1 = partition_files(&t, d).await;
    // Superseded long ago but readable by time travel until the expiry.
    replace(&t, d, 0..3, "new", "new").await;
    clock.advance(8 * 24 * HOUR);
    expire(&t, Keep::Last(1)).await.unwrap();
    assert_kept_for_one_retention(&t, &clock, &v1, "expired seconds ago").await;
}

/// Where vacuum keeps what retained versions reference between runs.
const LEDGER: &str = "_logbook/vacuum-ledger.json";

/// The ledger's bytes, if one was written.
async fn take_ledger(t: &Table) -> Option<bytes::Bytes> {
    use object_store::ObjectStoreExt;
    let loc = t.location();
    let path = loc.path(LEDGER);
    let bytes = match loc.store().get(&path).await {
        Ok(got) => got.bytes().await.unwrap(),
        Err(object_store::Error::NotFound { .. }) => return None,
        Err(e) => panic!("{e}"),
    };
    loc.store().delete(&path).await.unwrap();
    Some(bytes)
}

async fn put_ledger(t: &Table, bytes: bytes::Bytes) {
    use object_store::ObjectStoreExt;
    let loc = t.location();
    loc.store()
        .put(&loc.path(LEDGER), bytes.into())
        .await
        .unwrap();
}

/// Every retained version reads every partition it lists.
async fn assert_retained_read(t: &Table, what: &str) {
    for v in 0..=t.latest_version().await.unwrap() {
        let snap = match t.at_version(v).await {
            Err(e) if e.kind() == ErrorKind::NotFound && v < t.latest_version().await.unwrap() => {
                continue
            }
            other => other.unwrap(),
        };
        for p in snap.partitions().await.unwrap() {
            let read = snap.read_partition(p.date).await;
            assert!(read.is_ok(), "{what}: version {v}, {}: {read:?}", p.date);
        }
    }
}

/// The stored ledger's `(oldest, through)`, if there is one.
async fn ledger_range(t: &Table) -> Option<(u64, u64)> {
    let bytes = take_ledger(t).await?;
    put_ledger(t, bytes.clone()).await;
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    Some((
        v["oldest"].as_u64().unwrap(),
        v["through"].as_u64().unwrap(),
    ))
}

/// A dry run with the stored ledger and one without it (built afresh),
/// both listing every file, report the same; one going by the ledger
/// alone, as the options say, reports a part of that, missing only files
/// no readable version references (orphans, which wait for a listing);
/// then a real vacuum. Returns whether the ledger was brought forward (the
/// vacuum read only the versions from the ledger's `through`) and whether
/// the vacuum went by the ledger alone and deleted something.
/// `committed`: every root manifest and data file a version has listed
/// (without it, the ledger alone must miss nothing).
async fn vacuum_both_ways(
    t: &Table,
    options: VacuumOptions,
    committed: Option<&HashSet<String>>,
    what: &str,
) -> (bool, bool) {
    let dry = VacuumOptions {
        dry_run: true,
        ..options
    };
    let before = ledger_range(t).await;
    let latest = t.latest_version().await.unwrap();
    let with = vacuum(t, VacuumOptions { full: true, ..dry })
        .await
        .unwrap();
    let routine = vacuum(t, dry).await.unwrap();
    let ledger = take_ledger(t).await;
    let afresh = vacuum(t, dry).await.unwrap();
    assert!(afresh.listed_everything, "{what}: a new ledger lists");
    assert_eq!(with.deleted, afresh.deleted, "{what}");
    assert_eq!(with.kept_young, afresh.kept_young, "{what}");
    let missed: Vec<&String> = afresh
        .deleted
        .iter()
        .filter(|p| !routine.deleted.contains(p))
        .collect();
    assert!(
        routine.deleted.iter().all(|p| afresh.deleted.contains(p)),
        "{what}: {routine:?} vs {afresh:?}"
    );
    assert!(
        missed
            .iter()
            .all(|p| committed.is_some_and(|c| !c.contains(*p))),
        "{what}: the ledger alone missed released files: {missed:?}"
    );
    assert!(
        take_ledger(t).await.is_none(),
        "{what}: a dry run wrote a ledger"
    );
    if let Some(bytes) = &ledger {
        put_ledger(t, bytes.clone()).await;
    }
    let forward = before.is_some_and(|(_, through)| with.versions_read == latest - through + 1)
        && with.versions_read < afresh.versions_read;
    let done = vacuum(t, options).await.unwrap();
    assert_eq!(done.versions_read, with.versions_read, "{what}");
    assert_eq!(done.deleted, routine.deleted, "{what}");
    assert_retained_read(t, what).await;
    assert!(
        ledger_range(t).await.is_some(),
        "a vacuum writes its ledger"
    );
    (forward, !done.listed_everything && !done.deleted.is_empty())
}

/// Add the root manifest and data files `t`'s latest version lists to
/// `committed`.
async fn note_committed(t: &Table, committed: &mut HashSet<String>) {
    let latest = t.latest().await.unwrap();
    committed.insert(latest.entry().manifest.clone());
    for p in latest.partitions().await.unwrap() {
        committed.extend(p.files.into_iter().map(|f| f.path));
    }
}

/// A vacuum brings the ledger of the last one forward instead of reading
/// every retained version; it must judge exactly as a ledger built afresh.
/// Over a seeded random run of replaces across spans and months, staged
/// and published writes, compactions, expiries, clock steps and vacuums of
/// varying retention, a dry run with the ledger and one without it report
/// the same files (and a dry run leaves the ledger as it was).
#[tokio::test]
async fn a_vacuum_ledger_brought_forward_judges_as_one_built_afresh() {
    let (wh, clock) = aged_warehouse();
    let dates = [
        "2024-12-30",
        "2024-12-31",
        "2025-01-01",
        "2025-02-03",
        "2026-03-15",
    ]
    .map(date);
    let t = small_files_table(&wh, &dates[..2]).await;
    let mut seed = 0x5eed_u64;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let (mut brought_forward, mut by_ledger_alone) = (0, 0);
    let mut committed = HashSet::new();
    for step in 0..100 {
        note_committed(&t, &mut committed).await;
        match next(11) {
            0..=4 => {
                let d = dates[next(dates.len() as u64) as usize];
                let rows = 0..(1 + next(6) as i64);
                replace(&t, d, rows, "x", &format!("step-{step}")).await;
            }
            5 => {
                let stage = t.stage(&format!("s{step}")).await.unwrap();
                for d in [dates[next(5) as usize], dates[next(5) as usize]] {
                    let run = RunInfo::new(format!("staged-{step}-{d}"));
                    let mut w = stage.replace_partition(d, run).await.unwrap();
                    w.write(&batch(d, 0..2, "staged")).await.unwrap();
                    w.commit().await.unwrap();
                }
                clock.advance(HOUR);
                stage.publish(true).await.unwrap();
            }
            6 => {
                compact(&t, &CompactOptions::default(), &|_| {})
                    .await
                    .unwrap();
            }
            7 => {
                expire(&t, Keep::Last(1 + next(6))).await.unwrap();
            }
            _ => {
                let options = VacuumOptions {
                    retention_ms: [HOUR, 3 * HOUR, 24 * HOUR][next(3) as usize],
                    ..Default::default()
                };
                let ledger = take_ledger(&t).await;
                if let Some(bytes) = &ledger {
                    put_ledger(&t, bytes.clone()).await;
                }
                let dry = VacuumOptions {
                    dry_run: true,
                    ..options
                };
                vacuum(&t, dry).await.unwrap();
                let after = take_ledger(&t).await;
                assert_eq!(after, ledger, "a dry run changed the ledger");
                if let Some(bytes) = after {
                    put_ledger(&t, bytes).await;
                }
                let what = format!("step {step}");
                let (forward, alone) = vacuum_both_ways(&t, options, Some(&committed), &what).await;
                brought_forward += forward as u32;
                by_ledger_alone += alone as u32;
            }
        }
        clock.advance(next(4) as i64 * HOUR / 2);
    }
    assert!(
        brought_forward >= 5,
        "only {brought_forward} vacuums brought a ledger forward"
    );
    assert!(
        by_ledger_alone >= 2,
        "only {by_ledger_alone} vacuums deleted going by the ledger alone"
    );
}

/// The same comparison on a dimension (its files listed by the root, not
/// by months) and on the format 1 fixture moved up to format 2 between two
/// vacuums (the first walk compares every month, the next only spans).
#[tokio::test]
async fn a_vacuum_ledger_follows_dimensions_and_the_move_to_format_2() {
    let (wh, clock) = aged_warehouse();
    let schema = logbook::TableSchema::parse_dimension_spec(
        "dim",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let dim = wh.create_table("dim", schema).await.unwrap();
    let mut forward = 0;
    for i in 0..12 {
        let region = format!("r{i}");
        let rows =
            crate::dimension::states(&[(["c0", "c1", "c2"][i as usize % 3], region.as_str())]);
        let effective = date("2026-01-01") + chrono::Days::new(i);
        dim.apply_changes(effective, &[rows], RunInfo::new(format!("load-{i}")))
            .await
            .unwrap();
        clock.advance(2 * HOUR);
        if i % 3 == 2 {
            expire(&dim, Keep::Last(2)).await.unwrap();
            forward += vacuum_both_ways(&dim, one_hour(), None, &format!("dimension {i}"))
                .await
                .0 as u32;
        }
    }
    assert!(forward >= 2, "{forward}");

    let (_dir, fixture) = crate::format::fixture();
    let orders = fixture.table("orders").await.unwrap();
    let force = sweep();
    let d = date("2026-03-16");
    let mut steps = Vec::new();
    steps.push(vacuum_both_ways(&orders, force, None, "format 1").await.0);
    crate::format::rewrite(&orders, d, "f1").await;
    let up = logbook::PropertiesChange {
        format: Some(2),
        ..Default::default()
    };
    orders.alter(up).await.unwrap();
    crate::format::rewrite(&orders, d, "f2").await;
    steps.push(
        vacuum_both_ways(&orders, force, None, "moved to format 2")
            .await
            .0,
    );
    crate::format::rewrite(&orders, date("2024-12-31"), "f2-again").await;
    steps.push(vacuum_both_ways(&orders, force, None, "format 2").await.0);
    assert_eq!(steps, [false, true, true]);
}

/// Before deleting, the latest version confirms the ledger: a ledger that
/// counts a file the latest lists as unreferenced (a bug, or a ledger
/// edited by hand) makes the vacuum stop with nothing deleted and drop
/// the ledger; the next vacuum rebuilds it and keeps the file.
#[tokio::test]
async fn a_ledger_the_latest_version_contradicts_deletes_nothing() {
    let (wh, clock) = aged_warehouse();
    let (d, other) = (date("2026-03-15"), date("2026-03-16"));
    let t = small_files_table(&wh, &[d, other]).await;
    replace(&t, d, 0..3, "second", "second").await;
    expire(&t, Keep::Last(1)).await.unwrap();
    clock.advance(2 * HOUR);
    vacuum(&t, one_hour()).await.unwrap();
    let current = partition_files(&t, d).await;
    // The ledger now says the current files were last read by version 0.
    let bytes = take_ledger(&t).await.unwrap();
    let mut ledger: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    for f in &current {
        ledger["superseded"][f] = serde_json::json!(0);
    }
    put_ledger(&t, serde_json::to_vec(&ledger).unwrap().into()).await;
    // Another month: a commit rewriting d's month would list d's files
    // again, and the walk would mend the ledger.
    replace(&t, date("2026-04-01"), 0..3, "third", "third").await;
    // Within the hour of the last full listing: the vacuum goes by the
    // ledger alone (one that lists keeps what the latest reads anyway).
    let before = data_files(&t).await;
    let err = vacuum(&t, one_hour()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(current.iter().any(|f| err.to_string().contains(f)), "{err}");
    assert!(err.to_string().contains("nothing was deleted"), "{err}");
    assert_eq!(data_files(&t).await, before, "nothing deleted");
    assert!(take_ledger(&t).await.is_none(), "the ledger was set aside");
    let rejected = objects(&t, "_logbook").await;
    assert!(
        rejected.contains(&"_logbook/vacuum-ledger.rejected.json".to_string()),
        "{rejected:?}"
    );
    vacuum(&t, one_hour()).await.unwrap();
    let now = data_files(&t).await;
    assert!(
        current.iter().all(|f| now.contains(f)),
        "the rebuild kept them"
    );
    assert_retained_read(&t, "after the rebuild").await;
}

/// Between full listings a vacuum looks only at what changed: the files
/// of a write abandoned before committing (its marker left behind) go,
/// found through the marker; files nothing names (a commit attempt that
/// crashed, a write whose marker could not be written) stay until a
/// vacuum lists every file, which one does a retention after the last.
#[tokio::test]
async fn between_full_listings_a_vacuum_finds_abandoned_writes_by_their_markers() {
    use object_store::{ObjectStoreExt, PutPayload};
    let (wh, clock) = aged_warehouse();
    let t = tiny_table(&wh).await;
    let d = date("2026-03-15");
    replace(&t, d, 0..2, "first", "first").await;
    let committed = data_files(&t).await;
    let run = RunInfo::new("abandoned");
    let mut abandoned = t.replace_partition(d, run).await.unwrap();
    abandoned.write(&batch(d, 0..6, "abandoned")).await.unwrap();
    let new = |f: &[String]| f.iter().filter(|f| !committed.contains(f)).count();
    let staged: Vec<String> = data_files_once(&t, |f| new(f) >= 3)
        .await
        .into_iter()
        .filter(|f| !committed.contains(f))
        .collect();
    assert!(staged.len() >= 3, "{staged:?}");
    let unnamed = [
        "_logbook/manifests/00000000-0000-0000-0000-00000000dead/root.json".to_string(),
        "data/date=2026-03-15/00000000-0000-0000-0000-00000000beef/part-0.parquet".to_string(),
    ];
    let loc = t.location();
    for p in &unnamed {
        let path = loc.path(p);
        let bytes = PutPayload::from_static(b"x");
        loc.store().put(&path, bytes).await.unwrap();
    }
    clock.advance(HOUR / 2);
    let first = vacuum(&t, one_hour()).await.unwrap();
    assert!(first.listed_everything, "a new ledger lists every file");
    assert!(first.deleted.is_empty(), "{first:?}");
    clock.advance(3 * HOUR / 4);
    let routine = vacuum(&t, one_hour()).await.unwrap();
    assert!(!routine.listed_everything, "{routine:?}");
    assert_eq!(routine.deleted, staged, "the abandoned write's files");
    let left = objects(&t, "").await;
    assert!(unnamed.iter().all(|p| left.contains(p)), "{left:?}");
    clock.advance(HOUR / 2);
    let listing = vacuum(&t, one_hour()).await.unwrap();
    assert!(listing.listed_everything, "a retention after the last");
    assert_eq!(listing.deleted, unnamed, "what nothing names");
    assert_eq!(data_files(&t).await, committed);
    assert_whole(&t, "after the vacuums").await;
    drop(abandoned);
}

/// A stale marker is looked into only where writers stage: one naming
/// `_logbook` or the table root (damaged, or written by hand) makes a
/// vacuum between full listings delete nothing there.
#[tokio::test]
async fn a_marker_naming_metadata_directories_deletes_nothing_there() {
    use object_store::{ObjectStoreExt, PutPayload};
    let (wh, clock) = aged_warehouse();
    let t = tiny_table(&wh).await;
    replace(&t, date("2026-03-15"), 0..2, "first", "first").await;
    let marker = br#"{"date":"2026-03-15","run_id":"odd","started_ms":0,"heartbeat_ms":0,"dir":"_logbook","dirs":["","data","data/"]}"#;
    let loc = t.location();
    let path = loc.path("_logbook/running/2026-03-15/odd/marker.json");
    let bytes = PutPayload::from_static(marker);
    loc.store().put(&path, bytes).await.unwrap();
    // The marker is young at the first vacuum (which lists every file) and
    // stale at the next, within the hour (which goes by what changed).
    clock.advance(3 * HOUR / 4);
    vacuum(&t, one_hour()).await.unwrap();
    let before = objects(&t, "").await;
    clock.advance(HOUR / 2);
    let routine = vacuum(&t, one_hour()).await.unwrap();
    assert!(!routine.listed_everything);
    assert!(routine.deleted.is_empty(), "{routine:?}");
    let after = objects(&t, "").await;
    let marker = "_logbook/running/2026-03-15/odd/marker.json".to_string();
    assert!(!after.contains(&marker), "a stale marker goes");
    let lost: Vec<&String> = before
        .iter()
        .filter(|p| !after.contains(p) && **p != marker && !p.ends_with("clock"))
        .collect();
    assert!(lost.is_empty(), "{lost:?}");
    assert_whole(&t, "after the vacuums").await;
}

/// A ledger is used only for the history it was built from: one copied
/// from another table (or left by a table dropped and created again under
/// the same name) at the same version is rebuilt, and deletes nothing the
/// table reads.
#[tokio::test]
async fn a_ledger_of_another_history_is_not_trusted() {
    let (wh, clock) = aged_warehouse();
    let d = date("2026-03-15");
    let make = |name: &'static str| {
        let wh = wh.clone();
        async move {
            let schema = logbook::TableSchema::parse_spec(name, SPEC, "date").unwrap();
            let t = wh.create_table(name, schema).await.unwrap();
            replace(&t, d, 0..3, name, "first").await;
            t
        }
    };
    let (a, b) = (make("a").await, make("b").await);
    clock.advance(2 * HOUR);
    vacuum(&a, one_hour()).await.unwrap();
    put_ledger(
        &b,
        take_ledger(&a).await.expect("a vacuum writes its ledger"),
    )
    .await;
    let files = partition_files(&b, d).await;
    vacuum(&b, one_hour()).await.unwrap();
    let now = data_files(&b).await;
    assert!(
        files.iter().all(|f| now.contains(f)),
        "{files:?} vs {now:?}"
    );
    assert_retained_read(&b, "b").await;
}
