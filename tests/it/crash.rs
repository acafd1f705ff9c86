//! Crash at every step: for each operation, count its store operations K,
//! then for every k in 1..=K make operation k fail before or after it takes
//! effect, and check what a user relies on.

use std::sync::Arc;

use chrono::NaiveDate;
use futures::TryStreamExt;
use logbook::clock::SystemClock;
use logbook::lifecycle::{check, CheckDepth};
use logbook::maintenance::{compact, expire, vacuum, CompactOptions, Keep};
use logbook::{Error, LogEntry, RunInfo, StorageLocation, Table, TableSchema, Warehouse};
use object_store::memory::InMemory;

use crate::common::*;
use crate::dimension::states;
use crate::fault_store::{Fault, FaultStore};

#[derive(Debug, Clone, Copy)]
enum Op {
    Replace,
    Apply,
    Publish,
    Compact,
    Expire,
    Vacuum,
    /// Expire all but the latest version, then vacuum by the ledger alone
    /// (the world's setup listed every file within the hour).
    RoutineVacuum,
}

struct World {
    faults: FaultStore,
    wh: Warehouse,
}

fn d(n: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, n).unwrap()
}

async fn world() -> World {
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let loc = StorageLocation::from_store(Arc::new(faults.clone()), "wh", "memory://wh");
    let wh = Warehouse::new(loc, options().with_clock(Arc::new(SystemClock)));
    let tiny = wh.with_options(wh.options().clone().with_max_rows_per_file(2));
    // Both tables keep a Delta and an Iceberg mirror: their writes are
    // faulted too, and each must end up matching the log whatever failed.
    let mirrored = delta_mirror().with_mirrors(&[logbook::MirrorFormat::Iceberg]);
    let t = tiny
        .create_table_with_properties(
            "t",
            TableSchema::parse_spec("t", SPEC, "date").unwrap(),
            mirrored.clone(),
        )
        .await
        .unwrap();
    for n in 1..=3 {
        replace(&t, d(n), 0..6, "v1", &format!("first-{n}")).await;
    }
    let stage = t.stage("s").await.unwrap();
    for n in 1..=2 {
        let mut w = stage
            .replace_partition(d(n), RunInfo::new(format!("staged-{n}")))
            .await
            .unwrap();
        w.write(&batch(d(n), 0..3, "staged")).await.unwrap();
        w.commit().await.unwrap();
    }
    let dim = wh
        .create_table_with_properties(
            "dim",
            TableSchema::parse_dimension_spec(
                "dim",
                "customer:string,region:string",
                &["customer"],
            )
            .unwrap(),
            mirrored,
        )
        .await
        .unwrap();
    dim.apply_changes(
        d(1),
        &[states(&[("k1", "A"), ("k2", "A")])],
        RunInfo::new("dim-1"),
    )
    .await
    .unwrap();
    // The ledger a routine vacuum brings forward (this one deletes nothing:
    // every version is retained).
    vacuum(&t, sweep()).await.unwrap();
    World { faults, wh }
}

async fn run(w: &World, op: Op) -> Result<(), Error> {
    let t = w.wh.table("t").await?;
    match op {
        Op::Replace => {
            let mut writer = t.replace_partition(d(3), RunInfo::new("R")).await?;
            writer.write(&batch(d(3), 0..5, "replaced")).await?;
            writer.commit().await.map(|_| ())
        }
        Op::Apply => {
            let dim = w.wh.table("dim").await?;
            dim.apply_changes(d(10), &[states(&[("k1", "B")])], RunInfo::new("A"))
                .await
                .map(|_| ())
        }
        Op::Publish => match t.existing_stage("s").await {
            Ok(stage) => stage.publish(false).await.map(|_| ()),
            // Published and forgotten by the faulted attempt.
            Err(e) if e.to_string().contains("has no stage") => Ok(()),
            Err(e) => Err(e),
        },
        Op::Compact => compact(&t, &CompactOptions::default(), &|_| {})
            .await
            .map(|_| ()),
        Op::Expire => expire(&t, Keep::Last(1)).await.map(|_| ()),
        Op::Vacuum => vacuum(&t, sweep()).await.map(|_| ()),
        Op::RoutineVacuum => {
            expire(&t, Keep::Last(1)).await?;
            let routine = logbook::maintenance::VacuumOptions {
                full: false,
                ..sweep()
            };
            let report = vacuum(&t, routine).await?;
            assert!(!report.listed_everything, "{report:?}");
            Ok(())
        }
    }
}

/// Every row of the fact table's dates and the dimension's intervals.
type State = (Vec<(NaiveDate, Vec<(i64, String)>)>, Vec<String>);

async fn state(w: &World) -> State {
    let t = w.wh.table("t").await.unwrap();
    let snap = t.latest().await.unwrap();
    let mut facts = Vec::new();
    for p in snap.partitions().await.unwrap() {
        facts.push((p.date, rows(&snap, p.date).await));
    }
    let dim = w.wh.table("dim").await.unwrap().latest().await.unwrap();
    let batches: Vec<arrow_array::RecordBatch> = dim
        .scan_dimension()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut intervals: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |i| {
                b.columns()
                    .iter()
                    .map(|c| {
                        logbook::query::datafusion::arrow::util::display::array_value_to_string(
                            c, i,
                        )
                        .unwrap()
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
        })
        .collect();
    intervals.sort();
    (facts, intervals)
}

async fn history(w: &World, table: &str) -> Vec<LogEntry> {
    w.wh.table(table).await.unwrap().history().await.unwrap()
}

async fn assert_clean(w: &World, what: &str) {
    // Every file a stage still records exists (vacuum must keep them).
    let t = w.wh.table("t").await.unwrap();
    if let Ok(stage) = t.existing_stage("s").await {
        let files = data_files(&t).await;
        for p in stage.partitions().await.unwrap() {
            for f in p.files {
                assert!(
                    files.contains(&f.path),
                    "{what}: staged file {} is gone",
                    f.path
                );
            }
        }
    }
    for name in ["t", "dim"] {
        let t: Table =
            w.wh.table(name)
                .await
                .unwrap_or_else(|e| panic!("{what}: {name} does not open: {e}"));
        let report = check(&t, &t.latest().await.unwrap(), CheckDepth::Full)
            .await
            .unwrap();
        assert!(
            report.problems.is_empty(),
            "{what}: {name}: {:?}",
            report.problems
        );
        // A mirror write lost to the fault is caught up, never wrong.
        t.sync_mirror()
            .await
            .unwrap_or_else(|e| panic!("{what}: {name}: the mirror does not catch up: {e}"));
        crate::mirror::assert_mirrors(&t, 0).await;
        crate::iceberg_mirror::assert_iceberg_mirrors(&t).await;
    }
}

/// The faults injected at step `k`: before it, after it, and a create that
/// landed but answers `AlreadyExists` (a store's retry seeing its own first
/// try) followed by a failed read of the winner.
fn scenarios(k: usize) -> [Vec<(usize, Fault)>; 3] {
    [
        vec![(k, Fault::Before)],
        vec![(k, Fault::After)],
        vec![(k, Fault::Exists), (k + 1, Fault::Before)],
    ]
}

/// Run `op` once cleanly to learn its cost and result, then fault every step.
async fn crash_at_every_step(op: Op) -> usize {
    let clean = world().await;
    let before = state(&clean).await;
    clean.faults.disarm();
    run(&clean, op).await.unwrap();
    let k_max = clean.faults.ops();
    let after = state(&clean).await;
    assert!(k_max > 0);
    let mut injected = 0;
    for k in 1..=k_max {
        for faults in scenarios(k) {
            let what = format!("{op:?}, {faults:?} of {k_max} operations");
            let w = world().await;
            let earlier = (history(&w, "t").await, history(&w, "dim").await);
            w.faults.arm_all(&faults);
            let _ = run(&w, op).await;
            injected += usize::from(w.faults.disarm());

            assert_clean(&w, &what).await;
            let now = state(&w).await;
            assert!(
                now == before || now == after,
                "{what}: a state that is neither before nor after"
            );
            let (t_log, dim_log) = (history(&w, "t").await, history(&w, "dim").await);
            assert_eq!(
                t_log[..earlier.0.len()],
                earlier.0[..],
                "{what}: an earlier commit changed"
            );
            assert_eq!(
                dim_log[..earlier.1.len()],
                earlier.1[..],
                "{what}: an earlier commit changed"
            );

            // A retry (same run id) converges to exactly one commit.
            run(&w, op)
                .await
                .unwrap_or_else(|e| panic!("{what}: retry failed: {e}"));
            assert_eq!(state(&w).await, after, "{what}: retry did not converge");
            let run_commits = |log: &[LogEntry], id: &str| {
                log.iter()
                    .filter(|e| e.run.as_ref().is_some_and(|r| r.run_id == id))
                    .count()
            };
            match op {
                Op::Replace => assert_eq!(run_commits(&history(&w, "t").await, "R"), 1, "{what}"),
                Op::Apply => assert_eq!(run_commits(&history(&w, "dim").await, "A"), 1, "{what}"),
                _ => {}
            }
            // Vacuum afterwards never deletes a referenced file.
            vacuum(&w.wh.table("t").await.unwrap(), sweep())
                .await
                .unwrap();
            vacuum(&w.wh.table("dim").await.unwrap(), sweep())
                .await
                .unwrap();
            assert_clean(&w, &format!("{what}, after vacuum")).await;
            assert_eq!(state(&w).await, after, "{what}: vacuum changed the data");
        }
    }
    assert!(injected >= k_max, "every step got a fault");
    eprintln!("crash: {op:?}: {k_max} store operations, {injected} faults injected, all recovered");
    injected
}

#[tokio::test]
async fn a_partition_replace_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Replace).await;
}

#[tokio::test]
async fn a_dimension_apply_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Apply).await;
}

#[tokio::test]
async fn a_stage_publish_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Publish).await;
}

#[tokio::test]
async fn a_compaction_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Compact).await;
}

#[tokio::test]
async fn an_expiry_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Expire).await;
}

#[tokio::test]
async fn a_vacuum_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::Vacuum).await;
}

#[tokio::test]
async fn a_vacuum_by_the_ledger_alone_survives_a_fault_at_every_step() {
    crash_at_every_step(Op::RoutineVacuum).await;
}

/// After a publish faulted at any step, dropping the stage or staging more
/// into it never deletes a file the table references, and a leftover record
/// never sends old files in again.
#[tokio::test]
async fn a_stage_left_by_a_faulted_publish_never_deletes_live_files() {
    let clean = world().await;
    clean.faults.disarm();
    run(&clean, Op::Publish).await.unwrap();
    let k_max = clean.faults.ops();
    let published = state(&clean).await;
    for k in 1..=k_max {
        for faults in scenarios(k) {
            let what = format!("publish, {faults:?} of {k_max}, then drop");
            let w = world().await;
            let before = state(&w).await;
            w.faults.arm_all(&faults);
            let _ = run(&w, Op::Publish).await;
            w.faults.disarm();
            let after_publish = state(&w).await;
            let t = w.wh.table("t").await.unwrap();
            if let Ok(stage) = t.existing_stage("s").await {
                stage.drop_stage().await.unwrap();
            }
            assert_clean(&w, &what).await;
            assert_eq!(state(&w).await, after_publish, "{what}");
            assert!(
                after_publish == before || after_publish == published,
                "{what}"
            );

            let what = format!("publish, {faults:?} of {k_max}, then stage d1 again");
            let w = world().await;
            w.faults.arm_all(&faults);
            let _ = run(&w, Op::Publish).await;
            w.faults.disarm();
            let t = w.wh.table("t").await.unwrap();
            let snap = t.latest().await.unwrap();
            let d2_landed = rows(&snap, d(2))
                .await
                .iter()
                .all(|(_, n)| n.starts_with("staged"));
            let d2_version = snap.partition(d(2)).await.unwrap().unwrap().version;
            let stage = t.stage("s").await.unwrap();
            let mut again = stage
                .replace_partition(d(1), RunInfo::new("again-1"))
                .await
                .unwrap();
            again.write(&batch(d(1), 0..4, "again")).await.unwrap();
            again.commit().await.unwrap();
            stage
                .publish(false)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_clean(&w, &what).await;
            let snap = t.latest().await.unwrap();
            let d1: Vec<String> = rows(&snap, d(1))
                .await
                .into_iter()
                .map(|(_, n)| n)
                .collect();
            assert!(
                d1.iter().all(|n| n.starts_with("again")) && d1.len() == 4,
                "{what}: {d1:?}"
            );
            let d2 = snap.partition(d(2)).await.unwrap().unwrap();
            if d2_landed {
                assert_eq!(d2.version, d2_version, "{what}: d2 was committed again");
            }
            assert!(
                rows(&snap, d(2))
                    .await
                    .iter()
                    .all(|(_, n)| n.starts_with("staged")),
                "{what}: d2 holds the staged rows either way"
            );
        }
    }
}

#[tokio::test]
async fn a_storage_error_while_reading_or_writing_parquet_is_transient() {
    let w = world().await;
    let t = w.wh.table("t").await.unwrap();
    let snap = t.latest().await.unwrap();
    snap.partition(d(1)).await.unwrap();
    w.faults.arm(1, Fault::Before);
    let err = snap.read_partition(d(1)).await.unwrap_err();
    assert!(w.faults.disarm());
    assert_eq!(err.kind(), logbook::ErrorKind::Transient, "{err}");

    let mut writer = t.replace_partition(d(4), RunInfo::new("w4")).await.unwrap();
    writer.write(&batch(d(4), 0..3, "x")).await.unwrap();
    w.faults.arm(1, Fault::Before);
    let err = writer.commit().await.unwrap_err();
    assert!(w.faults.disarm());
    assert_eq!(err.kind(), logbook::ErrorKind::Transient, "{err}");
}

/// Creating a table where the store answers `AlreadyExists` to a create
/// that landed (its retry of our own first try), at any step: never a
/// "table exists" error for a table nobody else created, and when the
/// create says it failed, the table it leaves (if any) opens.
#[tokio::test]
async fn creating_a_table_survives_a_store_retrying_its_own_create() {
    let schema = || TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let clean = FaultStore::new(Arc::new(InMemory::new()));
    clean.disarm();
    let loc = StorageLocation::from_store(Arc::new(clean.clone()), "t", "memory://t");
    Table::create(loc, "t", schema(), options()).await.unwrap();
    let k_max = clean.ops();
    for k in 1..=k_max {
        for faults in scenarios(k) {
            let store = FaultStore::new(Arc::new(InMemory::new()));
            let loc = StorageLocation::from_store(Arc::new(store.clone()), "t", "memory://t");
            store.arm_all(&faults);
            let created = Table::create(loc.clone(), "t", schema(), options()).await;
            store.disarm();
            match created {
                Err(Error::TableExists { .. }) => {
                    panic!("{faults:?} of {k_max}: 'exists' for a table nobody else created")
                }
                Ok(_) => {
                    Table::open(loc, "t", options()).await.unwrap();
                }
                Err(_) => {}
            }
        }
    }
}
