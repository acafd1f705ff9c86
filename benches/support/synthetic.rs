//! A table of any size written straight into logbook's format, so that
//! the cost of a commit, an open or a `status` can be measured at a million
//! commits and a hundred thousand partitions without making them one by
//! one (a million real commits take hours). What it writes is what the
//! commit pipeline would leave: log entries, the `_last` hint, month and
//! span manifests and a root; the real code then reads and commits on top.
//!
//! The difference from a real history, and why it does not matter for what
//! it measures: every history entry points at the head's root (only the
//! head is read when committing, opening or computing status; time travel
//! into a generated table reads the final state). The data files the
//! manifests list are written with their listed sizes but hold zeros: a
//! listing (what `status` checks) finds them; reading their rows fails.
//! Shared by `benches/scale/scale.rs` and `tests/it/commit_cost.rs`.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use futures::StreamExt;
use logbook::format::{
    DataFile, InputRead, LogEntry, MonthManifest, MonthRef, Operation, PartitionEntry,
    RootManifest, RunInfo, SpanManifest, SpanRef, SPAN_YEARS,
};
use logbook::{StorageLocation, TableSchema};
use object_store::{ObjectStoreExt, PutPayload};
use uuid::Uuid;

/// What to generate: `partitions` consecutive dates from `first` (each one
/// file of `rows_per_partition` rows) and `commits` log entries in all, in
/// `format` 2 (the root lists spans) or 1 (the root lists every month).
pub struct Synthetic {
    pub format: u32,
    pub first: NaiveDate,
    pub partitions: u64,
    pub commits: u64,
    pub rows_per_partition: u64,
    /// The table's declared schedule start, if any.
    pub schedule_start: Option<NaiveDate>,
    /// What the run that wrote each date recorded reading (lineage).
    pub inputs: Option<Inputs>,
}

/// The inputs a generated date's run read, by date.
pub type Inputs = std::sync::Arc<dyn Fn(NaiveDate) -> Vec<InputRead> + Send + Sync>;

/// Write a table of `schema` at `location` as `spec` says. `commits` must
/// be at least 2 (the creation and one write per partition fold into the
/// history entries).
pub async fn generate(location: &StorageLocation, schema: TableSchema, spec: &Synthetic) {
    assert!(
        spec.commits >= 2,
        "a generated table has at least 2 commits"
    );
    let attempt = Uuid::from_u128(0x5717_u128 << 64);
    let manifests = format!("_logbook/manifests/{attempt}");
    let head = spec.commits - 1;
    let mut months: BTreeMap<String, Vec<PartitionEntry>> = BTreeMap::new();
    for i in 0..spec.partitions {
        let date = spec.first + chrono::Days::new(i);
        // Partition i was last written by the i-th of the history's last writes.
        let version = head.saturating_sub(spec.partitions - 1 - i).max(1);
        months
            .entry(format!("{:04}-{:02}", date.year(), date.month()))
            .or_default()
            .push(PartitionEntry {
                date,
                version,
                commit_id: Uuid::from_u128(u128::from(version)),
                rows: spec.rows_per_partition,
                files: vec![DataFile::new(
                    format!(
                        "data/date={date}/{}/part-00000.parquet",
                        Uuid::from_u128(u128::from(i))
                    ),
                    64 * spec.rows_per_partition,
                    spec.rows_per_partition,
                )],
                run: Some(RunInfo {
                    inputs: spec.inputs.as_ref().map_or(Vec::new(), |f| f(date)),
                    ..RunInfo::new(format!("generated-{i}"))
                }),
                schema_version: schema.version,
                earlier_runs: Vec::new(),
            });
    }
    let mut objects: Vec<(String, Vec<u8>)> = Vec::new();
    let mut spans: BTreeMap<String, Vec<MonthRef>> = BTreeMap::new();
    for (month, partitions) in months {
        let path = format!("{manifests}/{month}.json");
        let year: i32 = month[..4].parse().unwrap();
        spans
            .entry(format!("{:04}", year - year.rem_euclid(SPAN_YEARS)))
            .or_default()
            .push(MonthRef {
                month: month.clone(),
                path: path.clone(),
                partitions: partitions.len() as u32,
                rows: partitions.iter().map(|p| p.rows).sum(),
                files: partitions.len() as u64,
            });
        for p in &partitions {
            let file = &p.files[0];
            objects.push((file.path.clone(), vec![0; file.size as usize]));
        }
        let manifest = MonthManifest { month, partitions };
        objects.push((path, serde_json::to_vec(&manifest).unwrap()));
    }
    let all_months: Vec<MonthRef> = spans.values().flatten().cloned().collect();
    let mut span_refs = Vec::new();
    for (span, months) in spans {
        let path = format!("{manifests}/span-{span}.json");
        span_refs.push(SpanRef {
            span: span.clone(),
            path: path.clone(),
            partitions: months.iter().map(|m| u64::from(m.partitions)).sum(),
            rows: months.iter().map(|m| m.rows).sum(),
            files: months.iter().map(|m| m.files).sum(),
        });
        let manifest = SpanManifest { span, months };
        objects.push((path, serde_json::to_vec(&manifest).unwrap()));
    }
    if spec.format == 1 {
        span_refs.clear();
        objects.retain(|(path, _)| !path.contains("/span-"));
    }
    let root_at = |spans: Vec<SpanRef>, months: Vec<MonthRef>| RootManifest {
        format: spec.format,
        schema: schema.clone(),
        months,
        spans,
        dimension: None,
        properties: logbook::TableProperties {
            schedule_start: spec.schedule_start,
            ..Default::default()
        },
        retained_from: 0,
        code_version: None,
    };
    let (empty_root, root) = (
        format!("{manifests}/empty.json"),
        format!("{manifests}/root.json"),
    );
    let months = if spec.format == 1 {
        all_months
    } else {
        Vec::new()
    };
    let (empty, full) = (root_at(Vec::new(), Vec::new()), root_at(span_refs, months));
    objects.push((empty_root.clone(), serde_json::to_vec(&empty).unwrap()));
    objects.push((root.clone(), serde_json::to_vec(&full).unwrap()));
    objects.push(("_logbook/_last".into(), head.to_string().into_bytes()));
    let store = location.store().clone();
    let put = |(path, bytes): (String, Vec<u8>)| {
        let (store, path) = (store.clone(), location.path(&path));
        async move { store.put(&path, PutPayload::from(bytes)).await.unwrap() }
    };
    futures::stream::iter(objects)
        .map(put)
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let entry = |version: u64| {
        let (operation, manifest, dates) = match version {
            0 => (Operation::CreateTable, empty_root.clone(), Vec::new()),
            v => (
                Operation::ReplacePartitions,
                root.clone(),
                vec![spec.first + chrono::Days::new((v - 1) % spec.partitions.max(1))],
            ),
        };
        let entry = LogEntry {
            format: spec.format,
            version,
            commit_id: Uuid::from_u128(u128::from(version)),
            timestamp_ms: 1_700_000_000_000 + version as i64,
            operation,
            manifest,
            dates,
            rows_added: spec.rows_per_partition,
            files_added: 1,
            files_removed: 0,
            run: Some(RunInfo::new(format!("generated-{version}"))),
            affected: None,
            change: None,
            publish: None,
            txn: None,
        };
        (
            format!("_logbook/log/{version:020}.json"),
            serde_json::to_vec(&entry).unwrap(),
        )
    };
    futures::stream::iter((0..=head).map(entry))
        .map(put)
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
}
