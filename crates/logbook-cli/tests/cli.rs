//! The `logbook` binary, run as a user would.

use std::path::{Path, PathBuf};

mod common;
use common::*;

fn partitions(wh: &Path, table: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&logbook(wh, &["partitions", table, "--json"]))).unwrap()
}

#[test]
fn the_worked_example_runs_and_rerunning_it_commits_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    let first = ok(&logbook(dir.path(), &["demo", wh.to_str().unwrap()]));
    assert!(
        first.contains("orders: 90 days loaded (90 new commits)"),
        "{first}"
    );
    assert!(first.contains("revenue_by_region version 180"), "{first}");
    let again = ok(&logbook(dir.path(), &["demo", wh.to_str().unwrap()]));
    assert!(
        again.contains("(0 new commits)") && again.contains("revenue_by_region version 180"),
        "{again}"
    );
    assert!(
        again.contains("revenue_by_region_restated version 90"),
        "{again}"
    );

    let original = partitions(&wh, "revenue_by_region");
    let restated = partitions(&wh, "revenue_by_region_restated");
    assert_eq!(original.as_array().unwrap().len(), 90);
    assert_eq!(original[0]["dimensions"], "as-of");
    assert_eq!(original[0]["code_version"], "v2");
    assert_eq!(restated[0]["dimensions"], "current");
    let inputs = original[0]["inputs"].as_array().unwrap();
    assert!(
        inputs
            .iter()
            .any(|i| i["table"] == "orders" && i["dates"][0] == "2026-01-01"),
        "{inputs:?}"
    );

    // Before the move on 2026-02-15, c-17's orders are Berlin's as of then
    // and Munich's when restated.
    let q = "SELECT region, revenue FROM revenue_by_region WHERE date = DATE '2026-02-13' ORDER BY region";
    let asof: serde_json::Value =
        serde_json::from_str(&ok(&logbook(&wh, &["sql", q, "--format", "json"]))).unwrap();
    let q = q.replace("revenue_by_region ", "revenue_by_region_restated ");
    let current: serde_json::Value =
        serde_json::from_str(&ok(&logbook(&wh, &["sql", &q, "--format", "json"]))).unwrap();
    let berlin = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["region"] == "Berlin")
            .map(|r| r["revenue"].as_f64().unwrap())
    };
    assert!(
        berlin(&asof).unwrap() > berlin(&current).unwrap_or(0.0),
        "{asof} vs {current}"
    );
}

#[test]
fn sql_run_and_apply_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path();
    create_orders(wh);
    ok(&logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            fixture("orders-2026-03-15.csv").to_str().unwrap(),
        ],
    ));
    ok(&logbook(
        wh,
        &[
            "create",
            "customers",
            "--schema",
            "customer:string,region:string",
            "--scd2",
            "--key",
            "customer",
        ],
    ));
    let states = fixture("worked/customers-2026-01-01.csv");
    assert_eq!(
        ok(&logbook(
            wh,
            &[
                "apply",
                "customers",
                "--effective",
                "2026-01-01",
                states.to_str().unwrap()
            ]
        ))
        .trim(),
        "1"
    );
    let again = logbook(
        wh,
        &[
            "apply",
            "customers",
            "--effective",
            "2026-01-01",
            states.to_str().unwrap(),
        ],
    );
    assert_eq!(ok(&again).trim(), "1", "re-applying committed");
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing changed"));
    ok(&logbook(
        wh,
        &[
            "create",
            "daily",
            "--schema",
            "date:date,n:int64",
            "--partition-by",
            "date",
        ],
    ));
    let v = ok(&logbook(
        wh,
        &[
            "run",
            "daily",
            "--date",
            "2026-03-15",
            "--sql",
            "SELECT logical_date() AS date, count(*) AS n FROM orders WHERE date = logical_date()",
            "--code-version",
            "c1",
        ],
    ));
    assert_eq!(v.trim(), "1");
    let out = ok(&logbook(
        wh,
        &["sql", "SELECT n FROM daily", "--format", "csv"],
    ));
    assert_eq!(out.trim(), "n\n4");
    let err = refused(&logbook(
        wh,
        &["sql", "SELECT now()", "--logical-date", "2026-03-15"],
    ));
    assert!(err.contains("logical_date()"), "{err}");
    let err = refused(&logbook(
        wh,
        &[
            "run",
            "daily",
            "--date",
            "2026-03-16",
            "--sql",
            "SELECT current_date AS date, 1 AS n",
        ],
    ));
    assert!(err.contains("logical_date()"), "{err}");
    let out = ok(&logbook(
        wh,
        &[
            "sql",
            "SELECT count(*) AS c FROM orders",
            "--version",
            "orders=0",
            "--format",
            "json",
        ],
    ));
    assert_eq!(out.trim(), r#"[{"c":0}]"#);
    let err = refused(&logbook(wh, &["sql", "SELECT * FROM nope"]));
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn create_write_and_read_back_csv_and_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path();
    let parquet = fixture("orders-2026-03-17.parquet");
    ok(&logbook(
        wh,
        &[
            "create",
            "orders",
            "--schema",
            parquet.to_str().unwrap(),
            "--partition-by",
            "date",
        ],
    ));
    let v = ok(&logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-17",
            parquet.to_str().unwrap(),
        ],
    ));
    assert_eq!(v.trim(), "1");
    let csv = fixture("orders-2026-03-16.csv");
    let out = logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-16",
            "--run-id",
            "r-16",
            "--code-version",
            "abc",
            "--max-rows-per-file",
            "1",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(ok(&out).trim(), "2");
    let p = partitions(wh, "orders");
    assert_eq!(p.as_array().unwrap().len(), 2);
    assert_eq!(
        (
            p[0]["date"].as_str(),
            p[0]["rows"].as_u64(),
            p[0]["files"].as_u64()
        ),
        (Some("2026-03-16"), Some(2), Some(2))
    );
    assert_eq!(p[0]["run_id"], "r-16");
    assert_eq!(p[0]["code_version"], "abc");
    assert_eq!(p[1]["rows"], 3);
    assert_eq!(ok(&logbook(wh, &["tables"])).trim(), "orders");
}

/// `create --sort-by --bloom-filter` lay out the files `write` writes: rows
/// come back in the sort order, and a lookup of an id absent from the file
/// but within its bounds is answered by the bloom filter without reading
/// the row group, as `EXPLAIN ANALYZE` shows.
#[test]
fn create_with_a_sort_order_and_a_bloom_filter_lays_out_written_files() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path();
    ok(&logbook(
        wh,
        &[
            "create",
            "orders",
            "--schema",
            "date:date,order_id:int64,customer:string",
            "--partition-by",
            "date",
            "--sort-by",
            "customer",
            "--bloom-filter",
            "order_id",
        ],
    ));
    // 500 orders with even ids, their customers scrambled.
    let mut csv = String::from("date,order_id,customer\n");
    for i in 0..500 {
        csv += &format!("2026-03-01,{},c-{:03}\n", 2 * i, (i * 7919) % 500);
    }
    let input = dir.path().join("orders.csv");
    std::fs::write(&input, csv).unwrap();
    ok(&logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-01",
            input.to_str().unwrap(),
        ],
    ));

    let out = ok(&logbook(
        wh,
        &["sql", "SELECT customer FROM orders", "--format", "csv"],
    ));
    let customers: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(customers.len(), 500);
    assert!(customers.windows(2).all(|w| w[0] <= w[1]), "{customers:?}");

    let sql = "EXPLAIN ANALYZE SELECT count(*) FROM orders WHERE order_id = 501";
    let plan = ok(&logbook(wh, &["sql", sql]));
    assert!(plan.contains("row_groups_pruned_bloom_filter=1"), "{plan}");
}

#[test]
fn bad_inputs_are_refused_clearly_and_leave_the_log_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path();
    create_orders(wh);
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "orders-wrong-date.csv",
            "2026-03-15",
            &["1 row(s)", "2026-03-14", "orders"],
        ),
        (
            "orders-malformed.csv",
            "2026-03-15",
            &["orders-malformed.csv", "not-a-number"],
        ),
        (
            "orders-2026-03-15.csv",
            "2026-03-16",
            &["4 row(s)", "2026-03-16"],
        ),
        ("no-such-file.csv", "2026-03-15", &["no-such-file.csv"]),
    ];
    for (file, date, needles) in cases {
        let err = refused(&logbook(
            wh,
            &[
                "write",
                "orders",
                "--date",
                date,
                fixture(file).to_str().unwrap(),
            ],
        ));
        for n in needles {
            assert!(err.contains(n), "{file}: {n:?} not in {err}");
        }
    }
    assert_eq!(
        log_len(wh, "orders"),
        1,
        "a refused write committed something"
    );
    let data = wh.join("orders/data");
    let leftovers: Vec<_> = walk(&data);
    assert!(
        leftovers.is_empty(),
        "staged files left behind: {leftovers:?}"
    );

    let err = refused(&logbook(
        wh,
        &[
            "create",
            "bad",
            "--schema",
            "d:date,x:decimal",
            "--partition-by",
            "d",
        ],
    ));
    assert!(err.contains("\"x\""), "{err}");
    let err = refused(&logbook(
        wh,
        &[
            "create",
            "../escape",
            "--schema",
            "d:date",
            "--partition-by",
            "d",
        ],
    ));
    assert!(err.contains("table name"), "{err}");
    let err = refused(&logbook(wh, &["partitions", "nope"]));
    assert!(err.contains("nope"), "{err}");
    let err = refused(&logbook(wh, &["partitions", "orders", "--version", "7"]));
    assert!(err.contains("version 7"), "{err}");
}

/// A backfill command that writes one row for `{date}` (value `n`) and
/// appends the date to `order.log`, failing for `fail_on` if given.
fn backfill_command(dir: &Path, table: &str, n: i64, fail_on: Option<&str>) -> String {
    let bin = env!("CARGO_BIN_EXE_logbook");
    let d = dir.display();
    let fail = fail_on
        .map(|f| {
            format!("[ {{date}} != {f} ] || {{ echo 'error: boom on {{date}}' >&2; exit 3; }}; ")
        })
        .unwrap_or_default();
    format!(
        "{fail}printf 'date,n\\n{{date}},{n}\\n' > {d}/{{date}}.csv && {bin} write {table} --date {{date}} {d}/{{date}}.csv && echo {{date}} >> {d}/order.log"
    )
}

fn states(wh: &Path, table: &str, to: &str) -> Vec<(String, String)> {
    let out = ok(&logbook(wh, &["status", table, "--to", to, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["date"].as_str().unwrap().to_string(),
                d["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn taken(dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(dir.join("order.log")).unwrap_or_default();
    std::fs::remove_file(dir.join("order.log")).ok();
    log.lines().map(str::to_string).collect()
}

#[test]
fn a_chain_backfills_in_order_stops_at_a_failure_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    ok(&logbook(
        &wh,
        &[
            "create",
            "balances",
            "--schema",
            "date:date,n:int64",
            "--partition-by",
            "date",
            "--schedule-start",
            "2026-03-01",
            "--depends-on-previous",
        ],
    ));
    let all_missing = states(&wh, "balances", "2026-03-06");
    assert_eq!(all_missing.len(), 6);
    assert!(all_missing.iter().all(|(_, s)| s == "missing"));

    let cmd = backfill_command(dir.path(), "balances", 1, None);
    let dry = ok(&logbook(
        &wh,
        &[
            "backfill",
            "balances",
            "--to",
            "2026-03-06",
            "--command",
            &cmd,
            "--dry-run",
        ],
    ));
    assert!(
        dry.contains("would recompute 6 date(s)") && dry.contains("2026-03-06.csv"),
        "{dry}"
    );
    assert!(taken(dir.path()).is_empty(), "a dry run runs nothing");

    // max-parallel is ignored for a chain: strictly in date order.
    ok(&logbook(
        &wh,
        &[
            "backfill",
            "balances",
            "--to",
            "2026-03-06",
            "--command",
            &cmd,
            "--max-parallel",
            "4",
        ],
    ));
    let days: Vec<String> = (1..=6).map(|d| format!("2026-03-0{d}")).collect();
    assert_eq!(taken(dir.path()), days);
    assert!(states(&wh, "balances", "2026-03-06")
        .iter()
        .all(|(_, s)| s == "complete"));

    // Fix day 2: days 3..6 are stale. A backfill failing on day 4 stops the chain.
    ok(&logbook(
        &wh,
        &[
            "write",
            "balances",
            "--date",
            "2026-03-02",
            dir.path().join("2026-03-02.csv").to_str().unwrap(),
        ],
    ));
    let plan = ok(&logbook(&wh, &["plan", "balances", "--to", "2026-03-06"]));
    assert!(
        plan.contains("4 date(s)") && plan.contains("previous: 2026-03-02 was recommitted"),
        "{plan}"
    );
    let failing = backfill_command(dir.path(), "balances", 2, Some("2026-03-04"));
    let out = logbook(
        &wh,
        &[
            "backfill",
            "balances",
            "--to",
            "2026-03-06",
            "--command",
            &failing,
        ],
    );
    let err = refused(&out);
    assert!(
        err.contains("run the same command again to resume"),
        "{err}"
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("2026-03-04 FAILED") && report.contains("boom on 2026-03-04"),
        "{report}"
    );
    assert!(
        report.contains("1 done, 0 skipped, 1 failed, 2 not started"),
        "{report}"
    );
    assert_eq!(taken(dir.path()), ["2026-03-03"]);

    // Re-running resumes: day 3 is complete now, so 4, 5, 6 in order.
    let fixed = backfill_command(dir.path(), "balances", 2, None);
    ok(&logbook(
        &wh,
        &[
            "backfill",
            "balances",
            "--to",
            "2026-03-06",
            "--command",
            &fixed,
        ],
    ));
    assert_eq!(
        taken(dir.path()),
        ["2026-03-04", "2026-03-05", "2026-03-06"]
    );
    assert!(states(&wh, "balances", "2026-03-06")
        .iter()
        .all(|(_, s)| s == "complete"));
}

/// A warehouse with table `daily` (`date`, `n`) scheduled from 2026-03-01.
fn daily_warehouse() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    ok(&logbook(
        &wh,
        &[
            "create",
            "daily",
            "--schema",
            "date:date,n:int64",
            "--partition-by",
            "date",
            "--schedule-start",
            "2026-03-01",
        ],
    ));
    (dir, wh)
}

#[test]
fn a_date_the_scheduled_run_commits_during_a_backfill_is_skipped_not_overwritten() {
    let (dir, wh) = daily_warehouse();
    // While the backfill does March 1, tonight's scheduled run commits March 3.
    let prod = dir.path().join("prod.csv");
    std::fs::write(&prod, "date,n\n2026-03-03,42\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_logbook");
    let cmd = format!(
        "{} && if [ {{date}} = 2026-03-01 ]; then {bin} write daily --date 2026-03-03 --run-id scheduled-0303 {}; fi",
        backfill_command(dir.path(), "daily", 1, None),
        prod.display()
    );
    let out = ok(&logbook(
        &wh,
        &["backfill", "daily", "--to", "2026-03-03", "--command", &cmd],
    ));
    assert!(
        out.contains("2026-03-03 skipped: committed by run scheduled-0303"),
        "{out}"
    );
    assert!(out.contains("2 done, 1 skipped, 0 failed"), "{out}");
    let parts = partitions(&wh, "daily");
    let march3 = parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["date"] == "2026-03-03")
        .unwrap();
    assert_eq!(march3["run_id"], "scheduled-0303", "{march3}");
    assert_eq!(taken(dir.path()), ["2026-03-01", "2026-03-02"]);
}

#[test]
fn a_production_write_between_the_backfills_check_and_its_commit_wins() {
    let (dir, wh) = daily_warehouse();
    // The backfill has checked March 2 and launched its command; before the
    // command's own write starts, tonight's scheduled run (another process,
    // without the backfill's expectation) commits March 2.
    let prod = dir.path().join("prod.csv");
    std::fs::write(&prod, "date,n\n2026-03-02,42\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_logbook");
    let cmd = format!(
        "if [ {{date}} = 2026-03-02 ]; then env -u LOGBOOK_EXPECT_VERSION {bin} write daily --date 2026-03-02 --run-id scheduled-0302 {}; fi && {}",
        prod.display(),
        backfill_command(dir.path(), "daily", 1, None),
    );
    let out = ok(&logbook(
        &wh,
        &["backfill", "daily", "--to", "2026-03-02", "--command", &cmd],
    ));
    assert!(out.contains("2026-03-02 skipped"), "{out}");
    assert!(out.contains("1 done, 1 skipped, 0 failed"), "{out}");
    let parts = partitions(&wh, "daily");
    let march2 = parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["date"] == "2026-03-02")
        .unwrap();
    assert_eq!(march2["run_id"], "scheduled-0302", "{march2}");
    // The expectation is the backfill's table and date only: another write
    // in the same command (a staging table) is not held to it.
    ok(&logbook(
        &wh,
        &[
            "create",
            "raw",
            "--schema",
            "date:date,n:int64",
            "--partition-by",
            "date",
        ],
    ));
    let raw = dir.path().join("raw.csv");
    std::fs::write(&raw, "date,n\n2026-03-05,1\n").unwrap();
    ok(&logbook(
        &wh,
        &[
            "write",
            "raw",
            "--date",
            "2026-03-05",
            raw.to_str().unwrap(),
        ],
    ));
    let cmd = format!(
        "{bin} write raw --date {{date}} {} && {}",
        raw.display(),
        backfill_command(dir.path(), "daily", 1, None),
    );
    let out = ok(&logbook(
        &wh,
        &[
            "backfill",
            "daily",
            "--from",
            "2026-03-05",
            "--to",
            "2026-03-05",
            "--only",
            "missing",
            "--command",
            &cmd,
        ],
    ));
    assert!(out.contains("1 done, 0 skipped, 0 failed"), "{out}");
    // By hand, the same expectation is an option of `write`.
    let late = dir.path().join("late.csv");
    std::fs::write(&late, "date,n\n2026-03-02,7\n").unwrap();
    let err = refused(&logbook(
        &wh,
        &[
            "write",
            "daily",
            "--date",
            "2026-03-02",
            "--expect-version",
            "missing",
            late.to_str().unwrap(),
        ],
    ));
    assert!(
        err.contains("conflict") && err.contains("2026-03-02"),
        "{err}"
    );
}

#[test]
fn check_names_a_damaged_file_and_status_marks_its_date_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    create_orders(&wh);
    ok(&logbook(
        &wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            fixture("orders-2026-03-15.csv").to_str().unwrap(),
        ],
    ));
    ok(&logbook(
        &wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-16",
            fixture("orders-2026-03-16.csv").to_str().unwrap(),
        ],
    ));
    let clean = ok(&logbook(&wh, &["check", "orders"]));
    assert!(clean.contains("2 file(s) checked, 0 problem(s)"), "{clean}");
    let victim = walk(&wh.join("orders"))
        .into_iter()
        .find(|p| {
            p.to_string_lossy().contains("2026-03-16")
                && p.extension().is_some_and(|e| e == "parquet")
        })
        .unwrap();
    std::fs::remove_file(&victim).unwrap();
    let out = logbook(&wh, &["check", "orders"]);
    let err = refused(&out);
    assert!(err.contains("check found 1 problem"), "{err}");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("partition 2026-03-16")
            && report.contains(victim.file_name().unwrap().to_str().unwrap())
            && report.contains("missing"),
        "{report}"
    );
    let s = states(&wh, "orders", "2026-03-16");
    assert_eq!(
        s,
        [
            ("2026-03-15".to_string(), "complete".to_string()),
            ("2026-03-16".to_string(), "corrupt".to_string())
        ]
    );
    let grid = ok(&logbook(&wh, &["status", "orders", "--to", "2026-03-16"]));
    assert!(
        grid.contains("2026-03\n Mo Tu We Th Fr Sa Su") && grid.contains("corrupt   1"),
        "{grid}"
    );
    // Alter is a commit in the log.
    ok(&logbook(
        &wh,
        &["alter", "orders", "--schedule-start", "2026-03-14"],
    ));
    let log = ok(&logbook(&wh, &["log", "orders"]));
    assert!(log.contains("alter"), "{log}");
    assert_eq!(
        states(&wh, "orders", "2026-03-16")[0],
        ("2026-03-14".to_string(), "missing".to_string())
    );
    let nothing = logbook(&wh, &["alter", "orders"]);
    assert!(!nothing.status.success());
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("--schedule-start"));
}

#[test]
fn a_staged_backfill_is_audited_then_published_in_one_commit() {
    let (dir, wh) = daily_warehouse();
    let first = backfill_command(dir.path(), "daily", 1, None);
    ok(&logbook(
        &wh,
        &[
            "backfill",
            "daily",
            "--to",
            "2026-03-03",
            "--command",
            &first,
        ],
    ));
    taken(dir.path());
    let commits = log_len(&wh, "daily");

    // The same commands, unchanged, write into the stage through LOGBOOK_STAGE.
    let fixed = backfill_command(dir.path(), "daily", 7, None);
    let out = ok(&logbook(
        &wh,
        &[
            "backfill",
            "daily",
            "--to",
            "2026-03-03",
            "--only",
            "all",
            "--stage",
            "fix",
            "--command",
            &fixed,
        ],
    ));
    assert!(
        out.contains("3 done") && out.contains("staged in fix"),
        "{out}"
    );
    assert_eq!(log_len(&wh, "daily"), commits, "staging commits nothing");
    // Resuming skips what is already staged.
    let again = ok(&logbook(
        &wh,
        &[
            "backfill",
            "daily",
            "--to",
            "2026-03-03",
            "--only",
            "all",
            "--stage",
            "fix",
            "--command",
            &fixed,
        ],
    ));
    assert!(again.contains("0 done, 3 skipped"), "{again}");

    let diff: serde_json::Value = serde_json::from_str(&ok(&logbook(
        &wh,
        &["stage", "diff", "daily", "fix", "--json"],
    )))
    .unwrap();
    assert_eq!(diff.as_array().unwrap().len(), 3);
    assert_eq!(diff[0]["old_rows"], 1);
    assert_eq!(diff[0]["sums"]["n"], serde_json::json!([1.0, 7.0]));
    let grid = ok(&logbook(&wh, &["stage", "diff", "daily", "fix"]));
    assert!(
        grid.contains("old sum(n)") && grid.contains("2026-03-02"),
        "{grid}"
    );

    let published = ok(&logbook(&wh, &["stage", "publish", "daily", "fix"]));
    assert!(published.contains("3 date(s)"), "{published}");
    assert_eq!(
        log_len(&wh, "daily"),
        commits + 1,
        "one commit for all dates"
    );
    let out = ok(&logbook(
        &wh,
        &["sql", "SELECT sum(n) AS n FROM daily", "--format", "csv"],
    ));
    assert!(out.contains("21"), "{out}");
    let gone = refused(&logbook(&wh, &["stage", "publish", "daily", "fix"]));
    assert!(gone.contains("has no stage \"fix\""), "{gone}");
}

#[test]
fn compact_expire_and_vacuum_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    create_orders(&wh);
    let csv = fixture("orders-2026-03-15.csv");
    let csv = csv.to_str().unwrap();
    ok(&logbook(
        &wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            csv,
            "--max-rows-per-file",
            "1",
        ],
    ));
    let files_before = partitions(&wh, "orders")[0]["files"].as_u64().unwrap();
    assert!(files_before > 2, "{files_before}");
    let dry = ok(&logbook(&wh, &["compact", "orders", "--dry-run"]));
    assert!(
        dry.contains(&format!("rewrite {files_before} of {files_before} file(s)")),
        "{dry}"
    );
    assert_eq!(
        partitions(&wh, "orders")[0]["files"],
        files_before,
        "a dry run rewrites nothing"
    );
    let out = ok(&logbook(
        &wh,
        &[
            "compact",
            "orders",
            "--date",
            "2026-03-15",
            "--target-file-size",
            "64MiB",
        ],
    ));
    assert!(
        out.contains(&format!("{files_before} file(s)")) && out.contains("-> 1 file(s)"),
        "{out}"
    );
    assert_eq!(partitions(&wh, "orders")[0]["files"], 1);
    let log = ok(&logbook(&wh, &["log", "orders"]));
    assert!(log.contains("compact"), "{log}");

    let bad = logbook(&wh, &["vacuum", "orders", "--retention", "10min"]);
    let err = refused(&bad);
    assert!(
        err.contains("table orders") && err.contains("under one hour"),
        "{err}"
    );
    let bad_size = logbook(&wh, &["compact", "orders", "--target-file-size", "lots"]);
    assert!(String::from_utf8_lossy(&bad_size.stderr).contains("invalid size"));

    ok(&logbook(&wh, &["expire", "orders", "--keep-last", "1"]));
    let old = refused(&logbook(&wh, &["partitions", "orders", "--version", "1"]));
    assert!(old.contains("version 1 has expired"), "{old}");
    // Files are new, so a 7-day retention keeps them; --force with a zero
    // retention deletes the pre-compaction files.
    let kept = ok(&logbook(&wh, &["vacuum", "orders", "--dry-run"]));
    assert!(kept.contains("would delete 0 file(s)"), "{kept}");
    let gone = ok(&logbook(
        &wh,
        &["vacuum", "orders", "--retention", "0s", "--force"],
    ));
    assert!(gone.contains("deleted"), "{gone}");
    let data: Vec<PathBuf> = walk(&wh.join("orders"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(data.len(), 1, "{data:?}");
    let check = ok(&logbook(&wh, &["check", "orders"]));
    assert!(check.contains("0 problem(s)"), "{check}");
}

#[test]
fn adding_a_column_is_logged_shown_by_schema_and_stales_older_dates() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    create_orders(&wh);
    let f = fixture("orders-2026-03-15.csv");
    ok(&logbook(
        &wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            f.to_str().unwrap(),
        ],
    ));
    let out = ok(&logbook(
        &wh,
        &["alter", "orders", "--add-column", "tip:float64"],
    ));
    assert!(
        out.contains("add column tip:float64 at version 2") && out.contains("schema version 1"),
        "{out}"
    );
    let log = ok(&logbook(&wh, &["log", "orders"]));
    assert!(log.contains("schema (add column tip:float64)"), "{log}");
    let schema: serde_json::Value =
        serde_json::from_str(&ok(&logbook(&wh, &["schema", "orders", "--json"]))).unwrap();
    let tip = schema["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "tip")
        .unwrap()
        .clone();
    assert_eq!(
        (tip["id"].as_u64(), tip["added_in"].as_u64()),
        (Some(6), Some(1))
    );
    let old = ok(&logbook(&wh, &["schema", "orders", "--version", "1"]));
    assert!(
        old.contains("schema version 0") && !old.contains("tip"),
        "{old}"
    );
    let s: serde_json::Value = serde_json::from_str(&ok(&logbook(
        &wh,
        &["status", "orders", "--to", "2026-03-15", "--json"],
    )))
    .unwrap();
    assert_eq!(s[0]["state"], "stale");
    assert_eq!(s[0]["reasons"][0]["reason"], "schema");
    let q = ok(&logbook(
        &wh,
        &[
            "sql",
            "SELECT count(*) AS n, count(tip) AS tips FROM orders",
            "--format",
            "csv",
        ],
    ));
    assert!(q.contains("4,0"), "{q}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_launching_dates_and_lets_the_running_one_finish() {
    let (dir, wh) = daily_warehouse();
    let started = dir.path().join("started");
    let cmd = format!(
        "touch {} && sleep 1 && {}",
        started.display(),
        backfill_command(dir.path(), "daily", 1, None)
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(&wh)
        .args(["backfill", "daily", "--to", "2026-03-03", "--command", &cmd])
        .env_remove("LOGBOOK_WAREHOUSE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first date never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("1 done, 0 skipped, 0 failed, 2 not started"),
        "{stdout}"
    );
    assert!(
        stderr.contains("interrupted") && stderr.contains("run the same command again"),
        "{stderr}"
    );
    assert_eq!(
        taken(dir.path()),
        ["2026-03-01"],
        "the running date finished"
    );
}

/// `logbook sql ... | head`: the reader goes away and the command stops
/// without a panic or an error line, in every output format (a printed
/// table and a streamed CSV fail on a closed stdout in different places).
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    ok(&logbook(&wh, &["demo"]));
    for format in ["table", "csv"] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_logbook"))
            .arg("--warehouse")
            .arg(&wh)
            // Far more than a pipe holds (64 KiB).
            .args(["sql", "SELECT * FROM generate_series(1, 1000000)"])
            .args(["--format", format])
            .env_remove("LOGBOOK_WAREHOUSE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // The pipe's read end is dropped here: the rest of the output has
        // nowhere to go.
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "{format}: {err}");
        assert_eq!(
            out.status.code(),
            Some(141),
            "{format}: ended as a shell expects of `| head`"
        );
    }
}

/// A query runs in a memory pool: by default 80% of the machine's memory
/// (it had none: nothing spilled, and a query past the machine's memory was
/// killed by the kernel); with `--memory-limit` one the query cannot
/// outgrow, where a join's build side fails saying so and a sort spills.
#[test]
fn a_query_runs_in_a_memory_pool_sized_from_the_machine_or_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    ok(&logbook(&wh, &["demo"]));
    let show = |extra: &[&str]| {
        let mut args = vec![
            "sql",
            "SHOW datafusion.runtime.memory_limit",
            "--format",
            "csv",
        ];
        args.extend(extra);
        ok(&logbook(&wh, &args))
    };
    let default = show(&[]);
    assert!(!default.contains("unlimited"), "{default}");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    // Shown as DataFusion formats sizes ("18G", "64M": whole units, rounded
    // down): at most 80% (less in a smaller cgroup), and set.
    let shown_gib: f64 = default
        .lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|v| v.trim().strip_suffix('G'))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a size in GiB: {default}"));
    let share = total_kib * 0.8 / 1024.0 / 1024.0;
    assert!(shown_gib <= share, "{shown_gib} GiB of {total_kib} KiB");
    assert!(shown_gib > 0.0, "{default}");
    let flag = show(&["--memory-limit", "64MiB"]);
    assert!(flag.contains(",64M"), "{flag}");

    let join = "SELECT count(*) AS n FROM generate_series(1, 2000000) a \
                JOIN generate_series(1, 2000000) b ON a.value = b.value";
    assert!(ok(&logbook(&wh, &["sql", join, "--format", "csv"])).contains("2000000"));
    let out = logbook(&wh, &["sql", join, "--memory-limit", "1MiB"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Resources exhausted"), "{err}");
    // A sort past the pool (5M values, 40 MB) spills and answers.
    let sort = "SELECT max(r) AS r FROM (SELECT row_number() OVER (ORDER BY value DESC) AS r \
                FROM generate_series(1, 5000000))";
    let spilled = ok(&logbook(
        &wh,
        &["sql", sort, "--memory-limit", "32MiB", "--format", "csv"],
    ));
    assert!(spilled.contains("5000000"), "{spilled}");
}
