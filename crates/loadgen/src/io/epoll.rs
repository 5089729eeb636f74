//! The epoll engine: one edge-triggered mio `Poll` per thread and a flat vector of connection slots.
//!
//! A socket is registered once, for READABLE | WRITABLE, and never re-registered: requests are
//! written straight after the previous response is parsed (the socket is almost always writable),
//! and the writable edge only matters after a partial write. What travels on the connection is the
//! `Protocol`'s business (HTTP or echo); the engine owns connecting, timeouts, failures and
//! replacement (with the pieces every engine shares, `io::worker`).
//!
//! Timeouts need no per-request timers: every `SWEEP_INTERVAL` the loop walks its slots and compares
//! the start of the outstanding work with `--timeout`.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Poll, Token};

use crate::exchange::Outcome;
use crate::io::worker::{
    after_failure, connect_event, connection_finished, open_registered, ramp_room, sweep_action,
    ConnRules, ConnectEvent, LoopClock, Phase, SweepAction, WorkerConfig, WorkerResult,
    MAX_RAMP_CONNECTING,
};
use crate::stats::{ErrorClass, ThreadStats};

const EVENTS_CAPACITY: usize = 1024;

/// One way of using a connection (HTTP or echo) on epoll: its rules (`ConnRules`) and its reads
/// and writes; wrk's `struct sock`, as a trait the loop is compiled for, so the hot path has no
/// dynamic dispatch.
pub trait Protocol: ConnRules {
    fn on_connected(
        &mut self,
        c: &mut Self::Conn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome;
    fn on_writable(
        &mut self,
        c: &mut Self::Conn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome;
    /// `peer_closed`: the event also reported the peer's FIN (EPOLLRDHUP/HUP). A short read only
    /// proves the data is drained, not that the EOF was seen, so then read on until 0 or EAGAIN.
    fn on_readable(
        &mut self,
        c: &mut Self::Conn,
        sock: &mut TcpStream,
        now: Instant,
        stats: &mut ThreadStats,
        peer_closed: bool,
    ) -> Outcome;
}

struct Slot<C> {
    sock: Option<TcpStream>,
    phase: Phase,
    backoff_ms: u32,
    source: Option<SocketAddr>,
    conn: C,
}

struct Worker<P: Protocol> {
    proto: P,
    poll: Poll,
    slots: Vec<Slot<P::Conn>>,
    stats: ThreadStats,
    target: SocketAddr,
    timeout: Duration,
    nodelay: bool,
    /// Slots not Done.
    live: usize,
    /// Slots in Phase::Connecting.
    connecting: usize,
}

/// Run one thread's share of the load until its end condition; returns its measurements.
pub fn run_worker<P: Protocol>(cfg: WorkerConfig, proto: P) -> io::Result<WorkerResult> {
    cfg.conns.pin_this_thread()?;
    let stats = cfg.new_stats();
    let slots = (0..cfg.conns.connections)
        .map(|k| {
            let source = cfg.conns.source_for(k);
            Slot {
                sock: None,
                phase: Phase::New,
                backoff_ms: 0,
                source,
                conn: proto.new_conn(cfg.conns.first_conn + k),
            }
        })
        .collect();
    let nodelay = proto.nodelay();
    let w = Worker {
        proto,
        poll: Poll::new()?,
        slots,
        stats,
        target: cfg.conns.target,
        timeout: cfg.conns.timeout,
        nodelay,
        live: cfg.conns.connections,
        connecting: 0,
    };
    w.run(cfg.measure_start, cfg.measure_end, cfg.conns.cpu)
}

impl<P: Protocol> Worker<P> {
    fn run(
        mut self,
        measure_start: Instant,
        measure_end: Option<Instant>,
        cpu: Option<usize>,
    ) -> io::Result<WorkerResult> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        let mut clock = LoopClock::new(measure_start, measure_end);
        let mut never_opened = 0..self.slots.len();
        let stopped_at = loop {
            let now = Instant::now();
            let ramping = !never_opened.is_empty();
            for i in never_opened.by_ref().take(ramp_room(self.connecting)) {
                self.open(i, now);
            }
            clock.tick(now);
            if clock.past_end(now) || self.live == 0 || self.proto.thread_done(&self.stats) {
                break now;
            }
            if clock.sweep_due(now) {
                self.sweep(now);
            }
            let wait = clock.wait(now, ramping && self.connecting < MAX_RAMP_CONNECTING);
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in events.iter() {
                self.on_event(ev.token().0, ev);
            }
        };
        let conns = self.slots.iter().map(|s| (s.phase, &s.conn));
        clock.finish(&self.proto, conns, stopped_at, &mut self.stats);
        Ok(clock.result(self.stats, cpu, stopped_at, None))
    }

    fn on_event(&mut self, i: usize, ev: &mio::event::Event) {
        let now = Instant::now();
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(sock) = slot.sock.as_mut() else {
            return;
        };
        let out = match slot.phase {
            Phase::Connecting { .. } => match connect_event(ev, sock, self.target) {
                ConnectEvent::Failed(class, msg) => Outcome::Fail(class, msg),
                ConnectEvent::Pending => Outcome::Ok,
                ConnectEvent::Connected => {
                    slot.phase = Phase::Open;
                    self.connecting -= 1;
                    self.stats.connection_opened(now);
                    let mut out =
                        self.proto
                            .on_connected(&mut slot.conn, sock, now, &mut self.stats);
                    if matches!(out, Outcome::Ok) && (ev.is_readable() || ev.is_read_closed()) {
                        out = self.proto.on_readable(
                            &mut slot.conn,
                            sock,
                            now,
                            &mut self.stats,
                            ev.is_read_closed(),
                        );
                    }
                    out
                }
            },
            Phase::Open => {
                let mut out = Outcome::Ok;
                if ev.is_writable() {
                    out = self
                        .proto
                        .on_writable(&mut slot.conn, sock, now, &mut self.stats);
                }
                if matches!(out, Outcome::Ok)
                    && (ev.is_readable() || ev.is_read_closed() || ev.is_error())
                {
                    out = self.proto.on_readable(
                        &mut slot.conn,
                        sock,
                        now,
                        &mut self.stats,
                        ev.is_read_closed(),
                    );
                    slot.backoff_ms = 0;
                }
                out
            }
            Phase::New | Phase::Idle { .. } | Phase::Done => Outcome::Ok,
        };
        self.apply(i, out, now);
    }

    fn apply(&mut self, i: usize, out: Outcome, now: Instant) {
        match out {
            Outcome::Ok => {}
            Outcome::Reconnect => {
                self.close(i);
                self.slots[i].backoff_ms = 0;
                self.open(i, now);
            }
            Outcome::Finished => {
                self.close(i);
                self.slots[i].phase = Phase::Done;
                self.live -= 1;
                connection_finished(&mut self.stats, now);
            }
            Outcome::Fail(class, msg) => self.fail(i, now, class, msg),
        }
    }

    fn fail(&mut self, i: usize, now: Instant, class: ErrorClass, msg: String) {
        self.stats.error(now, class, || msg);
        self.close(i);
        let slot = &mut self.slots[i];
        slot.phase = after_failure(self.proto.replace_failed(), &mut slot.backoff_ms, now);
        if matches!(slot.phase, Phase::Done) {
            self.live -= 1;
        }
    }

    fn close(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        if matches!(slot.phase, Phase::Connecting { .. }) {
            self.connecting -= 1;
        }
        self.proto.reset(&mut slot.conn);
        // Closing the fd also removes it from the epoll set: no deregister syscall needed.
        slot.sock = None;
        slot.phase = Phase::Idle {
            retry_at: Instant::now(),
        };
    }

    fn open(&mut self, i: usize, now: Instant) {
        let slot = &mut self.slots[i];
        match open_registered(&self.poll, Token(i), self.target, slot.source, self.nodelay) {
            Ok(sock) => {
                slot.sock = Some(sock);
                slot.phase = Phase::Connecting { since: now };
                self.connecting += 1;
            }
            Err((class, message)) => self.fail(i, now, class, message),
        }
    }

    fn sweep(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            let busy_since = self.proto.busy_since(&slot.conn);
            match sweep_action(&slot.phase, busy_since, now, self.timeout, self.target) {
                SweepAction::Fail(class, msg) => self.fail(i, now, class, msg),
                SweepAction::Reopen => self.open(i, now),
                SweepAction::Nothing => {}
            }
        }
    }
}
