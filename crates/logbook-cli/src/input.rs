//! Reading input files (CSV with a header, Parquet) as batches in a table's schema.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema, SchemaRef};
use logbook_core::{ColumnType, TableSchema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::commands::CliError;

pub type Batches = Box<dyn Iterator<Item = Result<RecordBatch, CliError>>>;

const BATCH_ROWS: usize = 64 * 1024;

fn err(table: &str, file: &Path, msg: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("table {table}, file {}: {msg}", file.display()))
}

/// Open `file` and stream its rows with the table's column types. Every
/// column of the table except those in `skip` must be present.
pub fn open(
    file: &Path,
    schema: &TableSchema,
    table: &str,
    skip: &[&str],
) -> Result<Batches, CliError> {
    match file.extension().and_then(|e| e.to_str()) {
        Some("csv") => open_csv(file, schema, table, skip),
        Some("parquet") => open_parquet(file, schema, table),
        _ => Err(err(
            table,
            file,
            "unknown input type; use a .csv or .parquet file",
        )),
    }
}

fn open_csv(
    file: &Path,
    schema: &TableSchema,
    table: &str,
    skip: &[&str],
) -> Result<Batches, CliError> {
    let mut f = File::open(file).map_err(|e| err(table, file, e))?;
    if f.metadata().map(|m| m.len() == 0).unwrap_or(false) {
        return Err(err(table, file, "is empty: a CSV input needs a header row"));
    }
    let mut header = String::new();
    BufReader::new(&mut f)
        .read_line(&mut header)
        .map_err(|e| err(table, file, e))?;
    let names: Vec<String> = header
        .trim_end_matches(['\r', '\n'])
        .split(',')
        .map(|h| h.trim().trim_matches('"').to_string())
        .collect();
    let mut fields = Vec::with_capacity(names.len());
    for name in &names {
        let col = schema.column(name).ok_or_else(|| {
            err(
                table,
                file,
                format!(
                    "header names column {name:?}, which the table does not have (columns: {})",
                    schema.spec()
                ),
            )
        })?;
        fields.push(Field::new(name, col.ty.arrow_type(), true));
    }
    if let Some(missing) = schema
        .columns
        .iter()
        .find(|c| !names.contains(&c.name) && !skip.contains(&c.name.as_str()))
    {
        return Err(err(
            table,
            file,
            format!("header has no column {:?}", missing.name),
        ));
    }
    f.rewind().map_err(|e| err(table, file, e))?;
    let reader = arrow_csv::ReaderBuilder::new(Arc::new(Schema::new(fields)))
        .with_header(true)
        .with_batch_size(BATCH_ROWS)
        .build(f)
        .map_err(|e| err(table, file, e))?;
    let (table, file) = (table.to_string(), file.to_path_buf());
    Ok(Box::new(
        reader.map(move |b| b.map_err(|e| err(&table, &file, e))),
    ))
}

fn open_parquet(file: &Path, schema: &TableSchema, table: &str) -> Result<Batches, CliError> {
    let f = File::open(file).map_err(|e| err(table, file, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
        .map_err(|e| err(table, file, e))?;
    let target = schema.clone();
    let (table, file) = (table.to_string(), file.to_path_buf());
    Ok(Box::new(reader.map(move |b| {
        let b = b.map_err(|e| err(&table, &file, e))?;
        conform(&b, &target).map_err(|e| err(&table, &file, e))
    })))
}

/// Cast columns whose Arrow type is another encoding of the same logbook
/// type (nanosecond timestamps, large strings) to the table's type.
fn conform(
    batch: &RecordBatch,
    schema: &TableSchema,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        let target = schema
            .column(field.name())
            .filter(|c| ColumnType::from_arrow(field.data_type()) == Some(c.ty))
            .map(|c| c.ty.arrow_type());
        match target {
            Some(t) if &t != field.data_type() => {
                columns.push(arrow_cast::cast(array, &t)?);
                fields.push(Field::new(field.name(), t, field.is_nullable()));
            }
            _ => {
                columns.push(array.clone());
                fields.push(field.as_ref().clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// The Arrow schema of a Parquet file.
pub fn parquet_schema(file: &Path) -> Result<SchemaRef, CliError> {
    let f =
        File::open(file).map_err(|e| CliError::Input(format!("file {}: {e}", file.display())))?;
    ParquetRecordBatchReaderBuilder::try_new(f)
        .map(|b| b.schema().clone())
        .map_err(|e| CliError::Input(format!("file {}: {e}", file.display())))
}
