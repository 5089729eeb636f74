//! https test servers: certificates made at test time (rcgen; nothing secret is committed) and a
//! TLS HTTP/1.1 server on std threads (rustls' server side, blocking), plus the two ways a TLS
//! handshake goes wrong at the server's end (it closes during the handshake; it speaks plain HTTP).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};

use super::{is_poll_timeout, loopback_listener, ConnCtx, TestServer};

/// What a server certificate says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cert {
    /// SAN: DNS localhost, IP 127.0.0.1 and ::1 (what netarena's own runs use), valid now.
    Good,
    /// The names of `Good`, but it expired in 2020.
    Expired,
    /// Valid now, for another name only (DNS other.invalid).
    WrongName,
}

/// A test CA, its certificate in a PEM file (what `--cacert` is given) in a directory of its own.
pub struct TestCa {
    pub dir: PathBuf,
    pub ca_pem: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let dir = std::env::temp_dir().join(format!(
            "netarena-tls-test-{}-{name}-{}",
            std::process::id(),
            super::free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("netarena test CA {name}"));
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_pem = dir.join("ca.pem");
        std::fs::write(&ca_pem, issuer.pem()).unwrap();
        TestCa {
            dir,
            ca_pem,
            issuer,
        }
    }

    /// A server certificate of this CA and its key.
    fn leaf(&self, cert: Cert) -> (rcgen::Certificate, KeyPair) {
        let names: Vec<String> = match cert {
            Cert::Good | Cert::Expired => {
                vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
            }
            Cert::WrongName => vec!["other.invalid".into()],
        };
        let mut params = CertificateParams::new(names).unwrap();
        if cert == Cert::Expired {
            params.not_before = date_time_ymd(2019, 1, 1);
            params.not_after = date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let leaf = params.signed_by(&key, &self.issuer).unwrap();
        (leaf, key)
    }

    /// A server configuration with a certificate of this CA (TLS 1.3 and 1.2, ALPN http/1.1,
    /// stateless TLS 1.3 tickets for resumption).
    pub fn server_config(&self, cert: Cert) -> Arc<ServerConfig> {
        let (leaf, key) = self.leaf(cert);
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], key_der)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Stateless tickets (TLS 1.3): a resumed handshake needs no server-side cache entry.
        config.ticketer = rustls::crypto::ring::Ticketer::new().unwrap();
        Arc::new(config)
    }

    /// A server certificate of this CA and its key as PEM files in the CA's directory (for nginx).
    pub fn server_pem_files(&self, cert: Cert) -> (PathBuf, PathBuf) {
        let (leaf, key) = self.leaf(cert);
        let (cert_pem, key_pem) = (self.dir.join("server.pem"), self.dir.join("server.key"));
        std::fs::write(&cert_pem, leaf.pem()).unwrap();
        std::fs::write(&key_pem, key.serialize_pem()).unwrap();
        (cert_pem, key_pem)
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ok_response(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// An https server answering every request (GET, no body) with 200 and `body`, keep-alive; each
/// answer counts as good.
pub fn tls_http_server(config: Arc<ServerConfig>, body: &'static [u8]) -> TestServer {
    let response = ok_response(body);
    TestServer::start(loopback_listener(), None, move |stream, _, ctx| {
        let _ = serve_tls(stream, config.clone(), &response, ctx);
    })
}

fn serve_tls(
    mut sock: TcpStream,
    config: Arc<ServerConfig>,
    response: &[u8],
    ctx: &ConnCtx,
) -> io::Result<()> {
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        while conn.wants_write() {
            conn.write_tls(&mut sock)?;
        }
        if ctx.should_stop() {
            return Ok(());
        }
        match conn.read_tls(&mut sock) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if is_poll_timeout(&e) => continue,
            Err(e) => return Err(e),
        }
        if let Err(e) = conn.process_new_packets() {
            // The alert tells the client why.
            let _ = conn.write_tls(&mut sock);
            return Err(io::Error::other(e));
        }
        loop {
            match conn.reader().read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            ctx.stats.requests.fetch_add(1, Ordering::SeqCst);
            conn.writer().write_all(response)?;
            ctx.stats.good.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Accepts, reads the client's first bytes (its ClientHello) and closes: the handshake never ends.
pub fn closes_during_handshake_server() -> TestServer {
    TestServer::start(loopback_listener(), None, |mut stream, _, ctx| {
        let mut buf = [0u8; 4096];
        while !ctx.should_stop() {
            match stream.read(&mut buf) {
                Ok(_) => {
                    ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Err(e) if is_poll_timeout(&e) => {}
                Err(_) => return,
            }
        }
    })
}

/// A plain-HTTP server's answer to bytes that are no request (a ClientHello): 400 and close, as
/// nginx does.
pub fn plain_http_400_server() -> TestServer {
    TestServer::start(loopback_listener(), None, |mut stream, _, ctx| {
        let mut buf = [0u8; 4096];
        while !ctx.should_stop() {
            match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                    ctx.hold_until_peer_closes(&mut stream);
                    return;
                }
                Err(e) if is_poll_timeout(&e) => {}
                Err(_) => return,
            }
        }
    })
}
