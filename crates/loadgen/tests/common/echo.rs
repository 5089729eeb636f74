//! The one echo test server. It serves on a single thread with mio (edge-triggered epoll), because
//! the scale test holds 19,000 connections at once, which a thread per connection would not
//! survive; `EchoFault` makes it misbehave on one connection, or on every one. A second thread does
//! nothing but accept: see `accept_loop`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mio::net::{TcpListener as MioListener, TcpStream as MioStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::{listener_with_backlog, Stats, TestServer, SERVER_LIFETIME};

/// How much of each connection's stream the server keeps (`Stats::echo_prefixes`).
pub const ECHO_PREFIX_BYTES: usize = 4096;

/// The generator opens its connections up to a thousand handshakes at a time per thread; a short
/// accept queue (std asks for 128) would drop SYNs and slow the scale test down to TCP's retries.
const ECHO_BACKLOG: i32 = 4096;

/// The accept thread's listener, in its own poll.
const LISTENER: Token = Token(usize::MAX);
/// The serving thread's poll: the accept thread has handed over connections.
const ACCEPTED: Token = Token(usize::MAX - 1);

#[derive(Clone, Copy, Debug)]
pub enum EchoFault {
    None,
    /// Flip one bit of the byte at `offset` of the echo: on connection `conn` (accept order,
    /// counting from 0), or on every connection with `conn: None`.
    CorruptByte {
        conn: Option<u64>,
        offset: u64,
    },
    /// On connection `conn`, read exactly `read_bytes`, echo the first `echo_bytes` of them, then
    /// close with a FIN (everything sent was read, so the kernel does not turn it into an RST).
    CloseEarly {
        conn: u64,
        read_bytes: u64,
        echo_bytes: u64,
    },
}

impl EchoFault {
    /// The stream offset to corrupt on connection `index`, if any.
    fn corrupt_at(self, index: u64) -> Option<u64> {
        match self {
            EchoFault::CorruptByte { conn, offset } if conn.is_none_or(|c| c == index) => {
                Some(offset)
            }
            _ => None,
        }
    }

    /// `(read_bytes, echo_bytes)` if connection `index` is the one to close early.
    fn close_early(self, index: u64) -> Option<(u64, u64)> {
        match self {
            EchoFault::CloseEarly {
                conn,
                read_bytes,
                echo_bytes,
            } if conn == index => Some((read_bytes, echo_bytes)),
            _ => None,
        }
    }
}

struct EchoConn {
    stream: MioStream,
    /// Accept order, counting from 0: how `EchoFault` and `Stats::echo_prefixes` name connections.
    index: u64,
    /// Bytes read so far.
    offset: u64,
    /// Read but not yet written back: the socket would have blocked.
    pending: Vec<u8>,
    /// `(read_bytes, echo_bytes)` of a `CloseEarly` fault on this connection.
    close_early: Option<(u64, u64)>,
    /// The early FIN is sent; from then on reads are discarded until the peer closes, so that our
    /// close is not an RST for unread bytes.
    closed_early: bool,
}

/// An echo server on 127.0.0.1; `Stats` counts connections, echoed bytes, deliberate faults and
/// the most connections open at once, and keeps each connection's first bytes.
pub fn echo_server(fault: EchoFault) -> TestServer {
    raise_fd_limit();
    let std_listener = listener_with_backlog(ECHO_BACKLOG);
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut poll = Poll::new().unwrap();
    let waker = Waker::new(poll.registry(), ACCEPTED).unwrap();
    let (accepted, handed_over) = mpsc::channel();
    let stop_accepting = stop.clone();
    thread::spawn(move || accept_loop(std_listener, accepted, waker, stop_accepting));
    let (stats2, stop2) = (stats.clone(), stop.clone());
    let serve = thread::spawn(move || {
        let born = Instant::now();
        let mut conns: HashMap<usize, EchoConn> = HashMap::new();
        let mut events = Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 * 1024];
        while !stop2.load(Ordering::SeqCst) && born.elapsed() < SERVER_LIFETIME {
            // A short wait, so that a dropped server notices its stop flag at once.
            poll.poll(&mut events, Some(Duration::from_millis(20))).ok();
            for ev in events.iter() {
                if ev.token() == ACCEPTED {
                    register_accepted(&handed_over, &poll, &mut conns, &stats2, fault);
                    continue;
                }
                let id = ev.token().0;
                let Some(c) = conns.get_mut(&id) else {
                    continue;
                };
                if !serve_connection(c, &mut buf, fault, &stats2) {
                    if !c.closed_early {
                        stats2.good.fetch_add(1, Ordering::SeqCst);
                    }
                    conns.remove(&id);
                }
            }
        }
    });
    TestServer::running(addr, stats, stop, serve)
}

/// Accepts as fast as the kernel completes handshakes and hands each connection to the serving
/// thread. Accepting there, between the echoes of thousands of connections, let the accept queue
/// fill while the scale test opened its connections: the kernel then drops the handshakes' last
/// ACKs, keeps those requests in the SYN queue and, once that queue is long, prunes some of them, so
/// a connection the generator already saw established is answered with an RST when it first sends.
fn accept_loop(
    listener: std::net::TcpListener,
    accepted: Sender<MioStream>,
    waker: Waker,
    stop: Arc<AtomicBool>,
) {
    let born = Instant::now();
    let mut poll = Poll::new().unwrap();
    let mut listener = MioListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .unwrap();
    let mut events = Events::with_capacity(8);
    while !stop.load(Ordering::SeqCst) && born.elapsed() < SERVER_LIFETIME {
        poll.poll(&mut events, Some(Duration::from_millis(20))).ok();
        // Until the queue is empty: the listener is edge-triggered, it reports no more connections
        // until a new one arrives.
        let mut any = false;
        while let Ok((stream, _)) = listener.accept() {
            if accepted.send(stream).is_err() {
                return; // the serving thread has ended
            }
            any = true;
        }
        if any {
            waker.wake().ok();
        }
    }
}

/// Registers what the accept thread handed over, in accept order.
fn register_accepted(
    handed_over: &Receiver<MioStream>,
    poll: &Poll,
    conns: &mut HashMap<usize, EchoConn>,
    stats: &Stats,
    fault: EchoFault,
) {
    for mut stream in handed_over.try_iter() {
        stream.set_nodelay(true).ok();
        let index = stats.connections.fetch_add(1, Ordering::SeqCst);
        poll.registry()
            .register(
                &mut stream,
                Token(index as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .unwrap();
        stats.echo_prefixes.lock().unwrap().push(Vec::new());
        conns.insert(
            index as usize,
            EchoConn {
                stream,
                index,
                offset: 0,
                pending: Vec::new(),
                close_early: fault.close_early(index),
                closed_early: false,
            },
        );
        stats
            .peak_connections
            .fetch_max(conns.len() as u64, Ordering::SeqCst);
    }
}

/// Writes back what is pending, then reads more, until the socket would block either way (it is
/// edge-triggered: no new event comes before that). False once the connection is over.
fn serve_connection(c: &mut EchoConn, buf: &mut [u8], fault: EchoFault, stats: &Stats) -> bool {
    loop {
        while !c.pending.is_empty() {
            match c.stream.write(&c.pending) {
                Ok(0) => return false,
                Ok(n) => {
                    c.pending.drain(..n);
                    stats.echoed_bytes.fetch_add(n as u64, Ordering::SeqCst);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        let mut want = buf.len();
        if let (Some((read_bytes, _)), false) = (c.close_early, c.closed_early) {
            if c.offset >= read_bytes {
                // All of the echo that is ever going to be sent has been: FIN.
                let _ = c.stream.shutdown(Shutdown::Write);
                c.closed_early = true;
                stats.misbehaved.fetch_add(1, Ordering::SeqCst);
            } else {
                // Exactly read_bytes, no more: the rest stays unread until the FIN is out.
                want = want.min((read_bytes - c.offset) as usize);
            }
        }
        let n = match c.stream.read(&mut buf[..want]) {
            Ok(0) => return false,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        };
        if c.closed_early {
            continue;
        }
        let data = &mut buf[..n];
        // Kept as sent, before any corruption: the test checks what the generator sent.
        if c.offset < ECHO_PREFIX_BYTES as u64 {
            let mut prefixes = stats.echo_prefixes.lock().unwrap();
            let prefix = &mut prefixes[c.index as usize];
            let take = n.min(ECHO_PREFIX_BYTES - prefix.len());
            prefix.extend_from_slice(&data[..take]);
        }
        if let Some(at) = fault.corrupt_at(c.index) {
            if (c.offset..c.offset + n as u64).contains(&at) {
                data[(at - c.offset) as usize] ^= 0x01;
                stats.misbehaved.fetch_add(1, Ordering::SeqCst);
            }
        }
        let echo_end = match c.close_early {
            Some((_, echo_bytes)) => (c.offset + n as u64).min(echo_bytes).max(c.offset),
            None => c.offset + n as u64,
        };
        c.pending
            .extend_from_slice(&data[..(echo_end - c.offset) as usize]);
        c.offset += n as u64;
    }
}

/// The server's connections are descriptors of this test process: the scale test needs 19,000.
fn raise_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur = rl.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
    }
}
