//! A stage's records (`stage.json`, `dates/<date>.json`), and recording a
//! finished staged write: the part of stages a partition writer needs,
//! kept apart from the stage API (`mod.rs`) so the writer does not depend
//! on it.

use chrono::NaiveDate;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::{layout, DataFile, Operation, RunInfo, TxnState};
use crate::handle::TableInner;

/// A stage's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageInfo {
    pub name: String,
    pub created_ms: i64,
    /// The table version when the stage began: a staged date replaced on the
    /// main line after it blocks publishing.
    pub base_version: u64,
    /// Set once published (at this version), before the stage's records are
    /// deleted, so that a crash during the clean-up leaves a stage that
    /// knows it is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<u64>,
    /// Unique to this incarnation of the name: a date record left behind by
    /// an earlier stage of the same name (a clean-up that did not finish)
    /// carries another id and is ignored, never published again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<uuid::Uuid>,
}

/// One staged partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedPartition {
    pub date: NaiveDate,
    pub rows: u64,
    pub files: Vec<DataFile>,
    pub run: RunInfo,
    /// The schema version the rows were written under.
    #[serde(default)]
    pub schema_version: u32,
    /// The [`StageInfo::id`] of the stage it was recorded in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<uuid::Uuid>,
}

/// The run id of a stage's publish commit.
pub(crate) fn publish_run_id(stage: &str) -> String {
    format!("publish-{stage}")
}

/// The version at which the stage's publish landed, if it did. The log
/// entry is the record of the outcome, whatever became of the clean-up
/// after it; `published` in the stage's record is only a shortcut. Reads
/// the entries since the stage began (a stage lives for a backfill, so
/// they are few).
pub(crate) async fn landed_publish(table: &TableInner, info: &StageInfo) -> Result<Option<u64>> {
    if let Some(version) = info.published {
        return Ok(Some(version));
    }
    let head = table.log.latest_from(info.base_version).await?;
    let run_id = publish_run_id(&info.name);
    let mut entries = std::pin::pin!(table.entries(info.base_version + 1..=head));
    while let Some(entry) = entries.try_next().await? {
        // A multi-table publish's part counts once the warehouse decided
        // it committed; an undecided or aborted one never landed.
        let ours = entry.operation == Operation::PublishStage
            && entry.run.as_ref().is_some_and(|r| r.run_id == run_id)
            && entry
                .txn
                .as_ref()
                .is_none_or(|t| t.state == TxnState::Committed);
        if ours {
            return Ok(Some(entry.version));
        }
    }
    Ok(None)
}

/// Record a finished staged write of `date` in stage `name`. Refused if the
/// stage was published meanwhile: its records are leftovers.
pub(crate) async fn record(
    table: &TableInner,
    name: &str,
    partition: &StagedPartition,
) -> Result<()> {
    let info: Option<StageInfo> = table.get_json_opt(&layout::stage_info(name)).await?;
    if let Some(info) = &info {
        if let Some(version) = landed_publish(table, info).await? {
            return Err(Error::InvalidInput {
                table: table.name.clone(),
                reason: format!(
                    "stage {name:?} was published at version {version}; open the stage again (it starts anew) to stage partition {}",
                    partition.date
                ),
            });
        }
    }
    let partition = StagedPartition {
        stage_id: info.as_ref().and_then(|i| i.id),
        ..partition.clone()
    };
    // The files of the version this replaces are left to vacuum, not
    // deleted here: a publish may land between the check above and now,
    // making them the table's.
    let path = layout::stage_date(name, partition.date);
    table.put_json(&path, &partition).await
}
