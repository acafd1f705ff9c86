//! A store that answers after a fixed round trip, the way S3 does: one
//! wait per request, and a delete of many keys is one request per 1,000
//! (S3's `DeleteObjects`). object_store's `ThrottledStore` waits once per
//! key of a `delete_stream`, one key after another, which would make a
//! bulk delete cost what 90 single deletes in a row cost.
//!
//! Waits are `tokio::time::sleep`s, so requests in flight together wait
//! together, as they do over a network.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Keys per bulk delete request (S3's limit).
const DELETE_BATCH: usize = 1_000;

/// `inner` behind a round trip per request, none until [`Self::set_latency`]
/// (so a bench's setup runs at memory speed).
#[derive(Debug)]
pub struct LatencyStore {
    inner: Arc<dyn ObjectStore>,
    latency_us: Arc<AtomicU64>,
}

impl LatencyStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            latency_us: Default::default(),
        }
    }

    /// Each request from now on waits `latency` first.
    pub fn set_latency(&self, latency: Duration) {
        self.latency_us
            .store(latency.as_micros() as u64, Ordering::Relaxed);
    }

    fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.load(Ordering::Relaxed))
    }

    /// One round trip.
    async fn wait(&self) {
        let latency = self.latency();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
    }
}

impl fmt::Display for LatencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Latency({:?}, {})", self.latency(), self.inner)
    }
}

#[async_trait]
impl ObjectStore for LatencyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.wait().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wait().await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.wait().await;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let (inner, latency) = (self.inner.clone(), self.latency());
        locations
            .chunks(DELETE_BATCH)
            .then(move |batch| {
                let inner = inner.clone();
                async move {
                    tokio::time::sleep(latency).await;
                    let batch = futures::stream::iter(batch).boxed();
                    inner.delete_stream(batch).collect::<Vec<_>>().await
                }
            })
            .flat_map(futures::stream::iter)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let mut listing = Some(self.inner.list(prefix));
        futures::stream::once(tokio::time::sleep(self.latency()))
            .flat_map(move |()| listing.take().expect("once"))
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.wait().await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wait().await;
        self.inner.copy_opts(from, to, options).await
    }
}
