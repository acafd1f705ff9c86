use logbook_core::schema::columns_from_arrow;
use logbook_core::{TableProperties, TableSchema, Warehouse};

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
    /// The date column each partition is a day of (fact tables).
    #[arg(long, required_unless_present = "scd2", conflicts_with = "scd2")]
    partition_by: Option<String>,
    /// Create a slowly changing dimension (SCD2); logbook adds `valid_from` and `valid_to`.
    #[arg(long, requires = "key")]
    scd2: bool,
    /// The dimension's business key column(s), comma-separated.
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// The first logical date of the table's daily schedule (for `status` and `plan`).
    #[arg(long)]
    schedule_start: Option<chrono::NaiveDate>,
    /// Each date reads the previous date (a running balance): recommitting a
    /// date makes every later date stale.
    #[arg(long)]
    depends_on_previous: bool,
    /// Keep a Delta Lake log (`delta`: `_delta_log/`, for Spark, Trino,
    /// DuckDB, polars and deltalake), Iceberg metadata (`iceberg`:
    /// `metadata/`, for pyiceberg, DuckDB, Trino, Snowflake, Athena) or
    /// both (`delta,iceberg`) beside logbook's log.
    #[arg(long, value_name = "delta|iceberg|delta,iceberg|none")]
    mirror: Option<String>,
    /// Sort each row group by these columns (comma-separated): filters on
    /// them then skip most row groups and pages.
    #[arg(long, value_delimiter = ',', value_name = "COLUMNS")]
    sort_by: Vec<String>,
    /// Write a bloom filter for these columns (comma-separated): an
    /// equality or IN lookup skips row groups that cannot hold the value.
    #[arg(long, value_delimiter = ',', value_name = "COLUMNS")]
    bloom_filter: Vec<String>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let mirrors = match &args.mirror {
        Some(value) => super::parse_mirror(&args.table, value)?,
        None => vec![],
    };
    let columns = if args.schema.ends_with(".parquet") {
        let arrow = input::parquet_schema(std::path::Path::new(&args.schema))?;
        columns_from_arrow(&args.table, &arrow)?
    } else {
        logbook_core::schema::parse_columns(&args.table, &args.schema)?
    };
    let (schema, how) = match &args.partition_by {
        Some(col) => (
            TableSchema::new(&args.table, columns, col)?,
            format!("partitioned by {col}"),
        ),
        None => {
            let keys: Vec<&str> = args.key.iter().map(String::as_str).collect();
            (
                TableSchema::dimension(&args.table, columns, &keys)?,
                format!("a dimension keyed by {}", args.key.join(",")),
            )
        }
    };
    let properties = TableProperties {
        schedule_start: args.schedule_start,
        depends_on_previous: args.depends_on_previous,
        ..Default::default()
    }
    .with_mirrors(&mirrors);
    let properties = properties
        .with_sort_by(&args.table, &schema, &super::common::names(&args.sort_by))?
        .with_bloom_filters(
            &args.table,
            &schema,
            &super::common::names(&args.bloom_filter),
        )?;
    let table = warehouse
        .create_table_with_properties(&args.table, schema.clone(), properties)
        .await?;
    println!(
        "created table {} ({}), {how}, at {}",
        table.name(),
        schema.spec(),
        table.location().uri()
    );
    Ok(())
}
