//! A table: open it, read its snapshots and history, start partition writes.

use std::sync::Arc;

use chrono::NaiveDate;
use futures::{StreamExt, TryStreamExt};

use crate::commit::{Change, CommitInfo, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{
    layout, LogEntry, MirrorChange, MirrorFormat, Operation, PropertiesChange, RootManifest,
    RunInfo, TableProperties, FORMAT_VERSION,
};
use crate::handle::TableInner;
use crate::log::Created;
use crate::names::{validate_run_id, validate_table_name};
use crate::options::TableOptions;
use crate::schema::{SchemaChange, TableSchema};
use crate::snapshot::Snapshot;
use crate::storage::StorageLocation;
use crate::writer::{Destination, PartitionWriter};

/// A logbook table.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::{StorageLocation, Table, TableOptions, RunInfo};
/// use logbook_core::schema::TableSchema;
/// let loc = StorageLocation::parse("memory://")?.child("orders")?;
/// let schema = TableSchema::parse_spec("orders", "date:date,amount:int64", "date")?;
/// let table = Table::create(loc, "orders", schema, TableOptions::default()).await?;
/// let date = chrono::NaiveDate::from_ymd_opt(2026, 3, 15).unwrap();
/// let writer = table.replace_partition(date, RunInfo::new("run-1")).await?;
/// let info = writer.commit().await?; // an empty partition: Complete with 0 rows
/// assert_eq!(info.version, 1);
/// assert_eq!(table.latest().await?.partition(date).await?.unwrap().rows, 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.inner.name)
            .field("location", &self.inner.location.uri())
            .finish()
    }
}

impl Table {
    /// Create a table at `location` (version 0). Fails with `TableExists` if
    /// a table is already there.
    pub async fn create(
        location: StorageLocation,
        name: &str,
        schema: TableSchema,
        options: TableOptions,
    ) -> Result<Table> {
        Self::create_with_properties(location, name, schema, TableProperties::default(), options)
            .await
    }

    /// [`Table::create`] with a schedule and chain declared from the start.
    pub async fn create_with_properties(
        location: StorageLocation,
        name: &str,
        schema: TableSchema,
        properties: TableProperties,
        options: TableOptions,
    ) -> Result<Table> {
        validate_table_name(name)?;
        properties.check_mirrors(name)?;
        if properties
            .mirrors()
            .iter()
            .any(|m| m.since != 0 || m.first != 0)
        {
            return Err(Error::InvalidInput {
                table: name.to_string(),
                reason:
                    "a mirror given at creation starts at version 0 (use Mirror::from_creation)"
                        .into(),
            });
        }
        properties.check_columns(name, &schema)?;
        let inner = Arc::new(TableInner::new(name, location, options));
        inner.ensure_put_if_absent().await?;
        let commit_id = inner.options.ids.next_id();
        let root = RootManifest {
            format: FORMAT_VERSION,
            schema,
            months: vec![],
            spans: vec![],
            dimension: None,
            properties,
            retained_from: 0,
            code_version: None,
        };
        let manifest = layout::root_manifest(commit_id);
        inner.put_json(&manifest, &root).await?;
        let now = inner.options.clock.now_millis();
        let entry = LogEntry::unchanged(0, commit_id, now, Operation::CreateTable, manifest);
        // Entry 0 found there (reported existing, or read back after no
        // answer) is ours only if it carries our commit id: a store retrying
        // our own create reports it existing.
        let ours = |found: &[u8]| {
            let found: LogEntry = inner.decode(&layout::log_entry(0), found)?;
            Ok(found.commit_id == commit_id)
        };
        let bytes = inner.encode(&entry)?;
        let mut attempts = 1;
        loop {
            match inner.log.create(0, bytes.clone(), ours).await? {
                Created::Ours => break,
                Created::Theirs(_) => return Err(inner.exists_error()),
                // Did not land (yet): creating it again is safe.
                Created::Absent(_) if attempts < inner.options.max_commit_attempts => attempts += 1,
                Created::Absent(e) => return Err(e),
            }
        }
        inner.write_hint(0).await;
        let created = Snapshot::new(inner.clone(), entry, root);
        crate::mirror::after_commit(&inner, None, &created).await;
        Ok(Table { inner })
    }

    /// Open the table at `location`. Fails with `TableNotFound` if there is none.
    pub async fn open(
        location: StorageLocation,
        name: &str,
        options: TableOptions,
    ) -> Result<Table> {
        validate_table_name(name)?;
        let inner = Arc::new(TableInner::new(name, location, options));
        match inner.log.latest_entry().await? {
            Some((v, entry)) => {
                inner.saw(v);
                if let Some(bytes) = entry {
                    inner.keep_opened_entry(v, bytes);
                }
            }
            None => {
                return Err(Error::TableNotFound {
                    table: name.to_string(),
                    location: inner.location.uri().to_string(),
                })
            }
        }
        Ok(Table { inner })
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Where the table lives.
    pub fn location(&self) -> &StorageLocation {
        &self.inner.location
    }

    /// The latest committed version (probes the log).
    pub async fn latest_version(&self) -> Result<u64> {
        self.inner.latest_version().await
    }

    /// The latest snapshot.
    pub async fn latest(&self) -> Result<Snapshot> {
        let v = self.latest_version().await?;
        self.inner.snapshot(v).await
    }

    /// The newest snapshot this handle has seen (when it was opened, or
    /// since), without probing the log for a later one: what a query that
    /// has just opened the table reads, one round trip fewer than
    /// [`Table::latest`]. On a handle kept for a while it may be far behind
    /// the log: use [`Table::latest`] there.
    pub async fn latest_seen(&self) -> Result<Snapshot> {
        let v = self.inner.last_seen();
        self.inner.snapshot(v).await
    }

    /// The snapshot committed as `version`.
    pub async fn at_version(&self, version: u64) -> Result<Snapshot> {
        self.latest().await?.travel(version).await
    }

    /// The snapshot that was latest at `timestamp_ms` (in-commit time):
    /// the last version committed at or before it.
    pub async fn as_of_timestamp(&self, timestamp_ms: i64) -> Result<Snapshot> {
        let latest = self.latest_version().await?;
        let first = self.inner.read_entry(0).await?;
        if first.timestamp_ms > timestamp_ms {
            return Err(Error::NoVersionAtTime {
                table: self.inner.name.clone(),
                timestamp: chrono::DateTime::from_timestamp_millis(timestamp_ms)
                    .map(|t| t.to_rfc3339())
                    .unwrap_or_else(|| timestamp_ms.to_string()),
            });
        }
        // In-commit timestamps strictly increase, so binary search.
        let (mut lo, mut hi) = (0u64, latest + 1);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.inner.read_entry(mid).await?.timestamp_ms <= timestamp_ms {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.inner.snapshot(latest).await?.travel(lo).await
    }

    /// Every commit, oldest first.
    pub async fn history(&self) -> Result<Vec<LogEntry>> {
        let latest = self.latest_version().await?;
        futures::stream::iter(0..=latest)
            .map(|v| self.inner.read_entry(v))
            .buffered(16)
            .try_collect()
            .await
    }

    /// Commits from `from` (inclusive) to the latest, oldest first.
    pub async fn history_from(&self, from: u64) -> Result<Vec<LogEntry>> {
        let latest = self.latest_version().await?;
        self.inner.entries(from..=latest).try_collect().await
    }

    /// Change the table's schedule or chain declaration: a commit of its own
    /// that changes no data and commutes with partition writes.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
    /// use logbook_core::{PropertiesChange, Warehouse};
    /// use logbook_core::schema::TableSchema;
    /// let wh = Warehouse::open("memory://")?;
    /// let t = wh.create_table("balances", TableSchema::parse_spec("balances", "date:date,n:int64", "date")?).await?;
    /// let change = PropertiesChange { depends_on_previous: Some(true), ..Default::default() };
    /// t.alter(change).await?;
    /// assert!(t.latest().await?.properties().depends_on_previous);
    /// # Ok(()) }
    /// ```
    pub async fn alter(&self, change: PropertiesChange) -> Result<CommitInfo> {
        if change.is_empty() {
            return Err(Error::InvalidInput {
                table: self.inner.name.clone(),
                reason: "nothing to change: give a schedule start, a chain setting, sort columns, bloom filter columns or a format".into(),
            });
        }
        // Only the columns this change names: one dropped since an earlier
        // change named it is ignored by writers, and must not block others.
        let head = self.latest().await?;
        let named = TableProperties {
            sort_by: change.sort_by.clone().unwrap_or_default(),
            bloom_filters: change.bloom_filters.clone().unwrap_or_default(),
            ..Default::default()
        };
        named.check_columns(&self.inner.name, head.schema())?;
        if let Some(format) = change.format {
            let at_head = head.root().format;
            if format > FORMAT_VERSION || format < at_head {
                return Err(Error::InvalidInput {
                    table: self.inner.name.clone(),
                    reason: format!(
                        "cannot move the table from format {at_head} to {format}: \
                         formats go up only, to at most {FORMAT_VERSION}"
                    ),
                });
            }
        }
        let base = head.version();
        let run = RunInfo::new(format!("alter-{}", self.inner.options.ids.next_id()));
        let pending = PendingCommit::new(base, run, Change::Properties(change));
        crate::commit::commit(&self.inner, pending)
            .await
            .map_err(|f| f.error)
    }

    /// Keep exactly the mirrors in `formats` on (an empty list turns every
    /// mirror off): one property commit; turning one on writes its mirror
    /// of the current snapshot. When the mirrors are already as asked,
    /// nothing is committed (the result says `already_committed`, at the
    /// latest version) and they are only caught up. See [`crate::mirror`].
    pub async fn set_mirror(&self, formats: &[MirrorFormat]) -> Result<CommitInfo> {
        let head = self.latest().await?;
        let mut changes = Vec::new();
        for format in MirrorFormat::ALL {
            let on = head.properties().mirror_of(format).is_some();
            match (on, formats.contains(&format)) {
                (false, true) => changes.push(MirrorChange::On {
                    format,
                    first: crate::mirror::next_free_version(&self.inner, format).await?,
                }),
                (true, false) => changes.push(MirrorChange::Off { format }),
                _ => {}
            }
        }
        if changes.is_empty() {
            crate::mirror::sync(&self.inner).await?;
            return Ok(CommitInfo {
                version: head.version(),
                already_committed: true,
                staged: None,
                dropped: vec![],
            });
        }
        self.alter(PropertiesChange {
            mirrors: changes,
            ..Default::default()
        })
        .await
    }

    /// Catch every mirror up with the latest version (what each commit
    /// does after it lands; needed only after a failure or a crash), and
    /// say where each stands.
    pub async fn sync_mirror(&self) -> Result<Vec<crate::mirror::MirrorStatus>> {
        crate::mirror::sync(&self.inner).await
    }

    /// How far each mirror is behind the latest version (mirrors that are
    /// off and left no log are not listed).
    pub async fn mirror_status(&self) -> Result<Vec<crate::mirror::MirrorStatus>> {
        crate::mirror::status(&self.inner).await
    }

    /// Change the schema: add a nullable column, widen a column safely,
    /// rename or drop one. A commit of its own that rewrites no data file;
    /// reads of older partitions adapt by field id. Refused (nothing
    /// committed) with an error naming the column when not allowed.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
    /// use logbook_core::schema::{ColumnType, SchemaChange, TableSchema};
    /// use logbook_core::Warehouse;
    /// let wh = Warehouse::open("memory://")?;
    /// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int32", "date")?).await?;
    /// t.alter_schema(SchemaChange::WidenColumn { name: "n".into(), ty: ColumnType::Int64 }).await?;
    /// assert_eq!(t.latest().await?.schema().spec(), "date:date,n:int64");
    /// # Ok(()) }
    /// ```
    pub async fn alter_schema(&self, change: SchemaChange) -> Result<CommitInfo> {
        let base = self.latest().await?;
        // Validate up front for a clear error; the commit re-applies the
        // change to whatever schema is the head's then.
        base.schema().evolve(&self.inner.name, &change)?;
        let run = RunInfo::new(format!("schema-{}", self.inner.options.ids.next_id()));
        let pending = PendingCommit::new(base.version(), run, Change::Schema(change));
        crate::commit::commit(&self.inner, pending)
            .await
            .map_err(|f| f.error)
    }

    /// Start replacing the partition `date`. Nothing is visible until
    /// [`PartitionWriter::commit`]; the write conflicts with any other commit
    /// to the same date made after the snapshot it starts from.
    pub async fn replace_partition(
        &self,
        date: NaiveDate,
        run: RunInfo,
    ) -> Result<PartitionWriter> {
        self.start_write(date, run, Destination::MainLine).await
    }

    /// Start replacing the partition `date` in `destination`: the main line
    /// (as [`Table::replace_partition`]) or a named stage, opened (created
    /// if needed) first, as [`Table::stage`] does.
    pub async fn write_partition(
        &self,
        date: NaiveDate,
        run: RunInfo,
        destination: Destination,
    ) -> Result<PartitionWriter> {
        self.check_date(date)?;
        if let Destination::Stage(name) = &destination {
            self.stage(name).await?;
        }
        self.start_write(date, run, destination).await
    }

    /// Partition dates lie in years 0000 to 9999: manifests are keyed by
    /// `YYYY-MM` text, whose order is date order only there.
    fn check_date(&self, date: NaiveDate) -> Result<()> {
        if (0..=9999).contains(&chrono::Datelike::year(&date)) {
            return Ok(());
        }
        Err(Error::InvalidInput {
            table: self.inner.name.clone(),
            reason: format!(
                "partition date {date} is outside 0000-01-01 to 9999-12-31; nothing was written"
            ),
        })
    }

    /// A writer for `date` whose run and destination are fixed from here.
    pub(crate) async fn start_write(
        &self,
        date: NaiveDate,
        run: RunInfo,
        destination: Destination,
    ) -> Result<PartitionWriter> {
        self.check_date(date)?;
        validate_run_id(&run.run_id)?;
        let base = self.latest().await?;
        let mut writer = PartitionWriter::new(self.inner.clone(), base, date, run, destination)?;
        writer.announce().await;
        Ok(writer)
    }
}
