//! `logbook ui`: the read-only web UI (`logbook-ui`) over the warehouse.

use std::net::SocketAddr;
use std::path::PathBuf;

use logbook_core::Warehouse;
use logbook_ui::UiOptions;

use super::common::{read_token, shutdown_signal};
use super::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (loopback by default; anything else needs a token).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// File holding the token every request must carry (open a page once
    /// with `?token=...`; the browser keeps it in a cookie).
    #[arg(long)]
    token_file: Option<PathBuf>,
}

pub async fn run(warehouse: Warehouse, args: Args) -> Result<(), CliError> {
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    // The token travels in a cookie: visible ASCII without `;` `,` or `"`.
    if let Some(t) = &token {
        if !t
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b";,\"\\".contains(&b))
        {
            return Err(CliError::Input(
                "the token may hold only visible ASCII characters other than ; , \" and \\ (it is kept in a cookie)".into(),
            ));
        }
    }
    if token.is_none() && !args.listen.ip().is_loopback() {
        return Err(CliError::Input(format!(
            "refusing to listen on {} without a token: anyone who can reach it could read the warehouse; give --token-file",
            args.listen
        )));
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::Input(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    tracing::info!(%addr, warehouse = %warehouse.location().uri(), "serving the web UI");
    // The address on stdout, so scripts that asked for port 0 learn the port.
    println!("listening on http://{addr}");
    logbook_ui::serve(warehouse, UiOptions { token }, listener, shutdown_signal())
        .await
        .map_err(|e| CliError::Failed(e.to_string()))
}
