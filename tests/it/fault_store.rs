//! An `ObjectStore` wrapper for fault injection: fail the k-th operation
//! before it happens, or after it happened (the ambiguous outcome: the
//! write landed, the caller sees an error), delay operations, count them.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Where an injected fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails without taking effect.
    Before,
    /// The operation takes effect, then the caller sees an error.
    After,
    /// A create (put-if-absent) takes effect, then the caller sees
    /// `AlreadyExists`, as when a store retried a create whose first try
    /// landed. Other operations: as `After`.
    Exists,
    /// Given to `fail_next_create_under`: a create the caller sees fail
    /// that lands later, just before the next create under the same
    /// prefix (a request held up in the network). Armed by index, or on
    /// other operations: as `Before`.
    Late,
}

pub type Hook = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

#[derive(Default)]
struct State {
    ops: usize,
    armed: Vec<(usize, Fault)>,
    fired: bool,
    /// Random delay of up to this many microseconds per operation.
    max_delay_us: u64,
    rng: u64,
    /// Behave like a store without put-if-absent: every create overwrites.
    ignore_put_if_absent: bool,
    /// Operations under way, and the most at once since the last reset.
    in_flight: usize,
    max_in_flight: usize,
    /// Run once before the next create under a prefix.
    before_create: Option<(&'static str, Hook)>,
    /// The next create under a prefix fails this way.
    failing_create: Option<(&'static str, Fault)>,
    /// A create held up (`Fault::Late`): it lands before the next create
    /// under its prefix.
    late: Option<(&'static str, Path, PutPayload, PutOptions)>,
    /// Puts of objects whose path holds this fail without landing.
    failing_puts_under: Option<&'static str>,
    /// Run once before the next delete.
    before_delete: Option<Hook>,
    /// Puts of data files wait for a permit of this.
    data_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Puts of data files so far, and the one (1-based) that fails.
    data_puts: usize,
    failing_data_put: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<Mutex<State>>,
}

impl FaultStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            state: Arc::new(Mutex::new(State {
                rng: 0x9e37_79b9_7f4a_7c15,
                ..State::default()
            })),
        }
    }

    /// The most operations under way at once since the last call.
    pub fn take_max_in_flight(&self) -> usize {
        std::mem::take(&mut self.state.lock().unwrap().max_in_flight)
    }

    /// Operations since the last reset.
    pub fn ops(&self) -> usize {
        self.state.lock().unwrap().ops
    }

    /// Count from zero, and make operation `k` (1-based) fail as `fault`.
    pub fn arm(&self, k: usize, fault: Fault) {
        self.arm_all(&[(k, fault)]);
    }

    /// Count from zero, and make each operation `k` fail as its fault.
    pub fn arm_all(&self, faults: &[(usize, Fault)]) {
        let mut s = self.state.lock().unwrap();
        s.ops = 0;
        s.armed = faults.to_vec();
        s.fired = false;
    }

    /// Stop injecting; count from zero. Returns whether a fault fired.
    pub fn disarm(&self) -> bool {
        let mut s = self.state.lock().unwrap();
        s.ops = 0;
        s.armed.clear();
        std::mem::take(&mut s.fired)
    }

    /// Run `hook` (once) just before the next log entry is created: another
    /// writer taking that version first.
    pub fn before_next_log_create(&self, hook: Hook) {
        self.before_next_create("_logbook/log/", hook);
    }

    /// Run `hook` (once) just before the next create (put-if-absent) of an
    /// object whose path holds `under`.
    pub fn before_next_create(&self, under: &'static str, hook: Hook) {
        self.state.lock().unwrap().before_create = Some((under, hook));
    }

    /// Run `hook` (once) just before the next delete starts: another
    /// client acting while, say, a vacuum is about to delete.
    pub fn before_next_delete(&self, hook: Hook) {
        self.state.lock().unwrap().before_delete = Some(hook);
    }

    /// Hold every put of a data file (under `data/`) until the returned
    /// gate is given permits (one per put).
    pub fn hold_data_puts(&self) -> Arc<tokio::sync::Semaphore> {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        self.state.lock().unwrap().data_gate = Some(gate.clone());
        gate
    }

    /// Make the next create (put-if-absent) of an object whose path holds
    /// `under` fail as `fault`.
    pub fn fail_next_create_under(&self, under: &'static str, fault: Fault) {
        self.state.lock().unwrap().failing_create = Some((under, fault));
    }

    /// Make every put of an object whose path holds `under` fail without
    /// landing (`None`: none).
    pub fn fail_puts_under(&self, under: Option<&'static str>) {
        self.state.lock().unwrap().failing_puts_under = under;
    }

    /// Make the `n`-th put of a data file (1-based) fail without landing.
    pub fn fail_data_put(&self, n: usize) {
        let mut s = self.state.lock().unwrap();
        s.data_puts = 0;
        s.failing_data_put = Some(n);
    }

    /// Delay every operation by a random time of up to `max`.
    pub fn with_delays(self, max: Duration) -> Self {
        self.state.lock().unwrap().max_delay_us = max.as_micros() as u64;
        self
    }

    /// Turn every `PutMode::Create` into an overwrite, as a store that does
    /// not support conditional puts would.
    pub fn ignoring_put_if_absent(self) -> Self {
        self.state.lock().unwrap().ignore_put_if_absent = true;
        self
    }

    /// Count one operation; returns the fault to apply to it, and a delay.
    fn tick(&self) -> (Option<Fault>, Duration) {
        let mut s = self.state.lock().unwrap();
        s.ops += 1;
        let ops = s.ops;
        let fault = s.armed.iter().find(|(k, _)| *k == ops).map(|(_, f)| *f);
        s.fired |= fault.is_some();
        let delay = if s.max_delay_us > 0 {
            s.rng ^= s.rng << 13;
            s.rng ^= s.rng >> 7;
            s.rng ^= s.rng << 17;
            Duration::from_micros(s.rng % s.max_delay_us)
        } else {
            Duration::ZERO
        };
        (fault, delay)
    }

    async fn run<T, F>(&self, op: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let (fault, delay) = self.tick();
        self.apply(fault, delay, op, injected).await
    }

    async fn apply<T, F>(
        &self,
        fault: Option<Fault>,
        delay: Duration,
        op: F,
        error: impl FnOnce() -> object_store::Error,
    ) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        {
            let mut s = self.state.lock().unwrap();
            s.in_flight += 1;
            s.max_in_flight = s.max_in_flight.max(s.in_flight);
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let out = match fault {
            Some(Fault::Before | Fault::Late) => Err(error()),
            Some(Fault::After | Fault::Exists) => {
                let _ = op.await;
                Err(error())
            }
            None => op.await,
        };
        self.state.lock().unwrap().in_flight -= 1;
        out
    }
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "fault",
        source: "injected fault".into(),
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("ops", &self.ops)
            .field("armed", &self.armed)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fault({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        if self.state.lock().unwrap().ignore_put_if_absent {
            opts.mode = object_store::PutMode::Overwrite;
        }
        let data = location.as_ref().contains("/data/");
        let gate = self.state.lock().unwrap().data_gate.clone();
        if let Some(gate) = gate.filter(|_| data) {
            gate.acquire().await.expect("gate open").forget();
        }
        let failing = self.state.lock().unwrap().failing_puts_under;
        if failing.is_some_and(|under| location.as_ref().contains(under)) {
            return Err(injected());
        }
        if data {
            let mut s = self.state.lock().unwrap();
            s.data_puts += 1;
            if s.failing_data_put == Some(s.data_puts) {
                return Err(injected());
            }
        }
        let create = matches!(opts.mode, object_store::PutMode::Create);
        let late = {
            let mut s = self.state.lock().unwrap();
            match &s.late {
                Some((under, ..)) if create && location.as_ref().contains(under) => s.late.take(),
                _ => None,
            }
        };
        if let Some((_, path, payload, opts)) = late {
            // Nobody waits for a held-up request's answer.
            let _ = self.inner.put_opts(&path, payload, opts).await;
        }
        let hook = {
            let mut s = self.state.lock().unwrap();
            match &s.before_create {
                Some((under, _)) if create && location.as_ref().contains(under) => {
                    s.before_create.take().map(|(_, hook)| hook)
                }
                _ => None,
            }
        };
        if let Some(hook) = hook {
            hook.await;
        }
        let (mut fault, delay) = self.tick();
        {
            let mut s = self.state.lock().unwrap();
            if let Some((under, f)) = s.failing_create {
                if create && location.as_ref().contains(under) {
                    s.failing_create = None;
                    fault = Some(f);
                    if f == Fault::Late {
                        s.late = Some((under, location.clone(), payload.clone(), opts.clone()));
                    }
                }
            }
        }
        let path = location.to_string();
        let error = move || match fault {
            Some(Fault::Exists) if create => object_store::Error::AlreadyExists {
                path,
                source: "injected: a retried create found its own first try".into(),
            },
            _ => injected(),
        };
        let op = self.inner.put_opts(location, payload, opts);
        self.apply(fault, delay, op, error).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.run(self.inner.put_multipart_opts(location, opts))
            .await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.run(self.inner.get_opts(location, options)).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let hook = self.state.lock().unwrap().before_delete.take();
        if let Some(hook) = hook {
            let (this, mut locations) = (self.clone(), Some(locations));
            return futures::stream::once(hook)
                .flat_map(move |()| this.delete_stream(locations.take().expect("once")))
                .boxed();
        }
        // One operation, and one fault decision, per path: a store that
        // deletes a batch may fail some of its keys (S3's bulk delete
        // answers per key), so a crash can fall between two of them.
        let this = self.clone();
        locations
            .then(move |location| {
                let this = this.clone();
                async move {
                    let location = location?;
                    let delete = this.inner.delete(&location);
                    this.run(delete).await.map(|()| location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let (fault, _) = self.tick();
        match fault {
            None => self.inner.list(prefix),
            Some(_) => futures::stream::once(async { Err(injected()) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.run(self.inner.list_with_delimiter(prefix)).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.run(self.inner.copy_opts(from, to, options)).await
    }
}
