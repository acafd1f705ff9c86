//! The Rust side of `benches/compare/python_write.sh`: replace one date of
//! a table with the rows of a Parquet file, read into memory first (not
//! timed), timed from opening the table to the commit, as pylogbook and
//! deltalake are on the Python side.
//!
//! `python_write <table dir> <rows.parquet> <date>` prints `{"ms": ...}`.

use std::time::Instant;

use arrow_array::RecordBatch;
use logbook::clock::{IdGenerator, UuidV7};
use logbook::{RunInfo, StorageLocation, Table, TableOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, rows, date] = args.as_slice() else {
        eprintln!("usage: python_write <table dir> <rows.parquet> <date>");
        std::process::exit(2);
    };
    let file = std::fs::File::open(rows).unwrap();
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .with_batch_size(65_536)
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let start = Instant::now();
    let loc = StorageLocation::parse(dir).unwrap();
    let t = Table::open(loc, "orders", TableOptions::default())
        .await
        .unwrap();
    let run = RunInfo::new(format!("rust-{}", UuidV7.next_id()));
    let mut w = t
        .replace_partition(date.parse().unwrap(), run)
        .await
        .unwrap();
    for b in &batches {
        w.write(b).await.unwrap();
    }
    w.commit().await.unwrap();
    println!("{{\"ms\": {:.1}}}", start.elapsed().as_secs_f64() * 1000.0);
}
