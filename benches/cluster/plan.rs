//! What a cluster query costs before any row is read, by table size
//! (issue 39): planning on the client, the plan message to the scheduler,
//! the scheduler's decoding, one task's rewrite and message, and an
//! executor's decoding, for a scan of every file of a table of 1,000,
//! 10,000 and 100,000 files, split into 16 partitions.
//!
//! ```text
//! cargo run --release --example cluster_plan -- [ROUNDS] [FILES...]
//! ```
//!
//! Tables are generated straight into the format (`support/synthetic.rs`,
//! one file per date) on `memory://`; their files are not read (planning
//! and the codec only). Generated files carry no column statistics, and
//! logbook's real files carry a min, max and null count per column: each
//! case is measured as generated and again with statistics for 4 columns
//! added to every file (what an `orders` table of the benchmarks carries).

#[path = "../support/synthetic.rs"]
mod synthetic;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballista_scheduler::state::task_builder::restrict_plan_to_partitions;
use chrono::NaiveDate;
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::protobuf::PhysicalPlanNode;
use logbook::cluster::LogbookCodec;
use logbook::format::ColumnStats;
use logbook::query::datafusion::physical_plan::ExecutionPlan;
use logbook::query::datafusion::prelude::SessionContext;
use logbook::query::exec::LogbookScanExec;
use logbook::query::{session, QueryOptions};
use logbook::{StorageLocation, TableOptions, TableSchema, Warehouse};
use object_store::memory::InMemory;
use synthetic::{generate, Synthetic};

const PARTITIONS: usize = 16;

fn encode(plan: Arc<dyn ExecutionPlan>, codec: &LogbookCodec) -> Vec<u8> {
    let mut bytes = Vec::new();
    PhysicalPlanNode::try_from_physical_plan(plan, codec)
        .unwrap()
        .try_encode(&mut bytes)
        .unwrap();
    bytes
}

fn decode(bytes: &[u8], ctx: &SessionContext, codec: &LogbookCodec) -> Arc<dyn ExecutionPlan> {
    PhysicalPlanNode::try_decode(bytes)
        .unwrap()
        .try_into_physical_plan(&ctx.task_ctx(), codec)
        .unwrap()
}

/// The scan at the bottom of `plan` (under DataFusion's `CooperativeExec`).
fn scan_of(plan: &Arc<dyn ExecutionPlan>) -> &LogbookScanExec {
    match plan.downcast_ref::<LogbookScanExec>() {
        Some(scan) => scan,
        None => scan_of(plan.children().first().expect("a scan below")),
    }
}

/// The scan of `plan` with statistics for 4 columns on every file.
fn with_stats(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let scan = scan_of(plan);
    let mut parts = scan.parts();
    for (i, file) in parts.groups.iter_mut().flatten().enumerate() {
        let n = i as i64;
        file.stats = BTreeMap::from([
            (
                1,
                stat(
                    serde_json::json!("2026-01-01"),
                    serde_json::json!("2026-01-01"),
                ),
            ),
            (
                2,
                stat(
                    serde_json::json!(n * 100_000),
                    serde_json::json!(n * 100_000 + 99_999),
                ),
            ),
            (3, stat(serde_json::json!(0), serde_json::json!(199_999))),
            (4, stat(serde_json::json!(0), serde_json::json!(9_999))),
        ]);
    }
    Arc::new(LogbookScanExec::from_parts(scan.source().clone(), parts))
}

fn stat(min: serde_json::Value, max: serde_json::Value) -> ColumnStats {
    ColumnStats {
        min: Some(min),
        max: Some(max),
        nulls: 0,
    }
}

#[derive(Default)]
struct Times {
    plan: Vec<Duration>,
    encode: Vec<Duration>,
    scheduler: Vec<Duration>,
    task: Vec<Duration>,
    executor: Vec<Duration>,
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |s| s.parse().expect("ROUNDS"));
    let sizes: Vec<u64> = match std::env::args()
        .skip(2)
        .map(|s| s.parse().expect("FILES"))
        .collect::<Vec<_>>()
    {
        v if v.is_empty() => vec![1_000, 10_000, 100_000],
        v => v,
    };
    println!("| files | statistics | plan (ms) | plan message | encode (ms) | scheduler decode (ms) | one task: rewrite + encode (ms) | task message | executor decode (ms) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for files in sizes {
        let store = Arc::new(InMemory::new());
        let root = StorageLocation::from_store(store.clone(), "wh", "memory://wh");
        let schema = TableSchema::parse_spec(
            "orders",
            "date:date,order_id:int64,customer:int64,amount:int64",
            "date",
        )
        .unwrap();
        let spec = Synthetic {
            format: 2,
            first: NaiveDate::from_ymd_opt(1800, 1, 1).unwrap(),
            partitions: files,
            commits: 2,
            // Files are written with their listed size (64 B a row): keep them small.
            rows_per_partition: 10,
            schedule_start: None,
            inputs: None,
        };
        generate(&root.child("orders").unwrap(), schema, &spec).await;
        let wh = Warehouse::new(root, TableOptions::default());
        let client = LogbookCodec::new(wh.clone());
        let scheduler = LogbookCodec::for_scheduler(wh.clone());
        let executor = LogbookCodec::new(wh.clone());
        for stats in [false, true] {
            let mut t = Times::default();
            let (mut plan_bytes, mut task_bytes) = (0, 0);
            for _ in 0..rounds {
                let start = Instant::now();
                let ctx = session(&wh, QueryOptions::default(), None).await.unwrap();
                ctx.state_ref()
                    .write()
                    .config_mut()
                    .options_mut()
                    .execution
                    .target_partitions = PARTITIONS;
                let df = logbook::query::sql(&ctx, "SELECT * FROM orders")
                    .await
                    .unwrap();
                let mut plan = df.create_physical_plan().await.unwrap();
                t.plan.push(start.elapsed());
                if stats {
                    plan = with_stats(&plan);
                }
                let start = Instant::now();
                let message = encode(plan, &client);
                t.encode.push(start.elapsed());
                plan_bytes = message.len();
                let start = Instant::now();
                let held = decode(&message, &ctx, &scheduler);
                t.scheduler.push(start.elapsed());
                let start = Instant::now();
                let one = restrict_plan_to_partitions(held, &[0]).unwrap();
                let task = encode(one, &scheduler);
                t.task.push(start.elapsed());
                task_bytes = task.len();
                let start = Instant::now();
                let decoded = decode(&task, &ctx, &executor);
                t.executor.push(start.elapsed());
                assert_eq!(scan_of(&decoded).parts().groups.len(), 1);
            }
            println!(
                "| {files} | {} | {:.1} | {:.1} MiB ({:.0} B/file) | {:.1} | {:.1} | {:.1} | {:.2} MiB | {:.1} |",
                if stats { "4 columns" } else { "none" },
                median(&mut t.plan),
                plan_bytes as f64 / 1048576.0,
                plan_bytes as f64 / files as f64,
                median(&mut t.encode),
                median(&mut t.scheduler),
                median(&mut t.task),
                task_bytes as f64 / 1048576.0,
                median(&mut t.executor),
            );
        }
    }
}
