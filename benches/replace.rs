//! Replacing a 200k-row partition on local disk against the physical limit:
//! a raw arrow-rs `ArrowWriter` writing the same batches to one file.
//!
//! `cargo bench --bench replace`.

#[path = "support/mod.rs"]
mod support;

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use logbook::{StorageLocation, TableOptions};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use support::*;

const ROWS: usize = 200_000;

fn replace_vs_raw(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let date = day(100);
    let data = batches(date, ROWS);
    let bytes: usize = data.iter().map(|b| b.get_array_memory_size()).sum();

    let mut group = c.benchmark_group("replace_200k");
    group
        .measurement_time(Duration::from_secs(10))
        .sample_size(20);
    group.throughput(Throughput::Bytes(bytes as u64));

    let props = || {
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(1 << 20))
            .build()
    };
    let raw = |sync: bool| {
        let path = dir.path().join("raw.parquet");
        let file = File::create(&path).unwrap();
        let mut w = ArrowWriter::try_new(file, data[0].schema(), Some(props())).unwrap();
        for b in &data {
            w.write(b).unwrap();
        }
        let file = w.into_inner().unwrap();
        if sync {
            file.sync_all().unwrap();
        }
    };
    group.bench_function("raw_arrow_writer", |b| b.iter(|| raw(false)));
    group.bench_function("raw_arrow_writer_fsync", |b| b.iter(|| raw(true)));

    let loc = StorageLocation::local(&dir.path().join("wh"))
        .unwrap()
        .child("bench")
        .unwrap();
    let table = rt.block_on(create(loc, TableOptions::default()));
    let run = AtomicU64::new(0);
    group.bench_function("logbook_replace_partition", |b| {
        b.to_async(&rt).iter(|| async {
            let n = run.fetch_add(1, Ordering::Relaxed);
            replace(&table, date, &data, format!("r{n}")).await
        })
    });
    group.finish();
}

criterion_group!(benches, replace_vs_raw);
criterion_main!(benches);
