//! `logbook schema`: a table's columns with their field ids.

use logbook_core::Warehouse;

use super::CliError;
use crate::output::print_table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// The schema as of this version (default: the latest).
    #[arg(long)]
    version: Option<u64>,
    /// The schema as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let snap = match args.version {
        Some(v) => table.at_version(v).await?,
        None => table.latest().await?,
    };
    let schema = snap.schema();
    if args.json {
        let text = serde_json::to_string_pretty(schema)
            .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    println!(
        "table {} at version {}: schema version {}",
        table.name(),
        snap.version(),
        schema.version
    );
    let rows = schema
        .columns
        .iter()
        .map(|c| {
            vec![
                c.id.to_string(),
                c.name.clone(),
                c.ty.name().to_string(),
                if c.nullable { "yes" } else { "no" }.to_string(),
                c.added_in.to_string(),
            ]
        })
        .collect();
    print_table(&["field id", "name", "type", "nullable", "added in"], rows);
    Ok(())
}
