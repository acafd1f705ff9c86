//! `Run`: a job run for one logical date. Its queries resolve dimensions at
//! that date and record what they read; its rows replace the target
//! partition when it commits (the `with` block of the Python layer commits
//! on success and aborts on an exception).

use std::sync::{Mutex, TryLockError};

use logbook_core::budget::Turn;
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
    /// The run's turn in the warehouse's run budget, ended with the run.
    turn: Mutex<Option<Turn>>,
}

impl Run {
    pub(crate) fn new(context: RunContext, turn: Turn) -> Self {
        Self {
            context: Mutex::new(Some(context)),
            turn: Mutex::new(Some(turn)),
        }
    }

    /// The run is over: end its turn (once).
    fn end_turn(&self, py: Python<'_>) {
        let turn = self.turn.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(turn) = turn {
            wait(py, || turn.end());
        }
    }

    /// The run, for one call at a time: a second thread using the same run
    /// meanwhile is refused (waiting for the lock while holding the GIL
    /// could deadlock with the first, which needs the GIL back).
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Option<RunContext>>> {
        match self.context.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(errors::invalid(
                "this run is in use by another thread; use one run per thread",
            )),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut RunContext) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.lock()?;
        match guard.as_mut() {
            Some(rc) => f(rc),
            None => Err(errors::invalid(
                "this run has already committed or aborted; start a new one",
            )),
        }
    }

    /// The run's context, to commit or abort it. Refused while another
    /// thread uses the run (its turn stays); once the run is over, its
    /// turn is ended too.
    fn take(&self, py: Python<'_>) -> PyResult<RunContext> {
        let taken = self.lock()?.take();
        taken.ok_or_else(|| {
            self.end_turn(py);
            errors::invalid("this run has already committed or aborted")
        })
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
            rc.writer.record_query(query);
            let ctx = rc.ctx.clone();
            let stream = wait(py, move || async move {
                let df = logbook_datafusion::sql(&ctx, query).await?;
                Ok::<_, logbook_datafusion::QueryError>(df.execute_stream().await?)
            })
            .map_err(errors::query)?;
            Ok(streams::export(stream))
        })
    }

    /// Append the rows of `data` (streamed) to the partition being written.
    /// Returns the rows written.
    /// A failed write aborts the run: batches already written cannot be
    /// taken back, so committing or writing again would keep part of it.
    fn write(&self, py: Python<'_>, data: AnyRecordBatch) -> PyResult<u64> {
        // Held for the write: a second thread using this run meanwhile is
        // refused, and its refusal ends nothing.
        let mut guard = self.lock()?;
        let Some(rc) = guard.as_mut() else {
            return Err(errors::invalid(
                "this run has already committed or aborted; start a new one",
            ));
        };
        let written = streams::write_all(py, &mut rc.writer, data);
        if written.is_err() {
            if let Some(rc) = guard.take() {
                let _ = wait(py, || rc.writer.abort());
            }
            drop(guard);
            // The run is over: its announcement or slot goes now, not when
            // the traceback holding this object is collected.
            self.end_turn(py);
        }
        written
    }

    /// Commit the partition with the run's lineage. Returns `(version,
    /// already_committed, run_id)`.
    fn commit(&self, py: Python<'_>) -> PyResult<(u64, bool, String)> {
        let rc = self.take(py)?;
        let committed = wait(py, || rc.commit_run());
        self.end_turn(py);
        let (info, run) = committed.map_err(errors::query)?;
        Ok((info.version, info.already_committed, run.run_id))
    }

    /// Give up: nothing is committed and the staged files are deleted.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let rc = self.take(py)?;
        let aborted = wait(py, || rc.writer.abort());
        self.end_turn(py);
        aborted.map_err(errors::core)
    }
}

impl Drop for Run {
    /// A run dropped without commit or abort (the Python object collected,
    /// an exception before `with`) is aborted, so its intent marker does not
    /// show the date as Running until it times out.
    fn drop(&mut self) {
        let context = self
            .context
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(rc) = context {
            let _ = crate::runtime::wait_here(rc.writer.abort());
        }
        let turn = self
            .turn
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(turn) = turn {
            crate::runtime::wait_here(turn.end());
        }
    }
}
