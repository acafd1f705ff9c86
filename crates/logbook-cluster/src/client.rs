//! Running a query on a cluster: planned here, executed there.
//!
//! The query is planned in this process, as without a cluster: tables are
//! opened, every version read is fixed (`snapshot()` and pins included),
//! `logical_date()` is folded to its date and wall-clock functions are
//! refused in a run. The physical plan goes to the scheduler
//! ([`ballista_core::execution_plans::execute_physical_plan`]), whose
//! executors read exactly the files this plan lists: a commit landing
//! after planning changes nothing the query reads.
//!
//! Alternative not taken: sending the logical plan and letting the
//! scheduler plan it. The scheduler would then open the tables itself, at
//! whatever version is newest when it gets there, and need logbook's
//! session (table functions, run context) rebuilt from key/value settings,
//! which Ballista drops silently for extensions it does not know.

use std::sync::Arc;

use ballista_core::config::BALLISTA_CLIENT_GRPC_MAX_MESSAGE_SIZE;
use ballista_core::execution_plans::execute_physical_plan;
use ballista_core::extension::SessionConfigExt;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::PhysicalPlanNode;
use logbook_core::Warehouse;

use crate::codec::LogbookCodec;
use crate::error::ClusterError;
use crate::tls::ClusterTls;

/// A Ballista cluster, reached through its scheduler.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// `http://host:port` (`https://` with TLS).
    scheduler: String,
    codec: Arc<LogbookCodec>,
    /// One Ballista session per client: the scheduler keeps its settings.
    session_id: String,
    partitions: usize,
    tls: Option<ClusterTls>,
}

impl Cluster {
    /// The cluster whose scheduler is at `url` (`df://host:port`), for
    /// queries over `warehouse`. Nothing is contacted until a query runs.
    pub fn new(url: &str, warehouse: &Warehouse) -> Result<Self, ClusterError> {
        crate::error::shared(warehouse)?;
        let address = url.strip_prefix("df://").filter(|address| {
            address
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
        });
        let Some(address) = address else {
            return Err(ClusterError::Config(format!(
                "cluster address {url:?}: write the scheduler as df://HOST:PORT"
            )));
        };
        Ok(Self {
            scheduler: format!("http://{address}"),
            codec: Arc::new(LogbookCodec::new(warehouse.clone())),
            // The warehouse's id generator (injected in tests).
            session_id: warehouse.options().ids.next_id().to_string(),
            partitions: DEFAULT_PARTITIONS,
            tls: None,
        })
    }

    /// Reach the cluster over mutual TLS (its scheduler and executors were
    /// started with TLS): servers verified against `tls`'s CA, `tls`'s
    /// certificate presented to them.
    pub fn with_tls(mut self, tls: ClusterTls) -> Self {
        if let Some(address) = self.scheduler.strip_prefix("http://") {
            self.scheduler = format!("https://{address}");
        }
        self.tls = Some(tls);
        self
    }

    /// Scans are split into at most `n` tasks each (default
    /// [`DEFAULT_PARTITIONS`]); more tasks than the cluster has cores
    /// balance uneven files.
    pub fn with_partitions(mut self, n: usize) -> Self {
        self.partitions = n.max(1);
        self
    }

    /// Plan `df` here and run it on the cluster, streaming its rows.
    pub async fn execute(&self, df: DataFrame) -> Result<SendableRecordBatchStream, ClusterError> {
        let plan = self.plan(df).await?;
        self.run(plan).await
    }

    /// Plan `df` here: every version it reads is fixed now. The physical
    /// plan is made with Ballista's settings (no round-robin
    /// repartitioning, whose partitions another stage cannot fetch) and the
    /// cluster's task count.
    pub async fn plan(&self, df: DataFrame) -> Result<PlannedQuery, ClusterError> {
        let (mut state, logical) = df.into_parts();
        let config = state
            .config()
            .clone()
            .upgrade_for_ballista()
            .with_target_partitions(self.partitions)
            .set_usize(BALLISTA_CLIENT_GRPC_MAX_MESSAGE_SIZE, MAX_PLAN_MESSAGE);
        let config = match &self.tls {
            None => config,
            Some(tls) => config
                .with_ballista_use_tls(true)
                .with_ballista_override_create_grpc_client_endpoint(tls.endpoint_override()),
        };
        *state.config_mut() = config.clone();
        let plan = state.create_physical_plan(&logical).await?;
        Ok(PlannedQuery { plan, config })
    }

    /// Run a planned query on the cluster, streaming its rows: its tasks
    /// read the versions it was planned with, whatever was committed since.
    pub async fn run(
        &self,
        query: PlannedQuery,
    ) -> Result<SendableRecordBatchStream, ClusterError> {
        let stream = execute_physical_plan::<PhysicalPlanNode>(
            self.scheduler.clone(),
            &query.config.ballista_config(),
            query.plan,
            self.codec.as_ref(),
            self.session_id.clone(),
            query.config,
        )
        .await
        .map_err(|e| ClusterError::Ballista(self.explain(e.strip_backtrace())))?;
        Ok(stream)
    }

    /// Ballista's error, naming the scheduler, with what it usually means
    /// when TLS does not match.
    fn explain(&self, message: String) -> String {
        let address = self.scheduler.split_once("://").map_or("", |(_, a)| a);
        let hint = crate::tls::mismatch_hint(self.tls.is_some(), &message);
        format!("the query on the scheduler at df://{address} failed: {message}{hint}")
    }
}

/// A query planned for a cluster ([`Cluster::plan`]), not yet sent.
#[derive(Debug)]
pub struct PlannedQuery {
    plan: Arc<dyn ExecutionPlan>,
    config: SessionConfig,
}

impl PlannedQuery {
    /// The physical plan the cluster will run.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.plan
    }
}

/// The largest plan a client sends (and a scheduler takes): a scan lists
/// its files, about 300 bytes each with their column statistics, so a
/// table of 100,000 files plans to 28 MiB, past gRPC's 16 MiB default
/// (`benches/cluster/plan.rs`).
pub const MAX_PLAN_MESSAGE: usize = 256 * 1024 * 1024;

/// Tasks a scan is split into unless [`Cluster::with_partitions`] says.
pub const DEFAULT_PARTITIONS: usize = 16;
