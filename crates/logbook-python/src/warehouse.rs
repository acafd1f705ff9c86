//! `Warehouse`: tables by name, SQL at any version or logical date, runs,
//! and the operators' questions (status, plan, log) answered with the same
//! JSON as the CLI's `--json`.

use std::collections::HashMap;
use std::path::PathBuf;

use logbook_core::budget::Turn;
use logbook_core::lifecycle::{self, Selection};
use logbook_core::{ExpectedPartition, TableProperties, TableSchema};
use logbook_datafusion::{session, QueryOptions, Run as RustRun};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatchReader, PySchema};

use crate::convert::{parse_date, parse_mode, to_json};
use crate::errors;
use crate::run::Run;
use crate::runtime::wait;
use crate::streams;
use crate::table::{launched, Table};

/// A warehouse: a directory or bucket prefix holding tables.
#[pyclass(module = "pylogbook._native", frozen)]
pub struct Warehouse {
    pub(crate) inner: logbook_core::Warehouse,
    /// Where `sql` runs its queries, when not in this process.
    cluster: Option<logbook_cluster::Cluster>,
}

#[pymethods]
impl Warehouse {
    /// Open the warehouse at `uri`: a directory, `file://`, `memory://`,
    /// `s3://`, `gs://` or `az://` (credentials from the usual variables).
    /// With `cluster="df://HOST:PORT"`, `sql` plans here and runs its
    /// queries on that cluster (`logbook cluster scheduler`); a cluster
    /// started with TLS also needs `cluster_ca`, `cluster_cert` and
    /// `cluster_key` (PEM files: its CA, and this client's certificate it
    /// signed and key).
    #[new]
    #[pyo3(signature = (uri, cluster=None, cluster_ca=None, cluster_cert=None, cluster_key=None))]
    fn new(
        uri: &str,
        cluster: Option<&str>,
        cluster_ca: Option<PathBuf>,
        cluster_cert: Option<PathBuf>,
        cluster_key: Option<PathBuf>,
    ) -> PyResult<Self> {
        let inner = logbook_core::Warehouse::open(uri).map_err(errors::core)?;
        let tls = match (cluster_ca, cluster_cert, cluster_key) {
            (None, None, None) => None,
            (Some(ca), Some(cert), Some(key)) if cluster.is_some() => Some(
                logbook_cluster::ClusterTls::from_files(&cert, &key, &ca).map_err(|e| {
                    errors::InvalidInputError::new_err(format!(
                        "cluster_ca/cluster_cert/cluster_key: {e}"
                    ))
                })?,
            ),
            _ => {
                return Err(errors::InvalidInputError::new_err(
                    "cluster_ca, cluster_cert and cluster_key go together, with cluster=",
                ))
            }
        };
        let cluster = cluster
            .map(|url| logbook_cluster::Cluster::new(url, &inner))
            .transpose()
            .map_err(errors::cluster)?
            .map(|c| match tls {
                Some(tls) => c.with_tls(tls),
                None => c,
            });
        Ok(Self { inner, cluster })
    }

    /// Where the warehouse lives.
    #[getter]
    fn uri(&self) -> String {
        self.inner.location().uri().to_string()
    }

    /// Create a table: a fact table partitioned by the date column
    /// `partition_by`, or a dimension (SCD2) keyed by `scd2_keys`.
    /// `mirror="delta"` keeps a Delta Lake log beside logbook's,
    /// `mirror="iceberg"` Iceberg metadata, `mirror="delta,iceberg"` both.
    /// `sort_by` sorts each row group by those columns and `bloom_filters`
    /// writes bloom filters for those, so that filters on them skip data.
    #[pyo3(signature = (name, schema, partition_by=None, scd2_keys=None, schedule_start=None, depends_on_previous=false, mirror=None, sort_by=None, bloom_filters=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_table(
        &self,
        py: Python<'_>,
        name: &str,
        schema: PySchema,
        partition_by: Option<String>,
        scd2_keys: Option<Vec<String>>,
        schedule_start: Option<&str>,
        depends_on_previous: bool,
        mirror: Option<&str>,
        sort_by: Option<Vec<String>>,
        bloom_filters: Option<Vec<String>>,
    ) -> PyResult<Table> {
        let mirrors = mirror
            .map(logbook_core::MirrorFormat::parse_list)
            .transpose()
            .map_err(|e| errors::invalid(format!("table {name}: mirror: {e}")))?
            .unwrap_or_default();
        let arrow = schema.into_inner();
        let columns =
            logbook_core::schema::columns_from_arrow(name, &arrow).map_err(errors::core)?;
        let schema = match (partition_by, scd2_keys) {
            (Some(column), None) => TableSchema::new(name, columns, &column),
            (None, Some(keys)) => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                TableSchema::dimension(name, columns, &keys)
            }
            _ => {
                return Err(errors::invalid(format!(
                "table {name}: give either partition_by (a fact table) or scd2_keys (a dimension)"
            )))
            }
        }
        .map_err(errors::core)?;
        let properties = TableProperties {
            schedule_start: schedule_start
                .map(|d| parse_date("schedule_start", d))
                .transpose()?,
            depends_on_previous,
            ..Default::default()
        }
        .with_mirrors(&mirrors);
        let (sort_by, bloom_filters) = (
            sort_by.unwrap_or_default(),
            bloom_filters.unwrap_or_default(),
        );
        let sort_by: Vec<&str> = sort_by.iter().map(String::as_str).collect();
        let bloom_filters: Vec<&str> = bloom_filters.iter().map(String::as_str).collect();
        let properties = properties
            .with_sort_by(name, &schema, &sort_by)
            .and_then(|p| p.with_bloom_filters(name, &schema, &bloom_filters))
            .map_err(errors::core)?;
        let table = wait(py, || {
            self.inner
                .create_table_with_properties(name, schema, properties)
        })
        .map_err(errors::core)?;
        Ok(Table::new(table, self.inner.clone()))
    }

    /// The table `name`.
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        let table = wait(py, || self.inner.table(name)).map_err(errors::core)?;
        Ok(Table::new(table, self.inner.clone()))
    }

    /// The names of the warehouse's tables.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        wait(py, || self.inner.list_tables()).map_err(errors::core)
    }

    /// Run `query` and stream its result (an object exporting
    /// `__arrow_c_stream__`). With `logical_date`, the query runs in a run
    /// context: dimensions resolve at that date (`dimensions="as-of"`) or
    /// currently, `logical_date()` is defined and the wall clock refused.
    /// `versions` pins tables: `{"orders": 12}`.
    #[pyo3(signature = (query, logical_date=None, dimensions="as-of", versions=None))]
    fn sql(
        &self,
        py: Python<'_>,
        query: &str,
        logical_date: Option<&str>,
        dimensions: &str,
        versions: Option<HashMap<String, u64>>,
    ) -> PyResult<PyRecordBatchReader> {
        let options = QueryOptions {
            logical_date: logical_date
                .map(|d| parse_date("logical_date", d))
                .transpose()?,
            dimensions: Some(parse_mode(dimensions)?),
            pins: versions.unwrap_or_default(),
            ..Default::default()
        };
        let stream = wait(py, || async {
            let ctx = session(&self.inner, options, None)
                .await
                .map_err(errors::query)?;
            let df = logbook_datafusion::sql(&ctx, query)
                .await
                .map_err(errors::query)?;
            match &self.cluster {
                Some(cluster) => cluster.execute(df).await.map_err(errors::cluster),
                None => df.execute_stream().await.map_err(errors::sql),
            }
        })?;
        Ok(streams::export(stream))
    }

    /// Start a run of `target` for `date`; commit it with `commit()` (the
    /// Python `with` block does).
    /// `run_class` and `slot` take the run's turn in the warehouse's run
    /// budget (see `Table.replace_partition`), held until it commits or aborts.
    #[pyo3(signature = (target, date, dimensions="as-of", code_version=None, run_id=None, stage=None, expect_version=None, run_class=None, slot=None))]
    #[allow(clippy::too_many_arguments)]
    fn start_run(
        &self,
        py: Python<'_>,
        target: &str,
        date: &str,
        dimensions: &str,
        code_version: Option<String>,
        run_id: Option<String>,
        stage: Option<String>,
        expect_version: Option<&str>,
        run_class: Option<&str>,
        slot: Option<&str>,
    ) -> PyResult<Run> {
        let date = parse_date("date", date)?;
        let mut run = RustRun::new(&self.inner, target, date).dimensions(parse_mode(dimensions)?);
        if let Some(v) = code_version {
            run = run.code_version(v);
        }
        let said_id = run_id
            .clone()
            .unwrap_or_else(|| "(derived at commit)".into());
        if let Some(id) = run_id {
            run = run.run_id(id);
        }
        let (launched, staged) = (launched(run_class, slot)?, stage.is_some());
        if let Some(name) = stage {
            run = run.stage(name);
        }
        if let Some(e) = expect_version {
            run = run.expect(e.parse::<ExpectedPartition>().map_err(errors::invalid)?);
        }
        let wh = &self.inner;
        let mut turn = wait(py, || {
            Turn::take(wh, target, date, &said_id, staged, launched, |_| {})
        })
        .map_err(errors::core)?;
        // The run's heavy step, before its marker says it runs (a wait for
        // a slot would otherwise show as a run that stopped renewing): a
        // backfill waits while the warehouse's `max-heavy-steps` are under
        // way, unless a run of this warehouse handle holds one.
        if let Err(e) = wait(py, || turn.begin_heavy(wh, |_| {})) {
            wait(py, || turn.end());
            return Err(errors::core(e));
        }
        run = run.class(turn.class);
        if let Some(t) = turn.ticket {
            run = run.within_slot(t);
        }
        match wait(py, || run.start()) {
            Ok(context) => Ok(Run::new(context, turn)),
            Err(e) => {
                wait(py, || turn.end());
                Err(errors::query(e))
            }
        }
    }

    /// The state of every scheduled date of `table` up to `end`, as JSON
    /// (what `logbook status --json` prints).
    #[pyo3(signature = (table, end, start=None))]
    fn status_json(
        &self,
        py: Python<'_>,
        table: &str,
        end: &str,
        start: Option<&str>,
    ) -> PyResult<String> {
        let end = parse_date("end", end)?;
        let start = start.map(|d| parse_date("start", d)).transpose()?;
        let status = wait(py, || {
            lifecycle::status_asked(&self.inner, table, None, start, end)
        })
        .map_err(errors::core)?;
        to_json(&status.dates)
    }

    /// The dates to recompute, as JSON (what `logbook plan --json` prints).
    #[pyo3(signature = (table, end, start=None, only="needed"))]
    fn plan_json(
        &self,
        py: Python<'_>,
        table: &str,
        end: &str,
        start: Option<&str>,
        only: &str,
    ) -> PyResult<String> {
        let only: Selection = only.parse().map_err(errors::invalid)?;
        let end = parse_date("end", end)?;
        let start = start.map(|d| parse_date("start", d)).transpose()?;
        let status = wait(py, || {
            lifecycle::status_asked(&self.inner, table, None, start, end)
        })
        .map_err(errors::core)?;
        to_json(&lifecycle::plan(&status, only))
    }

    /// Every commit of `table`, as JSON (what `logbook log --json` prints).
    fn log_json(&self, py: Python<'_>, table: &str) -> PyResult<String> {
        let lines = wait(py, || async {
            logbook_core::answers::log(&self.inner.table(table).await?).await
        })
        .map_err(errors::core)?;
        to_json(&lines)
    }

    /// Publish stage `name` across every table holding it, as one (what
    /// `logbook stage publish NAME` does), as JSON: `{"seq": N or null,
    /// "tables": {table: version}}`.
    #[pyo3(signature = (name, force=false))]
    fn publish_stage_json(&self, py: Python<'_>, name: &str, force: bool) -> PyResult<String> {
        let published = wait(py, || async {
            let stage = self.inner.stage(name).await?;
            stage.publish(force).await
        })
        .map_err(errors::core)?;
        let tables: std::collections::BTreeMap<&String, u64> = published
            .tables
            .iter()
            .map(|(t, info)| (t, info.version))
            .collect();
        to_json(&serde_json::json!({ "seq": published.seq, "tables": tables }))
    }
}
