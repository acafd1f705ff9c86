//! Files: the manifest's per-file column bounds, tested at planning time,
//! so a file that cannot match is never opened (no footer read).

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, StringArray, UInt64Array};
use arrow_schema::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use logbook_core::{ColumnStats, DataFile, TableSchema};
use serde_json::Value;

use super::predicate::{PruneCounts, ScanPredicate};

/// Keep the files of `files` that may hold a row matching `predicate`.
pub(crate) fn prune_files(
    predicate: &ScanPredicate,
    table: &TableSchema,
    arrow: &SchemaRef,
    files: Vec<DataFile>,
) -> Vec<DataFile> {
    if files.is_empty() {
        return files;
    }
    let stats = FileStats {
        files: &files,
        table,
        arrow,
    };
    // An error here (a bound that will not cast) keeps every file.
    let Ok(keep) = predicate.whole.prune(&stats) else {
        return files;
    };
    let before = files.len();
    let kept: Vec<DataFile> = files
        .into_iter()
        .zip(keep)
        .filter_map(|(f, k)| k.then_some(f))
        .collect();
    PruneCounts::add(&predicate.counts.files, before - kept.len());
    kept
}

/// Files as containers: one row per file.
struct FileStats<'a> {
    files: &'a [DataFile],
    table: &'a TableSchema,
    arrow: &'a SchemaRef,
}

impl FileStats<'_> {
    fn column(&self, column: &Column) -> Option<(u32, &DataType)> {
        let id = self.table.column(&column.name)?.id;
        let field = self.arrow.field_with_name(&column.name).ok()?;
        Some((id, field.data_type()))
    }

    /// One bound per file, as `ty` (null where the file has none).
    fn bounds(
        &self,
        column: &Column,
        pick: fn(&ColumnStats) -> Option<&Value>,
    ) -> Option<ArrayRef> {
        let (id, ty) = self.column(column)?;
        let text: StringArray = self
            .files
            .iter()
            .map(|f| f.stats.get(&id).and_then(pick).and_then(json_text))
            .collect();
        if text.null_count() == text.len() {
            return None;
        }
        cast_bounds(Arc::new(text), ty)
    }
}

/// A JSON bound as text arrow can cast from (`"2026-01-01"`, `42`, `1.5`).
fn json_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `bounds` as `ty`; `None` when the cast is not possible (an unknown
/// bound prunes nothing).
pub(crate) fn cast_bounds(bounds: ArrayRef, ty: &DataType) -> Option<ArrayRef> {
    if bounds.data_type() == ty {
        return Some(bounds);
    }
    let options = arrow_cast::CastOptions {
        safe: true,
        ..Default::default()
    };
    arrow_cast::cast_with_options(&bounds, ty, &options).ok()
}

impl PruningStatistics for FileStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, |s| s.min.as_ref())
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, |s| s.max.as_ref())
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let (id, _) = self.column(column)?;
        let counts: UInt64Array = self
            .files
            .iter()
            .map(|f| f.stats.get(&id).map(|s| s.nulls))
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(UInt64Array::from_iter_values(
            self.files.iter().map(|f| f.rows),
        )))
    }

    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
