//! `logbook status`, `logbook plan` and `logbook check`.

use std::io::IsTerminal;

use chrono::Datelike;
use logbook_core::lifecycle::{self, CheckDepth, DateStatus, PartitionState, Selection};
use logbook_core::Warehouse;

use super::common::Range;
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Table name.
    table: String,
    #[command(flatten)]
    range: Range,
    /// One JSON object per date: date, state, reasons (and version, problems, runs).
    #[arg(long)]
    json: bool,
    /// Judge the table as a run inside this stage sees it: its staged
    /// dates, and its inputs as the stage holds them.
    #[arg(long)]
    stage: Option<String>,
}

pub async fn status(warehouse: &Warehouse, args: StatusArgs) -> Result<(), CliError> {
    let status = args
        .range
        .status(warehouse, &args.table, args.stage.as_deref())
        .await?;
    if args.json {
        println!("{}", to_json(&status.dates)?);
        return Ok(());
    }
    let colour = std::io::stdout().is_terminal();
    print!("{}", calendar(&status.dates, colour));
    println!();
    for state in PartitionState::ALL {
        let n = status.count(state);
        if n > 0 {
            println!("{:<9} {n}", state.to_string());
        }
    }
    for d in status
        .dates
        .iter()
        .filter(|d| d.state != PartitionState::Complete)
    {
        print_detail(d);
    }
    println!();
    super::warehouse::print_live(warehouse).await
}

fn print_detail(d: &DateStatus) {
    println!("{} {}", d.date, d.state);
    for r in &d.reasons {
        println!("    {r}");
    }
    for p in &d.problems {
        println!("    {p}");
    }
    for r in &d.runs {
        let what = if r.abandoned {
            "abandoned run"
        } else {
            "running"
        };
        let class = r
            .marker
            .class
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        println!("    {what}{class} {}", r.marker.run_id);
    }
}

/// A month grid, one cell per date (a letter, coloured on terminals).
fn calendar(dates: &[DateStatus], colour: bool) -> String {
    let mut out = String::new();
    let mut month = None;
    for d in dates {
        let this = (d.date.year(), d.date.month());
        if month != Some(this) {
            if month.is_some() {
                out.push('\n');
            }
            month = Some(this);
            out.push_str(&format!(
                "{}-{:02}\n Mo Tu We Th Fr Sa Su\n",
                this.0, this.1
            ));
            let lead = d.date.weekday().num_days_from_monday() as usize;
            out.push_str(&"   ".repeat(lead));
        } else if d.date.weekday().num_days_from_monday() == 0 {
            out.push('\n');
        }
        let letter = d.state.letter();
        if colour {
            let code = match d.state {
                PartitionState::Complete => 32,
                PartitionState::Stale => 33,
                PartitionState::Missing => 90,
                PartitionState::Running => 36,
                PartitionState::Corrupt => 31,
            };
            out.push_str(&format!("  \x1b[{code}m{letter}\x1b[0m"));
        } else {
            out.push_str(&format!("  {letter}"));
        }
    }
    if month.is_some() {
        out.push('\n');
        out.push_str("C complete  S stale  M missing  R running  X corrupt\n");
    }
    out
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Table name.
    table: String,
    #[command(flatten)]
    range: Range,
    /// Which dates: needed (missing, stale, corrupt), stale, missing or all.
    #[arg(long, default_value = "needed")]
    only: Selection,
    /// The plan as JSON.
    #[arg(long)]
    json: bool,
    /// Plan inside this stage: the dates to re-run there after its inputs
    /// were re-run in it (see `status --stage`).
    #[arg(long)]
    stage: Option<String>,
}

pub async fn plan(warehouse: &Warehouse, args: PlanArgs) -> Result<(), CliError> {
    let status = args
        .range
        .status(warehouse, &args.table, args.stage.as_deref())
        .await?;
    let plan = lifecycle::plan(&status, args.only);
    if args.json {
        println!("{}", to_json(&plan)?);
        return Ok(());
    }
    println!(
        "{} date(s) of {} to recompute{}",
        plan.steps.len(),
        plan.table,
        if plan.chain {
            ", strictly in order (each date depends on the previous)"
        } else {
            ", independent (may run in parallel)"
        }
    );
    for s in &plan.steps {
        let why: Vec<String> = s.reasons.iter().map(|r| r.to_string()).collect();
        println!("{} {:<8} {}", s.date, s.state.to_string(), why.join("; "));
    }
    if let Some(d) = plan.blocked_by {
        println!("{d} running  later dates of the chain wait for it");
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Table name.
    table: String,
    /// Report as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn check(warehouse: &Warehouse, args: CheckArgs) -> Result<(), CliError> {
    let table = warehouse.table(&args.table).await?;
    let snap = table.latest().await?;
    let report = lifecycle::check(&table, &snap, CheckDepth::Full).await?;
    if args.json {
        println!("{}", to_json(&report)?);
    } else {
        for p in &report.problems {
            println!("{p}");
        }
        println!(
            "table {} version {}: {} file(s) checked, {} problem(s)",
            report.table,
            report.version,
            report.files_checked,
            report.problems.len()
        );
    }
    if report.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "table {}: check found {} problem(s)",
            report.table,
            report.problems.len()
        )))
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, CliError> {
    serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))
}
