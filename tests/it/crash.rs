//! Crash at every step: for each operation, count its store operations K,
//! then for every k in 1..=K make operation k fail before or after it takes
//! effect, and check what a user relies on.

use std::sync::Arc;

use chrono::NaiveDate;
use futures::TryStreamExt;
use logbook::clock::SystemClock;
use logbook::lifecycle::{check, CheckDepth};
use logbook::maintenance::{compact, expire, vacuum, CompactOptions, Keep, VacuumOptions};
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
    let t = tiny
        .create_table("t", TableSchema::parse_spec("t", SPEC, "date").unwrap())
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
        .create_table(
            "dim",
            TableSchema::parse_dimension_spec(
                "dim",
                "customer:string,region:string",
                &["customer"],
            )
            .unwrap(),
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
    }
}

fn sweep() -> VacuumOptions {
    VacuumOptions {
        retention_ms: 0,
        force: true,
        dry_run: false,
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
    }
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
        for fault in [Fault::Before, Fault::After] {
            let what = format!("{op:?}, {fault:?} op {k} of {k_max}");
            let w = world().await;
            let earlier = (history(&w, "t").await, history(&w, "dim").await);
            w.faults.arm(k, fault);
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
