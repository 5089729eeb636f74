//! TCP echo flood: each connection writes chunks of a deterministic pattern and checks every echoed
//! byte against it; a chunk's round trip (first byte written → last byte echoed) is its latency.
//!
//! The pattern has period `PATTERN_PERIOD` (a prime, so it never lines up with power-of-two chunk
//! or buffer sizes) and never contains zero; connection k starts at phase k·`PHASE_STEP` mod the
//! period, so a server that mixes up two connections' streams is caught too. Expected bytes for any
//! offset are a slice of one prebuilt buffer (`Pattern`); checks compare whole periods in registers
//! (`Pattern::check`).
//!
//! The flood's rules (`Echo`: what to send, how echoed bytes are judged and counted) serve both
//! engines; `EchoProtocol` drives them on epoll and `impl UringProtocol for Echo` (below) on
//! io_uring. Both send the
//! pattern's slices as they are, with a copying send (why not spliced: `EchoProtocol`).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;

use crate::exchange::{Outcome, Received};
use crate::histogram;
use crate::io::epoll::Protocol;
use crate::io::page::PageBuf;
use crate::io::uring::closed::{SendBuf, UringProtocol};
use crate::io::worker::ConnRules;
use crate::stats::{self, ErrorClass, ThreadStats};

pub const PATTERN_PERIOD: usize = 251;
const PHASE_STEP: usize = 97;
/// Largest slice handed to one write() or compared at once; the pattern buffer is this much longer
/// than its aligned starts (below) so any (phase, length ≤ SLICE_BYTES) is a contiguous slice.
pub(crate) const SLICE_BYTES: usize = 64 * 1024;
/// Bytes each probe sends (seed 000's "client delay": a fresh connection echoing 32 KiB).
pub const PROBE_BYTES: usize = 32 * 1024;
/// Every slice `Pattern::slice` returns starts at a multiple of this many bytes from the page-aligned
/// start of the pattern: a cache line.
const SLICE_ALIGN: usize = 64;
/// SLICE_ALIGN⁻¹ mod PATTERN_PERIOD: phase s is found at buffer position SLICE_ALIGN·(s·ALIGN_INV mod
/// PATTERN_PERIOD), the multiple of SLICE_ALIGN that is ≡ s (mod PATTERN_PERIOD).
const ALIGN_INV: usize = 51;
const _: () = assert!(SLICE_ALIGN * ALIGN_INV % PATTERN_PERIOD == 1);

/// The repeating pattern, laid out so that every slice starts cache-line aligned.
///
/// Why aligned: the kernel copies a send()'s bytes with `rep movsb`, which on this class of CPU (AMD
/// EPYC with FSRM) runs up to 20x slower when the destination is 1..31 bytes past the source modulo
/// 4096, and noticeably slower whenever the two are not 32-byte aligned to each other. A send copies
/// from this buffer into page-fragment memory whose offsets are normally aligned, so a slice starting
/// at an arbitrary phase (0..250 bytes into one period) made a share of all sends hit the slow case.
/// With each phase's slice on a 64-byte boundary the copy is as fast as from any aligned buffer. The
/// receive buffer (`EchoProtocol::scratch`) is page-aligned for the same reason (recv copies into it).
pub struct Pattern {
    /// Phase 0 is at its first byte, on a page boundary.
    buf: PageBuf,
}

impl Default for Pattern {
    fn default() -> Self {
        Self::new()
    }
}

impl Pattern {
    pub fn new() -> Self {
        let mut buf = PageBuf::zeroed(SLICE_ALIGN * PATTERN_PERIOD + SLICE_BYTES);
        for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
            *b = (i % PATTERN_PERIOD) as u8 + 1;
        }
        Pattern { buf }
    }

    /// The process's pattern, built once and shared by every thread and run. Sends point straight
    /// into it (an io_uring SQE too, until the kernel has copied the bytes), so it must outlive
    /// every queued send; never freeing it makes that hold without bookkeeping.
    pub fn shared() -> &'static Pattern {
        static SHARED: OnceLock<Pattern> = OnceLock::new();
        SHARED.get_or_init(Pattern::new)
    }

    pub fn phase(conn_index: usize) -> usize {
        conn_index.wrapping_mul(PHASE_STEP) % PATTERN_PERIOD
    }

    /// The bytes connection-phase `phase` has at stream offset `offset`, at most SLICE_BYTES long,
    /// starting on a cache-line boundary.
    #[inline]
    pub fn slice(&self, phase: usize, offset: u64, len: usize) -> &[u8] {
        let s = (phase + (offset % PATTERN_PERIOD as u64) as usize) % PATTERN_PERIOD;
        let start = SLICE_ALIGN * (s * ALIGN_INV % PATTERN_PERIOD);
        &self.buf.as_slice()[start..start + len.min(SLICE_BYTES)]
    }

    /// Compare `data` with the stream at `offset`; Err(position of the first wrong byte in data).
    ///
    /// Whole periods are compared 32 bytes at a time against one period of expected bytes held in
    /// registers (AVX2, when the CPU has it): one load per 32 bytes instead of memcmp's two, and no
    /// second buffer streaming through the cache. What is left, and a period in which a difference
    /// was seen, is compared slice by slice (memcmp), which also finds the exact position.
    pub fn check(&self, phase: usize, offset: u64, data: &[u8]) -> Result<(), usize> {
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if data.len() >= avx2::MIN_LEN && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            done =
                unsafe { avx2::matching_periods(self.slice(phase, offset, PATTERN_PERIOD), data) };
        }
        self.check_slices(phase, offset, data, done)
    }

    /// `check` from `data[done..]` on, by plain slice comparison.
    fn check_slices(
        &self,
        phase: usize,
        offset: u64,
        data: &[u8],
        mut done: usize,
    ) -> Result<(), usize> {
        while done < data.len() {
            let expected = self.slice(phase, offset + done as u64, data.len() - done);
            let got = &data[done..done + expected.len()];
            if got != expected {
                let bad = got
                    .iter()
                    .zip(expected)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(done + bad);
            }
            done += expected.len();
        }
        Ok(())
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::PATTERN_PERIOD as P;

    /// Below this, memcmp is as quick and the set-up is not worth it.
    pub const MIN_LEN: usize = 2 * P;

    /// How many leading bytes of `data`, in whole periods, equal `period` repeated (`period`: the
    /// expected first PATTERN_PERIOD bytes of `data`, at least that long). Stops at the start of the
    /// first period that differs anywhere.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn matching_periods(period: &[u8], data: &[u8]) -> usize {
        assert!(period.len() >= P);
        // One period is 7 whole vectors and a last one overlapping the 7th: 0, 32, .., 192, P - 32.
        let at = |buf: &[u8], i: usize| -> __m256i {
            debug_assert!(i + 32 <= buf.len());
            // SAFETY: in bounds (every call keeps i + 32 <= buf.len()); unaligned load.
            unsafe { _mm256_loadu_si256(buf.as_ptr().add(i).cast()) }
        };
        let e = [
            at(period, 0),
            at(period, 32),
            at(period, 64),
            at(period, 96),
            at(period, 128),
            at(period, 160),
            at(period, 192),
            at(period, P - 32),
        ];
        let mut o = 0;
        while o + P <= data.len() {
            let d = &data[o..o + P];
            let x0 = _mm256_xor_si256(at(d, 0), e[0]);
            let x1 = _mm256_xor_si256(at(d, 32), e[1]);
            let x2 = _mm256_xor_si256(at(d, 64), e[2]);
            let x3 = _mm256_xor_si256(at(d, 96), e[3]);
            let x4 = _mm256_xor_si256(at(d, 128), e[4]);
            let x5 = _mm256_xor_si256(at(d, 160), e[5]);
            let x6 = _mm256_xor_si256(at(d, 192), e[6]);
            let x7 = _mm256_xor_si256(at(d, P - 32), e[7]);
            let a = _mm256_or_si256(_mm256_or_si256(x0, x1), _mm256_or_si256(x2, x3));
            let b = _mm256_or_si256(_mm256_or_si256(x4, x5), _mm256_or_si256(x6, x7));
            let any = _mm256_or_si256(a, b);
            if _mm256_testz_si256(any, any) == 0 {
                break;
            }
            o += P;
        }
        o
    }
}

pub struct EchoConn {
    phase: usize,
    index: usize,
    sent: u64,
    verified: u64,
    chunk_end: u64,
    chunk_started: Instant,
    /// A chunk was echoed completely on this connection slot during the measured phase.
    answered: bool,
}

/// The echo flood's rules, whatever engine moves the bytes (epoll: `EchoProtocol` below; io_uring:
/// `impl UringProtocol for Echo` below): what a connection sends next, how echoed bytes are judged and counted, when a
/// connection is done, and what a failed or unfinished one counts as. The engines only read and
/// write.
pub struct Echo {
    pattern: &'static Pattern,
    /// None: `--duration` mode, connections flood until the end.
    bytes_per_connection: Option<u64>,
    chunk_bytes: u64,
}

impl Echo {
    pub fn new(bytes_per_connection: Option<u64>, chunk_bytes: u64) -> Self {
        Echo {
            pattern: Pattern::shared(),
            bytes_per_connection,
            chunk_bytes,
        }
    }

    /// The connection is open: its first chunk is due (`send_next`), unless it has nothing to send.
    pub(crate) fn on_connected(&self, c: &mut EchoConn, now: Instant) -> Received {
        if self.bytes_per_connection == Some(0) {
            return Received::Stop(Outcome::Finished);
        }
        self.begin_chunk(c, now);
        Received::Ok { send_next: true }
    }

    /// The next chunk: `--chunk` bytes, or what `--bytes` leaves; its latency starts now.
    fn begin_chunk(&self, c: &mut EchoConn, now: Instant) {
        let left = self.bytes_per_connection.map_or(u64::MAX, |b| b - c.sent);
        c.chunk_end = c.sent + self.chunk_bytes.min(left);
        c.chunk_started = now;
    }

    /// The current chunk's bytes not handed to the socket yet, at most SLICE_BYTES of them (a
    /// `'static` slice of the shared pattern: an engine may send from it without copying it); None
    /// once the whole chunk is sent.
    pub(crate) fn unsent(&self, c: &EchoConn) -> Option<&'static [u8]> {
        let left = c.chunk_end.checked_sub(c.sent).filter(|&n| n > 0)?;
        let want = left.min(SLICE_BYTES as u64) as usize;
        Some(self.pattern.slice(c.phase, c.sent, want))
    }

    /// The socket took the first `n` bytes of `unsent`.
    pub(crate) fn sent(&self, c: &mut EchoConn, n: usize, now: Instant, stats: &mut ThreadStats) {
        c.sent += n as u64;
        stats.sent(now, n);
    }

    /// Judge echoed bytes: each must be the pattern byte at its offset of this connection's stream,
    /// and none may come before it was sent. A chunk fully echoed is one response (its latency:
    /// first byte sent to last byte echoed); then the connection is done (`--bytes`) or its next
    /// chunk begins (`send_next`).
    pub(crate) fn on_bytes(
        &self,
        c: &mut EchoConn,
        got: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        let n = got.len() as u64;
        stats.received(now, got.len());
        if c.verified + n > c.sent {
            return Received::Stop(Outcome::Fail(
                ErrorClass::VerificationMismatch,
                format!(
                    "echo connection {}: received {} bytes but only {} were sent",
                    c.index,
                    c.verified + n,
                    c.sent
                ),
            ));
        }
        if let Err(at) = self.pattern.check(c.phase, c.verified, got) {
            let offset = c.verified + at as u64;
            return Received::Stop(Outcome::Fail(
                ErrorClass::VerificationMismatch,
                format!(
                    "echo connection {}: byte {offset} is 0x{:02x}, expected 0x{:02x}",
                    c.index,
                    got[at],
                    self.pattern.slice(c.phase, offset, 1)[0]
                ),
            ));
        }
        c.verified += n;
        if stats.counting(now) {
            stats.verified_bytes += n;
        }
        if c.verified < c.chunk_end {
            return Received::Ok { send_next: false };
        }
        c.answered |= stats.response(now, now - c.chunk_started, true);
        if self.bytes_per_connection == Some(c.verified) {
            return Received::Stop(Outcome::Finished);
        }
        self.begin_chunk(c, now);
        Received::Ok { send_next: true }
    }

    /// The server closed the connection: an echo never ends on the server's initiative.
    pub(crate) fn on_eof(&self, c: &EchoConn) -> Outcome {
        Outcome::Fail(
            ErrorClass::ClosedEarly,
            format!(
                "echo connection {}: closed by the server after {} of {} bytes echoed",
                c.index, c.verified, c.sent
            ),
        )
    }

    pub(crate) fn read_failed(&self, e: &io::Error) -> Outcome {
        Outcome::Fail(ErrorClass::of_read_error(e), format!("echo read: {e}"))
    }

    pub(crate) fn write_failed(&self, e: &io::Error) -> Outcome {
        Outcome::Fail(ErrorClass::of_write_error(e), format!("echo write: {e}"))
    }
}

impl ConnRules for Echo {
    type Conn = EchoConn;

    /// Connection number `index` (unique within the run) sends the pattern from its own phase.
    fn new_conn(&self, index: usize) -> EchoConn {
        EchoConn {
            phase: Pattern::phase(index),
            index,
            sent: 0,
            verified: 0,
            chunk_end: 0,
            chunk_started: Instant::now(),
            answered: false,
        }
    }

    /// With `--bytes` a connection is one unit of work: a failed one is counted, not retried, so a
    /// broken server cannot keep the run going forever. With `--duration` it is replaced.
    fn replace_failed(&self) -> bool {
        self.bytes_per_connection.is_none()
    }

    /// The socket is gone: its replacement starts the stream over.
    fn reset(&mut self, c: &mut EchoConn) {
        c.sent = 0;
        c.verified = 0;
        c.chunk_end = 0;
    }

    /// Start of the chunk not completely echoed yet, if any, for the `--timeout` sweep.
    fn busy_since(&self, c: &EchoConn) -> Option<Instant> {
        (c.verified < c.chunk_end).then_some(c.chunk_started)
    }

    fn nodelay(&self) -> bool {
        true
    }

    fn thread_done(&self, _stats: &ThreadStats) -> bool {
        false
    }

    /// A chunk not completely echoed at the end is unfinished, as an HTTP request in flight is.
    fn end_of_phase(&self, c: &EchoConn, connecting: bool, end: Instant, stats: &mut ThreadStats) {
        let in_flight = u64::from(self.busy_since(c).is_some());
        if connecting || in_flight > 0 {
            stats.left_in_flight(c.chunk_started, in_flight, c.answered, end);
        }
    }
}

/// The echo flood on the epoll engine: `Echo`'s rules, with a page-aligned receive buffer.
///
/// Sends are plain write()s of the pattern's slices. Splicing the pattern's pages into the socket
/// (vmsplice + splice: no copy into the socket buffer) was tried and is dearer on this kind of
/// machine: measured 2026-11-27 against the reference client (bench/RESULTS.md), spliced sends cost
/// 0.81-0.87x its bytes per CPU-second, write() 0.94-0.98x: copying an aligned 32 KiB slice is
/// cheaper than the second system call and the page reference counting (which the server's core
/// then also touches when it frees the buffers).
pub struct EchoProtocol {
    echo: Echo,
    /// The receive buffer, page-aligned (see `io::page`).
    scratch: PageBuf,
}

impl EchoProtocol {
    pub fn new(bytes_per_connection: Option<u64>, chunk_bytes: u64) -> Self {
        EchoProtocol {
            echo: Echo::new(bytes_per_connection, chunk_bytes),
            scratch: PageBuf::zeroed(SLICE_BYTES),
        }
    }

    /// Write what the socket takes of the current chunk (the rest on the next writable edge).
    fn flush(
        &mut self,
        c: &mut EchoConn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        while let Some(data) = self.echo.unsent(c) {
            match sock.write(data) {
                Ok(n) => self.echo.sent(c, n, now, stats),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Ok,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.echo.write_failed(&e),
            }
        }
        Outcome::Ok
    }
}

/// The epoll engine reaches `Echo`'s rules through the protocol that holds them.
impl ConnRules for EchoProtocol {
    type Conn = EchoConn;

    fn new_conn(&self, index: usize) -> EchoConn {
        self.echo.new_conn(index)
    }

    fn nodelay(&self) -> bool {
        self.echo.nodelay()
    }

    fn replace_failed(&self) -> bool {
        self.echo.replace_failed()
    }

    fn reset(&mut self, c: &mut EchoConn) {
        self.echo.reset(c);
    }

    fn busy_since(&self, c: &EchoConn) -> Option<Instant> {
        self.echo.busy_since(c)
    }

    fn thread_done(&self, stats: &ThreadStats) -> bool {
        self.echo.thread_done(stats)
    }

    fn end_of_phase(&self, c: &EchoConn, connecting: bool, end: Instant, stats: &mut ThreadStats) {
        self.echo.end_of_phase(c, connecting, end, stats);
    }
}

impl Protocol for EchoProtocol {
    fn on_connected(
        &mut self,
        c: &mut EchoConn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        match self.echo.on_connected(c, now) {
            Received::Stop(out) => out,
            Received::Ok { .. } => self.flush(c, sock, now, stats),
        }
    }

    fn on_writable(
        &mut self,
        c: &mut EchoConn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        self.flush(c, sock, now, stats)
    }

    fn on_readable(
        &mut self,
        c: &mut EchoConn,
        sock: &mut TcpStream,
        _now: Instant,
        stats: &mut ThreadStats,
        peer_closed: bool,
    ) -> Outcome {
        loop {
            let n = match sock.read(self.scratch.as_mut_slice()) {
                Ok(0) => return self.echo.on_eof(c),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Ok,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.echo.read_failed(&e),
            };
            let now = Instant::now();
            match self
                .echo
                .on_bytes(c, &self.scratch.as_slice()[..n], now, stats)
            {
                Received::Stop(out) => return out,
                Received::Ok { send_next: true } => match self.flush(c, sock, now, stats) {
                    Outcome::Ok => {}
                    other => return other,
                },
                Received::Ok { send_next: false } => {}
            }
            // A short read drained the receive queue (see `http::read_responses`).
            if n < SLICE_BYTES && !peer_closed {
                return Outcome::Ok;
            }
        }
    }
}

/// Results of the `--probe-interval` thread.
pub struct ProbeResult {
    pub attempts: u64,
    pub completed: u64,
    pub errors: u64,
    pub hist: Histogram<u64>,
    pub examples: Vec<String>,
}

/// Every `interval`, from `measure_start` until `stop`: connect, send PROBE_BYTES, read the whole
/// echo back (verified), close. Latency spans connect to last byte echoed. Blocking sockets: one
/// probe at a time is the point (it measures how long a newcomer waits), and this thread is idle
/// almost all the time.
pub fn run_probe(
    target: SocketAddr,
    interval: Duration,
    timeout: Duration,
    measure_start: Instant,
    stop: Arc<AtomicBool>,
) -> ProbeResult {
    let pattern = Pattern::new();
    let mut r = ProbeResult {
        attempts: 0,
        completed: 0,
        errors: 0,
        hist: histogram::new_histogram(),
        examples: Vec::new(),
    };
    let mut next = measure_start;
    let mut buf = vec![0u8; PROBE_BYTES];
    let mut probe_index = usize::MAX / 2;
    loop {
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return r;
            }
            std::thread::sleep(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(5)),
            );
        }
        if stop.load(Ordering::Relaxed) {
            return r;
        }
        next += interval;
        r.attempts += 1;
        probe_index = probe_index.wrapping_add(1);
        let started = Instant::now();
        match probe_once(
            target,
            timeout,
            &pattern,
            Pattern::phase(probe_index),
            &mut buf,
        ) {
            Ok(()) => {
                let us = started
                    .elapsed()
                    .as_micros()
                    .min(u128::from(histogram::HIST_HIGHEST_US)) as u64;
                r.hist.saturating_record(us.max(1));
                r.completed += 1;
            }
            Err(e) => {
                r.errors += 1;
                let msg = format!("probe: {e}");
                if r.examples.len() < stats::MAX_ERROR_EXAMPLES && !r.examples.contains(&msg) {
                    r.examples.push(msg);
                }
            }
        }
        // A probe that took longer than the interval does not trigger a burst of catch-up probes.
        let now = Instant::now();
        if next < now {
            next = now;
        }
    }
}

fn probe_once(
    target: SocketAddr,
    timeout: Duration,
    pattern: &Pattern,
    phase: usize,
    buf: &mut [u8],
) -> io::Result<()> {
    let mut s = std::net::TcpStream::connect_timeout(&target, timeout)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let deadline = Instant::now() + timeout;
    // Writing everything before reading cannot deadlock: 32 KiB fits the loopback socket buffers.
    s.write_all(pattern.slice(phase, 0, PROBE_BYTES))?;
    let mut got = 0usize;
    while got < PROBE_BYTES {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "echo not complete within the timeout",
            ));
        }
        let n = s.read(&mut buf[got..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("server closed after {got} of {PROBE_BYTES} bytes"),
            ));
        }
        got += n;
    }
    if let Err(at) = pattern.check(phase, 0, &buf[..PROBE_BYTES]) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("echoed byte {at} differs from what was sent"),
        ));
    }
    Ok(())
}

// The echo flood on the io_uring engine (`--io uring`, and `--io auto` where io_uring is usable):
// the rules of `Echo`, driven by the worker of `uring::closed` (one multishot recv per connection
// into the provided-buffer ring, registered files, generations in the completions, shutdown before
// close).
//
// Sends are plain `IORING_OP_SEND`s of the pattern's `'static` slices with `MSG_WAITALL`: the
// kernel finishes a send that found the socket full itself, so a chunk of at most one slice
// (64 KiB) is one SQE and no completion (`IOSQE_CQE_SKIP_SUCCESS`). A longer chunk goes out one
// slice at a time, each asking for its completion before the next is queued (see `SendBuf::more`).
// The bytes are copied into the socket as the epoll engine's write() copies them. Handing the
// pattern's pages to the socket without a copy measured dearer (bench/RESULTS.md, 2026-11-27): from
// this engine, synchronous vmsplice + splice before the ring's send gave 0.84x the reference
// client's bytes per CPU-second and sendfile() from a memfd 0.84x, against 0.96x for the plain
// send; on epoll see `echo::EchoProtocol`. `IORING_OP_SPLICE` was not tried: the kernel always
// runs it in an io_uring worker thread.
//
// No coalescing window: that window waits for half of the requests in flight to be answered, and
// an echo connection has a single chunk in flight whose echo comes back in as many completions as
// the kernel hands it over in (usually one 64 KiB buffer per 32 KiB chunk, sometimes more): there is
// no count of answers to wait for, so completions are handled as they come.
/// `Echo`'s connection rules (`ConnRules`) serve this engine as they are; here is how its bytes
/// move on io_uring.
impl UringProtocol for Echo {
    /// The epoll engine's read size: a 32 KiB chunk's echo arrives in one completion instead of two
    /// 16 KiB ones (half the completions and verification calls). With the ring handing the same
    /// few buffers out again (hot first, see `uring::ring::BufRing`) the larger buffers stay in cache;
    /// in plain ring order they did not (bench/RESULTS.md, 2026-11-26/27).
    const RECV_BUF_BYTES: usize = SLICE_BYTES;

    fn sending(&self, c: &EchoConn) -> bool {
        self.busy_since(c).is_some()
    }

    fn on_connected(&mut self, c: &mut EchoConn, now: Instant, _s: &mut ThreadStats) -> Received {
        Echo::on_connected(self, c, now)
    }

    fn on_bytes(
        &mut self,
        c: &mut EchoConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        Echo::on_bytes(self, c, data, now, stats)
    }

    fn on_eof(&mut self, c: &mut EchoConn, _now: Instant, _s: &mut ThreadStats) -> Outcome {
        Echo::on_eof(self, c)
    }

    fn read_failed(&self, _c: &EchoConn, e: &io::Error) -> Outcome {
        Echo::read_failed(self, e)
    }

    fn write_failed(&self, _c: &EchoConn, e: &io::Error) -> Outcome {
        Echo::write_failed(self, e)
    }

    /// The current chunk's next slice; counted as sent now (`MSG_WAITALL`: all of it or an error).
    fn next_send(
        &mut self,
        c: &mut EchoConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf> {
        let data = self.unsent(c)?;
        self.sent(c, data.len(), now, stats);
        Some(SendBuf::of(data, self.unsent(c).is_some()))
    }

    fn batch_wait(&mut self, _now: Instant) -> (u32, usize) {
        (0, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_periodic_nonzero_and_phase_shifted() {
        let p = Pattern::new();
        let a = p.slice(Pattern::phase(0), 0, 1000).to_vec();
        assert!(a.iter().all(|&b| b != 0));
        assert_eq!(a[..PATTERN_PERIOD], a[PATTERN_PERIOD..2 * PATTERN_PERIOD]);
        // Offsets continue the same stream: bytes 10.. equal a slice taken at offset 10.
        assert_eq!(&a[10..400], p.slice(Pattern::phase(0), 10, 390));
        let b = p.slice(Pattern::phase(1), 0, 1000);
        assert_ne!(&a[..], b, "neighbouring connections must differ");
        // Slices are capped so long chunks are written in several pieces.
        assert_eq!(p.slice(3, 5, 10 * SLICE_BYTES).len(), SLICE_BYTES);
    }

    /// The expected stream at (phase, offset), byte by byte, without going through `slice`.
    fn stream(phase: usize, offset: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|o| ((phase as u64 + offset + o) % PATTERN_PERIOD as u64) as u8 + 1)
            .collect()
    }

    #[test]
    fn slices_are_the_stream_and_start_cache_line_aligned() {
        let p = Pattern::new();
        for phase in [0, 1, 97, 250] {
            for offset in [0u64, 1, 31, 250, 251, 252, 1 << 40] {
                let got = p.slice(phase, offset, 600);
                assert_eq!(got, &stream(phase, offset, 600)[..]);
                let from_base = got.as_ptr() as usize - p.buf.as_slice().as_ptr() as usize;
                assert_eq!(from_base % SLICE_ALIGN, 0);
            }
        }
        assert_eq!(p.slice(7, 9, SLICE_BYTES), &stream(7, 9, SLICE_BYTES)[..]);
    }

    /// A wrong byte anywhere (every position of a buffer of several periods: across 32-byte words,
    /// the period wrap, the wide comparison's whole periods and its tail) is found at its position;
    /// with two wrong bytes the first is reported.
    #[test]
    fn check_finds_a_wrong_byte_at_every_position() {
        let p = Pattern::new();
        for (phase, offset, len) in [
            (0, 0u64, 6 * PATTERN_PERIOD + 77),
            (Pattern::phase(5), 1_000_003, 1300),
            (250, 250, 40),
        ] {
            let good = stream(phase, offset, len);
            assert_eq!(p.check(phase, offset, &good), Ok(()));
            for at in 0..len {
                let mut bad = good.clone();
                bad[at] ^= 0x40;
                assert_eq!(
                    p.check(phase, offset, &bad),
                    Err(at),
                    "phase {phase} offset {offset} byte {at}"
                );
                if at + PATTERN_PERIOD < len {
                    bad[at + PATTERN_PERIOD] = 0;
                    assert_eq!(p.check(phase, offset, &bad), Err(at));
                }
            }
            // The right bytes at the wrong offset (another point of the stream) are wrong.
            assert_eq!(p.check(phase, offset + 1, &good), Err(0));
        }
    }

    fn counting_stats() -> ThreadStats {
        let start = Instant::now() - Duration::from_secs(1);
        ThreadStats::new(start, start + Duration::from_secs(3600), None)
    }

    /// Send all of the current chunk as an engine would (slice by slice); returns the bytes sent.
    fn send_chunk(echo: &Echo, c: &mut EchoConn, stats: &mut ThreadStats) -> Vec<u8> {
        let mut wire = Vec::new();
        while let Some(data) = echo.unsent(c) {
            assert!(data.len() <= SLICE_BYTES);
            // A socket that takes a little less than offered: the rest comes with the next call.
            let n = data.len().min(50_000);
            wire.extend_from_slice(&data[..n]);
            echo.sent(c, n, Instant::now(), stats);
        }
        wire
    }

    /// The rules both engines follow, without a socket: a chunk is sent in slices of the stream,
    /// its echo is judged, a fully echoed chunk is one response and starts the next, and the last
    /// chunk of `--bytes` finishes the connection.
    #[test]
    fn echo_sends_chunks_of_the_stream_and_judges_their_echo() {
        let echo = Echo::new(Some(250_000), 200_000);
        let mut stats = counting_stats();
        let mut c = echo.new_conn(7);
        assert!(
            echo.unsent(&c).is_none(),
            "nothing to send before the connect"
        );
        assert!(matches!(
            echo.on_connected(&mut c, Instant::now()),
            Received::Ok { send_next: true }
        ));
        let wire = send_chunk(&echo, &mut c, &mut stats);
        assert_eq!(wire, stream(Pattern::phase(7), 0, 200_000));
        assert!(echo.busy_since(&c).is_some());
        // Echoed in two parts: the first is not a whole chunk yet.
        let now = Instant::now();
        assert!(matches!(
            echo.on_bytes(&mut c, &wire[..1000], now, &mut stats),
            Received::Ok { send_next: false }
        ));
        assert!(matches!(
            echo.on_bytes(&mut c, &wire[1000..], now, &mut stats),
            Received::Ok { send_next: true }
        ));
        assert_eq!((stats.responses, stats.verified_bytes), (1, 200_000));
        // The second chunk is what --bytes leaves: 50,000 bytes, continuing the stream.
        let wire = send_chunk(&echo, &mut c, &mut stats);
        assert_eq!(wire, stream(Pattern::phase(7), 200_000, 50_000));
        assert!(matches!(
            echo.on_bytes(&mut c, &wire, now, &mut stats),
            Received::Stop(Outcome::Finished)
        ));
        assert_eq!(stats.bytes_sent, 250_000);
    }

    fn failure(r: Received) -> (ErrorClass, String) {
        match r {
            Received::Stop(Outcome::Fail(class, msg)) => (class, msg),
            _ => panic!("expected a failure"),
        }
    }

    #[test]
    fn echo_failures_name_the_connection_and_the_byte() {
        let mut echo = Echo::new(None, 4096);
        let mut stats = counting_stats();
        let connected = |index| {
            let mut c = echo.new_conn(index);
            let _ = echo.on_connected(&mut c, Instant::now());
            c
        };
        // More than was sent.
        let mut c = connected(3);
        let mut more = send_chunk(&echo, &mut c, &mut stats);
        more.push(1);
        let (class, msg) = failure(echo.on_bytes(&mut c, &more, Instant::now(), &mut stats));
        assert_eq!(class, ErrorClass::VerificationMismatch);
        assert_eq!(
            msg,
            "echo connection 3: received 4097 bytes but only 4096 were sent"
        );
        // A wrong byte.
        let mut c = connected(3);
        let mut wire = send_chunk(&echo, &mut c, &mut stats);
        wire[100] ^= 0x40;
        let (class, msg) = failure(echo.on_bytes(&mut c, &wire, Instant::now(), &mut stats));
        assert_eq!(class, ErrorClass::VerificationMismatch);
        assert!(
            msg.starts_with("echo connection 3: byte 100 is 0x"),
            "{msg}"
        );
        // The server's FIN.
        let Outcome::Fail(class, msg) = echo.on_eof(&c) else {
            panic!("an EOF is a failure");
        };
        assert_eq!(class, ErrorClass::ClosedEarly);
        assert_eq!(
            msg,
            "echo connection 3: closed by the server after 0 of 4096 bytes echoed"
        );
        // A failed connection is replaced in --duration mode and starts its stream over.
        assert!(echo.replace_failed());
        echo.reset(&mut c);
        assert!(echo.busy_since(&c).is_none() && echo.unsent(&c).is_none());
        assert!(!Echo::new(Some(1), 1).replace_failed());
    }

    #[test]
    fn check_finds_the_first_wrong_byte_across_slices() {
        let p = Pattern::new();
        let phase = Pattern::phase(42);
        let offset = 1_000_003u64;
        let mut data: Vec<u8> = (0..(SLICE_BYTES as u64 + 500))
            .map(|o| p.slice(phase, offset + o, 1)[0])
            .collect();
        assert_eq!(p.check(phase, offset, &data), Ok(()));
        let wrong = SLICE_BYTES + 17;
        data[wrong] ^= 0xff;
        assert_eq!(p.check(phase, offset, &data), Err(wrong));
        assert!(
            p.check(Pattern::phase(43), offset, &data[..100]).is_err(),
            "another connection's bytes are wrong"
        );
    }
}
