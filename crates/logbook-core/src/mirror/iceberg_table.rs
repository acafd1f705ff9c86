//! How a logbook table looks to Iceberg readers: types, the schema and its
//! name mapping, the partition spec, snapshot ids and bound encodings.
//!
//! - Field ids are logbook's own (stable across renames and widenings).
//! - The date column is an identity partition (field id 1000), so engines
//!   prune by the partition value; files keep the column too.
//! - `timestamp` is Iceberg `timestamp`, `timestamptz` is `timestamptz`:
//!   pyiceberg cannot promote one to the other, so the mapping is exact.
//! - `schema.name-mapping.default` maps each column's file name to its id,
//!   for files written without Parquet field ids. Names of dropped columns
//!   that old files still hold map to ids from [`RETIRED_ID_BASE`] down,
//!   which no column ever gets: pyiceberg and DuckDB refuse a file column
//!   without an id or a mapping, and an id of a live column would read the
//!   dropped data as that column.

use serde_json::{json, Value};

use crate::format::{ColumnStats, DataFile};
use crate::schema::{ColumnType, TableSchema};

/// The partition field id of the date partition (Iceberg starts them at 1000).
pub(crate) const PARTITION_FIELD_ID: i32 = 1000;
/// The id a retired name maps to, counting down: far above any id logbook
/// assigns (they count up from 1).
pub(crate) const RETIRED_ID_BASE: i32 = i32::MAX;
/// Bounds of longer strings are left out (Iceberg's own writers truncate to
/// 16 characters; leaving them out keeps manifests small and is always
/// correct).
const MAX_STRING_BOUND: usize = 64;

/// The Iceberg snapshot id of logbook version `version`: ids must be unique
/// within the table and positive, and logbook versions already are; a
/// reader of the mirror finds the snapshot of any version without a lookup.
pub(crate) fn snapshot_id(version: u64) -> i64 {
    version as i64 + 1
}

/// The Iceberg primitive type of a logbook column type.
pub(crate) fn iceberg_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Bool => "boolean",
        ColumnType::Int32 => "int",
        ColumnType::Int64 => "long",
        ColumnType::Float32 => "float",
        ColumnType::Float64 => "double",
        ColumnType::String => "string",
        ColumnType::Date => "date",
        ColumnType::Timestamp => "timestamp",
        ColumnType::TimestampTz => "timestamptz",
    }
}

/// The schema as Iceberg JSON; its id is logbook's schema version.
pub(crate) fn schema_json(schema: &TableSchema) -> Value {
    let fields: Vec<Value> = schema
        .columns
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "name": c.name,
                "required": !c.nullable,
                "type": iceberg_type(c.ty),
            })
        })
        .collect();
    json!({"type": "struct", "schema-id": schema.version, "fields": fields})
}

/// The date column, for a partitioned table: its field id and the name of
/// its partition field (the name files hold it under, which never changes).
pub(crate) fn partition_source(schema: &TableSchema) -> Option<(u32, String)> {
    let name = schema.partition_column()?;
    let c = schema.column(name)?;
    Some((c.id, c.file_name().to_string()))
}

/// The partition spec's fields: identity on the date column, or none for a
/// dimension table.
pub(crate) fn partition_fields(schema: &TableSchema) -> Value {
    match partition_source(schema) {
        Some((source, name)) => json!([{
            "source-id": source,
            "field-id": PARTITION_FIELD_ID,
            "name": name,
            "transform": "identity",
        }]),
        None => json!([]),
    }
}

/// `schema.name-mapping.default`: file names to field ids.
pub(crate) fn name_mapping(schema: &TableSchema) -> String {
    let mut out: Vec<Value> = schema
        .columns
        .iter()
        .map(|c| json!({"field-id": c.id, "names": [c.file_name()]}))
        .collect();
    out.extend(
        schema
            .retired_names
            .iter()
            .enumerate()
            .map(|(k, name)| json!({"field-id": RETIRED_ID_BASE - k as i32, "names": [name]})),
    );
    Value::Array(out).to_string()
}

/// Days since 1970-01-01, Iceberg's date value.
pub(crate) fn day(date: chrono::NaiveDate) -> i32 {
    (date - chrono::NaiveDate::default()).num_days() as i32
}

/// One bound in Iceberg's single-value binary form (spec appendix D), from
/// the JSON form logbook keeps; `None` when there is none to give.
/// `lower` says which side: a float zero is written as `-0.0` below and
/// `0.0` above, so that both signed zeros lie within.
pub(crate) fn bound(ty: ColumnType, value: &Value, lower: bool) -> Option<Vec<u8>> {
    Some(match ty {
        ColumnType::Int32 => i32::try_from(value.as_i64()?).ok()?.to_le_bytes().to_vec(),
        ColumnType::Int64 => value.as_i64()?.to_le_bytes().to_vec(),
        ColumnType::Float32 => {
            signed_zero(value.as_f64()?, lower).map(|f| (f as f32).to_le_bytes().to_vec())?
        }
        ColumnType::Float64 => {
            signed_zero(value.as_f64()?, lower).map(|f| f.to_le_bytes().to_vec())?
        }
        ColumnType::String => {
            let s = value.as_str()?;
            (s.len() <= MAX_STRING_BOUND).then(|| s.as_bytes().to_vec())?
        }
        ColumnType::Date => {
            let d = chrono::NaiveDate::parse_from_str(value.as_str()?, "%Y-%m-%d").ok()?;
            day(d).to_le_bytes().to_vec()
        }
        ColumnType::Bool | ColumnType::Timestamp | ColumnType::TimestampTz => return None,
    })
}

fn signed_zero(f: f64, lower: bool) -> Option<f64> {
    if f.is_nan() {
        return None;
    }
    Some(match (f == 0.0, lower) {
        (true, true) => -0.0,
        (true, false) => 0.0,
        _ => f,
    })
}

/// A file's column metrics keyed by field id: value counts, null counts,
/// lower and upper bounds, for the columns of `schema` its statistics name.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Metrics {
    pub value_counts: Vec<(i32, i64)>,
    pub null_counts: Vec<(i32, i64)>,
    pub lower: Vec<(i32, Vec<u8>)>,
    pub upper: Vec<(i32, Vec<u8>)>,
}

pub(crate) fn metrics(schema: &TableSchema, file: &DataFile) -> Metrics {
    let mut m = Metrics::default();
    for c in &schema.columns {
        let Some(ColumnStats { min, max, nulls }) = file.stats.get(&c.id) else {
            continue;
        };
        let id = c.id as i32;
        // Always with the null count: DuckDB 1.4.4 reads a null count
        // without a value count as "all null" and prunes the file.
        m.value_counts.push((id, file.rows as i64));
        m.null_counts.push((id, *nulls as i64));
        if let Some(b) = min.as_ref().and_then(|v| bound(c.ty, v, true)) {
            m.lower.push((id, b));
        }
        if let Some(b) = max.as_ref().and_then(|v| bound(c.ty, v, false)) {
            m.upper.push((id, b));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SchemaChange;

    #[test]
    fn bounds_are_little_endian_in_the_columns_type() {
        assert_eq!(
            bound(ColumnType::Int32, &json!(1), true),
            Some(vec![1, 0, 0, 0])
        );
        assert_eq!(
            bound(ColumnType::Int64, &json!(-1), true),
            Some(vec![255; 8])
        );
        assert_eq!(
            bound(ColumnType::Date, &json!("1970-01-02"), true),
            Some(vec![1, 0, 0, 0])
        );
        assert_eq!(
            bound(ColumnType::Float64, &json!(0.0), true),
            Some((-0.0f64).to_le_bytes().to_vec())
        );
        assert_eq!(
            bound(ColumnType::Float32, &json!(1.5), false),
            Some(1.5f32.to_le_bytes().to_vec())
        );
        assert_eq!(
            bound(ColumnType::String, &json!("ab"), true),
            Some(b"ab".to_vec())
        );
        assert_eq!(
            bound(ColumnType::String, &json!("x".repeat(65)), true),
            None
        );
        assert_eq!(bound(ColumnType::Int32, &json!(1i64 << 40), true), None);
        assert_eq!(bound(ColumnType::Timestamp, &json!(1), true), None);
    }

    #[test]
    fn the_name_mapping_uses_file_names_and_keeps_retired_ones_apart() {
        let s = TableSchema::parse_spec("t", "date:date,n:int64,x:string", "date").unwrap();
        let s = s
            .evolve(
                "t",
                &SchemaChange::RenameColumn {
                    from: "n".into(),
                    to: "m".into(),
                },
            )
            .unwrap()
            .evolve("t", &SchemaChange::DropColumn { name: "x".into() })
            .unwrap();
        let mapping: Value = serde_json::from_str(&name_mapping(&s)).unwrap();
        assert_eq!(
            mapping,
            json!([
                {"field-id": 1, "names": ["date"]},
                {"field-id": 2, "names": ["n"]},
                {"field-id": RETIRED_ID_BASE, "names": ["x"]},
            ])
        );
        let schema = schema_json(&s);
        assert_eq!(schema["fields"][1]["name"], "m");
        assert_eq!(schema["schema-id"], 2);
        assert_eq!(partition_fields(&s)[0]["source-id"], 1);
    }

    #[test]
    fn timestamps_keep_their_zone_or_lack_of_one() {
        assert_eq!(iceberg_type(ColumnType::Timestamp), "timestamp");
        assert_eq!(iceberg_type(ColumnType::TimestampTz), "timestamptz");
        assert_eq!(
            day(chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()),
            20454
        );
    }
}
