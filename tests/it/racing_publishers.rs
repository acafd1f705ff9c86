//! Two publishers racing for one publish number over the same tables:
//! their parts land at once, on each other's where they meet (never
//! waiting for each other), and the one decision picks exactly one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use logbook::{Error, RunInfo, TableSchema, Warehouse};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::*;
use crate::fault_store::FaultStore;
use crate::multi_publish::{day, one_generation, warehouse_on, CHAIN};

/// Stage generation `generation` of date 0 in every table of the chain,
/// under stage `generation`.
async fn stage_generation(wh: &Warehouse, generation: &str) {
    for name in CHAIN {
        let stage = wh
            .table(name)
            .await
            .unwrap()
            .stage(generation)
            .await
            .unwrap();
        let mut w = stage
            .replace_partition(day(0), RunInfo::new(generation))
            .await
            .unwrap();
        w.write(&batch(day(0), 0..3, generation)).await.unwrap();
        w.commit().await.unwrap();
    }
}

/// Twenty rounds of two publishers (two handles, as two processes) of two
/// stages over the same three tables. Each round: at least one succeeds,
/// the other fails only because the number was taken or the winner's
/// part came first; nobody waits for
/// the other (the tables would wait a minute before aborting); the tables
/// agree on the generation of the publish decided last; a reader at the
/// point before the round sees the round before. Parts landed on rival
/// parts: the case where the rival below won reads as the rival's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_publishers_racing_for_one_number_never_wait_and_one_wins() {
    // Random delays of up to 2 ms on every store operation, so the two
    // publishers' operations interleave.
    let store: Arc<dyn ObjectStore> =
        Arc::new(FaultStore::new(Arc::new(InMemory::new())).with_delays(Duration::from_millis(2)));
    let setup = warehouse_on(store.clone(), 60_000);
    for name in CHAIN {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = setup.create_table(name, schema).await.unwrap();
        replace(&t, day(0), 0..3, "g0", "first").await;
    }
    let (one, two) = (
        warehouse_on(store.clone(), 60_000),
        warehouse_on(store.clone(), 60_000),
    );
    let mut last = "g0".to_string();
    let (mut both, mut stacked_below_won) = (0, 0);
    for round in 0..20 {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        stage_generation(&one, &a).await;
        stage_generation(&two, &b).await;
        let before = setup.point().await.unwrap();
        let started = Instant::now();
        // Each on a task of its own (as each in its process).
        let publish = |wh: &Warehouse, stage: &str| {
            let (wh, stage) = (wh.clone(), stage.to_string());
            tokio::spawn(async move { wh.stage(&stage).await.unwrap().publish(true).await })
        };
        let (ra, rb) = (publish(&one, &a), publish(&two, &b));
        let (ra, rb) = (ra.await.unwrap(), rb.await.unwrap());
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "round {round}: a publisher waited for the other"
        );
        let won = match (&ra, &rb) {
            (Ok(x), Ok(y)) => {
                both += 1;
                match x.seq > y.seq {
                    true => &a,
                    false => &b,
                }
            }
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
                // The number was taken, or the winner's part landed before
                // the loser's was built (a conflict: force or not, a
                // commit racing the publish is caught).
                assert!(
                    matches!(
                        e,
                        Error::PublishAborted { .. } | Error::StageConflict { .. }
                    ),
                    "round {round}: {e}"
                );
                if ra.is_ok() {
                    &a
                } else {
                    &b
                }
            }
            (Err(x), Err(y)) => panic!("round {round}: both failed: {x} / {y}"),
        };
        let now = one_generation(&setup, None, &format!("round {round}")).await;
        assert_eq!(&now, won, "round {round}");
        let then = one_generation(&setup, Some(before), &format!("before round {round}")).await;
        assert_eq!(then, last, "round {round}: the point before it");
        last = now;
        // A loser's part on top of the winner's reads as the winner's.
        for name in CHAIN {
            let t = setup.table(name).await.unwrap();
            let head = t.latest().await.unwrap();
            if let Some(part) = head.entry().txn.as_ref() {
                if part.over.iter().any(|o| o.stage == *won) {
                    stacked_below_won += 1;
                }
            }
        }
    }
    assert!(
        stacked_below_won > 0,
        "no round left a loser's part on the winner's: the case was never tested"
    );
    eprintln!("20 rounds: {both} with both publishes landing in turn; {stacked_below_won} heads a loser's part on the winner's");
}

/// Once a publish is decided, each table's part is sealed by a plain
/// entry holding its snapshot: a process opening a table afterwards reads
/// its rows without reading the publish log, and a reader at the point
/// before the publish still steps back over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_part_is_sealed_so_readers_read_no_decision() {
    let counting = Arc::new(crate::counting_store::CountingStore::new(Arc::new(
        InMemory::new(),
    )));
    let store: Arc<dyn ObjectStore> = counting.clone();
    let wh = warehouse_on(store.clone(), 60_000);
    for name in CHAIN {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = wh.create_table(name, schema).await.unwrap();
        replace(&t, day(0), 0..3, "g0", "first").await;
    }
    let before = wh.point().await.unwrap();
    stage_generation(&wh, "g1").await;
    let published = wh.stage("g1").await.unwrap().publish(false).await.unwrap();
    for name in CHAIN {
        let head = wh.table(name).await.unwrap().latest().await.unwrap();
        let part = published.tables[name].version;
        assert_eq!(head.version(), part + 1, "{name}: not sealed");
        assert_eq!(head.entry().operation, logbook::Operation::Seal, "{name}");
        assert!(head.entry().txn.is_none() && head.entry().dates.is_empty());
    }
    counting.take_reads();
    let fresh = warehouse_on(store, 60_000);
    assert_eq!(one_generation(&fresh, None, "after").await, "g1");
    let read = counting.take_reads();
    assert!(
        !read.iter().any(|p| p.contains("_logbook/publishes")),
        "a fresh reader read the publish log: {read:?}"
    );
    assert_eq!(one_generation(&fresh, Some(before), "before").await, "g0");
}

/// A writer that opened a table while its head was an undecided part read
/// the state before it; once the publish commits, the part replaced the
/// writer's date after what the writer saw, so its commit conflicts (its
/// base is the version before the part, not the part).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_begun_on_an_undecided_part_conflicts_with_it_once_committed() {
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let wh = warehouse_on(Arc::new(faults.clone()), 60_000);
    for name in CHAIN {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = wh.create_table(name, schema).await.unwrap();
        replace(&t, day(0), 0..3, "g0", "first").await;
    }
    stage_generation(&wh, "g1").await;
    let opened = Arc::new(std::sync::Mutex::new(None));
    let (writer_wh, slot) = (wh.clone(), opened.clone());
    faults.before_next_create(
        "wh/_logbook/publishes/",
        Box::pin(async move {
            // Every part has landed, undecided: `up`'s head is its part.
            let up = writer_wh.table("up").await.unwrap();
            let mut w = up
                .replace_partition(day(0), RunInfo::new("late-writer"))
                .await
                .unwrap();
            w.write(&batch(day(0), 0..1, "late")).await.unwrap();
            *slot.lock().unwrap() = Some(w);
        }),
    );
    wh.stage("g1").await.unwrap().publish(false).await.unwrap();
    let w = opened.lock().unwrap().take().expect("the hook ran");
    let err = w.commit().await.unwrap_err();
    assert!(
        matches!(err, Error::PartitionConflict { ref table, .. } if table == "up"),
        "{err}"
    );
    assert_eq!(one_generation(&wh, None, "after").await, "g1");
}
