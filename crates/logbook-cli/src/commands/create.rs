use logbook_core::{TableSchema, Warehouse};

use super::CliError;
use crate::input;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// Columns as `name:type,...` (bool, int32, int64, float32, float64,
    /// string, date, timestamp, timestamptz), or a Parquet file whose schema is copied.
    #[arg(long)]
    schema: String,
    /// The date column each partition is a day of.
    #[arg(long)]
    partition_by: String,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let schema = if args.schema.ends_with(".parquet") {
        let arrow = input::parquet_schema(std::path::Path::new(&args.schema))?;
        TableSchema::from_arrow(&args.table, &arrow, &args.partition_by)?
    } else {
        TableSchema::parse_spec(&args.table, &args.schema, &args.partition_by)?
    };
    let table = warehouse.create_table(&args.table, schema.clone()).await?;
    println!(
        "created table {} ({}) partitioned by {} at {}",
        table.name(),
        schema.spec(),
        args.partition_by,
        table.location().uri()
    );
    Ok(())
}
