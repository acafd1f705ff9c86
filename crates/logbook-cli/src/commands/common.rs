//! Helpers more than one subcommand uses: the date range of the lifecycle
//! commands, the dimension mode and expected-version arguments, and how a
//! query error is reported.

use chrono::NaiveDate;
use logbook_core::clock::{Clock, SystemClock};
use logbook_core::lifecycle::{self, TableStatus};
use logbook_core::{DimensionMode, ExpectedPartition, Warehouse};

use super::CliError;

/// The date range every lifecycle command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Range {
    /// First date (default: the table's schedule start).
    #[arg(long)]
    pub from: Option<NaiveDate>,
    /// Last date (default: yesterday, UTC: the last day whose run is due).
    #[arg(long)]
    pub to: Option<NaiveDate>,
}

impl Range {
    /// The last date, defaulting to yesterday by the system clock.
    pub fn to(&self) -> NaiveDate {
        self.to
            .unwrap_or_else(|| logbook_core::dates::yesterday(SystemClock.now_millis()))
    }

    /// The table's status over the range, on the main line or (`stage`)
    /// as a run inside that stage sees it; dates given are dates to run,
    /// schedule or not (`lifecycle::status_asked`).
    pub async fn status(
        &self,
        warehouse: &Warehouse,
        table: &str,
        stage: Option<&str>,
    ) -> Result<TableStatus, CliError> {
        Ok(lifecycle::status_asked(warehouse, table, stage, self.from, self.to()).await?)
    }
}

/// `--dimensions as-of|restated`.
pub fn parse_mode(s: &str) -> Result<DimensionMode, String> {
    s.parse()
}

/// A query's error: logbook's own kept whole, DataFusion's as input errors.
pub fn query_err(e: logbook_datafusion::QueryError) -> CliError {
    match e {
        logbook_datafusion::QueryError::Logbook(e) => CliError::Logbook(e),
        other => CliError::Input(other.to_string()),
    }
}

/// The environment variable `logbook backfill` sets for the commands it runs:
/// `TABLE@DATE=VERSION` (or `=missing`), what it saw for the date it
/// launched the command for. `write` and `run` obey it for that table and
/// date only, so other writes in the same command are unaffected.
pub const EXPECT_ENV: &str = "LOGBOOK_EXPECT_VERSION";

/// The value of [`EXPECT_ENV`] for `table` at `date`.
pub fn expect_env_value(table: &str, date: NaiveDate, expected: ExpectedPartition) -> String {
    format!("{table}@{date}={expected}")
}

/// What a write of `table` at `date` must find: `explicit`, or what the
/// backfill that launched this command saw.
pub fn expectation(
    explicit: Option<ExpectedPartition>,
    table: &str,
    date: NaiveDate,
) -> Result<Option<ExpectedPartition>, CliError> {
    if explicit.is_some() {
        return Ok(explicit);
    }
    let Ok(value) = std::env::var(EXPECT_ENV) else {
        return Ok(None);
    };
    let parsed = value.split_once('=').and_then(|(target, version)| {
        let (t, d) = target.rsplit_once('@')?;
        Some((t, d.parse::<NaiveDate>().ok()?, version.parse().ok()?))
    });
    match parsed {
        Some((t, d, expected)) if t == table && d == date => Ok(Some(expected)),
        Some(_) => Ok(None),
        None => Err(CliError::Input(format!(
            "{EXPECT_ENV}={value:?}: expected TABLE@DATE=VERSION or TABLE@DATE=missing"
        ))),
    }
}

/// The names of `values`, borrowed.
pub fn names(values: &[String]) -> Vec<&str> {
    values.iter().map(String::as_str).collect()
}

/// The token in `path` (trimmed; an empty file is refused).
pub fn read_token(path: &std::path::Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Input(format!(
            "cannot read the token file {}: {e}",
            path.display()
        ))
    })?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(CliError::Input(format!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(token)
}

/// SIGINT or SIGTERM: stop accepting, let running queries finish.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A size as people write it (`64MiB`, `1GiB`, a byte count).
pub fn parse_size(s: &str) -> Result<usize, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64() as usize)
        .map_err(|e| format!("invalid size {s:?} ({e}); use e.g. 64MiB, 1GiB or a byte count"))
}
