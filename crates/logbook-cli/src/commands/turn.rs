//! A `write` or `run` and the warehouse's run budget: production runs
//! announce themselves, backfill runs hold a slot (see
//! `logbook_core::budget`).

use chrono::NaiveDate;
use logbook_core::budget::{ProductionRun, SlotLease, SlotTicket};
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

/// How one `write` or `run` takes part in the warehouse's run budget: a
/// production run announces itself (backfills hold back while it runs); a
/// backfill run holds a slot (its runner's, or one it waits for itself).
pub struct Turn {
    pub class: RunClass,
    /// The slot the commit must still hold.
    pub ticket: Option<SlotTicket>,
    production: Option<ProductionRun>,
    lease: Option<SlotLease>,
}

impl Turn {
    /// Take a turn for a run of `table`'s `date` (`staged`: into a stage).
    pub async fn take(
        warehouse: &Warehouse,
        table: &str,
        date: NaiveDate,
        run_id: &str,
        staged: bool,
    ) -> Result<Self, CliError> {
        let said = match std::env::var(CLASS_ENV) {
            Ok(v) if !v.is_empty() => Some(
                v.parse::<RunClass>()
                    .map_err(|e| CliError::Input(format!("{CLASS_ENV}: {e}")))?,
            ),
            _ => None,
        };
        let class = match staged {
            true => RunClass::Backfill,
            false => said.unwrap_or_default(),
        };
        let ticket = match std::env::var(SLOT_ENV) {
            Ok(v) if !v.is_empty() => Some(v.parse::<SlotTicket>()?),
            _ => None,
        };
        let mut turn = Self {
            class,
            ticket,
            production: None,
            lease: None,
        };
        match class {
            RunClass::Production => {
                turn.production = Some(
                    warehouse
                        .announce_production(table, date, run_id, false)
                        .await?,
                );
            }
            RunClass::Backfill if turn.ticket.is_none() => {
                let what = format!("{table} {date} (pid {})", std::process::id());
                let mut gate = warehouse.backfill_gate(Some(table), &what);
                let mut said = None;
                turn.lease = gate
                    .enter(Some(date), |why| {
                        let line = why.to_string();
                        if said.as_ref() != Some(&line) {
                            eprintln!("waiting to start table {table}, partition {date}: {line}");
                            said = Some(line);
                        }
                    })
                    .await?;
                turn.ticket = turn.lease.as_ref().map(SlotLease::ticket);
            }
            RunClass::Backfill => {}
        }
        Ok(turn)
    }

    /// The run is over (committed or not).
    pub async fn end(self) {
        if let Some(p) = self.production {
            p.end().await;
        }
        if let Some(l) = self.lease {
            l.release().await;
        }
    }
}
