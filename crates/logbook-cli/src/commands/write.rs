use std::path::PathBuf;

use chrono::NaiveDate;
use logbook_core::budget::SlotTicket;
use logbook_core::{Destination, ExpectedPartition, PartitionWriter, RunInfo, Warehouse};

use super::common::expectation;
use super::turn;
use super::CliError;
use crate::input;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    /// The logical date whose partition this run replaces (YYYY-MM-DD).
    #[arg(long)]
    date: NaiveDate,
    /// Input files: `.csv` (with a header row) or `.parquet`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Run id; re-submitting a run id that already committed this date does nothing.
    #[arg(long)]
    run_id: Option<String>,
    /// Job name recorded with the commit.
    #[arg(long)]
    job: Option<String>,
    /// Code version recorded with the commit.
    #[arg(long)]
    code_version: Option<String>,
    /// Roll data files after this many rows.
    #[arg(long)]
    max_rows_per_file: Option<usize>,
    /// Write into this named stage instead of the main line (set by `backfill --stage`).
    #[arg(long, env = logbook_datafusion::run::STAGE_ENV)]
    stage: Option<String>,
    /// Commit only if the date is then still at this version (`missing`: never
    /// committed); otherwise refuse with a conflict. `backfill` sets it for
    /// its commands (see `LOGBOOK_EXPECT_VERSION`), so a date another run
    /// commits meanwhile is never overwritten.
    #[arg(long, value_name = "VERSION|missing")]
    expect_version: Option<ExpectedPartition>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let warehouse = match args.max_rows_per_file {
        Some(n) => warehouse.with_options(warehouse.options().clone().with_max_rows_per_file(n)),
        None => warehouse.clone(),
    };
    let table = warehouse.table(&args.table).await?;
    let run = RunInfo {
        run_id: args
            .run_id
            .clone()
            .unwrap_or_else(|| default_run_id(&args.date)),
        job: args.job.clone(),
        code_version: args.code_version.clone(),
        logical_date: Some(args.date),
        ..RunInfo::default()
    };
    let expected = expectation(args.expect_version, table.name(), args.date)?;
    let staged = args.stage.is_some();
    let turn = turn::take(&warehouse, table.name(), args.date, &run.run_id, staged).await?;
    let run = RunInfo {
        class: Some(turn.class),
        ..run
    };
    let written = write(&table, &args, run.clone(), expected, turn.ticket).await;
    turn.end().await;
    let info = written?;
    if let Some(stage) = &info.staged {
        eprintln!(
            "staged table {}, partition {} in stage {stage}; publish with `logbook stage publish {} {stage}`",
            table.name(),
            args.date,
            table.name()
        );
        return Ok(());
    }
    if info.already_committed {
        eprintln!(
            "run {} already committed table {}, partition {} as version {}; nothing new was committed",
            run.run_id,
            table.name(),
            args.date,
            info.version
        );
    }
    println!("{}", info.version);
    Ok(())
}

/// Write the files as the date's partition and commit.
async fn write(
    table: &logbook_core::Table,
    args: &Args,
    run: RunInfo,
    expected: Option<ExpectedPartition>,
    ticket: Option<SlotTicket>,
) -> Result<logbook_core::CommitInfo, CliError> {
    let destination = Destination::from(args.stage.clone());
    let mut writer = table.write_partition(args.date, run, destination).await?;
    if let Some(e) = expected {
        writer = writer.expect(e);
    }
    if let Some(t) = ticket {
        writer = writer.within_slot(t);
    }
    if let Err(e) = fill(&mut writer, &args.files, table.name()).await {
        writer.abort().await?;
        return Err(e);
    }
    Ok(writer.commit().await?)
}

/// Stream every file's rows into the writer.
async fn fill(
    writer: &mut PartitionWriter,
    files: &[PathBuf],
    table: &str,
) -> Result<(), CliError> {
    let schema = writer.schema().clone();
    for file in files {
        for batch in input::open(file, &schema, table, &[])? {
            writer
                .write(&batch?)
                .await
                .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
        }
    }
    Ok(())
}

/// A fresh run id: the date plus a unique suffix.
fn default_run_id(date: &NaiveDate) -> String {
    use logbook_core::clock::{IdGenerator, UuidV7};
    format!("{date}-{}", UuidV7.next_id().simple())
}
