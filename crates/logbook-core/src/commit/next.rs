//! Building the next version on the head: the month manifests a commit
//! changes, the index above them (`spans.rs`), the new root, and the log
//! entry pointing at it. Every manifest is put at once (none is reachable
//! before the entry exists). Nothing here decides anything; the pipeline
//! (`mod.rs`) creates the entry.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use chrono::NaiveDate;
use uuid::Uuid;

use futures::TryStreamExt;

use super::change::{Change, PartitionChange, PendingCommit};
use super::spans::{self, Index};
use crate::change_index::ChangeIndex;
use crate::error::Result;
use crate::format::{
    layout, month_key, DateRange, DimensionFiles, LogEntry, MonthManifest, MonthRef, Operation,
    PartitionEntry, RootManifest, RunRef, StackedOn, TxnPart, TxnState, ENTRY_FORMAT_STACKED,
    ENTRY_FORMAT_TXN, FORMAT_SPANS, RUN_RETRY_WINDOW,
};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;

/// The next version's identity: its number, the commit's id (recorded in
/// every partition it writes) and this attempt's id (naming its manifests).
pub(super) struct Next {
    pub version: u64,
    pub commit_id: Uuid,
    pub attempt_id: Uuid,
}

/// What [`build`] made: the log entry to create, the root it points to,
/// and the manifests it wrote (what a lost attempt deletes).
pub(super) struct Built {
    pub entry: LogEntry,
    pub root: RootManifest,
    pub written: Vec<String>,
}

/// Write the manifests of the next version.
pub(super) async fn build(
    table: &Arc<TableInner>,
    head: &Snapshot,
    pending: &PendingCommit,
    next: &Next,
) -> Result<Built> {
    let format = format(head, &pending.change);
    // The commit's mirror entry reads the new manifests right after.
    let cache = !head.properties().mirrors().is_empty();
    let (changed, replaced, mut writes) = months(table, head, pending, next, cache).await?;
    let index = spans::index(table, head, format, changed, next.attempt_id, cache).await?;
    writes.extend(index.writes.iter().cloned());
    let mut root = root(table, head, &pending.change, format, index, next.version)?;
    root.code_version = code_version(head, pending, format).await?;
    if format >= FORMAT_SPANS && head.root().format < FORMAT_SPANS {
        if let Some(dimension) = root.dimension.as_mut() {
            dimension.changes = changes_in_log(table, head).await?;
        }
    }
    let root_path = layout::root_manifest(next.attempt_id);
    writes.push((root_path.clone(), table.encode(&root)?));
    let written = writes.iter().map(|(path, _)| path.clone()).collect();
    futures::future::try_join_all(
        writes
            .into_iter()
            .map(|(path, bytes)| table.put(path, bytes)),
    )
    .await?;
    let entry = entry(table, head, pending, next, format, root_path, replaced);
    Ok(Built {
        entry,
        root,
        written,
    })
}

/// The format of the next version: the head's, or the one a properties
/// change moves the table up to (never down).
fn format(head: &Snapshot, change: &Change) -> u32 {
    let at_head = head.root().format;
    match change {
        Change::Properties(p) => p.format.map_or(at_head, |f| f.max(at_head)),
        _ => at_head,
    }
}

/// What the next root (format 2) records as the newest code version: the
/// largest this commit's new partitions record, else the head's.
async fn code_version(
    head: &Snapshot,
    pending: &PendingCommit,
    format: u32,
) -> Result<Option<String>> {
    if format < FORMAT_SPANS {
        return Ok(None);
    }
    let written = pending
        .change
        .partitions()
        .iter()
        .filter(|c| c.rewrite_of.is_none())
        .filter_map(|c| c.run.as_ref().unwrap_or(&pending.run).code_version.clone())
        .max();
    match written {
        Some(code) => Ok(Some(code)),
        None => head.current_code().await,
    }
}

/// A dimension's change index after the commit of `version` changed the
/// rows in `affected` (format 2; a head without one keeps none).
fn next_changes(
    head: &Snapshot,
    format: u32,
    affected: Option<DateRange>,
    version: u64,
) -> Option<ChangeIndex> {
    if format < FORMAT_SPANS {
        return None;
    }
    let at_head = match &head.root().dimension {
        None => Some(ChangeIndex::default()),
        Some(d) => d.changes.clone(),
    };
    match affected {
        Some(range) => at_head?.with_change(version, range),
        None => at_head,
    }
}

/// The change index of a dimension moving up from format 1: every
/// dimension commit in its log, once.
async fn changes_in_log(table: &TableInner, head: &Snapshot) -> Result<Option<ChangeIndex>> {
    let entries: Vec<LogEntry> = table.entries(1..=head.version()).try_collect().await?;
    let mut index = Some(ChangeIndex::default());
    for e in entries {
        if let (Operation::ApplyDimension, Some(range)) = (e.operation, e.affected) {
            index = index.and_then(|i| i.with_change(e.version, range));
        }
    }
    Ok(index)
}

/// The month manifests the change touches (each under this attempt's id,
/// so a retry never overwrites an attempt whose outcome is unknown),
/// encoded. Returns their references by month, how many files the change
/// replaced, and the writes.
async fn months(
    table: &Arc<TableInner>,
    head: &Snapshot,
    pending: &PendingCommit,
    next: &Next,
    cache: bool,
) -> Result<(BTreeMap<String, MonthRef>, u64, Vec<(String, Bytes)>)> {
    let mut by_month: BTreeMap<String, Vec<&PartitionChange>> = BTreeMap::new();
    for c in pending.change.partitions() {
        by_month.entry(month_key(c.date)).or_default().push(c);
    }
    // The head's months, 32 at once: one round trip for a publish of 90
    // dates instead of one per month. Their spans first (a handle
    // caches them, so concurrent months of one span read it once).
    let spans: std::collections::BTreeSet<String> = by_month
        .values()
        .map(|c| crate::format::span_key(c[0].date))
        .collect();
    futures::future::try_join_all(spans.iter().map(|s| head.span(s))).await?;
    // (In chunks, not a buffered stream: its closure makes the commit's
    // future not `Send` for every lifetime, which spawned commits need.)
    let firsts: Vec<NaiveDate> = by_month.values().map(|c| c[0].date).collect();
    let mut at_head = Vec::with_capacity(firsts.len());
    for chunk in firsts.chunks(32) {
        at_head
            .extend(futures::future::try_join_all(chunk.iter().map(|d| head.month_of(*d))).await?);
    }
    let mut months = BTreeMap::new();
    let mut replaced = 0u64;
    let mut writes = Vec::new();
    for ((month, changes), at_head) in by_month.into_iter().zip(at_head) {
        let mut partitions: BTreeMap<NaiveDate, PartitionEntry> = match at_head {
            Some(m) => m.partitions.iter().map(|p| (p.date, p.clone())).collect(),
            None => BTreeMap::new(),
        };
        for c in changes {
            let old = partitions.remove(&c.date);
            replaced += old.as_ref().map_or(0, |p| p.files.len() as u64);
            partitions.insert(c.date, partition(pending, next, c, old));
        }
        let manifest = MonthManifest {
            month: month.clone(),
            partitions: partitions.into_values().collect(),
        };
        let path = layout::month_manifest(next.attempt_id, &month);
        months.insert(month.clone(), month_ref(month, &path, &manifest));
        writes.push((path.clone(), table.encode(&manifest)?));
        if cache {
            table.cache_month(path, manifest);
        }
    }
    Ok((months, replaced, writes))
}

/// Date `c.date`'s entry in the next version, `old` its entry at the head.
fn partition(
    pending: &PendingCommit,
    next: &Next,
    c: &PartitionChange,
    old: Option<PartitionEntry>,
) -> PartitionEntry {
    if let (Some(_), Some(mut old)) = (&c.rewrite_of, old.clone()) {
        // Same rows in new files: the partition keeps its version and run.
        old.files = c.files.clone();
        return old;
    }
    let mut earlier_runs = Vec::new();
    if let Some(old) = old {
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
    PartitionEntry {
        date: c.date,
        version: next.version,
        commit_id: next.commit_id,
        rows: c.rows,
        schema_version: c.schema_version,
        files: c.files.clone(),
        run: Some(c.run.clone().unwrap_or_else(|| pending.run.clone())),
        earlier_runs,
    }
}

fn month_ref(month: String, path: &str, manifest: &MonthManifest) -> MonthRef {
    MonthRef {
        month,
        path: path.to_string(),
        partitions: manifest.partitions.len() as u32,
        rows: manifest.partitions.iter().map(|p| p.rows).sum(),
        files: manifest
            .partitions
            .iter()
            .map(|p| p.files.len() as u64)
            .sum(),
    }
}

/// The next root in `format`: the head's, with `change` applied and
/// `index` in place.
fn root(
    table: &TableInner,
    head: &Snapshot,
    change: &Change,
    format: u32,
    index: Index,
    version: u64,
) -> Result<RootManifest> {
    let at_head = head.root();
    let mut root = RootManifest {
        format,
        schema: at_head.schema.clone(),
        months: index.months,
        spans: index.spans,
        dimension: at_head.dimension.clone(),
        properties: at_head.properties.clone(),
        retained_from: at_head.retained_from,
        code_version: None,
    };
    match change {
        Change::Dimension(d) => {
            root.dimension = Some(DimensionFiles {
                version,
                rows: d.rows,
                files: d.files.clone(),
                changes: next_changes(head, format, d.affected, version),
            })
        }
        Change::Schema(s) => root.schema = head.schema().evolve(&table.name, s)?,
        Change::Properties(p) => root.properties = p.apply(&at_head.properties, version),
        Change::Retain { from } => root.retained_from = root.retained_from.max(*from),
        Change::Replace(_) | Change::Publish(_) | Change::Compact(_) | Change::Vacuum { .. } => {}
    }
    Ok(root)
}

/// The log entry of the next version: what the commit did, in numbers.
fn entry(
    table: &TableInner,
    head: &Snapshot,
    pending: &PendingCommit,
    next: &Next,
    format: u32,
    manifest: String,
    replaced: u64,
) -> LogEntry {
    let partitions = pending.change.partitions();
    let mut rows_added: u64 = partitions
        .iter()
        .filter(|c| c.rewrite_of.is_none())
        .map(|c| c.rows)
        .sum();
    let mut files_added: u64 = partitions.iter().map(|c| c.files.len() as u64).sum();
    let mut files_removed = replaced;
    let (mut affected, mut schema_change) = (None, None);
    match &pending.change {
        Change::Dimension(d) => {
            rows_added += d.rows;
            files_added += d.files.len() as u64;
            files_removed += head
                .root()
                .dimension
                .as_ref()
                .map_or(0, |d| d.files.len() as u64);
            affected = d.affected;
        }
        Change::Vacuum { files_removed: n } => files_removed = *n,
        Change::Schema(s) => schema_change = Some(s.to_string()),
        _ => {}
    }
    let mut entry = LogEntry {
        format,
        version: next.version,
        commit_id: next.commit_id,
        // Never before the head's: entries are ordered in time too.
        timestamp_ms: table
            .options
            .clock
            .now_millis()
            .max(head.timestamp_ms() + 1),
        operation: pending.change.operation(),
        manifest,
        dates: partitions.iter().map(|c| c.date).collect(),
        rows_added,
        files_added,
        files_removed,
        run: Some(pending.run.clone()),
        affected,
        change: schema_change,
        // The head as read is resolved: a decided part there marks itself.
        publish: head.entry().publish,
        txn: None,
    };
    if let Some(txn) = &pending.txn {
        // A publish part: the entry's own fields are the head's state (a
        // commit changing nothing) until the warehouse decides it. On an
        // undecided part of a rival attempt at the same number, that state
        // is the one before both, and the rival's own goes into `over`.
        let over = match head.undecided_part() {
            Some(rival) if rival.seq == txn.seq => {
                let mut over = rival.over.clone();
                over.push(StackedOn {
                    id: rival.id,
                    stage: rival.stage.clone(),
                    version: head.version(),
                    manifest: rival.manifest.clone(),
                });
                over
            }
            _ => Vec::new(),
        };
        entry.txn = Some(TxnPart {
            seq: txn.seq,
            id: txn.id,
            stage: txn.stage.clone(),
            manifest: std::mem::replace(&mut entry.manifest, head.entry().manifest.clone()),
            dates: std::mem::take(&mut entry.dates),
            rows_added: std::mem::take(&mut entry.rows_added),
            files_added: std::mem::take(&mut entry.files_added),
            files_removed: std::mem::take(&mut entry.files_removed),
            over,
            state: TxnState::Pending,
        });
        entry.format = match entry.txn.as_ref().is_some_and(|t| !t.over.is_empty()) {
            true => ENTRY_FORMAT_STACKED,
            false => ENTRY_FORMAT_TXN,
        };
    }
    entry
}
