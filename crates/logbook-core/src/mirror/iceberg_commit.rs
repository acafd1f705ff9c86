//! One Iceberg mirror version: the manifests, manifest list and metadata
//! file that show a logbook snapshot.
//!
//! Every version is a whole snapshot (the manifest list names every live
//! file's manifest), so nothing is diffed: a manifest mirrors one logbook
//! month manifest (or a dimension's files), is named after it, and is
//! reused from the previous version's manifest list whenever that month
//! did not change. A commit that replaces one date writes one manifest, one
//! manifest list and one metadata file, whatever the table's size.
//!
//! Order, so that no metadata file names a missing object: the new
//! manifests and the manifest list (at once: only the metadata file names
//! the list), then `vN.metadata.json` with put-if-absent (the mirror's
//! commit point), then the hint. Manifests and manifest lists are created
//! with put-if-absent under names fixed by what they mirror: one left by a
//! crashed attempt or a concurrent catch-up is the same content (and the
//! same length: only Avro's random sync marker differs).
//!
//! The previous version is read back (its metadata, then its manifest
//! list) unless this handle wrote it: the memo of the last version written
//! saves both reads on a process's next commit.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::iceberg_avro::{self, Entry, ManifestFile, ManifestHeader};
use super::iceberg_log::{self as ilog, diverged};
use super::iceberg_metadata::{self as imeta, NextVersion, SnapshotJson, TableMetadata};
use super::iceberg_table::{self as itable, snapshot_id};
use crate::error::{Error, Result};
use crate::format::{DataFile, Mirror, MonthRef, Operation};
use crate::handle::TableInner;
use crate::log::Created;
use crate::snapshot::Snapshot;

/// How many manifests are built at once.
const CONCURRENCY: usize = 16;

/// The sequence number of mirror version `d` (Iceberg's start at 1).
fn sequence_number(d: u64) -> i64 {
    d as i64 + 1
}

/// Write mirror version `d`, the snapshot `next`. `d - 1` must exist and be
/// ours unless `d` is the mirror's first version.
pub(crate) async fn write_version(
    table: &TableInner,
    mirror: Mirror,
    d: u64,
    next: &Snapshot,
) -> Result<()> {
    // A writer late for its own version (paused after its commit while
    // others caught the mirror up past it, and a vacuum perhaps deleted
    // it): writing it now would bring back a deleted metadata file. When
    // `d + 1` exists, `d` is done. (One a hundred versions late, past what
    // vacuum keeps, is not caught: its file goes with the next vacuum.)
    let log = ilog::log(table);
    if log.exists(d + 1).await? {
        return Ok(());
    }
    let (prev, reuse) = match d == mirror.first {
        true => (None, HashMap::new()),
        false => previous(table, d - 1).await?,
    };
    let built = manifests(table, mirror, next, &reuse).await?;
    let manifests: Vec<ManifestFile> = built.iter().map(|(m, _)| m.clone()).collect();
    let entry = next.entry();
    let id = snapshot_id(next.version());
    let parent = prev
        .as_ref()
        .and_then(|p| p.current())
        .map(|s| s.snapshot_id);
    let partitioned = itable::partition_source(next.schema()).is_some();
    let list = iceberg_avro::manifest_list(id, parent, sequence_number(d), &manifests, partitioned)
        .map_err(|e| avro_error(table, "a manifest list", e))?;
    let list_rel = format!(
        "{}/snap-{id}-{}-{}.avro",
        ilog::DIR,
        entry.commit_id,
        ilog::place(table)
    );
    let puts = built
        .into_iter()
        .filter_map(|(_, new)| new)
        .chain([(list_rel.clone(), list)]);
    futures::future::try_join_all(puts.map(|(rel, bytes)| async move {
        table.location.create_at(&rel, Bytes::from(bytes)).await
    }))
    .await?;

    let continues = prev.is_some();
    let table_uuid = match &prev {
        Some(p) => p.table_uuid,
        None => table.read_entry(0).await?.commit_id,
    };
    let schema = next.schema();
    let snapshot = SnapshotJson {
        snapshot_id: id,
        parent_snapshot_id: parent,
        sequence_number: sequence_number(d),
        timestamp_ms: entry.timestamp_ms,
        manifest_list: ilog::uri(table, &list_rel),
        summary: summary(next, &manifests),
        schema_id: schema.version as i64,
    };
    let properties = BTreeMap::from([
        (
            "schema.name-mapping.default".to_string(),
            itable::name_mapping(schema),
        ),
        ("logbook.table".to_string(), table.name.clone()),
    ]);
    let location = table.location.uri().trim_end_matches('/').to_string();
    let md = imeta::next_version(
        prev,
        NextVersion {
            table_uuid,
            location: &location,
            schema: itable::schema_json(schema),
            last_column_id: schema.last_column_id.max(1) as i64,
            partition_fields: itable::partition_fields(schema),
            properties,
            snapshot,
            retained_from: next.root().retained_from,
            metadata_floor: mirror
                .mirror_version(next.root().retained_from)
                .unwrap_or(mirror.first),
            previous_file: d
                .checked_sub(1)
                .filter(|_| continues)
                .map(|p| ilog::uri(table, &ilog::log(table).entry_name(p))),
        },
    );
    let bytes = serde_json::to_vec(&md).expect("metadata serialises");
    let ours = |found: &[u8]| Ok(judge(table, d, &ilog::decode(table, d, found)?, entry).is_ok());
    match log.create(d, Bytes::from(bytes), ours).await? {
        // Ours, or an equal catch-up's: either way version `d` is `md`
        // (everything in it derives from the log), with `manifests`.
        Created::Ours => remember(table, d, md, manifests),
        Created::Theirs(found) => return judge(table, d, &ilog::decode(table, d, &found)?, entry),
        Created::Absent(e) => return Err(e),
    }
    // Readers of file-system tables open what the hint names, so it moves
    // with every version (best effort: a reader behind by one is caught up
    // by the next commit). A faster writer may have created `d + 1` and
    // written its hint since the check above: then ours went back, and is
    // put forward again.
    if let Err(e) = log.write_hint(d).await {
        tracing::warn!(table = %table.name, version = d, error = %e, "could not update the Iceberg mirror's version-hint.text");
    }
    if log.exists(d + 1).await? {
        let latest = log.latest_from(d + 1).await?;
        ilog::repair_hint(table, latest).await?;
    }
    Ok(())
}

/// Metadata version `d` must mirror the logbook commit `entry`.
pub(crate) fn judge(
    table: &TableInner,
    d: u64,
    md: &TableMetadata,
    entry: &crate::format::LogEntry,
) -> Result<()> {
    super::judge(ilog::recorded_in(md), entry, "`metadata/`")
        .map_err(|reason| diverged(table, d, reason))
}

fn avro_error(table: &TableInner, what: &str, e: apache_avro::Error) -> Error {
    Error::InvalidInput {
        table: table.name.clone(),
        reason: format!("could not encode {what} of the Iceberg mirror: {e}"),
    }
}

/// The last version this handle wrote: its number, metadata and manifests.
struct Written {
    d: u64,
    metadata: TableMetadata,
    manifests: Vec<ManifestFile>,
}

fn remember(table: &TableInner, d: u64, metadata: TableMetadata, manifests: Vec<ManifestFile>) {
    let written = Written {
        d,
        metadata,
        manifests,
    };
    *table.mirror_memo.lock().unwrap() = Some(std::sync::Arc::new(written));
}

/// Whether this handle wrote version `d` as the mirror of `entry`.
pub(crate) fn remembers(table: &TableInner, d: u64, entry: &crate::format::LogEntry) -> bool {
    let memo = table.mirror_memo.lock().unwrap().clone();
    memo.and_then(|m| m.downcast::<Written>().ok())
        .is_some_and(|w| w.d == d && judge(table, d, &w.metadata, entry).is_ok())
}

/// Version `d` (which must exist) and its current snapshot's manifests by
/// path, to reuse: from the memo when this handle wrote `d`, else read.
async fn previous(
    table: &TableInner,
    d: u64,
) -> Result<(Option<TableMetadata>, HashMap<String, ManifestFile>)> {
    let memo = table.mirror_memo.lock().unwrap().clone();
    if let Some(w) = memo.and_then(|m| m.downcast::<Written>().ok()) {
        if w.d == d {
            let reuse = w.manifests.iter().map(|m| (m.path.clone(), m.clone()));
            return Ok((Some(w.metadata.clone()), reuse.collect()));
        }
    }
    let Some(md) = ilog::read(table, d).await? else {
        return Err(diverged(table, d, "it is missing".into()));
    };
    if ilog::elsewhere(table, &md) {
        // The table was copied or moved: Iceberg names files by absolute
        // URI, so the history names the old place. A new history starts
        // here, as when a mirror is turned on.
        tracing::info!(table = %table.name, from = %md.location, "the Iceberg mirror starts a new history at the table's new location");
        return Ok((None, HashMap::new()));
    }
    let Some(list) = md.current().map(|s| s.manifest_list.clone()) else {
        return Ok((Some(md), HashMap::new()));
    };
    let Some(rel) = ilog::relative(table, &list) else {
        return Err(diverged(
            table,
            d,
            format!("its manifest list {list} lies outside the table"),
        ));
    };
    let path = table.location.path(rel);
    let bytes = table
        .location
        .get_bytes(&path)
        .await
        .map_err(|e| Error::storage(&path, e))?;
    let files = iceberg_avro::read_manifest_list(&bytes).map_err(|e| {
        diverged(
            table,
            d,
            format!("its manifest list {rel} is not logbook's: {e}"),
        )
    })?;
    Ok((
        Some(md),
        files.into_iter().map(|m| (m.path.clone(), m)).collect(),
    ))
}

/// What one manifest mirrors.
enum Source {
    Month(MonthRef),
    Dimension(u64, Vec<DataFile>),
}

/// A manifest of the new version, with its path and bytes when it is new.
type Built = (ManifestFile, Option<(String, Vec<u8>)>);

/// The manifests of `next`: reused when `reuse` has them, else built (and
/// returned with their bytes, to be created).
async fn manifests(
    table: &TableInner,
    mirror: Mirror,
    next: &Snapshot,
    reuse: &HashMap<String, ManifestFile>,
) -> Result<Vec<Built>> {
    let schema_version = next.schema().version;
    let suffix = format!(
        "{}-{}-s{schema_version}-{}.avro",
        mirror.since,
        mirror.first,
        ilog::place(table)
    );
    let mut wanted: Vec<(String, Source)> = Vec::new();
    if let Some(v) = next.dimension_version() {
        let files = next.dimension_files();
        if !files.is_empty() {
            let name = format!("{}/lb-dim-{v}-{suffix}", ilog::DIR);
            wanted.push((name, Source::Dimension(v, files)));
        }
    }
    for m in next.month_refs().await? {
        let stem = m
            .path
            .trim_start_matches("_logbook/manifests/")
            .trim_end_matches(".json")
            .replace('/', "-");
        wanted.push((
            format!("{}/lb-{stem}-{suffix}", ilog::DIR),
            Source::Month(m),
        ));
    }
    let mut out = Vec::with_capacity(wanted.len());
    let mut missing = Vec::new();
    for (rel, source) in wanted {
        match reuse.get(&ilog::uri(table, &rel)) {
            Some(found) => out.push((found.clone(), None)),
            None => missing.push((rel, source)),
        }
    }
    // Chunks of futures joined at once, not a buffered stream over borrowed
    // data: the commit path must stay `Send`.
    for chunk in missing.chunks(CONCURRENCY) {
        let built = futures::future::try_join_all(
            chunk
                .iter()
                .map(|(rel, source)| build_manifest(table, mirror, next, rel, source)),
        )
        .await?;
        out.extend(built);
    }
    out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    Ok(out)
}

/// Build the manifest `rel` of `source`: its entry in the manifest list,
/// and its bytes.
async fn build_manifest(
    table: &TableInner,
    mirror: Mirror,
    next: &Snapshot,
    rel: &str,
    source: &Source,
) -> Result<Built> {
    let schema = next.schema();
    // The sequence number and snapshot of the version that wrote a file;
    // files from before the mirror began count as its first version's.
    let added = |version: u64| {
        let d = mirror.mirror_version(version).unwrap_or(mirror.first);
        (snapshot_id(version.max(mirror.since)), sequence_number(d))
    };
    let mut entries = Vec::new();
    let mut push = |version: u64, day: Option<i32>, f: &DataFile| {
        let (snapshot_id, sequence_number) = added(version);
        entries.push(Entry {
            snapshot_id,
            sequence_number,
            path: ilog::uri(table, &f.path),
            day,
            record_count: f.rows as i64,
            file_size: f.size as i64,
            metrics: itable::metrics(schema, f),
        });
    };
    match source {
        Source::Dimension(v, files) => files.iter().for_each(|f| push(*v, None, f)),
        Source::Month(m) => {
            for p in &next.month_at(m).await?.partitions {
                let day = Some(itable::day(p.date));
                p.files.iter().for_each(|f| push(p.version, day, f));
            }
        }
    }
    let header = ManifestHeader {
        schema: itable::schema_json(schema).to_string(),
        schema_id: schema.version,
        partition_spec: itable::partition_fields(schema).to_string(),
    };
    let partition = itable::partition_source(schema).map(|(_, name)| name);
    let bytes = iceberg_avro::manifest(&header, partition.as_deref(), &entries)
        .map_err(|e| avro_error(table, "a manifest", e))?;
    let length = bytes.len() as i64;
    let newest = entries.iter().max_by_key(|e| e.sequence_number);
    let days = entries.iter().filter_map(|e| e.day);
    let file = ManifestFile {
        path: ilog::uri(table, rel),
        length,
        sequence_number: newest.map_or(sequence_number(mirror.first), |e| e.sequence_number),
        min_sequence_number: entries
            .iter()
            .map(|e| e.sequence_number)
            .min()
            .unwrap_or(sequence_number(mirror.first)),
        added_snapshot_id: newest.map_or(snapshot_id(mirror.since), |e| e.snapshot_id),
        files: entries.len() as i32,
        rows: entries.iter().map(|e| e.record_count).sum(),
        days: days.clone().min().zip(days.max()),
    };
    Ok((file, Some((rel.to_string(), bytes))))
}

/// The snapshot summary: Iceberg's operation and totals, and which logbook
/// commit and run it mirrors.
fn summary(next: &Snapshot, manifests: &[ManifestFile]) -> BTreeMap<String, String> {
    let entry = next.entry();
    let operation = match entry.operation {
        Operation::CreateTable => "append",
        Operation::ReplacePartitions | Operation::PublishStage | Operation::ApplyDimension => {
            "overwrite"
        }
        // Files rewritten (or none touched) without changing the rows.
        Operation::Compact
        | Operation::AlterSchema
        | Operation::SetProperties
        | Operation::Expire
        | Operation::Vacuum
        | Operation::Seal => "replace",
    };
    let mut out = BTreeMap::from([
        ("operation".to_string(), operation.to_string()),
        (imeta::VERSION_KEY.to_string(), entry.version.to_string()),
        (imeta::COMMIT_KEY.to_string(), entry.commit_id.to_string()),
        ("logbook.operation".to_string(), entry.operation.to_string()),
        (
            "total-data-files".to_string(),
            manifests
                .iter()
                .map(|m| m.files as i64)
                .sum::<i64>()
                .to_string(),
        ),
        (
            "total-records".to_string(),
            manifests.iter().map(|m| m.rows).sum::<i64>().to_string(),
        ),
        ("total-delete-files".to_string(), "0".to_string()),
        ("engine-name".to_string(), "logbook".to_string()),
        (
            "engine-version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
    ]);
    if let Some(run) = &entry.run {
        out.insert("logbook.run-id".into(), run.run_id.clone());
        if let Some(code) = &run.code_version {
            out.insert("logbook.code-version".into(), code.clone());
        }
    }
    if !entry.dates.is_empty() {
        let dates: Vec<String> = entry.dates.iter().map(|d| d.to_string()).collect();
        out.insert("logbook.dates".into(), dates.join(","));
    }
    out
}
