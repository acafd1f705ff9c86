//! `/api/...`: each page's data as JSON, the same as the CLI's `--json`
//! for the same question (both call the same functions).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::NaiveDate;
use logbook_core::lifecycle::{self, DateStatus};
use logbook_core::{answers, Table};
use serde::{Deserialize, Serialize};

use crate::summaries::Count;
use crate::{AppState, UiError};

/// `?from=&to=`, as `logbook status --from --to` takes them.
#[derive(Debug, Default, Deserialize)]
pub struct Range {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

/// The most dates one request may ask about (ten years of days).
pub const MAX_DAYS: i64 = 3660;

impl Range {
    /// The range to ask `status` for, checked before anything is computed:
    /// `to` at most a year ahead; without `from`, the schedule start (or
    /// the first committed date, as `status` defaults it), or the last
    /// [`MAX_DAYS`] before `to` if the schedule is longer; with `from`, at
    /// most [`MAX_DAYS`] days.
    pub(crate) async fn resolve(&self, table: &Table) -> Result<(NaiveDate, NaiveDate), UiError> {
        let name = table.name();
        let to = self.to();
        let horizon = Range::default().to() + chrono::Days::new(366);
        if to > horizon {
            return Err(UiError::BadRequest(format!(
                "table {name}: to {to} is more than a year ahead"
            )));
        }
        let from = match self.from {
            Some(from) => from,
            None => {
                let snap = table.latest().await?;
                let first = match snap.properties().schedule_start {
                    Some(d) => Some(d),
                    None => snap.partitions().await?.first().map(|p| p.date),
                };
                let earliest = to - chrono::Days::new(MAX_DAYS as u64);
                first.unwrap_or(to).max(earliest)
            }
        };
        let days = (to - from).num_days();
        if !(0..=MAX_DAYS).contains(&days) {
            return Err(UiError::BadRequest(format!(
                "table {name}: from {from} to {to} is not a range of at most {MAX_DAYS} days"
            )));
        }
        Ok((from, to))
    }

    /// The last date: `to`, or yesterday by the wall clock (the last day
    /// whose run is due), as the CLI defaults it.
    pub fn to(&self) -> NaiveDate {
        use logbook_core::clock::{Clock, SystemClock};
        self.to
            .unwrap_or_else(|| logbook_core::dates::yesterday(SystemClock.now_millis()))
    }
}

/// A table named in a path, validated as the CLI validates names before
/// anything is read.
pub(crate) async fn open(state: &AppState, name: &str) -> Result<Table, UiError> {
    logbook_core::names::validate_table_name(name)
        .map_err(|e| UiError::BadRequest(e.to_string()))?;
    Ok(state.warehouse.table(name).await?)
}

/// Every table's summary, as last counted (see [`crate::summaries`]).
pub(crate) async fn tables(State(state): State<Arc<AppState>>) -> Result<Json<Count>, UiError> {
    Ok(Json((*state.summaries.get().await?).clone()))
}

/// The runs live now, by class (what `logbook warehouse show` lists).
pub(crate) async fn runs(
    State(state): State<Arc<AppState>>,
) -> Result<Json<logbook_core::budget::LiveRuns>, UiError> {
    Ok(Json(state.warehouse.live_runs().await?))
}

/// The status of each date (`logbook status T --json`).
pub(crate) async fn date_statuses(
    state: &AppState,
    name: &str,
    range: &Range,
) -> Result<Vec<DateStatus>, UiError> {
    let table = open(state, name).await?;
    let (from, to) = range.resolve(&table).await?;
    // Dates a person asked for are shown even before a table without a
    // schedule has any, as `logbook status --from` shows them.
    let status = match range.from {
        Some(_) => lifecycle::status_asked(&state.warehouse, name, None, Some(from), to).await?,
        None => lifecycle::status(&state.warehouse, name, Some(from), to).await?,
    };
    Ok(status.dates)
}

pub(crate) async fn status(
    State(state): State<Arc<AppState>>,
    Path(table): Path<String>,
    Query(range): Query<Range>,
) -> Result<Json<Vec<DateStatus>>, UiError> {
    Ok(Json(date_statuses(&state, &table, &range).await?))
}

pub(crate) async fn log(
    State(state): State<Arc<AppState>>,
    Path(table): Path<String>,
) -> Result<Json<Vec<answers::LogLine>>, UiError> {
    let t = open(&state, &table).await?;
    Ok(Json(answers::log(&t).await?))
}

pub(crate) async fn partitions(
    State(state): State<Arc<AppState>>,
    Path(table): Path<String>,
) -> Result<Json<Vec<logbook_core::PartitionSummary>>, UiError> {
    let t = open(&state, &table).await?;
    Ok(Json(answers::partitions(&t, None).await?))
}

pub(crate) async fn schema(
    State(state): State<Arc<AppState>>,
    Path(table): Path<String>,
) -> Result<Json<logbook_core::TableSchema>, UiError> {
    let t = open(&state, &table).await?;
    Ok(Json(t.latest().await?.schema().clone()))
}

/// One partition: its entry (run, lineage), its status and its history.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionView {
    pub date: NaiveDate,
    pub status: DateStatus,
    /// The partition as the latest version holds it (`None`: missing).
    pub entry: Option<logbook_core::PartitionEntry>,
    /// Every log entry that wrote the date, oldest first.
    pub history: Vec<answers::LogLine>,
}

pub(crate) async fn partition_view(
    state: &AppState,
    name: &str,
    date: &str,
) -> Result<PartitionView, UiError> {
    let date: NaiveDate = date.parse().map_err(|_| {
        UiError::BadRequest(format!("table {name}: {date:?} is not a date (YYYY-MM-DD)"))
    })?;
    let table = open(state, name).await?;
    let range = Range {
        from: Some(date),
        to: Some(date),
    };
    let (from, to) = range.resolve(&table).await?;
    let status = lifecycle::status(&state.warehouse, name, Some(from), to)
        .await?
        .dates
        .into_iter()
        .next()
        .ok_or_else(|| UiError::NotFound(format!("table {name}: no date {date}")))?;
    let entry = table.latest().await?.partition(date).await?;
    let history = answers::log(&table)
        .await?
        .into_iter()
        .filter(|l| l.entry.dates.contains(&date))
        .collect();
    Ok(PartitionView {
        date,
        status,
        entry,
        history,
    })
}

pub(crate) async fn partition(
    State(state): State<Arc<AppState>>,
    Path((table, date)): Path<(String, String)>,
) -> Result<Json<PartitionView>, UiError> {
    Ok(Json(partition_view(&state, &table, &date).await?))
}

/// A stage's diff against the main line (`logbook stage diff T S --json`).
pub(crate) async fn stage_diff(
    state: &AppState,
    name: &str,
    stage: &str,
) -> Result<Vec<logbook_core::StageDiff>, UiError> {
    let table = open(state, name).await?;
    logbook_core::names::validate_run_id(stage).map_err(|_| {
        UiError::BadRequest(format!(
            "table {name}: stage name {stage:?} must be letters, digits, '-', '_' or '.'"
        ))
    })?;
    // Only an existing stage: `Table::stage` would create one.
    if !table.stages().await?.iter().any(|s| s.name == stage) {
        return Err(UiError::NotFound(format!(
            "table {name}: no stage {stage:?}"
        )));
    }
    Ok(table.existing_stage(stage).await?.diff().await?)
}

pub(crate) async fn stage(
    State(state): State<Arc<AppState>>,
    Path((table, stage)): Path<(String, String)>,
) -> Result<Json<Vec<logbook_core::StageDiff>>, UiError> {
    Ok(Json(stage_diff(&state, &table, &stage).await?))
}
