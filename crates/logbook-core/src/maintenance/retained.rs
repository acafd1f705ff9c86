//! What retained versions stopped referencing, carried from one vacuum to
//! the next so a vacuum reads only what changed since the last.
//!
//! Path: `_logbook/vacuum-ledger.json`, overwritten by each vacuum. It
//! lists every path (root, span and month manifests, data and dimension
//! files) that some version from `oldest` on referenced and `through` no
//! longer does, each with the last version that did. What `through`
//! references is not listed: `through` itself says it. An entry whose last
//! version is before `oldest` is released: no retained version reads it,
//! so vacuum deletes it, and the entry stays until a later vacuum finds
//! the file gone (a crash between writing the ledger and deleting loses
//! nothing).
//!
//! Lifecycle: a vacuum reads the ledger and, when it covers the vacuum's
//! range (its `oldest` at or before the vacuum's, its `through` at or
//! before the latest and still the same version: the root it names is the
//! one that version reads), brings it forward one commit at a time (from
//! a `through` an expiry has since passed too: the commits since the last
//! vacuum are what it must read either way; one whose metadata is gone is
//! skipped, so what it alone added and dropped is left to a listing): a
//! commit's root, the spans it rewrote, and the old and new manifests of
//! the months it changed. Otherwise (none, unreadable, another table's, or
//! a longer retention than before) it is built afresh by walking every
//! retained version the same way; what versions before the oldest released
//! is then unknown, so that vacuum lists every file. The ledger is written
//! back before anything is deleted.
//!
//! Guarantee: what the ledger says a path's last version is, and so
//! whether it is kept or released, is a function of immutable history
//! (which version references which path) and of the range it names; only
//! which released entries remain and when every file was last listed
//! depend on what vacuums did. So who wrote it, and whether their vacuum
//! went on to commit, does not matter: two vacuums racing to overwrite it
//! lose progress (or leave orphans to the next full listing), never files.
//! A ledger that does not read or does not match is rebuilt, never trusted.
//!
//! Cost: the GETs of the commits since the last vacuum and the months they
//! changed, two HEADs per released file (one before it is deleted, one to
//! find it gone and forget it), plus one read and one write of the ledger
//! (two when the vacuum lists every file), whose size grows
//! with what retained versions superseded (each retained version's root
//! and manifests among them: expire bounds it), not with the table. The
//! first layout listed every path retained versions referenced, current
//! ones too, so at 100,000 partitions each vacuum read and wrote 100,000
//! entries. Without a ledger, every vacuum read every retained version's
//! root and every month manifest they list. Alternatives: tombstones in
//! the root (every commit would rewrite them until a vacuum drops them:
//! commit cost growing between vacuums), or in the log entries (a vacuum
//! would still read every entry since the oldest retained version).
//! Delta's checkpoint keeps recent `remove` actions for its vacuum in the
//! same way.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::{MonthRef, FORMAT_SPANS};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;

/// Where the ledger lives.
pub(crate) const LEDGER: &str = "_logbook/vacuum-ledger.json";

/// What a ledger's fields mean; one written in another layout is rebuilt
/// (layout 1 listed current references too, and dropped released ones).
const LEDGER_LAYOUT: u32 = 2;

/// See the module doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ledger {
    /// [`LEDGER_LAYOUT`].
    layout: u32,
    /// The oldest retained version when the ledger was written: entries
    /// last referenced before it are released.
    oldest: u64,
    /// The latest version the ledger was brought forward to.
    through: u64,
    /// `through`'s root manifest: a ledger whose `through` now reads
    /// another root (the table was dropped and created again) is not used.
    through_root: String,
    /// When (store time, ms) a vacuum last listed every file with this
    /// ledger; `None`: none has.
    listed_ms: Option<i64>,
    /// Each path some version from `oldest` on (or a released one)
    /// referenced and `through` does not, with the last version that did.
    superseded: HashMap<String, u64>,
}

impl Ledger {
    /// Whether a retained version other than the latest references `path`.
    pub(crate) fn keeps(&self, path: &str) -> bool {
        self.superseded.get(path).is_some_and(|&v| v >= self.oldest)
    }

    /// The paths no retained version references, sorted.
    pub(crate) fn released(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .superseded
            .iter()
            .filter(|(_, &v)| v < self.oldest)
            .map(|(p, _)| p.clone())
            .collect();
        paths.sort();
        paths
    }

    /// Forget released paths whose files are gone.
    pub(crate) fn forget<'a>(&mut self, gone: impl IntoIterator<Item = &'a String>) {
        for path in gone {
            if self.superseded.get(path).is_some_and(|&v| v < self.oldest) {
                self.superseded.remove(path);
            }
        }
    }

    /// When a vacuum last listed every file with this ledger.
    pub(crate) fn listed_ms(&self) -> Option<i64> {
        self.listed_ms
    }

    /// Record that this vacuum lists every file, at store time `now_ms`.
    pub(crate) fn set_listed(&mut self, now_ms: i64) {
        self.listed_ms = Some(now_ms);
    }
}

/// The stored ledger, if there is one that reads. One that does not
/// decode is rebuilt; a store that fails is an error (a vacuum retried
/// later is cheap, a rebuild against a struggling store is not).
pub(crate) async fn stored(inner: &TableInner) -> Result<Option<Ledger>> {
    match inner.get_json_opt::<Ledger>(LEDGER).await {
        Err(e) if gone(&e) => {
            tracing::warn!(table = %inner.name, error = %e, "rebuilding the vacuum ledger");
            Ok(None)
        }
        other => other,
    }
}

/// Write `ledger` back for the next vacuum.
pub(crate) async fn store(inner: &TableInner, ledger: &Ledger) -> Result<()> {
    inner.put(LEDGER.to_string(), inner.encode(ledger)?).await
}

/// Where a ledger the latest version contradicted is moved, for a look.
const REJECTED: &str = "_logbook/vacuum-ledger.rejected.json";

/// Move the stored ledger aside (the next vacuum rebuilds it); where it went.
pub(crate) async fn set_aside(inner: &TableInner) -> Result<&'static str> {
    let store = inner.location.store();
    let (from, to) = (inner.location.path(LEDGER), inner.location.path(REJECTED));
    store
        .rename(&from, &to)
        .await
        .map_err(|e| Error::storage(LEDGER, e))?;
    Ok(REJECTED)
}

/// A ledger for versions `oldest..=latest`, how many versions were read
/// to make it, and whether it was built afresh (so what versions before
/// `oldest` released is unknown). Brought forward from `previous` where
/// it covers the range, else built by walking from the first readable
/// version from `oldest`. Versions before `expired_from` whose metadata is
/// gone (an earlier vacuum removed it) reference nothing.
pub(crate) async fn retained(
    inner: &Arc<TableInner>,
    previous: Option<Ledger>,
    oldest: u64,
    expired_from: u64,
    latest: &Snapshot,
) -> Result<(Ledger, u64, bool)> {
    let usable = previous.filter(|l| {
        l.layout == LEDGER_LAYOUT && l.oldest <= oldest && l.through <= latest.version()
    });
    if let Some(ledger) = usable {
        let through = ledger.through;
        // Metadata it must walk that is gone or unreadable (a version whose
        // manifests a crashed vacuum half deleted) costs a rebuild over
        // the retained versions only; a failing store stops the vacuum.
        match forward_from(inner, ledger, expired_from, latest).await {
            Ok(Some(mut ledger)) => {
                ledger.oldest = oldest;
                return Ok((ledger, latest.version() - through + 1, false));
            }
            Ok(None) => {}
            Err(e) if gone(&e) => {
                tracing::warn!(table = %inner.name, error = %e, "rebuilding the vacuum ledger");
            }
            Err(e) => return Err(e),
        }
    }
    let first = first_readable(inner, oldest, expired_from, latest).await?;
    let read = latest.version() - first.version() + 1;
    let fresh = Ledger {
        layout: LEDGER_LAYOUT,
        oldest,
        through: first.version(),
        through_root: first.entry().manifest.clone(),
        listed_ms: None,
        superseded: HashMap::new(),
    };
    let ledger = walk(inner, fresh, first, expired_from, latest).await?;
    Ok((ledger, read, true))
}

/// `ledger` brought forward to `latest`, or `None` if its `through` now
/// reads another root than the one it names (another history).
async fn forward_from(
    inner: &Arc<TableInner>,
    ledger: Ledger,
    expired_from: u64,
    latest: &Snapshot,
) -> Result<Option<Ledger>> {
    let through = if ledger.through == latest.version() {
        Some(latest.clone())
    } else {
        read(inner, ledger.through, expired_from).await?
    };
    match through {
        Some(snap) if snap.entry().manifest == ledger.through_root => {
            Ok(Some(walk(inner, ledger, snap, expired_from, latest).await?))
        }
        _ => Ok(None),
    }
}

/// Bring `ledger`, as of `from`, forward one version at a time to `latest`.
async fn walk(
    inner: &Arc<TableInner>,
    mut ledger: Ledger,
    from: Snapshot,
    expired_from: u64,
    latest: &Snapshot,
) -> Result<Ledger> {
    let mut prev = from;
    let mut later = futures::stream::iter(prev.version() + 1..=latest.version())
        .map(|v| async move {
            if v == latest.version() {
                return Ok(Some(latest.clone()));
            }
            read(inner, v, expired_from).await
        })
        .buffered(8);
    while let Some(snap) = later.try_next().await? {
        let Some(snap) = snap else { continue };
        forward(&mut ledger, &prev, &snap).await?;
        prev = snap;
    }
    Ok(ledger)
}

/// Version `v`, or `None` if its metadata is gone and it was expired.
async fn read(inner: &Arc<TableInner>, v: u64, expired_from: u64) -> Result<Option<Snapshot>> {
    match inner.snapshot(v).await {
        Err(e) if v < expired_from && gone(&e) => Ok(None),
        other => other.map(Some),
    }
}

/// An object that is missing or does not decode: a snapshot whose metadata
/// is gone, or a ledger to rebuild. Anything else (the store failing)
/// stops the vacuum.
pub(crate) fn gone(e: &Error) -> bool {
    matches!(
        e.kind(),
        crate::ErrorKind::NotFound | crate::ErrorKind::Corrupt
    )
}

/// The first version from `oldest` whose metadata reads (at the latest
/// version).
async fn first_readable(
    inner: &Arc<TableInner>,
    oldest: u64,
    expired_from: u64,
    latest: &Snapshot,
) -> Result<Snapshot> {
    for v in oldest..latest.version() {
        if let Some(snap) = read(inner, v, expired_from).await? {
            return Ok(snap);
        }
    }
    Ok(latest.clone())
}

/// Every path `snap` references: its root, spans, month manifests, and
/// data or dimension files. Reads every month: what a vacuum that lists
/// every file keeps besides the ledger's entries.
pub(crate) async fn referenced(snap: &Snapshot) -> Result<HashSet<String>> {
    let mut paths = top(snap);
    let months = snap.month_refs().await?;
    paths.extend(files(snap, months.iter()).await?);
    paths.extend(months.into_iter().map(|m| m.path));
    Ok(paths)
}

/// Bring `ledger` (through `prev`) forward to `next`: what `prev`
/// referenced and `next` does not was last referenced by `prev`; what
/// `next` references again is current, so no longer superseded.
async fn forward(ledger: &mut Ledger, prev: &Snapshot, next: &Snapshot) -> Result<()> {
    let last = prev.version();
    let (before, after) = (top(prev), top(next));
    let (dropped, added) = changed_months(prev, next).await?;
    // A file lives in one month, so comparing the union of the rewritten
    // months before and after finds what the commit dropped and added.
    let mut was = files(prev, dropped.iter()).await?;
    let mut is = files(next, added.iter()).await?;
    was.extend(before);
    was.extend(dropped.into_iter().map(|m| m.path));
    is.extend(after);
    is.extend(added.into_iter().map(|m| m.path));
    for path in was.difference(&is) {
        ledger.superseded.insert(path.clone(), last);
    }
    for path in &is {
        ledger.superseded.remove(path);
    }
    ledger.through = next.version();
    ledger.through_root = next.entry().manifest.clone();
    Ok(())
}
/// The months `prev` lists and `next` does not (by manifest path), and
/// the other way round. Between format 2 versions only the spans the
/// commit rewrote are read.
async fn changed_months(
    prev: &Snapshot,
    next: &Snapshot,
) -> Result<(Vec<MonthRef>, Vec<MonthRef>)> {
    let (old, new) = if prev.format() >= FORMAT_SPANS && next.format() >= FORMAT_SPANS {
        let (a, b) = (span_paths(prev), span_paths(next));
        let gone: Vec<&str> = a.difference(&b).copied().collect();
        let new: Vec<&str> = b.difference(&a).copied().collect();
        (months_of(prev, &gone).await?, months_of(next, &new).await?)
    } else {
        (prev.month_refs().await?, next.month_refs().await?)
    };
    let old_paths: HashSet<&str> = old.iter().map(|m| m.path.as_str()).collect();
    let new_paths: HashSet<&str> = new.iter().map(|m| m.path.as_str()).collect();
    let dropped = old
        .iter()
        .filter(|m| !new_paths.contains(m.path.as_str()))
        .cloned()
        .collect();
    let added = new
        .iter()
        .filter(|m| !old_paths.contains(m.path.as_str()))
        .cloned()
        .collect();
    Ok((dropped, added))
}

fn span_paths(snap: &Snapshot) -> HashSet<&str> {
    snap.span_refs().iter().map(|s| s.path.as_str()).collect()
}

/// The months the span manifests at `paths` list.
async fn months_of(snap: &Snapshot, paths: &[&str]) -> Result<Vec<MonthRef>> {
    let mut months = Vec::new();
    for path in paths {
        months.extend(snap.span_at(path).await?.months.iter().cloned());
    }
    Ok(months)
}

/// What a version references outside its months: its root manifest, its
/// span manifests and a dimension's files.
fn top(snap: &Snapshot) -> HashSet<String> {
    let mut paths: HashSet<String> = HashSet::from([snap.entry().manifest.clone()]);
    paths.extend(snap.span_refs().iter().map(|s| s.path.clone()));
    paths.extend(snap.dimension_files().into_iter().map(|f| f.path));
    paths
}

/// The data files the partitions of `months` list (16 months read at once:
/// a vacuum listing every file reads all of the latest's).
async fn files<'a>(
    snap: &Snapshot,
    months: impl Iterator<Item = &'a MonthRef>,
) -> Result<HashSet<String>> {
    let manifests: Vec<_> = futures::stream::iter(months)
        .map(|m| snap.month_at(m))
        .buffered(16)
        .try_collect()
        .await?;
    Ok(manifests
        .iter()
        .flat_map(|m| &m.partitions)
        .flat_map(|p| p.files.iter().map(|f| f.path.clone()))
        .collect())
}
