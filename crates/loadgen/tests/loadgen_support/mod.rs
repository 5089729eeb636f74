//! Real servers on 127.0.0.1 (port 0) for the contract and scale tests, and a runner for the real
//! `netarena-load` binary with a hard time limit. Every server stops when its handle is dropped.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use mio::net::{TcpListener as MioListener, TcpStream as MioStream};
use mio::{Events, Interest, Poll, Token};

// One runner for every test binary: the adversarial tests' (a hard time limit, both pipes drained).
#[path = "../common/mod.rs"]
pub mod common;
#[allow(unused_imports)]
// not every test binary that includes this module runs the generator itself
pub use common::{free_port, io_args, run_load, spawn_load, LoadRun};

pub fn validate_against_schema(doc: &serde_json::Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/schema/netarena-load.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read the schema"))
            .expect("schema is JSON");
    let validator =
        jsonschema::draft202012::new(&schema).expect("the schema is a valid draft 2020-12 schema");
    let problems: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "output violates the schema:\n{}\n{doc:#}",
        problems.join("\n")
    );
}

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

fn listener() -> std::net::TcpListener {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(4096).unwrap();
    s.into()
}

pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Requests (http) or connections accepted (echo).
    pub count: Arc<AtomicU64>,
    /// Largest number of connections open at once (echo).
    pub peak_connections: Arc<AtomicUsize>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

/// Single-threaded edge-triggered echo server. With `corrupt_at = Some(n)`, byte n of every
/// connection's stream comes back with its bits flipped.
pub fn echo_server(corrupt_at: Option<u64>) -> Server {
    raise_fd_limit();
    let std_listener: TcpListener = listener();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (stop2, count2, peak2) = (stop.clone(), count.clone(), peak.clone());
    let thread = thread::spawn(move || {
        struct Conn {
            s: MioStream,
            pending: Vec<u8>,
            offset: u64,
        }
        let mut poll = Poll::new().unwrap();
        let mut listener = MioListener::from_std(std_listener);
        const LISTENER: Token = Token(usize::MAX);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .unwrap();
        let mut conns: HashMap<usize, Conn> = HashMap::new();
        let mut next = 0usize;
        let mut events = Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 * 1024];
        while !stop2.load(Ordering::Relaxed) {
            poll.poll(&mut events, Some(Duration::from_millis(20))).ok();
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    loop {
                        match listener.accept() {
                            Ok((mut s, _)) => {
                                s.set_nodelay(true).ok();
                                poll.registry()
                                    .register(
                                        &mut s,
                                        Token(next),
                                        Interest::READABLE | Interest::WRITABLE,
                                    )
                                    .unwrap();
                                conns.insert(
                                    next,
                                    Conn {
                                        s,
                                        pending: Vec::new(),
                                        offset: 0,
                                    },
                                );
                                next += 1;
                                count2.fetch_add(1, Ordering::Relaxed);
                                peak2.fetch_max(conns.len(), Ordering::Relaxed);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(_) => break,
                        }
                    }
                    continue;
                }
                let id = ev.token().0;
                let Some(c) = conns.get_mut(&id) else {
                    continue;
                };
                // Flush what is pending, then read more, until the socket would block either way.
                let alive = 'service: loop {
                    while !c.pending.is_empty() {
                        match c.s.write(&c.pending) {
                            Ok(n) => {
                                c.pending.drain(..n);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 'service true,
                            Err(_) => break 'service false,
                        }
                    }
                    match c.s.read(&mut buf) {
                        Ok(0) => break false,
                        Ok(n) => {
                            if let Some(at) = corrupt_at {
                                if at >= c.offset && at < c.offset + n as u64 {
                                    buf[(at - c.offset) as usize] ^= 0xff;
                                }
                            }
                            c.offset += n as u64;
                            c.pending.extend_from_slice(&buf[..n]);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break true,
                        Err(_) => break false,
                    }
                };
                if !alive {
                    conns.remove(&id);
                }
            }
        }
    });
    Server {
        addr,
        stop,
        thread: Some(thread),
        count,
        peak_connections: peak,
    }
}

/// Thread-per-connection keep-alive HTTP server answering every request with `status` and `body`
/// (Content-Length framing). Counts requests.
pub fn http_server(status: u16, body: &'static [u8]) -> Server {
    let l = listener();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let (stop2, count2) = (stop.clone(), count.clone());
    let thread = thread::spawn(move || {
        let mut workers = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut s, _)) => {
                    let (stop3, count3) = (stop2.clone(), count2.clone());
                    workers.push(thread::spawn(move || {
                        s.set_nonblocking(false).ok();
                        s.set_nodelay(true).ok();
                        s.set_read_timeout(Some(Duration::from_millis(50))).ok();
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n",
                            body.len()
                        );
                        let mut buf = Vec::new();
                        let mut tmp = [0u8; 8192];
                        while !stop3.load(Ordering::Relaxed) {
                            match s.read(&mut tmp) {
                                Ok(0) => return,
                                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                                    ) =>
                                {
                                    continue
                                }
                                Err(_) => return,
                            }
                            // Requests in these tests have no body: each ends at an empty line.
                            let mut reply = Vec::new();
                            while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                buf.drain(..end + 4);
                                count3.fetch_add(1, Ordering::Relaxed);
                                reply.extend_from_slice(head.as_bytes());
                                reply.extend_from_slice(body);
                            }
                            if !reply.is_empty() && s.write_all(&reply).is_err() {
                                return;
                            }
                        }
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(2))
                }
                Err(_) => break,
            }
        }
        for w in workers {
            w.join().ok();
        }
    });
    Server {
        addr,
        stop,
        thread: Some(thread),
        count,
        peak_connections: Arc::new(AtomicUsize::new(0)),
    }
}
