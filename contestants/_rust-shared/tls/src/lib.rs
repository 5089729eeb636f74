//! The protocols netarena starts the hyper-based Rust contestants for (rust-hyper, rust-axum), from
//! `NETARENA_PROTOCOL` (docs/protocols.md): `h1` HTTP/1.1 in cleartext, `h1-tls` HTTP/1.1 over TLS, `h2` HTTP/2
//! over TLS, `h2c` HTTP/2 in cleartext with prior knowledge. Over TLS the certificate and key are the PEM files
//! named by `NETARENA_TLS_CERT` and `NETARENA_TLS_KEY`, served with rustls (the `ring` provider) through
//! tokio-rustls; each connection is then hyper's own http1 or http2 connection, as in cleartext.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::rt::bounds::Http2ServerConnExec;
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
pub use tokio_rustls::TlsAcceptor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    H1,
    H1Tls,
    H2,
    H2c,
}

impl Protocol {
    const ALL: [Protocol; 4] = [Protocol::H1, Protocol::H1Tls, Protocol::H2, Protocol::H2c];

    /// `NETARENA_PROTOCOL`; unset or empty is h1, as a server started by hand expects.
    pub fn from_env() -> Result<Protocol, String> {
        let value = std::env::var("NETARENA_PROTOCOL").unwrap_or_default();
        if value.is_empty() {
            return Ok(Protocol::H1);
        }
        Protocol::ALL
            .into_iter()
            .find(|protocol| protocol.name() == value)
            .ok_or_else(|| {
                format!("NETARENA_PROTOCOL={value:?}: this server speaks h1, h1-tls, h2 and h2c")
            })
    }

    /// The name NETARENA_PROTOCOL gives it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H1Tls => "h1-tls",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
        }
    }

    pub fn is_http2(self) -> bool {
        matches!(self, Protocol::H2 | Protocol::H2c)
    }

    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::H1Tls | Protocol::H2)
    }
}

/// The TLS acceptor for a TLS protocol (None in cleartext), from the PEM files netarena names in
/// `NETARENA_TLS_CERT` (the certificate chain) and `NETARENA_TLS_KEY` (the private key). TLS 1.3 and 1.2
/// (rustls' safe defaults). ALPN offers only the protocol the server was started for: `http/1.1` for h1-tls
/// (a client offering h2 beside it still gets HTTP/1.1), `h2` for h2; a client offering neither is refused
/// by rustls with the no_application_protocol alert, and one offering no ALPN at all gets the started protocol.
pub fn tls_acceptor(protocol: Protocol) -> Result<Option<TlsAcceptor>, String> {
    if !protocol.is_tls() {
        return Ok(None);
    }
    let file = |var: &str| {
        std::env::var(var)
            .ok()
            .filter(|path| !path.is_empty())
            .ok_or_else(|| {
                format!(
                    "NETARENA_PROTOCOL={} without {var}: set it to the PEM file to serve TLS with \
                     (netarena does for its h1-tls and h2 levels)",
                    protocol.name()
                )
            })
    };
    let (cert_path, key_path) = (file("NETARENA_TLS_CERT")?, file("NETARENA_TLS_KEY")?);
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| {
            format!("NETARENA_TLS_CERT {cert_path:?}: cannot read a PEM certificate: {err}")
        })?;
    if certs.is_empty() {
        return Err(format!(
            "NETARENA_TLS_CERT {cert_path:?} holds no PEM certificate"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|err| {
        format!("NETARENA_TLS_KEY {key_path:?}: cannot read a PEM private key: {err}")
    })?;
    // The provider is named rather than taken from the process default, so the build's features decide nothing.
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("TLS versions: {err}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|err| {
                format!("NETARENA_TLS_CERT {cert_path:?} with NETARENA_TLS_KEY {key_path:?}: {err}")
            })?;
    config.alpn_protocols = vec![if protocol.is_http2() {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// Accepts connections forever and serves each on a task of its own, over `protocol`: the TLS handshake first
/// when `tls` is given (tls_acceptor's), then hyper's http1 connection (keep-alive) or http2 connection (hyper's
/// default settings and windows, streams run as tasks). TCP_NODELAY on every connection: a response written
/// in pieces (a head, then its body; ServeDir's chunks) must not wait for the client's delayed ACK.
pub async fn serve<S, B>(
    listener: TcpListener,
    protocol: Protocol,
    tls: Option<TlsAcceptor>,
    service: S,
) where
    S: HttpService<Incoming, ResBody = B> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            // EMFILE and friends: back off briefly instead of spinning or dying.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (tls, service) = (tls.clone(), service.clone());
        tokio::spawn(serve_connection(stream, protocol, tls, service));
    }
}

async fn serve_connection<S, B>(
    stream: TcpStream,
    protocol: Protocol,
    tls: Option<TlsAcceptor>,
    service: S,
) where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    match tls {
        // A failed handshake (a client that does not trust the certificate, or offers no protocol of ours)
        // ends the connection; rustls has sent the client its alert.
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(stream).await {
                serve_http(TokioIo::new(stream), protocol, service).await
            }
        }
        None => serve_http(TokioIo::new(stream), protocol, service).await,
    }
}

async fn serve_http<I, S, B>(io: I, protocol: Protocol, service: S)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    // A connection's error (a client gone mid-request, a protocol error) ends that connection only.
    if protocol.is_http2() {
        let _ = http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, service)
            .await;
    } else {
        let _ = http1::Builder::new()
            .keep_alive(true)
            .serve_connection(io, service)
            .await;
    }
}
