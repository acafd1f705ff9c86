//! `Run`: a job run for one logical date. Its queries resolve dimensions at
//! that date and record what they read; its rows replace the target
//! partition when it commits (the `with` block of the Python layer commits
//! on success and aborts on an exception).

use std::sync::Mutex;

use logbook_datafusion::run::RunContext;
use pyo3::prelude::*;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::PyRecordBatchReader;

use crate::errors;
use crate::runtime::wait;
use crate::streams;

/// A started run.
#[pyclass(module = "pylogbook._native", frozen)]
pub struct Run {
    context: Mutex<Option<RunContext>>,
}

impl Run {
    pub(crate) fn new(context: RunContext) -> Self {
        Self {
            context: Mutex::new(Some(context)),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut RunContext) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.context.lock().expect("run lock");
        match guard.as_mut() {
            Some(rc) => f(rc),
            None => Err(errors::invalid(
                "this run has already committed or aborted; start a new one",
            )),
        }
    }

    fn take(&self) -> PyResult<RunContext> {
        self.context
            .lock()
            .expect("run lock")
            .take()
            .ok_or_else(|| errors::invalid("this run has already committed or aborted"))
    }
}

#[pymethods]
impl Run {
    /// Run `query` in the run's context (`logical_date()` defined,
    /// dimensions as of the run's mode, the wall clock refused) and stream
    /// its rows. What it reads is recorded as the run's lineage, and the
    /// query text as the run's query.
    fn sql(&self, py: Python<'_>, query: &str) -> PyResult<PyRecordBatchReader> {
        self.with(|rc| {
            let run = rc.writer.run_mut();
            run.query = Some(match run.query.take() {
                Some(earlier) => format!("{earlier};\n{query}"),
                None => query.to_string(),
            });
            let ctx = rc.ctx.clone();
            let stream = wait(py, move || async move {
                let df = ctx.sql(query).await?;
                df.execute_stream().await
            })
            .map_err(errors::sql)?;
            Ok(streams::export(stream))
        })
    }

    /// Append the rows of `data` (streamed) to the partition being written.
    /// Returns the rows written.
    fn write(&self, py: Python<'_>, data: AnyRecordBatch) -> PyResult<u64> {
        self.with(|rc| streams::write_all(py, &mut rc.writer, data))
    }

    /// Commit the partition with the run's lineage. Returns `(version,
    /// already_committed, run_id)`.
    fn commit(&self, py: Python<'_>) -> PyResult<(u64, bool, String)> {
        let rc = self.take()?;
        let (info, run) = wait(py, || rc.commit_run()).map_err(errors::query)?;
        Ok((info.version, info.already_committed, run.run_id))
    }

    /// Give up: nothing is committed and the staged files are deleted.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let rc = self.take()?;
        wait(py, || rc.writer.abort()).map_err(errors::core)
    }
}
