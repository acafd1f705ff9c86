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
    counted_at(
        name,
        CountingStore::new(Arc::new(InMemory::new())),
        "memory://wh",
    )
    .await
}

/// A warehouse on `store`, named by `uri` (whose scheme says whether
/// readers treat it as an object store over a network), holding table
/// `name`.
async fn counted_at(
    name: &str,
    store: CountingStore,
    uri: &str,
) -> (Arc<CountingStore>, Warehouse, Table) {
    let store = Arc::new(store);
    let loc = StorageLocation::from_store(store.clone(), "wh", uri);
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
    query_in(&ctx, sql).await
}

/// Run `sql` in `ctx`; the scan's counters.
async fn query_in(
    ctx: &logbook::query::datafusion::prelude::SessionContext,
    sql: &str,
) -> HashMap<String, usize> {
    let plan = logbook::query::sql(ctx, sql)
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
async fn on_an_object_store_a_file_up_to_a_mebibyte_is_fetched_whole_and_files_are_opened_eight_ahead(
) {
    // Each request waits, as a round trip does, so that those a scan makes
    // at once overlap; the uri says the store is S3 (it is memory here).
    let delay = std::time::Duration::from_millis(20);
    for (uri, whole, ahead) in [
        ("s3://bucket/wh", true, 8..=9),
        ("memory://wh", false, 1..=2),
    ] {
        let store = CountingStore::new(Arc::new(InMemory::new())).with_delay(delay);
        let (store, wh, t) = counted_at("orders", store, uri).await;
        for i in 0..12u64 {
            let d = date("2026-03-01") + chrono::Days::new(i);
            let size = incompressible(&t, d, 16000).await;
            // Past the bound on local stores, within the one on remote ones.
            assert!((256 * 1024..=1024 * 1024).contains(&size), "{size} bytes");
        }
        let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
        ctx.sql("SET datafusion.execution.target_partitions = 1")
            .await
            .unwrap();
        store.take_reads();
        store.take_most_in_flight();
        let counts = query_in(&ctx, "SELECT sum(id) FROM orders").await;
        assert_eq!(counts["files_opened"], 12, "{counts:?}");
        let data_reads = store
            .take_reads()
            .iter()
            .filter(|p| p.contains("/data/"))
            .count();
        match whole {
            true => assert_eq!(data_reads, 12, "{uri}: one GET per file"),
            false => assert_eq!(data_reads, 24, "{uri}: the footer's tail, then the column"),
        }
        // One partition, opening files ahead of the one it reads (8 on
        // S3; the one being read is already in memory).
        let most = store.take_most_in_flight();
        assert!(
            ahead.contains(&most),
            "{uri}: {most} requests at once, expected {ahead:?}"
        );
    }
}

#[tokio::test]
async fn a_query_asks_each_table_log_once_for_its_head() {
    let (store, wh, _) = three_dates().await;
    let heads = |store: &CountingStore| store.take().get("head").copied().unwrap_or(0);
    // A fresh session opens the table: the `_last` hint, then its entry
    // read and the next probed (one HEAD). The scan reads the head found.
    store.take();
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    assert_eq!(first_i64(&ctx, "SELECT count(*) FROM orders").await, 30);
    assert_eq!(
        heads(&store),
        1,
        "HEADs of the log for a fresh session's query"
    );
    // A later query of the session asks for the head once more, before
    // planning, however many times it reads the table.
    let sql = "SELECT count(*) FROM orders a JOIN orders b ON a.id = b.id AND a.date = b.date";
    assert_eq!(first_i64(&ctx, sql).await, 30);
    assert_eq!(
        heads(&store),
        1,
        "HEADs of the log for the session's next query"
    );
}

#[tokio::test]
async fn a_session_reads_each_query_at_the_head_it_finds_then() {
    let (_, wh, _) = three_dates().await;
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    assert_eq!(first_i64(&ctx, "SELECT count(*) FROM orders").await, 30);
    // Another writer commits a fourth date: the session's next query sees it.
    let other = Warehouse::new(wh.location().clone(), options());
    let t = other.table("orders").await.unwrap();
    replace(&t, date("2026-03-04"), 0..10, "x", "r3").await;
    assert_eq!(first_i64(&ctx, "SELECT count(*) FROM orders").await, 40);
}

#[tokio::test]
async fn frames_of_two_warehouses_each_read_their_own_table() {
    let fresh = || CountingStore::new(Arc::new(InMemory::new()));
    let (_, a, ta) = counted_at("orders", fresh(), "memory://a").await;
    let (_, b, tb) = counted_at("orders", fresh(), "memory://b").await;
    replace(&ta, date("2026-03-01"), 0..10, "x", "a").await;
    replace(&tb, date("2026-03-01"), 0..3, "x", "b").await;
    let (ca, cb) = (
        session(&a, QueryOptions::default(), None).await.unwrap(),
        session(&b, QueryOptions::default(), None).await.unwrap(),
    );
    // The union is planned with the first frame's state, which holds the
    // head the first query found of its `orders`: the second's is not it.
    let sql = "SELECT id FROM orders";
    let left = logbook::query::sql(&ca, sql).await.unwrap();
    let right = logbook::query::sql(&cb, sql).await.unwrap();
    assert_eq!(left.union(right).unwrap().count().await.unwrap(), 13);
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
    // Opening a table reads the `_last` hint, then the hint's entry (it
    // exists) and probes the next (it does not). A version read is checked
    // against the head found then; nothing asks again.
    let heads = |store: &CountingStore| store.take().get("head").copied().unwrap_or(0);

    store.take();
    let sql = format!("SELECT sum(id) FROM snapshot('orders', {})", head - 1);
    let counts = query(&wh, &sql).await;
    assert_eq!(counts["files_opened"], 2, "{counts:?}");
    assert_eq!(heads(&store), 1, "HEADs of the log for a time travel");

    let opts = QueryOptions {
        pins: [("orders".to_string(), head - 1)].into(),
        ..Default::default()
    };
    // The session opens a pinned table when it starts.
    store.take();
    let ctx = session(&wh, opts, None).await.unwrap();
    assert_eq!(first_i64(&ctx, "SELECT sum(id) FROM orders").await, 90);
    assert_eq!(heads(&store), 1, "HEADs of the log for a pinned table");
}
