use logbook_core::{PartitionSummary, Warehouse};

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

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let rows: Vec<PartitionSummary> =
        logbook_core::answers::partitions(&table, args.version).await?;
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
            "class",
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
                    r.class.map(|c| c.to_string()).unwrap_or_default(),
                    r.code_version.unwrap_or_default(),
                    r.dimensions.map(|d| d.to_string()).unwrap_or_default(),
                ]
            })
            .collect(),
    );
    Ok(())
}
