use std::collections::BTreeMap;
use std::sync::Arc;

use logbook::{Error, ErrorKind, RunInfo, Table};

use crate::common::*;

/// A second handle on the same table, as another process would have.
async fn other_handle(t: &Table) -> Table {
    Table::open(t.location().clone(), t.name(), options())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replaces_of_different_dates_racing_all_commit() {
    let t = memory_table("orders").await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let h = other_handle(&t).await;
        tasks.push(tokio::spawn(async move {
            let d = date("2026-03-01") + chrono::Days::new(i);
            let mut w = h
                .replace_partition(d, RunInfo::new(format!("run-{i}")))
                .await
                .unwrap();
            w.write(&batch(d, 0..(i as i64 + 1), "x")).await.unwrap();
            w.commit().await.unwrap().version
        }));
    }
    let mut versions: Vec<u64> = Vec::new();
    for task in tasks {
        versions.push(task.await.unwrap());
    }
    versions.sort();
    assert_eq!(
        versions,
        (1..=24).collect::<Vec<_>>(),
        "each commit got its own version"
    );
    let snap = t.latest().await.unwrap();
    let parts = snap.partitions().await.unwrap();
    assert_eq!(parts.len(), 24);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(p.rows, i as u64 + 1, "{}", p.date);
    }
    // Attempts that lost their version deleted what they wrote: every
    // manifest left belongs to a committed version's attempt (each writes
    // its own root; spans and months are written beside it).
    let mut committed = std::collections::BTreeSet::new();
    for v in 0..=24 {
        let root = t.at_version(v).await.unwrap().entry().manifest.clone();
        committed.insert(root.rsplit_once('/').unwrap().0.to_string());
    }
    for path in objects(&t, "_logbook/manifests").await {
        let dir = path.rsplit_once('/').unwrap().0;
        assert!(committed.contains(dir), "{path} left by a lost attempt");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replaces_of_the_same_date_racing_one_wins_the_rest_conflict() {
    let t = memory_table("orders").await;
    let d = date("2026-03-15");
    replace(&t, d, 0..3, "seed", "seed").await;
    // All writers start from the same snapshot before any of them commits.
    let mut writers = Vec::new();
    for i in 0..8 {
        let h = other_handle(&t).await;
        let mut w = h
            .replace_partition(d, RunInfo::new(format!("run-{i}")))
            .await
            .unwrap();
        w.write(&batch(d, 0..10, &format!("w{i}"))).await.unwrap();
        writers.push(w);
    }
    let tasks: Vec<_> = writers
        .into_iter()
        .map(|w| tokio::spawn(w.commit()))
        .collect();
    let mut wins = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(info) => wins.push(info.version),
            Err(Error::PartitionConflict {
                date,
                winning_version,
                ..
            }) => {
                assert_eq!(date, d);
                assert_eq!(winning_version, 2);
            }
            Err(e) => panic!("expected a PartitionConflict, got {e}"),
        }
    }
    assert_eq!(wins, vec![2], "exactly one writer wins");
    assert_eq!(t.latest_version().await.unwrap(), 2);
    let got = rows(&t.latest().await.unwrap(), d).await;
    assert_eq!(got.len(), 10, "rows duplicated or lost: {got:?}");
    let tag = got[0].1.split('-').next().unwrap().to_string();
    assert!(
        got.iter().all(|(_, n)| n.starts_with(&format!("{tag}-"))),
        "rows of two runs mixed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rounds_of_racing_writers_leave_a_linearizable_history() {
    let t = memory_table("orders").await;
    let dates = [date("2026-05-01"), date("2026-05-02"), date("2026-05-03")];
    let mut tasks = Vec::new();
    for w in 0..6 {
        let h = other_handle(&t).await;
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for round in 0..8 {
                let d = dates[(w + round) % dates.len()];
                let run = format!("w{w}-r{round}");
                let mut wr = h.replace_partition(d, RunInfo::new(&run)).await.unwrap();
                wr.write(&batch(d, 0..(w as i64 + 2), &run)).await.unwrap();
                match wr.commit().await {
                    Ok(info) => outcomes.push((run, Some(info.version))),
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
                        outcomes.push((run, None));
                    }
                }
            }
            outcomes
        }));
    }
    let mut committed: BTreeMap<u64, String> = BTreeMap::new();
    for task in tasks {
        for (run, v) in task.await.unwrap() {
            if let Some(v) = v {
                assert!(
                    committed.insert(v, run).is_none(),
                    "two runs got version {v}"
                );
            }
        }
    }
    let history = t.history().await.unwrap();
    assert_eq!(
        history.len() - 1,
        committed.len(),
        "log and successes disagree"
    );
    for e in &history[1..] {
        assert_eq!(
            Some(&e.run.as_ref().unwrap().run_id),
            committed.get(&e.version)
        );
    }
    let snap = t.latest().await.unwrap();
    for d in dates {
        let last = history.iter().rev().find(|e| e.dates.contains(&d));
        let got = rows(&snap, d).await;
        match last {
            Some(e) => {
                let run = &e.run.as_ref().unwrap().run_id;
                assert!(!got.is_empty());
                assert!(
                    got.iter().all(|(_, n)| n.starts_with(&format!("{run}-"))),
                    "{d}: {got:?}"
                );
                let ids: Vec<i64> = got.iter().map(|(i, _)| *i).collect();
                let mut dedup = ids.clone();
                dedup.dedup();
                assert_eq!(ids, dedup, "{d}: duplicated rows");
            }
            None => assert!(got.is_empty()),
        }
    }
}

/// 8 writers, 30 dates with overlaps, random store delays, a bounded number
/// of rounds; afterwards the history must be linearizable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_writers_on_30_overlapping_dates_with_random_delays_stay_linearizable() {
    use crate::fault_store::FaultStore;
    use logbook::{StorageLocation, TableSchema};
    use std::time::Duration;

    let store = FaultStore::new(Arc::new(object_store::memory::InMemory::new()))
        .with_delays(Duration::from_millis(2));
    let loc = StorageLocation::from_store(Arc::new(store), "t", "memory://t");
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let table = Table::create(loc.clone(), "t", schema, options())
        .await
        .unwrap();
    let start = date("2026-01-01");
    let day = move |i: u64| start + chrono::Days::new(i % 30);
    const WRITERS: u64 = 8;
    const ROUNDS: u64 = 6;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let loc = loc.clone();
        tasks.push(tokio::spawn(async move {
            let t = Table::open(loc, "t", options()).await.unwrap();
            let mut outcomes = Vec::new();
            for r in 0..ROUNDS {
                // Writers w and w + 4 race for the same date every round,
                // and rounds overlap other writers' dates.
                let d = day((w % 4) * 5 + r * 7);
                let run = format!("w{w}r{r}");
                let mut writer = t.replace_partition(d, RunInfo::new(&run)).await.unwrap();
                writer
                    .write(&batch(d, 0..(w as i64 + 1), &run))
                    .await
                    .unwrap();
                outcomes.push((d, run, writer.commit().await));
            }
            outcomes
        }));
    }
    let mut wins = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        for (d, run, outcome) in task.await.unwrap() {
            match outcome {
                Ok(info) => wins.push((d, run, info.version)),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Conflict, "{run}: {e}");
                    assert!(e.to_string().contains(&d.to_string()), "{e}");
                    conflicts += 1;
                }
            }
        }
    }
    assert_eq!(wins.len() + conflicts, (WRITERS * ROUNDS) as usize);
    eprintln!("racing: {} commits, {conflicts} conflicts", wins.len());
    let log = table.history().await.unwrap();
    for (d, run, version) in &wins {
        let entries: Vec<_> = log
            .iter()
            .filter(|e| e.run.as_ref().is_some_and(|r| &r.run_id == run))
            .collect();
        assert_eq!(entries.len(), 1, "{run} is in the log exactly once");
        assert_eq!(
            (entries[0].version, &entries[0].dates),
            (*version, &vec![*d])
        );
    }
    assert_eq!(
        log.len(),
        wins.len() + 1,
        "nothing but the winners (and create) committed"
    );
    // Each date holds the rows of the last successful replace in log order.
    let latest = table.latest().await.unwrap();
    for i in 0..30 {
        let d = day(i);
        let last = log.iter().rev().find(|e| e.dates.contains(&d));
        let got = rows(&latest, d).await;
        match last {
            None => assert!(got.is_empty()),
            Some(e) => {
                let run = &e.run.as_ref().unwrap().run_id;
                let n: i64 = run[1..run.find('r').unwrap()].parse::<i64>().unwrap() + 1;
                let want: Vec<(i64, String)> = (0..n).map(|i| (i, format!("{run}-{i}"))).collect();
                assert_eq!(got, want, "{d}");
            }
        }
    }
}
