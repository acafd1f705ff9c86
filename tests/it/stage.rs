//! Staged backfills: write into a named stage, audit, publish in one commit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::Days;
use logbook::{ErrorKind, Operation, RunInfo, Table};

use crate::common::*;

async fn tags(table: &Table, version: Option<u64>) -> Vec<String> {
    let snap = match version {
        Some(v) => table.at_version(v).await.unwrap(),
        None => table.latest().await.unwrap(),
    };
    snap.partitions()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.run.unwrap().run_id.split('-').next().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_backfill_of_90_dates_publishes_in_one_commit_never_a_mix() {
    let t = memory_table("t").await;
    let start = date("2026-01-01");
    let days: Vec<_> = (0..90)
        .map(|i| start.checked_add_days(Days::new(i)).unwrap())
        .collect();
    for d in &days {
        replace(&t, *d, 0..10, "old", &format!("old-{d}")).await;
    }
    let before = t.latest_version().await.unwrap();
    let stage = t.stage("fix").await.unwrap();
    for d in &days {
        let mut w = stage
            .replace_partition(*d, RunInfo::new(format!("new-{d}")))
            .await
            .unwrap();
        w.write(&batch(*d, 0..12, "new")).await.unwrap();
        let info = w.commit().await.unwrap();
        assert_eq!(info.staged.as_deref(), Some("fix"));
    }
    assert_eq!(
        t.latest_version().await.unwrap(),
        before,
        "staging commits nothing"
    );
    assert!(
        tags(&t, None).await.iter().all(|t| t == "old"),
        "readers do not see a stage"
    );
    let diff = stage.diff().await.unwrap();
    assert_eq!(diff.len(), 90);
    assert_eq!((diff[0].old_rows, diff[0].new_rows), (Some(10), 12));
    assert_eq!(diff[0].sums["id"], (Some(45.0), 66.0));

    // A reader polling during the publish sees all old or all new.
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (t, done) = (t.clone(), done.clone());
        tokio::spawn(async move {
            let mut seen = 0;
            while !done.load(Ordering::SeqCst) || seen == 0 {
                let tags = tags(&t, None).await;
                assert!(
                    tags.iter().all(|x| x == "old") || tags.iter().all(|x| x == "new"),
                    "a mix: {tags:?}"
                );
                seen += 1;
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    let info = stage.publish(false).await.unwrap();
    done.store(true, Ordering::SeqCst);
    assert!(reader.await.unwrap() > 0);
    assert_eq!(info.version, before + 1, "one commit");
    let entry = t.latest().await.unwrap().entry().clone();
    assert_eq!(entry.operation, Operation::PublishStage);
    assert_eq!(entry.dates.len(), 90);
    assert!(tags(&t, None).await.iter().all(|x| x == "new"));
    assert!(
        tags(&t, Some(before)).await.iter().all(|x| x == "old"),
        "time travel still sees old"
    );
    let p = latest_partition(&t, days[5]).await;
    assert_eq!(
        p.run.unwrap().run_id,
        format!("new-{}", days[5]),
        "each date keeps its run"
    );
    assert_eq!(rows(&t.latest().await.unwrap(), days[5]).await.len(), 12);
    let gone = t.existing_stage("fix").await.unwrap_err();
    assert!(gone.to_string().contains("has no stage"), "{gone}");
}

#[tokio::test]
async fn publishing_refuses_dates_changed_on_the_main_line_unless_forced() {
    let t = memory_table("t").await;
    let (d1, d2) = (date("2026-03-01"), date("2026-03-02"));
    replace(&t, d1, 0..1, "old", "old-1").await;
    replace(&t, d2, 0..1, "old", "old-2").await;
    let stage = t.stage("s").await.unwrap();
    for d in [d1, d2] {
        let mut w = stage
            .replace_partition(d, RunInfo::new(format!("new-{d}")))
            .await
            .unwrap();
        w.write(&batch(d, 0..3, "new")).await.unwrap();
        w.commit().await.unwrap();
    }
    // Tonight's scheduled run fixes March 2 on the main line.
    let prod = replace(&t, d2, 0..5, "prod", "prod-2").await;
    let err = stage.publish(false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let msg = err.to_string();
    assert!(
        msg.contains("stage s")
            && msg.contains("2026-03-02")
            && msg.contains(&format!("version {prod}")),
        "{msg}"
    );
    assert_eq!(t.latest_version().await.unwrap(), prod, "nothing committed");
    assert_eq!(rows(&t.latest().await.unwrap(), d2).await.len(), 5);

    // Forced, the staged rows win.
    stage.publish(true).await.unwrap();
    assert_eq!(rows(&t.latest().await.unwrap(), d2).await.len(), 3);
}

#[tokio::test]
async fn restaging_a_date_replaces_its_record_and_drop_leaves_the_files_to_vacuum() {
    let t = memory_table("t").await;
    let d = date("2026-03-01");
    replace(&t, d, 0..1, "old", "old").await;
    let committed = data_files(&t).await;
    let stage = t.stage("s").await.unwrap();
    for attempt in 0..2 {
        let mut w = stage
            .replace_partition(d, RunInfo::new(format!("try-{attempt}")))
            .await
            .unwrap();
        w.write(&batch(d, 0..3, "new")).await.unwrap();
        w.commit().await.unwrap();
    }
    // The first attempt's file is left to vacuum: a publish landing
    // meanwhile could have made it the table's.
    let staged = stage.partitions().await.unwrap();
    assert_eq!(staged.len(), 1);
    assert_eq!(staged[0].run.run_id, "try-1");
    assert_eq!(data_files(&t).await.len(), committed.len() + 2);
    // Dropping forgets the records; vacuum deletes the unreferenced files.
    assert_eq!(stage.clone().drop_stage().await.unwrap(), 1);
    assert!(t.existing_stage("s").await.is_err());
    assert_eq!(data_files(&t).await.len(), committed.len() + 2);
    // The store's clock has millisecond steps: let it move past the files.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    logbook::maintenance::vacuum(&t, sweep()).await.unwrap();
    assert_eq!(data_files(&t).await, committed);
    assert_eq!(rows(&t.latest().await.unwrap(), d).await.len(), 1);
}

#[tokio::test]
async fn a_sql_run_can_write_into_a_stage_and_keeps_its_lineage_when_published() {
    use logbook::query::Run;
    let (wh, _) = crate::query::world().await;
    let d = date("2026-03-15");
    let info = Run::new(&wh, "revenue_by_region", d)
        .code_version("v9")
        .stage("restate")
        .sql(crate::query::REVENUE)
        .await
        .unwrap();
    assert_eq!(info.staged.as_deref(), Some("restate"));
    let t = wh.table("revenue_by_region").await.unwrap();
    assert!(latest_partition_opt(&t, d).await.is_none());
    t.existing_stage("restate")
        .await
        .unwrap()
        .publish(false)
        .await
        .unwrap();
    let p = latest_partition(&t, d).await;
    let run = p.run.unwrap();
    assert_eq!(run.code_version.as_deref(), Some("v9"));
    let read: Vec<&str> = run.inputs.iter().map(|i| i.table.as_str()).collect();
    assert_eq!(read, ["customers", "orders"]);
}
