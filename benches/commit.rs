//! Commit and open latency as history and partition count grow.
//!
//! `cargo bench --bench commit`. Tables live in `memory://` so the figures
//! measure logbook's own work (format, probing, manifests), not the disk.

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use logbook::{StorageLocation, Table, TableOptions};
use support::*;

fn commit_latency(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let small = batches(day(0), 10);
    let mut group = c.benchmark_group("commit");
    group
        .measurement_time(Duration::from_secs(5))
        .sample_size(30);
    // (label, commits of history, distinct partitions)
    for (history, partitions) in [(10u64, 10u64), (1_000, 10), (10_000, 10), (3_650, 3_650)] {
        let loc = StorageLocation::parse("memory://bench")
            .unwrap()
            .child("bench")
            .unwrap();
        let table = rt.block_on(async {
            let t = create(loc.clone(), TableOptions::default()).await;
            for i in 0..history {
                let d = day(i % partitions);
                replace(&t, d, &batches(d, 10), format!("h{i}")).await;
            }
            t
        });
        let run = AtomicU64::new(0);
        let label = format!("history={history}/partitions={partitions}");
        group.bench_function(BenchmarkId::new("replace_10_rows", &label), |b| {
            b.to_async(&rt).iter(|| async {
                let n = run.fetch_add(1, Ordering::Relaxed);
                replace(&table, day(0), &small, format!("b{n}")).await
            })
        });
        group.bench_function(BenchmarkId::new("open_latest", &label), |b| {
            b.to_async(&rt).iter(|| async {
                let t = Table::open(loc.clone(), "bench", TableOptions::default())
                    .await
                    .unwrap();
                let s = t.latest().await.unwrap();
                s.partition(day(0)).await.unwrap().unwrap().rows
            })
        });
    }
    group.finish();
}

criterion_group!(benches, commit_latency);
criterion_main!(benches);
