//! Reading several tables at one warehouse point: every multi-table
//! publish decided up to a number, none after it.

use crate::error::Result;
use crate::format::TxnState;
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::warehouse::Warehouse;

use super::{Decision, Publishes};

/// A point in a warehouse's history of multi-table publishes: the
/// publishes decided up to [`WarehousePoint::seq`] and none after.
///
/// Take it ([`Warehouse::point`]) before opening the tables a query
/// reads, then read each with [`Snapshot::at_point`]: a publish decided by
/// then had every part landed before any table was read, so every table
/// holds it; one decided later is stepped back over in every table. A
/// query never sees part of a publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WarehousePoint {
    upto: Option<u64>,
}

impl WarehousePoint {
    /// Before the warehouse's first publish.
    pub fn before_any() -> Self {
        Self { upto: None }
    }

    /// Right after publish `seq` was decided.
    pub fn after(seq: u64) -> Self {
        Self { upto: Some(seq) }
    }

    /// The newest publish the point holds, `None` before the first.
    pub fn seq(&self) -> Option<u64> {
        self.upto
    }

    /// Does the point hold publish `seq`?
    pub fn holds(&self, seq: u64) -> bool {
        self.upto.is_some_and(|upto| seq <= upto)
    }
}

impl Warehouse {
    /// The warehouse's point now: the latest publish decided (the publish
    /// log's hint, then a `HEAD` or two; never a listing).
    pub async fn point(&self) -> Result<WarehousePoint> {
        let head = Publishes::new(self.location().clone()).head().await?;
        Ok(WarehousePoint { upto: head })
    }

    /// Decision `seq` of the warehouse's publish log, if made.
    pub async fn publish_decision(&self, seq: u64) -> Result<Option<Decision>> {
        let publishes = Publishes::new(self.location().clone());
        Ok(publishes.decision(seq).await?.map(|d| (*d).clone()))
    }
}

impl Table {
    /// The table at warehouse point `point`: its latest version, stepped
    /// back over the parts of publishes after the point.
    pub async fn at_point(&self, point: WarehousePoint) -> Result<Snapshot> {
        self.latest().await?.at_point(point).await
    }
}

impl Snapshot {
    /// This snapshot (the head, or any version) as read at `point`: itself
    /// when it holds no publish after the point (no read), else the newest
    /// version before the earliest such publish's part in this table (an
    /// undecided part counts as after any point).
    /// Fails with `VersionExpired` when that version is older than the
    /// retention.
    pub async fn at_point(&self, point: WarehousePoint) -> Result<Snapshot> {
        let mut snap = self.clone();
        loop {
            let entry = snap.entry();
            let after_point = |seq: u64| !point.holds(seq);
            // A committed part of a later publish reads as the version
            // before it (which its stored fields are).
            // An undecided part reads as the version before it as well;
            // naming that version keeps its meaning once the part is
            // decided (a Flight ticket records it).
            let part_after = entry
                .txn
                .as_ref()
                .filter(|t| t.state != TxnState::Void && after_point(t.seq))
                .map(|_| entry.version);
            // A later version holding such a part reads as the version
            // before that part.
            let holds_after = entry
                .publish
                .filter(|mark| after_point(mark.seq))
                .map(|mark| mark.version);
            match part_after.or(holds_after) {
                Some(version) => snap = self.travel(version.saturating_sub(1)).await?,
                None => return Ok(snap),
            }
        }
    }
}
