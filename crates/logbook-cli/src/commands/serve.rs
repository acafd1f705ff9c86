//! `logbook serve`: the warehouse over Arrow Flight SQL.

use std::net::SocketAddr;
use std::path::PathBuf;

use logbook_core::Warehouse;
use logbook_flight::ServerOptions;

use super::cluster::ClusterClientArgs;
use super::common::{read_token, shutdown_signal};
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (loopback by default; anything else needs a token).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Bearer token every call must carry.
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// File holding the bearer token (keeps it out of `ps`).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Refuse every statement that writes. Always on: the server has no
    /// write path yet (write with `logbook write`, `logbook run` or the Rust API).
    #[arg(long, default_value_t = true)]
    read_only: bool,
    /// Queries executing at once; more are refused until one finishes.
    #[arg(long, default_value_t = 16)]
    max_concurrent_queries: usize,
    /// Rows one result may have.
    #[arg(long, default_value_t = 100_000_000)]
    max_result_rows: u64,
    /// Serve over TLS (grpc+tls://) with this certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Plan queries here and run them on the cluster whose scheduler is at
    /// df://HOST:PORT (`logbook cluster scheduler`).
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,
    #[command(flatten)]
    cluster_tls: ClusterClientArgs,
}

pub async fn run(warehouse: Warehouse, args: Args) -> Result<(), CliError> {
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(read_token(path)?),
        (None, None) => None,
    };
    if token.is_none() && !args.listen.ip().is_loopback() {
        return Err(CliError::Input(format!(
            "refusing to listen on {} without a token: anyone who can reach it could read the warehouse; give --token-file",
            args.listen
        )));
    }
    if args.max_concurrent_queries == 0 || args.max_result_rows == 0 {
        return Err(CliError::Input(
            "--max-concurrent-queries and --max-result-rows must be at least 1".into(),
        ));
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::Input(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let flags = "--tls-cert/--tls-key";
            let tls = logbook_flight::TlsIdentity::from_files(cert, key)
                .map_err(|e| CliError::Input(format!("{flags}: {e}")))?;
            tls.check().map_err(|e| {
                let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
                CliError::Input(format!("{flags}: cannot serve TLS with them: {e}{why}"))
            })?;
            Some(tls)
        }
        _ => None,
    };
    let scheme = if tls.is_some() { "grpc+tls" } else { "grpc" };
    let cluster = match &args.cluster {
        Some(url) => Some(args.cluster_tls.connect(url, &warehouse)?),
        None => None,
    };
    let options = ServerOptions {
        token,
        cluster,
        tls,
        max_concurrent_queries: args.max_concurrent_queries,
        max_result_rows: args.max_result_rows,
        ..ServerOptions::default()
    };
    tracing::info!(
        %addr,
        warehouse = %warehouse.location().uri(),
        auth = if options.token.is_some() { "bearer token" } else { "none" },
        read_only = args.read_only,
        cluster = args.cluster.as_deref().unwrap_or("none"),
        "serving Flight SQL"
    );
    // The address on stdout, so scripts that asked for port 0 learn the port.
    println!("listening on {scheme}://{addr}");
    logbook_flight::serve(warehouse, options, listener, shutdown_signal())
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    tracing::info!("stopped");
    Ok(())
}
