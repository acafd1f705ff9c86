//! Where tables live: an object store plus a prefix, parsed from a URI.

use std::sync::Arc;

use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use url::Url;

use crate::error::{Error, Result};
use crate::local_read as local;
use crate::names::validate_table_name;

/// An object store and a prefix inside it: a warehouse or a table root.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::StorageLocation;
/// let wh = StorageLocation::parse("memory://wh")?;
/// let table = wh.child("orders")?;
/// assert_eq!(table.uri(), "memory://wh/orders");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct StorageLocation {
    store: Arc<dyn ObjectStore>,
    prefix: Option<Path>,
    uri: String,
    /// The store again, typed, when it is a local directory: it maps
    /// object paths to files, which data-file reads (`reader::local`),
    /// [`StorageLocation::get_bytes`], [`StorageLocation::exists`] and
    /// [`StorageLocation::remove_empty_parents`] use directly.
    local: Option<Arc<LocalFileSystem>>,
    /// Set once a commit found that the store honours put-if-absent
    /// (`log::probe_put_if_absent`). Shared by a warehouse's locations: it
    /// is the store's property, and probing it costs three round trips.
    pub(crate) probed: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for StorageLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageLocation")
            .field("uri", &self.uri)
            .finish()
    }
}

impl StorageLocation {
    /// Parse a local path, `file://`, `memory://`, `s3://`, `gs://` or `az://` URI.
    ///
    /// Cloud credentials and settings come from the usual environment
    /// variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`); `options` override them.
    pub fn parse(uri: &str) -> Result<Self> {
        Self::parse_with_options(uri, std::iter::empty::<(String, String)>())
    }

    /// [`StorageLocation::parse`] with object_store configuration options
    /// (e.g. `("aws_endpoint", "http://127.0.0.1:9000")`, `("aws_allow_http", "true")`).
    pub fn parse_with_options<K, V>(
        uri: &str,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self>
    where
        K: AsRef<str>,
        V: Into<String>,
    {
        let unsupported = |reason: String| Error::UnsupportedStore {
            location: uri.to_string(),
            reason,
        };
        let url = match Url::parse(uri) {
            Ok(url) if url.scheme().len() > 1 => url,
            // No scheme (or a Windows drive letter): a local path.
            _ => return Self::local(std::path::Path::new(uri)),
        };
        match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|_| unsupported("not a local file path".into()))?;
                Self::local(&path)
            }
            "memory" => {
                // `memory://wh/x`: the host is the first path segment.
                let prefix = format!("{}/{}", url.host_str().unwrap_or(""), url.path());
                Ok(Self::from_store(
                    Arc::new(InMemory::new()),
                    &prefix.replace("//", "/"),
                    uri,
                ))
            }
            #[cfg(feature = "cloud")]
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" | "azure" => {
                let store = cloud::build(&url, options).map_err(|e| unsupported(e.to_string()))?;
                Ok(Self::from_store(
                    store,
                    url.path().trim_matches('/'),
                    uri.trim_end_matches('/'),
                ))
            }
            other => {
                let _ = options.into_iter().count();
                Err(unsupported(format!(
                    "scheme {other:?} is not supported (use a local path, file://, memory://{})",
                    if cfg!(feature = "cloud") {
                        ", s3://, gs:// or az://"
                    } else {
                        "; build with the `cloud` feature for s3://, gs://, az://"
                    }
                )))
            }
        }
    }

    /// A local directory (created if missing), written with fsync so a
    /// committed log entry survives power loss.
    pub fn local(dir: &std::path::Path) -> Result<Self> {
        let io_err = |e: std::io::Error| Error::UnsupportedStore {
            location: dir.display().to_string(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let canonical = dir.canonicalize().map_err(io_err)?;
        let store = LocalFileSystem::new_with_prefix(&canonical)
            .map_err(|e| Error::storage(canonical.display(), e))?
            .with_fsync(true);
        let store = Arc::new(store);
        let uri = format!("file://{}", canonical.display());
        Ok(Self {
            local: Some(store.clone()),
            ..Self::from_store(store, "", &uri)
        })
    }

    /// Wrap an existing store (tests use this to inject counting or faulty stores).
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, uri: &str) -> Self {
        let prefix = prefix.trim_matches('/');
        Self {
            store,
            prefix: (!prefix.is_empty()).then(|| Path::from(prefix)),
            uri: uri.to_string(),
            local: None,
            probed: Default::default(),
        }
    }

    /// The location of the table `name` inside this warehouse.
    pub fn child(&self, name: &str) -> Result<Self> {
        validate_table_name(name)?;
        Ok(Self {
            store: self.store.clone(),
            prefix: Some(match &self.prefix {
                Some(p) => p.clone().join(name),
                None => Path::from(name),
            }),
            uri: if self.uri.ends_with('/') {
                format!("{}{name}", self.uri)
            } else {
                format!("{}/{name}", self.uri)
            },
            local: self.local.clone(),
            probed: self.probed.clone(),
        })
    }

    /// The warehouse a table location lies in: the location one level up
    /// (what [`StorageLocation::child`] came from). `None` at a store's root.
    pub(crate) fn parent(&self) -> Option<Self> {
        let prefix = self.prefix.as_ref()?;
        let parts: Vec<_> = prefix.parts().collect();
        let up = parts.len().checked_sub(1)?;
        let uri = self.uri.trim_end_matches('/');
        let uri = uri.rsplit_once('/').map_or(uri, |(head, _)| head);
        Some(Self {
            store: self.store.clone(),
            prefix: (up > 0).then(|| Path::from_iter(parts[..up].iter().cloned())),
            uri: uri.to_string(),
            local: self.local.clone(),
            probed: self.probed.clone(),
        })
    }

    /// After `relative` was deleted, remove up to `levels` of its parent
    /// directories that it left empty, deepest first.
    ///
    /// Only a local directory has any: object stores have no directories,
    /// and object_store's local store keeps them, so that every listing of
    /// `data/` or `_logbook/running/` walked each directory a date or a
    /// write ever had (half of a `status` on a table with three years of
    /// dates; BENCHMARKS.md, "Web UI"). A directory holding anything is not
    /// removed, and a listing skips one that vanishes. A writer creating a
    /// directory that is removed between its two `mkdir`s fails its put:
    /// callers pass only directories no other writer creates (a data
    /// file's write directory), or ones whose writers retry (intent
    /// markers). Failures are ignored: an empty directory costs time only.
    pub(crate) fn remove_empty_parents(&self, relative: &str, levels: usize) {
        let mut dir = relative.trim_matches('/');
        for _ in 0..levels {
            let Some((parent, _)) = dir.rsplit_once('/') else {
                return;
            };
            let Some(on_disk) = self.local_file(&self.path(parent)) else {
                return;
            };
            if std::fs::remove_dir(on_disk).is_err() {
                return;
            }
            dir = parent;
        }
    }

    /// The file (or directory) on local disk behind the object path
    /// `path`, when this location is a local directory.
    pub(crate) fn local_file(&self, path: &Path) -> Option<std::path::PathBuf> {
        self.local.as_ref()?.path_to_filesystem(path).ok()
    }

    /// Whether each request to this location is a round trip over a
    /// network (an object store; not a local directory or memory), so
    /// that readers trade bytes and memory for fewer, concurrent requests.
    pub(crate) fn is_remote(&self) -> bool {
        self.local.is_none() && !self.uri.starts_with("memory:")
    }

    /// The bytes of the object `path`. A local directory's small files
    /// (log entries, manifests, markers) are read on this thread, as a
    /// data file's small ranges are (`reader::local`: object_store's local
    /// store sends each read to tokio's blocking pool, a hand-off to
    /// another thread and back that costs more than the read); anything
    /// else goes through the store. The cost: on a cold disk or a network
    /// mount, reads that `buffered(64)` ran at once on the pool (a listing
    /// of markers) now run one after another on the calling thread, and a
    /// hung mount holds that thread rather than a pool thread.
    pub(crate) async fn get_bytes(&self, path: &Path) -> object_store::Result<bytes::Bytes> {
        if let Some(read) = self
            .local_file(path)
            .and_then(|f| local::read_small(&f, path))
        {
            local::YieldOnce::default().await;
            return read;
        }
        self.store.get(path).await?.bytes().await
    }

    /// Put `bytes` at `relative` (overwriting); an error names the object.
    pub(crate) async fn put_at(&self, relative: &str, bytes: bytes::Bytes) -> Result<()> {
        let path = self.path(relative);
        self.store
            .put(&path, object_store::PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| Error::storage(&path, e))
    }

    /// Create `relative` holding `bytes` only if nothing is there yet
    /// (put-if-absent): false if something was.
    pub(crate) async fn create_at(&self, relative: &str, bytes: bytes::Bytes) -> Result<bool> {
        let path = self.path(relative);
        let create = object_store::PutOptions::from(object_store::PutMode::Create);
        let payload = object_store::PutPayload::from(bytes);
        match self.store.put_opts(&path, payload, create).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    /// Whether the object `path` exists: a `HEAD`, or for a local
    /// directory a `stat` on this thread (as [`StorageLocation::get_bytes`]).
    pub(crate) async fn exists(&self, path: &Path) -> object_store::Result<bool> {
        if let Some(found) = self.local_file(path).and_then(|f| local::is_file(&f)) {
            return Ok(found);
        }
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The URI this location was opened from.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The underlying object store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The object path of `relative` (a `/`-separated path built by logbook).
    pub fn path(&self, relative: &str) -> Path {
        let rel = relative.trim_matches('/');
        match &self.prefix {
            Some(p) if rel.is_empty() => p.clone(),
            Some(p) => Path::from(format!("{p}/{rel}")),
            None => Path::from(rel),
        }
    }

    /// Strip this location's prefix from an object path.
    pub fn relative(&self, path: &Path) -> String {
        let s = path.as_ref();
        match &self.prefix {
            Some(p) => s
                .strip_prefix(p.as_ref())
                .map(|r| r.trim_start_matches('/'))
                .unwrap_or(s)
                .to_string(),
            None => s.to_string(),
        }
    }
}

#[cfg(feature = "cloud")]
mod cloud {
    use super::*;
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

    pub(super) fn build<K: AsRef<str>, V: Into<String>>(
        url: &Url,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> object_store::Result<Arc<dyn ObjectStore>> {
        let options: Vec<(String, String)> = options
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_ascii_lowercase(), v.into()))
            .collect();
        Ok(match url.scheme() {
            "s3" | "s3a" => {
                let mut b = AmazonS3Builder::from_env().with_url(url.as_str());
                for (k, v) in options {
                    b = b.with_config(k.parse::<AmazonS3ConfigKey>()?, v);
                }
                Arc::new(b.build()?)
            }
            "gs" => {
                let mut b = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
                for (k, v) in options {
                    b = b.with_config(k.parse::<GoogleConfigKey>()?, v);
                }
                Arc::new(b.build()?)
            }
            _ => {
                let mut b = MicrosoftAzureBuilder::from_env().with_url(url.as_str());
                for (k, v) in options {
                    b = b.with_config(k.parse::<AzureConfigKey>()?, v);
                }
                Arc::new(b.build()?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_refuses_escapes_and_paths_join() {
        let wh = StorageLocation::parse("memory://wh").unwrap();
        assert!(wh.child("../x").is_err());
        assert!(wh.child("a/b").is_err());
        let t = wh.child("orders").unwrap();
        assert_eq!(
            t.path("_logbook/_last").as_ref(),
            "wh/orders/_logbook/_last"
        );
        assert_eq!(t.relative(&t.path("data/x.parquet")), "data/x.parquet");
    }

    #[test]
    fn unknown_scheme_is_a_clear_error() {
        let e = StorageLocation::parse("ftp://host/x").unwrap_err();
        assert!(e.to_string().contains("ftp"), "{e}");
    }
}
