//! The hyper server loop of the hyper-based contestants (rust-hyper, rust-axum): TLS through tokio-rustls with the
//! configuration of `server_config`, then hyper's own http1 or http2 connection.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::rt::bounds::Http2ServerConnExec;
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
pub use tokio_rustls::TlsAcceptor;

use crate::{server_config, Protocol};

/// The TLS acceptor for a TLS protocol (None in cleartext): `server_config`'s configuration.
pub fn tls_acceptor(protocol: Protocol) -> Result<Option<TlsAcceptor>, String> {
    Ok(server_config(protocol)?.map(|config| TlsAcceptor::from(Arc::new(config))))
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
