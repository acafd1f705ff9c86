use logbook_core::{MirrorFormat, Warehouse};

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// Only say how far the mirror is behind; write nothing.
    #[arg(long)]
    status: bool,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

/// Catch a table's mirror up with its latest version (each commit does it
/// after it lands; this repairs a mirror left behind by a failure), or show
/// where it stands.
pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let statuses = if args.status {
        table.mirror_status().await?
    } else {
        table.sync_mirror().await?
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&statuses).expect("status serialises")
        );
        return Ok(());
    }
    if statuses.is_empty() {
        println!(
            "table {}: no mirror (turn one on with `logbook alter {} --mirror delta|iceberg`)",
            args.table, args.table
        );
    }
    for status in statuses {
        let format = status.format;
        if !status.enabled {
            let left = match (status.mirror_version, status.mirrored_version) {
                (Some(d), Some(v)) => format!("a {format} log is left at {} (logbook version {v}): it no longer follows the table, and vacuum deletes files it names; delete it or turn the mirror on again", where_held(format, d)),
                (Some(d), _) => format!("a {format} log not written by logbook is at {}", where_held(format, d)),
                _ => continue,
            };
            println!("table {}: {format} mirror off; {left}", status.table);
            continue;
        }
        let at = match (status.mirrored_version, status.mirror_version) {
            (Some(v), Some(d)) => format!("holds logbook version {v} as {}", where_held(format, d)),
            _ => "holds nothing yet".to_string(),
        };
        println!(
            "table {}: {format} mirror {at}; latest version {}, {} behind",
            status.table, status.logbook_version, status.behind
        );
    }
    Ok(())
}

/// Where mirror version `d` lives, as a reader would name it.
pub(crate) fn where_held(format: MirrorFormat, d: u64) -> String {
    match format {
        MirrorFormat::Delta => format!("Delta version {d}"),
        // Iceberg counts metadata files from 1.
        MirrorFormat::Iceberg => format!("Iceberg metadata/v{}.metadata.json", d + 1),
    }
}
