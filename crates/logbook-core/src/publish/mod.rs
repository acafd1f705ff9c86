//! Multi-table publishes: the warehouse-level commit point.
//!
//! ```text
//! <warehouse>/_logbook/publishes/00000000000000000004.json   decision 4 (put-if-absent)
//! <warehouse>/_logbook/publishes/_last                        hint: the latest decision
//! <warehouse>/<table>/_logbook/log/<v>.json                   each table's part: a format-3 entry
//! ```
//!
//! Lifecycle of publish `seq`, attempt `id` (driven by `stage::warehouse`):
//! 1. **Prepare.** The publisher takes `seq` = the publish log's head + 1
//!    and commits one entry per table, all at once, through each table's
//!    own pipeline (its conflict checks against the stage's base). Each
//!    entry carries a [`TxnPart`]: `seq`, `id` and the manifest it commits.
//!    Its own fields describe a commit that changes nothing, so until the
//!    decision every reader sees the version before it.
//! 2. **Decide.** The publisher creates decision `seq` naming `id` as
//!    committed, with each table's version. That one put-if-absent is the
//!    commit point: every part landed before it.
//! 3. **Recover.** A reader finding a part undecided reads the version
//!    before it. A commit to that table must not build on an undecided
//!    part: it waits up to `publish_wait_ms`, then creates decision `seq`
//!    naming `id` as aborted. Either the publisher's decision or the abort
//!    lands, never both. A decision at `seq` naming another attempt (two
//!    publishers took the same number) voids `id`'s parts as well.
//!
//! 4. **Racing publishers.** Two attempts at the same `seq` exclude each
//!    other (the decision names one id), so a part goes on a rival's
//!    undecided part of its own `seq` without waiting, recording it in
//!    [`TxnPart::over`]; the version then reads as the rival's snapshot if
//!    the decision commits the rival. Publishers crossing on two tables
//!    never wait for each other.
//!
//! **Guarantee.** Every part of a publish becomes visible with one object,
//! or none does, whatever crashed where. Versions are only ever built on
//! decided parts (a part also on a rival's of its own number, which it
//! records), so an aborted part stays a no-op: nothing built after it
//! holds its rows. Single-table commits never touch the publish log; they
//! read one decision when the head they build on is a part (undecided,
//! or decided but not yet sealed: `seal.rs`).
//!
//! **Several tables at one point** ([`WarehousePoint`], `point.rs`): a
//! reader of several tables first reads the publish log's head `R`, then
//! each table, stepping back over parts of publishes after `R` (every
//! entry records the newest publish it holds, [`crate::format::PublishMark`]).
//! Every publish up to `R` was decided before any table was read, so all
//! its parts are in every head read; none after `R` is in any.
//!
//! Alternatives measured or weighed (ARCHITECTURE.md, "Multi-table
//! publish"): one warehouse log for every commit (writers to disjoint
//! tables contend on one sequence); a catalog file swapped by a
//! conditional put (the same contention, and `If-Match` is not on every
//! store); a write-ahead publish record applied to each table afterwards
//! (every read and every commit would have to look for unapplied records,
//! and a conflict found while applying comes after the commit point).

mod point;
mod seal;
mod settle;

pub use point::WarehousePoint;
pub(crate) use seal::seal;
pub(crate) use settle::settle;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::format::{layout, StackedOn, TxnPart, TxnState};
use crate::log::{Created, Log};
use crate::storage::StorageLocation;

/// Decision `seq` of the warehouse's publish log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub seq: u64,
    /// The publish attempt decided; parts naming another id are void.
    pub id: Uuid,
    pub outcome: Outcome,
    /// The stage published.
    pub stage: String,
    /// Committed: the version each table's part landed as.
    #[serde(default)]
    pub tables: BTreeMap<String, u64>,
    /// In-commit time of the decision (the decider's clock; display only).
    pub timestamp_ms: i64,
}

/// What a [`Decision`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Committed,
    Aborted,
}

impl Decision {
    /// How this decision resolves `part`.
    pub(crate) fn resolves(&self, part: &TxnPart) -> TxnState {
        match self.id == part.id && self.outcome == Outcome::Committed {
            true => TxnState::Committed,
            false => TxnState::Void,
        }
    }

    /// The rival part among `over` this decision committed, if any.
    pub(crate) fn commits_one_of<'a>(&self, over: &'a [StackedOn]) -> Option<&'a StackedOn> {
        match self.outcome {
            Outcome::Committed => over.iter().find(|below| below.id == self.id),
            Outcome::Aborted => None,
        }
    }
}

/// A warehouse's publish log, with the decisions read so far (immutable
/// once created, so kept for the life of the handle).
#[derive(Debug)]
pub(crate) struct Publishes {
    log: Log,
    decided: Mutex<HashMap<u64, Arc<Decision>>>,
}

impl Publishes {
    pub(crate) fn new(warehouse: StorageLocation) -> Self {
        Self {
            log: Log::in_dir(warehouse, layout::PUBLISHES_DIR, layout::PUBLISHES_HINT),
            decided: Mutex::new(HashMap::new()),
        }
    }

    /// The latest decided publish, `None` before the first.
    pub(crate) async fn head(&self) -> Result<Option<u64>> {
        self.log.latest().await
    }

    /// Decision `seq`, if made.
    pub(crate) async fn decision(&self, seq: u64) -> Result<Option<Arc<Decision>>> {
        if let Some(d) = self.cached(seq) {
            return Ok(Some(d));
        }
        let Some(bytes) = self.log.read(seq).await? else {
            return Ok(None);
        };
        Ok(Some(self.keep(decode(seq, &bytes)?)))
    }

    /// How the warehouse has decided `part` so far.
    pub(crate) async fn state(&self, part: &TxnPart) -> Result<TxnState> {
        Ok(match self.decision(part.seq).await? {
            Some(d) => d.resolves(part),
            None => TxnState::Pending,
        })
    }

    /// Create `decision` unless decision `decision.seq` exists; return the
    /// one that holds the number (ours, or the one found). An error leaves
    /// the outcome unknown: reading decision `seq` later tells.
    pub(crate) async fn decide(&self, decision: &Decision) -> Result<Arc<Decision>> {
        let bytes = serde_json::to_vec(decision).map_err(|e| corrupt(decision.seq, e))?;
        // Ours only if it is ours to the byte (our own create, landed
        // unanswered): two settlers of one dead attempt write the same id
        // and outcome at different times, and the one that lost keeps the
        // winner's copy (`Created::Theirs`).
        let ours = |found: &[u8]| Ok(decode(decision.seq, found)? == *decision);
        match self.log.create(decision.seq, bytes.into(), ours).await? {
            Created::Ours => {
                if let Err(e) = self.log.write_hint(decision.seq).await {
                    tracing::warn!(seq = decision.seq, error = %e, "publish decided; updating its hint failed");
                }
                Ok(self.keep(decision.clone()))
            }
            Created::Theirs(bytes) => Ok(self.keep(decode(decision.seq, &bytes)?)),
            Created::Absent(e) => Err(e),
        }
    }

    /// Keep `decision`, made through another table's handle (the
    /// publisher's), so this table reads its parts without asking.
    pub(crate) fn learn(&self, decision: &Decision) {
        self.keep(decision.clone());
    }

    fn cached(&self, seq: u64) -> Option<Arc<Decision>> {
        let decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        decided.get(&seq).cloned()
    }

    fn keep(&self, decision: Decision) -> Arc<Decision> {
        let mut decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        decided
            .entry(decision.seq)
            .or_insert_with(|| Arc::new(decision))
            .clone()
    }
}

fn decode(seq: u64, bytes: &[u8]) -> Result<Decision> {
    let decision: Decision = serde_json::from_slice(bytes).map_err(|e| corrupt(seq, e))?;
    if decision.seq != seq {
        return Err(corrupt(seq, format!("it says publish {}", decision.seq)));
    }
    Ok(decision)
}

fn corrupt(seq: u64, reason: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        table: "(warehouse)".into(),
        path: format!("{}/{seq:020}.json", layout::PUBLISHES_DIR),
        reason: reason.to_string(),
    }
}
