//! Decoding log entries and manifests never panics: whatever bytes sit in
//! a table's metadata, opening and reading it returns a value or an error.

use std::sync::Arc;

use logbook::{StorageLocation, Table};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use proptest::prelude::*;

use crate::common::*;

/// A table with a few commits; returns its store and the paths of its
/// latest log entry, root manifest and a month manifest.
async fn table() -> (Arc<InMemory>, StorageLocation, [String; 3]) {
    let store = Arc::new(InMemory::new());
    let loc = StorageLocation::from_store(store.clone(), "t", "memory://t");
    let schema = logbook::TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = Table::create(loc.clone(), "t", schema, options())
        .await
        .unwrap();
    replace(&t, date("2026-03-15"), 0..3, "a", "r1").await;
    let snap = t.latest().await.unwrap();
    let entry = format!("_logbook/log/{:020}.json", snap.version());
    let root = snap.entry().manifest.clone();
    let month = root.replace("root.json", "2026-03.json");
    (store, loc, [entry, root, month])
}

/// Open the table and read everything; any outcome but a panic is fine.
async fn read_everything(loc: StorageLocation) {
    if let Ok(t) = Table::open(loc, "t", options()).await {
        if let Ok(s) = t.latest().await {
            if let Ok(parts) = s.partitions().await {
                for p in parts {
                    let _ = s.read_partition(p.date).await;
                }
            }
        }
        let _ = t.history().await;
    }
}

fn mutate(original: &[u8], edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for (at, byte) in edits {
        if !bytes.is_empty() {
            let i = at % bytes.len();
            bytes[i] = *byte;
        }
    }
    if let Some(c) = cut {
        bytes.truncate(c % (bytes.len() + 1));
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn damaged_metadata_is_an_error_never_a_panic(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in proptest::option::of(any::<usize>()),
        noise in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let (store, loc, paths) = table().await;
            let path = Path::from(format!("t/{}", paths[which]));
            let original = store.get(&path).await.unwrap().bytes().await.unwrap();
            let damaged = match &noise {
                Some(n) => n.clone(),
                None => mutate(&original, &edits, cut),
            };
            store.put(&path, damaged.into()).await.unwrap();
            read_everything(loc).await;
        });
    }
}
