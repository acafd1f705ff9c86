use std::collections::HashMap;

use arrow_array::RecordBatch;
use chrono::NaiveDate;
use futures::TryStreamExt;
use logbook_core::publish::{Outcome, WarehousePoint};
use logbook_core::{DimensionMode, Warehouse};
use logbook_datafusion::{session, QueryOptions};

use super::cluster::ClusterClientArgs;
use super::common::{parse_mode, parse_size, query_err};
use super::CliError;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The query.
    query: String,
    /// Run the query in a run context for this logical date: dimensions
    /// resolve at the date, logical_date() is defined, now() is refused.
    #[arg(long)]
    logical_date: Option<NaiveDate>,
    /// How dimensions resolve in a run context.
    #[arg(long, value_parser = parse_mode, requires = "logical_date")]
    dimensions: Option<DimensionMode>,
    /// Read TABLE at version N (repeatable): `--version orders=3`.
    #[arg(long = "version", value_parser = parse_pin)]
    versions: Vec<(String, u64)>,
    /// Read the tables multi-table publish N published at the versions it
    /// made, and every other table at its newest version holding no later
    /// publish (single-table commits since are read; `--version` still
    /// pins).
    #[arg(long = "as-of-publish", value_name = "N")]
    as_of_publish: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Plan here, run on the cluster whose scheduler is at df://HOST:PORT
    /// (`logbook cluster scheduler`).
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,
    #[command(flatten)]
    cluster_tls: ClusterClientArgs,
    /// Memory the query may hold before sorts, aggregates and joins spill
    /// to disk or fail saying so (`512MiB`, `4GiB`); default: 80% of the
    /// machine's (of its cgroup v2 limit in a container). Not with
    /// `--cluster`: executors have their own (`cluster executor
    /// --memory-limit`).
    #[arg(long, value_parser = parse_size, value_name = "SIZE", conflicts_with = "cluster")]
    memory_limit: Option<usize>,
}

fn parse_pin(s: &str) -> Result<(String, u64), String> {
    let (t, v) = s.split_once('=').ok_or("write TABLE=VERSION")?;
    Ok((
        t.to_string(),
        v.parse()
            .map_err(|_| format!("{v:?} is not a version number"))?,
    ))
}

pub async fn run(warehouse: &Warehouse, args: Args) -> Result<(), CliError> {
    let mut pins = HashMap::new();
    let mut point = None;
    if let Some(seq) = args.as_of_publish {
        let decision = warehouse.publish_decision(seq).await?;
        match decision {
            Some(d) if d.outcome == Outcome::Committed => {
                pins.extend(d.tables);
                point = Some(WarehousePoint::after(seq));
            }
            Some(d) => {
                return Err(CliError::Input(format!(
                "--as-of-publish {seq}: publish {seq} (stage {}) was aborted: it published nothing",
                d.stage
            )))
            }
            None => {
                let latest = warehouse.point().await?.seq();
                return Err(CliError::Input(format!(
                    "--as-of-publish {seq}: no such publish (the latest is {})",
                    latest.map_or("none yet".to_string(), |s| s.to_string())
                )));
            }
        }
    }
    pins.extend(args.versions);
    let options = QueryOptions {
        logical_date: args.logical_date,
        dimensions: args.dimensions,
        pins,
        point,
        ..Default::default()
    };
    let cluster = match &args.cluster {
        Some(url) => Some(args.cluster_tls.connect(url, warehouse)?),
        None => None,
    };
    let ctx = session(warehouse, options, None).await.map_err(query_err)?;
    // The client of a cluster runs no operator: a pool would limit nothing.
    if cluster.is_none() {
        if let Some(limit) = args.memory_limit.or_else(crate::memory::default_limit) {
            crate::memory::apply(&ctx, limit).await?;
        }
    }
    let df = logbook_datafusion::sql(&ctx, &args.query)
        .await
        .map_err(query_err)?;
    let schema = df.schema().as_arrow().clone();
    let stream = match &cluster {
        Some(cluster) => cluster.execute(df).await?,
        None => df.execute_stream().await.map_err(|e| query_err(e.into()))?,
    };
    let batches: Vec<RecordBatch> = stream
        .try_collect()
        .await
        .map_err(|e| query_err(e.into()))?;
    print(&batches, std::sync::Arc::new(schema), args.format)
}

fn print(
    batches: &[RecordBatch],
    schema: arrow_schema::SchemaRef,
    format: Format,
) -> Result<(), CliError> {
    let io = |e: arrow_schema::ArrowError| CliError::Input(format!("cannot print the result: {e}"));
    match format {
        Format::Table => {
            let table = arrow_cast::pretty::pretty_format_batches_with_schema(schema, batches)
                .map_err(io)?;
            println!("{table}");
        }
        Format::Csv => {
            // A batch at a time through a buffer: the writer would report a
            // closed stdout as text, this says `BrokenPipe`.
            let mut out = std::io::stdout().lock();
            for (i, b) in batches.iter().enumerate() {
                let mut w = arrow_csv::WriterBuilder::new()
                    .with_header(i == 0)
                    .build(Vec::new());
                w.write(b).map_err(io)?;
                std::io::Write::write_all(&mut out, &w.into_inner()).map_err(|e| {
                    match e.kind() {
                        std::io::ErrorKind::BrokenPipe => CliError::StdoutClosed,
                        _ => CliError::Input(format!("cannot print the result: {e}")),
                    }
                })?;
            }
            if batches.is_empty() {
                println!(
                    "{}",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
        Format::Json => {
            let mut w = arrow_json::ArrayWriter::new(Vec::new());
            for b in batches {
                w.write(b).map_err(io)?;
            }
            w.finish().map_err(io)?;
            let body = w.into_inner();
            println!(
                "{}",
                if body.is_empty() {
                    "[]"
                } else {
                    std::str::from_utf8(&body).unwrap_or("[]")
                }
            );
        }
    }
    Ok(())
}
