//! One module per subcommand, or per family of them: `status.rs` holds
//! `status`, `plan` and `check`; `maintain.rs` holds `compact`, `expire` and
//! `vacuum`. What several of them share is in `common.rs`.

pub mod alter;
pub mod apply;
pub mod backfill;
pub mod cluster;
pub mod common;
pub mod create;
pub mod demo;
pub mod log;
pub mod maintain;
pub mod mirror;
pub mod partitions;
pub mod run;
pub mod schema;
pub mod serve;
pub mod sql;
pub mod stage;
pub mod status;
pub mod turn;
pub mod ui;
pub mod warehouse;
pub mod write;

use logbook_core::Warehouse;

/// Errors the CLI reports: one sentence naming the table, date, file or field.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Logbook(#[from] logbook_core::Error),
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Cluster(#[from] logbook_cluster::ClusterError),
    /// The command ran and found or caused failures (check problems, failed dates).
    #[error("{0}")]
    Failed(String),
    /// The reader of stdout went away (`| head`): stop quietly.
    #[error("stdout was closed")]
    StdoutClosed,
}

/// `--mirror delta|iceberg|delta,iceberg|none` as given to `create` and `alter`.
pub fn parse_mirror(table: &str, value: &str) -> Result<Vec<logbook_core::MirrorFormat>, CliError> {
    logbook_core::MirrorFormat::parse_list(value)
        .map_err(|e| CliError::Input(format!("table {table}: --mirror: {e}, or none")))
}

pub async fn tables(warehouse: &Warehouse) -> Result<(), CliError> {
    for name in warehouse.list_tables().await? {
        println!("{name}");
    }
    Ok(())
}
