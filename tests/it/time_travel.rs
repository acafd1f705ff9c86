use std::sync::Arc;

use logbook::clock::ManualClock;
use logbook::{ErrorKind, Operation};

use crate::common::*;

#[tokio::test]
async fn each_version_shows_what_was_committed_at_it() {
    let clock = Arc::new(ManualClock::new(10_000));
    let t = memory_table_with("orders", options().with_clock(clock.clone())).await;
    let d = date("2026-03-15");
    let e = date("2026-04-02");
    let mut expected = Vec::new();
    for (i, (day, n)) in [(d, 3), (e, 4), (d, 5), (e, 0), (d, 7)]
        .into_iter()
        .enumerate()
    {
        clock.advance(1_000);
        let v = replace(&t, day, 0..n, &format!("v{i}"), &format!("r{i}")).await;
        let snap = t.latest().await.unwrap();
        expected.push((v, rows(&snap, d).await, rows(&snap, e).await, clock.now()));
    }
    for (v, rd, re, _) in &expected {
        let snap = t.at_version(*v).await.unwrap();
        assert_eq!(snap.version(), *v);
        assert_eq!(&rows(&snap, d).await, rd, "version {v}, {d}");
        assert_eq!(&rows(&snap, e).await, re, "version {v}, {e}");
    }
    // Version 1 had only `d`; the first version with `e` is 2.
    assert!(t
        .at_version(1)
        .await
        .unwrap()
        .partition(e)
        .await
        .unwrap()
        .is_none());

    // By in-commit time: just after version 3 was committed shows version 3.
    let (v3, _, _, ts3) = &expected[2];
    assert_eq!(t.as_of_timestamp(ts3 + 500).await.unwrap().version(), *v3);
    assert_eq!(t.as_of_timestamp(*ts3).await.unwrap().version(), *v3);
    assert_eq!(t.as_of_timestamp(ts3 - 1).await.unwrap().version(), v3 - 1);
    let err = t.as_of_timestamp(0).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = t.at_version(99).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("99"), "{err}");

    let history = t.history().await.unwrap();
    assert_eq!(history.len(), 6);
    assert_eq!(history[0].operation, Operation::CreateTable);
    assert_eq!(history[3].dates, vec![d]);
    assert_eq!(history[3].rows_added, 5);
    assert_eq!(history[3].files_removed, 1);
    assert!(history
        .windows(2)
        .all(|w| w[0].timestamp_ms < w[1].timestamp_ms));
}

#[tokio::test]
async fn in_commit_time_is_monotone_even_if_the_clock_goes_back() {
    let clock = Arc::new(ManualClock::new(50_000));
    let t = memory_table_with("orders", options().with_clock(clock.clone())).await;
    clock.set(1_000);
    replace(&t, date("2026-01-01"), 0..1, "a", "r1").await;
    replace(&t, date("2026-01-02"), 0..1, "a", "r2").await;
    let h = t.history().await.unwrap();
    assert_eq!(
        h.iter().map(|e| e.timestamp_ms).collect::<Vec<_>>(),
        vec![50_000, 50_001, 50_002]
    );
}

trait Now {
    fn now(&self) -> i64;
}
impl Now for ManualClock {
    fn now(&self) -> i64 {
        use logbook::clock::Clock;
        self.now_millis()
    }
}

#[tokio::test]
async fn snapshot_in_sql_shows_the_table_with_its_columns_then() {
    use logbook::query::{session, QueryOptions};
    use logbook::schema::{ColumnType, SchemaChange};
    let (wh, t) = orders_in_a_warehouse().await;
    let before = replace(&t, date("2026-03-15"), 0..3, "old", "r1").await;
    t.alter_schema(SchemaChange::DropColumn {
        name: "name".into(),
    })
    .await
    .unwrap();
    t.alter_schema(SchemaChange::RenameColumn {
        from: "id".into(),
        to: "order_id".into(),
    })
    .await
    .unwrap();
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    // The version's own columns: `name` was there, `order_id` was `id`
    // (three distinct names, ids 0 + 1 + 2).
    let sql = format!("SELECT count(DISTINCT name) + sum(id) FROM snapshot('orders', {before})");
    assert_eq!(first_i64(&ctx, &sql).await, 3 + 3);
    // A version committed after the session first read the table is found
    // by a later query of the session.
    let later = t
        .alter_schema(SchemaChange::AddColumn {
            name: "note".into(),
            ty: ColumnType::String,
        })
        .await
        .unwrap()
        .version;
    let sql = format!("SELECT count(*) + count(note) FROM snapshot('orders', {later})");
    assert_eq!(first_i64(&ctx, &sql).await, 3);
    // A version not committed yet is refused before planning, with the
    // table layer's error.
    let err = logbook::query::sql(&ctx, "SELECT * FROM snapshot('orders', 99)")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}", t.at_version(99).await.unwrap_err())
    );
}

#[tokio::test]
async fn a_snapshot_expired_between_two_queries_of_a_session_is_refused() {
    let (ctx, old) = a_session_that_read_a_version_since_expired().await;
    let sql = format!("SELECT count(*) FROM snapshot('orders', {old})");
    let err = logbook::query::sql(&ctx, &sql).await.unwrap_err();
    match err {
        logbook::query::QueryError::Logbook(e) => {
            assert_eq!(e.kind(), ErrorKind::NotFound, "{e}")
        }
        e => panic!("not the table layer's error: {e}"),
    }
    // Nor does planning without the check find the version read before.
    let err = ctx.sql(&sql).await.unwrap_err();
    assert!(
        err.to_string().contains("was not read before planning"),
        "{err}"
    );
}

/// A version written as an expression is read by no `prepare`, so it
/// cannot reuse what an earlier query of the session checked: after an
/// expire it would otherwise read the expired version.
#[tokio::test]
async fn a_snapshot_version_written_as_an_expression_never_reuses_an_earlier_check() {
    let (ctx, old) = a_session_that_read_a_version_since_expired().await;
    let expression = format!("SELECT count(*) FROM snapshot('orders', {old} + 0)");
    let err = logbook::query::sql(&ctx, &expression)
        .await
        .expect_err("an expired version read through an earlier query's check");
    assert!(
        err.to_string().contains("write the version as a number"),
        "{err}"
    );
}

/// Two queries prepared on one session before either is planned each
/// plan with the versions their own `snapshot()` calls read, and no more
/// (with one cache for the session, the last check fails).
#[tokio::test]
async fn each_prepared_state_holds_only_its_own_snapshot_versions() {
    use logbook::query::{prepare, session, QueryOptions};
    let (wh, t) = orders_in_a_warehouse().await;
    let first = replace(&t, date("2026-03-15"), 0..3, "a", "r1").await;
    let second = replace(&t, date("2026-03-15"), 0..5, "b", "r2").await;
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let sql = |v: u64| format!("SELECT count(*) AS n FROM snapshot('orders', {v})");
    let (a, b) = (sql(first), sql(second));
    let state_a = prepare(&ctx, &a).await.unwrap();
    let state_b = prepare(&ctx, &b).await.unwrap();
    let count = |plan| async {
        use arrow_array::cast::AsArray;
        let batches = ctx
            .execute_logical_plan(plan)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        batches[0]
            .column(0)
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(0)
    };
    let plan_b = state_b.create_logical_plan(&b).await.unwrap();
    let plan_a = state_a.create_logical_plan(&a).await.unwrap();
    assert_eq!(count(plan_a).await, 3);
    assert_eq!(count(plan_b).await, 5);
    // Each state holds its own query's versions only.
    let err = state_a.create_logical_plan(&b).await.unwrap_err();
    assert!(
        err.to_string().contains("was not read before planning"),
        "{err}"
    );
}

/// A session whose query read `snapshot('orders', old)` (3 rows), and
/// `old`, expired since (one later version kept).
async fn a_session_that_read_a_version_since_expired(
) -> (logbook::query::datafusion::prelude::SessionContext, u64) {
    use logbook::maintenance::{expire, Keep};
    use logbook::query::{session, QueryOptions};
    let (wh, t) = orders_in_a_warehouse().await;
    let old = replace(&t, date("2026-03-15"), 0..3, "a", "r1").await;
    replace(&t, date("2026-03-15"), 0..5, "b", "r2").await;
    let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
    let sql = format!("SELECT count(*) FROM snapshot('orders', {old})");
    assert_eq!(first_i64(&ctx, &sql).await, 3);
    expire(&t, Keep::Last(1)).await.unwrap();
    (ctx, old)
}

/// A `memory://` warehouse holding table `orders` (no rows yet).
async fn orders_in_a_warehouse() -> (logbook::Warehouse, logbook::Table) {
    let wh = logbook::Warehouse::new(
        logbook::StorageLocation::parse("memory://").unwrap(),
        options(),
    );
    let schema = logbook::TableSchema::parse_spec("orders", SPEC, "date").unwrap();
    let t = wh.create_table("orders", schema).await.unwrap();
    (wh, t)
}
