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
/// refreshes its marker well within it (see `PartitionWriter::heartbeat`),
/// so vacuum never takes the files of a write that is alive.
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
pub(crate) async fn beat(table: &TableInner, marker: &RunMarker) {
    if let Err(e) = beat_strict(table, marker).await {
        tracing::warn!(table = %table.name, date = %marker.date, error = %e, "could not write the run's intent marker");
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
/// already. Vacuum deletes claims older than the retention.
pub(crate) async fn claim(
    table: &TableInner,
    marker: &RunMarker,
    heartbeat_ms: i64,
    by: Claimant,
) -> Result<bool> {
    let path = marker.claim_path(heartbeat_ms);
    if table.create_json(&path, &Claim { by }).await? {
        return Ok(true);
    }
    let found: Option<Claim> = table.get_json_opt(&path).await?;
    Ok(found.is_some_and(|c| c.by == by))
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
    marker: tokio::sync::Mutex<RunMarker>,
    /// The heartbeat lapsed for half the shortest retention since the last
    /// [`Lease::confirm`]: a vacuum may have taken files meanwhile.
    lapsed: std::sync::atomic::AtomicBool,
    /// A vacuum claimed the rewrite's directories during a lapse (see
    /// [`claim`]): the rewrite can no longer commit.
    taken: std::sync::atomic::AtomicBool,
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
        };
        beat(&table, &marker).await;
        Arc::new(Self {
            table,
            marker: tokio::sync::Mutex::new(marker),
            lapsed: Default::default(),
            taken: Default::default(),
        })
    }

    /// Write the marker; one that could not be written counts as a lapse
    /// (a vacuum may not have seen it).
    async fn beat(&self, marker: &RunMarker) {
        if let Err(e) = beat_strict(&self.table, marker).await {
            self.lapsed.store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::warn!(table = %self.table.name, date = %marker.date, error = %e, "could not write the rewrite's intent marker");
        }
    }

    /// Move the heartbeat to `now`, noting a lapse, and after one taking
    /// the directories back from any vacuum.
    async fn refresh(&self, marker: &mut RunMarker, now: i64) {
        if now - marker.heartbeat_ms >= MIN_RETENTION_MS / 2 {
            self.lapsed.store(true, std::sync::atomic::Ordering::SeqCst);
            self.take_back(marker).await;
        }
        marker.heartbeat_ms = now;
    }

    /// [`take_back`]; a claim lost, or not known to be held, is kept in
    /// `taken`.
    async fn take_back(&self, marker: &RunMarker) {
        let held = take_back(&self.table, marker).await.unwrap_or_else(|e| {
            tracing::warn!(table = %self.table.name, error = %e, "could not claim the rewrite's directories back");
            false
        });
        if !held {
            self.taken.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Protect `dir` from now on (call before writing into it).
    pub(crate) async fn hold(&self, dir: &str) {
        let mut marker = self.marker.lock().await;
        marker.dirs.push(dir.to_string());
        self.refresh(&mut marker, self.table.options.clock.now_millis())
            .await;
        self.beat(&marker).await;
    }

    /// Refresh the marker if its heartbeat is due.
    pub(crate) async fn beat_if_due(&self) {
        let now = self.table.options.clock.now_millis();
        let mut marker = self.marker.lock().await;
        if now - marker.heartbeat_ms >= self.table.options.heartbeat_interval_ms {
            self.refresh(&mut marker, now).await;
            self.beat(&marker).await;
        }
    }

    /// Before the rewrite commits `files` (`files[i]` written for the
    /// date `date_of(i)`): after a pause longer than half the shortest
    /// retention (now, or at any refresh since the last confirm), the
    /// marker must protect the files again before they are checked (as a
    /// partition writer's are), and a file a vacuum took in the meantime
    /// fails the rewrite, to be run again, instead of committing a missing
    /// file.
    pub(crate) async fn confirm(
        &self,
        files: &[DataFile],
        date_of: impl Fn(usize) -> NaiveDate,
    ) -> Result<()> {
        use std::sync::atomic::Ordering;
        let now = self.table.options.clock.now_millis();
        let mut marker = self.marker.lock().await;
        let last = marker.heartbeat_ms;
        let lapsed = self.lapsed.swap(false, Ordering::SeqCst);
        if !lapsed && now - last < MIN_RETENTION_MS / 2 {
            return Ok(());
        }
        if now - last >= MIN_RETENTION_MS / 2 {
            self.take_back(&marker).await;
        }
        if self.taken.load(Ordering::SeqCst) {
            self.lapsed.store(true, Ordering::SeqCst);
            return Err(Error::StagedFilesTaken {
                table: self.table.name.clone(),
                what: format!("run {}", marker.run_id),
                stalled_min: (now - last) / 60_000,
            });
        }
        marker.heartbeat_ms = now;
        let checked = recheck(&self.table, &marker, files, date_of, now - last).await;
        if checked.is_err() {
            self.lapsed.store(true, Ordering::SeqCst);
        }
        checked
    }

    /// The rewrite is over (committed or abandoned).
    pub(crate) async fn end(&self) {
        let marker = self.marker.lock().await;
        clear(&self.table, &marker).await;
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
