//! Compaction: rewrite runs of small files of a partition into files near a
//! target size, keeping row order (a table with sort columns has each new
//! row group sorted by them), as a data-unchanged commit.
//!
//! A compaction commit keeps each partition's version and run (its rows are
//! the same), so it never makes anything stale and never conflicts with a
//! replace; a rewrite whose date changed after the compaction read it is
//! dropped inside the commit (see `PartitionChange::rewrite_of`), so old rows
//! never come back.

use std::sync::Arc;

use chrono::NaiveDate;
use futures::{stream, StreamExt};
use serde::Serialize;

use crate::commit::{commit, Change, PartitionChange, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{layout, DataFile, PartitionEntry, RunInfo};
use crate::intent::Lease;
use crate::reader::ReadOptions;
use crate::snapshot::Snapshot;
use crate::staged_files::{delete_files, StagedFiles};
use crate::table::Table;

/// What to compact and how.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// First and last date to consider (inclusive); all when `None`.
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    /// Files are rewritten into files of about this size (default: the table's target).
    pub target_file_size: Option<usize>,
    /// Only partitions with at least this many files are compacted.
    pub min_files: usize,
    /// Commit after this many compacted partitions, so a failure late in a
    /// long run keeps the earlier work.
    pub commit_every: usize,
    /// Partitions rewritten at once (each on its own task, so on its own
    /// core); memory grows with it. Default: the machine's parallelism.
    pub parallelism: usize,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            from: None,
            to: None,
            target_file_size: None,
            min_files: 2,
            commit_every: 50,
            parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// One partition's planned rewrite.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionPlan {
    pub date: NaiveDate,
    /// The partition's files, in order, as read.
    pub files: Vec<DataFile>,
    /// Ranges `[start, end)` of `files` that are rewritten (runs of two or
    /// more consecutive files smaller than the target).
    pub runs: Vec<(usize, usize)>,
}

impl PartitionPlan {
    fn rewritten(&self) -> impl Iterator<Item = &DataFile> {
        self.runs.iter().flat_map(|&(a, b)| &self.files[a..b])
    }
}

/// The partitions a compaction would rewrite.
#[derive(Debug, Clone, Serialize)]
pub struct CompactPlan {
    pub table: String,
    pub version: u64,
    pub target_file_size: usize,
    pub partitions: Vec<PartitionPlan>,
}

impl CompactPlan {
    /// Files and bytes the plan rewrites.
    pub fn rewrites(&self) -> (usize, u64) {
        let files = self.partitions.iter().flat_map(|p| p.rewritten());
        files.fold((0, 0), |(n, b), f| (n + 1, b + f.size))
    }
}

/// Progress reported after each partition.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactProgress {
    pub partitions_done: usize,
    pub partitions_total: usize,
    pub bytes_rewritten: u64,
}

/// What a compaction did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactReport {
    pub partitions_compacted: usize,
    /// Dates left alone because they were replaced while being compacted.
    pub dropped: Vec<NaiveDate>,
    pub files_before: usize,
    pub files_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// The versions committed.
    pub commits: Vec<u64>,
}

/// Plan a compaction of `table` at its latest version.
pub async fn plan_compaction(table: &Table, options: &CompactOptions) -> Result<CompactPlan> {
    let snap = table.latest().await?;
    if snap.schema().partition_column().is_none() {
        return Err(Error::InvalidInput {
            table: table.name().to_string(),
            reason: "is a dimension; compaction rewrites date partitions".into(),
        });
    }
    let target = options
        .target_file_size
        .unwrap_or(table.inner.options.target_file_size)
        .max(1);
    let partitions = snap
        .partitions()
        .await?
        .into_iter()
        .filter(|p| {
            options.from.is_none_or(|f| p.date >= f) && options.to.is_none_or(|t| p.date <= t)
        })
        .filter(|p| p.files.len() >= options.min_files.max(2))
        .filter_map(|p| plan_partition(p, target as u64))
        .collect();
    Ok(CompactPlan {
        table: table.name().to_string(),
        version: snap.version(),
        target_file_size: target,
        partitions,
    })
}

fn plan_partition(p: PartitionEntry, target: u64) -> Option<PartitionPlan> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, f) in p.files.iter().enumerate() {
        match (f.size < target, start) {
            (true, None) => start = Some(i),
            (false, Some(a)) => {
                if i - a >= 2 {
                    runs.push((a, i));
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(a) = start {
        if p.files.len() - a >= 2 {
            runs.push((a, p.files.len()));
        }
    }
    (!runs.is_empty()).then_some(PartitionPlan {
        date: p.date,
        files: p.files,
        runs,
    })
}

/// Compact `table` as planned by `options`, reporting progress after each
/// partition. Memory stays bounded whatever the partition size: per
/// partition rewritten at once, a row group being encoded and one file
/// closing (its last row group and upload buffers).
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::maintenance::{compact, CompactOptions};
/// use logbook_core::{Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let report = compact(&t, &CompactOptions::default(), &|_| {}).await?;
/// assert_eq!(report.partitions_compacted, 0);
/// # Ok(()) }
/// ```
pub async fn compact(
    table: &Table,
    options: &CompactOptions,
    progress: &(dyn Fn(CompactProgress) + Send + Sync),
) -> Result<CompactReport> {
    let plan = plan_compaction(table, options).await?;
    let Some(first) = plan.partitions.first().map(|p| p.date) else {
        return Ok(CompactReport::default());
    };
    let run = RunInfo::new(format!("compact-{}", table.inner.options.ids.next_id()));
    // Vacuum keeps the directories the rewrites stage into while they run.
    let lease = Lease::start(table.inner.clone(), first, &run.run_id).await;
    let outcome = compact_leased(table, options, &plan, run, &lease, progress).await;
    lease.end().await;
    outcome
}

async fn compact_leased(
    table: &Table,
    options: &CompactOptions,
    plan: &CompactPlan,
    run: RunInfo,
    lease: &Arc<Lease>,
    progress: &(dyn Fn(CompactProgress) + Send + Sync),
) -> Result<CompactReport> {
    let snap = table.at_version(plan.version).await?;
    let mut report = CompactReport::default();
    let mut state = CompactProgress {
        partitions_total: plan.partitions.len(),
        ..Default::default()
    };
    for batch in plan.partitions.chunks(options.commit_every.max(1)) {
        // Rewrite the chunk's partitions `parallelism` at a time, in order;
        // every rewrite runs to its end, so a failure leaves no rewrite
        // half-written: the finished ones are discarded, then the error returned.
        let target = plan.target_file_size;
        let mut results = stream::iter(batch.iter().cloned())
            .map(|p| {
                let (snap, lease) = (snap.clone(), lease.clone());
                tokio::spawn(async move { rewrite(&snap, &p, target, &lease).await })
            })
            .buffered(options.parallelism.max(1));
        let (mut changes, mut failed) = (Vec::new(), None);
        let mut done = batch.iter();
        while let Some(joined) = results.next().await {
            let p = done.next().expect("one result per partition");
            match joined {
                Ok(Ok(change)) => changes.push(change),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => {
                    failed = failed.or(Some(Error::Interrupted {
                        table: table.name().to_string(),
                        what: format!("compaction of {}", p.date),
                    }))
                }
            }
            state.partitions_done += 1;
            state.bytes_rewritten += p.rewritten().map(|f| f.size).sum::<u64>();
            progress(state);
        }
        if let Some(e) = failed {
            discard(table, &changes).await;
            return Err(e);
        }
        let staged = changes.clone();
        // The files the rewrites wrote (the others were already the table's),
        // and the partition of each.
        let (dates, written): (Vec<NaiveDate>, Vec<DataFile>) = batch
            .iter()
            .zip(&changes)
            .flat_map(|(p, c)| {
                let new = c.files.iter().filter(|f| !p.files.contains(f));
                new.map(|f| (p.date, f.clone()))
            })
            .unzip();
        if let Err(e) = lease.confirm(&written, |i| dates[i]).await {
            discard(table, &staged).await;
            return Err(e);
        }
        let base = table.latest_version().await?;
        let pending = PendingCommit::new(base, run.clone(), Change::Compact(changes));
        let info = match commit(&table.inner, pending).await {
            Ok(info) => info,
            Err(failure) => {
                if !failure.ambiguous {
                    discard(table, &staged).await;
                }
                return Err(failure.error);
            }
        };
        let dropped: Vec<PartitionChange> = staged
            .iter()
            .filter(|c| info.dropped.contains(&c.date))
            .cloned()
            .collect();
        discard(table, &dropped).await;
        report.dropped.extend(&info.dropped);
        if dropped.len() < staged.len() {
            report.commits.push(info.version);
        }
        for (p, c) in batch.iter().zip(&staged) {
            if info.dropped.contains(&p.date) {
                continue;
            }
            report.partitions_compacted += 1;
            report.files_before += p.files.len();
            report.bytes_before += p.files.iter().map(|f| f.size).sum::<u64>();
            report.files_after += c.files.len();
            report.bytes_after += c.files.iter().map(|f| f.size).sum::<u64>();
        }
    }
    Ok(report)
}

/// Rewrite the runs of one partition; the other files stay where they are.
async fn rewrite(
    snap: &Snapshot,
    plan: &PartitionPlan,
    target: usize,
    lease: &Lease,
) -> Result<PartitionChange> {
    let table = snap.table_inner();
    let column = snap.schema().partition_column().unwrap_or_default();
    let mut files = Vec::new();
    let mut next = 0;
    for &(a, b) in &plan.runs {
        files.extend_from_slice(&plan.files[next..a]);
        let dir = layout::staging_dir(column, plan.date, table.options.ids.next_id());
        lease.hold(&dir).await;
        let mut staged = StagedFiles::new(table.clone(), dir, snap.schema(), snap.properties())
            .with_target_file_size(target);
        let mut batches = snap.scan_files(plan.files[a..b].to_vec(), None, ReadOptions::default());
        let mut failed = None;
        while let Some(batch) = batches.next().await {
            lease.beat_if_due().await;
            if let Err(e) = async { staged.write(&batch?).await }.await {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            staged.abort().await;
            let written: Vec<String> = files
                .iter()
                .filter(|f: &&DataFile| !plan.files.contains(f))
                .map(|f| f.path.clone())
                .collect();
            delete_files(table, &written).await;
            return Err(e);
        }
        files.extend(staged.finish().await?);
        next = b;
    }
    files.extend_from_slice(&plan.files[next..]);
    Ok(PartitionChange {
        date: plan.date,
        rows: files.iter().map(|f| f.rows).sum(),
        files,
        run: None,
        rewrite_of: Some(plan.files.iter().map(|f| f.path.clone()).collect()),
        // Unused for rewrites: the partition keeps its entry.
        schema_version: 0,
        expected: None,
    })
}

/// Delete the new files of rewrites that will not be committed.
async fn discard(table: &Table, changes: &[PartitionChange]) {
    for c in changes {
        let old = c.rewrite_of.clone().unwrap_or_default();
        let new: Vec<String> = c
            .files
            .iter()
            .map(|f| f.path.clone())
            .filter(|p| !old.contains(p))
            .collect();
        delete_files(&table.inner, &new).await;
    }
}
