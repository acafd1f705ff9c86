//! Vacuum: delete files no retained snapshot, live stage or live write
//! references, once they have been unreferenced for longer than the
//! retention.
//!
//! What is kept, whatever its age: every data file and manifest of every
//! version from the oldest of (the oldest expiry keeps, the version that was
//! the latest when the retention began) to the latest, every file a stage's
//! record names, and the staging directories of every write or rewrite
//! whose intent marker was refreshed within the retention, or claimed back
//! by a writer back from its pause (`intent::claim`). What may be
//! deleted: anything else under `data/` and `_logbook/manifests/` last
//! modified before `now - retention`, and markers as old (a stale marker
//! whose directories still hold younger files stays, so the next vacuum
//! looks there again).
//!
//! What is looked at: a vacuum reads only what changed since the last one
//! (its ledger, `retained`): the files retained versions released, and the
//! staging directories of writes whose markers went stale. Orphans left
//! anywhere else are found by listing every file: a commit attempt that
//! crashed, failed part way or got no answer (one that lost its version
//! to another commit deletes its own manifests), a write that failed
//! without knowing whether its commit landed or whose marker could not be
//! written, a stage dropped or a date staged twice, a vacuum that crashed
//! after deleting a marker. A vacuum lists every file when asked
//! ([`VacuumOptions::full`]), when its ledger is new, and otherwise once
//! per retention (at least an hour apart; recorded only once its
//! deletions are done), so every orphan goes within two retentions (at
//! least an hour each) of its write, plus the time until the next vacuum. Delta's
//! `VACUUM` lists every file each time (its `LITE` mode reads the log
//! instead and never finds orphans); Iceberg splits the two into
//! `expire_snapshots` and `remove_orphan_files`.
//!
//! One clock: the store's. `now` is the modification time of an object
//! vacuum writes; files, markers and log entries are judged by their own
//! modification times. So a file superseded seconds ago (by a replace,
//! a compaction or an expiry) stays for the retention whatever its age, and
//! a write whose commit outcome is not known yet (an ambiguous put may
//! still land) keeps its young files. Reading a stage's records or a marker
//! strictly: any error stops the vacuum before it deletes anything.
//!
//! A table's mirror is caught up before anything is deleted, so the latest
//! mirror version never names a file vacuum may delete; older mirror
//! versions lose their files with the retention, as Delta's own VACUUM does,
//! and their Delta log entries before the checkpoint that the oldest kept
//! version needs go too (see `crate::mirror::expired_entries`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::NaiveDate;

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStoreExt, PutPayload};
use serde::Serialize;

use crate::commit::{commit, Change, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{layout, RunInfo};
use crate::handle::TableInner;
use crate::intent;
use crate::maintenance::retained::{self, gone};
use crate::stage::{StageInfo, StagedPartition};
use crate::staged_files::delete_files;
use crate::table::Table;

pub use crate::intent::MIN_RETENTION_MS;

/// Where manifests live (`format::layout`), one directory per commit attempt.
const MANIFESTS: &str = "_logbook/manifests";

/// How to vacuum.
#[derive(Debug, Clone, Copy)]
pub struct VacuumOptions {
    /// Files younger than this (ms) are kept (default 7 days).
    pub retention_ms: i64,
    /// Report what would be deleted; delete nothing.
    pub dry_run: bool,
    /// Allow a retention under [`MIN_RETENTION_MS`].
    pub force: bool,
    /// List every file of the table to find orphans of failed writes
    /// anywhere. Without it a vacuum does so only when its ledger is new
    /// or the last full listing is at least one retention (and an hour)
    /// old; otherwise it looks only at what changed since the last vacuum.
    pub full: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        Self {
            retention_ms: 7 * 24 * MIN_RETENTION_MS,
            dry_run: false,
            force: false,
            full: false,
        }
    }
}

/// What a vacuum deleted (or would).
#[derive(Debug, Clone, Default, Serialize)]
pub struct VacuumReport {
    /// Paths relative to the table root, sorted.
    pub deleted: Vec<String>,
    pub bytes: u64,
    /// Unreferenced files kept because they are younger than the retention,
    /// among those looked at (all of the table's when `listed_everything`).
    pub kept_young: usize,
    /// The commit recording the vacuum (`None` for a dry run or when nothing was deleted).
    pub version: Option<u64>,
    /// Versions walked to learn what the retained versions superseded,
    /// counting the ledger's last one and the latest (whose metadata the
    /// vacuum holds already): the commits since the last vacuum when its
    /// ledger was brought forward, every retained version when it was
    /// rebuilt.
    pub versions_read: u64,
    /// Whether every file of the table was listed (see
    /// [`VacuumOptions::full`]); otherwise only the files the retained
    /// versions released since the last vacuum and the staging directories
    /// of abandoned writes were looked at.
    pub listed_everything: bool,
}

/// Vacuum `table`.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::maintenance::{vacuum, VacuumOptions};
/// use logbook_core::{Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let report = vacuum(&t, VacuumOptions { dry_run: true, ..Default::default() }).await?;
/// assert!(report.deleted.is_empty());
/// # Ok(()) }
/// ```
pub async fn vacuum(table: &Table, options: VacuumOptions) -> Result<VacuumReport> {
    if options.retention_ms < MIN_RETENTION_MS && !options.force {
        return Err(Error::InvalidInput {
            table: table.name().to_string(),
            reason: format!(
                "a retention of {} min is under one hour: files of writes still committing could be deleted; use --force if no writer is running",
                options.retention_ms / 60_000
            ),
        });
    }
    let inner = &table.inner;
    // An undecided multi-table publish part at the head names manifests no
    // version references until it is decided: decide it first (waiting for
    // its publisher, then aborting it), so that what vacuum keeps is final.
    let head = table.latest().await?;
    if head.undecided_part().is_some() {
        crate::publish::settle(inner, head.version(), None).await?;
    }
    // A mirror left behind by a failure still shows files and needs the
    // manifests of the versions it has not mirrored: catch it up first, and
    // delete nothing if that fails.
    if !table.latest().await?.properties().mirrors().is_empty() {
        crate::mirror::sync(inner).await?;
    }
    // One clock: the store's. Data files, manifests, markers and log entries
    // all carry the store's modification times, so "now" is asked of the
    // store too, never of this machine.
    let now = store_now(inner).await?;
    let cutoff = now - options.retention_ms;

    // Live writes and stages first, then snapshots: a stage published or a
    // write committed in between is then found in the snapshots.
    let mut protected_dirs: Vec<String> = Vec::new();
    // Each stale marker, with the directories it named.
    let mut stale_markers: Vec<(intent::ListedMarker, Vec<String>)> = Vec::new();
    for listed in intent::list(inner).await? {
        // A marker refreshed within the retention protects its directories;
        // a stale one's are looked into before it goes.
        if listed.modified_ms < cutoff {
            let dirs = listed.marker.staging_dirs().map(|d| format!("{d}/"));
            let dirs = dirs.collect();
            stale_markers.push((listed, dirs));
        } else {
            protected_dirs.extend(listed.marker.staging_dirs().map(|d| format!("{d}/")));
        }
    }
    let mut keep: HashSet<String> = staged_files(table).await?;
    let latest = table.latest().await?;
    // A part landed since the settle above: its files are named only by
    // its stage's records (which a drop may have removed) and by the part,
    // which reads as nothing until decided. Delete nothing now.
    if let Some(part) = latest.undecided_part() {
        return Err(Error::PublishUndecided {
            table: table.name().to_string(),
            version: latest.version(),
            seq: part.seq,
            what: "vacuum".into(),
        });
    }
    // A file stays for the retention after the commit that stopped
    // referencing it (a replace, a compaction, or an expiry that moved the
    // oldest retained version past it): keep every version that was the
    // latest at some moment since the cutoff, not only those expiry keeps.
    // The versions readable then include those an expiry since has hidden.
    let expired_from = latest.root().retained_from;
    let then = version_at(inner, latest.version(), cutoff).await?;
    let at_then = if then == latest.version() {
        Ok(latest.clone())
    } else {
        inner.snapshot(then).await
    };
    let oldest = match at_then {
        Ok(snap) => snap.root().retained_from.min(expired_from),
        Err(e) if then < expired_from && gone(&e) => expired_from,
        Err(e) => return Err(e),
    };
    // What retained versions superseded, from the last vacuum's ledger
    // brought forward (see `retained`). Written back before anything is
    // deleted (a full listing is recorded only once its deletions are
    // done); a dry run leaves it as it was.
    let previous = retained::stored(inner).await?;
    let (mut ledger, versions_read, rebuilt) =
        retained::retained(inner, previous, oldest, expired_from, &latest).await?;
    let everything = options.full
        || rebuilt
        || ledger
            .listed_ms()
            .is_none_or(|at| now - at >= options.retention_ms.max(MIN_RETENTION_MS));
    let found = if everything {
        keep.extend(retained::referenced(&latest).await?);
        list_everything(inner, &mut ledger).await?
    } else {
        let dirs: Vec<&String> = stale_markers.iter().flat_map(|(_, d)| d).collect();
        list_changes(inner, &mut ledger, &latest, &dirs).await?
    };

    let mut young = Vec::new();
    let mut report = VacuumReport {
        versions_read,
        listed_everything: everything,
        ..Default::default()
    };
    for (rel, &(_, modified_ms)) in &found {
        if keep.contains(rel)
            || ledger.keeps(rel)
            || protected_dirs.iter().any(|d| rel.starts_with(d.as_str()))
        {
            continue;
        }
        if modified_ms >= cutoff {
            young.push(rel.clone());
        } else {
            report.deleted.push(rel.clone());
        }
    }
    report.kept_young = young.len();
    // What the deleted files weigh (the mirror's entries are not counted).
    let bytes = |deleted: &[String]| {
        let sizes = deleted.iter().filter_map(|p| found.get(p));
        sizes.map(|&(size, _)| size).sum()
    };
    report.bytes = bytes(&report.deleted);
    // The mirror's entries for versions whose files are going.
    report
        .deleted
        .extend(crate::mirror::expired_entries(inner, &latest, oldest, &report.deleted).await?);
    report.deleted.sort();
    if !options.dry_run {
        if everything && report.deleted.is_empty() {
            ledger.set_listed(now);
        }
        retained::store(inner, &ledger).await?;
    }
    confirm_unreferenced(inner, &latest, &report.deleted).await?;
    // Claims on stale markers' directories (see below) older than the
    // retention: candidates to go, below.
    let old_claims: Vec<String> = inner
        .list(layout::CLAIMS_DIR)
        .await?
        .iter()
        .filter(|o| o.last_modified.timestamp_millis() < cutoff)
        .map(|o| inner.location.relative(&o.location))
        .collect();
    let nothing = report.deleted.is_empty() && stale_markers.is_empty() && old_claims.is_empty();
    if options.dry_run || nothing {
        return Ok(report);
    }
    // A writer that stalled may have refreshed its marker since the listing
    // above (and then checked its files): look again just before deleting.
    let relisted = intent::list(inner).await?;
    // An old claim goes once its marker is gone or has moved on to another
    // heartbeat: while the marker stands as it was claimed, the claim is
    // what keeps a writer coming back from taking its directories back.
    let claims: Vec<String> = old_claims
        .into_iter()
        .filter(|c| match intent::claimed_marker(c) {
            Some((marker, at)) => !relisted
                .iter()
                .any(|l| l.path == marker && l.marker.heartbeat_ms == at),
            None => false,
        })
        .collect();
    let refreshed = relisted
        .into_iter()
        .filter(|listed| listed.modified_ms >= cutoff)
        .collect::<Vec<_>>();
    let live: Vec<String> = refreshed
        .iter()
        .flat_map(|l| l.marker.staging_dirs().map(|d| format!("{d}/")))
        .collect();
    report
        .deleted
        .retain(|rel| !live.iter().any(|d| rel.starts_with(d.as_str())));
    let stale_markers: Vec<_> = stale_markers
        .into_iter()
        .filter(|(l, _)| !refreshed.iter().any(|r| r.path == l.path))
        .collect();
    // A writer may still come back between that look and the deletes:
    // claim each stale marker's directories before deleting in them. A
    // writer back from its pause claims them too, first or never (see
    // `intent::claim`); the directories it holds are kept, marker and all.
    let mut held: Vec<&str> = Vec::new();
    for (listed, dirs) in &stale_markers {
        if !deletes_in(&report.deleted, dirs) {
            continue;
        }
        let (marker, at) = (&listed.marker, listed.marker.heartbeat_ms);
        if !intent::claim_stale(inner, marker, at, cutoff).await? {
            held.extend(dirs.iter().map(String::as_str));
        }
    }
    report
        .deleted
        .retain(|rel| !held.iter().any(|d| rel.starts_with(d)));
    report.bytes = bytes(&report.deleted);
    // A stale marker goes, unless refreshed or claimed back since, or its
    // directories still hold files too young to delete: the next vacuum
    // finds them by it.
    let markers: Vec<String> = stale_markers
        .iter()
        .filter(|(_, dirs)| !dirs.iter().any(|d| held.contains(&d.as_str())))
        .filter(|(_, dirs)| {
            !young
                .iter()
                .any(|f| dirs.iter().any(|d| f.starts_with(d.as_str())))
        })
        .map(|(listed, _)| listed.path.clone())
        .collect();
    // Stale markers first: a writer that comes back after its marker went
    // finds its files gone and fails, rather than committing them. A stale
    // marker with nothing left to delete goes too: otherwise every routine
    // vacuum would list its directories again.
    delete_files(inner, &markers).await;
    delete_files(inner, &report.deleted).await;
    // Claims last, once nothing is being deleted under them.
    delete_files(inner, &claims).await;
    if report.deleted.is_empty() {
        return Ok(report);
    }
    let run = RunInfo::new(format!("vacuum-{}", inner.options.ids.next_id()));
    let files_removed = report.deleted.len() as u64;
    let pending = PendingCommit::new(latest.version(), run, Change::Vacuum { files_removed });
    report.version = Some(commit(inner, pending).await.map_err(|f| f.error)?.version);
    if everything {
        ledger.set_listed(now);
        retained::store(inner, &ledger).await?;
    }
    Ok(report)
}

/// Whether any of `deleted` lies in one of `dirs`.
fn deletes_in(deleted: &[String], dirs: &[String]) -> bool {
    deleted
        .iter()
        .any(|f| dirs.iter().any(|d| f.starts_with(d.as_str())))
}

/// The ledger is a cache, so the latest version confirms it before anything
/// goes (or is reported by a dry run): none of `deleted` may be the
/// latest's root, a span, the month manifest or a data file of a date
/// among the candidates, or a dimension file. If one is, the ledger is set
/// aside (the next vacuum rebuilds it) and nothing is deleted. Costs a GET
/// per month with candidates. Older retained versions are not confirmed:
/// they are what the ledger is for.
async fn confirm_unreferenced(
    inner: &TableInner,
    latest: &crate::Snapshot,
    deleted: &[String],
) -> Result<()> {
    let dates = deleted.iter().filter_map(|p| candidate_date(p)).collect();
    let live = live_at(latest, dates).await?;
    let Some(listed) = deleted.iter().find(|p| live.contains(*p)) else {
        return Ok(());
    };
    let aside = match retained::set_aside(inner).await {
        Ok(path) => {
            format!("it was moved to {path}, so the next vacuum rebuilds it: run vacuum again")
        }
        Err(e) => format!("moving it aside failed ({e}): delete it, then run vacuum again"),
    };
    Err(Error::Corrupt {
        table: inner.name.clone(),
        path: retained::LEDGER.to_string(),
        reason: format!(
            "vacuum's ledger counts {listed} as unreferenced, yet version {} lists it; nothing was deleted and the table's data is intact; {aside} (if this repeats, it is a logbook bug: report it)",
            latest.version()
        ),
    })
}

/// What `latest` references outside its months (root, spans, dimension
/// files) and in the months of `dates` (their manifests and the dates'
/// data files): a GET per month.
async fn live_at(latest: &crate::Snapshot, dates: BTreeSet<NaiveDate>) -> Result<HashSet<String>> {
    let mut live: HashSet<String> = HashSet::from([latest.entry().manifest.clone()]);
    live.extend(latest.span_refs().iter().map(|s| s.path.clone()));
    live.extend(latest.dimension_files().into_iter().map(|f| f.path));
    for date in dates {
        live.extend(latest.month_path(date).await?);
        if let Some(p) = latest.partition(date).await? {
            live.extend(p.files.into_iter().map(|f| f.path));
        }
    }
    Ok(live)
}

/// Where a candidate was found: its size and modification time (store
/// clock, ms), by path relative to the table root.
type Found = BTreeMap<String, (u64, i64)>;

/// Every file under `data/` and the manifests (what orphans of failed
/// writes, anywhere, are found by); released ledger entries not among
/// them are gone and forgotten.
async fn list_everything(inner: &TableInner, ledger: &mut retained::Ledger) -> Result<Found> {
    let mut found = Found::new();
    for prefix in ["data", MANIFESTS] {
        list_into(inner, prefix, &mut found).await?;
    }
    let released = ledger.released();
    ledger.forget(released.iter().filter(|p| !found.contains_key(*p)));
    Ok(found)
}

/// Add the objects under `prefix` (a directory, relative to the table
/// root) to `found`.
async fn list_into(inner: &TableInner, prefix: &str, found: &mut Found) -> Result<()> {
    for object in inner.list(prefix).await? {
        let rel = inner.location.relative(&object.location);
        let modified = object.last_modified.timestamp_millis();
        found.insert(rel, (object.size, modified));
    }
    Ok(())
}

/// What changed since the last vacuum, without listing the table: the
/// files the ledger released (a `HEAD` each; those gone are forgotten) and
/// the files in the staging directories of abandoned writes (a listing
/// each). Orphans anywhere else (a commit attempt that crashed, a write
/// whose marker could not be written) wait for a vacuum that lists
/// everything, at least once per retention.
async fn list_changes(
    inner: &TableInner,
    ledger: &mut retained::Ledger,
    latest: &crate::Snapshot,
    stale_dirs: &[&String],
) -> Result<Found> {
    let mut found = Found::new();
    // A marker names staging directories under `data/`; anything else (a
    // marker damaged or written by hand) is not looked into.
    let staging =
        |d: &&&String| d.starts_with("data/") && d.len() > "data/x/".len() && !d.contains("..");
    for dir in stale_dirs.iter().filter(staging) {
        list_into(inner, dir, &mut found).await?;
    }
    // An abandoned marker's write may have committed after all: what the
    // latest lists is its. (A released file the latest lists is the
    // ledger's error: left for `confirm_unreferenced` to report.)
    let dates = found.keys().filter_map(|p| candidate_date(p)).collect();
    let live = live_at(latest, dates).await?;
    found.retain(|rel, _| !live.contains(rel));
    let store = inner.location.store();
    let released = ledger.released();
    let heads: Vec<Option<object_store::ObjectMeta>> = futures::stream::iter(&released)
        .map(|rel| async move {
            match store.head(&inner.location.path(rel)).await {
                Ok(meta) => Ok(Some(meta)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(Error::storage(rel, e)),
            }
        })
        .buffered(16)
        .try_collect()
        .await?;
    let mut gone = Vec::new();
    for (rel, meta) in released.iter().zip(heads) {
        match meta {
            Some(m) => {
                found.insert(rel.clone(), (m.size, m.last_modified.timestamp_millis()));
            }
            None => gone.push(rel),
        }
    }
    ledger.forget(gone);
    Ok(found)
}

/// The date a candidate for deletion belongs to: a data file's partition
/// (`data/<column>=<date>/...`), or a month manifest's first day
/// (`_logbook/manifests/<attempt>/<YYYY-MM>.json`).
fn candidate_date(path: &str) -> Option<NaiveDate> {
    if let Some(rest) = path.strip_prefix("data/") {
        let (_, date) = rest.split('/').next()?.split_once('=')?;
        return date.parse().ok();
    }
    let month = path
        .strip_prefix(MANIFESTS)?
        .rsplit('/')
        .next()?
        .strip_suffix(".json")?;
    NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").ok()
}

/// The store's current time: the modification time of a small object
/// written now.
async fn store_now(inner: &TableInner) -> Result<i64> {
    let path = inner.location.path(layout::STORE_CLOCK);
    let store = inner.location.store();
    store
        .put(&path, PutPayload::from_static(b"{}"))
        .await
        .map_err(|e| Error::storage(layout::STORE_CLOCK, e))?;
    let meta = store
        .head(&path)
        .await
        .map_err(|e| Error::storage(layout::STORE_CLOCK, e))?;
    Ok(meta.last_modified.timestamp_millis())
}

/// The version that was the latest at store time `at`: the last whose log
/// entry was created at or before it (0 if none was). A binary search over
/// the entries' modification times: O(log versions) `HEAD`s.
async fn version_at(inner: &TableInner, latest: u64, at: i64) -> Result<u64> {
    let created = |v: u64| async move {
        let rel = layout::log_entry(v);
        let meta = inner
            .location
            .store()
            .head(&inner.location.path(&rel))
            .await
            .map_err(|e| Error::storage(&rel, e))?;
        Ok::<_, Error>(meta.last_modified.timestamp_millis())
    };
    if created(latest).await? <= at {
        return Ok(latest);
    }
    if created(0).await? > at {
        return Ok(0);
    }
    // created(lo) <= at < created(hi)
    let (mut lo, mut hi) = (0, latest);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if created(mid).await? <= at {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Every file a stage references, from every staged date's record of the
/// stage's current incarnation (records left by an earlier stage of the same
/// name reference files that are either the table's, found in snapshots,
/// or garbage). Read strictly: an error reading a record or a stage stops
/// the vacuum, which must never go on without knowing what stages hold.
async fn staged_files(table: &Table) -> Result<HashSet<String>> {
    let inner = &table.inner;
    // One listing of `_logbook/stages/`: each stage's date records, by name.
    let mut records: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in table.inner.list(layout::STAGES_DIR).await? {
        let rel = inner.location.relative(&o.location);
        // `<name>/dates/<date>.json`; `<name>/stage.json` is read below.
        let parts: Vec<&str> = rel
            .strip_prefix(layout::STAGES_DIR)
            .unwrap_or_default()
            .split('/')
            .collect();
        if let ["", name, "dates", _] = parts[..] {
            records
                .entry(name.to_string())
                .or_default()
                .push(rel.clone());
        }
    }
    let mut keep = HashSet::new();
    for (name, paths) in records {
        let Some(info) = inner
            .get_json_opt::<StageInfo>(&layout::stage_info(&name))
            .await?
        else {
            continue;
        };
        let staged: Vec<Option<StagedPartition>> = futures::stream::iter(paths)
            .map(|rel| async move { inner.get_json_opt::<StagedPartition>(&rel).await })
            .buffered(16)
            .try_collect()
            .await?;
        // `None`: the record went between the listing and the read
        // (published or dropped); published files are in the snapshots.
        keep.extend(
            staged
                .into_iter()
                .flatten()
                .filter(|p| p.stage_id.is_none() || p.stage_id == info.id)
                .flat_map(|p| p.files.into_iter().map(|f| f.path)),
        );
    }
    Ok(keep)
}
