use chrono::NaiveDate;
use logbook_core::schema::{ColumnType, SchemaChange};
use logbook_core::{PropertiesChange, Warehouse};

use super::CliError;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("change").required(true).multiple(true)))]
pub struct Args {
    /// Table name.
    table: String,
    /// The first logical date of the table's daily schedule.
    #[arg(long, group = "change")]
    schedule_start: Option<NaiveDate>,
    /// Declare that each date reads the previous date (a chain).
    #[arg(long, group = "change", conflicts_with = "no_depends_on_previous")]
    depends_on_previous: bool,
    /// Declare that dates are independent.
    #[arg(long, group = "change")]
    no_depends_on_previous: bool,
    /// Add a nullable column, NAME:TYPE (older partitions read it as null).
    #[arg(long, group = "change", value_name = "NAME:TYPE")]
    add_column: Option<String>,
    /// Widen a column, NAME:TYPE (int32 to int64, float32 to float64).
    #[arg(long, group = "change", value_name = "NAME:TYPE")]
    widen_column: Option<String>,
    /// Rename a column, OLD:NEW.
    #[arg(long, group = "change", value_name = "OLD:NEW")]
    rename_column: Option<String>,
    /// Drop a column.
    #[arg(long, group = "change", value_name = "NAME")]
    drop_column: Option<String>,
    /// Keep exactly these mirrors on (`delta`: a Delta Lake log beside
    /// logbook's; `iceberg`: Iceberg metadata; `delta,iceberg`: both;
    /// `none`: neither). Turning one on writes its mirror of the current
    /// snapshot.
    #[arg(
        long,
        group = "change",
        value_name = "delta|iceberg|delta,iceberg|none"
    )]
    mirror: Option<String>,
    /// Sort each row group of files written from now on by these columns
    /// (comma-separated; `none`: unsorted).
    #[arg(long, group = "change", value_name = "COLUMNS|none")]
    sort_by: Option<String>,
    /// Write bloom filters for these columns in files written from now on
    /// (comma-separated; `none`: no filters).
    #[arg(long, group = "change", value_name = "COLUMNS|none")]
    bloom_filter: Option<String>,
    /// Move the table's metadata up to this format version (2: the root
    /// lists five-year spans, so a commit's cost does not grow with the
    /// table's age). Older logbook builds then refuse the table.
    #[arg(long, group = "change", value_name = "N")]
    format: Option<u32>,
}

/// The field ids a `--sort-by`/`--bloom-filter` value names (`none`: none).
fn layout_ids(
    table: &logbook_core::Table,
    schema: &logbook_core::TableSchema,
    value: &Option<String>,
    what: &str,
) -> Result<Option<Vec<u32>>, CliError> {
    let Some(value) = value else {
        return Ok(None);
    };
    if value.trim() == "none" {
        return Ok(Some(Vec::new()));
    }
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    Ok(Some(schema.field_ids(table.name(), &names, what)?))
}

/// The schema change the arguments ask for, if any.
fn schema_change(table: &str, args: &Args) -> Result<Option<SchemaChange>, CliError> {
    let pair = |flag: &str, value: &str| -> Result<(String, String), CliError> {
        value
            .split_once(':')
            .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
            .filter(|(a, b)| !a.is_empty() && !b.is_empty())
            .ok_or_else(|| {
                CliError::Input(format!(
                    "table {table}: {flag} {value:?}: expected two parts separated by ':'"
                ))
            })
    };
    let typed = |flag: &str, value: &str| -> Result<(String, ColumnType), CliError> {
        let (name, ty) = pair(flag, value)?;
        let ty = ColumnType::parse(&ty).ok_or_else(|| {
            CliError::Input(format!(
                "table {table}: {flag} {value:?}: unknown type {ty:?} (bool, int32, int64, float32, float64, string, date, timestamp, timestamptz)"
            ))
        })?;
        Ok((name, ty))
    };
    let schema_flags = [
        args.add_column.is_some(),
        args.widen_column.is_some(),
        args.rename_column.is_some(),
        args.drop_column.is_some(),
    ]
    .iter()
    .filter(|f| **f)
    .count();
    if schema_flags > 1 || (schema_flags == 1 && property_flags(args)) {
        return Err(CliError::Input(format!(
            "table {table}: give one schema change per alter, apart from schedule changes (each is its own commit)"
        )));
    }
    Ok(Some(if let Some(v) = &args.add_column {
        let (name, ty) = typed("--add-column", v)?;
        SchemaChange::AddColumn { name, ty }
    } else if let Some(v) = &args.widen_column {
        let (name, ty) = typed("--widen-column", v)?;
        SchemaChange::WidenColumn { name, ty }
    } else if let Some(v) = &args.rename_column {
        let (from, to) = pair("--rename-column", v)?;
        SchemaChange::RenameColumn { from, to }
    } else if let Some(name) = &args.drop_column {
        SchemaChange::DropColumn { name: name.clone() }
    } else {
        return Ok(None);
    }))
}

/// Does `args` change a property (a properties commit of its own)?
fn property_flags(args: &Args) -> bool {
    args.schedule_start.is_some()
        || args.depends_on_previous
        || args.no_depends_on_previous
        || args.sort_by.is_some()
        || args.bloom_filter.is_some()
        || args.format.is_some()
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    if let Some(change) = schema_change(table.name(), &args)? {
        let description = change.to_string();
        let info = table.alter_schema(change).await?;
        let schema = table.at_version(info.version).await?.schema().clone();
        println!(
            "table {}: {description} at version {} (schema version {}: {})",
            table.name(),
            info.version,
            schema.version,
            schema.spec()
        );
        return Ok(());
    }
    if let Some(mirror) = &args.mirror {
        if property_flags(&args) {
            return Err(CliError::Input(format!(
                "table {}: --mirror is its own commit; change the schedule, chain, sort order, bloom filters or format separately",
                table.name()
            )));
        }
        let formats = super::parse_mirror(table.name(), mirror)?;
        let info = table.set_mirror(&formats).await?;
        // The property commit has landed; where the mirrors stand is extra.
        let at = match table.mirror_status().await {
            Ok(statuses) => statuses
                .iter()
                .filter(|s| s.enabled)
                .filter_map(|s| {
                    s.mirror_version
                        .map(|d| format!(" ({} version {d})", s.format))
                })
                .collect::<String>(),
            Err(e) => format!(" (a mirror is behind: {e})"),
        };
        let on: Vec<String> = formats.iter().map(|f| f.to_string()).collect();
        println!(
            "table {}: mirror {} at version {}{at}",
            table.name(),
            match on.is_empty() {
                true => "off".to_string(),
                false => format!("{} on", on.join(",")),
            },
            info.version,
        );
        return Ok(());
    }
    let schema = table.latest().await?.schema().clone();
    let change = PropertiesChange {
        schedule_start: args.schedule_start,
        depends_on_previous: match (args.depends_on_previous, args.no_depends_on_previous) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        mirrors: vec![],
        sort_by: layout_ids(&table, &schema, &args.sort_by, "sort by")?,
        bloom_filters: layout_ids(&table, &schema, &args.bloom_filter, "bloom filter")?,
        format: args.format,
    };
    let info = table.alter(change).await?;
    let props = table.at_version(info.version).await?.properties().clone();
    println!(
        "table {} altered at version {}: schedule starts {}, {}",
        table.name(),
        info.version,
        props
            .schedule_start
            .map_or("at the first committed date".to_string(), |d| d.to_string()),
        if props.depends_on_previous {
            "each date depends on the previous one"
        } else {
            "dates are independent"
        }
    );
    let names = |ids: &[u32]| -> String {
        let names: Vec<&str> = ids
            .iter()
            .filter_map(|id| schema.columns.iter().find(|c| c.id == *id))
            .map(|c| c.name.as_str())
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(",")
        }
    };
    if args.format.is_some() {
        println!("format {}", table.at_version(info.version).await?.format());
    }
    if args.sort_by.is_some() || args.bloom_filter.is_some() {
        println!(
            "new files: sorted by {}; bloom filters on {}",
            names(&props.sort_by),
            names(&props.bloom_filters)
        );
    }
    Ok(())
}
