//! Format versions: tables written in format 1 (`tests/fixtures/format1`,
//! checked in from the last build that wrote it) keep reading and keep
//! being written in format 1 until moved up; format 2 lists spans.

use std::path::Path;

use logbook::format::{RootManifest, SpanManifest};
use logbook::maintenance::vacuum;
use logbook::{ErrorKind, PropertiesChange, RunInfo, StorageLocation, Table, Warehouse};

use crate::common::*;

/// A copy of the format 1 fixture warehouse in a fresh directory.
pub(crate) fn fixture() -> (tempfile::TempDir, Warehouse) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1");
    copy_dir(&from, dir.path());
    let wh = Warehouse::new(
        StorageLocation::parse(dir.path().to_str().unwrap()).unwrap(),
        options().with_clock(std::sync::Arc::new(logbook::clock::SystemClock)),
    );
    (dir, wh)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

const FIXTURE_DATES: [&str; 4] = ["2024-12-31", "2026-02-01", "2026-03-15", "2026-03-16"];

/// Every partition's date, rows and files at the latest version.
async fn partitions(t: &Table) -> Vec<(chrono::NaiveDate, u64, Vec<String>)> {
    let snap = t.latest().await.unwrap();
    let mut out = Vec::new();
    for p in snap.partitions().await.unwrap() {
        let files = p.files.iter().map(|f| f.path.clone()).collect();
        out.push((p.date, p.rows, files));
    }
    out
}

/// The root manifest of `t`'s latest version, as stored.
async fn root(t: &Table) -> RootManifest {
    let entry = t.latest().await.unwrap().entry().clone();
    serde_json::from_slice(&object_bytes(t, &entry.manifest).await).unwrap()
}

/// Replace `d` of the fixture's `orders` with its own rows (a new version).
pub(crate) async fn rewrite(t: &Table, d: chrono::NaiveDate, run: &str) -> u64 {
    let batches = t.latest().await.unwrap().read_partition(d).await.unwrap();
    let mut w = t.replace_partition(d, RunInfo::new(run)).await.unwrap();
    for b in &batches {
        w.write(b).await.unwrap();
    }
    w.commit().await.unwrap().version
}

#[tokio::test]
async fn a_format_1_table_reads_and_its_status_is_unchanged() {
    let (_dir, wh) = fixture();
    let orders = wh.table("orders").await.unwrap();
    let snap = orders.latest().await.unwrap();
    assert_eq!(snap.format(), 1);
    let dates: Vec<String> = partitions(&orders)
        .await
        .iter()
        .map(|p| p.0.to_string())
        .collect();
    assert_eq!(dates, FIXTURE_DATES);
    assert_eq!(snap.totals(), (14, 4));
    assert_eq!(
        snap.read_partition(date("2026-03-15")).await.unwrap()[0].num_rows(),
        4
    );
    let status = logbook::lifecycle::status(&wh, "revenue", None, date("2026-03-16"))
        .await
        .unwrap();
    let by_date: Vec<_> = status
        .dates
        .iter()
        .map(|d| (d.date.to_string(), d.state))
        .collect();
    use logbook::lifecycle::PartitionState::{Missing, Stale};
    assert_eq!(
        by_date,
        [
            ("2026-03-15".to_string(), Stale),
            ("2026-03-16".into(), Missing)
        ]
    );
    // Stale because the customers dimension moved for its date after the
    // run read it (the fixture's last command).
    let reasons = &status.dates[0].reasons;
    assert!(
        matches!(
            &reasons[..],
            [logbook::lifecycle::StaleReason::Dimension { table, .. }] if table == "customers"
        ),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn a_format_1_table_is_written_in_format_1_until_moved_up() {
    let (_dir, wh) = fixture();
    let orders = wh.table("orders").await.unwrap();
    let before = partitions(&orders).await;
    let v = rewrite(&orders, date("2026-03-16"), "again").await;
    let snap = orders.at_version(v).await.unwrap();
    assert_eq!((snap.format(), snap.entry().format), (1, 1));
    let stored = root(&orders).await;
    assert!(stored.spans.is_empty());
    assert_eq!(stored.months.len(), 3);
    let after = partitions(&orders).await;
    assert_eq!(after.len(), 4);
    assert_eq!(after[..3], before[..3], "other dates unchanged");
    assert_ne!(after[3].2, before[3].2, "the date has its new files");
}

#[tokio::test]
async fn moving_to_format_2_keeps_every_partition_and_old_versions() {
    let (_dir, wh) = fixture();
    let orders = wh.table("orders").await.unwrap();
    let before = partitions(&orders).await;
    let old = orders.latest_version().await.unwrap();
    let change = PropertiesChange {
        format: Some(2),
        ..Default::default()
    };
    let v = orders.alter(change).await.unwrap().version;
    let snap = orders.at_version(v).await.unwrap();
    assert_eq!((snap.format(), snap.entry().format), (2, 2));
    assert_eq!(partitions(&orders).await, before);
    assert_eq!(snap.totals(), (14, 4));
    // Two spans (2020..2024 and 2025..2029), each listing its months.
    let stored = root(&orders).await;
    assert!(stored.months.is_empty());
    let spans: Vec<&str> = stored.spans.iter().map(|s| s.span.as_str()).collect();
    assert_eq!(spans, ["2020", "2025"]);
    let span: SpanManifest =
        serde_json::from_slice(&object_bytes(&orders, &stored.spans[1].path).await).unwrap();
    let months: Vec<&str> = span.months.iter().map(|m| m.month.as_str()).collect();
    assert_eq!(months, ["2026-02", "2026-03"]);
    assert_eq!(stored.spans[1].partitions, 3);
    // The version before the move still reads, in format 1.
    let earlier = orders.at_version(old).await.unwrap();
    assert_eq!(earlier.format(), 1);
    assert_eq!(earlier.partitions().await.unwrap().len(), 4);

    // A commit now rewrites one span, and a fresh handle reads it.
    let v = rewrite(&orders, date("2026-03-15"), "after").await;
    let stored = root(&orders).await;
    assert_eq!(
        stored.spans[0],
        root_at(&orders, v - 1).await.spans[0],
        "2020 span shared"
    );
    assert_ne!(
        stored.spans[1].path,
        root_at(&orders, v - 1).await.spans[1].path
    );
    let reopened = wh.table("orders").await.unwrap();
    assert_eq!(partitions(&reopened).await.len(), 4);
    let status = logbook::lifecycle::status(&wh, "revenue", None, date("2026-03-16"))
        .await
        .unwrap();
    // The run read orders at version 3: 2026-03-15 rewritten makes it stale
    // for its input too, besides the dimension it was already stale for.
    let stale = &status.dates[0];
    assert_eq!(stale.date, date("2026-03-15"));
    assert!(
        stale.reasons.iter().any(|r| matches!(r,
            logbook::lifecycle::StaleReason::Input { table, date: d, replaced_at, .. }
                if table == "orders" && *d == date("2026-03-15") && *replaced_at == v)),
        "{:?}",
        stale.reasons
    );
    assert!(
        stale.reasons.iter().any(|r| matches!(r,
            logbook::lifecycle::StaleReason::Dimension { table, .. } if table == "customers")),
        "{:?}",
        stale.reasons
    );

    // Vacuum keeps every span a retained version lists.
    vacuum(&orders, sweep()).await.unwrap();
    let fresh = wh.table("orders").await.unwrap();
    for version in 0..=fresh.latest_version().await.unwrap() {
        let snap = fresh.at_version(version).await.unwrap();
        for d in snap.partitions().await.unwrap() {
            assert!(!snap.read_partition(d.date).await.unwrap().is_empty());
        }
    }
}

async fn root_at(t: &Table, version: u64) -> RootManifest {
    let entry = t.at_version(version).await.unwrap().entry().clone();
    serde_json::from_slice(&object_bytes(t, &entry.manifest).await).unwrap()
}

#[tokio::test]
async fn a_format_goes_up_only_and_not_past_this_build() {
    let t = memory_table("fmt").await;
    assert_eq!(
        t.latest().await.unwrap().format(),
        2,
        "new tables are format 2"
    );
    let head = t.latest_version().await.unwrap();
    for wrong in [1, 3] {
        let change = PropertiesChange {
            format: Some(wrong),
            ..Default::default()
        };
        let err = t.alter(change).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("fmt"), "{err}");
        assert!(
            err.to_string().contains(&format!("format 2 to {wrong}")),
            "{err}"
        );
    }
    assert_eq!(t.latest_version().await.unwrap(), head, "nothing committed");
}

#[tokio::test]
async fn a_new_table_lists_spans_and_reads_across_them() {
    let t = memory_table("spans").await;
    let dates = [
        "2019-12-31",
        "2020-01-01",
        "2024-12-31",
        "2025-01-01",
        "2026-03-15",
    ];
    for (i, d) in dates.iter().enumerate() {
        replace(&t, date(d), 0..(i as i64 + 1), "x", &format!("r{i}")).await;
    }
    let stored = root(&t).await;
    let spans: Vec<(&str, u64)> = stored
        .spans
        .iter()
        .map(|s| (s.span.as_str(), s.partitions))
        .collect();
    assert_eq!(spans, [("2015", 1), ("2020", 2), ("2025", 2)]);
    let snap = t.latest().await.unwrap();
    for (i, d) in dates.iter().enumerate() {
        assert_eq!(rows(&snap, date(d)).await.len(), i + 1, "{d}");
    }
    assert!(snap.partition(date("2021-06-01")).await.unwrap().is_none());
    assert!(snap.partition(date("2031-06-01")).await.unwrap().is_none());
    assert_eq!(snap.totals(), (15, 5));
}

/// Every date's state and reasons, as `status` gives them.
async fn states(wh: &Warehouse, table: &str) -> Vec<String> {
    let s = logbook::lifecycle::status(wh, table, None, date("2026-03-16"))
        .await
        .unwrap();
    s.dates
        .iter()
        .map(|d| format!("{} {:?} {:?}", d.date, d.state, d.reasons))
        .collect()
}

async fn current_code(t: &Table) -> Option<String> {
    t.latest().await.unwrap().current_code().await.unwrap()
}

#[tokio::test]
async fn the_current_code_version_survives_the_move_to_format_2() {
    let (_dir, wh) = fixture();
    let orders = wh.table("orders").await.unwrap();
    let batches = orders
        .latest()
        .await
        .unwrap()
        .read_partition(date("2026-03-16"))
        .await
        .unwrap();
    let run = RunInfo {
        code_version: Some("v2".into()),
        ..RunInfo::new("coded")
    };
    let mut w = orders
        .replace_partition(date("2026-03-16"), run)
        .await
        .unwrap();
    w.write(&batches[0]).await.unwrap();
    w.commit().await.unwrap();
    let before = states(&wh, "orders").await;
    assert!(before[1].contains("Code"), "{before:?}");
    let change = PropertiesChange {
        format: Some(2),
        ..Default::default()
    };
    orders.alter(change).await.unwrap();
    assert_eq!(states(&wh, "orders").await, before);
    assert_eq!(current_code(&orders).await.as_deref(), Some("v2"));
    // A write that records no code version leaves the current one.
    rewrite(&orders, date("2026-03-15"), "no-code").await;
    assert_eq!(current_code(&orders).await.as_deref(), Some("v2"));
}

#[tokio::test]
async fn a_dimension_moved_to_format_2_indexes_its_whole_log() {
    let (_dir, wh) = fixture();
    let before = states(&wh, "revenue").await;
    assert!(before[0].contains("Dimension"), "{before:?}");
    let customers = wh.table("customers").await.unwrap();
    assert!(customers
        .latest()
        .await
        .unwrap()
        .dimension_changes()
        .is_none());
    let change = PropertiesChange {
        format: Some(2),
        ..Default::default()
    };
    customers.alter(change).await.unwrap();
    let snap = customers.latest().await.unwrap();
    let index = snap
        .dimension_changes()
        .expect("an index built from the log");
    // The two loads: from 2026-01-01 (version 1), then from 2026-02-15 (2).
    assert_eq!(index.latest_at(date("2026-02-01")).unwrap().0, 1);
    assert_eq!(index.latest_at(date("2026-03-15")).unwrap().0, 2);
    assert_eq!(index.latest_at(date("2025-12-31")), None);
    assert_eq!(states(&wh, "revenue").await, before);
}

#[tokio::test]
async fn partition_dates_outside_years_0_to_9999_are_refused() {
    let t = memory_table("far").await;
    let head = t.latest_version().await.unwrap();
    for far in [
        chrono::NaiveDate::from_ymd_opt(10_000, 1, 1).unwrap(),
        chrono::NaiveDate::from_ymd_opt(-1, 12, 31).unwrap(),
    ] {
        let err = t
            .replace_partition(far, RunInfo::new("far"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("far"), "{err}");
        assert!(
            err.to_string().contains("0000-01-01 to 9999-12-31"),
            "{err}"
        );
    }
    assert_eq!(t.latest_version().await.unwrap(), head);
    assert!(
        objects(&t, "_logbook/running").await.is_empty(),
        "no marker left"
    );
}

#[tokio::test]
async fn ranges_read_across_span_boundaries() {
    let wh = Warehouse::new(StorageLocation::parse("memory://").unwrap(), options());
    let schema = logbook::TableSchema::parse_spec("across", SPEC, "date").unwrap();
    let t = wh.create_table("across", schema).await.unwrap();
    let dates = [
        "2019-12-31",
        "2020-01-01",
        "2024-12-30",
        "2024-12-31",
        "2025-01-01",
        "2025-01-02",
    ];
    for (i, d) in dates.iter().enumerate() {
        replace(&t, date(d), 0..1, "x", &format!("r{i}")).await;
    }
    let snap = t.latest().await.unwrap();
    let between = |from: &str, to: &str| {
        let snap = snap.clone();
        let (from, to) = (date(from), date(to));
        async move {
            snap.partitions_between(Some(from), Some(to))
                .await
                .unwrap()
                .iter()
                .map(|p| p.date.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        between("2024-12-31", "2025-01-01").await,
        ["2024-12-31", "2025-01-01"]
    );
    assert_eq!(
        between("2019-12-31", "2020-01-01").await,
        ["2019-12-31", "2020-01-01"]
    );
    assert_eq!(
        between("2020-01-02", "2024-12-29").await,
        Vec::<String>::new()
    );
    let open: Vec<String> = snap
        .partitions_between(Some(date("2024-12-31")), None)
        .await
        .unwrap()
        .iter()
        .map(|p| p.date.to_string())
        .collect();
    assert_eq!(open, ["2024-12-31", "2025-01-01", "2025-01-02"]);
    assert_eq!(snap.first_date().await.unwrap(), Some(date("2019-12-31")));
    // SQL over an IN list, a range and a contradiction, across spans.
    let ctx = logbook::query::session(&wh, Default::default(), None)
        .await
        .unwrap();
    let q = |filter: &str| format!("SELECT count(*) FROM across WHERE {filter}");
    let in_list = "date IN (DATE '2019-12-31', DATE '2025-01-01', DATE '2025-01-02')";
    assert_eq!(first_i64(&ctx, &q(in_list)).await, 3);
    let range = "date BETWEEN DATE '2024-12-31' AND DATE '2025-01-01'";
    assert_eq!(first_i64(&ctx, &q(range)).await, 2);
    let none = "date = DATE '2019-12-31' AND date = DATE '2025-01-01'";
    assert_eq!(first_i64(&ctx, &q(none)).await, 0);
}
