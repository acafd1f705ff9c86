//! Mirrors: a second transaction log, in a format other engines read (Delta
//! Lake, Apache Iceberg), generated from logbook's and kept beside it. A
//! table keeps either or both; each follows the rules below on its own.
//!
//! ```text
//! <table>/_delta_log/00000000000000000004.json             Delta version 4
//! <table>/_delta_log/00000000000000000100.checkpoint.parquet   every 100 versions
//! <table>/_delta_log/_last_checkpoint                      Delta's own hint
//! <table>/_logbook/mirror/delta-last                       our hint: latest Delta version
//! <table>/metadata/v5.metadata.json                        Iceberg version 4 (see `iceberg_log`)
//! ```
//!
//! **Lifecycle.** A mirror is turned on by a property (at creation, or by a
//! property commit: [`crate::format::Mirror`] records that commit's version,
//! `since`, and the Delta version that holds its snapshot, `first`). From then
//! on every logbook commit `v` has exactly one Delta commit,
//! `first + (v - since)`, written after `v` lands: `add`/`remove` for the
//! files that changed, `metaData`/`protocol` when the schema changed, a
//! `txn {appId: "logbook", version: v}` and a `commitInfo` naming the
//! logbook version, operation and run. Commits that change no file (expire,
//! vacuum, properties) have a Delta commit too, holding only `txn` and
//! `commitInfo`, so the mapping stays one to one.
//!
//! **Guarantee.** Delta version `d` shows exactly the files of the logbook
//! version it names, never a state logbook never had: each Delta entry is
//! created with put-if-absent, only once entry `d - 1` exists (no gaps), and
//! from the two committed logbook snapshots it lies between. The logbook
//! commit is the truth: a failed mirror write never fails the commit; the
//! next commit (or [`crate::Table::sync_mirror`]) catches up, one Delta
//! commit per missing logbook commit, and concurrent catch-ups race safely
//! because each would write the same entry. A Delta entry that holds
//! anything else (another engine wrote to the mirror) stops the mirror with
//! [`crate::Error::MirrorDiverged`] rather than be built upon.
//!
//! The Iceberg mirror differs only in what one version is: a whole snapshot
//! (`vN.metadata.json` naming a manifest list), built from the previous
//! version's history and manifests (see `iceberg_commit`), where a Delta
//! version is the change from the one before. Its metadata file is the
//! put-if-absent commit point, judged by the logbook commit id its current
//! snapshot names.
//!
//! Why Delta first: more engines read it without a catalog (Spark,
//! Trino, DuckDB, polars, deltalake), and its log is a numbered sequence of
//! put-if-absent files, like ours. Iceberg readers (Trino, Snowflake,
//! Athena, pyiceberg) mostly go through a catalog, registered from the
//! metadata path.

mod checkpoint;
mod delta_commit;
mod delta_log;
mod delta_replay;
mod delta_table;
mod iceberg_avro;
mod iceberg_commit;
mod iceberg_log;
mod iceberg_metadata;
mod iceberg_table;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::format::{LogEntry, Mirror, MirrorFormat};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;
use delta_commit::Base;
use delta_log::{Kind, CHECKPOINT_INTERVAL};

/// Where one of a table's mirrors stands, as `logbook mirror T --status`
/// shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MirrorStatus {
    /// The table's name.
    pub table: String,
    /// The mirror's format.
    pub format: MirrorFormat,
    /// Whether the mirror is on. When it is off but `mirror_version` is
    /// set, a log is left that no longer follows the table.
    pub enabled: bool,
    /// The table's latest logbook version.
    pub logbook_version: u64,
    /// The latest logbook version the mirror holds.
    pub mirrored_version: Option<u64>,
    /// The mirror's own latest version: the Delta version, or the Iceberg
    /// metadata version (`v<N + 1>.metadata.json`).
    pub mirror_version: Option<u64>,
    /// Logbook commits not mirrored yet (0 when the mirror is off).
    pub behind: u64,
}

/// Whether a mirror entry that records `found` (the logbook version and
/// commit id it names, `None` when it names none) is the one mirroring
/// `entry`; else why not. `dir` names the mirror's directory.
pub(crate) fn judge(
    found: Option<(u64, Option<Uuid>)>,
    entry: &LogEntry,
    dir: &str,
) -> std::result::Result<(), String> {
    Err(match found {
        Some((v, id)) if v == entry.version && id.is_none_or(|id| id == entry.commit_id) => {
            return Ok(())
        }
        Some((v, _)) if v == entry.version => {
            format!("it mirrors another table's commit (a {dir} left at this location)")
        }
        Some((v, _)) => format!("it mirrors logbook version {v}, not {}", entry.version),
        None => "it was written by another writer (it names no logbook commit); the mirror is read-only for other engines".to_string(),
    })
}

fn diverged(table: &TableInner, format: MirrorFormat, d: u64, reason: String) -> Error {
    match format {
        MirrorFormat::Delta => delta_log::diverged(table, d, reason),
        MirrorFormat::Iceberg => iceberg_log::diverged(table, d, reason),
    }
}

/// The mirror log's latest version in `format`.
async fn latest(table: &TableInner, format: MirrorFormat) -> Result<Option<u64>> {
    match format {
        MirrorFormat::Delta => delta_log::latest(table).await,
        MirrorFormat::Iceberg => iceberg_log::latest(table).await,
    }
}

/// What mirror version `d` records (see [`judge`]); a missing one is a divergence.
async fn recorded(
    table: &TableInner,
    format: MirrorFormat,
    d: u64,
) -> Result<Option<(u64, Option<Uuid>)>> {
    match format {
        MirrorFormat::Delta => delta_log::recorded(table, d).await,
        MirrorFormat::Iceberg => iceberg_log::recorded(table, d).await,
    }
}

/// After logbook commit `next` landed on `prev` (its version minus one):
/// write its mirror commits, catching up first if earlier ones are missing.
/// Best effort: the commit has landed, so a failure is logged and left for
/// the next commit, `logbook mirror` or a vacuum to repair.
pub(crate) async fn after_commit(
    table: &Arc<TableInner>,
    prev: Option<&Snapshot>,
    next: &Snapshot,
) {
    for mirror in next.properties().mirrors() {
        let version = next.version();
        if let Err(e) = commit_one(table, mirror, prev, next).await {
            tracing::warn!(table = %table.name, version, format = %mirror.format, error = %e, "commit landed; the mirror is behind until the next commit, `logbook mirror` or a vacuum");
        }
    }
}

async fn commit_one(
    table: &Arc<TableInner>,
    mirror: Mirror,
    prev: Option<&Snapshot>,
    next: &Snapshot,
) -> Result<()> {
    let version = next.version();
    let Some(d) = mirror.mirror_version(version) else {
        return Err(Error::InvalidInput {
            table: table.name.clone(),
            reason: format!(
                "the {} mirror property starts at version {}, after {version}",
                mirror.format, mirror.since
            ),
        });
    };
    if d == mirror.first {
        return write_version(table, mirror, d, None, next).await;
    }
    // The fast path: version `d - 1` exists and holds `prev`.
    let Some(prev) = prev else {
        return sync_one(table, mirror.format).await.map(drop);
    };
    match mirror.format {
        MirrorFormat::Delta => match delta_log::log(table).read(d - 1).await? {
            Some(bytes) => {
                delta_log::check_bytes(table, d - 1, &bytes, prev.entry())?;
                write_version(table, mirror, d, Some(prev), next).await
            }
            None => sync_one(table, mirror.format).await.map(drop),
        },
        // Written by this handle: it exists (one `HEAD` makes sure) and is
        // `prev`'s, and the version reuses it without reading it back.
        MirrorFormat::Iceberg
            if iceberg_commit::remembers(table, d - 1, prev.entry())
                && iceberg_log::log(table).exists(d - 1).await? =>
        {
            write_version(table, mirror, d, Some(prev), next).await
        }
        MirrorFormat::Iceberg => match iceberg_log::read(table, d - 1).await? {
            Some(md) => {
                iceberg_commit::judge(table, d - 1, &md, prev.entry())?;
                write_version(table, mirror, d, Some(prev), next).await
            }
            None => sync_one(table, mirror.format).await.map(drop),
        },
    }
}

/// After a commit that turned out to be done already (a retry of a run
/// that committed, a compaction with nothing left): its mirror commits may
/// have been lost with the process that made them, so catch up if the
/// head's are missing.
pub(crate) async fn after_retry(table: &Arc<TableInner>, head: &Snapshot) {
    for mirror in head.properties().mirrors() {
        let Some(d) = mirror.mirror_version(head.version()) else {
            continue;
        };
        let exists = match mirror.format {
            MirrorFormat::Delta => delta_log::log(table).exists(d).await,
            MirrorFormat::Iceberg => iceberg_log::log(table).exists(d).await,
        };
        let result = match exists {
            Ok(true) => Ok(()),
            Ok(false) => sync_one(table, mirror.format).await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(table = %table.name, format = %mirror.format, error = %e, "the mirror is behind until the next commit, `logbook mirror` or a vacuum");
        }
    }
}

/// Bring every mirror up to the table's latest version; where each stands
/// (formats that are off and left no log are not listed).
pub(crate) async fn sync(table: &Arc<TableInner>) -> Result<Vec<MirrorStatus>> {
    let mut out = Vec::new();
    for format in MirrorFormat::ALL {
        let status = sync_one(table, format).await?;
        if status.enabled || status.mirror_version.is_some() {
            out.push(status);
        }
    }
    Ok(out)
}

/// Bring the mirror in `format` up to the table's latest version.
async fn sync_one(table: &Arc<TableInner>, format: MirrorFormat) -> Result<MirrorStatus> {
    loop {
        let head = table.snapshot(table.latest_version().await?).await?;
        let status = status_at(table, &head, format).await?;
        let Some(mirror) = head.properties().mirror_of(format) else {
            return Ok(status);
        };
        if status.behind == 0 {
            if let (MirrorFormat::Iceberg, Some(d)) = (format, status.mirror_version) {
                iceberg_log::repair_hint(table, d).await?;
            }
            return Ok(status);
        }
        // `status_at` checked that the latest mirror version holds
        // `mirrored_version`: the next one builds on it.
        let mut from = match status.mirrored_version {
            Some(_) => status.mirror_version.map_or(mirror.first, |d| d + 1),
            None => mirror.first,
        };
        if let Some(d) = status.mirror_version {
            if status.mirrored_version.is_none() && moved(table, format, d).await? {
                // A copied or moved table: the versions up to `d` are the
                // original's. The next one starts a history here (see
                // `iceberg_commit::previous`); until a commit gives it one
                // to write, there is nothing to do.
                if mirror
                    .mirror_version(head.version())
                    .is_none_or(|to| to <= d)
                {
                    tracing::warn!(table = %table.name, "the Iceberg mirror describes the table where it was copied from; its next commit starts a history here");
                    return Ok(status);
                }
                from = d + 1;
            }
        }
        let to = mirror.mirror_version(head.version()).unwrap_or(from);
        let mut prev: Option<Snapshot> = None;
        for d in from..=to {
            let v = mirror.logbook_version(d).unwrap_or_default();
            let next = if v == head.version() {
                head.clone()
            } else {
                table.snapshot(v).await?
            };
            if next
                .entry()
                .txn
                .as_ref()
                .is_some_and(|t| t.state == crate::format::TxnState::Pending)
            {
                // An undecided multi-table publish part: mirrored once
                // decided (by its publisher, or the next commit or sync).
                return status_at(table, &head, format).await;
            }
            let base = match (d == mirror.first, prev.take()) {
                (true, _) => None,
                (false, Some(p)) => Some(p),
                (false, None) => Some(table.snapshot(v - 1).await?),
            };
            write_version(table, mirror, d, base.as_ref(), &next).await?;
            prev = Some(next);
        }
        // Another commit may have landed meanwhile: look again.
    }
}

/// Write mirror version `d`, the snapshot `next`; `prev` is the logbook
/// snapshot version `d - 1` holds (`None` for a mirror's first version).
async fn write_version(
    table: &TableInner,
    mirror: Mirror,
    d: u64,
    prev: Option<&Snapshot>,
    next: &Snapshot,
) -> Result<()> {
    match mirror.format {
        MirrorFormat::Delta => {
            let base = match prev {
                Some(p) => Base::Logbook(p),
                None => first_base(table, d).await?,
            };
            write_delta_version(table, d, base, next).await
        }
        MirrorFormat::Iceberg => iceberg_commit::write_version(table, mirror, d, next).await,
    }
}

/// What the first Delta version of a mirror changes: nothing for a new
/// log, else whatever the log holds before it.
async fn first_base(table: &TableInner, d: u64) -> Result<Base<'static>> {
    Ok(Base::Delta(match d.checked_sub(1) {
        None => BTreeMap::new(),
        Some(before) => delta_replay::files_at(table, before).await?,
    }))
}

/// Write Delta version `d`, the change from `base` to `next`; every
/// [`CHECKPOINT_INTERVAL`] versions, a checkpoint too.
async fn write_delta_version(
    table: &TableInner,
    d: u64,
    base: Base<'_>,
    next: &Snapshot,
) -> Result<()> {
    let actions = delta_commit::actions(table, base, next).await?;
    delta_log::create(table, d, &actions, next.entry()).await?;
    if d > 0 && d.is_multiple_of(CHECKPOINT_INTERVAL) {
        // A checkpoint only speeds up readers: a failure is logged, and the
        // next one comes 100 versions later.
        if let Err(e) = checkpoint::write(table, d, next).await {
            tracing::warn!(table = %table.name, version = d, error = %e, "could not write a Delta checkpoint");
            return Ok(());
        }
        // The hint moves with checkpoints only: finding the latest entry
        // probes forward from it (a few `HEAD`s), and commits stay one put
        // cheaper.
        if let Err(e) = delta_log::log(table).write_hint(d).await {
            tracing::warn!(table = %table.name, version = d, error = %e, "could not update the Delta mirror's hint");
        }
    }
    Ok(())
}

/// Where each of `table`'s mirrors stands (formats that are off and left
/// no log are not listed).
pub(crate) async fn status(table: &Arc<TableInner>) -> Result<Vec<MirrorStatus>> {
    let head = table.snapshot(table.latest_version().await?).await?;
    let mut out = Vec::new();
    for format in MirrorFormat::ALL {
        let status = status_at(table, &head, format).await?;
        if status.enabled || status.mirror_version.is_some() {
            out.push(status);
        }
    }
    Ok(out)
}

async fn status_at(
    table: &TableInner,
    head: &Snapshot,
    format: MirrorFormat,
) -> Result<MirrorStatus> {
    let mirror = head.properties().mirror_of(format);
    let mirror_version = latest(table, format).await?;
    let mirrored_version = match (mirror, mirror_version) {
        (_, None) => None,
        // Off: what the log left behind holds, if it is ours; a log no
        // longer ours (another engine's, say) holds nothing of logbook's.
        (None, Some(d)) => match recorded(table, format, d).await {
            Ok(found) => found.map(|(v, _)| v),
            Err(Error::MirrorDiverged { .. }) => None,
            Err(e) => return Err(e),
        },
        (Some(m), Some(d)) if d + 1 < m.first => {
            return Err(diverged(
                table,
                format,
                d + 1,
                format!("it is missing: the mirror continues at {format} version {}", m.first),
            ))
        }
        (Some(m), Some(d)) => match m.logbook_version(d) {
            None => None,
            Some(v) if v > head.version() => {
                return Err(diverged(
                    table,
                    format,
                    d,
                    format!(
                        "the {format} log goes past logbook's latest version {} (another engine appended to it)",
                        head.version()
                    ),
                ))
            }
            Some(v) => {
                // The version must be ours: another engine may have appended.
                let found = recorded(table, format, d).await?;
                judge(found, &table.read_entry(v).await?, &format.to_string())
                    .map_err(|reason| diverged(table, format, d, reason))?;
                // A copied or moved table: its metadata names the original's
                // files, so none of this table's versions is mirrored yet.
                (!moved(table, format, d).await?).then_some(v)
            }
        },
    };
    let behind = match mirror {
        None => 0,
        Some(m) => {
            head.version() + 1
                - mirrored_version
                    .map_or(m.since, |v| v + 1)
                    .min(head.version() + 1)
        }
    };
    Ok(MirrorStatus {
        table: table.name.clone(),
        format,
        enabled: mirror.is_some(),
        logbook_version: head.version(),
        mirrored_version,
        mirror_version,
        behind,
    })
}

/// Whether mirror version `d` in `format` describes the table at another
/// location (Iceberg metadata names its location; Delta's log does not).
async fn moved(table: &TableInner, format: MirrorFormat, d: u64) -> Result<bool> {
    Ok(match format {
        MirrorFormat::Delta => false,
        MirrorFormat::Iceberg => iceberg_log::read(table, d)
            .await?
            .is_some_and(|md| iceberg_log::elsewhere(table, &md)),
    })
}

/// The version a mirror in `format` turned on now starts at: the one after
/// whatever its log holds (0 for a new mirror). Its first commit takes the
/// mirror from that state to the table's.
pub(crate) async fn next_free_version(table: &TableInner, format: MirrorFormat) -> Result<u64> {
    Ok(latest(table, format).await?.map_or(0, |d| d + 1))
}

/// The mirrors' objects (relative paths) a vacuum deletes once logbook
/// keeps no version before `oldest`, given the logbook manifests it
/// deletes (`deleted`).
///
/// - Delta: every entry and checkpoint before the newest checkpoint at or
///   below `oldest`'s Delta version. Delta readers open from a checkpoint,
///   so those entries only serve time travel to versions whose files are
///   going; and Delta readers list `_delta_log/` when they open, so a long
///   history costs every open until it is trimmed (Delta's own log
///   retention does the same).
/// - Iceberg: see [`iceberg_expired`].
pub(crate) async fn expired_entries(
    table: &Arc<TableInner>,
    head: &Snapshot,
    oldest: u64,
    deleted: &[String],
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(floor) = head
        .properties()
        .mirror
        .and_then(|m| m.mirror_version(oldest))
    {
        let listed = delta_log::list(table).await?;
        let keep_from = listed
            .iter()
            .filter(|(v, k, _)| *k == Kind::Checkpoint && *v <= floor)
            .map(|(v, _, _)| *v)
            .max();
        if let Some(keep_from) = keep_from {
            out.extend(
                listed
                    .into_iter()
                    .filter(|(v, _, _)| *v < keep_from)
                    .map(|(_, _, rel)| rel),
            );
        }
    }
    if let Some(m) = head.properties().iceberg_mirror {
        out.extend(iceberg_expired(table, head, m, oldest, deleted).await?);
    }
    Ok(out)
}

/// How many of the newest Iceberg metadata files a vacuum keeps whatever
/// logbook retains: each file holds every retained snapshot, so keeping all
/// of them would grow storage with the square of the history (Iceberg's own
/// `write.metadata.previous-versions-max` defaults to 100 too).
pub(crate) const KEEP_METADATA_FILES: u64 = 100;

/// The Iceberg mirror's objects no live snapshot needs once logbook keeps
/// no version before `oldest` (the mirror is caught up first, so its latest
/// metadata holds only snapshots of retained versions):
/// - metadata files of versions before `oldest`'s, and all but the newest
///   [`KEEP_METADATA_FILES`], never the latest (time travel goes through
///   the snapshots the newest file holds; an old file is only what a
///   catalog registered long ago may still point at);
/// - manifest lists of snapshots before `oldest`;
/// - the manifest of each logbook month manifest the vacuum deletes (no
///   retained version names that month manifest, so no live snapshot names
///   its mirror), and dimension manifests older than `oldest`'s dimension.
async fn iceberg_expired(
    table: &Arc<TableInner>,
    head: &Snapshot,
    mirror: Mirror,
    oldest: u64,
    deleted: &[String],
) -> Result<Vec<String>> {
    let Some(floor) = mirror.mirror_version(oldest) else {
        return Ok(vec![]);
    };
    let latest = iceberg_log::latest(table).await?;
    if latest != mirror.mirror_version(head.version()) {
        // A commit (an expire, say) landed after the vacuum caught the
        // mirror up: its latest metadata may still name what `oldest` would
        // delete. The next vacuum, or this one's next run, does it.
        tracing::info!(table = %table.name, "the Iceberg mirror is not at the version vacuum reads: its old metadata is left for the next vacuum");
        return Ok(vec![]);
    }
    // `oldest` may lie below what `head` still reads (an expire within the
    // retention): its log entry is there until this vacuum deletes it.
    let oldest_dimension = match head.dimension_version() {
        Some(_) => table.snapshot(oldest).await?.dimension_version(),
        None => None,
    };
    let deleted_months: Vec<String> = deleted
        .iter()
        .filter_map(|p| p.strip_prefix("_logbook/manifests/")?.strip_suffix(".json"))
        .map(|stem| format!("lb-{}-", stem.replace('/', "-")))
        .collect();
    let mut out = Vec::new();
    for rel in iceberg_log::list(table).await? {
        let Some(file) = rel.strip_prefix("metadata/") else {
            continue;
        };
        let expired = if let Some(d) = iceberg_log::parse_version(file) {
            let newest = latest.unwrap_or(d);
            d < floor.max(newest.saturating_sub(KEEP_METADATA_FILES - 1)) && d != newest
        } else if let Some(rest) = file.strip_prefix("snap-") {
            let id: Option<i64> = rest.split('-').next().and_then(|s| s.parse().ok());
            id.is_some_and(|id| id < iceberg_table::snapshot_id(oldest))
        } else if let Some(rest) = file.strip_prefix("lb-dim-") {
            let v: Option<u64> = rest.split('-').next().and_then(|s| s.parse().ok());
            v.zip(oldest_dimension).is_some_and(|(v, keep)| v < keep)
        } else {
            deleted_months
                .iter()
                .any(|prefix| file.starts_with(prefix.as_str()))
        };
        if expired {
            out.push(rel);
        }
    }
    Ok(out)
}

/// The mirror version in `mirror`'s format that holds logbook `version`,
/// if the mirror holds it (`mirrored`: the latest logbook version it holds).
pub fn mirror_version_of(
    mirror: Option<&Mirror>,
    mirrored: Option<u64>,
    version: u64,
) -> Option<u64> {
    let m = mirror?;
    (version <= mirrored?)
        .then(|| m.mirror_version(version))
        .flatten()
}

/// The snapshot ids the Iceberg mirror's latest metadata holds (none when
/// it has no metadata).
pub(crate) async fn iceberg_held(table: &TableInner) -> Result<std::collections::BTreeSet<i64>> {
    let Some(d) = iceberg_log::latest(table).await? else {
        return Ok(Default::default());
    };
    Ok(iceberg_log::read(table, d)
        .await?
        .map(|md| md.snapshots.iter().map(|s| s.snapshot_id).collect())
        .unwrap_or_default())
}

/// The Iceberg snapshot id of logbook `version` (see the Iceberg mirror's
/// `snapshot-id`s), for time travel by a reader of the mirror.
pub fn iceberg_snapshot_id(version: u64) -> i64 {
    iceberg_table::snapshot_id(version)
}
