//! `logbook stage`: audit, publish or drop a staged backfill.

use logbook_core::Warehouse;

use super::CliError;
use crate::output::print_table;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Per staged date: rows and sums of numeric columns, main line vs stage.
    Diff {
        table: String,
        name: String,
        /// One JSON object per date.
        #[arg(long)]
        json: bool,
    },
    /// Commit every staged date in one atomic commit.
    Publish {
        table: String,
        name: String,
        /// Publish even if a staged date was replaced on the main line after the stage began.
        #[arg(long)]
        force: bool,
    },
    /// Discard the stage and its files.
    Drop { table: String, name: String },
    /// The dates staged in a stage.
    List { table: String, name: String },
}

pub async fn run(warehouse: &Warehouse, command: Command) -> Result<(), CliError> {
    match command {
        Command::Diff { table, name, json } => {
            let stage = warehouse.table(&table).await?.existing_stage(&name).await?;
            let diff = stage.diff().await?;
            if json {
                let text = serde_json::to_string_pretty(&diff)
                    .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
                println!("{text}");
                return Ok(());
            }
            let mut header = vec!["date".to_string(), "old rows".into(), "new rows".into()];
            let columns: Vec<String> = diff
                .first()
                .map(|d| d.sums.keys().cloned().collect())
                .unwrap_or_default();
            for c in &columns {
                header.push(format!("old sum({c})"));
                header.push(format!("new sum({c})"));
            }
            let rows = diff
                .iter()
                .map(|d| {
                    let mut row = vec![
                        d.date.to_string(),
                        d.old_rows.map_or("-".into(), |r| r.to_string()),
                        d.new_rows.to_string(),
                    ];
                    for (old, new) in d.sums.values() {
                        row.push(old.map_or("-".into(), |v| v.to_string()));
                        row.push(new.to_string());
                    }
                    row
                })
                .collect();
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            print_table(&header, rows);
        }
        Command::Publish { table, name, force } => {
            let stage = warehouse.table(&table).await?.existing_stage(&name).await?;
            let dates = stage.partitions().await?.len();
            let info = stage.publish(force).await?;
            println!(
                "published stage {name} of table {table}: {dates} date(s) in version {}",
                info.version
            );
        }
        Command::Drop { table, name } => {
            let stage = warehouse.table(&table).await?.existing_stage(&name).await?;
            let dates = stage.drop_stage().await?;
            println!(
                "dropped stage {name} of table {table} ({dates} staged date(s)); vacuum deletes its files"
            );
        }
        Command::List { table, name } => {
            let stage = warehouse.table(&table).await?.existing_stage(&name).await?;
            let rows = stage
                .partitions()
                .await?
                .into_iter()
                .map(|p| {
                    vec![
                        p.date.to_string(),
                        p.rows.to_string(),
                        p.files.len().to_string(),
                        p.run.run_id,
                    ]
                })
                .collect();
            print_table(&["date", "rows", "files", "run"], rows);
        }
    }
    Ok(())
}
