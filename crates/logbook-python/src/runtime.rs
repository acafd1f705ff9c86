//! One tokio runtime for the process, entered with the GIL released.

use std::future::Future;
use std::sync::OnceLock;

use pyo3::prelude::*;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("pylogbook")
            .build()
            .expect("a tokio runtime")
    })
}

/// Run the future `make` returns to completion on the runtime, without
/// holding the GIL. The future is made and driven on this thread, so it
/// need not be `Send` (some of core's are not provably so).
pub(crate) fn wait<M, F>(py: Python<'_>, make: M) -> F::Output
where
    M: FnOnce() -> F + Send,
    F: Future,
    F::Output: Send,
{
    py.detach(|| runtime().block_on(make()))
}

/// Run `f` to completion on the calling thread, leaving the GIL as it is
/// (a consumer pulling an exported stream).
pub(crate) fn wait_here<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}
