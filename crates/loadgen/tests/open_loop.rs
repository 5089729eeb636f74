//! Open-loop modes on the real binary against real loopback servers built here: a fast one, one
//! that freezes for a second every few seconds, one with a known capacity (a token bucket with a
//! queue behind it), and one that records the paths it was asked for.

mod common;

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{io_args, run_load, validate_against_schema};
use mio::net::{TcpListener as MioListener, TcpStream as MioStream};
use mio::{Events, Interest, Poll, Token};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// `netarena-load http URL ARGS... --json` within LIMIT: its result document (exit 0 required).
fn http_doc(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["http", url];
    all.extend_from_slice(args);
    all.push("--json");
    run_load(&all, LIMIT).json()
}

/// `http_doc`, validated against the JSON Schema.
fn valid_http_doc(url: &str, args: &[&str]) -> Value {
    let doc = http_doc(url, args);
    validate_against_schema(&doc);
    doc
}

/// cargo runs the tests of this file two at a time on this 2-core machine. The ones whose figures
/// need the CPU to themselves (the 10k req/s schedule within 1 ms of lag; the spinning generator,
/// which takes a whole core) run alone (`cpu_alone`), every other test takes a shared turn
/// (`cpu_shared`): in CI the 10k test once saw a 3.6 ms lag p99 next to another test's load.
static CPU: RwLock<()> = RwLock::new(());

fn cpu_alone() -> RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn cpu_shared() -> RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[derive(Clone, Copy, Default)]
struct Behaviour {
    /// (period, stall): the whole server stops for `stall` at `period - stall` after its start,
    /// then every `period`.
    freeze: Option<(Duration, Duration)>,
    /// At most this many responses per second (token bucket, burst of 1% of a second); the rest
    /// wait in a FIFO queue.
    capacity_per_s: Option<f64>,
}

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    paths: Arc<Mutex<Vec<String>>>,
    first_request_unix_ns: Arc<AtomicU64>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn server(b: Behaviour) -> Server {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let connections = Arc::new(AtomicU64::new(0));
    let paths = Arc::new(Mutex::new(Vec::new()));
    let first = Arc::new(AtomicU64::new(0));
    let (stop2, req2, conn2, paths2, first2) = (
        stop.clone(),
        requests.clone(),
        connections.clone(),
        paths.clone(),
        first.clone(),
    );
    let thread = thread::spawn(move || {
        const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        const LISTENER: Token = Token(usize::MAX);
        let mut poll = Poll::new().unwrap();
        let mut listener = MioListener::from_std(std_listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .unwrap();
        let mut conns: HashMap<usize, (MioStream, Vec<u8>)> = HashMap::new();
        let mut queue: VecDeque<usize> = VecDeque::new();
        let mut next = 0usize;
        let mut events = Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 * 1024];
        let started = Instant::now();
        let mut next_freeze = b.freeze.map(|(p, stall)| started + p - stall);
        let mut tokens = 0.0f64;
        let mut last_refill = Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            if let (Some(at), Some((period, stall))) = (next_freeze, b.freeze) {
                if Instant::now() >= at {
                    thread::sleep(stall);
                    next_freeze = Some(at + period);
                }
            }
            let wait = if b.capacity_per_s.is_some() { 1 } else { 20 };
            poll.poll(&mut events, Some(Duration::from_millis(wait)))
                .ok();
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    while let Ok((mut s, _)) = listener.accept() {
                        s.set_nodelay(true).ok();
                        poll.registry()
                            .register(&mut s, Token(next), Interest::READABLE)
                            .unwrap();
                        conns.insert(next, (s, Vec::new()));
                        next += 1;
                        conn2.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                let id = ev.token().0;
                let mut closed = false;
                if let Some((s, pending)) = conns.get_mut(&id) {
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => {
                                closed = true;
                                break;
                            }
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(_) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&pending[..end]).to_string();
                        pending.drain(..end + 4);
                        if req2.fetch_add(1, Ordering::Relaxed) == 0 {
                            first2.store(unix_ns(), Ordering::Relaxed);
                        }
                        let path = head.split(' ').nth(1).unwrap_or("").to_string();
                        paths2.lock().unwrap().push(path);
                        if b.capacity_per_s.is_some() {
                            queue.push_back(id);
                        } else {
                            s.write_all(RESPONSE).ok();
                        }
                    }
                }
                if closed {
                    conns.remove(&id);
                }
            }
            if let Some(cap) = b.capacity_per_s {
                let now = Instant::now();
                tokens = (tokens + (now - last_refill).as_secs_f64() * cap).min(cap / 100.0);
                last_refill = now;
                while tokens >= 1.0 {
                    let Some(id) = queue.pop_front() else { break };
                    tokens -= 1.0;
                    if let Some((s, _)) = conns.get_mut(&id) {
                        s.write_all(RESPONSE).ok();
                    }
                }
            }
        }
    });
    Server {
        addr,
        stop,
        thread: Some(thread),
        requests,
        connections,
        paths,
        first_request_unix_ns: first,
    }
}

fn url(s: &Server) -> String {
    format!("http://{}/", s.addr)
}

#[test]
fn a_10k_schedule_is_exact_and_classified_by_its_own_figures() {
    // The mechanism at 10,000 req/s: the schedule's count is exact, every started send has a lag,
    // nothing is lost between started, dropped and answered, and the verdict (rate_not_met and its
    // reasons) follows from the document's own figures. Whether this machine keeps the schedule
    // within LAG_P99_LIMIT depends on its timer wake-up lag (55 us to several ms on the VMs this
    // runs on): that figure is a benchmark, bench/open_loop_precision.py, not a test.
    let _cpu = cpu_alone();
    let s = server(Behaviour::default());
    let url = url(&s);
    let doc = valid_http_doc(&url, &["--rate", "10000", "-c", "20", "-d", "2s"]);
    let ol = &doc["open_loop"];
    assert_eq!(ol["kind"], "rate");
    assert_eq!(doc["latency_corrected"], true);
    // 2 s at 10k/s is 20,000 intended sends, whatever the machine.
    assert!((19_999..=20_001).contains(&u(&ol["intended"])), "{ol:#}");
    // Every intended send either started or was dropped, and every started one has a lag.
    assert_eq!(
        u(&ol["started"]) + u(&ol["dropped"]),
        u(&ol["intended"]),
        "{ol:#}"
    );
    assert_eq!(u(&ol["schedule_lag"]["count"]), u(&ol["started"]), "{ol:#}");
    // A fast server answers every started request, without errors, and the server saw them all.
    assert_eq!(u(&doc["totals"]["errors"]), 0, "{:#}", doc["totals"]);
    assert_eq!(u(&doc["totals"]["requests"]), u(&ol["started"]), "{ol:#}");
    assert_eq!(
        s.requests.load(Ordering::SeqCst),
        u(&ol["started"]),
        "{ol:#}"
    );
    // The verdict is the document's own figures read against the documented limits: each reason
    // is present exactly when its figure crosses its limit.
    let achieved = f(&ol["achieved_rate_per_s"]);
    let lag_p99 = u(&ol["schedule_lag"]["p99_us"]);
    let reasons: Vec<String> = ol["rate_not_met_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let says = |prefix: &str| reasons.iter().any(|r| r.contains(prefix));
    assert_eq!(says("achieved "), achieved < 0.99 * 10_000.0, "{ol:#}");
    assert_eq!(says("arrivals dropped"), u(&ol["dropped"]) > 0, "{ol:#}");
    assert_eq!(says("schedule lag p99"), lag_p99 > 1000, "{ol:#}");
    assert_eq!(ol["rate_not_met"], !reasons.is_empty(), "{ol:#}");
    eprintln!(
        "10k req/s: achieved {achieved:.1}/s, schedule lag p50 {} us p99 {lag_p99} us max {} us, rate_not_met {}",
        u(&ol["schedule_lag"]["p50_us"]),
        u(&ol["schedule_lag"]["max_us"]),
        ol["rate_not_met"]
    );
    // Two whole seconds, plus a sliver for the responses of the last sends (the drain).
    // (The drain lasts at most the 5 s default timeout, more intervals on a slow host.)
    let intervals = doc["intervals"]["entries"].as_array().unwrap().len();
    assert!((2..=7).contains(&intervals), "{intervals} intervals");
    assert_spin_auto_follows_its_figures(ol);
}

/// `--spin-us auto` (the default): the thread measured its timer and the window follows the
/// document's own figures: widened to twice the lag p99 (at least the default 20 µs, at most
/// 10 ms) exactly when that lag exceeds a quarter of the gap between the thread's sends.
fn assert_spin_auto_follows_its_figures(ol: &serde_json::Value) {
    let auto = &ol["spin_auto"];
    let lag = u(&auto["timer_lag_p99_us"]);
    let gap = u(&auto["send_gap_us"]);
    // The rule works on nanoseconds and the document reports whole µs: within a µs of the boundary
    // (lag = a quarter of the gap) either choice is right.
    let widened = auto["widened"].as_bool().expect("widened is a bool");
    if (lag * 4).abs_diff(gap) > 4 {
        assert_eq!(widened, lag * 4 > gap, "{auto:#}");
    }
    let want = if widened {
        (2 * lag).clamp(20, 10_000)
    } else {
        20
    };
    assert!(u(&ol["spin_us"]).abs_diff(want) <= 2, "{ol:#}");
}

#[test]
fn spin_auto_measures_the_timer_and_a_given_window_does_not() {
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    // 50/s on one thread: 20 ms between sends, far beyond any timer lag a working machine has,
    // so auto measures the timer and keeps the default window.
    let doc = valid_http_doc(&url, &["--rate", "50", "-c", "2", "-d", "500ms"]);
    let ol = &doc["open_loop"];
    assert_eq!(u(&ol["spin_auto"]["send_gap_us"]), 20_000, "{ol:#}");
    assert_spin_auto_follows_its_figures(ol);
    // A window given on the command line is used as it is; nothing is measured.
    let given = valid_http_doc(
        &url,
        &["--rate", "50", "-c", "2", "-d", "500ms", "--spin-us", "300"],
    );
    assert_eq!(u(&given["open_loop"]["spin_us"]), 300);
    assert!(
        given["open_loop"]["spin_auto"].is_null(),
        "{:#}",
        given["open_loop"]
    );
}

#[test]
fn a_freezing_server_shows_in_corrected_latency_only() {
    let _cpu = cpu_shared();
    // Freezes for 1 s at t = 1.0 s and 3.0 s after it starts.
    let s = server(Behaviour {
        freeze: Some((Duration::from_secs(2), Duration::from_secs(1))),
        capacity_per_s: None,
    });
    let url = url(&s);
    // 8,000 requests on 4 connections; the stall (t = 1..2 s of the server's clock) catches
    // exactly one request per connection on the wire (4 = 0.05% of them, under the 0.1% that
    // p99.9 ignores), while ~4,000 requests fall due during it and wait in the backlog. The
    // second freeze (t = 3 s) comes after the run.
    let doc = valid_http_doc(&url, &["--rate", "4000", "-c", "4", "-d", "2s"]);
    let corrected = &doc["latency"];
    let uncorrected = &doc["open_loop"]["latency_uncorrected"];
    let ol = &doc["open_loop"];
    eprintln!(
        "freeze: intended {} started {} dropped {} late {} timeline {}",
        ol["intended"], ol["started"], ol["dropped"], ol["late"], doc["timeline"]
    );
    eprintln!(
        "freeze: corrected p99 {} p99.9 {} us; uncorrected p99 {} p99.9 {} us",
        u(&corrected["p99_us"]),
        u(&corrected["p99_9_us"]),
        u(&uncorrected["p99_us"]),
        u(&uncorrected["p99_9_us"])
    );
    // About half the requests were due during the stall: they waited up to 1 s.
    assert!(u(&corrected["p99_us"]) >= 500_000, "{corrected:#}");
    assert!(u(&corrected["p99_9_us"]) >= 500_000, "{corrected:#}");
    // Only the 4 requests on the wire when it froze saw the stall from their actual send: they
    // are there (max), but fewer than the 0.1% the uncorrected p99.9 ignores, so it stays below
    // half the stall. The bar is the stall's, not this machine's: what a slow or busy machine
    // adds to a request's time from its send (scheduling delays, CPU quota periods) is a
    // fraction of it, and the backlog's wait, which is of the stall's length, is left out.
    assert!(u(&uncorrected["p99_9_us"]) < 500_000, "{uncorrected:#}");
    assert!(u(&uncorrected["max_us"]) >= 500_000, "{uncorrected:#}");
    // The sends held back by the stall were late, and the result says the schedule was not kept.
    assert!(u(&ol["late"]) > 1000, "{ol:#}");
    assert_eq!(ol["rate_not_met"], true, "{ol:#}");
    let reasons = ol["rate_not_met_reasons"].to_string();
    assert!(reasons.contains("schedule lag p99"), "{reasons}");
}

#[test]
fn conn_rate_counts_connections_and_requests_exactly() {
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    let doc = valid_http_doc(
        &url,
        &[
            "--conn-rate",
            "200",
            "--requests-per-conn",
            "5",
            "-d",
            "1s",
            "-t",
            "2",
        ],
    );
    let c = &doc["open_loop"]["connections"];
    assert_eq!(u(&c["started"]), 200, "{c:#}");
    assert_eq!(u(&c["completed"]), 200, "{c:#}");
    assert_eq!(u(&c["lifetime"]["count"]), 200);
    assert_eq!(u(&doc["totals"]["requests"]), 1000);
    assert_eq!(s.requests.load(Ordering::Relaxed), 1000);
    assert_eq!(s.connections.load(Ordering::Relaxed), 200);
    assert_eq!(u(&doc["totals"]["connections_opened"]), 200);
}

#[test]
fn conn_rate_reply_timeout_is_an_error_of_its_own() {
    let _cpu = cpu_shared();
    // Accepted by the kernel, never read: every request waits for a reply that never comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let doc = valid_http_doc(
        &url,
        &[
            "--conn-rate",
            "10",
            "--requests-per-conn",
            "3",
            "-d",
            "500ms",
            "--timeout",
            "300ms",
        ],
    );
    assert_eq!(
        u(&doc["errors"]["by_class"]["timeout"]),
        5,
        "{:#}",
        doc["errors"]
    );
    assert_eq!(u(&doc["open_loop"]["connections"]["failed"]), 5);
    assert_eq!(u(&doc["totals"]["requests"]), 0);
}

#[test]
fn conn_rate_arrivals_beyond_the_open_connections_are_dropped_and_counted() {
    let _cpu = cpu_shared();
    // Accepted by the kernel, never read: each connection stays open until --timeout (2 s), past
    // the 1 s schedule. At 100 connections/s with at most 5 open (-c), the first 5 arrivals start
    // and the other 95 find no free slot: counts, exact on any machine.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let run = run_load(
        &[
            "http",
            &url,
            "--conn-rate",
            "100",
            "-c",
            "5",
            "-d",
            "1s",
            "--timeout",
            "2s",
            "--json",
        ],
        LIMIT,
    );
    let doc = run.json();
    validate_against_schema(&doc);
    let ol = &doc["open_loop"];
    assert_eq!(u(&ol["intended"]), 100, "{ol:#}");
    assert_eq!(u(&ol["connections"]["started"]), 5, "{ol:#}");
    assert_eq!(u(&ol["dropped_overflow"]), 95, "{ol:#}");
    assert_eq!(u(&ol["dropped_unsent"]), 0, "{ol:#}");
    assert_eq!(u(&ol["dropped"]), 95, "{ol:#}");
    assert_eq!(u(&ol["started"]) + u(&ol["dropped"]), 100, "{ol:#}");
    // Dropped arrivals are a schedule not kept, said as such, never a silent success.
    assert_eq!(ol["rate_not_met"], true, "{ol:#}");
    let reasons = ol["rate_not_met_reasons"].to_string();
    assert!(reasons.contains("arrivals dropped"), "{reasons}");
    assert_eq!(
        u(&doc["errors"]["by_class"]["timeout"]),
        5,
        "{:#}",
        doc["errors"]
    );
    drop(silent);
}

fn paths_of(s: &Server) -> Vec<String> {
    s.paths.lock().unwrap().clone()
}

#[test]
fn url_lists_are_repeatable_with_a_seed() {
    let _cpu = cpu_shared();
    let dir = std::env::temp_dir().join(format!("netarena-urls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("urls.txt");
    let mut text = String::from("# ten files\n\n");
    for i in 0..9 {
        text += &format!("/file{i}\n");
    }
    let s0 = server(Behaviour::default());
    text += &format!("http://{}/file9\n", s0.addr);
    std::fs::write(&list, text).unwrap();
    let list_s = list.to_str().unwrap();
    let run = |seed: &str, order: &str| {
        let s = server(Behaviour::default());
        // Same port as the list's absolute URL is not possible for a fresh server, so the list
        // is rewritten for it.
        let t = std::fs::read_to_string(&list)
            .unwrap()
            .replace(&s0.addr.to_string(), &s.addr.to_string());
        let l2 = dir.join(format!("urls-{}.txt", s.addr.port()));
        std::fs::write(&l2, t).unwrap();
        let doc = valid_http_doc(
            &url(&s),
            &[
                "--rate",
                "400",
                "-c",
                "1",
                "-d",
                "300ms",
                "--urls",
                l2.to_str().unwrap(),
                "--url-order",
                order,
                "--seed",
                seed,
            ],
        );
        assert_eq!(u(&doc["config"]["url_count"]), 10);
        let p = paths_of(&s);
        assert!(p.len() >= 100, "{} requests", p.len());
        p[..100].to_vec()
    };
    let a = run("7", "random");
    assert_eq!(a, run("7", "random"), "same seed, same sequence");
    assert_ne!(a, run("8", "random"));
    assert!((0..10).all(|i| a.contains(&format!("/file{i}"))), "{a:?}");
    let rr = run("7", "round-robin");
    let expect: Vec<String> = (0..100).map(|i| format!("/file{}", i % 10)).collect();
    assert_eq!(rr, expect);

    // A URL on another port is refused before anything is sent.
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "/ok\nhttp://127.0.0.1:1/other\n").unwrap();
    let r = run_load(
        &[
            "http",
            &url(&s0),
            "--rate",
            "10",
            "--urls",
            bad.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("line 2") && r.stderr.contains("same host and port"),
        "{}",
        r.stderr
    );

    // --verify-learn would learn the positional URL's body and expect it from every file.
    let r = run_load(
        &[
            "http",
            &url(&s0),
            "--rate",
            "10",
            "--urls",
            list_s,
            "--verify-learn",
        ],
        LIMIT,
    );
    assert_eq!(r.code, 2, "{}", r.describe());
    assert!(
        r.stderr.contains("--verify-learn") && r.stderr.contains("--expect-status"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(s0.requests.load(Ordering::Relaxed), 0, "nothing is sent");
    std::fs::remove_dir_all(&dir).ok();
}

/// A `--urls` line may carry its file's size and sha256: each response is held to its own URL's (the
/// test server answers "ok" to everything, so the lines that expect something else are the errors).
#[test]
fn url_lines_carry_the_size_and_digest_each_response_must_have() {
    let _cpu = cpu_shared();
    let dir = std::env::temp_dir().join(format!("netarena-url-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("urls.txt");
    let ok_sha = "2689367b205c16ce32ed4200942b8b8b1e262dfc70d9bc9fbc77c49699a4f1df";
    let other_sha = "0".repeat(64);
    std::fs::write(
        &list,
        format!("/right-size 2\n/right-digest sha256={ok_sha}\n/both 2 sha256={ok_sha}\n/wrong-size 3\n/wrong-digest sha256={other_sha}\n/none\n"),
    )
    .unwrap();
    let s = server(Behaviour::default());
    let doc = valid_http_doc(
        &url(&s),
        &[
            "--rate",
            "300",
            "-c",
            "1",
            "-d",
            "400ms",
            "--urls",
            list.to_str().unwrap(),
            "--url-order",
            "round-robin",
        ],
    );
    let responses = u(&doc["totals"]["responses"]);
    let mismatches = u(&doc["errors"]["by_class"]["verification_mismatch"]);
    assert!(responses >= 60, "{responses} responses");
    // Round-robin over six lines, two of them wrong: a third of the answers, give or take the last lap.
    assert!(
        mismatches * 3 >= responses - 6 && mismatches * 3 <= responses + 6,
        "{mismatches} mismatches of {responses}: {:#}",
        doc["errors"]
    );
    let samples = doc["errors"].to_string();
    assert!(
        samples.contains("/wrong-size") || samples.contains("/wrong-digest"),
        "{samples}"
    );
    assert!(
        !samples.contains("/right-") && !samples.contains("/both"),
        "{samples}"
    );

    // A field that is neither a size nor a digest, a size for every URL beside sizes per URL, and a
    // malformed digest are refused before anything is sent.
    let refused = |text: &str, extra: &[&str], want: &str| {
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, text).unwrap();
        let before = s.requests.load(Ordering::Relaxed);
        let target = url(&s);
        let mut args = vec![
            "http",
            &target,
            "--rate",
            "10",
            "-d",
            "200ms",
            "--urls",
            bad.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let r = run_load(&args, LIMIT);
        assert_eq!(r.code, 2, "{}", r.describe());
        assert!(r.stderr.contains(want), "wanted {want:?} in {}", r.stderr);
        assert_eq!(
            s.requests.load(Ordering::Relaxed),
            before,
            "nothing is sent"
        );
    };
    refused("/a 2\n/b big\n", &[], "line 2");
    refused(
        "/a 2\n",
        &["--expect-body-size", "2"],
        "keep one of the two",
    );
    refused("/a sha256=abc\n", &[], "64 hexadecimal digits");
    refused("/a 2 3\n", &[], "two body sizes");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hlog_reads_back_with_the_intervals_of_the_result() {
    let _cpu = cpu_shared();
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    let s = server(Behaviour::default());
    let path = std::env::temp_dir().join(format!("netarena-{}.hlog", std::process::id()));
    let doc = valid_http_doc(
        &url(&s),
        &[
            "--rate",
            "2000",
            "-c",
            "10",
            "-d",
            "1s",
            "--interval",
            "250ms",
            "--hlog",
            path.to_str().unwrap(),
        ],
    );
    let entries = doc["intervals"]["entries"].as_array().unwrap();
    assert!(
        (4..=5).contains(&entries.len()),
        "{} intervals",
        entries.len()
    );
    let text = std::fs::read(&path).unwrap();
    let mut de = Deserializer::new();
    let mut total = 0;
    let mut n = 0;
    for e in IntervalLogIterator::new(&text) {
        if let Ok(LogEntry::Interval(ilh)) = e {
            let raw = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                ilh.encoded_histogram(),
            )
            .unwrap();
            let h: hdrhistogram::Histogram<u64> = de.deserialize(&mut &raw[..]).unwrap();
            assert_eq!(h.len(), u(&entries[n]["count"]));
            assert_eq!(ilh.duration(), Duration::from_millis(250));
            total += h.len();
            n += 1;
        }
    }
    assert_eq!(n, entries.len());
    assert_eq!(total, u(&doc["latency"]["count"]));
    std::fs::remove_file(&path).ok();
}

fn spawn_prepared(url: &str) -> (std::process::Child, BufReader<std::process::ChildStderr>) {
    spawn_prepared_with(url, &["--rate", "1000"])
}

/// `netarena-load http URL -c 4 -d 300ms --prepare --json` plus `extra` (on the engine
/// NETARENA_LOAD_TEST_IO names, `common::io_args`), once it has printed READY.
fn spawn_prepared_with(
    url: &str,
    extra: &[&str],
) -> (std::process::Child, BufReader<std::process::ChildStderr>) {
    let args: Vec<&str> = ["http", url, "-c", "4", "-d", "300ms", "--prepare", "--json"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_netarena-load"))
        .args(io_args(&args))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("READY "), "{line}");
    let ready_ns: u64 = line.trim()[6..].parse().unwrap();
    assert!(ready_ns.abs_diff(unix_ns()) < 2_000_000_000);
    (child, err)
}

#[test]
fn prepare_starts_at_the_given_time_and_refuses_the_past() {
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    let (mut child, _err) = spawn_prepared(&url);
    // Connections are open but nothing is sent before the start.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(s.requests.load(Ordering::Relaxed), 0);
    assert_eq!(s.connections.load(Ordering::Relaxed), 4);
    let start_ns = unix_ns() + 400_000_000;
    writeln!(child.stdin.as_mut().unwrap(), "{start_ns}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate_against_schema(&doc);
    let first = s.first_request_unix_ns.load(Ordering::Relaxed);
    let off_ms = (first as f64 - start_ns as f64) / 1e6;
    eprintln!("--prepare: first request {off_ms:.3} ms after the given start");
    // Never before the start; after it by a scheduling delay, not by a unit mistake or a second
    // wait (the bound leaves room for a machine busy with other work).
    assert!(
        (0.0..100.0).contains(&off_ms),
        "first request {off_ms} ms from the start time"
    );

    let (mut child, mut err) = spawn_prepared(&url);
    writeln!(child.stdin.as_mut().unwrap(), "{}", unix_ns() - 1_000_000).unwrap();
    let status = child.wait().unwrap();
    let mut msg = String::new();
    err.read_to_string(&mut msg).unwrap();
    assert_eq!(status.code(), Some(2), "{msg}");
    assert!(msg.contains("in the past"), "{msg}");

    let (mut child, mut err) = spawn_prepared(&url);
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    let mut msg = String::new();
    err.read_to_string(&mut msg).unwrap();
    assert_eq!(status.code(), Some(3), "{msg}");
    assert!(msg.contains("stdin closed"), "{msg}");
}

#[test]
fn prepare_in_the_closed_loop_connects_and_sends_only_from_the_start() {
    // The barrier of a measurement spread over several hosts: a closed-loop generator announces READY,
    // opens nothing before the start time it is given, then runs its whole phase from that instant.
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    let (mut child, _err) = spawn_prepared_with(&url, &[]);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(s.connections.load(Ordering::Relaxed), 0);
    assert_eq!(s.requests.load(Ordering::Relaxed), 0);
    let start_ns = unix_ns() + 300_000_000;
    writeln!(child.stdin.as_mut().unwrap(), "{start_ns}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate_against_schema(&doc);
    assert_eq!(doc["config"]["prepare"], true);
    assert!(u(&doc["totals"]["requests"]) > 0);
    assert!(s.first_request_unix_ns.load(Ordering::Relaxed) >= start_ns);
}

#[test]
fn a_closed_loop_woken_late_measures_from_the_given_start_plus_its_warm_up() {
    // Several generators and the profilers share one start time; one that wakes late (stopped here
    // across its start time, as a busy host's scheduler might) must still measure the window they
    // agreed on: its warm-up is shorter, its measured phase is not shifted.
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    let late_ns = 300_000_000;
    // The stop must come after the generator read its start time (stopped before, it would find
    // the start in the past and refuse it): it gets 400 ms for that, and a refusal is tried again.
    let mut attempts = 0;
    let (start_ns, out) = loop {
        attempts += 1;
        let (mut child, _err) = spawn_prepared_with(&url, &["--warmup", "600ms"]);
        let pid = child.id() as libc::pid_t;
        let start_ns = unix_ns() + 500_000_000;
        writeln!(child.stdin.as_mut().unwrap(), "{start_ns}").unwrap();
        child.stdin.as_mut().unwrap().flush().unwrap();
        thread::sleep(Duration::from_millis(400));
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        thread::sleep(Duration::from_nanos(
            (start_ns + late_ns).saturating_sub(unix_ns()),
        ));
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        let out = child.wait_with_output().unwrap();
        if out.status.code() == Some(2) && attempts < 3 {
            continue;
        }
        break (start_ns, out);
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate_against_schema(&doc);
    assert!(s.first_request_unix_ns.load(Ordering::Relaxed) >= start_ns + late_ns);
    // started_at is "YYYY-MM-DDTHH:MM:SS.ffffffZ": its time of day against the start's.
    let started = doc["started_at"].as_str().unwrap();
    let of_day = |h: &str, m: &str, sec: &str| {
        h.parse::<f64>().unwrap() * 3600.0
            + m.parse::<f64>().unwrap() * 60.0
            + sec.parse::<f64>().unwrap()
    };
    let started_s = of_day(&started[11..13], &started[14..16], &started[17..26]);
    let expected_s = (start_ns as f64 / 1e9 + 0.6).rem_euclid(86_400.0);
    let off_ms = ((started_s - expected_s + 43_200.0).rem_euclid(86_400.0) - 43_200.0) * 1e3;
    let warmup_s = f(&doc["warmup_s"]);
    eprintln!(
        "woken late: measured from {off_ms:.3} ms after start + warm-up; warm-up {warmup_s} s"
    );
    // Timed from its wake-up instead, the phase would begin at least 300 ms late and the warm-up
    // would be the whole 600 ms; clock readings a busy host delays take a few ms at most.
    assert!(
        off_ms.abs() < 150.0,
        "measured from {off_ms} ms after start + warm-up"
    );
    assert!(warmup_s < 0.45, "warm-up {warmup_s} s");
    assert!(
        (f(&doc["duration_s"]) - 0.3).abs() < 1e-6,
        "{}",
        doc["duration_s"]
    );
}

#[test]
fn steps_and_find_max_land_near_a_known_capacity() {
    let _cpu = cpu_shared();
    const CAPACITY: f64 = 2000.0;
    let s = server(Behaviour {
        freeze: None,
        capacity_per_s: Some(CAPACITY),
    });
    let url = url(&s);
    let doc = valid_http_doc(
        &url,
        &[
            "--rate",
            "250",
            "-c",
            "100",
            "--find-max",
            "--slo",
            "p99<=100ms",
            "--max-errors",
            "0.1%",
            "--step-duration",
            "1s",
            "--find-max-resolution",
            "10%",
            "--timeout",
            "2s",
        ],
    );
    let fm = &doc["find_max"];
    let rates: Vec<f64> = fm["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| f(&v["rate_per_s"]))
        .collect();
    eprintln!(
        "find-max: found {}/s for capacity {CAPACITY}/s; measured {rates:?}; {}",
        fm["found_rate_per_s"], fm["verdicts"]
    );
    assert_eq!(doc["steps"].as_array().unwrap().len(), rates.len());
    // The token bucket lets a little more than CAPACITY through in bursts: nothing above 1.1 x
    // capacity can pass, however fast the machine.
    assert_find_max_bookkeeping(fm, 0.10, 1.1 * CAPACITY);

    let doc = valid_http_doc(
        &url,
        &[
            "-c",
            "100",
            "--rate",
            "1",
            "--steps",
            "1000:3000:1000",
            "--step-duration",
            "1s",
            "--timeout",
            "2s",
        ],
    );
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let p99: Vec<u64> = steps.iter().map(|s| u(&s["latency"]["p99_us"])).collect();
    let tput: Vec<f64> = steps
        .iter()
        .map(|s| f(&s["throughput"]["requests_per_s"]))
        .collect();
    eprintln!("steps 1000/2000/3000: p99 {p99:?} us, throughput {tput:?}");
    // Above capacity the server answers at most ~CAPACITY/s and corrected latency climbs: the
    // queue of a 1.5x overload grows by 1000 requests in the step, half a second of the server's
    // work, on any machine (a slower one only queues more). At half the capacity nothing queues.
    // Compared as a difference, not a ratio: what a slow or busy machine adds to every step's
    // p99 (its own delays) is not the queue's, and it adds to both steps.
    assert!(tput[2] < 1.1 * CAPACITY, "{tput:?}");
    assert!(p99[2] > p99[0] + 200_000, "{p99:?}");
    assert!(doc["open_loop"]["asked_rate_per_s"].is_null());
}

/// Runs the binary (on the engine NETARENA_LOAD_TEST_IO names) to completion and returns (exit
/// code, stdout, user + system CPU, wall, voluntary context switches) of that one process (wait4's
/// rusage: other tests' children running in parallel do not count). A thread that sleeps in the kernel switches voluntarily each time; one
/// that busy-polls does not, however little CPU a busy machine leaves it.
fn run_with_cpu(args: &[&str]) -> (i32, String, Duration, Duration, u64) {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_netarena-load"))
        .args(io_args(args))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        stdout.read_to_string(&mut out).ok();
        out
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is a plain C struct, zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `child` is not waited on through std afterwards.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(rc, pid, "wait4: {}", io::Error::last_os_error());
    let wall = started.elapsed();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    std::mem::forget(child); // already reaped by wait4
    (code, reader.join().unwrap(), cpu, wall, ru.ru_nvcsw as u64)
}

#[test]
fn draining_against_a_stalled_server_does_not_spin() {
    let _cpu = cpu_shared();
    // Accepted by the kernel, never read: every request waits for the full --timeout. The
    // requests sent at the start time out at 1.5 s, inside the drain; the connections reopen and
    // take the next backlogged requests, which are still on the wire at the drain deadline
    // (0.2 s + 1.5 s): the drain waits for them with nothing else to do, then ends, counting them
    // unfinished (tests/unfinished.rs checks those counts exactly).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let args = |url: &str| -> Vec<String> {
        [
            "http",
            url,
            "--rate",
            "100",
            "-c",
            "4",
            "-d",
            "200ms",
            "--timeout",
            "1500ms",
            // A fixed window: `auto` widens it on a machine whose timer lags (a busy one) and then
            // spins before every send on purpose, which is not what this test looks for.
            "--spin-us",
            "20",
            "--json",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    // The same run against a server that answers, on the same machine: what the start-up, the
    // sends and the result cost here, with no drain to wait through.
    let answering = server(Behaviour::default());
    let control: Vec<String> = args(&format!("http://{}/", answering.addr));
    let control: Vec<&str> = control.iter().map(String::as_str).collect();
    let (_, _, control_cpu, _, _) = run_with_cpu(&control);
    let stalled: Vec<String> = args(&url);
    let stalled: Vec<&str> = stalled.iter().map(String::as_str).collect();
    let (code, stdout, cpu, wall, _) = run_with_cpu(&stalled);
    assert_eq!(code, 0, "{stdout}");
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    validate_against_schema(&doc);
    eprintln!(
        "stalled drain: cpu {:?} over {:?} wall; errors {}",
        cpu, wall, doc["errors"]["by_class"]
    );
    assert!(wall >= Duration::from_millis(1700), "wall {wall:?}");
    assert!(
        u(&doc["errors"]["by_class"]["timeout"]) >= 4,
        "{:#}",
        doc["errors"]
    );
    assert!(u(&doc["totals"]["unfinished"]) <= 4, "{:#}", doc["totals"]);
    assert!(
        u(&doc["open_loop"]["dropped_unsent"]) > 0,
        "{:#}",
        doc["open_loop"]
    );
    // Waiting is sleeping: the 1.5 s of drain cost next to nothing beyond what the same run costs
    // against a server that answers at once (the control, measured on this machine just before, so
    // a slower CPU raises both). Measured on the shared 2-core machine (when the drain still waited
    // past its deadline for the last timeouts): the loop that re-armed its timer at `now` used
    // 301 ms of CPU in 3.07 s (all it could get while other processes ran), the fixed one 16 ms.
    assert!(
        cpu < control_cpu * 2 + Duration::from_millis(30),
        "generator used {cpu:?} of CPU in {wall:?} while waiting for a stalled server, against \
         {control_cpu:?} for the same run against one that answers"
    );
    drop(silent);
}

#[test]
fn spin_us_busy_polls_for_the_next_send_without_looking_saturated() {
    let _cpu = cpu_alone();
    // 1000/s is one send per ms. A 2000 µs window is always open, so the thread never sleeps;
    // a 20 µs window sleeps between sends (on the timerfd, or in io_uring_enter). Given, not
    // auto: auto widens the window where this machine's timer is late (a busy machine), and this
    // test is about what a window does, not about the timer.
    let s = server(Behaviour::default());
    let url = url(&s);
    let base = [
        "http", &url, "--rate", "1000", "-c", "4", "-d", "1s", "--json",
    ];
    let mut sleep_args = base.to_vec();
    sleep_args.extend(["--spin-us", "20"]);
    let (code, stdout, sleep_cpu, sleep_wall, sleep_switches) = run_with_cpu(&sleep_args);
    assert_eq!(code, 0, "{stdout}");
    let sleeping: Value = serde_json::from_str(stdout.trim()).unwrap();
    let mut spin_args = base.to_vec();
    spin_args.extend(["--spin-us", "2000"]);
    let (code, stdout, spin_cpu, spin_wall, spin_switches) = run_with_cpu(&spin_args);
    assert_eq!(code, 0, "{stdout}");
    let spinning: Value = serde_json::from_str(stdout.trim()).unwrap();
    validate_against_schema(&sleeping);
    validate_against_schema(&spinning);
    eprintln!(
        "1000/s: sleeping cpu {sleep_cpu:?} of {sleep_wall:?}, {sleep_switches} voluntary switches, lag p99 {} us; spinning cpu {spin_cpu:?} of {spin_wall:?}, {spin_switches} voluntary switches, lag p99 {} us, spin-wait {} s",
        sleeping["open_loop"]["schedule_lag"]["p99_us"],
        spinning["open_loop"]["schedule_lag"]["p99_us"],
        spinning["open_loop"]["spin_wait_s"]
    );
    assert_eq!(u(&sleeping["open_loop"]["spin_us"]), 20);
    assert_eq!(u(&spinning["open_loop"]["spin_us"]), 2000);
    for doc in [&sleeping, &spinning] {
        // The whole schedule went out and was answered, however late a slow machine sent it:
        // 1000 arrivals in the second, none dropped (that takes --timeout of lag), each answered.
        let ol = &doc["open_loop"];
        assert_eq!(u(&doc["totals"]["errors"]), 0);
        assert!((999..=1001).contains(&u(&ol["intended"])), "{ol:#}");
        assert_eq!(u(&ol["dropped"]), 0, "{ol:#}");
        assert_eq!(u(&doc["totals"]["requests"]), u(&ol["started"]), "{ol:#}");
    }
    // The spinning run really busy-polls: its open-loop thread never sleeps in the kernel between
    // sends, while the sleeping one sleeps before each send it is early for (all but the late
    // ones, which a thread behind its schedule sends at once). Counted in voluntary context
    // switches, not CPU (a busy machine gives a spinning thread what it can spare), against each
    // run's own figures: the other threads (main, the setup) switch a few dozen times, far fewer
    // than the sends.
    let early_sends = |doc: &Value| u(&doc["open_loop"]["started"]) - u(&doc["open_loop"]["late"]);
    assert!(
        sleep_switches >= early_sends(&sleeping) / 2,
        "sleeping: {sleep_switches} voluntary switches for {} sends on time\n{:#}",
        early_sends(&sleeping),
        sleeping["open_loop"]
    );
    assert!(
        spin_switches < u(&spinning["open_loop"]["started"]) / 4,
        "spinning: {spin_switches} voluntary switches\n{:#}",
        spinning["open_loop"]
    );
    // Most of the CPU it got went to those turns (wall time of turns that only polled): on an idle
    // machine that is most of its second; on a busy one the thread gets less CPU (others' work
    // takes turns with it), and spins for most of what it gets. Only while it is ahead of its
    // schedule, though: a thread behind it (a machine too busy to give it a CPU when due: 972 of
    // 1000 sends late was seen here at load 11) sends at once and never polls. So the bar is
    // scaled by the share of sends it was early for, from its own figures ...
    let full_wait = f(&spinning["open_loop"]["spin_wait_s"]);
    let spin_cpu_s = spin_cpu.as_secs_f64();
    let early_share =
        early_sends(&spinning) as f64 / u(&spinning["open_loop"]["started"]).max(1) as f64;
    assert!(
        full_wait >= 0.5 * spin_cpu_s * early_share,
        "spin-wait {full_wait} s of {spin_cpu_s} s CPU, early for {early_share} of the sends\n{:#}",
        spinning["open_loop"]
    );
    // ... which is not work: the thread's busy time, waits for a CPU aside (those count as busy, a
    // generator starved of CPU is one), stays under half the CPU it used (scaled alike). Counted
    // as work, the polling would make it all of that CPU.
    let gen = &spinning["generator"];
    let busy = f(&gen["busy_fraction_max"]);
    let cpu_wait = f(&gen["run_delay_fraction_max"]);
    let work_s = (busy - cpu_wait) * f(&spinning["duration_s"]);
    assert!(
        work_s < (1.0 - 0.5 * early_share) * spin_cpu_s,
        "busy {busy} (waiting for a CPU {cpu_wait}): {work_s} s of work, spin-wait \
         left out, against {spin_cpu_s} s of CPU"
    );
    // Flagged saturated only when waiting for a CPU is what made it busy (a machine busy with
    // other work), never for its polling.
    assert!(
        spinning["generator_saturated"] == false || cpu_wait >= 0.5,
        "saturated while waiting for a CPU only {cpu_wait} of the run\n{gen:#}"
    );
    // The sleeping run sleeps (its CPU, a few % of a core, is printed above): its only polling is
    // the default 20 µs before each send.
    assert!(
        f(&sleeping["open_loop"]["spin_wait_s"]) < 0.2,
        "{:#}",
        sleeping["open_loop"]
    );
    // A window shorter than the gap: the timer wakes the thread 400 µs before each send and it
    // polls from there, so part of the second is spin-wait (about 40% on an idle machine, less
    // when the timer wakes it late) and less than an always-open window's. A thread woken at the
    // send time itself would show what the 20 µs window shows (next to nothing): with the same
    // timer, a window 20 times wider polls for more than twice as long, whatever the machine's
    // speed (what it loses to the timer's lag, the 20 µs window loses too).
    let mut part_args = base.to_vec();
    part_args.extend(["--spin-us", "400"]);
    let part = run_load(&part_args, LIMIT).json();
    let part_wait = f(&part["open_loop"]["spin_wait_s"]);
    let sleep_wait = f(&sleeping["open_loop"]["spin_wait_s"]);
    assert!(
        part_wait > 0.0 && part_wait > 2.0 * sleep_wait && part_wait < full_wait,
        "spin-wait {part_wait} s with a 400 µs window at 1000/s ({full_wait} s always spinning, \
         {sleep_wait} s with 20 µs)\n{:#}",
        part["open_loop"]
    );
}

#[test]
fn the_spin_window_opens_only_before_a_send() {
    let _cpu = cpu_shared();
    // 20/s is one send per 50 ms; the widest window (10 ms, as `auto` may choose on a machine
    // whose timer is late) is open for a fifth of that. The loop also wakes every 10 ms for its
    // timeout sweep: a window opened toward those wake-ups too would never close, and nearly the
    // whole second would be spin-wait.
    let s = server(Behaviour::default());
    let url = url(&s);
    let doc = valid_http_doc(
        &url,
        &["--rate", "20", "-c", "2", "-d", "1s", "--spin-us", "10000"],
    );
    let ol = &doc["open_loop"];
    assert_eq!(u(&ol["spin_us"]), 10_000, "{ol:#}");
    assert_eq!(u(&doc["totals"]["errors"]), 0, "{:#}", doc["errors"]);
    // About 20 windows of at most 10 ms: 0.2 s, less when the timer wakes the thread late.
    let wait = f(&ol["spin_wait_s"]);
    assert!(
        wait < 0.5,
        "spin-wait {wait} s of a 1 s phase at 20/s\n{ol:#}"
    );
}

#[test]
fn spin_us_is_refused_outside_open_loop_and_beyond_its_limit() {
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let url = url(&s);
    let closed = ["http", url.as_str(), "-d", "1s"];
    let open = ["http", url.as_str(), "--rate", "100", "-d", "1s"];
    for (base, spin, says) in [
        (
            &closed[..],
            "100",
            "--spin-us belongs to the open-loop modes",
        ),
        (&open[..], "20000", "give 0 to 10000"),
        (
            &open[..],
            "soon",
            "give a whole number of µs (0 to 10000) or auto",
        ),
    ] {
        let args = [base, &["--spin-us", spin][..]].concat();
        let run = run_load(&args, LIMIT);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn an_overloaded_generator_says_so_in_the_json_and_the_summary() {
    let _cpu = cpu_shared();
    // One connection to a server that answers 200/s: at 1000/s asked the generator can start
    // at most ~200/s, the backlog grows, and at the end the unsent remainder is dropped.
    let s = server(Behaviour {
        freeze: None,
        capacity_per_s: Some(200.0),
    });
    let url = url(&s);
    let args = [
        "http",
        &url,
        "--rate",
        "1000",
        "-c",
        "1",
        "-d",
        "1s",
        "--timeout",
        "300ms",
    ];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let doc = run_load(&with_json, LIMIT).json();
    validate_against_schema(&doc);
    let ol = &doc["open_loop"];
    eprintln!(
        "overload: achieved {} late {} dropped {} reasons {}",
        ol["achieved_rate_per_s"], ol["late"], ol["dropped"], ol["rate_not_met_reasons"]
    );
    assert_eq!(u(&ol["intended"]), 1000, "{ol:#}");
    let achieved = f(&ol["achieved_rate_per_s"]);
    // Sends in the drain do not count: ~200/s, not the ~260/s that started overall.
    assert!(achieved < 400.0, "achieved {achieved}/s\n{ol:#}");
    // Late counts started sends only: all but the first few waited for the one connection.
    assert!(
        u(&ol["late"]) as f64 > 0.8 * u(&ol["started"]) as f64,
        "{ol:#}"
    );
    assert!(u(&ol["dropped"]) > 500, "{ol:#}");
    assert_eq!(u(&ol["dropped"]), u(&ol["dropped_unsent"]), "{ol:#}");
    assert_eq!(
        u(&ol["started"]) + u(&ol["dropped"]),
        u(&ol["intended"]),
        "{ol:#}"
    );
    assert_eq!(ol["rate_not_met"], true);
    let reasons: Vec<String> = ol["rate_not_met_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[0].starts_with("achieved ") && reasons[0].contains("1000/s"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("arrivals dropped"), "{reasons:?}");
    assert!(reasons[2].starts_with("schedule lag p99"), "{reasons:?}");

    // The human summary: corrected latency first and said so, then the warning and its reasons.
    let r = run_load(&args, LIMIT);
    assert_eq!(r.code, 0, "{}", r.describe());
    let out = &r.stdout;
    let corrected = out
        .find("Latency is corrected")
        .unwrap_or_else(|| panic!("{out}"));
    let latency = out
        .find("  Latency     p50")
        .unwrap_or_else(|| panic!("{out}"));
    let uncorrected = out
        .find("  Uncorrected p50")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(corrected < latency && latency < uncorrected, "{out}");
    assert!(out.contains("WARNING: RATE NOT MET"), "{out}");
    assert!(out.contains("arrivals dropped"), "{out}");
}

#[test]
fn the_summary_shows_corrected_latency_by_default_and_says_so() {
    let _cpu = cpu_shared();
    let s = server(Behaviour::default());
    let r = run_load(
        &["http", &url(&s), "--rate", "200", "-c", "4", "-d", "500ms"],
        LIMIT,
    );
    assert_eq!(r.code, 0, "{}", r.describe());
    assert!(
        r.stdout
            .contains("Latency is corrected: counted from each request's intended send time"),
        "{}",
        r.stdout
    );
    // Corrected first (the "Latency" line), the uncorrected one below it and labelled. Whether
    // the warning appears is not asserted here: at 200/s it depends only on the schedule lag,
    // which a busy shared machine can push over LAG_P99_LIMIT (the overload test covers it).
    let latency = r
        .stdout
        .find("  Latency     p50")
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let uncorrected = r
        .stdout
        .find("  Uncorrected p50")
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(latency < uncorrected, "{}", r.stdout);
    assert!(r.stdout.contains("(from the actual send)"), "{}", r.stdout);
}

#[test]
fn conn_rate_steps_and_find_max_land_near_a_known_capacity() {
    let _cpu = cpu_shared();
    // Seed 003's shape (httperf/autobench): a rising connection rate, 10 requests per connection,
    // a reply timeout. The server answers at most 2000 requests/s, so 200 connections/s.
    const CAPACITY_REQ: f64 = 2000.0;
    const PER_CONN: f64 = 10.0;
    const CAPACITY_CONN: f64 = CAPACITY_REQ / PER_CONN;
    let s = server(Behaviour {
        freeze: None,
        capacity_per_s: Some(CAPACITY_REQ),
    });
    let url = url(&s);
    let doc = valid_http_doc(
        &url,
        &[
            "--conn-rate",
            "50",
            "--requests-per-conn",
            "10",
            "--steps",
            "100:300:100",
            "--step-duration",
            "1s",
            "--timeout",
            "5s",
        ],
    );
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (k, st) in steps.iter().enumerate() {
        let ol = &st["open_loop"];
        let asked = 100.0 * (k + 1) as f64;
        assert_eq!(ol["kind"], "conn_rate");
        assert_eq!(f(&ol["asked_rate_per_s"]), asked);
        // One second of schedule: exactly `asked` connections intended and started.
        assert_eq!(u(&ol["intended"]), asked as u64, "{ol:#}");
        assert_eq!(u(&ol["connections"]["started"]), asked as u64, "{ol:#}");
    }
    let p99: Vec<u64> = steps.iter().map(|s| u(&s["latency"]["p99_us"])).collect();
    let life: Vec<u64> = steps
        .iter()
        .map(|s| u(&s["open_loop"]["connections"]["lifetime"]["p99_us"]))
        .collect();
    let tput: Vec<f64> = steps
        .iter()
        .map(|s| f(&s["throughput"]["requests_per_s"]))
        .collect();
    eprintln!(
        "conn-rate steps 100/200/300: p99 {p99:?} us, lifetime p99 {life:?} us, req/s {tput:?}"
    );
    // Below capacity every connection completes its 10 requests quickly.
    let c0 = &steps[0]["open_loop"]["connections"];
    assert_eq!(u(&c0["completed"]), 100, "{c0:#}");
    assert_eq!(u(&steps[0]["totals"]["requests"]), 1000);
    // Above it the server's queue grows: requests/s stay near capacity, latency climbs. Each
    // request waits behind one request per open connection, so the per-request p99 grows with
    // the number of connections piling up (tens of ms in 1 s) and a connection's lifetime, ten
    // such waits, by far more (measured: 644 us at 100/s, 660 ms at 300/s).
    assert!(tput[2] < 1.1 * CAPACITY_REQ, "{tput:?}");
    // The queue adds about 80 ms to the p99 (79.6-80.0 ms measured on an idle machine, where the
    // 100/s step's p99 is 0.2-0.3 ms), but a saturated machine adds as much to every step (72 ms
    // to the 100/s step's p99 beside pytest's two workers, 88 ms at 300/s): the per-request p99
    // only has to grow. A connection's lifetime, ten waits in the queue, shows it by far more
    // (0.6 ms to 660 ms idle; 353 to 717 ms on that saturated machine).
    assert!(p99[2] > p99[0], "{p99:?}");
    assert!(life[2] > life[0] + 200_000, "{life:?}");

    let doc = run_load(
        &[
            "http",
            &url,
            "--conn-rate",
            "50",
            "--requests-per-conn",
            "10",
            "--find-max",
            // Per-request latency grows slowly over capacity (see above): a tight objective and
            // 2 s steps let a few percent of overload show.
            "--slo",
            "p99<=10ms",
            "--step-duration",
            "2s",
            "--find-max-resolution",
            "10%",
            "--timeout",
            "5s",
            "--json",
        ],
        2 * LIMIT, // about 8 steps of 2 s plus their drains
    )
    .json();
    validate_against_schema(&doc);
    let fm = &doc["find_max"];
    eprintln!(
        "conn-rate find-max: found {}/s for capacity {CAPACITY_CONN}/s; {}",
        fm["found_rate_per_s"], fm["verdicts"]
    );
    assert_eq!(doc["open_loop"]["kind"], "conn_rate");
    // The token bucket lets ~5% more than its capacity through (2,111 req/s at 3,000 asked).
    assert_find_max_bookkeeping(fm, 0.10, 1.15 * CAPACITY_CONN);
}

/// What `--find-max` guarantees on any machine: the found rate is the highest step that passed,
/// the lowest failing step lies within `resolution` above it (the bisection ended there, or ran
/// out of steps), and no step above `ceiling` (what the server can answer at most) passed. How
/// close below the capacity the search lands depends on this machine's latency under load: that
/// is printed by the tests (and quoted in docs/load-generator.md), not asserted.
fn assert_find_max_bookkeeping(fm: &Value, resolution: f64, ceiling: f64) {
    let verdicts: Vec<(f64, bool)> = fm["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (f(&v["rate_per_s"]), v["passed"].as_bool().unwrap()))
        .collect();
    if fm["found_rate_per_s"].is_null() {
        // A machine too busy to meet the objective even at the start rate (CI's neighbours): the
        // search must say so after that one step, not go on or invent a rate.
        assert_eq!(verdicts.len(), 1, "{fm:#}");
        assert!(!verdicts[0].1, "{fm:#}");
        assert!(
            fm["stopped_because"]
                .as_str()
                .unwrap()
                .contains("the start rate already fails"),
            "{fm:#}"
        );
        return;
    }
    let found = f(&fm["found_rate_per_s"]);
    let highest_pass = verdicts
        .iter()
        .filter(|v| v.1)
        .map(|v| v.0)
        .fold(f64::MIN, f64::max);
    let lowest_fail = verdicts
        .iter()
        .filter(|v| !v.1)
        .map(|v| v.0)
        .fold(f64::MAX, f64::min);
    assert_eq!(found, highest_pass, "{fm:#}");
    assert!(
        lowest_fail > found,
        "a step failed below the found rate\n{fm:#}"
    );
    assert!(
        (lowest_fail - found) / found <= resolution + 1e-9 || verdicts.len() >= 40,
        "the search stopped before its resolution\n{fm:#}"
    );
    for (rate, passed) in &verdicts {
        assert!(
            !passed || *rate <= ceiling,
            "{rate}/s passed, above what the server can answer ({ceiling}/s)\n{fm:#}"
        );
    }
}

#[test]
fn conns_per_step_opens_exactly_that_many_connections_per_step() {
    let _cpu = cpu_shared();
    // Autobench's num_conn: each step of a --conn-rate sweep opens a fixed number of connections,
    // so it lasts N / rate. Counted by the generator and by the server (real sockets); two threads
    // share the schedule, so each thread's share must add up to N.
    const N: u64 = 60;
    let s = server(Behaviour::default());
    let url = url(&s);
    let doc = valid_http_doc(
        &url,
        &[
            "--conn-rate",
            "100",
            "--requests-per-conn",
            "3",
            "--steps",
            "100:300:100",
            "--conns-per-step",
            &N.to_string(),
            "-t",
            "2",
            "--timeout",
            "5s",
        ],
    );
    assert_eq!(u(&doc["config"]["conns_per_step"]), N);
    assert!(
        doc["config"]["step_duration_s"].is_null(),
        "{:#}",
        doc["config"]
    );
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (k, st) in steps.iter().enumerate() {
        let ol = &st["open_loop"];
        let rate = 100.0 * (k + 1) as f64;
        assert_eq!(f(&ol["asked_rate_per_s"]), rate);
        assert_eq!(u(&ol["intended"]), N, "{ol:#}");
        assert_eq!(u(&ol["connections"]["started"]), N, "{ol:#}");
        assert_eq!(u(&ol["connections"]["completed"]), N, "{ol:#}");
        assert_eq!(u(&st["totals"]["requests"]), 3 * N);
        // The step's schedule cannot end before its last connection was due ((N-1)/rate).
        assert!(
            f(&st["duration_s"]) >= (N - 1) as f64 / rate,
            "step {rate}/s lasted {}",
            st["duration_s"]
        );
    }
    assert_eq!(s.connections.load(Ordering::Relaxed), 3 * N);
    assert_eq!(s.requests.load(Ordering::Relaxed), 3 * 3 * N);

    // A single rate takes it too; the count goes with --conn-rate and fixed gaps only.
    let one = http_doc(&url, &["--conn-rate", "200", "--conns-per-step", "25"]);
    assert_eq!(u(&one["open_loop"]["connections"]["started"]), 25);
    for (bad, why) in [
        (
            &["--rate", "100", "--conns-per-step", "5"][..],
            "--conn-rate",
        ),
        (
            &[
                "--conn-rate",
                "100",
                "--conns-per-step",
                "5",
                "--arrival",
                "poisson",
            ][..],
            "uniform",
        ),
        (
            &[
                "--conn-rate",
                "100",
                "--steps",
                "100:200:100",
                "--conns-per-step",
                "5",
                "--step-duration",
                "1s",
            ][..],
            "N / rate",
        ),
        (
            &["--conn-rate", "100", "--conns-per-step", "0"][..],
            "at least 1",
        ),
    ] {
        let mut args = vec!["http", url.as_str()];
        args.extend_from_slice(bad);
        let r = run_load(&args, LIMIT);
        assert_eq!(r.code, 2, "{}", r.describe());
        assert!(r.stderr.contains(why), "{bad:?}: {}", r.stderr);
    }
}
