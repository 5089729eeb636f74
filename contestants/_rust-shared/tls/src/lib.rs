//! The protocols netarena starts the Rust contestants for, from `NETARENA_PROTOCOL` (docs/protocols.md): `h1`
//! HTTP/1.1 in cleartext, `h1-tls` HTTP/1.1 over TLS, `h2` HTTP/2 over TLS, `h2c` HTTP/2 in cleartext with prior
//! knowledge. Over TLS the certificate and key are the PEM files named by `NETARENA_TLS_CERT` and
//! `NETARENA_TLS_KEY`, served with rustls (the `ring` provider): by the hyper-based contestants (rust-hyper,
//! rust-axum) through tokio-rustls and hyper's own http1 or http2 connection (`serve`), by rust-actix through
//! Actix's own server (`server_config`).

use std::sync::Arc;

pub use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

// The hyper server loop (feature `serve`, on by default): rust-hyper and rust-axum serve each connection with it.
// rust-actix takes only the protocol and the rustls configuration, which Actix's own server binds.
#[cfg(feature = "serve")]
mod serving;
#[cfg(feature = "serve")]
pub use serving::{serve, tls_acceptor, TlsAcceptor};

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

/// The rustls server configuration for a TLS protocol (None in cleartext), from the PEM files netarena names in
/// `NETARENA_TLS_CERT` (the certificate chain) and `NETARENA_TLS_KEY` (the private key). TLS 1.3 and 1.2
/// (rustls' safe defaults). ALPN offers only the protocol the server was started for: `http/1.1` for h1-tls
/// (a client offering h2 beside it still gets HTTP/1.1), `h2` for h2; a client offering neither is refused
/// by rustls with the no_application_protocol alert, and one offering no ALPN at all gets the started protocol.
pub fn server_config(protocol: Protocol) -> Result<Option<ServerConfig>, String> {
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
    Ok(Some(config))
}
