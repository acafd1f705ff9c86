//! The Iceberg mirror's metadata files as a log: names, reading one back,
//! creating the next with put-if-absent, and recognising logbook's own
//! (by the logbook version and commit id its current snapshot names).
//!
//! ```text
//! <table>/metadata/v7.metadata.json        mirror version 6 (Iceberg counts from 1)
//! <table>/metadata/version-hint.text       `7`, no newline: what readers open
//! <table>/metadata/snap-<id>-<commit>-<place>.avro a snapshot's manifest list
//! <table>/metadata/lb-<attempt>-<month>-<since>-<first>-s<schema>-<place>.avro
//!                                          the manifest of one logbook month manifest
//! <table>/metadata/lb-dim-<version>-<since>-<first>-s<schema>-<place>.avro
//!                                          a dimension's files
//! ```
//!
//! `<place>` is [`place`]: manifests and lists name files by absolute URI,
//! so a copied table's own history must not take the copies of the
//! original's (same names, the original's URIs) for its own.

use uuid::Uuid;

pub(crate) use super::iceberg_metadata::parse_version;
use super::iceberg_metadata::TableMetadata;
use crate::error::{Error, Result};
use crate::handle::TableInner;
use crate::log::{Log, Naming};

/// The metadata directory, Iceberg's for file-system tables.
pub(crate) const DIR: &str = "metadata";
const HINT: &str = "metadata/version-hint.text";

pub(crate) fn log(table: &TableInner) -> Log {
    Log::named(table.location.clone(), DIR, HINT, Naming::IcebergMetadata)
}

/// The absolute URI of `relative`, as Iceberg metadata names files.
pub(crate) fn uri(table: &TableInner, relative: &str) -> String {
    format!("{}/{relative}", table.location.uri().trim_end_matches('/'))
}

/// A tag of the table's location for the names of manifests and lists:
/// FNV-1a (64 bits) of its URI, in hex. Stable across builds (std's hasher
/// is not promised to be), and a file name needs no more than this.
pub(crate) fn place(table: &TableInner) -> String {
    let uri = table.location.uri().trim_end_matches('/');
    let hash = uri.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Whether metadata `md` describes the table at another location (it was
/// copied or moved there): its files are the original's, not this table's.
pub(crate) fn elsewhere(table: &TableInner, md: &TableMetadata) -> bool {
    md.location != table.location.uri().trim_end_matches('/')
}

/// `uri`'s path relative to the table root, if it lies under it.
pub(crate) fn relative<'a>(table: &TableInner, uri: &'a str) -> Option<&'a str> {
    uri.strip_prefix(table.location.uri().trim_end_matches('/'))?
        .strip_prefix('/')
}

pub(crate) fn diverged(table: &TableInner, d: u64, reason: String) -> Error {
    Error::MirrorDiverged {
        table: table.name.clone(),
        format: crate::format::MirrorFormat::Iceberg.to_string(),
        path: log(table).entry_name(d),
        reason,
    }
}

/// Every object of `metadata/`, as paths relative to the table root.
pub(crate) async fn list(table: &TableInner) -> Result<Vec<String>> {
    let objects = table.list(DIR).await?;
    Ok(objects
        .iter()
        .map(|o| table.location.relative(&o.location))
        .collect())
}

/// The latest mirror version, or `None` when `metadata/` holds none. Probes
/// from the hint; when neither the hint nor version 0 exists (vacuum
/// trimmed old versions) `metadata/` is listed, never taken for empty.
pub(crate) async fn latest(table: &TableInner) -> Result<Option<u64>> {
    if let Some(v) = log(table).latest().await? {
        return Ok(Some(v));
    }
    let listed = list(table).await?;
    let newest = listed
        .iter()
        .filter_map(|rel| parse_version(rel.strip_prefix("metadata/")?))
        .max();
    match newest {
        Some(d) => log(table).latest_from(d).await.map(Some),
        None => Ok(None),
    }
}

/// Metadata version `d`, or `None` if it does not exist; a file logbook
/// cannot decode is a divergence.
pub(crate) async fn read(table: &TableInner, d: u64) -> Result<Option<TableMetadata>> {
    match log(table).read(d).await? {
        None => Ok(None),
        Some(bytes) => decode(table, d, &bytes).map(Some),
    }
}

pub(crate) fn decode(table: &TableInner, d: u64, bytes: &[u8]) -> Result<TableMetadata> {
    serde_json::from_slice(bytes).map_err(|e| {
        diverged(
            table,
            d,
            format!("not Iceberg v2 metadata logbook can read: {e}"),
        )
    })
}

/// The logbook version and commit id version `d`'s current snapshot
/// mirrors, if logbook wrote it. A missing version is a divergence.
pub(crate) async fn recorded(table: &TableInner, d: u64) -> Result<Option<(u64, Option<Uuid>)>> {
    match read(table, d).await? {
        None => Err(diverged(table, d, "it is missing".into())),
        Some(md) => Ok(recorded_in(&md)),
    }
}

pub(crate) fn recorded_in(md: &TableMetadata) -> Option<(u64, Option<Uuid>)> {
    md.current()
        .and_then(|s| s.logbook())
        .map(|(v, id)| (v, Some(id)))
}

/// Point `version-hint.text` at version `d`, the latest, unless it does:
/// readers open what it names, and a commit that died between its metadata
/// file and the hint left it one behind.
pub(crate) async fn repair_hint(table: &TableInner, d: u64) -> Result<()> {
    let log = log(table);
    if log.read_hint().await? != Some(d) {
        log.write_hint(d).await?;
    }
    Ok(())
}
