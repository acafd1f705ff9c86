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
    let mut stacked = 0;
    for name in CHAIN {
        let t = setup.table(name).await.unwrap();
        for e in t.history().await.unwrap() {
            stacked += e.txn.as_ref().is_some_and(|p| !p.over.is_empty()) as usize;
        }
    }
    eprintln!("stacked parts {stacked}, both {both}");
    assert!(
        stacked_below_won > 0,
        "no round left a loser's part on the winner's: the case was never tested"
    );
    eprintln!("20 rounds: {both} with both publishes landing in turn; {stacked_below_won} heads a loser's part on the winner's");
}
