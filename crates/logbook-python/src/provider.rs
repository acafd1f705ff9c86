//! `Table.__datafusion_table_provider__`: a logbook table registered in a
//! `datafusion` (PyPI) `SessionContext` through DataFusion's stable FFI
//! (`logbook_datafusion::ffi`), its planning and scans run on this module's
//! runtime (looked up at each use, so a forked child uses its own).
//!
//! Register a table in the process that queries it: the FFI keeps the
//! runtime handle of the process that registered it.

use std::sync::Arc;

use logbook_datafusion::datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use logbook_datafusion::{ffi, LogbookTableProvider};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors;
use crate::runtime::{handle, wait};

const PROVIDER: &std::ffi::CStr = c"datafusion_table_provider";
const CODEC: &std::ffi::CStr = c"datafusion_logical_extension_codec";

/// The capsule `datafusion` asks a table provider for; `session` is the
/// `SessionContext` registering it, whose codec the provider must use.
pub(crate) fn capsule<'py>(
    py: Python<'py>,
    table: &logbook_core::Table,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let provider =
        wait(py, || LogbookTableProvider::latest(table.clone())).map_err(errors::core)?;
    let codec = logical_codec(session)?;
    let exported = ffi::export(provider, Arc::new(handle), codec);
    PyCapsule::new_with_value(py, exported, PROVIDER)
}

fn logical_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    let method = "__datafusion_logical_extension_codec__";
    if !session.hasattr(method)? {
        return Err(PyTypeError::new_err(format!(
            "register the table with a datafusion SessionContext (its {method} is missing)"
        )));
    }
    let capsule = session.call_method0(method)?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let pointer = capsule.pointer_checked(Some(CODEC))?;
    // SAFETY: a capsule of this name holds an `FFI_LogicalExtensionCodec`
    // (datafusion-ffi's contract), alive as long as the capsule; cloning
    // takes our own reference to it.
    let codec = unsafe { pointer.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}
