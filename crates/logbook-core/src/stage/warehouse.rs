//! A stage across the warehouse: every table holding a stage of one name,
//! published as one (the protocol is the `publish` module's), compared and
//! dropped together.
//!
//! A stage name is warehouse-wide: each table keeps its own records under
//! `<table>/_logbook/stages/<name>/` (what a write into the stage makes),
//! and the warehouse's stage `<name>` is the set of tables holding one
//! that is not yet published.

use std::collections::BTreeMap;

use futures::StreamExt;

use crate::commit::{CommitInfo, TxnStart};
use crate::error::{Error, Result};
use crate::publish::{Decision, Outcome};
use crate::warehouse::Warehouse;

use super::record::landed_publish;
use super::{Stage, StageDiff, StagedPartition};

/// The tables of a warehouse-wide stage.
#[derive(Debug, Clone)]
pub struct WarehouseStage {
    name: String,
    stages: Vec<Stage>,
}

/// What publishing a warehouse-wide stage did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarehousePublish {
    /// The publish's number in the warehouse's publish log (`None` when the
    /// stage held one table, published by a commit of its own).
    pub seq: Option<u64>,
    /// Each table's commit, by table name.
    pub tables: BTreeMap<String, CommitInfo>,
}

impl Warehouse {
    /// Stage `name` across the warehouse: every table holding an
    /// unpublished stage of that name (one listing of the warehouse, then
    /// one read per table).
    pub async fn stage(&self, name: &str) -> Result<WarehouseStage> {
        let names = self.list_tables().await?;
        let found: Vec<Option<Stage>> = futures::stream::iter(names)
            .map(|t| async move {
                let table = self.table(&t).await?;
                let path = crate::format::layout::stage_info(name);
                let info = table.inner.get_json_opt::<super::StageInfo>(&path).await?;
                Ok(info.map(|info| Stage { table, info }))
            })
            .buffered(8)
            .collect::<Vec<Result<Option<Stage>>>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        let mut stages = Vec::new();
        for stage in found.into_iter().flatten() {
            match landed_publish(&stage.table.inner, &stage.info).await? {
                None => stages.push(stage),
                // Published, but its clean-up did not finish (the publisher
                // died after the decision): finish it now.
                Some(version) if stage.info.published.is_none() => {
                    let dates = stage.partitions().await?;
                    stage.finish(&dates, version).await;
                }
                Some(_) => {}
            }
        }
        Ok(WarehouseStage {
            name: name.to_string(),
            stages,
        })
    }
}

impl WarehouseStage {
    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tables holding the stage, by name.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Every table's staged dates against its main line.
    pub async fn diff(&self) -> Result<BTreeMap<String, Vec<StageDiff>>> {
        let mut out = BTreeMap::new();
        for stage in &self.stages {
            out.insert(stage.table.name().to_string(), stage.diff().await?);
        }
        Ok(out)
    }

    /// Drop the stage in every table; returns the staged dates forgotten.
    pub async fn drop_stage(self) -> Result<usize> {
        let mut dropped = 0;
        for stage in self.stages {
            dropped += stage.drop_stage().await?;
        }
        Ok(dropped)
    }

    /// Publish every table of the stage at once: readers see all of them
    /// change or none, whatever fails where.
    ///
    /// Refused as a whole (`StageConflict` naming the table and date) if a
    /// staged date of any table was replaced on the main line after its
    /// stage began, unless `force`. Fails with `PublishAborted` when a
    /// commit to one of the tables aborted the publish after waiting for
    /// it, or another publish took its number: nothing is published, and
    /// publishing again starts over. Any other error may leave the publish
    /// undecided: readers see none of it, and publishing again (or a commit
    /// to one of the tables, after its wait) finishes it by aborting it.
    pub async fn publish(&self, force: bool) -> Result<WarehousePublish> {
        // Each table's staged dates, checked against its main line (all
        // tables at once: nothing is written yet). Tables whose stage holds
        // no date yet take no part.
        let read = futures::future::try_join_all(self.stages.iter().map(|stage| async move {
            let dates = stage.partitions().await?;
            if !force && !dates.is_empty() {
                stage.check_unchanged(&dates).await?;
            }
            Ok::<_, Error>((stage, dates))
        }))
        .await?;
        let (stages, staged): (Vec<&Stage>, Vec<Vec<StagedPartition>>) =
            read.into_iter().filter(|(_, d)| !d.is_empty()).unzip();
        let first = *stages.first().ok_or_else(|| Error::InvalidInput {
            table: "(warehouse)".into(),
            reason: format!("no table has staged dates in stage {:?}", self.name),
        })?;
        if stages.len() == 1 {
            let info = first.commit_part(&staged[0], None, force).await?;
            first.finish(&staged[0], info.version).await;
            let table = first.table.name().to_string();
            return Ok(WarehousePublish {
                seq: None,
                tables: BTreeMap::from([(table, info)]),
            });
        }
        let inner = &first.table.inner;
        let publishes = inner
            .publishes
            .as_ref()
            .ok_or_else(|| Error::InvalidInput {
                table: first.table.name().to_string(),
                reason: "a multi-table publish needs the tables' warehouse".into(),
            })?;
        // A dead earlier attempt of this publish holds its tables' heads:
        // abort it before taking a number (it may hold the next one). The
        // heads also say which tables keep a mirror.
        let mirrored = futures::future::try_join_all(stages.iter().map(|stage| async move {
            let head = stage.table.latest().await?;
            if head.undecided_part().is_some() {
                let table = &stage.table.inner;
                crate::publish::settle(table, head.version(), Some(&self.name)).await?;
            }
            Ok::<_, Error>(!head.properties().mirrors().is_empty())
        }))
        .await?;
        let txn = TxnStart {
            seq: publishes.head().await?.map_or(0, |h| h + 1),
            id: inner.options.ids.next_id(),
            stage: self.name.clone(),
        };
        let mut decision = Decision {
            seq: txn.seq,
            id: txn.id,
            outcome: Outcome::Aborted,
            stage: self.name.clone(),
            tables: BTreeMap::new(),
            timestamp_ms: 0,
        };
        // Prepare: one part per table, all at once. A rival attempt at the
        // same number never makes us wait (parts go on its undecided ones,
        // `commit` step 0), so two publishers crossing on two tables both
        // land and the decision picks one.
        let txn = &txn;
        let landed = futures::future::join_all(
            stages.iter().zip(&staged).map(|(stage, dates)| async move {
                stage.commit_part(dates, Some(txn.clone()), force).await
            }),
        )
        .await;
        let mut infos = BTreeMap::new();
        let mut failed = None;
        for (stage, landed) in stages.iter().zip(landed) {
            match landed {
                Ok(info) => {
                    let table = stage.table.name().to_string();
                    decision.tables.insert(table.clone(), info.version);
                    infos.insert(table, info);
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            // Void the parts that landed now rather than after a
            // committer's wait (best effort: that wait is the fallback).
            decision.timestamp_ms = inner.options.clock.now_millis();
            if let Err(abort) = publishes.decide(&decision).await {
                tracing::warn!(seq = txn.seq, error = %abort, "aborting a failed publish; its parts stay undecided until a commit aborts them");
            }
            return Err(e);
        }
        // Decide: the commit point.
        decision.outcome = Outcome::Committed;
        decision.timestamp_ms = inner.options.clock.now_millis();
        let held = publishes.decide(&decision).await?;
        if held.id != txn.id || held.outcome != Outcome::Committed {
            let reason = match held.id == txn.id {
                true => "aborted by a commit that waited for it too long".to_string(),
                false => format!("taken by another publish, of stage {:?}", held.stage),
            };
            return Err(Error::PublishAborted {
                stage: self.name.clone(),
                seq: txn.seq,
                reason,
            });
        }
        // Published. Finish each table (best effort, all at once): its
        // stage records, the seal on its part (`publish/seal.rs`), and its
        // mirror, which never follows an undecided part.
        // `held` is ours here (checked above): what each table learns is
        // the stored decision itself.
        let decision: &Decision = &held;
        let finishing = stages.iter().zip(&staged).zip(mirrored);
        futures::future::join_all(finishing.map(|((stage, dates), mirrored)| async move {
            let version = decision.tables[stage.table.name()];
            let table = &stage.table.inner;
            if let Some(publishes) = &table.publishes {
                publishes.learn(decision);
            }
            futures::future::join(
                stage.finish(dates, version),
                crate::publish::seal(table, version),
            )
            .await;
            // Read before the publish: a mirror added meanwhile is caught
            // up by the table's next commit or `logbook mirror`, as after
            // any crash of a mirror write.
            if mirrored {
                if let Err(e) = stage.table.sync_mirror().await {
                    tracing::warn!(table = %stage.table.name(), error = %e, "published; the mirror did not follow (the next commit or `logbook mirror` catches it up)");
                }
            }
        }))
        .await;
        Ok(WarehousePublish {
            seq: Some(txn.seq),
            tables: infos,
        })
    }
}
