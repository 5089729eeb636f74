//! HTTPS's settings: `--cacert`, `--insecure` and `--tls-resume` made into the one rustls client
//! configuration a run shares (ring provider, ALPN `http/1.1`), the server name every connection
//! presents, and what a TLS failure is (`tls_handshake` or `tls_certificate`). The bytes themselves
//! go through `io::tls`, between the socket and the exchange, which keeps seeing plaintext.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::stats::ErrorClass;

/// The ALPN protocol offered: one, HTTP/1.1's or with `--h2` HTTP/2's, so the server cannot pick
/// another than the run measures.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";

/// How many TLS sessions `--tls-resume` keeps for resumption (rustls' in-memory cache, shared by
/// the run's threads; every connection goes to the one server name).
const RESUME_CACHE_SESSIONS: usize = 256;

/// What every https connection of a run needs to start its TLS session.
#[derive(Clone)]
pub struct TlsSettings {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    pub resume: bool,
    /// The server's certificate is checked (`--cacert`); false with `--insecure`.
    pub verified: bool,
    /// The ALPN protocol the server must choose (the one offered); a session without it fails as
    /// `tls_handshake`: measuring HTTP/1.1 where HTTP/2 was asked for would be a wrong figure.
    pub alpn: &'static [u8],
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("server_name", &self.server_name)
            .field("resume", &self.resume)
            .field("verified", &self.verified)
            .finish()
    }
}

/// Whom to trust: the certificates of a PEM file (`--cacert`), or anybody (`--insecure`).
pub enum Trust<'a> {
    CaFile(&'a Path),
    Anybody,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file, every one of them trusted as a root.
fn roots_of(path: &Path) -> Result<RootCertStore, String> {
    let what = |e: String| format!("--cacert {}: {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| what(pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| what(pem_error(e)))?;
    if certs.is_empty() {
        return Err(what(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA or self-signed certificate the server's chain ends in".into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| what(format!("a certificate cannot be used as a root: {e}")))?;
    }
    Ok(roots)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => format!("cannot read it: {e}"),
        other => format!("not a PEM file: {other:?}"),
    }
}

/// The run's client configuration. Reads the `--cacert` file; everything else is memory.
pub fn settings(
    host: &str,
    trust: Trust<'_>,
    resume: bool,
    h2: bool,
) -> Result<TlsSettings, String> {
    let alpn = if h2 { ALPN_H2 } else { ALPN_HTTP1 };
    let verified = matches!(trust, Trust::CaFile(_));
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let mut config = match trust {
        Trust::CaFile(path) => builder
            .with_root_certificates(roots_of(path)?)
            .with_no_client_auth(),
        Trust::Anybody => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider())))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    // Off by default: every connection then pays a full handshake, as a client seen for the first
    // time does. With --tls-resume the sessions (TLS 1.3 tickets, TLS 1.2 ids) of earlier
    // connections are offered on reconnects.
    config.resumption = if resume {
        Resumption::in_memory_sessions(RESUME_CACHE_SESSIONS)
    } else {
        Resumption::disabled()
    };
    // A brackets-free IP literal is an IpAddress server name (no SNI is sent for it, as RFC 6066 says).
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("'{host}' cannot be a TLS server name: {e}"))?;
    Ok(TlsSettings {
        config: Arc::new(config),
        server_name,
        resume,
        verified,
        alpn,
    })
}

/// A blocking byte stream, plain or TLS (`--verify-learn`'s single request).
pub trait Duplex: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> Duplex for T {}

/// `tcp` as it is (None: http://) or inside a TLS session whose handshake runs on first use.
pub fn blocking_stream(
    settings: Option<&TlsSettings>,
    tcp: std::net::TcpStream,
) -> Result<Box<dyn Duplex>, String> {
    let Some(s) = settings else {
        return Ok(Box::new(tcp));
    };
    let conn = rustls::ClientConnection::new(s.config.clone(), s.server_name.clone())
        .map_err(|e| format!("TLS: {e}"))?;
    Ok(Box::new(rustls::StreamOwned::new(conn, tcp)))
}

/// The error class of a failed TLS session: the peer's certificate (wrong name, expired, unknown
/// issuer, ...) or anything else of the handshake (an alert, a message that is not TLS).
pub fn error_class(e: &rustls::Error) -> ErrorClass {
    match e {
        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
            ErrorClass::TlsCertificate
        }
        _ => ErrorClass::TlsHandshake,
    }
}

/// `--insecure`: any certificate is accepted, but the handshake's signatures are still checked
/// (the session is TLS, only the peer's identity is not).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_cacert_files_are_named() {
        let e = settings(
            "localhost",
            Trust::CaFile(Path::new("/nonexistent.pem")),
            false,
            false,
        )
        .unwrap_err();
        assert!(
            e.contains("--cacert /nonexistent.pem: cannot read it"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("netarena-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "just words\n").unwrap();
        let e = settings("localhost", Trust::CaFile(&not_pem), false, false).unwrap_err();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ip_addresses_are_server_names() {
        let s = settings("127.0.0.1", Trust::Anybody, true, false).unwrap();
        assert!(matches!(s.server_name, ServerName::IpAddress(_)));
        let s = settings("::1", Trust::Anybody, false, false).unwrap();
        assert!(matches!(s.server_name, ServerName::IpAddress(_)));
        assert_eq!(s.config.alpn_protocols, vec![ALPN_HTTP1.to_vec()]);
    }

    #[test]
    fn http2_offers_h2_alone() {
        let s = settings("localhost", Trust::Anybody, false, true).unwrap();
        assert_eq!(s.config.alpn_protocols, vec![ALPN_H2.to_vec()]);
        assert_eq!(s.alpn, ALPN_H2);
    }
}
