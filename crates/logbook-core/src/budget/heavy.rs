//! Heavy steps: the part of a backfill run that takes memory, bounded
//! across the warehouse so that however many backfill runs are live, only
//! so many of them encode at once and production keeps its memory.
//!
//! ```text
//! <warehouse>/_logbook/heavy/<k>/<gen>.json   heavy-step slot k, generation gen: a lease
//! ```
//!
//! A heavy step is a run writing its output (the rows it produces,
//! encoded into Parquet: `logbook write`, `logbook run`, a pylogbook run
//! or write, each for the whole run) or a compaction. A backfill may be
//! live for long without one: a job launched by `logbook backfill` that
//! computes, waits or reads holds its backfill slot throughout, and a
//! heavy-step slot only while it has a run open.
//!
//! Lifecycle: a backfill-class step with `max-heavy-steps` set claims a
//! slot in `_logbook/heavy/` exactly as a backfill run claims one in
//! `_logbook/slots/` (put-if-absent generations, renewed from the lease
//! keeper, expired on the observer's clock, released by creating the
//! successor), waiting while all are held; it releases the slot when the
//! step ends. A production step never waits and takes none.
//!
//! The steps of one warehouse handle share one slot: a job writing two
//! runs at once (two outputs of one pylogbook job) takes one slot, never
//! waits for itself, and frees it when its last step ends.
//!
//! Guarantee: at most `max-heavy-steps` warehouse handles hold a slot at
//! once. A holder paused past its lease can overlap its successor; that
//! costs memory, never data, so a step does not check its slot before it
//! commits (a backfill run's own slot is what guards its commit).

use std::sync::{Arc, Mutex, Weak};

use crate::error::Result;
use crate::format::RunClass;
use crate::warehouse::Warehouse;

use super::gate::pause;
use super::slot::{try_claim, Look, Pool};
use super::{Objects, Observer, SlotLease, SlotRecord, Waiting};

/// A heavy step's hold on the budget: keep it for the step, then
/// [`HeavyStep::end`] it (dropping it leaves its slot to expire, once no
/// other step of the handle holds it).
#[derive(Debug)]
pub struct HeavyStep {
    held: Option<Arc<Held>>,
    share: HeavyShare,
}

/// The slot a warehouse handle's steps hold, shared while any holds it.
#[derive(Debug)]
pub(crate) struct Held {
    lease: Mutex<Option<SlotLease>>,
}

/// Where a warehouse handle keeps the slot its steps share.
pub(crate) type HeavyShare = Arc<Mutex<Weak<Held>>>;

fn shared(share: &HeavyShare) -> Option<Arc<Held>> {
    share.lock().unwrap_or_else(|e| e.into_inner()).upgrade()
}

impl Warehouse {
    /// Begin a heavy step (`what` names it for people: `revenue
    /// 2026-11-03 (run r1)`). A backfill-class step waits for a slot while
    /// `max-heavy-steps` are under way, telling `on_wait` why, unless a
    /// step of this handle holds one (it shares it); a production step,
    /// or any step when no limit is set, begins at once.
    pub async fn heavy_step(
        &self,
        class: RunClass,
        what: &str,
        mut on_wait: impl FnMut(&Waiting),
    ) -> Result<HeavyStep> {
        let share = self.heavy.clone();
        let none = |share| HeavyStep { held: None, share };
        if class == RunClass::Production {
            return Ok(none(share));
        }
        let objects = Objects {
            location: self.location().clone(),
        };
        let clock = self.options().clock.clone();
        let mut observer = Observer::new(clock.clone());
        let mut waited = 0;
        loop {
            if let Some(held) = shared(&share) {
                return Ok(HeavyStep {
                    held: Some(held),
                    share,
                });
            }
            let budget = self.run_budget().await?;
            let Some(capacity) = budget.max_heavy_steps else {
                return Ok(none(share));
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
                    let held = Arc::new(Held {
                        lease: Mutex::new(Some(lease.keep_renewed())),
                    });
                    let theirs = {
                        let mut slot = share.lock().unwrap_or_else(|e| e.into_inner());
                        let theirs = slot.upgrade();
                        if theirs.is_none() {
                            *slot = Arc::downgrade(&held);
                        }
                        theirs
                    };
                    // Another step of this handle took one meanwhile:
                    // share it, and give ours back.
                    if let Some(theirs) = theirs {
                        release(&held).await;
                        return Ok(HeavyStep {
                            held: Some(theirs),
                            share,
                        });
                    }
                    return Ok(HeavyStep {
                        held: Some(held),
                        share,
                    });
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

async fn release(held: &Held) {
    let lease = held.lease.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(lease) = lease {
        lease.release().await;
    }
}

impl HeavyStep {
    /// Does this step hold a slot (the budget limits heavy steps, and the
    /// step is a backfill's)?
    pub fn holds_slot(&self) -> bool {
        self.held.is_some()
    }

    /// The step is over, done or failed: its slot is released, unless
    /// another step of the handle still holds it.
    pub async fn end(self) {
        let Some(held) = self.held else { return };
        let last = {
            let mut slot = self.share.lock().unwrap_or_else(|e| e.into_inner());
            // Under the lock no step takes a share meanwhile, and another
            // step's end sees this one's gone.
            match Arc::strong_count(&held) > 1 {
                true => {
                    drop(held);
                    None
                }
                false => {
                    *slot = Weak::new();
                    Some(held)
                }
            }
        };
        if let Some(held) = last {
            release(&held).await;
        }
    }
}
