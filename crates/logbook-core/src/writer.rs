//! Writing one partition: validate, stream to staged Parquet files, commit.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::{Array, RecordBatch};
use chrono::NaiveDate;

use crate::budget::SlotTicket;
use crate::commit::{
    commit, Change, CommitInfo, ExpectedPartition, PartitionChange, PendingCommit,
};
use crate::error::{Error, Result};
use crate::format::{layout, InputRead, RunClass, RunInfo};
use crate::handle::TableInner;
use crate::intent::{self, RunMarker, MIN_RETENTION_MS};
use crate::snapshot::Snapshot;
use crate::stage::record::{record, StagedPartition};
use crate::staged_files::{delete_files, StagedFiles};
use crate::validate::conform;

/// Where a partition write lands when it commits, fixed when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Destination {
    /// The table itself: the commit makes the partition visible.
    #[default]
    MainLine,
    /// A named stage (see [`crate::Stage`]): the commit records the
    /// partition there, and nothing is visible until the stage is
    /// published.
    Stage(String),
}

impl From<Option<String>> for Destination {
    /// `Some(name)`: that stage; `None`: the main line.
    fn from(stage: Option<String>) -> Self {
        stage.map_or(Destination::MainLine, Destination::Stage)
    }
}

/// Streams the rows of one partition into staged files; nothing is visible
/// until [`PartitionWriter::commit`].
///
/// Memory stays bounded whatever the partition size: files roll at the
/// table's target size and row groups flush at
/// [`crate::TableOptions::row_group_bytes`]; a full file's last row group
/// and upload buffers are held while it closes in the background. Dropping a writer without
/// committing leaves only staged files, which vacuum removes later.
pub struct PartitionWriter {
    table: Arc<TableInner>,
    base: Snapshot,
    date: NaiveDate,
    run: RunInfo,
    partition_column: String,
    staged: StagedFiles,
    rows: u64,
    failed: bool,
    /// This write's intent marker (see [`crate::intent`]).
    marker: RunMarker,
    /// When the marker was last stored (a beat may fail and only warn).
    stored_ms: i64,
    /// The main line, or the stage that records the partition instead.
    destination: Destination,
    /// What the partition must be when this write commits.
    expected: Option<ExpectedPartition>,
    /// The backfill slot this run holds through its runner (checked right
    /// before the commit, see [`crate::budget`]).
    slot: Option<SlotTicket>,
}

impl std::fmt::Debug for PartitionWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionWriter")
            .field("table", &self.table.name)
            .field("date", &self.date)
            .field("run", &self.run.run_id)
            .field("rows", &self.rows)
            .finish()
    }
}

impl PartitionWriter {
    pub(crate) fn new(
        table: Arc<TableInner>,
        base: Snapshot,
        date: NaiveDate,
        mut run: RunInfo,
        destination: Destination,
    ) -> Result<Self> {
        let Some(partition_column) = base.schema().partition_column().map(str::to_string) else {
            return Err(Error::InvalidInput {
                table: table.name.clone(),
                reason: "is a dimension (SCD2) table; change it with apply_changes, not by replacing partitions".into(),
            });
        };
        let dir = layout::staging_dir(&partition_column, date, table.options.ids.next_id());
        let staged = StagedFiles::new(table.clone(), dir, base.schema(), base.properties());
        // Every write into a stage is a backfill, whatever the caller said.
        let class = match &destination {
            Destination::Stage(_) => RunClass::Backfill,
            Destination::MainLine => run.class.unwrap_or_default(),
        };
        run.class = Some(class);
        let now = table.options.clock.now_millis();
        let marker = RunMarker {
            date,
            run_id: run.run_id.clone(),
            started_ms: now,
            heartbeat_ms: now,
            dir: Some(staged.dir().to_string()),
            dirs: vec![],
            rewrite: false,
            lease: None,
            class: Some(class),
        };
        Ok(Self {
            table,
            base,
            date,
            run,
            partition_column,
            staged,
            rows: 0,
            failed: false,
            marker,
            stored_ms: now,
            destination,
            expected: None,
            slot: None,
        })
    }

    /// Where this write lands when it commits.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// Say that this write is running (called once it starts).
    pub(crate) async fn announce(&mut self) {
        if intent::beat(&self.table, &self.marker).await {
            self.stored_ms = self.marker.heartbeat_ms;
        }
    }

    /// Refresh the intent marker if its heartbeat is due.
    ///
    /// A writer whose marker was last stored longer ago than half the
    /// shortest vacuum retention (say it waited on its source, or its
    /// beats failed) may have had its staged files deleted, since vacuum
    /// stops protecting a marker that old. It first claims its directory
    /// back from any vacuum that found the marker stale (see
    /// [`intent::claim`]), then refreshes the marker (protecting the files
    /// from any vacuum that reads it from now on), then makes sure every
    /// file written so far is still there; if the claim is lost or a file
    /// is gone, committing would publish a partition with missing files, so
    /// the write fails and the run must be retried.
    async fn heartbeat(&mut self) -> Result<()> {
        let now = self.table.options.clock.now_millis();
        if now - self.marker.heartbeat_ms < self.table.options.heartbeat_interval_ms {
            return Ok(());
        }
        let last = self.stored_ms;
        self.marker.heartbeat_ms = now;
        if now - last < MIN_RETENTION_MS / 2 {
            if intent::beat(&self.table, &self.marker).await {
                self.stored_ms = now;
            }
            return Ok(());
        }
        // Back from a long pause: the marker must protect the files again
        // before they are checked, or a vacuum could still take them. A
        // file closing in the background is checked too, once closed. The
        // writer counts as failed until the check is done: a check dropped
        // midway (a timeout around `write`) must not let it commit unchecked
        // files on the next, short, heartbeat.
        self.failed = true;
        let taken = |stalled_ms: i64| Error::StagedFilesTaken {
            table: self.table.name.clone(),
            what: format!("partition {}", self.marker.date),
            stalled_min: stalled_ms / 60_000,
        };
        // First take the directory back from a vacuum that found the marker
        // stale (see `intent::claim`); one that holds it deletes the files.
        if !intent::take_back(&self.table, &self.marker).await? {
            self.staged.settle().await?;
            if !self.staged.written().is_empty() {
                return Err(taken(now - last));
            }
        }
        intent::beat(&self.table, &self.marker).await;
        self.staged.settle().await?;
        let date = self.marker.date;
        intent::recheck(
            &self.table,
            &self.marker,
            self.staged.written(),
            |_| date,
            now - last,
        )
        .await?;
        // Stored too long after claiming: a vacuum may have replaced the
        // claim meanwhile (see `intent::CLAIM_TO_STORE`).
        let stored = self.table.options.clock.now_millis();
        if stored - now >= intent::CLAIM_TO_STORE {
            return Err(taken(stored - last));
        }
        self.stored_ms = now;
        self.failed = false;
        Ok(())
    }

    /// The partition this writer replaces.
    pub fn date(&self) -> NaiveDate {
        self.date
    }

    /// The table's schema rows must match.
    pub fn schema(&self) -> &crate::schema::TableSchema {
        self.base.schema()
    }

    /// The version this write started from.
    pub fn base_version(&self) -> u64 {
        self.base.version()
    }

    /// The staged directory (relative to the table root) this writer fills.
    pub fn staging_dir(&self) -> &str {
        self.staged.dir()
    }

    /// Rows accepted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Commit only if the partition is then still as `expected` (missing, or
    /// last replaced by a given version); otherwise the commit fails with
    /// `PartitionConflict` and nothing is written. `logbook backfill` sets
    /// this, so a date production committed after the backfill looked at it
    /// is never overwritten.
    pub fn expect(mut self, expected: ExpectedPartition) -> Self {
        self.expected = Some(expected);
        self
    }

    /// The run this writer commits as.
    /// Commit only while the backfill slot `ticket` is still this run's
    /// runner's: a runner paused past its lease, whose slot another run
    /// took over, gets `SlotLost` instead of a commit (`logbook backfill`
    /// passes its ticket to the commands it launches).
    pub fn within_slot(mut self, ticket: SlotTicket) -> Self {
        self.slot = Some(ticket);
        self
    }

    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// Record query text the run executed (appended to any recorded
    /// earlier, one statement per line).
    pub fn record_query(&mut self, query: &str) {
        self.run.query = Some(match self.run.query.take() {
            Some(earlier) => format!("{earlier};\n{query}"),
            None => query.to_string(),
        });
    }

    /// Record the inputs the run read (its lineage).
    pub fn record_inputs(&mut self, inputs: Vec<InputRead>) {
        self.run.inputs = inputs;
    }

    /// Complete a derived run id with `suffix` (a fingerprint of what the
    /// run read, known only once it has read it): the id becomes
    /// `<id>-<suffix>`. The id's prefix, fixed when the write started,
    /// stays what the intent marker shows for the running write; nothing
    /// else about the run's identity can change after it starts.
    pub fn complete_run_id(&mut self, suffix: &str) -> Result<()> {
        let id = format!("{}-{suffix}", self.run.run_id);
        crate::names::validate_run_id(&id)?;
        self.run.run_id = id;
        Ok(())
    }

    /// Validate `batch` and append it. A batch that fails validation is not
    /// written, and the writer can then only be aborted.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.ensure_usable()?;
        let result = match self.validate(batch) {
            Ok(batch) => self.staged.write(&batch).await.map(|_| batch.num_rows()),
            Err(e) => Err(e),
        };
        let result = match result {
            Ok(n) => {
                self.rows += n as u64;
                self.heartbeat().await
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    /// Commit the partition: it becomes visible atomically, replacing any
    /// earlier contents of the date. Fails with `PartitionConflict` if
    /// another commit replaced the date after this writer's base snapshot.
    ///
    /// A writer whose earlier `write` was refused commits nothing: `commit`
    /// then aborts it (deleting its staged files) and returns the refusal.
    pub async fn commit(mut self) -> Result<CommitInfo> {
        if let Err(e) = self.ensure_usable() {
            self.staged.abort().await;
            intent::clear(&self.table, &self.marker).await;
            return Err(e);
        }
        if let Err(e) = self.heartbeat().await {
            self.staged.abort().await;
            intent::clear(&self.table, &self.marker).await;
            return Err(e);
        }
        let Self {
            table,
            base,
            date,
            run,
            staged,
            rows,
            marker,
            destination,
            expected,
            slot,
            ..
        } = self;
        let files = match staged.finish().await {
            Ok(files) => files,
            Err(e) => {
                intent::clear(&table, &marker).await;
                return Err(e);
            }
        };
        // Last, right before the commit: is the runner's slot still ours?
        if let Some(ticket) = slot {
            let what = format!("table {}, partition {date}, run {}", table.name, run.run_id);
            if let Err(e) = crate::budget::ticket_holds(&table.location, ticket, &what).await {
                intent::clear(&table, &marker).await;
                delete_files(
                    &table,
                    &files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
                )
                .await;
                return Err(e);
            }
        }
        if let Destination::Stage(name) = destination {
            let partition = StagedPartition {
                date,
                rows,
                files,
                run,
                schema_version: base.schema().version,
                stage_id: None,
            };
            let recorded = record(&table, &name, &partition).await;
            intent::clear(&table, &marker).await;
            // A failed record may still have landed (the put's outcome is
            // unknown), and then the stage references these files: they
            // are left for vacuum, which keeps what a stage references.
            recorded?;
            return Ok(CommitInfo {
                version: base.version(),
                already_committed: false,
                staged: Some(name),
                dropped: vec![],
            });
        }
        let staged: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
        let pending = PendingCommit::new(
            base.content_version(),
            run,
            Change::Replace(vec![PartitionChange {
                date,
                files,
                rows,
                run: None,
                rewrite_of: None,
                schema_version: base.schema().version,
                expected,
            }]),
        );
        let outcome = commit(&table, pending).await;
        intent::clear(&table, &marker).await;
        match outcome {
            Ok(info) => {
                if info.already_committed {
                    delete_files(&table, &staged).await;
                }
                Ok(info)
            }
            Err(failure) => {
                // Only when the commit certainly did not land may its files go.
                if !failure.ambiguous {
                    delete_files(&table, &staged).await;
                }
                Err(failure.error)
            }
        }
    }

    /// Give up: delete what this writer staged. Nothing was committed.
    pub async fn abort(self) -> Result<()> {
        self.staged.abort().await;
        intent::clear(&self.table, &self.marker).await;
        Ok(())
    }

    fn ensure_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::WriterClosed {
                table: self.table.name.clone(),
                date: self.date,
                state:
                    "failed (an earlier write was refused or interrupted); abort it and start again",
            });
        }
        Ok(())
    }

    /// Check `batch` against the table schema and the partition date, and
    /// return it re-labelled with the table's schema (field ids).
    fn validate(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        if let Some(dates) = batch.column_by_name(&self.partition_column) {
            self.check_nulls(dates.as_ref())?;
        }
        let what = format!("partition {}", self.date);
        let batch = conform(&self.table.name, &what, self.base.schema(), batch, &[])?;
        let index = batch
            .schema()
            .index_of(&self.partition_column)
            .expect("conformed to the table schema");
        self.check_partition_values(batch.column(index).as_ref())?;
        Ok(batch)
    }

    fn check_nulls(&self, array: &dyn Array) -> Result<()> {
        if array.null_count() > 0 {
            return Err(Error::NullPartitionValue {
                table: self.table.name.clone(),
                date: self.date,
                column: self.partition_column.clone(),
                count: array.null_count(),
            });
        }
        Ok(())
    }

    fn check_partition_values(&self, array: &dyn Array) -> Result<()> {
        let column = &self.partition_column;
        let want = crate::dates::to_days(self.date);
        let values = array.as_primitive::<Date32Type>().values();
        let bad = values.iter().filter(|v| **v != want).count();
        if bad == 0 {
            return Ok(());
        }
        let mut examples: Vec<i32> = values.iter().copied().filter(|v| *v != want).collect();
        examples.sort_unstable();
        examples.dedup();
        let examples = examples
            .iter()
            .take(3)
            .map(|d| crate::dates::from_days(*d).to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::RowsOutsidePartition {
            table: self.table.name.clone(),
            date: self.date,
            column: column.clone(),
            count: bad,
            examples,
        })
    }
}
