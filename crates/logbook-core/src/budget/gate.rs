//! Where a backfill run waits its turn: production first, then a slot.

use std::time::Duration;

use chrono::NaiveDate;

use crate::error::Result;
use crate::warehouse::Warehouse;

use super::slot::{try_claim, Look, Pool};
use super::{Objects, Observer, ProductionRecord, SlotLease, SlotRecord};

/// Why a backfill run may not start yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// Production runs are live or waiting, and production goes first.
    Production(Vec<ProductionRecord>),
    /// Every backfill slot is held (`max-backfill-runs`, or what
    /// `max-runs` leaves beside the live production runs).
    Slots {
        capacity: u32,
        held: Vec<SlotRecord>,
        production: usize,
    },
    /// Every heavy-step slot is held (`max-heavy-steps`).
    Heavy {
        capacity: u32,
        held: Vec<SlotRecord>,
    },
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Waiting::Production(runs) => {
                let first = &runs[0];
                write!(
                    f,
                    "production first: {} of {} is {}",
                    first.date,
                    first.table,
                    if first.waiting {
                        "waiting to run"
                    } else {
                        "running"
                    }
                )?;
                if runs.len() > 1 {
                    write!(f, " (and {} more production runs)", runs.len() - 1)?;
                }
                Ok(())
            }
            Waiting::Slots {
                capacity,
                held,
                production,
            } => {
                write!(f, "all {capacity} backfill slots are held")?;
                if *production > 0 {
                    write!(f, " ({production} production runs count against max-runs)")?;
                }
                holders(f, held)
            }
            Waiting::Heavy { capacity, held } => {
                write!(f, "all {capacity} heavy-step slots are held")?;
                holders(f, held)
            }
        }
    }
}

fn holders(f: &mut std::fmt::Formatter<'_>, held: &[SlotRecord]) -> std::fmt::Result {
    if let Some(first) = held.first() {
        write!(f, ": {}", first.what)?;
        if held.len() > 1 {
            write!(f, " and {} more", held.len() - 1)?;
        }
    }
    Ok(())
}

/// The wait after `waited` looks that found no turn: 100 ms, half again
/// as long after each further look, up to `longest_ms`.
pub(crate) fn pause(waited: u32, longest_ms: u64) -> Duration {
    let grown = 100.0 * 1.5f64.powi(waited.saturating_sub(1).min(20) as i32);
    Duration::from_millis((grown as u64).min(longest_ms))
}

/// What one look at the budget decided.
#[derive(Debug)]
pub enum Entry {
    /// Start: holding this slot, or none when the budget sets no limit.
    Go(Option<SlotLease>),
    /// Not yet, for this reason.
    Wait(Waiting),
}

/// A backfill runner's way through the warehouse's run budget. It keeps
/// what it has seen of other holders' leases between looks: a lease
/// expires only once this gate has seen it unchanged for its length.
#[derive(Debug)]
pub struct BackfillGate {
    warehouse: Warehouse,
    table: Option<String>,
    what: String,
    observer: Observer,
    /// The longest wait between looks (a quarter of the latest lease).
    pause_ms: u64,
    /// Looks that found no turn since the last that found one.
    waited: u32,
}

impl Warehouse {
    /// The gate backfill runs of `table` (if one) pass before they start;
    /// `what` names the holder for people (`backfill of revenue, pid 42`).
    pub fn backfill_gate(&self, table: Option<&str>, what: &str) -> BackfillGate {
        BackfillGate {
            warehouse: self.clone(),
            table: table.map(str::to_string),
            what: what.to_string(),
            observer: Observer::new(self.options().clock.clone()),
            pause_ms: 1_000,
            waited: 0,
        }
    }
}

/// The runs live in the warehouse now, by class, as one look finds them:
/// a run that died shows until someone has timed its lease out, so each
/// says when the store last saw it renewed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LiveRuns {
    /// Production runs announced (running or waiting).
    pub production: Vec<Live<ProductionRecord>>,
    /// Backfill slots held, by slot number.
    pub backfill: Vec<(u32, Live<SlotRecord>)>,
    /// Heavy-step slots held, by slot number (see `HeavyStep`).
    pub heavy: Vec<(u32, Live<SlotRecord>)>,
}

/// A live run's record, and how long ago the store last saw it renewed
/// (the store's clock against this process's: a hint for people, never
/// used to expire anything).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Live<T> {
    pub record: T,
    pub unrenewed_ms: i64,
}

impl Warehouse {
    /// The runs live now: announced production runs, held backfill slots,
    /// and the heavy steps under way.
    pub async fn live_runs(&self) -> Result<LiveRuns> {
        let objects = Objects {
            location: self.location().clone(),
        };
        let now = self.options().clock.now_millis();
        let mut once = Observer::new(self.options().clock.clone());
        let production = self
            .production_runs(&mut once)
            .await?
            .into_iter()
            .map(|(record, at)| Live {
                record,
                unrenewed_ms: now - at,
            })
            .collect();
        Ok(LiveRuns {
            production,
            backfill: held_slots(&objects, Pool::Runs, now).await?,
            heavy: held_slots(&objects, Pool::Heavy, now).await?,
        })
    }
}

/// The slots of `pool` held now, by number, with how long each went
/// unrenewed by the store's clock (`now`: this process's).
async fn held_slots(
    objects: &Objects,
    pool: Pool,
    now: i64,
) -> Result<Vec<(u32, Live<SlotRecord>)>> {
    let listed = objects.list_modified(pool.dir()).await?;
    let mut held = Vec::new();
    for (k, gens) in super::slot::heads(objects, pool).await? {
        let Some(&gen) = gens.last() else { continue };
        let path = pool.slot(k, gen);
        let at = listed
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(now, |(_, at)| *at);
        if let Some(record) = super::slot::read_record(objects, &path).await? {
            if !record.released {
                let unrenewed_ms = now - at;
                held.push((
                    k,
                    Live {
                        record,
                        unrenewed_ms,
                    },
                ));
            }
        }
    }
    Ok(held)
}

impl BackfillGate {
    /// How long to wait before the next look: 100 ms after the first look
    /// that found no turn, half again as long after each further one, up
    /// to a quarter of the lease (at most 2 s). A backfill held back by a
    /// short production run starts again within a fraction of that run's
    /// time; one waiting long looks every 2 s.
    pub fn pause(&self) -> Duration {
        pause(self.waited, self.pause_ms)
    }

    /// Look once: may a backfill run of `date` start now?
    pub async fn try_enter(&mut self, date: Option<NaiveDate>) -> Result<Entry> {
        let budget = self.warehouse.run_budget().await?;
        self.pause_ms = (budget.lease_ms / 4).clamp(100, 2_000);
        let production = match budget.production_first || budget.max_runs.is_some() {
            true => self.warehouse.live_production(&mut self.observer).await?,
            false => vec![],
        };
        if budget.production_first && !production.is_empty() {
            self.waited += 1;
            return Ok(Entry::Wait(Waiting::Production(production)));
        }
        if !budget.limits_backfills() {
            self.waited = 0;
            return Ok(Entry::Go(None));
        }
        let beside_production = budget
            .max_runs
            .map_or(u32::MAX, |m| m.saturating_sub(production.len() as u32));
        let capacity = budget
            .max_backfill_runs
            .unwrap_or(u32::MAX)
            .min(beside_production);
        let what = match date {
            Some(d) => format!("{} ({d})", self.what),
            None => self.what.clone(),
        };
        let holder = self.warehouse.options().ids.next_id().to_string();
        let request = SlotRecord::request(holder, self.table.clone(), date, what, budget.lease_ms);
        let objects = Objects {
            location: self.warehouse.location().clone(),
        };
        let clock = self.warehouse.options().clock.clone();
        Ok(
            match try_claim(
                &objects,
                Pool::Runs,
                capacity,
                &request,
                &mut self.observer,
                &clock,
            )
            .await?
            {
                Look::Took(lease) => {
                    self.waited = 0;
                    Entry::Go(Some(lease))
                }
                Look::Full(held) => {
                    self.waited += 1;
                    Entry::Wait(Waiting::Slots {
                        capacity,
                        held,
                        production: production.len(),
                    })
                }
            },
        )
    }

    /// Wait until a backfill run of `date` may start; `on_wait` hears why
    /// each time it must wait longer. The slot (if the budget limits
    /// backfills) is renewed in the background until released.
    pub async fn enter(
        &mut self,
        date: Option<NaiveDate>,
        mut on_wait: impl FnMut(&Waiting),
    ) -> Result<Option<SlotLease>> {
        loop {
            match self.try_enter(date).await? {
                Entry::Go(lease) => return Ok(lease.map(SlotLease::keep_renewed)),
                Entry::Wait(why) => {
                    on_wait(&why);
                    tokio::time::sleep(self.pause()).await;
                }
            }
        }
    }
}
