//! `logbook stage`: audit, publish or drop a staged backfill.

use std::collections::BTreeMap;

use logbook_core::stage::WarehouseStage;
use logbook_core::{StageDiff, Warehouse};

use super::CliError;
use crate::output::print_table;

/// `[TABLE] NAME`: one table's stage, or (NAME alone) the warehouse's.
#[derive(Debug, clap::Args)]
pub struct Which {
    /// The table, then the stage; the stage alone means every table holding it.
    #[arg(num_args = 1..=2, value_names = ["TABLE", "NAME"], required = true)]
    names: Vec<String>,
}

impl Which {
    /// `(Some(table), name)` or `(None, name)`.
    fn split(&self) -> (Option<&str>, &str) {
        match self.names.as_slice() {
            [table, name] => (Some(table), name),
            [name] => (None, name),
            _ => unreachable!("clap takes one or two names"),
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Per staged date: rows and sums of numeric columns, main line vs
    /// stage (every table of the stage when no table is named).
    Diff {
        #[command(flatten)]
        which: Which,
        /// One JSON object per date (per table: an object of tables).
        #[arg(long)]
        json: bool,
    },
    /// Commit every staged date at once: one table's in one commit, or
    /// (no table named) every table's in one multi-table publish.
    Publish {
        #[command(flatten)]
        which: Which,
        /// Publish even if a staged date was replaced on the main line after the stage began.
        #[arg(long)]
        force: bool,
    },
    /// Discard the stage (in every table holding it when no table is named); vacuum deletes its files.
    Drop {
        #[command(flatten)]
        which: Which,
    },
    /// The dates staged in a stage (every table's when no table is named).
    List {
        #[command(flatten)]
        which: Which,
    },
}

pub async fn run(warehouse: &Warehouse, command: Command) -> Result<(), CliError> {
    match command {
        Command::Diff { which, json } => {
            let diffs: BTreeMap<String, Vec<StageDiff>> = match which.split() {
                (Some(table), name) => {
                    let stage = warehouse.table(table).await?.existing_stage(name).await?;
                    BTreeMap::from([(table.to_string(), stage.diff().await?)])
                }
                (None, name) => existing(warehouse, name).await?.diff().await?,
            };
            if json {
                let text = match which.split().0 {
                    Some(table) => serde_json::to_string_pretty(&diffs[table]),
                    None => serde_json::to_string_pretty(&diffs),
                }
                .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
                println!("{text}");
                return Ok(());
            }
            for (table, diff) in &diffs {
                if which.split().0.is_none() {
                    println!("table {table}:");
                }
                print_diff(diff);
            }
        }
        Command::Publish { which, force } => match which.split() {
            (Some(table), name) => {
                let stage = warehouse.table(table).await?.existing_stage(name).await?;
                let dates = stage.partitions().await?.len();
                let info = stage.publish(force).await?;
                println!(
                    "published stage {name} of table {table}: {dates} date(s) in version {}",
                    info.version
                );
            }
            (None, name) => {
                let stage = existing(warehouse, name).await?;
                let mut dates = BTreeMap::new();
                for s in stage.stages() {
                    dates.insert(s.table().name().to_string(), s.partitions().await?.len());
                }
                let published = stage.publish(force).await?;
                match published.seq {
                    Some(seq) => println!(
                        "published stage {name} across {} tables as one, publish {seq}:",
                        published.tables.len()
                    ),
                    None => println!("published stage {name} (one table):"),
                }
                for (table, info) in &published.tables {
                    println!(
                        "  {table}: {} date(s) in version {}",
                        dates.get(table).copied().unwrap_or_default(),
                        info.version
                    );
                }
            }
        },
        Command::Drop { which } => match which.split() {
            (Some(table), name) => {
                let stage = warehouse.table(table).await?.existing_stage(name).await?;
                let dates = stage.drop_stage().await?;
                println!(
                    "dropped stage {name} of table {table} ({dates} staged date(s)); vacuum deletes its files"
                );
            }
            (None, name) => {
                let stage = existing(warehouse, name).await?;
                let tables = stage.stages().len();
                let dates = stage.drop_stage().await?;
                println!(
                    "dropped stage {name} in {tables} table(s) ({dates} staged date(s)); vacuum deletes its files"
                );
            }
        },
        Command::List { which } => {
            let stages = match which.split() {
                (Some(table), name) => {
                    vec![warehouse.table(table).await?.existing_stage(name).await?]
                }
                (None, name) => existing(warehouse, name).await?.stages().to_vec(),
            };
            let mut rows = Vec::new();
            for stage in stages {
                for p in stage.partitions().await? {
                    rows.push(vec![
                        stage.table().name().to_string(),
                        p.date.to_string(),
                        p.rows.to_string(),
                        p.files.len().to_string(),
                        p.run.run_id,
                    ]);
                }
            }
            print_table(&["table", "date", "rows", "files", "run"], rows);
        }
    }
    Ok(())
}

/// The warehouse's stage `name`; an error naming it when no table holds it.
async fn existing(warehouse: &Warehouse, name: &str) -> Result<WarehouseStage, CliError> {
    let stage = warehouse.stage(name).await?;
    if stage.stages().is_empty() {
        return Err(CliError::Input(format!(
            "no table of the warehouse has an unpublished stage {name:?}"
        )));
    }
    Ok(stage)
}

fn print_diff(diff: &[StageDiff]) {
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
