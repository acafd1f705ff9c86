//! `logbook backfill`: run the user's command once per planned date, at most
//! N at a time, chains strictly in order, production first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use indicatif::{ProgressBar, ProgressStyle};
use logbook_core::lifecycle::{self, PartitionState, PlanStep, Selection};
use logbook_core::{ExpectedPartition, Stage, Table, Warehouse};
use tokio::task::JoinSet;

use super::common::{expect_env_value, Range, EXPECT_ENV};
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Table name.
    table: String,
    #[command(flatten)]
    range: Range,
    /// Shell command run once per date; `{date}` is replaced by the date
    /// (YYYY-MM-DD). It must commit that date through logbook; it runs with
    /// `LOGBOOK_WAREHOUSE` set to this warehouse and `LOGBOOK_EXPECT_VERSION`
    /// to `TABLE@DATE=VERSION`, the date's version when the backfill looked
    /// (`logbook write` and `logbook run` obey it for that table and date: a
    /// date committed meanwhile is not overwritten).
    #[arg(long)]
    command: String,
    /// At most this many dates at a time (chains always run one at a time).
    #[arg(long, default_value_t = 1)]
    max_parallel: usize,
    /// Which dates: needed (missing, stale, corrupt), stale, missing or all.
    #[arg(long, default_value = "needed")]
    only: Selection,
    /// Show the plan and the commands without running anything.
    #[arg(long)]
    dry_run: bool,
    /// Write every date into this named stage (commands get `LOGBOOK_STAGE`,
    /// which `logbook write` and `logbook run` obey); publish it later with
    /// `logbook stage publish`. Dates already in the stage are skipped.
    #[arg(long)]
    stage: Option<String>,
}

/// How one date ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Committed (at this version) or staged.
    Done(String),
    /// Another run committed the date after the backfill began: its data wins.
    Skipped(String),
    Failed(String),
}

pub async fn run(warehouse: &Warehouse, uri: &str, args: Args) -> Result<(), CliError> {
    // Inside a stage, the plan is judged there: a date staged from inputs
    // the stage has re-run since is stale again.
    let status = args
        .range
        .status(warehouse, &args.table, args.stage.as_deref())
        .await?;
    let plan = lifecycle::plan(&status, args.only);
    // What the main line held when the backfill began (a production commit
    // since wins over the backfill's).
    let main_line = match &args.stage {
        Some(_) => args.range.status(warehouse, &args.table, None).await?,
        None => status.clone(),
    };
    let started: HashMap<NaiveDate, Option<u64>> = main_line
        .dates
        .iter()
        .map(|d| (d.date, d.version))
        .collect();
    if args.dry_run {
        println!(
            "would recompute {} date(s) of {}{}",
            plan.steps.len(),
            plan.table,
            if plan.chain {
                ", strictly in order"
            } else {
                ""
            }
        );
        for s in &plan.steps {
            println!("{}  {}", s.date, command_for(&args.command, s.date));
        }
        print_blocked(&plan);
        return Ok(());
    }
    print_blocked(&plan);
    let table = warehouse.table(&args.table).await?;
    let stage = match &args.stage {
        Some(name) => Some(table.stage(name).await?),
        None => None,
    };
    let parallel = if plan.chain {
        1
    } else {
        args.max_parallel.max(1)
    };
    let bar = progress(plan.steps.len() as u64);
    let stop = Arc::new(AtomicBool::new(false));
    let on_signal = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.store(true, Ordering::SeqCst);
        }
    });

    let mut queue = plan.steps.iter();
    let mut running: JoinSet<(NaiveDate, std::io::Result<std::process::Output>)> = JoinSet::new();
    let mut outcomes: Vec<(NaiveDate, Outcome)> = Vec::new();
    let mut halted = false;
    loop {
        while running.len() < parallel && !halted && !stop.load(Ordering::SeqCst) {
            let Some(step) = queue.next() else { break };
            let before = started.get(&step.date).copied().flatten();
            let skip = match committed_since(&table, step, before).await? {
                Some(other) => Some(other),
                // A staged date the plan finds stale in the stage is redone.
                None if step.state == PartitionState::Stale => None,
                None => already_staged(stage.as_ref(), step.date).await?,
            };
            if let Some(why) = skip {
                outcomes.push((step.date, Outcome::Skipped(why)));
                bar.inc(1);
                continue;
            }
            let mut command = tokio::process::Command::new("sh");
            command
                .arg("-c")
                .arg(command_for(&args.command, step.date))
                .env("LOGBOOK_WAREHOUSE", uri);
            // What the backfill saw travels with the command, so its commit
            // fails atomically if production committed the date since.
            match &args.stage {
                Some(name) => command
                    .env(logbook_datafusion::run::STAGE_ENV, name)
                    .env_remove(EXPECT_ENV),
                None => command.env_remove(logbook_datafusion::run::STAGE_ENV).env(
                    EXPECT_ENV,
                    expect_env_value(&args.table, step.date, expectation(before)),
                ),
            };
            let date = step.date;
            running.spawn(async move {
                let output = command
                    // Its own process group: Ctrl-C stops the backfill from
                    // launching more, and lets running dates finish.
                    .process_group(0)
                    .kill_on_drop(true)
                    .output()
                    .await;
                (date, output)
            });
        }
        // Interrupted or not, wait for the dates already running.
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (date, output) =
            joined.map_err(|e| CliError::Failed(format!("a backfill task failed: {e}")))?;
        let before = started.get(&date).copied().flatten();
        let outcome = match &stage {
            Some(stage) => judge_staged(stage, date, output).await?,
            None => judge(&table, date, before, output).await?,
        };
        if plan.chain && matches!(outcome, Outcome::Failed(_)) {
            halted = true;
        }
        outcomes.push((date, outcome));
        bar.inc(1);
        bar.set_message(tally(&outcomes));
    }
    bar.finish_and_clear();
    report(
        &plan.table,
        &plan.steps,
        outcomes,
        stop.load(Ordering::SeqCst),
        halted,
    )
}

/// Say that a chain's plan stops at a running date.
fn print_blocked(plan: &lifecycle::Plan) {
    if let Some(d) = plan.blocked_by {
        eprintln!(
            "{d} of {} is being written by a live run; the dates after it wait for it: run the backfill again once it finishes",
            plan.table
        );
    }
}

fn expectation(before: Option<u64>) -> ExpectedPartition {
    before.map_or(ExpectedPartition::Missing, ExpectedPartition::Version)
}

fn command_for(template: &str, date: NaiveDate) -> String {
    template.replace("{date}", &date.to_string())
}

fn progress(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} dates {msg} (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(500));
    bar
}

/// If the date was committed by someone else since the backfill began, say by whom.
async fn committed_since(
    table: &Table,
    step: &PlanStep,
    before: Option<u64>,
) -> Result<Option<String>, CliError> {
    let now = table.latest().await?.partition(step.date).await?;
    Ok(match now {
        Some(p) if Some(p.version) != before => Some(format!(
            "committed by run {} at version {} after the backfill began",
            p.run.map_or("?".to_string(), |r| r.run_id),
            p.version
        )),
        _ => None,
    })
}

async fn judge(
    table: &Table,
    date: NaiveDate,
    before: Option<u64>,
    output: std::io::Result<std::process::Output>,
) -> Result<Outcome, CliError> {
    let now = table
        .latest()
        .await?
        .partition(date)
        .await?
        .map(|p| p.version);
    let changed = now.is_some() && now != before;
    Ok(match output {
        Err(e) => Outcome::Failed(format!("could not start the command: {e}")),
        Ok(out) if out.status.success() => match now {
            Some(v) if changed => Outcome::Done(format!("version {v}")),
            _ => Outcome::Failed("the command succeeded but did not commit the date".into()),
        },
        // The command lost the date to another writer (e.g. tonight's
        // scheduled run): production wins, the date is skipped, not failed.
        Ok(out) if changed && conflict(&out.stderr) => Outcome::Skipped(format!(
            "another run committed it at version {} while the backfill ran",
            now.unwrap_or_default()
        )),
        Ok(out) => Outcome::Failed(format!("{}: {}", out.status, tail(&out.stderr))),
    })
}

async fn already_staged(
    stage: Option<&Stage>,
    date: NaiveDate,
) -> Result<Option<String>, CliError> {
    let Some(stage) = stage else { return Ok(None) };
    Ok(stage.partition(date).await?.map(|p| {
        format!(
            "already in stage {} (run {}); drop the stage to redo it",
            stage.info().name,
            p.run.run_id
        )
    }))
}

async fn judge_staged(
    stage: &Stage,
    date: NaiveDate,
    output: std::io::Result<std::process::Output>,
) -> Result<Outcome, CliError> {
    let staged = stage.partition(date).await?.is_some();
    Ok(match output {
        Err(e) => Outcome::Failed(format!("could not start the command: {e}")),
        Ok(out) if out.status.success() && staged => {
            Outcome::Done(format!("staged in {}", stage.info().name))
        }
        Ok(out) if out.status.success() => {
            Outcome::Failed("the command succeeded but did not stage the date".into())
        }
        Ok(out) => Outcome::Failed(format!("{}: {}", out.status, tail(&out.stderr))),
    })
}

fn conflict(stderr: &[u8]) -> bool {
    String::from_utf8_lossy(stderr).contains("conflict")
}

fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

fn tally(outcomes: &[(NaiveDate, Outcome)]) -> String {
    let failed = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
        .count();
    let skipped = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Skipped(_)))
        .count();
    format!("({failed} failed, {skipped} skipped)")
}

fn report(
    table: &str,
    steps: &[PlanStep],
    mut outcomes: Vec<(NaiveDate, Outcome)>,
    interrupted: bool,
    halted: bool,
) -> Result<(), CliError> {
    outcomes.sort_by_key(|(d, _)| *d);
    let mut failed = 0;
    for (date, outcome) in &outcomes {
        match outcome {
            Outcome::Done(how) => println!("{date} done ({how})"),
            Outcome::Skipped(why) => println!("{date} skipped: {why}"),
            Outcome::Failed(why) => {
                failed += 1;
                println!("{date} FAILED: {why}");
            }
        }
    }
    let not_started = steps.len() - outcomes.len();
    let done = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Done(_)))
        .count();
    println!(
        "backfill of {table}: {done} done, {} skipped, {failed} failed, {not_started} not started",
        outcomes.len() - done - failed
    );
    if failed > 0 || not_started > 0 {
        let why = if interrupted {
            "interrupted"
        } else if halted {
            "a date of the chain failed, so later dates were not started"
        } else {
            "some dates failed"
        };
        return Err(CliError::Failed(format!(
            "backfill of {table} incomplete: {why}; run the same command again to resume"
        )));
    }
    Ok(())
}
