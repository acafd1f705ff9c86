//! `logbook cluster scheduler|executor`: the processes of a Ballista
//! cluster that runs logbook SQL (`logbook sql --cluster df://...`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use logbook_cluster::{Cluster, ClusterTls, ExecutorOptions, SchedulerOptions};
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
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Debug, clap::Args)]
pub struct ExecutorArgs {
    /// The scheduler's address.
    #[arg(long, default_value = "127.0.0.1:50050")]
    scheduler: SocketAddr,
    /// Address to serve task outputs on (Arrow Flight); the scheduler
    /// pushes tasks to the next port unless --grpc-port says (with TLS,
    /// tasks are fetched from the scheduler: no second port).
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
    #[arg(long, value_parser = super::common::parse_size)]
    memory_limit: Option<usize>,
    /// How often it tells the scheduler it is alive.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    heartbeat: Duration,
    #[command(flatten)]
    tls: TlsArgs,
}

/// Mutual TLS for a scheduler or an executor: all three flags or none.
#[derive(Debug, clap::Args)]
pub struct TlsArgs {
    /// Serve and connect over mutual TLS with this certificate chain (PEM),
    /// signed by --tls-ca; every process of the cluster needs TLS.
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires_all = ["tls_cert", "tls_ca"])]
    tls_key: Option<PathBuf>,
    /// The cluster's CA (PEM): peers and clients must present a
    /// certificate it signed.
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    fn load(&self) -> Result<Option<ClusterTls>, CliError> {
        load(
            [&self.tls_cert, &self.tls_key, &self.tls_ca],
            ["--tls-cert", "--tls-key", "--tls-ca"],
        )
    }
}

/// How `sql` and `serve` reach a cluster started with TLS.
#[derive(Debug, clap::Args)]
pub struct ClusterClientArgs {
    /// The cluster's CA (PEM), when its processes run with TLS: they are
    /// verified against it, and this side presents --cluster-cert.
    #[arg(long, requires_all = ["cluster", "cluster_cert", "cluster_key"])]
    cluster_ca: Option<PathBuf>,
    /// This client's certificate for the cluster (PEM, signed by --cluster-ca).
    #[arg(long, requires_all = ["cluster_ca", "cluster_key"])]
    cluster_cert: Option<PathBuf>,
    /// The private key of --cluster-cert (PEM).
    #[arg(long, requires_all = ["cluster_ca", "cluster_cert"])]
    cluster_key: Option<PathBuf>,
}

impl ClusterClientArgs {
    /// The cluster at `url`, over TLS when the flags say.
    pub fn connect(&self, url: &str, warehouse: &Warehouse) -> Result<Cluster, CliError> {
        let cluster = Cluster::new(url, warehouse)?;
        let tls = load(
            [&self.cluster_cert, &self.cluster_key, &self.cluster_ca],
            ["--cluster-cert", "--cluster-key", "--cluster-ca"],
        )?;
        Ok(match tls {
            Some(tls) => cluster.with_tls(tls),
            None => cluster,
        })
    }
}

/// Certificate, key and CA read from their files (clap has checked they
/// come together); errors name the flags.
fn load(
    [cert, key, ca]: [&Option<PathBuf>; 3],
    flags: [&str; 3],
) -> Result<Option<ClusterTls>, CliError> {
    let (Some(cert), Some(key), Some(ca)) = (cert, key, ca) else {
        return Ok(None);
    };
    ClusterTls::from_files(cert, key, ca)
        .map(Some)
        .map_err(|e| CliError::Input(format!("{}: {e}", flags.join("/"))))
}

pub async fn run(warehouse: Warehouse, command: Command) -> Result<(), CliError> {
    match command {
        Command::Scheduler(args) => {
            let options = SchedulerOptions {
                executor_timeout: args.executor_timeout,
                task_max_failures: args.task_max_failures.max(1),
                tls: args.tls.load()?,
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
                memory_limit: args.memory_limit.map(|b| b as u64),
                heartbeat: args.heartbeat,
                tls: args.tls.load()?,
                ..defaults
            };
            logbook_cluster::run_executor(warehouse, options).await?;
        }
    }
    Ok(())
}
