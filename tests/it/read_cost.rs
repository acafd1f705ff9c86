//! What a query fetches from the store: requests per data file, and reads
//! of the log per query (each a round trip on an object store).

use std::collections::HashMap;
use std::sync::Arc;

use logbook::query::datafusion::physical_plan::collect;
use logbook::query::{session, QueryOptions};
use logbook::{StorageLocation, Table, TableSchema, Warehouse};
use object_store::memory::InMemory;

use crate::common::*;
use crate::counting_store::CountingStore;

/// A warehouse on a counting `memory://` store holding table `orders`.
async fn counted(name: &str) -> (Arc<CountingStore>, Warehouse, Table) {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
    let wh = Warehouse::new(loc, options());
    let schema = TableSchema::parse_spec(name, SPEC, "date").unwrap();
    let t = wh.create_table(name, schema).await.unwrap();
    (store, wh, t)
}

/// `counted("orders")` with ten rows on each of three dates; its head.
async fn three_dates() -> (Arc<CountingStore>, Warehouse, u64) {
    let (store, wh, t) = counted("orders").await;
    for i in 0..3u64 {
        let d = date("2026-03-01") + chrono::Days::new(i);
        replace(&t, d, 0..10, "x", &format!("r{i}")).await;
    }
    let head = t.latest_version().await.unwrap();
    (store, wh, head)
}

/// Run `sql` in a fresh session; the scan's counters.
async fn query(wh: &Warehouse, sql: &str) -> HashMap<String, usize> {
    let ctx = session(wh, QueryOptions::default(), None).await.unwrap();
    let plan = logbook::query::sql(&ctx, sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let mut counts = HashMap::new();
    add_scan_counts(&plan, &mut counts);
    counts
}

/// Write `n` rows to date `d` whose names do not compress (32 hex digits
/// each); the file's size.
async fn incompressible(t: &Table, d: chrono::NaiveDate, n: usize) -> u64 {
    let name = |i: u64| {
        let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 17);
        format!("{:016x}{:016x}", h, h.rotate_left(29).wrapping_mul(31))
    };
    let rows = arrow_array::RecordBatch::try_new(
        t.latest().await.unwrap().arrow_schema(),
        vec![
            Arc::new(arrow_array::Date32Array::from(vec![days(d); n])),
            Arc::new(arrow_array::Int64Array::from_iter_values(0..n as i64)),
            Arc::new(arrow_array::StringArray::from_iter_values(
                (0..n as u64).map(name),
            )),
        ],
    )
    .unwrap();
    let run = logbook::RunInfo::new(format!("r{d}"));
    let mut w = t.replace_partition(d, run).await.unwrap();
    w.write(&rows).await.unwrap();
    w.commit().await.unwrap();
    latest_partition(t, d).await.files[0].size
}

#[tokio::test]
async fn a_small_file_is_fetched_in_one_request() {
    let (store, wh, t) = counted("orders").await;
    for i in 0..3u64 {
        let d = date("2026-03-01") + chrono::Days::new(i);
        let size = incompressible(&t, d, 4000).await;
        // Larger than the footer's usual fetch, small enough to read whole.
        assert!((100 * 1024..=256 * 1024).contains(&size), "{size} bytes");
    }
    store.take_reads();
    let counts = query(&wh, "SELECT sum(id) FROM orders").await;
    let data_reads = store
        .take_reads()
        .iter()
        .filter(|p| p.contains("/data/"))
        .count();
    assert_eq!(counts["files_opened"], 3, "{counts:?}");
    // The footer's fetch takes the whole file; the column is served from it.
    assert_eq!(data_reads, 3, "one GET per small file");
}

#[tokio::test]
async fn a_query_reads_the_head_of_a_table_once() {
    let (store, wh, head) = three_dates().await;
    let entry = format!("{head:020}.json");
    let reads_of =
        |reads: &[String], what: &str| reads.iter().filter(|p| p.ends_with(what)).count();

    // A query opens the table at its head, then scans the head.
    store.take_reads();
    query(&wh, "SELECT count(*) FROM orders").await;
    let reads = store.take_reads();
    assert_eq!(reads_of(&reads, &entry), 1, "{reads:#?}");
    assert_eq!(reads_of(&reads, "root.json"), 1, "{reads:#?}");

    // Time travel checks the version against the head's retention: the
    // head's entry and root are not read again for it.
    let sql = format!("SELECT count(*) FROM snapshot('orders', {})", head - 1);
    query(&wh, &sql).await;
    let reads = store.take_reads();
    assert_eq!(reads_of(&reads, &entry), 1, "{reads:#?}");
    assert_eq!(
        reads_of(&reads, "root.json"),
        2,
        "the head's and the version's: {reads:#?}"
    );
}

#[tokio::test]
async fn a_pinned_or_time_travel_query_asks_the_log_only_to_open_the_table() {
    let (store, wh, head) = three_dates().await;
    // Opening a table reads the `_last` hint and probes two entries: the
    // hint's (it exists) and the next (it does not). A version read is
    // checked against the head found then; nothing asks again.
    let heads = |store: &CountingStore| store.take().get("head").copied().unwrap_or(0);

    store.take();
    let sql = format!("SELECT sum(id) FROM snapshot('orders', {})", head - 1);
    let counts = query(&wh, &sql).await;
    assert_eq!(counts["files_opened"], 2, "{counts:?}");
    assert_eq!(heads(&store), 2, "HEADs of the log for a time travel");

    let opts = QueryOptions {
        pins: [("orders".to_string(), head - 1)].into(),
        ..Default::default()
    };
    // The session opens a pinned table when it starts.
    store.take();
    let ctx = session(&wh, opts, None).await.unwrap();
    assert_eq!(first_i64(&ctx, "SELECT sum(id) FROM orders").await, 90);
    assert_eq!(heads(&store), 2, "HEADs of the log for a pinned table");
}
