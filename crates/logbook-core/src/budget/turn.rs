//! One run's part in the budget, from start to end: a production run
//! announces itself; a backfill run holds a slot (its runner's ticket, or
//! one it waits for itself).

use chrono::NaiveDate;

use crate::error::Result;
use crate::format::RunClass;
use crate::warehouse::Warehouse;

use super::{HeavyStep, ProductionRun, SlotLease, SlotTicket, Waiting};

/// How a run came to be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launched {
    /// By a backfill runner, which took the turn for it: it holds this
    /// slot for the run (none when the budget sets no limit).
    ByRunner(Option<SlotTicket>),
    /// On its own, as this class (a run into a stage is a backfill,
    /// whatever it says).
    Alone(RunClass),
}

impl Launched {
    /// From what a backfill runner hands the commands it launches: its
    /// slot (when the budget limits backfills) means the runner took the
    /// turn. Otherwise the run is on its own, as `class` says (production
    /// by default): a backfill on its own passes the gate itself, so a
    /// backfill run by hand obeys the budget too.
    pub fn handed(class: Option<RunClass>, ticket: Option<SlotTicket>) -> Self {
        match ticket {
            Some(t) => Launched::ByRunner(Some(t)),
            None => Launched::Alone(class.unwrap_or_default()),
        }
    }
}

/// A run's turn: hold it for the whole run, [`Turn::end`] it after.
#[derive(Debug)]
pub struct Turn {
    /// The run's class.
    pub class: RunClass,
    /// The slot the run's commit must still hold
    /// (`PartitionWriter::within_slot`).
    pub ticket: Option<SlotTicket>,
    /// The run, for people: `revenue 2026-11-03 (run r1)`.
    what: String,
    production: Option<ProductionRun>,
    lease: Option<SlotLease>,
    heavy: Option<HeavyStep>,
}

impl Turn {
    /// Take a turn for a run of `table`'s `date` (`staged`: it writes into
    /// a stage). A production run announces itself, never waiting; a
    /// backfill run on its own waits at the gate (production first, a
    /// slot), telling `on_wait` why; one its runner launched has its turn.
    pub async fn take(
        warehouse: &Warehouse,
        table: &str,
        date: NaiveDate,
        run_id: &str,
        staged: bool,
        launched: Launched,
        on_wait: impl FnMut(&Waiting),
    ) -> Result<Self> {
        let mut turn = Self {
            class: RunClass::Backfill,
            ticket: None,
            what: format!("{table} {date} (run {run_id})"),
            production: None,
            lease: None,
            heavy: None,
        };
        match launched {
            Launched::ByRunner(ticket) => turn.ticket = ticket,
            Launched::Alone(RunClass::Production) if !staged => {
                turn.class = RunClass::Production;
                // Best effort: a production run never fails, or waits,
                // for the budget (backfills then do not know to hold back).
                match warehouse
                    .announce_production(table, date, run_id, false)
                    .await
                {
                    Ok(announced) => turn.production = Some(announced),
                    Err(e) => {
                        tracing::warn!(table, %date, error = %e, "could not announce the production run; backfills will not hold back for it")
                    }
                }
            }
            Launched::Alone(_) => {
                let mut gate = warehouse.backfill_gate(Some(table), &turn.what);
                turn.lease = gate.enter(Some(date), on_wait).await?;
                turn.ticket = turn.lease.as_ref().map(SlotLease::ticket);
            }
        }
        Ok(turn)
    }

    /// The run starts writing its output: its heavy step begins (a
    /// backfill waits while `max-heavy-steps` are under way, telling
    /// `on_wait` why). Once per run: the step lasts until [`Turn::end`].
    pub async fn begin_heavy(
        &mut self,
        warehouse: &Warehouse,
        on_wait: impl FnMut(&Waiting),
    ) -> Result<()> {
        if self.heavy.is_none() {
            let step = warehouse
                .heavy_step(self.class, &self.what, on_wait)
                .await?;
            self.heavy = Some(step);
        }
        Ok(())
    }

    /// The run is over, committed or not: the announcement goes, the slot
    /// and the heavy step's slot are released.
    pub async fn end(self) {
        if let Some(h) = self.heavy {
            h.end().await;
        }
        if let Some(p) = self.production {
            p.end().await;
        }
        if let Some(l) = self.lease {
            l.release().await;
        }
    }
}
