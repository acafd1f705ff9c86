//! Peak memory of replacing, then compacting, one large partition.
//!
//! `compact_memory prepare DIR GIB` replaces one date with about GIB GiB of
//! high-entropy rows (generated batch by batch, written in ~64 MiB files)
//! and prints its time and peak resident set; `compact_memory compact DIR` compacts
//! it into 512 MiB files in a fresh process and prints
//! `{"bytes": ..., "seconds": ..., "peak_rss_mib": ...}` (peak resident set
//! from `/proc/self/status`, Linux). Run through `benches/memory/compact.sh`.

#[path = "../support/rng.rs"]
mod rng;

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use logbook::maintenance::{compact, CompactOptions};
use logbook::{RunInfo, StorageLocation, Table, TableOptions, TableSchema};
use rng::Rng;

const SPEC: &str = "date:date,id:int64,key:string,value:float64";
const ROWS_PER_FILE: usize = 1_600_000; // about 64 MiB of these rows
const BYTES_PER_ROW: f64 = 42.0;

fn date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 15).unwrap()
}

fn batch(schema: &arrow_schema::SchemaRef, rng: &mut Rng, rows: usize) -> RecordBatch {
    let days = (date() - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32;
    let ids: Vec<i64> = (0..rows).map(|_| rng.next() as i64).collect();
    let keys: Vec<String> = (0..rows).map(|_| format!("{:016x}", rng.next())).collect();
    let values: Vec<f64> = (0..rows).map(|_| rng.next() as f64 / 3.0).collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Date32Array::from(vec![days; rows])),
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(keys)),
            Arc::new(Float64Array::from(values)),
        ],
    )
    .unwrap()
}

async fn prepare(dir: &str, gib: f64) {
    let loc = StorageLocation::parse(dir).unwrap();
    let schema = TableSchema::parse_spec("big", SPEC, "date").unwrap();
    let arrow = schema.arrow_schema();
    let opts = TableOptions::default().with_max_rows_per_file(ROWS_PER_FILE);
    let table = Table::create(loc, "big", schema, opts).await.unwrap();
    let rows = (gib * (1u64 << 30) as f64 / BYTES_PER_ROW) as usize;
    let mut w = table
        .replace_partition(date(), RunInfo::new("big"))
        .await
        .unwrap();
    let mut rng = Rng(7);
    let start = Instant::now();
    let mut done = 0;
    while done < rows {
        let n = 65_536.min(rows - done);
        w.write(&batch(&arrow, &mut rng, n)).await.unwrap();
        done += n;
    }
    w.commit().await.unwrap();
    let p = table
        .latest()
        .await
        .unwrap()
        .partition(date())
        .await
        .unwrap()
        .unwrap();
    let bytes: u64 = p.files.iter().map(|f| f.size).sum();
    println!(
        "{{\"files\": {}, \"bytes\": {bytes}, \"rows\": {}, \"seconds\": {:.1}, \"peak_rss_mib\": {:.0}}}",
        p.files.len(),
        p.rows,
        start.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn run_compaction(dir: &str) {
    let loc = StorageLocation::parse(dir).unwrap();
    let table = Table::open(loc, "big", TableOptions::default())
        .await
        .unwrap();
    let start = Instant::now();
    let options = CompactOptions {
        target_file_size: Some(512 << 20),
        ..Default::default()
    };
    let report = compact(&table, &options, &|_| {}).await.unwrap();
    println!(
        "{{\"bytes\": {}, \"files_before\": {}, \"files_after\": {}, \"seconds\": {:.1}, \"peak_rss_mib\": {:.0}}}",
        report.bytes_before,
        report.files_before,
        report.files_after,
        start.elapsed().as_secs_f64(),
        peak_rss_mib()
    );
}

fn main() {
    // As the `logbook` binary does, before any thread starts, so that the
    // figures are its.
    logbook::reader::tune_allocator();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("prepare"), Some(dir)) => {
            prepare(dir, args.get(3).and_then(|g| g.parse().ok()).unwrap_or(1.0)).await
        }
        (Some("compact"), Some(dir)) => run_compaction(dir).await,
        _ => eprintln!("usage: compact_memory prepare DIR GIB | compact_memory compact DIR"),
    }
}
