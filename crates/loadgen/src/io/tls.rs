//! The TLS layer of an https connection: one rustls `ClientConnection` between the connection's
//! bytes and the exchange, which sees only plaintext. rustls does no I/O of its own, so this is where
//! its records meet whatever moves them: `http::flush` and the TLS read path of `http` go through
//! here for every load model (the closed loop, the open loop, `--conn-rate`) on both engines. On
//! epoll the records are read from and written to the socket; on io_uring they are read from what a
//! receive completion brought and written to the connection's send stage (`uring::stage`), which
//! looks to this code like a socket that is full while a send is in flight.
//!
//! The session starts with the connection's first write or read (not at the connect): the first
//! request is handed to rustls at once, held until the handshake completes and sent right after it,
//! so that request's latency includes the handshake, as a client's first request does.

use std::io::{self, Read, Write};
use std::time::Instant;

use rustls::{ClientConnection, HandshakeKind};

use crate::exchange::Outcome;
use crate::stats::{ErrorClass, ThreadStats};
use crate::tls::{self, TlsSettings};

/// One connection's TLS session.
pub(crate) struct TlsSession {
    conn: ClientConnection,
    /// The handshake's completion has been counted (`ThreadStats::tls_handshake`).
    counted: bool,
    /// `--h2`: the server must choose h2 by ALPN.
    needs_h2: bool,
}

/// What the socket had for the session.
pub(crate) enum Records {
    /// Records were read and decrypted: take the plaintext with `read_plain`.
    Read,
    /// Nothing more now (EAGAIN).
    Drained,
    /// The peer closed the connection (after the plaintext before it is taken).
    Eof,
}

impl TlsSession {
    pub(crate) fn start(s: &TlsSettings) -> Result<TlsSession, Outcome> {
        ClientConnection::new(s.config.clone(), s.server_name.clone())
            .map(|conn| TlsSession {
                conn,
                counted: false,
                needs_h2: s.alpn == tls::ALPN_H2,
            })
            .map_err(|e| Outcome::Fail(ErrorClass::TlsHandshake, format!("TLS: {e}")))
    }

    /// Hand plaintext to the session; returns how much it took (0: its buffer is full until the
    /// records are sent). Before the handshake completes rustls holds it and sends it right after.
    pub(crate) fn write_plain(&mut self, data: &[u8]) -> usize {
        // rustls' writer only refuses what exceeds its buffer limit, by taking less.
        self.conn.writer().write(data).unwrap_or(0)
    }

    /// Write the records waiting (handshake messages, encrypted requests, alerts) to the socket.
    /// `Ok(true)`: all written; `Ok(false)`: the socket is full (epoll: the writable edge resumes;
    /// io_uring: the completion of the send in flight).
    pub(crate) fn send_records<W: Write>(&mut self, sock: &mut W) -> Result<bool, Outcome> {
        while self.conn.wants_write() {
            match self.conn.write_tls(sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(self.socket_failed(super::http::write_failed(&e), &e, "write"))
                }
            }
        }
        Ok(true)
    }

    /// Read what the socket holds (at most one buffer's worth of records: rustls refuses more until
    /// the plaintext is taken) and decrypt it. A handshake that completes here is counted.
    pub(crate) fn receive_records<S: Read + Write>(
        &mut self,
        sock: &mut S,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Result<Records, Outcome> {
        let got = loop {
            match self.conn.read_tls(sock) {
                Ok(0) => break Records::Eof,
                Ok(_) => break Records::Read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Records::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.socket_failed(super::http::read_failed(&e), &e, "read")),
            }
        };
        if let Err(e) = self.conn.process_new_packets() {
            let class = if self.conn.is_handshaking() {
                tls::error_class(&e)
            } else {
                ErrorClass::ReadError
            };
            // The alert rustls queued tells the server why; best effort, the connection is done (on
            // io_uring it only reaches the stage, which the close discards).
            let _ = self.conn.write_tls(sock);
            return Err(Outcome::Fail(class, format!("TLS: {e}")));
        }
        if !self.counted && !self.conn.is_handshaking() {
            self.counted = true;
            stats.tls_handshake(
                now,
                self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
                self.conn.protocol_version().and_then(|v| v.as_str()),
                self.conn
                    .negotiated_cipher_suite()
                    .and_then(|s| s.suite().as_str()),
                self.conn.alpn_protocol(),
            );
            if self.needs_h2 && self.conn.alpn_protocol() != Some(tls::ALPN_H2) {
                return Err(Outcome::Fail(
                    ErrorClass::TlsHandshake,
                    "the server did not choose h2 by ALPN (it speaks no HTTP/2 over TLS, or not on this port)".into(),
                ));
            }
        }
        if matches!(got, Records::Eof) && self.conn.is_handshaking() {
            return Err(Outcome::Fail(
                ErrorClass::TlsHandshake,
                "the server closed the connection during the TLS handshake".into(),
            ));
        }
        Ok(got)
    }

    /// The decrypted plaintext: `Some(n)` bytes into `buf`, `Some(0)` the peer ended the session
    /// (close_notify, or a close without it once the plaintext is taken), None: nothing more now.
    pub(crate) fn read_plain(&mut self, buf: &mut [u8]) -> Option<usize> {
        match self.conn.reader().read(buf) {
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            // UnexpectedEof: the peer closed the TCP connection without close_notify, as HTTP/1.1
            // servers that close after a response often do; the exchange judges that EOF.
            Err(_) => Some(0),
        }
    }

    /// A socket error: during the handshake it is the handshake's failure (the server reset or
    /// refused the session), after it the plain read or write failure. io_uring's failed
    /// completions come here too (`http::WriteState::read_error`, `write_error`).
    pub(crate) fn socket_failed(
        &self,
        after_handshake: Outcome,
        e: &io::Error,
        op: &str,
    ) -> Outcome {
        if self.conn.is_handshaking() {
            Outcome::Fail(
                ErrorClass::TlsHandshake,
                format!("{op} during the TLS handshake: {e}"),
            )
        } else {
            after_handshake
        }
    }
}
