//! `logbook backfill`: run the user's command once per planned date, at most
//! N at a time, chains strictly in order, production first: each date
//! waits its turn in the warehouse's run budget (no production run live,
//! a backfill slot free; see `logbook_core::budget`), and the commands run
//! at the lowest CPU and I/O priority the OS gives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveDate, NaiveTime};
use indicatif::{ProgressBar, ProgressStyle};
use logbook_core::budget::{BackfillGate, Entry, SlotLease};
use logbook_core::lifecycle::{self, PartitionState, PlanStep, Selection};
use logbook_core::{ExpectedPartition, Stage, Table, Warehouse};
use tokio::task::JoinSet;

use super::common::{expect_env_value, Range, EXPECT_ENV};
use super::turn::{CLASS_ENV, SLOT_ENV};
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
    /// Start no date during this daily window of the machine's local time
    /// (`HH:MM-HH:MM`, may cross midnight): for the runner only, never for
    /// a run's data. Dates already running go on.
    #[arg(long, value_name = "HH:MM-HH:MM")]
    pause_during: Option<Window>,
    /// The CPU and I/O priority of the commands: `idle` (the SCHED_IDLE
    /// scheduling class and I/O class idle: they run only on CPU nobody
    /// else wants; chosen by measurement, BENCHMARKS.md "Production
    /// first"), `nice` (nice 19 and I/O class idle) or `normal`.
    #[arg(long, default_value = "idle")]
    priority: Priority,
}

/// A daily wall-clock window, `HH:MM-HH:MM`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    from: NaiveTime,
    to: NaiveTime,
}

impl std::str::FromStr for Window {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parsed = s.split_once('-').and_then(|(a, b)| {
            let time = |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").ok();
            Some((time(a)?, time(b)?))
        });
        match parsed {
            Some((from, to)) if from != to => Ok(Self { from, to }),
            Some(_) => Err(format!("{s:?}: the window is empty (its start is its end)")),
            None => Err(format!("{s:?}: expected HH:MM-HH:MM, e.g. 00:30-03:00")),
        }
    }
}

impl Window {
    fn contains(&self, t: NaiveTime) -> bool {
        match self.from < self.to {
            true => self.from <= t && t < self.to,
            // Across midnight.
            false => t >= self.from || t < self.to,
        }
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{}",
            self.from.format("%H:%M"),
            self.to.format("%H:%M")
        )
    }
}

/// How a backfill's commands are scheduled on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Priority {
    Nice,
    Idle,
    Normal,
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
    if plan.steps.is_empty() {
        println!("{}", why_none(&args, &status));
        return Ok(());
    }
    let table = warehouse.table(&args.table).await?;
    let what = format!("backfill of {} (pid {})", args.table, std::process::id());
    let mut gate = warehouse.backfill_gate(Some(&args.table), &what);
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
    let mut running: JoinSet<(NaiveDate, Ran)> = JoinSet::new();
    let mut outcomes: Vec<(NaiveDate, Outcome)> = Vec::new();
    let mut halted = false;
    // Why no more dates start (a chain's failure, or the budget unreadable).
    let mut stopped: Option<String> = None;
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
            // Its turn: no production run live, a slot free, outside the pause.
            let lease = match wait_turn(&mut gate, step.date, args.pause_during, &bar, &stop).await
            {
                Ok(Some(lease)) => lease,
                // Interrupted while waiting: the date was not started.
                Ok(None) => break,
                // The dates already running finish; no more start.
                Err(e) => {
                    halted = true;
                    stopped = Some(format!("the run budget could not be read ({e})"));
                    break;
                }
            };
            bar.set_message(tally(&outcomes));
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
            command.env(CLASS_ENV, "backfill");
            match &lease {
                Some(l) => command.env(SLOT_ENV, l.ticket().to_string()),
                None => command.env_remove(SLOT_ENV),
            };
            lower_priority(&mut command, args.priority);
            let date = step.date;
            // Its own process group: Ctrl-C stops the backfill from
            // launching more, and lets running dates finish.
            command.process_group(0).kill_on_drop(true);
            running.spawn(async move { (date, run_in_slot(command, lease).await) });
        }
        // Interrupted or not, wait for the dates already running.
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (date, ran) =
            joined.map_err(|e| CliError::Failed(format!("a backfill task failed: {e}")))?;
        let before = started.get(&date).copied().flatten();
        let outcome = match (ran, &stage) {
            (Ran::SlotLost, _) => Outcome::Failed(
                "its backfill slot was lost (its lease went unrenewed and another run took it over); the command was stopped".into(),
            ),
            (Ran::Exited(output), Some(stage)) => judge_staged(stage, date, output).await?,
            (Ran::Exited(output), None) => judge(&table, date, before, output).await?,
        };
        if plan.chain && matches!(outcome, Outcome::Failed(_)) {
            halted = true;
            stopped.get_or_insert_with(|| {
                "a date of the chain failed, so later dates were not started".into()
            });
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
        stopped.as_deref(),
    )
}

/// How a date's command ended.
enum Ran {
    Exited(std::io::Result<std::process::Output>),
    /// Its slot was lost while it ran: the command was stopped.
    SlotLost,
}

/// Run `command` while `lease` (if any) holds its slot: stop the command's
/// process group as soon as the lease is lost, and release the slot the
/// moment the command ends.
async fn run_in_slot(mut command: tokio::process::Command, lease: Option<SlotLease>) -> Ran {
    let Some(lease) = lease else {
        return Ran::Exited(command.output().await);
    };
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let ran = match command.spawn() {
        Err(e) => Ran::Exited(Err(e)),
        Ok(child) => {
            let group = child.id();
            let exited = child.wait_with_output();
            tokio::pin!(exited);
            tokio::select! {
                out = &mut exited => Ran::Exited(out),
                _ = lease.lost() => {
                    #[cfg(unix)]
                    if let Some(pid) = group {
                        // SAFETY: signalling the process group the command leads.
                        unsafe { libc::killpg(pid as libc::pid_t, libc::SIGTERM) };
                    }
                    let _ = exited.await;
                    Ran::SlotLost
                }
            }
        }
    };
    lease.release().await;
    ran
}

/// Wait until `date` may start: outside the pause window, then through the
/// warehouse's gate (production first, a slot). `None`: interrupted.
async fn wait_turn(
    gate: &mut BackfillGate,
    date: NaiveDate,
    pause: Option<Window>,
    bar: &ProgressBar,
    stop: &AtomicBool,
) -> Result<Option<Option<SlotLease>>, CliError> {
    while !stop.load(Ordering::SeqCst) {
        if let Some(w) = pause {
            if w.contains(chrono::Local::now().time()) {
                bar.set_message(format!("paused during {w}: {date} starts after it"));
                tokio::time::sleep(Duration::from_secs(5)).await;
                continue;
            }
        }
        match gate.try_enter(Some(date)).await {
            Ok(Entry::Go(lease)) => return Ok(Some(lease.map(SlotLease::keep_renewed))),
            Ok(Entry::Wait(why)) => bar.set_message(format!("{date} waits: {why}")),
            // A store that failed once: look again (running dates go on).
            Err(e) if e.kind() == logbook_core::ErrorKind::Transient => {
                bar.set_message(format!("{date} waits: reading the run budget failed ({e})"))
            }
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(gate.pause()).await;
    }
    Ok(None)
}

/// Lower the command's CPU and I/O priority (Linux; elsewhere, as is).
fn lower_priority(command: &mut tokio::process::Command, priority: Priority) {
    #[cfg(target_os = "linux")]
    {
        if priority == Priority::Normal {
            return;
        }
        // SAFETY: between fork and exec the closure calls only
        // async-signal-safe system calls and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                match priority {
                    Priority::Idle => {
                        let param = libc::sched_param { sched_priority: 0 };
                        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                    }
                    _ => {
                        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                    }
                }
                // I/O class idle: the disk only when nobody else wants it.
                const IOPRIO_WHO_PROCESS: libc::c_long = 1;
                const IOPRIO_CLASS_IDLE: libc::c_long = 3;
                libc::syscall(
                    libc::SYS_ioprio_set,
                    IOPRIO_WHO_PROCESS,
                    0,
                    IOPRIO_CLASS_IDLE << 13,
                );
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (command, priority);
}

/// One line saying why the plan holds no date.
fn why_none(args: &Args, status: &lifecycle::TableStatus) -> String {
    let table = &args.table;
    let to = args.range.to();
    let (Some(first), Some(last)) = (status.dates.first(), status.dates.last()) else {
        return match args.range.from {
            Some(from) => format!("nothing to run: the range {from} to {to} of {table} holds no date"),
            None => format!(
                "nothing to run: {table} has no schedule start and no committed date, so the range has no first date: give --from"
            ),
        };
    };
    let (first, last) = (first.date, last.date);
    let mut line = match args.only {
        Selection::All => format!(
            "nothing to run: every date of {table} from {first} to {last} is being written by a live run"
        ),
        only => {
            let which = match only {
                Selection::Stale => "stale or corrupt",
                Selection::Missing => "missing",
                _ => "missing, stale or corrupt",
            };
            format!(
                "nothing to run: none of the {} dates of {table} from {first} to {last} is {which}; --only all recomputes them all",
                status.dates.len()
            )
        }
    };
    if args.range.from.is_some_and(|f| f < first) {
        line.push_str(&format!(
            " (dates before {first}, the table's schedule start, are not due)"
        ));
    }
    line
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
    stopped: Option<&str>,
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
        } else {
            stopped.unwrap_or("some dates failed")
        };
        return Err(CliError::Failed(format!(
            "backfill of {table} incomplete: {why}; run the same command again to resume"
        )));
    }
    Ok(())
}
