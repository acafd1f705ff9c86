use logbook_core::Warehouse;

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
    let status = if args.status {
        table.mirror_status().await?
    } else {
        table.sync_mirror().await?
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("status serialises")
        );
        return Ok(());
    }
    let Some(format) = status.format else {
        let left = match (status.delta_version, status.mirrored_version) {
            (Some(d), Some(v)) => format!("; a Delta log is left at Delta version {d} (logbook version {v}): it no longer follows the table, and vacuum deletes files it names; delete `_delta_log/` or turn the mirror on again"),
            (Some(d), None) => format!("; a Delta log not written by logbook is at Delta version {d}"),
            _ => String::new(),
        };
        println!(
            "table {}: no mirror (turn one on with `logbook alter {} --mirror delta`){left}",
            status.table, status.table
        );
        return Ok(());
    };
    let at = match (status.mirrored_version, status.delta_version) {
        (Some(v), Some(d)) => format!("holds logbook version {v} as {format} version {d}"),
        _ => "holds nothing yet".to_string(),
    };
    println!(
        "table {}: {format} mirror {at}; latest version {}, {} behind",
        status.table, status.logbook_version, status.behind
    );
    Ok(())
}
