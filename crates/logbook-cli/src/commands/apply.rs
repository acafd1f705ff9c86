use std::path::PathBuf;

use chrono::NaiveDate;
use logbook_core::{RunInfo, Warehouse, VALID_FROM, VALID_TO};

use super::CliError;
use crate::input;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dimension table name.
    table: String,
    /// The business date the new states take effect (YYYY-MM-DD).
    #[arg(long)]
    effective: NaiveDate,
    /// CSV or Parquet file of new states (key and attribute columns).
    file: PathBuf,
    /// The file lists keys to close at the effective date instead.
    #[arg(long, conflicts_with = "snapshot")]
    delete: bool,
    /// The file is the whole dimension at the effective date: keys missing from it are closed.
    #[arg(long)]
    snapshot: bool,
    /// Run id recorded with the commit.
    #[arg(long)]
    run_id: Option<String>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let schema = table.latest().await?.schema().clone();
    if schema.keys().is_none() {
        return Err(CliError::Input(format!(
            "table {}: is not a dimension (SCD2) table; replace its partitions with `logbook write` or `logbook run`",
            table.name()
        )));
    }
    let skip: Vec<&str> = if args.delete {
        let keys = schema.keys().unwrap_or_default();
        schema
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .filter(|c| !keys.iter().any(|k| k == c))
            .collect()
    } else {
        vec![VALID_FROM, VALID_TO]
    };
    let batches =
        input::open(&args.file, &schema, table.name(), &skip)?.collect::<Result<Vec<_>, _>>()?;
    let run = RunInfo {
        run_id: args
            .run_id
            .unwrap_or_else(|| format!("apply-{}", args.effective)),
        logical_date: Some(args.effective),
        ..RunInfo::default()
    };
    let result = if args.delete {
        table.apply_deletes(args.effective, &batches, run).await?
    } else if args.snapshot {
        table.apply_snapshot(args.effective, &batches, run).await?
    } else {
        table.apply_changes(args.effective, &batches, run).await?
    };
    match result.affected {
        Some(r) => eprintln!(
            "{} key(s) changed; business dates {}..{} affected",
            result.changed_keys,
            r.from,
            r.to.map_or("(open)".to_string(), |t| t.to_string())
        ),
        None => eprintln!("nothing changed; nothing committed"),
    }
    println!("{}", result.version);
    Ok(())
}
