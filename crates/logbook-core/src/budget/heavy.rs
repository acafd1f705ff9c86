//! Heavy steps: the part of a backfill run that takes memory, bounded
//! across the warehouse so that however many backfill runs are live, only
//! so many of them encode at once and production keeps its memory.
//!
//! ```text
//! <warehouse>/_logbook/heavy/<k>/<gen>.json   heavy-step slot k, generation gen: a lease
//! ```
//!
//! A heavy step is a run's write of its output (the rows it produces,
//! encoded into Parquet: `logbook write`, `logbook run`, a pylogbook run's
//! write) or a compaction. A backfill run may be live for long without
//! one: a job launched by `logbook backfill` that computes, waits or
//! reads holds its backfill slot throughout, and a heavy-step slot only
//! while it writes.
//!
//! Lifecycle: a backfill-class step with `max-heavy-steps` set claims a
//! slot in `_logbook/heavy/` exactly as a backfill run claims one in
//! `_logbook/slots/` (put-if-absent generations, renewed from the lease
//! keeper, expired on the observer's clock, released by creating the
//! successor), waiting while all are held; it releases the slot when the
//! step ends. A production step never waits and takes none.
//!
//! Guarantee: at most `max-heavy-steps` backfill steps hold a slot at
//! once. A holder paused past its lease can overlap its successor; that
//! costs memory, never data, so a step does not check its slot before it
//! commits (a backfill run's own slot is what guards its commit).

use crate::error::Result;
use crate::format::RunClass;
use crate::warehouse::Warehouse;

use super::gate::pause;
use super::slot::{try_claim, Look, Pool};
use super::{Objects, Observer, SlotLease, SlotRecord, Waiting};

/// A heavy step's hold on the budget: keep it for the step, then
/// [`HeavyStep::end`] it (dropping it leaves its slot to expire).
#[derive(Debug)]
pub struct HeavyStep {
    lease: Option<SlotLease>,
}

impl Warehouse {
    /// Begin a heavy step (`what` names it for people: `revenue
    /// 2026-11-03 (run r1)`). A backfill-class step waits for a slot while
    /// `max-heavy-steps` are under way, telling `on_wait` why; a production
    /// step, or any step when no limit is set, begins at once.
    pub async fn heavy_step(
        &self,
        class: RunClass,
        what: &str,
        mut on_wait: impl FnMut(&Waiting),
    ) -> Result<HeavyStep> {
        if class == RunClass::Production {
            return Ok(HeavyStep { lease: None });
        }
        let objects = Objects {
            location: self.location().clone(),
        };
        let clock = self.options().clock.clone();
        let mut observer = Observer::new(clock.clone());
        let mut waited = 0;
        loop {
            let budget = self.run_budget().await?;
            let Some(capacity) = budget.max_heavy_steps else {
                return Ok(HeavyStep { lease: None });
            };
            let holder = self.options().ids.next_id().to_string();
            let request = SlotRecord::request(holder, None, None, what.into(), budget.lease_ms);
            match try_claim(
                &objects,
                Pool::Heavy,
                capacity,
                &request,
                &mut observer,
                &clock,
            )
            .await?
            {
                Look::Took(lease) => {
                    return Ok(HeavyStep {
                        lease: Some(lease.keep_renewed()),
                    })
                }
                Look::Full(held) => {
                    waited += 1;
                    on_wait(&Waiting::Heavy { capacity, held });
                    tokio::time::sleep(pause(waited, (budget.lease_ms / 4).clamp(100, 2_000)))
                        .await;
                }
            }
        }
    }
}

impl HeavyStep {
    /// Does this step hold a slot (the budget limits heavy steps, and the
    /// step is a backfill's)?
    pub fn holds_slot(&self) -> bool {
        self.lease.is_some()
    }

    /// The step is over, done or failed: its slot is released.
    pub async fn end(self) {
        if let Some(lease) = self.lease {
            lease.release().await;
        }
    }
}
