//! Intent markers: a writer says "I am writing this date" while it works.
//!
//! A marker is a small JSON object under `_logbook/running/<date>/` holding
//! the run id, when the run started, its latest heartbeat and the staging
//! directories it fills. A partition write creates one when it starts
//! (named by run id and staging directory, so two writers with the same run
//! id never share a marker), refreshes it while rows arrive, and deletes it
//! when it commits or aborts; a rewrite (compaction, a dimension change)
//! holds one too, listing every directory it stages into, so vacuum keeps
//! them. A writer that dies leaves its marker behind; once the heartbeat is
//! older than the table's running timeout, status shows the run as
//! abandoned instead of running, and once the marker object is older than
//! vacuum's retention (by the store's clock), vacuum stops protecting its
//! directories. Markers are advisory for correctness of commits (the
//! commit protocol decides), and a writer or rewrite that stalled longer
//! than half the shortest retention claims its directories back from any
//! vacuum ([`claim`]), then checks its staged files before committing. A
//! stale marker is deleted by the vacuum that looked into its directories
//! (having claimed them if it deletes there), unless they still hold files
//! too young to delete.

use std::sync::Arc;

use chrono::NaiveDate;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::{layout, DataFile};
use crate::handle::TableInner;
use crate::staged_files::first_damaged;

/// Vacuum refuses a shorter retention unless forced (one hour). A writer
/// refreshes its marker well within it (see `PartitionWriter::heartbeat`);
/// one whose marker went unstored for half of it claims its directories
/// back before going on (see `claim`), so vacuum never takes the files
/// of a write that then commits.
pub const MIN_RETENTION_MS: i64 = 60 * 60 * 1000;

/// What a running write says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMarker {
    pub date: NaiveDate,
    pub run_id: String,
    pub started_ms: i64,
    pub heartbeat_ms: i64,
    /// The staging directory the write fills (vacuum keeps it while live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// More staging directories (a rewrite fills one per run of files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<String>,
    /// A rewrite (compaction, dimension change) rather than a run of
    /// `date`: its rows are not new, so status does not show it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rewrite: bool,
    /// A rewrite's own id, naming its marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Production or backfill (a write's; `None` for a rewrite, or a
    /// marker written before run classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<crate::format::RunClass>,
}

impl RunMarker {
    /// Has the heartbeat stopped for longer than `timeout_ms` at `now_ms`?
    pub fn abandoned(&self, now_ms: i64, timeout_ms: i64) -> bool {
        now_ms - self.heartbeat_ms > timeout_ms
    }

    /// Where this marker lives: one object per writer, even when two writers
    /// share a run id (named by the writer's staging directory, or for a
    /// rewrite by its own id).
    pub(crate) fn path(&self) -> String {
        layout::running_marker(self.date, &self.run_id, self.leaf())
    }

    /// Where the claim on this marker's directories lives while its stored
    /// heartbeat is `heartbeat_ms` (see [`claim`]).
    pub(crate) fn claim_path(&self, heartbeat_ms: i64) -> String {
        layout::marker_claim(self.date, &self.run_id, self.leaf(), heartbeat_ms)
    }

    fn leaf(&self) -> &str {
        self.dir
            .as_deref()
            .or(self.lease.as_deref())
            .and_then(|d| d.rsplit('/').next())
            .unwrap_or("marker")
    }

    /// Every staging directory the marker protects.
    pub(crate) fn staging_dirs(&self) -> impl Iterator<Item = &str> {
        self.dir.iter().chain(&self.dirs).map(String::as_str)
    }
}

/// A marker found by [`list`], with where it is and when the store last
/// wrote it (its latest heartbeat, by the store's clock).
#[derive(Debug, Clone)]
pub(crate) struct ListedMarker {
    pub path: String,
    pub modified_ms: i64,
    pub marker: RunMarker,
}

/// Write (or refresh) the marker; failures only warn: markers are advisory.
/// Whether it was written (a writer measures its pauses from the last
/// heartbeat stored, not the last one tried).
pub(crate) async fn beat(table: &TableInner, marker: &RunMarker) -> bool {
    match beat_strict(table, marker).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(table = %table.name, date = %marker.date, error = %e, "could not write the run's intent marker");
            false
        }
    }
}

/// Write (or refresh) the marker, reporting failure: a writer back from a
/// pause must know its marker protects its files again.
///
/// Tried up to three times: on a local directory, a writer of the same
/// date finishing at that moment may remove the date's directory between
/// the `mkdir`s of this put (`StorageLocation::remove_empty_parents`);
/// writing a marker again is harmless.
pub(crate) async fn beat_strict(table: &TableInner, marker: &RunMarker) -> Result<()> {
    let mut tries = 1;
    loop {
        match table.put_json(&marker.path(), marker).await {
            Err(_) if tries < 3 => tries += 1,
            done => return done,
        }
    }
}

/// Who holds the directories of a marker that went stale: the writer back
/// from its pause, or a vacuum about to delete in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Claimant {
    Writer,
    Vacuum,
}

#[derive(Serialize, Deserialize)]
struct Claim {
    by: Claimant,
}

/// Claim the directories `marker` names, as they were while its stored
/// heartbeat was `heartbeat_ms`, for `by`: true if `by` holds the claim
/// (made now, or by an earlier try of its own whose answer was lost),
/// false if the other side does.
///
/// A writer back from a long pause and a vacuum that found its marker
/// stale create the same object with put-if-absent, so exactly one of
/// them gets the directories. Without it, a writer could refresh its
/// marker and check its files after the vacuum's last look at the markers
/// and before its deletes, then commit files being deleted. The claim
/// is named by the heartbeat so that every pause is claimed afresh.
/// Alternative: conditional updates of the marker itself (`If-Match`),
/// which not every store offers; put-if-absent is what commits need
/// already. A claimant must store the marker within [`CLAIM_TO_STORE`]
/// of claiming, or fail: so a writer's claim older than the retention on
/// a marker still at that heartbeat belongs to a writer that died or will
/// fail, and [`claim_stale`] replaces it. Vacuum deletes other claims
/// older than the retention once their marker is gone or moved on.
pub(crate) async fn claim(
    table: &TableInner,
    marker: &RunMarker,
    heartbeat_ms: i64,
    by: Claimant,
) -> Result<bool> {
    let path = marker.claim_path(heartbeat_ms);
    // Tried up to three times, as a marker is: a try that landed but
    // failed to answer is found again as `by`'s own.
    let mut tries = 1;
    let created = loop {
        match table.create_json(&path, &Claim { by }).await {
            Err(_) if tries < 3 => tries += 1,
            done => break done?,
        }
    };
    if created {
        return Ok(true);
    }
    let found: Option<Claim> = table.get_json_opt(&path).await?;
    Ok(found.is_some_and(|c| c.by == by))
}

/// The longest a writer may take from claiming its directories back to
/// storing its marker again (half the shortest retention): one that takes
/// longer fails, since vacuum may by then have replaced its claim.
pub(crate) const CLAIM_TO_STORE: i64 = MIN_RETENTION_MS / 2;

/// [`claim`] for a vacuum whose retention began at `cutoff` (store time):
/// a writer's claim made before it, on a marker still at that heartbeat,
/// is replaced (see [`CLAIM_TO_STORE`]); without that, a writer that
/// claimed and died would keep its directories forever.
pub(crate) async fn claim_stale(
    table: &TableInner,
    marker: &RunMarker,
    heartbeat_ms: i64,
    cutoff: i64,
) -> Result<bool> {
    if claim(table, marker, heartbeat_ms, Claimant::Vacuum).await? {
        return Ok(true);
    }
    let path = table.location.path(&marker.claim_path(heartbeat_ms));
    let store = table.location.store();
    match store.head(&path).await {
        Ok(meta) if meta.last_modified.timestamp_millis() >= cutoff => return Ok(false),
        Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(Error::storage(&path, e)),
    }
    match store.delete(&path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(Error::storage(&path, e)),
    }
    claim(table, marker, heartbeat_ms, Claimant::Vacuum).await
}

/// The marker a claim (a path of [`RunMarker::claim_path`]) is on, and
/// the heartbeat it claimed; `None` for another path.
pub(crate) fn claimed_marker(claim: &str) -> Option<(String, i64)> {
    let rest = claim
        .strip_prefix(layout::CLAIMS_DIR)?
        .strip_prefix('/')?
        .strip_suffix(".json")?;
    let (marker, at) = rest.rsplit_once('-')?;
    let at = at.parse().ok()?;
    Some((format!("{}/{marker}.json", layout::RUNNING_DIR), at))
}

/// A writer (or rewrite) back from a pause longer than half the shortest
/// retention, before it refreshes `marker`: take its directories back as
/// the marker was stored. False if a vacuum holds them, or deleted the
/// marker (which it does only once it need not delete in them, or has
/// taken them): a write with staged files must then fail.
pub(crate) async fn take_back(table: &TableInner, marker: &RunMarker) -> Result<bool> {
    let stored: Option<RunMarker> = table.get_json_opt(&marker.path()).await?;
    match stored {
        Some(stored) => claim(table, marker, stored.heartbeat_ms, Claimant::Writer).await,
        None => Ok(false),
    }
}

/// Remove the marker of a finished write.
pub(crate) async fn clear(table: &TableInner, marker: &RunMarker) {
    let relative = marker.path();
    let path = table.location.path(&relative);
    match table.location.store().delete(&path).await {
        // The run's directory and the date's (`beat_strict` retries).
        Ok(()) => table.location.remove_empty_parents(&relative, 2),
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => {
            tracing::warn!(table = %table.name, date = %marker.date, error = %e, "could not delete the run's intent marker")
        }
    }
}

/// Back from a pause of `stalled_ms`, during which a vacuum may have taken
/// files: write the marker so it protects `files` again (strictly), then
/// make sure each is still there. A missing one fails the write
/// (`StagedFileLost`, naming the file's partition, `date_of(index)`: run
/// it again) rather than committing it.
pub(crate) async fn recheck(
    table: &TableInner,
    marker: &RunMarker,
    files: &[DataFile],
    date_of: impl Fn(usize) -> NaiveDate,
    stalled_ms: i64,
) -> Result<()> {
    beat_strict(table, marker).await?;
    match first_damaged(table, files).await? {
        None => Ok(()),
        Some(at) => Err(Error::StagedFileLost {
            table: table.name.clone(),
            date: date_of(at),
            path: files[at].path.clone(),
            stalled_min: stalled_ms / 60_000,
        }),
    }
}

/// The marker of a rewrite (compaction, dimension change): every staging
/// directory it fills is added before the first file is written there, and
/// the marker is refreshed while the rewrite runs and deleted at its end.
/// Shared by the rewrite's concurrent tasks.
pub(crate) struct Lease {
    table: Arc<TableInner>,
    held: tokio::sync::Mutex<Held>,
}

/// A lease's marker, and what its heartbeats found.
struct Held {
    marker: RunMarker,
    /// When the marker was last stored (a beat may fail).
    stored_ms: i64,
    /// Since the last [`Lease::confirm`], a beat failed or the marker went
    /// unstored for half the shortest retention: a vacuum may have taken
    /// files meanwhile.
    lapsed: bool,
    /// A vacuum holds the directories (see [`claim`]), found after a pause
    /// of this many minutes: the rewrite can no longer commit.
    taken: Option<i64>,
    /// When the directories were last claimed back, until the marker is
    /// stored again (see [`CLAIM_TO_STORE`]).
    claimed_ms: Option<i64>,
}

impl Lease {
    /// Announce a rewrite labelled `date` and `run_id`.
    pub(crate) async fn start(table: Arc<TableInner>, date: NaiveDate, run_id: &str) -> Arc<Self> {
        let now = table.options.clock.now_millis();
        let marker = RunMarker {
            date,
            run_id: run_id.to_string(),
            started_ms: now,
            heartbeat_ms: now,
            dir: None,
            dirs: vec![],
            rewrite: true,
            lease: Some(table.options.ids.next_id().to_string()),
            class: None,
        };
        let held = Held {
            marker,
            stored_ms: now,
            lapsed: false,
            taken: None,
            claimed_ms: None,
        };
        let lease = Self {
            table,
            held: tokio::sync::Mutex::new(held),
        };
        {
            let mut held = lease.held.lock().await;
            lease.beat(&mut held, now).await;
        }
        Arc::new(lease)
    }

    /// Write the marker; one that could not be written counts as a lapse
    /// (a vacuum may not have seen it).
    async fn beat(&self, held: &mut Held, now: i64) {
        match beat_strict(&self.table, &held.marker).await {
            Ok(()) => {
                held.stored_ms = now;
                self.stored_after_claim(held);
            }
            Err(e) => {
                held.lapsed = true;
                tracing::warn!(table = %self.table.name, date = %held.marker.date, error = %e, "could not write the rewrite's intent marker");
            }
        }
    }

    /// Before the heartbeat moves to `now`: after the marker went unstored
    /// for half the shortest retention, a lapse; take the directories back.
    async fn resume(&self, held: &mut Held, now: i64) {
        let stalled = now - held.stored_ms;
        if stalled >= MIN_RETENTION_MS / 2 {
            held.lapsed = true;
            self.claim_back(held, stalled).await;
        }
    }

    /// The marker was just stored: if the directories were claimed back
    /// longer than [`CLAIM_TO_STORE`] ago, a vacuum may have replaced the
    /// claim, and the rewrite can no longer commit.
    fn stored_after_claim(&self, held: &mut Held) {
        if let Some(at) = held.claimed_ms.take() {
            let late = self.table.options.clock.now_millis() - at;
            if late >= CLAIM_TO_STORE {
                held.taken = held.taken.or(Some(late / 60_000));
            }
        }
    }

    /// Take the directories back from any vacuum (see [`take_back`]).
    /// Lost, or not known to be held, while the rewrite had directories to
    /// lose, it can no longer commit.
    async fn claim_back(&self, held: &mut Held, stalled: i64) {
        // The first claim since the marker was last stored: a claim found
        // again (this rewrite's own) is as old as when it was made.
        let now = self.table.options.clock.now_millis();
        held.claimed_ms.get_or_insert(now);
        let back = take_back(&self.table, &held.marker).await.unwrap_or_else(|e| {
            tracing::warn!(table = %self.table.name, error = %e, "could not claim the rewrite's directories back");
            false
        });
        if !back && held.marker.staging_dirs().next().is_some() {
            held.taken = held.taken.or(Some(stalled / 60_000));
        }
    }

    /// Protect `dir` from now on (call before writing into it).
    pub(crate) async fn hold(&self, dir: &str) {
        let now = self.table.options.clock.now_millis();
        let mut held = self.held.lock().await;
        self.resume(&mut held, now).await;
        held.marker.dirs.push(dir.to_string());
        held.marker.heartbeat_ms = now;
        self.beat(&mut held, now).await;
    }

    /// Refresh the marker if its heartbeat is due.
    pub(crate) async fn beat_if_due(&self) {
        let now = self.table.options.clock.now_millis();
        let mut held = self.held.lock().await;
        if now - held.marker.heartbeat_ms >= self.table.options.heartbeat_interval_ms {
            self.resume(&mut held, now).await;
            held.marker.heartbeat_ms = now;
            self.beat(&mut held, now).await;
        }
    }

    /// Before the rewrite commits `files` (`files[i]` written for the
    /// date `date_of(i)`): after a lapse (a pause longer than half the
    /// shortest retention, now or at any refresh since the last confirm,
    /// or a failed beat), the directories must be claimed back and the
    /// marker protect the files again before they are checked (as a
    /// partition writer's are). Directories a vacuum holds, or a file it
    /// took, fail the rewrite, to be run again, instead of committing a
    /// missing file.
    pub(crate) async fn confirm(
        &self,
        files: &[DataFile],
        date_of: impl Fn(usize) -> NaiveDate,
    ) -> Result<()> {
        let now = self.table.options.clock.now_millis();
        let mut held = self.held.lock().await;
        let stalled = now - held.stored_ms;
        if held.lapsed || stalled >= MIN_RETENTION_MS / 2 {
            held.lapsed = true;
            self.claim_back(&mut held, stalled).await;
        }
        self.ensure_held(&held)?;
        if !held.lapsed {
            return Ok(());
        }
        held.marker.heartbeat_ms = now;
        recheck(&self.table, &held.marker, files, date_of, stalled).await?;
        held.stored_ms = now;
        self.stored_after_claim(&mut held);
        self.ensure_held(&held)?;
        held.lapsed = false;
        Ok(())
    }

    /// Fail once a vacuum holds the rewrite's directories.
    fn ensure_held(&self, held: &Held) -> Result<()> {
        match held.taken {
            Some(stalled_min) => Err(Error::StagedFilesTaken {
                table: self.table.name.clone(),
                what: format!("run {}", held.marker.run_id),
                stalled_min,
            }),
            None => Ok(()),
        }
    }

    /// The rewrite is over (committed or abandoned).
    pub(crate) async fn end(&self) {
        let held = self.held.lock().await;
        clear(&self.table, &held.marker).await;
    }
}

/// Every marker of the table (one listing).
pub(crate) async fn list(table: &TableInner) -> Result<Vec<ListedMarker>> {
    let listed = table.list_json::<RunMarker>(layout::RUNNING_DIR).await?;
    Ok(listed
        .into_iter()
        .map(|(path, modified_ms, marker)| ListedMarker {
            path,
            modified_ms,
            marker,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vacuum finds a claim's marker from the claim's path alone, for a
    /// writer's marker (named by a staging id, with dashes) and a lease's.
    #[test]
    fn a_claim_names_its_marker_and_heartbeat() {
        let writer = RunMarker {
            date: NaiveDate::from_ymd_opt(2026, 3, 15).unwrap(),
            run_id: "nightly-2026-03-15".into(),
            started_ms: 1,
            heartbeat_ms: 1_796_188_672_827,
            dir: Some("data/date=2026-03-15/01a23530-133a-77e1-9377-efef08fcc0f0".into()),
            dirs: vec![],
            rewrite: false,
            lease: None,
            class: None,
        };
        let lease = RunMarker {
            dir: None,
            lease: Some("01a23530-133a-77e1-9377-efeefacdb2a2".into()),
            rewrite: true,
            ..writer.clone()
        };
        for marker in [writer, lease] {
            let claim = marker.claim_path(42);
            assert_eq!(claimed_marker(&claim), Some((marker.path(), 42)), "{claim}");
        }
        assert_eq!(claimed_marker("_logbook/claims/x.txt"), None);
    }
}
