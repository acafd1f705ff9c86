//! TLS between a cluster's processes and its clients: mutual, from one CA.
//!
//! With TLS every connection of a cluster is encrypted and both ends
//! prove themselves: a client, the scheduler and the executors each hold a
//! certificate signed by the cluster's CA, present it, and accept a peer
//! only if the peer's certificate is signed by that CA too. A client
//! without one is refused at the handshake: the certificate is the
//! cluster's credential, as the bearer token is `serve`'s (Ballista's
//! clients cannot carry a token: they are built inside Ballista, and an
//! endpoint hook can set TLS but not headers).
//!
//! Ballista 55 has TLS switches for its clients, not its servers, so:
//! - the scheduler's gRPC service and each executor's Flight service are
//!   served here with tonic's TLS (`ClusterTls::server`);
//! - executors fetch their tasks (Ballista's pull scheduling): the task
//!   service an executor would otherwise serve cannot be given TLS;
//! - every client endpoint Ballista builds from a process's or a session's
//!   configuration goes through `ClusterTls::endpoint_override`, which
//!   also makes its address `https://`: Ballista writes some as `http://`
//!   whatever its `use_tls` says, and tonic speaks TLS only to `https://`
//!   addresses (without the rewrite such a connection would go out in the
//!   clear). The one connection Ballista makes without the hook, the
//!   scheduler's check of an executor that registers for pushed tasks, is
//!   not made for logbook's TLS executors (they fetch); a certificate
//!   holder registering by hand makes the scheduler open a plain
//!   connection to the address it names, and learns nothing from it.
//!
//! The certificates carry no roles: whoever holds one from the CA can
//! query, and can also register as an executor and be given tasks (so
//! return rows of its choosing to other queries). The README says whom to
//! give them to.

use std::path::Path;
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;
use ballista_core::utils::{create_grpc_client_endpoint, GrpcClientConfig};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::error::ClusterError;

/// A server's TLS identity: its certificate chain and private key, PEM.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate chain, leaf first.
    pub cert_pem: Vec<u8>,
    /// The private key of the leaf certificate.
    pub key_pem: Vec<u8>,
}

impl TlsIdentity {
    /// Read from PEM files; an error names the file.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, ClusterError> {
        Ok(Self {
            cert_pem: read_pem(cert)?,
            key_pem: read_pem(key)?,
        })
    }

    /// Fails if the certificate or key cannot serve TLS (unreadable PEM, a
    /// key that is not the certificate's): check before announcing the
    /// server.
    pub fn check(&self) -> Result<(), tonic::transport::Error> {
        tonic::transport::Server::builder()
            .tls_config(ServerTlsConfig::new().identity(self.tonic()))
            .map(|_| ())
    }

    pub(crate) fn tonic(&self) -> Identity {
        Identity::from_pem(&self.cert_pem, &self.key_pem)
    }
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

/// What one process of a cluster (or a client of it) speaks TLS with: its
/// own certificate and key, and the CA its peers' certificates must be
/// signed by.
#[derive(Clone, Debug)]
pub struct ClusterTls {
    identity: TlsIdentity,
    ca_pem: Vec<u8>,
}

impl ClusterTls {
    /// Checks that `identity` can serve TLS and that `ca_pem` holds a PEM
    /// certificate; the error names what is wrong.
    pub fn new(identity: TlsIdentity, ca_pem: Vec<u8>) -> Result<Self, ClusterError> {
        identity.check().map_err(|e| {
            let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
            ClusterError::Config(format!(
                "the certificate and key cannot serve TLS: {e}{why}"
            ))
        })?;
        if !String::from_utf8_lossy(&ca_pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(ClusterError::Config(
                "the CA file holds no PEM certificate (no -----BEGIN CERTIFICATE----- line)".into(),
            ));
        }
        let tls = Self { identity, ca_pem };
        // A CA rustls cannot use fails here, not at the first connection.
        tonic::transport::Endpoint::from_static("https://localhost")
            .tls_config(tls.client())
            .map_err(|e| {
                let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
                ClusterError::Config(format!("the CA certificate cannot be used: {e}{why}"))
            })?;
        Ok(tls)
    }

    /// [`ClusterTls::new`] from PEM files; an error names the file.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<Self, ClusterError> {
        Self::new(TlsIdentity::from_files(cert, key)?, read_pem(ca)?)
    }

    /// The server side: this identity, and peers must present a
    /// certificate signed by the CA.
    pub(crate) fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.tonic())
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
    }

    /// The client side: servers verified against the CA, this identity
    /// presented.
    fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(self.identity.tonic())
    }

    /// The hook Ballista calls on the client endpoints it builds: the
    /// address made `https://` and this side's TLS set. The endpoint it is
    /// handed cannot be read back, so the new one gets Ballista's default
    /// timeouts and keep-alives (`GrpcClientConfig::default()`): 20 s to
    /// connect and 20 s for a call's response headers (a Flight fetch of
    /// shuffle files or results gets that limit, which Ballista's plain
    /// fetches do not set; its rows stream without one). An address that is
    /// neither `http://` nor `https://` is refused rather than sent in the
    /// clear.
    pub(crate) fn endpoint_override(&self) -> EndpointOverrideFn {
        let tls = self.client();
        Arc::new(move |endpoint| {
            let uri = https(&endpoint.uri().to_string())?;
            let config = GrpcClientConfig::default();
            Ok(create_grpc_client_endpoint(uri, Some(&config))?.tls_config(tls.clone())?)
        })
    }
}

/// `uri` with the scheme TLS needs: `http://` becomes `https://`.
fn https(uri: &str) -> Result<String, ClusterError> {
    if let Some(rest) = uri.strip_prefix("http://") {
        return Ok(format!("https://{rest}"));
    }
    if uri.starts_with("https://") {
        return Ok(uri.to_string());
    }
    Err(ClusterError::Config(format!(
        "{uri}: a cluster connection over TLS needs an http:// or https:// address"
    )))
}

/// A PEM file's bytes, or an error naming the file.
fn read_pem(path: &Path) -> Result<Vec<u8>, ClusterError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN ") {
        return Err(ClusterError::Config(format!(
            "{}: not a PEM file (no -----BEGIN line)",
            path.display()
        )));
    }
    Ok(bytes)
}

/// What a failed connection's message may mean when one side speaks TLS
/// and the other does not, or certificates do not match; "" when it says
/// nothing of the kind (a call the server answered, nothing listening at
/// the address, a name that does not resolve). tonic reports a refused
/// handshake in several ways (a protocol error, an alert, a closed or
/// unready connection, a broken pipe: it depends on who writes first), none
/// naming TLS, so a connection dropped after it was made gets the hint,
/// worded as a possibility.
pub(crate) fn mismatch_hint(tls: bool, message: &str) -> &'static str {
    if message.contains("InvalidCertificate") {
        // rustls names why it refused the other side's certificate.
        return if message.contains("UnknownIssuer") {
            "; the other side's certificate is not signed by the CA given"
        } else if message.contains("NotValidForName") {
            "; the other side's certificate does not name the address it was reached at"
        } else if message.contains("Expired") || message.contains("NotValidYet") {
            "; the other side's certificate is outside its validity period"
        } else {
            // rustls's reason follows in the message.
            "; the other side's certificate was refused"
        };
    }
    let unreached = [
        "Connection refused",
        "dns error",
        "os error 111",
        "timed out",
    ]
    .iter()
    .any(|m| message.contains(m));
    let dropped = !unreached
        && (message.contains("Error(Transport") || message.contains("h2 protocol error"));
    match tls {
        true if dropped => {
            "; the other side may have refused this certificate (not signed by its CA), or not serve TLS"
        }
        false if dropped => {
            "; if the other side serves TLS, give the cluster's CA and a certificate it signed"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Messages as tonic and rustls print them (Debug of a transport error).
    const REFUSED: &str = "Status { code: Unavailable, message: \"tcp connect error\", source: Some(tonic::transport::Error(Transport, ConnectError(\"tcp connect error\", 127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: \"Connection refused\" }))) }";
    const RESET: &str = "Status { code: Unknown, message: \"transport error\", source: Some(tonic::transport::Error(Transport, hyper::Error(Io, Kind(BrokenPipe)))) }";

    #[test]
    fn nothing_listening_is_not_called_a_tls_mismatch() {
        assert_eq!(mismatch_hint(true, REFUSED), "");
        assert_eq!(mismatch_hint(false, REFUSED), "");
    }

    #[test]
    fn a_dropped_connection_may_be_a_tls_mismatch_on_either_side() {
        assert!(mismatch_hint(true, RESET).contains("refused this certificate"));
        assert!(mismatch_hint(false, RESET).contains("if the other side serves TLS"));
    }

    #[test]
    fn a_refused_server_certificate_says_why_rustls_refused_it() {
        let said = |why: &str| {
            mismatch_hint(
                true,
                &format!("invalid peer certificate: InvalidCertificate({why})"),
            )
        };
        assert!(said("UnknownIssuer").contains("not signed by the CA given"));
        assert!(said("NotValidForName").contains("does not name the address"));
        assert!(said("Expired").contains("validity period"));
        assert!(said("BadSignature").contains("was refused"));
    }

    #[test]
    fn a_tls_endpoint_is_https_and_nothing_else() {
        assert_eq!(https("http://h:1/").unwrap(), "https://h:1/");
        assert_eq!(https("https://h:1/").unwrap(), "https://h:1/");
        let err = https("grpc://h:1/").unwrap_err().to_string();
        assert!(err.contains("grpc://h:1/"), "{err}");
    }
}
