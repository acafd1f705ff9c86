//! `Table.__datafusion_table_provider__`: a logbook table registered in a
//! `datafusion` (PyPI) `SessionContext`, through DataFusion's stable FFI
//! (`datafusion-ffi`). The other DataFusion plans the query; the scan is
//! logbook's own provider (the latest snapshot at each scan, partition
//! pruning by date, schema adaptation by field id), run on this module's
//! runtime. Filters are offered to the provider, which prunes partitions
//! with the date filters; DataFusion still applies every filter.
//!
//! Register a table in the process that queries it: the FFI keeps the
//! runtime handle of the process that registered it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use logbook_datafusion::datafusion::arrow::datatypes::SchemaRef;
use logbook_datafusion::datafusion::catalog::Session;
use logbook_datafusion::datafusion::common::Result as DfResult;
use logbook_datafusion::datafusion::datasource::{TableProvider, TableType};
use logbook_datafusion::datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use logbook_datafusion::datafusion::physical_plan::ExecutionPlan;

use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use logbook_datafusion::LogbookTableProvider;
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
    let provider = Arc::new(InRuntime(provider));
    let ffi = FFI_TableProvider::new_with_ffi_codec(provider, true, Some(handle()), codec);
    PyCapsule::new_with_value(py, ffi, PROVIDER)
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

/// logbook's provider with its planning run inside this module's runtime:
/// the FFI calls `scan` on the caller's thread (datafusion-ffi enters the
/// given runtime only to execute and stream), and reading the snapshot
/// there would find no reactor for a cloud object store's I/O.
#[derive(Debug)]
struct InRuntime(LogbookTableProvider);

#[async_trait]
impl TableProvider for InRuntime {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        self.0.table_type()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Entered(self.0.scan(state, projection, filters, limit)).await
    }
}

/// A future polled inside this module's runtime (looked up at each poll,
/// so a forked child uses its own).
struct Entered<F>(F);

impl<F: Future + Unpin> Future for Entered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _inside = handle().enter();
        Pin::new(&mut self.0).poll(cx)
    }
}
