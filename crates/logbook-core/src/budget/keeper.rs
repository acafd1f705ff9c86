//! Renewing leases where the run's own work cannot starve it.
//!
//! A run's work (decoding, encoding, DataFusion's operators) runs on the
//! caller's tokio runtime, and a CPU-bound stretch there can hold every
//! worker for longer than a lease: Prefect's lease renewal starved exactly
//! so. Renewals run instead on one small runtime of their own (one worker
//! thread, for the life of the process), which the operating system
//! schedules beside the run's threads. It is never shut down, so a store
//! client's connections opened from it stay driven.
//!
//! Alternatives: a thread per lease (as many threads as runs in a
//! process, each with its own runtime and connection pool); renewing from
//! the caller's runtime (starved by the run's own work).

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// A renewal loop; dropping it stops the loop after its current tick.
#[derive(Debug)]
pub(crate) struct Keeper {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Keeper {
    /// Call `tick` every `every` until it returns false or the keeper is
    /// dropped. The first tick comes after one interval.
    pub(crate) fn spawn<F, Fut>(every: Duration, mut tick: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = bool> + Send,
    {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let Some(runtime) = runtime() else {
            tracing::warn!("no runtime to renew a lease on: it will expire");
            return Self { stop: Some(stop) };
        };
        runtime.spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tokio::time::sleep(every) => {}
                }
                if !tick().await {
                    return;
                }
            }
        });
        Self { stop: Some(stop) }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The keeper's own runtime; if the process cannot start one (no thread
/// to spare), the caller's runtime, which its work may starve.
fn runtime() -> Option<tokio::runtime::Handle> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    let own = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("logbook-lease")
            .enable_all()
            .build()
            .map_err(|e| tracing::warn!(error = %e, "could not start the lease keeper's runtime"))
            .ok()
    });
    match own {
        Some(rt) => Some(rt.handle().clone()),
        None => tokio::runtime::Handle::try_current().ok(),
    }
}
