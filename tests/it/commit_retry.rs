//! A commit retried after its log entry got no answer: the entry that
//! lands may be any attempt's. What the writer's handle then sees, and
//! what the attempts the log does not name leave behind.

use std::sync::Arc;

use logbook::{StorageLocation, Table, TableSchema};
use object_store::memory::InMemory;

use crate::common::*;
use crate::fault_store::{Fault, FaultStore};

/// Table `orders` on a fault store, one date committed; a second commit
/// whose first log create fails as `fault`. The table, a fresh handle's
/// head and the root manifests stored.
async fn second_commit_after(fault: Fault) -> (Table, logbook::Snapshot, Vec<String>) {
    let faults = Arc::new(FaultStore::new(Arc::new(InMemory::new())));
    let loc = StorageLocation::from_store(faults.clone(), "wh/orders", "memory://wh/orders");
    let schema = TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = Table::create(loc.clone(), "orders", schema, options())
        .await
        .unwrap();
    replace(&t, date("2026-03-01"), 0..10, "x", "r1").await;
    faults.fail_next_create_under("_logbook/log/", fault);
    let v = replace(&t, date("2026-03-02"), 0..10, "x", "r2").await;
    let fresh = Table::open(loc, "orders", options()).await.unwrap();
    let stored = fresh.latest().await.unwrap();
    assert_eq!(stored.version(), v);
    let roots = objects(&t, "_logbook/manifests").await;
    let roots = roots
        .into_iter()
        .filter(|p| p.ends_with("root.json"))
        .collect();
    (t, stored, roots)
}

/// A commit's first try held up in the network lands after the writer
/// tried again: the entry in the log is the writer's own (same commit id)
/// but names the first try's manifests. The handle must read the head
/// the log holds, not remember the second try's, whose manifests no entry
/// names (vacuum on that handle would keep them and delete the real ones).
#[tokio::test]
async fn a_commit_whose_first_try_lands_late_leaves_the_handle_on_the_logs_head() {
    let (t, stored, roots) = second_commit_after(Fault::Late).await;
    let seen = t.latest().await.unwrap();
    assert_eq!(seen.entry().manifest, stored.entry().manifest);
    assert_eq!(seen.partitions().await.unwrap().len(), 2);
    // The second try's manifests, which no entry names, are deleted: one
    // root per version (0, 1, 2).
    assert_eq!(roots.len(), 3, "{roots:#?}");
}

/// A commit's first try that got no answer and never landed: once the
/// second lands, the first's manifests are deleted.
#[tokio::test]
async fn a_commit_deletes_the_manifests_of_tries_that_never_landed() {
    let (_, stored, roots) = second_commit_after(Fault::Before).await;
    assert!(roots.contains(&stored.entry().manifest), "{roots:#?}");
    assert_eq!(roots.len(), 3, "{roots:#?}");
}
