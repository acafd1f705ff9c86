//! Inside a file: row groups by their footer bounds, then by bloom
//! filters, then pages by the page index. Core's reader asks through
//! [`FilePruner`] once a file's footer is read; what is skipped is never
//! fetched.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray};
use arrow_schema::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use futures::future::BoxFuture;
use futures::FutureExt;
use logbook_core::reader::{FileAccess, FilePruner, Selection};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::bloom_filter::Sbbf;

use super::files::cast_bounds;
use super::predicate::{PruneCounts, ScanPredicate};

/// A [`FilePruner`] testing a scan's predicate against each file.
#[derive(Debug)]
pub(crate) struct InsideFiles {
    pub(crate) predicate: Arc<ScanPredicate>,
    /// The table's Arrow schema as the scan reads it (bounds are cast to it).
    pub(crate) schema: SchemaRef,
}

impl FilePruner for InsideFiles {
    fn wants_page_index(&self) -> bool {
        !self.predicate.per_column.is_empty()
    }

    fn select<'a>(
        &'a self,
        mut file: FileAccess<'a>,
    ) -> BoxFuture<'a, logbook_core::Result<Selection>> {
        async move {
            let counts = &self.predicate.counts;
            let all = file.metadata().num_row_groups();
            let mut keep: Vec<usize> = (0..all).collect();
            let whole = &self.predicate.whole;
            keep = self.prune(whole, &file, keep, |file, rgs| {
                RowGroupStats::new(file, rgs, &self.schema)
            });
            PruneCounts::add(&counts.row_groups_by_statistics, all - keep.len());

            let before = keep.len();
            keep = self.by_bloom_filters(&mut file, keep).await;
            PruneCounts::add(&counts.row_groups_by_bloom_filter, before - keep.len());

            let (keep, rows) = self.by_page_index(&file, keep);
            Ok(Selection {
                row_groups: (keep.len() < all).then_some(keep),
                rows,
            })
        }
        .boxed()
    }
}

impl InsideFiles {
    /// The row groups of `keep` that `predicate` cannot rule out, given the
    /// statistics `stats` builds over them.
    fn prune<'f, S: PruningStatistics>(
        &self,
        predicate: &PruningPredicate,
        file: &'f FileAccess<'_>,
        keep: Vec<usize>,
        stats: impl FnOnce(&'f FileAccess<'_>, &[usize]) -> S,
    ) -> Vec<usize> {
        if keep.is_empty() {
            return keep;
        }
        let stats = stats(file, &keep);
        retain(predicate, &stats, keep)
    }

    /// Drop row groups whose bloom filters rule out every value an
    /// equality or `IN` needs. Filters are fetched only for columns the
    /// predicate pins to literals, and only where the writer wrote them.
    async fn by_bloom_filters(
        &self,
        file: &mut FileAccess<'_>,
        mut keep: Vec<usize>,
    ) -> Vec<usize> {
        for name in self.predicate.whole.literal_columns() {
            let Some(field) = file.column(&name) else {
                continue;
            };
            let has_filter = file.has_bloom_filter(&keep, &name);
            if !has_filter || keep.is_empty() {
                continue;
            }
            // A filter that cannot be read keeps its row group: pruning is
            // an optimisation, never a reason to fail the query.
            let mut filters = Vec::with_capacity(keep.len());
            for rg in &keep {
                filters.push(file.bloom_filter(*rg, &name).await.ok().flatten());
            }
            // Values are hashed as the file stores them: a column widened
            // since (int32 to int64) was hashed as 4 bytes in older files.
            let stats = BloomStats {
                column: name,
                filters,
                ty: file.schema().field(field).data_type().clone(),
            };
            keep = retain(&self.predicate.whole, &stats, keep);
        }
        keep
    }

    /// Rows to read within the kept row groups, by each single-column
    /// conjunct's test of that column's pages; row groups left with no
    /// rows are dropped.
    fn by_page_index(
        &self,
        file: &FileAccess<'_>,
        keep: Vec<usize>,
    ) -> (Vec<usize>, Option<RowSelection>) {
        let meta = file.metadata().clone();
        let (Some(_), Some(_)) = (meta.column_index(), meta.offset_index()) else {
            return (keep, None);
        };
        let counts = &self.predicate.counts;
        let mut selectors: Vec<RowSelector> = Vec::new();
        let mut kept = Vec::with_capacity(keep.len());
        let mut narrowed = false;
        for rg in keep {
            let rows = meta.row_group(rg).num_rows() as usize;
            let mut selection = RowSelection::from(vec![RowSelector::select(rows)]);
            for (name, predicate) in &self.predicate.per_column {
                let Some(pages) = PageStats::new(file, rg, name, &self.schema) else {
                    continue;
                };
                let Ok(mask) = predicate.prune(&pages) else {
                    continue;
                };
                PruneCounts::add(&counts.pages, mask.len());
                PruneCounts::add(&counts.pages_pruned, mask.iter().filter(|k| !**k).count());
                if mask.iter().all(|k| *k) {
                    continue;
                }
                narrowed = true;
                let column = pages.selection(&mask, rows);
                selection = selection.intersection(&column);
            }
            if selection.selects_any() {
                kept.push(rg);
                selectors.extend(selection.iter().cloned());
            } else {
                PruneCounts::add(&counts.row_groups_by_page_index, 1);
            }
        }
        (kept, narrowed.then(|| RowSelection::from(selectors)))
    }
}

/// The row groups of `keep` (one container of `stats` each) `predicate`
/// cannot rule out; an error keeps them all.
fn retain(
    predicate: &PruningPredicate,
    stats: &impl PruningStatistics,
    keep: Vec<usize>,
) -> Vec<usize> {
    match predicate.prune(stats) {
        Ok(mask) => keep
            .into_iter()
            .zip(mask)
            .filter_map(|(rg, k)| k.then_some(rg))
            .collect(),
        Err(_) => keep,
    }
}

/// The bounds of one column in a file, read with parquet's converter;
/// `None` when its bounds may not hold (a float column holding NaN).
fn converter<'a>(file: &'a FileAccess<'_>, name: &str) -> Option<StatisticsConverter<'a>> {
    if !file.bounds_hold(name) {
        return None;
    }
    let field = file.schema().field(file.column(name)?);
    StatisticsConverter::try_new(field.name(), file.schema(), file.parquet_schema()).ok()
}

fn table_type(schema: &SchemaRef, column: &Column) -> Option<DataType> {
    schema
        .field_with_name(&column.name)
        .ok()
        .map(|f| f.data_type().clone())
}

/// Row groups as containers, with their footer bounds.
struct RowGroupStats<'a> {
    file: &'a FileAccess<'a>,
    row_groups: Vec<&'a parquet::file::metadata::RowGroupMetaData>,
    schema: &'a SchemaRef,
}

impl<'a> RowGroupStats<'a> {
    fn new(file: &'a FileAccess<'a>, keep: &[usize], schema: &'a SchemaRef) -> Self {
        let meta = file.metadata();
        Self {
            row_groups: keep.iter().map(|rg| meta.row_group(*rg)).collect(),
            file,
            schema,
        }
    }

    fn bounds(&self, column: &Column, max: bool) -> Option<ArrayRef> {
        let c = converter(self.file, &column.name)?;
        let groups = self.row_groups.iter().copied();
        let values = match max {
            false => c.row_group_mins(groups),
            true => c.row_group_maxes(groups),
        };
        cast_bounds(values.ok()?, &table_type(self.schema, column)?)
    }
}

impl PruningStatistics for RowGroupStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }

    fn num_containers(&self) -> usize {
        self.row_groups.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let c = converter(self.file, &column.name)?;
        let counts = c
            .row_group_null_counts(self.row_groups.iter().copied())
            .ok()?;
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(arrow_array::UInt64Array::from_iter_values(
            self.row_groups.iter().map(|rg| rg.num_rows() as u64),
        )))
    }

    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// The pages of one column in one row group as containers.
struct PageStats<'a> {
    column: &'a str,
    mins: ArrayRef,
    maxes: ArrayRef,
    nulls: ArrayRef,
    /// Rows per page.
    rows: Vec<usize>,
}

impl<'a> PageStats<'a> {
    fn new(file: &FileAccess<'_>, rg: usize, column: &'a str, schema: &SchemaRef) -> Option<Self> {
        let meta = file.metadata();
        let (index, offsets) = (meta.column_index()?, meta.offset_index()?);
        let c = converter(file, column)?;
        let leaf = c.parquet_column_index()?;
        let ty = schema.field_with_name(column).ok()?.data_type().clone();
        let groups = [rg];
        let mins = cast_bounds(c.data_page_mins(index, offsets, &groups).ok()?, &ty)?;
        let maxes = cast_bounds(c.data_page_maxes(index, offsets, &groups).ok()?, &ty)?;
        let nulls = Arc::new(c.data_page_null_counts(index, offsets, &groups).ok()?);
        let locations = offsets.get(rg)?.get(leaf)?.page_locations();
        let total = meta.row_group(rg).num_rows() as usize;
        let starts: Vec<usize> = locations
            .iter()
            .map(|p| p.first_row_index as usize)
            .collect();
        let rows: Vec<usize> = starts
            .iter()
            .enumerate()
            .map(|(i, s)| starts.get(i + 1).copied().unwrap_or(total) - s)
            .collect();
        if rows.len() != mins.len() {
            return None;
        }
        Some(Self {
            column,
            mins,
            maxes,
            nulls,
            rows,
        })
    }

    /// The rows of the kept pages.
    fn selection(&self, keep: &[bool], total: usize) -> RowSelection {
        let mut selectors: Vec<RowSelector> = self
            .rows
            .iter()
            .zip(keep)
            .map(|(n, k)| match k {
                true => RowSelector::select(*n),
                false => RowSelector::skip(*n),
            })
            .collect();
        let covered: usize = self.rows.iter().sum();
        if covered < total {
            selectors.push(RowSelector::select(total - covered));
        }
        RowSelection::from(selectors)
    }

    fn mine(&self, column: &Column) -> bool {
        column.name == self.column
    }
}

impl PruningStatistics for PageStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.mine(column).then(|| self.mins.clone())
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.mine(column).then(|| self.maxes.clone())
    }

    fn num_containers(&self) -> usize {
        self.rows.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.mine(column).then(|| self.nulls.clone())
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(arrow_array::UInt64Array::from_iter_values(
            self.rows.iter().map(|n| *n as u64),
        )))
    }

    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Row groups as containers, with one column's bloom filters: a filter
/// proves a value absent, never present.
struct BloomStats {
    column: String,
    filters: Vec<Option<Sbbf>>,
    /// The column's type in the file (what the writer hashed).
    ty: DataType,
}

impl BloomStats {
    /// May `filter` hold `value`? (`true` when the value does not convert
    /// exactly to the file's type, or the type is not one the writer
    /// hashes the same way.)
    fn may_hold(&self, filter: &Sbbf, value: &ScalarValue) -> bool {
        let value = if value.data_type() == self.ty {
            value.clone()
        } else {
            match value.cast_to(&self.ty) {
                // Only an exact conversion says anything: 2^40 cast to
                // int32 is not a value an int32 file could hold.
                Ok(v) if v.cast_to(&value.data_type()).ok().as_ref() == Some(value) => v,
                _ => return true,
            }
        };
        match value {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)) => filter.check(s.as_str()),
            ScalarValue::Int64(Some(v)) => filter.check(&v),
            ScalarValue::Int32(Some(v)) | ScalarValue::Date32(Some(v)) => filter.check(&v),
            ScalarValue::Int16(Some(v)) => filter.check(&(v as i32)),
            ScalarValue::Int8(Some(v)) => filter.check(&(v as i32)),
            ScalarValue::Float64(Some(v)) => filter.check(&v),
            ScalarValue::Float32(Some(v)) => filter.check(&v),
            _ => true,
        }
    }
}

impl PruningStatistics for BloomStats {
    fn min_values(&self, _: &Column) -> Option<ArrayRef> {
        None
    }

    fn max_values(&self, _: &Column) -> Option<ArrayRef> {
        None
    }

    fn num_containers(&self) -> usize {
        self.filters.len()
    }

    fn null_counts(&self, _: &Column) -> Option<ArrayRef> {
        None
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        None
    }

    #[allow(clippy::mutable_key_type)] // ScalarValue, as the trait declares it
    fn contained(&self, column: &Column, values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        if column.name != self.column {
            return None;
        }
        Some(
            self.filters
                .iter()
                .map(|f| match f {
                    Some(f) if !values.iter().any(|v| self.may_hold(f, v)) => Some(false),
                    _ => None,
                })
                .collect(),
        )
    }
}
