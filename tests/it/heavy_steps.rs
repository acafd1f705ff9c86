//! Heavy steps (`max-heavy-steps`): however many backfill runs are live,
//! only so many write at once; production never waits for one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use logbook::budget::Waiting;
use logbook::RunClass;

use crate::run_budget::{process, world};

/// Eight backfill steps (each its own handle, as separate processes are)
/// race under `max-heavy-steps 2`, three times each: never more than 2
/// under way, every one gets through, and none is left held.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backfill_heavy_steps_never_exceed_the_limit() {
    let (store, clock) = world();
    process(&store, &clock)
        .set_run_budget(|b| b.max_heavy_steps = Some(2))
        .await
        .unwrap();
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..8 {
        let wh = process(&store, &clock);
        let (holding, most, done) = (holding.clone(), most.clone(), done.clone());
        tasks.spawn(async move {
            for i in 0..3 {
                let what = format!("step {c}.{i}");
                let step = wh
                    .heavy_step(RunClass::Backfill, &what, |why| {
                        assert!(
                            matches!(why, Waiting::Heavy { capacity: 2, held } if held.len() <= 2),
                            "{why}"
                        );
                    })
                    .await
                    .unwrap();
                assert!(step.holds_slot());
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                step.end().await;
                done.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "never full, or overfull");
    assert_eq!(done.load(Ordering::SeqCst), 24);
    let live = process(&store, &clock).live_runs().await.unwrap();
    assert!(live.heavy.is_empty(), "{:?}", live.heavy);
}

/// A warehouse under `max-heavy-steps 1` whose one slot a backfill step
/// of the returned handle holds.
async fn one_slot_held(
    what: &str,
) -> (
    Arc<dyn object_store::ObjectStore>,
    Arc<logbook::clock::ManualClock>,
    logbook::Warehouse,
    logbook::budget::HeavyStep,
) {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    wh.set_run_budget(|b| b.max_heavy_steps = Some(1))
        .await
        .unwrap();
    let first = wh
        .heavy_step(RunClass::Backfill, what, |_| {})
        .await
        .unwrap();
    (store, clock, wh, first)
}

/// With every heavy-step slot held: a backfill step waits, saying who
/// holds them, and begins once one ends; a production step begins at once
/// and takes no slot; a run's turn begins its step once.
#[tokio::test]
async fn a_backfill_step_waits_for_a_free_slot_and_production_never_does() {
    let (store, clock, wh, first) = one_slot_held("orders 2026-03-01 (run a)").await;
    let live = wh.live_runs().await.unwrap();
    assert_eq!(live.heavy.len(), 1);
    assert_eq!(live.heavy[0].1.record.what, "orders 2026-03-01 (run a)");

    let production = tokio::time::timeout(
        Duration::from_secs(5),
        wh.heavy_step(RunClass::Production, "orders 2026-03-02 (run p)", |why| {
            panic!("production waited: {why}")
        }),
    )
    .await
    .expect("a production step never waits")
    .unwrap();
    assert!(!production.holds_slot());
    assert_eq!(wh.live_runs().await.unwrap().heavy.len(), 1);

    let heard = Arc::new(Mutex::new(Vec::new()));
    let other = process(&store, &clock);
    let waiting = {
        let heard = heard.clone();
        tokio::spawn(async move {
            other
                .heavy_step(
                    RunClass::Backfill,
                    "orders 2026-03-03 (run b)",
                    move |why| heard.lock().unwrap().push(why.to_string()),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "began while the only slot was held");
    let said = heard.lock().unwrap().first().cloned().unwrap_or_default();
    assert_eq!(
        said,
        "all 1 heavy-step slots are held: orders 2026-03-01 (run a)"
    );
    first.end().await;
    let second = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("began once the slot was free")
        .unwrap()
        .unwrap();
    assert!(second.holds_slot());
    second.end().await;
    production.end().await;
    assert!(wh.live_runs().await.unwrap().heavy.is_empty());
}

/// The steps of one warehouse handle share one slot (a job writing two
/// outputs at once never waits for itself): under `max-heavy-steps 1` a
/// second step of the handle begins at once, another handle's waits, and
/// the slot goes when the handle's last step ends.
#[tokio::test]
async fn the_steps_of_one_handle_share_its_slot() {
    let (store, clock, wh, first) = one_slot_held("a (run 1)").await;
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        wh.heavy_step(RunClass::Backfill, "b (run 2)", |why| {
            panic!("waited for its own handle's slot: {why}")
        }),
    )
    .await
    .expect("a second step of the handle begins at once")
    .unwrap();
    assert!(second.holds_slot());
    let other = process(&store, &clock);
    let waiting = tokio::spawn(async move {
        other
            .heavy_step(RunClass::Backfill, "c (another process)", |_| {})
            .await
    });
    first.end().await;
    assert_eq!(
        wh.live_runs().await.unwrap().heavy.len(),
        1,
        "released while shared"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "another handle began while the slot was held"
    );
    second.end().await;
    let third = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("begins once the handle's last step ended")
        .unwrap()
        .unwrap();
    third.end().await;
    assert!(wh.live_runs().await.unwrap().heavy.is_empty());
}
