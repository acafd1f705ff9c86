//! Partition states and their reasons.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{Days, NaiveDate};
use serde::Serialize;

use crate::error::Result;
use crate::format::{DateRange, DimensionMode, InputRead, Operation, PartitionEntry};
use crate::intent::{self, RunMarker};
use crate::lifecycle::check::{check, partition_listing_problems, CheckDepth, Problem};
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::warehouse::Warehouse;

/// The state of one scheduled date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionState {
    /// Never committed.
    Missing,
    /// A write for the date is staged and not committed (its writer's
    /// heartbeat is recent).
    Running,
    /// Committed, and nothing it depends on changed since.
    Complete,
    /// Committed, but something it depends on changed since: see the reasons.
    Stale,
    /// The integrity check found a problem with its files.
    Corrupt,
}

impl PartitionState {
    /// One letter, for calendars on terminals without colour.
    pub fn letter(self) -> char {
        match self {
            PartitionState::Missing => 'M',
            PartitionState::Running => 'R',
            PartitionState::Complete => 'C',
            PartitionState::Stale => 'S',
            PartitionState::Corrupt => 'X',
        }
    }

    /// All states, in display order.
    pub const ALL: [PartitionState; 5] = [
        PartitionState::Complete,
        PartitionState::Stale,
        PartitionState::Missing,
        PartitionState::Running,
        PartitionState::Corrupt,
    ];
}

impl std::fmt::Display for PartitionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PartitionState::Missing => "missing",
            PartitionState::Running => "running",
            PartitionState::Complete => "complete",
            PartitionState::Stale => "stale",
            PartitionState::Corrupt => "corrupt",
        })
    }
}

/// Why a committed partition is stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StaleReason {
    /// The table's current code version differs from the one that wrote it.
    Code {
        written: Option<String>,
        current: String,
    },
    /// An input partition the run read was replaced, or one it asked for
    /// (its filters allowed the date) appeared or disappeared, after the
    /// run read the input at `read_version`.
    Input {
        table: String,
        date: NaiveDate,
        read_version: u64,
        /// The version that made the change (for a date that disappeared:
        /// the input's version when the change was seen).
        replaced_at: u64,
        change: InputChange,
    },
    /// A dimension it read changed for its date (as-of) or at all (current).
    Dimension {
        table: String,
        mode: DimensionMode,
        read_version: u64,
        changed_at: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        affected: Option<DateRange>,
    },
    /// Columns were added after the partition was written: they read as
    /// null there until it is recomputed.
    Schema { columns: Vec<String> },
    /// The table is a chain and the previous date was recommitted after this
    /// one was written (`recommitted_at`), or is itself not complete.
    Previous {
        date: NaiveDate,
        #[serde(skip_serializing_if = "Option::is_none")]
        recommitted_at: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        previous_state: Option<PartitionState>,
    },
}

impl std::fmt::Display for StaleReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleReason::Code { written, current } => write!(
                f,
                "code: written by {} but the table's code is {current}",
                written.as_deref().unwrap_or("an undeclared version")
            ),
            StaleReason::Input {
                table,
                date,
                read_version,
                replaced_at,
                change,
            } => write!(
                f,
                "input: {table} {date} {change} at version {replaced_at} after the run read version {read_version}"
            ),
            StaleReason::Dimension {
                table,
                mode,
                read_version,
                changed_at,
                ..
            } => write!(
                f,
                "dimension: {table} changed at version {changed_at} after the run read version {read_version} ({mode})"
            ),
            StaleReason::Schema { columns } => write!(
                f,
                "schema: column(s) {} added after it was written",
                columns.join(", ")
            ),
            StaleReason::Previous {
                date,
                recommitted_at: Some(v),
                ..
            } => write!(f, "previous: {date} was recommitted at version {v}"),
            StaleReason::Previous {
                date,
                previous_state,
                ..
            } => write!(
                f,
                "previous: {date} is {}",
                previous_state.map_or("not complete".to_string(), |s| s.to_string())
            ),
        }
    }
}

/// How an input date changed after a run read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputChange {
    /// The run read the date; it has been replaced since.
    Replaced,
    /// The run asked for the date and did not find it; it has landed since.
    Appeared,
    /// The run read the date; it is gone since.
    Disappeared,
}

impl std::fmt::Display for InputChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InputChange::Replaced => "was replaced",
            InputChange::Appeared => "landed",
            InputChange::Disappeared => "disappeared",
        })
    }
}

/// The state of one date, with everything that explains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DateStatus {
    pub date: NaiveDate,
    pub state: PartitionState,
    /// Why it is stale (empty otherwise).
    pub reasons: Vec<StaleReason>,
    /// The version that last committed the date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Problems the integrity check found (state `corrupt`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
    /// Writes of the date in progress or abandoned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunningWrite>,
}

/// A write that left an intent marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningWrite {
    #[serde(flatten)]
    pub marker: RunMarker,
    /// Its heartbeat stopped longer ago than the table's running timeout.
    pub abandoned: bool,
}

/// The states of a table's scheduled dates.
#[derive(Debug, Clone, Serialize)]
pub struct TableStatus {
    pub table: String,
    /// The snapshot the states were computed at.
    pub version: u64,
    pub depends_on_previous: bool,
    pub dates: Vec<DateStatus>,
}

impl TableStatus {
    /// How many dates are in `state`.
    pub fn count(&self, state: PartitionState) -> usize {
        self.dates.iter().filter(|d| d.state == state).count()
    }

    /// The status of `date`, if it is in range.
    pub fn get(&self, date: NaiveDate) -> Option<&DateStatus> {
        self.dates
            .binary_search_by(|d| d.date.cmp(&date))
            .ok()
            .map(|i| &self.dates[i])
    }
}

/// The state of every scheduled date of `table` from `from` to `to`
/// (inclusive).
///
/// The range starts by default at the table's schedule start (or its first
/// committed date when it declares none). Chain (`previous`) reasons are
/// computed from the schedule start whatever `from` is. The check used here
/// is the cheap one ([`CheckDepth::Listing`]: files exist with their sizes).
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use chrono::NaiveDate;
/// use logbook_core::lifecycle::{status, PartitionState};
/// use logbook_core::{RunInfo, TableProperties, Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let d = |day| NaiveDate::from_ymd_opt(2026, 3, day).unwrap();
/// let props = TableProperties { schedule_start: Some(d(1)), ..Default::default() };
/// let schema = TableSchema::parse_spec("t", "date:date,n:int64", "date")?;
/// let t = wh.create_table_with_properties("t", schema, props).await?;
/// t.replace_partition(d(2), RunInfo::new("r-2")).await?.commit().await?;
/// let s = status(&wh, "t", None, d(3)).await?;
/// let states: Vec<_> = s.dates.iter().map(|x| x.state).collect();
/// assert_eq!(states, [PartitionState::Missing, PartitionState::Complete, PartitionState::Missing]);
/// # Ok(()) }
/// ```
pub async fn status(
    warehouse: &Warehouse,
    table: &str,
    from: Option<NaiveDate>,
    to: NaiveDate,
) -> Result<TableStatus> {
    status_in(warehouse, table, None, from, to).await
}

/// [`status`] as a run inside `stage` sees the warehouse: the table and
/// every input it read as the stage holds them (staged dates in place of
/// the main line's, [`Snapshot::in_stage`]). After `orders_clean` is
/// re-run in stage S, `revenue`'s dates that read the old rows are Stale
/// here, and those re-run in S from the staged rows are Complete.
pub async fn status_in(
    warehouse: &Warehouse,
    table: &str,
    stage: Option<&str>,
    from: Option<NaiveDate>,
    to: NaiveDate,
) -> Result<TableStatus> {
    status_over(warehouse, table, stage, from, to, false).await
}

/// [`status_in`] over the dates a person asked for: for a table that
/// declares no schedule (and is not a chain), `from` is where the range
/// starts even before its first committed date, so those dates show as
/// Missing (what `logbook backfill --from` runs). A chain without a
/// schedule still starts at its first committed date: an earlier one
/// would make every committed date stale.
pub async fn status_asked(
    warehouse: &Warehouse,
    table: &str,
    stage: Option<&str>,
    from: Option<NaiveDate>,
    to: NaiveDate,
) -> Result<TableStatus> {
    status_over(warehouse, table, stage, from, to, true).await
}

async fn status_over(
    warehouse: &Warehouse,
    table: &str,
    stage: Option<&str>,
    from: Option<NaiveDate>,
    to: NaiveDate,
    asked: bool,
) -> Result<TableStatus> {
    let handle = warehouse.table(table).await?;
    let snap = match stage {
        Some(stage) => handle.latest().await?.in_stage(stage).await?,
        None => handle.latest().await?,
    };
    let props = snap.properties().clone();
    let committed = match props.schedule_start {
        Some(_) => None,
        None => snap.first_date().await?,
    };
    let first = match (props.schedule_start, asked && !props.depends_on_previous) {
        (Some(start), _) => Some(start),
        (None, false) => committed,
        // No schedule declared: from the first date asked for or committed,
        // whichever is earlier (dates asked for are dates to run).
        (None, true) => match (from, committed) {
            (Some(f), Some(c)) => Some(f.min(c)),
            (f, c) => f.or(c),
        },
    };
    let Some(start) = first else {
        return Ok(TableStatus {
            table: table.to_string(),
            version: snap.version(),
            depends_on_previous: props.depends_on_previous,
            dates: vec![],
        });
    };
    // Only the dates shown are read, except in a chain, whose states carry
    // from its first date on.
    let begin = match from {
        Some(from) if !props.depends_on_previous => from.max(start),
        _ => start,
    };
    let parts: BTreeMap<NaiveDate, PartitionEntry> = snap
        .partitions_between(Some(begin), Some(to))
        .await?
        .into_iter()
        .map(|p| (p.date, p))
        .collect();
    let listed: Vec<PartitionEntry> = parts.values().cloned().collect();
    let found = match snap.schema().partition_column() {
        Some(column) => partition_listing_problems(&handle, &listed, column).await?,
        None => check(&handle, &snap, CheckDepth::Listing).await?.problems,
    };
    let mut problems: BTreeMap<NaiveDate, Vec<Problem>> = BTreeMap::new();
    for p in found {
        if let Some(d) = p.date {
            problems.entry(d).or_default().push(p);
        }
    }
    let now = handle.inner.options.clock.now_millis();
    let timeout = handle.inner.options.running_timeout_ms;
    let mut runs: BTreeMap<NaiveDate, Vec<RunningWrite>> = BTreeMap::new();
    for listed in intent::list(&handle.inner).await? {
        let marker = listed.marker;
        if marker.rewrite {
            // Compaction or a dimension change: no date's rows are new.
            continue;
        }
        let abandoned = marker.abandoned(now, timeout);
        runs.entry(marker.date)
            .or_default()
            .push(RunningWrite { marker, abandoned });
    }
    let current_code = snap.current_code().await?;
    let mut inputs = Inputs::new(
        warehouse,
        stage,
        first_dimension_reads(parts.values()),
        input_ranges(parts.values()),
    );
    let mut dates = Vec::new();
    let mut previous: Option<(PartitionState, Option<u64>)> = None;
    let mut date = begin;
    while date <= to {
        let mut status = DateStatus {
            date,
            state: PartitionState::Missing,
            reasons: vec![],
            version: None,
            problems: problems.remove(&date).unwrap_or_default(),
            runs: runs.remove(&date).unwrap_or_default(),
        };
        if let Some(p) = parts.get(&date) {
            status.version = Some(p.version);
            status.reasons = inputs.reasons(p, current_code.as_deref()).await?;
            let added: Vec<String> = snap
                .schema()
                .columns
                .iter()
                .filter(|c| c.added_in > p.schema_version)
                .map(|c| c.name.clone())
                .collect();
            if !added.is_empty() {
                status.reasons.push(StaleReason::Schema { columns: added });
            }
            if props.depends_on_previous {
                if let Some(r) = previous_reason(date, p.version, previous) {
                    status.reasons.push(r);
                }
            }
            status.state = if !status.problems.is_empty() {
                PartitionState::Corrupt
            } else if !status.reasons.is_empty() {
                PartitionState::Stale
            } else {
                PartitionState::Complete
            };
        }
        previous = Some((status.state, status.version));
        // A live writer of the date matters more than what it will replace.
        if status.runs.iter().any(|r| !r.abandoned) {
            status.state = PartitionState::Running;
        }
        if from.is_none_or(|f| date >= f) {
            dates.push(status);
        }
        date = match date.checked_add_days(Days::new(1)) {
            Some(d) => d,
            None => break,
        };
    }
    Ok(TableStatus {
        table: table.to_string(),
        version: snap.version(),
        depends_on_previous: props.depends_on_previous,
        dates,
    })
}

/// The chain reason for a date written at `version`, given the previous
/// date's state and version (`None` for the first scheduled date).
fn previous_reason(
    date: NaiveDate,
    version: u64,
    previous: Option<(PartitionState, Option<u64>)>,
) -> Option<StaleReason> {
    let (state, prev_version) = previous?;
    let prev_date = date.pred_opt()?;
    match prev_version {
        Some(v) if v > version => Some(StaleReason::Previous {
            date: prev_date,
            recommitted_at: Some(v),
            previous_state: None,
        }),
        _ if state != PartitionState::Complete => Some(StaleReason::Previous {
            date: prev_date,
            recommitted_at: None,
            previous_state: Some(state),
        }),
        _ => None,
    }
}

/// Per dimension input: the oldest version any of `parts` read it at.
/// Only later commits can make a read stale, so `status` reads the
/// dimension's log from there, not from the start: its cost follows the
/// changes since the runs, not the dimension's whole history.
fn first_dimension_reads<'p>(
    parts: impl Iterator<Item = &'p PartitionEntry>,
) -> HashMap<String, u64> {
    let mut first: HashMap<String, u64> = HashMap::new();
    let reads = parts
        .filter_map(|p| p.run.as_ref())
        .flat_map(|run| &run.inputs)
        .filter(|input| input.dimension);
    for input in reads {
        first
            .entry(input.table.clone())
            .and_modify(|v| *v = (*v).min(input.version))
            .or_insert(input.version);
    }
    first
}

/// Per partitioned input: the dates `parts` read or asked for, as one
/// range (`None`: unbounded, a filter open at one end). Only partitions
/// there can make a read stale, so `status` reads the input's manifests of
/// that range, not the whole table.
fn input_ranges<'p>(
    parts: impl Iterator<Item = &'p PartitionEntry>,
) -> HashMap<String, Option<(NaiveDate, NaiveDate)>> {
    let mut ranges: HashMap<String, Option<(NaiveDate, NaiveDate)>> = HashMap::new();
    let reads = parts
        .filter_map(|p| p.run.as_ref())
        .flat_map(|run| &run.inputs)
        .filter(|input| !input.dimension);
    for input in reads {
        let mut covered: Vec<Option<(NaiveDate, NaiveDate)>> = input
            .dates
            .iter()
            .flatten()
            .map(|d| Some((*d, *d)))
            .collect();
        for span in &input.asked {
            covered.push(match (&span.only, span.from, span.to) {
                (Some(only), _, _) => only
                    .iter()
                    .min()
                    .zip(only.iter().max())
                    .map(|(a, b)| (*a, *b)),
                (None, Some(from), Some(to)) => Some((from, to)),
                _ => None,
            });
        }
        let range = ranges
            .entry(input.table.clone())
            .or_insert(covered.first().copied().flatten());
        for c in covered {
            *range = match (*range, c) {
                (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                _ => None,
            };
        }
    }
    ranges
}

/// The other tables a partition read, opened once per status computation.
struct Inputs<'a> {
    warehouse: &'a Warehouse,
    /// Judging inside this stage: inputs read as it holds them.
    stage: Option<&'a str>,
    /// Per dimension: the oldest version read (see [`first_dimension_reads`]).
    first_reads: HashMap<String, u64>,
    snapshots: HashMap<String, Option<Snapshot>>,
    /// Per dimension: its data-changing commits (version, affected range).
    changes: HashMap<String, Vec<(u64, Option<DateRange>)>>,
    /// Per partitioned input: the range of dates read (see [`input_ranges`]).
    ranges: HashMap<String, Option<(NaiveDate, NaiveDate)>>,
    /// Per partitioned input: the version now of every partition in range,
    /// and the run that wrote it.
    versions: HashMap<String, BTreeMap<NaiveDate, (u64, Option<String>)>>,
}

impl<'a> Inputs<'a> {
    fn new(
        warehouse: &'a Warehouse,
        stage: Option<&'a str>,
        first_reads: HashMap<String, u64>,
        ranges: HashMap<String, Option<(NaiveDate, NaiveDate)>>,
    ) -> Self {
        Self {
            warehouse,
            stage,
            first_reads,
            ranges,
            snapshots: HashMap::new(),
            changes: HashMap::new(),
            versions: HashMap::new(),
        }
    }

    async fn reasons(
        &mut self,
        p: &PartitionEntry,
        current_code: Option<&str>,
    ) -> Result<Vec<StaleReason>> {
        let mut reasons = Vec::new();
        let Some(run) = &p.run else {
            return Ok(reasons);
        };
        if let Some(current) = current_code {
            if run.code_version.as_deref() != Some(current) {
                reasons.push(StaleReason::Code {
                    written: run.code_version.clone(),
                    current: current.to_string(),
                });
            }
        }
        for input in &run.inputs {
            if input.dimension {
                let mode = run.dimensions.unwrap_or(DimensionMode::AsOf);
                if let Some(r) = self.dimension_reason(input, mode, p.date).await? {
                    reasons.push(r);
                }
            } else {
                reasons.extend(self.input_reasons(input).await?);
            }
        }
        Ok(reasons)
    }

    async fn snapshot(&mut self, table: &str) -> Result<Option<Snapshot>> {
        if let Some(s) = self.snapshots.get(table) {
            return Ok(s.clone());
        }
        // An input that was since dropped cannot make anything stale.
        let snap = match self.warehouse.table(table).await {
            Ok(t) => match self.stage {
                Some(stage) => Some(t.latest().await?.in_stage(stage).await?),
                None => Some(t.latest().await?),
            },
            Err(e) if e.kind() == crate::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        self.snapshots.insert(table.to_string(), snap.clone());
        Ok(snap)
    }

    /// The versions now of `table`'s partitions in the range read (cached).
    async fn partition_versions(
        &mut self,
        table: &str,
    ) -> Result<&BTreeMap<NaiveDate, (u64, Option<String>)>> {
        if !self.versions.contains_key(table) {
            let range = self.ranges.get(table).copied().flatten();
            let versions = match self.snapshot(table).await? {
                Some(snap) => match range {
                    Some((from, to)) => snap.partitions_between(Some(from), Some(to)).await?,
                    None => snap.partitions().await?,
                }
                .into_iter()
                .map(|p| (p.date, (p.version, p.run.map(|r| r.run_id))))
                .collect(),
                None => BTreeMap::new(),
            };
            self.versions.insert(table.to_string(), versions);
        }
        Ok(&self.versions[table])
    }

    /// A date read is stale when replaced or gone; a date asked for and
    /// not found, when it has landed since.
    async fn input_reasons(&mut self, input: &InputRead) -> Result<Vec<StaleReason>> {
        let Some(snap) = self.snapshot(&input.table).await? else {
            return Ok(vec![]);
        };
        let now_version = snap.version();
        let versions = self.partition_versions(&input.table).await?;
        let read: BTreeSet<NaiveDate> = input.dates.iter().flatten().copied().collect();
        let reason = |date: NaiveDate, replaced_at: u64, change: InputChange| StaleReason::Input {
            table: input.table.clone(),
            date,
            read_version: input.version,
            replaced_at,
            change,
        };
        let mut reasons = Vec::new();
        for date in &read {
            match versions.get(date) {
                Some((v, run)) => {
                    // A date read from a stage is fresh while its staged
                    // run's partition is there (staged, or published since,
                    // at a later version); any other is replaced.
                    let replaced = match input.staged.get(date) {
                        Some(staged) => run.as_ref() != Some(staged),
                        None => *v > input.version,
                    };
                    if replaced {
                        reasons.push(reason(*date, *v, InputChange::Replaced));
                    }
                }
                None => reasons.push(reason(*date, now_version, InputChange::Disappeared)),
            }
        }
        for (date, (v, _)) in versions {
            if *v > input.version
                && !read.contains(date)
                && input.asked.iter().any(|span| span.contains(*date))
            {
                reasons.push(reason(*date, *v, InputChange::Appeared));
            }
        }
        reasons.sort_by_key(|r| match r {
            StaleReason::Input { date, .. } => *date,
            _ => NaiveDate::MIN,
        });
        Ok(reasons)
    }

    /// A dimension read is stale when a later commit changed its rows at a
    /// date the run resolved them at (or at all, for undated reads).
    async fn dimension_reason(
        &mut self,
        input: &InputRead,
        mode: DimensionMode,
        date: NaiveDate,
    ) -> Result<Option<StaleReason>> {
        // Runs recorded before the read date was kept read at their
        // logical date (as-of) or today's rows (current).
        let legacy = input.as_of.is_empty() && !input.undated;
        let undated = input.undated || (legacy && mode == DimensionMode::Current);
        let dated: &[NaiveDate] = if legacy {
            std::slice::from_ref(&date)
        } else {
            &input.as_of
        };
        let reason = |(changed_at, affected): (u64, DateRange)| StaleReason::Dimension {
            table: input.table.clone(),
            mode,
            read_version: input.version,
            changed_at,
            affected: Some(affected),
        };
        // Format 2: the latest change at each date, from the dimension's root.
        let snapshot = self.snapshot(&input.table).await?;
        if let Some(index) = snapshot.as_ref().and_then(|s| s.dimension_changes()) {
            let hit = if undated {
                index.latest()
            } else {
                dated
                    .iter()
                    .filter_map(|d| index.latest_at(*d))
                    .filter(|(v, _)| *v > input.version)
                    .min_by_key(|(v, _)| *v)
            };
            return Ok(hit.filter(|(v, _)| *v > input.version).map(reason));
        }
        if !self.changes.contains_key(&input.table) {
            let after = self.first_reads.get(&input.table).copied().unwrap_or(0);
            let changes = match self.warehouse.table(&input.table).await {
                Ok(t) => dimension_changes(&t, after).await?,
                Err(e) if e.kind() == crate::ErrorKind::NotFound => vec![],
                Err(e) => return Err(e),
            };
            self.changes.insert(input.table.clone(), changes);
        }
        let changes = &self.changes[&input.table];
        let hit = changes.iter().find(|(v, affected)| {
            *v > input.version
                && affected.is_some_and(|range| undated || dated.iter().any(|d| range.contains(*d)))
        });
        Ok(hit.and_then(|(v, affected)| affected.map(|a| reason((*v, a)))))
    }
}

/// A dimension's commits after `after` that changed rows, oldest first.
async fn dimension_changes(table: &Table, after: u64) -> Result<Vec<(u64, Option<DateRange>)>> {
    Ok(table
        .history_from(after + 1)
        .await?
        .into_iter()
        .filter(|e| e.operation == Operation::ApplyDimension)
        .map(|e| (e.version, e.affected))
        .collect())
}
