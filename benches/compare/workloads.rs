//! logbook's side of workloads 2, 3 and 6 of the table-format comparison
//! (the other side is `workloads_side.py`); see `formats.sh`.
//!
//! - `history DIR N`: grow a table to N commits (one-row replaces cycling
//!   over 30 dates), then time opening it and one more commit.
//! - `backfill-prepare DIR` / `backfill DIR WRITERS`: a 365-day table, then
//!   replace 90 of its dates with 1 or 2 concurrent writers.
//! - `compaction-prepare DIR` / `compaction DIR`: 30 dates of 100 small
//!   files each, then compact them.

use std::path::Path;
use std::time::Instant;

use logbook::maintenance::{compact, CompactOptions};
use logbook::{StorageLocation, Table, TableOptions};

use crate::support::*;
use crate::{read_parquet, totals};

/// Rounds per measurement at each history size.
const REPS: usize = 5;
/// The backfill: dates 200..290 of a 365-day table.
pub const BACKFILL_DAYS: u64 = 365;
pub const BACKFILL_FROM: u64 = 200;
pub const BACKFILL_COUNT: u64 = 90;
/// Rows per small file in the compaction workload.
pub const SMALL_FILE_ROWS: usize = 2_000;

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn open(dir: &str, sub: &str) -> Table {
    let loc = StorageLocation::parse(&format!("{dir}/{sub}")).unwrap();
    Table::open(loc, "bench", TableOptions::default())
        .await
        .unwrap()
}

async fn open_or_create(dir: &str, sub: &str, options: TableOptions) -> Table {
    let loc = StorageLocation::parse(&format!("{dir}/{sub}")).unwrap();
    match Table::open(loc.clone(), "bench", options.clone()).await {
        Ok(t) => t,
        Err(_) => create(loc, options).await,
    }
}

/// Workload 3: prints `{"commits", "open_ms", "commit_ms"}` at `target` commits.
pub async fn history(dir: &str, target: u64) {
    let t = open_or_create(dir, "history/logbook", TableOptions::default()).await;
    let mut v = t.latest_version().await.unwrap();
    let tiny = |v: u64| {
        let t = t.clone();
        async move { replace(&t, day(v % 30), &batches(day(v % 30), 1), format!("h-{v}")).await }
    };
    while v < target {
        v = tiny(v).await;
    }
    let (mut opens, mut commits) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        let start = Instant::now();
        let fresh = open(dir, "history/logbook").await;
        fresh.latest().await.unwrap();
        opens.push(ms(start));
        let start = Instant::now();
        v = tiny(v).await;
        commits.push(ms(start));
    }
    println!(
        "{{\"commits\": {target}, \"open_ms\": {:.2}, \"commit_ms\": {:.2}}}",
        median(opens),
        median(commits)
    );
}

/// Workload 2, set-up: 365 dates from `input/backfill/day-NNN.parquet`.
pub async fn backfill_prepare(dir: &str) {
    let t = open_or_create(dir, "backfill/logbook", TableOptions::default()).await;
    for i in 0..BACKFILL_DAYS {
        let data = read_parquet(&Path::new(dir).join(format!("input/backfill/day-{i:03}.parquet")));
        replace(&t, day(i), &data, format!("load-{i}")).await;
    }
}

/// Workload 2: replace the 90 dates from `input/backfill/fixed-NNN.parquet`
/// with `writers` concurrent writers (dates dealt round-robin); prints
/// `{"ms", "rows", "checksum"}` (the table after).
pub async fn backfill(dir: &str, writers: u64) {
    let t = open(dir, "backfill/logbook").await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (t, dir) = (t.clone(), dir.to_string());
            tokio::spawn(async move {
                for i in
                    (BACKFILL_FROM..BACKFILL_FROM + BACKFILL_COUNT).filter(|i| i % writers == w)
                {
                    let f = Path::new(&dir).join(format!("input/backfill/fixed-{i:03}.parquet"));
                    replace(&t, day(i), &read_parquet(&f), format!("fix-{i}")).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = ms(start);
    let (rows, checksum) = totals(&t.latest().await.unwrap()).await;
    println!("{{\"ms\": {elapsed:.1}, \"rows\": {rows}, \"checksum\": {checksum:.2}}}");
}

/// Workload 6, set-up: the 30 input days, each written as 100 small files.
pub async fn compaction_prepare(dir: &str, days: u64) {
    let options = TableOptions::default().with_max_rows_per_file(SMALL_FILE_ROWS);
    let t = open_or_create(dir, "compaction/logbook", options).await;
    for i in 0..days {
        let data = read_parquet(&Path::new(dir).join(format!("input/day-{i:02}.parquet")));
        replace(&t, day(i), &data, format!("small-{i}")).await;
    }
}

/// Workload 6: compact every date; prints `{"ms", "files_before",
/// "files_after", "rows", "checksum"}`.
pub async fn compaction(dir: &str) {
    let t = open(dir, "compaction/logbook").await;
    let start = Instant::now();
    let report = compact(&t, &CompactOptions::default(), &|_| {})
        .await
        .unwrap();
    let elapsed = ms(start);
    let (rows, checksum) = totals(&t.latest().await.unwrap()).await;
    println!(
        "{{\"ms\": {elapsed:.1}, \"files_before\": {}, \"files_after\": {}, \"rows\": {rows}, \"checksum\": {checksum:.2}}}",
        report.files_before, report.files_after
    );
}
