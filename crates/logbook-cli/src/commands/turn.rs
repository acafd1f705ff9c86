//! A `write` or `run` and the warehouse's run budget: the class and slot
//! `logbook backfill` hands its commands, read from the environment (see
//! `logbook_core::budget::Turn`).

use chrono::NaiveDate;
use logbook_core::budget::{Launched, SlotTicket, Turn, Waiting};
use logbook_core::{RunClass, Warehouse};

use super::CliError;

/// The environment variable `logbook backfill` sets for the commands it
/// runs: `backfill`, so their commits and markers say so (`write` and
/// `run` read it; a run inside a stage is a backfill whatever it says).
pub const CLASS_ENV: &str = "LOGBOOK_RUN_CLASS";

/// The environment variable carrying the backfill slot the runner holds
/// for the command it launched (`SLOT/GENERATION`): the command commits
/// only while the slot is still the runner's.
pub const SLOT_ENV: &str = "LOGBOOK_SLOT";

/// Take the turn of a run of `table`'s `date` (`staged`: into a stage),
/// as the environment says; a wait for a slot is said on stderr.
pub async fn take(
    warehouse: &Warehouse,
    table: &str,
    date: NaiveDate,
    run_id: &str,
    staged: bool,
) -> Result<Turn, CliError> {
    let class = match std::env::var(CLASS_ENV) {
        Ok(v) if !v.is_empty() => Some(
            v.parse::<RunClass>()
                .map_err(|e| CliError::Input(format!("{CLASS_ENV}: {e}")))?,
        ),
        _ => None,
    };
    let ticket = match std::env::var(SLOT_ENV) {
        Ok(v) if !v.is_empty() => Some(v.parse::<SlotTicket>()?),
        _ => None,
    };
    // `backfill` sets both for the commands it launched (the slot when the
    // budget limits backfills): it took their turn already.
    let launched = Launched::handed(class, ticket);
    let on_wait = say_wait(format!("waiting to start table {table}, partition {date}"));
    let mut turn = Turn::take(warehouse, table, date, run_id, staged, launched, on_wait).await?;
    // `write` and `run` write their output from the start: the heavy step
    // is the whole command.
    let on_wait = say_wait(format!("waiting to write table {table}, partition {date}"));
    if let Err(e) = turn.begin_heavy(warehouse, on_wait).await {
        turn.end().await;
        return Err(e.into());
    }
    Ok(turn)
}

/// Say on stderr why a run waits, each reason once: `doing: reason`.
pub fn say_wait(doing: String) -> impl FnMut(&Waiting) {
    let mut said = None;
    move |why: &Waiting| {
        let line = why.to_string();
        if said.as_ref() != Some(&line) {
            eprintln!("{doing}: {line}");
            said = Some(line);
        }
    }
}
