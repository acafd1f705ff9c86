//! Helpers shared by the CLI test binaries: run the `logbook` binary as a user would.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

pub fn logbook(warehouse: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(warehouse)
        .args(args)
        .env_remove("LOGBOOK_WAREHOUSE")
        .output()
        .expect("run logbook")
}

pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A failure must be one clear line on stderr and exit 1, never a panic.
pub fn refused(out: &Output) -> String {
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

pub fn log_len(wh: &Path, table: &str) -> usize {
    let log: serde_json::Value =
        serde_json::from_str(&ok(&logbook(wh, &["log", table, "--json"]))).unwrap();
    log.as_array().unwrap().len()
}

/// The `orders` table of the fixtures.
pub fn create_orders(wh: &Path) {
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

pub fn walk(dir: &Path) -> Vec<PathBuf> {
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
