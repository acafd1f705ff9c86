//! Per-column statistics of a data file, taken from the footer its writer
//! just produced (no extra read), kept in the manifest beside the file.
//!
//! Only bounds that are true are kept: a column loses its `min`/`max` when
//! any row group lacks them, when the writer truncated the maximum, or when
//! its type has no JSON form other engines compare the same way (booleans,
//! and timestamps, whose Delta form has millisecond precision only and so
//! could cut off a maximum). A truncated string minimum is still a lower
//! bound, so it is kept.

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Schema};
use chrono::NaiveDate;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use serde_json::Value;

use crate::format::ColumnStats;

/// The float columns of `batch` that hold a NaN. Parquet writers leave NaN
/// out of a column's statistics, so a file with one has no true bounds for
/// that column (a filter `x > 5` must not skip a file holding NaN, which
/// logbook's own reads return for it).
pub(crate) fn nan_columns(batch: &RecordBatch) -> Vec<usize> {
    batch
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| match c.data_type() {
            DataType::Float32 => c
                .as_primitive::<Float32Type>()
                .values()
                .iter()
                .any(|v| v.is_nan()),
            DataType::Float64 => c
                .as_primitive::<Float64Type>()
                .values()
                .iter()
                .any(|v| v.is_nan()),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

/// The statistics of every column of `schema` (flat, one Parquet leaf per
/// field) in a file whose footer is `meta`, keyed by field id; columns in
/// `nan_columns` get no bounds.
pub(crate) fn from_footer(
    schema: &Schema,
    meta: &ParquetMetaData,
    nan_columns: &BTreeSet<usize>,
) -> BTreeMap<u32, ColumnStats> {
    let mut out = BTreeMap::new();
    for (i, field) in schema.fields().iter().enumerate() {
        let Some(id) = field
            .metadata()
            .get(PARQUET_FIELD_ID_META_KEY)
            .and_then(|v| v.parse::<u32>().ok())
        else {
            continue;
        };
        let mut acc = Bounds::default();
        let mut nulls = 0u64;
        let mut complete = !nan_columns.contains(&i);
        for rg in meta.row_groups() {
            let Some(stats) = rg.columns().get(i).and_then(|c| c.statistics()) else {
                complete = false;
                continue;
            };
            nulls += stats.null_count_opt().unwrap_or(0);
            acc.merge(field.data_type(), stats);
        }
        out.insert(
            id,
            ColumnStats {
                min: acc.min.filter(|_| complete),
                max: acc.max.filter(|_| complete && !acc.inexact_max),
                nulls,
            },
        );
    }
    out
}

#[derive(Default)]
struct Bounds {
    min: Option<Value>,
    max: Option<Value>,
    inexact_max: bool,
    /// A row group had values but no usable bound: no bound at all.
    unknown: bool,
}

impl Bounds {
    fn merge(&mut self, ty: &DataType, stats: &Statistics) {
        if self.unknown {
            return;
        }
        let (Some((lo, lo_key)), Some((hi, hi_key))) =
            (bound(ty, stats, true), bound(ty, stats, false))
        else {
            // All nulls has no bounds and constrains nothing; anything
            // else without bounds makes the file's bounds unknown.
            if stats.min_bytes_opt().is_some() || stats.max_bytes_opt().is_some() {
                self.unknown = true;
                self.min = None;
                self.max = None;
            }
            return;
        };
        self.inexact_max |= !stats.max_is_exact();
        if self.min.as_ref().is_none_or(|m| lo_key < key(m)) {
            self.min = Some(lo);
        }
        if self.max.as_ref().is_none_or(|m| hi_key > key(m)) {
            self.max = Some(hi);
        }
    }
}

/// An order-preserving key for comparing bounds of one column.
#[derive(PartialEq, PartialOrd)]
enum Key {
    Num(f64),
    Int(i64),
    Str(String),
}

fn key(v: &Value) -> Key {
    match v {
        Value::Number(n) if n.is_i64() => Key::Int(n.as_i64().unwrap_or_default()),
        Value::Number(n) => Key::Num(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Key::Str(s.clone()),
        _ => Key::Str(String::new()),
    }
}

/// The minimum (or maximum) of one row group as a JSON value, with its key.
fn bound(ty: &DataType, stats: &Statistics, min: bool) -> Option<(Value, Key)> {
    let pick = |lo: Option<Value>, hi: Option<Value>| if min { lo } else { hi };
    let value = match (ty, stats) {
        (DataType::Int32, Statistics::Int32(s)) => pick(
            s.min_opt().map(|v| (*v).into()),
            s.max_opt().map(|v| (*v).into()),
        ),
        (DataType::Int64, Statistics::Int64(s)) => pick(
            s.min_opt().map(|v| (*v).into()),
            s.max_opt().map(|v| (*v).into()),
        ),
        (DataType::Float32, Statistics::Float(s)) => pick(
            s.min_opt().and_then(|v| finite(*v as f64)),
            s.max_opt().and_then(|v| finite(*v as f64)),
        ),
        (DataType::Float64, Statistics::Double(s)) => pick(
            s.min_opt().and_then(|v| finite(*v)),
            s.max_opt().and_then(|v| finite(*v)),
        ),
        (DataType::Date32, Statistics::Int32(s)) => pick(
            s.min_opt().and_then(|v| date(*v)),
            s.max_opt().and_then(|v| date(*v)),
        ),
        (DataType::Utf8, Statistics::ByteArray(s)) => pick(
            s.min_opt().and_then(|v| v.as_utf8().ok()).map(|v| v.into()),
            s.max_opt().and_then(|v| v.as_utf8().ok()).map(|v| v.into()),
        ),
        _ => None,
    }?;
    let k = key(&value);
    Some((value, k))
}

fn finite(v: f64) -> Option<Value> {
    serde_json::Number::from_f64(v).map(Value::Number)
}

fn date(days: i32) -> Option<Value> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let d = epoch.checked_add_signed(chrono::Duration::days(days as i64))?;
    Some(Value::String(d.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow_schema::Field;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use serde_json::json;

    use super::*;

    fn with_id(f: Field, id: u32) -> Field {
        f.with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())].into())
    }

    #[test]
    fn bounds_span_row_groups_and_count_nulls() {
        let schema = Arc::new(Schema::new(vec![
            with_id(Field::new("date", DataType::Date32, false), 1),
            with_id(Field::new("n", DataType::Int64, true), 2),
            with_id(Field::new("x", DataType::Float64, true), 3),
            with_id(Field::new("s", DataType::Utf8, true), 4),
        ]));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2))
            .build();
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Date32Array::from(vec![20527, 20527, 20527])),
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3)])),
                Arc::new(Float64Array::from(vec![None, None, None])),
                Arc::new(StringArray::from(vec![Some("b"), Some("a"), Some("c")])),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
        let meta = w.close().unwrap();
        assert_eq!(meta.num_row_groups(), 2);
        let stats = from_footer(&schema, &meta, &BTreeSet::new());
        assert_eq!(stats[&1].min, Some(json!("2026-03-15")));
        assert_eq!(stats[&1].max, Some(json!("2026-03-15")));
        assert_eq!(
            (stats[&2].min.clone(), stats[&2].max.clone()),
            (Some(json!(-3)), Some(json!(5)))
        );
        assert_eq!(stats[&2].nulls, 1);
        assert_eq!((stats[&3].min.clone(), stats[&3].nulls), (None, 3));
        assert_eq!(
            (stats[&4].min.clone(), stats[&4].max.clone()),
            (Some(json!("a")), Some(json!("c")))
        );
    }

    #[test]
    fn a_column_holding_nan_has_no_bounds() {
        let schema = Arc::new(Schema::new(vec![with_id(
            Field::new("x", DataType::Float64, true),
            1,
        )]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Float64Array::from(vec![1.0, f64::NAN]))],
        )
        .unwrap();
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), None).unwrap();
        w.write(&batch).unwrap();
        let meta = w.close().unwrap();
        let nan: BTreeSet<usize> = nan_columns(&batch).into_iter().collect();
        assert_eq!(nan, BTreeSet::from([0]));
        let stats = from_footer(&schema, &meta, &nan);
        assert_eq!((stats[&1].min.clone(), stats[&1].max.clone()), (None, None));
        // Without the NaN check the footer's bounds would say max = 1.
        let unchecked = from_footer(&schema, &meta, &BTreeSet::new());
        assert_eq!(unchecked[&1].max, Some(json!(1.0)));
    }
}
