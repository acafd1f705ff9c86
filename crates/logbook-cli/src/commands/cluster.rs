//! `logbook cluster scheduler|executor`: the processes of a Ballista
//! cluster that runs logbook SQL (`logbook sql --cluster df://...`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use logbook_cluster::{ExecutorOptions, SchedulerOptions};
use logbook_core::Warehouse;

use super::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the scheduler: clients send it planned queries, it hands tasks to executors.
    Scheduler(SchedulerArgs),
    /// Run an executor: it registers with the scheduler and runs tasks,
    /// reading the warehouse with this machine's credentials.
    Executor(ExecutorArgs),
}

#[derive(Debug, clap::Args)]
pub struct SchedulerArgs {
    /// Address to listen on for clients and executors.
    #[arg(long, default_value = "127.0.0.1:50050")]
    bind: SocketAddr,
    /// An executor silent this long is taken for lost and its tasks run
    /// elsewhere (e.g. 180s).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "180s")]
    executor_timeout: Duration,
    /// How many times a task may fail before its query fails.
    #[arg(long, default_value_t = 4)]
    task_max_failures: usize,
}

#[derive(Debug, clap::Args)]
pub struct ExecutorArgs {
    /// The scheduler's address.
    #[arg(long, default_value = "127.0.0.1:50050")]
    scheduler: SocketAddr,
    /// Address to serve task outputs on (Arrow Flight); the scheduler
    /// pushes tasks to the next port unless --grpc-port says.
    #[arg(long, default_value = "127.0.0.1:50051")]
    bind: SocketAddr,
    /// Port the scheduler pushes tasks to.
    #[arg(long)]
    grpc_port: Option<u16>,
    /// The host clients and other executors reach this one at (needed
    /// when --bind is 0.0.0.0).
    #[arg(long)]
    external_host: Option<String>,
    /// Tasks run at once (default: one per core).
    #[arg(long, default_value_t = 0)]
    concurrent_tasks: usize,
    /// Directory for shuffle files (default: a temporary one).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Memory its tasks may hold before spilling, shared by its concurrent
    /// tasks (e.g. 512MiB; default: Ballista's share of the machine).
    #[arg(long, value_parser = parse_bytes)]
    memory_limit: Option<u64>,
    /// How often it tells the scheduler it is alive.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    heartbeat: Duration,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("{s:?} is not a size (e.g. 512MiB): {e}"))
}

pub async fn run(warehouse: Warehouse, command: Command) -> Result<(), CliError> {
    match command {
        Command::Scheduler(args) => {
            let options = SchedulerOptions {
                executor_timeout: args.executor_timeout,
                task_max_failures: args.task_max_failures.max(1),
                ..SchedulerOptions::new(args.bind)
            };
            logbook_cluster::run_scheduler(warehouse, options).await?;
        }
        Command::Executor(args) => {
            let defaults = ExecutorOptions::new(args.scheduler, args.bind);
            let options = ExecutorOptions {
                grpc_port: args.grpc_port.unwrap_or(defaults.grpc_port),
                external_host: args.external_host,
                concurrent_tasks: args.concurrent_tasks,
                work_dir: args.work_dir,
                memory_limit: args.memory_limit,
                heartbeat: args.heartbeat,
                ..defaults
            };
            logbook_cluster::run_executor(warehouse, options).await?;
        }
    }
    Ok(())
}
