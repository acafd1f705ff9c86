//! Vacuum: delete files no retained snapshot, live stage or live write
//! references, once they are older than the retention.
//!
//! What is kept, whatever its age: every data file and manifest of every
//! retained version (from the oldest expiry keeps to the latest), every file
//! of a live stage, and the staging directory of every write whose intent
//! marker is not abandoned. What is deleted: anything else under `data/` and
//! `_logbook/manifests/` last modified before `now - retention`, and
//! abandoned intent markers as old. The retention is the guard for writes
//! whose commit outcome is not known yet (an ambiguous put may still land):
//! their files are young, so they are never deleted.

use std::collections::HashSet;

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectMeta, ObjectStore};
use serde::Serialize;

use crate::commit::{commit, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{layout, Operation, RunInfo};
use crate::intent;
use crate::staging::delete_files;
use crate::table::Table;

/// Vacuum refuses a shorter retention unless forced (one hour).
pub const MIN_RETENTION_MS: i64 = 60 * 60 * 1000;

/// How to vacuum.
#[derive(Debug, Clone, Copy)]
pub struct VacuumOptions {
    /// Files younger than this (ms) are kept (default 7 days).
    pub retention_ms: i64,
    /// Report what would be deleted; delete nothing.
    pub dry_run: bool,
    /// Allow a retention under [`MIN_RETENTION_MS`].
    pub force: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        Self {
            retention_ms: 7 * 24 * MIN_RETENTION_MS,
            dry_run: false,
            force: false,
        }
    }
}

/// What a vacuum deleted (or would).
#[derive(Debug, Clone, Default, Serialize)]
pub struct VacuumReport {
    /// Paths relative to the table root, sorted.
    pub deleted: Vec<String>,
    pub bytes: u64,
    /// Unreferenced files kept because they are younger than the retention.
    pub kept_young: usize,
    /// The commit recording the vacuum (`None` for a dry run or when nothing was deleted).
    pub version: Option<u64>,
}

/// Vacuum `table`.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::maintenance::{vacuum, VacuumOptions};
/// use logbook_core::{Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let report = vacuum(&t, VacuumOptions { dry_run: true, ..Default::default() }).await?;
/// assert!(report.deleted.is_empty());
/// # Ok(()) }
/// ```
pub async fn vacuum(table: &Table, options: VacuumOptions) -> Result<VacuumReport> {
    if options.retention_ms < MIN_RETENTION_MS && !options.force {
        return Err(Error::InvalidInput {
            table: table.name().to_string(),
            reason: format!(
                "a retention of {} min is under one hour: files of writes still committing could be deleted; use --force if no writer is running",
                options.retention_ms / 60_000
            ),
        });
    }
    let inner = &table.inner;
    let now = inner.options.clock.now_millis();
    let cutoff = now - options.retention_ms;

    // Live writes and stages first, then snapshots: a stage published or a
    // write committed in between is then found in the snapshots.
    let mut protected_dirs: Vec<String> = Vec::new();
    let mut stale_markers = Vec::new();
    for marker in intent::list(inner).await? {
        if marker.abandoned(now, inner.options.running_timeout_ms) && marker.heartbeat_ms < cutoff {
            stale_markers.push(layout::running_marker(marker.date, &marker.run_id));
        } else if let Some(dir) = marker.dir {
            protected_dirs.push(format!("{dir}/"));
        }
    }
    let mut keep: HashSet<String> = HashSet::new();
    for name in stage_names(table).await? {
        if let Ok(stage) = table.existing_stage(&name).await {
            for p in stage.partitions().await? {
                keep.extend(p.files.into_iter().map(|f| f.path));
            }
        }
    }
    let latest = table.latest().await?;
    let oldest = latest.root().retained_from;
    // Month manifests are shared across versions: read each one once.
    let retained: Vec<crate::Snapshot> = futures::stream::iter(oldest..=latest.version())
        .map(|v| inner.snapshot(v))
        .buffered(8)
        .try_collect()
        .await?;
    let mut months_seen: HashSet<String> = HashSet::new();
    for snap in &retained {
        keep.insert(snap.entry().manifest.clone());
        keep.extend(snap.dimension_files().into_iter().map(|f| f.path));
        for m in &snap.root().months {
            if !months_seen.insert(m.path.clone()) {
                continue;
            }
            keep.insert(m.path.clone());
            if let Some(month) = snap.month(&m.month).await? {
                for p in &month.partitions {
                    keep.extend(p.files.iter().map(|f| f.path.clone()));
                }
            }
        }
    }

    let mut report = VacuumReport::default();
    for prefix in ["data", "_logbook/manifests"] {
        for object in list(table, prefix).await? {
            let rel = inner.location.relative(&object.location);
            if keep.contains(&rel) || protected_dirs.iter().any(|d| rel.starts_with(d.as_str())) {
                continue;
            }
            if object.last_modified.timestamp_millis() >= cutoff {
                report.kept_young += 1;
                continue;
            }
            report.bytes += object.size;
            report.deleted.push(rel);
        }
    }
    report.deleted.sort();
    if options.dry_run || report.deleted.is_empty() {
        return Ok(report);
    }
    delete_files(inner, &report.deleted).await;
    delete_files(inner, &stale_markers).await;
    let run = RunInfo::new(format!("vacuum-{}", inner.options.ids.next_id()));
    let mut pending = PendingCommit::maintenance(Operation::Vacuum, latest.version(), run);
    pending.files_removed = Some(report.deleted.len() as u64);
    report.version = Some(commit(inner, pending).await.map_err(|f| f.error)?.version);
    Ok(report)
}

async fn list(table: &Table, prefix: &str) -> Result<Vec<ObjectMeta>> {
    let loc = &table.inner.location;
    let store: &std::sync::Arc<dyn ObjectStore> = loc.store();
    store
        .list(Some(&loc.path(prefix)))
        .try_collect()
        .await
        .map_err(|e| Error::storage(prefix, e))
}

/// Names of the table's stages.
async fn stage_names(table: &Table) -> Result<Vec<String>> {
    let mut names: Vec<String> = list(table, layout::STAGES_DIR)
        .await?
        .iter()
        .filter_map(|o| {
            let rel = table.inner.location.relative(&o.location);
            let rest = rel.strip_prefix(layout::STAGES_DIR)?.strip_prefix('/')?;
            rest.split('/').next().map(str::to_string)
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}
