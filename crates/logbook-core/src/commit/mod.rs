//! The commit pipeline: conflict checks, idempotency and retry live here.
//!
//! A commit is built on the current head: it writes the manifests of the
//! months it touches, the spans above them (`spans.rs`) and a new root
//! under a fresh attempt id (`next.rs`),
//! then creates log entry `head + 1` with put-if-absent. If another
//! writer's entry is there, the entries since our base are read; if one
//! touched our dates we fail with `PartitionConflict`, otherwise we
//! delete what the lost attempt wrote, build on the new head and try
//! again. What a commit changes is a typed
//! [`Change`] (`change.rs`).

mod change;
mod next;
mod spans;

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::NaiveDate;

pub use change::ExpectedPartition;
pub(crate) use change::{Change, DimensionChange, PartitionChange, PendingCommit, TxnStart};

use crate::error::{Error, Result};
use crate::format::{layout, LogEntry, Operation, PartitionEntry};
use crate::handle::TableInner;
use crate::log::Created;
use crate::snapshot::Snapshot;
use crate::staged_files::{delete_files, first_damaged};

/// What a successful commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The version holding this run's data.
    pub version: u64,
    /// True if this run id had already committed these dates, so nothing new
    /// was committed and `version` is the earlier commit.
    pub already_committed: bool,
    /// Set when the write went into this named stage instead: nothing is
    /// visible until the stage is published, and `version` is the table
    /// version the write started from.
    pub staged: Option<String>,
    /// Compaction only: dates whose rewrite was dropped because the date
    /// changed after the compaction read it.
    pub dropped: Vec<NaiveDate>,
}

/// How a commit attempt failed, with whether staged files may be deleted.
#[derive(Debug)]
pub(crate) struct CommitFailure {
    pub error: Error,
    /// Some put had an unknown outcome: the commit may still have landed,
    /// so nothing it references may be deleted.
    pub ambiguous: bool,
}

/// Place `pending` on the log of `table`.
pub(crate) async fn commit(
    table: &Arc<TableInner>,
    pending: PendingCommit,
) -> std::result::Result<CommitInfo, CommitFailure> {
    let mut ambiguous = false;
    place(table, pending, &mut ambiguous)
        .await
        .map_err(|error| CommitFailure { error, ambiguous })
}

/// The pipeline. `ambiguous` becomes true once a put of ours may have
/// landed unseen: from then on a failure leaves the outcome unknown.
async fn place(
    table: &Arc<TableInner>,
    mut pending: PendingCommit,
    ambiguous: &mut bool,
) -> Result<CommitInfo> {
    table.ensure_put_if_absent().await?;
    let commit_id = table.options.ids.next_id();
    let dates: BTreeSet<NaiveDate> = pending.change.partitions().iter().map(|c| c.date).collect();
    let mut checked = pending.base_version;
    // Rewrites dropped by any attempt: a later attempt no longer holds them.
    let mut dropped = Vec::new();
    let mut head = table.log.latest_from(pending.base_version).await?;
    // Attempts at the version not yet taken: each root and the manifests
    // it wrote. Once the version is taken, those the log does not name are
    // deleted (after no answer, any of them may be what landed).
    let mut tries: Vec<(String, Vec<String>)> = Vec::new();

    for _attempt in 0..table.options.max_commit_attempts {
        // 0. Never build on an undecided multi-table publish part: wait for
        // its decision, or abort it (`publish/settle.rs`). The head's
        // snapshot is usually remembered, so a commit pays nothing here.
        // A publish part goes on a rival attempt's undecided part of the
        // same number without waiting: one decision settles both, and the
        // part records the rival's (`next.rs`), so two publishers crossing
        // on two tables never wait for each other.
        let mut head_snap = table.snapshot(head).await?;
        let rival = |part: &crate::format::TxnPart| {
            pending
                .txn
                .as_ref()
                .is_some_and(|t| t.seq == part.seq && t.id != part.id)
        };
        if head_snap.undecided_part().is_some_and(|p| !rival(p)) {
            let own_stage = pending.txn.as_ref().map(|t| t.stage.as_str());
            crate::publish::settle(table, head, own_stage).await?;
            head_snap = table.snapshot(head).await?;
        }
        // 1. Everything committed since our base must not touch our dates.
        for v in checked + 1..=head {
            let entry = table.read_entry(v).await?;
            if let Some(done) = check_conflict(table, &pending, &dates, &entry) {
                return done;
            }
        }
        checked = head;

        // 2. Build the new snapshot on the head.
        if let Some(version) = already_committed_by_run(table, &head_snap, &pending, &dates).await?
        {
            crate::mirror::after_retry(table, &head_snap).await;
            return Ok(CommitInfo {
                version,
                already_committed: true,
                staged: None,
                dropped: vec![],
            });
        }
        check_expected(table, &head_snap, &pending).await?;
        if let Change::Compact(rewrites) = &mut pending.change {
            dropped.extend(drop_stale_rewrites(&head_snap, rewrites).await?);
            if rewrites.is_empty() {
                // Nothing left to rewrite: nothing to commit.
                crate::mirror::after_retry(table, &head_snap).await;
                dropped.sort();
                return Ok(CommitInfo {
                    version: head,
                    already_committed: false,
                    staged: None,
                    dropped,
                });
            }
        }
        let next = next::Next {
            version: head + 1,
            commit_id,
            attempt_id: table.options.ids.next_id(),
        };
        let next::Built {
            entry,
            root,
            written,
        } = next::build(table, &head_snap, &pending, &next).await?;
        let bytes = table.encode(&entry)?;

        // 3. Create log entry `head + 1` with put-if-absent. An entry found
        // there (reported existing, or read back after no answer) is ours
        // only if it carries our commit id; it may still be an earlier
        // attempt's that landed late, naming that attempt's manifests.
        tries.push((attempt_root(&entry).to_string(), written));
        let found_manifest = std::sync::Mutex::new(None);
        let ours = |found: &[u8]| {
            let found: LogEntry = table.decode(&layout::log_entry(next.version), found)?;
            let is_ours = found.commit_id == commit_id;
            if is_ours {
                let root = attempt_root(&found).to_string();
                *found_manifest.lock().unwrap_or_else(|e| e.into_inner()) = Some(root);
            }
            Ok(is_ours)
        };
        match table.log.create(next.version, bytes, ours).await {
            Ok(Created::Ours) => {}
            Ok(Created::Theirs(_)) => {
                // Another commit holds the version, so no log entry will
                // ever name what our attempts wrote (best effort: vacuum's
                // full listing finds what stays).
                for (_, written) in tries.drain(..) {
                    delete_files(table, &written).await;
                }
                head = table.log.latest_from(next.version).await?;
                continue;
            }
            Ok(Created::Absent(_)) => {
                // Did not land (yet): try the same version again; a failure
                // from here on leaves the outcome unknown.
                *ambiguous = true;
                continue;
            }
            Err(e) => {
                *ambiguous = true;
                return Err(e);
            }
        }
        table.saw(next.version);
        table.write_hint(next.version).await;
        let named = found_manifest
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(|| attempt_root(&entry).to_string());
        for (root, written) in tries.iter().filter(|(root, _)| *root != named) {
            tracing::debug!(table = %table.name, %root, "deleting the manifests of an attempt the log does not name");
            delete_files(table, written).await;
        }
        let created = match named == attempt_root(&entry) {
            true => Some(Snapshot::new(table.clone(), entry, root)),
            false => match table.snapshot(next.version).await {
                Ok(created) => Some(created),
                Err(e) => {
                    tracing::warn!(
                        table = %table.name, version = next.version, manifest = %named, error = %e,
                        "commit landed through an earlier attempt; reading the landed version back failed"
                    );
                    None
                }
            },
        };
        // A publish part is mirrored once decided (the publisher catches
        // the mirror up), never as the no-op it reads as now.
        if let (Some(created), None) = (created, &pending.txn) {
            crate::mirror::after_commit(table, Some(&head_snap), &created).await;
        }
        dropped.sort();
        return Ok(CommitInfo {
            version: next.version,
            already_committed: false,
            staged: None,
            dropped,
        });
    }
    Err(Error::CommitContention {
        table: table.name.clone(),
        attempts: table.options.max_commit_attempts,
    })
}

/// The root an attempt wrote: its entry's, or for a publish part the one
/// the part commits (the entry's own is the head's until decided).
fn attempt_root(entry: &LogEntry) -> &str {
    entry.txn.as_ref().map_or(&entry.manifest, |t| &t.manifest)
}

/// Does `entry` (committed after our base) decide this commit? Returns
/// `Some(Ok)` if it is our own run's earlier commit, `Some(Err)` on conflict.
fn check_conflict(
    table: &TableInner,
    pending: &PendingCommit,
    dates: &BTreeSet<NaiveDate>,
    entry: &LogEntry,
) -> Option<Result<CommitInfo>> {
    let ours = pending.change.operation();
    if ours == Operation::ApplyDimension && entry.operation == Operation::ApplyDimension {
        // Both rewrite the whole dimension: the caller recomputes on the new head.
        return Some(Err(Error::DimensionConflict {
            table: table.name.clone(),
            base_version: pending.base_version,
            winning_version: entry.version,
        }));
    }
    if entry.operation.data_unchanged() || ours == Operation::Compact {
        // Rewrites commute with everything: a compaction's own staleness is
        // checked file by file when it is built (see `rewrite_of`).
        return None;
    }
    let clash = entry.dates.iter().find(|d| dates.contains(d))?;
    if entry.run.as_ref().map(|r| r.run_id.as_str()) == Some(pending.run.run_id.as_str())
        && entry.dates.iter().collect::<BTreeSet<_>>() == dates.iter().collect()
    {
        return Some(Ok(CommitInfo {
            version: entry.version,
            already_committed: true,
            staged: None,
            dropped: vec![],
        }));
    }
    Some(Err(Error::PartitionConflict {
        table: table.name.clone(),
        date: *clash,
        base_version: pending.base_version,
        winning_version: entry.version,
    }))
}

/// Remove the rewrites whose date no longer holds the files they rewrite;
/// return their dates.
async fn drop_stale_rewrites(
    head: &Snapshot,
    rewrites: &mut Vec<PartitionChange>,
) -> Result<Vec<NaiveDate>> {
    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for change in std::mem::take(rewrites) {
        let now: Option<Vec<String>> = head
            .partition(change.date)
            .await?
            .map(|p| p.files.into_iter().map(|f| f.path).collect());
        if now.is_some() && now == change.rewrite_of {
            kept.push(change);
        } else {
            dropped.push(change.date);
        }
    }
    *rewrites = kept;
    Ok(dropped)
}

/// If our run id already wrote every date we write (now or in an earlier,
/// since-superseded version), the version it wrote at: a late retry of a run
/// must never overwrite what came after it.
///
/// A run id alone does not make a date done: when the date's current
/// contents are the run's own but are damaged (a file missing or of the
/// wrong size) or older than a column added since, re-running the same run
/// repairs the date by committing.
async fn already_committed_by_run(
    table: &TableInner,
    head: &Snapshot,
    pending: &PendingCommit,
    dates: &BTreeSet<NaiveDate>,
) -> Result<Option<u64>> {
    if dates.is_empty() {
        return Ok(None);
    }
    let mut version = None;
    for change in pending.change.partitions() {
        let Some(p) = head.partition(change.date).await? else {
            return Ok(None);
        };
        let Some(v) = p.version_written_by(&pending.run.run_id) else {
            return Ok(None);
        };
        if v == p.version && needs_repair(table, head, &p, change.schema_version).await? {
            return Ok(None);
        }
        version = version.max(Some(v));
    }
    Ok(version)
}

/// Is partition `p` (the current contents of its date) damaged, or missing
/// columns that a write at `schema_version` would fill?
async fn needs_repair(
    table: &TableInner,
    head: &Snapshot,
    p: &PartitionEntry,
    schema_version: u32,
) -> Result<bool> {
    let stale_schema = schema_version > p.schema_version
        && head
            .schema()
            .columns
            .iter()
            .any(|c| c.added_in > p.schema_version && c.added_in <= schema_version);
    if stale_schema {
        return Ok(true);
    }
    Ok(first_damaged(table, &p.files).await?.is_some())
}

/// Refuse a change whose partition is not what its writer expected
/// (see [`ExpectedPartition`]).
async fn check_expected(
    table: &TableInner,
    head: &Snapshot,
    pending: &PendingCommit,
) -> Result<()> {
    for change in pending.change.partitions() {
        let Some(expected) = change.expected else {
            continue;
        };
        let now = head.partition(change.date).await?.map(|p| p.version);
        let ok = match expected {
            ExpectedPartition::Missing => now.is_none(),
            ExpectedPartition::Version(v) => now == Some(v),
        };
        if !ok {
            return Err(Error::PartitionConflict {
                table: table.name.clone(),
                date: change.date,
                base_version: pending.base_version,
                winning_version: now.unwrap_or(head.version()),
            });
        }
    }
    Ok(())
}
