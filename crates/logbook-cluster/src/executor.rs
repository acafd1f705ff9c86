//! `logbook cluster executor`: Ballista's executor with logbook's codec.
//!
//! An executor registers with the scheduler, runs the tasks it is given
//! and serves their outputs (shuffle files, results) over Arrow Flight. It
//! reads the listed files of logbook's scans from the warehouse it opened
//! itself, with this machine's credentials, and checks at start-up that it
//! can.
//!
//! With TLS ([`ExecutorOptions::tls`]) it serves its outputs over mutual
//! TLS, reaches the scheduler and other executors over TLS, and fetches its
//! tasks instead of serving a task port ([`crate::tls`] says why).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::error::BallistaError;
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::GetJobStatusParams;
use ballista_core::utils::{create_grpc_client_endpoint, create_grpc_server, GrpcClientConfig};
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_executor::flight_service::BallistaFlightService;
use ballista_executor::ArrowFlightServerProvider;
use datafusion::prelude::SessionConfig;
use logbook_core::Warehouse;

use crate::codec::LogbookCodec;
use crate::error::{check_warehouse, ClusterError};
use crate::tls::ClusterTls;

/// How an executor is run.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's address.
    pub scheduler: SocketAddr,
    /// Where it serves task outputs (Arrow Flight).
    pub bind: SocketAddr,
    /// Where the scheduler pushes tasks (gRPC), on the same host.
    pub grpc_port: u16,
    /// The host other processes reach it at (for results and shuffle
    /// files); `None`: the bind address, which must then not be
    /// unspecified (`0.0.0.0`).
    pub external_host: Option<String>,
    /// Tasks run at once (0: one per core).
    pub concurrent_tasks: usize,
    /// Shuffle files; a fresh temporary directory when `None`.
    pub work_dir: Option<PathBuf>,
    /// Memory for its tasks' pools, shared by its concurrent tasks (spilling
    /// beyond it); `None`: Ballista's share of the machine.
    pub memory_limit: Option<u64>,
    /// How often it tells the scheduler it is alive.
    pub heartbeat: Duration,
    /// Mutual TLS with the scheduler, the other executors and clients
    /// (the scheduler must have it too); `None`: plain gRPC.
    pub tls: Option<ClusterTls>,
}

impl ExecutorOptions {
    /// Options for an executor of `scheduler` serving on `bind`, tasks
    /// pushed to the next port (65535 has none: give `grpc_port`).
    pub fn new(scheduler: SocketAddr, bind: SocketAddr) -> Self {
        Self {
            scheduler,
            bind,
            grpc_port: bind.port().checked_add(1).unwrap_or(0),
            external_host: None,
            concurrent_tasks: 0,
            work_dir: None,
            memory_limit: None,
            heartbeat: Duration::from_secs(60),
            tls: None,
        }
    }
}

/// Run an executor until the process ends. Fails at once if `warehouse`
/// cannot be read from here or the scheduler does not answer it (not
/// there, or refusing its TLS).
pub async fn run_executor(
    warehouse: Warehouse,
    options: ExecutorOptions,
) -> Result<(), ClusterError> {
    check_warehouse(&warehouse, "executor").await?;
    let external = reachable_host(&options)?;
    // Ballista logs a port it cannot bind and returns as from a shutdown:
    // find out here, and fail naming it.
    // With TLS no task port is served (tasks are fetched).
    let ports = match options.tls {
        None => vec![options.bind.port(), options.grpc_port],
        Some(_) => vec![options.bind.port()],
    };
    for port in ports {
        let addr = SocketAddr::new(options.bind.ip(), port);
        if port == 0 {
            return Err(ClusterError::Config(format!(
                "executor: give a port for {addr} (port 0 cannot be told to the scheduler)"
            )));
        }
        std::net::TcpListener::bind(addr)
            .map_err(|e| ClusterError::Config(format!("executor: cannot listen on {addr}: {e}")))?;
    }
    // After the local checks: an unreachable scheduler takes up to
    // PROBE_TIMEOUT to say so.
    probe_scheduler(&options).await?;
    // A temporary directory is kept (`_temp`) until the executor stops:
    // its shuffle files live there.
    let (work_dir, _temp) = match &options.work_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::tempdir().map_err(|e| {
                ClusterError::Config(format!("cannot make the executor's work directory: {e}"))
            })?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let config = ExecutorProcessConfig {
        bind_host: options.bind.ip().to_string(),
        external_host: Some(external),
        port: options.bind.port(),
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler.ip().to_string(),
        scheduler_port: options.scheduler.port(),
        vcores: options.concurrent_tasks,
        work_dir: Some(work_dir.to_string_lossy().into_owned()),
        memory_pool_size: options.memory_limit,
        // A task's plan lists its files: as large as a client's plan may be.
        grpc_max_decoding_message_size: crate::client::MAX_PLAN_MESSAGE as u32,
        grpc_max_encoding_message_size: crate::client::MAX_PLAN_MESSAGE as u32,
        executor_heartbeat_interval_seconds: options.heartbeat.as_secs().max(1),
        override_physical_codec: Some(Arc::new(LogbookCodec::new(warehouse))),
        ..ExecutorProcessConfig::default()
    };
    let config = match &options.tls {
        None => config,
        Some(tls) => with_tls(config, tls),
    };
    tracing::info!(
        bind = %options.bind,
        scheduler = %options.scheduler,
        "logbook cluster executor starting"
    );
    let tls = options.tls.is_some();
    start_executor_process(Arc::new(config)).await.map_err(|e| {
        let message = e.to_string();
        let hint = crate::tls::mismatch_hint(tls, &message);
        ClusterError::Ballista(format!("executor: {message}{hint}"))
    })
}

/// An executor's configuration over mutual TLS: tasks fetched, its Flight
/// service served with `tls`, and every connection it opens (to the
/// scheduler, to other executors for shuffle files) made with `tls`.
fn with_tls(config: ExecutorProcessConfig, tls: &ClusterTls) -> ExecutorProcessConfig {
    let endpoint = tls.endpoint_override();
    let sessions = endpoint.clone();
    let server = tls.server();
    let max_message = crate::client::MAX_PLAN_MESSAGE;
    let flight: Arc<ArrowFlightServerProvider> =
        Arc::new(move |work_dir, address, mut shutdown, grpc_config| {
            let server = server.clone();
            tokio::spawn(async move {
                let service = FlightServiceServer::new(BallistaFlightService::new(work_dir))
                    .max_decoding_message_size(max_message)
                    .max_encoding_message_size(max_message);
                create_grpc_server(&grpc_config)
                    .tls_config(server)?
                    .add_service(service)
                    .serve_with_shutdown(address, shutdown.recv())
                    .await
                    .map_err(BallistaError::TonicError)
            })
        });
    ExecutorProcessConfig {
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        override_create_grpc_client_endpoint: Some(endpoint),
        // Tasks' sessions: shuffle reads from other executors over TLS.
        override_config_producer: Some(Arc::new(move || {
            SessionConfig::new_with_ballista()
                .with_ballista_use_tls(true)
                .with_ballista_override_create_grpc_client_endpoint(sessions.clone())
        })),
        override_arrow_flight_service: Some(flight),
        ..config
    }
}

/// Fails unless the scheduler answers a call from here. Ballista's
/// executor connects and then, fetching tasks, logs every failed poll and
/// goes on: with TLS 1.3 a connection is made before the server has checked
/// this side's certificate, so a scheduler that refuses it (or serves
/// without TLS) would leave an executor running that never gets a task.
/// The call is a status request for a job that does not exist.
async fn probe_scheduler(options: &ExecutorOptions) -> Result<(), ClusterError> {
    let address = options.scheduler;
    let tls = options.tls.is_some();
    let failed = |message: String| {
        let hint = crate::tls::mismatch_hint(tls, &message);
        ClusterError::Ballista(format!(
            "executor: the scheduler at {address} did not answer: {message}{hint}"
        ))
    };
    let endpoint = create_grpc_client_endpoint(
        format!("http://{address}"),
        Some(&GrpcClientConfig::default()),
    )
    .map_err(|e| failed(format!("{e:?}")))?;
    let endpoint = match &options.tls {
        None => endpoint,
        Some(tls) => (tls.endpoint_override())(endpoint).map_err(|e| failed(e.to_string()))?,
    };
    let call = async {
        let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
        SchedulerGrpcClient::new(channel)
            .get_job_status(GetJobStatusParams {
                job_id: "logbook-executor-start-up-check".into(),
            })
            .await
            .map(|_| ())
            .map_err(|status| format!("{status:?}"))
    };
    match tokio::time::timeout(PROBE_TIMEOUT, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(failed(message)),
        Err(_) => Err(failed(format!("no answer in {PROBE_TIMEOUT:?}"))),
    }
}

/// How long the start-up call to the scheduler may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The host the scheduler tells clients and other executors to fetch this
/// executor's outputs from.
fn reachable_host(options: &ExecutorOptions) -> Result<String, ClusterError> {
    match &options.external_host {
        Some(host) => Ok(host.clone()),
        None if options.bind.ip().is_unspecified() => Err(ClusterError::Config(format!(
            "executor: bound to {}, it needs --external-host: the address others reach it at",
            options.bind
        ))),
        None => Ok(options.bind.ip().to_string()),
    }
}
