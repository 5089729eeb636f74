//! `--io uring`'s closed-loop worker: the HTTP closed loop and the echo flood on io_uring instead of
//! epoll (Linux 6.0+), driving a `UringProtocol` (HTTP's is `io::http::HttpParams`, echo's is
//! `io::echo::Echo`) over the ring plumbing in `ring`.
//!
//! Same contract as the epoll engine (`epoll` + `http`/`echo`): one ring per thread, shared
//! nothing, the same connection life cycle (ramp, backoff, replacement, `--timeout` sweep), the same
//! parser, verification and error classes. What changes is how bytes move, chosen to cut the generator's
//! kernel time per request, which is what limits it on a small machine:
//!
//! - every connection has one multishot recv armed for its whole life, filling buffers from a
//!   provided-buffer ring: no recv syscall, no epoll bookkeeping, no re-arming per response; the
//!   buffers just freed are handed out again first, so they are still in cache (`BufRing`);
//! - sends are queued as SQEs with `MSG_WAITALL` (the kernel finishes short sends itself) and
//!   `IOSQE_CQE_SKIP_SUCCESS` (only a failed send produces a completion); https's records and
//!   HTTP/2's frames are staged first (`stage`: the exchange does not hold them in place) and go
//!   one send at a time, each completing, so that what was staged meanwhile follows it;
//! - sockets are registered files (slot i of the ring's file table is connection i's socket), so
//!   no operation looks a descriptor up or counts references on it (see `Worker::slot_fds`);
//! - all sends and re-arms produced by one batch of completions go to the kernel in the single
//!   `io_uring_enter` that also waits for the next batch;
//! - `SINGLE_ISSUER | DEFER_TASKRUN` (6.1+) let completions be processed in that same enter instead
//!   of by task-work interrupts of the running thread.
//!
//! - with `--coalesce-us`, each wait may hold out for half of the requests in flight for a window
//!   (io_uring min-wait, 6.12+): the biggest saving measured, but it makes arrivals burstier and adds
//!   up to the window to a response's measured latency. So it is opt-in; `auto` keeps the window at
//!   5% of the fastest recent latency (see `auto_window_us`), and uses it only while a trial of its
//!   CPU cost per response shows it saves (`window`); the largest window used is reported
//!   (`generator.batch_wait_max_us`) as the bound on what it added, and the share of the time it
//!   was used (`generator.batch_wait_share`).
//!
//! Connects are `IORING_OP_CONNECT` on blocking sockets, so `--close` works too.
//!
//! Latency is timed from the moment a request is queued to the moment the completion batch that
//! ends its response is reaped (one clock read per batch: every completion in it had already
//! happened by then).
//!
//! A closed connection may still have an armed recv, a queued send or a connect in the kernel.
//! Completions carry the connection's generation, so stale ones are ignored; the socket is shut
//! down first (which ends any operation pending on it) and its descriptor is closed only after the
//! next submit, so a queued SQE can never reach a new socket that reused the number.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use socket2::{SockAddr, Socket};

use crate::exchange::{Outcome, Received};
use crate::io::uring::ring::{
    build_ring, completion_error, connect_failure, decode, files_update, files_update_error,
    new_socket, recv_buffers, recv_error, register_files, shut_down_all, sq_entries, user_data,
    with_buffers, BufRing, BUF_GROUP, GEN_MASK, OP_CONNECT, OP_FILES_UPDATE, OP_RECV, OP_SEND,
};
// The same ramp, back-off and time-keeping as the epoll engine (see io/worker.rs for the reasons).
use crate::io::worker::{
    after_failure, connect_failed, connection_finished, ramp_room, sweep_action, Batching,
    ConnRules, LoopClock, Phase, SweepAction, WorkerConfig, WorkerResult, MAX_RAMP_CONNECTING,
};
use crate::stats::{ErrorClass, ThreadStats};

/// Bytes a protocol wants sent: they stay where they are, unchanged, until the send completes (the
/// SQE points at them).
pub struct SendBuf {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    /// More bytes may follow once these are sent: the send completes with a CQE on success too,
    /// and the protocol hears of it (`UringProtocol::on_sent`). Never two sends in flight on one
    /// connection: io_uring does not keep two sends on one socket in order when the first has to
    /// wait for buffer space.
    pub(crate) more: bool,
}

impl SendBuf {
    /// A slice the protocol keeps in place until the send completes.
    pub(crate) fn of(bytes: &[u8], more: bool) -> SendBuf {
        SendBuf {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            more,
        }
    }
}

/// What travels on a connection of this engine (HTTP's `io::http::HttpParams`, echo's `io::echo::Echo`): the io_uring
/// counterpart of `epoll::Protocol`. The engine owns the sockets, the ring and the connection life
/// cycle; the protocol judges the bytes that arrive and says what to send, and never does I/O.
pub trait UringProtocol: ConnRules {
    /// Bytes per provided receive buffer (a receive takes at most one buffer). Memory is only
    /// resident once the kernel has written into a buffer: with hot-first order (see `BufRing`) that
    /// is the few in use, in plain order every buffer of the ring.
    const RECV_BUF_BYTES: usize;
    /// The connection may have a send blocked in the kernel (its socket is shut down on close).
    fn sending(&self, c: &Self::Conn) -> bool;
    /// The connect completed: `send_next` to begin with a send (`next_send`).
    fn on_connected(
        &mut self,
        c: &mut Self::Conn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received;
    /// Bytes arrived (`send_next`: call `next_send`).
    fn on_bytes(
        &mut self,
        c: &mut Self::Conn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received;
    fn on_eof(&mut self, c: &mut Self::Conn, now: Instant, stats: &mut ThreadStats) -> Outcome;
    /// A send that asked for its completion (`SendBuf::more`) is done (`send_next`: call
    /// `next_send`); by default the next one may go.
    fn on_sent(
        &mut self,
        _c: &mut Self::Conn,
        _now: Instant,
        _stats: &mut ThreadStats,
    ) -> Received {
        Received::Ok { send_next: true }
    }
    /// What a failed receive (`read_failed`) or send (`write_failed`) on the connection is.
    fn read_failed(&self, c: &Self::Conn, e: &io::Error) -> Outcome;
    fn write_failed(&self, c: &Self::Conn, e: &io::Error) -> Outcome;
    /// What to send now on the connection, if anything; counted as sent when queued (`MSG_WAITALL`
    /// sends it all or fails).
    fn next_send(
        &mut self,
        c: &mut Self::Conn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf>;
    /// The next wait's coalescing window in µs (0: react at once) and, with one, how many
    /// completions are worth waiting for; `now` is the loop's time.
    fn batch_wait(&mut self, now: Instant) -> (u32, usize);
}

struct Conn<C> {
    sock: Option<Socket>,
    phase: Phase,
    gen: u32,
    backoff_ms: u32,
    source: Option<SocketAddr>,
    /// A multishot recv is queued or armed in the kernel for the current socket.
    recv_armed: bool,
    proto: C,
}

struct Worker<P: UringProtocol> {
    ring: IoUring,
    bufs: BufRing,
    conns: Vec<Conn<P::Conn>>,
    stats: ThreadStats,
    p: P,
    target: SocketAddr,
    /// Boxed: CONNECT SQEs point at it until they complete.
    target_sockaddr: Box<SockAddr>,
    timeout: Duration,
    live: usize,
    connecting: usize,
    /// The measured phase's largest window (the bound reported with the result), its time, and the
    /// part of that time whose waits had a window.
    batching: Batching,
    /// When the previous loop turn of the measured phase began, and whether its wait had a window.
    previous_turn: Option<(Instant, bool)>,
    /// Closed sockets whose descriptors are released after the next submit (see the module doc).
    graveyard: Vec<Socket>,
    /// Registered (fixed) files: connection i's socket sits in slot i of the ring's file table, so
    /// a send or recv names it by index and the kernel skips looking the descriptor up and
    /// counting references on every operation. None when the table could not be registered (then
    /// plain descriptors, as before). The slot is changed by an `IORING_OP_FILES_UPDATE` queued
    /// like any other SQE, so it takes effect in submission order: whatever was queued for the old
    /// socket still reaches the old socket. The vector holds what each update installs (one entry
    /// per slot, never reallocated: the SQE points at it until it is submitted).
    slot_fds: Option<Vec<RawFd>>,
    cqes: Vec<(u64, i32, u32)>,
}

/// Run one thread's share of the load (HTTP: `HttpParams`, echo: `echo::Echo`) on io_uring;
/// returns its measurements.
pub fn run_worker<P: UringProtocol>(cfg: WorkerConfig, p: P) -> io::Result<WorkerResult> {
    cfg.conns.pin_this_thread()?;
    let (ring, task_run) = build_ring(sq_entries(cfg.conns.connections))
        .map_err(|e| io::Error::new(e.kind(), format!("io_uring setup: {e}")))?;
    let bufs = BufRing::new(
        &ring,
        recv_buffers(cfg.conns.connections),
        P::RECV_BUF_BYTES,
        task_run,
    )
    .map_err(|e| io::Error::new(e.kind(), format!("io_uring buffer ring: {e}")))?;
    let slot_fds = register_files(&ring, cfg.conns.connections);
    let stats = cfg.new_stats();
    let conns = (0..cfg.conns.connections)
        .map(|k| Conn {
            sock: None,
            phase: Phase::New,
            gen: 0,
            backoff_ms: 0,
            source: cfg.conns.source_for(k),
            recv_armed: false,
            proto: p.new_conn(cfg.conns.first_conn + k),
        })
        .collect();
    let mut w = Worker {
        ring,
        bufs,
        conns,
        stats,
        p,
        target: cfg.conns.target,
        target_sockaddr: Box::new(SockAddr::from(cfg.conns.target)),
        timeout: cfg.conns.timeout,
        live: cfg.conns.connections,
        connecting: 0,
        batching: Batching::default(),
        previous_turn: None,
        graveyard: Vec::new(),
        slot_fds,
        cqes: Vec::with_capacity(1024),
    };
    let result = w.run(cfg.measure_start, cfg.measure_end, cfg.conns.cpu);
    w.shutdown();
    result
}

impl<P: UringProtocol> Worker<P> {
    fn run(
        &mut self,
        measure_start: Instant,
        measure_end: Option<Instant>,
        cpu: Option<usize>,
    ) -> io::Result<WorkerResult> {
        let mut clock = LoopClock::new(measure_start, measure_end);
        let mut never_opened = 0..self.conns.len();
        let stopped_at = loop {
            let now = Instant::now();
            let ramping = !never_opened.is_empty();
            for i in never_opened.by_ref().take(ramp_room(self.connecting)) {
                self.open(i, now)?;
            }
            clock.tick(now);
            if clock.past_end(now) || self.live == 0 || self.p.thread_done(&self.stats) {
                break now;
            }
            if clock.sweep_due(now) {
                self.sweep(now)?;
            }
            let wait = clock.wait(now, ramping && self.connecting < MAX_RAMP_CONNECTING);
            self.bufs.publish(&mut self.ring)?;
            let ts = Timespec::from(wait);
            let mut args = SubmitArgs::new().timespec(&ts);
            let mut want = 1;
            let (window_us, worth_waiting_for) = self.p.batch_wait(now);
            if clock.measuring() {
                let window = Duration::from_micros(u64::from(window_us));
                self.batching.max_window = self.batching.max_window.max(window);
                if let Some((then, windowed)) = self.previous_turn {
                    let turn = now.saturating_duration_since(then);
                    self.batching.time += turn;
                    if windowed {
                        self.batching.windowed_time += turn;
                    }
                }
                self.previous_turn = Some((now, window_us > 0));
            }
            if window_us > 0 {
                // Wait for half of what is in flight, but once the window has passed settle for
                // anything (IORING_ENTER_EXT_ARG min_wait, 6.12+): fewer, larger batches mean
                // fewer wake-ups on both sides, at the price of up to the window added to the
                // measured latency of a response that waits for the batch.
                want = worth_waiting_for;
                args = args.min_wait_usec(window_us);
            }
            match self.ring.submitter().submit_with_args(want, &args) {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    // ETIME: the wait ran out (a sweep or the end is due); EINTR: a signal;
                    // EBUSY: completions must be reaped before more can be submitted.
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => {}
                    _ => return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}"))),
                },
            }
            // Only once every queued SQE naming their descriptors has reached the kernel.
            if self.ring.submission().is_empty() {
                self.graveyard.clear();
            }
            self.reap()?;
        };
        let conns = self.conns.iter().map(|c| (c.phase, &c.proto));
        clock.finish(&self.p, conns, stopped_at, &mut self.stats);
        // The worker lives on to cancel its kernel work (see shutdown); its counters leave now.
        let empty_window = Instant::now();
        let stats = std::mem::replace(
            &mut self.stats,
            ThreadStats::new(empty_window, empty_window, None),
        );
        Ok(clock.result(stats, cpu, stopped_at, Some(self.batching)))
    }

    /// Process every completion available; one clock read serves the whole batch.
    fn reap(&mut self) -> io::Result<()> {
        let mut cqes = std::mem::take(&mut self.cqes);
        loop {
            cqes.clear();
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            if cqes.is_empty() {
                break;
            }
            self.bufs.taken(with_buffers(&cqes));
            let now = Instant::now();
            for &(ud, res, flags) in &cqes {
                self.on_cqe(ud, res, flags, now)?;
            }
        }
        self.cqes = cqes;
        Ok(())
    }

    fn on_cqe(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
        let (i, gen, op) = decode(ud);
        if op == OP_FILES_UPDATE {
            // Only a failure completes (SKIP_SUCCESS); the table is sized for every slot, so this
            // would be a kernel refusing what it accepted at setup.
            return Err(files_update_error(res));
        }
        let bid = cqueue::buffer_select(flags);
        let current = self
            .conns
            .get(i)
            .is_some_and(|c| c.gen == gen && c.sock.is_some());
        if !current {
            if let Some(bid) = bid {
                self.bufs.recycle(bid);
            }
            return Ok(());
        }
        let out = match op {
            OP_CONNECT => self.on_connect(i, res, now)?,
            OP_RECV => {
                let more = cqueue::more(flags);
                if !more {
                    self.conns[i].recv_armed = false;
                }
                let out = match bid {
                    Some(bid) => {
                        // SAFETY: the kernel handed this buffer back in this completion; it is
                        // recycled right after and the slice does not outlive this block.
                        let data = unsafe { self.bufs.data(bid, res.max(0) as usize) };
                        let out = self.on_data(i, data, now)?;
                        self.bufs.recycle(bid);
                        out
                    }
                    None if res == 0 => self.on_eof(i, now)?,
                    None => recv_error(res).map_or(Outcome::Ok, |e| {
                        self.p.read_failed(&self.conns[i].proto, &e)
                    }),
                };
                let c = &self.conns[i];
                if matches!(out, Outcome::Ok)
                    && !c.recv_armed
                    && c.gen == gen
                    && matches!(c.phase, Phase::Open)
                {
                    self.arm_recv(i)?;
                }
                out
            }
            OP_SEND if res < 0 => self
                .p
                .write_failed(&self.conns[i].proto, &completion_error(res)),
            // A send that asked for its completion (`SendBuf::more`) is done.
            OP_SEND => {
                let c = &mut self.conns[i];
                let done = self.p.on_sent(&mut c.proto, now, &mut self.stats);
                self.after_received(i, done, now)?
            }
            _ => Outcome::Ok,
        };
        self.apply(i, out, now)
    }

    fn on_connect(&mut self, i: usize, res: i32, now: Instant) -> io::Result<Outcome> {
        if res < 0 {
            return Ok(connect_failure(res, self.target));
        }
        self.conns[i].phase = Phase::Open;
        self.connecting -= 1;
        self.stats.connection_opened(now);
        self.arm_recv(i)?;
        let c = &mut self.conns[i];
        let begun = self.p.on_connected(&mut c.proto, now, &mut self.stats);
        self.after_received(i, begun, now)
    }

    fn on_data(&mut self, i: usize, data: &[u8], now: Instant) -> io::Result<Outcome> {
        let c = &mut self.conns[i];
        c.backoff_ms = 0;
        let judged = self.p.on_bytes(&mut c.proto, data, now, &mut self.stats);
        self.after_received(i, judged, now)
    }

    fn after_received(&mut self, i: usize, r: Received, now: Instant) -> io::Result<Outcome> {
        match r {
            Received::Stop(out) => Ok(out),
            Received::Ok { send_next } => {
                if send_next {
                    self.send(i, now)?;
                }
                Ok(Outcome::Ok)
            }
        }
    }

    fn on_eof(&mut self, i: usize, now: Instant) -> io::Result<Outcome> {
        Ok(self
            .p
            .on_eof(&mut self.conns[i].proto, now, &mut self.stats))
    }

    /// Queue what the protocol has to send on connection i, if anything.
    fn send(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Some(SendBuf { ptr, len, more }) = self.p.next_send(&mut c.proto, now, &mut self.stats)
        else {
            return Ok(());
        };
        let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
        let sqe = if self.slot_fds.is_some() {
            opcode::Send::new(types::Fixed(i as u32), ptr, len as u32)
                .flags(flags)
                .build()
        } else {
            let fd = c.sock.as_ref().expect("open connection").as_raw_fd();
            opcode::Send::new(types::Fd(fd), ptr, len as u32)
                .flags(flags)
                .build()
        };
        // Only a failed send completes, unless the protocol has more to send after this one.
        let sqe = if more {
            sqe
        } else {
            sqe.flags(squeue::Flags::SKIP_SUCCESS)
        }
        .user_data(user_data(i, c.gen, OP_SEND));
        self.push(sqe)
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        c.recv_armed = true;
        let sqe = if self.slot_fds.is_some() {
            opcode::RecvMulti::new(types::Fixed(i as u32), BUF_GROUP).build()
        } else {
            let fd = c.sock.as_ref().expect("open connection").as_raw_fd();
            opcode::RecvMulti::new(types::Fd(fd), BUF_GROUP).build()
        }
        .user_data(user_data(i, c.gen, OP_RECV));
        self.push(sqe)
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer and address an SQE points at (request bytes, target address,
            // buffer ring) lives as long as the worker, which cancels everything before freeing.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            if let Err(e) = self.ring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) {
                    return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}")));
                }
                // The completion queue is full: reap some completions to make room later.
                // Their processing may queue SQEs too, which this loop keeps submitting.
                self.reap()?;
            }
        }
    }

    fn apply(&mut self, i: usize, out: Outcome, now: Instant) -> io::Result<()> {
        match out {
            Outcome::Ok => Ok(()),
            Outcome::Reconnect => {
                self.close(i, now)?;
                self.conns[i].backoff_ms = 0;
                self.open(i, now)
            }
            Outcome::Finished => {
                self.close(i, now)?;
                self.conns[i].phase = Phase::Done;
                self.live -= 1;
                connection_finished(&mut self.stats, now);
                Ok(())
            }
            Outcome::Fail(class, msg) => self.fail(i, now, class, msg),
        }
    }

    fn fail(&mut self, i: usize, now: Instant, class: ErrorClass, msg: String) -> io::Result<()> {
        self.stats.error(now, class, || msg);
        self.close(i, now)?;
        let c = &mut self.conns[i];
        c.phase = after_failure(self.p.replace_failed(), &mut c.backoff_ms, now);
        if matches!(c.phase, Phase::Done) {
            self.live -= 1;
        }
        Ok(())
    }

    fn close(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let connecting = matches!(c.phase, Phase::Connecting { .. });
        if connecting {
            self.connecting -= 1;
        }
        let had_socket = if let Some(sock) = c.sock.take() {
            // Ends a connect, an armed recv or a blocked send still holding the socket in the
            // kernel; without it the socket would stay open until the peer sent something.
            if c.recv_armed || connecting || self.p.sending(&c.proto) {
                let _ = sock.shutdown(std::net::Shutdown::Both);
            }
            self.graveyard.push(sock);
            true
        } else {
            false
        };
        self.p.reset(&mut c.proto);
        c.recv_armed = false;
        c.gen = c.gen.wrapping_add(1) & GEN_MASK;
        c.phase = Phase::Idle { retry_at: now };
        if had_socket {
            // Empty the slot too: the table holds its own reference to the socket, which would
            // otherwise keep it open (no FIN to the server) until the slot is reused.
            self.set_slot(i, -1)?;
        }
        Ok(())
    }

    /// Put `fd` (-1: nothing) in connection i's slot of the registered file table, in submission
    /// order (see `slot_fds`). Without a table, nothing to do.
    fn set_slot(&mut self, i: usize, fd: RawFd) -> io::Result<()> {
        match files_update(&mut self.slot_fds, i, fd) {
            Some(sqe) => self.push(sqe),
            None => Ok(()),
        }
    }

    fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let nodelay = self.p.nodelay();
        match new_socket(self.target, self.conns[i].source, nodelay) {
            Ok(sock) => {
                let fd: RawFd = sock.as_raw_fd();
                self.set_slot(i, fd)?;
                let fixed = self.slot_fds.is_some();
                let c = &mut self.conns[i];
                c.sock = Some(sock);
                c.phase = Phase::Connecting { since: now };
                self.connecting += 1;
                let (addr, len) = (self.target_sockaddr.as_ptr(), self.target_sockaddr.len());
                let sqe = if fixed {
                    opcode::Connect::new(types::Fixed(i as u32), addr, len).build()
                } else {
                    opcode::Connect::new(types::Fd(fd), addr, len).build()
                }
                .user_data(user_data(i, c.gen, OP_CONNECT));
                self.push(sqe)
            }
            Err(e) => {
                let (class, msg) = connect_failed(&e, self.target, self.conns[i].source);
                self.fail(i, now, class, msg)
            }
        }
    }

    fn sweep(&mut self, now: Instant) -> io::Result<()> {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let busy_since = self.p.busy_since(&c.proto);
            match sweep_action(&c.phase, busy_since, now, self.timeout, self.target) {
                SweepAction::Fail(class, msg) => self.fail(i, now, class, msg)?,
                SweepAction::Reopen => self.open(i, now)?,
                SweepAction::Nothing => {}
            }
        }
        Ok(())
    }

    /// Stop everything the kernel still does for this thread before its memory is freed: shut the
    /// sockets down, cancel what is left synchronously, then unregister the buffer ring.
    fn shutdown(&mut self) {
        let sockets = self.conns.iter_mut().filter_map(|c| c.sock.take());
        shut_down_all(&mut self.ring, &mut self.bufs, sockets, &mut self.graveyard);
    }
}
