//! Multi-table publishes: what they cost, and what they cost everything
//! else (issue #37's three figures, BENCHMARKS.md "Multi-table publish").
//!
//! `cargo bench --bench publish`. Tables live in `memory://` so the figures
//! measure logbook's own work (the publish log, parts, resolution).
//!
//! - `commit/{none,publishes,elsewhere}`: opening a table and replacing
//!   one partition after the same setup work (a date staged in three
//!   tables and published), in a warehouse that has had no multi-table
//!   publish, in one where the table's head is a publish's part before
//!   each commit (the case that reads a decision), and in one with
//!   publishes of the other tables only.
//! - `publish/{1,3}x90`: publishing a stage of 90 dates in one table, and
//!   across three tables as one; `publish_5ms/*` the same with a 5 ms
//!   round trip per store request (`support/latency.rs`).
//! - `query/{none,publishes}`: opening a table and reading one date, in a
//!   warehouse with no publish and in one with 1,000 that included it.
//!
//! Each timed step follows the same untimed commit to a table no publish
//! touches (`z`). Without it the figure measured the setup: the first
//! commit after a CPU-heavy setup runs slower whatever the warehouse holds
//! (on this 2-core VM; cache or host scheduling). Measured on 6eeaeed: the
//! `none` setup given four extra warehouse listings made `commit/none`
//! 1.39 ms against 1.06 ms for `publishes`, and a second commit straight
//! after the timed one took the same 520-820 µs in every setup.

// Shared with the other benches; this one creates tables through a warehouse.
#[path = "support/latency.rs"]
mod latency;
#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use latency::LatencyStore;
use logbook::{RunInfo, StorageLocation, TableSchema, Warehouse};
use object_store::memory::InMemory;
use support::*;

const TABLES: [&str; 3] = ["a", "b", "c"];

/// The table of the untimed commit before each timed step (see the doc).
const SETTLE: &str = "z";

/// A warehouse of three tables with `dates` dates each; then `publishes`
/// multi-table publishes of one date across all three.
async fn warehouse(uri: &str, dates: u64, publishes: u64) -> Warehouse {
    warehouse_at(Warehouse::open(uri).unwrap(), dates, publishes).await
}

/// [`warehouse`] in `wh`.
async fn warehouse_at(wh: Warehouse, dates: u64, publishes: u64) -> Warehouse {
    for name in TABLES.into_iter().chain([SETTLE]) {
        let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
        let t = wh.create_table(name, schema).await.unwrap();
        for i in 0..dates {
            replace(&t, day(i), &batches(day(i), 10), format!("{name}-{i}")).await;
        }
    }
    for p in 0..publishes {
        stage_all(&wh, &format!("p{p}"), &TABLES, 1, 10).await;
        wh.stage(&format!("p{p}"))
            .await
            .unwrap()
            .publish(true)
            .await
            .unwrap();
    }
    wh
}

/// The untimed commit before each timed step: the same in every setup.
async fn settle(wh: &Warehouse, i: u64) {
    let t = wh.table(SETTLE).await.unwrap();
    replace(&t, day(0), &batches(day(0), 10), format!("settle-{i}")).await;
}

/// Stage `dates` dates of `rows` rows in `tables` under stage `name`.
async fn stage_all(wh: &Warehouse, name: &str, tables: &[&str], dates: u64, rows: usize) {
    for t in tables {
        let stage = wh.table(t).await.unwrap().stage(name).await.unwrap();
        for i in 0..dates {
            let mut w = stage
                .replace_partition(day(i), RunInfo::new(format!("{name}-{t}-{i}")))
                .await
                .unwrap();
            for b in batches(day(i), rows) {
                w.write(&b).await.unwrap();
            }
            w.commit().await.unwrap();
        }
    }
}

fn publish_costs(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("multi_publish");
    group
        .measurement_time(Duration::from_secs(5))
        .sample_size(20);

    // Single-table commits beside multi-table publishes: each iteration's
    // setup stages one date in all three tables and publishes them, the
    // timed routine is a commit to `a` alone. The setups do the same work
    // and differ only in how the stages are published:
    // - `none`: each table's stage on its own (plain commits; the
    //   warehouse has no multi-table publish);
    // - `publishes`: all three as one (the head of `a` is a decided part:
    //   the case that reads a decision);
    // - `elsewhere`: `b` and `c` as one, `a` on its own (publishes in the
    //   warehouse, none at this table's head).
    for (label, publishes) in [("none", 0u64), ("publishes", 100), ("elsewhere", 100)] {
        let wh = rt.block_on(warehouse(
            &format!("memory://commit-{label}"),
            10,
            publishes,
        ));
        let n = AtomicU64::new(0);
        let rows = batches(day(5), 10);
        group.bench_function(BenchmarkId::new("commit", label), |b| {
            b.iter_batched(
                || {
                    let i = n.fetch_add(1, Ordering::Relaxed);
                    rt.block_on(async {
                        let name = format!("x{i}");
                        stage_all(&wh, &name, &TABLES, 1, 1).await;
                        let alone: &[&str] = match label {
                            "none" => &TABLES,
                            "elsewhere" => &TABLES[..1],
                            _ => &[],
                        };
                        for t in alone {
                            let stage = wh.table(t).await.unwrap().stage(&name).await.unwrap();
                            stage.publish(true).await.unwrap();
                        }
                        if alone.len() < TABLES.len() {
                            wh.stage(&name).await.unwrap().publish(true).await.unwrap();
                        }
                        settle(&wh, i).await;
                        i
                    })
                },
                |i| {
                    // A writer opens the table, then commits (as `logbook write` does).
                    rt.block_on(async {
                        let t = wh.table("a").await.unwrap();
                        replace(&t, day(5), &rows, format!("w{i}")).await
                    })
                },
                BatchSize::PerIteration,
            )
        });
    }

    // Publishing 90 dates: one table, or three as one, each iteration in a
    // fresh warehouse (`memory://` answers a listing by walking every
    // object below it, so in one warehouse the publishes slowed as stages
    // piled up: 1x90 went from 2.8 to 9.5 ms over one run's samples, which
    // no real store does). `publish` is logbook's own work; `publish_5ms`
    // adds a 5 ms round trip per request, the store a warehouse lives on.
    for (label, latency) in [("publish", 0u64), ("publish_5ms", 5)] {
        for tables in [1usize, 3] {
            group.bench_function(BenchmarkId::new(label, format!("{tables}x90")), |b| {
                b.iter_batched(
                    || {
                        rt.block_on(async {
                            let store = Arc::new(LatencyStore::new(Arc::new(InMemory::new())));
                            let loc =
                                StorageLocation::from_store(store.clone(), "wh", "memory://wh");
                            let wh =
                                warehouse_at(Warehouse::new(loc, Default::default()), 90, 0).await;
                            stage_all(&wh, "s", &TABLES[..tables], 90, 10).await;
                            settle(&wh, 0).await;
                            store.set_latency(Duration::from_millis(latency));
                            wh
                        })
                    },
                    |wh| {
                        rt.block_on(async {
                            wh.stage("s").await.unwrap().publish(true).await.unwrap()
                        })
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }

    // A one-table query after 1,000 multi-table publishes.
    for (label, publishes) in [("none", 0u64), ("publishes", 1_000)] {
        let uri = format!("memory://query-{label}");
        let loc = rt
            .block_on(warehouse(&uri, 10, publishes))
            .location()
            .clone();
        group.bench_function(BenchmarkId::new("query", label), |b| {
            b.to_async(&rt).iter(|| async {
                let wh = Warehouse::new(loc.clone(), Default::default());
                let t = wh.table("b").await.unwrap();
                let s = t.latest().await.unwrap();
                s.read_partition(day(0)).await.unwrap().len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, publish_costs);
criterion_main!(benches);
