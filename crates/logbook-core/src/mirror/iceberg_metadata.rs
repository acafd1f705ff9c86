//! The Iceberg mirror's table metadata (`vN.metadata.json`, spec v2): the
//! model, and how version `N` follows from `N - 1` and one logbook commit.
//!
//! Each version keeps the snapshots of the logbook versions the table still
//! retains (an expire moves `retained_from`, and the next version drops the
//! snapshots below it, so `vacuum` never deletes a file a live snapshot
//! names), every schema they use, and the last [`METADATA_LOG`] metadata
//! files. Everything is derived from logbook's log, so two writers catching
//! the mirror up produce the same document.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// How many earlier metadata files the metadata log names.
const METADATA_LOG: usize = 10;
/// Summary keys that say which logbook commit a snapshot mirrors.
pub(crate) const VERSION_KEY: &str = "logbook.version";
pub(crate) const COMMIT_KEY: &str = "logbook.commit-id";

/// The mirror version `metadata/` names by `file` (`v<N>.metadata.json`).
pub(crate) fn parse_version(file: &str) -> Option<u64> {
    file.strip_prefix('v')?
        .strip_suffix(".metadata.json")?
        .parse::<u64>()
        .ok()?
        .checked_sub(1)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct TableMetadata {
    pub format_version: u8,
    pub table_uuid: Uuid,
    pub location: String,
    pub last_sequence_number: i64,
    pub last_updated_ms: i64,
    pub last_column_id: i64,
    pub schemas: Vec<Value>,
    pub current_schema_id: i64,
    pub partition_specs: Vec<Value>,
    pub default_spec_id: i64,
    pub last_partition_id: i64,
    pub properties: BTreeMap<String, String>,
    pub current_snapshot_id: i64,
    pub refs: BTreeMap<String, Value>,
    pub snapshots: Vec<SnapshotJson>,
    pub snapshot_log: Vec<Value>,
    pub metadata_log: Vec<Value>,
    pub sort_orders: Vec<Value>,
    pub default_sort_order_id: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct SnapshotJson {
    pub snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_snapshot_id: Option<i64>,
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    pub manifest_list: String,
    pub summary: BTreeMap<String, String>,
    pub schema_id: i64,
}

impl SnapshotJson {
    /// The logbook version and commit id this snapshot mirrors, if logbook
    /// wrote it.
    pub fn logbook(&self) -> Option<(u64, Uuid)> {
        Some((
            self.summary.get(VERSION_KEY)?.parse().ok()?,
            self.summary.get(COMMIT_KEY)?.parse().ok()?,
        ))
    }
}

impl TableMetadata {
    /// The current snapshot.
    pub fn current(&self) -> Option<&SnapshotJson> {
        self.snapshots
            .iter()
            .find(|s| s.snapshot_id == self.current_snapshot_id)
    }
}

/// What one new metadata version holds besides its predecessor's history.
pub(crate) struct NextVersion<'a> {
    pub table_uuid: Uuid,
    pub location: &'a str,
    /// The schema (Iceberg JSON, with its `schema-id`) and its last column id.
    pub schema: Value,
    pub last_column_id: i64,
    pub partition_fields: Value,
    pub properties: BTreeMap<String, String>,
    pub snapshot: SnapshotJson,
    /// The oldest logbook version the table retains: older snapshots go.
    pub retained_from: u64,
    /// The previous metadata file's absolute path, for the metadata log.
    pub previous_file: Option<String>,
    /// The metadata log keeps no file older than this mirror version (the
    /// mirror of `retained_from`): vacuum deletes those.
    pub metadata_floor: u64,
}

/// Metadata version `N`: `prev` (version `N - 1`, `None` when the mirror
/// starts) plus `next`'s snapshot, without the snapshots logbook expired.
pub(crate) fn next_version(prev: Option<TableMetadata>, next: NextVersion<'_>) -> TableMetadata {
    let schema_id = next.snapshot.schema_id;
    let updated = prev.as_ref().map_or(0, |p| p.last_updated_ms);
    let (mut schemas, mut snapshots, mut snapshot_log, mut metadata_log, last_column_id) =
        match prev {
            Some(p) => (
                p.schemas,
                p.snapshots,
                p.snapshot_log,
                p.metadata_log,
                p.last_column_id,
            ),
            None => (vec![], vec![], vec![], vec![], 0),
        };
    if !schemas.iter().any(|s| s["schema-id"] == schema_id) {
        schemas.push(next.schema);
    }
    let live = |s: &SnapshotJson| s.logbook().is_none_or(|(v, _)| v >= next.retained_from);
    snapshots.retain(live);
    let ids: Vec<i64> = snapshots.iter().map(|s| s.snapshot_id).collect();
    snapshot_log.retain(|e| {
        e["snapshot-id"]
            .as_i64()
            .is_some_and(|id| ids.contains(&id))
    });
    // Schemas no live snapshot uses (and not the current one) go too.
    schemas.retain(|s| {
        s["schema-id"] == schema_id
            || snapshots
                .iter()
                .any(|snap| s["schema-id"] == snap.schema_id)
    });
    let snapshot = next.snapshot;
    snapshot_log.push(serde_json::json!({
        "timestamp-ms": snapshot.timestamp_ms,
        "snapshot-id": snapshot.snapshot_id,
    }));
    if let Some(file) = next.previous_file {
        metadata_log.push(serde_json::json!({
            "timestamp-ms": updated,
            "metadata-file": file,
        }));
    }
    metadata_log.retain(|e| {
        let file = e["metadata-file"].as_str().unwrap_or_default();
        let name = file.rsplit('/').next().unwrap_or_default();
        parse_version(name).is_none_or(|d| d >= next.metadata_floor)
    });
    let excess = metadata_log.len().saturating_sub(METADATA_LOG);
    metadata_log.drain(..excess);
    let mut refs = BTreeMap::new();
    refs.insert(
        "main".to_string(),
        serde_json::json!({"snapshot-id": snapshot.snapshot_id, "type": "branch"}),
    );
    TableMetadata {
        format_version: 2,
        table_uuid: next.table_uuid,
        location: next.location.to_string(),
        last_sequence_number: snapshot.sequence_number,
        last_updated_ms: snapshot.timestamp_ms,
        last_column_id: last_column_id.max(next.last_column_id),
        current_schema_id: schema_id,
        schemas,
        partition_specs: vec![serde_json::json!({
            "spec-id": 0,
            "fields": next.partition_fields,
        })],
        default_spec_id: 0,
        last_partition_id: if next
            .partition_fields
            .as_array()
            .is_some_and(|f| !f.is_empty())
        {
            super::iceberg_table::PARTITION_FIELD_ID as i64
        } else {
            // Iceberg's value for "no partition field yet".
            999
        },
        properties: next.properties,
        current_snapshot_id: snapshot.snapshot_id,
        refs,
        snapshots: {
            snapshots.push(snapshot);
            snapshots
        },
        snapshot_log,
        metadata_log,
        sort_orders: vec![serde_json::json!({"order-id": 0, "fields": []})],
        default_sort_order_id: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(version: u64, schema_id: i64) -> SnapshotJson {
        SnapshotJson {
            snapshot_id: version as i64 + 1,
            parent_snapshot_id: version.checked_sub(1).map(|v| v as i64 + 1),
            sequence_number: version as i64 + 1,
            timestamp_ms: 1000 + version as i64,
            manifest_list: format!("file:///t/metadata/snap-{version}.avro"),
            summary: [
                (VERSION_KEY.to_string(), version.to_string()),
                (
                    COMMIT_KEY.to_string(),
                    Uuid::from_u128(version as u128).to_string(),
                ),
            ]
            .into(),
            schema_id,
        }
    }

    fn next(version: u64, schema_id: i64, retained_from: u64) -> NextVersion<'static> {
        NextVersion {
            table_uuid: Uuid::nil(),
            location: "file:///t",
            schema: serde_json::json!({"type": "struct", "schema-id": schema_id, "fields": []}),
            last_column_id: 3,
            partition_fields: serde_json::json!([]),
            properties: BTreeMap::new(),
            snapshot: snap(version, schema_id),
            retained_from,
            previous_file: version
                .checked_sub(1)
                .map(|v| format!("file:///t/metadata/v{}.metadata.json", v + 1)),
            metadata_floor: retained_from,
        }
    }

    #[test]
    fn expired_snapshots_and_their_schemas_leave_and_the_metadata_log_is_bounded() {
        let mut md = next_version(None, next(0, 0, 0));
        for v in 1..20 {
            md = next_version(Some(md), next(v, if v < 10 { 0 } else { 1 }, 0));
        }
        assert_eq!(md.snapshots.len(), 20);
        assert_eq!(md.schemas.len(), 2);
        assert_eq!(md.metadata_log.len(), METADATA_LOG);
        assert_eq!(md.current().unwrap().logbook().unwrap().0, 19);
        // Expire everything before version 15: schema 0 is no longer used.
        let md = next_version(Some(md), next(20, 1, 15));
        let versions: Vec<u64> = md
            .snapshots
            .iter()
            .map(|s| s.logbook().unwrap().0)
            .collect();
        assert_eq!(versions, (15..=20).collect::<Vec<_>>());
        assert_eq!(md.snapshot_log.len(), 6);
        assert_eq!(md.schemas.len(), 1);
        // The metadata log names no file vacuum deletes (files of versions
        // before the retained ones): v16 (version 15) is the oldest left.
        let files: Vec<&str> = md
            .metadata_log
            .iter()
            .map(|e| e["metadata-file"].as_str().unwrap())
            .collect();
        assert_eq!(
            files.first(),
            Some(&"file:///t/metadata/v16.metadata.json"),
            "{files:?}"
        );
        assert_eq!((md.current_snapshot_id, md.last_sequence_number), (21, 21));
        let json = serde_json::to_value(&md).unwrap();
        for key in [
            "format-version",
            "table-uuid",
            "location",
            "last-sequence-number",
            "last-updated-ms",
            "last-column-id",
            "schemas",
            "current-schema-id",
            "partition-specs",
            "default-spec-id",
            "last-partition-id",
            "sort-orders",
            "default-sort-order-id",
        ] {
            assert!(json.get(key).is_some(), "metadata lacks {key}");
        }
    }
}
