//! How a logbook table looks to Delta readers: schema, protocol, column
//! mapping, file statistics and paths.
//!
//! - The date column is an ordinary column (files keep it), so the Delta
//!   table is unpartitioned and engines skip files by their statistics
//!   (a date file's `minValues.date == maxValues.date`).
//! - `timestamp` (no time zone) is Delta's `timestamp_ntz` (reader 3 /
//!   writer 7 with the `timestampNtz` feature); `timestamptz` is `timestamp`.
//! - Once a column lives in files under another name (renamed, or added
//!   under a name old files hold), column mapping mode `id` is on:
//!   each field carries its id and its physical name, the name its files
//!   use (logbook keeps writing a renamed column under its first name; see
//!   [`crate::schema::Column::file_name`]). Measured with deltalake 1.6,
//!   DuckDB's delta extension and polars 2.1: none matches columns by field
//!   id, all by physical name, so the physical name must be the files'.
//!   Column mapping is declared as a table feature (reader 3 / writer 7),
//!   not as legacy reader 2: readers that cannot map columns (polars,
//!   deltalake's pyarrow path) then refuse instead of returning nulls.
//! - Otherwise the protocol stays at reader 1 / writer 2.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::format::DataFile;
use crate::schema::{ColumnType, TableSchema};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Protocol {
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metadata {
    pub id: String,
    pub name: String,
    pub format: Format,
    pub schema_string: String,
    pub partition_columns: Vec<String>,
    pub configuration: BTreeMap<String, String>,
    pub created_time: i64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Format {
    pub provider: String,
    pub options: BTreeMap<String, String>,
}

/// Does the table need column mapping: does some column live in its files
/// under another name? (A dropped column alone does not need it: readers
/// by name skip a file's columns the schema lacks, and no new column ever
/// writes under a dropped one's name.)
pub(crate) fn mapped(schema: &TableSchema) -> bool {
    schema.columns.iter().any(|c| c.physical.is_some())
}

/// The lowest protocol the schema allows.
pub(crate) fn protocol(schema: &TableSchema) -> Protocol {
    let mut features = Vec::new();
    if mapped(schema) {
        features.push("columnMapping".to_string());
    }
    if schema.columns.iter().any(|c| c.ty == ColumnType::Timestamp) {
        features.push("timestampNtz".to_string());
    }
    if features.is_empty() {
        return Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
    }
    Protocol {
        min_reader_version: 3,
        min_writer_version: 7,
        reader_features: Some(features.clone()),
        writer_features: Some(features),
    }
}

/// The `metaData` action: the schema, and column mapping when needed. `id`
/// and `created` are the table's creation commit's, so every writer of the
/// mirror produces the same action.
pub(crate) fn metadata(table: &str, id: Uuid, created: i64, schema: &TableSchema) -> Metadata {
    let mapped = mapped(schema);
    let fields: Vec<Value> = schema
        .columns
        .iter()
        .map(|c| {
            let mut meta = Map::new();
            if mapped {
                meta.insert("delta.columnMapping.id".into(), json!(c.id));
                meta.insert(
                    "delta.columnMapping.physicalName".into(),
                    json!(c.file_name()),
                );
            }
            json!({
                "name": c.name,
                "type": delta_type(c.ty),
                "nullable": c.nullable,
                "metadata": meta,
            })
        })
        .collect();
    let mut configuration = BTreeMap::new();
    if mapped {
        configuration.insert("delta.columnMapping.mode".into(), "id".into());
        configuration.insert(
            "delta.columnMapping.maxColumnId".into(),
            schema.last_column_id.to_string(),
        );
    }
    Metadata {
        id: id.to_string(),
        name: table.to_string(),
        format: Format {
            provider: "parquet".into(),
            options: BTreeMap::new(),
        },
        schema_string: json!({"type": "struct", "fields": fields}).to_string(),
        partition_columns: vec![],
        configuration,
        created_time: created,
    }
}

fn delta_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Bool => "boolean",
        ColumnType::Int32 => "integer",
        ColumnType::Int64 => "long",
        ColumnType::Float32 => "float",
        ColumnType::Float64 => "double",
        ColumnType::String => "string",
        ColumnType::Date => "date",
        ColumnType::Timestamp => "timestamp_ntz",
        ColumnType::TimestampTz => "timestamp",
    }
}

/// `add.stats`: row count, and per column (by physical name) the bounds and
/// null count the file's footer gave when it was written.
pub(crate) fn stats(schema: &TableSchema, file: &DataFile) -> String {
    let (mut min, mut max, mut nulls) = (Map::new(), Map::new(), Map::new());
    for c in &schema.columns {
        let Some(s) = file.stats.get(&c.id) else {
            continue;
        };
        let name = c.file_name().to_string();
        if let Some(v) = &s.min {
            min.insert(name.clone(), v.clone());
        }
        if let Some(v) = &s.max {
            max.insert(name.clone(), v.clone());
        }
        nulls.insert(name, json!(s.nulls));
    }
    let mut out = Map::new();
    out.insert("numRecords".into(), json!(file.rows));
    if !nulls.is_empty() {
        out.insert("minValues".into(), Value::Object(min));
        out.insert("maxValues".into(), Value::Object(max));
        out.insert("nullCount".into(), Value::Object(nulls));
    }
    Value::Object(out).to_string()
}

/// A relative path as a Delta `add.path` (a URI reference): everything but
/// unreserved characters, `/` and `=` percent-encoded.
pub(crate) fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SchemaChange;

    #[test]
    fn protocol_rises_only_for_what_the_schema_needs() {
        let plain = TableSchema::parse_spec("t", "date:date,n:int64", "date").unwrap();
        assert_eq!(protocol(&plain).min_reader_version, 1);
        let ntz = TableSchema::parse_spec("t", "date:date,at:timestamp", "date").unwrap();
        assert_eq!(
            protocol(&ntz).reader_features,
            Some(vec!["timestampNtz".to_string()])
        );
        let renamed = plain
            .evolve(
                "t",
                &SchemaChange::RenameColumn {
                    from: "n".into(),
                    to: "m".into(),
                },
            )
            .unwrap();
        assert_eq!(
            protocol(&renamed).reader_features,
            Some(vec!["columnMapping".to_string()])
        );
        let meta = metadata("t", Uuid::nil(), 0, &renamed);
        assert!(meta
            .schema_string
            .contains(r#""delta.columnMapping.physicalName":"n""#));
        assert_eq!(meta.configuration["delta.columnMapping.mode"], "id");
    }

    #[test]
    fn a_column_added_under_a_dropped_columns_name_writes_under_another() {
        let s = TableSchema::parse_spec("t", "date:date,n:int64", "date").unwrap();
        let s = s
            .evolve("t", &SchemaChange::DropColumn { name: "n".into() })
            .unwrap();
        let s = s
            .evolve(
                "t",
                &SchemaChange::AddColumn {
                    name: "n".into(),
                    ty: ColumnType::String,
                },
            )
            .unwrap();
        assert_eq!(s.columns[1].file_name(), "n__3");
        assert_eq!(s.file_schema().field(1).name(), "n__3");
        assert_eq!(s.arrow_schema().field(1).name(), "n");
    }

    #[test]
    fn a_generated_file_name_never_reuses_one_files_hold() {
        let add = |s: TableSchema, name: &str| {
            s.evolve(
                "t",
                &SchemaChange::AddColumn {
                    name: name.into(),
                    ty: ColumnType::Int64,
                },
            )
            .unwrap()
        };
        let drop = |s: TableSchema, name: &str| {
            s.evolve("t", &SchemaChange::DropColumn { name: name.into() })
                .unwrap()
        };
        let rename = |s: TableSchema, from: &str, to: &str| {
            s.evolve(
                "t",
                &SchemaChange::RenameColumn {
                    from: from.into(),
                    to: to.into(),
                },
            )
            .unwrap()
        };
        // A user's column named like a generated name, then dropped.
        let s = TableSchema::parse_spec("t", "date:date,a:int64", "date").unwrap();
        let s = drop(add(s, "a__4"), "a__4");
        let s = add(rename(s, "a", "b"), "a");
        let stored: Vec<&str> = s.columns.iter().map(|c| c.file_name()).collect();
        assert_eq!(stored, ["date", "a", "a__4_1"]);
        // A live column stored under a generated-looking name.
        let s = TableSchema::parse_spec("t", "date:date,a:int64,a__3:int64", "date").unwrap();
        let s = add(rename(s, "a", "b"), "a");
        let mut stored: Vec<&str> = s.columns.iter().map(|c| c.file_name()).collect();
        stored.sort();
        stored.dedup();
        assert_eq!(stored.len(), 4, "{stored:?}");
    }

    #[test]
    fn paths_are_uri_references() {
        assert_eq!(
            encode_path("data/date=2026-03-15/a b.parquet"),
            "data/date=2026-03-15/a%20b.parquet"
        );
    }
}
