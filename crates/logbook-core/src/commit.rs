//! The commit pipeline: conflict checks, idempotency and retry live here.
//!
//! A commit is built on the current head: it rewrites the manifests of the
//! months it touches, then tries to create log entry `head + 1`. If another
//! writer got there first, the winner's entry is read; if it touched one of
//! our dates after our base snapshot we fail with `PartitionConflict`,
//! otherwise we rebuild on the new head and try again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::NaiveDate;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::format::{
    layout, month_key, DataFile, DateRange, DimensionFiles, LogEntry, MonthManifest, MonthRef,
    Operation, PartitionEntry, PropertiesChange, RootManifest, RunInfo, RunRef, FORMAT_VERSION,
    RUN_RETRY_WINDOW,
};
use crate::log::PutOutcome;
use crate::schema::SchemaChange;
use crate::snapshot::Snapshot;
use crate::staging::first_damaged;
use crate::table::TableInner;

/// New contents of one partition.
#[derive(Debug, Clone)]
pub(crate) struct PartitionChange {
    pub date: NaiveDate,
    pub files: Vec<DataFile>,
    pub rows: u64,
    /// The run that computed this partition, when it is not the commit's
    /// own run (a published stage keeps each date's lineage).
    pub run: Option<RunInfo>,
    /// Set for compaction: the exact files this change rewrites. The change
    /// is dropped if the head's files for the date differ (the date was
    /// replaced or compacted since), and it keeps the partition's version and
    /// run, because the rows are unchanged.
    pub rewrite_of: Option<Vec<String>>,
    /// The schema version the rows were written under.
    pub schema_version: u32,
    /// What the partition must be at the head when this change commits
    /// (a backfill's guard); anything else is a `PartitionConflict`.
    pub expected: Option<ExpectedPartition>,
}

/// What a write expects the partition it replaces to be when it commits.
///
/// A backfill looks at a date, decides to recompute it and launches the
/// job; a production run may commit the date in between. The backfill
/// passes what it saw, and the commit refuses atomically (inside the commit
/// pipeline, against the head it builds on) if the date moved, so the
/// production run's rows are never overwritten.
///
/// ```
/// use logbook_core::ExpectedPartition;
/// assert_eq!("missing".parse(), Ok(ExpectedPartition::Missing));
/// assert_eq!("12".parse(), Ok(ExpectedPartition::Version(12)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedPartition {
    /// The date has never been committed.
    Missing,
    /// The date was last replaced by this version.
    Version(u64),
}

impl std::str::FromStr for ExpectedPartition {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "missing" => Ok(ExpectedPartition::Missing),
            v => v.parse().map(ExpectedPartition::Version).map_err(|_| {
                format!("expected partition {v:?}: give a version number or `missing`")
            }),
        }
    }
}

impl std::fmt::Display for ExpectedPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedPartition::Missing => f.write_str("missing"),
            ExpectedPartition::Version(v) => write!(f, "{v}"),
        }
    }
}

/// New contents of a whole dimension.
#[derive(Debug, Clone)]
pub(crate) struct DimensionChange {
    pub files: Vec<DataFile>,
    pub rows: u64,
    pub affected: Option<DateRange>,
}

/// A commit waiting to be placed on the log.
#[derive(Debug)]
pub(crate) struct PendingCommit {
    pub operation: Operation,
    /// The version the work was computed from.
    pub base_version: u64,
    pub run: RunInfo,
    pub changes: Vec<PartitionChange>,
    pub dimension: Option<DimensionChange>,
    /// Applied to the head's properties when the commit is built.
    pub properties: Option<PropertiesChange>,
    /// Expiry: the oldest version time travel may read from now on (the
    /// head's value is kept when it is larger).
    pub retain_from: Option<u64>,
    /// Vacuum: how many files it deleted, recorded in the entry.
    pub files_removed: Option<u64>,
    /// A schema change, applied to the head's schema when the commit is built.
    pub schema_change: Option<SchemaChange>,
}

impl PendingCommit {
    pub fn partitions(
        operation: Operation,
        base_version: u64,
        run: RunInfo,
        changes: Vec<PartitionChange>,
    ) -> Self {
        Self {
            operation,
            base_version,
            run,
            changes,
            dimension: None,
            properties: None,
            retain_from: None,
            files_removed: None,
            schema_change: None,
        }
    }

    /// A commit that changes no partition (expire, vacuum): the snapshot is
    /// the head's, recorded as `operation`.
    pub fn maintenance(operation: Operation, base_version: u64, run: RunInfo) -> Self {
        Self::partitions(operation, base_version, run, vec![])
    }

    pub fn properties(base_version: u64, run: RunInfo, change: PropertiesChange) -> Self {
        Self {
            operation: Operation::SetProperties,
            base_version,
            run,
            changes: vec![],
            dimension: None,
            properties: Some(change),
            retain_from: None,
            files_removed: None,
            schema_change: None,
        }
    }

    pub fn dimension(base_version: u64, run: RunInfo, change: DimensionChange) -> Self {
        Self {
            operation: Operation::ApplyDimension,
            base_version,
            run,
            changes: vec![],
            dimension: Some(change),
            properties: None,
            retain_from: None,
            files_removed: None,
            schema_change: None,
        }
    }
}

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
    mut pending: PendingCommit,
) -> std::result::Result<CommitInfo, CommitFailure> {
    let mut ambiguous = false;
    let fail = |error: Error, ambiguous: bool| CommitFailure { error, ambiguous };
    table
        .ensure_put_if_absent()
        .await
        .map_err(|e| fail(e, false))?;
    let commit_id = table.options.ids.next_id();
    let dates: BTreeSet<NaiveDate> = pending.changes.iter().map(|c| c.date).collect();
    let mut checked = pending.base_version;
    // Rewrites dropped by any attempt: a later attempt no longer holds them.
    let mut dropped = Vec::new();
    let mut head = table
        .log
        .latest_from(pending.base_version)
        .await
        .map_err(|e| fail(e, false))?;

    for _attempt in 0..table.options.max_commit_attempts {
        // 1. Everything committed since our base must not touch our dates.
        for v in checked + 1..=head {
            let entry = table.read_entry(v).await.map_err(|e| fail(e, ambiguous))?;
            if let Some(done) = check_conflict(table, &pending, &dates, &entry) {
                return done.map_err(|e| fail(e, ambiguous));
            }
        }
        checked = head;

        // 2. Build the new snapshot on the head.
        let head_snap = table.snapshot(head).await.map_err(|e| fail(e, ambiguous))?;
        if let Some(version) = already_committed_by_run(table, &head_snap, &pending, &dates)
            .await
            .map_err(|e| fail(e, ambiguous))?
        {
            crate::mirror::after_retry(table, &head_snap).await;
            return Ok(CommitInfo {
                version,
                already_committed: true,
                staged: None,
                dropped: vec![],
            });
        }
        check_expected(table, &head_snap, &pending)
            .await
            .map_err(|e| fail(e, ambiguous))?;
        dropped.extend(
            drop_stale_rewrites(&head_snap, &mut pending)
                .await
                .map_err(|e| fail(e, ambiguous))?,
        );
        if pending.operation == Operation::Compact && pending.changes.is_empty() {
            crate::mirror::after_retry(table, &head_snap).await;
            dropped.sort();
            return Ok(CommitInfo {
                version: head,
                already_committed: false,
                staged: None,
                dropped,
            });
        }
        let version = head + 1;
        let (entry, root) = write_manifests(table, &head_snap, &pending, version, commit_id)
            .await
            .map_err(|e| fail(e, ambiguous))?;
        let bytes = table.encode(&entry).map_err(|e| fail(e, ambiguous))?;

        // 3. Create log entry `head + 1` with put-if-absent.
        let lost = match table.log.try_create(version, bytes).await {
            PutOutcome::Created => false,
            PutOutcome::AlreadyExists => true,
            PutOutcome::Ambiguous(e) => {
                ambiguous = true;
                tracing::warn!(table = %table.name, version, error = %e, "commit outcome unknown; reading it back");
                match table.log.read(version).await {
                    Ok(Some(_)) => true,  // decided below by commit id
                    Ok(None) => continue, // did not land: retry the same version
                    Err(_) => return Err(fail(e, true)),
                }
            }
        };
        if lost {
            // `AlreadyExists` may be our own put: the store retried a create
            // whose first try landed, and the retry saw it. Until the
            // winner is read and is not ours, the outcome is unknown.
            let winner = table.read_entry(version).await.map_err(|e| fail(e, true))?;
            if winner.commit_id != commit_id {
                head = table
                    .log
                    .latest_from(version)
                    .await
                    .map_err(|e| fail(e, ambiguous))?;
                continue;
            }
        }
        table.saw(version);
        table.write_hint(version).await;
        let next = Snapshot::new(table.clone(), entry, root);
        crate::mirror::after_commit(table, Some(&head_snap), &next).await;
        dropped.sort();
        return Ok(CommitInfo {
            version,
            already_committed: false,
            staged: None,
            dropped,
        });
    }
    Err(fail(
        Error::CommitContention {
            table: table.name.clone(),
            attempts: table.options.max_commit_attempts,
        },
        ambiguous,
    ))
}

/// Does `entry` (committed after our base) decide this commit? Returns
/// `Some(Ok)` if it is our own run's earlier commit, `Some(Err)` on conflict.
fn check_conflict(
    table: &TableInner,
    pending: &PendingCommit,
    dates: &BTreeSet<NaiveDate>,
    entry: &LogEntry,
) -> Option<Result<CommitInfo>> {
    if pending.dimension.is_some() && entry.operation == Operation::ApplyDimension {
        // Both rewrite the whole dimension: the caller recomputes on the new head.
        return Some(Err(Error::DimensionConflict {
            table: table.name.clone(),
            base_version: pending.base_version,
            winning_version: entry.version,
        }));
    }
    if entry.operation.data_unchanged() || pending.operation == Operation::Compact {
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

/// Remove the rewrites whose date no longer holds the files they rewrite.
async fn drop_stale_rewrites(
    head: &Snapshot,
    pending: &mut PendingCommit,
) -> Result<Vec<NaiveDate>> {
    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for change in std::mem::take(&mut pending.changes) {
        let Some(expected) = &change.rewrite_of else {
            kept.push(change);
            continue;
        };
        let now: Option<Vec<String>> = head
            .partition(change.date)
            .await?
            .map(|p| p.files.into_iter().map(|f| f.path).collect());
        if now.as_ref() == Some(expected) {
            kept.push(change);
        } else {
            dropped.push(change.date);
        }
    }
    pending.changes = kept;
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
    for change in &pending.changes {
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
    for change in &pending.changes {
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

/// Write the month manifests we change and a new root; return the log
/// entry to create and the root it points to.
async fn write_manifests(
    table: &Arc<TableInner>,
    head: &Snapshot,
    pending: &PendingCommit,
    version: u64,
    commit_id: Uuid,
) -> Result<(LogEntry, RootManifest)> {
    // Each attempt writes under a fresh id, so an attempt whose put had an
    // unknown outcome never has its manifests overwritten by a retry.
    let attempt_id = table.options.ids.next_id();
    let mut by_month: BTreeMap<String, Vec<&PartitionChange>> = BTreeMap::new();
    for c in &pending.changes {
        by_month.entry(month_key(c.date)).or_default().push(c);
    }
    let mut months: BTreeMap<String, MonthRef> = head
        .root()
        .months
        .iter()
        .map(|m| (m.month.clone(), m.clone()))
        .collect();
    let mut files_removed = 0u64;
    let mut writes = Vec::new();
    for (month, changes) in by_month {
        let mut partitions: BTreeMap<NaiveDate, PartitionEntry> = match head.month(&month).await? {
            Some(m) => m.partitions.iter().map(|p| (p.date, p.clone())).collect(),
            None => BTreeMap::new(),
        };
        for c in changes {
            let old = partitions.remove(&c.date);
            if let (Some(_), Some(mut old)) = (&c.rewrite_of, old.clone()) {
                // Same rows in new files: the partition keeps its version and run.
                files_removed += old.files.len() as u64;
                old.files = c.files.clone();
                partitions.insert(c.date, old);
                continue;
            }
            let mut earlier_runs = Vec::new();
            if let Some(old) = old {
                files_removed += old.files.len() as u64;
                earlier_runs = old.earlier_runs;
                if let Some(run) = old.run {
                    earlier_runs.push(RunRef {
                        run_id: run.run_id,
                        version: old.version,
                    });
                }
                let excess = earlier_runs.len().saturating_sub(RUN_RETRY_WINDOW);
                earlier_runs.drain(..excess);
            }
            partitions.insert(
                c.date,
                PartitionEntry {
                    date: c.date,
                    version,
                    commit_id,
                    rows: c.rows,
                    schema_version: c.schema_version,
                    files: c.files.clone(),
                    run: Some(c.run.clone().unwrap_or_else(|| pending.run.clone())),
                    earlier_runs,
                },
            );
        }
        let manifest = MonthManifest {
            month: month.clone(),
            partitions: partitions.into_values().collect(),
        };
        let path = layout::month_manifest(attempt_id, &month);
        months.insert(
            month.clone(),
            MonthRef {
                month,
                path: path.clone(),
                partitions: manifest.partitions.len() as u32,
                rows: manifest.partitions.iter().map(|p| p.rows).sum(),
                files: manifest
                    .partitions
                    .iter()
                    .map(|p| p.files.len() as u64)
                    .sum(),
            },
        );
        writes.push((path, manifest));
    }
    futures::future::try_join_all(writes.iter().map(|(path, m)| table.put_json(path, m))).await?;
    if head.properties().mirror.is_some() {
        // The commit's mirror entry reads these months right after.
        for (path, m) in writes {
            table.cache_month(path, m);
        }
    }
    let dimension = match &pending.dimension {
        Some(change) => {
            files_removed += head
                .root()
                .dimension
                .as_ref()
                .map_or(0, |d| d.files.len() as u64);
            Some(DimensionFiles {
                version,
                rows: change.rows,
                files: change.files.clone(),
            })
        }
        None => head.root().dimension.clone(),
    };
    let schema = match &pending.schema_change {
        Some(change) => head.schema().evolve(&table.name, change)?,
        None => head.schema().clone(),
    };
    let root = RootManifest {
        format: FORMAT_VERSION,
        schema,
        months: months.into_values().collect(),
        dimension,
        properties: match &pending.properties {
            Some(change) => change.apply(&head.root().properties, version),
            None => head.root().properties.clone(),
        },
        retained_from: head
            .root()
            .retained_from
            .max(pending.retain_from.unwrap_or(0)),
    };
    let root_path = layout::root_manifest(attempt_id);
    table.put_json(&root_path, &root).await?;
    let entry = LogEntry {
        format: FORMAT_VERSION,
        version,
        commit_id,
        timestamp_ms: table
            .options
            .clock
            .now_millis()
            .max(head.timestamp_ms() + 1),
        operation: pending.operation,
        manifest: root_path,
        dates: pending.changes.iter().map(|c| c.date).collect(),
        rows_added: pending
            .changes
            .iter()
            .filter(|c| c.rewrite_of.is_none())
            .map(|c| c.rows)
            .sum::<u64>()
            + pending.dimension.as_ref().map_or(0, |d| d.rows),
        files_added: pending
            .changes
            .iter()
            .map(|c| c.files.len() as u64)
            .sum::<u64>()
            + pending
                .dimension
                .as_ref()
                .map_or(0, |d| d.files.len() as u64),
        files_removed: pending.files_removed.unwrap_or(files_removed),
        run: Some(pending.run.clone()),
        affected: pending.dimension.as_ref().and_then(|d| d.affected),
        change: pending.schema_change.as_ref().map(|c| c.to_string()),
    };
    Ok((entry, root))
}
