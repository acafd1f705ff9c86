//! The web UI on a large warehouse (issue 20): how long the home page and
//! a table's calendar take with 200 tables × 3 years of daily partitions.
//!
//! ```text
//! cargo run --release --example ui_warehouse -- prepare DIR [TABLES] [DAYS]
//! cargo run --release --example ui_warehouse -- measure DIR [ROUNDS]
//! ```
//!
//! `prepare` builds the warehouse on local disk through the public API: a
//! dimension `customers` and `TABLES - 1` daily tables, each date run as
//! its own write (recording that it read `customers` at its date) into a
//! stage that is published once per table, then a back-dated change to
//! `customers` so that every table's recent dates are stale with reasons,
//! and one missing date in every tenth table. Dates end yesterday.
//!
//! `measure` serves the UI in this process on a loopback port and times
//! whole HTTP requests (connect, answer, read to the end) over the socket,
//! as a browser would make them: the first request of each page, then the
//! median of `ROUNDS` more. Pages read the warehouse afresh on every
//! request (the UI keeps no cache), so every request does the whole work.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use chrono::{Days, NaiveDate};
use logbook::format::{InputRead, TableProperties};
use logbook::{RunInfo, StorageLocation, TableOptions, TableSchema, Warehouse};

const CUSTOMERS: usize = 100;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(0), arg(1)) {
        (Some("prepare"), Some(dir)) => {
            let tables = arg(2).map_or(200, |s| s.parse().expect("TABLES"));
            let days = arg(3).map_or(1096, |s| s.parse().expect("DAYS"));
            prepare(dir, tables, days).await
        }
        (Some("measure"), Some(dir)) => {
            let rounds = arg(2).map_or(10, |s| s.parse().expect("ROUNDS"));
            measure(dir, rounds).await
        }
        _ => panic!("usage: ui_warehouse prepare DIR [TABLES] [DAYS] | measure DIR [ROUNDS]"),
    }
}

fn warehouse(dir: &str) -> Warehouse {
    std::fs::create_dir_all(dir).unwrap();
    let dir = std::fs::canonicalize(dir).unwrap();
    let uri = format!("file://{}", dir.display());
    Warehouse::new(
        StorageLocation::parse(&uri).unwrap(),
        TableOptions::default(),
    )
}

fn yesterday() -> NaiveDate {
    use logbook::clock::{Clock, SystemClock};
    logbook::dates::yesterday(SystemClock.now_millis())
}

fn regions(shift: usize) -> RecordBatch {
    let customers = (0..CUSTOMERS).map(|c| format!("c{c:03}"));
    let regions = (0..CUSTOMERS).map(|c| format!("r{}", (c + shift) % 7));
    RecordBatch::try_from_iter([
        (
            "customer",
            Arc::new(StringArray::from_iter_values(customers)) as _,
        ),
        (
            "region",
            Arc::new(StringArray::from_iter_values(regions)) as _,
        ),
    ])
    .unwrap()
}

async fn prepare(dir: &str, tables: usize, days: u64) {
    let started = Instant::now();
    let wh = warehouse(dir);
    let last = yesterday();
    let first = last - Days::new(days - 1);
    let schema = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let customers = wh.create_table("customers", schema).await.unwrap();
    // Ten loads over the three years: a dimension with a history.
    for i in 0..10u64 {
        let effective = first + Days::new(i * days / 10);
        customers
            .apply_changes(
                effective,
                &[regions(i as usize)],
                RunInfo::new(format!("load-{i}")),
            )
            .await
            .unwrap();
    }
    let dim_version = customers.latest_version().await.unwrap();
    for t in 1..tables {
        let name = format!("t{t:03}");
        let schema = TableSchema::parse_spec(&name, "date:date,orders:int64", "date").unwrap();
        let properties = TableProperties {
            schedule_start: Some(first),
            ..TableProperties::default()
        };
        let table = wh
            .create_table_with_properties(&name, schema, properties)
            .await
            .unwrap();
        let stage = table.stage("load").await.unwrap();
        for i in 0..days {
            // Every tenth table misses one date.
            if t % 10 == 0 && i == days / 2 {
                continue;
            }
            let date = first + Days::new(i);
            let mut w = stage
                .replace_partition(date, RunInfo::new(format!("{name}-{date}")))
                .await
                .unwrap();
            w.record_inputs(vec![InputRead {
                table: "customers".into(),
                version: dim_version,
                dates: None,
                asked: Vec::new(),
                dimension: true,
                as_of: vec![date],
                ..Default::default()
            }]);
            let batch = RecordBatch::try_from_iter([
                (
                    "date",
                    Arc::new(arrow_array::Date32Array::from(vec![date_days(date)])) as _,
                ),
                (
                    "orders",
                    Arc::new(Int64Array::from(vec![1000 + (i % 37) as i64])) as _,
                ),
            ])
            .unwrap();
            w.write(&batch).await.unwrap();
            w.commit().await.unwrap();
        }
        stage.publish(false).await.unwrap();
        if t % 20 == 0 {
            eprintln!("{name}: {:.0?}", started.elapsed());
        }
    }
    // A back-dated correction covering the last 60 days: their runs read
    // regions that have changed since, so they are stale with a reason.
    customers
        .apply_changes(
            last - Days::new(60),
            &[regions(3)],
            RunInfo::new("correction"),
        )
        .await
        .unwrap();
    eprintln!(
        "prepared {tables} tables × {days} days in {:.1?}",
        started.elapsed()
    );
}

fn date_days(d: NaiveDate) -> i32 {
    (d - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32
}

/// One whole GET over a new connection; the status and body length.
fn get(addr: &str, path: &str) -> (u16, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    let text = String::from_utf8_lossy(&body);
    let status = text[9..12].parse().unwrap();
    (status, body.len())
}

async fn measure(dir: &str, rounds: usize) {
    let wh = warehouse(dir);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(logbook_ui::serve(
        wh.clone(),
        logbook_ui::UiOptions::default(),
        listener,
        std::future::pending(),
    ));
    let tables = wh.list_tables().await.unwrap();
    let stale = yesterday() - Days::new(10);
    let pages = [
        ("home", "/".to_string()),
        ("calendar", "/tables/t001".to_string()),
        ("status json", "/api/tables/t001/status".to_string()),
        ("partition", format!("/tables/t001/partitions/{stale}")),
        ("tables json", "/api/tables".to_string()),
    ];
    println!("warehouse: {dir} ({} tables)", tables.len());
    println!("| page | path | bytes | first | median of {rounds} | min |");
    println!("|---|---|---|---|---|---|");
    for (label, path) in pages {
        let addr = addr.clone();
        let p = path.clone();
        let (first, bytes, times) = tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let (status, bytes) = get(&addr, &p);
            assert_eq!(status, 200, "{p}");
            let first = t.elapsed();
            let mut times: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    get(&addr, &p);
                    t.elapsed()
                })
                .collect();
            times.sort();
            (first, bytes, times)
        })
        .await
        .unwrap();
        println!(
            "| {label} | `{path}` | {bytes} | {:.0?} | {:.0?} | {:.0?} |",
            first,
            times[times.len() / 2],
            times[0]
        );
    }
}
