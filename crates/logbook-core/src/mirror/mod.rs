//! Mirrors: a second transaction log, in a format other engines read (Delta
//! Lake), generated from logbook's and kept beside it.
//!
//! ```text
//! <table>/_delta_log/00000000000000000004.json             Delta version 4
//! <table>/_delta_log/00000000000000000100.checkpoint.parquet   every 100 versions
//! <table>/_delta_log/_last_checkpoint                      Delta's own hint
//! <table>/_logbook/mirror/delta-last                       our hint: latest Delta version
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
//! Why Delta first: more engines read it without a catalog (Spark,
//! Trino, DuckDB, polars, deltalake), and its log is a numbered sequence of
//! put-if-absent files, like ours. Iceberg is the next mirror.

mod checkpoint;
mod delta_log;
mod delta_table;

use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{Mirror, MirrorFormat};
use crate::snapshot::Snapshot;
use crate::table::TableInner;

/// Where a table's mirror stands, as `logbook mirror T --status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MirrorStatus {
    pub table: String,
    /// The mirror's format, or `None` when the table has no mirror on.
    pub format: Option<MirrorFormat>,
    pub enabled: bool,
    /// The table's latest logbook version.
    pub logbook_version: u64,
    /// The latest logbook version the mirror holds.
    pub mirrored_version: Option<u64>,
    /// The mirror's own latest version (the Delta version).
    pub delta_version: Option<u64>,
    /// Logbook commits not mirrored yet.
    pub behind: u64,
}

/// After logbook commit `next` landed on `prev`: write its mirror commit
/// (catching up first if earlier ones are missing). Best effort: the
/// commit has landed, so a failure is logged and left for the next commit
/// or `logbook mirror` to repair.
pub(crate) async fn after_commit(
    table: &Arc<TableInner>,
    prev: Option<&Snapshot>,
    next: &Snapshot,
) {
    let Some(mirror) = next.properties().mirror else {
        return;
    };
    let version = next.version();
    let result = async {
        let d = mirror
            .mirror_version(version)
            .expect("the head is mirrored");
        let log = delta_log::log(table);
        // The fast path: the previous Delta entry exists, so this one is next.
        if d == mirror.first || log.exists(d - 1).await? {
            let prev = if d == mirror.first { None } else { prev };
            return delta_log::write_version(table, &mirror, d, prev, next).await;
        }
        sync(table).await.map(|_| ())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(table = %table.name, version, error = %e, "commit landed; the Delta mirror is behind until the next commit or `logbook mirror`");
    }
}

/// Bring the mirror up to the table's latest version.
pub(crate) async fn sync(table: &Arc<TableInner>) -> Result<MirrorStatus> {
    loop {
        let head = table.snapshot(table.latest_version().await?).await?;
        let status = status_at(table, &head).await?;
        let Some(mirror) = head.properties().mirror else {
            return Ok(status);
        };
        if status.behind == 0 {
            return Ok(status);
        }
        let from = status.delta_version.map_or(mirror.first, |d| d + 1);
        let to = mirror
            .mirror_version(head.version())
            .expect("the head is mirrored");
        let mut prev: Option<Snapshot> = None;
        for d in from..=to {
            let v = mirror.logbook_version(d).expect("d >= first");
            let next = if v == head.version() {
                head.clone()
            } else {
                table.snapshot(v).await?
            };
            let base = match prev.take() {
                Some(p) => Some(p),
                None if d == mirror.first => None,
                None => Some(table.snapshot(v - 1).await?),
            };
            delta_log::write_version(table, &mirror, d, base.as_ref(), &next).await?;
            prev = Some(next);
        }
        // Another commit may have landed meanwhile: look again.
    }
}

/// How far the mirror of `table` is behind its latest version.
pub(crate) async fn status(table: &Arc<TableInner>) -> Result<MirrorStatus> {
    let head = table.snapshot(table.latest_version().await?).await?;
    status_at(table, &head).await
}

async fn status_at(table: &Arc<TableInner>, head: &Snapshot) -> Result<MirrorStatus> {
    let mirror = head.properties().mirror;
    let delta_version = delta_log::log(table).latest().await?;
    let mirrored_version = match (mirror, delta_version) {
        (Some(m), Some(d)) if d >= m.first => m.logbook_version(d),
        _ => None,
    };
    if let (Some(m), Some(d)) = (mirror, delta_version) {
        if d + 1 < m.first {
            return Err(Error::MirrorDiverged {
                table: table.name.clone(),
                path: delta_log::entry_path(d + 1),
                reason: format!(
                    "the mirror should continue at Delta version {} but ends at {d}",
                    m.first
                ),
            });
        }
    }
    if let (Some(v), Some(d)) = (mirrored_version, delta_version) {
        // The entry must be ours and say so: another engine may have
        // appended to the mirror.
        delta_log::check_winner(table, d, &table.read_entry(v).await?).await?;
    }
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
        format: mirror.map(|m| m.format),
        enabled: mirror.is_some(),
        logbook_version: head.version(),
        mirrored_version,
        delta_version,
        behind,
    })
}

/// The Delta version a mirror turned on now would start at: the one after
/// whatever `_delta_log/` already holds (0 for a new mirror). A mirror
/// turned back on continues its old log, from the logbook version that log
/// last recorded.
pub(crate) async fn next_free_version(table: &Arc<TableInner>) -> Result<u64> {
    Ok(delta_log::log(table).latest().await?.map_or(0, |d| d + 1))
}

/// The Delta log entries (relative paths) a vacuum deletes once logbook
/// keeps no version before `oldest`: every entry and checkpoint before the
/// newest checkpoint at or below `oldest`'s Delta version. Delta readers
/// open from a checkpoint, so those entries only serve time travel to
/// versions whose files are going; and Delta readers list `_delta_log/`
/// when they open, so a long history costs every open until it is trimmed
/// (Delta's own log retention does the same).
pub(crate) async fn expired_entries(
    table: &Arc<TableInner>,
    head: &Snapshot,
    oldest: u64,
) -> Result<Vec<String>> {
    let Some(floor) = head
        .properties()
        .mirror
        .and_then(|m| m.mirror_version(oldest))
    else {
        return Ok(vec![]);
    };
    let store = table.location.store();
    let prefix = table.location.path(delta_log::DELTA_LOG);
    let names: Vec<String> = futures::TryStreamExt::try_collect(store.list(Some(&prefix)))
        .await
        .map_err(|e| Error::storage(&prefix, e))
        .map(|objects: Vec<object_store::ObjectMeta>| {
            objects
                .iter()
                .map(|o| table.location.relative(&o.location))
                .collect()
        })?;
    let version = |name: &str| -> Option<(u64, bool)> {
        let file = name.strip_prefix(delta_log::DELTA_LOG)?.strip_prefix('/')?;
        let (digits, rest) = file.split_at_checked(20)?;
        let checkpoint = match rest {
            ".json" => false,
            ".checkpoint.parquet" => true,
            _ => return None,
        };
        Some((digits.parse().ok()?, checkpoint))
    };
    let Some(keep_from) = names
        .iter()
        .filter_map(|n| version(n))
        .filter(|(v, checkpoint)| *checkpoint && *v <= floor)
        .map(|(v, _)| v)
        .max()
    else {
        return Ok(vec![]);
    };
    Ok(names
        .into_iter()
        .filter(|n| version(n).is_some_and(|(v, _)| v < keep_from))
        .collect())
}

/// The Delta version that mirrors logbook `version`, if the mirror holds it.
pub fn delta_version_of(
    mirror: Option<&Mirror>,
    mirrored: Option<u64>,
    version: u64,
) -> Option<u64> {
    let m = mirror?;
    (version <= mirrored?)
        .then(|| m.mirror_version(version))
        .flatten()
}
