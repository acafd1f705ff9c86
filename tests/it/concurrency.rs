use std::collections::BTreeMap;

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
