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
    let history = table.history().await?;
    if args.json {
        // Each entry with the Delta version that mirrors it (null when the
        // mirror is off, has not reached it, or began after it).
        let latest = table.latest().await?;
        let mirror = latest.properties().mirror;
        let mirrored = match mirror {
            // The log is the truth: a mirror that cannot say where it
            // stands shows no Delta versions, with a warning.
            Some(_) => match table.mirror_status().await {
                Ok(status) => status.mirrored_version,
                Err(e) => {
                    tracing::warn!(table = %table.name(), error = %e, "no Delta versions shown");
                    None
                }
            },
            None => None,
        };
        let entries: Vec<serde_json::Value> = history
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e).expect("log entries serialise");
                v["delta_version"] =
                    logbook_core::mirror::delta_version_of(mirror.as_ref(), mirrored, e.version)
                        .into();
                v
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&entries).expect("log entries serialise")
        );
        return Ok(());
    }
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
