//! `Table`: replace a partition, change a dimension, read any version.

use chrono::NaiveDate;
use logbook_core::budget::{Launched, SlotTicket, Turn};
use logbook_core::clock::{IdGenerator, UuidV7};
use logbook_core::{Destination, ExpectedPartition, PartitionSummary, RunClass, RunInfo};
use pyo3::prelude::*;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyRecordBatchReader, PySchema};

use crate::convert::{parse_date, to_json};
use crate::errors;
use crate::runtime::wait;
use crate::streams;

/// One logbook table.
#[pyclass(module = "pylogbook._native", frozen)]
pub struct Table {
    inner: logbook_core::Table,
    /// Its warehouse: a write's turn in the run budget is taken there.
    warehouse: logbook_core::Warehouse,
}

impl Table {
    pub(crate) fn new(inner: logbook_core::Table, warehouse: logbook_core::Warehouse) -> Self {
        Self { inner, warehouse }
    }

    async fn snapshot(&self, version: Option<u64>) -> logbook_core::Result<logbook_core::Snapshot> {
        match version {
            Some(v) => self.inner.at_version(v).await,
            None => self.inner.latest().await,
        }
    }
}

/// A run id unique to this call (a re-run with it commits nothing new).
fn fresh_run_id(date: NaiveDate) -> String {
    format!("{date}-{}", UuidV7.next_id().simple())
}

#[pymethods]
impl Table {
    /// The table's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Where the table lives (its root URI).
    #[getter]
    fn uri(&self) -> String {
        self.inner.location().uri().to_string()
    }

    /// The latest version.
    fn latest_version(&self, py: Python<'_>) -> PyResult<u64> {
        wait(py, || self.inner.latest_version()).map_err(errors::core)
    }

    /// A DataFusion table provider for `datafusion` (PyPI):
    /// `ctx.register_table("orders", wh.table("orders"))`.
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
        crate::provider::capsule(py, &self.inner, &session)
    }

    /// The Arrow schema at `version` (default: latest).
    #[pyo3(signature = (version=None))]
    fn schema(&self, py: Python<'_>, version: Option<u64>) -> PyResult<PySchema> {
        let snap = wait(py, || self.snapshot(version)).map_err(errors::core)?;
        Ok(PySchema::new(snap.arrow_schema()))
    }

    /// The schema data files are written with at `version`: a renamed
    /// column keeps its first name there.
    #[pyo3(signature = (version=None))]
    fn file_schema(&self, py: Python<'_>, version: Option<u64>) -> PyResult<PySchema> {
        let snap = wait(py, || self.snapshot(version)).map_err(errors::core)?;
        Ok(PySchema::new(snap.schema().file_schema()))
    }

    /// Replace the partition of `date` with the rows of `data`, streamed,
    /// in one atomic commit. Returns `(version, already_committed)`.
    /// In stage `stage`, the partition is staged instead (published later
    /// with `logbook stage publish`). Returns `(version, already_committed,
    /// run_id)`.
    /// `run_class` (`production` unless given; a write into a stage is a
    /// backfill) and `slot` (the backfill slot its runner holds) take the
    /// write's turn in the warehouse's run budget.
    #[pyo3(signature = (date, data, run_id=None, code_version=None, job=None, expect_version=None, stage=None, run_class=None, slot=None))]
    #[allow(clippy::too_many_arguments)]
    fn replace_partition(
        &self,
        py: Python<'_>,
        date: &str,
        data: AnyRecordBatch,
        run_id: Option<String>,
        code_version: Option<String>,
        job: Option<String>,
        expect_version: Option<&str>,
        stage: Option<String>,
        run_class: Option<&str>,
        slot: Option<&str>,
    ) -> PyResult<(u64, bool, String)> {
        let date = parse_date("date", date)?;
        let expected = expect_version
            .map(|e| e.parse::<ExpectedPartition>().map_err(errors::invalid))
            .transpose()?;
        let run = RunInfo {
            run_id: run_id.unwrap_or_else(|| fresh_run_id(date)),
            code_version,
            job,
            logical_date: Some(date),
            ..RunInfo::default()
        };
        let run_id = run.run_id.clone();
        let launched = launched(run_class, slot)?;
        let (wh, name, staged) = (&self.warehouse, self.inner.name(), stage.is_some());
        let mut turn = wait(py, || {
            Turn::take(wh, name, date, &run_id, staged, launched, |_| {})
        })
        .map_err(errors::core)?;
        // The write is the heavy step: a backfill waits while the
        // warehouse's `max-heavy-steps` are under way.
        if let Err(e) = wait(py, || turn.begin_heavy(wh, |_| {})) {
            wait(py, || turn.end());
            return Err(errors::core(e));
        }
        let run = RunInfo {
            class: Some(turn.class),
            ..run
        };
        let ticket = turn.ticket;
        let written = self.write(py, date, run, stage, expected, ticket, data);
        wait(py, || turn.end());
        let info = written?;
        Ok((info.version, info.already_committed, run_id))
    }

    /// Upsert rows of a dimension effective `date`. Returns
    /// `(version, changed_keys)`.
    #[pyo3(signature = (date, data, run_id=None))]
    fn apply_changes(
        &self,
        py: Python<'_>,
        date: &str,
        data: AnyRecordBatch,
        run_id: Option<String>,
    ) -> PyResult<(u64, usize)> {
        self.apply(py, Change::Upsert, date, data, run_id)
    }

    /// End the intervals of the keys in `keys` at `date`.
    #[pyo3(signature = (date, keys, run_id=None))]
    fn apply_deletes(
        &self,
        py: Python<'_>,
        date: &str,
        keys: AnyRecordBatch,
        run_id: Option<String>,
    ) -> PyResult<(u64, usize)> {
        self.apply(py, Change::Delete, date, keys, run_id)
    }

    /// Make `data` the whole dimension from `date` on (keys absent end).
    #[pyo3(signature = (date, data, run_id=None))]
    fn apply_snapshot(
        &self,
        py: Python<'_>,
        date: &str,
        data: AnyRecordBatch,
        run_id: Option<String>,
    ) -> PyResult<(u64, usize)> {
        self.apply(py, Change::Snapshot, date, data, run_id)
    }

    /// The partitions at `version`, as JSON (what `logbook partitions
    /// --json` prints).
    #[pyo3(signature = (version=None))]
    fn partitions_json(&self, py: Python<'_>, version: Option<u64>) -> PyResult<String> {
        let parts = wait(py, || async {
            self.snapshot(version).await?.partitions().await
        })
        .map_err(errors::core)?;
        let rows: Vec<PartitionSummary> = parts.into_iter().map(PartitionSummary::from).collect();
        to_json(&rows)
    }

    /// Stream the rows at `version` (of `dates` only, if given).
    #[pyo3(signature = (version=None, dates=None))]
    fn read(
        &self,
        py: Python<'_>,
        version: Option<u64>,
        dates: Option<Vec<String>>,
    ) -> PyResult<PyRecordBatchReader> {
        let dates: Option<Vec<NaiveDate>> = dates
            .map(|ds| ds.iter().map(|d| parse_date("dates", d)).collect())
            .transpose()?;
        let (snap, files) = wait(py, || self.live_files(version, dates)).map_err(errors::core)?;
        let schema = snap.arrow_schema();
        let stream = snap.scan_files(files, None, Default::default());
        Ok(streams::export_rows(schema, stream))
    }

    /// The live data files at `version`, relative to the table's root.
    #[pyo3(signature = (version=None))]
    fn files(&self, py: Python<'_>, version: Option<u64>) -> PyResult<Vec<String>> {
        let (_, files) = wait(py, || self.live_files(version, None)).map_err(errors::core)?;
        Ok(files.into_iter().map(|f| f.path).collect())
    }
}

/// Which dimension change a call makes.
#[derive(Clone, Copy)]
enum Change {
    Upsert,
    Delete,
    Snapshot,
}

impl Table {
    /// Write `data` as `date`'s partition and commit (or abort on failure).
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        py: Python<'_>,
        date: NaiveDate,
        run: RunInfo,
        stage: Option<String>,
        expected: Option<ExpectedPartition>,
        ticket: Option<SlotTicket>,
        data: AnyRecordBatch,
    ) -> PyResult<logbook_core::CommitInfo> {
        let t = &self.inner;
        let mut writer = wait(py, || {
            t.write_partition(date, run, Destination::from(stage))
        })
        .map_err(errors::core)?;
        if let Some(e) = expected {
            writer = writer.expect(e);
        }
        if let Some(t) = ticket {
            writer = writer.within_slot(t);
        }
        if let Err(e) = streams::write_all(py, &mut writer, data) {
            wait(py, || writer.abort()).map_err(errors::core)?;
            return Err(e);
        }
        wait(py, || writer.commit()).map_err(errors::core)
    }
}

/// How a run was launched, from the class and slot `logbook backfill`
/// hands its commands (`backfill`, and `SLOT/GENERATION` when the budget
/// limits backfills: the runner took their turn) or the caller's class
/// (`production` by default).
pub(crate) fn launched(class: Option<&str>, slot: Option<&str>) -> PyResult<Launched> {
    let class = class
        .map(|c| c.parse::<RunClass>().map_err(errors::invalid))
        .transpose()?;
    let ticket = slot
        .map(str::parse::<SlotTicket>)
        .transpose()
        .map_err(errors::core)?;
    Ok(Launched::handed(class, ticket))
}

impl Table {
    fn apply(
        &self,
        py: Python<'_>,
        change: Change,
        date: &str,
        data: AnyRecordBatch,
        run_id: Option<String>,
    ) -> PyResult<(u64, usize)> {
        let date = parse_date("date", date)?;
        let batches = streams::collect(data)?;
        let run = RunInfo::new(run_id.unwrap_or_else(|| fresh_run_id(date)));
        let t = &self.inner;
        let done = wait(py, || async move {
            match change {
                Change::Upsert => t.apply_changes(date, &batches, run).await,
                Change::Delete => t.apply_deletes(date, &batches, run).await,
                Change::Snapshot => t.apply_snapshot(date, &batches, run).await,
            }
        })
        .map_err(errors::core)?;
        Ok((done.version, done.changed_keys))
    }

    async fn live_files(
        &self,
        version: Option<u64>,
        dates: Option<Vec<NaiveDate>>,
    ) -> logbook_core::Result<(logbook_core::Snapshot, Vec<logbook_core::DataFile>)> {
        let snap = self.snapshot(version).await?;
        if snap.schema().partition_column().is_none() {
            let files = snap.dimension_files();
            return Ok((snap, files));
        }
        let files = snap
            .partitions()
            .await?
            .into_iter()
            .filter(|p| dates.as_ref().is_none_or(|ds| ds.contains(&p.date)))
            .flat_map(|p| p.files)
            .collect();
        Ok((snap, files))
    }
}
