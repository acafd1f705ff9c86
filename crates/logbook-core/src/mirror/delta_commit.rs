//! The Delta commit of one logbook commit: what changed between the state
//! Delta version `d - 1` holds and the logbook snapshot `d` mirrors.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{json, Value};

use super::delta_log::{Action, Add, Remove, Txn, APP_ID};
use super::delta_table;
use crate::error::Result;
use crate::format::{DataFile, Operation};
use crate::handle::TableInner;
use crate::schema::TableSchema;
use crate::snapshot::Snapshot;

/// What Delta version `d - 1` holds, which the commit for `d` changes.
pub(crate) enum Base<'a> {
    /// The logbook snapshot `d - 1` mirrors (checked to be ours): only the
    /// months whose manifests differ are compared.
    Logbook(&'a Snapshot),
    /// Delta's own state (relative path as Delta writes it, and size): for
    /// the first version of a mirror, which may follow an older mirror, an
    /// entry of another engine, or nothing.
    Delta(BTreeMap<String, i64>),
}

/// The actions of the Delta commit that takes `base` to `next`.
pub(crate) async fn actions(
    table: &TableInner,
    base: Base<'_>,
    next: &Snapshot,
) -> Result<Vec<Action>> {
    let entry = next.entry();
    let ts = entry.timestamp_ms;
    let schema = next.schema();
    let mut out = vec![Action::CommitInfo(commit_info(next))];
    if !matches!(base, Base::Logbook(b) if b.schema() == schema) {
        out.extend(declaration(table, schema).await?);
    }
    out.push(txn(next));
    let data_change = entry.operation != Operation::Compact;
    let remove = |path: String, size: i64| {
        Action::Remove(Remove {
            path,
            deletion_timestamp: ts,
            data_change,
            extended_file_metadata: true,
            partition_values: HashMap::new(),
            size,
        })
    };
    let (removed, added) = match base {
        Base::Logbook(b) => {
            let (removed, added) = changed_files(b, next).await?;
            let removed: Vec<Action> = removed
                .iter()
                .map(|f| remove(delta_table::encode_path(&f.path), f.size as i64))
                .collect();
            (removed, added)
        }
        Base::Delta(mut state) => {
            let mut added = Vec::new();
            for (path, f) in live_files(next).await? {
                if state.remove(&delta_table::encode_path(&path)).is_none() {
                    added.push(f);
                }
            }
            let removed = state.into_iter().map(|(p, size)| remove(p, size)).collect();
            (removed, added)
        }
    };
    out.extend(removed);
    out.extend(
        added
            .iter()
            .map(|f| Action::Add(add(schema, f, ts, data_change))),
    );
    Ok(out)
}

/// `protocol` and `metaData` for `schema`. The metadata's id and creation
/// time are the table's creation commit's, so every writer of the mirror
/// (and every checkpoint) produces the same actions.
pub(crate) async fn declaration(table: &TableInner, schema: &TableSchema) -> Result<[Action; 2]> {
    let created = table.read_entry(0).await?;
    Ok([
        Action::Protocol(delta_table::protocol(schema)),
        Action::MetaData(delta_table::metadata(
            &table.name,
            created.commit_id,
            created.timestamp_ms,
            schema,
        )),
    ])
}

/// The `txn` that says which logbook version a Delta version holds.
pub(crate) fn txn(next: &Snapshot) -> Action {
    Action::Txn(Txn {
        app_id: APP_ID.into(),
        version: next.version() as i64,
        last_updated: next.timestamp_ms(),
    })
}

pub(crate) fn add(schema: &TableSchema, f: &DataFile, ts: i64, data_change: bool) -> Add {
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
        Operation::AlterSchema => "CHANGE COLUMN",
        Operation::SetProperties | Operation::Expire | Operation::Vacuum | Operation::Seal => {
            "SET TBLPROPERTIES"
        }
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

/// The files of `snapshot`: its dimension's, and those of the partitions
/// of `months` (every month when `None`), keyed by path.
async fn files_of(
    snapshot: &Snapshot,
    months: Option<&BTreeSet<String>>,
) -> Result<BTreeMap<String, DataFile>> {
    let mut files: BTreeMap<String, DataFile> = snapshot
        .dimension_files()
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect();
    for m in snapshot.month_refs().await? {
        if months.is_some_and(|only| !only.contains(&m.month)) {
            continue;
        }
        for p in &snapshot.month_at(&m).await?.partitions {
            files.extend(p.files.iter().map(|f| (f.path.clone(), f.clone())));
        }
    }
    Ok(files)
}

/// Every live file of `snapshot`, keyed by path.
pub(crate) async fn live_files(snapshot: &Snapshot) -> Result<BTreeMap<String, DataFile>> {
    files_of(snapshot, None).await
}

/// Each month's manifest path in `snapshot`, by month.
async fn month_paths(snapshot: &Snapshot) -> Result<BTreeMap<String, String>> {
    let refs = snapshot.month_refs().await?;
    Ok(refs.into_iter().map(|m| (m.month, m.path)).collect())
}

/// The files of `base` not in `next`, and of `next` not in `base`. Only the
/// months whose manifests differ are read.
async fn changed_files(base: &Snapshot, next: &Snapshot) -> Result<(Vec<DataFile>, Vec<DataFile>)> {
    let (before, after) = (month_paths(base).await?, month_paths(next).await?);
    let changed: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|m| before.get(*m) != after.get(*m))
        .cloned()
        .collect();
    let old = files_of(base, Some(&changed)).await?;
    let new = files_of(next, Some(&changed)).await?;
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
