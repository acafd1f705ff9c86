//! A commit's work must not grow with history: count store operations.

use std::collections::BTreeMap;
use std::sync::Arc;

use logbook::{StorageLocation, Table, TableSchema};
use object_store::memory::InMemory;

use crate::common::*;
use crate::counting_store::CountingStore;

async fn commit_ops(t: &Table, store: &CountingStore, run: &str) -> BTreeMap<&'static str, usize> {
    store.take();
    replace(t, date("2026-06-15"), 0..100, run, run).await;
    store.take()
}

async fn open_ops(loc: &StorageLocation, store: &CountingStore) -> BTreeMap<&'static str, usize> {
    store.take();
    let t = Table::open(loc.clone(), "orders", options()).await.unwrap();
    let snap = t.latest().await.unwrap();
    snap.partition(date("2026-06-15")).await.unwrap().unwrap();
    store.take()
}

/// An empty table `orders` on a counting `memory://` store.
async fn counted_table() -> (Arc<CountingStore>, StorageLocation, Table) {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(store.clone(), "wh/orders", "memory://wh/orders");
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = Table::create(loc.clone(), "orders", schema, options())
        .await
        .unwrap();
    (store, loc, t)
}

#[tokio::test]
async fn commit_and_open_cost_the_same_at_history_10_and_1000() {
    let (store, loc, t) = counted_table().await;
    let base = date("2026-01-01");
    // History of 10 commits over 10 dates in different months.
    for i in 0..9u64 {
        replace(
            &t,
            base + chrono::Days::new(i * 31),
            0..3,
            "h",
            &format!("h{i}"),
        )
        .await;
    }
    let at_10 = commit_ops(&t, &store, "c10").await;
    let open_10 = open_ops(&loc, &store).await;
    for i in 10..1000u64 {
        replace(
            &t,
            base + chrono::Days::new(i % 97 * 31),
            0..3,
            "h",
            &format!("h{i}"),
        )
        .await;
    }
    assert!(t.latest_version().await.unwrap() >= 1000);
    let at_1000 = commit_ops(&t, &store, "c1000").await;
    let open_1000 = open_ops(&loc, &store).await;
    assert_eq!(at_10, at_1000, "commit operations grew with history");
    assert_eq!(open_10, open_1000, "open operations grew with history");
    // 14 for the write and commit (format 2: the month, its span, the root,
    // the entry, the hint...), plus the intent marker's put and delete.
    assert!(
        at_10.values().sum::<usize>() <= 16,
        "a commit costs {at_10:?}"
    );
    assert!(
        !at_10.contains_key("list") && !open_10.contains_key("list"),
        "listing the log"
    );
}

/// A generated table of `partitions` dates and `commits` commits; the
/// operations of a commit on it and of an open reading one partition.
/// Also the bytes the commit put.
async fn generated_ops(
    format: u32,
    partitions: u64,
    commits: u64,
) -> (
    BTreeMap<&'static str, usize>,
    BTreeMap<&'static str, usize>,
    usize,
) {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(store.clone(), "wh/orders", "memory://wh/orders");
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    // The last generated date is the one `commit_ops` replaces.
    let first = date("2026-06-15") - chrono::Days::new(partitions - 1);
    let spec = crate::synthetic::Synthetic {
        format,
        first,
        partitions,
        commits,
        rows_per_partition: 10,
        schedule_start: None,
        inputs: None,
    };
    crate::synthetic::generate(&loc, schema, &spec).await;
    let t = Table::open(loc.clone(), "orders", options()).await.unwrap();
    // The handle's first commit also checks put-if-absent; count the second.
    replace(&t, date("2026-06-15"), 0..5, "warm", "warm").await;
    store.take_bytes_put();
    let commit = commit_ops(&t, &store, "measured").await;
    let bytes = store.take_bytes_put();
    let open = open_ops(&loc, &store).await;
    let snap = t.latest().await.unwrap();
    assert_eq!(snap.partitions().await.unwrap().len() as u64, partitions);
    assert_eq!(
        snap.partition(date("2026-06-15"))
            .await
            .unwrap()
            .unwrap()
            .rows,
        100
    );
    (commit, open, bytes)
}

/// Format 2: a commit and an open cost the same store operations at 10
/// partitions and 100,000 (274 years of days, 55 spans), after 10 and
/// 100,000 commits, and the commit's puts stay small. In format 1 the
/// operations were equal too, but the root listing every month made each
/// commit write a root that grows with the table's age.
#[tokio::test]
async fn commit_and_open_cost_the_same_at_10_and_100_000_partitions() {
    let (commit_10, open_10, _) = generated_ops(2, 10, 10).await;
    let (commit_100k, open_100k, bytes_100k) = generated_ops(2, 100_000, 100_000).await;
    assert_eq!(commit_10, commit_100k);
    assert_eq!(open_10, open_100k);
    // The month (30 partitions), its span (60 months), the root (55
    // spans), the entry, the data file, the marker.
    assert!(bytes_100k < 64 << 10, "a commit put {bytes_100k} bytes");
    let (_, _, format_1) = generated_ops(1, 100_000, 10).await;
    assert!(format_1 > 256 << 10, "format 1 put {format_1} bytes");
}

/// `n` dimension commits moving customer `c-1` between `regions`, one a
/// day from `from`, as runs `<run>-<i>`.
async fn load(customers: &Table, from: chrono::NaiveDate, n: u64, regions: [&str; 2], run: &str) {
    for i in 0..n {
        let rows = crate::dimension::states(&[("c-1", regions[i as usize % 2])]);
        let effective = from + chrono::Days::new(i);
        customers
            .apply_changes(
                effective,
                &[rows],
                logbook::RunInfo::new(format!("{run}-{i}")),
            )
            .await
            .unwrap();
    }
}

/// Store operations and entries listed by `status` over 30 dates whose runs read `customers`
/// at its latest version after `history` dimension commits, then `later`
/// commits changing it from 2027 on (which leaves every date complete).
async fn status_ops(history: u64, later: u64) -> (BTreeMap<&'static str, usize>, usize) {
    use logbook::format::InputRead;
    use logbook::{RunInfo, Warehouse};
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let wh = Warehouse::new(
        StorageLocation::from_store(store.clone(), "wh", "memory://wh"),
        options(),
    );
    let dim = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let customers = wh.create_table("customers", dim).await.unwrap();
    load(
        &customers,
        date("2025-01-01"),
        history,
        ["north", "south"],
        "load",
    )
    .await;
    let read = customers.latest_version().await.unwrap();
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = wh.create_table("orders", schema).await.unwrap();
    let first = date("2026-03-01");
    for i in 0..30u64 {
        let d = first + chrono::Days::new(i);
        let mut w = t
            .replace_partition(d, RunInfo::new(format!("r{i}")))
            .await
            .unwrap();
        w.record_inputs(vec![InputRead {
            table: "customers".into(),
            version: read,
            dates: None,
            asked: Vec::new(),
            dimension: true,
            as_of: vec![d],
            ..Default::default()
        }]);
        w.write(&batch(d, 0..3, "x")).await.unwrap();
        w.commit().await.unwrap();
    }
    load(
        &customers,
        date("2027-01-01"),
        later,
        ["east", "west"],
        "later",
    )
    .await;
    counted_status(&wh, &store, None, first + chrono::Days::new(29)).await
}

/// Store operations and entries listed by `status` of `orders` from
/// `from` to `to`, all 30 dates complete.
async fn counted_status(
    wh: &logbook::Warehouse,
    store: &CountingStore,
    from: Option<chrono::NaiveDate>,
    to: chrono::NaiveDate,
) -> (BTreeMap<&'static str, usize>, usize) {
    store.take();
    store.take_listed();
    let s = logbook::lifecycle::status(wh, "orders", from, to)
        .await
        .unwrap();
    assert_eq!(s.count(logbook::lifecycle::PartitionState::Complete), 30);
    (store.take(), store.take_listed())
}

/// `status` reads a dimension's commits since the runs read it, not its
/// whole log: 10 and 300 commits of history cost the same.
#[tokio::test]
async fn status_costs_the_same_at_dimension_history_10_and_300() {
    let at_10 = status_ops(10, 0).await;
    let at_300 = status_ops(300, 0).await;
    assert_eq!(at_10, at_300);
}

/// Format 2: `status` judges a dimension read from the dimension's change
/// index, not its log since the read: 10 and 300 dimension commits after
/// the runs read it cost the same (8 GETs; reading the log, 19 and 309).
#[tokio::test]
async fn status_costs_the_same_at_10_and_300_dimension_commits_since_the_reads() {
    let after_10 = status_ops(10, 10).await;
    let after_300 = status_ops(10, 300).await;
    assert_eq!(after_10, after_300);
}

/// Store operations and entries listed by `status` over the last 30 of `partitions` generated
/// dates (format 2, the schedule starting at the first; without one, the
/// first partition's span and month are read too).
async fn generated_status_ops(partitions: u64) -> (BTreeMap<&'static str, usize>, usize) {
    let (store, wh, last) = generated(partitions, partitions + 1, true).await;
    counted_status(&wh, &store, Some(last - chrono::Days::new(29)), last).await
}

/// A warehouse holding `orders`, generated in format 2 with `partitions`
/// dates up to the returned last one and `commits` log entries (its
/// schedule starting at the first date if `scheduled`), behind a counting
/// store.
async fn generated(
    partitions: u64,
    commits: u64,
    scheduled: bool,
) -> (Arc<CountingStore>, logbook::Warehouse, chrono::NaiveDate) {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let root = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
    let last = date("2026-06-15");
    let first = last - chrono::Days::new(partitions - 1);
    let spec = crate::synthetic::Synthetic {
        format: 2,
        first,
        partitions,
        commits,
        rows_per_partition: 10,
        schedule_start: scheduled.then_some(first),
        inputs: None,
    };
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    crate::synthetic::generate(&root.child("orders").unwrap(), schema, &spec).await;
    (store, logbook::Warehouse::new(root, options()), last)
}

/// Store operations, entries listed and files deleted by a vacuum one
/// replace and one expiry after the last, on a generated table of
/// `partitions` dates.
async fn generated_vacuum_ops(partitions: u64) -> (BTreeMap<&'static str, usize>, usize, usize) {
    use logbook::maintenance::{vacuum, VacuumOptions};
    let (store, wh, last) = generated(partitions, 2, false).await;
    let t = wh.table("orders").await.unwrap();
    let routine = VacuumOptions {
        full: false,
        ..sweep()
    };
    let first = vacuum(&t, routine).await.unwrap();
    assert!(first.listed_everything, "a new ledger lists every file");
    replace(&t, last, 0..3, "again", "again").await;
    logbook::maintenance::expire(&t, logbook::maintenance::Keep::Last(1))
        .await
        .unwrap();
    store.take();
    store.take_listed();
    let report = vacuum(&t, routine).await.unwrap();
    assert!(!report.listed_everything);
    let measured = (store.take(), store.take_listed(), report.deleted.len());
    // The next vacuum finds the deleted files gone and forgets them: the
    // one after asks about 5 files fewer.
    let heads = || async {
        vacuum(&t, routine).await.unwrap();
        store.take()["head"]
    };
    let (next, after) = (heads().await, heads().await);
    assert_eq!(next - after, 5, "released entries forgotten");
    measured
}

/// A vacuum looks at what changed since the last one, not at the table:
/// at 100 and 100,000 partitions it costs the same store operations and
/// lists the same entries, and deletes the same 5 files: the replaced
/// data file and the generated root, span and month manifests (superseded
/// by the replace), and the replace's own root (superseded by the expiry
/// that leaves only the latest version).
#[tokio::test]
async fn vacuum_costs_the_same_at_100_and_100_000_partitions() {
    let at_100 = generated_vacuum_ops(100).await;
    let at_100k = generated_vacuum_ops(100_000).await;
    assert_eq!(at_100.2, 5, "{at_100:?}");
    assert_eq!(at_100, at_100k);
}

/// `status` of a range reads the manifests of that range, not of the
/// whole table: 100 and 100,000 partitions cost the same, in calls and in
/// entries listed (the listing starts at the range's first directory).
#[tokio::test]
async fn status_of_30_dates_costs_the_same_at_100_and_100_000_partitions() {
    let at_100 = generated_status_ops(100).await;
    let at_100k = generated_status_ops(100_000).await;
    assert_eq!(at_100, at_100k);
}

/// Store operations of a vacuum (on a fresh handle) 5 commits after the
/// last vacuum, on a table of `history` earlier commits over 12 months,
/// all retained.
async fn vacuum_ops(history: u64) -> BTreeMap<&'static str, usize> {
    use logbook::maintenance::vacuum;
    let (store, loc, t) = counted_table().await;
    let day = |i: u64| date("2026-01-01") + chrono::Days::new(i % 12 * 31);
    for i in 0..history {
        replace(&t, day(i), 0..3, "h", &format!("h{i}")).await;
    }
    // The first vacuum lists every file; the next, within the hour, does not.
    let now = logbook::maintenance::VacuumOptions {
        full: false,
        ..sweep()
    };
    vacuum(&t, now).await.unwrap();
    for i in 0..5 {
        replace(&t, day(i), 0..3, "later", &format!("later{i}")).await;
    }
    let fresh = Table::open(loc, "orders", options()).await.unwrap();
    store.take();
    let report = vacuum(&fresh, now).await.unwrap();
    assert!(!report.listed_everything);
    store.take()
}

/// A vacuum reads what changed since the last one, not every retained
/// version: 10 and 300 commits before the last vacuum cost the same (31
/// GETs; reading every retained version instead, 69 and 1,229).
#[tokio::test]
async fn vacuum_costs_the_same_at_history_10_and_300() {
    let at_10 = vacuum_ops(10).await;
    let at_300 = vacuum_ops(300).await;
    assert_eq!(at_10, at_300);
}

/// Dates each publish of [`publish_ops`] stages: two months.
const DATES: u64 = 40;

/// Stage [`DATES`] dates in `tables` and publish them as one, `rounds`
/// times; returns the last publish's operations and the entries it listed.
async fn publish_ops(tables: &[&str], rounds: usize) -> (BTreeMap<&'static str, usize>, usize) {
    use logbook::{RunInfo, StorageLocation, Warehouse};
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
    let wh = Warehouse::new(loc, options());
    let d = |i: u64| date("2026-06-01") + chrono::Days::new(i);
    for name in tables {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = wh.create_table(name, schema).await.unwrap();
        for i in 0..DATES {
            replace(&t, d(i), 0..3, "old", &format!("{name}-old-{i}")).await;
        }
    }
    let mut last = Default::default();
    for round in 0..rounds {
        let stage_name = format!("s{round}");
        for name in tables {
            let stage = wh
                .table(name)
                .await
                .unwrap()
                .stage(&stage_name)
                .await
                .unwrap();
            for i in 0..DATES {
                let mut w = stage
                    .replace_partition(d(i), RunInfo::new(format!("{stage_name}-{name}-{i}")))
                    .await
                    .unwrap();
                w.write(&batch(d(i), 0..3, "new")).await.unwrap();
                w.commit().await.unwrap();
            }
        }
        store.take();
        store.take_listed();
        wh.stage(&stage_name)
            .await
            .unwrap()
            .publish(false)
            .await
            .unwrap();
        last = (store.take(), store.take_listed());
    }
    last
}

/// A publish costs the same after 2 and 8 earlier ones, and forgets its
/// stage's date records in one bulk delete per table (one at a time, it
/// took a round trip per date after the publish had landed).
#[tokio::test]
async fn publishing_costs_the_same_after_2_and_8_publishes_and_deletes_in_bulk() {
    for tables in [&["a"][..], &["a", "b", "c"]] {
        let at_2 = publish_ops(tables, 2).await;
        let at_8 = publish_ops(tables, 8).await;
        assert_eq!(at_2, at_8, "publishing {tables:?} grew with history");
        let deletes = at_2.0.get("delete").copied().unwrap_or(0);
        assert!(
            deletes <= 2 * tables.len(),
            "publishing {DATES} dates of {tables:?}: {deletes} delete calls"
        );
    }
}
