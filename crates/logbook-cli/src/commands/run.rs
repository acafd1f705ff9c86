use chrono::NaiveDate;
use logbook_core::{DimensionMode, ExpectedPartition, Warehouse};
use logbook_datafusion::Run;

use super::common::{expectation, parse_mode, query_err};
use super::turn;
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table whose partition this run replaces.
    table: String,
    /// The run's logical date.
    #[arg(long)]
    date: NaiveDate,
    /// The query computing the partition's rows.
    #[arg(long)]
    sql: String,
    /// `as-of` (dimensions as they stood on the date: the corrected original)
    /// or `current` (today's dimensions: a restated history).
    #[arg(long, value_parser = parse_mode, default_value = "as-of")]
    dimensions: DimensionMode,
    /// Code version recorded with the commit.
    #[arg(long)]
    code_version: Option<String>,
    /// Run id (default: derived from table, date, mode, code version and the input versions read).
    #[arg(long)]
    run_id: Option<String>,
    /// Write into this named stage instead of the main line (set by `backfill --stage`).
    #[arg(long, env = logbook_datafusion::run::STAGE_ENV)]
    stage: Option<String>,
    /// Commit only if the date is then still at this version (`missing`: never
    /// committed); otherwise refuse with a conflict. `backfill` sets it for
    /// its commands (see `LOGBOOK_EXPECT_VERSION`).
    #[arg(long, value_name = "VERSION|missing")]
    expect_version: Option<ExpectedPartition>,
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let mut run = Run::new(warehouse, &args.table, args.date).dimensions(args.dimensions);
    if let Some(v) = args.code_version {
        run = run.code_version(v);
    }
    if let Some(id) = &args.run_id {
        run = run.run_id(id);
    }
    if let Some(stage) = &args.stage {
        run = run.stage(stage);
    }
    if let Some(e) = expectation(args.expect_version, &args.table, args.date)? {
        run = run.expect(e);
    }
    let run_id = args.run_id.as_deref().unwrap_or("(derived at commit)");
    let turn = turn::take(
        warehouse,
        &args.table,
        args.date,
        run_id,
        args.stage.is_some(),
    )
    .await?;
    run = run.class(turn.class);
    if let Some(t) = turn.ticket {
        run = run.within_slot(t);
    }
    let done = run.sql(&args.sql).await;
    turn.end().await;
    let info = done.map_err(query_err)?;
    if let Some(stage) = &info.staged {
        eprintln!(
            "staged table {}, partition {} in stage {stage}; publish with `logbook stage publish {} {stage}`",
            args.table, args.date, args.table
        );
        return Ok(());
    }
    if info.already_committed {
        eprintln!(
            "this run already committed version {}; nothing new was committed",
            info.version
        );
    }
    println!("{}", info.version);
    Ok(())
}
