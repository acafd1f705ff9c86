//! The on-storage format: log entries and manifests (JSON), and where they live.
//!
//! ```text
//! <table>/_logbook/log/00000000000000000007.json   commit 7 (created with put-if-absent)
//! <table>/_logbook/_last                           best-effort hint: latest version
//! <table>/_logbook/manifests/<attempt-id>/root.json        table schema + one ref per five years
//! <table>/_logbook/manifests/<attempt-id>/span-2025.json   one ref per month of 2025..=2029
//! <table>/_logbook/manifests/<attempt-id>/2026-03.json     the partitions of one month
//! <table>/data/<col>=2026-03-15/<staging-id>/part-00000.parquet
//! ```
//!
//! A commit attempt writes new manifests only for the months it touches,
//! the spans above them and a new root; unchanged months and spans are
//! shared with the previous version. Every path in a manifest is relative to
//! the table root.
//!
//! Format versions: a table keeps the format it was created in until
//! [`PropertiesChange::format`] moves it up; log entries carry their root's
//! format, so a build that reads only older formats refuses the table by
//! name instead of misreading it.
//! - 1: the root lists every month. A commit rewrites the whole list: its
//!   cost grows with the table's age (120 references after ten years of
//!   days, 3,300 after 100,000 days).
//! - 2: the root lists five-year spans, each span its months (at most 60).
//!   A commit writes the months it touches, their spans and the root; the
//!   root holds one reference per five years. Month manifests are the same
//!   in both.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Result;
use crate::schema::TableSchema;

/// The newest format this build reads, and the one it creates tables in.
pub const FORMAT_VERSION: u32 = 2;

/// The format of a log entry that is one table's part of a multi-table
/// publish (it carries [`LogEntry::txn`]). Its own fields describe a commit
/// that changes nothing, so that nothing reads the publish before its
/// decision; builds older than this refuse the entry by name instead of
/// building on that no-op. Roots stay at [`FORMAT_VERSION`].
pub const ENTRY_FORMAT_TXN: u32 = 3;

/// The format of a part built on a rival attempt's undecided part (it
/// carries a non-empty [`TxnPart::over`]): a build that ignored `over`
/// would read it as the state before both parts even once the rival is
/// committed, so builds older than this refuse it by name.
pub const ENTRY_FORMAT_STACKED: u32 = 4;

/// The first format whose root lists spans instead of months.
pub const FORMAT_SPANS: u32 = 2;

/// How many years a span of format 2 covers (from a multiple of this).
pub const SPAN_YEARS: i32 = 5;

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Created the table (version 0).
    CreateTable,
    /// Replaced whole partitions (the dates listed in the entry).
    ReplacePartitions,
    /// Changed a dimension's validity intervals (see `affected`).
    ApplyDimension,
    /// Changed the table's properties (schedule, chain); no data changed.
    SetProperties,
    /// Published a named stage: every staged date replaced in one commit.
    PublishStage,
    /// Rewrote small files into larger ones; no data changed.
    Compact,
    /// Moved the oldest version time travel can reach; no data changed.
    Expire,
    /// Recorded what a vacuum deleted; no data changed.
    Vacuum,
    /// Changed the schema (see `change`); no data file rewritten.
    AlterSchema,
    /// Restated a decided multi-table publish part as a plain entry, so
    /// readers of the head read no decision; no data changed.
    Seal,
}

impl Operation {
    /// Does a commit of this kind leave every partition's rows unchanged?
    /// Such commits never conflict with, or make stale, anything.
    pub fn data_unchanged(self) -> bool {
        matches!(
            self,
            Operation::SetProperties
                | Operation::Compact
                | Operation::Expire
                | Operation::Vacuum
                | Operation::AlterSchema
                | Operation::Seal
        )
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operation::CreateTable => "create",
            Operation::ReplacePartitions => "replace",
            Operation::ApplyDimension => "apply",
            Operation::SetProperties => "alter",
            Operation::PublishStage => "publish",
            Operation::Compact => "compact",
            Operation::Expire => "expire",
            Operation::Vacuum => "vacuum",
            Operation::AlterSchema => "schema",
            Operation::Seal => "seal",
        })
    }
}

/// Who wrote a commit and for which logical date.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Identifies one run; re-submitting a run id that committed is a no-op.
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_date: Option<NaiveDate>,
    /// How dimensions were resolved, for runs that read through a run context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<DimensionMode>,
    /// What the run read (lineage).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRead>,
    /// The query text, for runs defined by SQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Production or backfill (`None`: written before run classes; a
    /// writer records its class, see [`RunClass`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<RunClass>,
}

/// Which kind of run a write is, for the warehouse's run budget
/// (`crate::budget`): production runs go first and never wait for a slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunClass {
    /// A scheduled run of today's date: a write outside any stage that no
    /// backfill launched.
    #[default]
    Production,
    /// A run launched by `logbook backfill`, or any write into a stage.
    Backfill,
}

impl std::fmt::Display for RunClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunClass::Production => "production",
            RunClass::Backfill => "backfill",
        })
    }
}

impl std::str::FromStr for RunClass {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "production" => Ok(RunClass::Production),
            "backfill" => Ok(RunClass::Backfill),
            other => Err(format!(
                "unknown run class {other:?}: expected production or backfill"
            )),
        }
    }
}

/// How a run resolves dimension tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DimensionMode {
    /// Rows valid at the run's logical date: the "corrected original".
    #[serde(rename = "as-of")]
    AsOf,
    /// Today's rows: a "restated" history.
    #[serde(rename = "current")]
    Current,
}

impl std::fmt::Display for DimensionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DimensionMode::AsOf => "as-of",
            DimensionMode::Current => "current",
        })
    }
}

impl std::str::FromStr for DimensionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "as-of" | "asof" | "as_of" => Ok(DimensionMode::AsOf),
            "current" => Ok(DimensionMode::Current),
            other => Err(format!(
                "unknown dimension mode {other:?}; use as-of or current"
            )),
        }
    }
}

/// One input a run read: the table and the version it read; for
/// date-partitioned inputs the dates the scan found and the dates its
/// filters asked for; for dimensions the dates their rows were resolved at.
///
/// Staleness is judged from both sides of a read: a date found is stale
/// when it is replaced, and a date asked for but not found when it lands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRead {
    pub table: String,
    pub version: u64,
    /// Date-partitioned inputs: the partitions the scans read after pruning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dates: Option<Vec<NaiveDate>>,
    /// Date-partitioned inputs: what the scans' filters allowed, found or
    /// not (one span per distinct scan). Empty in runs recorded before
    /// logbook kept it: then only `dates` is judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked: Vec<DateSpan>,
    /// True for dimension (SCD2) inputs.
    #[serde(default)]
    pub dimension: bool,
    /// Dimensions: the business dates the rows were resolved at (the run's
    /// logical date, or the date an `asof()` named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub as_of: Vec<NaiveDate>,
    /// Dimensions: rows were read without a date (current rows, or the
    /// whole history), so any change to the dimension matters.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undated: bool,
    /// A run inside a stage: the stage it read the table as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The dates read from that stage, each with the staged run that wrote
    /// it: such a date stays fresh while the table (staged, or published
    /// since) holds that run's partition there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub staged: BTreeMap<NaiveDate, String>,
}

/// The dates a scan's filters allowed on a partition column: `from..=to`
/// (either end open) and, when the filters listed dates, only those. The
/// default span is every date.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DateSpan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<NaiveDate>,
    /// Inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<NaiveDate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<NaiveDate>>,
}

impl DateSpan {
    /// Does the span allow `date`?
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.from.is_none_or(|f| date >= f)
            && self.to.is_none_or(|t| date <= t)
            && self.only.as_ref().is_none_or(|o| o.contains(&date))
    }
}

impl RunInfo {
    /// A run record with just an id.
    pub fn new(run_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            ..Self::default()
        }
    }
}

/// One numbered commit in `_logbook/log/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub format: u32,
    pub version: u64,
    /// Unique per commit attempt: how a writer recognises its own entry after
    /// an ambiguous put.
    pub commit_id: Uuid,
    /// In-commit timestamp, ms since the epoch; strictly increasing along the log.
    pub timestamp_ms: i64,
    pub operation: Operation,
    /// The root manifest of the snapshot this commit creates.
    pub manifest: String,
    /// Partitions this commit replaced.
    #[serde(default)]
    pub dates: Vec<NaiveDate>,
    #[serde(default)]
    pub rows_added: u64,
    #[serde(default)]
    pub files_added: u64,
    #[serde(default)]
    pub files_removed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// For dimension commits: the business dates whose resolved rows changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected: Option<DateRange>,
    /// For schema changes: what changed, e.g. `add column tip:float64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// The newest multi-table publish this version holds, and the version
    /// of this table its part landed as: what a reader at an earlier
    /// warehouse point steps back over (`publish` module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<PublishMark>,
    /// Set on one table's part of a multi-table publish: what it commits
    /// once the warehouse decides the publish. The entry's other fields
    /// describe the version before (a commit changing nothing) until then,
    /// and for good if the publish is aborted. Entries as read
    /// ([`crate::Table::history`], snapshots) are resolved: a committed
    /// part shows its dates and manifest there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<TxnPart>,
}

impl LogEntry {
    /// An entry that changes no data: no dates, nothing added or removed,
    /// no run, not a publish part.
    pub(crate) fn unchanged(
        version: u64,
        commit_id: Uuid,
        timestamp_ms: i64,
        operation: Operation,
        manifest: String,
    ) -> Self {
        Self {
            format: FORMAT_VERSION,
            version,
            commit_id,
            timestamp_ms,
            operation,
            manifest,
            dates: vec![],
            rows_added: 0,
            files_added: 0,
            files_removed: 0,
            run: None,
            affected: None,
            change: None,
            publish: None,
            txn: None,
        }
    }
}

/// Where a version stands among multi-table publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishMark {
    /// The publish's number in the warehouse's publish log.
    pub seq: u64,
    /// The version of this table that holds its part.
    pub version: u64,
}

/// One table's part of a multi-table publish: the commit it becomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnPart {
    /// The publish's number in the warehouse's publish log: the decision
    /// for it is entry `seq` there.
    pub seq: u64,
    /// The publish attempt; the decision at `seq` commits this part only
    /// if it names this id.
    pub id: Uuid,
    /// The stage published.
    pub stage: String,
    /// The root manifest of the snapshot the part commits.
    pub manifest: String,
    pub dates: Vec<NaiveDate>,
    pub rows_added: u64,
    pub files_added: u64,
    pub files_removed: u64,
    /// The undecided parts of the same publish number this part was built
    /// on, oldest first (publishers racing for one number, whose parts
    /// exclude each other: one decision commits at most one of them). If
    /// the decision commits one of those, this part reads as that one's
    /// snapshot (see `publish` module, "Racing publishers").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over: Vec<StackedOn>,
    /// How this build resolved the part (never stored).
    #[serde(skip)]
    pub state: TxnState,
}

/// An undecided part a [`TxnPart`] was built on: what the version holds
/// if the decision commits that part instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackedOn {
    /// The part's publish attempt.
    pub id: Uuid,
    /// The stage it publishes.
    pub stage: String,
    /// The version it landed as.
    pub version: u64,
    /// The root manifest it commits.
    pub manifest: String,
}

/// What the warehouse decided for a [`TxnPart`], as far as a reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxnState {
    /// No decision yet (or not looked up): the entry reads as the no-op.
    #[default]
    Pending,
    /// Published: the entry reads as the part's commit.
    Committed,
    /// Aborted, or the publish log's `seq` holds another publish: the
    /// entry is the no-op for good.
    Void,
}

pub use crate::dates::DateRange;

/// The root of one snapshot: the schema and one reference per span of
/// months (format 2) or per month (format 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootManifest {
    pub format: u32,
    pub schema: TableSchema,
    /// Format 1: every month, sorted. Empty in format 2 (always written,
    /// since format 1 readers require it), and for dimensions.
    pub months: Vec<MonthRef>,
    /// Format 2: every five-year span holding a partition, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<SpanRef>,
    /// A dimension's files (it is not partitioned by date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<DimensionFiles>,
    #[serde(default, skip_serializing_if = "TableProperties::is_default")]
    pub properties: TableProperties,
    /// The oldest version time travel may read (moved forward by expiry).
    #[serde(default)]
    pub retained_from: u64,
    /// Format 2: the code version of the newest commit that wrote
    /// partitions recording one (the largest, when one commit wrote
    /// several): what `status` judges a partition's code version against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_version: Option<String>,
}

/// What a table declares about its schedule, used to compute partition states.
///
/// ```
/// use logbook_core::TableProperties;
/// let p = TableProperties::default();
/// assert!(p.schedule_start.is_none() && !p.depends_on_previous);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProperties {
    /// The first logical date of the table's daily schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_start: Option<NaiveDate>,
    /// Each date reads the previous date's partition (a running balance), so
    /// recommitting a date makes every later date stale.
    #[serde(default)]
    pub depends_on_previous: bool,
    /// The Delta Lake mirror, when on: a transaction log in another format
    /// kept beside logbook's, so that other engines read the table (see the
    /// `mirror` module). Its `format` is [`MirrorFormat::Delta`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Mirror>,
    /// The Iceberg mirror, when on (its `format` is
    /// [`MirrorFormat::Iceberg`]). A field of its own, not a second value
    /// in `mirror`: builds from before it ignore an unknown field but would
    /// refuse the whole table on an unknown format in `mirror`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iceberg_mirror: Option<Mirror>,
    /// Field ids of the columns each row group is sorted by (ascending,
    /// nulls first), so that a row group's and a page's bounds are narrow
    /// and filters on them skip most of the data. Set by name with
    /// [`TableProperties::with_sort_by`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sort_by: Vec<u32>,
    /// Field ids of the columns whose data files carry a bloom filter, so
    /// that an equality or `IN` lookup skips row groups that cannot hold
    /// the value. Set by name with [`TableProperties::with_bloom_filters`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bloom_filters: Vec<u32>,
}

impl TableProperties {
    /// The mirrors that are on, Delta first.
    pub fn mirrors(&self) -> Vec<Mirror> {
        self.mirror.into_iter().chain(self.iceberg_mirror).collect()
    }

    /// The mirror in `format`, if it is on.
    pub fn mirror_of(&self, format: MirrorFormat) -> Option<Mirror> {
        match format {
            MirrorFormat::Delta => self.mirror,
            MirrorFormat::Iceberg => self.iceberg_mirror,
        }
    }

    /// Put `mirror` in the field of its format (`None` turns `format` off).
    pub fn set_mirror_of(&mut self, format: MirrorFormat, mirror: Option<Mirror>) {
        match format {
            MirrorFormat::Delta => self.mirror = mirror,
            MirrorFormat::Iceberg => self.iceberg_mirror = mirror,
        }
    }

    /// These properties with the mirrors in `formats` on from the table's
    /// creation (for a create; later, [`crate::Table::set_mirror`]).
    pub fn with_mirrors(mut self, formats: &[MirrorFormat]) -> Self {
        for &format in formats {
            self.set_mirror_of(format, Some(Mirror::from_creation(format)));
        }
        self
    }

    /// Each mirror sits in the field of its own format, else an error
    /// naming the table (properties built by hand).
    pub fn check_mirrors(&self, table: &str) -> Result<()> {
        for (field, mirror, format) in [
            ("mirror", self.mirror, MirrorFormat::Delta),
            ("iceberg_mirror", self.iceberg_mirror, MirrorFormat::Iceberg),
        ] {
            if let Some(m) = mirror.filter(|m| m.format != format) {
                return Err(crate::error::Error::InvalidInput {
                    table: table.to_string(),
                    reason: format!(
                        "properties: `{field}` holds a {} mirror; it takes only {format} (use TableProperties::set_mirror_of)",
                        m.format
                    ),
                });
            }
        }
        Ok(())
    }

    /// Sort each row group by the columns `names` of table `table`, whose
    /// schema is `schema`.
    pub fn with_sort_by(
        mut self,
        table: &str,
        schema: &TableSchema,
        names: &[&str],
    ) -> Result<Self> {
        self.sort_by = schema.field_ids(table, names, "sort by")?;
        Ok(self)
    }

    /// Every sort and bloom filter column is a column of `schema`, else an
    /// error naming the field id (ids set by hand, not by name).
    pub fn check_columns(&self, table: &str, schema: &TableSchema) -> Result<()> {
        for (what, ids) in [
            ("sort by", &self.sort_by),
            ("bloom filter", &self.bloom_filters),
        ] {
            if let Some(id) = ids
                .iter()
                .find(|id| !schema.columns.iter().any(|c| c.id == **id))
            {
                return Err(crate::error::Error::InvalidSchema {
                    table: table.to_string(),
                    reason: format!(
                        "{what}: no column has field id {id} (columns: {})",
                        schema.spec()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Write bloom filters for the columns `names` of table `table`.
    pub fn with_bloom_filters(
        mut self,
        table: &str,
        schema: &TableSchema,
        names: &[&str],
    ) -> Result<Self> {
        self.bloom_filters = schema.field_ids(table, names, "bloom filter")?;
        Ok(self)
    }
}

/// A mirror that is on: which format, and how its versions map to logbook's.
/// Every logbook commit from `since` on has exactly one mirror commit:
/// logbook version `since + k` is mirror version `first + k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirror {
    /// The format of the mirror's log.
    pub format: MirrorFormat,
    /// The logbook version that turned the mirror on (or created the table).
    pub since: u64,
    /// The mirror version that holds the snapshot of `since` (0 for a new
    /// mirror; after a mirror was off for a while, the next free version).
    pub first: u64,
}

impl Mirror {
    /// A mirror on from the table's creation (for [`TableProperties`] given
    /// to a create; later, [`crate::Table::set_mirror`] turns one on).
    pub fn from_creation(format: MirrorFormat) -> Self {
        Self {
            format,
            since: 0,
            first: 0,
        }
    }

    /// The mirror version of logbook version `version`, if it is mirrored.
    pub fn mirror_version(&self, version: u64) -> Option<u64> {
        version.checked_sub(self.since).map(|k| self.first + k)
    }

    /// The logbook version that mirror version `mirror_version` holds.
    pub fn logbook_version(&self, mirror_version: u64) -> Option<u64> {
        mirror_version
            .checked_sub(self.first)
            .map(|k| self.since + k)
    }
}

/// The formats logbook can mirror its log into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MirrorFormat {
    /// A Delta Lake `_delta_log/` at the table root.
    Delta,
    /// Apache Iceberg (spec v2) table metadata in `metadata/`.
    Iceberg,
}

impl MirrorFormat {
    /// Every format, in the order mirrors are written and shown.
    pub const ALL: [MirrorFormat; 2] = [MirrorFormat::Delta, MirrorFormat::Iceberg];

    /// A list such as `delta,iceberg` (or `none`: no mirror), as `--mirror`
    /// and pylogbook take it; duplicates are dropped.
    pub fn parse_list(list: &str) -> Result<Vec<MirrorFormat>, String> {
        if list.trim() == "none" {
            return Ok(vec![]);
        }
        let mut out: Vec<MirrorFormat> = Vec::new();
        for part in list.split(',') {
            let f: MirrorFormat = part.trim().parse()?;
            if !out.contains(&f) {
                out.push(f);
            }
        }
        Ok(out)
    }
}

impl std::str::FromStr for MirrorFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "delta" => Ok(MirrorFormat::Delta),
            "iceberg" => Ok(MirrorFormat::Iceberg),
            other => Err(format!(
                "unknown mirror format {other:?}; use delta, iceberg or delta,iceberg"
            )),
        }
    }
}

impl std::fmt::Display for MirrorFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MirrorFormat::Delta => "delta",
            MirrorFormat::Iceberg => "iceberg",
        })
    }
}

impl TableProperties {
    fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// A change to some of a table's properties (unset fields stay as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropertiesChange {
    pub schedule_start: Option<NaiveDate>,
    pub depends_on_previous: Option<bool>,
    /// Turn mirrors on or off (formats not named stay as they are).
    pub mirrors: Vec<MirrorChange>,
    /// New sort columns by field id (empty: unsorted). Files written
    /// before keep their order.
    pub sort_by: Option<Vec<u32>>,
    /// New bloom filter columns by field id (empty: none).
    pub bloom_filters: Option<Vec<u32>>,
    /// Move the table's metadata up to this format version (see the module
    /// doc; at most [`FORMAT_VERSION`], never down). Builds that read only
    /// older formats then refuse the table.
    pub format: Option<u32>,
}

/// Turning a mirror on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorChange {
    /// On, in `format`, with `first` the mirror version that will hold
    /// this commit's snapshot (the one after what the mirror's log holds).
    On { format: MirrorFormat, first: u64 },
    /// Off: the mirror's log stays as it is and no longer follows the table.
    Off { format: MirrorFormat },
}

impl PropertiesChange {
    /// `properties` with this change applied by the commit of `version`.
    pub fn apply(&self, properties: &TableProperties, version: u64) -> TableProperties {
        let mut out = TableProperties {
            schedule_start: self.schedule_start.or(properties.schedule_start),
            depends_on_previous: self
                .depends_on_previous
                .unwrap_or(properties.depends_on_previous),
            mirror: properties.mirror,
            iceberg_mirror: properties.iceberg_mirror,
            sort_by: self
                .sort_by
                .clone()
                .unwrap_or_else(|| properties.sort_by.clone()),
            bloom_filters: self
                .bloom_filters
                .clone()
                .unwrap_or_else(|| properties.bloom_filters.clone()),
        };
        for change in &self.mirrors {
            let (format, mirror) = match *change {
                MirrorChange::Off { format } => (format, None),
                MirrorChange::On { format, first } => (
                    format,
                    // Turning on a mirror that is on keeps its version mapping.
                    Some(properties.mirror_of(format).unwrap_or(Mirror {
                        format,
                        since: version,
                        first,
                    })),
                ),
            };
            out.set_mirror_of(format, mirror);
        }
        out
    }

    /// True if the change sets nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The data of a dimension table as of one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimensionFiles {
    /// The version that last changed the dimension.
    pub version: u64,
    pub rows: u64,
    pub files: Vec<DataFile>,
    /// Format 2: the latest commit that changed the rows at each business
    /// date (`None` in format 1, or once too long: see
    /// [`crate::change_index`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::change_index::ChangeIndex>,
}

/// A format 2 root's pointer to the manifest of one span of months.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanRef {
    /// The span's first year (a multiple of [`SPAN_YEARS`]), `YYYY`.
    pub span: String,
    pub path: String,
    pub partitions: u64,
    pub rows: u64,
    pub files: u64,
}

/// The months of one span that hold a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanManifest {
    pub span: String,
    /// Sorted by month.
    pub months: Vec<MonthRef>,
}

/// A root or span manifest's pointer to the manifest of one month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonthRef {
    /// `YYYY-MM`.
    pub month: String,
    pub path: String,
    pub partitions: u32,
    pub rows: u64,
    pub files: u64,
}

/// The partitions of one month.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonthManifest {
    pub month: String,
    /// Sorted by date.
    pub partitions: Vec<PartitionEntry>,
}

/// One partition as of a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionEntry {
    pub date: NaiveDate,
    /// The version that last replaced this partition.
    pub version: u64,
    pub commit_id: Uuid,
    pub rows: u64,
    pub files: Vec<DataFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// The schema version the partition was written under.
    #[serde(default)]
    pub schema_version: u32,
    /// The last [`RUN_RETRY_WINDOW`] earlier runs that wrote this date, oldest
    /// first, so that a late retry of a superseded run is recognised and never
    /// overwrites a newer one. Bounded, like Delta's transaction-id retention,
    /// so that a date rewritten many times does not make commits grow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_runs: Vec<RunRef>,
}

/// What `logbook partitions --json` (and pylogbook's `partitions()`) shows
/// of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionSummary {
    pub date: NaiveDate,
    pub rows: u64,
    pub files: usize,
    pub bytes: u64,
    pub version: u64,
    pub run_id: Option<String>,
    pub code_version: Option<String>,
    /// `as-of`, `current`, or null when written without a run context.
    pub dimensions: Option<DimensionMode>,
    /// Production or backfill, when the run recorded it.
    pub class: Option<RunClass>,
    pub inputs: Vec<InputRead>,
}

impl From<PartitionEntry> for PartitionSummary {
    fn from(p: PartitionEntry) -> Self {
        Self {
            date: p.date,
            rows: p.rows,
            files: p.files.len(),
            bytes: p.files.iter().map(|f| f.size).sum(),
            version: p.version,
            run_id: p.run.as_ref().map(|r| r.run_id.clone()),
            code_version: p.run.as_ref().and_then(|r| r.code_version.clone()),
            dimensions: p.run.as_ref().and_then(|r| r.dimensions),
            class: p.run.as_ref().and_then(|r| r.class),
            inputs: p.run.map(|r| r.inputs).unwrap_or_default(),
        }
    }
}

/// How many superseded runs of a date are remembered for idempotency.
pub const RUN_RETRY_WINDOW: usize = 16;

/// A run that once wrote a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRef {
    pub run_id: String,
    pub version: u64,
}

impl PartitionEntry {
    /// The version at which `run_id` wrote this partition, if it ever did.
    pub fn version_written_by(&self, run_id: &str) -> Option<u64> {
        match &self.run {
            Some(r) if r.run_id == run_id => Some(self.version),
            _ => self
                .earlier_runs
                .iter()
                .rev()
                .find(|r| r.run_id == run_id)
                .map(|r| r.version),
        }
    }
}

/// One Parquet data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// Relative to the table root.
    pub path: String,
    pub size: u64,
    pub rows: u64,
    /// Per-column statistics keyed by field id, taken from the file's footer
    /// when it was written (empty for files written before logbook kept
    /// them). Mirrors copy them so other engines can skip files.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<u32, ColumnStats>,
}

impl DataFile {
    /// A file without column statistics.
    pub fn new(path: impl Into<String>, size: u64, rows: u64) -> Self {
        Self {
            path: path.into(),
            size,
            rows,
            stats: BTreeMap::new(),
        }
    }
}

/// What one file's footer says about one column. `min` and `max` are bounds
/// (every value lies within them), in the JSON form Delta statistics use:
/// numbers, strings, and dates as `YYYY-MM-DD`. They are left out when the
/// footer has no exact bound or the type has no comparable JSON form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// No value of the column in the file is smaller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<serde_json::Value>,
    /// No value of the column in the file is larger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<serde_json::Value>,
    /// How many rows hold null.
    pub nulls: u64,
}

/// The `YYYY-MM` month key of a date.
pub fn month_key(date: NaiveDate) -> String {
    format!("{:04}-{:02}", date.year(), date.month())
}

/// The key of the span holding `date`: the span's first year, `YYYY`.
pub(crate) fn span_key(date: NaiveDate) -> String {
    format!("{:04}", date.year() - date.year().rem_euclid(SPAN_YEARS))
}

/// The key of the span holding month `month` (`YYYY-MM`), if it is one.
pub(crate) fn span_key_of_month(month: &str) -> Option<String> {
    NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d")
        .ok()
        .map(span_key)
}

/// Relative paths of logbook's own objects within a table.
pub(crate) mod layout {
    use uuid::Uuid;

    pub const META_DIR: &str = "_logbook";
    pub const LOG_DIR: &str = "_logbook/log";
    pub const LAST_HINT: &str = "_logbook/_last";

    pub fn log_entry(version: u64) -> String {
        format!("{LOG_DIR}/{version:020}.json")
    }

    /// Each commit attempt writes its manifests under a fresh id, so a
    /// retry never overwrites what an attempt with an unknown outcome wrote.
    pub fn root_manifest(attempt_id: Uuid) -> String {
        format!("{META_DIR}/manifests/{attempt_id}/root.json")
    }

    pub fn month_manifest(attempt_id: Uuid, month: &str) -> String {
        format!("{META_DIR}/manifests/{attempt_id}/{month}.json")
    }

    pub fn span_manifest(attempt_id: Uuid, span: &str) -> String {
        format!("{META_DIR}/manifests/{attempt_id}/span-{span}.json")
    }

    pub fn staging_dir(
        partition_column: &str,
        date: chrono::NaiveDate,
        staging_id: Uuid,
    ) -> String {
        format!("data/{partition_column}={date}/{staging_id}")
    }

    pub const RUNNING_DIR: &str = "_logbook/running";

    /// Rewritten by vacuum to learn the store's clock.
    pub const STORE_CLOCK: &str = "_logbook/clock";

    /// The intent marker of one writer of `date` (`leaf`: its staging id).
    pub fn running_marker(date: chrono::NaiveDate, run_id: &str, leaf: &str) -> String {
        format!("{RUNNING_DIR}/{date}/{run_id}/{leaf}.json")
    }

    pub const CLAIMS_DIR: &str = "_logbook/claims";

    /// The claim on the directories of the marker `running_marker(date,
    /// run_id, leaf)` while its heartbeat was `heartbeat_ms` (see
    /// `intent::claim`).
    pub fn marker_claim(
        date: chrono::NaiveDate,
        run_id: &str,
        leaf: &str,
        heartbeat_ms: i64,
    ) -> String {
        format!("{CLAIMS_DIR}/{date}/{run_id}/{leaf}-{heartbeat_ms}.json")
    }

    pub const STAGES_DIR: &str = "_logbook/stages";

    /// The warehouse's publish log (relative to the warehouse root, not a
    /// table's): decision `seq` of every multi-table publish, created with
    /// put-if-absent.
    pub const PUBLISHES_DIR: &str = "_logbook/publishes";
    /// Best-effort hint: the latest publish decided.
    pub const PUBLISHES_HINT: &str = "_logbook/publishes/_last";

    /// The warehouse's run budget (relative to the warehouse root): a log
    /// of settings versions, created with put-if-absent.
    pub const BUDGET_DIR: &str = "_logbook/budget";
    /// Best-effort hint: the latest budget version.
    pub const BUDGET_HINT: &str = "_logbook/budget/_last";
    /// Backfill slots (relative to the warehouse root): generation `gen`
    /// of slot `k` is a lease, created with put-if-absent.
    pub const SLOTS_DIR: &str = "_logbook/slots";
    /// Heavy-step slots (relative to the warehouse root), kept as backfill
    /// slots are.
    pub const HEAVY_DIR: &str = "_logbook/heavy";
    /// Live and waiting production runs (relative to the warehouse root).
    pub const PRODUCTION_DIR: &str = "_logbook/production";

    /// A stage's own record.
    pub fn stage_info(name: &str) -> String {
        format!("{STAGES_DIR}/{name}/stage.json")
    }

    /// Where a stage records its staged dates.
    pub fn stage_dates(name: &str) -> String {
        format!("{STAGES_DIR}/{name}/dates")
    }

    /// One staged date of a stage.
    pub fn stage_date(name: &str, date: chrono::NaiveDate) -> String {
        format!("{STAGES_DIR}/{name}/dates/{date}.json")
    }

    /// Where one version of a dimension's rows is staged.
    pub fn dimension_dir(staging_id: Uuid) -> String {
        format!("data/{staging_id}")
    }
}
