//! Scale (issue 19): a commit, an open, `status` of 365 dates and a vacuum
//! one commit after the last (a routine one, and one listing every file)
//! on tables of 10 commits and 10 partitions,
//! 365 and 365 (a year: what status of a year reads at least), 1,000,000
//! commits and 365 partitions, and 1,000,000 commits and 100,000
//! partitions (274 years of days), in format 2 and, for comparison, in
//! format 1. `plan` is computed from a status, so it costs what status does. Then
//! the same on a table of 10/10 in a warehouse of 1 table and of 1,000.
//! Then `status` of 365 dates whose runs read a dimension with 10 and with
//! 10,000 commits of history (real commits, spread over the year).
//!
//! ```text
//! cargo run --release --example scale -- [ROUNDS] [LATENCY_MS] [COMMITS] [DIMENSION_HISTORY]
//! ```
//!
//! Tables are generated straight into the format (`support/synthetic.rs`),
//! their schedule starting 365 days before their last date,
//! on `memory://`, each behind object_store's `ThrottledStore` sleeping
//! `LATENCY_MS` (default 0) before every call, as a remote store's round
//! trip would; a first vacuum, before the latency, leaves the ledger later
//! vacuums bring forward (and, having listed every file, lets the routine
//! ones within the hour look only at what changed). The real code then commits, opens, computes
//! status and vacuums on them. Each round runs every case once per measurement, cases
//! interleaved, so a noisy machine slows all of them alike (status rounds
//! after the commit and open rounds: a status on a large table leaves the
//! allocator slow for what follows); the figures are medians over rounds
//! and each case's ratio to the small table. `memory://` lists everything
//! and filters when asked to list from an offset (S3 starts there), so the
//! status figures at 100,000 partitions include listing all 100,000 files.

#[path = "../support/synthetic.rs"]
mod synthetic;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Date32Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use logbook::format::InputRead;
use logbook::maintenance::{vacuum, VacuumOptions};
use logbook::{RunInfo, StorageLocation, Table, TableOptions, TableSchema, Warehouse};
use object_store::memory::InMemory;
use object_store::throttle::{ThrottleConfig, ThrottledStore};
use synthetic::{generate, Synthetic};

const SPEC: &str = "date:date,id:int64,name:string";

struct Case {
    label: String,
    /// Measured by vacuum too (a format 1 root at 100,000 partitions lists
    /// 3,288 months: the first vacuum, reading a million of them, would
    /// take hours).
    vacuumed: bool,
    warehouse: Warehouse,
    table: Table,
    last: NaiveDate,
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: u64| {
        args.get(i)
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let (rounds, latency, commits) = (arg(0, 10), arg(1, 0), arg(2, 1_000_000));
    let dimension_history = arg(3, 10_000);
    let last = NaiveDate::from_ymd_opt(2026, 6, 15).unwrap();
    let mut cases = Vec::new();
    let sizes = [
        (2, 10, 10),
        (2, 365, 365),
        (2, 365, commits),
        (2, 100_000, commits),
        (1, 100_000, commits),
    ];
    for (format, partitions, history) in sizes {
        let started = Instant::now();
        let store = store();
        let root = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
        let spec = synthetic(format, partitions, history, last);
        cases.push(case(&root, "orders", &spec, format == 2).await);
        slow_down(&store, latency);
        eprintln!(
            "generated {} in {:?}",
            cases.last().unwrap().label,
            started.elapsed()
        );
    }
    // Commit and open against the smallest table, status and vacuum
    // against a year.
    report(&cases, rounds, (0, 1)).await;
    drop(cases);

    println!();
    let mut cases = Vec::new();
    for tables in [1, 1000] {
        let store = store();
        let root = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
        let spec = synthetic(2, 10, 10, last);
        for other in 1..tables {
            case(&root, &format!("other_{other:04}"), &spec, false).await;
        }
        let mut case = case(&root, "orders", &spec, true).await;
        case.label = format!("format 2, 10/10, in a warehouse of {tables} tables");
        slow_down(&store, latency);
        cases.push(case);
    }
    report(&cases, rounds, (0, 0)).await;
    drop(cases);

    let mut cases = Vec::new();
    for history in [10, dimension_history] {
        let started = Instant::now();
        cases.push(dimension_case(history, last, latency).await);
        eprintln!(
            "built {} in {:?}",
            cases.last().unwrap().label,
            started.elapsed()
        );
    }
    let status = status_times(&cases, rounds).await;
    println!();
    println!("| table | status of 365 dates reading the dimension | ratio to history 10 |");
    println!("|---|---|---|");
    for (c, case) in cases.iter().enumerate() {
        println!(
            "| {} |{}",
            case.label,
            cell(Some(status[c]), Some(status[0]))
        );
    }
}

/// Time each case's commit, open, status of 365 dates and vacuum over
/// `rounds`, cases interleaved, and print medians with each one's ratio
/// to case `base.0` (commit and open) or `base.1` (status and vacuum).
async fn report(cases: &[Case], rounds: u64, base: (usize, usize)) {
    let base = [base.0, base.0, base.1, base.1, base.1];
    // A handle's first commit also checks that the store honours put-if-absent.
    for case in cases {
        commit(case, "warm-up").await;
    }
    let mut times: Vec<[Vec<Duration>; 2]> = cases.iter().map(|_| Default::default()).collect();
    // Commits and opens first, then status: status on a large table
    // allocates and frees enough to slow whatever follows it for a while.
    for round in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            let started = Instant::now();
            commit(case, &format!("bench-{round}")).await;
            times[c][0].push(started.elapsed());
        }
        for (c, case) in cases.iter().enumerate() {
            let started = Instant::now();
            let opened = case.warehouse.table("orders").await.unwrap();
            let snap = opened.latest().await.unwrap();
            assert_eq!(snap.partition(case.last).await.unwrap().unwrap().rows, 10);
            times[c][1].push(started.elapsed());
        }
    }
    let status = status_times(cases, rounds).await;
    let vacuums = vacuum_times(cases, rounds, NOW).await;
    let full = vacuum_times(cases, rounds, FULL).await;
    let medians: Vec<[Option<Duration>; 5]> = (0..cases.len())
        .map(|c| {
            let (commit, open) = (median(&times[c][0]), median(&times[c][1]));
            [
                Some(commit),
                Some(open),
                Some(status[c]),
                vacuums[c],
                full[c],
            ]
        })
        .collect();
    println!(
        "| table | commit | ratio | open | ratio | status of 365 dates | ratio | vacuum | ratio | vacuum listing every file | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (c, case) in cases.iter().enumerate() {
        let mut row = format!("| {} |", case.label);
        for m in 0..5 {
            row += &cell(medians[c][m], medians[base[m]][m]);
        }
        println!("{row}");
    }
    println!(
        "\nRatios: commit and open to \"{}\", status and vacuum to \"{}\".",
        cases[base[0]].label, cases[base[2]].label
    );
}

/// Median time of a vacuum (`options`) right after a commit, over
/// `rounds`, cases interleaved; the commit is not timed.
async fn vacuum_times(
    cases: &[Case],
    rounds: u64,
    options: VacuumOptions,
) -> Vec<Option<Duration>> {
    let mut times: Vec<Vec<Duration>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (c, case) in cases.iter().enumerate().filter(|(_, c)| c.vacuumed) {
            commit(case, &format!("before-vacuum-{round}")).await;
            let started = Instant::now();
            vacuum(&case.table, options).await.unwrap();
            times[c].push(started.elapsed());
        }
    }
    times
        .iter()
        .map(|t| (!t.is_empty()).then(|| median(t)))
        .collect()
}

/// Everything unreferenced and not being written is old enough. The
/// first vacuum of a table lists every file; later ones, within the hour,
/// look only at what changed since (see `FULL` for one that lists).
const NOW: VacuumOptions = VacuumOptions {
    retention_ms: 0,
    dry_run: false,
    force: true,
    full: false,
};

/// The same, listing every file (what each vacuum did before the ledger
/// released files by itself, and what one does at least once per retention).
const FULL: VacuumOptions = VacuumOptions { full: true, ..NOW };

/// ` t ms | ratio |`, or dashes when either was not measured.
fn cell(t: Option<Duration>, base: Option<Duration>) -> String {
    let (Some(t), Some(base)) = (t, base) else {
        return " - | - |".into();
    };
    let ratio = t.as_secs_f64() / base.as_secs_f64();
    format!(" {:.2} ms | {ratio:.2} |", t.as_secs_f64() * 1e3)
}

/// A `memory://` store that sleeps `latency` ms before every call once
/// [`slow_down`] is called (tables are built at full speed first).
fn store() -> Arc<ThrottledStore<InMemory>> {
    Arc::new(ThrottledStore::new(
        InMemory::new(),
        ThrottleConfig::default(),
    ))
}

fn slow_down(store: &ThrottledStore<InMemory>, latency: u64) {
    let wait = Duration::from_millis(latency);
    store.config_mut(|c| {
        c.wait_delete_per_call = wait;
        c.wait_get_per_call = wait;
        c.wait_list_per_call = wait;
        c.wait_list_with_delimiter_per_call = wait;
        c.wait_put_per_call = wait;
    });
}

/// A table of `partitions` days up to `last` and `commits` commits, its
/// schedule starting a year before `last`.
fn synthetic(format: u32, partitions: u64, commits: u64, last: NaiveDate) -> Synthetic {
    Synthetic {
        format,
        first: last - chrono::Days::new(partitions - 1),
        partitions,
        commits,
        rows_per_partition: 10,
        schedule_start: Some(last - chrono::Days::new(364)),
        inputs: None,
    }
}

/// Table `name` generated under `root` as `spec` says, vacuumed once if
/// `vacuumed` (the first vacuum reads every version; later ones bring its
/// ledger forward).
async fn case(root: &StorageLocation, name: &str, spec: &Synthetic, vacuumed: bool) -> Case {
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    generate(&root.child(name).unwrap(), schema, spec).await;
    let warehouse = Warehouse::new(root.clone(), TableOptions::default());
    let table = warehouse.table(name).await.unwrap();
    if vacuumed {
        vacuum(&table, NOW).await.unwrap();
    }
    Case {
        vacuumed,
        label: format!(
            "format {}, {} commits, {} partitions",
            spec.format, spec.commits, spec.partitions
        ),
        warehouse,
        table,
        last: spec.first + chrono::Days::new(spec.partitions - 1),
    }
}

/// A dimension `customers` with `history` real commits, each moving one
/// customer from an effective date spread over the year up to `last`
/// (open-ended, as SCD2 changes are), and `orders` with the year's 365
/// dates generated, each run recording that it read `customers` as of its
/// date at the version loaded by then (as a nightly job would have).
async fn dimension_case(history: u64, last: NaiveDate, latency: u64) -> Case {
    let store = store();
    let root = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
    let warehouse = Warehouse::new(root.clone(), TableOptions::default());
    let schema = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let customers = warehouse.create_table("customers", schema).await.unwrap();
    let first = last - chrono::Days::new(364);
    let mut loaded: Vec<(NaiveDate, u64)> = Vec::new();
    for k in 0..history {
        let effective = first + chrono::Days::new(k * 365 / history);
        let region = if k % 2 == 0 { "north" } else { "south" };
        let rows = RecordBatch::try_from_iter([
            ("customer", Arc::new(StringArray::from(vec!["c-1"])) as _),
            ("region", Arc::new(StringArray::from(vec![region])) as _),
        ])
        .unwrap();
        let done = customers
            .apply_changes(effective, &[rows], RunInfo::new(format!("load-{k}")))
            .await
            .unwrap();
        loaded.push((effective, done.version));
    }
    let read_at = move |d: NaiveDate| {
        let i = loaded.partition_point(|(e, _)| *e <= d).max(1);
        vec![InputRead {
            table: "customers".into(),
            version: loaded[i - 1].1,
            dimension: true,
            as_of: vec![d],
            ..Default::default()
        }]
    };
    let spec = Synthetic {
        format: 2,
        first,
        partitions: 365,
        commits: 366,
        rows_per_partition: 10,
        schedule_start: Some(first),
        inputs: Some(Arc::new(read_at)),
    };
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    generate(&root.child("orders").unwrap(), schema, &spec).await;
    slow_down(&store, latency);
    let table = warehouse.table("orders").await.unwrap();
    Case {
        vacuumed: false,
        label: format!("dimension history {history}"),
        warehouse,
        table,
        last,
    }
}

/// Median time of `status` of each case's last 365 dates over `rounds`,
/// cases interleaved, each status run twice in a row and the second timed:
/// the first after another case's pays for what that one left (measured:
/// 0.2 ms alone, 7 ms right after a format 1 status on 100,000 partitions).
async fn status_times(cases: &[Case], rounds: u64) -> Vec<Duration> {
    let mut times: Vec<Vec<Duration>> = cases.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            let from = case.last - chrono::Days::new(364);
            for timed in [false, true] {
                let started = Instant::now();
                let status =
                    logbook::lifecycle::status(&case.warehouse, "orders", Some(from), case.last)
                        .await
                        .unwrap();
                assert_eq!(status.dates.len(), 365);
                if timed {
                    times[c].push(started.elapsed());
                }
            }
        }
    }
    times.iter().map(|t| median(t)).collect()
}

/// Replace the case's last date with 10 rows as run `run`.
async fn commit(case: &Case, run: &str) {
    let mut w = case
        .table
        .replace_partition(case.last, RunInfo::new(run))
        .await
        .unwrap();
    w.write(&batch(case.last)).await.unwrap();
    w.commit().await.unwrap();
}

fn batch(date: NaiveDate) -> RecordBatch {
    let days = (date - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32;
    let schema = TableSchema::parse_spec("orders", SPEC, "date")
        .unwrap()
        .arrow_schema();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Date32Array::from(vec![days; 10])),
            Arc::new(Int64Array::from_iter_values(0..10)),
            Arc::new(StringArray::from_iter_values(
                (0..10).map(|i| format!("n{i}")),
            )),
        ],
    )
    .unwrap()
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}
