//! How the open loop's bytes move, behind one small trait (`OpenIo`), so the schedule (in
//! `load::open`: phases, backlog, pool, drain, accounting) exists once and runs on either engine:
//! `EpollOpen` here (mio readiness + a timerfd for sub-millisecond wake-ups) or
//! `uring::open::UringOpen` (sends as SQEs, multishot receives into a provided-buffer ring, waits
//! bounded by io_uring_enter's own timeout).
//!
//! The backend owns the sockets of the worker's connection slots (slot i is the worker's slot i)
//! and only moves bytes: it never decides when a request goes out nor what an answer means. The
//! worker keeps each slot's `ExchangeConn` and hands it in when bytes are to be sent or received.
//!
//! Events carry no socket: an event that arrives for a socket the worker has closed since (the
//! batch was collected before, or the kernel completed an operation late) is dropped by the
//! backend, which tracks a generation per slot, so the worker never sees a stale one.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::exchange::{Exchange, ExchangeConn, Outcome};
use crate::io::http::{self, WriteState};
use crate::io::worker::{connect_readiness, open_registered, ConnectEvent, Readiness};
use crate::stats::{ErrorClass, ThreadStats};
use crate::sys;

/// What happened on one connection slot.
#[derive(Debug)]
pub enum IoEvent<R> {
    /// The connect completed: the slot may carry requests.
    Connected,
    /// The connect or a send/receive failed (the message is the same on both engines).
    Failed(ErrorClass, String),
    /// The socket takes more bytes (epoll: its writable edge; io_uring: a staged send completed):
    /// `OpenIo::flush` writes the rest of a partial send, or what was staged meanwhile.
    Writable,
    /// Bytes (or the peer's close) arrived: `OpenIo::receive` hands them to the exchange.
    Readable(R),
}

/// One thread's open-loop I/O: its sockets, and its way of waiting for events or a time.
pub trait OpenIo: Sized {
    /// What a readable event carries to `receive` (epoll: whether the peer closed; io_uring: the
    /// completed receive).
    type Ready: Copy;

    /// A slot beyond the current ones (a `--conn-rate` thread grows up to its connection cap).
    fn add_slot(&mut self);

    /// Start connecting slot `i` (closed) to the target; `IoEvent::Connected` or `Failed` follows.
    /// An error here (no socket could be made) comes with its class and message.
    fn open(
        &mut self,
        i: usize,
        source: Option<SocketAddr>,
        nodelay: bool,
    ) -> Result<(), (ErrorClass, String)>;

    /// Close slot `i`'s socket (if any); whatever was pending on it is dropped.
    fn close(&mut self, i: usize);

    /// Send the first `len` bytes of `ex.wire(c)` (a request the exchange just started) on open
    /// slot `i`.
    fn send(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        len: usize,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome;

    /// The socket became writable: write what a previous `send` left over.
    fn flush(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome;

    /// Hand what arrived on slot `i` to the exchange (responses parsed, judged, counted).
    fn receive(
        &mut self,
        i: usize,
        ready: Self::Ready,
        ex: &mut Exchange,
        c: &mut ExchangeConn,
        stats: &mut ThreadStats,
    ) -> Outcome;

    /// Push queued work to the kernel and wait for events until `until` (None: do not sleep, only
    /// look). True if any event came; take them with `next_event`.
    fn wait(&mut self, until: Option<Instant>) -> io::Result<bool>;

    /// The next event of the last wait, stale ones skipped.
    fn next_event(&mut self) -> Option<(usize, IoEvent<Self::Ready>)>;
}

const TIMER_TOKEN: Token = Token(usize::MAX);
const EVENTS_CAPACITY: usize = 1024;
/// A timed wait also bounds epoll_wait itself by this much past its target: if the timerfd ever
/// failed to fire, the loop would be late by this, not stuck.
const WAIT_BOUND_SLACK: Duration = Duration::from_millis(20);

/// One slot's socket on the epoll engine and the part of its request still to be written.
struct EpollSlot {
    sock: Option<TcpStream>,
    /// The connect is in progress (the next event says how it ended).
    connecting: bool,
    gen: u32,
    w: WriteState,
}

/// The open loop on epoll: one edge-triggered mio `Poll` per thread with every socket registered
/// once for READABLE | WRITABLE, and a timerfd in the same set for wake-ups finer than epoll's
/// millisecond timeout.
pub struct EpollOpen {
    poll: Poll,
    timer: sys::TimerFd,
    events: Events,
    /// The last wait's socket events, taken in order by `next_event`.
    ready: Vec<(usize, Readiness)>,
    next_ready: usize,
    /// One readiness event splits into several `IoEvent`s (connected, writable, readable); they
    /// wait here, with the generation they belong to.
    pending: VecDeque<(usize, u32, IoEvent<bool>)>,
    slots: Vec<EpollSlot>,
    target: SocketAddr,
    scratch: Vec<u8>,
}

impl EpollOpen {
    pub fn new(target: SocketAddr, slots: usize) -> io::Result<Self> {
        let poll = Poll::new()?;
        let timer = sys::TimerFd::new()?;
        poll.registry().register(
            &mut SourceFd(&timer.raw_fd()),
            TIMER_TOKEN,
            Interest::READABLE,
        )?;
        let mut e = EpollOpen {
            poll,
            timer,
            events: Events::with_capacity(EVENTS_CAPACITY),
            ready: Vec::with_capacity(EVENTS_CAPACITY),
            next_ready: 0,
            pending: VecDeque::new(),
            slots: Vec::new(),
            target,
            scratch: http::scratch_buffer(),
        };
        for _ in 0..slots {
            e.add_slot();
        }
        Ok(e)
    }

    /// Split slot `i`'s readiness into events, in the order the worker must see them: the connect
    /// first, then room to write, then bytes to read.
    fn split(&mut self, i: usize, r: Readiness) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(sock) = slot.sock.as_ref() else {
            return;
        };
        let gen = slot.gen;
        if slot.connecting {
            match connect_readiness(&r, sock, self.target) {
                ConnectEvent::Pending => return,
                ConnectEvent::Failed(class, msg) => {
                    self.pending
                        .push_back((i, gen, IoEvent::Failed(class, msg)));
                    return;
                }
                ConnectEvent::Connected => {
                    slot.connecting = false;
                    self.pending.push_back((i, gen, IoEvent::Connected));
                }
            }
        } else if r.writable {
            self.pending.push_back((i, gen, IoEvent::Writable));
        }
        if r.readable || r.read_closed || r.error {
            self.pending
                .push_back((i, gen, IoEvent::Readable(r.read_closed)));
        }
    }
}

impl OpenIo for EpollOpen {
    /// Whether the event also reported the peer's FIN (see `http::read_responses`).
    type Ready = bool;

    fn add_slot(&mut self) {
        self.slots.push(EpollSlot {
            sock: None,
            connecting: false,
            gen: 0,
            w: WriteState::default(),
        });
    }

    fn open(
        &mut self,
        i: usize,
        source: Option<SocketAddr>,
        nodelay: bool,
    ) -> Result<(), (ErrorClass, String)> {
        let sock = open_registered(&self.poll, Token(i), self.target, source, nodelay)?;
        let slot = &mut self.slots[i];
        slot.sock = Some(sock);
        slot.connecting = true;
        Ok(())
    }

    fn close(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        // Closing the fd also removes it from the epoll set.
        slot.sock = None;
        slot.connecting = false;
        slot.gen = slot.gen.wrapping_add(1);
        slot.w.clear();
    }

    fn send(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        len: usize,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        self.slots[i].w.begin(len);
        self.flush(i, ex, c, now, stats)
    }

    fn flush(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        let slot = &mut self.slots[i];
        let Some(sock) = slot.sock.as_mut() else {
            return Outcome::Ok;
        };
        http::flush(ex, c, &mut slot.w, sock, now, stats)
    }

    fn receive(
        &mut self,
        i: usize,
        peer_closed: bool,
        ex: &mut Exchange,
        c: &mut ExchangeConn,
        stats: &mut ThreadStats,
    ) -> Outcome {
        let slot = &mut self.slots[i];
        let Some(sock) = slot.sock.as_mut() else {
            return Outcome::Ok;
        };
        http::read_responses(
            ex,
            c,
            &mut slot.w,
            sock,
            &mut self.scratch,
            stats,
            peer_closed,
            http::send_frames_owed,
        )
    }

    fn wait(&mut self, until: Option<Instant>) -> io::Result<bool> {
        let timeout = match until {
            None => Some(Duration::ZERO),
            Some(at) => {
                // Re-armed for every wait (a no-op when already armed for `at`): a wake-up before
                // the target leaves no timer armed otherwise.
                self.timer.arm_at(at)?;
                Some(at.saturating_duration_since(Instant::now()) + WAIT_BOUND_SLACK)
            }
        };
        self.ready.clear();
        self.next_ready = 0;
        self.pending.clear();
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(e),
        }
        for ev in self.events.iter() {
            if ev.token() == TIMER_TOKEN {
                self.timer.expired();
            } else {
                self.ready.push((ev.token().0, Readiness::of(ev)));
            }
        }
        Ok(!self.events.is_empty())
    }

    fn next_event(&mut self) -> Option<(usize, IoEvent<bool>)> {
        loop {
            if let Some((i, gen, ev)) = self.pending.pop_front() {
                // Stale: the worker closed (and maybe reopened) the slot since.
                if self.slots[i].gen == gen && self.slots[i].sock.is_some() {
                    return Some((i, ev));
                }
                continue;
            }
            // One slot's readiness at a time: its events are handled before the next slot's.
            let (i, r) = *self.ready.get(self.next_ready)?;
            self.next_ready += 1;
            self.split(i, r);
        }
    }
}
