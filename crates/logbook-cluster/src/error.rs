//! What can go wrong starting or reaching a cluster, by what to do about it.

/// A cluster process that cannot start, or a query the cluster could not run.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A cluster address or option is wrong: fix the command line.
    #[error("{0}")]
    Config(String),
    /// The warehouse cannot be read from this process (start-up check):
    /// fix the URI or this machine's credentials.
    #[error("cannot reach the warehouse at {uri} from this {process}: {source}")]
    Warehouse {
        /// The warehouse URI.
        uri: String,
        /// `scheduler` or `executor`.
        process: &'static str,
        /// What reading it said.
        source: Box<logbook_core::Error>,
    },
    /// Ballista failed: the scheduler or an executor could not be reached,
    /// or a task failed past its retries (the message says which; a retry
    /// helps only the first).
    #[error("cluster: {0}")]
    Ballista(String),
    /// Planning the query failed (as it would without a cluster).
    #[error(transparent)]
    Plan(#[from] datafusion::error::DataFusionError),
}

impl From<ballista_core::error::BallistaError> for ClusterError {
    fn from(e: ballista_core::error::BallistaError) -> Self {
        ClusterError::Ballista(e.to_string())
    }
}

/// Fails unless `warehouse` can be listed from this process: a scheduler or
/// executor says so at start-up rather than at its first task.
pub(crate) async fn check_warehouse(
    warehouse: &logbook_core::Warehouse,
    process: &'static str,
) -> Result<(), ClusterError> {
    shared(warehouse)?;
    warehouse
        .list_table_dirs()
        .await
        .map(|_| ())
        .map_err(|source| ClusterError::Warehouse {
            uri: warehouse.location().uri().to_string(),
            process,
            source: Box::new(source),
        })
}

/// Fails for a warehouse only this process can see (`memory://`): every
/// process of a cluster reads the same warehouse.
pub(crate) fn shared(warehouse: &logbook_core::Warehouse) -> Result<(), ClusterError> {
    let uri = warehouse.location().uri();
    if uri.starts_with("memory:") {
        return Err(ClusterError::Config(format!(
            "the warehouse {uri} lives in one process: a cluster needs one every process can read (a shared directory, s3://, gs://, az://)"
        )));
    }
    Ok(())
}
