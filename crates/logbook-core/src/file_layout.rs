//! How rows are laid out in the data files a table writes: the Parquet
//! writer's settings, and the order of rows within each row group.
//!
//! A table may name sort columns and bloom filter columns (by field id,
//! in [`TableProperties`], so renames keep them). Sorting happens per row
//! group, not per partition: a writer buffers one row group's rows (as it
//! already bounds memory by [`crate::TableOptions::row_group_bytes`]),
//! sorts them and writes them as one row group, so memory stays bounded
//! however large the partition. Across row groups the order restarts,
//! which still narrows every row group's and page's bounds; a global
//! order would need a spill-to-disk sort (not done).

use arrow_array::RecordBatch;
use arrow_ord::sort::{lexsort_to_indices, SortColumn, SortOptions};
use arrow_schema::SchemaRef;
use arrow_select::take::take_record_batch;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};
use crate::format::TableProperties;
use crate::options::TableOptions;
use crate::schema::TableSchema;

/// The layout of one table's files, resolved against the schema written.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileLayout {
    /// Positions, in the file schema, of the sort columns.
    sort: Vec<usize>,
    /// File names of the columns with bloom filters.
    bloom: Vec<String>,
}

impl FileLayout {
    /// The layout `properties` ask for; columns dropped since are ignored.
    pub(crate) fn new(schema: &TableSchema, properties: &TableProperties) -> Self {
        let position = |id: &u32| schema.columns.iter().position(|c| c.id == *id);
        Self {
            sort: properties.sort_by.iter().filter_map(position).collect(),
            bloom: properties
                .bloom_filters
                .iter()
                .filter_map(position)
                .map(|i| schema.columns[i].file_name().to_string())
                .collect(),
        }
    }

    /// Whether rows are buffered and sorted per row group.
    pub(crate) fn sorts(&self) -> bool {
        !self.sort.is_empty()
    }

    /// The Parquet writer's settings.
    pub(crate) fn writer_properties(&self, opts: &TableOptions) -> WriterProperties {
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            // Bounds per page, written as the page index (column and offset
            // indexes): what lets a reader skip pages, not just row groups.
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(opts.max_row_group_rows))
            .set_created_by(format!("logbook {}", env!("CARGO_PKG_VERSION")));
        for name in &self.bloom {
            // Sized for a full row group, then folded down to the rows
            // actually written, at parquet's default false-positive rate.
            let path = ColumnPath::from(name.as_str());
            props = props
                .set_column_bloom_filter_enabled(path.clone(), true)
                .set_column_bloom_filter_max_ndv(path, opts.max_row_group_rows as u64);
        }
        props.build()
    }

    /// `batches` (of `schema`) as one batch in sort order.
    pub(crate) fn sorted(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        what: &str,
    ) -> Result<RecordBatch> {
        let all = arrow_select::concat::concat_batches(schema, batches)
            .map_err(|e| Error::arrow(what, e))?;
        let columns: Vec<SortColumn> = self
            .sort
            .iter()
            .map(|i| SortColumn {
                values: all.column(*i).clone(),
                options: Some(SortOptions::default()),
            })
            .collect();
        let order = lexsort_to_indices(&columns, None).map_err(|e| Error::arrow(what, e))?;
        take_record_batch(&all, &order).map_err(|e| Error::arrow(what, e))
    }
}
