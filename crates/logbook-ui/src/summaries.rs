//! The home page's counts: every table's dates per state, counted in the
//! background and served with the time they were counted.
//!
//! Counting a table is its whole `status`, which lists the table's files
//! (that is how a Corrupt date is found). On 200 tables × 3 years of
//! dates on local disk that is about three seconds of work (BENCHMARKS.md,
//! "Web UI"), too slow for every visit and too heavy to repeat for every
//! open tab. So:
//! - the last complete count is served with its time, and the page says it;
//! - a visit to a count older than [`FRESH_FOR`] starts one new count in
//!   the background (never two at once) and is served the older one;
//! - the first visit (or one after a failed count) waits for a count, and
//!   visits meanwhile wait for the same one;
//! - the server starts counting when it starts (`Summaries::warm`).
//!
//! - a visit to a count older than [`WAIT_AFTER`] (after an idle spell)
//!   waits for a new one rather than be shown one that old;
//! - a count (10 min), and each table in it (30 s), has a time limit: a table that does
//!   not answer is a row with an error, and a count that does not finish
//!   fails rather than block every later count;
//! - a background count that fails is said on the page, above the last
//!   count, until one succeeds.
//!
//! A table's own page is never served from here: its calendar, partition
//! and stage pages read the table afresh on every request.
//!
//! Alternatives: counting on every visit (the first version; 6 s per
//! visit at this size), or keeping counts current by watching commits
//! (the log says nothing about a file deleted behind logbook's back, so a
//! Corrupt date would still need the listing).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use logbook_core::clock::{Clock, SystemClock};
use logbook_core::lifecycle::{self, PartitionState};
use logbook_core::{TableKind, Warehouse};
use serde::Serialize;

use crate::UiError;

/// How long a count is served without starting a new one.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// How old a count may be and still be served while a new one is made.
pub const WAIT_AFTER: Duration = Duration::from_secs(60);

/// The longest a whole count may take (tables that do not answer become
/// rows with an error first).
const COUNT_LIMIT: Duration = Duration::from_secs(600);

/// The longest one table's summary may take.
const TABLE_LIMIT: Duration = Duration::from_secs(30);

/// Tables counted at once.
const TABLES_AT_ONCE: usize = 16;

/// One row of the home page.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    pub name: String,
    /// `partitioned` or `dimension`.
    pub kind: &'static str,
    pub version: u64,
    pub committed_ms: Option<i64>,
    pub partitions: usize,
    /// Dates per state from the schedule start to yesterday (partitioned
    /// tables only).
    pub states: BTreeMap<String, usize>,
    /// Why the table could not be summarised (the other rows still are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every table's summary, as counted at one time (`/api/tables`).
#[derive(Debug, Clone, Serialize)]
pub struct Count {
    /// When the count started (milliseconds since the epoch); each table
    /// is read after it, so a commit made meanwhile may or may not be in.
    pub counted_ms: i64,
    pub tables: Vec<TableSummary>,
    /// Why the latest recount failed, if it did (this count is older).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recount_failed: Option<String>,
    #[serde(skip)]
    started: Instant,
    #[serde(skip)]
    finished: Instant,
}

impl Count {
    /// Time since the count started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The last count and the one in progress (see the module doc).
#[derive(Debug)]
pub(crate) struct Summaries {
    warehouse: Warehouse,
    /// [`FRESH_FOR`] and [`WAIT_AFTER`], shorter in tests.
    fresh_for: Duration,
    wait_after: Duration,
    last: RwLock<Option<Arc<Count>>>,
    /// Held by whoever is counting.
    counting: Arc<tokio::sync::Mutex<()>>,
}

impl Summaries {
    pub(crate) fn new(warehouse: Warehouse) -> Arc<Self> {
        Self::with_ages(warehouse, FRESH_FOR, WAIT_AFTER)
    }

    fn with_ages(warehouse: Warehouse, fresh_for: Duration, wait_after: Duration) -> Arc<Self> {
        Arc::new(Self {
            warehouse,
            fresh_for,
            wait_after,
            last: RwLock::new(None),
            counting: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn last(&self) -> Option<Arc<Count>> {
        self.last.read().expect("summaries lock").clone()
    }

    /// Start counting in the background unless a count is in progress.
    pub(crate) fn warm(self: &Arc<Self>) {
        let Ok(guard) = self.counting.clone().try_lock_owned() else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let _guard = guard;
            if let Err(e) = this.count_now().await {
                tracing::warn!("counting the warehouse's tables failed: {e}");
                let mut last = this.last.write().expect("summaries lock");
                if let Some(old) = last.as_ref() {
                    let mut marked = (**old).clone();
                    marked.recount_failed = Some(e.to_string());
                    *last = Some(Arc::new(marked));
                }
            }
        });
    }

    /// The last count, starting a new one in the background if it is older
    /// than [`FRESH_FOR`]; without one, or with one older than
    /// [`WAIT_AFTER`], wait for a count.
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Arc<Count>, UiError> {
        if let Some(last) = self.last() {
            if last.age() <= self.fresh_for {
                return Ok(last);
            }
            if last.age() <= self.wait_after {
                self.warm();
                return Ok(last);
            }
        }
        let waiting = Instant::now();
        let _guard = self.counting.lock().await;
        // Counted while this request waited: served, however long that
        // count took (visitors queued behind a slow count would otherwise
        // each count again, one after another).
        if let Some(last) = self.last() {
            if last.finished >= waiting || last.age() <= self.fresh_for {
                return Ok(last);
            }
        }
        self.count_now().await
    }

    async fn count_now(&self) -> Result<Arc<Count>, UiError> {
        let count = tokio::time::timeout(COUNT_LIMIT, count(&self.warehouse))
            .await
            .map_err(|_| {
                UiError::Failed(format!(
                    "counting the tables took more than {} s",
                    COUNT_LIMIT.as_secs()
                ))
            })??;
        let count = Arc::new(count);
        *self.last.write().expect("summaries lock") = Some(count.clone());
        Ok(count)
    }
}

/// Every table of the warehouse, [`TABLES_AT_ONCE`] at a time.
async fn count(warehouse: &Warehouse) -> Result<Count, UiError> {
    let started = Instant::now();
    let counted_ms = SystemClock.now_millis();
    let names = warehouse.list_tables().await?;
    let tables = futures::stream::iter(names)
        .map(|name| async move {
            let summary = tokio::time::timeout(TABLE_LIMIT, summary(warehouse, name.clone()))
                .await
                .unwrap_or_else(|_| {
                    Err(UiError::Failed(format!(
                        "took more than {} s to read",
                        TABLE_LIMIT.as_secs()
                    )))
                });
            summary.unwrap_or_else(|e| TableSummary {
                name,
                kind: "unknown",
                version: 0,
                committed_ms: None,
                partitions: 0,
                states: BTreeMap::new(),
                error: Some(e.to_string()),
            })
        })
        .buffered(TABLES_AT_ONCE)
        .collect()
        .await;
    Ok(Count {
        counted_ms,
        tables,
        recount_failed: None,
        started,
        finished: Instant::now(),
    })
}

async fn summary(warehouse: &Warehouse, name: String) -> Result<TableSummary, UiError> {
    let table = warehouse.table(&name).await?;
    let snap = table.latest().await?;
    let committed_ms = table
        .history_from(snap.version())
        .await?
        .first()
        .map(|e| e.timestamp_ms);
    let partitioned = matches!(snap.schema().kind, TableKind::Partitioned { .. });
    let mut states = BTreeMap::new();
    let partitions = if partitioned {
        // To yesterday, the last day whose run is due, as the CLI's `status`.
        let to = logbook_core::dates::yesterday(SystemClock.now_millis());
        let status = lifecycle::status(warehouse, &name, None, to).await?;
        for s in PartitionState::ALL {
            states.insert(s.to_string(), status.count(s));
        }
        snap.partitions().await?.len()
    } else {
        0
    };
    Ok(TableSummary {
        kind: if partitioned {
            "partitioned"
        } else {
            "dimension"
        },
        version: snap.version(),
        committed_ms,
        partitions,
        states,
        name,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use logbook_core::TableSchema;

    async fn create(wh: &Warehouse, name: &str) {
        let schema = TableSchema::parse_spec(name, "date:date,n:int64", "date").unwrap();
        wh.create_table(name, schema).await.unwrap();
    }

    fn names(count: &Count) -> Vec<&str> {
        count.tables.iter().map(|t| t.name.as_str()).collect()
    }

    /// A fresh count is served as it is; an old one is served while a new
    /// one is made in the background, which the next visits see.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_count_is_served_while_a_new_one_is_made() {
        let wh = Warehouse::open("memory://").unwrap();
        create(&wh, "a").await;
        let hour = Duration::from_secs(3600);
        let fresh = Summaries::with_ages(wh.clone(), hour, hour);
        let first = fresh.get().await.unwrap();
        assert_eq!(names(&first), ["a"]);
        create(&wh, "b").await;
        let again = fresh.get().await.unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "a fresh count is not made again"
        );

        let old = Summaries::with_ages(wh.clone(), Duration::ZERO, hour);
        let first = old.get().await.unwrap();
        create(&wh, "c").await;
        let served = old.get().await.unwrap();
        assert!(
            Arc::ptr_eq(&first, &served),
            "the old count is served at once"
        );
        let mut seen = served;
        for _ in 0..200 {
            if names(&seen).contains(&"c") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            seen = old.get().await.unwrap();
        }
        assert_eq!(names(&seen), ["a", "b", "c"]);
        assert!(seen.counted_ms >= first.counted_ms);
    }

    /// A count older than the wait limit is not served: the visit waits
    /// for a new one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_count_too_old_is_made_again_before_it_is_served() {
        let wh = Warehouse::open("memory://").unwrap();
        create(&wh, "a").await;
        let summaries = Summaries::with_ages(wh.clone(), Duration::ZERO, Duration::ZERO);
        let first = summaries.get().await.unwrap();
        create(&wh, "b").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let next = summaries.get().await.unwrap();
        assert_eq!(names(&next), ["a", "b"]);
        assert!(!Arc::ptr_eq(&first, &next));
    }
}
