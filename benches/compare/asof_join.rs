//! logbook's side of the as-of join comparison with DuckDB.
//!
//! `asof_join prepare DIR` writes a warehouse (2M order rows over 90 days,
//! a 100k-key customers dimension with history) and `DIR/files.json` (the
//! live Parquet files, for DuckDB to read the same bytes).
//! `asof_join query DIR one|range` runs one query and prints
//! `{"ms": ..., "rows": ..., "checksum": ...}`.
//! Run it through `benches/compare/run.sh`, which alternates with DuckDB.

#[path = "../support/rng.rs"]
mod rng;

use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use logbook::query::{session, QueryOptions};
use logbook::{RunInfo, TableSchema, Warehouse};
use rng::Rng;

const FACTS: usize = 2_000_000;
const DAYS: u64 = 90;
const KEYS: usize = 100_000;
pub const ONE_DAY: &str = "2026-02-15";

const RANGE_SQL: &str = "SELECT o.date, c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c \
     ON o.customer = c.customer AND o.date >= c.valid_from AND (c.valid_to IS NULL OR o.date < c.valid_to) \
     GROUP BY o.date, c.region";

fn first_day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()
}

fn customer(k: usize) -> String {
    format!("c{k:06}")
}

async fn prepare(dir: &str) {
    let wh = Warehouse::open(dir).unwrap();
    let dim = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let dim = wh.create_table("customers", dim).await.unwrap();
    let regions = [
        "Berlin", "Munich", "Hamburg", "Cologne", "Leipzig", "Bremen",
    ];
    let mut rng = Rng(42);
    // Every key starts on day 0; a third move once, a tenth move twice.
    let mut changes: Vec<Vec<(String, String)>> = vec![Vec::new(); DAYS as usize];
    for k in 0..KEYS {
        changes[0].push((customer(k), regions[k % regions.len()].to_string()));
        let moves = if k % 10 == 0 {
            2
        } else if k % 3 == 0 {
            1
        } else {
            0
        };
        for _ in 0..moves {
            let day = 1 + (rng.next() % (DAYS - 1)) as usize;
            let region = regions[(rng.next() % regions.len() as u64) as usize].to_string();
            changes[day].retain(|(c, _)| *c != customer(k));
            changes[day].push((customer(k), region));
        }
    }
    let changed_days: Vec<usize> = (0..DAYS as usize)
        .filter(|d| !changes[*d].is_empty())
        .collect();
    for d in changed_days {
        let rows = &changes[d];
        let batch = RecordBatch::try_from_iter([
            (
                "customer",
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.0.as_str()),
                )) as _,
            ),
            (
                "region",
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.1.as_str()),
                )) as _,
            ),
        ])
        .unwrap();
        let day = first_day() + chrono::Days::new(d as u64);
        dim.apply_changes(day, &[batch], RunInfo::new(format!("dim-{d}")))
            .await
            .unwrap();
    }
    let facts = TableSchema::parse_spec(
        "orders",
        "date:date,order_id:int64,customer:string,amount:float64",
        "date",
    )
    .unwrap();
    let facts = wh.create_table("orders", facts).await.unwrap();
    let per_day = FACTS / DAYS as usize;
    let mut id = 0i64;
    for d in 0..DAYS {
        let day = first_day() + chrono::Days::new(d);
        let n = if d == DAYS - 1 {
            FACTS - per_day * (DAYS as usize - 1)
        } else {
            per_day
        };
        let ids: Vec<i64> = (id..id + n as i64).collect();
        id += n as i64;
        let batch = RecordBatch::try_from_iter([
            (
                "date",
                Arc::new(Date32Array::from(vec![logbook::dates::to_days(day); n])) as _,
            ),
            ("order_id", Arc::new(Int64Array::from(ids)) as _),
            (
                "customer",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|_| customer((rng.next() % KEYS as u64) as usize)),
                )) as _,
            ),
            (
                "amount",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|_| (rng.next() % 100_000) as f64 / 100.0),
                )) as _,
            ),
        ])
        .unwrap();
        let mut w = facts
            .replace_partition(day, RunInfo::new(format!("f-{d}")))
            .await
            .unwrap();
        w.write(&batch).await.unwrap();
        w.commit().await.unwrap();
    }
    // The live files, for DuckDB.
    let root = std::path::Path::new(dir).canonicalize().unwrap();
    let fact_files: Vec<String> = facts
        .latest()
        .await
        .unwrap()
        .partitions()
        .await
        .unwrap()
        .iter()
        .flat_map(|p| {
            p.files
                .iter()
                .map(|f| root.join("orders").join(&f.path).display().to_string())
        })
        .collect();
    let dim_files: Vec<String> = dim
        .latest()
        .await
        .unwrap()
        .dimension_files()
        .iter()
        .map(|f| root.join("customers").join(&f.path).display().to_string())
        .collect();
    let json = format!(
        "{{\"facts\": {:?}, \"dimension\": {:?}, \"one_day\": \"{ONE_DAY}\"}}",
        fact_files, dim_files
    );
    std::fs::write(root.join("files.json"), json).unwrap();
}

async fn query(dir: &str, which: &str) {
    let wh = Warehouse::open(dir).unwrap();
    let day: NaiveDate = ONE_DAY.parse().unwrap();
    let start = Instant::now();
    let (options, sql) = match which {
        // A run for one logical date: dimensions resolve as of that date.
        "one" => (
            QueryOptions { logical_date: Some(day), ..Default::default() },
            "SELECT c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c ON o.customer = c.customer \
             WHERE o.date = logical_date() GROUP BY c.region",
        ),
        // Every date against the interval valid on it.
        _ => (
            QueryOptions::default(),
            RANGE_SQL,
        ),
    };
    let ctx = session(&wh, options, None).await.unwrap();
    for set in std::env::args().skip(4) {
        ctx.sql(&set).await.unwrap().collect().await.unwrap();
    }
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let col = if which == "one" { 1 } else { 2 };
    let checksum: f64 = batches
        .iter()
        .flat_map(|b| {
            b.column(col)
                .as_primitive::<Float64Type>()
                .values()
                .to_vec()
        })
        .sum();
    println!("{{\"ms\": {ms:.1}, \"rows\": {rows}, \"checksum\": {checksum:.2}}}");
}

/// Print `EXPLAIN ANALYZE` of the range join: where its time goes per operator.
async fn explain(dir: &str) {
    let wh = Warehouse::open(dir).unwrap();
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    for set in std::env::args().skip(3) {
        ctx.sql(&set).await.unwrap().collect().await.unwrap();
    }
    let sql = format!("EXPLAIN ANALYZE {RANGE_SQL}");
    let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
    for b in &batches {
        let plans = b.column(1).as_string::<i32>();
        for i in 0..b.num_rows() {
            println!("{}", plans.value(i));
        }
    }
}

/// Time any query over the warehouse (for profiling one part of a join).
async fn time_sql(dir: &str, sql: &str) {
    let wh = Warehouse::open(dir).unwrap();
    let start = Instant::now();
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    println!("{{\"ms\": {ms:.1}, \"rows\": {rows}}}");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("prepare"), Some(dir)) => prepare(dir).await,
        (Some("query"), Some(dir)) => query(dir, args.get(3).map_or("one", |s| s.as_str())).await,
        (Some("explain"), Some(dir)) => explain(dir).await,
        (Some("time"), Some(dir)) => time_sql(dir, args.get(3).map_or("SELECT 1", |s| s.as_str())).await,
        _ => eprintln!(
            "usage: asof_join prepare DIR | asof_join query DIR one|range [SQL...] | asof_join explain DIR [SQL...] | asof_join time DIR QUERY\n(SQL: statements such as SET run first)"
        ),
    }
}
