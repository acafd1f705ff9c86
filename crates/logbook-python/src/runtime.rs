//! One tokio runtime per process, entered with the GIL released.
//!
//! Per process, not per interpreter lifetime: a child forked after the
//! parent used pylogbook inherits the runtime's memory but not its worker
//! threads, so it builds its own (otherwise its first query would hang).

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

fn runtime() -> Arc<tokio::runtime::Runtime> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match slot.as_ref() {
        Some((owner, rt)) if *owner == pid => rt.clone(),
        _ => {
            let rt = Arc::new(
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .thread_name("pylogbook")
                    .build()
                    .expect("a tokio runtime"),
            );
            // A runtime inherited from the parent cannot be shut down here
            // (its threads do not exist): forget it.
            if let Some((_, inherited)) = slot.replace((pid, rt.clone())) {
                std::mem::forget(inherited);
            }
            rt
        }
    }
}

/// The runtime's handle, for work another library drives (DataFusion's
/// FFI runs logbook's scans on it).
pub(crate) fn handle() -> tokio::runtime::Handle {
    runtime().handle().clone()
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

/// Run `f` to completion for a consumer pulling an exported stream, from
/// whatever thread it pulls on, leaving the GIL as it is. A consumer that
/// pulls from inside a tokio runtime of its own (deltalake, DataFusion)
/// cannot block that thread on another runtime, so the wait moves to a
/// thread of its own.
pub(crate) fn wait_here<F>(f: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(|| runtime().block_on(f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    } else {
        runtime().block_on(f)
    }
}
