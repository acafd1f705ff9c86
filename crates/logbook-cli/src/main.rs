//! `logbook`: create tables, replace partitions, read the log.

mod commands;
mod input;
mod memory;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// logbook: a table format over Parquet where re-running yesterday's job is
/// as safe as running today's.
#[derive(Debug, Parser)]
#[command(name = "logbook", version, about)]
struct Cli {
    /// Warehouse holding the tables: a local directory, file://, memory://, s3://, gs:// or az://.
    #[arg(
        long,
        global = true,
        env = "LOGBOOK_WAREHOUSE",
        default_value = "./warehouse"
    )]
    warehouse: String,

    /// Log more (warnings are always shown).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a table.
    Create(commands::create::Args),
    /// Replace one date's partition with the rows of CSV or Parquet files.
    Write(commands::write::Args),
    /// Show the commits of a table.
    Log(commands::log::Args),
    /// Show a table's partitions at the latest or a given version.
    Partitions(commands::partitions::Args),
    /// List the tables of the warehouse.
    Tables,
    /// Apply new states, deletes or a full snapshot to a dimension at an effective date.
    Apply(commands::apply::Args),
    /// Run a SQL query over the warehouse (optionally as a run for a logical date).
    Sql(commands::sql::Args),
    /// Run a job: replace TABLE's partition for --date with the rows of a query.
    Run(commands::run::Args),
    /// A table's columns with their field ids, at the latest or a given version.
    Schema(commands::schema::Args),
    /// Change a table's schedule, chain declaration or schema (add, widen, rename, drop a column).
    Alter(commands::alter::Args),
    /// Every scheduled date's state (complete, stale with reasons, missing, running, corrupt).
    Status(commands::status::StatusArgs),
    /// The dates a backfill must recompute, in order, and why.
    Plan(commands::status::PlanArgs),
    /// Check that every file of the latest snapshot exists, reads and holds what the manifest says.
    Check(commands::status::CheckArgs),
    /// Recompute planned dates by running a command per date, at most N at a time.
    Backfill(commands::backfill::Args),
    /// Rewrite small files of partitions into larger ones (data unchanged).
    Compact(commands::maintain::CompactArgs),
    /// Drop old snapshots from what time travel can reach.
    Expire(commands::maintain::ExpireArgs),
    /// Delete files no retained snapshot, stage or running write references.
    Vacuum(commands::maintain::VacuumArgs),
    /// Catch a table's mirror (a Delta Lake log other engines read) up, or show how far behind it is.
    Mirror(commands::mirror::Args),
    /// The warehouse's run budget (max backfill runs, production first) and the runs live now.
    #[command(subcommand)]
    Warehouse(commands::warehouse::Command),
    /// Audit, publish or drop a staged backfill.
    #[command(subcommand)]
    Stage(commands::stage::Command),
    /// The worked example: 90 days of orders, a dimension that changes, a
    /// nightly job, and its fix backfilled as corrected original and as restated.
    Demo(commands::demo::Args),
    /// Serve the warehouse over Arrow Flight SQL (ADBC, JDBC, BI tools), read-only.
    Serve(commands::serve::Args),
    /// The processes of a cluster that runs logbook SQL on more than one
    /// machine (Apache Ballista): `logbook sql --cluster df://HOST:PORT`.
    #[command(subcommand)]
    Cluster(commands::cluster::Command),
    /// A read-only web UI: partition calendars, why a date is stale,
    /// lineage, the log and stage diffs (http://127.0.0.1:8080).
    Ui(commands::ui::Args),
}

fn main() -> ExitCode {
    // Before any thread starts: keep what scans free for the next file.
    logbook_core::reader::tune_allocator();
    let cli = Cli::parse();
    // A server logs a line per query; other commands only warn.
    let serving = matches!(
        cli.command,
        Command::Serve(_) | Command::Ui(_) | Command::Cluster(_)
    );
    quiet_when_stdout_closes();
    let level = match cli.verbose {
        0 if serving => tracing::Level::INFO,
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(commands::CliError::StdoutClosed) => ExitCode::from(141),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Like other Unix tools, stop quietly when the reader of our output goes
/// away (`logbook partitions t --json | head`): printing to a closed stdout
/// panics ("failed printing to stdout: Broken pipe"), and that one panic
/// ends the process with the status a shell gives a writer SIGPIPE killed
/// (141), without a panic message.
///
/// SIGPIPE itself stays ignored (Rust's default). Restoring its default
/// action, as this binary did, let a network peer kill the process
/// silently: sockets written with `writev` (hyper's HTTP/2 and HTTP/1
/// writes) raise it when the peer has closed, so a cluster or S3
/// connection dropped mid-write ended `logbook sql` with no message
/// instead of failing that request.
fn quiet_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("(os error 32)") {
            std::process::exit(141);
        }
        default(info)
    }));
}

async fn run(cli: Cli) -> Result<(), commands::CliError> {
    let warehouse = logbook_core::Warehouse::open(&cli.warehouse)?;
    match cli.command {
        Command::Create(args) => commands::create::run(&warehouse, args).await,
        Command::Write(args) => commands::write::run(&warehouse, args).await,
        Command::Log(args) => commands::log::run(&warehouse, args).await,
        Command::Partitions(args) => commands::partitions::run(&warehouse, args).await,
        Command::Tables => commands::tables(&warehouse).await,
        Command::Apply(args) => commands::apply::run(&warehouse, args).await,
        Command::Sql(args) => commands::sql::run(&warehouse, args).await,
        Command::Run(args) => commands::run::run(&warehouse, args).await,
        Command::Schema(args) => commands::schema::run(&warehouse, args).await,
        Command::Alter(args) => commands::alter::run(&warehouse, args).await,
        Command::Status(args) => commands::status::status(&warehouse, args).await,
        Command::Plan(args) => commands::status::plan(&warehouse, args).await,
        Command::Check(args) => commands::status::check(&warehouse, args).await,
        Command::Backfill(args) => commands::backfill::run(&warehouse, &cli.warehouse, args).await,
        Command::Compact(args) => commands::maintain::compact(&warehouse, args).await,
        Command::Expire(args) => commands::maintain::expire(&warehouse, args).await,
        Command::Vacuum(args) => commands::maintain::vacuum(&warehouse, args).await,
        Command::Mirror(args) => commands::mirror::run(&warehouse, args).await,
        Command::Stage(command) => commands::stage::run(&warehouse, command).await,
        Command::Warehouse(command) => commands::warehouse::run(&warehouse, command).await,
        Command::Demo(args) => commands::demo::run(&warehouse, args).await,
        Command::Serve(args) => commands::serve::run(warehouse, args).await,
        Command::Ui(args) => commands::ui::run(warehouse, args).await,
        Command::Cluster(command) => commands::cluster::run(warehouse, command).await,
    }
}
