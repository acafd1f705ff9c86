//! Intent markers: a writer says "I am writing this date" while it works.
//!
//! A marker is a small JSON object at `_logbook/running/<date>/<run-id>.json`
//! holding the run id, when the run started and its latest heartbeat. It is
//! written when a partition write starts, refreshed while rows arrive, and
//! deleted when the write commits or aborts. A writer that dies leaves its
//! marker behind; once the heartbeat is older than the table's running
//! timeout, status shows the run as abandoned instead of running. Markers are
//! advisory: correctness never depends on them (the commit protocol does).

use chrono::NaiveDate;
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::layout;
use crate::table::TableInner;

/// What a running write says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMarker {
    pub date: NaiveDate,
    pub run_id: String,
    pub started_ms: i64,
    pub heartbeat_ms: i64,
    /// The staging directory the write fills (vacuum keeps it while live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

impl RunMarker {
    /// Has the heartbeat stopped for longer than `timeout_ms` at `now_ms`?
    pub fn abandoned(&self, now_ms: i64, timeout_ms: i64) -> bool {
        now_ms - self.heartbeat_ms > timeout_ms
    }
}

/// Write (or refresh) the marker; failures only warn: markers are advisory.
pub(crate) async fn beat(table: &TableInner, marker: &RunMarker) {
    let path = layout::running_marker(marker.date, &marker.run_id);
    if let Err(e) = table.put_json(&path, marker).await {
        tracing::warn!(table = %table.name, date = %marker.date, error = %e, "could not write the run's intent marker");
    }
}

/// Remove the marker of a finished write.
pub(crate) async fn clear(table: &TableInner, date: NaiveDate, run_id: &str) {
    let path = table.location.path(&layout::running_marker(date, run_id));
    if let Err(e) = table.location.store().delete(&path).await {
        if !matches!(e, object_store::Error::NotFound { .. }) {
            tracing::warn!(table = %table.name, %date, error = %e, "could not delete the run's intent marker");
        }
    }
}

/// Every marker of the table (one listing).
pub(crate) async fn list(table: &TableInner) -> Result<Vec<RunMarker>> {
    let store: &std::sync::Arc<dyn ObjectStore> = table.location.store();
    let prefix = table.location.path(layout::RUNNING_DIR);
    let objects: Vec<_> = store
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|e| Error::storage(layout::RUNNING_DIR, e))?;
    let mut markers = Vec::new();
    for o in objects {
        let rel = table.location.relative(&o.location);
        // None: deleted between the listing and the read (the run finished).
        if let Some(m) = table.get_json_opt::<RunMarker>(&rel).await? {
            markers.push(m);
        }
    }
    Ok(markers)
}
