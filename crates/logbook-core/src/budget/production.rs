//! Production runs say they are live (or waiting to start), so that
//! backfill runners on every machine hold back while they run.
//!
//! One object per run under `_logbook/production/`, renewed like a slot's
//! lease and deleted when the run ends; one listing finds them all. An
//! announcement whose renewals stopped (its run died) stops counting once
//! an observer has seen it unchanged for its lease, and that observer
//! deletes it.

use std::sync::Arc;

use std::time::Duration;
use tokio::sync::Mutex;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format::layout;
use crate::warehouse::Warehouse;

use super::keeper::Keeper;
use super::{encode, Objects, Observer};

/// What a production run says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductionRecord {
    pub table: String,
    pub date: NaiveDate,
    pub run_id: String,
    /// Announced before it starts (waiting on its inputs or a scheduler).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
    pub beat: u64,
    pub lease_ms: u64,
    /// When it announced itself (its clock; display only).
    pub started_ms: i64,
}

/// A production run's announcement, renewed in the background until
/// [`ProductionRun::end`] (or dropped, when it expires instead).
#[derive(Debug)]
pub struct ProductionRun {
    objects: Objects,
    path: String,
    /// The record as last written, and whether the run ended (held across
    /// each write, so a renewal in flight never re-creates an ended run's
    /// announcement).
    record: Arc<Mutex<(ProductionRecord, bool)>>,
    _keeper: Keeper,
}

impl Warehouse {
    /// Announce a production run of `table`'s `date`: backfill runners
    /// start no new date until it ends (when the budget puts production
    /// first). `waiting`: announced before the run can start.
    pub async fn announce_production(
        &self,
        table: &str,
        date: NaiveDate,
        run_id: &str,
        waiting: bool,
    ) -> Result<ProductionRun> {
        let budget = self.run_budget().await?;
        let objects = Objects {
            location: self.location().clone(),
        };
        let id = self.options().ids.next_id();
        let path = format!("{}/{id}.json", layout::PRODUCTION_DIR);
        let record = ProductionRecord {
            table: table.to_string(),
            date,
            run_id: run_id.to_string(),
            waiting,
            beat: 0,
            lease_ms: budget.lease_ms,
            started_ms: self.options().clock.now_millis(),
        };
        objects.put(&path, encode(&path, &record)?).await?;
        let record = Arc::new(Mutex::new((record, false)));
        let every = Duration::from_millis((budget.lease_ms / 3).max(1));
        let keeper = {
            let (objects, path, record) = (objects.clone(), path.clone(), record.clone());
            Keeper::spawn(every, move || {
                let (objects, path, record) = (objects.clone(), path.clone(), record.clone());
                async move {
                    if let Err(e) = beat(&objects, &path, &record, |_| {}).await {
                        tracing::warn!(error = %e, "could not renew a production run's announcement");
                    }
                    true
                }
            })
        };
        Ok(ProductionRun {
            objects,
            path,
            record,
            _keeper: keeper,
        })
    }

    /// The production runs announced and not expired, as `observer` has
    /// timed them; expired ones are deleted.
    pub(crate) async fn live_production(
        &self,
        observer: &mut Observer,
    ) -> Result<Vec<ProductionRecord>> {
        let live = self.production_runs(observer).await?;
        Ok(live.into_iter().map(|(record, _)| record).collect())
    }

    /// [`Warehouse::live_production`], each with when the store last saw
    /// it renewed (ms, the store's clock).
    pub(crate) async fn production_runs(
        &self,
        observer: &mut Observer,
    ) -> Result<Vec<(ProductionRecord, i64)>> {
        let objects = Objects {
            location: self.location().clone(),
        };
        let mut live = Vec::new();
        for (path, modified_ms) in objects.list_modified(layout::PRODUCTION_DIR).await? {
            let Some(bytes) = objects.get(&path).await? else {
                continue;
            };
            let Ok(found) = serde_json::from_slice::<ProductionRecord>(&bytes) else {
                // Not an announcement this build reads: it counts for
                // nothing, and goes once it stayed the same for a lease.
                let default_lease = super::RunBudget::default().lease_ms;
                if observer.expired(&path, bytes.len() as u64, default_lease) {
                    let _ = objects.delete(&path).await;
                }
                continue;
            };
            if observer.expired(&path, found.beat, found.lease_ms) {
                tracing::warn!(table = %found.table, date = %found.date, run = %found.run_id, "a production run's announcement expired (the run died?); removing it");
                let _ = objects.delete(&path).await;
                continue;
            }
            live.push((found, modified_ms));
        }
        Ok(live)
    }
}

impl ProductionRun {
    /// The run stopped waiting and is running now.
    pub async fn started(&self) -> Result<()> {
        beat(&self.objects, &self.path, &self.record, |r| {
            r.waiting = false
        })
        .await
    }

    /// The run is over: remove the announcement.
    pub async fn end(self) {
        let mut held = self.record.lock().await;
        held.1 = true;
        if let Err(e) = self.objects.delete(&self.path).await {
            tracing::warn!(error = %e, "could not remove a production run's announcement; it expires instead");
        }
    }
}

async fn beat(
    objects: &Objects,
    path: &str,
    record: &Mutex<(ProductionRecord, bool)>,
    change: impl FnOnce(&mut ProductionRecord),
) -> Result<()> {
    let mut held = record.lock().await;
    if held.1 {
        return Ok(());
    }
    change(&mut held.0);
    held.0.beat += 1;
    objects.put(path, encode(path, &held.0)?).await
}
