//! Operators' questions answered as data: what the CLI's `--json` prints
//! and the web UI's `/api` serves, from one function each, so the two
//! never differ. (`lifecycle::status` and `Stage::diff` already answer in
//! serialisable types; these add the answers that needed assembling.)

use serde::Serialize;

use crate::error::Result;
use crate::format::{LogEntry, PartitionSummary};
use crate::table::Table;

/// One log entry with the Delta version that mirrors it (`None` when the
/// mirror is off, has not reached it, or began after it).
#[derive(Debug, Clone, Serialize)]
pub struct LogLine {
    #[serde(flatten)]
    pub entry: LogEntry,
    pub delta_version: Option<u64>,
}

/// The table's log, oldest first (`logbook log T --json`). A mirror that
/// cannot say where it stands shows no Delta versions (the log is the
/// truth), with a warning.
pub async fn log(table: &Table) -> Result<Vec<LogLine>> {
    let history = table.history().await?;
    let mirror = table.latest().await?.properties().mirror;
    let mirrored = match mirror {
        Some(_) => match table.mirror_status().await {
            Ok(status) => status.mirrored_version,
            Err(e) => {
                tracing::warn!(table = %table.name(), error = %e, "no Delta versions shown");
                None
            }
        },
        None => None,
    };
    Ok(history
        .into_iter()
        .map(|entry| LogLine {
            delta_version: crate::mirror::delta_version_of(
                mirror.as_ref(),
                mirrored,
                entry.version,
            ),
            entry,
        })
        .collect())
}

/// The partitions of `version` (latest if `None`), oldest date first
/// (`logbook partitions T --json`).
pub async fn partitions(table: &Table, version: Option<u64>) -> Result<Vec<PartitionSummary>> {
    let snapshot = match version {
        Some(v) => table.at_version(v).await?,
        None => table.latest().await?,
    };
    Ok(snapshot
        .partitions()
        .await?
        .into_iter()
        .map(PartitionSummary::from)
        .collect())
}
