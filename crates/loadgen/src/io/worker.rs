//! What every engine's worker thread shares, whatever moves its bytes (epoll here in `epoll`,
//! io_uring in `uring`) and whichever load model drives it: its configuration and result, a
//! connection slot's life (`Phase`), the loop's clock, the timeout sweep, how a connect completes,
//! the back-off after a failure, and how sockets are made.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Poll, Token};
use socket2::{Domain, Socket, Type};

use crate::stats::{ErrorClass, ThreadStats};
use crate::sys;

/// How often a thread checks its connections for timeouts and due reconnects.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(10);
/// First and largest delay before replacing a failed connection, so that a dead server costs a few
/// connect attempts per second per connection instead of a spinning core.
pub(crate) const BACKOFF_MIN_MS: u32 = 10;
pub(crate) const BACKOFF_MAX_MS: u32 = 500;
/// Initial connects per loop turn: with thousands of connections, opening them all before the
/// first poll would leave the early ones unserved (and their handshakes unanswered) for seconds.
pub(crate) const CONNECT_BATCH: usize = 256;
/// During the initial ramp a thread keeps at most this many handshakes in progress. A burst of
/// SYNs beyond the server's accept queue is dropped by the kernel and retried only after 1 s, 3 s,
/// 7 s...: that would measure TCP's retransmission timer, not the server.
pub(crate) const MAX_RAMP_CONNECTING: usize = 1024;

/// One load thread's connections and where they go: the same for every engine and load model.
pub struct ThreadConns {
    pub thread_index: usize,
    pub cpu: Option<usize>,
    pub target: SocketAddr,
    pub source_ips: Vec<IpAddr>,
    /// This thread's connections are numbers first_conn .. first_conn + connections.
    pub first_conn: usize,
    pub connections: usize,
    pub timeout: Duration,
}

impl ThreadConns {
    /// Pin the calling (worker) thread to its CPU, if one was given.
    pub(crate) fn pin_this_thread(&self) -> io::Result<()> {
        if let Some(cpu) = self.cpu {
            sys::pin_current_thread(cpu).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("pinning thread {} to CPU {cpu}: {e}", self.thread_index),
                )
            })?;
        }
        Ok(())
    }

    /// The local address this thread's k-th connection binds to (`--source-ips`, round-robin over
    /// the connection's global number), if any.
    pub(crate) fn source_for(&self, k: usize) -> Option<SocketAddr> {
        source_address(&self.source_ips, self.first_conn + k)
    }
}

/// A closed-loop or echo thread: its connections and its measured window.
pub struct WorkerConfig {
    pub conns: ThreadConns,
    pub measure_start: Instant,
    /// None: run until the protocol is done or every connection finished.
    pub measure_end: Option<Instant>,
    pub response_quota: Option<u64>,
}

impl WorkerConfig {
    /// This thread's counters, counting only inside the measured window.
    pub(crate) fn new_stats(&self) -> ThreadStats {
        let far_future = Instant::now() + Duration::from_secs(10 * 365 * 86400);
        ThreadStats::new(
            self.measure_start,
            self.measure_end.unwrap_or(far_future),
            self.response_quota,
        )
    }
}

/// The local address connection number `index` (unique within the run) binds to: `--source-ips`,
/// round-robin; None without them.
pub(crate) fn source_address(source_ips: &[IpAddr], index: usize) -> Option<SocketAddr> {
    (!source_ips.is_empty()).then(|| SocketAddr::new(source_ips[index % source_ips.len()], 0))
}

pub struct WorkerResult {
    pub stats: ThreadStats,
    pub stopped_at: Instant,
    /// Where the thread ran and what it cost: what the result document says of each thread.
    pub thread: ThreadSummary,
}

/// One load thread's CPU, clocks and engine bound over the measured phase (the open loop sums its
/// steps'), as the result document reports it.
#[derive(Debug, Clone)]
pub struct ThreadSummary {
    /// The CPU the thread was pinned to.
    pub cpu: Option<usize>,
    /// Thread CPU time and wall time over the measured phase.
    pub cpu_time: Duration,
    pub wall_time: Duration,
    pub user_time: Duration,
    pub sys_time: Duration,
    /// Time the thread waited for a CPU over the measured phase; None when the kernel keeps no
    /// schedstat (`sys::thread_run_delay`).
    pub run_delay: Option<Duration>,
    /// How the io_uring engine batched completions over the measured phase; None for epoll (it
    /// reacts to every event at once).
    pub batching: Option<Batching>,
}

/// The io_uring engine's coalescing over a thread's measured phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batching {
    /// The longest it may have held a completed response before timing it: its largest
    /// coalescing window (0 when none was used).
    pub max_window: Duration,
    /// Time in the measured phase, and the part of it whose waits held out for a batch (had a
    /// window).
    pub time: Duration,
    pub windowed_time: Duration,
}

/// What a protocol (HTTP or echo) tells any closed-loop engine about its connections, whatever moves
/// the bytes: each engine's own trait (`epoll::Protocol`, `uring::closed::UringProtocol`) adds how bytes
/// are exchanged.
pub trait ConnRules {
    type Conn;
    /// Per-connection state for connection number `index` (unique within the run).
    fn new_conn(&self, index: usize) -> Self::Conn;
    fn nodelay(&self) -> bool;
    /// Whether a failed connection is replaced by a fresh one (after a back-off).
    fn replace_failed(&self) -> bool;
    /// The connection's socket is gone; forget in-flight work.
    fn reset(&mut self, c: &mut Self::Conn);
    /// Start of the oldest outstanding work, if any, for the `--timeout` sweep.
    fn busy_since(&self, c: &Self::Conn) -> Option<Instant>;
    /// True when this thread has nothing left to do (e.g. its `--requests` share is complete).
    fn thread_done(&self, stats: &ThreadStats) -> bool;
    /// The measured phase ended at `end` with this connection open (or `connecting`: a connect not
    /// complete or not started, see `Phase::waiting_at_end`): count what it still has in flight as
    /// unfinished (`ThreadStats::left_in_flight`) and, if it is waiting for the server, the
    /// connection as unanswered if it got no answer in the phase.
    fn end_of_phase(&self, c: &Self::Conn, connecting: bool, end: Instant, stats: &mut ThreadStats);
}

/// Where one connection slot is in its life; every engine and load model uses it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Phase {
    /// Not opened yet (the initial ramp opens slots in order).
    New,
    Idle {
        retry_at: Instant,
    },
    Connecting {
        since: Instant,
    },
    Open,
    Done,
}

impl Phase {
    /// At the end of the measured phase: Some(connecting) for a slot that may still be waiting for
    /// the server, None for one that is not. An open one may have requests in flight. When the run
    /// ended by its time, one whose connect is in progress, or that the ramp never opened because
    /// earlier connects were still pending (a full accept queue drops SYNs), waits to connect; when
    /// it ended because its work was done (`--requests`), such a slot simply was not needed.
    pub(crate) fn waiting_at_end(&self, ended_by_time: bool) -> Option<bool> {
        match self {
            Phase::Open => Some(false),
            Phase::Connecting { .. } | Phase::New if ended_by_time => Some(true),
            _ => None,
        }
    }
}

/// How many never-opened connections the initial ramp may start now: at most CONNECT_BATCH per loop
/// turn and MAX_RAMP_CONNECTING handshakes in progress, so a burst of SYNs does not overflow the
/// server's accept queue. Shared by both closed-loop engines.
pub(crate) fn ramp_room(connecting: usize) -> usize {
    MAX_RAMP_CONNECTING
        .saturating_sub(connecting)
        .min(CONNECT_BATCH)
}

/// The time-keeping both closed-loop engines (epoll here, io_uring in `uring`) share: the measured
/// window, the CPU snapshot at its start, the periodic sweep, and how long the next wait may be.
pub(crate) struct LoopClock {
    measure_start: Instant,
    measure_end: Option<Instant>,
    next_sweep: Instant,
    /// The thread's clocks at the start of the measured phase.
    at_start: Option<sys::ThreadClocks>,
}

impl LoopClock {
    pub(crate) fn new(measure_start: Instant, measure_end: Option<Instant>) -> Self {
        LoopClock {
            measure_start,
            measure_end,
            next_sweep: Instant::now() + SWEEP_INTERVAL,
            at_start: None,
        }
    }

    /// Call at the top of every loop turn: takes the CPU snapshot once the measured phase begins.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.at_start.is_none() && now >= self.measure_start {
            self.at_start = Some(sys::ThreadClocks::read(now));
        }
    }

    pub(crate) fn measuring(&self) -> bool {
        self.at_start.is_some()
    }

    /// Where the measured phase ended for a loop that stopped at `stopped_at`: its end time, or
    /// earlier if the loop stopped first (`--requests` done, every connection finished).
    pub(crate) fn measured_end(&self, stopped_at: Instant) -> Instant {
        self.measure_end
            .map_or(stopped_at, |end| end.min(stopped_at))
    }

    /// The measured phase is over: its end time came, or a SIGINT/SIGTERM ended it early.
    pub(crate) fn past_end(&self, now: Instant) -> bool {
        self.measure_end.is_some_and(|end| now >= end) || crate::signals::stop_requested()
    }

    /// True every SWEEP_INTERVAL (timeouts, retries of failed connections).
    pub(crate) fn sweep_due(&mut self, now: Instant) -> bool {
        if now < self.next_sweep {
            return false;
        }
        self.next_sweep = now + SWEEP_INTERVAL;
        true
    }

    /// How long the next wait for I/O may last: until the next sweep, the start or the end of the
    /// measured phase; not at all while the ramp has room for more connects.
    pub(crate) fn wait(&self, now: Instant, ramp_has_room: bool) -> Duration {
        let mut wait = self.next_sweep.saturating_duration_since(now);
        if ramp_has_room {
            wait = Duration::ZERO;
        }
        if self.at_start.is_none() {
            wait = wait.min(self.measure_start.saturating_duration_since(now));
        }
        if let Some(end) = self.measure_end {
            wait = wait.min(end.saturating_duration_since(now));
        }
        wait
    }

    /// The end of the loop, the same for every engine: if the measured phase began, each
    /// connection still waiting for the server (`Phase::waiting_at_end`) counts what it had in
    /// flight (`ConnRules::end_of_phase`); then the live interval histogram joins the finished ones.
    pub(crate) fn finish<'a, R: ConnRules>(
        &self,
        rules: &R,
        conns: impl Iterator<Item = (Phase, &'a R::Conn)>,
        stopped_at: Instant,
        stats: &mut ThreadStats,
    ) where
        R::Conn: 'a,
    {
        if self.measuring() {
            let end = self.measured_end(stopped_at);
            let by_time = self.past_end(stopped_at);
            for (phase, conn) in conns {
                if let Some(connecting) = phase.waiting_at_end(by_time) {
                    rules.end_of_phase(conn, connecting, end, stats);
                }
            }
        }
        stats.intervals.flush();
    }

    /// The thread's result: its counters and its CPU, run-delay and wall time over the measured
    /// phase.
    pub(crate) fn result(
        &self,
        stats: ThreadStats,
        cpu: Option<usize>,
        stopped_at: Instant,
        batching: Option<Batching>,
    ) -> WorkerResult {
        let usage = self
            .at_start
            .unwrap_or_else(|| sys::ThreadClocks::read(stopped_at))
            .usage(stopped_at);
        WorkerResult {
            stats,
            stopped_at,
            thread: ThreadSummary {
                cpu,
                cpu_time: usage.cpu_time,
                wall_time: usage.wall_time,
                user_time: usage.user_time,
                sys_time: usage.sys_time,
                run_delay: usage.run_delay,
                batching,
            },
        }
    }
}

/// What an epoll event says about a connect in progress (both load models read it this way).
pub(crate) enum ConnectEvent {
    Pending,
    Connected,
    Failed(ErrorClass, String),
}

pub(crate) fn connect_event(
    ev: &mio::event::Event,
    sock: &TcpStream,
    target: SocketAddr,
) -> ConnectEvent {
    connect_readiness(&Readiness::of(ev), sock, target)
}

/// The parts of an epoll event the engines read, kept apart from mio's event (the open loop reads
/// them after the wait, one slot at a time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Readiness {
    pub readable: bool,
    pub writable: bool,
    pub read_closed: bool,
    pub write_closed: bool,
    pub error: bool,
}

impl Readiness {
    pub(crate) fn of(ev: &mio::event::Event) -> Self {
        Readiness {
            readable: ev.is_readable(),
            writable: ev.is_writable(),
            read_closed: ev.is_read_closed(),
            write_closed: ev.is_write_closed(),
            error: ev.is_error(),
        }
    }
}

pub(crate) fn connect_readiness(
    ev: &Readiness,
    sock: &TcpStream,
    target: SocketAddr,
) -> ConnectEvent {
    let closed = ev.error || ev.write_closed || ev.read_closed;
    // A failed connect leaves its errno in SO_ERROR. Without one, a writable socket did connect: a
    // server that accepts and closes at once delivers its FIN in the same event as the connect
    // completing, and that is a connection closed early (a read sees the EOF), not a failed connect.
    let err = if closed {
        sock.take_error().ok().flatten()
    } else {
        None
    };
    if let Some(e) = err {
        ConnectEvent::Failed(
            ErrorClass::of_connect_error(&e),
            format!("connect to {target}: {e}"),
        )
    } else if ev.writable {
        ConnectEvent::Connected
    } else if closed {
        // Closed before the connect completed, and the kernel kept no errno to say why.
        ConnectEvent::Failed(
            ErrorClass::ConnectError,
            format!("connect to {target}: closed before it completed (no error reported)"),
        )
    } else {
        ConnectEvent::Pending
    }
}

/// After a failure: the slot waits before it reconnects, twice as long as last time, from
/// BACKOFF_MIN_MS up to BACKOFF_MAX_MS (both load models).
pub(crate) fn back_off(backoff_ms: &mut u32, now: Instant) -> Phase {
    *backoff_ms = (*backoff_ms * 2).clamp(BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    Phase::Idle {
        retry_at: now + Duration::from_millis(u64::from(*backoff_ms)),
    }
}

/// A slot's phase after a failure: its back-off (`back_off`) when failed connections are replaced,
/// else Done.
pub(crate) fn after_failure(replace: bool, backoff_ms: &mut u32, now: Instant) -> Phase {
    if replace {
        back_off(backoff_ms, now)
    } else {
        Phase::Done
    }
}

/// A connection did all it had to do (`Outcome::Finished`): counted if inside the measured phase.
pub(crate) fn connection_finished(stats: &mut ThreadStats, now: Instant) {
    if stats.counting(now) {
        stats.connections_completed += 1;
        stats.last_event = Some(now);
    }
}

/// What the periodic sweep does with one connection slot (every engine and load model).
pub(crate) enum SweepAction {
    Fail(ErrorClass, String),
    /// Its back-off after a failure is over: open it again.
    Reopen,
    Nothing,
}

/// A connect or a reply that took `--timeout` fails the connection; a slot whose back-off is over
/// is opened again.
pub(crate) fn sweep_action(
    phase: &Phase,
    busy_since: Option<Instant>,
    now: Instant,
    timeout: Duration,
    target: SocketAddr,
) -> SweepAction {
    match *phase {
        Phase::Connecting { since } if now.saturating_duration_since(since) >= timeout => {
            SweepAction::Fail(
                ErrorClass::ConnectTimeout,
                format!("connect to {target} not complete after {timeout:?}"),
            )
        }
        Phase::Open if busy_since.is_some_and(|t| now.saturating_duration_since(t) >= timeout) => {
            SweepAction::Fail(
                ErrorClass::Timeout,
                format!("no complete response within {timeout:?}"),
            )
        }
        Phase::Idle { retry_at } if now >= retry_at => SweepAction::Reopen,
        _ => SweepAction::Nothing,
    }
}

/// socket() + optional bind + connect(), non-blocking; `Ok` means connected or in progress.
/// A non-blocking connect, registered once for READABLE | WRITABLE (edge-triggered: never re-registered
/// per request). Shared by the closed-loop and open-loop engines; an error comes with its class.
pub(crate) fn open_registered(
    poll: &Poll,
    token: Token,
    target: SocketAddr,
    source: Option<SocketAddr>,
    nodelay: bool,
) -> Result<TcpStream, (ErrorClass, String)> {
    let mut sock = connect_nonblocking(target, source, nodelay)
        .map_err(|e| connect_failed(&e, target, source))?;
    poll.registry()
        .register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)
        .map_err(|e| {
            (
                ErrorClass::of_connect_error(&e),
                format!("epoll registration: {e}"),
            )
        })?;
    Ok(sock)
}

/// A socket for `target` (from `source`) could not be made or connected: its class and message,
/// the same on every engine.
pub(crate) fn connect_failed(
    e: &io::Error,
    target: SocketAddr,
    source: Option<SocketAddr>,
) -> (ErrorClass, String) {
    let from = source
        .map(|s| format!(" from {}", s.ip()))
        .unwrap_or_default();
    (
        ErrorClass::of_connect_error(e),
        format!("connect to {target}{from}: {e}"),
    )
}

/// A TCP socket for `target`, bound to `source` if given (both engines' sockets start here).
pub(crate) fn new_tcp_socket(
    target: SocketAddr,
    source: Option<SocketAddr>,
    nodelay: bool,
    nonblocking: bool,
) -> io::Result<Socket> {
    let kind = if nonblocking {
        Type::STREAM.nonblocking()
    } else {
        Type::STREAM
    };
    let sock = Socket::new(
        Domain::for_address(target),
        kind.cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    if let Some(src) = source {
        // Let connect() pick the port per 4-tuple instead of bind() reserving one per address, so
        // each source address really adds a whole ephemeral port range.
        let one: libc::c_int = 1;
        // SAFETY: valid fd and a c_int option value of the right size.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&sock),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        sock.bind(&src.into())?;
    }
    if nodelay {
        sock.set_nodelay(true)?;
    }
    Ok(sock)
}

pub fn connect_nonblocking(
    target: SocketAddr,
    source: Option<SocketAddr>,
    nodelay: bool,
) -> io::Result<TcpStream> {
    let sock = new_tcp_socket(target, source, nodelay, true)?;
    match sock.connect(&target.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(sock.into()))
}
