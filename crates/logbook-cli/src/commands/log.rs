use logbook_core::Warehouse;

use super::CliError;
use crate::output::{print_table, timestamp};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// Print one JSON array of log entries.
    #[arg(long)]
    json: bool,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    if args.json {
        let lines = logbook_core::answers::log(&table).await?;
        println!(
            "{}",
            serde_json::to_string_pretty(&lines).expect("log entries serialise")
        );
        return Ok(());
    }
    let history = table.history().await?;
    let rows = history
        .iter()
        .map(|e| {
            let run = e.run.as_ref();
            vec![
                e.version.to_string(),
                timestamp(e.timestamp_ms),
                match &e.change {
                    Some(change) => format!("{} ({change})", e.operation),
                    None => e.operation.to_string(),
                },
                e.dates
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                e.rows_added.to_string(),
                format!("+{} -{}", e.files_added, e.files_removed),
                run.map(|r| r.run_id.clone()).unwrap_or_default(),
                run.and_then(|r| r.code_version.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    print_table(
        &[
            "version",
            "committed",
            "operation",
            "dates",
            "rows",
            "files",
            "run",
            "code",
        ],
        rows,
    );
    Ok(())
}
