//! Commit latency with a mirror off, Delta on and Iceberg on: the same
//! replace of a 10-row date (and of a 200k-row date) on local disk. The
//! Delta mirror's extra work is a read of the previous Delta entry and one
//! put-if-absent of the new one; the Iceberg mirror's a read of the previous
//! metadata and manifest list, and four puts (the month's manifest, the
//! manifest list, the metadata, the hint).
//!
//! Every 20 timed commits an untimed `expire --keep-last 10` holds the
//! retained history between 10 and 30 versions, whatever the number of
//! iterations: an Iceberg metadata file holds every retained snapshot, so
//! without it the figure would grow with criterion's iteration count (a
//! table's real history is bounded by its expiry, as an Iceberg table's by
//! `expire_snapshots`).
//!
//! `cargo bench --bench mirror`.

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use logbook::maintenance::{expire, Keep};
use logbook::{MirrorFormat, StorageLocation, TableOptions};
use support::*;

fn mirror_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("mirror");
    group
        .measurement_time(Duration::from_secs(5))
        .sample_size(30);
    for rows in [10usize, 200_000] {
        let data = batches(day(0), rows);
        // Interleave off and on per size, so drift in the machine hits both.
        for mirror in [None, Some(MirrorFormat::Delta), Some(MirrorFormat::Iceberg)] {
            let which = mirror.map_or("off".to_string(), |f| f.to_string());
            let name = format!("{which}-{rows}");
            let loc = StorageLocation::local(&dir.path().join(&name))
                .unwrap()
                .child("bench")
                .unwrap();
            let table = rt.block_on(async {
                let t = create(loc, TableOptions::default()).await;
                // Ten dates of history, then the mirror (if any) from there.
                for i in 0..10 {
                    replace(&t, day(i), &batches(day(i), 10), format!("h{i}")).await;
                }
                t.set_mirror(&Vec::from_iter(mirror)).await.unwrap();
                t
            });
            let run = AtomicU64::new(0);
            let label = format!("rows={rows}");
            group.bench_function(
                BenchmarkId::new(format!("replace_mirror_{which}"), &label),
                |b| {
                    let (table, run, data) = (&table, &run, &data);
                    b.to_async(&rt).iter_custom(|iters| async move {
                        let mut timed = Duration::ZERO;
                        for _ in 0..iters {
                            let n = run.fetch_add(1, Ordering::Relaxed);
                            if n % 20 == 0 {
                                expire(table, Keep::Last(10)).await.unwrap();
                            }
                            let start = Instant::now();
                            replace(table, day(0), data, format!("b{n}")).await;
                            timed += start.elapsed();
                        }
                        timed
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, mirror_overhead);
criterion_main!(benches);
