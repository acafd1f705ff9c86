//! Process-level crashes: SIGKILL the `logbook` binary while it writes a
//! large partition, at a spread of moments, then check nothing half-written
//! is visible and a retry of the same run converges to one commit.

#![cfg(unix)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

const ROWS: usize = 120_000;

fn rows_of(wh: &std::path::Path, date: &str) -> Option<u64> {
    let out = ok(&logbook(wh, &["partitions", "orders", "--json"]));
    let parts: serde_json::Value = serde_json::from_str(&out).unwrap();
    parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["date"] == date)
        .map(|p| p["rows"].as_u64().unwrap())
}

#[test]
fn killing_a_writer_at_any_moment_leaves_before_or_after_never_a_mix() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    create_orders(&wh);
    let csv = dir.path().join("big.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&csv).unwrap());
    writeln!(f, "date,order_id,customer,amount,placed_at").unwrap();
    for i in 0..ROWS {
        writeln!(
            f,
            "2026-03-20,{i},c-{},{}.5,2026-03-20T10:00:00",
            i % 977,
            i % 100
        )
        .unwrap();
    }
    drop(f);
    let write_args = |run: &str| {
        vec![
            "write".to_string(),
            "orders".into(),
            "--date".into(),
            "2026-03-20".into(),
            csv.to_str().unwrap().into(),
            "--run-id".into(),
            run.into(),
            "--max-rows-per-file".into(),
            "10000".into(),
        ]
    };
    // How long an undisturbed write takes (into a scratch copy).
    let scratch = dir.path().join("scratch");
    create_orders(&scratch);
    let start = Instant::now();
    ok(&logbook(
        &scratch,
        &write_args("timing")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    ));
    let full = start.elapsed();

    let mut kills = 0;
    for step in 0..8u32 {
        let run = format!("kill-{step}");
        let args = write_args(&run);
        let mut child = Command::new(env!("CARGO_BIN_EXE_logbook"))
            .arg("--warehouse")
            .arg(&wh)
            .args(&args)
            .env_remove("LOGBOOK_WAREHOUSE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full.mul_f64(f64::from(step) / 8.0) + Duration::from_millis(5));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();

        let check = ok(&logbook(&wh, &["check", "orders"]));
        assert!(check.contains("0 problem(s)"), "step {step}: {check}");
        let rows = rows_of(&wh, "2026-03-20");
        assert!(
            rows.is_none() || rows == Some(ROWS as u64),
            "step {step}: partial partition {rows:?}"
        );
        // The same run again converges: exactly one commit of it.
        ok(&logbook(
            &wh,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        assert_eq!(rows_of(&wh, "2026-03-20"), Some(ROWS as u64));
        let log: serde_json::Value =
            serde_json::from_str(&ok(&logbook(&wh, &["log", "orders", "--json"]))).unwrap();
        let commits = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["run"]["run_id"] == run.as_str())
            .count();
        assert_eq!(commits, 1, "step {step}: {run} committed {commits} times");
    }
    assert!(
        kills >= 4,
        "only {kills} of 8 runs were still running when killed"
    );
    // Vacuum afterwards deletes the killed runs' files, never a live one.
    ok(&logbook(
        &wh,
        &["vacuum", "orders", "--retention", "0s", "--force"],
    ));
    let check = ok(&logbook(&wh, &["check", "orders"]));
    assert!(check.contains("0 problem(s)"), "{check}");
    assert_eq!(rows_of(&wh, "2026-03-20"), Some(ROWS as u64));
}
