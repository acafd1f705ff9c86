//! Data and tables shared by the benches.

use std::sync::Arc;

use arrow_array::{
    Date32Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use chrono::NaiveDate;
use logbook::{RunInfo, StorageLocation, Table, TableOptions, TableSchema};

pub const SPEC: &str =
    "date:date,order_id:int64,customer:string,amount:float64,placed_at:timestamp";

pub fn day(i: u64) -> NaiveDate {
    NaiveDate::from_ymd_opt(2020, 1, 1).unwrap() + chrono::Days::new(i)
}

/// `rows` deterministic order rows of `date`, in batches of 8,192.
pub fn batches(date: NaiveDate, rows: usize) -> Vec<RecordBatch> {
    let schema = TableSchema::parse_spec("t", SPEC, "date")
        .unwrap()
        .arrow_schema();
    let days = (date - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32;
    let base_us = i64::from(days) * 86_400_000_000;
    (0..rows)
        .step_by(8192)
        .map(|start| {
            let ids: Vec<i64> = (start as i64..(start + 8192).min(rows) as i64).collect();
            let n = ids.len();
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Date32Array::from(vec![days; n])),
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(StringArray::from_iter_values(
                        ids.iter().map(|i| format!("c-{}", i * 7919 % 100_000)),
                    )),
                    Arc::new(Float64Array::from_iter_values(
                        ids.iter().map(|i| (i * 31 % 10_000) as f64 / 100.0),
                    )),
                    Arc::new(TimestampMicrosecondArray::from_iter_values(
                        ids.iter().map(|i| base_us + i * 400_000),
                    )),
                ],
            )
            .unwrap()
        })
        .collect()
}

pub async fn create(location: StorageLocation, options: TableOptions) -> Table {
    let schema = TableSchema::parse_spec("bench", SPEC, "date").unwrap();
    Table::create(location, "bench", schema, options)
        .await
        .unwrap()
}

pub async fn replace(table: &Table, date: NaiveDate, batches: &[RecordBatch], run: String) -> u64 {
    let mut w = table
        .replace_partition(date, RunInfo::new(run))
        .await
        .unwrap();
    for b in batches {
        w.write(b).await.unwrap();
    }
    w.commit().await.unwrap().version
}
