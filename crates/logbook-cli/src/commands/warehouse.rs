//! `logbook warehouse`: the run budget every process on the warehouse obeys.

use logbook_core::budget::RunBudget;
use logbook_core::Warehouse;

use super::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The run budget, and the runs live now by class.
    Show,
    /// Set a budget setting: `max-backfill-runs N`, `max-runs N`,
    /// `max-heavy-steps N`, `production-first on|off`, `lease-ms N`.
    Set {
        setting: Setting,
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Remove a limit (`max-backfill-runs`, `max-runs`, `max-heavy-steps`).
    Unset { setting: Setting },
}

/// A setting of the run budget.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Setting {
    /// At most this many backfill runs live at once, across every process and machine.
    MaxBackfillRuns,
    /// A backfill run starts only while fewer runs than this (of any class) are live.
    MaxRuns,
    /// At most this many backfill heavy steps (writing a run's output, a compaction) at once.
    MaxHeavySteps,
    /// While a production run is live or waiting, backfills start no new date (on by default).
    ProductionFirst,
    /// How long a slot or announcement lives unrenewed, as its observers time it.
    LeaseMs,
}

pub async fn run(warehouse: &Warehouse, command: Command) -> Result<(), CliError> {
    match command {
        Command::Show => show(warehouse).await,
        Command::Set { setting, value } => {
            let change = parse(setting, &value)?;
            let budget = warehouse.set_run_budget(|b| change(b)).await?;
            print_budget(&budget);
            Ok(())
        }
        Command::Unset { setting } => {
            let budget = warehouse
                .set_run_budget(|b| match setting {
                    Setting::MaxBackfillRuns => b.max_backfill_runs = None,
                    Setting::MaxRuns => b.max_runs = None,
                    Setting::MaxHeavySteps => b.max_heavy_steps = None,
                    Setting::ProductionFirst => b.production_first = true,
                    Setting::LeaseMs => b.lease_ms = RunBudget::default().lease_ms,
                })
                .await?;
            print_budget(&budget);
            Ok(())
        }
    }
}

/// A change to the budget.
type Change = Box<dyn Fn(&mut RunBudget)>;

/// What `set SETTING VALUE` changes, or why the value is refused.
fn parse(setting: Setting, value: &str) -> Result<Change, CliError> {
    let count = |name: &str| -> Result<u32, CliError> {
        match value.trim().parse::<i64>() {
            Ok(n) if n >= 1 && n <= i64::from(u32::MAX) => Ok(n as u32),
            Ok(n) => Err(CliError::Input(format!(
                "{name} must be a whole number of at least 1, got {n} (to remove the limit: logbook warehouse unset {name})"
            ))),
            Err(_) => Err(CliError::Input(format!(
                "{name} must be a whole number of at least 1, got {value:?}"
            ))),
        }
    };
    Ok(match setting {
        Setting::MaxBackfillRuns => {
            let n = count("max-backfill-runs")?;
            Box::new(move |b| b.max_backfill_runs = Some(n))
        }
        Setting::MaxRuns => {
            let n = count("max-runs")?;
            Box::new(move |b| b.max_runs = Some(n))
        }
        Setting::MaxHeavySteps => {
            let n = count("max-heavy-steps")?;
            Box::new(move |b| b.max_heavy_steps = Some(n))
        }
        Setting::LeaseMs => {
            let n = count("lease-ms")?;
            Box::new(move |b| b.lease_ms = u64::from(n))
        }
        Setting::ProductionFirst => {
            let on = match value {
                "on" | "true" => true,
                "off" | "false" => false,
                other => {
                    return Err(CliError::Input(format!(
                        "production-first must be on or off, got {other:?}"
                    )))
                }
            };
            Box::new(move |b| b.production_first = on)
        }
    })
}

fn print_budget(b: &RunBudget) {
    let limit = |v: Option<u32>| v.map_or("no limit".to_string(), |n| n.to_string());
    println!("max-backfill-runs  {}", limit(b.max_backfill_runs));
    println!("max-runs           {}", limit(b.max_runs));
    println!("max-heavy-steps    {}", limit(b.max_heavy_steps));
    println!(
        "production-first   {}",
        if b.production_first { "on" } else { "off" }
    );
    println!("lease-ms           {}", b.lease_ms);
}

async fn show(warehouse: &Warehouse) -> Result<(), CliError> {
    print_budget(&warehouse.run_budget().await?);
    print_live(warehouse).await
}

/// The runs live now, by class (also under `status`).
pub async fn print_live(warehouse: &Warehouse) -> Result<(), CliError> {
    let live = warehouse.live_runs().await?;
    println!("live production runs: {}", live.production.len());
    for p in &live.production {
        let r = &p.record;
        let how = if r.waiting { "waiting" } else { "running" };
        let age = unrenewed(p.unrenewed_ms, r.lease_ms);
        println!("    {} {} run {} ({how}){age}", r.table, r.date, r.run_id);
    }
    println!("live backfill runs (slots held): {}", live.backfill.len());
    for (k, s) in &live.backfill {
        let age = unrenewed(s.unrenewed_ms, s.record.lease_ms);
        println!("    slot {k}: {}{age}", s.record.what);
    }
    if !live.heavy.is_empty() {
        println!(
            "heavy steps under way (max-heavy-steps): {}",
            live.heavy.len()
        );
        for (k, s) in &live.heavy {
            let age = unrenewed(s.unrenewed_ms, s.record.lease_ms);
            println!("    slot {k}: {}{age}", s.record.what);
        }
    }
    Ok(())
}

/// Said of a run the store has not seen renewed for longer than its lease.
fn unrenewed(ms: i64, lease_ms: u64) -> String {
    match ms > lease_ms as i64 {
        true => format!(
            ", not renewed for {} s: its process may have died (it stops counting once a backfill has watched it for {} s)",
            ms / 1000,
            lease_ms / 1000
        ),
        false => String::new(),
    }
}
