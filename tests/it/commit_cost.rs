//! A commit's work must not grow with history: count store operations.

use std::collections::BTreeMap;
use std::sync::Arc;

use logbook::{StorageLocation, Table, TableSchema};
use object_store::memory::InMemory;

use crate::common::*;
use crate::counting_store::CountingStore;

async fn commit_ops(t: &Table, store: &CountingStore, run: &str) -> BTreeMap<&'static str, usize> {
    store.take();
    replace(t, date("2026-06-15"), 0..100, run, run).await;
    store.take()
}

async fn open_ops(loc: &StorageLocation, store: &CountingStore) -> BTreeMap<&'static str, usize> {
    store.take();
    let t = Table::open(loc.clone(), "orders", options()).await.unwrap();
    let snap = t.latest().await.unwrap();
    snap.partition(date("2026-06-15")).await.unwrap().unwrap();
    store.take()
}

#[tokio::test]
async fn commit_and_open_cost_the_same_at_history_10_and_1000() {
    let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(store.clone(), "wh/orders", "memory://wh/orders");
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = Table::create(loc.clone(), "orders", schema, options())
        .await
        .unwrap();
    let base = date("2026-01-01");
    // History of 10 commits over 10 dates in different months.
    for i in 0..9u64 {
        replace(
            &t,
            base + chrono::Days::new(i * 31),
            0..3,
            "h",
            &format!("h{i}"),
        )
        .await;
    }
    let at_10 = commit_ops(&t, &store, "c10").await;
    let open_10 = open_ops(&loc, &store).await;
    for i in 10..1000u64 {
        replace(
            &t,
            base + chrono::Days::new(i % 97 * 31),
            0..3,
            "h",
            &format!("h{i}"),
        )
        .await;
    }
    assert!(t.latest_version().await.unwrap() >= 1000);
    let at_1000 = commit_ops(&t, &store, "c1000").await;
    let open_1000 = open_ops(&loc, &store).await;
    assert_eq!(at_10, at_1000, "commit operations grew with history");
    assert_eq!(open_10, open_1000, "open operations grew with history");
    // 12 for the write and commit, plus the intent marker's put and delete.
    assert!(
        at_10.values().sum::<usize>() <= 14,
        "a commit costs {at_10:?}"
    );
    assert!(
        !at_10.contains_key("list") && !open_10.contains_key("list"),
        "listing the log"
    );
}
