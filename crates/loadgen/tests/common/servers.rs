//! The plumbing under every test server: a listener, an accept loop that gives each connection
//! its own thread, the counters a test reads afterwards, and the stop that dropping the handle
//! triggers.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::Request;

/// No server thread outlives this, whatever the generator does.
pub const SERVER_LIFETIME: Duration = Duration::from_secs(60);
/// How often blocked server reads wake up to look at the stop flag.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A loopback port with nothing listening on it, for the tests of what a refused connect gives.
///
/// Drawn from outside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), as the
/// orchestrator's `netarena.ports.free_port` does: the generator's own connects take their source
/// ports from that range, and a connect to 127.0.0.1:P from source port P connects the socket to
/// itself (TCP simultaneous open) instead of being refused. With the kernel's choice for a bind to
/// port 0 that is unlikely (connects prefer even ports, such binds get odd ones) but possible;
/// outside the range it cannot happen, and a concurrent test's bind to port 0 cannot take the port
/// either. Falls back to the kernel's choice only when the range covers every unprivileged port.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    const UNPRIVILEGED_PORT_FLOOR: u32 = 1024;
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut fields = text.split_whitespace().map(|f| f.parse::<u32>().ok());
            Some((fields.next()??, fields.next()??))
        })
        .filter(|&(low, high)| 0 < low && low <= high && high <= 65535)
        .unwrap_or((UNPRIVILEGED_PORT_FLOOR, 65535));
    let below = low.saturating_sub(UNPRIVILEGED_PORT_FLOOR);
    let above = 65535 - high;
    for attempt in 0..if below + above > 0 { 64u64 } else { 0 } {
        // RandomState is seeded per process: a different sequence in each test binary.
        let pick = (RandomState::new().hash_one(attempt) % u64::from(below + above)) as u32;
        let port = if pick < below {
            UNPRIVILEGED_PORT_FLOOR + pick
        } else {
            high + 1 + (pick - below)
        };
        if TcpListener::bind(("0.0.0.0", port as u16)).is_ok() {
            return port as u16;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[derive(Default)]
pub struct Stats {
    pub connections: AtomicU64,
    /// Complete requests read (HTTP only).
    pub requests: AtomicU64,
    /// Correct responses written in full (echo: connections served to the end without a fault).
    pub good: AtomicU64,
    /// Times the server misbehaved on purpose.
    pub misbehaved: AtomicU64,
    /// Echo servers: bytes written back over all connections.
    pub echoed_bytes: AtomicU64,
    /// The first requests seen, for checking what the generator sends.
    pub first_requests: Mutex<Vec<Request>>,
    /// Requests per connection, in accept order.
    pub per_connection: Mutex<Vec<u64>>,
    /// The first `ECHO_PREFIX_BYTES` bytes each echo connection sent, in accept order.
    pub echo_prefixes: Mutex<Vec<Vec<u8>>>,
    /// Echo servers: the most connections open at once (the scale test's proof that the generator
    /// really held all of them).
    pub peak_connections: AtomicU64,
    /// The scripted HTTP/2 server holding its answers (`H2Fault::AnswerAfter`): the most requests
    /// one connection had unanswered at once (streams in flight as the server saw them).
    pub peak_streams: AtomicU64,
}

impl Stats {
    pub fn good(&self) -> u64 {
        self.good.load(Ordering::SeqCst)
    }
    pub fn misbehaved(&self) -> u64 {
        self.misbehaved.load(Ordering::SeqCst)
    }
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
    pub fn echoed_bytes(&self) -> u64 {
        self.echoed_bytes.load(Ordering::SeqCst)
    }
    pub fn peak_connections(&self) -> u64 {
        self.peak_connections.load(Ordering::SeqCst)
    }
    pub fn peak_streams(&self) -> u64 {
        self.peak_streams.load(Ordering::SeqCst)
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Accepts every connection and runs `conn` for it on its own thread; `max_accepts` limits how
    /// many are ever accepted (the rest stay in the kernel's backlog or are refused by it).
    pub fn start<F>(listener: TcpListener, max_accepts: Option<u64>, conn: F) -> TestServer
    where
        F: Fn(TcpStream, u64, &ConnCtx) + Send + Sync + 'static,
    {
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let conn = Arc::new(conn);
        let (stats2, stop2) = (stats.clone(), stop.clone());
        let born = Instant::now();
        let acceptor = thread::spawn(move || {
            let mut accepted = 0u64;
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) || born.elapsed() > SERVER_LIFETIME {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let index = accepted;
                accepted += 1;
                stats2.connections.fetch_add(1, Ordering::SeqCst);
                stats2.per_connection.lock().unwrap().push(0);
                let ctx = ConnCtx {
                    stats: stats2.clone(),
                    stop: stop2.clone(),
                    born,
                    index,
                };
                let conn = conn.clone();
                thread::spawn(move || {
                    let _ = stream.set_nodelay(true);
                    let _ = stream.set_read_timeout(Some(POLL_INTERVAL));
                    conn(stream, index, &ctx);
                });
                if max_accepts.is_some_and(|m| accepted >= m) {
                    // Keep the listener open but never accept again: later connects pile up in the
                    // backlog, which is the point of the "stops accepting" case.
                    while !stop2.load(Ordering::SeqCst) && born.elapsed() < SERVER_LIFETIME {
                        thread::sleep(POLL_INTERVAL);
                    }
                    return;
                }
            }
        });
        TestServer::running(addr, stats, stop, acceptor)
    }

    /// The handle of a server whose own thread (`serve`) accepts and serves on `addr`; it must end
    /// once `stop` is set or `SERVER_LIFETIME` has passed.
    pub(super) fn running(
        addr: SocketAddr,
        stats: Arc<Stats>,
        stop: Arc<AtomicBool>,
        serve: thread::JoinHandle<()>,
    ) -> TestServer {
        TestServer {
            addr,
            stats,
            stop,
            acceptor: Some(serve),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake a blocking accept() so the acceptor sees the stop flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

pub struct ConnCtx {
    pub stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    born: Instant,
    pub index: u64,
}

impl ConnCtx {
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.born.elapsed() > SERVER_LIFETIME
    }

    /// Reads until the peer closes (or the server stops), discarding data: lets the client be the
    /// one to close, so our close sends a FIN rather than an RST for unread bytes.
    pub fn hold_until_peer_closes(&self, stream: &mut TcpStream) {
        let mut buf = [0u8; 4096];
        while !self.should_stop() {
            match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if is_poll_timeout(&e) => {}
                Err(_) => return,
            }
        }
    }
}

pub fn is_poll_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends an RST instead of a FIN: SO_LINGER with a zero timeout, then close.
pub fn reset(stream: TcpStream) {
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(stream);
}

/// A listener with the given accept backlog (std always asks for 128).
pub fn listener_with_backlog(backlog: i32) -> TcpListener {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(backlog).unwrap();
    s.into()
}

pub fn loopback_listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}
