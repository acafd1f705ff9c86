//! logbook's side of the as-of join comparison with DuckDB.
//!
//! `asof_join prepare DIR [ORDERS DAYS [KEYS]]` writes a warehouse (by
//! default 2M order rows over 90 days, each date's rows sorted by customer;
//! a customers dimension of 100k keys with history) and `DIR/files.json` (the live
//! Parquet files, and the files of the version half-way through, for
//! DuckDB to read the same bytes).
//! `asof_join query DIR one|range` runs one as-of join and prints
//! `{"ms": ..., "rows": ..., "checksum": ...}`; `asof_join analyst DIR
//! QUERY` runs one query of `analyst_queries.json` and also prints the
//! bytes the scans read and the process's peak memory; `asof_join
//! analyst-at URI DIR QUERY` does the same on a copy of DIR's warehouse
//! at URI (`s3://...`, reached as object_store's environment variables
//! say: `benches/compare/analyst_s3.sh`).
//! Run them through `benches/compare/run.sh` and `analyst.sh`, which
//! alternate with DuckDB.

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

/// Customers unless `prepare` is given another count.
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

async fn prepare(dir: &str, facts_n: usize, days_n: u64, keys: usize) {
    #[allow(non_snake_case)]
    let (FACTS, DAYS) = (facts_n, days_n);
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
    for k in 0..keys {
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
    // Each date's rows sorted by customer, as an analyst's table would
    // declare (`--sort-by customer`).
    let properties = logbook::TableProperties::default()
        .with_sort_by("orders", &facts, &["customer"])
        .unwrap();
    let facts = wh
        .create_table_with_properties("orders", facts, properties)
        .await
        .unwrap();
    let mut snapshot_version = 0;
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
                    (0..n).map(|_| customer((rng.next() % keys as u64) as usize)),
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
        let v = w.commit().await.unwrap().version;
        if d + 1 == DAYS / 2 {
            snapshot_version = v;
        }
    }
    // The live files, for DuckDB.
    let root = std::path::Path::new(dir).canonicalize().unwrap();
    let fact_files = paths(&facts.latest().await.unwrap(), &root.join("orders")).await;
    let dim_files: Vec<String> = dim
        .latest()
        .await
        .unwrap()
        .dimension_files()
        .iter()
        .map(|f| root.join("customers").join(&f.path).display().to_string())
        .collect();
    let snapshot_files = paths(
        &facts.at_version(snapshot_version).await.unwrap(),
        &root.join("orders"),
    )
    .await;
    let point = (FACTS * 3 / 5) as i64;
    let json = serde_json::json!({
        "facts": fact_files,
        "dimension": dim_files,
        "snapshot_files": snapshot_files,
        "one_day": ONE_DAY,
        "point_id": point,
        "range_lo": point,
        "range_hi": point + 20_000,
        "snapshot_version": snapshot_version,
    });
    std::fs::write(root.join("files.json"), json.to_string()).unwrap();
}

/// The data files of `snapshot`, as paths under `table_dir`.
async fn paths(snapshot: &logbook::Snapshot, table_dir: &std::path::Path) -> Vec<String> {
    snapshot
        .partitions()
        .await
        .unwrap()
        .iter()
        .flat_map(|p| {
            p.files
                .iter()
                .map(|f| table_dir.join(&f.path).display().to_string())
        })
        .collect()
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

/// Run query `name` of `analyst_queries.json` and print its time, rows,
/// checksum (the sum of the last column), bytes the scans read, and peak
/// memory (the process's, from `/proc`). The warehouse is read at `uri`
/// (DIR's own, or a copy of it elsewhere); `files.json` from `dir`; the
/// arguments from `settings` on are statements run first.
async fn analyst(uri: &str, dir: &str, name: &str, settings: usize) {
    let queries: serde_json::Value =
        serde_json::from_str(include_str!("analyst_queries.json")).unwrap();
    let files: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/files.json")).unwrap())
            .unwrap();
    let fill = |text: &str| -> String {
        let mut out = text.to_string();
        for (k, v) in files.as_object().unwrap() {
            let v = v.as_str().map_or(v.to_string(), str::to_string);
            out = out.replace(&format!("{{{k}}}"), &v);
        }
        out
    };
    let query = &queries[name];
    let sql = fill(
        query["sql"]
            .as_str()
            .expect("a query of analyst_queries.json"),
    );
    let logical_date = query["logical_date"]
        .as_str()
        .map(|d| fill(d).parse().unwrap());
    // Engine set-up is off the clock, as DuckDB's `connect()` and `SET
    // threads` are in analyst_side.py: the session (functions, catalog; it
    // opens no table) and its settings. Opening the tables the query names
    // (reading their logs) is on it, as DuckDB's views over the files are.
    let wh = Warehouse::open(uri).unwrap();
    let options = QueryOptions {
        logical_date,
        ..Default::default()
    };
    let ctx = session(&wh, options, None).await.unwrap();
    for set in std::env::args().skip(settings) {
        ctx.sql(&set).await.unwrap().collect().await.unwrap();
    }
    let start = Instant::now();
    let plan = logbook::query::sql(&ctx, &sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = logbook::query::datafusion::physical_plan::collect(plan.clone(), ctx.task_ctx())
        .await
        .unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let checksum: f64 = batches
        .iter()
        .map(|b| {
            let last = b.column(b.num_columns() - 1);
            let last = logbook::query::datafusion::arrow::compute::cast(
                last,
                &arrow_schema::DataType::Float64,
            )
            .unwrap();
            last.as_primitive::<Float64Type>()
                .iter()
                .flatten()
                .sum::<f64>()
        })
        .sum();
    let bytes = scan_bytes(&plan);
    let peak = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0);
    println!(
        "{{\"ms\": {ms:.1}, \"rows\": {rows}, \"checksum\": {checksum:.2}, \"bytes\": {bytes}, \"peak_mib\": {peak:.0}}}"
    );
}

/// Bytes every scan of `plan` read, from their metrics.
fn scan_bytes(plan: &Arc<dyn logbook::query::datafusion::physical_plan::ExecutionPlan>) -> usize {
    let own = plan
        .metrics()
        .and_then(|m| m.sum_by_name("bytes_read"))
        .map_or(0, |v| v.as_usize());
    own + plan.children().into_iter().map(scan_bytes).sum::<usize>()
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
            let n = |i: usize, default: u64| args.get(i).map_or(default, |s| s.parse().unwrap());
            prepare(dir, n(3, 2_000_000) as usize, n(4, 90), n(5, KEYS as u64) as usize).await
        }
        (Some("analyst"), Some(dir)) => {
            analyst(dir, dir, args.get(3).map_or("", |s| s.as_str()), 4).await
        }
        (Some("analyst-at"), Some(uri)) => {
            let arg = |i: usize| args.get(i).map_or("", |s| s.as_str());
            analyst(uri, arg(3), arg(4), 5).await
        }
        (Some("query"), Some(dir)) => query(dir, args.get(3).map_or("one", |s| s.as_str())).await,
        (Some("explain"), Some(dir)) => explain(dir).await,
        (Some("time"), Some(dir)) => time_sql(dir, args.get(3).map_or("SELECT 1", |s| s.as_str())).await,
        _ => eprintln!(
            "usage: asof_join prepare DIR [ORDERS DAYS [KEYS]] | asof_join analyst DIR QUERY [SQL...] | asof_join analyst-at URI DIR QUERY [SQL...] | asof_join query DIR one|range [SQL...] | asof_join explain DIR [SQL...] | asof_join time DIR QUERY\n(SQL: statements such as SET run first)"
        ),
    }
}
