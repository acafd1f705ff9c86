//! The warehouse's run budget: backfill slots (leases made with
//! put-if-absent) and production first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use logbook::budget::{Entry, SlotLease, Waiting};
use logbook::clock::ManualClock;
use logbook::{Error, ErrorKind, RunClass, RunInfo, StorageLocation, TableSchema, Warehouse};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::common::*;

/// A handle on the warehouse in `store`, as one process would open it,
/// reading `clock`.
pub(crate) fn process(store: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Warehouse {
    let loc = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
    Warehouse::new(loc, options().with_clock(clock.clone()))
}

pub(crate) fn world() -> (Arc<dyn ObjectStore>, Arc<ManualClock>) {
    (
        Arc::new(InMemory::new()),
        Arc::new(ManualClock::new(1_700_000_000_000)),
    )
}

async fn budget(wh: &Warehouse, slots: u32, lease_ms: u64) {
    wh.set_run_budget(|b| {
        b.max_backfill_runs = Some(slots);
        b.lease_ms = lease_ms;
    })
    .await
    .unwrap();
}

async fn take(wh: &Warehouse, what: &str) -> Option<SlotLease> {
    match wh.backfill_gate(None, what).try_enter(None).await.unwrap() {
        Entry::Go(lease) => lease,
        Entry::Wait(why) => panic!("{what} waits: {why}"),
    }
}

/// Twelve claimants (each its own handle, as separate processes are) race
/// for 3 slots, over and over: never more than 3 hold one at once, and
/// every claimant gets its turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_claimants_never_exceed_the_budget() {
    let (store, clock) = world();
    budget(&process(&store, &clock), 3, 60_000).await;
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..12 {
        let (wh, holding, most) = (process(&store, &clock), holding.clone(), most.clone());
        tasks.spawn(async move {
            let mut gate = wh.backfill_gate(None, &format!("claimant {c}"));
            for _ in 0..5 {
                let lease = loop {
                    match gate.try_enter(None).await.unwrap() {
                        Entry::Go(lease) => break lease.expect("the budget limits backfills"),
                        Entry::Wait(Waiting::Slots { capacity, held, .. }) => {
                            assert_eq!(capacity, 3);
                            assert!(held.len() <= 3, "{held:?}");
                            tokio::task::yield_now().await;
                        }
                        Entry::Wait(other) => panic!("{other}"),
                    }
                };
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                lease.ensure_held().await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                lease.release().await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "the budget was never full, or overfull"
    );
    assert!(process(&store, &clock)
        .live_runs()
        .await
        .unwrap()
        .backfill
        .is_empty());
}

/// A holder that stops renewing loses its slot once a claimant has seen it
/// unchanged for the whole lease, on the claimant's clock; a holder that
/// renews keeps it.
#[tokio::test]
async fn an_expired_lease_is_reclaimed_and_a_renewed_one_is_not() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 1, 1_000).await;
    let holder = take(&wh, "holder").await.unwrap();
    let mut claimant = process(&store, &clock).backfill_gate(None, "claimant");
    let waits = |e: Entry| matches!(e, Entry::Wait(Waiting::Slots { .. }));
    // Its first look starts its timing.
    assert!(waits(claimant.try_enter(None).await.unwrap()));
    // The holder renews every 300 ms (under a third of its lease).
    for _ in 0..4 {
        clock.advance(300);
        holder.renew().await.unwrap();
    }
    // 1,200 ms since the claimant's first look, but the lease changed.
    assert!(waits(claimant.try_enter(None).await.unwrap()));
    holder.ensure_held().await.unwrap();
    // The holder stops renewing: a whole lease after the claimant saw the
    // last change, not before, the slot is taken over.
    clock.advance(999);
    assert!(waits(claimant.try_enter(None).await.unwrap()));
    clock.advance(1);
    let taken = match claimant.try_enter(None).await.unwrap() {
        Entry::Go(lease) => lease.unwrap(),
        Entry::Wait(why) => panic!("still waiting: {why}"),
    };
    assert_eq!(taken.ticket().slot, holder.ticket().slot);
    assert_eq!(taken.ticket().generation, holder.ticket().generation + 1);
    let lost = holder.ensure_held().await.unwrap_err();
    assert!(matches!(lost, Error::SlotLost { .. }), "{lost}");
    assert_eq!(lost.kind(), ErrorKind::Transient);
    // The old holder's release does not free the slot it lost.
    holder.release().await;
    let live = wh.live_runs().await.unwrap();
    assert_eq!(live.backfill.len(), 1, "{live:?}");
    assert!(live.backfill[0].1.record.what.contains("claimant"));
    taken.ensure_held().await.unwrap();
}

/// A holder that has not renewed for its whole lease stops by itself, even
/// before anyone took the slot: an observer may already have timed it out.
#[tokio::test]
async fn a_holder_back_from_a_pause_longer_than_its_lease_stops() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 1, 1_000).await;
    let holder = take(&wh, "holder").await.unwrap();
    clock.advance(999);
    holder.ensure_held().await.unwrap();
    clock.advance(1);
    let e = holder.ensure_held().await.unwrap_err();
    assert!(e.to_string().contains("holder"), "{e}");
}

/// A run launched with its runner's slot (the runner paused past its
/// lease, another run took the slot over) commits nothing, says so, and
/// leaves no staged file behind.
#[tokio::test]
async fn a_paused_runners_command_does_not_commit() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 1, 1_000).await;
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = wh.create_table("t", schema).await.unwrap();
    let d = date("2026-03-15");
    let runner = take(&wh, "runner").await.unwrap();
    let mut w = t
        .replace_partition(d, RunInfo::new("backfill-15"))
        .await
        .unwrap()
        .within_slot(runner.ticket());
    w.write(&batch(d, 0..10, "a")).await.unwrap();
    // The runner stops renewing; another runner takes the slot over.
    let mut other = process(&store, &clock).backfill_gate(None, "other runner");
    assert!(matches!(
        other.try_enter(None).await.unwrap(),
        Entry::Wait(_)
    ));
    clock.advance(1_000);
    let other = match other.try_enter(None).await.unwrap() {
        Entry::Go(Some(lease)) => lease,
        e => panic!("{e:?}"),
    };
    let e = w.commit().await.unwrap_err();
    assert!(matches!(e, Error::SlotLost { .. }), "{e}");
    for needle in ["table t", "2026-03-15", "backfill-15", "without committing"] {
        assert!(e.to_string().contains(needle), "{needle:?} not in {e}");
    }
    let head = t.latest().await.unwrap();
    assert_eq!(head.version(), 0, "nothing was committed");
    let data: Vec<_> = store.list(Some(&"wh/t/data".into())).collect().await;
    assert!(data.is_empty(), "staged files left: {data:?}");
    // With the slot its own, the same write commits.
    other.release().await;
    let held = take(&wh, "runner again").await.unwrap();
    let mut w = t
        .replace_partition(d, RunInfo::new("backfill-15b"))
        .await
        .unwrap()
        .within_slot(held.ticket());
    w.write(&batch(d, 0..10, "a")).await.unwrap();
    assert_eq!(w.commit().await.unwrap().version, 1);
}

/// While a production run is announced, no backfill run starts (with or
/// without a slot budget); once it ends, they do. An announcement whose
/// run died stops counting after its lease, and is removed.
#[tokio::test]
async fn production_runs_go_first() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    let d = date("2026-03-15");
    let prod = wh
        .announce_production("revenue", d, "nightly-15", false)
        .await
        .unwrap();
    let mut gate = process(&store, &clock).backfill_gate(Some("orders"), "backfill");
    match gate.try_enter(Some(d)).await.unwrap() {
        Entry::Wait(why @ Waiting::Production(_)) => {
            let said = why.to_string();
            assert!(
                said.contains("revenue") && said.contains("2026-03-15"),
                "{said}"
            );
        }
        other => panic!("{other:?}"),
    }
    prod.end().await;
    assert!(matches!(
        gate.try_enter(Some(d)).await.unwrap(),
        Entry::Go(None)
    ));

    // A production run that died (its announcement never ended).
    budget(&wh, 2, 1_000).await;
    let dead = wh
        .announce_production("revenue", d, "nightly-died", true)
        .await
        .unwrap();
    std::mem::forget(dead);
    assert!(matches!(
        gate.try_enter(Some(d)).await.unwrap(),
        Entry::Wait(Waiting::Production(_))
    ));
    clock.advance(1_000);
    assert!(matches!(
        gate.try_enter(Some(d)).await.unwrap(),
        Entry::Go(Some(_))
    ));
    assert!(
        wh.live_runs().await.unwrap().production.is_empty(),
        "the dead announcement was removed"
    );

    // Production first switched off: the announcement no longer holds it back.
    wh.set_run_budget(|b| b.production_first = false)
        .await
        .unwrap();
    let prod = wh
        .announce_production("revenue", d, "nightly-16", false)
        .await
        .unwrap();
    assert!(matches!(
        gate.try_enter(Some(d)).await.unwrap(),
        Entry::Go(Some(_))
    ));
    // ... but it counts against max-runs: 2 runs at most, 1 production
    // and the backfill slot taken above.
    wh.set_run_budget(|b| b.max_runs = Some(2)).await.unwrap();
    match gate.try_enter(Some(d)).await.unwrap() {
        Entry::Wait(Waiting::Slots {
            capacity: 1,
            production: 1,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    prod.end().await;
}

/// Markers and commits say which class a run is: a write into a stage is
/// a backfill, a write to the main line production unless it says otherwise.
#[tokio::test]
async fn markers_and_commits_record_the_class() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = wh.create_table("t", schema).await.unwrap();
    let (d1, d2, d3) = (date("2026-03-15"), date("2026-03-16"), date("2026-03-17"));
    let mut staged = t
        .stage("fix")
        .await
        .unwrap()
        .replace_partition(d1, RunInfo::new("s"))
        .await
        .unwrap();
    staged.write(&batch(d1, 0..3, "s")).await.unwrap();
    let backfill = RunInfo {
        class: Some(RunClass::Backfill),
        ..RunInfo::new("b")
    };
    let mut b = t.replace_partition(d2, backfill).await.unwrap();
    b.write(&batch(d2, 0..3, "b")).await.unwrap();
    let mut p = t.replace_partition(d3, RunInfo::new("p")).await.unwrap();
    p.write(&batch(d3, 0..3, "p")).await.unwrap();
    // Live: each marker says its class.
    let status = logbook::lifecycle::status_asked(&wh, "t", None, Some(d1), d3)
        .await
        .unwrap();
    let class_of = |day| {
        let d = status.dates.iter().find(|s| s.date == day).unwrap();
        d.runs.iter().map(|r| r.marker.class).collect::<Vec<_>>()
    };
    assert_eq!(class_of(d1), [Some(RunClass::Backfill)]);
    assert_eq!(class_of(d2), [Some(RunClass::Backfill)]);
    assert_eq!(class_of(d3), [Some(RunClass::Production)]);
    staged.commit().await.unwrap();
    b.commit().await.unwrap();
    p.commit().await.unwrap();
    // Committed: the partition's run says it.
    t.stage("fix").await.unwrap().publish(false).await.unwrap();
    let head = t.latest().await.unwrap();
    for (day, class) in [
        (d1, RunClass::Backfill),
        (d2, RunClass::Backfill),
        (d3, RunClass::Production),
    ] {
        let run = head.partition(day).await.unwrap().unwrap().run.unwrap();
        assert_eq!(run.class, Some(class), "{day}");
    }
}

/// Bad budgets are refused and leave the budget as it was.
#[tokio::test]
async fn a_budget_of_zero_is_refused() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 2, 30_000).await;
    for bad in [
        Box::new(|b: &mut logbook::budget::RunBudget| b.max_backfill_runs = Some(0))
            as Box<dyn Fn(&mut _)>,
        Box::new(|b: &mut logbook::budget::RunBudget| b.max_runs = Some(0)),
        Box::new(|b: &mut logbook::budget::RunBudget| b.max_heavy_steps = Some(0)),
        Box::new(|b: &mut logbook::budget::RunBudget| b.lease_ms = 10),
    ] {
        let e = wh.set_run_budget(|b| bad(b)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("at least"), "{e}");
    }
    let kept = wh.run_budget().await.unwrap();
    assert_eq!(kept.max_backfill_runs, Some(2));
    assert_eq!(kept.lease_ms, 30_000);
}

/// Every held slot counts against the budget, also one numbered above a
/// budget that shrank: a freed lower slot is not handed out while the
/// higher one is still held.
#[tokio::test]
async fn slots_held_above_a_shrunk_budget_still_count() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 2, 60_000).await;
    let first = take(&wh, "first").await.unwrap();
    let second = take(&wh, "second").await.unwrap();
    assert_eq!((first.ticket().slot, second.ticket().slot), (0, 1));
    wh.set_run_budget(|b| b.max_backfill_runs = Some(1))
        .await
        .unwrap();
    first.release().await;
    let mut gate = process(&store, &clock).backfill_gate(None, "third");
    match gate.try_enter(None).await.unwrap() {
        Entry::Wait(Waiting::Slots {
            capacity: 1, held, ..
        }) => {
            assert_eq!(held.len(), 1);
            assert!(held[0].what.contains("second"));
        }
        other => panic!("{other:?}"),
    }
    second.release().await;
    match gate.try_enter(None).await.unwrap() {
        Entry::Go(Some(lease)) => assert_eq!(lease.ticket().slot, 0),
        other => panic!("{other:?}"),
    }
}

/// A holder renewing in the background learns that it lost the slot (a
/// claimant took it over after watching it unchanged for a lease): what
/// the runner stops its command on.
#[tokio::test]
async fn a_renewing_holder_learns_it_lost_the_slot() {
    let (store, clock) = world();
    let wh = process(&store, &clock);
    budget(&wh, 1, 1_000).await;
    let holder = take(&wh, "holder").await.unwrap().keep_renewed();
    let lost = holder.lost();
    let mut claimant = process(&store, &clock).backfill_gate(None, "claimant");
    assert!(matches!(
        claimant.try_enter(None).await.unwrap(),
        Entry::Wait(_)
    ));
    clock.advance(1_000);
    let taken = loop {
        match claimant.try_enter(None).await.unwrap() {
            Entry::Go(Some(lease)) => break lease,
            // The holder renewed meanwhile (its keeper ticks every 333 ms
            // of real time): watch it for a lease again.
            _ => clock.advance(1_000),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("the holder's keeper found the successor");
    assert!(holder.ensure_held().await.is_err());
    taken.ensure_held().await.unwrap();
}
