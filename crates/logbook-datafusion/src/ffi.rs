//! A logbook table for another DataFusion build of the same major, through
//! DataFusion's stable FFI (`datafusion-ffi`): the host (the `datafusion`
//! Python package, or any program linking its own DataFusion) plans the
//! query; the scan is logbook's own provider (the latest snapshot at each
//! scan, partition pruning by date, schema adaptation by field id), run on
//! the runtime the caller names. Filters are offered to the provider, which
//! prunes partitions with the date filters; the host still applies every
//! filter.
//!
//! The FFI keeps the runtime handle it was given: export a table in the
//! process that queries it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::Result as DfResult;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use tokio::runtime::Handle;

use crate::LogbookTableProvider;

/// The runtime logbook's I/O runs on, looked up each time it is needed (a
/// host that forks can hand its child the child's own runtime).
pub type RuntimeLookup = Arc<dyn Fn() -> Handle + Send + Sync>;

/// `provider` exported for a host DataFusion whose session uses `codec`.
/// Planning (reading the snapshot) and execution both run on `runtime()`.
pub fn export(
    provider: LogbookTableProvider,
    runtime: RuntimeLookup,
    codec: FFI_LogicalExtensionCodec,
) -> FFI_TableProvider {
    let handle = runtime();
    let provider = Arc::new(InRuntime { provider, runtime });
    FFI_TableProvider::new_with_ffi_codec(provider, true, Some(handle), codec)
}

/// logbook's provider with its planning run inside the given runtime: the
/// FFI calls `scan` on the host's thread (datafusion-ffi enters the given
/// runtime only to execute and stream), and reading the snapshot there
/// would find no reactor for a cloud object store's I/O.
struct InRuntime {
    provider: LogbookTableProvider,
    runtime: RuntimeLookup,
}

impl std::fmt::Debug for InRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("InRuntime").field(&self.provider).finish()
    }
}

#[async_trait]
impl TableProvider for InRuntime {
    fn schema(&self) -> SchemaRef {
        self.provider.schema()
    }

    fn table_type(&self) -> TableType {
        self.provider.table_type()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.provider.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let scan = self.provider.scan(state, projection, filters, limit);
        Entered {
            future: scan,
            runtime: &self.runtime,
        }
        .await
    }
}

/// A future polled inside the runtime (looked up at each poll).
struct Entered<'a, F> {
    future: F,
    runtime: &'a RuntimeLookup,
}

impl<F: Future + Unpin> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _inside = (self.runtime)().enter();
        Pin::new(&mut self.future).poll(cx)
    }
}
