//! `logbook compact`, `logbook expire` and `logbook vacuum`.

use std::time::Duration;

use chrono::NaiveDate;
use indicatif::{ProgressBar, ProgressStyle};
use logbook_core::clock::{Clock, SystemClock};
use logbook_core::maintenance::{self, CompactOptions, Keep, VacuumOptions};
use logbook_core::{RunClass, Warehouse};

use super::common::parse_size;
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// Table name.
    table: String,
    /// Only this date.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    date: Option<NaiveDate>,
    /// First date (inclusive).
    #[arg(long)]
    from: Option<NaiveDate>,
    /// Last date (inclusive).
    #[arg(long)]
    to: Option<NaiveDate>,
    /// Size of the files written, e.g. 128MiB (default: the table's target, 128 MiB).
    #[arg(long, value_parser = parse_size)]
    target_file_size: Option<usize>,
    /// Only partitions with at least this many files.
    #[arg(long, default_value_t = 2)]
    min_files: usize,
    /// Commit after this many partitions (a failure keeps earlier commits).
    #[arg(long, default_value_t = 50)]
    commit_every: usize,
    /// Partitions rewritten at once (default: one per core; memory grows with it).
    #[arg(long)]
    parallelism: Option<usize>,
    /// Show the plan; rewrite nothing.
    #[arg(long)]
    dry_run: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("invalid duration {s:?} ({e}); use e.g. 7d, 12h, 30min"))
}

pub async fn compact(warehouse: &Warehouse, args: CompactArgs) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let options = CompactOptions {
        from: args.date.or(args.from),
        to: args.date.or(args.to),
        target_file_size: args.target_file_size,
        min_files: args.min_files,
        commit_every: args.commit_every,
        parallelism: args
            .parallelism
            .unwrap_or_else(|| CompactOptions::default().parallelism),
    };
    if args.dry_run {
        let plan = maintenance::plan_compaction(&table, &options).await?;
        for p in &plan.partitions {
            let n: usize = p.runs.iter().map(|(a, b)| b - a).sum();
            println!("{}  rewrite {n} of {} file(s)", p.date, p.files.len());
        }
        let (files, bytes) = plan.rewrites();
        println!(
            "would compact {} partition(s) of {}: {files} file(s), {} into files of about {}",
            plan.partitions.len(),
            plan.table,
            bytesize::ByteSize::b(bytes),
            bytesize::ByteSize::b(plan.target_file_size as u64)
        );
        return Ok(());
    }
    // A compaction is a heavy step, never production's: it waits while the
    // warehouse's `max-heavy-steps` are under way.
    let what = format!(
        "compaction of {} (pid {})",
        table.name(),
        std::process::id()
    );
    let doing = format!("waiting to compact table {}", table.name());
    let step = warehouse
        .heavy_step(RunClass::Backfill, &what, super::turn::say_wait(doing))
        .await?;
    let compacted = rewrite(&table, &options).await;
    step.end().await;
    let report = compacted?;
    for d in &report.dropped {
        println!("{d} left alone: replaced while it was being compacted");
    }
    println!(
        "compacted {} partition(s) of {}: {} file(s), {} -> {} file(s), {}; commits {:?}",
        report.partitions_compacted,
        table.name(),
        report.files_before,
        bytesize::ByteSize::b(report.bytes_before),
        report.files_after,
        bytesize::ByteSize::b(report.bytes_after),
        report.commits
    );
    Ok(())
}

/// The rewrite itself, with a progress bar.
async fn rewrite(
    table: &logbook_core::Table,
    options: &CompactOptions,
) -> logbook_core::Result<maintenance::CompactReport> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} partitions {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let report = maintenance::compact(table, options, &|p| {
        bar.set_length(p.partitions_total as u64);
        bar.set_position(p.partitions_done as u64);
        bar.set_message(format!(
            "{} rewritten",
            bytesize::ByteSize::b(p.bytes_rewritten)
        ));
    })
    .await;
    bar.finish_and_clear();
    report
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("keep").required(true)))]
pub struct ExpireArgs {
    /// Table name.
    table: String,
    /// Keep the last N versions.
    #[arg(long, group = "keep")]
    keep_last: Option<u64>,
    /// Expire versions older than this (e.g. 30d), keeping the one current then.
    #[arg(long, group = "keep", value_parser = parse_duration)]
    older_than: Option<Duration>,
}

pub async fn expire(warehouse: &Warehouse, args: ExpireArgs) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let keep = match (args.keep_last, args.older_than) {
        (Some(n), _) => Keep::Last(n),
        (_, Some(age)) => Keep::Since(SystemClock.now_millis() - age.as_millis() as i64),
        _ => unreachable!("clap requires one"),
    };
    let report = maintenance::expire(&table, keep).await?;
    match report.version {
        Some(v) => println!(
            "table {}: versions before {} expired (previously {}); recorded as version {v}",
            report.table, report.oldest, report.previous_oldest
        ),
        None => println!(
            "table {}: nothing to expire; time travel reaches back to version {}",
            report.table, report.oldest
        ),
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct VacuumArgs {
    /// Table name.
    table: String,
    /// Keep unreferenced files younger than this (default 7d; under 1h needs --force).
    #[arg(long, value_parser = parse_duration, default_value = "7d")]
    retention: Duration,
    /// Show what would be deleted.
    #[arg(long)]
    dry_run: bool,
    /// Allow a retention under one hour.
    #[arg(long)]
    force: bool,
    /// List every file to find orphans of failed writes anywhere (done
    /// anyway once per retention; otherwise vacuum looks only at what
    /// changed since the last one).
    #[arg(long)]
    full: bool,
}

pub async fn vacuum(warehouse: &Warehouse, args: VacuumArgs) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let options = VacuumOptions {
        retention_ms: args.retention.as_millis() as i64,
        dry_run: args.dry_run,
        force: args.force,
        full: args.full,
    };
    let report = maintenance::vacuum(&table, options).await?;
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    for path in &report.deleted {
        println!("{verb} {path}");
    }
    let looked = if report.listed_everything {
        "listed every file"
    } else {
        "looked at what changed since the last vacuum"
    };
    println!(
        "table {}: {verb} {} file(s), {}; kept {} unreferenced file(s) younger than the retention; read {} version(s), {looked}",
        table.name(),
        report.deleted.len(),
        bytesize::ByteSize::b(report.bytes),
        report.kept_young,
        report.versions_read
    );
    Ok(())
}
