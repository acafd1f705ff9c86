//! Compaction against the physical limit: a plain read-and-rewrite of the
//! same small files into one file with the parquet crate (no commit, no
//! object store).
//!
//! `cargo bench --bench compact`.

#[path = "support/mod.rs"]
mod support;

use std::fs::File;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use logbook::maintenance::{compact, CompactOptions};
use logbook::{StorageLocation, Table, TableOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use support::*;

const ROWS: usize = 1_000_000;
const FILES: usize = 100;

fn compact_vs_raw(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let date = day(10);
    let data = batches(date, ROWS);
    let bytes: usize = data.iter().map(|b| b.get_array_memory_size()).sum();
    let mut group = c.benchmark_group("compact_100_files_1m_rows");
    group
        .measurement_time(Duration::from_secs(15))
        .sample_size(10);
    group.throughput(Throughput::Bytes(bytes as u64));

    // One fresh table of 100 small files per iteration (setup not timed).
    let setup = || {
        let dir = tempfile::tempdir().unwrap();
        let table: Table = rt.block_on(async {
            let loc = StorageLocation::parse(dir.path().to_str().unwrap()).unwrap();
            let opts = TableOptions::default().with_max_rows_per_file(ROWS / FILES);
            let t = create(loc.clone(), opts).await;
            replace(&t, date, &data, "small".into()).await;
            Table::open(loc, "bench", TableOptions::default())
                .await
                .unwrap()
        });
        (dir, table)
    };
    group.bench_function("logbook_compact", |b| {
        b.iter_batched(
            setup,
            |(dir, table)| {
                let report = rt
                    .block_on(compact(&table, &CompactOptions::default(), &|_| {}))
                    .unwrap();
                assert_eq!((report.files_before, report.files_after), (FILES, 1));
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("raw_read_rewrite", |b| {
        b.iter_batched(
            setup,
            |(dir, table)| {
                let files = rt.block_on(async {
                    table
                        .latest()
                        .await
                        .unwrap()
                        .partition(date)
                        .await
                        .unwrap()
                        .unwrap()
                        .files
                });
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .set_max_row_group_row_count(Some(1 << 20))
                    .build();
                let out = File::create(dir.path().join("raw.parquet")).unwrap();
                let mut writer = None;
                for f in &files {
                    let input = File::open(dir.path().join(&f.path)).unwrap();
                    let reader = ParquetRecordBatchReaderBuilder::try_new(input)
                        .unwrap()
                        .with_batch_size(8192)
                        .build()
                        .unwrap();
                    for batch in reader {
                        let batch = batch.unwrap();
                        let w = writer.get_or_insert_with(|| {
                            ArrowWriter::try_new(
                                out.try_clone().unwrap(),
                                batch.schema(),
                                Some(props.clone()),
                            )
                            .unwrap()
                        });
                        w.write(&batch).unwrap();
                    }
                }
                writer.unwrap().close().unwrap();
                dir
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, compact_vs_raw);
criterion_main!(benches);
