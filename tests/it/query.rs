//! SQL over logbook tables: runs at a logical date, as-of dimensions,
//! lineage, pruning, time travel and join plans.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
use logbook::query::{session, QueryOptions, Run};
use logbook::{DimensionMode, RunInfo, StorageLocation, TableSchema, Warehouse};
use object_store::memory::InMemory;

use crate::common::*;
use crate::counting_store::CountingStore;
use crate::dimension::states;
use crate::fault_store::FaultStore;

pub(crate) async fn world() -> (Warehouse, Arc<CountingStore>) {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let wh = Warehouse::new(
        StorageLocation::from_store(store.clone(), "wh", "memory://wh"),
        options(),
    );
    let orders = TableSchema::parse_spec(
        "orders",
        "date:date,order_id:int64,customer:string,amount:float64",
        "date",
    )
    .unwrap();
    let orders = wh.create_table("orders", orders).await.unwrap();
    for (i, d) in ["2026-03-14", "2026-03-15", "2026-03-16", "2026-03-25"]
        .into_iter()
        .enumerate()
    {
        let d = date(d);
        let batch = RecordBatch::try_from_iter([
            ("date", Arc::new(Date32Array::from(vec![days(d); 3])) as _),
            (
                "order_id",
                Arc::new(Int64Array::from(vec![
                    i as i64 * 10,
                    i as i64 * 10 + 1,
                    i as i64 * 10 + 2,
                ])) as _,
            ),
            (
                "customer",
                Arc::new(StringArray::from(vec!["c-17", "c-04", "c-17"])) as _,
            ),
            (
                "amount",
                Arc::new(Float64Array::from(vec![10.0, 5.0, 1.5])) as _,
            ),
        ])
        .unwrap();
        let mut w = orders
            .replace_partition(d, RunInfo::new(format!("o{i}")))
            .await
            .unwrap();
        w.write(&batch).await.unwrap();
        w.commit().await.unwrap();
    }
    let customers = TableSchema::parse_dimension_spec(
        "customers",
        "customer:string,region:string",
        &["customer"],
    )
    .unwrap();
    let customers = wh.create_table("customers", customers).await.unwrap();
    customers
        .apply_changes(
            date("2026-01-01"),
            &[states(&[("c-17", "Berlin"), ("c-04", "Hamburg")])],
            RunInfo::new("c1"),
        )
        .await
        .unwrap();
    customers
        .apply_changes(
            date("2026-03-20"),
            &[states(&[("c-17", "Munich")])],
            RunInfo::new("c2"),
        )
        .await
        .unwrap();
    let out = TableSchema::parse_spec(
        "revenue_by_region",
        "date:date,region:string,revenue:float64",
        "date",
    )
    .unwrap();
    wh.create_table("revenue_by_region", out).await.unwrap();
    (wh, store)
}

pub(crate) const REVENUE: &str = "SELECT o.date, c.region, sum(o.amount) AS revenue \
    FROM orders o JOIN customers c ON o.customer = c.customer \
    WHERE o.date = logical_date() GROUP BY o.date, c.region";

async fn revenue(wh: &Warehouse, d: &str, version: Option<u64>) -> Vec<(String, f64)> {
    let t = wh.table("revenue_by_region").await.unwrap();
    let snap = match version {
        Some(v) => t.at_version(v).await.unwrap(),
        None => t.latest().await.unwrap(),
    };
    let mut out = Vec::new();
    for b in snap.read_partition(date(d)).await.unwrap() {
        let r = b.column_by_name("region").unwrap().as_string::<i32>();
        let v = b
            .column_by_name("revenue")
            .unwrap()
            .as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            out.push((r.value(i).to_string(), v.value(i)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The run record of `revenue_by_region`'s partition `d` at `version` (or latest).
async fn run_record(wh: &Warehouse, d: &str, version: Option<u64>) -> RunInfo {
    let t = wh.table("revenue_by_region").await.unwrap();
    let snap = match version {
        Some(v) => t.at_version(v).await.unwrap(),
        None => t.latest().await.unwrap(),
    };
    let p = snap
        .partition(date(d))
        .await
        .unwrap()
        .expect("partition written");
    p.run.expect("a run record")
}

#[tokio::test]
async fn berlin_as_of_and_munich_restated_each_partition_says_which() {
    let (wh, _) = world().await;
    let v1 = Run::new(&wh, "revenue_by_region", date("2026-03-15"))
        .code_version("v1")
        .sql(REVENUE)
        .await
        .unwrap();
    assert_eq!(
        revenue(&wh, "2026-03-15", None).await,
        vec![("Berlin".into(), 11.5), ("Hamburg".into(), 5.0)],
        "as-of: the customer was in Berlin on March 15"
    );
    Run::new(&wh, "revenue_by_region", date("2026-03-15"))
        .dimensions(DimensionMode::Current)
        .code_version("v1")
        .sql(REVENUE)
        .await
        .unwrap();
    assert_eq!(
        revenue(&wh, "2026-03-15", None).await,
        vec![("Hamburg".into(), 5.0), ("Munich".into(), 11.5)],
        "current: restated with today's region"
    );
    assert_eq!(
        revenue(&wh, "2026-03-15", Some(v1.version)).await[0].0,
        "Berlin"
    );

    let run = run_record(&wh, "2026-03-15", None).await;
    assert_eq!(run.dimensions, Some(DimensionMode::Current));
    assert_eq!(run.logical_date, Some(date("2026-03-15")));
    assert!(run.query.as_deref().unwrap().contains("logical_date()"));
    let orders = run
        .inputs
        .iter()
        .find(|i| i.table == "orders")
        .expect("orders in lineage");
    assert_eq!(
        orders.dates,
        Some(vec![date("2026-03-15")]),
        "the scan read only the run's date"
    );
    assert_eq!(orders.version, 4);
    let customers = run
        .inputs
        .iter()
        .find(|i| i.table == "customers")
        .expect("customers in lineage");
    assert!(customers.dimension && customers.dates.is_none());
    assert_eq!(customers.version, 2);
}

#[tokio::test]
async fn now_is_refused_in_a_run_and_logical_date_is_the_runs() {
    let (wh, _) = world().await;
    let run = QueryOptions {
        logical_date: Some(date("2026-03-15")),
        ..Default::default()
    };
    let ctx = session(&wh, run, None).await.unwrap();
    for q in [
        "SELECT now()",
        "SELECT current_date()",
        "SELECT CURRENT_TIMESTAMP",
        "SELECT today()",
    ] {
        let err = match ctx.sql(q).await {
            Ok(df) => df.collect().await.unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("logical_date()"), "{q}: {err}");
    }
    let rows = ctx
        .sql("SELECT logical_date() AS d, data_interval_end() - data_interval_start() AS len")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let d = rows[0]
        .column(0)
        .as_primitive::<arrow_array::types::Date32Type>()
        .value(0);
    assert_eq!(logbook::dates::from_days(d), date("2026-03-15"));

    // Outside a run, analysts may use the clock but not logical_date().
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    assert!(ctx
        .sql("SELECT now()")
        .await
        .unwrap()
        .collect()
        .await
        .is_ok());
    let err = ctx
        .sql("SELECT logical_date()")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("only defined inside a run"), "{err}");
}

#[tokio::test]
async fn a_query_for_one_date_opens_only_that_dates_files() {
    let (wh, store) = world().await;
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    store.take_reads();
    let rows = ctx
        .sql("SELECT count(*) AS n, sum(amount) AS s FROM orders WHERE date = DATE '2026-03-15'")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        rows[0]
            .column(0)
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(0),
        3
    );
    let data: Vec<String> = store
        .take_reads()
        .into_iter()
        .filter(|p| p.contains("/data/"))
        .collect();
    assert!(!data.is_empty(), "no data file was read");
    assert!(
        data.iter().all(|p| p.contains("date=2026-03-15")),
        "read other dates: {data:?}"
    );

    let text = plan_text(
        &ctx,
        "SELECT * FROM orders WHERE date BETWEEN DATE '2026-03-15' AND DATE '2026-03-16'",
    )
    .await;
    assert!(
        text.contains("dates=2 (2026-03-15..=2026-03-16)") && text.contains("files=2"),
        "{text}"
    );
}

#[tokio::test]
async fn time_travel_with_snapshot_and_pinned_versions() {
    let (wh, _) = world().await;
    let orders = wh.table("orders").await.unwrap();
    let d = date("2026-03-15");
    let mut w = orders
        .replace_partition(d, RunInfo::new("fix"))
        .await
        .unwrap();
    w.write(
        &RecordBatch::try_from_iter([
            ("date", Arc::new(Date32Array::from(vec![days(d)])) as _),
            ("order_id", Arc::new(Int64Array::from(vec![99])) as _),
            ("customer", Arc::new(StringArray::from(vec!["c-04"])) as _),
            ("amount", Arc::new(Float64Array::from(vec![1.0])) as _),
        ])
        .unwrap(),
    )
    .await
    .unwrap();
    w.commit().await.unwrap();
    let count = |sql: &'static str, pins: Vec<(&'static str, u64)>| {
        let wh = wh.clone();
        async move {
            let opts = QueryOptions {
                pins: pins.into_iter().map(|(t, v)| (t.to_string(), v)).collect(),
                ..Default::default()
            };
            let ctx = session(&wh, opts, None).await.unwrap();
            first_i64(&ctx, sql).await
        }
    };
    let q = "SELECT count(*) FROM orders WHERE date = DATE '2026-03-15'";
    assert_eq!(count(q, vec![]).await, 1);
    assert_eq!(count(q, vec![("orders", 4)]).await, 3);
    assert_eq!(
        count(
            "SELECT count(*) FROM snapshot('orders', 4) WHERE date = DATE '2026-03-15'",
            vec![]
        )
        .await,
        3
    );
    assert_eq!(
        count("SELECT count(*) FROM snapshot('orders', 1)", vec![]).await,
        3
    );
    // History of a dimension, and asof() for analysts.
    assert_eq!(count("SELECT count(*) FROM customers", vec![]).await, 3);
    assert_eq!(
        count(
            "SELECT count(*) FROM asof('customers', DATE '2026-03-15') WHERE region = 'Berlin'",
            vec![]
        )
        .await,
        1
    );
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    // Refused before planning: the version is read then.
    let err = logbook::query::sql(&ctx, "SELECT * FROM snapshot('orders', 99)")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
    let err = logbook::query::sql(&ctx, "SELECT * FROM asof('nope', DATE '2026-01-01')")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no table \"nope\""), "{err}");
}

#[tokio::test]
async fn a_point_in_time_range_join_is_keyed_not_a_nested_loop() {
    let (wh, _) = world().await;
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let sql = "SELECT o.date, d.region, sum(o.amount) FROM orders o JOIN customers d \
        ON o.customer = d.customer AND o.date >= d.valid_from AND (d.valid_to IS NULL OR o.date < d.valid_to) \
        GROUP BY o.date, d.region ORDER BY o.date, d.region";
    let text = plan_text(&ctx, sql).await;
    let df = ctx.sql(sql).await.unwrap();
    // Keyed on the customer, the validity range answered by binary search
    // in the customer's intervals (see tests/it/point_in_time.rs).
    assert!(
        text.contains("PointInTimeJoinExec: join_type=Inner, on=[(customer@")
            && text.contains("point=date@")
            && text.contains("valid=[valid_from@")
            && !text.contains("NestedLoopJoinExec"),
        "{text}"
    );
    let rows = df.collect().await.unwrap();
    let regions: Vec<String> = rows
        .iter()
        .flat_map(|b| {
            let r = b.column(1).as_string_view();
            (0..b.num_rows())
                .map(|i| r.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    // 3 early dates x {Berlin, Hamburg}, then March 25 x {Hamburg, Munich}.
    assert_eq!(regions.len(), 8);
    assert_eq!(&regions[6..], ["Hamburg", "Munich"]);
}

#[tokio::test]
async fn a_job_that_computes_its_own_batches_records_the_same_lineage() {
    let (wh, _) = world().await;
    let rc = Run::new(&wh, "revenue_by_region", date("2026-03-25"))
        .code_version("rust-job-1")
        .start()
        .await
        .unwrap();
    // The job reads its inputs through the run's session...
    let rows = rc
        .ctx
        .sql("SELECT c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c USING (customer) WHERE o.date = logical_date() GROUP BY c.region ORDER BY c.region")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    // ...computes rows itself, and writes them.
    let mut rc = rc;
    for b in rows {
        let n = b.num_rows();
        let out = RecordBatch::try_from_iter([
            (
                "date",
                Arc::new(Date32Array::from(vec![days(date("2026-03-25")); n])) as _,
            ),
            ("region", b.column(0).clone()),
            ("revenue", b.column(1).clone()),
        ])
        .unwrap();
        rc.writer.write(&out).await.unwrap();
    }
    let info = rc.commit().await.unwrap();
    let run = run_record(&wh, "2026-03-25", Some(info.version)).await;
    assert_eq!(run.dimensions, Some(DimensionMode::AsOf));
    assert_eq!(run.code_version.as_deref(), Some("rust-job-1"));
    let tables: Vec<&str> = run.inputs.iter().map(|i| i.table.as_str()).collect();
    assert_eq!(tables, vec!["customers", "orders"]);
    assert_eq!(
        revenue(&wh, "2026-03-25", None).await,
        vec![("Hamburg".into(), 5.0), ("Munich".into(), 11.5)]
    );
}

/// The tables a query names are opened concurrently before planning: on an
/// object store each open is a few round trips, which should not add up
/// table by table (DataFusion's planner opens them one after another).
#[tokio::test]
async fn the_tables_a_query_names_are_opened_concurrently() {
    let store = Arc::new(
        FaultStore::new(Arc::new(InMemory::new())).with_delays(std::time::Duration::from_millis(2)),
    );
    let wh = Warehouse::new(
        StorageLocation::from_store(store.clone(), "wh", "memory://wh"),
        options(),
    );
    for i in 0..20 {
        let name = format!("t{i:02}");
        let schema = TableSchema::parse_spec(&name, SPEC, "date").unwrap();
        wh.create_table(&name, schema).await.unwrap();
    }
    // A directory that holds no table is not one.
    use object_store::ObjectStoreExt;
    for stray in ["wh/stray/readme.txt", "wh/_tmp/part-0"] {
        let stray = object_store::path::Path::from(stray);
        store.put(&stray, "not a table".into()).await.unwrap();
    }
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    store.take_max_in_flight();
    let tables: Vec<String> = (0..8)
        .map(|i| format!("SELECT count(*) AS n FROM t{i:02}"))
        .collect();
    let query = format!("SELECT sum(n) FROM ({})", tables.join(" UNION ALL "));
    assert_eq!(first_i64(&ctx, &query).await, 0);
    assert!(store.take_max_in_flight() > 1);
    // Every table is there, by name.
    let listed = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'";
    assert_eq!(first_i64(&ctx, listed).await, 20);
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    // SHOW TABLES through a fresh session: exactly the 20 tables in `public`.
    let shown: usize = logbook::query::sql(&ctx, "SHOW TABLES")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| {
            let column = b.column_by_name("table_schema").unwrap();
            let schemas = logbook::query::datafusion::arrow::compute::cast(
                column,
                &arrow_schema::DataType::Utf8,
            )
            .unwrap();
            let schemas = schemas.as_string::<i32>();
            (0..b.num_rows())
                .filter(|&i| schemas.value(i) == "public")
                .count()
        })
        .sum();
    assert_eq!(shown, 20);
    let err = logbook::query::sql(&ctx, "SELECT * FROM stray")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("stray"), "{err}");
    assert_eq!(wh.list_tables().await.unwrap().len(), 20);
}

#[tokio::test]
async fn volatile_functions_are_refused_in_a_run_also_through_the_dataframe_api() {
    let (wh, _) = world().await;
    let rc = Run::new(&wh, "revenue_by_region", date("2026-03-15"))
        .start()
        .await
        .unwrap();
    for q in [
        "SELECT random()",
        "SELECT uuid()",
        "SELECT now() + INTERVAL '1 day'",
    ] {
        let err = match rc.ctx.sql(q).await {
            Ok(df) => df.collect().await.unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("logical_date()") && err.contains("replayed"),
            "{q}: {err}"
        );
    }
    // The DataFrame API plans through the same guard: DataFusion's own
    // `now()` and `random()` expressions are refused, not evaluated.
    use logbook::query::datafusion::functions::expr_fn::{now, random};
    for e in [now(), random()] {
        let err = rc
            .ctx
            .table("orders")
            .await
            .unwrap()
            .select(vec![e])
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("logical_date()"), "{err}");
    }
    rc.writer.abort().await.unwrap();
}

/// A session opens only the tables a query names, when planning needs
/// them: `SELECT 1` reads no table's metadata, a query over `orders` reads
/// only `orders`' (whatever else the warehouse holds), and a table function
/// opens its table before planning (`logbook::query::sql`).
#[tokio::test]
async fn a_session_opens_only_the_tables_a_query_names() {
    let (wh, store) = world().await;
    assert!(wh.list_tables().await.unwrap().len() > 2);
    let tables_read = |reads: Vec<String>| {
        let mut tables: Vec<String> = reads
            .iter()
            .filter_map(|p| p.strip_prefix("wh/")?.split('/').next().map(str::to_string))
            .collect();
        tables.sort();
        tables.dedup();
        tables
    };
    // Each query in a session of its own: the tables whose metadata it read.
    let reads_of = |q: &'static str| {
        let (wh, store) = (wh.clone(), store.clone());
        async move {
            store.take_reads();
            let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
            logbook::query::sql(&ctx, q)
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            tables_read(store.take_reads())
        }
    };
    assert_eq!(reads_of("SELECT 1").await, Vec::<String>::new());
    assert_eq!(
        reads_of("SELECT count(*) FROM orders").await,
        vec!["orders"]
    );
    // A CTE's name is not a table, even when a table has it.
    let cte = "WITH orders AS (SELECT 1 AS x) SELECT * FROM orders";
    assert_eq!(reads_of(cte).await, Vec::<String>::new());
    let q = "SELECT count(*) FROM asof('customers', DATE '2026-03-15')";
    assert_eq!(reads_of(q).await, vec!["customers"]);
    // Planned without opening its table first, a table function says how.
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let err = ctx.sql(q).await.unwrap_err();
    assert!(err.to_string().contains("logbook_datafusion::sql"), "{err}");
}

/// A partial aggregate that keeps most of its rows as groups passes them
/// on instead of holding every group twice (`SKIP_PARTIAL_AGGREGATION_RATIO`):
/// two dates of 150,000 rows with 60,000 keys each, a ratio of 0.6 that
/// DataFusion's default of 0.8 kept aggregating. The counts stay exact.
#[tokio::test]
async fn a_partial_aggregate_keeping_most_rows_as_groups_passes_them_on() {
    let wh = Warehouse::open("memory://")
        .unwrap()
        .with_options(options());
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let table = wh.create_table("t", schema).await.unwrap();
    for (d, ids) in [("2026-03-01", 0..150_000), ("2026-03-02", 150_000..300_000)] {
        let d = date(d);
        let mut w = table
            .replace_partition(d, RunInfo::new(format!("r-{d}")))
            .await
            .unwrap();
        let b = batch(d, ids, "x");
        // The key: id modulo 60,000, as text.
        let keys = StringArray::from_iter_values(
            b.column(1)
                .as_primitive::<arrow_array::types::Int64Type>()
                .values()
                .iter()
                .map(|i| format!("k{}", i % 60_000)),
        );
        let b = RecordBatch::try_new(
            b.schema(),
            vec![b.column(0).clone(), b.column(1).clone(), Arc::new(keys)],
        )
        .unwrap();
        w.write(&b).await.unwrap();
        w.commit().await.unwrap();
    }
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    ctx.sql("SET datafusion.execution.target_partitions = 2")
        .await
        .unwrap();
    let sql = "SELECT name, count(*) AS n FROM t GROUP BY name";
    let text = explain_analyze_text(&ctx, sql).await;
    let skipped: usize = text
        .lines()
        .filter(|l| l.contains("AggregateExec: mode=Partial"))
        .filter_map(|l| l.split("skipped_aggregation_rows=").nth(1))
        .map(|v| {
            v.split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert!(
        skipped > 0,
        "the partial aggregate kept aggregating:\n{text}"
    );
    let rows = ctx
        .sql(&format!(
            "SELECT count(*) AS groups, min(n) AS lo, max(n) AS hi FROM ({sql})"
        ))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let col = |i: usize| {
        rows[0]
            .column(i)
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(0)
    };
    assert_eq!(
        (col(0), col(1), col(2)),
        (60_000, 5, 5),
        "every key 5 times"
    );
}
