//! The warehouse's run budget: how many backfill runs may be live at once,
//! and production first.
//!
//! ```text
//! <warehouse>/_logbook/budget/<n>.json              the budget, version n (put-if-absent)
//! <warehouse>/_logbook/slots/<k>/<gen>.json         backfill slot k, generation gen: a lease
//! <warehouse>/_logbook/production/<id>.json         a live (or waiting) production run
//! <warehouse>/_logbook/heavy/<k>/<gen>.json         heavy-step slot k (`heavy.rs`)
//! ```
//!
//! Lifecycle of a backfill run (driven by [`BackfillGate`]):
//! 1. **Yield.** While a production run of any table is announced (live,
//!    or waiting to start) and the budget puts production first, no
//!    backfill run starts.
//! 2. **Claim.** A slot `k < capacity` whose head generation is absent,
//!    released, or expired is taken by creating generation `gen + 1` with
//!    put-if-absent: of all claimants of one generation exactly one
//!    creates it. All slots held: wait.
//! 3. **Renew.** The holder rewrites its own generation with a higher beat
//!    every third of its lease, from a runtime of its own
//!    (`keeper.rs`), so the run's own work cannot starve it.
//! 4. **Release.** The holder creates generation `gen + 1` saying
//!    released (object_store offers no conditional delete; creating the
//!    successor is the conditional step), then deletes its own.
//!
//! **Expiry** is timed on the observer's clock, from when that observer
//! last saw the lease change (its generation or beat), never by comparing
//! the holder's timestamp with the observer's clock (as client-go's leader
//! election): a claimant that has seen a slot unchanged for the lease's
//! whole length takes it over by creating the successor.
//!
//! **Guarantee.** Generation `gen` of a slot has one holder (put-if-absent),
//! and a holder whose successor exists has lost the slot. A holder checks
//! before it commits ([`SlotLease::ensure_held`], or
//! [`check_ticket`] for a run launched with the runner's ticket): it stops
//! once a successor exists, and also once it has not renewed for long
//! enough that an observer may have timed it out, even if none has yet.
//! What no store lets us close: a holder paused between that check and
//! its commit's put (there are no fencing tokens in object stores).

mod gate;
mod heavy;
mod keeper;
mod production;
mod settings;
mod slot;
mod turn;

pub use gate::{BackfillGate, Entry, Live, LiveRuns, Waiting};
pub(crate) use heavy::HeavyShare;
pub use heavy::HeavyStep;
pub use production::{ProductionRecord, ProductionRun};
pub use settings::RunBudget;
pub(crate) use slot::ticket_holds;
pub use slot::{check_ticket, SlotLease, SlotRecord, SlotTicket};
pub use turn::{Launched, Turn};

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::storage::StorageLocation;

/// Leases as one observer has seen them. A lease is expired once it has
/// looked the same to this observer (same path, same beat) for its whole
/// length, timed on this observer's monotonic clock from the first look.
#[derive(Debug)]
pub(crate) struct Observer {
    clock: Arc<dyn Clock>,
    seen: HashMap<String, (u64, i64)>,
}

impl Observer {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            seen: HashMap::new(),
        }
    }

    /// Has the lease at `path`, now at `beat`, stayed at that beat for
    /// `lease_ms` on this observer's clock?
    pub(crate) fn expired(&mut self, path: &str, beat: u64, lease_ms: u64) -> bool {
        let now = self.clock.elapsed_millis();
        let since = self.seen.entry(path.to_string()).or_insert((beat, now));
        if since.0 != beat {
            *since = (beat, now);
        }
        now - since.1 >= lease_ms as i64
    }
}

/// Small objects of the warehouse's own (`_logbook/...` under its root);
/// every error names the object.
#[derive(Debug, Clone)]
pub(crate) struct Objects {
    pub(crate) location: StorageLocation,
}

impl Objects {
    async fn get(&self, relative: &str) -> Result<Option<Bytes>> {
        let path = self.location.path(relative);
        match self.location.get_bytes(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    /// Create `relative` unless something is there: false if it was.
    async fn create(&self, relative: &str, bytes: Bytes) -> Result<bool> {
        self.location.create_at(relative, bytes).await
    }

    async fn put(&self, relative: &str, bytes: Bytes) -> Result<()> {
        self.location.put_at(relative, bytes).await
    }

    /// Delete `relative`; already gone is fine.
    async fn delete(&self, relative: &str) -> Result<()> {
        let path = self.location.path(relative);
        match self.location.store().delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    /// Every object under `prefix`, relative to the warehouse root.
    async fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .list_modified(prefix)
            .await?
            .into_iter()
            .map(|(p, _)| p)
            .collect())
    }

    /// [`Objects::list`], with when the store last wrote each (ms).
    async fn list_modified(&self, prefix: &str) -> Result<Vec<(String, i64)>> {
        let objects: Vec<object_store::ObjectMeta> = self
            .location
            .store()
            .list(Some(&self.location.path(prefix)))
            .try_collect()
            .await
            .map_err(|e| Error::storage(prefix, e))?;
        Ok(objects
            .iter()
            .map(|o| {
                let path = self.location.relative(&o.location);
                (path, o.last_modified.timestamp_millis())
            })
            .collect())
    }
}

fn corrupt(path: &str, reason: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        table: "(warehouse)".into(),
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

fn encode<T: serde::Serialize>(path: &str, value: &T) -> Result<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| corrupt(path, e))
}
