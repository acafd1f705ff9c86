//! The Delta log as a sequence of objects: names, the action types logbook
//! writes, creating an entry with put-if-absent, and recognising logbook's
//! own entries (by the `txn` and the commit id they name).

use std::collections::HashMap;

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::delta_table;
use crate::error::{Error, Result};
use crate::format::LogEntry;
use crate::handle::TableInner;
use crate::log::{Created, Log};

/// Delta's log directory: the table root is the Delta table's root.
pub(crate) const DELTA_LOG: &str = "_delta_log";
/// Our best-effort hint of the latest Delta version, moved at checkpoints
/// (Delta's own `_last_checkpoint` only names checkpoints).
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

pub(crate) fn checkpoint_path(version: u64) -> String {
    format!("{DELTA_LOG}/{version:020}.checkpoint.parquet")
}

/// What an object of `_delta_log/` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Entry,
    Checkpoint,
}

/// The version and kind of a `_delta_log/` object named by `relative`
/// (`None` for anything else, such as `_last_checkpoint`).
pub(crate) fn parse_name(relative: &str) -> Option<(u64, Kind)> {
    let file = relative.strip_prefix(DELTA_LOG)?.strip_prefix('/')?;
    let (digits, rest) = file.split_at_checked(20)?;
    let kind = match rest {
        ".json" => Kind::Entry,
        ".checkpoint.parquet" => Kind::Checkpoint,
        _ => return None,
    };
    Some((digits.parse().ok()?, kind))
}

/// Every versioned object of `_delta_log/`, sorted by version.
pub(crate) async fn list(table: &TableInner) -> Result<Vec<(u64, Kind, String)>> {
    let objects = table.list(DELTA_LOG).await?;
    let mut out: Vec<(u64, Kind, String)> = objects
        .iter()
        .map(|o| table.location.relative(&o.location))
        .filter_map(|rel| parse_name(&rel).map(|(v, k)| (v, k, rel)))
        .collect();
    out.sort_by_key(|(v, _, _)| *v);
    Ok(out)
}

/// The latest Delta version, or `None` for an empty log. Probes from the
/// hint; when neither the hint nor version 0 exists (vacuum trimmed the log
/// below a stale hint) the log is listed, never taken for empty.
pub(crate) async fn latest(table: &TableInner) -> Result<Option<u64>> {
    if let Some(v) = log(table).latest().await? {
        return Ok(Some(v));
    }
    let listed = list(table).await?;
    match listed.iter().rev().find(|(_, k, _)| *k == Kind::Entry) {
        Some((v, _, _)) => log(table).latest_from(*v).await.map(Some),
        None => Ok(None),
    }
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

/// Create Delta version `d` holding `actions`, the mirror of logbook commit
/// `entry`. Another writer's entry there is fine only if it mirrors the
/// same commit (a concurrent catch-up).
pub(crate) async fn create(
    table: &TableInner,
    d: u64,
    actions: &[Action],
    entry: &LogEntry,
) -> Result<()> {
    let mut body = Vec::new();
    for a in actions {
        serde_json::to_writer(&mut body, a).expect("actions serialise");
        body.push(b'\n');
    }
    // Bytes that are not Delta JSON are not ours: a divergence, said below.
    let ours = |found: &[u8]| Ok(check_bytes(table, d, found, entry).is_ok());
    match log(table).create(d, Bytes::from(body), ours).await? {
        Created::Ours => Ok(()),
        // Says why it is not ours.
        Created::Theirs(found) => check_bytes(table, d, &found, entry),
        // Not there (yet): the next catch-up creates it.
        Created::Absent(e) => Err(e),
    }
}

fn judge(
    table: &TableInner,
    d: u64,
    found: Option<(u64, Option<Uuid>)>,
    entry: &LogEntry,
) -> Result<()> {
    super::judge(found, entry, "`_delta_log/`").map_err(|reason| diverged(table, d, reason))
}

pub(crate) fn diverged(table: &TableInner, d: u64, reason: String) -> Error {
    Error::MirrorDiverged {
        table: table.name.clone(),
        format: crate::format::MirrorFormat::Delta.to_string(),
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
    recorded_in(table, d, &bytes)
}

/// [`check_winner`] on entry `d`'s bytes, already read.
pub(crate) fn check_bytes(
    table: &TableInner,
    d: u64,
    bytes: &[u8],
    entry: &LogEntry,
) -> Result<()> {
    judge(table, d, recorded_in(table, d, bytes)?, entry)
}

fn recorded_in(table: &TableInner, d: u64, bytes: &[u8]) -> Result<Option<(u64, Option<Uuid>)>> {
    let (mut version, mut commit_id) = (None, None);
    for action in actions_of(table, d, bytes)? {
        if action["txn"]["appId"] == APP_ID {
            version = action["txn"]["version"].as_u64();
        }
        if let Some(id) = action["commitInfo"]["logbookCommitId"].as_str() {
            commit_id = id.parse().ok();
        }
    }
    Ok(version.map(|v| (v, commit_id)))
}

/// The actions of Delta entry `d`, whoever wrote it.
pub(crate) fn actions_of(table: &TableInner, d: u64, bytes: &[u8]) -> Result<Vec<Value>> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|line| {
            serde_json::from_slice(line)
                .map_err(|e| diverged(table, d, format!("not Delta JSON: {e}")))
        })
        .collect()
}
