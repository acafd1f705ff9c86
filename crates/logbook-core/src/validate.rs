//! Checking incoming batches against a table's schema.

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::schema::TableSchema;

/// Check that `batch` has exactly the columns of `schema` (except those in
/// `managed`, which the caller fills in) with the same types, and no nulls
/// where the schema forbids them. Returns the columns in schema order,
/// labelled with the schema's Arrow fields; `managed` columns are left out.
///
/// `what` names the thing being written in errors (e.g. "partition 2026-03-15").
pub(crate) fn conform(
    table: &str,
    what: &str,
    schema: &TableSchema,
    batch: &RecordBatch,
    managed: &[&str],
) -> Result<RecordBatch> {
    let mismatch = |field: &str, problem: String| Error::SchemaMismatch {
        table: table.to_string(),
        what: what.to_string(),
        field: field.to_string(),
        problem: format!(
            "{problem} (the table is at schema version {}: {})",
            schema.version,
            schema.spec()
        ),
    };
    let given = batch.schema();
    for field in given.fields() {
        if managed.contains(&field.name().as_str()) {
            return Err(mismatch(
                field.name(),
                "is managed by logbook; leave it out of the input".into(),
            ));
        }
        if schema.column(field.name()).is_none() {
            return Err(mismatch(
                field.name(),
                "is not a column of the table".into(),
            ));
        }
    }
    let target = schema.arrow_schema();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (col, field) in schema.columns.iter().zip(target.fields()) {
        if managed.contains(&col.name.as_str()) {
            continue;
        }
        let Ok(i) = given.index_of(&col.name) else {
            return Err(mismatch(&col.name, "is missing from the input".into()));
        };
        let expected = col.ty.arrow_type();
        let array = match same_values(batch.column(i), &expected) {
            Some(cast) => cast.map_err(|e| Error::arrow(format!("table {table}, {what}"), e))?,
            None => batch.column(i).clone(),
        };
        if array.data_type() != &expected {
            return Err(mismatch(
                &col.name,
                format!(
                    "has type {} but the table column is {} ({expected})",
                    array.data_type(),
                    col.ty.name()
                ),
            ));
        }
        if !col.nullable && array.null_count() > 0 {
            return Err(mismatch(
                &col.name,
                format!(
                    "has {} null value(s) but is not nullable",
                    array.null_count()
                ),
            ));
        }
        fields.push(field.clone());
        columns.push(array);
    }
    RecordBatch::try_new(
        std::sync::Arc::new(arrow_schema::Schema::new(fields)),
        columns,
    )
    .map_err(|e| Error::arrow(format!("table {table}, {what}"), e))
}

/// Cast `array` to `expected` when only the representation differs (string
/// and binary view or large types, which query engines produce), so such
/// batches are accepted as they are; `None` when no such cast applies.
fn same_values(
    array: &ArrayRef,
    expected: &DataType,
) -> Option<std::result::Result<ArrayRef, arrow_schema::ArrowError>> {
    let representation_only = matches!(
        (array.data_type(), expected),
        (DataType::Utf8View | DataType::LargeUtf8, DataType::Utf8)
            | (
                DataType::BinaryView | DataType::LargeBinary,
                DataType::Binary
            )
    );
    representation_only.then(|| arrow_cast::cast(array, expected))
}
