//! HTTP on both engines, around the shared `Exchange`: on epoll, reads and writes for both load
//! models (the closed loop's `HttpProtocol`; the open loop's `open_io::EpollOpen` calls `flush` and
//! `read_responses` itself); on io_uring, the closed loop's `HttpParams` (the open loop's
//! `uring::open::UringOpen` drives the exchange itself, with the error classes of `read_failed` and
//! `write_failed` here).

use std::io::{self, Read, Write};
use std::time::Instant;

use mio::net::TcpStream;

use crate::config::{Coalesce, HttpConfig};
use crate::exchange::{Exchange, ExchangeConn, Outcome, Received};
use crate::http::SCRATCH_BYTES;
use crate::io::epoll::Protocol;
use crate::io::tls::{Records, TlsSession};
use crate::io::uring::closed::{SendBuf, UringProtocol};
use crate::io::uring::ring::HTTP_RECV_BUF_BYTES;
use crate::io::uring::window::{auto_window_us, WindowTrial, AUTO_SAMPLE};
use crate::io::worker::ConnRules;
use crate::stats::{ErrorClass, ThreadStats};
use crate::sys;

/// What is left to write of a connection's batch: bytes `off..len` of the exchange's `wire`; and
/// with https the connection's TLS session, which every byte goes through (`io::tls`).
#[derive(Default)]
pub(crate) struct WriteState {
    off: usize,
    len: usize,
    tls: Option<TlsSession>,
}

impl WriteState {
    /// A batch of `len` bytes (from `Exchange::start_batch` or `start_one`) is to be written.
    pub(crate) fn begin(&mut self, len: usize) {
        self.off = 0;
        self.len = len;
    }

    /// The socket is gone: nothing left to write, and its TLS session ends with it.
    pub(crate) fn clear(&mut self) {
        *self = WriteState::default();
    }

    /// https: start the connection's TLS session on first use. True: the connection is TLS.
    fn start_tls(&mut self, ex: &Exchange) -> Result<bool, Outcome> {
        if let (None, Some(settings)) = (&self.tls, ex.tls()) {
            self.tls = Some(TlsSession::start(settings)?);
        }
        Ok(self.tls.is_some())
    }
}

/// One connection's HTTP state in the closed loop on the epoll engine: its side of the exchange
/// and the batch being written.
pub struct HttpConn {
    ex: ExchangeConn,
    w: WriteState,
}

/// Per-thread read buffer for `read_responses`.
/// What a failed read of an HTTP connection is, on every engine and load model.
pub(crate) fn read_failed(e: &io::Error) -> Outcome {
    Outcome::Fail(ErrorClass::of_read_error(e), format!("read: {e}"))
}

/// What a failed write (or send) of an HTTP connection is, on every engine and load model.
pub(crate) fn write_failed(e: &io::Error) -> Outcome {
    Outcome::Fail(ErrorClass::of_write_error(e), format!("write: {e}"))
}

pub(crate) fn scratch_buffer() -> Vec<u8> {
    vec![0; SCRATCH_BYTES]
}

/// What is left to write on the connection: the rest of its batch (bytes `off..len` of the
/// exchange's `wire`), or with HTTP/2 its outbox (requests and the frames its receipts call for).
fn unsent<'a>(ex: &'a Exchange, c: &'a ExchangeConn, w: &WriteState) -> &'a [u8] {
    match c.h2() {
        Some(h2) => h2.unsent(),
        None => &ex.wire(c)[w.off..w.len],
    }
}

/// `n` bytes of `unsent` were written (or taken by the TLS session).
fn wrote(c: &mut ExchangeConn, w: &mut WriteState, n: usize) {
    match c.h2_mut() {
        Some(h2) => h2.wrote(n),
        None => w.off += n,
    }
}

/// Write as much of what the connection has to send as the socket takes (the rest on the next
/// writable edge). Both load models write this way on epoll, through the TLS session with https.
pub(crate) fn flush(
    ex: &Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut TcpStream,
    now: Instant,
    stats: &mut ThreadStats,
) -> Outcome {
    if let Err(out) = w.start_tls(ex) {
        return out;
    }
    if w.tls.is_some() {
        // `bytes_sent` counts the plaintext taken, as for http://, not the records' bytes.
        loop {
            let data = unsent(ex, c, w);
            let taken = if data.is_empty() {
                0
            } else {
                w.tls.as_mut().expect("a TLS session").write_plain(data)
            };
            wrote(c, w, taken);
            stats.sent(now, taken);
            match w.tls.as_mut().expect("a TLS session").send_records(sock) {
                Ok(true) => {}
                Ok(false) => return Outcome::Ok,
                Err(out) => return out,
            }
            // All sent; more plaintext only if the session took some this time (during the
            // handshake it holds what it took until the handshake completes).
            if unsent(ex, c, w).is_empty() || taken == 0 {
                return Outcome::Ok;
            }
        }
    }
    loop {
        let data = unsent(ex, c, w);
        if data.is_empty() {
            return Outcome::Ok;
        }
        match sock.write(data) {
            Ok(n) => {
                wrote(c, w, n);
                stats.sent(now, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Ok,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return write_failed(&e),
        }
    }
}

/// What `read_responses` calls each time the connection's batch is fully answered.
pub(crate) trait Answered:
    FnMut(
    &mut Exchange,
    &mut ExchangeConn,
    &mut WriteState,
    &mut TcpStream,
    Instant,
    &mut ThreadStats,
) -> Outcome
{
}

impl<F> Answered for F where
    F: FnMut(
        &mut Exchange,
        &mut ExchangeConn,
        &mut WriteState,
        &mut TcpStream,
        Instant,
        &mut ThreadStats,
    ) -> Outcome
{
}

/// Read what the socket holds and hand it to the exchange, until the receive queue is drained (or
/// the EOF is seen); with https, through the TLS session. `answered` runs each time the
/// connection's batch is fully answered: the closed loop sends the next one from there, the open
/// loop sends when its schedule says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_responses(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut TcpStream,
    scratch: &mut [u8],
    stats: &mut ThreadStats,
    peer_closed: bool,
    mut answered: impl Answered,
) -> Outcome {
    match w.start_tls(ex) {
        Err(out) => return out,
        Ok(true) => return read_tls_responses(ex, c, w, sock, scratch, stats, answered),
        Ok(false) => {}
    }
    loop {
        let n = match sock.read(scratch) {
            Ok(0) => return ex.on_eof(c, Instant::now(), stats),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Ok,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return read_failed(&e),
        };
        // One clock read per read() serves as the end of the responses in it and the start of
        // the requests sent in reply.
        let now = Instant::now();
        match ex.on_bytes(c, &scratch[..n], now, stats) {
            Received::Stop(out) => return out,
            Received::Ok { send_next: true } => match answered(ex, c, w, sock, now, stats) {
                Outcome::Ok => {}
                other => return other,
            },
            Received::Ok { send_next: false } => {}
        }
        // A short read drained the socket's receive queue: the next data raises a new edge, so
        // another read now would only return EAGAIN (epoll(7), "Questions and answers" 9).
        // A FIN already reported in this event raises no new edge: read on to see the EOF.
        if n < scratch.len() && !peer_closed {
            return Outcome::Ok;
        }
    }
}

/// `read_responses` over TLS: records from the socket, decrypted, and their plaintext to the
/// exchange, until the socket says EAGAIN (rustls reads in its own chunks, so a short read proves
/// nothing about the queue) or the peer closes.
fn read_tls_responses(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut TcpStream,
    scratch: &mut [u8],
    stats: &mut ThreadStats,
    mut answered: impl Answered,
) -> Outcome {
    loop {
        let now = Instant::now();
        let tls = w.tls.as_mut().expect("read_responses started the session");
        let got = match tls.receive_records(sock, now, stats) {
            Ok(got) => got,
            Err(out) => return out,
        };
        // What the records asked to send back (the handshake's last flight and the requests it
        // held, a key update) goes out now.
        match flush(ex, c, w, sock, now, stats) {
            Outcome::Ok => {}
            other => return other,
        }
        loop {
            let tls = w
                .tls
                .as_mut()
                .expect("the session lives as long as the socket");
            match tls.read_plain(scratch) {
                None => break,
                Some(0) => return ex.on_eof(c, now, stats),
                Some(n) => match ex.on_bytes(c, &scratch[..n], now, stats) {
                    Received::Stop(out) => return out,
                    Received::Ok { send_next: true } => {
                        match answered(ex, c, w, sock, now, stats) {
                            Outcome::Ok => {}
                            other => return other,
                        }
                    }
                    Received::Ok { send_next: false } => {}
                },
            }
        }
        match got {
            Records::Read => {}
            Records::Drained => return Outcome::Ok,
            Records::Eof => return ex.on_eof(c, now, stats),
        }
    }
}

/// The epoll engine's closed-loop HTTP protocol: the next batch goes out as soon as the previous
/// one is answered.
pub struct HttpProtocol {
    ex: Exchange,
    scratch: Vec<u8>,
}

impl HttpProtocol {
    pub fn new(ex: Exchange) -> Self {
        HttpProtocol {
            ex,
            scratch: scratch_buffer(),
        }
    }
}

/// Start the next batch (if `--requests` leaves one) and write as much of it as the socket takes.
fn send_next_batch(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut TcpStream,
    now: Instant,
    stats: &mut ThreadStats,
) -> Outcome {
    let Some(len) = ex.start_batch(c, now, stats) else {
        return Outcome::Ok;
    };
    w.begin(len);
    flush(ex, c, w, sock, now, stats)
}

impl ConnRules for HttpProtocol {
    type Conn = HttpConn;

    fn new_conn(&self, _index: usize) -> HttpConn {
        HttpConn {
            ex: self.ex.new_conn(),
            w: WriteState::default(),
        }
    }

    fn nodelay(&self) -> bool {
        // With --close each connection carries one small write, which Nagle never delays; skipping
        // the setsockopt saves a syscall per request.
        !self.ex.close_each()
    }

    fn replace_failed(&self) -> bool {
        true
    }

    fn reset(&mut self, c: &mut HttpConn) {
        self.ex.reset(&mut c.ex);
        c.w.clear();
    }

    fn busy_since(&self, c: &HttpConn) -> Option<Instant> {
        self.ex.busy_since(&c.ex)
    }

    fn thread_done(&self, stats: &ThreadStats) -> bool {
        stats.quota_reached()
    }

    fn end_of_phase(&self, c: &HttpConn, connecting: bool, end: Instant, stats: &mut ThreadStats) {
        self.ex.end_of_phase(&c.ex, connecting, end, stats);
    }
}

impl Protocol for HttpProtocol {
    fn on_connected(
        &mut self,
        c: &mut HttpConn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        send_next_batch(&mut self.ex, &mut c.ex, &mut c.w, sock, now, stats)
    }

    fn on_writable(
        &mut self,
        c: &mut HttpConn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        flush(&self.ex, &mut c.ex, &mut c.w, sock, now, stats)
    }

    fn on_readable(
        &mut self,
        c: &mut HttpConn,
        sock: &mut TcpStream,
        _now: Instant,
        stats: &mut ThreadStats,
        peer_closed: bool,
    ) -> Outcome {
        read_responses(
            &mut self.ex,
            &mut c.ex,
            &mut c.w,
            sock,
            &mut self.scratch,
            stats,
            peer_closed,
            send_next_batch,
        )
    }
}

/// HTTP on io_uring's closed loop: the exchange (shared with the epoll engine) and that engine's
/// own setting.
pub struct HttpParams {
    ex: Exchange,
    coalesce: Coalesce,
    /// `--coalesce-us auto`: the current window (µs), starting at 0 until latencies are known.
    auto_window_us: u32,
    /// `--coalesce-us auto`: whether the window is used at all, tried against none by CPU time.
    trial: WindowTrial,
}

impl HttpParams {
    pub fn new(h: &HttpConfig, coalesce: Coalesce, thread_index: usize) -> HttpParams {
        HttpParams {
            ex: Exchange::for_config(h, thread_index),
            coalesce,
            auto_window_us: 0,
            trial: WindowTrial::default(),
        }
    }
}

impl ConnRules for HttpParams {
    type Conn = ExchangeConn;

    fn new_conn(&self, _index: usize) -> ExchangeConn {
        self.ex.new_conn()
    }

    fn nodelay(&self) -> bool {
        !self.ex.close_each()
    }

    fn replace_failed(&self) -> bool {
        true
    }

    fn reset(&mut self, c: &mut ExchangeConn) {
        self.ex.reset(c);
    }

    fn busy_since(&self, c: &ExchangeConn) -> Option<Instant> {
        self.ex.busy_since(c)
    }

    fn thread_done(&self, stats: &ThreadStats) -> bool {
        stats.quota_reached()
    }

    fn end_of_phase(
        &self,
        c: &ExchangeConn,
        connecting: bool,
        end: Instant,
        stats: &mut ThreadStats,
    ) {
        self.ex.end_of_phase(c, connecting, end, stats);
    }
}

impl UringProtocol for HttpParams {
    const RECV_BUF_BYTES: usize = HTTP_RECV_BUF_BYTES;

    fn sending(&self, c: &ExchangeConn) -> bool {
        self.ex.inflight(c) > 0
    }

    fn on_connected(
        &mut self,
        _c: &mut ExchangeConn,
        _now: Instant,
        _s: &mut ThreadStats,
    ) -> Received {
        Received::Ok { send_next: true }
    }

    fn on_bytes(
        &mut self,
        c: &mut ExchangeConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        self.ex.on_bytes(c, data, now, stats)
    }

    fn on_eof(&mut self, c: &mut ExchangeConn, now: Instant, stats: &mut ThreadStats) -> Outcome {
        self.ex.on_eof(c, now, stats)
    }

    fn read_failed(&self, e: &io::Error) -> Outcome {
        read_failed(e)
    }

    fn write_failed(&self, e: &io::Error) -> Outcome {
        write_failed(e)
    }

    /// The next batch of requests, if the `--requests` quota allows. The wire bytes stay where they
    /// are for the whole run (in the exchange, or in the connection's batch buffer, never
    /// reallocated).
    fn next_send(
        &mut self,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf> {
        let len = self.ex.start_batch(c, now, stats)?;
        stats.sent(now, len);
        Some(SendBuf::of(&self.ex.wire(c)[..len], false))
    }

    fn batch_wait(&mut self, now: Instant) -> (u32, usize) {
        let window_us = match self.coalesce {
            Coalesce::Off => 0,
            Coalesce::Fixed(us) => us,
            Coalesce::Auto => {
                if let Some(fastest) = self.ex.take_fastest_recent(AUTO_SAMPLE) {
                    self.auto_window_us = auto_window_us(fastest);
                }
                let completed = self.ex.completed_total();
                if self.trial.window_on(now, completed, sys::thread_cpu_time) {
                    self.auto_window_us
                } else {
                    0
                }
            }
        };
        // Half of what is in flight.
        (window_us, (self.ex.inflight_total() as usize / 2).max(1))
    }
}
