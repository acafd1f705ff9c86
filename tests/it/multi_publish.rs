//! Multi-table publishes: a stage across three tables becomes visible in
//! all of them at once, whatever crashes where, and readers at one
//! warehouse point never see part of it.

use std::sync::{Arc, Mutex};

use chrono::{Days, NaiveDate};
use logbook::clock::SystemClock;
use logbook::publish::WarehousePoint;
use logbook::{Error, ErrorKind, RunInfo, Snapshot, StorageLocation, TableSchema, Warehouse};
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::common::*;
use crate::fault_store::{Fault, FaultStore};

/// The chain: an upstream table, one derived from it, an aggregate of that.
pub const CHAIN: [&str; 3] = ["up", "mid", "agg"];

pub(crate) fn day(i: u64) -> NaiveDate {
    date("2026-03-01").checked_add_days(Days::new(i)).unwrap()
}

/// A warehouse on `store` whose tables wait `wait_ms` for an undecided
/// publish before aborting it.
pub(crate) fn warehouse_on(store: Arc<dyn ObjectStore>, wait_ms: u64) -> Warehouse {
    let loc = StorageLocation::from_store(store, "wh", "memory://wh");
    Warehouse::new(
        loc,
        options()
            .with_clock(Arc::new(SystemClock))
            .with_publish_wait(wait_ms),
    )
}

/// The chain over `dates` days, every date written as generation "old",
/// then re-run in stage `fix` as generation "new".
async fn chain_world(store: Arc<dyn ObjectStore>, dates: u64) -> Warehouse {
    chain_world_with(store, dates, Default::default()).await
}

/// [`chain_world`] with every table created with `properties`.
async fn chain_world_with(
    store: Arc<dyn ObjectStore>,
    dates: u64,
    properties: logbook::TableProperties,
) -> Warehouse {
    let wh = warehouse_on(store, 0);
    for name in CHAIN {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = wh
            .create_table_with_properties(name, schema, properties.clone())
            .await
            .unwrap();
        for i in 0..dates {
            replace(&t, day(i), 0..3, "old", &format!("old-{i}")).await;
        }
    }
    for name in CHAIN {
        let stage = wh.table(name).await.unwrap().stage("fix").await.unwrap();
        for i in 0..dates {
            let mut w = stage
                .replace_partition(day(i), RunInfo::new(format!("new-{i}")))
                .await
                .unwrap();
            w.write(&batch(day(i), 0..3, "new")).await.unwrap();
            w.commit().await.unwrap();
        }
    }
    wh
}

/// The first date tests write outside the stage (production and later
/// commits): [`generations`] leaves them out.
pub(crate) fn outside(i: u64) -> NaiveDate {
    day(40 + i)
}

/// The generation ("old"/"new") of every staged date of `snap`, from its
/// rows.
pub(crate) async fn generations(snap: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for p in snap.partitions().await.unwrap() {
        if p.date >= outside(0) {
            continue;
        }
        for (_, name) in rows(snap, p.date).await {
            out.push(name.split('-').next().unwrap().to_string());
        }
    }
    out
}

/// The one generation the three tables show at `point` (each read at its
/// head, stepped back to the point), or a panic naming the mix.
pub(crate) async fn one_generation(
    wh: &Warehouse,
    point: Option<WarehousePoint>,
    what: &str,
) -> String {
    let mut seen = Vec::new();
    for name in CHAIN {
        let t = wh.table(name).await.unwrap();
        let snap = match point {
            Some(p) => t.at_point(p).await.unwrap(),
            None => t.latest().await.unwrap(),
        };
        seen.push((name, generations(&snap).await));
    }
    let all: std::collections::BTreeSet<String> =
        seen.iter().flat_map(|(_, g)| g.iter().cloned()).collect();
    assert_eq!(all.len(), 1, "{what}: a mixed warehouse: {seen:?}");
    all.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_tables_over_30_dates_publishes_as_one() {
    // Each table keeps a Delta mirror: each part is mirrored once decided.
    let wh = chain_world_with(Arc::new(InMemory::new()), 30, delta_mirror()).await;
    let staged = wh.stage("fix").await.unwrap();
    assert_eq!(staged.stages().len(), 3);
    let diff = staged.diff().await.unwrap();
    assert_eq!(diff.keys().collect::<Vec<_>>(), vec!["agg", "mid", "up"]);
    assert!(diff.values().all(|d| d.len() == 30));
    assert_eq!(one_generation(&wh, None, "before").await, "old");

    let published = staged.publish(false).await.unwrap();
    assert_eq!(published.seq, Some(0));
    assert_eq!(published.tables.len(), 3);
    assert_eq!(one_generation(&wh, None, "after").await, "new");
    let point = wh.point().await.unwrap();
    assert_eq!(point.seq(), Some(0));
    assert_eq!(
        one_generation(&wh, Some(point), "at the point").await,
        "new"
    );
    assert_eq!(
        one_generation(
            &wh,
            Some(WarehousePoint::before_any()),
            "before any publish"
        )
        .await,
        "old",
        "a reader at an earlier point steps back over the publish"
    );
    // The stage is gone everywhere; publishing again has nothing to do.
    assert!(wh.stage("fix").await.unwrap().stages().is_empty());
    // Each part's entry reads as the commit it is, with its dates (the
    // head after it is its seal: `racing_publishers.rs`).
    let up = wh.table("up").await.unwrap();
    let part = published.tables["up"].version;
    let history = up.history().await.unwrap();
    let entry = history.iter().find(|e| e.version == part).unwrap().clone();
    assert_eq!(entry.dates.len(), 30);
    assert_eq!(entry.publish.map(|m| m.seq), Some(0));
    for name in CHAIN {
        crate::mirror::assert_mirrors(&wh.table(name).await.unwrap(), 0).await;
    }
    // A single-table commit after it builds on the published state.
    replace(&up, outside(0), 0..1, "later", "later-40").await;
    let latest = up.latest().await.unwrap();
    assert_eq!(latest.partitions().await.unwrap().len(), 31);
    assert_eq!(generations(&latest).await, vec!["new"; 90]);
}

/// Publishing stage `fix` (not forced) fails: its error.
async fn publish_fails(wh: &Warehouse) -> Error {
    let stage = wh.stage("fix").await.unwrap();
    stage.publish(false).await.unwrap_err()
}

/// A copy of every object of `from` in a new in-memory store: one world
/// built once, faulted many times.
async fn copy_of(from: &InMemory) -> Arc<InMemory> {
    let to = Arc::new(InMemory::new());
    let objects: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(from.list(None))
        .await
        .unwrap();
    for o in objects {
        let bytes = from.get(&o.location).await.unwrap().bytes().await.unwrap();
        to.put(&o.location, bytes.into()).await.unwrap();
    }
    to
}

/// A crash at every store operation of a three-table publish, before it
/// takes effect and after (the caller sees an error), and a create that
/// landed but answers "exists": each table is wholly old or wholly new
/// and all agree, before and after recovery (publishing again), which
/// always ends all new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_step_of_a_publish_leaves_every_table_old_or_every_table_new() {
    let template = Arc::new(InMemory::new());
    chain_world(template.clone(), 30).await;

    // The clean run: how many operations the publish takes.
    let faults = FaultStore::new(copy_of(&template).await);
    let wh = warehouse_on(Arc::new(faults.clone()), 0);
    let staged = wh.stage("fix").await.unwrap();
    faults.disarm();
    staged.publish(false).await.unwrap();
    let k_max = faults.ops();
    assert!(k_max > 20, "{k_max}");

    let (mut injected, mut outcomes) = (0, [0usize; 2]);
    for k in 1..=k_max {
        for fault in [
            vec![(k, Fault::Before)],
            vec![(k, Fault::After)],
            vec![(k, Fault::Exists), (k + 1, Fault::Before)],
        ] {
            let what = format!("{fault:?} of {k_max} operations");
            let faults = FaultStore::new(copy_of(&template).await);
            let wh = warehouse_on(Arc::new(faults.clone()), 0);
            let staged = wh.stage("fix").await.unwrap();
            faults.arm_all(&fault);
            let result = staged.publish(false).await;
            injected += usize::from(faults.disarm());
            let now = one_generation(&wh, None, &what).await;
            let at_point = one_generation(&wh, Some(wh.point().await.unwrap()), &what).await;
            assert_eq!(now, at_point, "{what}");
            if result.is_ok() {
                assert_eq!(now, "new", "{what}: acknowledged, so visible");
            }
            outcomes[usize::from(now == "new")] += 1;
            // Recovery: publish again (a dead attempt of the same stage is
            // aborted at once), or find it published.
            match wh.stage("fix").await.unwrap() {
                s if s.stages().is_empty() => assert_eq!(now, "new", "{what}"),
                s => {
                    s.publish(false)
                        .await
                        .unwrap_or_else(|e| panic!("{what}: publishing again: {e}"));
                }
            }
            assert_eq!(one_generation(&wh, None, &what).await, "new", "{what}");
            // Every table still takes a plain commit (no part left undecided).
            for name in CHAIN {
                let t = wh.table(name).await.unwrap();
                replace(&t, outside(1), 0..1, "later", "later-50").await;
            }
        }
    }
    assert!(injected > k_max, "faults fired: {injected}");
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_write_after_the_stage_began_refuses_the_whole_publish() {
    let wh = chain_world(Arc::new(InMemory::new()), 5).await;
    let mid = wh.table("mid").await.unwrap();
    replace(&mid, day(3), 0..3, "prod", "nightly-3").await;
    let versions = |wh: Warehouse| async move {
        let mut v = Vec::new();
        for name in CHAIN {
            v.push(
                wh.table(name)
                    .await
                    .unwrap()
                    .latest_version()
                    .await
                    .unwrap(),
            );
        }
        v
    };
    let before = versions(wh.clone()).await;
    let err = publish_fails(&wh).await;
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(
        matches!(&err, Error::StageConflict { table, date, .. } if table == "mid" && *date == day(3)),
        "{err}"
    );
    assert_eq!(versions(wh.clone()).await, before, "nothing was committed");
    assert_eq!(
        generations(&wh.table("up").await.unwrap().latest().await.unwrap()).await[0],
        "old"
    );
}

/// The production write lands while the publish runs, after the first
/// table's part: the second part's commit finds it, and the parts that
/// landed are aborted, never shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_write_racing_the_publish_aborts_the_parts_that_landed() {
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let wh = chain_world(Arc::new(faults.clone()), 5).await;
    let staged = wh.stage("fix").await.unwrap();
    // Parts go in name order: agg, mid, up. Before mid's part is created,
    // production replaces one of its staged dates.
    let racer = wh.clone();
    faults.before_next_create(
        "mid/_logbook/log/",
        Box::pin(async move {
            let mid = racer.table("mid").await.unwrap();
            replace(&mid, day(2), 0..3, "prod", "nightly-2").await;
        }),
    );
    let err = staged.publish(false).await.unwrap_err();
    assert!(
        matches!(&err, Error::StageConflict { table, .. } if table == "mid"),
        "{err}"
    );
    let agg = wh.table("agg").await.unwrap();
    let head = agg.latest().await.unwrap();
    let part = head.entry().txn.clone().expect("agg's part landed");
    assert_eq!(part.state, logbook::format::TxnState::Void);
    assert_eq!(generations(&head).await, vec!["old"; 15]);
    let decision = wh.publish_decision(part.seq).await.unwrap().unwrap();
    assert_eq!(decision.outcome, logbook::publish::Outcome::Aborted);
    // A later commit to agg builds on the old state, not the aborted part.
    replace(&agg, outside(0), 0..1, "later", "later-9").await;
    let latest = agg.latest().await.unwrap();
    assert_eq!(latest.partitions().await.unwrap().len(), 6);
    assert_eq!(generations(&latest).await, vec!["old"; 15]);
}

/// What a reader saw of a table at a point.
type SeenAt = (WarehousePoint, Vec<String>);

/// A reader that takes its point before the decision and reads one table
/// before it and another after sees neither table published; a reader of
/// each table's head alone would have seen a mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_at_one_point_never_sees_part_of_a_publish() {
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let wh = chain_world(Arc::new(faults.clone()), 2).await;
    let seen: Arc<Mutex<Option<SeenAt>>> = Default::default();
    let (reader, slot) = (wh.clone(), seen.clone());
    faults.before_next_create(
        "wh/_logbook/publishes/",
        Box::pin(async move {
            // Every part has landed; the decision is next.
            let point = reader.point().await.unwrap();
            let up = reader
                .table("up")
                .await
                .unwrap()
                .at_point(point)
                .await
                .unwrap();
            *slot.lock().unwrap() = Some((point, generations(&up).await));
        }),
    );
    wh.stage("fix").await.unwrap().publish(false).await.unwrap();
    let (point, up) = seen.lock().unwrap().take().expect("the hook ran");
    assert_eq!(up, vec!["old"; 6]);
    let agg = wh.table("agg").await.unwrap();
    assert_eq!(
        generations(&agg.at_point(point).await.unwrap()).await,
        vec!["old"; 6]
    );
    assert_eq!(
        generations(&agg.latest().await.unwrap()).await,
        vec!["new"; 6],
        "read alone, the decided part shows"
    );
}

/// Publish generation after generation of `day(0)` in the three tables
/// (rows named `gen<N>-<id>`, run `gen<N>`) until `done`; returns how many.
async fn publish_generations_until(wh: &Warehouse, done: &std::sync::atomic::AtomicBool) -> usize {
    let mut round = 0;
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let stage = format!("gen{round}");
        for name in CHAIN {
            let s = wh.table(name).await.unwrap().stage(&stage).await.unwrap();
            let mut w = s
                .replace_partition(day(0), RunInfo::new(format!("gen{round}")))
                .await
                .unwrap();
            w.write(&batch(day(0), 0..3, &format!("gen{round}")))
                .await
                .unwrap();
            w.commit().await.unwrap();
        }
        wh.stage(&stage).await.unwrap().publish(true).await.unwrap();
        round += 1;
    }
    round
}

/// Readers racing publishes: every read of the three tables at one point
/// sees one generation, over 10,000 reads while publishes keep landing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_reads_racing_publishes_see_no_mix() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let wh = chain_world(Arc::new(InMemory::new()), 1).await;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (wh, done) = (wh.clone(), done.clone());
        tokio::spawn(async move {
            let mut tables = Vec::new();
            for name in CHAIN {
                tables.push(wh.table(name).await.unwrap());
            }
            let (mut mixed, mut generations) = (0usize, std::collections::BTreeSet::new());
            for _ in 0..10_000 {
                let point = wh.point().await.unwrap();
                let mut runs = std::collections::BTreeSet::new();
                for t in &tables {
                    let snap: Snapshot = t.at_point(point).await.unwrap();
                    let p = snap.partition(day(0)).await.unwrap().unwrap();
                    runs.insert(p.run.unwrap().run_id);
                }
                mixed += usize::from(runs.len() != 1);
                generations.extend(runs);
            }
            done.store(true, Ordering::SeqCst);
            (mixed, generations.len())
        })
    };
    let round = publish_generations_until(&wh, &done).await;
    let (mixed, seen) = reader.await.unwrap();
    assert_eq!(mixed, 0, "{mixed} of 10,000 reads saw part of a publish");
    assert!(
        seen > 2 && round > 2,
        "the reads raced {round} publishes, saw {seen} generations"
    );
}

/// A publisher that dies after its parts landed leaves them undecided:
/// readers see none of it, and a commit to one of the tables waits, then
/// aborts the publish and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_aborts_a_publish_whose_publisher_died() {
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let store: Arc<dyn ObjectStore> = Arc::new(faults.clone());
    chain_world(store.clone(), 2).await;
    let wh = warehouse_on(store, 200);
    faults.fail_next_create_under("wh/_logbook/publishes/", Fault::Before);
    let err = publish_fails(&wh).await;
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert_eq!(one_generation(&wh, None, "undecided").await, "old");
    let up = wh.table("up").await.unwrap();
    let started = std::time::Instant::now();
    replace(&up, outside(0), 0..1, "prod", "nightly-5").await;
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(200),
        "it waited first"
    );
    assert_eq!(
        wh.publish_decision(0).await.unwrap().unwrap().outcome,
        logbook::publish::Outcome::Aborted
    );
    // The stage is still there; publishing again takes the next number.
    let again = wh.stage("fix").await.unwrap().publish(false).await.unwrap();
    assert_eq!(again.seq, Some(1));
    assert_eq!(one_generation(&wh, None, "published again").await, "new");
}

/// The chain re-run in one stage: `orders_clean` restaged, then
/// `revenue` (reads it) and `revenue_total` (reads that) re-run in the
/// stage read the staged rows; `plan` inside the stage lists what the
/// restaged input made stale; once published as one, every date is
/// Complete on the main line (the runs read exactly what was published).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_rerun_in_one_stage_reads_staged_inputs_and_publishes_fresh() {
    use logbook::lifecycle::{plan, status, status_in, PartitionState, Selection};
    use logbook::query::Run;
    let wh = warehouse_on(Arc::new(InMemory::new()), 0);
    let orders = wh
        .create_table(
            "orders_clean",
            TableSchema::parse_spec("orders_clean", SPEC, "date").unwrap(),
        )
        .await
        .unwrap();
    for (name, spec) in [
        ("revenue", "date:date,n:int64"),
        ("revenue_total", "date:date,total:int64"),
    ] {
        wh.create_table(name, TableSchema::parse_spec(name, spec, "date").unwrap())
            .await
            .unwrap();
    }
    let revenue =
        "SELECT date, count(*) AS n FROM orders_clean WHERE date = logical_date() GROUP BY date";
    let total =
        "SELECT date, sum(n) AS total FROM revenue WHERE date = logical_date() GROUP BY date";
    let run = |target: &'static str, i: u64, query: &'static str, stage: Option<&str>| {
        let mut r = Run::new(&wh, target, day(i)).code_version("v1");
        if let Some(s) = stage {
            r = r.stage(s);
        }
        async move { r.sql(query).await.unwrap() }
    };
    for i in 0..3 {
        replace(&orders, day(i), 0..3, "old", &format!("old-{i}")).await;
        run("revenue", i, revenue, None).await;
        run("revenue_total", i, total, None).await;
    }
    let last = day(2);
    // The fix: orders_clean re-run in stage `fix` with 5 rows a day.
    let stage = orders.stage("fix").await.unwrap();
    for i in 0..3 {
        let mut w = stage
            .replace_partition(day(i), RunInfo::new(format!("new-{i}")))
            .await
            .unwrap();
        w.write(&batch(day(i), 0..5, "new")).await.unwrap();
        w.commit().await.unwrap();
    }
    let in_fix = status_in(&wh, "revenue", Some("fix"), None, last)
        .await
        .unwrap();
    assert_all(&in_fix, PartitionState::Stale, "revenue in the stage");
    assert_eq!(plan(&in_fix, Selection::Needed).steps.len(), 3);
    let main = status(&wh, "revenue", None, last).await.unwrap();
    assert_all(
        &main,
        PartitionState::Complete,
        "the main line is untouched",
    );
    // Re-run the chain in the stage.
    for i in 0..3 {
        run("revenue", i, revenue, Some("fix")).await;
    }
    let in_fix = status_in(&wh, "revenue_total", Some("fix"), None, last)
        .await
        .unwrap();
    assert_all(&in_fix, PartitionState::Stale, "revenue_total in the stage");
    for i in 0..3 {
        run("revenue_total", i, total, Some("fix")).await;
    }
    for t in ["revenue", "revenue_total"] {
        let s = status_in(&wh, t, Some("fix"), None, last).await.unwrap();
        assert_all(&s, PartitionState::Complete, t);
    }
    // The staged runs read the staged rows, and say so.
    let staged = wh
        .table("revenue_total")
        .await
        .unwrap()
        .existing_stage("fix")
        .await
        .unwrap();
    let p = staged.partitions().await.unwrap().remove(0);
    let input = p.run.inputs.iter().find(|i| i.table == "revenue").unwrap();
    assert_eq!(input.stage.as_deref(), Some("fix"));
    assert_eq!(input.staged.len(), 1);
    let published = wh.stage("fix").await.unwrap().publish(false).await.unwrap();
    assert_eq!(published.tables.len(), 3);
    let rows = logbook::query::sql(
        &logbook::query::session(&wh, Default::default(), None)
            .await
            .unwrap(),
        "SELECT t.total FROM revenue_total t JOIN revenue r USING (date) ORDER BY date",
    )
    .await
    .unwrap()
    .collect()
    .await
    .unwrap();
    let totals = first_i64_column(&rows);
    assert_eq!(totals, vec![5, 5, 5], "computed from the fixed orders");
    for t in ["orders_clean", "revenue", "revenue_total"] {
        let s = status(&wh, t, None, last).await.unwrap();
        assert_all(
            &s,
            PartitionState::Complete,
            &format!("{t} after the publish"),
        );
    }
}

/// Every date of `status` is in `state`.
fn assert_all(
    status: &logbook::lifecycle::TableStatus,
    state: logbook::lifecycle::PartitionState,
    what: &str,
) {
    assert!(
        status.dates.iter().all(|d| d.state == state),
        "{what}: {:?}",
        status.dates
    );
}

fn first_i64_column(batches: &[arrow_array::RecordBatch]) -> Vec<i64> {
    use arrow_array::cast::AsArray;
    batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

/// SQL over the three tables, racing publishes: every query reads them at
/// one warehouse point (the scans, planned after `prepare` took it, use
/// it), so no result mixes generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_joining_the_tables_racing_publishes_sees_no_mix() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let wh = chain_world(Arc::new(InMemory::new()), 1).await;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (wh, done) = (wh.clone(), done.clone());
        tokio::spawn(async move {
            let ctx = logbook::query::session(&wh, Default::default(), None)
                .await
                .unwrap();
            let query = "SELECT count(DISTINCT name) AS n FROM \
                (SELECT name FROM up UNION ALL SELECT name FROM mid UNION ALL SELECT name FROM agg)";
            let mut mixed = 0usize;
            for _ in 0..2_000 {
                let batches = logbook::query::sql(&ctx, query)
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap();
                mixed += usize::from(first_i64_column(&batches) != vec![3]);
            }
            done.store(true, Ordering::SeqCst);
            mixed
        })
    };
    let round = publish_generations_until(&wh, &done).await;
    let mixed = reader.await.unwrap();
    assert_eq!(
        mixed, 0,
        "{mixed} of 2,000 queries saw part of a publish ({round} publishes)"
    );
}
