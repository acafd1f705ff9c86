use logbook_core::Warehouse;
use serde::Serialize;

use super::CliError;
use crate::output::print_table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// Show the partitions as of this version (default: latest).
    #[arg(long)]
    version: Option<u64>,
    /// Print one JSON array of partitions.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    date: chrono::NaiveDate,
    rows: u64,
    files: usize,
    bytes: u64,
    version: u64,
    run_id: Option<String>,
    code_version: Option<String>,
    /// `as-of`, `current`, or null when written without a run context.
    dimensions: Option<logbook_core::DimensionMode>,
    inputs: Vec<logbook_core::InputRead>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let snapshot = match args.version {
        Some(v) => table.at_version(v).await?,
        None => table.latest().await?,
    };
    let rows: Vec<Row> = snapshot
        .partitions()
        .await?
        .into_iter()
        .map(|p| Row {
            date: p.date,
            rows: p.rows,
            files: p.files.len(),
            bytes: p.files.iter().map(|f| f.size).sum(),
            version: p.version,
            run_id: p.run.as_ref().map(|r| r.run_id.clone()),
            code_version: p.run.as_ref().and_then(|r| r.code_version.clone()),
            dimensions: p.run.as_ref().and_then(|r| r.dimensions),
            inputs: p.run.map(|r| r.inputs).unwrap_or_default(),
        })
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("partitions serialise")
        );
        return Ok(());
    }
    print_table(
        &[
            "date",
            "rows",
            "files",
            "bytes",
            "version",
            "run",
            "code",
            "dimensions",
        ],
        rows.into_iter()
            .map(|r| {
                vec![
                    r.date.to_string(),
                    r.rows.to_string(),
                    r.files.to_string(),
                    r.bytes.to_string(),
                    r.version.to_string(),
                    r.run_id.unwrap_or_default(),
                    r.code_version.unwrap_or_default(),
                    r.dimensions.map(|d| d.to_string()).unwrap_or_default(),
                ]
            })
            .collect(),
    );
    Ok(())
}
