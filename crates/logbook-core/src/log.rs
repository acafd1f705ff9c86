//! The commit point: a sequence of numbered objects created with put-if-absent.
//!
//! This module knows nothing of tables. It stores opaque bytes at version `v`
//! only if no object exists there (`PutMode::Create`), finds the latest
//! version from a best-effort hint plus a bounded probe, and classifies every
//! put as created, lost to another writer, or ambiguous.
//!
//! logbook's own log is one such sequence (`_logbook/log/`); a Delta mirror's
//! `_delta_log/` is another, with the same `<20 digits>.json` names; an
//! Iceberg mirror's `metadata/v<N>.metadata.json` files a third.

use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::format::layout;
use crate::storage::StorageLocation;

/// Outcome of one put-if-absent of log entry `v`, as the store reported it.
#[derive(Debug)]
enum PutOutcome {
    /// Our entry is version `v`.
    Created,
    /// An entry exists at `v`: another writer's, or our own when the store
    /// retried a create whose first try landed.
    AlreadyExists,
    /// The put failed in a way that may or may not have created the entry
    /// (e.g. the response was lost).
    Ambiguous(Error),
}

/// The decided outcome of [`Log::create`].
#[derive(Debug)]
pub enum Created {
    /// Entry `v` is ours: created now, or found on reading back after the
    /// store reported it existing or gave no answer.
    Ours,
    /// Entry `v` is another writer's (its bytes, read back).
    Theirs(Bytes),
    /// The put gave no answer (its error) and entry `v` does not exist.
    /// Our put may still land later (a delayed request), so a caller that
    /// gives up now must report its outcome as unknown; trying `v` again is
    /// safe.
    Absent(Error),
}

/// How a log names its entries and its hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `<dir>/<20-digit version>.json`; the hint holds the version.
    Padded,
    /// Iceberg's file-system tables: version `v` is
    /// `<dir>/v<v + 1>.metadata.json` (Iceberg counts from 1), and the hint,
    /// `version-hint.text`, holds `v + 1` with no newline, as readers
    /// expect it.
    IcebergMetadata,
}

impl Naming {
    fn file(self, version: u64) -> String {
        match self {
            Naming::Padded => format!("{version:020}.json"),
            Naming::IcebergMetadata => format!("v{}.metadata.json", version + 1),
        }
    }

    fn hint_text(self, version: u64) -> String {
        match self {
            Naming::Padded => version.to_string(),
            Naming::IcebergMetadata => (version + 1).to_string(),
        }
    }

    fn hint_version(self, text: &str) -> Option<u64> {
        let n: u64 = text.trim().parse().ok()?;
        match self {
            Naming::Padded => Some(n),
            Naming::IcebergMetadata => n.checked_sub(1),
        }
    }
}

/// The numbered log of one table.
#[derive(Debug, Clone)]
pub struct Log {
    location: StorageLocation,
    /// The directory of the entries, relative to the table root.
    dir: &'static str,
    /// Where the best-effort latest-version hint lives.
    hint: &'static str,
    naming: Naming,
}

impl Log {
    /// logbook's own log.
    pub fn new(location: StorageLocation) -> Self {
        Self::in_dir(location, layout::LOG_DIR, layout::LAST_HINT)
    }

    /// A log of `<dir>/<20-digit version>.json` entries, with its hint at `hint`.
    pub fn in_dir(location: StorageLocation, dir: &'static str, hint: &'static str) -> Self {
        Self::named(location, dir, hint, Naming::Padded)
    }

    /// A log in `dir` whose entries and hint are named by `naming`.
    pub fn named(
        location: StorageLocation,
        dir: &'static str,
        hint: &'static str,
        naming: Naming,
    ) -> Self {
        Self {
            location,
            dir,
            hint,
            naming,
        }
    }

    /// Entry `version`'s path relative to the table root.
    pub fn entry_name(&self, version: u64) -> String {
        format!("{}/{}", self.dir, self.naming.file(version))
    }

    fn entry_path(&self, version: u64) -> object_store::path::Path {
        self.location.path(&self.entry_name(version))
    }

    fn store(&self) -> &dyn ObjectStore {
        self.location.store().as_ref()
    }

    /// Create entry `version` holding `bytes` if no entry exists there, and
    /// decide whose entry `version` is: when the store reports the entry
    /// existing (which a store retrying its own create also reports) or
    /// gives no answer, the entry is read back and `is_ours` judges it (an
    /// error from `is_ours`, say bytes it cannot decode, is returned: whose
    /// entry it is stays unknown).
    ///
    /// An error means the outcome is unknown: the put gave no answer (that
    /// error is returned), the read-back failed, or `is_ours` could not
    /// tell. Every create of a
    /// numbered entry goes through here (commits, a table's entry 0, the
    /// Delta mirror), so none can mistake its own entry for a rival's.
    pub async fn create(
        &self,
        version: u64,
        bytes: Bytes,
        is_ours: impl Fn(&[u8]) -> Result<bool>,
    ) -> Result<Created> {
        let judge = |found: Bytes| match is_ours(&found)? {
            true => Ok(Created::Ours),
            false => Ok(Created::Theirs(found)),
        };
        match self.try_create(version, bytes).await {
            PutOutcome::Created => Ok(Created::Ours),
            PutOutcome::AlreadyExists => match self.read(version).await? {
                Some(found) => judge(found),
                // Entries are never deleted while a writer may create them:
                // a store contradicting itself leaves the outcome unknown.
                None => {
                    let path = self.entry_path(version);
                    let source = object_store::Error::Generic {
                        store: "logbook",
                        source: "the store reported the entry existing, then found none".into(),
                    };
                    Err(Error::storage(&path, source))
                }
            },
            PutOutcome::Ambiguous(e) => {
                tracing::warn!(path = %self.entry_path(version), error = %e, "create outcome unknown; reading the entry back");
                match self.read(version).await {
                    Ok(Some(found)) => judge(found),
                    Ok(None) => Ok(Created::Absent(e)),
                    Err(_) => Err(e),
                }
            }
        }
    }

    /// One put-if-absent of entry `version`, as the store reports it.
    async fn try_create(&self, version: u64, bytes: Bytes) -> PutOutcome {
        let path = self.entry_path(version);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store()
            .put_opts(&path, PutPayload::from(bytes), opts)
            .await
        {
            Ok(_) => PutOutcome::Created,
            Err(object_store::Error::AlreadyExists { .. }) => PutOutcome::AlreadyExists,
            Err(e) => PutOutcome::Ambiguous(Error::storage(&path, e)),
        }
    }

    /// Read entry `version`, or `None` if it does not exist.
    pub async fn read(&self, version: u64) -> Result<Option<Bytes>> {
        let path = self.entry_path(version);
        match self.location.get_bytes(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    /// Does entry `version` exist (one `HEAD`; a `stat` on a local directory)?
    pub async fn exists(&self, version: u64) -> Result<bool> {
        let path = self.entry_path(version);
        self.location
            .exists(&path)
            .await
            .map_err(|e| Error::storage(&path, e))
    }

    /// The latest version, or `None` for an empty log.
    ///
    /// Reads the `_last` hint, then asks whether the entry it names and
    /// the next exist at once (two round trips in sequence when the hint
    /// is current), probing forward when it is not. Never lists the log.
    pub async fn latest(&self) -> Result<Option<u64>> {
        Ok(self.find_latest(false).await?.map(|(v, _)| v))
    }

    /// [`Log::latest`], reading the hinted entry rather than asking whether
    /// it exists (the same round trip), so that when the hint is current
    /// its bytes come back too: a reader opening a table reads that entry
    /// next, and this spares it the round trip. For a table's log (entries
    /// of a few hundred bytes), not a mirror's (an Iceberg metadata file
    /// holds every retained snapshot).
    pub async fn latest_entry(&self) -> Result<Option<(u64, Option<Bytes>)>> {
        self.find_latest(true).await
    }

    async fn find_latest(&self, read: bool) -> Result<Option<(u64, Option<Bytes>)>> {
        if let Some(hinted) = self.read_hint().await? {
            let here = async {
                match read {
                    true => self.read(hinted).await,
                    false => Ok(self.exists(hinted).await?.then(Bytes::new)),
                }
            };
            let (entry, next) = futures::try_join!(here, self.exists(hinted + 1))?;
            match (entry, next) {
                (Some(bytes), false) => return Ok(Some((hinted, read.then_some(bytes)))),
                (Some(_), true) => return Ok(Some((self.latest_from(hinted + 1).await?, None))),
                // A hint past the log's end (its entries removed): probe
                // from the start.
                (None, _) => {}
            }
        }
        if !self.exists(0).await? {
            return Ok(None);
        }
        Ok(Some((self.latest_from(0).await?, None)))
    }

    /// The latest version given that `known` exists: gallop forward, then
    /// binary search (versions are created contiguously).
    pub async fn latest_from(&self, known: u64) -> Result<u64> {
        let mut lo = known;
        let mut step = 1u64;
        let hi = loop {
            let probe = lo + step;
            if self.exists(probe).await? {
                lo = probe;
                step = step.saturating_mul(2);
            } else {
                break probe;
            }
        };
        // Invariant: lo exists, hi does not.
        let (mut lo, mut hi) = (lo, hi);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.exists(mid).await? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The version the hint names, if it is there and readable.
    pub async fn read_hint(&self) -> Result<Option<u64>> {
        let path = self.location.path(self.hint);
        match self.location.get_bytes(&path).await {
            Ok(bytes) => {
                // A damaged hint is only a hint: fall back to probing.
                Ok(std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|s| self.naming.hint_version(s)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&path, e)),
        }
    }

    /// Record `version` as the latest. Best effort: a failure is logged by
    /// the caller and never turns a landed commit into a failure.
    pub async fn write_hint(&self, version: u64) -> Result<()> {
        let path = self.location.path(self.hint);
        self.store()
            .put(&path, PutPayload::from(self.naming.hint_text(version)))
            .await
            .map(|_| ())
            .map_err(|e| Error::storage(&path, e))
    }
}

/// Check once that the store honours put-if-absent: create a probe object,
/// create it again (which must fail with `AlreadyExists`), delete it. A
/// store that lets the second create succeed would let two writers both
/// "win" the same version and lose a commit, so logbook refuses to write.
pub(crate) async fn probe_put_if_absent(location: &StorageLocation, id: uuid::Uuid) -> Result<()> {
    let relative = format!("{}/probe-{id}", crate::format::layout::META_DIR);
    let path = location.path(&relative);
    let store = location.store();
    let create = || {
        store.put_opts(
            &path,
            Bytes::from_static(b"probe").into(),
            PutOptions::from(PutMode::Create),
        )
    };
    match create().await {
        Ok(_) => {}
        // The path is this probe's alone: an object there is our own first
        // try, which landed although its answer was lost and the client
        // retried (the store honoured put-if-absent on the retry).
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Err(e) => return Err(Error::storage(&relative, e)),
    }
    let second = create().await;
    if let Err(e) = store.delete(&path).await {
        tracing::warn!(path = %relative, error = %e, "could not delete the put-if-absent probe");
    }
    match second {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
        Ok(_) => Err(Error::UnsupportedStore {
            location: location.uri().to_string(),
            reason: "it does not honour put-if-absent (a second create of the same object succeeded), so two writers could both commit the same version; logbook refuses to write there".into(),
        }),
        Err(object_store::Error::NotImplemented { .. }) => Err(Error::UnsupportedStore {
            location: location.uri().to_string(),
            reason: "it does not implement put-if-absent (PutMode::Create), which logbook's commits need".into(),
        }),
        Err(e) => Err(Error::storage(&relative, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn latest_probes_past_a_stale_hint() {
        let log = Log::new(StorageLocation::parse("memory://").unwrap());
        assert_eq!(log.latest().await.unwrap(), None);
        for v in 0..37 {
            assert!(matches!(
                log.try_create(v, Bytes::from("x")).await,
                PutOutcome::Created
            ));
        }
        assert!(matches!(
            log.try_create(5, Bytes::from("y")).await,
            PutOutcome::AlreadyExists
        ));
        assert_eq!(log.latest().await.unwrap(), Some(36));
        log.write_hint(3).await.unwrap();
        assert_eq!(log.latest().await.unwrap(), Some(36));
        log.write_hint(36).await.unwrap();
        assert_eq!(log.latest().await.unwrap(), Some(36));
        // A current hint hands back the entry it read; a stale one does not.
        assert_eq!(
            log.latest_entry().await.unwrap(),
            Some((36, Some(Bytes::from("x"))))
        );
        log.write_hint(30).await.unwrap();
        assert_eq!(log.latest_entry().await.unwrap(), Some((36, None)));
        // A hint past the end (entries removed) falls back to probing.
        log.write_hint(90).await.unwrap();
        assert_eq!(log.latest_entry().await.unwrap(), Some((36, None)));
    }

    #[tokio::test]
    async fn create_judges_an_existing_entry_and_an_undecidable_one_is_an_error() {
        let log = Log::new(StorageLocation::parse("memory://").unwrap());
        let mine = |b: &[u8]| Ok(b == b"mine");
        assert!(matches!(
            log.create(0, Bytes::from("mine"), mine).await,
            Ok(Created::Ours)
        ));
        // Found there: ours by its content (a store retrying our own
        // create), or another writer's, with its bytes.
        assert!(matches!(
            log.create(0, Bytes::from("again"), mine).await,
            Ok(Created::Ours)
        ));
        let theirs = |b: &[u8]| Ok(b == b"other");
        match log.create(0, Bytes::from("other"), theirs).await {
            Ok(Created::Theirs(found)) => assert_eq!(found, Bytes::from("mine")),
            other => panic!("{other:?}"),
        }
        // Bytes the judge cannot decode: whose entry it is stays unknown.
        let undecodable = |_: &[u8]| {
            Err(Error::storage(
                "entry 0",
                object_store::Error::Generic {
                    store: "test",
                    source: "cannot decode".into(),
                },
            ))
        };
        assert!(log.create(0, Bytes::from("x"), undecodable).await.is_err());
    }

    /// On a local directory, finding the head and reading entries are
    /// reads on the caller's thread: they do not wait for tokio's blocking
    /// pool (object_store's local store sends every read there), and what
    /// they return is what the store's reads return.
    #[test]
    fn a_local_log_is_read_without_the_blocking_pool() {
        let runtime = crate::local_read::one_blocking_thread_runtime();
        let dir = tempfile::tempdir().unwrap();
        let log = Log::new(StorageLocation::local(dir.path()).unwrap());
        runtime.block_on(async {
            for v in 0..3 {
                let created = log.try_create(v, Bytes::from(format!("entry {v}"))).await;
                assert!(matches!(created, PutOutcome::Created));
            }
            log.write_hint(1).await.unwrap();
            // The pool's one thread is busy until `release` is sent.
            let (release, busy) = std::sync::mpsc::channel::<()>();
            let pool = tokio::task::spawn_blocking(move || busy.recv());
            let wait = std::time::Duration::from_secs(10);
            let read = async {
                let latest = log.latest().await.unwrap();
                (
                    latest,
                    log.read(2).await.unwrap(),
                    log.read(3).await.unwrap(),
                )
            };
            let (latest, two, three) = tokio::time::timeout(wait, read)
                .await
                .expect("read through the blocking pool");
            assert_eq!(latest, Some(2));
            assert_eq!(two, Some(Bytes::from("entry 2")));
            assert_eq!(three, None);
            release.send(()).unwrap();
            pool.await.unwrap().unwrap();
            // The same through the store.
            let store = log.store();
            let path = log.entry_path(2);
            let through = store.get(&path).await.unwrap().bytes().await.unwrap();
            assert_eq!(Some(through), log.read(2).await.unwrap());
            assert!(store.head(&path).await.is_ok() && log.exists(2).await.unwrap());
            let gone = log.entry_path(3);
            let missing = matches!(
                store.head(&gone).await,
                Err(object_store::Error::NotFound { .. })
            );
            assert!(missing && !log.exists(3).await.unwrap());
            assert_eq!(log.read_hint().await.unwrap(), Some(1));
        });
    }
}
