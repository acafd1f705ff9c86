//! The `logbook` binary, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn logbook(warehouse: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(warehouse)
        .args(args)
        .env_remove("LOGBOOK_WAREHOUSE")
        .output()
        .expect("run logbook")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A failure must be one clear line on stderr and exit 1, never a panic.
fn refused(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert!(
        err.starts_with("error: ") && !err.contains("panicked"),
        "{err}"
    );
    err
}

fn partitions(wh: &Path, table: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&logbook(wh, &["partitions", table, "--json"]))).unwrap()
}

fn log_len(wh: &Path, table: &str) -> usize {
    let log: serde_json::Value =
        serde_json::from_str(&ok(&logbook(wh, &["log", table, "--json"]))).unwrap();
    log.as_array().unwrap().len()
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

/// The `orders` table of the fixtures.
fn create_orders(wh: &Path) {
    let spec = "date:date,order_id:int64,customer:string,amount:float64,placed_at:timestamp";
    ok(&logbook(
        wh,
        &[
            "create",
            "orders",
            "--schema",
            spec,
            "--partition-by",
            "date",
        ],
    ));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    entries
        .flatten()
        .flat_map(|e| {
            if e.path().is_dir() {
                walk(&e.path())
            } else {
                vec![e.path()]
            }
        })
        .collect()
}
