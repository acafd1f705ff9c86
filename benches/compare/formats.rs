//! logbook's side of the table-format comparison (Delta Lake, Iceberg).
//!
//! `formats generate DIR`: the input data once, as Parquet (30 days x 200k
//! rows, plus a second version of the replaced day), read by every system.
//! `formats prepare DIR`: a logbook table of the 30 days.
//! `formats replace DIR`: replace one day; prints `{"ms": ...}`.
//! `formats verify DIR`: prints `{"rows": ..., "checksum": ...}`.
//! `formats raw DIR`: the same day through a raw `ArrowWriter`; prints `{"ms": ...}`.
//! `formats timetravel DIR`: read the version right after loading.
//! Workloads 2, 3 and 6 (backfill, history, compaction) are in `workloads.rs`.
//! Run through `benches/compare/formats.sh`.

#[path = "../support/mod.rs"]
mod support;
mod workloads;

use std::fs::File;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::RecordBatch;
use logbook::{RunInfo, StorageLocation, Table, TableOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use support::*;

const DAYS: u64 = 30;
const ROWS: usize = 200_000;
/// The day every system replaces.
const REPLACED: u64 = 17;
/// Rows per day of the backfill workload's year.
const BACKFILL_ROWS: usize = 20_000;

fn write_parquet(path: &std::path::Path, batches: &[RecordBatch]) {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    let mut w = ArrowWriter::try_new(
        File::create(path).unwrap(),
        batches[0].schema(),
        Some(props),
    )
    .unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

fn read_parquet(path: &std::path::Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .with_batch_size(8192)
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn generate(dir: &str) {
    let input = std::path::Path::new(dir).join("input");
    std::fs::create_dir_all(&input).unwrap();
    for i in 0..DAYS {
        write_parquet(
            &input.join(format!("day-{i:02}.parquet")),
            &batches(day(i), ROWS),
        );
    }
    // The fix: the same day, different amounts.
    write_parquet(
        &input.join("fixed.parquet"),
        &doubled(batches(day(REPLACED), ROWS)),
    );
    // Workload 2: a year of smaller days, and the fixes of 90 of them.
    let backfill = input.join("backfill");
    std::fs::create_dir_all(&backfill).unwrap();
    for i in 0..workloads::BACKFILL_DAYS {
        let data = batches(day(i), BACKFILL_ROWS);
        write_parquet(&backfill.join(format!("day-{i:03}.parquet")), &data);
        let fixes = workloads::BACKFILL_FROM..workloads::BACKFILL_FROM + workloads::BACKFILL_COUNT;
        if fixes.contains(&i) {
            write_parquet(
                &backfill.join(format!("fixed-{i:03}.parquet")),
                &doubled(data),
            );
        }
    }
    println!(
        "{{\"days\": {DAYS}, \"rows_per_day\": {ROWS}, \"replaced\": \"{}\"}}",
        day(REPLACED)
    );
}

/// The same rows with every amount doubled: a fix.
fn doubled(data: Vec<RecordBatch>) -> Vec<RecordBatch> {
    data.into_iter()
        .map(|b| {
            let amounts = b.column(3).as_primitive::<Float64Type>();
            let doubled: arrow_array::Float64Array =
                amounts.iter().map(|a| a.map(|a| a * 2.0)).collect();
            let mut cols = b.columns().to_vec();
            cols[3] = std::sync::Arc::new(doubled);
            RecordBatch::try_new(b.schema(), cols).unwrap()
        })
        .collect()
}

async fn table(dir: &str) -> Table {
    let loc = StorageLocation::parse(&format!("{dir}/logbook")).unwrap();
    Table::open(loc, "bench", TableOptions::default())
        .await
        .unwrap()
}

async fn prepare(dir: &str) {
    let loc = StorageLocation::parse(&format!("{dir}/logbook")).unwrap();
    let t = create(loc, TableOptions::default()).await;
    for i in 0..DAYS {
        let data =
            read_parquet(&std::path::Path::new(dir).join(format!("input/day-{i:02}.parquet")));
        replace(&t, day(i), &data, format!("load-{i}")).await;
    }
}

async fn replace_day(dir: &str) {
    let data = read_parquet(&std::path::Path::new(dir).join("input/fixed.parquet"));
    // Timed like the other systems: opening the table, writing, committing.
    let start = Instant::now();
    let t = table(dir).await;
    let mut w = t
        .replace_partition(
            day(REPLACED),
            RunInfo::new(format!("fix-{}", start.elapsed().as_nanos())),
        )
        .await
        .unwrap();
    for b in &data {
        w.write(b).await.unwrap();
    }
    w.commit().await.unwrap();
    println!("{{\"ms\": {:.1}}}", start.elapsed().as_secs_f64() * 1000.0);
}

/// The physical limit: the same batches through a raw `ArrowWriter` into one file.
fn raw(dir: &str) {
    let data = read_parquet(&std::path::Path::new(dir).join("input/fixed.parquet"));
    let start = Instant::now();
    write_parquet(&std::path::Path::new(dir).join("raw.parquet"), &data);
    println!("{{\"ms\": {:.1}}}", start.elapsed().as_secs_f64() * 1000.0);
}

/// Time travel: read every row of the version right after loading (30 days,
/// before any replace); prints `{"ms": ..., "rows": ..., "checksum": ...}`.
async fn time_travel(dir: &str) {
    let start = Instant::now();
    let snap = table(dir).await.at_version(DAYS).await.unwrap();
    let (rows, checksum) = totals(&snap).await;
    println!(
        "{{\"ms\": {:.1}, \"rows\": {rows}, \"checksum\": {checksum:.2}}}",
        start.elapsed().as_secs_f64() * 1000.0
    );
}

async fn totals(snap: &logbook::Snapshot) -> (usize, f64) {
    let (mut rows, mut checksum) = (0usize, 0f64);
    for p in snap.partitions().await.unwrap() {
        for b in snap.read_partition(p.date).await.unwrap() {
            rows += b.num_rows();
            checksum += b
                .column(3)
                .as_primitive::<Float64Type>()
                .values()
                .iter()
                .sum::<f64>();
        }
    }
    (rows, checksum)
}

async fn verify(dir: &str) {
    let snap = table(dir).await.latest().await.unwrap();
    let (rows, checksum) = totals(&snap).await;
    println!("{{\"rows\": {rows}, \"checksum\": {checksum:.2}}}");
}

fn number(args: &[String]) -> u64 {
    args.get(3)
        .and_then(|n| n.parse().ok())
        .expect("a number after DIR")
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("generate"), Some(dir)) => generate(dir),
        (Some("prepare"), Some(dir)) => prepare(dir).await,
        (Some("replace"), Some(dir)) => replace_day(dir).await,
        (Some("verify"), Some(dir)) => verify(dir).await,
        (Some("raw"), Some(dir)) => raw(dir),
        (Some("timetravel"), Some(dir)) => time_travel(dir).await,
        (Some("history"), Some(dir)) => workloads::history(dir, number(&args)).await,
        (Some("backfill-prepare"), Some(dir)) => workloads::backfill_prepare(dir).await,
        (Some("backfill"), Some(dir)) => workloads::backfill(dir, number(&args)).await,
        (Some("compaction-prepare"), Some(dir)) => workloads::compaction_prepare(dir, DAYS).await,
        (Some("compaction"), Some(dir)) => workloads::compaction(dir).await,
        _ => eprintln!(
            "usage: formats generate|prepare|replace|verify|raw|timetravel|backfill-prepare|compaction-prepare|compaction DIR\n       formats history|backfill DIR N"
        ),
    }
}
