use chrono::NaiveDate;
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
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let change = PropertiesChange {
        schedule_start: args.schedule_start,
        depends_on_previous: match (args.depends_on_previous, args.no_depends_on_previous) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
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
    Ok(())
}
