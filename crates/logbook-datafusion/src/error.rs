//! Errors of the query layer.

/// What went wrong planning or running a query.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The table layer refused or failed (see its `kind()`).
    #[error(transparent)]
    Logbook(#[from] logbook_core::Error),
    /// Planning or executing the SQL failed; the message is DataFusion's.
    #[error("{0}")]
    Sql(#[from] datafusion::error::DataFusionError),
}
