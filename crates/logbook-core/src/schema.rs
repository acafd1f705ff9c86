//! Table schemas: a small, stable set of column types with field ids.
//!
//! Each column carries a field id that never changes once assigned; it is
//! written into every Parquet file (`PARQUET:field_id`) so that readers can
//! map columns by id rather than by name.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::names::validate_column_name;

/// A column type logbook stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Bool,
    Int32,
    Int64,
    Float32,
    Float64,
    String,
    Date,
    /// Microseconds since the epoch, no time zone.
    Timestamp,
    /// Microseconds since the epoch, UTC.
    TimestampTz,
}

impl ColumnType {
    /// Integers and floats (what a stage diff sums).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            ColumnType::Int32 | ColumnType::Int64 | ColumnType::Float32 | ColumnType::Float64
        )
    }

    const ALL: [(&'static str, ColumnType); 9] = [
        ("bool", ColumnType::Bool),
        ("int32", ColumnType::Int32),
        ("int64", ColumnType::Int64),
        ("float32", ColumnType::Float32),
        ("float64", ColumnType::Float64),
        ("string", ColumnType::String),
        ("date", ColumnType::Date),
        ("timestamp", ColumnType::Timestamp),
        ("timestamptz", ColumnType::TimestampTz),
    ];

    /// Parse a type name as written in a schema spec (`int64`, `string`, ...).
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        let alias = match name.as_str() {
            "boolean" => "bool",
            "int" | "integer" => "int32",
            "bigint" | "long" => "int64",
            "float" | "real" => "float32",
            "double" => "float64",
            "utf8" | "text" | "varchar" => "string",
            other => other,
        };
        Self::ALL.iter().find(|(n, _)| *n == alias).map(|(_, t)| *t)
    }

    /// The type's name in schema specs.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// The Arrow type data of this column is stored as.
    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float32 => DataType::Float32,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::String => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::TimestampTz => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC")))
            }
        }
    }

    /// The logbook type for an Arrow type, if there is one.
    ///
    /// Nanosecond and millisecond timestamps map to microsecond columns (other
    /// engines reject nanosecond timestamps); writers cast them on the way in.
    pub fn from_arrow(dt: &DataType) -> Option<Self> {
        Some(match dt {
            DataType::Boolean => ColumnType::Bool,
            DataType::Int32 => ColumnType::Int32,
            DataType::Int64 => ColumnType::Int64,
            DataType::Float32 => ColumnType::Float32,
            DataType::Float64 => ColumnType::Float64,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::String,
            DataType::Date32 => ColumnType::Date,
            DataType::Timestamp(_, None) => ColumnType::Timestamp,
            DataType::Timestamp(_, Some(_)) => ColumnType::TimestampTz,
            _ => return None,
        })
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// Stable field id, unique within the table, never reused.
    pub id: u32,
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ColumnType,
    pub nullable: bool,
    /// The schema version that added the column (0: from the start).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub added_in: u32,
    /// The name the column has inside data files, when it is not `name`:
    /// a renamed column keeps writing its first name, and a new column whose
    /// name a dropped or renamed column still uses in files gets another.
    /// logbook maps columns by field id; engines reading a Delta mirror map
    /// them by this name (Delta's `physicalName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<String>,
}

impl Column {
    /// The column's name inside data files.
    pub fn file_name(&self) -> &str {
        self.physical.as_deref().unwrap_or(&self.name)
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// Validity start column of a dimension (inclusive, business date).
pub const VALID_FROM: &str = "valid_from";
/// Validity end column of a dimension (exclusive; null while still valid).
pub const VALID_TO: &str = "valid_to";

/// What kind of table a schema describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TableKind {
    /// Facts partitioned by a date column: one partition per logical date.
    Partitioned { partition_column: String },
    /// A slowly changing dimension (SCD type 2): rows keyed by `keys`, each
    /// valid over `[valid_from, valid_to)` in business time.
    Scd2 { keys: Vec<String> },
}

/// A table's schema: its columns and its kind.
///
/// ```
/// use logbook_core::schema::TableSchema;
/// let s = TableSchema::parse_spec("t", "date:date,customer:string,amount:float64", "date").unwrap();
/// assert_eq!(s.columns.len(), 3);
/// assert!(!s.columns[0].nullable); // the partition column is never null
/// let d = TableSchema::parse_dimension_spec("customers", "customer:string,region:string", &["customer"]).unwrap();
/// assert_eq!(d.spec(), "customer:string,region:string,valid_from:date,valid_to:date");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub columns: Vec<Column>,
    #[serde(flatten)]
    pub kind: TableKind,
    /// Incremented by every schema change (0 at creation).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub version: u32,
    /// The highest field id ever assigned: ids of dropped columns are never reused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_column_id: u32,
    /// File names of dropped columns: old files still hold them, so no new
    /// column writes under them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_names: Vec<String>,
}

/// One change to a table's schema. No data file is rewritten: reads map
/// columns by field id and adapt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChange {
    /// A new nullable column (null in partitions written before).
    AddColumn { name: String, ty: ColumnType },
    /// A safe widening: int32 to int64, float32 to float64.
    WidenColumn { name: String, ty: ColumnType },
    /// A new name for a column (same field id, same data).
    RenameColumn { from: String, to: String },
    /// The column disappears (its field id is never reused).
    DropColumn { name: String },
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaChange::AddColumn { name, ty } => write!(f, "add column {name}:{}", ty.name()),
            SchemaChange::WidenColumn { name, ty } => {
                write!(f, "widen column {name} to {}", ty.name())
            }
            SchemaChange::RenameColumn { from, to } => write!(f, "rename column {from} to {to}"),
            SchemaChange::DropColumn { name } => write!(f, "drop column {name}"),
        }
    }
}

impl TableSchema {
    /// A partitioned (fact) table from `(name, type)` pairs; ids are 1, 2, ...
    pub fn new(
        table: &str,
        columns: impl IntoIterator<Item = (String, ColumnType)>,
        partition_column: &str,
    ) -> Result<Self> {
        let kind = TableKind::Partitioned {
            partition_column: partition_column.to_string(),
        };
        Self::build(table, columns.into_iter().collect(), kind)
    }

    /// A dimension (SCD2) table keyed by `keys`; logbook appends the
    /// `valid_from` and `valid_to` columns.
    pub fn dimension(
        table: &str,
        columns: impl IntoIterator<Item = (String, ColumnType)>,
        keys: &[&str],
    ) -> Result<Self> {
        let mut columns: Vec<(String, ColumnType)> = columns.into_iter().collect();
        for (name, _) in &columns {
            if name == VALID_FROM || name == VALID_TO {
                return Err(Error::InvalidSchema {
                    table: table.to_string(),
                    reason: format!(
                        "column {name:?} is managed by logbook for dimensions; leave it out"
                    ),
                });
            }
        }
        columns.push((VALID_FROM.to_string(), ColumnType::Date));
        columns.push((VALID_TO.to_string(), ColumnType::Date));
        let kind = TableKind::Scd2 {
            keys: keys.iter().map(|k| k.to_string()).collect(),
        };
        Self::build(table, columns, kind)
    }

    fn build(table: &str, columns: Vec<(String, ColumnType)>, kind: TableKind) -> Result<Self> {
        let required: Vec<&str> = match &kind {
            TableKind::Partitioned { partition_column } => vec![partition_column.as_str()],
            TableKind::Scd2 { keys } => keys
                .iter()
                .map(String::as_str)
                .chain([VALID_FROM])
                .collect(),
        };
        let columns = columns
            .into_iter()
            .enumerate()
            .map(|(i, (name, ty))| Column {
                id: i as u32 + 1,
                nullable: !required.contains(&name.as_str()),
                name,
                ty,
                added_in: 0,
                physical: None,
            })
            .collect::<Vec<Column>>();
        let last_column_id = columns.len() as u32;
        let schema = Self {
            columns,
            kind,
            version: 0,
            last_column_id,
            retired_names: Vec::new(),
        };
        schema.validate(table)?;
        Ok(schema)
    }

    /// The date column a partitioned table is partitioned by.
    pub fn partition_column(&self) -> Option<&str> {
        match &self.kind {
            TableKind::Partitioned { partition_column } => Some(partition_column),
            TableKind::Scd2 { .. } => None,
        }
    }

    /// The business key columns of a dimension.
    pub fn keys(&self) -> Option<&[String]> {
        match &self.kind {
            TableKind::Scd2 { keys } => Some(keys),
            TableKind::Partitioned { .. } => None,
        }
    }

    /// Parse a dimension's `name:type,...` (without validity columns).
    pub fn parse_dimension_spec(table: &str, spec: &str, keys: &[&str]) -> Result<Self> {
        Self::dimension(table, parse_columns(table, spec)?, keys)
    }

    /// Parse `name:type,name:type,...`.
    pub fn parse_spec(table: &str, spec: &str, partition_column: &str) -> Result<Self> {
        Self::new(table, parse_columns(table, spec)?, partition_column)
    }

    /// Copy the columns of an Arrow schema into a partitioned table's schema.
    pub fn from_arrow(table: &str, schema: &Schema, partition_column: &str) -> Result<Self> {
        Self::new(table, columns_from_arrow(table, schema)?, partition_column)
    }

    fn validate(&self, table: &str) -> Result<()> {
        let invalid = |reason: String| {
            Err(Error::InvalidSchema {
                table: table.to_string(),
                reason,
            })
        };
        if self.columns.is_empty() {
            return invalid("no columns".into());
        }
        let mut seen = HashMap::new();
        let mut files = HashMap::new();
        for c in &self.columns {
            validate_column_name(&c.name)?;
            if seen.insert(c.name.as_str(), c.id).is_some() {
                return invalid(format!("column {:?} appears twice", c.name));
            }
            let stored = c.file_name();
            if files.insert(stored, c.id).is_some()
                || self.retired_names.iter().any(|r| r == stored)
            {
                return invalid(format!(
                    "column {:?} would be stored as {stored:?}, a name data files already use for another column",
                    c.name
                ));
            }
        }
        match &self.kind {
            TableKind::Partitioned { partition_column } => match self.column(partition_column) {
                None => invalid(format!(
                    "partition column {partition_column:?} is not one of the columns"
                )),
                Some(c) if c.ty != ColumnType::Date => invalid(format!(
                    "partition column {:?} must have type date, not {}",
                    c.name,
                    c.ty.name()
                )),
                Some(_) => Ok(()),
            },
            TableKind::Scd2 { keys } => {
                if keys.is_empty() {
                    return invalid("a dimension needs at least one key column".into());
                }
                match keys.iter().find(|k| self.column(k).is_none()) {
                    Some(k) => invalid(format!("key column {k:?} is not one of the columns")),
                    None if self.columns.len() == keys.len() + 2 => {
                        invalid("a dimension needs at least one column besides its keys".into())
                    }
                    None => Ok(()),
                }
            }
        }
    }

    /// This schema with `change` applied (the next schema version), or a
    /// clear error naming the column when the change is not allowed.
    ///
    /// ```
    /// use logbook_core::schema::{ColumnType, SchemaChange, TableSchema};
    /// let s = TableSchema::parse_spec("t", "date:date,n:int32", "date").unwrap();
    /// let s = s.evolve("t", &SchemaChange::AddColumn { name: "tip".into(), ty: ColumnType::Float64 }).unwrap();
    /// assert_eq!((s.version, s.column("tip").unwrap().id), (1, 3));
    /// let bad = s.evolve("t", &SchemaChange::DropColumn { name: "date".into() });
    /// assert!(bad.unwrap_err().to_string().contains("partition column"));
    /// ```
    pub fn evolve(&self, table: &str, change: &SchemaChange) -> Result<TableSchema> {
        let refuse = |reason: String| {
            Err(Error::InvalidSchema {
                table: table.to_string(),
                reason: format!("{change}: {reason} (schema version {})", self.version),
            })
        };
        let existing = |name: &str| {
            self.column(name).ok_or_else(|| Error::InvalidSchema {
                table: table.to_string(),
                reason: format!(
                    "{change}: no column {name:?} (columns: {}; schema version {})",
                    self.spec(),
                    self.version
                ),
            })
        };
        let structural = |name: &str| -> Option<&'static str> {
            match &self.kind {
                TableKind::Partitioned { partition_column } if partition_column == name => {
                    Some("it is the partition column")
                }
                TableKind::Scd2 { keys } if keys.iter().any(|k| k == name) => {
                    Some("it is a key column of the dimension")
                }
                TableKind::Scd2 { .. } if name == VALID_FROM || name == VALID_TO => {
                    Some("it is a validity column managed by logbook")
                }
                _ => None,
            }
        };
        let mut next = self.clone();
        next.version += 1;
        match change {
            SchemaChange::AddColumn { name, ty } => {
                validate_column_name(name)?;
                if self.column(name).is_some() {
                    return refuse(format!("column {name:?} already exists"));
                }
                let id = self.next_column_id();
                next.last_column_id = id;
                // A name old files still use (a dropped or renamed column's)
                // must not be read as this column's: write under another.
                let taken = |n: &str| {
                    self.retired_names.iter().any(|r| r == n)
                        || self.columns.iter().any(|c| c.file_name() == n)
                };
                let mut file_name = name.clone();
                for attempt in 0u32.. {
                    if !taken(&file_name) {
                        break;
                    }
                    file_name = match attempt {
                        0 => format!("{name}__{id}"),
                        n => format!("{name}__{id}_{n}"),
                    };
                }
                next.columns.push(Column {
                    id,
                    name: name.clone(),
                    ty: *ty,
                    nullable: true,
                    added_in: next.version,
                    physical: (file_name != *name).then_some(file_name),
                });
            }
            SchemaChange::WidenColumn { name, ty } => {
                let col = existing(name)?;
                let safe = matches!(
                    (col.ty, ty),
                    (ColumnType::Int32, ColumnType::Int64)
                        | (ColumnType::Float32, ColumnType::Float64)
                );
                if !safe {
                    return refuse(format!(
                        "{} to {} is not a safe widening (only int32 to int64 and float32 to float64)",
                        col.ty.name(),
                        ty.name()
                    ));
                }
                let i = self.index_of(name).expect("exists");
                next.columns[i].ty = *ty;
            }
            SchemaChange::RenameColumn { from, to } => {
                existing(from)?;
                validate_column_name(to)?;
                if let Some(why) = structural(from) {
                    return refuse(format!("{from:?} cannot be renamed: {why}"));
                }
                if self.column(to).is_some() {
                    return refuse(format!("column {to:?} already exists"));
                }
                let i = self.index_of(from).expect("exists");
                let file_name = next.columns[i].file_name().to_string();
                next.columns[i].name = to.clone();
                next.columns[i].physical = (file_name != *to).then_some(file_name);
            }
            SchemaChange::DropColumn { name } => {
                existing(name)?;
                if let Some(why) = structural(name) {
                    return refuse(format!("{name:?} cannot be dropped: {why}"));
                }
                let i = self.index_of(name).expect("exists");
                let dropped = next.columns.remove(i);
                next.retired_names.push(dropped.file_name().to_string());
                next.last_column_id = self.next_column_id() - 1;
            }
        }
        next.validate(table)?;
        Ok(next)
    }

    /// The id the next added column gets.
    fn next_column_id(&self) -> u32 {
        self.columns
            .iter()
            .map(|c| c.id)
            .max()
            .unwrap_or(0)
            .max(self.last_column_id)
            + 1
    }

    /// The column with this field id.
    pub fn column_by_id(&self, id: u32) -> Option<&Column> {
        self.columns.iter().find(|c| c.id == id)
    }

    /// The column with this name.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The field ids of the columns `names` of table `table`, for a table
    /// property named `what`; an unknown or repeated column is an error
    /// naming it.
    pub fn field_ids(&self, table: &str, names: &[&str], what: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(names.len());
        for name in names {
            let column = self.column(name).ok_or_else(|| Error::InvalidSchema {
                table: table.to_string(),
                reason: format!("{what}: no column {name:?} (columns: {})", self.spec()),
            })?;
            if ids.contains(&column.id) {
                return Err(Error::InvalidSchema {
                    table: table.to_string(),
                    reason: format!("{what}: column {name:?} is named twice"),
                });
            }
            ids.push(column.id);
        }
        Ok(ids)
    }

    /// Index of the column `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The Arrow schema of data in this table, with field ids in the metadata.
    pub fn arrow_schema(&self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|c| {
                Field::new(&c.name, c.ty.arrow_type(), c.nullable).with_metadata(HashMap::from([(
                    parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
                    c.id.to_string(),
                )]))
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// The schema data files are written with: [`TableSchema::arrow_schema`]
    /// with each column under its file name ([`Column::file_name`]).
    pub fn file_schema(&self) -> SchemaRef {
        let logical = self.arrow_schema();
        let fields: Vec<Field> = logical
            .fields()
            .iter()
            .zip(&self.columns)
            .map(|(f, c)| f.as_ref().clone().with_name(c.file_name()))
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// `name:type,...`, the inverse of [`TableSchema::parse_spec`].
    pub fn spec(&self) -> String {
        self.columns
            .iter()
            .map(|c| format!("{}:{}", c.name, c.ty.name()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Parse `name:type,...` into columns.
pub fn parse_columns(table: &str, spec: &str) -> Result<Vec<(String, ColumnType)>> {
    let invalid = |reason: String| Error::InvalidSchema {
        table: table.to_string(),
        reason,
    };
    let mut cols = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, ty) = part
            .split_once(':')
            .ok_or_else(|| invalid(format!("column {part:?} has no type; write name:type")))?;
        let ty = ColumnType::parse(ty).ok_or_else(|| {
            invalid(format!(
                "column {name:?} has unknown type {ty:?}; known types: {}",
                ColumnType::ALL.map(|(n, _)| n).join(", ")
            ))
        })?;
        cols.push((name.trim().to_string(), ty));
    }
    Ok(cols)
}

/// The `(name, type)` columns of an Arrow schema, if logbook can store them all.
pub fn columns_from_arrow(table: &str, schema: &Schema) -> Result<Vec<(String, ColumnType)>> {
    schema
        .fields()
        .iter()
        .map(|f| {
            ColumnType::from_arrow(f.data_type())
                .map(|t| (f.name().clone(), t))
                .ok_or_else(|| Error::InvalidSchema {
                    table: table.to_string(),
                    reason: format!(
                        "column {:?} has type {} which logbook does not store",
                        f.name(),
                        f.data_type()
                    ),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_and_errors_name_the_column() {
        let s = TableSchema::parse_spec("t", "d:date, n:int64 ,s:string", "d").unwrap();
        assert_eq!(s.spec(), "d:date,n:int64,s:string");
        let e = TableSchema::parse_spec("t", "d:date,n:decimal", "d").unwrap_err();
        assert!(e.to_string().contains("\"n\""), "{e}");
        let e = TableSchema::parse_spec("t", "d:string", "d").unwrap_err();
        assert!(e.to_string().contains("must have type date"), "{e}");
        let e = TableSchema::parse_spec("t", "d:date", "day").unwrap_err();
        assert!(e.to_string().contains("\"day\""), "{e}");
        assert!(TableSchema::parse_spec("t", "d:date,d:int32", "d").is_err());
    }

    #[test]
    fn dimensions_get_validity_columns_and_reject_bad_keys() {
        let d = TableSchema::parse_dimension_spec("c", "id:int64,region:string", &["id"]).unwrap();
        assert_eq!(d.keys().unwrap(), ["id".to_string()]);
        assert!(!d.column("id").unwrap().nullable);
        assert!(!d.column(VALID_FROM).unwrap().nullable);
        assert!(d.column(VALID_TO).unwrap().nullable);
        assert!(d.partition_column().is_none());
        let e = TableSchema::parse_dimension_spec("c", "id:int64,region:string", &["nope"])
            .unwrap_err();
        assert!(e.to_string().contains("\"nope\""), "{e}");
        let e =
            TableSchema::parse_dimension_spec("c", "id:int64,valid_to:date", &["id"]).unwrap_err();
        assert!(e.to_string().contains("managed by logbook"), "{e}");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<TableSchema>(&json).unwrap(), d);
    }

    #[test]
    fn arrow_schema_carries_field_ids() {
        let s = TableSchema::parse_spec("t", "d:date,n:int64", "d").unwrap();
        let a = s.arrow_schema();
        assert_eq!(a.field(1).metadata()["PARQUET:field_id"], "2");
    }
}
