//! Key columns as bytes to hash and compare, and the rows that can match.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, PrimitiveArray, StringViewArray};
use arrow_schema::DataType;
use datafusion::arrow::compute::cast;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::Result;

/// How key columns become bytes to hash and compare.
#[derive(Debug)]
pub enum KeyCodec {
    /// One string column: its UTF-8 bytes (nulls never match).
    Strings,
    /// Anything else: arrow's row format.
    Rows(RowConverter),
}

/// Encoded keys of one batch.
pub enum Encoded {
    Strings(StringViewArray),
    Rows(Rows),
}

impl Encoded {
    /// The bytes of `row`'s key.
    pub fn key(&self, row: usize) -> &[u8] {
        match self {
            Encoded::Strings(a) => a.value(row).as_bytes(),
            Encoded::Rows(r) => r.row(row).data(),
        }
    }
}

impl KeyCodec {
    /// The codec for these key columns.
    pub fn new(keys: &[ArrayRef], nulls_equal: bool) -> Result<Self> {
        let one_string = matches!(
            keys,
            [k] if matches!(k.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        );
        if one_string && !nulls_equal {
            return Ok(KeyCodec::Strings);
        }
        let fields = keys
            .iter()
            .map(|k| SortField::new(k.data_type().clone()))
            .collect();
        Ok(KeyCodec::Rows(RowConverter::new(fields)?))
    }

    /// Encode a batch's key columns.
    pub fn encode(&self, keys: &[ArrayRef]) -> Result<Encoded> {
        Ok(match self {
            KeyCodec::Strings => Encoded::Strings(
                cast(&keys[0], &DataType::Utf8View)?
                    .as_string_view()
                    .clone(),
            ),
            KeyCodec::Rows(converter) => Encoded::Rows(converter.convert_columns(keys)?),
        })
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        match self {
            KeyCodec::Strings => 0,
            KeyCodec::Rows(c) => c.size(),
        }
    }
}

/// Rows whose key has a null in any column, when nulls do not match.
pub fn null_rows(keys: &[ArrayRef], nulls_equal: bool) -> Option<Vec<bool>> {
    if nulls_equal {
        return None;
    }
    let mut skip: Option<Vec<bool>> = None;
    for key in keys {
        if let Some(nulls) = key.logical_nulls() {
            let skip = skip.get_or_insert_with(|| vec![false; key.len()]);
            for (s, valid) in skip.iter_mut().zip(nulls.iter()) {
                *s |= !valid;
            }
        }
    }
    skip
}

/// Bounds and points as `i64` (see [`super::pattern::is_orderable`]).
pub fn as_i64(array: &ArrayRef) -> Result<PrimitiveArray<Int64Type>> {
    Ok(cast(array, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}
