//! Delta's own state at one version, read back from its log: the newest
//! checkpoint at or below it, then the entries after it, whoever wrote them.
//!
//! Needed once per mirror period: the first Delta version of a mirror turned
//! on again must take Delta from whatever its log holds (an older period,
//! another engine's entries) to logbook's snapshot, and the logbook version
//! an older period ended at may no longer be readable.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::delta_log::{self, Kind};
use crate::error::{Error, Result};
use crate::handle::TableInner;

/// The live files (path as Delta records it, size) of Delta version `d`.
pub(crate) async fn files_at(table: &TableInner, d: u64) -> Result<BTreeMap<String, i64>> {
    let checkpoint = delta_log::list(table)
        .await?
        .into_iter()
        .filter(|(v, k, _)| *k == Kind::Checkpoint && *v <= d)
        .map(|(v, _, _)| v)
        .next_back();
    let mut files = match checkpoint {
        Some(c) => checkpoint_files(table, c).await?,
        None => BTreeMap::new(),
    };
    let log = delta_log::log(table);
    for v in checkpoint.map_or(0, |c| c + 1)..=d {
        let bytes = log.read(v).await?.ok_or_else(|| {
            delta_log::diverged(
                table,
                v,
                format!("it is missing, so the state of Delta version {d} cannot be read"),
            )
        })?;
        for action in delta_log::actions_of(table, v, &bytes)? {
            if let Some(path) = action["add"]["path"].as_str() {
                let size = action["add"]["size"].as_i64().unwrap_or_default();
                files.insert(path.to_string(), size);
            }
            if let Some(path) = action["remove"]["path"].as_str() {
                files.remove(path);
            }
        }
    }
    Ok(files)
}

/// The `add` rows of checkpoint `c`.
async fn checkpoint_files(table: &TableInner, c: u64) -> Result<BTreeMap<String, i64>> {
    let relative = delta_log::checkpoint_path(c);
    let path = table.location.path(&relative);
    let bytes = table
        .location
        .get_bytes(&path)
        .await
        .map_err(|e| Error::storage(&path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| Error::parquet(&relative, e))?;
    let add = builder
        .schema()
        .index_of("add")
        .map_err(|e| Error::arrow(&relative, e))?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), [add]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| Error::parquet(&relative, e))?;
    let mut files = BTreeMap::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::arrow(&relative, e))?;
        let adds = batch.column(0).as_struct();
        let (Some(paths), Some(sizes)) = (adds.column_by_name("path"), adds.column_by_name("size"))
        else {
            continue;
        };
        let (paths, sizes) = (paths.as_string::<i32>(), sizes.as_primitive::<Int64Type>());
        for i in (0..adds.len()).filter(|i| adds.is_valid(*i)) {
            files.insert(paths.value(i).to_string(), sizes.value(i));
        }
    }
    Ok(files)
}
