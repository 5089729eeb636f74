//! Shared helpers for the adversarial integration tests: real servers on 127.0.0.1 (port 0) that
//! misbehave on purpose, and a runner for the real `netarena-load` binary with a hard time limit.
//!
//! Servers are thread-per-connection on std::net: the tests use a handful of connections, and plain
//! blocking code makes each misbehaviour (split writes, RST, FIN at a chosen byte) exact and obvious.
//! Every thread is bounded by `SERVER_LIFETIME` so a broken generator cannot hang the test binary.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// No server thread outlives this, whatever the generator does.
pub const SERVER_LIFETIME: Duration = Duration::from_secs(60);
/// How often blocked server reads wake up to look at the stop flag.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

pub const ERROR_CLASSES: [&str; 13] = [
    "connect_refused",
    "connect_timeout",
    "connect_error",
    "address_unavailable",
    "too_many_open_files",
    "reset",
    "closed_early",
    "read_error",
    "write_error",
    "timeout",
    "parse_error",
    "status",
    "verification_mismatch",
];

pub const HELLO: &[u8] = b"Hello, World!";

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Running the generator
// ---------------------------------------------------------------------------------------------

pub struct LoadRun {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

impl LoadRun {
    /// Context for assertion messages: what was run and everything it printed.
    pub fn describe(&self) -> String {
        format!(
            "netarena-load {}\nexit code {} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.code,
            self.wall,
            self.stdout,
            self.stderr
        )
    }

    /// The JSON document on stdout, whatever the exit code (a failed threshold or an interrupted
    /// run still prints its result).
    pub fn stdout_json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e})\n{}", self.describe())
        })
    }

    /// The result document as printed (exit 0 required), without further checks.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.code,
            0,
            "expected exit 0 with a JSON result\n{}",
            self.describe()
        );
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e})\n{}", self.describe())
        })
    }

    /// The result document, after checking the invariants every result must satisfy.
    pub fn result(&self) -> Result {
        let r = Result {
            doc: self.json(),
            context: self.describe(),
        };
        r.check_invariants();
        // The engine asked for (by the test or by NETARENA_LOAD_TEST_IO) is the engine that ran;
        // without --io, auto, which names the engine it chose and why.
        if r.get("/mode").as_str() == Some("http") {
            let asked = self
                .args
                .iter()
                .position(|a| a == "--io")
                .map_or("auto", |k| self.args[k + 1].as_str());
            assert_eq!(
                r.get("/config/io_requested").as_str(),
                Some(asked),
                "{}",
                r.context
            );
            if asked != "auto" {
                assert_eq!(
                    r.get("/config/io_backend").as_str(),
                    Some(asked),
                    "the run used another engine than asked\n{}",
                    r.context
                );
            }
            assert!(
                !r.get("/config/io_reason")
                    .as_str()
                    .unwrap_or_default()
                    .is_empty(),
                "{}",
                r.context
            );
        }
        r
    }
}

/// `NETARENA_LOAD_TEST_IO=uring cargo test` runs every `http` scenario with `--io uring`, so the
/// same servers and assertions check both engines; words after the engine are passed on too
/// (`NETARENA_LOAD_TEST_IO="uring --coalesce-us 50"`).
pub fn io_args(args: &[&str]) -> Vec<String> {
    let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Ok(io) = std::env::var("NETARENA_LOAD_TEST_IO") {
        // Open-loop runs keep the epoll engine (uring drives the closed loop only).
        let open_loop = args
            .iter()
            .any(|a| matches!(*a, "--rate" | "--conn-rate" | "--steps" | "--find-max"));
        if args.first() == Some(&"http")
            && !open_loop
            && !args.contains(&"--io")
            && !args.contains(&"--coalesce-us")
        {
            full.push("--io".to_string());
            full.extend(io.split_whitespace().map(str::to_string));
        }
    }
    full
}

/// A test found that this machine lacks a kernel feature it checks (io_uring, its min-wait). `make
/// test` needs both (README, Requirements), so under CI (the variable `CI` set, as `.ci/run` does)
/// that fails the test; elsewhere the test prints what it did not check and returns, and the line
/// shows with `cargo test -- --nocapture` or in a failing run's output.
pub fn feature_missing(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what}: under CI every test must run (make test needs io_uring and Linux 6.12+)");
    }
    eprintln!("SKIPPED: {what}");
}

/// Runs the real binary; kills it and fails the test if it is still running after `limit`.
pub fn run_load(args: &[&str], limit: Duration) -> LoadRun {
    spawn_load(args).finish(limit)
}

/// The real binary, started and running, with both pipes drained on their own threads so a chatty
/// child cannot block on a full pipe.
pub struct RunningLoad {
    child: std::process::Child,
    args: Vec<String>,
    started: Instant,
    out_reader: thread::JoinHandle<String>,
    err_reader: thread::JoinHandle<String>,
}

/// Starts the real binary (with `io_args`) and returns at once.
pub fn spawn_load(args: &[&str]) -> RunningLoad {
    let bin = env!("CARGO_BIN_EXE_netarena-load");
    let started = Instant::now();
    let args = io_args(args);
    let mut child = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    RunningLoad {
        child,
        args,
        started,
        out_reader,
        err_reader,
    }
}

impl RunningLoad {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` (e.g. libc::SIGINT) to the generator, and only to it.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill() on our own child's pid, which we have not waited for yet.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill({sig})");
    }

    /// Waits for the exit; kills it and fails the test if it is still running `limit` after its start.
    pub fn finish(mut self, limit: Duration) -> LoadRun {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waiting for netarena-load") {
                break status;
            }
            if self.started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stdout = self.out_reader.join().unwrap_or_default();
                let stderr = self.err_reader.join().unwrap_or_default();
                panic!(
                    "netarena-load {} did not finish within {limit:?}; killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                    self.args.join(" ")
                );
            }
            thread::sleep(Duration::from_millis(10));
        };
        let wall = self.started.elapsed();
        LoadRun {
            args: self.args,
            code: status.code().unwrap_or(-1),
            stdout: self.out_reader.join().unwrap_or_default(),
            stderr: self.err_reader.join().unwrap_or_default(),
            wall,
        }
    }
}

/// Runs and returns the checked result document (exit 0 required).
pub fn run_json(args: &[&str], limit: Duration) -> Result {
    let mut full: Vec<&str> = args.to_vec();
    if !full.contains(&"--json") {
        full.push("--json");
    }
    run_load(&full, limit).result()
}

/// A parsed result document plus the run's description for failure messages.
pub struct Result {
    pub doc: Value,
    pub context: String,
}

impl Result {
    pub fn get(&self, pointer: &str) -> &Value {
        self.doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("result has no {pointer}\n{}", self.context))
    }

    pub fn u64(&self, pointer: &str) -> u64 {
        let v = self.get(pointer);
        v.as_u64().unwrap_or_else(|| {
            panic!(
                "{pointer} is {v}, expected a non-negative integer\n{}",
                self.context
            )
        })
    }

    pub fn f64(&self, pointer: &str) -> f64 {
        let v = self.get(pointer);
        v.as_f64()
            .unwrap_or_else(|| panic!("{pointer} is {v}, expected a number\n{}", self.context))
    }

    pub fn class(&self, name: &str) -> u64 {
        self.u64(&format!("/errors/by_class/{name}"))
    }

    /// Non-zero error classes other than `allowed`, for "nothing else went wrong" assertions.
    pub fn unexpected_errors(&self, allowed: &[&str]) -> Vec<(String, u64)> {
        ERROR_CLASSES
            .iter()
            .filter(|c| !allowed.contains(c))
            .map(|c| (c.to_string(), self.class(c)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    pub fn assert_only_errors(&self, allowed: &[&str]) {
        let other = self.unexpected_errors(allowed);
        assert!(
            other.is_empty(),
            "unexpected error classes {other:?} (only {allowed:?} allowed)\n{}",
            self.context
        );
    }

    pub fn status_codes(&self) -> HashMap<String, u64> {
        let v = self.get("/errors/status_codes");
        let obj = v.as_object().unwrap_or_else(|| {
            panic!(
                "errors.status_codes is {v}, expected an object\n{}",
                self.context
            )
        });
        obj.iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n.as_u64().expect("status_codes values are integers"),
                )
            })
            .collect()
    }

    /// What the contract says holds for every result, whatever the server did.
    fn check_invariants(&self) {
        assert_eq!(self.u64("/schema_version"), 1, "{}", self.context);
        let mut sum = 0;
        for class in ERROR_CLASSES {
            sum += self.class(class);
        }
        let total = self.u64("/errors/total");
        assert_eq!(
            sum, total,
            "errors.total is not the sum of errors.by_class\n{}",
            self.context
        );
        assert_eq!(
            self.u64("/totals/errors"),
            total,
            "totals.errors != errors.total\n{}",
            self.context
        );
        let status_sum: u64 = self.status_codes().values().sum();
        assert_eq!(
            status_sum,
            self.class("status"),
            "errors.status_codes does not add up to by_class.status\n{}",
            self.context
        );
        assert!(
            self.u64("/totals/responses") >= self.u64("/totals/requests"),
            "more successful requests than complete responses\n{}",
            self.context
        );
        let duration_s = self.f64("/duration_s");
        assert!(
            duration_s > 0.0,
            "duration_s must be positive\n{}",
            self.context
        );
    }

    /// p50 <= p99 <= max and friends, for a latency object that has at least one sample.
    pub fn assert_latency_ordered(&self, base: &str) {
        let keys = [
            "min_us",
            "p50_us",
            "p75_us",
            "p90_us",
            "p99_us",
            "p99_9_us",
            "p99_99_us",
            "max_us",
        ];
        let values: Vec<f64> = keys
            .iter()
            .map(|k| self.f64(&format!("{base}/{k}")))
            .collect();
        for w in values.windows(2).zip(keys.windows(2)) {
            let (v, k) = w;
            assert!(
                v[0] <= v[1],
                "{base}: {} ({}) > {} ({})\n{}",
                k[0],
                v[0],
                k[1],
                v[1],
                self.context
            );
        }
        let mean = self.f64(&format!("{base}/mean_us"));
        assert!(
            values[0] <= mean && mean <= values[7],
            "{base}: mean_us {mean} outside [min, max]\n{}",
            self.context
        );
        assert!(
            values[7] > 0.0,
            "{base}: max_us is 0 for a non-empty histogram\n{}",
            self.context
        );
        let hist = self.get(&format!("{base}/histogram/data"));
        assert!(
            hist.as_str().is_some_and(|s| !s.is_empty()),
            "{base}: histogram data missing\n{}",
            self.context
        );
    }
}

/// A loopback port with nothing listening on it (bound then released; the race is harmless here).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

// ---------------------------------------------------------------------------------------------
// Server plumbing
// ---------------------------------------------------------------------------------------------

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
        TestServer {
            addr,
            stats,
            stop,
            acceptor: Some(acceptor),
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

// ---------------------------------------------------------------------------------------------
// HTTP servers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub version: String,
    /// Names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How many requests came before this one on the same connection.
    pub index_on_connection: u64,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the connection does after a handler ran.
pub enum After {
    /// Keep the connection for the next request.
    KeepAlive,
    /// Half-close (FIN), then wait for the client to close.
    Close,
    /// Send nothing more, wait for the client to give up and close.
    Hold,
    /// The handler already disposed of the socket (e.g. reset it).
    Gone,
}

/// `handler(global_request_number, request, stream, stats) -> After`; request numbers count from 0
/// over the whole server in the order requests are read.
pub fn http_server<H>(listener: TcpListener, max_accepts: Option<u64>, handler: H) -> TestServer
where
    H: Fn(u64, &Request, &mut TcpStream, &Stats) -> io::Result<After> + Send + Sync + 'static,
{
    let counter = Arc::new(AtomicU64::new(0));
    let handler = Arc::new(handler);
    TestServer::start(listener, max_accepts, move |mut stream, conn_index, ctx| {
        let mut buf: Vec<u8> = Vec::with_capacity(8192);
        let mut on_conn = 0u64;
        loop {
            let req = match read_request(&mut stream, &mut buf, ctx, on_conn) {
                Some(r) => r,
                None => return,
            };
            on_conn += 1;
            ctx.stats.per_connection.lock().unwrap()[conn_index as usize] += 1;
            ctx.stats.requests.fetch_add(1, Ordering::SeqCst);
            {
                let mut first = ctx.stats.first_requests.lock().unwrap();
                if first.len() < 64 {
                    first.push(req.clone());
                }
            }
            let n = counter.fetch_add(1, Ordering::SeqCst);
            match handler(n, &req, &mut stream, &ctx.stats) {
                Ok(After::KeepAlive) => {}
                Ok(After::Close) => {
                    let _ = stream.shutdown(Shutdown::Write);
                    ctx.hold_until_peer_closes(&mut stream);
                    return;
                }
                Ok(After::Hold) => {
                    ctx.hold_until_peer_closes(&mut stream);
                    return;
                }
                Ok(After::Gone) | Err(_) => return,
            }
        }
    })
}

/// Reads one request (headers plus a Content-Length body). None when the peer closed or the server
/// is stopping.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    ctx: &ConnCtx,
    on_conn: u64,
) -> Option<Request> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(head_end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut start = lines.next().unwrap_or("").split(' ');
            let method = start.next().unwrap_or("").to_string();
            let target = start.next().unwrap_or("").to_string();
            let version = start.next().unwrap_or("").to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let body_len: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let total = head_end + 4 + body_len;
            if buf.len() >= total {
                let body = buf[head_end + 4..total].to_vec();
                buf.drain(..total);
                return Some(Request {
                    method,
                    target,
                    version,
                    headers,
                    body,
                    index_on_connection: on_conn,
                });
            }
        }
        if ctx.should_stop() {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_poll_timeout(&e) => {}
            Err(_) => return None,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A complete `Content-Length` response in one write.
pub fn write_response(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &[u8],
) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out)
}

/// Correct `200 Hello, World!` and counts it as good.
pub fn write_hello(stream: &mut TcpStream, stats: &Stats) -> io::Result<After> {
    write_response(stream, 200, "OK", HELLO)?;
    stats.good.fetch_add(1, Ordering::SeqCst);
    Ok(After::KeepAlive)
}

/// A server that answers every request correctly.
pub fn hello_server() -> TestServer {
    http_server(loopback_listener(), None, |_, _, s, stats| {
        write_hello(s, stats)
    })
}

/// Writes `pieces` one by one with `gap` between them, so the client's reads see arbitrary splits.
pub fn write_split(stream: &mut TcpStream, pieces: &[&[u8]], gap: Duration) -> io::Result<()> {
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 {
            thread::sleep(gap);
        }
        stream.write_all(p)?;
        stream.flush()?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Echo servers
// ---------------------------------------------------------------------------------------------

pub const ECHO_PREFIX_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug)]
pub enum EchoFault {
    None,
    /// On connection `conn` (accept order), flip one bit of the byte at `offset` of the echo.
    CorruptByte {
        conn: u64,
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

pub fn echo_server(fault: EchoFault) -> TestServer {
    TestServer::start(loopback_listener(), None, move |mut stream, index, ctx| {
        let mut buf = vec![0u8; 64 * 1024];
        let mut offset = 0u64;
        let mut prefix: Vec<u8> = Vec::with_capacity(ECHO_PREFIX_BYTES);
        let record_prefix = |prefix: Vec<u8>| {
            let mut all = ctx.stats.echo_prefixes.lock().unwrap();
            while all.len() <= index as usize {
                all.push(Vec::new());
            }
            all[index as usize] = prefix;
        };
        loop {
            if ctx.should_stop() {
                break;
            }
            let mut want = buf.len();
            if let EchoFault::CloseEarly {
                conn, read_bytes, ..
            } = fault
            {
                if conn == index {
                    want = want.min((read_bytes - offset) as usize);
                }
            }
            let n = match stream.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if is_poll_timeout(&e) => continue,
                Err(_) => break,
            };
            if prefix.len() < ECHO_PREFIX_BYTES {
                let take = n.min(ECHO_PREFIX_BYTES - prefix.len());
                prefix.extend_from_slice(&buf[..take]);
            }
            let data = &mut buf[..n];
            match fault {
                EchoFault::CorruptByte { conn, offset: at }
                    if conn == index && at >= offset && at < offset + n as u64 =>
                {
                    data[(at - offset) as usize] ^= 0x01;
                    ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                }
                EchoFault::CloseEarly {
                    conn,
                    read_bytes,
                    echo_bytes,
                } if conn == index => {
                    // Echo only what falls below echo_bytes; once read_bytes are in, close.
                    let end = (offset + n as u64).min(echo_bytes);
                    if end > offset {
                        let _ = stream.write_all(&data[..(end - offset) as usize]);
                        ctx.stats
                            .echoed_bytes
                            .fetch_add(end - offset, Ordering::SeqCst);
                    }
                    offset += n as u64;
                    if offset >= read_bytes {
                        ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.shutdown(Shutdown::Write);
                        record_prefix(prefix);
                        ctx.hold_until_peer_closes(&mut stream);
                        return;
                    }
                    continue;
                }
                _ => {}
            }
            if stream.write_all(data).is_err() {
                break;
            }
            ctx.stats.echoed_bytes.fetch_add(n as u64, Ordering::SeqCst);
            offset += n as u64;
        }
        ctx.stats.good.fetch_add(1, Ordering::SeqCst);
        record_prefix(prefix);
    })
}
