//! Results for clients outside DataFusion (Flight SQL, Python): string and
//! binary view columns, which the scan produces for speed, as the classic
//! types every Arrow reader takes.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// `schema` with view types (which the scan uses for speed) in their
/// classic forms, which every Arrow client reads.
pub fn plain_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| {
                Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
                    .with_metadata(f.metadata().clone())
            })
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

fn plain_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// `batch` cast to `schema` (from [`plain_schema`]); unchanged when it
/// has no view columns.
pub fn plain_batch(
    schema: &SchemaRef,
    batch: RecordBatch,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow_cast::cast(c, f.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, StringViewArray};

    #[test]
    fn view_columns_become_plain_strings() {
        let schema = Schema::new(vec![Field::new("s", DataType::Utf8View, true)]);
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![Arc::new(StringViewArray::from(vec![Some("Berlin"), None]))],
        )
        .unwrap();
        let plain = plain_schema(&schema);
        let out = plain_batch(&plain, batch).unwrap();
        assert_eq!(out.column(0).data_type(), &DataType::Utf8);
        assert!(out.column(0).is_null(1));
    }
}
