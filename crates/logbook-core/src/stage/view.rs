//! A table as a run inside a stage reads it: the stage's staged dates in
//! place of the main line's, the main line elsewhere. How a chain is
//! re-run in one stage: `revenue`, run in stage S, reads `orders_clean`
//! as S has re-run it.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::format::{layout, PartitionEntry};
use crate::snapshot::{Snapshot, Staged};

use super::record::landed_publish;
use super::{StageInfo, StagedPartition};

impl Snapshot {
    /// This version with stage `name`'s staged dates laid over it: itself
    /// when the table holds no such stage, or holds it published (the main
    /// line then has its dates). A staged date reads as a partition of the
    /// version after this one (what publishing would make it) written by
    /// its staged run; [`Snapshot::staged_run`] tells it apart. For reads
    /// only: nothing commits on such a view.
    pub async fn in_stage(&self, name: &str) -> Result<Snapshot> {
        let inner = self.table_inner();
        let Some(info) = inner
            .get_json_opt::<StageInfo>(&layout::stage_info(name))
            .await?
        else {
            return Ok(self.clone());
        };
        if landed_publish(inner, &info).await?.is_some() {
            return Ok(self.clone());
        }
        let records = inner
            .list_json::<StagedPartition>(&layout::stage_dates(name))
            .await?;
        let mut partitions = BTreeMap::new();
        for (_, _, p) in records {
            // A record of an earlier stage of the name is a leftover.
            if p.stage_id != info.id {
                continue;
            }
            let entry = PartitionEntry {
                date: p.date,
                version: self.version() + 1,
                commit_id: uuid::Uuid::nil(),
                rows: p.rows,
                files: p.files,
                run: Some(p.run),
                schema_version: p.schema_version,
                earlier_runs: vec![],
            };
            partitions.insert(entry.date, entry);
        }
        Ok(self.with_staged(Staged {
            name: name.to_string(),
            partitions,
        }))
    }
}
