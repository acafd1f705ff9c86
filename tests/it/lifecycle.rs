//! Partition states from real commits: stale reasons (and their absence),
//! chains, running and abandoned writes, corruption, plans and alter.

use std::sync::Arc;

use chrono::{Days, NaiveDate};
use logbook::clock::ManualClock;
use logbook::lifecycle::{
    check, plan, status, CheckDepth, PartitionState, ProblemKind, Selection, StaleReason,
    TableStatus,
};
use logbook::query::Run;
use logbook::{
    DimensionMode, Operation, PropertiesChange, RunInfo, StorageLocation, TableProperties,
    TableSchema, Warehouse,
};
use object_store::ObjectStoreExt;

use crate::common::*;
use crate::dimension::states;
use crate::query::{world, REVENUE};

fn state(s: &TableStatus, d: &str) -> PartitionState {
    s.get(date(d))
        .unwrap_or_else(|| panic!("{d} not in status"))
        .state
}

fn reasons(s: &TableStatus, d: &str) -> Vec<String> {
    let mut kinds: Vec<String> = s
        .get(date(d))
        .unwrap()
        .reasons
        .iter()
        .map(|r| match r {
            StaleReason::Code { .. } => "code".to_string(),
            StaleReason::Input { table, date, .. } => format!("input {table} {date}"),
            StaleReason::Dimension { table, mode, .. } => format!("dimension {table} {mode}"),
            StaleReason::Previous { date, .. } => format!("previous {date}"),
            StaleReason::Schema { columns } => format!("schema {}", columns.join(",")),
        })
        .collect();
    kinds.sort();
    kinds
}

async fn run(wh: &Warehouse, d: &str, code: &str, mode: DimensionMode) {
    Run::new(wh, "revenue_by_region", date(d))
        .dimensions(mode)
        .code_version(code)
        .sql(REVENUE)
        .await
        .unwrap();
}

#[tokio::test]
async fn every_stale_reason_comes_from_real_commits_and_only_where_it_must() {
    let (wh, _) = world().await;
    let days = ["2026-03-14", "2026-03-15", "2026-03-16", "2026-03-25"];
    for d in days {
        run(&wh, d, "v1", DimensionMode::AsOf).await;
    }
    let to = date("2026-03-25");
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(s.dates.len(), 12, "from the first committed date");
    for d in days {
        assert_eq!(state(&s, d), PartitionState::Complete, "{d}");
    }
    assert_eq!(state(&s, "2026-03-20"), PartitionState::Missing);
    let customers = wh.table("customers").await.unwrap();
    let dim_check = check(
        &customers,
        &customers.latest().await.unwrap(),
        CheckDepth::Full,
    )
    .await
    .unwrap();
    assert!(
        dim_check.problems.is_empty() && dim_check.files_checked > 0,
        "{dim_check:?}"
    );

    // A dimension change dated after March 16 leaves the earlier days alone.
    customers
        .apply_changes(
            date("2026-03-22"),
            &[states(&[("c-04", "Bremen")])],
            RunInfo::new("c3"),
        )
        .await
        .unwrap();
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(reasons(&s, "2026-03-25"), ["dimension customers as-of"]);
    for d in &days[..3] {
        assert_eq!(
            state(&s, d),
            PartitionState::Complete,
            "{d}: change dated after it"
        );
    }

    // A back-dated correction for March 15..22 hits exactly those dates.
    customers
        .apply_changes(
            date("2026-03-15"),
            &[states(&[("c-04", "Leipzig")])],
            RunInfo::new("c4"),
        )
        .await
        .unwrap();
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(state(&s, "2026-03-14"), PartitionState::Complete);
    assert_eq!(reasons(&s, "2026-03-15"), ["dimension customers as-of"]);
    assert_eq!(reasons(&s, "2026-03-16"), ["dimension customers as-of"]);

    // An input partition replaced after the run read it.
    let orders = wh.table("orders").await.unwrap();
    let mut w = orders
        .replace_partition(date("2026-03-14"), RunInfo::new("o-fix"))
        .await
        .unwrap();
    w.write(&orders_batch("2026-03-14")).await.unwrap();
    w.commit().await.unwrap();
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(reasons(&s, "2026-03-14"), ["input orders 2026-03-14"]);

    // New code for one date makes every other date stale for `code`;
    // rerunning a date makes it complete again.
    run(&wh, "2026-03-14", "v2", DimensionMode::AsOf).await;
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(state(&s, "2026-03-14"), PartitionState::Complete);
    assert_eq!(
        reasons(&s, "2026-03-15"),
        ["code", "dimension customers as-of"]
    );
    assert_eq!(
        reasons(&s, "2026-03-25"),
        ["code", "dimension customers as-of"]
    );

    // In `current` mode any later dimension change makes it stale, even one
    // dated far after it; an as-of partition is untouched by that change.
    run(&wh, "2026-03-16", "v2", DimensionMode::Current).await;
    customers
        .apply_changes(
            date("2026-09-01"),
            &[states(&[("c-17", "Hamburg")])],
            RunInfo::new("c5"),
        )
        .await
        .unwrap();
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(reasons(&s, "2026-03-16"), ["dimension customers current"]);
    assert_eq!(state(&s, "2026-03-14"), PartitionState::Complete);

    // A dimension commit that changes nothing (re-applying) stales nothing.
    run(&wh, "2026-03-16", "v2", DimensionMode::Current).await;
    customers
        .apply_changes(
            date("2026-09-01"),
            &[states(&[("c-17", "Hamburg")])],
            RunInfo::new("c6"),
        )
        .await
        .unwrap();
    let s = status(&wh, "revenue_by_region", None, to).await.unwrap();
    assert_eq!(reasons(&s, "2026-03-16"), Vec::<String>::new());

    // The plan lists exactly the dates that need work, independent ones unchained.
    let p = plan(&s, Selection::Stale);
    assert_eq!(p.dates(), [date("2026-03-15"), date("2026-03-25")]);
    assert!(!p.chain && p.steps.iter().all(|s| s.after.is_none()));
    assert_eq!(plan(&s, Selection::Missing).steps.len(), 8);
}

pub(crate) fn orders_batch(d: &str) -> arrow_array::RecordBatch {
    use arrow_array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
    RecordBatch::try_from_iter([
        (
            "date",
            Arc::new(Date32Array::from(vec![days(date(d))])) as _,
        ),
        ("order_id", Arc::new(Int64Array::from(vec![99])) as _),
        ("customer", Arc::new(StringArray::from(vec!["c-04"])) as _),
        ("amount", Arc::new(Float64Array::from(vec![100.0])) as _),
    ])
    .unwrap()
}

async fn chain_warehouse(start: NaiveDate) -> Warehouse {
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), options());
    let props = TableProperties {
        schedule_start: Some(start),
        depends_on_previous: true,

        ..Default::default()
    };
    let schema = TableSchema::parse_spec("balances", SPEC, "date").unwrap();
    wh.create_table_with_properties("balances", schema, props)
        .await
        .unwrap();
    wh
}

#[tokio::test]
async fn fixing_day_10_of_a_400_day_chain_makes_the_whole_tail_stale_in_order() {
    let start = date("2025-01-01");
    let wh = chain_warehouse(start).await;
    let t = wh.table("balances").await.unwrap();
    let day = |n: u64| start.checked_add_days(Days::new(n - 1)).unwrap();
    for n in 1..=400 {
        replace(&t, day(n), 0..1, "first", &format!("r{n}")).await;
    }
    let s = status(&wh, "balances", None, day(400)).await.unwrap();
    assert_eq!(s.count(PartitionState::Complete), 400);

    replace(&t, day(10), 0..2, "fixed", "fix-10").await;
    let s = status(&wh, "balances", None, day(400)).await.unwrap();
    assert_eq!(s.count(PartitionState::Complete), 10, "days 1..=10");
    assert_eq!(s.count(PartitionState::Stale), 390, "days 11..=400");
    assert!(matches!(
        s.get(day(11)).unwrap().reasons[..],
        [StaleReason::Previous {
            recommitted_at: Some(_),
            ..
        }]
    ));
    assert_eq!(state(&s, &day(400).to_string()), PartitionState::Stale);

    let p = plan(&s, Selection::Needed);
    assert!(p.chain);
    assert_eq!(p.dates(), (11..=400).map(day).collect::<Vec<_>>());
    assert_eq!(p.steps[0].after, None);
    for pair in p.steps.windows(2) {
        assert_eq!(
            pair[1].after,
            Some(pair[0].date),
            "each waits for the day before"
        );
    }
    // Recomputing in order clears the chain step by step.
    replace(&t, day(11), 0..1, "redo", "redo-11").await;
    let s = status(&wh, "balances", Some(day(11)), day(13))
        .await
        .unwrap();
    assert_eq!(s.dates.len(), 3, "from limits the output");
    assert_eq!(state(&s, &day(11).to_string()), PartitionState::Complete);
    assert_eq!(state(&s, &day(12).to_string()), PartitionState::Stale);
}

#[tokio::test]
async fn a_write_in_progress_is_running_until_its_heartbeat_stops() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let opts = options()
        .with_clock(clock.clone())
        .with_running_timeout(1_000, 60_000);
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), opts);
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = wh.create_table("t", schema).await.unwrap();
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("slow")).await.unwrap();
    // No commit yet and no schedule: nothing to show, unless a person
    // asks for the date (dates asked for are dates to run).
    assert!(status(&wh, "t", Some(d), d).await.unwrap().dates.is_empty());
    let asked = logbook::lifecycle::status_asked(&wh, "t", None, Some(d), d);
    assert_eq!(
        state(&asked.await.unwrap(), "2026-03-15"),
        PartitionState::Running
    );
    t.alter(PropertiesChange {
        schedule_start: Some(d),
        ..Default::default()
    })
    .await
    .unwrap();
    let s = status(&wh, "t", None, d).await.unwrap();
    assert_eq!(state(&s, "2026-03-15"), PartitionState::Running);
    assert_eq!(s.dates[0].runs[0].marker.run_id, "slow");

    // Heartbeats keep it running past the timeout...
    for _ in 0..3 {
        clock.advance(40_000);
        w.write(&batch(d, 0..1, "x")).await.unwrap();
    }
    let s = status(&wh, "t", None, d).await.unwrap();
    assert_eq!(state(&s, "2026-03-15"), PartitionState::Running);
    // ...and once they stop for longer, the run shows as abandoned.
    clock.advance(61_000);
    let s = status(&wh, "t", None, d).await.unwrap();
    assert_eq!(state(&s, "2026-03-15"), PartitionState::Missing);
    assert!(s.dates[0].runs[0].abandoned);

    // Committing (the alter in between commutes with the write) clears it.
    w.commit().await.unwrap();
    let s = status(&wh, "t", None, d).await.unwrap();
    assert_eq!(state(&s, "2026-03-15"), PartitionState::Complete);
    assert!(s.dates[0].runs.is_empty());
}

#[tokio::test]
async fn damaged_files_make_their_dates_corrupt_and_check_names_them() {
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), options());
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = wh.create_table("t", schema).await.unwrap();
    let days = ["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"];
    for d in days {
        replace(&t, date(d), 0..50, "same", &format!("r-{d}")).await;
    }
    let snap = t.latest().await.unwrap();
    let clean = check(&t, &snap, CheckDepth::Full).await.unwrap();
    assert!(clean.problems.is_empty(), "{:?}", clean.problems);
    assert_eq!(clean.files_checked, 4);

    let mut first_file = std::collections::HashMap::new();
    for p in snap.partitions().await.unwrap() {
        first_file.insert(p.date.to_string(), p.files[0].path.clone());
    }
    let file = |d: &str| first_file[d].clone();
    let store = t.location().store().clone();
    let path = |rel: &str| t.location().path(rel);
    // 03-01: gone. 03-02: truncated. 03-03: holds 03-04's rows (same size).
    store.delete(&path(&file("2026-03-01"))).await.unwrap();
    let bytes = store
        .get(&path(&file("2026-03-02")))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    store
        .put(
            &path(&file("2026-03-02")),
            bytes.slice(..bytes.len() / 2).into(),
        )
        .await
        .unwrap();
    let other = store
        .get(&path(&file("2026-03-04")))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    store
        .put(&path(&file("2026-03-03")), other.into())
        .await
        .unwrap();

    let report = check(&t, &snap, CheckDepth::Full).await.unwrap();
    let found: Vec<(Option<NaiveDate>, ProblemKind)> =
        report.problems.iter().map(|p| (p.date, p.kind)).collect();
    assert_eq!(
        found,
        [
            (Some(date("2026-03-01")), ProblemKind::MissingFile),
            (Some(date("2026-03-02")), ProblemKind::SizeMismatch),
            (Some(date("2026-03-03")), ProblemKind::RowOutsideDate),
        ]
    );
    assert!(report.problems[0].to_string().contains(&file("2026-03-01")));

    // Status uses the cheap check: missing and truncated files show as corrupt.
    let s = status(&wh, "t", None, date("2026-03-04")).await.unwrap();
    assert_eq!(state(&s, "2026-03-01"), PartitionState::Corrupt);
    assert_eq!(state(&s, "2026-03-02"), PartitionState::Corrupt);
    assert_eq!(state(&s, "2026-03-04"), PartitionState::Complete);
    assert!(plan(&s, Selection::Stale)
        .dates()
        .contains(&date("2026-03-01")));
}

#[tokio::test]
async fn alter_is_a_commit_that_commutes_with_writes_and_sticks() {
    let t = memory_table("t").await;
    let d = date("2026-03-15");
    let mut w = t.replace_partition(d, RunInfo::new("w")).await.unwrap();
    w.write(&batch(d, 0..3, "a")).await.unwrap();
    let change = PropertiesChange {
        schedule_start: Some(date("2026-01-01")),
        depends_on_previous: Some(true),

        ..Default::default()
    };
    let altered = t.alter(change).await.unwrap().version;
    let written = w.commit().await.unwrap().version;
    assert_eq!(
        (altered, written),
        (1, 2),
        "the write started before the alter still commits"
    );
    let latest = t.latest().await.unwrap();
    assert_eq!(latest.properties().schedule_start, Some(date("2026-01-01")));
    assert!(latest.properties().depends_on_previous);
    assert_eq!(rows(&latest, d).await.len(), 3);
    let history = t.history().await.unwrap();
    assert_eq!(history[1].operation, Operation::SetProperties);
    assert!(t
        .at_version(0)
        .await
        .unwrap()
        .properties()
        .schedule_start
        .is_none());
    // Setting nothing is refused and commits nothing.
    let err = t.alter(PropertiesChange::default()).await.unwrap_err();
    assert!(err.to_string().contains("nothing to change"), "{err}");
    assert_eq!(t.latest_version().await.unwrap(), 2);
}
