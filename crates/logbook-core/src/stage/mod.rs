//! Named stages: write, audit, publish.
//!
//! A backfill can write its dates into a named stage instead of the main
//! line. Staged files live under `data/` like any other (unique names, never
//! moved); the stage records them in `_logbook/stages/<name>/`:
//!
//! ```text
//! _logbook/stages/<name>/stage.json          when it began, at which table version
//! _logbook/stages/<name>/dates/<date>.json   one staged partition: files, rows, run
//! ```
//!
//! Readers never see a stage. [`Stage::publish`] commits every staged date in
//! one commit (readers see all dates change at once), refusing if any staged
//! date was replaced on the main line after the stage began, unless forced.
//! [`Stage::drop_stage`] forgets the record; vacuum deletes the files.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use futures::StreamExt;
use object_store::{ObjectStore, PutMode, PutOptions};
use serde::Serialize;

pub(crate) mod record;
mod view;
mod warehouse;

pub use warehouse::{WarehousePublish, WarehouseStage};

use record::{landed_publish, publish_run_id};
pub use record::{StageInfo, StagedPartition};

use crate::commit::{commit, Change, CommitInfo, PartitionChange, PendingCommit, TxnStart};
use crate::error::{Error, Result};
use crate::format::{layout, DataFile, RunInfo};
use crate::names::validate_run_id;
use crate::staged_files::delete_files;
use crate::table::Table;
use crate::writer::{Destination, PartitionWriter};

/// A named stage of a table.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::{RunInfo, Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let d = chrono::NaiveDate::from_ymd_opt(2026, 3, 15).unwrap();
/// let stage = t.stage("fix-march").await?;
/// stage.replace_partition(d, RunInfo::new("r1")).await?.commit().await?;
/// assert!(t.latest().await?.partition(d).await?.is_none(), "not visible yet");
/// stage.publish(false).await?;
/// assert!(t.latest().await?.partition(d).await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Stage {
    table: Table,
    info: StageInfo,
}

impl Table {
    /// Open stage `name`, creating it (at the current version) if needed.
    pub async fn stage(&self, name: &str) -> Result<Stage> {
        validate_run_id(name).map_err(|_| Error::InvalidInput {
            table: self.name().to_string(),
            reason: format!("stage name {name:?} must be letters, digits, '-', '_' or '.'"),
        })?;
        let inner = &self.inner;
        let info = StageInfo {
            name: name.to_string(),
            created_ms: inner.options.clock.now_millis(),
            // The state staged dates are judged against (an undecided
            // publish part at the head reads as the version before it).
            base_version: self.latest().await?.content_version(),
            published: None,
            id: Some(inner.options.ids.next_id()),
        };
        let path = inner.location.path(&layout::stage_info(name));
        let opts = PutOptions::from(PutMode::Create);
        let info = match inner
            .location
            .store()
            .put_opts(&path, inner.encode(&info)?.into(), opts)
            .await
        {
            Ok(_) => {
                // Date records already there are leftovers of an earlier
                // stage of the name; they are ignored (see `StageInfo::id`)
                // and removed here when possible.
                let fresh = Stage {
                    table: self.clone(),
                    info: info.clone(),
                };
                fresh.forget_leftovers().await;
                info
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing: StageInfo = inner.get_json(&layout::stage_info(name)).await?;
                if landed_publish(inner, &existing).await?.is_some() {
                    // The leftovers of a published stage: finish forgetting
                    // it and begin a new one under the same name.
                    let old = Stage {
                        table: self.clone(),
                        info: existing,
                    };
                    old.forget_all().await?;
                    inner.put_json(&layout::stage_info(name), &info).await?;
                    info
                } else {
                    existing
                }
            }
            Err(e) => return Err(Error::storage(layout::stage_info(name), e)),
        };
        Ok(Stage {
            table: self.clone(),
            info,
        })
    }

    /// Every stage of the table (published ones too), by name: one listing
    /// of the stages directory, then each stage's record. A stage dropped
    /// meanwhile is left out; an unreadable record is an error naming it.
    pub async fn stages(&self) -> Result<Vec<StageInfo>> {
        let loc = &self.inner.location;
        let mut names: Vec<String> = self
            .inner
            .list(layout::STAGES_DIR)
            .await?
            .iter()
            .filter_map(|o| {
                let relative = loc.relative(&o.location);
                let rest = relative
                    .strip_prefix(layout::STAGES_DIR)?
                    .strip_prefix('/')?;
                let (name, file) = rest.split_once('/')?;
                (file == "stage.json").then(|| name.to_string())
            })
            .collect();
        names.sort();
        let infos: Vec<Option<StageInfo>> = futures::stream::iter(names)
            .map(|name| async move { self.inner.get_json_opt(&layout::stage_info(&name)).await })
            .buffered(16)
            .collect::<Vec<Result<Option<StageInfo>>>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        Ok(infos.into_iter().flatten().collect())
    }

    /// Open an existing stage; `NotFound`-kind error if there is none.
    pub async fn existing_stage(&self, name: &str) -> Result<Stage> {
        let info: StageInfo = self
            .inner
            .get_json_opt(&layout::stage_info(name))
            .await?
            .ok_or_else(|| Error::InvalidInput {
                table: self.name().to_string(),
                reason: format!("has no stage {name:?}"),
            })?;
        Ok(Stage {
            table: self.clone(),
            info,
        })
    }
}

impl Stage {
    /// The stage's record.
    pub fn info(&self) -> &StageInfo {
        &self.info
    }

    /// Start writing `date` into this stage. The writer's `commit` records
    /// the partition in the stage (replacing an earlier staged version of
    /// the date); nothing becomes visible.
    pub async fn replace_partition(
        &self,
        date: NaiveDate,
        run: RunInfo,
    ) -> Result<PartitionWriter> {
        let destination = Destination::Stage(self.info.name.clone());
        self.table.start_write(date, run, destination).await
    }

    /// The staged partition of `date`, if any.
    pub async fn partition(&self, date: NaiveDate) -> Result<Option<StagedPartition>> {
        let path = layout::stage_date(&self.info.name, date);
        self.table.inner.get_json_opt(&path).await
    }

    /// The staged partitions, by date.
    pub async fn partitions(&self) -> Result<Vec<StagedPartition>> {
        let dir = layout::stage_dates(&self.info.name);
        let staged = self.table.inner.list_json::<StagedPartition>(&dir).await?;
        // Records of an earlier stage of the same name are leftovers (a
        // stage and its records from an older logbook both have no id).
        let mut staged: Vec<StagedPartition> = staged
            .into_iter()
            .map(|(_, _, p)| p)
            .filter(|p| p.stage_id == self.info.id)
            .collect();
        staged.sort_by_key(|p| p.date);
        Ok(staged)
    }

    /// Publish every staged date in one commit, then forget the stage.
    ///
    /// Fails with a conflict naming the date if a staged date was replaced
    /// on the main line after the stage began, unless `force`, in which case
    /// the staged rows replace whatever is there now.
    pub async fn publish(&self, force: bool) -> Result<CommitInfo> {
        let table = &self.table;
        let current: Option<StageInfo> = table
            .inner
            .get_json_opt(&layout::stage_info(&self.info.name))
            .await?;
        let info = current.as_ref().unwrap_or(&self.info);
        // Published already (a crash or a failed write between the commit
        // and forgetting the stage): forget it now, commit nothing, and
        // never send its files in again.
        if let Some(version) = landed_publish(&table.inner, info).await? {
            self.forget_all().await?;
            return Ok(CommitInfo {
                version,
                already_committed: true,
                staged: None,
                dropped: vec![],
            });
        }
        let staged = self.partitions().await?;
        if !force {
            self.check_unchanged(&staged).await?;
        }
        let info = self.commit_part(&staged, None, force).await?;
        self.finish(&staged, info.version).await;
        Ok(info)
    }

    /// Refuse (`StageConflict`) if a staged date was replaced on the main
    /// line after the stage began.
    pub(crate) async fn check_unchanged(&self, staged: &[StagedPartition]) -> Result<()> {
        let table = &self.table;
        let latest = table.latest().await?;
        for p in staged {
            if let Some(now) = latest.partition(p.date).await? {
                if now.version > self.info.base_version {
                    return Err(Error::StageConflict {
                        table: table.name().to_string(),
                        stage: self.info.name.clone(),
                        date: p.date,
                        base_version: self.info.base_version,
                        winning_version: now.version,
                    });
                }
            }
        }
        Ok(())
    }

    /// Commit `staged` to the table: on its own, or as its part of the
    /// multi-table publish `txn`. The commit re-checks from the stage's
    /// base (from the head when `force`), so a main-line write racing the
    /// publish is caught atomically too.
    pub(crate) async fn commit_part(
        &self,
        staged: &[StagedPartition],
        txn: Option<TxnStart>,
        force: bool,
    ) -> Result<CommitInfo> {
        let table = &self.table;
        if staged.is_empty() {
            return Err(Error::InvalidInput {
                table: table.name().to_string(),
                reason: format!("stage {:?} has no staged dates to publish", self.info.name),
            });
        }
        let base = match force {
            true => table.latest().await?.content_version(),
            false => self.info.base_version,
        };
        let changes = staged
            .iter()
            .map(|p| PartitionChange {
                date: p.date,
                files: p.files.clone(),
                rows: p.rows,
                run: Some(p.run.clone()),
                rewrite_of: None,
                schema_version: p.schema_version,
                expected: None,
            })
            .collect();
        let run = RunInfo::new(publish_run_id(&self.info.name));
        let mut pending = PendingCommit::new(base, run, Change::Publish(changes));
        pending.txn = txn;
        commit(&table.inner, pending)
            .await
            .map_err(|f| match f.error {
                Error::PartitionConflict {
                    date,
                    winning_version,
                    ..
                } => Error::StageConflict {
                    table: table.name().to_string(),
                    stage: self.info.name.clone(),
                    date,
                    base_version: self.info.base_version,
                    winning_version,
                },
                e => e,
            })
    }

    /// After the publish landed at `version`: record it in the stage, then
    /// forget the stage's records (best effort; a later open or publish
    /// of the stage finishes it, finding the publish in the log).
    pub(crate) async fn finish(&self, staged: &[StagedPartition], version: u64) {
        let done = StageInfo {
            published: Some(version),
            ..self.info.clone()
        };
        if self
            .table
            .inner
            .put_json(&layout::stage_info(&self.info.name), &done)
            .await
            .is_ok()
        {
            self.forget(staged.iter().map(|p| p.date)).await;
        }
    }

    /// The table the stage belongs to.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Delete date records of earlier stages of this name (best effort).
    async fn forget_leftovers(&self) {
        let inner = &self.table.inner;
        let dir = layout::stage_dates(&self.info.name);
        let Ok(objects) = inner.list(&dir).await else {
            return;
        };
        // Best effort, record by record: one unreadable record does not keep
        // the others.
        let mut leftovers = Vec::new();
        for o in objects {
            let path = inner.location.relative(&o.location);
            if let Ok(Some(p)) = inner.get_json_opt::<StagedPartition>(&path).await {
                if p.stage_id != self.info.id {
                    leftovers.push(path);
                }
            }
        }
        delete_files(inner, &leftovers).await;
    }

    /// Forget every record of the stage, whatever dates it still lists.
    async fn forget_all(&self) -> Result<()> {
        let dates: Vec<NaiveDate> = self.partitions().await?.iter().map(|p| p.date).collect();
        self.forget(dates.into_iter()).await;
        Ok(())
    }

    /// Discard the stage: forget its records. The staged files are left to
    /// vacuum (they are unreferenced, so the first vacuum that lists every
    /// file once they are older than the retention deletes them: within two
    /// retentions): a publish racing the drop may have made them the
    /// table's, and only vacuum, reading the snapshots, can tell.
    pub async fn drop_stage(self) -> Result<usize> {
        // A publish of this stage being decided still needs its records
        // (vacuum keeps the files they name): refuse until it is decided.
        let head = self.table.latest().await?;
        if let Some(part) = head.undecided_part() {
            let stages = std::iter::once(&part.stage).chain(part.over.iter().map(|o| &o.stage));
            if stages.into_iter().any(|s| *s == self.info.name) {
                return Err(Error::PublishUndecided {
                    table: self.table.name().to_string(),
                    version: head.version(),
                    seq: part.seq,
                    what: format!("dropping stage {:?}", self.info.name),
                });
            }
        }
        let staged = self.partitions().await?;
        self.forget(staged.iter().map(|p| p.date)).await;
        Ok(staged.len())
    }

    /// Remove the stage's record (its files now belong to the table or are
    /// gone): the date records, then the stage's own record, which goes only
    /// if every date record did, so a published stage is never forgotten
    /// while records of it remain.
    async fn forget(&self, dates: impl Iterator<Item = NaiveDate>) {
        let name = &self.info.name;
        let records: Vec<String> = dates.map(|d| layout::stage_date(name, d)).collect();
        if delete_files(&self.table.inner, &records).await {
            delete_files(&self.table.inner, &[layout::stage_info(name)]).await;
        }
    }
}

/// Per staged date: the rows and numeric column sums now on the main line
/// and in the stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageDiff {
    pub date: NaiveDate,
    /// `None` when the date is missing on the main line.
    pub old_rows: Option<u64>,
    pub new_rows: u64,
    /// Column name to (old sum, new sum), for numeric columns.
    pub sums: BTreeMap<String, (Option<f64>, f64)>,
}

impl Stage {
    /// Compare every staged date with the main line.
    pub async fn diff(&self) -> Result<Vec<StageDiff>> {
        let latest = self.table.latest().await?;
        let numeric: Vec<String> = latest
            .schema()
            .columns
            .iter()
            .filter(|c| c.ty.is_numeric())
            .map(|c| c.name.clone())
            .collect();
        let mut out = Vec::new();
        for p in self.partitions().await? {
            let old = latest.partition(p.date).await?;
            let new_sums = sums(&latest, p.files.clone(), &numeric).await?;
            let old_sums = match &old {
                Some(o) => Some(sums(&latest, o.files.clone(), &numeric).await?),
                None => None,
            };
            out.push(StageDiff {
                date: p.date,
                old_rows: old.map(|o| o.rows),
                new_rows: p.rows,
                sums: numeric
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.clone(), (old_sums.as_ref().map(|s| s[i]), new_sums[i])))
                    .collect(),
            });
        }
        Ok(out)
    }
}

async fn sums(
    snap: &crate::Snapshot,
    files: Vec<DataFile>,
    columns: &[String],
) -> Result<Vec<f64>> {
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut totals = vec![0.0; columns.len()];
    if columns.is_empty() {
        return Ok(totals);
    }
    let mut batches = snap.scan_files(files, Some(&names), crate::reader::ReadOptions::default());
    while let Some(batch) = batches.next().await {
        let batch = batch?;
        for (i, total) in totals.iter_mut().enumerate() {
            let col = arrow_cast::cast(batch.column(i), &arrow_schema::DataType::Float64)
                .map_err(|e| Error::arrow(format!("summing column {}", columns[i]), e))?;
            let values =
                arrow_array::cast::AsArray::as_primitive::<arrow_array::types::Float64Type>(&col);
            *total += values.iter().flatten().sum::<f64>();
        }
    }
    Ok(totals)
}
