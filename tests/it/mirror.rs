//! The Delta mirror, checked against logbook's own snapshots by replaying
//! the Delta log: every Delta version holds exactly the files of the logbook
//! version its `txn` names, versions have no gaps, and the mirror catches up
//! after a crash or a foreign entry without a commit ever failing for it.
//! Independent readers (deltalake, DuckDB, polars) are in `tests/delta/`.

use std::collections::BTreeSet;

use logbook::maintenance::{compact, CompactOptions};
use logbook::schema::SchemaChange;
use logbook::{MirrorFormat, RunInfo, StorageLocation, Table, TableSchema};
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::Value;

use crate::common::{
    batch, data_files, date, delta_mirror, object_bytes, objects, options, replace, sweep, SPEC,
};

async fn mirrored_table(name: &str) -> Table {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child(name)
        .unwrap();
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    let props = delta_mirror();
    Table::create_with_properties(
        loc,
        name,
        schema,
        props,
        options().with_max_rows_per_file(4),
    )
    .await
    .unwrap()
}

/// One Delta version as replayed: the logbook version its `txn` names and
/// the files live after it.
#[derive(Debug)]
struct DeltaVersion {
    /// `None` for an entry another engine wrote.
    logbook: Option<u64>,
    files: BTreeSet<String>,
    actions: Vec<Value>,
}

/// Replay `_delta_log/*.json` from version 0 (no checkpoint), checking
/// that versions are contiguous.
async fn replay(t: &Table) -> Vec<DeltaVersion> {
    let mut names = objects(t, "_delta_log").await;
    names.retain(|n| n.ends_with(".json") && !n.contains("checkpoint"));
    names.sort();
    let mut files = BTreeSet::new();
    let mut out = Vec::new();
    for (d, name) in names.iter().enumerate() {
        assert_eq!(name, &format!("_delta_log/{d:020}.json"), "no gaps");
        let bytes = object_bytes(t, name).await;
        let mut logbook = None;
        let mut actions = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let a: Value = serde_json::from_slice(line).unwrap();
            if let Some(p) = a["add"]["path"].as_str() {
                files.insert(p.to_string());
            }
            if let Some(p) = a["remove"]["path"].as_str() {
                assert!(files.remove(p), "{name} removes {p}, which is not live");
            }
            if a["txn"]["appId"] == "logbook" {
                logbook = a["txn"]["version"].as_u64();
            }
            actions.push(a);
        }
        out.push(DeltaVersion {
            logbook,
            files: files.clone(),
            actions,
        });
    }
    out
}

async fn live_files(t: &Table, version: u64) -> BTreeSet<String> {
    live_files_if_kept(t, version)
        .await
        .unwrap_or_else(|| panic!("version {version} is expired"))
}

/// The live files of `version`, or `None` when expiry hid it.
async fn live_files_if_kept(t: &Table, version: u64) -> Option<BTreeSet<String>> {
    let snap = match t.at_version(version).await {
        Err(e) if e.kind() == logbook::ErrorKind::NotFound => return None,
        other => other.unwrap(),
    };
    let mut files: BTreeSet<String> = snap.dimension_files().into_iter().map(|f| f.path).collect();
    for p in snap.partitions().await.unwrap() {
        files.extend(p.files.into_iter().map(|f| f.path));
    }
    Some(files)
}

/// Every Delta version equals its logbook snapshot (those time travel
/// still reads), and the mirror holds every logbook version from `since`
/// to the latest, one to one.
pub async fn assert_mirrors(t: &Table, since: u64) {
    let versions = replay(t).await;
    let latest = t.latest_version().await.unwrap();
    let mirrored: Vec<u64> = versions
        .iter()
        .map(|v| v.logbook.expect("every entry is logbook's"))
        .collect();
    assert_eq!(mirrored.last(), Some(&latest), "the mirror is caught up");
    for (v, files) in mirrored.iter().zip(&versions) {
        if let Some(live) = live_files_if_kept(t, *v).await {
            assert_eq!(files.files, live, "logbook version {v}");
        }
    }
    let tail: Vec<u64> = mirrored.iter().copied().filter(|v| *v >= since).collect();
    assert_eq!(tail, (since..=latest).collect::<Vec<_>>());
    let status = delta_status(t).await;
    assert_eq!((status.behind, status.mirrored_version), (0, Some(latest)));
}

/// A staged publish of three dates (one replaced, two new), a compaction,
/// and a rename of `name` to `label`: the commits besides replaces that a
/// mirror must follow.
pub(crate) async fn publish_compact_and_rename(t: &Table) {
    let stage = t.stage("fix").await.unwrap();
    for d in ["2026-03-16", "2026-04-01", "2026-04-02"] {
        let mut w = stage
            .replace_partition(date(d), RunInfo::new(format!("fix-{d}")))
            .await
            .unwrap();
        w.write(&batch(date(d), 0..9, "fix")).await.unwrap();
        w.commit().await.unwrap();
    }
    stage.publish(false).await.unwrap();
    let report = compact(t, &CompactOptions::default(), &|_| {})
        .await
        .unwrap();
    assert!(report.partitions_compacted > 0);
    t.alter_schema(SchemaChange::RenameColumn {
        from: "name".into(),
        to: "label".into(),
    })
    .await
    .unwrap();
}

/// Where the Delta mirror stands.
pub(crate) async fn delta_status(t: &Table) -> logbook::mirror::MirrorStatus {
    let statuses = t.mirror_status().await.unwrap();
    let delta = statuses.iter().find(|s| s.format == MirrorFormat::Delta);
    delta
        .cloned()
        .unwrap_or_else(|| panic!("no Delta mirror status: {statuses:?}"))
}

async fn delete(t: &Table, relative: &str) {
    let loc = t.location();
    loc.store().delete(&loc.path(relative)).await.unwrap();
}

fn delta_entry(d: u64) -> String {
    format!("_delta_log/{d:020}.json")
}

#[tokio::test]
async fn every_delta_version_holds_exactly_the_files_of_its_logbook_version() {
    let t = mirrored_table("m_ops").await;
    for (i, d) in ["2026-03-15", "2026-03-16", "2026-04-01"]
        .iter()
        .enumerate()
    {
        replace(&t, date(d), 0..10, "a", &format!("run-{i}")).await;
    }
    replace(&t, date("2026-03-15"), 0..3, "b", "rerun").await;
    publish_compact_and_rename(&t).await;
    let renamed = t.latest().await.unwrap().arrow_schema();
    let rows = batch(date("2026-03-15"), 0..2, "c");
    let rows = arrow_array::RecordBatch::try_new(renamed, rows.columns().to_vec()).unwrap();
    let mut w = t
        .replace_partition(date("2026-03-15"), RunInfo::new("after-rename"))
        .await
        .unwrap();
    w.write(&rows).await.unwrap();
    w.commit().await.unwrap();
    assert_mirrors(&t, 0).await;

    let versions = replay(&t).await;
    // The first commit declares the table: protocol 1/2, unpartitioned.
    let first = &versions[0].actions;
    assert!(first[0]["commitInfo"].is_object());
    assert_eq!(first[1]["protocol"]["minReaderVersion"], 1);
    assert_eq!(
        first[2]["metaData"]["partitionColumns"],
        serde_json::json!([])
    );
    // A compaction's adds and removes change no data.
    let compacted = versions
        .iter()
        .find(|v| v.actions[0]["commitInfo"]["operation"] == "OPTIMIZE")
        .unwrap();
    assert!(compacted
        .actions
        .iter()
        .filter(|a| a["add"].is_object())
        .all(|a| a["add"]["dataChange"] == false));
    // After the rename, column mapping names the files' column.
    let renamed = versions
        .iter()
        .find(|v| v.actions.iter().any(|a| a["metaData"].is_object()) && v.logbook > Some(0))
        .unwrap();
    let meta = renamed
        .actions
        .iter()
        .find(|a| a["metaData"].is_object())
        .unwrap();
    let schema: Value =
        serde_json::from_str(meta["metaData"]["schemaString"].as_str().unwrap()).unwrap();
    let label = &schema["fields"][2];
    assert_eq!(label["name"], "label");
    assert_eq!(
        label["metadata"]["delta.columnMapping.physicalName"],
        "name"
    );
    // Each date's file says min = max on the date column, so engines skip it.
    let add = versions
        .last()
        .unwrap()
        .actions
        .iter()
        .find(|a| a["add"].is_object())
        .unwrap();
    let stats: Value = serde_json::from_str(add["add"]["stats"].as_str().unwrap()).unwrap();
    assert_eq!(stats["minValues"]["date"], "2026-03-15");
    assert_eq!(stats["maxValues"]["date"], "2026-03-15");
    assert_eq!(stats["numRecords"], 2);
}

#[tokio::test]
async fn a_mirror_write_lost_in_a_crash_is_caught_up_by_the_next_commit() {
    let t = mirrored_table("m_crash").await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let v = replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    // The process died after logbook's commit, before its Delta entry.
    delete(&t, &delta_entry(v)).await;
    let status = delta_status(&t).await;
    assert_eq!((status.behind, status.mirrored_version), (1, Some(v - 1)));
    replace(&t, date("2026-03-17"), 0..5, "a", "r3").await;
    assert_mirrors(&t, 0).await;

    // Two entries lost; two catch-ups race: both succeed, one mirror.
    let v = replace(&t, date("2026-03-18"), 0..5, "a", "r4").await;
    delete(&t, &delta_entry(v)).await;
    delete(&t, &delta_entry(v - 1)).await;
    let other = Table::open(t.location().clone(), "m_crash", options())
        .await
        .unwrap();
    let (a, b) = tokio::join!(t.sync_mirror(), other.sync_mirror());
    assert_eq!((a.unwrap()[0].behind, b.unwrap()[0].behind), (0, 0));
    assert_mirrors(&t, 0).await;
}

#[tokio::test]
async fn a_foreign_delta_entry_stops_the_mirror_but_never_fails_a_commit() {
    let t = mirrored_table("m_foreign").await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    // Another engine appended to the mirror.
    let loc = t.location();
    let foreign = r#"{"commitInfo":{"operation":"WRITE"}}"#;
    loc.store()
        .put(&loc.path(&delta_entry(2)), PutPayload::from(foreign))
        .await
        .unwrap();
    let v = replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    assert_eq!(v, 2, "the logbook commit landed");
    let err = t.sync_mirror().await.unwrap_err();
    assert_eq!(err.kind(), logbook::ErrorKind::Corrupt);
    assert!(
        err.to_string()
            .contains("_delta_log/00000000000000000002.json"),
        "{err}"
    );
    // The next commit never builds on the foreign entry.
    replace(&t, date("2026-03-17"), 0..5, "a", "r3").await;
    assert!(
        !objects(&t, "_delta_log").await.contains(&delta_entry(3)),
        "Delta version 3 would build on another engine's entry"
    );
    // Turning the mirror off and on rebuilds it from Delta's own state.
    t.set_mirror(&[]).await.unwrap();
    t.set_mirror(&[MirrorFormat::Delta]).await.unwrap();
    let versions = replay(&t).await;
    let latest = t.latest_version().await.unwrap();
    let last = versions.last().unwrap();
    assert_eq!(last.logbook, Some(latest));
    assert_eq!(last.files, live_files(&t, latest).await);
    assert_eq!(delta_status(&t).await.behind, 0);
}

#[tokio::test]
async fn a_mirror_turned_off_and_on_again_continues_its_log_from_what_it_held() {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child("m_toggle")
        .unwrap();
    let schema = TableSchema::parse_spec("m_toggle", SPEC, "date").unwrap();
    let t = Table::create(loc, "m_toggle", schema, options())
        .await
        .unwrap();
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    let on = t.set_mirror(&[MirrorFormat::Delta]).await.unwrap();
    assert_mirrors(&t, on.version).await;
    replace(&t, date("2026-03-16"), 0..5, "a", "r2").await;
    t.set_mirror(&[]).await.unwrap();
    replace(&t, date("2026-03-15"), 0..7, "b", "r3").await;
    replace(&t, date("2026-03-17"), 0..5, "a", "r4").await;
    let again = t.set_mirror(&[MirrorFormat::Delta]).await.unwrap();
    // Turning on what is on commits nothing.
    assert!(
        t.set_mirror(&[MirrorFormat::Delta])
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
}

#[tokio::test]
async fn a_checkpoint_every_100_versions_holds_the_whole_state() {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let t = mirrored_table("m_checkpoint").await;
    let mut last = 0;
    for i in 0..100u32 {
        let d = date("2026-01-01") + chrono::Days::new(u64::from(i % 40));
        last = replace(&t, d, 0..2, "a", &format!("r{i}")).await;
    }
    assert_eq!(last, 100);
    let hint = object_bytes(&t, "_delta_log/_last_checkpoint").await;
    let hint: Value = serde_json::from_slice(&hint).unwrap();
    assert_eq!(hint["version"], 100);
    let bytes = object_bytes(&t, "_delta_log/00000000000000000100.checkpoint.parquet").await;
    let batches: Vec<arrow_array::RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(hint["size"], rows);
    // protocol, metaData, txn and one add per live file.
    assert_eq!(rows, 3 + live_files(&t, 100).await.len());
    let present = |kind: &str| -> usize {
        batches
            .iter()
            .map(|b| {
                let c = b.column_by_name(kind).unwrap();
                c.len() - c.null_count()
            })
            .sum()
    };
    assert_eq!(
        (
            present("protocol"),
            present("metaData"),
            present("txn"),
            present("add")
        ),
        (1, 1, 1, 40)
    );
    let txn = batches[0].column_by_name("txn").unwrap().as_struct();
    let versions = txn
        .column_by_name("version")
        .unwrap()
        .as_primitive::<arrow_array::types::Int64Type>();
    assert!((0..txn.len()).any(|i| txn.is_valid(i) && versions.value(i) == 100));
}

#[tokio::test]
async fn vacuum_trims_the_delta_log_before_the_checkpoint_the_oldest_kept_version_needs() {
    use logbook::maintenance::{expire, vacuum, Keep, VacuumOptions};
    let t = mirrored_table("m_trim").await;
    for i in 0..250u32 {
        let d = date("2026-01-01") + chrono::Days::new(u64::from(i % 5));
        replace(&t, d, 0..2, "a", &format!("r{i}")).await;
    }
    expire(&t, Keep::Last(10)).await.unwrap();
    let dry = vacuum(
        &t,
        VacuumOptions {
            dry_run: true,
            ..sweep()
        },
    )
    .await
    .unwrap();
    let trimmed: Vec<&String> = dry
        .deleted
        .iter()
        .filter(|p| p.starts_with("_delta_log/"))
        .collect();
    // Versions 0..200 and checkpoint 100 go; checkpoint 200 and what follows stay.
    assert_eq!(trimmed.len(), 200 + 1, "{trimmed:?}");
    assert_eq!(
        objects(&t, "_delta_log").await.len(),
        251 + 2 + 1 + 1,
        "a dry run deletes nothing"
    );
    vacuum(&t, sweep()).await.unwrap();
    let left = objects(&t, "_delta_log").await;
    assert_eq!(
        left.first().map(String::as_str),
        Some("_delta_log/00000000000000000200.checkpoint.parquet")
    );
    assert!(left.contains(&"_delta_log/00000000000000000200.json".to_string()));
    // A hint left behind the trimmed entries is not taken for an empty log.
    let loc = t.location();
    loc.store()
        .put(
            &loc.path("_logbook/mirror/delta-last"),
            PutPayload::from("100"),
        )
        .await
        .unwrap();
    // Expiry's and vacuum's own commits are mirrored too.
    let status = delta_status(&t).await;
    assert_eq!((status.behind, status.mirror_version), (0, Some(252)));
}

#[tokio::test]
async fn a_delta_log_left_by_an_earlier_table_is_never_taken_for_ours() {
    // A table whose directory was deleted except for its `_delta_log/`.
    let old = mirrored_table("m_leftover").await;
    replace(&old, date("2026-03-15"), 0..5, "old", "r1").await;
    let loc = old.location().clone();
    for rel in data_files(&old).await {
        delete(&old, &rel).await;
    }
    let keep = objects(&old, "_logbook").await;
    for rel in keep {
        delete(&old, &rel).await;
    }
    // A new table at the same place: same versions, other commits.
    let schema = TableSchema::parse_spec("m_leftover", SPEC, "date").unwrap();
    let props = delta_mirror();
    let t = Table::create_with_properties(loc, "m_leftover", schema, props, options())
        .await
        .unwrap();
    replace(&t, date("2026-03-16"), 0..5, "new", "r1").await;
    let err = t.mirror_status().await.unwrap_err();
    assert!(err.to_string().contains("another table's commit"), "{err}");
}

#[tokio::test]
async fn a_mirror_turned_on_again_after_its_base_was_vacuumed_rebuilds_from_deltas_state() {
    use logbook::maintenance::{expire, vacuum, Keep};
    let t = mirrored_table("m_reseed").await;
    replace(&t, date("2026-03-15"), 0..5, "a", "r1").await;
    t.set_mirror(&[]).await.unwrap();
    // The version the Delta log holds is expired and its files vacuumed.
    replace(&t, date("2026-03-15"), 0..3, "b", "r2").await;
    replace(&t, date("2026-03-16"), 0..3, "b", "r3").await;
    expire(&t, Keep::Last(1)).await.unwrap();
    vacuum(&t, sweep()).await.unwrap();
    let status = delta_status(&t).await;
    assert!(
        !status.enabled && status.mirror_version == Some(1),
        "{status:?}"
    );
    t.set_mirror(&[MirrorFormat::Delta]).await.unwrap();
    let versions = replay(&t).await;
    let latest = t.latest_version().await.unwrap();
    assert_eq!(versions.last().unwrap().logbook, Some(latest));
    assert_eq!(versions.last().unwrap().files, live_files(&t, latest).await);

    // A `_delta_log/` deleted by hand: off and on starts a new one at 0.
    for rel in objects(&t, "_delta_log").await {
        delete(&t, &rel).await;
    }
    assert!(
        t.sync_mirror().await.is_err(),
        "a missing log is not taken for a new one"
    );
    t.set_mirror(&[]).await.unwrap();
    t.set_mirror(&[MirrorFormat::Delta]).await.unwrap();
    let versions = replay(&t).await;
    assert_eq!(versions.len(), 1);
    let latest = t.latest_version().await.unwrap();
    assert_eq!(versions[0].files, live_files(&t, latest).await);
}

#[tokio::test]
async fn a_retried_run_restores_the_delta_entry_its_crashed_first_try_lost() {
    let t = mirrored_table("m_retry").await;
    let v = replace(&t, date("2026-03-15"), 0..5, "a", "nightly").await;
    delete(&t, &delta_entry(v)).await;
    // The orchestrator retries the run: nothing to commit, the mirror catches up.
    let mut w = t
        .replace_partition(date("2026-03-15"), RunInfo::new("nightly"))
        .await
        .unwrap();
    w.write(&batch(date("2026-03-15"), 0..5, "a"))
        .await
        .unwrap();
    assert!(w.commit().await.unwrap().already_committed);
    assert_mirrors(&t, 0).await;
}
