//! The Iceberg mirror, checked against logbook's own snapshots by reading
//! every metadata version back (JSON, then the Avro manifest list and
//! manifests it names): each `vN.metadata.json` shows exactly the files of
//! the logbook version its current snapshot names, versions have no gaps,
//! and the mirror catches up after a crash or stops at a foreign file
//! without a commit ever failing for it. Independent readers (pyiceberg,
//! DuckDB, polars) are in `tests/iceberg/`.

use std::collections::BTreeSet;

use apache_avro::types::Value as Avro;
use logbook::maintenance::{expire, vacuum, Keep};
use logbook::{MirrorFormat, RunInfo, StorageLocation, Table, TableProperties, TableSchema};
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::Value;

use std::sync::Arc;

use object_store::memory::InMemory;

use crate::common::{date, object_bytes, objects, options, replace, sweep, SPEC};
use crate::fault_store::FaultStore;

fn iceberg_mirror() -> TableProperties {
    TableProperties::default().with_mirrors(&[MirrorFormat::Iceberg])
}

async fn mirrored_table(name: &str, properties: TableProperties) -> Table {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child(name)
        .unwrap();
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    let opts = options().with_max_rows_per_file(4);
    Table::create_with_properties(loc, name, schema, properties, opts)
        .await
        .unwrap()
}

/// One metadata version as read back.
#[derive(Debug)]
pub(crate) struct IcebergVersion {
    pub metadata: Value,
    /// The logbook version its current snapshot names.
    pub logbook: Option<u64>,
    /// The files its current snapshot's manifests list, relative to the table.
    pub files: BTreeSet<String>,
    /// Its manifests, relative to the table.
    pub manifests: Vec<String>,
}

fn relative(t: &Table, uri: &str) -> String {
    let root = format!("{}/", t.location().uri().trim_end_matches('/'));
    uri.strip_prefix(&root)
        .unwrap_or_else(|| panic!("{uri} is not under {root}"))
        .to_string()
}

/// The string values of `field` in every record of the Avro file `bytes`
/// (nested records included).
fn strings(bytes: &[u8], field: &str) -> Vec<String> {
    fn walk(v: &Avro, field: &str, out: &mut Vec<String>) {
        match v {
            Avro::Record(fields) => {
                for (name, value) in fields {
                    match value {
                        Avro::String(s) if name == field => out.push(s.clone()),
                        other => walk(other, field, out),
                    }
                }
            }
            Avro::Union(_, inner) => walk(inner, field, out),
            Avro::Array(items) => items.iter().for_each(|i| walk(i, field, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for value in apache_avro::Reader::new(bytes).unwrap() {
        walk(&value.unwrap(), field, &mut out);
    }
    out
}

/// Read metadata version `n` (file `v<n + 1>.metadata.json`) and what its
/// current snapshot lists.
pub(crate) async fn read_version(t: &Table, n: u64) -> IcebergVersion {
    let name = format!("metadata/v{}.metadata.json", n + 1);
    let metadata: Value = serde_json::from_slice(&object_bytes(t, &name).await).unwrap();
    let current = metadata["current-snapshot-id"].clone();
    let snapshot = metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["snapshot-id"] == current)
        .unwrap_or_else(|| panic!("{name}: no current snapshot"))
        .clone();
    let logbook = snapshot["summary"]["logbook.version"]
        .as_str()
        .and_then(|v| v.parse().ok());
    let list = relative(t, snapshot["manifest-list"].as_str().unwrap());
    let manifests: Vec<String> = strings(&object_bytes(t, &list).await, "manifest_path")
        .iter()
        .map(|p| relative(t, p))
        .collect();
    let mut files = BTreeSet::new();
    for m in &manifests {
        for f in strings(&object_bytes(t, m).await, "file_path") {
            assert!(files.insert(relative(t, &f)), "{name}: {f} listed twice");
        }
    }
    IcebergVersion {
        metadata,
        logbook,
        files,
        manifests,
    }
}

/// Every metadata version from the newest back to the first gap, but those
/// of expired logbook versions. Versions below a gap, and expired ones,
/// can only be what a vacuum interrupted half-way left (its bulk delete has
/// no order, so some of their manifest lists may be gone); the next vacuum
/// deletes them, and no reader opens them (readers open the newest).
pub(crate) async fn replay(t: &Table) -> Vec<IcebergVersion> {
    let retained = retained_from(t).await;
    let mut numbers: Vec<u64> = objects(t, "metadata")
        .await
        .iter()
        .filter_map(|n| n.strip_prefix("metadata/v")?.strip_suffix(".metadata.json"))
        .map(|n| n.parse::<u64>().unwrap() - 1)
        .collect();
    numbers.sort();
    let gap = numbers.windows(2).rposition(|w| w[1] != w[0] + 1);
    let tail = gap.map_or(&numbers[..], |i| &numbers[i + 1..]);
    let mut out = Vec::new();
    for &n in tail {
        let name = format!("metadata/v{}.metadata.json", n + 1);
        let metadata: Value = serde_json::from_slice(&object_bytes(t, &name).await).unwrap();
        let current = metadata["current-snapshot-id"].as_u64().unwrap();
        // Snapshot ids are logbook versions plus one.
        if current > retained {
            out.push(read_version(t, n).await);
        }
    }
    out
}

async fn live_files(t: &Table, version: u64) -> BTreeSet<String> {
    let snap = t.at_version(version).await.unwrap();
    let mut files: BTreeSet<String> = snap.dimension_files().into_iter().map(|f| f.path).collect();
    for p in snap.partitions().await.unwrap() {
        files.extend(p.files.into_iter().map(|f| f.path));
    }
    files
}

/// Every metadata version whose logbook version is still retained shows
/// exactly its files; the latest holds the latest logbook version; the
/// hint names it; the mirror is not behind.
pub(crate) async fn assert_iceberg_mirrors(t: &Table) {
    let versions = replay(t).await;
    let latest = t.latest_version().await.unwrap();
    assert_eq!(versions.last().and_then(|v| v.logbook), Some(latest));
    for v in &versions {
        let lv = v.logbook.expect("every version names its logbook version");
        assert_eq!(v.files, live_files(t, lv).await, "logbook version {lv}");
    }
    let hint = object_bytes(t, "metadata/version-hint.text").await;
    assert_eq!(
        hint,
        (versions.len() as u64 + first(&versions))
            .to_string()
            .as_bytes()
    );
    let status = iceberg_status(t).await;
    assert_eq!((status.behind, status.mirrored_version), (0, Some(latest)));
}

/// The oldest version time travel still reads.
async fn retained_from(t: &Table) -> u64 {
    let mut v = 0;
    while t.at_version(v).await.is_err() {
        v += 1;
    }
    v
}

fn first(versions: &[IcebergVersion]) -> u64 {
    // The hint holds the file number of the latest: first version + count.
    versions.first().map_or(0, |v| {
        v.metadata["last-sequence-number"].as_u64().unwrap() - 1
    })
}

pub(crate) async fn iceberg_status(t: &Table) -> logbook::mirror::MirrorStatus {
    let statuses = t.mirror_status().await.unwrap();
    let found = statuses.iter().find(|s| s.format == MirrorFormat::Iceberg);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no Iceberg status: {statuses:?}"))
}

async fn delete(t: &Table, relative: &str) {
    let loc = t.location();
    loc.store().delete(&loc.path(relative)).await.unwrap();
}

#[tokio::test]
async fn every_iceberg_version_holds_exactly_the_files_of_its_logbook_version() {
    let both =
        TableProperties::default().with_mirrors(&[MirrorFormat::Delta, MirrorFormat::Iceberg]);
    let t = mirrored_table("i_ops", both).await;
    for (i, d) in ["2026-03-15", "2026-03-16", "2026-04-01"]
        .iter()
        .enumerate()
    {
        replace(&t, date(d), 0..10, "a", &format!("run-{i}")).await;
    }
    // A re-run of one date rewrites only March's manifest: April's is reused.
    let before = replay(&t).await.pop().unwrap();
    replace(&t, date("2026-03-15"), 0..3, "b", "rerun").await;
    let after = replay(&t).await.pop().unwrap();
    let new: Vec<&String> = after
        .manifests
        .iter()
        .filter(|m| !before.manifests.contains(m))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(new[0].contains("2026-03"), "{new:?}");

    crate::mirror::publish_compact_and_rename(&t).await;
    assert_iceberg_mirrors(&t).await;
    crate::mirror::assert_mirrors(&t, 0).await;

    let versions = replay(&t).await;
    assert_eq!(versions.len() as u64, t.latest_version().await.unwrap() + 1);
    let last = &versions.last().unwrap().metadata;
    // The rename keeps the field id; files are read by their name through
    // the name mapping; the date is an identity partition.
    let fields = &last["schemas"].as_array().unwrap().last().unwrap()["fields"];
    let label = fields
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "label")
        .unwrap();
    let mapping: Value = serde_json::from_str(
        last["properties"]["schema.name-mapping.default"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let mapped = mapping
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["field-id"] == label["id"]);
    assert_eq!(mapped.unwrap()["names"], serde_json::json!(["name"]));
    assert_eq!(
        last["partition-specs"][0]["fields"][0]["transform"],
        "identity"
    );
    assert_eq!(last["format-version"], 2);
    // One snapshot per logbook version, each naming its commit and run.
    let snapshots = last["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), versions.len());
    let history = t.history().await.unwrap();
    for (s, e) in snapshots.iter().zip(&history) {
        assert_eq!(s["summary"]["logbook.commit-id"], e.commit_id.to_string());
        assert_eq!(s["snapshot-id"], e.version as i64 + 1);
        let run = e.run.as_ref().map(|r| r.run_id.as_str());
        assert_eq!(s["summary"]["logbook.run-id"].as_str(), run);
    }
    let compacted = snapshots
        .iter()
        .find(|s| s["summary"]["logbook.operation"] == "compact")
        .unwrap();
    assert_eq!(compacted["summary"]["operation"], "replace");
}

#[tokio::test]
async fn a_lost_iceberg_write_is_caught_up_by_the_next_commit_and_by_sync() {
    let t = mirrored_table("i_crash", iceberg_mirror()).await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let v = replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    // The process died after logbook's commit, before its metadata file.
    delete(&t, &format!("metadata/v{}.metadata.json", v + 1)).await;
    let status = iceberg_status(&t).await;
    assert_eq!((status.behind, status.mirrored_version), (1, Some(v - 1)));
    replace(&t, date("2026-03-17"), 0..5, "a", "r3").await;
    assert_iceberg_mirrors(&t).await;

    // Two versions lost; two catch-ups race: both succeed, one mirror.
    let v = replace(&t, date("2026-03-18"), 0..5, "a", "r4").await;
    delete(&t, &format!("metadata/v{}.metadata.json", v + 1)).await;
    delete(&t, &format!("metadata/v{}.metadata.json", v)).await;
    let other = Table::open(t.location().clone(), "i_crash", options())
        .await
        .unwrap();
    let (a, b) = tokio::join!(t.sync_mirror(), other.sync_mirror());
    assert_eq!((a.unwrap()[0].behind, b.unwrap()[0].behind), (0, 0));
    assert_iceberg_mirrors(&t).await;
}

#[tokio::test]
async fn a_foreign_metadata_file_stops_the_iceberg_mirror_but_never_fails_a_commit() {
    let t = mirrored_table("i_foreign", iceberg_mirror()).await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    // Another engine committed to the Iceberg table.
    let loc = t.location();
    let foreign = read_version(&t, 1).await.metadata;
    let mut foreign = foreign.clone();
    foreign["snapshots"][1]["summary"] = serde_json::json!({"operation": "append"});
    loc.store()
        .put(
            &loc.path("metadata/v3.metadata.json"),
            PutPayload::from(foreign.to_string()),
        )
        .await
        .unwrap();
    let v = replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    assert_eq!(v, 2, "the logbook commit landed");
    let err = t.sync_mirror().await.unwrap_err();
    assert_eq!(err.kind(), logbook::ErrorKind::Corrupt);
    assert!(
        err.to_string().contains("metadata/v3.metadata.json"),
        "{err}"
    );
    assert!(err.to_string().contains("iceberg mirror"), "{err}");
    replace(&t, date("2026-03-17"), 0..5, "a", "r3").await;
    assert!(
        !objects(&t, "metadata")
            .await
            .contains(&"metadata/v4.metadata.json".to_string()),
        "version 3 would build on another engine's metadata"
    );
    // Off and on again: a new history from the table's current state.
    t.set_mirror(&[]).await.unwrap();
    t.set_mirror(&[MirrorFormat::Iceberg]).await.unwrap();
    let last = replay(&t).await.pop().unwrap();
    let latest = t.latest_version().await.unwrap();
    assert_eq!(last.logbook, Some(latest));
    assert_eq!(last.files, live_files(&t, latest).await);
    assert_eq!(last.metadata["snapshots"].as_array().unwrap().len(), 1);
    assert_eq!(iceberg_status(&t).await.behind, 0);
}

#[tokio::test]
async fn expire_drops_snapshots_and_vacuum_keeps_every_file_a_live_snapshot_names() {
    let t = mirrored_table("i_expire", iceberg_mirror()).await;
    for i in 0..12u32 {
        let d = date("2026-01-30") + chrono::Days::new(u64::from(i % 4));
        replace(&t, d, 0..3, &format!("t{i}"), &format!("r{i}")).await;
    }
    expire(&t, Keep::Last(3)).await.unwrap();
    let report = vacuum(&t, sweep()).await.unwrap();
    assert!(
        report.deleted.iter().any(|p| p.starts_with("metadata/v")),
        "{:?}",
        report.deleted
    );
    assert!(
        report.deleted.iter().any(|p| p.starts_with("metadata/lb-")),
        "{:?}",
        report.deleted
    );
    let retained = retained_from(&t).await;
    assert!(retained > 0, "expire kept everything");
    let latest_n = iceberg_status(&t).await.mirror_version.unwrap();
    let last = read_version(&t, latest_n).await;
    let kept: Vec<u64> = last.metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["summary"]["logbook.version"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(kept, (retained..=last.logbook.unwrap()).collect::<Vec<_>>());
    // Every object a live snapshot names still exists.
    let present: BTreeSet<String> = objects(&t, "").await.into_iter().collect();
    for s in last.metadata["snapshots"].as_array().unwrap() {
        let list = relative(&t, s["manifest-list"].as_str().unwrap());
        assert!(present.contains(&list), "{list} is gone");
        for m in strings(&object_bytes(&t, &list).await, "manifest_path") {
            let m = relative(&t, &m);
            assert!(present.contains(&m), "{m} is gone");
            for f in strings(&object_bytes(&t, &m).await, "file_path") {
                let f = relative(&t, &f);
                assert!(
                    present.contains(&f),
                    "{f} is gone, named by snapshot {}",
                    s["snapshot-id"]
                );
            }
        }
    }
    // No manifest list of an expired snapshot is left.
    let lists: Vec<String> = last.metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| relative(&t, s["manifest-list"].as_str().unwrap()))
        .collect();
    for o in objects(&t, "metadata").await {
        if o.contains("/snap-") {
            assert!(
                lists.contains(&o),
                "{o}: a manifest list of an expired snapshot is left"
            );
        }
    }
    assert_iceberg_mirrors(&t).await;
}

#[tokio::test]
async fn a_mirror_turned_on_later_and_off_and_on_again_starts_a_new_history() {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child("i_toggle")
        .unwrap();
    let schema = TableSchema::parse_spec("i_toggle", SPEC, "date").unwrap();
    let t = Table::create(loc, "i_toggle", schema, options())
        .await
        .unwrap();
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let on = t.set_mirror(&[MirrorFormat::Iceberg]).await.unwrap();
    replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    assert_iceberg_mirrors(&t).await;
    t.set_mirror(&[]).await.unwrap();
    replace(&t, date("2026-03-15"), 0..7, "b", "r3").await;
    let status = iceberg_status(&t).await;
    assert!(
        !status.enabled && status.mirrored_version == Some(on.version + 1),
        "{status:?}"
    );
    let again = t.set_mirror(&[MirrorFormat::Iceberg]).await.unwrap();
    assert!(
        t.set_mirror(&[MirrorFormat::Iceberg])
            .await
            .unwrap()
            .already_committed
    );
    replace(&t, date("2026-03-18"), 0..5, "a", "r5").await;
    let versions = replay(&t).await;
    let held: Vec<u64> = versions.iter().filter_map(|v| v.logbook).collect();
    assert_eq!(
        held,
        [on.version, on.version + 1, again.version, again.version + 1]
    );
    for v in &versions {
        assert_eq!(v.files, live_files(&t, v.logbook.unwrap()).await);
    }
    // The new history starts at the version that turned the mirror on again.
    let last = &versions.last().unwrap().metadata;
    assert_eq!(last["snapshots"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_dimension_is_mirrored_unpartitioned_with_its_files() {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child("i_dim")
        .unwrap();
    let schema =
        TableSchema::parse_dimension_spec("i_dim", "customer:string,region:string", &["customer"])
            .unwrap();
    let t = Table::create_with_properties(loc, "i_dim", schema, iceberg_mirror(), options())
        .await
        .unwrap();
    use crate::dimension::states;
    t.apply_changes(
        date("2026-03-01"),
        &[states(&[("k1", "A"), ("k2", "A")])],
        RunInfo::new("d1"),
    )
    .await
    .unwrap();
    t.apply_changes(
        date("2026-03-05"),
        &[states(&[("k1", "B")])],
        RunInfo::new("d2"),
    )
    .await
    .unwrap();
    assert_iceberg_mirrors(&t).await;
    let last = replay(&t).await.pop().unwrap();
    assert_eq!(
        last.metadata["partition-specs"][0]["fields"],
        serde_json::json!([])
    );
    assert!(!last.files.is_empty());
}

#[tokio::test]
async fn vacuum_keeps_the_newest_100_metadata_files_whatever_logbook_retains() {
    let t = mirrored_table("i_keep", iceberg_mirror()).await;
    for i in 0..110u32 {
        let d = date("2026-01-01") + chrono::Days::new(u64::from(i % 3));
        replace(&t, d, 0..2, "a", &format!("r{i}")).await;
    }
    vacuum(&t, sweep()).await.unwrap();
    let files: Vec<String> = objects(&t, "metadata")
        .await
        .into_iter()
        .filter(|o| o.ends_with(".metadata.json"))
        .collect();
    // 110 replaces + create: 111 versions when vacuum looked, 100 kept;
    // then vacuum's own commit adds one.
    assert_eq!(files.len(), 101, "{files:?}");
    let has = |n: u32| files.contains(&format!("metadata/v{n}.metadata.json"));
    assert!(has(12) && !has(11) && has(112), "{files:?}");
    // Time travel to the first version still goes through the newest file.
    let last = replay(&t).await.pop().unwrap();
    assert_eq!(last.metadata["snapshots"].as_array().unwrap().len(), 112);
    assert_iceberg_mirrors(&t).await;
}

#[tokio::test]
async fn an_iceberg_mirror_in_the_delta_field_is_refused_and_nothing_is_written() {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child("i_bad")
        .unwrap();
    let schema = TableSchema::parse_spec("i_bad", SPEC, "date").unwrap();
    let props = TableProperties {
        mirror: Some(logbook::Mirror::from_creation(MirrorFormat::Iceberg)),
        ..Default::default()
    };
    let err = Table::create_with_properties(loc.clone(), "i_bad", schema, props, options())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), logbook::ErrorKind::InvalidInput);
    let msg = err.to_string();
    assert!(msg.contains("i_bad") && msg.contains("iceberg"), "{msg}");
    let listed = loc.store().list_with_delimiter(None).await.unwrap();
    assert!(
        listed.objects.is_empty() && listed.common_prefixes.is_empty(),
        "{listed:?}"
    );
}

#[tokio::test]
async fn a_copied_table_continues_its_iceberg_mirror_with_a_new_history() {
    // Iceberg names files by absolute URI: a copy's metadata names the
    // original's files. Its next commit starts a history of its own.
    let t = mirrored_table("i_orig", iceberg_mirror()).await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let copy = copy_table(&t, "i_copy").await;
    // Before its first commit the copy's metadata shows the original's
    // files: none of the copy's versions is mirrored, and `logbook mirror`
    // says so rather than "in sync".
    let status = iceberg_status(&copy).await;
    assert_eq!((status.mirrored_version, status.behind), (None, 2));
    assert_eq!(copy.sync_mirror().await.unwrap()[0].mirrored_version, None);
    // A date of another month: the March manifest is rebuilt for the copy,
    // not taken from the original's copied file of the same name.
    replace(&copy, date("2026-04-16"), 0..5, "a", "r2").await;
    let status = iceberg_status(&copy).await;
    assert_eq!((status.behind, status.mirror_version), (0, Some(2)));
    let last = read_version(&copy, 2).await;
    assert_eq!(last.logbook, Some(2));
    assert_eq!(last.files, live_files(&copy, 2).await);
    assert_eq!(last.metadata["location"], "memory:///i_copy");
    assert_eq!(last.metadata["snapshots"].as_array().unwrap().len(), 1);
    assert_eq!(log_snapshot_ids(&copy).await, held_snapshot_ids(&last));
}

/// Every object of `t` copied to `memory:///<to>` (as `cp -r` or `aws s3
/// sync` would), opened there.
async fn copy_table(t: &Table, to: &str) -> Table {
    let store = t.location().store().clone();
    let copy_loc = StorageLocation::from_store(store.clone(), to, &format!("memory:///{to}"));
    for rel in objects(t, "").await {
        let bytes = object_bytes(t, &rel).await;
        store
            .put(&copy_loc.path(&rel), PutPayload::from(bytes))
            .await
            .unwrap();
    }
    Table::open(copy_loc, t.name(), options()).await.unwrap()
}

/// The snapshot ids `logbook log` shows.
async fn log_snapshot_ids(t: &Table) -> BTreeSet<i64> {
    let lines = logbook::answers::log(t).await.unwrap();
    lines.iter().filter_map(|l| l.iceberg_snapshot_id).collect()
}

/// The snapshot ids a metadata version holds.
fn held_snapshot_ids(v: &IcebergVersion) -> BTreeSet<i64> {
    let snapshots = v.metadata["snapshots"].as_array().unwrap();
    snapshots
        .iter()
        .map(|s| s["snapshot-id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_table_copied_while_its_iceberg_mirror_was_behind_mirrors_again_from_its_next_commit() {
    let t = mirrored_table("i_behind", iceberg_mirror()).await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let v = replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    // The process died after logbook's commit, before its metadata file
    // (the hint still names the version before).
    delete(&t, &format!("metadata/v{}.metadata.json", v + 1)).await;
    let loc = t.location();
    let hint = loc.path("metadata/version-hint.text");
    let previous = PutPayload::from(v.to_string().into_bytes());
    loc.store().put(&hint, previous).await.unwrap();
    let copy = copy_table(&t, "i_behind_copy").await;
    let w = replace(&copy, date("2026-04-16"), 0..5, "a", "r3").await;
    let status = iceberg_status(&copy).await;
    assert_eq!((status.behind, status.mirrored_version), (0, Some(w)));
    let last = read_version(&copy, status.mirror_version.unwrap()).await;
    assert_eq!(last.files, live_files(&copy, w).await);
    assert_eq!(last.metadata["location"], "memory:///i_behind_copy");
    assert_eq!(log_snapshot_ids(&copy).await, held_snapshot_ids(&last));
}

#[tokio::test]
async fn vacuum_of_a_mirrored_dimension_after_an_expire_within_the_retention_succeeds() {
    // The oldest version vacuum keeps files for lies below what the head
    // still reads (expired just now, within the retention).
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child("i_dim_vac")
        .unwrap();
    let schema = TableSchema::parse_dimension_spec(
        "i_dim_vac",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let t = Table::create_with_properties(loc, "i_dim_vac", schema, iceberg_mirror(), options())
        .await
        .unwrap();
    use crate::dimension::states;
    for (i, region) in ["A", "B", "C"].iter().enumerate() {
        let day = date("2026-03-01") + chrono::Days::new(i as u64);
        let rows = [states(&[("k1", region)])];
        t.apply_changes(day, &rows, RunInfo::new(format!("d{i}")))
            .await
            .unwrap();
    }
    expire(&t, Keep::Last(1)).await.unwrap();
    let within = logbook::maintenance::VacuumOptions {
        retention_ms: logbook::maintenance::MIN_RETENTION_MS,
        ..Default::default()
    };
    vacuum(&t, within).await.unwrap();
    assert_iceberg_mirrors(&t).await;
}

#[tokio::test]
async fn a_writer_late_for_its_mirror_version_never_moves_the_hint_back() {
    // A commits; before its metadata file is created, B commits and catches
    // the mirror up past A's version (writing A's too). A then finds its
    // version written: it must not point the hint, which readers open, at it.
    let faults = FaultStore::new(Arc::new(InMemory::new()));
    let loc = StorageLocation::from_store(Arc::new(faults.clone()), "i_late", "memory:///i_late");
    let schema = TableSchema::parse_spec("i_late", SPEC, "date").unwrap();
    let a =
        Table::create_with_properties(loc.clone(), "i_late", schema, iceberg_mirror(), options())
            .await
            .unwrap();
    replace(&a, date("2026-03-15"), 0..5, "a", "r1").await;
    let b = Table::open(loc, "i_late", options()).await.unwrap();
    let other = b.clone();
    faults.before_next_create(
        "metadata/v",
        Box::pin(async move {
            replace(&other, date("2026-03-17"), 0..5, "b", "r3").await;
        }),
    );
    replace(&a, date("2026-03-16"), 0..5, "a", "r2").await;
    assert_eq!(a.latest_version().await.unwrap(), 3);
    let hint = object_bytes(&a, "metadata/version-hint.text").await;
    // Mirror version 3 (logbook version 3) is the file `v4.metadata.json`.
    assert_eq!(std::str::from_utf8(&hint).unwrap(), "4");
    assert_eq!(iceberg_status(&a).await.behind, 0);
}

#[tokio::test]
async fn the_log_gives_iceberg_snapshot_ids_only_for_versions_the_mirror_still_holds() {
    let t = mirrored_table("i_log_ids", iceberg_mirror()).await;
    for (i, day) in ["2026-03-15", "2026-03-16", "2026-03-17", "2026-03-18"]
        .iter()
        .enumerate()
    {
        replace(&t, date(day), 0..5, "a", &format!("r{i}")).await;
    }
    expire(&t, Keep::Last(2)).await.unwrap();
    let last = read_version(&t, iceberg_status(&t).await.mirror_version.unwrap()).await;
    assert_eq!(log_snapshot_ids(&t).await, held_snapshot_ids(&last));
}

#[tokio::test]
async fn metadata_logbook_cannot_read_is_left_alone_while_the_iceberg_mirror_is_off() {
    // Delta mirror only; `metadata/` holds another tool's Iceberg metadata.
    let t = mirrored_table(
        "i_foreign_off",
        TableProperties::default().with_mirrors(&[MirrorFormat::Delta]),
    )
    .await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let loc = t.location();
    let foreign = serde_json::json!({"format-version": 2, "location": "s3://elsewhere/t"});
    loc.store()
        .put(
            &loc.path("metadata/v1.metadata.json"),
            PutPayload::from(serde_json::to_vec(&foreign).unwrap()),
        )
        .await
        .unwrap();
    // Listed (a log is there), off, holding nothing of logbook's.
    let iceberg = iceberg_status(&t).await;
    assert_eq!((iceberg.enabled, iceberg.mirrored_version), (false, None));
    vacuum(&t, sweep()).await.unwrap();
    replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    assert_eq!(t.mirror_status().await.unwrap()[0].behind, 0);
}
