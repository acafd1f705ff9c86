//! Operators' questions answered as data: what the CLI's `--json` prints
//! and the web UI's `/api` serves, from one function each, so the two
//! never differ. (`lifecycle::status` and `Stage::diff` already answer in
//! serialisable types; these add the answers that needed assembling.)

use serde::Serialize;

use crate::error::Result;
use crate::format::{LogEntry, MirrorFormat, PartitionSummary};
use crate::table::Table;

/// One commit as `logbook log T --json` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LogLine {
    #[serde(flatten)]
    pub entry: LogEntry,
    /// The Delta version that mirrors this commit, if the Delta mirror holds it.
    pub delta_version: Option<u64>,
    /// The Iceberg snapshot id that mirrors this commit, if the Iceberg
    /// mirror holds it (time travel: pyiceberg's `snapshot_id`, DuckDB's
    /// `snapshot_from_id`).
    pub iceberg_snapshot_id: Option<i64>,
}

/// The table's log, oldest first (`logbook log T --json`). A mirror that
/// cannot say where it stands shows no versions (the log is the truth),
/// with a warning.
pub async fn log(table: &Table) -> Result<Vec<LogLine>> {
    let history = table.history().await?;
    let properties = table.latest().await?.properties().clone();
    let statuses = match properties.mirrors().is_empty() {
        true => vec![],
        false => table.mirror_status().await.unwrap_or_else(|e| {
            tracing::warn!(table = %table.name(), error = %e, "no mirror versions shown");
            vec![]
        }),
    };
    let mirrored = |format: MirrorFormat| {
        statuses
            .iter()
            .find(|s| s.format == format && s.enabled)
            .and_then(|s| s.mirrored_version)
    };
    let (delta, iceberg) = (properties.mirror, properties.iceberg_mirror);
    let (delta_mirrored, iceberg_mirrored) = (
        mirrored(MirrorFormat::Delta),
        mirrored(MirrorFormat::Iceberg),
    );
    // Exactly the snapshots the latest metadata holds: it drops expired
    // versions', and a copied table's history starts at its first commit.
    let held = match iceberg_mirrored {
        None => Default::default(),
        Some(_) => crate::mirror::iceberg_held(&table.inner)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(table = %table.name(), error = %e, "no Iceberg snapshot ids shown");
                Default::default()
            }),
    };
    Ok(history
        .into_iter()
        .map(|entry| LogLine {
            delta_version: crate::mirror::mirror_version_of(
                delta.as_ref(),
                delta_mirrored,
                entry.version,
            ),
            iceberg_snapshot_id: crate::mirror::mirror_version_of(
                iceberg.as_ref(),
                iceberg_mirrored,
                entry.version,
            )
            .map(|_| crate::mirror::iceberg_snapshot_id(entry.version))
            .filter(|id| held.contains(id)),
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
