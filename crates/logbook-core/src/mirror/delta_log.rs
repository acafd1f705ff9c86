//! Writing one Delta commit for one logbook commit: the actions, and their
//! creation with put-if-absent.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{checkpoint, delta_table};
use crate::error::{Error, Result};
use crate::format::{DataFile, LogEntry, Mirror, Operation};
use crate::log::{Log, PutOutcome};
use crate::snapshot::Snapshot;
use crate::table::TableInner;

/// Delta's log directory: the table root is the Delta table's root.
pub(crate) const DELTA_LOG: &str = "_delta_log";
/// Our best-effort hint of the latest Delta version (Delta's own
/// `_last_checkpoint` only names checkpoints).
const HINT: &str = "_logbook/mirror/delta-last";
/// The `txn` application id that marks entries written by logbook.
pub(crate) const APP_ID: &str = "logbook";
/// A checkpoint every this many Delta versions keeps a reader's open cost flat.
pub(crate) const CHECKPOINT_INTERVAL: u64 = 100;

pub(crate) fn log(table: &TableInner) -> Log {
    Log::in_dir(table.location.clone(), DELTA_LOG, HINT)
}

pub(crate) fn entry_path(version: u64) -> String {
    format!("{DELTA_LOG}/{version:020}.json")
}

/// One line of a Delta commit file.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Action {
    CommitInfo(Value),
    Protocol(delta_table::Protocol),
    MetaData(delta_table::Metadata),
    Txn(Txn),
    Add(Add),
    Remove(Remove),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Txn {
    pub app_id: String,
    pub version: i64,
    pub last_updated: i64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Add {
    pub path: String,
    pub partition_values: HashMap<String, Option<String>>,
    pub size: i64,
    pub modification_time: i64,
    pub data_change: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Remove {
    pub path: String,
    pub deletion_timestamp: i64,
    pub data_change: bool,
    pub extended_file_metadata: bool,
    pub partition_values: HashMap<String, Option<String>>,
    pub size: i64,
}

/// Write Delta version `d` of `mirror`: the change from `prev` (the logbook
/// snapshot Delta version `d - 1` holds) to `next`. For the mirror's first
/// version `prev` is found from the entry before it, if any.
pub(crate) async fn write_version(
    table: &Arc<TableInner>,
    mirror: &Mirror,
    d: u64,
    prev: Option<&Snapshot>,
    next: &Snapshot,
) -> Result<()> {
    let base = if d == mirror.first {
        match d.checked_sub(1) {
            None => None,
            Some(before) => {
                let (v, _) = recorded(table, before)
                    .await?
                    .ok_or_else(|| diverged(table, before, "it has no logbook `txn`".into()))?;
                Some(table.snapshot(v).await.map_err(|e| {
                    diverged(
                        table,
                        before,
                        format!("it holds logbook version {v}, which can no longer be read ({e}); delete `_delta_log/` and turn the mirror on again"),
                    )
                })?)
            }
        }
    } else {
        Some(prev.cloned().expect("callers pass the previous snapshot"))
    };
    let actions = actions(table, base.as_ref(), next, d == mirror.first).await?;
    let mut body = Vec::new();
    for a in &actions {
        serde_json::to_writer(&mut body, a).expect("actions serialise");
        body.push(b'\n');
    }
    let log = log(table);
    match log.try_create(d, Bytes::from(body)).await {
        PutOutcome::Created => {}
        PutOutcome::AlreadyExists => check_winner(table, d, next.entry()).await?,
        PutOutcome::Ambiguous(e) => {
            if check_winner(table, d, next.entry()).await.is_err() {
                return Err(e);
            }
        }
    }
    if d > 0 && d.is_multiple_of(CHECKPOINT_INTERVAL) {
        checkpoint::write(table, d, next).await?;
        // The hint moves with checkpoints only: finding the latest entry
        // probes forward from it (a few `HEAD`s), and commits stay one put
        // cheaper.
        if let Err(e) = log.write_hint(d).await {
            tracing::warn!(table = %table.name, version = d, error = %e, "could not update the Delta mirror's hint");
        }
    }
    Ok(())
}

/// Delta version `d` must mirror the logbook commit `entry`: another
/// writer may have created it first (a concurrent catch-up: fine), or
/// another engine appended to the mirror, or a `_delta_log/` was left by an
/// earlier table at this location (a divergence: the commit id differs).
pub(crate) async fn check_winner(table: &TableInner, d: u64, entry: &LogEntry) -> Result<()> {
    let found = recorded(table, d).await?;
    let reason = match found {
        Some((v, id)) if v == entry.version && id.is_none_or(|id| id == entry.commit_id) => {
            return Ok(())
        }
        Some((v, _)) if v == entry.version => {
            "it mirrors another table's commit (a `_delta_log/` left at this location); move it away and run `logbook mirror`".to_string()
        }
        Some((v, _)) => format!("it mirrors logbook version {v}, not {}", entry.version),
        None => "it was written by another Delta writer (no logbook `txn`); the mirror is read-only for other engines".to_string(),
    };
    Err(diverged(table, d, reason))
}

fn diverged(table: &TableInner, d: u64, reason: String) -> Error {
    Error::MirrorDiverged {
        table: table.name.clone(),
        path: entry_path(d),
        reason,
    }
}

/// The logbook version Delta version `d` records in its `txn`, and the
/// commit id its `commitInfo` names, if it is logbook's.
pub(crate) async fn recorded(table: &TableInner, d: u64) -> Result<Option<(u64, Option<Uuid>)>> {
    let Some(bytes) = log(table).read(d).await? else {
        return Err(diverged(table, d, "it is missing".into()));
    };
    let (mut version, mut commit_id) = (None, None);
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let action: Value = serde_json::from_slice(line)
            .map_err(|e| diverged(table, d, format!("not Delta JSON: {e}")))?;
        if action["txn"]["appId"] == APP_ID {
            version = action["txn"]["version"].as_u64();
        }
        if let Some(id) = action["commitInfo"]["logbookCommitId"].as_str() {
            commit_id = id.parse().ok();
        }
    }
    Ok(version.map(|v| (v, commit_id)))
}

/// The actions taking Delta from `base` (none: an empty table) to `next`.
async fn actions(
    table: &TableInner,
    base: Option<&Snapshot>,
    next: &Snapshot,
    first: bool,
) -> Result<Vec<Action>> {
    let entry = next.entry();
    let ts = entry.timestamp_ms;
    let schema = next.schema();
    let mut out = vec![Action::CommitInfo(commit_info(next))];
    if first || base.is_none_or(|b| b.schema() != schema) {
        let created = table.read_entry(0).await?;
        out.push(Action::Protocol(delta_table::protocol(schema)));
        out.push(Action::MetaData(delta_table::metadata(
            &table.name,
            created.commit_id,
            created.timestamp_ms,
            schema,
        )));
    }
    out.push(Action::Txn(Txn {
        app_id: APP_ID.into(),
        version: next.version() as i64,
        last_updated: ts,
    }));
    let (removed, added) = changed_files(base, next).await?;
    let data_change = entry.operation != Operation::Compact;
    for f in removed {
        out.push(Action::Remove(Remove {
            path: delta_table::encode_path(&f.path),
            deletion_timestamp: ts,
            data_change,
            extended_file_metadata: true,
            partition_values: HashMap::new(),
            size: f.size as i64,
        }));
    }
    for f in added {
        out.push(Action::Add(add(schema, &f, ts, data_change)));
    }
    Ok(out)
}

pub(crate) fn add(
    schema: &crate::schema::TableSchema,
    f: &DataFile,
    ts: i64,
    data_change: bool,
) -> Add {
    Add {
        path: delta_table::encode_path(&f.path),
        partition_values: HashMap::new(),
        size: f.size as i64,
        modification_time: ts,
        data_change,
        stats: Some(delta_table::stats(schema, f)),
    }
}

fn commit_info(next: &Snapshot) -> Value {
    let entry = next.entry();
    let operation = match entry.operation {
        Operation::CreateTable => "CREATE TABLE",
        Operation::ReplacePartitions | Operation::PublishStage | Operation::ApplyDimension => {
            "WRITE"
        }
        Operation::Compact => "OPTIMIZE",
        Operation::SetProperties => "SET TBLPROPERTIES",
        Operation::AlterSchema => "CHANGE COLUMN",
        Operation::Expire | Operation::Vacuum => "SET TBLPROPERTIES",
    };
    let run = entry.run.as_ref();
    json!({
        "timestamp": entry.timestamp_ms,
        "operation": operation,
        "operationParameters": {},
        "isBlindAppend": false,
        "engineInfo": format!("logbook/{}", env!("CARGO_PKG_VERSION")),
        "logbookVersion": entry.version,
        "logbookCommitId": entry.commit_id.to_string(),
        "logbookOperation": entry.operation.to_string(),
        "logbookDates": entry.dates,
        "runId": run.map(|r| r.run_id.clone()),
        "codeVersion": run.and_then(|r| r.code_version.clone()),
    })
}

/// Every live file of `snapshot`, keyed by path.
pub(crate) async fn live_files(snapshot: &Snapshot) -> Result<BTreeMap<String, DataFile>> {
    let mut files: BTreeMap<String, DataFile> = snapshot
        .dimension_files()
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect();
    for p in snapshot.partitions().await? {
        files.extend(p.files.into_iter().map(|f| (f.path.clone(), f)));
    }
    Ok(files)
}

/// The files of `base` not in `next`, and of `next` not in `base`. Only the
/// months whose manifests differ are read.
async fn changed_files(
    base: Option<&Snapshot>,
    next: &Snapshot,
) -> Result<(Vec<DataFile>, Vec<DataFile>)> {
    let Some(base) = base else {
        return Ok((vec![], live_files(next).await?.into_values().collect()));
    };
    let mut old: BTreeMap<String, DataFile> = base
        .dimension_files()
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect();
    let mut new: BTreeMap<String, DataFile> = next
        .dimension_files()
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect();
    let refs = |s: &Snapshot| -> BTreeMap<String, String> {
        s.root()
            .months
            .iter()
            .map(|m| (m.month.clone(), m.path.clone()))
            .collect()
    };
    let (before, after) = (refs(base), refs(next));
    let months: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for month in months {
        if before.get(month) == after.get(month) {
            continue;
        }
        for (snap, files) in [(base, &mut old), (next, &mut new)] {
            if let Some(m) = snap.month(month).await? {
                for p in &m.partitions {
                    files.extend(p.files.iter().map(|f| (f.path.clone(), f.clone())));
                }
            }
        }
    }
    let removed = old
        .iter()
        .filter(|(p, _)| !new.contains_key(*p))
        .map(|(_, f)| f.clone())
        .collect();
    let added = new
        .into_iter()
        .filter(|(p, _)| !old.contains_key(p))
        .map(|(_, f)| f)
        .collect();
    Ok((removed, added))
}
