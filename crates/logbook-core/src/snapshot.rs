//! One committed version of a table: its schema and partitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use chrono::NaiveDate;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::{
    month_key, span_key, LogEntry, MonthManifest, MonthRef, PartitionEntry, RootManifest,
    SpanManifest, SpanRef,
};
use crate::handle::TableInner;
use crate::reader::{read_files, ReadOptions, ScanHooks};
use crate::schema::TableSchema;

/// An immutable view of a table at one version.
#[derive(Clone)]
pub struct Snapshot {
    table: Arc<TableInner>,
    entry: Arc<LogEntry>,
    root: Arc<RootManifest>,
    /// A stage's partitions laid over this version (`stage/view.rs`).
    staged: Option<Arc<Staged>>,
}

/// The partitions of one stage, as a run inside it reads them: each staged
/// date in place of the version's own.
#[derive(Debug)]
pub(crate) struct Staged {
    pub name: String,
    pub partitions: BTreeMap<NaiveDate, PartitionEntry>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("table", &self.table.name)
            .field("version", &self.entry.version)
            .finish()
    }
}

impl Snapshot {
    /// The snapshot `entry` committed, remembered by its table handle if
    /// it is the newest the handle has seen.
    pub(crate) fn new(table: Arc<TableInner>, entry: LogEntry, root: RootManifest) -> Self {
        let (entry, root) = (Arc::new(entry), Arc::new(root));
        table.remember(&entry, &root);
        Self {
            table,
            entry,
            root,
            staged: None,
        }
    }

    /// This version with `staged` laid over it.
    pub(crate) fn with_staged(&self, staged: Staged) -> Self {
        Self {
            staged: Some(Arc::new(staged)),
            ..self.clone()
        }
    }

    /// This version's publish part, when it is one not decided yet (it
    /// reads as the version before it until the warehouse decides).
    pub fn undecided_part(&self) -> Option<&crate::format::TxnPart> {
        let pending = crate::format::TxnState::Pending;
        self.entry.txn.as_ref().filter(|t| t.state == pending)
    }

    /// The version whose state this snapshot reads: its own, or for an
    /// undecided part, the version before it and the rival parts it
    /// stands on. A writer's base and a run's lineage record this one, so
    /// that once such a part is decided committed, the commits after the
    /// base include it (its dates conflict, or make readers stale).
    pub fn content_version(&self) -> u64 {
        match self.undecided_part() {
            Some(part) => {
                let lowest = part.over.iter().map(|o| o.version).min();
                lowest
                    .unwrap_or(self.version())
                    .min(self.version())
                    .saturating_sub(1)
            }
            None => self.version(),
        }
    }

    /// The stage this view reads its staged dates from
    /// ([`Snapshot::in_stage`]), if any.
    pub fn stage(&self) -> Option<&str> {
        self.staged.as_ref().map(|s| s.name.as_str())
    }

    /// The run that wrote `date` in this view's stage, when the view reads
    /// the date from the stage.
    pub fn staged_run(&self, date: NaiveDate) -> Option<&str> {
        let staged = self.staged.as_ref()?.partitions.get(&date)?;
        staged.run.as_ref().map(|r| r.run_id.as_str())
    }

    /// The version this snapshot was committed as.
    pub fn version(&self) -> u64 {
        self.entry.version
    }

    /// In-commit timestamp of this version (ms since the epoch).
    pub fn timestamp_ms(&self) -> i64 {
        self.entry.timestamp_ms
    }

    /// The log entry that created this snapshot.
    pub fn entry(&self) -> &LogEntry {
        &self.entry
    }

    /// The format version this snapshot's metadata is written in (see
    /// [`crate::format`]).
    pub fn format(&self) -> u32 {
        self.root.format
    }

    pub(crate) fn root(&self) -> &RootManifest {
        &self.root
    }

    /// The table as it was at `version`, seen from this snapshot, which
    /// should be the head ([`crate::Table::latest`], or
    /// [`crate::Table::latest_seen`] on a handle just opened): no later
    /// than it, and not dropped by an expiry it records. Probes nothing: a
    /// query that has just found a table's head travels from it without
    /// asking the log again (a round trip on an object store).
    ///
    /// Fails with `VersionNotFound` for a version after this snapshot (the
    /// error's `latest` is this snapshot's version) and `VersionExpired`
    /// for one before the oldest it retains.
    pub async fn travel(&self, version: u64) -> Result<Snapshot> {
        if version == self.version() {
            return Ok(self.clone());
        }
        if version > self.version() {
            return Err(Error::VersionNotFound {
                table: self.table.name.clone(),
                version,
                latest: self.version(),
            });
        }
        if version < self.root.retained_from {
            return Err(Error::VersionExpired {
                table: self.table.name.clone(),
                version,
                oldest: self.root.retained_from,
            });
        }
        self.table.snapshot(version).await
    }

    /// The table's schema at this version.
    pub fn schema(&self) -> &TableSchema {
        &self.root.schema
    }

    /// The Arrow schema of rows read from this snapshot.
    pub fn arrow_schema(&self) -> SchemaRef {
        self.root.schema.arrow_schema()
    }

    /// Total rows and files, from the root manifest alone.
    pub fn totals(&self) -> (u64, u64) {
        let months = self.root.months.iter().map(|m| (m.rows, m.files));
        let spans = self.root.spans.iter().map(|s| (s.rows, s.files));
        months
            .chain(spans)
            .fold((0, 0), |(r, f), (rows, files)| (r + rows, f + files))
    }

    /// The root's span references (empty in format 1).
    pub(crate) fn span_refs(&self) -> &[SpanRef] {
        &self.root.spans
    }

    /// The manifest of span `span`, if any partition of it exists.
    pub(crate) async fn span(&self, span: &str) -> Result<Option<Arc<SpanManifest>>> {
        let spans = &self.root.spans;
        match spans.binary_search_by(|s| s.span.as_str().cmp(span)) {
            Ok(i) => Ok(Some(self.table.span(&spans[i].path).await?)),
            Err(_) => Ok(None),
        }
    }

    /// The span manifest at `path`.
    pub(crate) async fn span_at(&self, path: &str) -> Result<Arc<SpanManifest>> {
        self.table.span(path).await
    }

    /// Every month holding a partition, sorted (in format 2, each span's
    /// manifest read once per handle).
    pub(crate) async fn month_refs(&self) -> Result<Vec<MonthRef>> {
        self.month_refs_between(None, None).await
    }

    /// The months holding a partition from `from` to `to` (inclusive;
    /// `None`: unbounded), sorted. In format 2 only the spans overlapping
    /// the range are read.
    async fn month_refs_between(
        &self,
        from: Option<NaiveDate>,
        to: Option<NaiveDate>,
    ) -> Result<Vec<MonthRef>> {
        // Keys are zero-padded years and months: text order is time order.
        let within = |key: &str, lo: &Option<String>, hi: &Option<String>| {
            lo.as_deref().is_none_or(|lo| key >= lo) && hi.as_deref().is_none_or(|hi| key <= hi)
        };
        let (first, last) = (from.map(month_key), to.map(month_key));
        let months: Vec<MonthRef> = if self.root.spans.is_empty() {
            self.root.months.clone()
        } else {
            let (lo, hi) = (from.map(span_key), to.map(span_key));
            let paths: Vec<String> = self
                .root
                .spans
                .iter()
                .filter(|s| within(&s.span, &lo, &hi))
                .map(|s| s.path.clone())
                .collect();
            let spans: Vec<Arc<SpanManifest>> = futures::stream::iter(paths)
                .map(|path| {
                    let table = self.table.clone();
                    async move { table.span(&path).await }
                })
                .buffered(16)
                .try_collect()
                .await?;
            spans
                .iter()
                .flat_map(|s| s.months.iter().cloned())
                .collect()
        };
        Ok(months
            .into_iter()
            .filter(|m| within(&m.month, &first, &last))
            .collect())
    }

    /// The code version of the newest partition write that recorded one:
    /// kept in the root from format 2; in format 1, found among every
    /// partition (the newest partition with a code version).
    pub async fn current_code(&self) -> Result<Option<String>> {
        if self.root.format >= crate::format::FORMAT_SPANS {
            return Ok(self.root.code_version.clone());
        }
        Ok(self
            .partitions()
            .await?
            .into_iter()
            .filter_map(|p| Some((p.version, p.run?.code_version?)))
            .max()
            .map(|(_, code)| code))
    }

    /// The date of the first partition, reading only its span and month.
    pub async fn first_date(&self) -> Result<Option<NaiveDate>> {
        let first = match self.root.spans.first() {
            None => self.root.months.first().cloned(),
            Some(s) => self.table.span(&s.path).await?.months.first().cloned(),
        };
        let main = match first {
            Some(m) => self.month_at(&m).await?.partitions.first().map(|p| p.date),
            None => None,
        };
        // A stage's view also begins at its first staged date.
        let staged = self
            .staged
            .as_ref()
            .and_then(|s| s.partitions.keys().next().copied());
        Ok(main.into_iter().chain(staged).min())
    }

    /// The manifest of `date`'s month, if any partition of it exists.
    pub(crate) async fn month_of(&self, date: NaiveDate) -> Result<Option<Arc<MonthManifest>>> {
        match self.month_path(date).await? {
            Some(path) => Ok(Some(self.table.month(&path).await?)),
            None => Ok(None),
        }
    }

    /// The path of `date`'s month manifest, if any partition of it exists.
    pub(crate) async fn month_path(&self, date: NaiveDate) -> Result<Option<String>> {
        let month = month_key(date);
        let found = |months: &[MonthRef]| {
            months
                .binary_search_by(|m| m.month.as_str().cmp(&month))
                .ok()
                .map(|i| months[i].path.clone())
        };
        Ok(if self.root.spans.is_empty() {
            found(&self.root.months)
        } else {
            match self.span(&span_key(date)).await? {
                Some(span) => found(&span.months),
                None => None,
            }
        })
    }

    /// The manifest `month` points to.
    pub(crate) async fn month_at(&self, month: &MonthRef) -> Result<Arc<MonthManifest>> {
        self.table.month(&month.path).await
    }

    /// Every partition, sorted by date.
    pub async fn partitions(&self) -> Result<Vec<PartitionEntry>> {
        self.partitions_between(None, None).await
    }

    /// The partitions from `from` to `to` (inclusive; `None`: open at that
    /// end), sorted by date, reading only the manifests of that range.
    pub async fn partitions_between(
        &self,
        from: Option<NaiveDate>,
        to: Option<NaiveDate>,
    ) -> Result<Vec<PartitionEntry>> {
        let paths: Vec<String> = self
            .month_refs_between(from, to)
            .await?
            .into_iter()
            .map(|m| m.path)
            .collect();
        let months: Vec<Arc<MonthManifest>> = futures::stream::iter(paths)
            .map(|path| {
                let table = self.table.clone();
                async move { table.month(&path).await }
            })
            .buffered(16)
            .try_collect()
            .await?;
        let within = |d: NaiveDate| from.is_none_or(|f| d >= f) && to.is_none_or(|t| d <= t);
        let mut found: Vec<PartitionEntry> = months
            .iter()
            .flat_map(|m| m.partitions.iter().filter(|p| within(p.date)).cloned())
            .collect();
        if let Some(staged) = &self.staged {
            found.retain(|p| !staged.partitions.contains_key(&p.date));
            found.extend(
                staged
                    .partitions
                    .values()
                    .filter(|p| within(p.date))
                    .cloned(),
            );
            found.sort_by_key(|p| p.date);
        }
        Ok(found)
    }

    /// The partition for `date`, if it was ever committed (and not removed).
    pub async fn partition(&self, date: NaiveDate) -> Result<Option<PartitionEntry>> {
        if let Some(p) = self.staged.as_ref().and_then(|s| s.partitions.get(&date)) {
            return Ok(Some(p.clone()));
        }
        Ok(self.month_of(date).await?.and_then(|m| {
            m.partitions
                .binary_search_by(|p| p.date.cmp(&date))
                .ok()
                .map(|i| m.partitions[i].clone())
        }))
    }

    /// Stream the rows of partition `date`, optionally only some columns.
    /// A partition that does not exist yields no rows.
    pub async fn scan_partition(
        &self,
        date: NaiveDate,
        columns: Option<&[&str]>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let files = self
            .partition(date)
            .await?
            .map(|p| p.files)
            .unwrap_or_default();
        Ok(read_files(
            &self.table,
            &self.root.schema,
            files,
            columns,
            ReadOptions::default(),
            ScanHooks::default(),
        ))
    }

    /// A dimension's files at this version (empty for partitioned tables).
    pub fn dimension_files(&self) -> Vec<crate::format::DataFile> {
        self.root
            .dimension
            .as_ref()
            .map(|d| d.files.clone())
            .unwrap_or_default()
    }

    /// The version that last changed a dimension's rows, as of this
    /// snapshot (`None` for partitioned tables): what a run that read the
    /// dimension depends on, unlike the table version, which also moves for
    /// property or schema changes.
    pub fn dimension_version(&self) -> Option<u64> {
        self.root.dimension.as_ref().map(|d| d.version)
    }

    /// A dimension's change index (format 2; see [`crate::change_index`]).
    pub fn dimension_changes(&self) -> Option<&crate::change_index::ChangeIndex> {
        self.root.dimension.as_ref()?.changes.as_ref()
    }

    /// Stream every row of a dimension (all intervals).
    pub async fn scan_dimension(&self) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        Ok(read_files(
            &self.table,
            &self.root.schema,
            self.dimension_files(),
            None,
            ReadOptions::default(),
            ScanHooks::default(),
        ))
    }

    /// Stream the rows of `files` (which must belong to this table), projected
    /// to `columns`, decoded as `options` say. The query layer uses this
    /// after pruning.
    pub fn scan_files(
        &self,
        files: Vec<crate::format::DataFile>,
        columns: Option<&[&str]>,
        options: ReadOptions,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        read_files(
            &self.table,
            &self.root.schema,
            files,
            columns,
            options,
            ScanHooks::default(),
        )
    }

    /// [`Snapshot::scan_files`] adapting the rows to `schema` (a query that
    /// planned with another version's schema reads with that schema),
    /// skipping what `hooks` prunes and counting what is read.
    pub fn scan_files_as(
        &self,
        schema: &crate::schema::TableSchema,
        files: Vec<crate::format::DataFile>,
        columns: Option<&[&str]>,
        options: ReadOptions,
        hooks: ScanHooks,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        self.files().scan_as(schema, files, columns, options, hooks)
    }

    /// The table's declared schedule and chain, as of this version.
    pub fn properties(&self) -> &crate::format::TableProperties {
        &self.root.properties
    }

    pub(crate) fn table_inner(&self) -> &Arc<TableInner> {
        &self.table
    }

    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    /// All rows of partition `date`, collected.
    pub async fn read_partition(&self, date: NaiveDate) -> Result<Vec<RecordBatch>> {
        self.scan_partition(date, None).await?.try_collect().await
    }
}

impl TableInner {
    /// The snapshot of `version` (its entry and root manifest read, unless
    /// it is the newest this handle has read).
    pub(crate) async fn snapshot(self: &Arc<Self>, version: u64) -> Result<Snapshot> {
        if let Some((entry, root)) = self.newest(version) {
            return Ok(Snapshot {
                table: self.clone(),
                entry,
                root,
                staged: None,
            });
        }
        let entry = self.read_entry(version).await?;
        let root: RootManifest = self.get_json(&entry.manifest).await?;
        self.readable_format(&entry.manifest, root.format)?;
        Ok(Snapshot::new(self.clone(), entry, root))
    }
}
