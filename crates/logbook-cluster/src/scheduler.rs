//! `logbook cluster scheduler`: Ballista's scheduler with logbook's codec.
//!
//! The scheduler receives physical plans planned by clients (every table
//! version already pinned), cuts them into stages at their shuffles and
//! hands tasks to executors; a task lost with its executor is run again
//! elsewhere, up to `task_max_failures` times. It decodes logbook's nodes
//! without reading the warehouse (a scan lists its files); it checks at
//! start-up that it can list the warehouse, so that a scheduler started
//! with the wrong warehouse or credentials says so before its first query.
//!
//! With TLS ([`SchedulerOptions::tls`]) its gRPC service is served here,
//! over mutual TLS, and executors fetch their tasks ([`crate::tls`] says
//! why); without, Ballista serves it and pushes tasks to executors.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_core::utils::{create_grpc_server, create_grpc_server_incoming, GrpcServerConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_server};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use logbook_core::Warehouse;

use crate::codec::LogbookCodec;
use crate::error::{check_warehouse, ClusterError};
use crate::tls::ClusterTls;

/// How a scheduler is run.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Where it listens for clients and executors.
    pub bind: SocketAddr,
    /// An executor silent this long is taken for lost: its tasks run again
    /// elsewhere. (Ballista's default is 180 s.)
    pub executor_timeout: Duration,
    /// How many times a task may fail before its query fails.
    pub task_max_failures: usize,
    /// Serve over mutual TLS: executors and clients must present a
    /// certificate from the same CA. `None`: plain gRPC (a private network).
    pub tls: Option<ClusterTls>,
}

impl SchedulerOptions {
    /// Options listening on `bind`, with Ballista's timeouts.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            executor_timeout: Duration::from_secs(180),
            task_max_failures: 4,
            tls: None,
        }
    }
}

/// Run a scheduler until the process ends. Fails at once if `warehouse`
/// cannot be read from here or the address cannot be bound.
pub async fn run_scheduler(
    warehouse: Warehouse,
    options: SchedulerOptions,
) -> Result<(), ClusterError> {
    check_warehouse(&warehouse, "scheduler").await?;
    let timeout = options.executor_timeout.as_secs().max(1);
    let config = SchedulerConfig {
        bind_host: options.bind.ip().to_string(),
        bind_port: options.bind.port(),
        external_host: options.bind.ip().to_string(),
        executor_timeout_seconds: timeout,
        no_executors_grace_period_seconds: timeout,
        expire_dead_executor_interval_seconds: (timeout / 4).clamp(1, 15),
        task_max_failures: options.task_max_failures,
        grpc_server_max_decoding_message_size: crate::client::MAX_PLAN_MESSAGE as u32,
        grpc_client_max_message_size: crate::client::MAX_PLAN_MESSAGE as u32,
        override_physical_codec: Some(Arc::new(LogbookCodec::for_scheduler(warehouse))),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let Some(tls) = &options.tls else {
        tracing::info!(bind = %options.bind, "logbook cluster scheduler listening");
        start_server(cluster, options.bind, Arc::new(config)).await?;
        return Ok(());
    };
    let config = SchedulerConfig {
        scheduling_policy: TaskSchedulingPolicy::PullStaged,
        use_tls: true,
        override_create_grpc_client_endpoint: Some(tls.endpoint_override()),
        ..config
    };
    config.validate()?;
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config)).await?;
    let service = SchedulerGrpcServer::new(scheduler)
        .max_decoding_message_size(crate::client::MAX_PLAN_MESSAGE)
        .max_encoding_message_size(crate::client::MAX_PLAN_MESSAGE);
    // Bound before saying so, as Ballista's own server does.
    let incoming = create_grpc_server_incoming(options.bind, &GrpcServerConfig::default())
        .map_err(|e| {
            ClusterError::Config(format!("scheduler: cannot listen on {}: {e}", options.bind))
        })?;
    tracing::info!(bind = %options.bind, tls = true, "logbook cluster scheduler listening");
    create_grpc_server(&GrpcServerConfig::default())
        .tls_config(tls.server())
        .map_err(|e| ClusterError::Config(format!("scheduler: TLS: {e}")))?
        .add_service(service)
        .serve_with_incoming(incoming)
        .await
        .map_err(|e| ClusterError::Ballista(format!("the scheduler's server failed: {e}")))
}
