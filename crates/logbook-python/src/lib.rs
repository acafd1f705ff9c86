//! `pylogbook._native`: logbook tables from Python.
//!
//! The Python package (`python/pylogbook`) is a thin layer over this module:
//! it turns dates and pandas frames into what the module takes and gives
//! the run a context manager. Here: one tokio runtime for the process
//! ([`runtime`]), the error classes ([`errors`]), arguments and JSON results
//! ([`convert`]), Arrow streams in and out
//! ([`streams`]), and the three classes users hold: [`warehouse`]
//! (`Warehouse`: tables, SQL, status, plan, log), [`table`] (`Table`:
//! replace a partition, dimension changes, reads) and [`run`] (`Run`: a job
//! run for a logical date, with lineage).
//!
//! Every call that touches storage releases the GIL while it waits, so
//! other Python threads (an orchestrator's heartbeats, say) go on.

use pyo3::prelude::*;

mod convert;
mod errors;
mod provider;
mod run;
mod runtime;
mod streams;
mod table;
mod warehouse;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<warehouse::Warehouse>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<run::Run>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
