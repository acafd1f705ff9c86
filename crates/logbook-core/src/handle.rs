//! A table handle's shared state and its I/O: the log, the options, the
//! month- and span-manifest caches, the highest version seen, and every JSON object
//! and listing the table reads and writes. Everything else in core works
//! through a `TableInner`; this module imports none of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{
    layout, LogEntry, MonthManifest, PublishMark, RootManifest, SpanManifest, TxnState,
    ENTRY_FORMAT_STACKED, ENTRY_FORMAT_TXN, FORMAT_VERSION,
};
use crate::log::Log;
use crate::options::TableOptions;
use crate::publish::Publishes;
use crate::storage::StorageLocation;

/// The state a [`crate::Table`] handle and its clones share.
pub(crate) struct TableInner {
    pub name: String,
    pub location: StorageLocation,
    pub log: Log,
    pub options: TableOptions,
    /// Highest version this handle has seen; probing starts here.
    last_seen: AtomicU64,
    /// Month and span manifests are immutable, so they are shared across
    /// versions and read once per handle (up to a bound).
    months: Cache<MonthManifest>,
    spans: Cache<SpanManifest>,
    /// The entry and root manifest of the newest version this handle has
    /// read or committed. A query opens a table at its head, then plans
    /// and scans it, each of which asks for the head (or checks a time
    /// travel against it): without this, each asked again, two round trips.
    newest: Mutex<Option<(Arc<LogEntry>, Arc<RootManifest>)>>,
    /// The head's entry as stored, when opening the table read it while
    /// finding the head ([`Log::latest_entry`]); the first read of that
    /// entry takes it instead of asking the store again. Entries never
    /// change once created, so these bytes cannot be stale.
    opened_entry: Mutex<Option<(u64, Bytes)>>,
    /// The publish log of the warehouse the table lies in (its parent
    /// location), where parts of multi-table publishes are decided.
    pub publishes: Option<Arc<Publishes>>,
    /// What the Iceberg mirror last wrote through this handle (its own
    /// type: this module knows nothing of mirrors), so that its next
    /// version need not read it back.
    pub mirror_memo: Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl TableInner {
    pub(crate) fn new(name: &str, location: StorageLocation, options: TableOptions) -> Self {
        Self {
            name: name.to_string(),
            log: Log::new(location.clone()),
            location: location.clone(),
            options,
            last_seen: AtomicU64::new(0),
            months: Cache::default(),
            spans: Cache::default(),
            newest: Mutex::new(None),
            opened_entry: Mutex::new(None),
            publishes: location.parent().map(|wh| Arc::new(Publishes::new(wh))),
            mirror_memo: Mutex::new(None),
        }
    }

    pub(crate) fn exists_error(&self) -> Error {
        Error::TableExists {
            table: self.name.clone(),
            location: self.location.uri().to_string(),
        }
    }

    /// The entry and root of `version`, if it is the newest version read.
    pub(crate) fn newest(&self, version: u64) -> Option<(Arc<LogEntry>, Arc<RootManifest>)> {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest
            .as_ref()
            .filter(|(e, _)| e.version == version)
            .cloned()
    }

    /// Remember `entry` and `root` if no newer version was read. Both are
    /// immutable once committed (an undecided publish part is not: it is
    /// not remembered).
    pub(crate) fn remember(&self, entry: &Arc<LogEntry>, root: &Arc<RootManifest>) {
        if entry
            .txn
            .as_ref()
            .is_some_and(|t| t.state == TxnState::Pending)
        {
            return;
        }
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        if newest
            .as_ref()
            .is_none_or(|(e, _)| e.version <= entry.version)
        {
            *newest = Some((entry.clone(), root.clone()));
        }
    }

    /// Keep entry `version`'s bytes, read while opening the table.
    pub(crate) fn keep_opened_entry(&self, version: u64, bytes: Bytes) {
        *self.opened_entry.lock().unwrap_or_else(|e| e.into_inner()) = Some((version, bytes));
    }

    /// The highest version this handle has seen.
    pub(crate) fn last_seen(&self) -> u64 {
        self.last_seen.load(Ordering::SeqCst)
    }

    pub(crate) fn saw(&self, version: u64) {
        self.last_seen.fetch_max(version, Ordering::SeqCst);
    }

    pub(crate) async fn latest_version(&self) -> Result<u64> {
        let v = self
            .log
            .latest_from(self.last_seen.load(Ordering::SeqCst))
            .await?;
        self.saw(v);
        Ok(v)
    }

    /// Refuse to write to a store that ignores put-if-absent (checked once
    /// per location and the tables of its warehouse, before the first
    /// commit).
    pub(crate) async fn ensure_put_if_absent(&self) -> Result<()> {
        self.location
            .probed
            .get_or_try_init(|| {
                crate::log::probe_put_if_absent(&self.location, self.options.ids.next_id())
            })
            .await
            .map(|_| ())
    }

    pub(crate) async fn write_hint(&self, version: u64) {
        if let Err(e) = self.log.write_hint(version).await {
            tracing::warn!(table = %self.name, version, error = %e, "commit landed; updating the _last hint failed");
        }
    }

    /// The log entries of `versions`, in order, read 16 at a time.
    pub(crate) fn entries(
        &self,
        versions: std::ops::RangeInclusive<u64>,
    ) -> impl futures::Stream<Item = Result<LogEntry>> + '_ {
        futures::stream::iter(versions)
            .map(|v| self.read_entry(v))
            .buffered(16)
    }

    /// Entry `version` as it reads now: a multi-table publish's part shows
    /// its commit once the warehouse decided it, and the version before it
    /// (a commit changing nothing) while undecided or once aborted (see
    /// the `publish` module).
    pub(crate) async fn read_entry(&self, version: u64) -> Result<LogEntry> {
        let mut entry = self.read_stored_entry(version).await?;
        self.resolve(&mut entry).await?;
        Ok(entry)
    }

    /// Resolve `entry`'s publish part, if it has one, against the
    /// warehouse's decision.
    pub(crate) async fn resolve(&self, entry: &mut LogEntry) -> Result<()> {
        let Some(part) = entry.txn.as_mut() else {
            return Ok(());
        };
        if part.state != TxnState::Pending {
            return Ok(());
        }
        let publishes = self.publishes.as_ref().ok_or_else(|| Error::NoWarehouse {
            table: self.name.clone(),
            version: entry.version,
            seq: part.seq,
        })?;
        let Some(decision) = publishes.decision(part.seq).await? else {
            return Ok(());
        };
        part.state = decision.resolves(part);
        if part.state == TxnState::Committed {
            entry.manifest = part.manifest.clone();
            entry.dates = part.dates.clone();
            entry.rows_added = part.rows_added;
            entry.files_added = part.files_added;
            entry.files_removed = part.files_removed;
            entry.publish = Some(PublishMark {
                seq: part.seq,
                version: entry.version,
            });
        } else if let Some(below) = decision.commits_one_of(&part.over) {
            // Built on a rival part the decision committed: this version
            // changes nothing after it, so it holds that part's snapshot.
            entry.manifest = below.manifest.clone();
            entry.publish = Some(PublishMark {
                seq: part.seq,
                version: below.version,
            });
        }
        Ok(())
    }

    /// Entry `version` as stored: a publish part unresolved.
    pub(crate) async fn read_stored_entry(&self, version: u64) -> Result<LogEntry> {
        let path = layout::log_entry(version);
        let kept = {
            let mut kept = self.opened_entry.lock().unwrap_or_else(|e| e.into_inner());
            match kept.as_ref() {
                Some((v, _)) if *v == version => kept.take().map(|(_, bytes)| bytes),
                _ => None,
            }
        };
        let bytes = match kept {
            Some(bytes) => Some(bytes),
            None => self.log.read(version).await?,
        }
        .ok_or_else(|| Error::Corrupt {
            table: self.name.clone(),
            path: path.clone(),
            reason: "log entry is missing".into(),
        })?;
        let entry: LogEntry = self.decode(&path, &bytes)?;
        let part_format = [ENTRY_FORMAT_TXN, ENTRY_FORMAT_STACKED].contains(&entry.format);
        if !part_format || entry.txn.is_none() {
            self.readable_format(&path, entry.format)?;
        }
        if entry.version != version {
            return Err(Error::Corrupt {
                table: self.name.clone(),
                path,
                reason: format!("entry says version {}", entry.version),
            });
        }
        Ok(entry)
    }

    pub(crate) async fn month(&self, path: &str) -> Result<Arc<MonthManifest>> {
        self.cached(&self.months, path).await
    }

    pub(crate) async fn span(&self, path: &str) -> Result<Arc<SpanManifest>> {
        self.cached(&self.spans, path).await
    }

    async fn cached<T: DeserializeOwned>(&self, cache: &Cache<T>, path: &str) -> Result<Arc<T>> {
        if let Some(m) = cache.get(path) {
            return Ok(m);
        }
        let m: Arc<T> = Arc::new(self.get_json(path).await?);
        cache.put(path.to_string(), m.clone());
        Ok(m)
    }

    /// Remember a month manifest this handle wrote (manifests are immutable).
    pub(crate) fn cache_month(&self, path: String, month: MonthManifest) {
        self.months.put(path, Arc::new(month));
    }

    /// Remember a span manifest this handle wrote.
    pub(crate) fn cache_span(&self, path: String, span: SpanManifest) {
        self.spans.put(path, Arc::new(span));
    }

    pub(crate) fn encode<T: Serialize>(&self, value: &T) -> Result<Bytes> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| Error::InvalidInput {
                table: self.name.clone(),
                reason: format!("cannot encode metadata: {e}"),
            })
    }

    /// Refuse metadata written by a newer format than this build reads.
    pub(crate) fn readable_format(&self, path: &str, found: u32) -> Result<()> {
        if found > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                table: self.name.clone(),
                path: path.to_string(),
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }

    pub(crate) fn decode<T: DeserializeOwned>(&self, path: &str, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
            table: self.name.clone(),
            path: path.to_string(),
            reason: e.to_string(),
        })
    }

    /// Read a JSON object the log references: missing means corrupt.
    pub(crate) async fn get_json<T: DeserializeOwned>(&self, relative: &str) -> Result<T> {
        self.get_json_opt(relative)
            .await?
            .ok_or_else(|| Error::Corrupt {
                table: self.name.clone(),
                path: relative.to_string(),
                reason: "referenced by the log but missing".into(),
            })
    }

    /// Every object under `prefix` (relative to the table root), in one
    /// listing; an error names the prefix.
    pub(crate) async fn list(&self, prefix: &str) -> Result<Vec<object_store::ObjectMeta>> {
        self.location
            .store()
            .list(Some(&self.location.path(prefix)))
            .try_collect()
            .await
            .map_err(|e| Error::storage(prefix, e))
    }

    /// The objects under `prefix` whose path sorts after `offset` (both
    /// relative to the table root), in one listing.
    pub(crate) async fn list_after(
        &self,
        prefix: &str,
        offset: &str,
    ) -> Result<Vec<object_store::ObjectMeta>> {
        self.location
            .store()
            .list_with_offset(
                Some(&self.location.path(prefix)),
                &self.location.path(offset),
            )
            .try_collect()
            .await
            .map_err(|e| Error::storage(prefix, e))
    }

    /// Every JSON object under `prefix`, listed once and read 64 at a time,
    /// with its relative path and modification time (ms). An object deleted
    /// between the listing and its read is left out (markers and stage
    /// records come and go).
    pub(crate) async fn list_json<T: DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, i64, T)>> {
        let objects = self.list(prefix).await?;
        let read: Vec<Option<(String, i64, T)>> = futures::stream::iter(objects)
            .map(|o| async move {
                let path = self.location.relative(&o.location);
                let value = self.get_json_opt::<T>(&path).await?;
                Ok::<_, Error>(value.map(|v| (path, o.last_modified.timestamp_millis(), v)))
            })
            // S3 answers many at once: a stage of 90 dates is read in two
            // round trips, not six.
            .buffered(64)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Read a JSON object that may legitimately be absent (markers, stages).
    pub(crate) async fn get_json_opt<T: DeserializeOwned>(
        &self,
        relative: &str,
    ) -> Result<Option<T>> {
        let path = self.location.path(relative);
        match self.location.get_bytes(&path).await {
            Ok(bytes) => self.decode(relative, &bytes).map(Some),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    pub(crate) async fn put_json<T: Serialize>(&self, relative: &str, value: &T) -> Result<()> {
        self.put(relative.to_string(), self.encode(value)?).await
    }

    /// Create `relative` holding `value` only if nothing is there yet
    /// (put-if-absent); false if something was.
    pub(crate) async fn create_json<T: Serialize>(
        &self,
        relative: &str,
        value: &T,
    ) -> Result<bool> {
        self.location.create_at(relative, self.encode(value)?).await
    }

    /// Put `bytes` (encoded JSON) at `relative`.
    pub(crate) async fn put(&self, relative: String, bytes: Bytes) -> Result<()> {
        self.location.put_at(&relative, bytes).await
    }
}

/// Immutable objects by path, in two generations of at most [`CACHED`]
/// each: every commit writes a new month and span manifest, so a handle
/// that reads the latest version for days (a server, a backfill loop)
/// would otherwise keep one of each per version. When the current
/// generation is full it becomes the previous one and the one before is
/// dropped; a hit in the previous generation moves back to the current.
/// So what was used since the last turnover stays (a scan of up to
/// [`CACHED`] months keeps hitting), and what was not goes.
struct Cache<T>(Mutex<Generations<T>>);

struct Generations<T> {
    current: HashMap<String, Arc<T>>,
    previous: HashMap<String, Arc<T>>,
}

/// Manifests of one kind per generation: 85 years of months. A month of
/// daily partitions whose runs record long input lists can be a MB, so a
/// handle may hold up to 2 GB of them at worst (two generations); counted
/// in entries, not bytes, as simply as the old unbounded cache was.
const CACHED: usize = 1024;

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self(Mutex::new(Generations {
            current: HashMap::new(),
            previous: HashMap::new(),
        }))
    }
}

impl<T> Cache<T> {
    fn get(&self, path: &str) -> Option<Arc<T>> {
        let mut cached = self.0.lock().expect("cache lock");
        if let Some(found) = cached.current.get(path) {
            return Some(found.clone());
        }
        let found = cached.previous.remove(path)?;
        cached.insert(path.to_string(), found.clone());
        Some(found)
    }

    fn put(&self, path: String, value: Arc<T>) {
        self.0.lock().expect("cache lock").insert(path, value);
    }
}

impl<T> Generations<T> {
    fn insert(&mut self, path: String, value: Arc<T>) {
        if self.current.len() >= CACHED {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(path, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_what_was_used_since_the_last_turnover() {
        let cache: Cache<usize> = Cache::default();
        let key = |i: usize| format!("m{i}");
        for i in 0..=CACHED {
            cache.put(key(i), Arc::new(i));
        }
        // One turnover: the first generation is still there, and a hit
        // moves it back to the current one.
        assert_eq!(cache.get(&key(0)).as_deref(), Some(&0));
        for i in CACHED + 1..2 * CACHED + 1 {
            cache.put(key(i), Arc::new(i));
        }
        assert_eq!(cache.get(&key(0)).as_deref(), Some(&0), "used: kept");
        assert_eq!(cache.get(&key(1)), None, "unused for two turnovers: gone");
        let held = cache.0.lock().unwrap();
        assert!(held.current.len() <= CACHED && held.previous.len() <= CACHED);
    }
}
