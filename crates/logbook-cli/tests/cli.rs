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
fn demo_runs_and_rerunning_it_commits_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let first = ok(&logbook(dir.path(), &["demo"]));
    assert!(first.contains("committed version 3"), "{first}");
    let again = ok(&logbook(dir.path(), &["demo"]));
    assert_eq!(again.matches("already committed").count(), 3, "{again}");
    assert_eq!(log_len(dir.path(), "demo_orders"), 4);
    let p = partitions(dir.path(), "demo_orders");
    assert_eq!(p[0]["date"], "2026-03-15");
    assert_eq!(p[0]["rows"], 3, "the fixed re-run's rows");
    let v1: serde_json::Value = serde_json::from_str(&ok(&logbook(
        dir.path(),
        &["partitions", "demo_orders", "--version", "1", "--json"],
    )))
    .unwrap();
    assert_eq!(v1[0]["rows"], 4, "time travel to the first run");
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
