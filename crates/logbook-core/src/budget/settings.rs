//! The budget itself: a small log of versions under the warehouse, so that
//! two operators changing it at once both land, one after the other, and
//! every change stays on record.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::layout;
use crate::log::{Created, Log};
use crate::warehouse::Warehouse;

/// How many runs the warehouse lets live at once (`logbook warehouse set`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunBudget {
    /// At most this many backfill runs live at once, on every process and
    /// machine (`None`: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_backfill_runs: Option<u32>,
    /// A backfill run starts only while fewer than this many runs of any
    /// class are live (`None`: no limit). Production runs count, and never
    /// wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u32>,
    /// At most this many heavy steps of backfill runs at once (`None`: no
    /// limit): writing a run's output, a compaction (see `HeavyStep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_heavy_steps: Option<u32>,
    /// While a production run is live or waiting, no backfill run starts.
    pub production_first: bool,
    /// How long a slot or a production announcement lives without being
    /// renewed, timed by whoever observes it (milliseconds).
    pub lease_ms: u64,
}

impl Default for RunBudget {
    fn default() -> Self {
        Self {
            max_backfill_runs: None,
            max_runs: None,
            max_heavy_steps: None,
            production_first: true,
            lease_ms: 30_000,
        }
    }
}

/// The shortest lease accepted: a holder renews every third of it, and a
/// renewal on a remote store (a PUT and a LIST) can take a few hundred ms.
const MIN_LEASE_MS: u64 = 1_000;

impl RunBudget {
    /// Refuse a limit that would stop every backfill forever, or a lease
    /// too short to renew.
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("max-backfill-runs", self.max_backfill_runs),
            ("max-runs", self.max_runs),
            ("max-heavy-steps", self.max_heavy_steps),
        ] {
            if value == Some(0) {
                return Err(invalid(format!(
                    "{name} must be at least 1 (0 would stop every backfill forever; to remove the limit, unset it)"
                )));
            }
        }
        if self.lease_ms < MIN_LEASE_MS {
            return Err(invalid(format!(
                "lease-ms must be at least {MIN_LEASE_MS} (got {})",
                self.lease_ms
            )));
        }
        Ok(())
    }

    /// Does this budget bound backfill runs at all?
    pub fn limits_backfills(&self) -> bool {
        self.max_backfill_runs.is_some() || self.max_runs.is_some()
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidInput {
        table: "(warehouse)".into(),
        reason,
    }
}

impl Warehouse {
    fn budget_log(&self) -> Log {
        Log::in_dir(
            self.location().clone(),
            layout::BUDGET_DIR,
            layout::BUDGET_HINT,
        )
    }

    /// The warehouse's run budget (the default, no limits, until one is set).
    pub async fn run_budget(&self) -> Result<RunBudget> {
        let log = self.budget_log();
        match log.latest().await? {
            None => Ok(RunBudget::default()),
            Some(v) => Ok(read(&log, v).await?.unwrap_or_default()),
        }
    }

    /// Change the run budget with `change` applied to the latest version;
    /// an invalid result is refused and nothing is written. Two changes at
    /// once both land, one after the other.
    pub async fn set_run_budget(&self, change: impl Fn(&mut RunBudget)) -> Result<RunBudget> {
        let log = self.budget_log();
        loop {
            let latest = log.latest().await?;
            let mut budget = match latest {
                None => RunBudget::default(),
                Some(v) => read(&log, v).await?.unwrap_or_default(),
            };
            change(&mut budget);
            budget.validate()?;
            let next = latest.map_or(0, |v| v + 1);
            let bytes = serde_json::to_vec(&budget).map_err(|e| invalid(e.to_string()))?;
            let ours = |found: &[u8]| Ok(found == bytes.as_slice());
            match log.create(next, bytes.clone().into(), ours).await? {
                Created::Ours => {
                    let _ = log.write_hint(next).await;
                    return Ok(budget);
                }
                // Another change landed first: apply ours to it.
                Created::Theirs(_) => continue,
                Created::Absent(e) => return Err(e),
            }
        }
    }
}

async fn read(log: &Log, version: u64) -> Result<Option<RunBudget>> {
    let Some(bytes) = log.read(version).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::Corrupt {
            table: "(warehouse)".into(),
            path: format!("{}/{version:020}.json", layout::BUDGET_DIR),
            reason: e.to_string(),
        })
}
