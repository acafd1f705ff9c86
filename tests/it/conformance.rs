//! One conformance suite every backend passes: the commit race on
//! put-if-absent, replace, time travel, expiry and vacuum. It runs against
//! `memory://`, a local directory and, when `.ci/run` provides one, an
//! S3-compatible server (moto) on loopback.

use std::sync::Arc;

use logbook::clock::Clock;
use logbook::maintenance::{expire, vacuum, Keep};
use logbook::{ErrorKind, RunInfo, StorageLocation, Table, TableOptions, TableSchema};

use crate::common::*;

fn opts() -> TableOptions {
    // Real time: vacuum compares the store's modification times with it.
    options().with_clock(Arc::new(logbook::clock::SystemClock))
}

async fn conformance(root: StorageLocation) {
    let loc = root.child("conformance").unwrap();
    let schema = TableSchema::parse_spec("t", SPEC, "date").unwrap();
    let t = Table::create(loc.clone(), "t", schema.clone(), opts())
        .await
        .unwrap();
    assert_eq!(
        Table::create(loc.clone(), "t", schema, opts())
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::AlreadyExists,
        "creating twice must lose the put-if-absent race"
    );

    // Race: 8 handles write the same date; exactly one wins each round.
    let d = date("2026-03-15");
    for round in 0..3 {
        let mut tasks = Vec::new();
        for w in 0..8 {
            let loc = loc.clone();
            tasks.push(tokio::spawn(async move {
                let t = Table::open(loc, "t", opts()).await.unwrap();
                let mut writer = t
                    .replace_partition(d, RunInfo::new(format!("r{round}w{w}")))
                    .await
                    .unwrap();
                writer
                    .write(&batch(d, 0..(w + 1), &format!("r{round}w{w}")))
                    .await
                    .unwrap();
                writer.commit().await
            }));
        }
        let mut wins = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(_) => wins += 1,
                Err(e) => assert_eq!(e.kind(), ErrorKind::Conflict, "{e}"),
            }
        }
        assert!(wins >= 1, "round {round}: no writer won");
    }
    let history = t.history().await.unwrap();
    for (i, e) in history.iter().enumerate() {
        assert_eq!(e.version, i as u64, "the log is contiguous");
    }

    // Replace and time travel.
    let v1 = replace(&t, d, 0..3, "first", "first").await;
    let v2 = replace(&t, d, 0..2, "second", "second").await;
    assert_eq!(
        rows(&t.latest().await.unwrap(), d).await,
        vec![(0, "second-0".into()), (1, "second-1".into())]
    );
    assert_eq!(rows(&t.at_version(v1).await.unwrap(), d).await.len(), 3);

    // Expire all but the latest version, vacuum with no retention: the
    // retained versions still read, nothing referenced is gone.
    expire(&t, Keep::Last(1)).await.unwrap();
    let report = vacuum(&t, sweep()).await.unwrap();
    assert!(!report.deleted.is_empty());
    assert_eq!(rows(&t.at_version(v2).await.unwrap(), d).await.len(), 2);
    assert_eq!(
        t.at_version(v1).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let check = logbook::lifecycle::check(
        &t,
        &t.latest().await.unwrap(),
        logbook::lifecycle::CheckDepth::Full,
    )
    .await
    .unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_passes_the_conformance_suite() {
    conformance(StorageLocation::parse("memory://conf").unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_local_directory_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    conformance(StorageLocation::parse(dir.path().to_str().unwrap()).unwrap()).await;
}

/// Needs an S3-compatible endpoint with a bucket `logbook-test`; `.ci/run`
/// starts moto's server and runs this with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs LOGBOOK_TEST_S3_ENDPOINT (an S3-compatible server); .ci/run provides one"]
async fn an_s3_compatible_server_passes_the_conformance_suite() {
    let endpoint = std::env::var("LOGBOOK_TEST_S3_ENDPOINT")
        .expect("LOGBOOK_TEST_S3_ENDPOINT: the URL of an S3-compatible server");
    let prefix = format!(
        "s3://logbook-test/run-{}",
        logbook::clock::SystemClock.now_millis()
    );
    let options = [
        ("aws_endpoint", endpoint.as_str()),
        ("aws_allow_http", "true"),
        ("aws_virtual_hosted_style_request", "false"),
        ("aws_region", "us-east-1"),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
    ];
    conformance(StorageLocation::parse_with_options(&prefix, options).unwrap()).await;
}
