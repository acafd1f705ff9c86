//! A first run: a table from the bundled fixtures, one date replaced twice.

use logbook_core::{ErrorKind, RunInfo, TableSchema, Warehouse};

use super::CliError;
use crate::input;

const TABLE: &str = "demo_orders";
const SPEC: &str = "date:date,order_id:int64,customer:string,amount:float64,placed_at:timestamp";
const FIRST: (&str, &str) = (
    "orders-2026-03-15.csv",
    include_str!("../../../../fixtures/orders-2026-03-15.csv"),
);
const FIXED: (&str, &str) = (
    "orders-2026-03-15-fixed.csv",
    include_str!("../../../../fixtures/orders-2026-03-15-fixed.csv"),
);
const NEXT: (&str, &str) = (
    "orders-2026-03-16.csv",
    include_str!("../../../../fixtures/orders-2026-03-16.csv"),
);

pub async fn run(warehouse: &Warehouse) -> Result<(), CliError> {
    println!("warehouse: {}", warehouse.location().uri());
    let schema = TableSchema::parse_spec(TABLE, SPEC, "date")?;
    let table = match warehouse.create_table(TABLE, schema.clone()).await {
        Ok(t) => {
            println!("created table {TABLE}");
            t
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            println!("table {TABLE} exists; re-running the demo's runs (they are idempotent)");
            warehouse.table(TABLE).await?
        }
        Err(e) => return Err(e.into()),
    };
    let scratch = std::env::temp_dir().join(format!("logbook-demo-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| CliError::Input(e.to_string()))?;
    let runs = [
        ("2026-03-15", "nightly-2026-03-15", "v1", FIRST),
        ("2026-03-16", "nightly-2026-03-16", "v1", NEXT),
        ("2026-03-15", "backfill-2026-03-15", "v2", FIXED),
    ];
    for (date, run_id, code, (name, body)) in runs {
        let path = scratch.join(name);
        std::fs::write(&path, body).map_err(|e| CliError::Input(e.to_string()))?;
        let date: chrono::NaiveDate = date.parse().expect("demo dates parse");
        let mut writer = table
            .replace_partition(
                date,
                RunInfo {
                    run_id: run_id.to_string(),
                    job: Some("demo".into()),
                    code_version: Some(code.into()),
                    logical_date: Some(date),
                    ..RunInfo::default()
                },
            )
            .await?;
        for batch in input::open(&path, &schema, TABLE, &[])? {
            writer.write(&batch?).await?;
        }
        let info = writer.commit().await?;
        let what = if info.already_committed {
            "already committed as"
        } else {
            "committed"
        };
        println!(
            "run {run_id} ({name}) for {date}: {what} version {}",
            info.version
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let snapshot = table.latest().await?;
    println!("\npartitions at version {}:", snapshot.version());
    for p in snapshot.partitions().await? {
        let run = p.run.map(|r| r.run_id).unwrap_or_default();
        println!(
            "  {}  {} rows  {} file(s)  written by {run} at version {}",
            p.date,
            p.rows,
            p.files.len(),
            p.version
        );
    }
    println!("\nTry: logbook log {TABLE}   logbook partitions {TABLE} --version 1");
    Ok(())
}
