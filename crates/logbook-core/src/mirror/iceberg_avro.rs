//! The Iceberg mirror's Avro files: a manifest (the data files of one
//! logbook month, or of a dimension) and a manifest list (a snapshot's
//! manifests), in spec v2.
//!
//! Every Avro field carries its Iceberg `field-id`, map keys and values
//! included: DuckDB refuses a manifest field without one, and pyiceberg
//! resolves fields by id. Sequence numbers and snapshot ids are written
//! explicitly on every entry, never inherited, so a manifest means the same
//! in every manifest list that reuses it. Files are deflate-compressed, as
//! Iceberg's own writers' default: a header without `avro.codec` (the Avro
//! crate's `null` codec) is read by pyiceberg 0.12 as gzip, which it refuses.

use apache_avro::types::Value;
use apache_avro::{Schema, Writer};
use serde_json::json;

use super::iceberg_table::{Metrics, PARTITION_FIELD_ID};

/// One live data file in a manifest.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The snapshot that added the file.
    pub snapshot_id: i64,
    /// The sequence number of that snapshot.
    pub sequence_number: i64,
    /// Absolute URI.
    pub path: String,
    /// The partition value (days since the epoch); `None` for a dimension.
    pub day: Option<i32>,
    pub record_count: i64,
    pub file_size: i64,
    pub metrics: Metrics,
}

/// One manifest as a manifest list names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ManifestFile {
    /// Absolute URI.
    pub path: String,
    pub length: i64,
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    pub added_snapshot_id: i64,
    pub files: i32,
    pub rows: i64,
    /// The lowest and highest partition day, for a partitioned table.
    pub days: Option<(i32, i32)>,
}

/// What the header of every manifest of a table says: the table schema
/// and partition spec as JSON.
pub(crate) struct ManifestHeader {
    pub schema: String,
    pub schema_id: u32,
    pub partition_spec: String,
}

fn map_field(name: &str, id: i32, key: i32, value: i32, value_type: &str) -> serde_json::Value {
    json!({
        "name": name, "field-id": id, "default": null,
        "type": ["null", {
            "type": "array", "logicalType": "map",
            "items": {
                "type": "record", "name": format!("k{key}_v{value}"),
                "fields": [
                    {"name": "key", "type": "int", "field-id": key},
                    {"name": "value", "type": value_type, "field-id": value},
                ],
            },
        }],
    })
}

fn optional(name: &str, id: i32, ty: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "type": ["null", ty], "default": null, "field-id": id})
}

fn required(name: &str, id: i32, ty: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "type": ty, "field-id": id})
}

/// The `manifest_entry` schema; `partition` names the date partition field
/// (`None` for a dimension: an empty partition record).
pub(crate) fn manifest_schema(partition: Option<&str>) -> Schema {
    let partition_fields: Vec<serde_json::Value> = partition
        .map(|name| {
            optional(
                name,
                PARTITION_FIELD_ID,
                json!({"type": "int", "logicalType": "date"}),
            )
        })
        .into_iter()
        .collect();
    let data_file = json!({
        "type": "record", "name": "r2",
        "fields": [
            required("content", 134, json!("int")),
            required("file_path", 100, json!("string")),
            required("file_format", 101, json!("string")),
            required("partition", 102, json!({"type": "record", "name": "r102", "fields": partition_fields})),
            required("record_count", 103, json!("long")),
            required("file_size_in_bytes", 104, json!("long")),
            map_field("value_counts", 109, 119, 120, "long"),
            map_field("null_value_counts", 110, 121, 122, "long"),
            map_field("lower_bounds", 125, 126, 127, "bytes"),
            map_field("upper_bounds", 128, 129, 130, "bytes"),
        ],
    });
    let entry = json!({
        "type": "record", "name": "manifest_entry",
        "fields": [
            required("status", 0, json!("int")),
            optional("snapshot_id", 1, json!("long")),
            optional("sequence_number", 3, json!("long")),
            optional("file_sequence_number", 4, json!("long")),
            required("data_file", 2, data_file),
        ],
    });
    let schema = Schema::parse(&entry).expect("the manifest schema is valid Avro");
    mark_maps(schema)
}

/// Iceberg writes a map with int keys as an array of key/value records
/// marked `"logicalType": "map"`; readers turn it back into a map by that
/// mark. The Avro crate keeps no logical type on an array it parses, so the
/// mark is put back on each array of `k<id>_v<id>` records here.
fn mark_maps(schema: Schema) -> Schema {
    match schema {
        Schema::Record(mut record) => {
            for field in &mut record.fields {
                let inner = std::mem::replace(&mut field.schema, Schema::Null);
                field.schema = mark_maps(inner);
            }
            Schema::Record(record)
        }
        Schema::Union(union) => {
            let variants = union.variants().iter().cloned().map(mark_maps).collect();
            Schema::Union(
                apache_avro::schema::UnionSchema::new(variants).expect("the same variants"),
            )
        }
        Schema::Array(mut array) => {
            let is_map = matches!(array.items.as_ref(), Schema::Record(r) if r.name.name().starts_with('k') && r.name.name().contains("_v"));
            if is_map {
                array.attributes.insert("logicalType".into(), json!("map"));
            }
            Schema::Array(array)
        }
        other => other,
    }
}

/// The `manifest_file` schema of a manifest list.
pub(crate) fn manifest_list_schema() -> Schema {
    let summary = json!({
        "type": "record", "name": "r508",
        "fields": [
            required("contains_null", 509, json!("boolean")),
            optional("contains_nan", 518, json!("boolean")),
            optional("lower_bound", 510, json!("bytes")),
            optional("upper_bound", 511, json!("bytes")),
        ],
    });
    let list = json!({
        "type": "record", "name": "manifest_file",
        "fields": [
            required("manifest_path", 500, json!("string")),
            required("manifest_length", 501, json!("long")),
            required("partition_spec_id", 502, json!("int")),
            required("content", 517, json!("int")),
            required("sequence_number", 515, json!("long")),
            required("min_sequence_number", 516, json!("long")),
            required("added_snapshot_id", 503, json!("long")),
            required("added_files_count", 504, json!("int")),
            required("existing_files_count", 505, json!("int")),
            required("deleted_files_count", 506, json!("int")),
            required("added_rows_count", 512, json!("long")),
            required("existing_rows_count", 513, json!("long")),
            required("deleted_rows_count", 514, json!("long")),
            optional("partitions", 507, json!({"type": "array", "items": summary, "element-id": 508})),
        ],
    });
    Schema::parse(&list).expect("the manifest list schema is valid Avro")
}

fn writer(schema: &Schema) -> Writer<'_, Vec<u8>> {
    let codec = apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default());
    Writer::with_codec(schema, Vec::new(), codec).expect("the schema resolves")
}

fn some(v: Value) -> Value {
    Value::Union(1, Box::new(v))
}

fn none() -> Value {
    Value::Union(0, Box::new(Value::Null))
}

fn map<T>(pairs: &[(i32, T)], value: impl Fn(&T) -> Value) -> Value {
    some(Value::Array(
        pairs
            .iter()
            .map(|(k, v)| {
                Value::Record(vec![
                    ("key".into(), Value::Int(*k)),
                    ("value".into(), value(v)),
                ])
            })
            .collect(),
    ))
}

fn entry_value(e: &Entry, partition: Option<&str>) -> Value {
    let partition = Value::Record(match partition {
        Some(name) => vec![(
            name.to_string(),
            e.day.map_or_else(none, |d| some(Value::Date(d))),
        )],
        None => vec![],
    });
    let m = &e.metrics;
    let data_file = Value::Record(vec![
        ("content".into(), Value::Int(0)),
        ("file_path".into(), Value::String(e.path.clone())),
        ("file_format".into(), Value::String("PARQUET".into())),
        ("partition".into(), partition),
        ("record_count".into(), Value::Long(e.record_count)),
        ("file_size_in_bytes".into(), Value::Long(e.file_size)),
        (
            "value_counts".into(),
            map(&m.value_counts, |v| Value::Long(*v)),
        ),
        (
            "null_value_counts".into(),
            map(&m.null_counts, |v| Value::Long(*v)),
        ),
        (
            "lower_bounds".into(),
            map(&m.lower, |v| Value::Bytes(v.clone())),
        ),
        (
            "upper_bounds".into(),
            map(&m.upper, |v| Value::Bytes(v.clone())),
        ),
    ]);
    Value::Record(vec![
        // 1: ADDED. Every entry is live; readers treat added and existing alike.
        ("status".into(), Value::Int(1)),
        ("snapshot_id".into(), some(Value::Long(e.snapshot_id))),
        (
            "sequence_number".into(),
            some(Value::Long(e.sequence_number)),
        ),
        (
            "file_sequence_number".into(),
            some(Value::Long(e.sequence_number)),
        ),
        ("data_file".into(), data_file),
    ])
}

/// A manifest file holding `entries`.
pub(crate) fn manifest(
    header: &ManifestHeader,
    partition: Option<&str>,
    entries: &[Entry],
) -> apache_avro::AvroResult<Vec<u8>> {
    let schema = manifest_schema(partition);
    let mut w = writer(&schema);
    for (k, v) in [
        ("schema", header.schema.clone()),
        ("schema-id", header.schema_id.to_string()),
        ("partition-spec", header.partition_spec.clone()),
        ("partition-spec-id", "0".to_string()),
        ("format-version", "2".to_string()),
        ("content", "data".to_string()),
    ] {
        w.add_user_metadata(k.to_string(), v)?;
    }
    for e in entries {
        w.append_value(entry_value(e, partition))?;
    }
    w.into_inner()
}

/// The manifest list of snapshot `snapshot_id`.
pub(crate) fn manifest_list(
    snapshot_id: i64,
    parent: Option<i64>,
    sequence_number: i64,
    manifests: &[ManifestFile],
    partitioned: bool,
) -> apache_avro::AvroResult<Vec<u8>> {
    let schema = manifest_list_schema();
    let mut w = writer(&schema);
    w.add_user_metadata("snapshot-id".into(), snapshot_id.to_string())?;
    w.add_user_metadata(
        "parent-snapshot-id".into(),
        parent.map_or("null".into(), |p| p.to_string()),
    )?;
    w.add_user_metadata("sequence-number".into(), sequence_number.to_string())?;
    w.add_user_metadata("format-version".into(), "2")?;
    for m in manifests {
        let partitions = match (partitioned, m.days) {
            (false, _) => none(),
            (true, days) => some(Value::Array(vec![Value::Record(vec![
                ("contains_null".into(), Value::Boolean(false)),
                ("contains_nan".into(), some(Value::Boolean(false))),
                (
                    "lower_bound".into(),
                    days.map_or_else(none, |(lo, _)| {
                        some(Value::Bytes(lo.to_le_bytes().to_vec()))
                    }),
                ),
                (
                    "upper_bound".into(),
                    days.map_or_else(none, |(_, hi)| {
                        some(Value::Bytes(hi.to_le_bytes().to_vec()))
                    }),
                ),
            ])])),
        };
        w.append_value(Value::Record(vec![
            ("manifest_path".into(), Value::String(m.path.clone())),
            ("manifest_length".into(), Value::Long(m.length)),
            ("partition_spec_id".into(), Value::Int(0)),
            ("content".into(), Value::Int(0)),
            ("sequence_number".into(), Value::Long(m.sequence_number)),
            (
                "min_sequence_number".into(),
                Value::Long(m.min_sequence_number),
            ),
            ("added_snapshot_id".into(), Value::Long(m.added_snapshot_id)),
            ("added_files_count".into(), Value::Int(m.files)),
            ("existing_files_count".into(), Value::Int(0)),
            ("deleted_files_count".into(), Value::Int(0)),
            ("added_rows_count".into(), Value::Long(m.rows)),
            ("existing_rows_count".into(), Value::Long(0)),
            ("deleted_rows_count".into(), Value::Long(0)),
            ("partitions".into(), partitions),
        ]))?;
    }
    w.into_inner()
}

/// The manifests a manifest list names, as [`manifest_list`] wrote them
/// (a manifest list another writer made fails to decode: not ours).
pub(crate) fn read_manifest_list(bytes: &[u8]) -> apache_avro::AvroResult<Vec<ManifestFile>> {
    let reader = apache_avro::Reader::new(bytes)?;
    let mut out = Vec::new();
    for value in reader {
        let Value::Record(fields) = value? else {
            continue;
        };
        let mut m = ManifestFile {
            path: String::new(),
            length: 0,
            sequence_number: 0,
            min_sequence_number: 0,
            added_snapshot_id: 0,
            files: 0,
            rows: 0,
            days: None,
        };
        for (name, v) in fields {
            match (name.as_str(), v) {
                ("manifest_path", Value::String(p)) => m.path = p,
                ("manifest_length", Value::Long(n)) => m.length = n,
                ("sequence_number", Value::Long(n)) => m.sequence_number = n,
                ("min_sequence_number", Value::Long(n)) => m.min_sequence_number = n,
                ("added_snapshot_id", Value::Long(n)) => m.added_snapshot_id = n,
                ("added_files_count", Value::Int(n)) => m.files = n,
                ("added_rows_count", Value::Long(n)) => m.rows = n,
                ("partitions", Value::Union(_, summaries)) => m.days = days_of(*summaries),
                _ => {}
            }
        }
        out.push(m);
    }
    Ok(out)
}

/// The day bounds of a manifest's partition summary.
fn days_of(summaries: Value) -> Option<(i32, i32)> {
    let Value::Array(items) = summaries else {
        return None;
    };
    let Some(Value::Record(fields)) = items.into_iter().next() else {
        return None;
    };
    let day = |v: &Value| match v {
        Value::Union(_, b) => match b.as_ref() {
            Value::Bytes(b) => b.as_slice().try_into().ok().map(i32::from_le_bytes),
            _ => None,
        },
        _ => None,
    };
    let find = |key: &str| {
        fields
            .iter()
            .find(|(n, _)| n == key)
            .and_then(|(_, v)| day(v))
    };
    Some((find("lower_bound")?, find("upper_bound")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of a schema, nested ones included, has an id.
    fn every_field_has_an_id(schema: &serde_json::Value, missing: &mut Vec<String>) {
        match schema {
            serde_json::Value::Object(o) => {
                if let Some(fields) = o.get("fields").and_then(|f| f.as_array()) {
                    for f in fields {
                        if f.get("field-id").is_none() {
                            missing.push(f["name"].to_string());
                        }
                        every_field_has_an_id(&f["type"], missing);
                    }
                }
                if let Some(items) = o.get("items") {
                    every_field_has_an_id(items, missing);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|t| every_field_has_an_id(t, missing)),
            _ => {}
        }
    }

    fn written_schema(bytes: &[u8]) -> serde_json::Value {
        let reader = apache_avro::Reader::new(bytes).unwrap();
        serde_json::to_value(reader.writer_schema()).unwrap()
    }

    #[test]
    fn every_avro_field_carries_its_iceberg_id_and_the_header_its_keys() {
        let header = ManifestHeader {
            schema: "{}".into(),
            schema_id: 3,
            partition_spec: "[]".into(),
        };
        let entry = Entry {
            snapshot_id: 5,
            sequence_number: 5,
            path: "file:///t/data/a.parquet".into(),
            day: Some(20454),
            record_count: 10,
            file_size: 999,
            metrics: Metrics {
                value_counts: vec![(1, 10)],
                null_counts: vec![(1, 0)],
                lower: vec![(1, vec![1, 0, 0, 0])],
                upper: vec![(1, vec![2, 0, 0, 0])],
            },
        };
        let bytes = manifest(&header, Some("date"), &[entry]).unwrap();
        let schema = written_schema(&bytes);
        let mut missing = vec![];
        every_field_has_an_id(&schema, &mut missing);
        assert!(missing.is_empty(), "fields without field-id: {missing:?}");
        // The Avro crate drops the mark when it parses a header back: look
        // for it in the bytes written.
        let header = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).to_string();
        assert_eq!(
            header.matches(r#""logicalType":"map""#).count(),
            4,
            "{header}"
        );
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        let meta = reader.user_metadata();
        for key in [
            "schema",
            "schema-id",
            "partition-spec",
            "partition-spec-id",
            "format-version",
            "content",
        ] {
            assert!(meta.contains_key(key), "manifest header lacks {key}");
        }
        assert_eq!(reader.count(), 1);

        let files = [ManifestFile {
            path: "file:///t/metadata/m.avro".into(),
            length: bytes.len() as i64,
            sequence_number: 5,
            min_sequence_number: 2,
            added_snapshot_id: 5,
            files: 1,
            rows: 10,
            days: Some((20454, 20454)),
        }];
        let list = manifest_list(5, Some(4), 5, &files, true).unwrap();
        let mut missing = vec![];
        every_field_has_an_id(&written_schema(&list), &mut missing);
        assert!(missing.is_empty(), "fields without field-id: {missing:?}");
        assert_eq!(read_manifest_list(&list).unwrap(), files);
    }
}
