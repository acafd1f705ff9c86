//! A job run for one logical date: SQL (or batches computed by the job)
//! replaces the target partition, with lineage in the commit.

use std::sync::Arc;

use chrono::NaiveDate;
use datafusion::execution::context::SessionContext;
use futures::TryStreamExt;
use logbook_core::budget::SlotTicket;
use logbook_core::{
    CommitInfo, Destination, DimensionMode, ExpectedPartition, PartitionWriter, RunClass, RunInfo,
    Warehouse,
};

use crate::catalog::QueryOptions;
use crate::error::QueryError;
use crate::lineage::Lineage;
use crate::session::session;

/// A run of a job for `logical_date`, writing the partition it owns in
/// `target`.
///
/// ```no_run
/// # async fn f(wh: logbook_core::Warehouse) -> Result<(), logbook_datafusion::QueryError> {
/// use logbook_core::DimensionMode;
/// use logbook_datafusion::Run;
/// let date = chrono::NaiveDate::from_ymd_opt(2026, 3, 15).unwrap();
/// let info = Run::new(&wh, "revenue_by_region", date)
///     .dimensions(DimensionMode::AsOf)
///     .code_version("v2")
///     .sql("SELECT o.date, c.region, sum(o.amount) AS revenue
///           FROM orders o JOIN customers c ON o.customer = c.customer
///           WHERE o.date = logical_date() GROUP BY o.date, c.region")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Run {
    warehouse: Warehouse,
    target: String,
    logical_date: NaiveDate,
    mode: DimensionMode,
    run: RunInfo,
    pins: std::collections::HashMap<String, u64>,
    stage: Option<String>,
    expected: Option<ExpectedPartition>,
    slot: Option<SlotTicket>,
}

/// The environment variable `logbook backfill --stage NAME` sets for the
/// commands it runs.
pub const STAGE_ENV: &str = "LOGBOOK_STAGE";

impl Run {
    pub fn new(warehouse: &Warehouse, target: &str, logical_date: NaiveDate) -> Self {
        Self {
            warehouse: warehouse.clone(),
            target: target.to_string(),
            logical_date,
            mode: DimensionMode::AsOf,
            run: RunInfo {
                run_id: String::new(),
                logical_date: Some(logical_date),
                ..RunInfo::default()
            },
            pins: Default::default(),
            stage: None,
            expected: None,
            slot: None,
        }
    }

    /// Record the run as production (the default outside a stage) or
    /// backfill (always, inside a stage).
    pub fn class(mut self, class: RunClass) -> Self {
        self.run.class = Some(class);
        self
    }

    /// Commit only while this backfill slot is still the runner's (see
    /// `PartitionWriter::within_slot`).
    pub fn within_slot(mut self, ticket: SlotTicket) -> Self {
        self.slot = Some(ticket);
        self
    }

    /// Write into the named stage instead of the main line (see
    /// `logbook_core::Stage`): nothing is visible until it is published.
    pub fn stage(mut self, name: impl Into<String>) -> Self {
        self.stage = Some(name.into());
        self
    }

    /// Write into the stage named by `LOGBOOK_STAGE`, if it is set: how a
    /// job launched by `logbook backfill --stage NAME` writes into the
    /// stage without other changes. A job opts in by calling this.
    pub fn stage_from_env(self) -> Self {
        match std::env::var(STAGE_ENV) {
            Ok(name) if !name.is_empty() => self.stage(name),
            _ => self,
        }
    }

    /// Commit only if the target partition is then still as `expected`
    /// (see [`PartitionWriter::expect`]); `logbook backfill` passes what it
    /// saw so that a production commit in between wins.
    pub fn expect(mut self, expected: ExpectedPartition) -> Self {
        self.expected = Some(expected);
        self
    }

    /// Resolve dimensions as of the logical date (default) or currently.
    pub fn dimensions(mut self, mode: DimensionMode) -> Self {
        self.mode = mode;
        self
    }

    pub fn code_version(mut self, v: impl Into<String>) -> Self {
        self.run.code_version = Some(v.into());
        self
    }

    pub fn job(mut self, job: impl Into<String>) -> Self {
        self.run.job = Some(job.into());
        self
    }

    /// The run id (default: derived from the target, date, mode, code
    /// version, query text, target schema version and the data read, so
    /// re-submitting the same run on the same inputs is a no-op).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run.run_id = id.into();
        self
    }

    /// Read `table` at `version` instead of its latest.
    pub fn pin(mut self, table: &str, version: u64) -> Self {
        self.pins.insert(table.to_string(), version);
        self
    }

    /// The session a job uses to read its inputs, and the writer for its
    /// output. Commit with [`RunContext::commit`] so lineage is recorded.
    pub async fn start(self) -> Result<RunContext, QueryError> {
        let lineage = Arc::new(Lineage::default());
        let options = QueryOptions {
            logical_date: Some(self.logical_date),
            dimensions: Some(self.mode),
            pins: self.pins.clone(),
            // Inside a stage, inputs read as the stage holds them.
            stage: self.stage.clone(),
            ..Default::default()
        };
        let ctx = session(&self.warehouse, options, Some(lineage.clone())).await?;
        let mut run = self.run.clone();
        run.dimensions = Some(self.mode);
        let derived_id = run.run_id.is_empty();
        if derived_id {
            run.run_id = format!(
                "{}-{}-{}-{}",
                self.target,
                self.logical_date,
                self.mode,
                run.code_version.as_deref().unwrap_or("none")
            )
            .replace(
                |c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'),
                "_",
            );
            // The id as completed at commit must be valid too: refused
            // here, before anything is written.
            logbook_core::names::validate_run_id(&format!("{}-{:016x}", run.run_id, 0))?;
        }
        let table = self.warehouse.table(&self.target).await?;
        let head = table.latest().await?;
        // In a chain, the previous date as the run reads it: staged where
        // its stage holds it.
        let head = match &self.stage {
            Some(stage) => head.in_stage(stage).await?,
            None => head,
        };
        let previous = match (
            head.properties().depends_on_previous,
            self.logical_date.pred_opt(),
        ) {
            (true, Some(day)) => Some(head.partition(day).await?.map(|p| p.version)),
            _ => None,
        };
        let destination = Destination::from(self.stage.clone());
        let writer = table
            .write_partition(self.logical_date, run, destination)
            .await?;
        let writer = match self.expected {
            Some(e) => writer.expect(e),
            None => writer,
        };
        let writer = match self.slot {
            Some(ticket) => writer.within_slot(ticket),
            None => writer,
        };
        Ok(RunContext {
            ctx,
            lineage,
            writer,
            derived_id,
            previous,
        })
    }

    /// Run `query` and replace the target partition with its rows.
    pub async fn sql(self, query: &str) -> Result<CommitInfo, QueryError> {
        let mut rc = self.start().await?;
        rc.writer.record_query(query);
        let result = async {
            let df = crate::session::sql(&rc.ctx, query).await?;
            let mut stream = df.execute_stream().await?;
            while let Some(batch) = stream.try_next().await? {
                rc.writer.write(&batch).await?;
            }
            Ok::<_, QueryError>(())
        }
        .await;
        match result {
            Ok(()) => rc.commit().await,
            Err(e) => {
                rc.writer.abort().await?;
                Err(e)
            }
        }
    }
}

/// A started run: query inputs through `ctx`, write rows to `writer`.
pub struct RunContext {
    pub ctx: SessionContext,
    lineage: Arc<Lineage>,
    pub writer: PartitionWriter,
    /// The run id was derived (no explicit id): it is completed at commit
    /// with a fingerprint of the inputs read.
    derived_id: bool,
    /// In a chain (`depends_on_previous`), the version of the previous
    /// date's partition when the run started (`Some(None)`: missing).
    previous: Option<Option<u64>>,
}

impl RunContext {
    /// Plan `query` in the run's session ([`crate::sql`]: the tables it
    /// and its `asof()`/`snapshot()` calls name are opened first). Use this
    /// rather than `ctx.sql`.
    pub async fn sql(&self, query: &str) -> Result<datafusion::dataframe::DataFrame, QueryError> {
        crate::session::sql(&self.ctx, query).await
    }

    /// Commit the partition with the inputs read so far as lineage.
    ///
    /// Without an explicit run id, the id is derived from the target, date,
    /// dimension mode and code version (fixed when the run starts), then
    /// completed with a fingerprint of the query text (whitespace
    /// normalised), the target's schema version and the data read: each
    /// input partition's own version and each dimension's last
    /// data-changing version with the dates it was resolved at. Re-running
    /// the same query on the same data is the same run and commits nothing
    /// new; an edited query, a replaced input date or a dimension change
    /// commits. Commits that leave the data read as it was (other dates,
    /// compaction, expiry, property changes) do not.
    pub async fn commit(self) -> Result<CommitInfo, QueryError> {
        Ok(self.commit_run().await?.0)
    }

    /// [`RunContext::commit`], also returning the run record committed (its
    /// run id, derived or given, and lineage).
    pub async fn commit_run(mut self) -> Result<(CommitInfo, RunInfo), QueryError> {
        let inputs = self.lineage.inputs();
        if self.derived_id {
            let identity = identity(
                self.writer.run().query.as_deref(),
                &self.lineage.plans(),
                self.writer.schema().version,
                self.previous,
                &self.lineage.data_read(),
            );
            let suffix = format!("{:016x}", fingerprint(identity.as_bytes()));
            self.writer.complete_run_id(&suffix)?;
        }
        self.writer.record_inputs(inputs);
        let run = self.writer.run().clone();
        Ok((self.writer.commit().await?, run))
    }
}

/// What a derived run id stands for besides its readable prefix: the query
/// text (or, for a job built with the DataFrame API, the plans it ran), the
/// target's schema version, in a chain the version of the previous date it
/// builds on, and the data read.
fn identity(
    query: Option<&str>,
    plans: &[String],
    schema_version: u32,
    previous: Option<Option<u64>>,
    data_read: &str,
) -> String {
    let what = match query {
        Some(q) => format!("query: {}", normalise_whitespace(q)),
        None => format!("plans:\n{}", plans.join("\n")),
    };
    let previous = match previous {
        None => String::new(),
        Some(v) => format!(
            "previous date: {}\n",
            v.map_or("missing".into(), |v| v.to_string())
        ),
    };
    format!("{what}\ntarget schema: {schema_version}\n{previous}{data_read}")
}

/// `query` with every run of whitespace outside quotes made one space, and
/// none at the ends: layout changes are the same query, while a changed
/// string literal (`'a  b'`) is not.
fn normalise_whitespace(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut quote: Option<char> = None;
    let mut gap = false;
    for c in query.trim().chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None if c.is_whitespace() => gap = true,
            None => {
                if gap {
                    out.push(' ');
                    gap = false;
                }
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// A stable 64-bit FNV-1a hash: stable across builds and platforms, unlike
/// `std`'s hasher, because run ids are stored in the log.
fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::normalise_whitespace;

    #[test]
    fn whitespace_is_normalised_outside_quotes_only() {
        assert_eq!(
            normalise_whitespace("  SELECT a,\n\t b  FROM t "),
            "SELECT a, b FROM t"
        );
        assert_eq!(
            normalise_whitespace("SELECT 'a  b' AS \"x  y\""),
            "SELECT 'a  b' AS \"x  y\""
        );
        assert_ne!(
            normalise_whitespace("SELECT 'a  b'"),
            normalise_whitespace("SELECT 'a b'")
        );
    }
}
