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
mod delta_commit;
mod delta_log;
mod delta_replay;
mod delta_table;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::format::{Mirror, MirrorFormat};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;
use delta_commit::Base;
use delta_log::{Kind, CHECKPOINT_INTERVAL};

/// Where a table's mirror stands, as `logbook mirror T --status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MirrorStatus {
    /// The table's name.
    pub table: String,
    /// The mirror's format, or `None` when the table has no mirror on.
    pub format: Option<MirrorFormat>,
    /// Whether the mirror is on. When it is off but `delta_version` is set,
    /// a Delta log is left that no longer follows the table.
    pub enabled: bool,
    /// The table's latest logbook version.
    pub logbook_version: u64,
    /// The latest logbook version the Delta log holds.
    pub mirrored_version: Option<u64>,
    /// The Delta log's latest version.
    pub delta_version: Option<u64>,
    /// Logbook commits not mirrored yet (0 when the mirror is off).
    pub behind: u64,
}

/// After logbook commit `next` landed on `prev` (its version minus one):
/// write its Delta commit, catching up first if earlier ones are missing.
/// Best effort: the commit has landed, so a failure is logged and left for
/// the next commit, `logbook mirror` or a vacuum to repair.
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
        let Some(d) = mirror.mirror_version(version) else {
            return Err(Error::InvalidInput {
                table: table.name.clone(),
                reason: format!(
                    "the mirror property starts at version {}, after {version}",
                    mirror.since
                ),
            });
        };
        if d == mirror.first {
            return write_version(table, d, first_base(table, d).await?, next).await;
        }
        // The fast path: Delta version `d - 1` exists and holds `prev`.
        let before = delta_log::log(table).read(d - 1).await?;
        match (prev, before) {
            (Some(prev), Some(bytes)) => {
                delta_log::check_bytes(table, d - 1, &bytes, prev.entry())?;
                write_version(table, d, Base::Logbook(prev), next).await
            }
            _ => sync(table).await.map(drop),
        }
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(table = %table.name, version, error = %e, "commit landed; the Delta mirror is behind until the next commit, `logbook mirror` or a vacuum");
    }
}

/// After a commit that turned out to be done already (a retry of a run
/// that committed, a compaction with nothing left): its Delta commit may
/// have been lost with the process that made it, so catch up if the head's
/// is missing.
pub(crate) async fn after_retry(table: &Arc<TableInner>, head: &Snapshot) {
    let Some(d) = head
        .properties()
        .mirror
        .and_then(|m| m.mirror_version(head.version()))
    else {
        return;
    };
    let result = match delta_log::log(table).exists(d).await {
        Ok(true) => Ok(()),
        Ok(false) => sync(table).await.map(drop),
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        tracing::warn!(table = %table.name, error = %e, "the Delta mirror is behind until the next commit, `logbook mirror` or a vacuum");
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
        // `status_at` checked that the latest Delta entry holds
        // `mirrored_version`: the next one builds on it.
        let from = match status.mirrored_version {
            Some(_) => status.delta_version.map_or(mirror.first, |d| d + 1),
            None => mirror.first,
        };
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
                return status_at(table, &head).await;
            }
            if d == mirror.first {
                write_version(table, d, first_base(table, d).await?, &next).await?;
            } else {
                let base = match prev.take() {
                    Some(p) => p,
                    None => table.snapshot(v - 1).await?,
                };
                write_version(table, d, Base::Logbook(&base), &next).await?;
            }
            prev = Some(next);
        }
        // Another commit may have landed meanwhile: look again.
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
async fn write_version(table: &TableInner, d: u64, base: Base<'_>, next: &Snapshot) -> Result<()> {
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

/// How far the mirror of `table` is behind its latest version.
pub(crate) async fn status(table: &Arc<TableInner>) -> Result<MirrorStatus> {
    let head = table.snapshot(table.latest_version().await?).await?;
    status_at(table, &head).await
}

async fn status_at(table: &TableInner, head: &Snapshot) -> Result<MirrorStatus> {
    let mirror = head.properties().mirror;
    let delta_version = delta_log::latest(table).await?;
    let mirrored_version = match (mirror, delta_version) {
        (_, None) => None,
        // Off: what the Delta log left behind holds, if it is ours.
        (None, Some(d)) => delta_log::recorded(table, d).await?.map(|(v, _)| v),
        (Some(m), Some(d)) if d + 1 < m.first => {
            return Err(delta_log::diverged(
                table,
                d + 1,
                format!("it is missing: the mirror continues at Delta version {}", m.first),
            ))
        }
        (Some(m), Some(d)) => match m.logbook_version(d) {
            None => None,
            Some(v) if v > head.version() => {
                return Err(delta_log::diverged(
                    table,
                    d,
                    format!(
                        "the Delta log goes past logbook's latest version {} (another engine appended to it)",
                        head.version()
                    ),
                ))
            }
            Some(v) => {
                // The entry must be ours: another engine may have appended.
                delta_log::check_winner(table, d, &table.read_entry(v).await?).await?;
                Some(v)
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
        format: mirror.map(|m| m.format),
        enabled: mirror.is_some(),
        logbook_version: head.version(),
        mirrored_version,
        delta_version,
        behind,
    })
}

/// The Delta version a mirror turned on now starts at: the one after
/// whatever `_delta_log/` holds (0 for a new mirror). Its first commit
/// takes Delta from that state to the table's.
pub(crate) async fn next_free_version(table: &TableInner) -> Result<u64> {
    Ok(delta_log::latest(table).await?.map_or(0, |d| d + 1))
}

/// The Delta log entries (relative paths) a vacuum deletes once logbook
/// keeps no version before `oldest`: every entry and checkpoint before the
/// newest checkpoint at or below `oldest`'s Delta version. Delta readers
/// open from a checkpoint, so those entries only serve time travel to
/// versions whose files are going; and Delta readers list `_delta_log/`
/// when they open, so a long history costs every open until it is trimmed
/// (Delta's own log retention does the same).
pub(crate) async fn expired_entries(
    table: &TableInner,
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
    let listed = delta_log::list(table).await?;
    let Some(keep_from) = listed
        .iter()
        .filter(|(v, k, _)| *k == Kind::Checkpoint && *v <= floor)
        .map(|(v, _, _)| *v)
        .max()
    else {
        return Ok(vec![]);
    };
    Ok(listed
        .into_iter()
        .filter(|(v, _, _)| *v < keep_from)
        .map(|(_, _, rel)| rel)
        .collect())
}

/// The Delta version that mirrors logbook `version`, if the mirror holds
/// it (`mirrored`: the latest logbook version it holds).
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
