//! The cluster codec: every logbook node a plan holds survives the trip a
//! cluster gives it (client to scheduler, the scheduler's per-task rewrite,
//! scheduler to executor) with every field, and answers the same rows.

use std::sync::Arc;

use ballista_scheduler::state::task_builder::restrict_plan_to_partitions;
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::protobuf::PhysicalPlanNode;
use logbook::cluster::LogbookCodec;
use logbook::query::datafusion::datasource::source::DataSourceExec;
use logbook::query::datafusion::physical_plan::{collect, displayable, ExecutionPlan};
use logbook::query::datafusion::prelude::SessionContext;
use logbook::query::exec::LogbookScanExec;
use logbook::query::pit::PointInTimeJoinExec;
use logbook::query::{session, QueryOptions};
use logbook::{DimensionMode, Warehouse};

use crate::common::date;
use crate::query::world;

/// `plan` to bytes with `from`'s codec and back with `to`'s.
fn trip(
    plan: Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
    from: &LogbookCodec,
    to: &LogbookCodec,
) -> Arc<dyn ExecutionPlan> {
    let node = PhysicalPlanNode::try_from_physical_plan(plan, from).unwrap();
    let mut bytes = Vec::new();
    node.try_encode(&mut bytes).unwrap();
    PhysicalPlanNode::try_decode(&bytes)
        .unwrap()
        .try_into_physical_plan(&ctx.task_ctx(), to)
        .unwrap()
}

/// Every field of every logbook node in `plan`, and the plan's shape.
fn fields(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut out = vec![displayable(plan.as_ref()).indent(true).to_string()];
    let mut stack = vec![plan.clone()];
    while let Some(p) = stack.pop() {
        if let Some(scan) = p.downcast_ref::<LogbookScanExec>() {
            let source = scan.source();
            out.push(format!(
                "scan {} v{}: {:?}",
                source.table_name(),
                source.version(),
                scan.parts()
            ));
        }
        if let Some(join) = p.downcast_ref::<PointInTimeJoinExec>() {
            out.push(format!("join: {:?}", join.spec()));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    out
}

async fn planned(
    wh: &Warehouse,
    options: QueryOptions,
    query: &str,
) -> (SessionContext, Arc<dyn ExecutionPlan>) {
    let ctx = session(wh, options, None).await.unwrap();
    ctx.state_ref()
        .write()
        .config_mut()
        .options_mut()
        .execution
        .target_partitions = 3;
    let df = logbook::query::sql(&ctx, query).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    (ctx, plan)
}

/// The first node of type `T` in `plan`.
fn find<T: ExecutionPlan + 'static>(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let mut stack = vec![plan.clone()];
    while let Some(p) = stack.pop() {
        if p.is::<T>() {
            return p;
        }
        stack.extend(p.children().into_iter().cloned());
    }
    panic!("no {} in the plan", std::any::type_name::<T>())
}

async fn rows(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> String {
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    let mut lines: Vec<String> =
        logbook::query::datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
            .lines()
            .map(str::to_string)
            .collect();
    lines.sort();
    lines.join("\n")
}

/// The plans of queries holding every kind of logbook node: a partition
/// scan with pruning filters, dimensions at a date (`asof()`, a run's
/// as-of and current modes), full history, and the point-in-time join.
async fn plans() -> Vec<(String, SessionContext, Arc<dyn ExecutionPlan>, Warehouse)> {
    let (wh, _) = world().await;
    let run = |mode| QueryOptions {
        logical_date: Some(date("2026-03-15")),
        dimensions: Some(mode),
        ..Default::default()
    };
    let cases = [
        (QueryOptions::default(), "SELECT * FROM orders WHERE date BETWEEN DATE '2026-03-14' AND DATE '2026-03-16' AND amount > 2 AND customer <> 'x'"),
        (QueryOptions::default(), "SELECT * FROM asof('customers', DATE '2026-03-25')"),
        (run(DimensionMode::AsOf), "SELECT o.order_id, c.region FROM orders o JOIN customers c ON o.customer = c.customer WHERE o.date = logical_date()"),
        (run(DimensionMode::Current), "SELECT * FROM customers"),
        (QueryOptions::default(), "SELECT o.date, c.region, o.amount FROM orders o JOIN customers c ON o.customer = c.customer AND o.date >= c.valid_from AND (c.valid_to IS NULL OR o.date < c.valid_to)"),
        (QueryOptions::default(), "SELECT count(*) FROM snapshot('orders', 2)"),
    ];
    let mut out = Vec::new();
    for (options, query) in cases {
        let (ctx, plan) = planned(&wh, options, query).await;
        out.push((query.to_string(), ctx, plan, wh.clone()));
    }
    out
}

#[tokio::test]
async fn every_logbook_node_reaches_an_executor_with_every_field_and_the_same_rows() {
    let plans = plans().await;
    let mut joins = 0;
    for (query, ctx, plan, wh) in plans {
        let client = LogbookCodec::new(wh.clone());
        let scheduler = LogbookCodec::for_scheduler(wh.clone());
        let executor = LogbookCodec::new(wh.clone());
        // Straight to an executor, and through the scheduler.
        let direct = trip(plan.clone(), &ctx, &client, &executor);
        let held = trip(plan.clone(), &ctx, &client, &scheduler);
        let via = trip(held.clone(), &ctx, &scheduler, &executor);
        assert_eq!(fields(&direct), fields(&plan), "{query}");
        assert_eq!(fields(&via), fields(&plan), "{query}");
        // The scheduler holds no logbook scan: only data sources it can split.
        assert!(
            !fields(&held).iter().any(|f| f.starts_with("scan ")),
            "{query}"
        );
        let want = rows(plan.clone(), &ctx).await;
        assert_eq!(rows(direct, &ctx).await, want, "{query}");
        assert_eq!(rows(via, &ctx).await, want, "{query}");
        joins += fields(&plan)
            .iter()
            .filter(|f| f.starts_with("join:"))
            .count();
    }
    assert!(joins > 0, "no point-in-time join was planned");
}

/// The rewrite Ballista's scheduler makes per task keeps the task's file
/// groups only: a task reads its share of the files, not all of them.
#[tokio::test]
async fn a_task_reads_only_its_own_file_groups() {
    let (wh, _) = world().await;
    let (ctx, plan) = planned(&wh, QueryOptions::default(), "SELECT * FROM orders").await;
    let scan = find::<LogbookScanExec>(&plan);
    let groups = scan
        .downcast_ref::<LogbookScanExec>()
        .unwrap()
        .parts()
        .groups;
    assert_eq!(groups.len(), 3);
    let scheduler = LogbookCodec::for_scheduler(wh.clone());
    let executor = LogbookCodec::new(wh.clone());
    let held = trip(
        plan.clone(),
        &ctx,
        &LogbookCodec::new(wh.clone()),
        &scheduler,
    );
    // `[]`: the share of a union's side that another task reads.
    for task in [vec![1], vec![0, 2], vec![]] {
        let restricted = restrict_plan_to_partitions(held.clone(), &task).unwrap();
        let sent = trip(restricted, &ctx, &scheduler, &executor);
        let scan = find::<LogbookScanExec>(&sent);
        let got = scan
            .downcast_ref::<LogbookScanExec>()
            .unwrap()
            .parts()
            .groups;
        let want: Vec<_> = task.iter().map(|&i| groups[i].clone()).collect();
        assert_eq!(got, want);
        // As many partitions as the task was given: Ballista labels a
        // task's outputs by its slice.
        assert_eq!(
            scan.properties().output_partitioning().partition_count(),
            task.len()
        );
    }
}

/// A row limit the scheduler's rules push into a scan stays a limit.
#[tokio::test]
async fn a_limit_pushed_into_the_scan_reaches_the_executor() {
    let (wh, _) = world().await;
    let (ctx, plan) = planned(&wh, QueryOptions::default(), "SELECT * FROM orders").await;
    let scheduler = LogbookCodec::for_scheduler(wh.clone());
    let held = trip(plan, &ctx, &LogbookCodec::new(wh.clone()), &scheduler);
    let limited = find::<DataSourceExec>(&held)
        .downcast_ref::<DataSourceExec>()
        .unwrap()
        .with_fetch(Some(1))
        .unwrap();
    let sent = trip(limited, &ctx, &scheduler, &LogbookCodec::new(wh.clone()));
    let batches = collect(sent, ctx.task_ctx()).await.unwrap();
    let n: usize = batches.iter().map(|b| b.num_rows()).sum();
    // One row per partition at most (the limit is per partition).
    assert!(n <= 3 && n > 0, "{n} rows");
}
