//! The run budget through the binary: `logbook warehouse`, and backfill
//! runners that hold back for production and share slots across processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

fn daily(wh: &Path, table: &str, schedule: bool) {
    let mut args = vec![
        "create",
        table,
        "--schema",
        "date:date,n:int64",
        "--partition-by",
        "date",
    ];
    if schedule {
        args.extend(["--schedule-start", "2026-03-01"]);
    }
    ok(&logbook(wh, &args));
}

/// A command writing one row for `{date}` into `table`, logging when it
/// starts and ends (nanoseconds) to `events`, taking `secs` in between.
fn command(dir: &Path, table: &str, secs: f64) -> String {
    let bin = env!("CARGO_BIN_EXE_logbook");
    let d = dir.display();
    format!(
        "echo \"$(date +%s%N) + {table}-{{date}}\" >> {d}/events && sleep {secs} && \
         printf 'date,n\\n{{date}},1\\n' > {d}/{table}-{{date}}.csv && \
         {bin} write {table} --date {{date}} {d}/{table}-{{date}}.csv && \
         echo \"$(date +%s%N) - {table}-{{date}}\" >> {d}/events"
    )
}

fn backfill(wh: &Path, table: &str, cmd: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_logbook"));
    c.arg("--warehouse")
        .arg(wh)
        .args(["backfill", table, "--to", "2026-03-03", "--command", cmd])
        .args(extra)
        .env_remove("LOGBOOK_WAREHOUSE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The most commands that ran at once, from their start and end events.
fn most_at_once(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("events")).unwrap();
    let mut events: Vec<(u128, i32)> = text
        .lines()
        .map(|l| {
            let mut f = l.split_whitespace();
            let at: u128 = f.next().unwrap().parse().unwrap();
            let step = if f.next() == Some("+") { 1 } else { -1 };
            (at, step)
        })
        .collect();
    // An end and a start at the same instant: the end first.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    most as usize
}

fn classes(wh: &Path, table: &str) -> Vec<String> {
    let parts: serde_json::Value =
        serde_json::from_str(&ok(&logbook(wh, &["partitions", table, "--json"]))).unwrap();
    parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["class"].as_str().unwrap_or("none").to_string())
        .collect()
}

/// Two backfills, each allowed 2 commands at a time, under a warehouse
/// budget of 2: never more than 2 commands at once, and both finish.
#[test]
fn two_backfills_share_the_warehouse_budget() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    daily(&wh, "a", true);
    daily(&wh, "b", true);
    let set = ok(&logbook(
        &wh,
        &["warehouse", "set", "max-backfill-runs", "2"],
    ));
    assert!(set.contains("max-backfill-runs  2"), "{set}");
    let mut runners: Vec<_> = ["a", "b"]
        .iter()
        .map(|t| {
            backfill(
                &wh,
                t,
                &command(dir.path(), t, 0.4),
                &["--max-parallel", "2"],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for r in runners.drain(..) {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("3 done, 0 skipped, 0 failed"), "{said}");
    }
    assert_eq!(
        most_at_once(dir.path()),
        2,
        "the budget was exceeded, or never used"
    );
    assert_eq!(classes(&wh, "a"), ["backfill"; 3]);
    // Released at the end: nothing is live.
    let show = ok(&logbook(&wh, &["warehouse", "show"]));
    assert!(
        show.contains("live backfill runs (slots held): 0"),
        "{show}"
    );
}

/// While a production run is announced, the backfill starts no date, and
/// says why; once it ends, every date runs. A write outside any backfill
/// is production.
#[test]
fn a_backfill_starts_nothing_while_production_runs() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    daily(&wh, "a", true);
    // What a production run on another machine leaves while it runs (its
    // announcement, renewed; here it never expires within the test).
    let live = wh.join("_logbook/production");
    std::fs::create_dir_all(&live).unwrap();
    let announcement = live.join("nightly.json");
    std::fs::write(
        &announcement,
        r#"{"table":"revenue","date":"2026-03-04","run_id":"nightly-0304","beat":0,"lease_ms":600000,"started_ms":0}"#,
    )
    .unwrap();
    let status = ok(&logbook(&wh, &["status", "a", "--to", "2026-03-03"]));
    assert!(status.contains("live production runs: 1"), "{status}");
    assert!(
        status.contains("revenue 2026-03-04 run nightly-0304"),
        "{status}"
    );
    let runner = backfill(&wh, "a", &command(dir.path(), "a", 0.0), &[])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(
        !dir.path().join("events").exists(),
        "a date started during production"
    );
    std::fs::remove_file(&announcement).unwrap();
    let started = Instant::now();
    let out = runner.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(classes(&wh, "a"), ["backfill"; 3]);
    // A plain write is production.
    let f = dir.path().join("p.csv");
    std::fs::write(&f, "date,n\n2026-03-04,1\n").unwrap();
    ok(&logbook(
        &wh,
        &["write", "a", "--date", "2026-03-04", f.to_str().unwrap()],
    ));
    assert_eq!(classes(&wh, "a").last().unwrap(), "production");
}

/// Dates given on the command line are the range to run, schedule or not;
/// a backfill that runs none says why in one line.
#[test]
fn a_backfill_runs_the_dates_asked_for_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let wh: PathBuf = dir.path().join("wh");
    daily(&wh, "u", false);
    let cmd = command(dir.path(), "u", 0.0);
    let range = ["--from", "2026-03-01", "--only", "all"];
    let out = ok(&backfill(&wh, "u", &cmd, &range).output().unwrap());
    assert!(out.contains("3 done"), "{out}");
    let out = ok(&backfill(&wh, "u", &cmd, &["--from", "2026-03-01"])
        .output()
        .unwrap());
    assert!(
        out.contains("nothing to run: none of the 3 dates of u from 2026-03-01 to 2026-03-03"),
        "{out}"
    );
    let none = ok(&backfill(&wh, "u", &cmd, &["--from", "2026-03-05"])
        .output()
        .unwrap());
    assert!(
        none.contains("nothing to run: the range 2026-03-05 to 2026-03-03"),
        "{none}"
    );
}

/// Under `max-heavy-steps 1`, with the one heavy-step slot held (by a
/// holder written into the warehouse as another process's would be): a
/// production `write` commits at once; a backfill `write` waits, saying
/// who holds the slot, and commits once it is released. `warehouse show`
/// lists the step under way.
#[test]
fn a_backfill_write_waits_for_a_heavy_step_slot() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    daily(&wh, "t", false);
    ok(&logbook(&wh, &["warehouse", "set", "max-heavy-steps", "1"]));
    let slot = wh.join("_logbook/heavy/0000");
    std::fs::create_dir_all(&slot).unwrap();
    let held = |gen: u64, released: bool| {
        let record = serde_json::json!({
            "holder": "h", "what": "a compaction elsewhere", "beat": gen,
            "lease_ms": 600000, "started_ms": 0, "released": released,
        });
        std::fs::write(
            slot.join(format!("{gen:020}.json")),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
    };
    held(0, false);
    let show = ok(&logbook(&wh, &["warehouse", "show"]));
    assert!(
        show.contains("heavy steps under way (max-heavy-steps): 1")
            && show.contains("slot 0: a compaction elsewhere"),
        "{show}"
    );
    let csv = |date: &str| {
        let path = dir.path().join(format!("{date}.csv"));
        std::fs::write(&path, format!("date,n\n{date},1\n")).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (prod, back) = (csv("2026-03-01"), csv("2026-03-02"));
    ok(&logbook(
        &wh,
        &["write", "t", "--date", "2026-03-01", &prod],
    ));

    let mut waiting = Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(&wh)
        .args(["write", "t", "--date", "2026-03-02", &back])
        .env("LOGBOOK_RUN_CLASS", "backfill")
        .env_remove("LOGBOOK_WAREHOUSE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the backfill write did not wait for the heavy-step slot"
    );
    let parts = ok(&logbook(&wh, &["partitions", "t", "--json"]));
    assert!(!parts.contains("2026-03-02"), "{parts}");
    let released = Instant::now();
    held(1, true);
    let out = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("waiting to write table t, partition 2026-03-02: all 1 heavy-step slots are held: a compaction elsewhere"),
        "{said}"
    );
    assert!(released.elapsed() < Duration::from_secs(20));
    assert_eq!(classes(&wh, "t"), ["production", "backfill"]);
    let show = ok(&logbook(&wh, &["warehouse", "show"]));
    assert!(!show.contains("heavy steps under way"), "{show}");
}
