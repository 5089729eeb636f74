//! HTTP on both engines, around the shared `Exchange`: on epoll, reads and writes for both load
//! models (the closed loop's `HttpProtocol`; the open loop's `open_io::EpollOpen` calls `flush` and
//! `read_responses` itself); on io_uring, the closed loop's `HttpParams` (the open loop's
//! `uring::open::UringOpen` drives the exchange itself, with `flush`, `receive_staged` and the error
//! classes of `WriteState::read_error` and `write_error` here).
//!
//! https (`io::tls`) and HTTP/2 go through the same code on both engines: `flush` hands what the
//! connection has to send to its TLS session (or writes it as it is) and the TLS read path
//! (`read_tls_responses`) turns records into plaintext for the exchange. Both are written against
//! `Read`/`Write`: on epoll that is the socket, on io_uring a receive completion's bytes and the
//! connection's send stage (`uring::stage`, `receive_staged`). Plain HTTP/1.1 on io_uring needs no
//! stage: its sends point at the exchange's request bytes, which stay in place.

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
use crate::io::uring::stage::{Arrived, SendStage, StagedIo};
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

    /// What a failed read of this connection is (io_uring's failed receive): during a TLS
    /// handshake the handshake's failure, as on epoll, else `read_failed`.
    pub(crate) fn read_error(&self, e: &io::Error) -> Outcome {
        match &self.tls {
            Some(tls) => tls.socket_failed(read_failed(e), e, "read"),
            None => read_failed(e),
        }
    }

    /// What a failed write of this connection is (io_uring's failed send), as `read_error`.
    pub(crate) fn write_error(&self, e: &io::Error) -> Outcome {
        match &self.tls {
            Some(tls) => tls.socket_failed(write_failed(e), e, "write"),
            None => write_failed(e),
        }
    }
}

/// Whether io_uring stages this connection's sends (`uring::stage`): with https (TLS records) or
/// HTTP/2 (its frames), the bytes that go out are not the exchange's request bytes, which stay in
/// place for a send to point at.
pub(crate) fn needs_stage(ex: &Exchange, c: &ExchangeConn) -> bool {
    ex.tls().is_some() || c.h2().is_some()
}

/// One connection's HTTP state in the closed loop on the epoll engine: its side of the exchange
/// and the batch being written.
pub struct HttpConn {
    ex: ExchangeConn,
    w: WriteState,
}

/// What a failed read of an HTTP connection is, on every engine and load model.
pub(crate) fn read_failed(e: &io::Error) -> Outcome {
    Outcome::Fail(ErrorClass::of_read_error(e), format!("read: {e}"))
}

/// What a failed write (or send) of an HTTP connection is, on every engine and load model.
pub(crate) fn write_failed(e: &io::Error) -> Outcome {
    Outcome::Fail(ErrorClass::of_write_error(e), format!("write: {e}"))
}

/// Per-thread read buffer for `read_responses` (and the plaintext of TLS records on both engines).
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

/// Write as much of what the connection has to send as the socket takes (the rest when it takes
/// more: epoll's next writable edge, io_uring's completion of the send in flight). Both load models
/// write this way on both engines (epoll: to the socket; io_uring: to the send stage), through the
/// TLS session with https.
pub(crate) fn flush<S: Write>(
    ex: &Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut S,
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

/// What `read_responses` (and the TLS read path) calls each time the connection's batch is fully
/// answered, with what the connection writes to (`S`: the socket on epoll, the stage on io_uring).
pub(crate) trait Answered<S>:
    FnMut(
    &mut Exchange,
    &mut ExchangeConn,
    &mut WriteState,
    &mut S,
    Instant,
    &mut ThreadStats,
) -> Outcome
{
}

impl<S, F> Answered<S> for F where
    F: FnMut(
        &mut Exchange,
        &mut ExchangeConn,
        &mut WriteState,
        &mut S,
        Instant,
        &mut ThreadStats,
    ) -> Outcome
{
}

/// The open loop's `Answered` on both engines: sending waits for the schedule, an answered request
/// only frees the connection. HTTP/2 alone has something to write at once: the frames its receipts
/// call for (SETTINGS and PING acknowledgements, window updates).
pub(crate) fn send_frames_owed<S: Write>(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut S,
    now: Instant,
    stats: &mut ThreadStats,
) -> Outcome {
    if c.h2().is_some() {
        flush(ex, c, w, sock, now, stats)
    } else {
        Outcome::Ok
    }
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
    mut answered: impl Answered<TcpStream>,
) -> Outcome {
    match w.start_tls(ex) {
        Err(out) => return out,
        Ok(true) => return read_tls_responses(ex, c, w, sock, scratch, stats, None, answered),
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

/// What one io_uring receive brought (`arrived`: its bytes, or the peer's EOF) to the exchange, on
/// a connection whose sends are staged (`needs_stage`): through the TLS session with https (the
/// same read path as epoll's), as they are with h2c. What the connection has to send then (the
/// handshake's next flight, requests, HTTP/2's replies) is staged in `stage`; `answered` as in
/// `read_responses`. `now`: when the completion batch was reaped, the time of every byte in it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn receive_staged<'a>(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    stage: &'a mut SendStage,
    arrived: Arrived<'a>,
    now: Instant,
    scratch: &mut [u8],
    stats: &mut ThreadStats,
    mut answered: impl Answered<StagedIo<'a>>,
) -> Outcome {
    let tls = match w.start_tls(ex) {
        Err(out) => return out,
        Ok(tls) => tls,
    };
    let mut io = StagedIo { arrived, stage };
    if tls {
        return read_tls_responses(ex, c, w, &mut io, scratch, stats, Some(now), answered);
    }
    let Arrived::Bytes(data) = arrived else {
        return ex.on_eof(c, now, stats);
    };
    match ex.on_bytes(c, data, now, stats) {
        Received::Stop(out) => out,
        Received::Ok { send_next: true } => answered(ex, c, w, &mut io, now, stats),
        Received::Ok { send_next: false } => Outcome::Ok,
    }
}

/// `read_responses` over TLS, on both engines: records from the socket, decrypted, and their
/// plaintext to the exchange, until the socket says EAGAIN (rustls reads in its own chunks, so a
/// short read proves nothing about the queue) or the peer closes. `reaped_at`: io_uring's time of
/// the bytes (its completion batch's); None on epoll, where each read is timed when it returns.
#[allow(clippy::too_many_arguments)]
fn read_tls_responses<S: Read + Write>(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut S,
    scratch: &mut [u8],
    stats: &mut ThreadStats,
    reaped_at: Option<Instant>,
    mut answered: impl Answered<S>,
) -> Outcome {
    loop {
        let now = reaped_at.unwrap_or_else(Instant::now);
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

/// Start the next batch (if `--requests` leaves one) and write as much of it as the socket takes:
/// the closed loop's `Answered` on both engines.
fn send_next_batch<S: Write>(
    ex: &mut Exchange,
    c: &mut ExchangeConn,
    w: &mut WriteState,
    sock: &mut S,
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
    /// https: the plaintext of the records a receive brought (empty without TLS).
    scratch: Vec<u8>,
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
            scratch: if h.tls.is_some() {
                scratch_buffer()
            } else {
                Vec::new()
            },
            coalesce,
            auto_window_us: 0,
            trial: WindowTrial::default(),
        }
    }
}

/// One connection of io_uring's closed loop: its side of the exchange and, with https or `--h2`,
/// what the epoll engine's `HttpConn` holds (the batch being written, the TLS session) and the
/// stage its sends go out from.
pub struct UringHttpConn {
    ex: ExchangeConn,
    w: WriteState,
    stage: SendStage,
}

/// What the engine does after a staged connection's bytes were handled: send what they staged,
/// unless they ended the connection.
fn staged_received(out: Outcome, stage: &SendStage) -> Received {
    match out {
        Outcome::Ok => Received::Ok {
            send_next: stage.ready(),
        },
        other => Received::Stop(other),
    }
}

impl ConnRules for HttpParams {
    type Conn = UringHttpConn;

    fn new_conn(&self, _index: usize) -> UringHttpConn {
        UringHttpConn {
            ex: self.ex.new_conn(),
            w: WriteState::default(),
            stage: SendStage::default(),
        }
    }

    fn nodelay(&self) -> bool {
        !self.ex.close_each()
    }

    fn replace_failed(&self) -> bool {
        true
    }

    fn reset(&mut self, c: &mut UringHttpConn) {
        self.ex.reset(&mut c.ex);
        c.w.clear();
        c.stage.clear();
    }

    fn busy_since(&self, c: &UringHttpConn) -> Option<Instant> {
        self.ex.busy_since(&c.ex)
    }

    fn thread_done(&self, stats: &ThreadStats) -> bool {
        stats.quota_reached()
    }

    fn end_of_phase(
        &self,
        c: &UringHttpConn,
        connecting: bool,
        end: Instant,
        stats: &mut ThreadStats,
    ) {
        self.ex.end_of_phase(&c.ex, connecting, end, stats);
    }
}

/// Plain HTTP/1.1 sends the exchange's request bytes as they are, one batch per send, whose
/// success completes nothing. With https or `--h2` (`needs_stage`) the connection's bytes go through
/// the epoll engine's code (`send_next_batch`, `flush`, `receive_staged`) into its stage, which
/// sends them one send at a time, each completing (`on_sent`) so that what was staged meanwhile
/// follows.
impl UringProtocol for HttpParams {
    const RECV_BUF_BYTES: usize = HTTP_RECV_BUF_BYTES;

    fn sending(&self, c: &UringHttpConn) -> bool {
        self.ex.inflight(&c.ex) > 0 || c.stage.busy()
    }

    /// With https the first batch goes to the TLS session at once (sent when the handshake is
    /// done, as on epoll), so the stage holds the ClientHello; with h2c the preface and the
    /// first streams.
    fn on_connected(
        &mut self,
        c: &mut UringHttpConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        if !needs_stage(&self.ex, &c.ex) {
            return Received::Ok { send_next: true };
        }
        let out = send_next_batch(&mut self.ex, &mut c.ex, &mut c.w, &mut c.stage, now, stats);
        staged_received(out, &c.stage)
    }

    fn on_bytes(
        &mut self,
        c: &mut UringHttpConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        if !needs_stage(&self.ex, &c.ex) {
            return self.ex.on_bytes(&mut c.ex, data, now, stats);
        }
        let out = receive_staged(
            &mut self.ex,
            &mut c.ex,
            &mut c.w,
            &mut c.stage,
            Arrived::Bytes(data),
            now,
            &mut self.scratch,
            stats,
            send_next_batch,
        );
        staged_received(out, &c.stage)
    }

    fn on_eof(&mut self, c: &mut UringHttpConn, now: Instant, stats: &mut ThreadStats) -> Outcome {
        if !needs_stage(&self.ex, &c.ex) {
            return self.ex.on_eof(&mut c.ex, now, stats);
        }
        receive_staged(
            &mut self.ex,
            &mut c.ex,
            &mut c.w,
            &mut c.stage,
            Arrived::Eof,
            now,
            &mut self.scratch,
            stats,
            send_next_batch,
        )
    }

    /// Only a staged send asks for its completion: what was staged while it was in flight goes
    /// now.
    fn on_sent(
        &mut self,
        c: &mut UringHttpConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        c.stage.sent();
        let out = flush(&self.ex, &mut c.ex, &mut c.w, &mut c.stage, now, stats);
        staged_received(out, &c.stage)
    }

    fn read_failed(&self, c: &UringHttpConn, e: &io::Error) -> Outcome {
        c.w.read_error(e)
    }

    fn write_failed(&self, c: &UringHttpConn, e: &io::Error) -> Outcome {
        c.w.write_error(e)
    }

    /// Plain HTTP/1.1: the next batch of requests, if the `--requests` quota allows. The wire bytes
    /// stay where they are for the whole run (in the exchange, or in the connection's batch
    /// buffer, never reallocated). Staged: what the stage holds, if no send of it is in flight.
    fn next_send(
        &mut self,
        c: &mut UringHttpConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf> {
        if needs_stage(&self.ex, &c.ex) {
            return c.stage.take();
        }
        let len = self.ex.start_batch(&mut c.ex, now, stats)?;
        stats.sent(now, len);
        Some(SendBuf::of(&self.ex.wire(&c.ex)[..len], false))
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
