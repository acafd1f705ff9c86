//! Helpers shared by the integration tests.

use std::sync::Arc;

use arrow_array::{Array, Date32Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use logbook::clock::{ManualClock, SequentialIds};
use logbook::{RunInfo, StorageLocation, Table, TableOptions, TableSchema};

/// A vacuum that deletes whatever nothing references or protects,
/// however young, anywhere (it lists every file).
pub fn sweep() -> logbook::maintenance::VacuumOptions {
    logbook::maintenance::VacuumOptions {
        retention_ms: 0,
        force: true,
        full: true,
        ..Default::default()
    }
}

/// The physical plan of `sql` in `ctx`, indented as `EXPLAIN` shows it.
pub async fn plan_text(
    ctx: &logbook::query::datafusion::prelude::SessionContext,
    sql: &str,
) -> String {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let text = logbook::query::datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    text
}

/// The text `EXPLAIN ANALYZE` shows for `sql` in `ctx`: the executed plan
/// with each node's metrics.
pub async fn explain_analyze_text(
    ctx: &logbook::query::datafusion::prelude::SessionContext,
    sql: &str,
) -> String {
    use arrow_array::cast::AsArray;
    let batches = ctx
        .sql(&format!("EXPLAIN ANALYZE {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    batches
        .iter()
        .flat_map(|b| {
            let plans = b.column(1).as_string::<i32>();
            (0..b.num_rows()).map(move |i| plans.value(i).to_string())
        })
        .collect()
}

pub const SPEC: &str = "date:date,id:int64,name:string";

pub fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

pub fn days(d: NaiveDate) -> i32 {
    (d - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32
}

/// Rows `(d, id, "<tag>-<id>")` for ids in `ids`.
pub fn batch(d: NaiveDate, ids: std::ops::Range<i64>, tag: &str) -> RecordBatch {
    let n = ids.clone().count();
    let schema = TableSchema::parse_spec("t", SPEC, "date")
        .unwrap()
        .arrow_schema();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Date32Array::from(vec![days(d); n])),
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("{tag}-{i}")),
            )),
        ],
    )
    .unwrap()
}

/// Deterministic clock, and ids from one sequence shared by every handle in
/// this process (two handles drawing the same ids would be two writers with
/// the same commit id, which real id generators never produce).
pub fn options() -> TableOptions {
    static IDS: std::sync::OnceLock<Arc<SequentialIds>> = std::sync::OnceLock::new();
    TableOptions::default()
        .with_clock(Arc::new(ManualClock::new(1_700_000_000_000)))
        .with_ids(IDS.get_or_init(Default::default).clone())
}

pub async fn memory_table(name: &str) -> Table {
    memory_table_with(name, options()).await
}

pub async fn memory_table_with(name: &str, options: TableOptions) -> Table {
    let loc = StorageLocation::parse("memory://")
        .unwrap()
        .child(name)
        .unwrap();
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    Table::create(loc, name, schema, options).await.unwrap()
}

/// Replace `d` with `ids` tagged `tag`, as run `run`; returns the version.
pub async fn replace(
    table: &Table,
    d: NaiveDate,
    ids: std::ops::Range<i64>,
    tag: &str,
    run: &str,
) -> u64 {
    let mut w = table.replace_partition(d, RunInfo::new(run)).await.unwrap();
    w.write(&batch(d, ids, tag)).await.unwrap();
    w.commit().await.unwrap().version
}

/// The latest snapshot's entry for partition `d` (which must exist).
pub async fn latest_partition(table: &Table, d: NaiveDate) -> logbook::PartitionEntry {
    latest_partition_opt(table, d)
        .await
        .unwrap_or_else(|| panic!("no partition {d} in {}", table.name()))
}

/// The latest snapshot's entry for partition `d`, if it has one.
pub async fn latest_partition_opt(table: &Table, d: NaiveDate) -> Option<logbook::PartitionEntry> {
    table.latest().await.unwrap().partition(d).await.unwrap()
}

/// The `(id, name)` rows of `d` at `snapshot`, sorted.
pub async fn rows(snapshot: &logbook::Snapshot, d: NaiveDate) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for b in snapshot.read_partition(d).await.unwrap() {
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let names = b
            .column_by_name("name")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            assert!(!ids.is_null(i));
            out.push((ids.value(i), names.value(i).to_string()));
        }
    }
    out.sort();
    out
}

/// Every object path under the table's `data/` directory.
pub async fn data_files(table: &Table) -> Vec<String> {
    objects(table, "data").await
}

/// The table's data files once `ready` holds of them: a full file is
/// stored in the background, shortly after the write that filled it.
pub async fn data_files_once(table: &Table, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..1200 {
        let files = data_files(table).await;
        if ready(&files) {
            return files;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "the data files never got there: {:?}",
        data_files(table).await
    );
}

/// Every object path under `prefix` in the table, sorted.
pub async fn objects(table: &Table, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let loc = table.location();
    let mut paths: Vec<String> = loc
        .store()
        .list(Some(&loc.path(prefix)))
        .map_ok(|m| loc.relative(&m.location))
        .try_collect()
        .await
        .unwrap();
    paths.sort();
    paths
}

/// The bytes of the table's object at `relative`.
pub async fn object_bytes(table: &Table, relative: &str) -> bytes::Bytes {
    use object_store::ObjectStoreExt;
    let loc = table.location();
    let object = loc.store().get(&loc.path(relative)).await.unwrap();
    object.bytes().await.unwrap()
}

/// Properties of a table whose Delta mirror is on from its creation.
pub fn delta_mirror() -> logbook::TableProperties {
    logbook::TableProperties {
        mirror: Some(logbook::Mirror::from_creation(logbook::MirrorFormat::Delta)),
        ..Default::default()
    }
}

/// The first column of the first row of `sql`'s answer, as an `i64`.
pub async fn first_i64(
    ctx: &logbook::query::datafusion::prelude::SessionContext,
    sql: &str,
) -> i64 {
    use arrow_array::cast::AsArray;
    logbook::query::sql(ctx, sql)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()[0]
        .column(0)
        .as_primitive::<arrow_array::types::Int64Type>()
        .value(0)
}

/// Add the counters of every logbook scan in `plan` (what `EXPLAIN
/// ANALYZE` shows) into `into`.
pub fn add_scan_counts(
    plan: &Arc<dyn logbook::query::datafusion::physical_plan::ExecutionPlan>,
    into: &mut std::collections::HashMap<String, usize>,
) {
    if plan.name() == "LogbookScanExec" {
        for m in plan.metrics().unwrap().iter() {
            *into.entry(m.value().name().to_string()).or_default() += m.value().as_usize();
        }
    }
    for child in plan.children() {
        add_scan_counts(child, into);
    }
}
