//! An `ObjectStore` wrapper that counts operations by kind and, given a
//! manual clock, reports modification times from it (so tests can age files).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Mutex<BTreeMap<&'static str, usize>>>,
    reads: Arc<Mutex<Vec<String>>>,
    clock: Option<Arc<logbook::clock::ManualClock>>,
    written_ms: Arc<Mutex<HashMap<String, i64>>>,
    bytes_put: Arc<std::sync::atomic::AtomicUsize>,
    /// Entries returned by listings: a listing from an offset that fell back
    /// to listing everything costs one call either way, but not one entry.
    listed: Arc<std::sync::atomic::AtomicUsize>,
    /// How long each GET and HEAD waits before it is answered (a round
    /// trip), so that requests a reader makes at once overlap.
    delay: Option<std::time::Duration>,
    /// GETs and HEADs under way, and the most there were at once.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            counts: Default::default(),
            reads: Default::default(),
            clock: None,
            written_ms: Default::default(),
            bytes_put: Default::default(),
            listed: Default::default(),
            delay: None,
            in_flight: Default::default(),
            most_in_flight: Default::default(),
        }
    }

    /// Answer each GET and HEAD after `delay`, as a store over a network.
    pub fn with_delay(mut self, delay: std::time::Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// The most GETs and HEADs that were under way at once, then start again.
    pub fn take_most_in_flight(&self) -> usize {
        self.most_in_flight
            .swap(0, std::sync::atomic::Ordering::SeqCst)
    }

    /// Report each object's modification time as `clock`'s time when it was written.
    pub fn with_clock(mut self, clock: Arc<logbook::clock::ManualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    fn written(&self, location: &Path) {
        if let Some(c) = &self.clock {
            use logbook::clock::Clock;
            self.written_ms
                .lock()
                .unwrap()
                .insert(location.to_string(), c.now_millis());
        }
    }

    fn bump(&self, kind: &'static str) {
        *self.counts.lock().unwrap().entry(kind).or_default() += 1;
    }

    /// Paths read (GET, including ranged reads) so far, then start again.
    pub fn take_reads(&self) -> Vec<String> {
        std::mem::take(&mut *self.reads.lock().unwrap())
    }

    /// Counts so far, then start again from zero.
    pub fn take(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.counts.lock().unwrap())
    }

    /// Entries listed so far, then start again.
    pub fn take_listed(&self) -> usize {
        self.listed.swap(0, std::sync::atomic::Ordering::SeqCst)
    }

    /// Count each entry `listing` yields and, given a clock, report its
    /// modification time from it.
    fn observed(
        &self,
        listing: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let listed = self.listed.clone();
        let written = self.clock.is_some().then(|| self.written_ms.clone());
        listing
            .map(move |meta| {
                listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(written) = &written else {
                    return meta;
                };
                meta.map(|mut m| {
                    if let Some(ms) = written.lock().unwrap().get(m.location.as_ref()) {
                        m.last_modified = chrono::DateTime::from_timestamp_millis(*ms).unwrap();
                    }
                    m
                })
            })
            .boxed()
    }

    /// Bytes put (single puts, not multipart) so far, then start again.
    pub fn take_bytes_put(&self) -> usize {
        self.bytes_put.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.bump("put");
        self.bytes_put.fetch_add(
            payload.content_length(),
            std::sync::atomic::Ordering::SeqCst,
        );
        // A put that failed (a create that found the object) leaves its
        // modification time as it was, as a real store does.
        let put = self.inner.put_opts(location, payload, opts).await;
        if put.is_ok() {
            self.written(location);
        }
        put
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.bump("put_multipart");
        self.written(location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.bump(if options.head { "head" } else { "get" });
        if !options.head {
            self.reads.lock().unwrap().push(location.to_string());
        }
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most_in_flight.fetch_max(now, SeqCst);
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        let result = self.inner.get_opts(location, options).await;
        self.in_flight.fetch_sub(1, SeqCst);
        let mut result = result?;
        if let Some(ms) = self.written_ms.lock().unwrap().get(location.as_ref()) {
            result.meta.last_modified = chrono::DateTime::from_timestamp_millis(*ms).unwrap();
        }
        Ok(result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.bump("delete");
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.bump("list");
        self.observed(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        // Passed on (the default would list everything through `list`), so
        // a backend's own offset listing is what gets counted.
        self.bump("list");
        self.observed(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.bump("list");
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.bump("copy");
        self.inner.copy_opts(from, to, options).await
    }
}
