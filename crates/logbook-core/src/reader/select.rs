//! What a scan may skip inside a data file, decided by the caller.
//!
//! Core knows no expression language, so the decision is a hook: after a
//! file's footer (and, when asked for, its page index) is read, a
//! [`FilePruner`] sees the footer through a [`FileAccess`] that names each
//! table column's place in the file by field id, may fetch bloom filters,
//! and returns a [`Selection`]: the row groups to read and, within them,
//! the rows. The query layer implements it with DataFusion's pruning
//! predicates (`logbook_datafusion::prune`). Skipped row groups and pages
//! are never fetched; [`ReadCounters`] says what was.

use std::fmt;
use std::sync::Arc;

use arrow_schema::{DataType, SchemaRef};
use futures::future::BoxFuture;
use parquet::arrow::arrow_reader::RowSelection;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::SchemaDescriptor;

use super::counters::ReadCounters;
use super::object::ObjectReader;
use crate::error::{Error, Result};
use crate::format::DataFile;

/// Chooses the row groups and rows of a file a scan reads.
pub trait FilePruner: Send + Sync + fmt::Debug {
    /// Load the page index (column and offset indexes) with the footer, so
    /// that [`FileAccess::metadata`] carries page-level bounds.
    fn wants_page_index(&self) -> bool;

    /// Decide what to read of one file. Returning [`Selection::all`] reads
    /// everything; a selection must keep every row that may match.
    fn select<'a>(&'a self, file: FileAccess<'a>) -> BoxFuture<'a, Result<Selection>>;
}

/// What to read of one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Row groups to read, ascending (`None`: all).
    pub row_groups: Option<Vec<usize>>,
    /// Rows to read within those row groups, in their order (`None`: all).
    pub rows: Option<RowSelection>,
}

impl Selection {
    /// Read the whole file.
    pub fn all() -> Self {
        Self::default()
    }
}

/// One opened file as a [`FilePruner`] sees it.
pub struct FileAccess<'a> {
    pub(crate) path: &'a str,
    /// `(table column, index of its field in the file's Arrow schema,
    /// field id)`.
    pub(crate) columns: &'a [(String, usize, u32)],
    /// The manifest's entry for the file.
    pub(crate) file: &'a DataFile,
    pub(crate) builder: &'a mut ParquetRecordBatchStreamBuilder<ObjectReader>,
}

impl FileAccess<'_> {
    /// The file's path, relative to the table root.
    pub fn path(&self) -> &str {
        self.path
    }

    /// The footer, with the page index when it was asked for and written.
    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        self.builder.metadata()
    }

    /// The file's own Arrow schema (its names, which may be older names).
    pub fn schema(&self) -> &SchemaRef {
        self.builder.schema()
    }

    /// The file's Parquet schema.
    pub fn parquet_schema(&self) -> &SchemaDescriptor {
        self.builder.parquet_schema()
    }

    /// Where the table column `name` is in [`FileAccess::schema`], matched
    /// by field id (`None`: the file predates the column).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, i, _)| *i)
    }

    /// Whether the footer's bounds of table column `name` are true bounds.
    /// Parquet writers leave NaN out of float bounds, so a float column's
    /// footer bounds hold only when the manifest kept bounds for it (it
    /// drops them for a file holding a NaN; see `file_stats`); other types'
    /// bounds always hold.
    pub fn bounds_hold(&self, name: &str) -> bool {
        let Some((_, field, id)) = self.columns.iter().find(|(n, _, _)| n == name) else {
            return false;
        };
        match self.schema().field(*field).data_type() {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => self
                .file
                .stats
                .get(id)
                .is_some_and(|s| s.min.is_some() || s.max.is_some()),
            _ => true,
        }
    }

    /// The Parquet leaf column of table column `name` (`None` when the
    /// file lacks it or it is nested: no single statistics or filter).
    fn leaf(&self, name: &str) -> Option<usize> {
        let field = self.column(name)?;
        let schema = self.builder.parquet_schema();
        let mut leaves =
            (0..schema.num_columns()).filter(|l| schema.get_column_root_idx(*l) == field);
        match (leaves.next(), leaves.next()) {
            (Some(leaf), None) => Some(leaf),
            _ => None,
        }
    }

    /// Whether the writer wrote a bloom filter for table column `name` in
    /// any of `row_groups` (from the footer; nothing is fetched).
    pub fn has_bloom_filter(&self, row_groups: &[usize], name: &str) -> bool {
        let Some(leaf) = self.leaf(name) else {
            return false;
        };
        let meta = self.metadata();
        row_groups.iter().any(|rg| {
            meta.row_group(*rg)
                .column(leaf)
                .bloom_filter_offset()
                .is_some()
        })
    }

    /// The bloom filter of table column `name` in row group `row_group`, if
    /// the file has one (fetched from the store: call only when it helps).
    pub async fn bloom_filter(&mut self, row_group: usize, name: &str) -> Result<Option<Sbbf>> {
        let Some(leaf) = self.leaf(name) else {
            return Ok(None);
        };
        self.builder
            .get_row_group_column_bloom_filter(row_group, leaf)
            .await
            .map_err(|e| Error::parquet(self.path, e))
    }
}

/// Optional parts of a scan: a pruner, and counters to add to.
#[derive(Debug, Clone, Default)]
pub struct ScanHooks {
    /// Skips row groups and rows that cannot match.
    pub pruner: Option<Arc<dyn FilePruner>>,
    /// Where to count what was read.
    pub counters: Option<Arc<ReadCounters>>,
}
