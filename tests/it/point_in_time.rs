//! The point-in-time join returns exactly what DataFusion's hash join with
//! the validity filter returns, on random tables (overlapping and empty
//! intervals, null keys, null bounds, unknown keys), for every join shape
//! the rule accepts; and the rule leaves other filters alone.

use std::sync::Arc;

use arrow_array::{Date32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use logbook::query::datafusion::arrow::util::pretty::pretty_format_batches;
use logbook::query::datafusion::datasource::MemTable;
use logbook::query::datafusion::execution::runtime_env::RuntimeEnvBuilder;
use logbook::query::datafusion::execution::SessionStateBuilder;
use logbook::query::datafusion::prelude::{SessionConfig, SessionContext};
use logbook::query::pit::with_point_in_time_join;
use proptest::prelude::*;

use crate::common::plan_text;

type Dim = (Option<i64>, bool, Option<i32>, Option<i32>);
type Fact = (Option<i64>, bool, Option<i32>);

const RANGE: &str = "f.day >= d.vf AND (d.vt IS NULL OR f.day < d.vt)";

/// The queries compared: (SQL, whether the rule must fire).
fn queries() -> Vec<String> {
    let cols = "f.id AS fid, d.id AS did, d.vf, d.vt";
    let order = "ORDER BY fid, did";
    vec![
        format!("SELECT {cols} FROM facts f JOIN dims d ON f.k1 = d.k1 AND {RANGE} {order}"),
        format!("SELECT {cols} FROM dims d JOIN facts f ON d.k1 = f.k1 AND {RANGE} {order}"),
        // Two keys, reversed operands, a closed upper bound.
        format!(
            "SELECT {cols} FROM facts f JOIN dims d ON f.k1 = d.k1 AND f.k2 = d.k2 \
             AND d.vf <= f.day AND d.vt > f.day {order}"
        ),
        format!("SELECT {cols} FROM facts f LEFT JOIN dims d ON f.k1 = d.k1 AND {RANGE} {order}"),
        format!("SELECT {cols} FROM dims d RIGHT JOIN facts f ON f.k1 = d.k1 AND {RANGE} {order}"),
        format!(
            "SELECT {cols} FROM facts f JOIN dims d ON (f.k1 IS NOT DISTINCT FROM d.k1) AND {RANGE} {order}"
        ),
        format!(
            "SELECT f.day, count(*) AS n FROM facts f JOIN dims d ON f.k1 = d.k1 AND {RANGE} \
             GROUP BY f.day ORDER BY f.day"
        ),
    ]
}

fn k2(b: bool) -> &'static str {
    if b {
        "x"
    } else {
        "y"
    }
}

fn tables(dims: &[Dim], facts: &[Fact]) -> (MemTable, MemTable) {
    let dim_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k1", DataType::Int64, true),
        Field::new("k2", DataType::Utf8, false),
        Field::new("vf", DataType::Date32, true),
        Field::new("vt", DataType::Date32, true),
    ]));
    let dim_batch = RecordBatch::try_new(
        dim_schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..dims.len() as i64)),
            Arc::new(Int64Array::from(
                dims.iter().map(|d| d.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from_iter_values(dims.iter().map(|d| k2(d.1)))),
            Arc::new(Date32Array::from(
                dims.iter().map(|d| d.2).collect::<Vec<_>>(),
            )),
            Arc::new(Date32Array::from(
                dims.iter().map(|d| d.3).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let fact_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k1", DataType::Int64, true),
        Field::new("k2", DataType::Utf8, false),
        Field::new("day", DataType::Date32, true),
    ]));
    let fact_batch = RecordBatch::try_new(
        fact_schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..facts.len() as i64)),
            Arc::new(Int64Array::from(
                facts.iter().map(|f| f.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from_iter_values(facts.iter().map(|f| k2(f.1)))),
            Arc::new(Date32Array::from(
                facts.iter().map(|f| f.2).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    // Facts in two partitions, split unevenly, so several probe streams run.
    let half = facts.len() / 3;
    let parts = vec![
        vec![fact_batch.slice(0, half)],
        vec![fact_batch.slice(half, facts.len() - half)],
    ];
    (
        MemTable::try_new(dim_schema, vec![vec![dim_batch]]).unwrap(),
        MemTable::try_new(fact_schema, parts).unwrap(),
    )
}

fn context(with_rule: bool, dims: &[Dim], facts: &[Fact]) -> SessionContext {
    context_with_memory(with_rule, dims, facts, None)
}

fn context_with_memory(
    with_rule: bool,
    dims: &[Dim],
    facts: &[Fact],
    memory_limit: Option<usize>,
) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(3);
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features();
    if let Some(limit) = memory_limit {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(limit, 1.0)
            .build_arc()
            .unwrap();
        builder = builder.with_runtime_env(runtime);
    }
    if with_rule {
        builder = builder.with_physical_optimizer_rules(with_point_in_time_join());
    }
    let ctx = SessionContext::new_with_state(builder.build());
    let (d, f) = tables(dims, facts);
    ctx.register_table("dims", Arc::new(d)).unwrap();
    ctx.register_table("facts", Arc::new(f)).unwrap();
    ctx
}

async fn rows(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

async fn same_answer(dims: Vec<Dim>, facts: Vec<Fact>) {
    let plain = context(false, &dims, &facts);
    let pit = context(true, &dims, &facts);
    for sql in queries() {
        let text = plan_text(&pit, &sql).await;
        assert!(
            text.contains("PointInTimeJoinExec") && !text.contains("HashJoinExec"),
            "{sql}\n{text}"
        );
        assert_eq!(rows(&pit, &sql).await, rows(&plain, &sql).await, "{sql}");
    }
}

fn dim() -> impl Strategy<Value = Dim> {
    (
        prop::option::weighted(0.9, 0i64..5),
        any::<bool>(),
        prop::option::weighted(0.95, 0i32..20),
        prop::option::weighted(0.7, 0i32..25),
    )
}

fn fact() -> impl Strategy<Value = Fact> {
    (
        prop::option::weighted(0.9, 0i64..6),
        any::<bool>(),
        prop::option::weighted(0.95, -2i32..27),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn point_in_time_join_equals_the_hash_join(
        dims in prop::collection::vec(dim(), 0..30),
        facts in prop::collection::vec(fact(), 0..60),
    ) {
        tokio::runtime::Runtime::new().unwrap().block_on(same_answer(dims, facts));
    }
}

/// SCD2-shaped data (disjoint intervals per key: the binary-search path)
/// large enough for several batches per partition.
#[tokio::test]
async fn disjoint_histories_over_many_batches() {
    let mut dims = Vec::new();
    for key in 0..500i64 {
        let mut start = (key % 7) as i32;
        for version in 0..(key % 4) + 1 {
            let end = start + 3 + (version as i32 * 5 + key as i32) % 11;
            let last = version == key % 4;
            dims.push((Some(key), key % 2 == 0, Some(start), (!last).then_some(end)));
            start = end;
        }
    }
    let facts: Vec<Fact> = (0..30_000i64)
        .map(|i| (Some(i * 7919 % 520), i % 3 == 0, Some((i * 31 % 60) as i32)))
        .collect();
    same_answer(dims.clone(), facts.clone()).await;
    // EXPLAIN ANALYZE reports what was indexed: every key once.
    let ctx = context(true, &dims, &facts);
    let sql =
        format!("EXPLAIN ANALYZE SELECT f.id FROM facts f JOIN dims d ON f.k1 = d.k1 AND {RANGE}");
    let text = rows(&ctx, &sql).await;
    assert!(text.contains("build_keys=500,"), "{text}");
}

#[tokio::test]
async fn other_filters_stay_hash_joins() {
    let ctx = context(
        true,
        &[(Some(1), true, Some(0), None)],
        &[(Some(1), true, Some(3))],
    );
    for on in [
        // An extra conjunct over both inputs.
        format!("f.k1 = d.k1 AND {RANGE} AND f.id <> d.id"),
        // Bounds from different sides.
        "f.k1 = d.k1 AND f.day >= d.vf AND (f.day IS NULL OR d.vf < f.day)".to_string(),
        // Inclusive upper bound.
        "f.k1 = d.k1 AND f.day >= d.vf AND f.day <= d.vt".to_string(),
        // A computed point.
        "f.k1 = d.k1 AND f.day + 1 >= d.vf AND (d.vt IS NULL OR f.day + 1 < d.vt)".to_string(),
    ] {
        let sql = format!("SELECT f.id, d.id FROM facts f JOIN dims d ON {on}");
        let text = plan_text(&ctx, &sql).await;
        assert!(
            text.contains("HashJoinExec") && !text.contains("PointInTimeJoinExec"),
            "{on}\n{text}"
        );
    }
    // A full outer join must also keep unmatched intervals: not ours.
    let sql = format!("SELECT f.id, d.id FROM facts f FULL JOIN dims d ON f.k1 = d.k1 AND {RANGE}");
    assert!(!plan_text(&ctx, &sql).await.contains("PointInTimeJoinExec"));
}

/// The dimension is held in memory; past the session's memory limit the
/// query fails with an error naming the join, rather than taking the host.
#[tokio::test]
async fn a_dimension_larger_than_the_memory_limit_is_a_clear_error() {
    let dims: Vec<Dim> = (0..50_000i64)
        .map(|k| (Some(k), true, Some(0), None))
        .collect();
    let facts: Vec<Fact> = (0..10i64).map(|k| (Some(k), true, Some(1))).collect();
    let ctx = context_with_memory(true, &dims, &facts, Some(256 * 1024));
    let sql = format!("SELECT f.id, d.id FROM facts f JOIN dims d ON f.k1 = d.k1 AND {RANGE}");
    let err = ctx.sql(&sql).await.unwrap().collect().await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("Resources exhausted") && text.contains("PointInTimeJoinExec[build]"),
        "{text}"
    );
    // With room, the same query answers.
    let ctx = context_with_memory(true, &dims, &facts, Some(64 * 1024 * 1024));
    let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
}
