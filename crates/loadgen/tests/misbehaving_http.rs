//! `netarena-load http` against real servers on loopback that misbehave on purpose.
//!
//! Each fault must land in the error class docs/load-generator.md gives it, and the run must go on:
//! the other requests keep succeeding and the tool exits 0 with its JSON result. Faults are injected
//! on a fraction of requests so both halves of that claim are checked in one run. Where the server
//! can count its own faults, the generator's count must match it up to the requests that were still
//! in flight when the run stopped (at most one per connection).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use common::*;

/// Upper bound for any single generator run in this file; runs are 0.5–1.5 s of load.
const RUN_LIMIT: Duration = Duration::from_secs(20);
/// What a run may take beyond what its options make it last, on a slow or stalling host (process
/// start-up, scheduling): far below the failures the bounds that use it catch (runs held for minutes).
const SLOW_HOST_SLACK: Duration = Duration::from_secs(5);

/// `netarena-load http URL -c CONNECTIONS ARGS... --json` within RUN_LIMIT: its checked result.
fn http_json(url: &str, connections: &str, args: &[&str]) -> Result {
    let mut all = vec!["http", url, "-c", connections];
    all.extend_from_slice(args);
    run_json(&all, RUN_LIMIT)
}

fn count_fault(stats: &Stats) {
    stats.misbehaved.fetch_add(1, Ordering::SeqCst);
}

/// `lo <= got <= hi`, with the run's output in the failure message.
fn assert_between(r: &Result, what: &str, got: u64, lo: u64, hi: u64) {
    assert!(
        got >= lo && got <= hi,
        "{what} = {got}, expected {lo}..={hi}\n{}",
        r.context
    );
}

/// The generator saw `got` faults of the server's `sent`; up to one per connection may have been
/// in flight when the run stopped and so never counted.
fn assert_faults_counted(r: &Result, class: &str, sent: u64, connections: u64) {
    // A fault that lands in another class is the more telling failure, so it is reported first.
    r.assert_only_errors(&[class]);
    let got = r.class(class);
    assert!(
        sent > 0,
        "the server never misbehaved; the test proves nothing\n{}",
        r.context
    );
    assert_between(
        r,
        &format!("errors.by_class.{class}"),
        got,
        sent.saturating_sub(connections),
        sent,
    );
}

// ---------------------------------------------------------------------------------------------
// Correct servers
// ---------------------------------------------------------------------------------------------

#[test]
fn correct_server_keep_alive_for_a_duration() {
    let server = hello_server();
    let url = server.url("/hello");
    let run = run_load(&["http", &url, "-c", "4", "-d", "1s", "--json"], RUN_LIMIT);
    let r = run.result();

    assert_eq!(
        r.u64("/errors/total"),
        0,
        "a correct server produced errors\n{}",
        r.context
    );
    let requests = r.u64("/totals/requests");
    assert!(requests > 0, "no requests completed\n{}", r.context);
    assert_eq!(r.u64("/totals/responses"), requests, "{}", r.context);
    // Each connection may end with a request in flight: a censored entry of the histogram.
    let censored = r.u64("/latency/censored");
    assert!(censored <= 4, "{}", r.context);
    assert_eq!(
        r.u64("/latency/count"),
        requests + censored,
        "latency.count != totals.requests + latency.censored\n{}",
        r.context
    );
    r.assert_latency_ordered("/latency");
    // Keep-alive: the four connections are opened once and reused.
    assert_eq!(r.u64("/totals/connections_opened"), 4, "{}", r.context);
    assert!(
        r.u64("/totals/bytes_received") > requests * HELLO.len() as u64,
        "{}",
        r.context
    );
    assert!(r.u64("/totals/bytes_sent") > 0, "{}", r.context);
    // The server answered at least every request the generator counted (more may be in flight).
    assert!(
        server.stats.good() >= requests,
        "server sent {} responses, generator counted {requests}",
        server.stats.good()
    );

    // It ran for the -d asked and stopped by itself (one that does not stop is killed at
    // RUN_LIMIT): the measured phase lies within the process's life, whatever the machine's speed.
    let duration_s = r.f64("/duration_s");
    assert!(
        (1.0..=run.wall.as_secs_f64()).contains(&duration_s),
        "duration_s {duration_s} for -d 1s, in a process that lived {:?}\n{}",
        run.wall,
        r.context
    );
    let rps = r.f64("/throughput/requests_per_s");
    let expected = requests as f64 / duration_s;
    assert!(
        (rps - expected).abs() <= expected * 0.001 + 1.0,
        "requests_per_s {rps} but requests / duration_s = {expected}\n{}",
        r.context
    );

    let timeline = r
        .get("/timeline")
        .as_array()
        .expect("timeline is an array")
        .clone();
    assert!(!timeline.is_empty(), "empty timeline\n{}", r.context);
    let timeline_requests: u64 = timeline
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(
        timeline_requests, requests,
        "timeline requests do not add up to totals.requests\n{}",
        r.context
    );

    assert_eq!(r.get("/mode"), "http");
    assert_eq!(r.u64("/config/connections"), 4);
    assert_eq!(r.get("/echo"), &serde_json::Value::Null);
}

#[test]
fn requests_n_counts_exactly_n_responses() {
    let server = hello_server();
    let url = server.url("/hello");
    let r = http_json(&url, "3", &["--requests", "137"]);
    assert_eq!(r.u64("/totals/responses"), 137, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), 137, "{}", r.context);
    assert_eq!(r.u64("/latency/count"), 137, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/config/requests"), 137, "{}", r.context);
    assert!(server.stats.good() >= 137);
}

#[test]
fn close_mode_opens_one_connection_per_request() {
    let server = hello_server();
    let url = server.url("/hello");
    let r = http_json(&url, "2", &["--requests", "50", "--close"]);
    assert_eq!(r.u64("/totals/requests"), 50, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    // The last connections may have been opened for requests that the stop made unnecessary.
    let opened = r.u64("/totals/connections_opened");
    assert_between(&r, "connections_opened", opened, 50, 52);

    let per_conn = server.stats.per_connection.lock().unwrap().clone();
    assert!(
        per_conn.iter().all(|&n| n <= 1),
        "a --close connection carried several requests: {per_conn:?}"
    );
    let first = server.stats.first_requests.lock().unwrap().clone();
    for req in &first {
        assert_eq!(
            req.header("connection")
                .map(|v| v.to_ascii_lowercase())
                .as_deref(),
            Some("close"),
            "--close request without `Connection: close`: {req:?}"
        );
    }
}

#[test]
fn requests_carry_method_headers_and_body() {
    let server = hello_server();
    let url = server.url("/submit?x=1");
    let r = http_json(
        &url,
        "1",
        &[
            "--requests",
            "3",
            "-m",
            "POST",
            "-H",
            "X-Netarena-Test: yes",
            "--body",
            "abc=123",
        ],
    );
    assert_eq!(r.u64("/totals/requests"), 3, "{}", r.context);
    let first = server.stats.first_requests.lock().unwrap().clone();
    assert!(first.len() >= 3, "server saw {} requests", first.len());
    for req in &first[..3] {
        assert_eq!(req.method, "POST", "{req:?}");
        assert_eq!(req.target, "/submit?x=1", "{req:?}");
        assert_eq!(req.version, "HTTP/1.1", "{req:?}");
        assert_eq!(req.header("x-netarena-test"), Some("yes"), "{req:?}");
        assert_eq!(req.header("content-length"), Some("7"), "{req:?}");
        assert_eq!(
            req.header("host"),
            Some(server.host_port().as_str()),
            "{req:?}"
        );
        assert_eq!(req.body, b"abc=123", "{req:?}");
    }
    assert_eq!(
        first[1].index_on_connection, 1,
        "keep-alive connection was not reused"
    );
}

#[test]
fn body_file_is_sent_byte_for_byte() {
    // Binary content (NUL, CR LF, 0xff): the file is sent as read, never as text.
    let body: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let path = std::env::temp_dir().join(format!("netarena-body-{}.bin", std::process::id()));
    std::fs::write(&path, &body).unwrap();
    let server = hello_server();
    let url = server.url("/upload");
    let path_s = path.to_str().unwrap();
    let r = http_json(
        &url,
        "1",
        &["--requests", "3", "-m", "PUT", "--body-file", path_s],
    );
    std::fs::remove_file(&path).ok();
    assert_eq!(r.u64("/totals/requests"), 3, "{}", r.context);
    assert_eq!(r.u64("/config/body_bytes"), 10_000, "{}", r.context);
    let first = server.stats.first_requests.lock().unwrap().clone();
    assert!(first.len() >= 3, "server saw {} requests", first.len());
    for req in &first[..3] {
        assert_eq!(req.method, "PUT");
        assert_eq!(req.header("content-length"), Some("10000"));
        assert!(req.body == body, "the server received another body");
    }
    // A missing file is a usage error that names the file, before anything is sent.
    let missing = std::env::temp_dir().join("netarena-no-such-body-file");
    let run = run_load(
        &[
            "http",
            &url,
            "-n",
            "1",
            "--body-file",
            missing.to_str().unwrap(),
        ],
        RUN_LIMIT,
    );
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr.contains("--body-file") && run.stderr.contains("netarena-no-such-body-file"),
        "{}",
        run.describe()
    );
    assert_eq!(server.stats.requests(), 3, "the refused run sent a request");
}

/// `--cpus` pins each load thread to its CPU: the result records the CPUs, and while the run goes
/// on the kernel reports each `load-N` thread's affinity as exactly that one CPU.
#[test]
fn cpus_pins_each_load_thread() {
    let allowed = netarena_load::sys::allowed_cpus();
    assert!(!allowed.is_empty(), "cannot read this process's CPU mask");
    // Two threads on the last allowed CPUs, listed in reverse so thread order is visible.
    let a = allowed[allowed.len() - 1];
    let b = allowed[allowed.len().saturating_sub(2)];
    let cpus = format!("{a},{b}");
    let server = hello_server();
    let url = server.url("/hello");
    let running = spawn_load(&[
        "http", &url, "-c", "2", "-t", "2", "--cpus", &cpus, "-d", "1500ms", "--json",
    ]);
    let expected: std::collections::BTreeMap<String, String> = [
        ("load-0".to_string(), a.to_string()),
        ("load-1".to_string(), b.to_string()),
    ]
    .into();
    // Sample /proc until both load threads are seen pinned (they exist for the whole 1.5 s; a thread is
    // named when it is spawned and pins itself first thing, so the first sample may predate the pinning).
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    let started = std::time::Instant::now();
    while seen != expected && started.elapsed() < Duration::from_secs(5) {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", running.pid())) {
            for t in tasks.flatten() {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
                let list = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_string());
                if let (true, Some(list)) = (comm.trim().starts_with("load-"), list) {
                    seen.insert(comm.trim().to_string(), list);
                }
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    // Bounded like every run here: a hung generator is killed, and the test fails on its output.
    let doc = running.finish(RUN_LIMIT).json();
    assert_eq!(
        seen, expected,
        "load threads' Cpus_allowed_list while running"
    );
    assert_eq!(doc["generator"]["cpus"], serde_json::json!([a, b]), "{doc}");
    assert_eq!(doc["config"]["cpus"], serde_json::json!([a, b]), "{doc}");
    assert!(doc["totals"]["requests"].as_u64().unwrap() > 0, "{doc}");
}

/// Requests in `--warmup` reach the server but are not counted: the server answers more requests
/// than the result reports, and what it reports comes from the measured phase only.
#[test]
fn warmup_requests_are_sent_but_not_counted() {
    let server = hello_server();
    let url = server.url("/hello");
    let r = http_json(&url, "2", &["--warmup", "700ms", "-d", "700ms"]);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert!((r.f64("/warmup_s") - 0.7).abs() < 0.2, "{}", r.context);
    let reported = r.u64("/totals/requests");
    let served = server.stats.good();
    assert!(reported > 0, "{}", r.context);
    // Warm-up as long as the measurement: the server answered well over what was counted (a
    // tenth more at least, whatever the machine's speed), and never fewer.
    assert!(
        served > reported + reported / 10,
        "server answered {served}, result counts {reported}: the warm-up was counted or not run\n{}",
        r.context
    );
    // The warm-up's answers are reported apart: with the measured ones and those in flight at the
    // end they account for what the server served. The loop turn that notices the end may already
    // have sent a connection's next request, which the server serves and nobody reads: at most one
    // more per connection (2 here).
    let warmup = r.u64("/totals/warmup_responses");
    assert!(warmup > 0, "{}", r.context);
    assert!(
        reported + warmup <= served
            && served <= reported + warmup + r.u64("/totals/unfinished") + 2,
        "server answered {served}: {reported} measured + {warmup} in the warm-up + unfinished\n{}",
        r.context
    );
    assert_eq!(
        r.u64("/latency/count"),
        reported + r.u64("/latency/censored"),
        "{}",
        r.context
    );
    let timeline: u64 = r
        .get("/timeline")
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(
        timeline, reported,
        "the timeline includes warm-up\n{}",
        r.context
    );
}

#[test]
fn pipelined_requests_all_answered() {
    let server = hello_server();
    let url = server.url("/hello");
    let r = http_json(&url, "2", &["--pipeline", "4", "--requests", "200"]);
    assert_eq!(r.u64("/totals/responses"), 200, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/totals/connections_opened"), 2, "{}", r.context);
}

/// Chunked framing with the status line, headers, chunk sizes, chunk extensions and trailers all cut
/// across separate writes, so the parser must resume at every awkward boundary.
fn split_chunked_server() -> TestServer {
    http_server(loopback_listener(), None, |n, _, s, stats| {
        let gap = Duration::from_millis(2);
        if n % 2 == 0 {
            write_split(
                s,
                &[
                    b"HTTP/1.1 200 OK\r\nTransfer-Enc",
                    b"oding: chunked\r\nContent-Type: text/plain\r",
                    b"\n\r",
                    b"\n5;ext=\"x\"\r\nHel",
                    b"lo\r\n",
                    b"8\r\n, World!",
                    b"\r",
                    b"\n0\r\nX-Trailer: 1\r\n",
                    b"\r\n",
                ],
                gap,
            )?;
        } else {
            // One upper-case hex chunk, the terminating chunk split from its CRLF.
            write_split(
                s,
                &[
                    b"HTTP/1.1 200 OK\r\n",
                    b"Transfer-Encoding: chunked\r\n\r\nD\r\nHello, World!\r\n0\r",
                    b"\n\r\n",
                ],
                gap,
            )?;
        }
        stats.good.fetch_add(1, Ordering::SeqCst);
        Ok(After::KeepAlive)
    })
}

#[test]
fn chunked_body_split_across_writes_is_parsed_and_verified() {
    let server = split_chunked_server();
    let url = server.url("/chunked");
    let digest = sha256_hex(HELLO);
    let r = http_json(
        &url,
        "2",
        &["--requests", "20", "--expect-body-sha256", &digest],
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), 20, "{}", r.context);
    assert_eq!(
        r.u64("/totals/connections_opened"),
        2,
        "chunked responses broke keep-alive\n{}",
        r.context
    );

    let r = http_json(&url, "2", &["--requests", "20", "--expect-body-size", "13"]);
    assert_eq!(
        r.u64("/errors/total"),
        0,
        "de-chunked body is not 13 bytes?\n{}",
        r.context
    );

    let wrong = sha256_hex(b"Hello, World?");
    let r = http_json(
        &url,
        "2",
        &["--requests", "20", "--expect-body-sha256", &wrong],
    );
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    assert_eq!(r.u64("/totals/responses"), 20, "{}", r.context);
    assert_eq!(r.class("verification_mismatch"), 20, "{}", r.context);
    r.assert_only_errors(&["verification_mismatch"]);
}

#[test]
fn close_delimited_body_is_a_success() {
    let server = http_server(loopback_listener(), None, |_, _, s, stats| {
        write_split(
            s,
            &[
                b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nHello, ",
                b"World!",
            ],
            Duration::from_millis(2),
        )?;
        stats.good.fetch_add(1, Ordering::SeqCst);
        Ok(After::Close)
    });
    let url = server.url("/hello");
    let digest = sha256_hex(HELLO);
    // A duration rather than --requests, so that a generator that misses the close fails this test
    // with `timeout` errors in its result instead of running until it is killed.
    let r = http_json(
        &url,
        "2",
        &[
            "-d",
            "1s",
            "--timeout",
            "500ms",
            "--expect-body-sha256",
            &digest,
        ],
    );
    r.assert_only_errors(&[]);
    let requests = r.u64("/totals/requests");
    assert!(
        requests >= 20,
        "only {requests} close-delimited responses in 1 s\n{}",
        r.context
    );
    assert!(
        r.u64("/totals/connections_opened") >= requests,
        "{}",
        r.context
    );
}

/// RFC 9112 §6.3 with servers that send odd but legal Transfer-Encoding: the final coding decides
/// (chunked: chunked framing; anything else: the body runs until the close), Transfer-Encoding
/// overrides Content-Length, and several Transfer-Encoding lines form one list. Every variant's
/// body is "Hello, World!" as received, so a wrong framing shows as a digest mismatch, a parse
/// error or a timeout.
#[test]
fn transfer_encoding_final_coding_decides_the_framing() {
    // (head, body as sent, the server closes after it)
    let variants: [(&'static str, &'static [u8], bool); 4] = [
        ("Transfer-Encoding: gzip\r\nContent-Length: 3", HELLO, true),
        (
            "Content-Length: 100\r\nTransfer-Encoding: chunked",
            b"D\r\nHello, World!\r\n0\r\n\r\n",
            false,
        ),
        (
            "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
            b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\n\r\n",
            false,
        ),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\nContent-Length: 5",
            HELLO,
            true,
        ),
    ];
    for (head, body, closes) in variants {
        let server = http_server(loopback_listener(), None, move |_, _, s, stats| {
            let mut wire = format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\n").into_bytes();
            wire.extend_from_slice(body);
            s.write_all(&wire)?;
            stats.good.fetch_add(1, Ordering::SeqCst);
            Ok(if closes {
                After::Close
            } else {
                After::KeepAlive
            })
        });
        let url = server.url("/hello");
        let digest = sha256_hex(HELLO);
        // A duration, not --requests: a framing that waits for bytes that never come must end as
        // `timeout` errors in the result, not as a run killed at RUN_LIMIT.
        let r = http_json(
            &url,
            "2",
            &[
                "-d",
                "500ms",
                "--timeout",
                "300ms",
                "--expect-body-sha256",
                &digest,
            ],
        );
        r.assert_only_errors(&[]);
        let requests = r.u64("/totals/requests");
        assert!(
            requests >= 10,
            "{head:?}: {requests} requests\n{}",
            r.context
        );
        let opened = r.u64("/totals/connections_opened");
        if closes {
            assert!(opened >= requests, "{head:?}\n{}", r.context);
        } else {
            assert_eq!(opened, 2, "{head:?}: keep-alive not kept\n{}", r.context);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Broken connections
// ---------------------------------------------------------------------------------------------

#[test]
fn reset_mid_response_is_reset() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        match n % 3 {
            // RST after part of the body, once the client has had time to read that part.
            1 => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHel")?;
                thread::sleep(Duration::from_millis(10));
                count_fault(stats);
                reset(s.try_clone()?);
                Ok(After::Gone)
            }
            // RST with no response byte at all.
            2 => {
                count_fault(stats);
                reset(s.try_clone()?);
                Ok(After::Gone)
            }
            _ => write_hello(s, stats),
        }
    });
    let url = server.url("/hello");
    let r = http_json(&url, "2", &["--requests", "30"]);
    assert_eq!(
        r.u64("/totals/requests"),
        30,
        "the run did not go on after resets\n{}",
        r.context
    );
    assert_faults_counted(&r, "reset", server.stats.misbehaved(), 2);
    r.assert_only_errors(&["reset"]);
    assert!(
        r.u64("/totals/connections_opened") > 2,
        "reset connections were not replaced\n{}",
        r.context
    );
}

#[test]
fn close_before_or_during_response_is_closed_early() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        let partial: &[u8] = match n % 4 {
            1 => b"",                                                   // before any byte
            2 => b"HTTP/1.1 200 OK\r\nContent-Le",                      // inside the headers
            3 => b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello", // inside the body
            _ => return write_hello(s, stats),
        };
        s.write_all(partial)?;
        count_fault(stats);
        Ok(After::Close)
    });
    let url = server.url("/hello");
    // A duration rather than --requests: see close_delimited_body_is_a_success.
    let r = http_json(&url, "2", &["-d", "1s", "--timeout", "500ms"]);
    assert_faults_counted(&r, "closed_early", server.stats.misbehaved(), 2);
    assert!(
        r.u64("/totals/requests") >= 10,
        "the run did not go on after early closes\n{}",
        r.context
    );
}

/// A server that accepts and at once closes its sending side, before any request arrived. Its FIN
/// often reaches the client in the same readiness event as the connect completing; that connection
/// did connect, so it must count as `closed_early`, never as `connect_refused`. The server then
/// drains until the client closes, so its close sends a FIN, not an RST for an unread request
/// (which would honestly be `reset`; see accept_then_close_at_once_is_never_a_connect_error).
#[test]
fn accept_then_fin_at_once_is_closed_early_not_refused() {
    let server = TestServer::start(loopback_listener(), None, |mut s, _, ctx| {
        let _ = s.shutdown(std::net::Shutdown::Write);
        count_fault(&ctx.stats);
        ctx.hold_until_peer_closes(&mut s);
    });
    let url = server.url("/hello");
    // Many connections, each failing at once and replaced: hundreds of connects in the second,
    // so both orders (FIN with the connect, FIN after the request) occur.
    let r = http_json(&url, "20", &["-d", "1s", "--timeout", "500ms"]);
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    assert_faults_counted(&r, "closed_early", server.stats.misbehaved(), 20);
    assert!(
        r.class("closed_early") >= 40,
        "too few connections to exercise the race\n{}",
        r.context
    );
}

/// Same, but the server closes the socket outright: a request that reached it unread turns its
/// close into an RST (`reset`); an empty one is a FIN (`closed_early`). Either way the connect
/// succeeded, so no connect class may appear.
#[test]
fn accept_then_close_at_once_is_never_a_connect_error() {
    let server = TestServer::start(loopback_listener(), None, |s, _, ctx| {
        count_fault(&ctx.stats);
        drop(s);
    });
    let url = server.url("/hello");
    let r = http_json(&url, "20", &["-d", "1s", "--timeout", "500ms"]);
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    r.assert_only_errors(&["closed_early", "reset"]);
    assert!(
        r.class("closed_early") + r.class("reset") >= 40,
        "too few connections to exercise the race\n{}",
        r.context
    );
}

#[test]
fn invalid_http_is_parse_error() {
    let variants: [&[u8]; 5] = [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 2OO OK\r\nContent-Length: 13\r\n\r\nHello, World!",
        b"HTTP/1.1 200 OK\r\nHeader without colon\r\nContent-Length: 13\r\n\r\nHello, World!",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nHello, World!\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nHello, World!",
    ];
    let server = http_server(loopback_listener(), None, move |n, _, s, stats| {
        if n % 3 != 1 {
            return write_hello(s, stats);
        }
        s.write_all(variants[(n / 3) as usize % variants.len()])?;
        count_fault(stats);
        // Leave the connection open: the generator has to notice the garbage itself, not the close.
        Ok(After::Hold)
    });
    let url = server.url("/hello");
    let r = http_json(&url, "2", &["--requests", "30", "--timeout", "3s"]);
    assert_eq!(r.u64("/totals/requests"), 30, "{}", r.context);
    assert!(
        server.stats.misbehaved() >= 10,
        "every variant should have been sent at least twice"
    );
    assert_faults_counted(&r, "parse_error", server.stats.misbehaved(), 2);
    r.assert_only_errors(&["parse_error"]);
}

// ---------------------------------------------------------------------------------------------
// Verification
// ---------------------------------------------------------------------------------------------

/// Every third response (from the third on) is what `fault` writes, counted as a fault, and the
/// connection is kept; the others are "Hello, World!".
fn every_third_faulty<F>(fault: F) -> TestServer
where
    F: Fn(&mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
{
    http_server(loopback_listener(), None, move |n, _, s, stats| {
        if n % 3 == 2 {
            fault(s)?;
            count_fault(stats);
            Ok(After::KeepAlive)
        } else {
            write_hello(s, stats)
        }
    })
}

/// Every third response (from the third on) carries `bad` instead of "Hello, World!".
fn sometimes_wrong_body(bad: &'static [u8]) -> TestServer {
    every_third_faulty(move |s| write_response(s, 200, "OK", bad))
}

#[test]
fn wrong_bytes_same_length_fail_sha256() {
    let server = sometimes_wrong_body(b"Hello, World?");
    let digest = sha256_hex(HELLO);
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["--requests", "30", "--expect-body-sha256", &digest],
    );
    assert_eq!(r.u64("/totals/responses"), 30, "{}", r.context);
    assert_faults_counted(&r, "verification_mismatch", server.stats.misbehaved(), 2);
    assert_eq!(
        r.u64("/totals/requests") + r.class("verification_mismatch"),
        30,
        "{}",
        r.context
    );
    r.assert_only_errors(&["verification_mismatch"]);
    // Upper-case hex is the same digest.
    let r = http_json(
        &server.url("/hello"),
        "1",
        &[
            "--requests",
            "2",
            "--expect-body-sha256",
            &digest.to_uppercase(),
        ],
    );
    assert_eq!(
        r.u64("/errors/total"),
        0,
        "upper-case digest not accepted as the same digest\n{}",
        r.context
    );
}

#[test]
fn wrong_length_fails_expect_body_size() {
    let server = sometimes_wrong_body(b"Hello, World!!");
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["--requests", "30", "--expect-body-size", "13"],
    );
    assert_eq!(r.u64("/totals/responses"), 30, "{}", r.context);
    assert_faults_counted(&r, "verification_mismatch", server.stats.misbehaved(), 2);
    r.assert_only_errors(&["verification_mismatch"]);
}

#[test]
fn verify_learn_flags_responses_that_differ_from_the_first() {
    // Requests 0 and 1 are answered correctly, so whichever completes first is the right one.
    let server = sometimes_wrong_body(b"Hello, World?");
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["--requests", "30", "--verify-learn"],
    );
    assert_eq!(r.u64("/totals/responses"), 30, "{}", r.context);
    assert_faults_counted(&r, "verification_mismatch", server.stats.misbehaved(), 2);
    r.assert_only_errors(&["verification_mismatch"]);

    // And a server that never changes passes --verify-learn cleanly.
    let server = hello_server();
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["--requests", "30", "--verify-learn"],
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
}

#[test]
fn non_2xx_status_is_counted_by_code() {
    let server = every_third_faulty(|s| write_response(s, 503, "Service Unavailable", b"busy"));
    let r = http_json(&server.url("/hello"), "2", &["--requests", "30"]);
    assert_eq!(r.u64("/totals/responses"), 30, "{}", r.context);
    assert_faults_counted(&r, "status", server.stats.misbehaved(), 2);
    let codes = r.status_codes();
    assert_eq!(codes.len(), 1, "status_codes {codes:?}\n{}", r.context);
    assert_eq!(
        codes.get("503").copied(),
        Some(r.class("status")),
        "status_codes {codes:?}\n{}",
        r.context
    );
    assert_eq!(
        r.u64("/totals/requests") + r.class("status"),
        30,
        "{}",
        r.context
    );
    r.assert_only_errors(&["status"]);
}

#[test]
fn redirect_is_success_by_default_and_an_error_under_expect_status() {
    let server = every_third_faulty(|s| {
        s.write_all(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")
    });
    let r = http_json(&server.url("/hello"), "2", &["--requests", "30"]);
    assert_eq!(
        r.u64("/errors/total"),
        0,
        "3xx must count as success without --expect-status\n{}",
        r.context
    );

    let before = server.stats.misbehaved();
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["--requests", "30", "--expect-status", "200"],
    );
    assert_faults_counted(&r, "status", server.stats.misbehaved() - before, 2);
    assert_eq!(
        r.status_codes().get("302").copied(),
        Some(r.class("status")),
        "{}",
        r.context
    );
    r.assert_only_errors(&["status"]);
}

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

#[test]
fn reply_slower_than_timeout_is_timeout_and_connection_replaced() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        if n == 3 || n == 7 {
            count_fault(stats);
            return Ok(After::Hold);
        }
        write_hello(s, stats)
    });
    let r = http_json(
        &server.url("/hello"),
        "2",
        &["-d", "1500ms", "--timeout", "300ms"],
    );
    assert_eq!(
        r.class("timeout"),
        2,
        "two requests were never answered\n{}",
        r.context
    );
    r.assert_only_errors(&["timeout"]);
    assert!(r.u64("/totals/requests") > 10, "{}", r.context);
    assert!(
        r.u64("/totals/connections_opened") >= 4,
        "a timed-out connection must be closed and replaced\n{}",
        r.context
    );
}

#[test]
fn stall_within_timeout_shows_in_latency_not_errors() {
    let stall = Duration::from_millis(80);
    let server = http_server(loopback_listener(), None, move |n, _, s, stats| {
        if n == 5 {
            thread::sleep(stall);
        }
        write_hello(s, stats)
    });
    let r = http_json(
        &server.url("/hello"),
        "1",
        &["--requests", "40", "--timeout", "2s"],
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let max_us = r.f64("/latency/max_us");
    assert!(
        max_us >= stall.as_micros() as f64,
        "an {stall:?} stall is hidden: max_us = {max_us}\n{}",
        r.context
    );
    let p50_us = r.f64("/latency/p50_us");
    assert!(
        p50_us < stall.as_micros() as f64,
        "p50_us {p50_us}\n{}",
        r.context
    );
}

#[test]
fn listener_that_stops_accepting_gives_timeouts_and_ends_on_time() {
    // Backlog 1: after the two accepted connections, two more handshakes complete into the queue
    // (their requests are never read) and further SYNs are dropped by the kernel.
    let server = http_server(listener_with_backlog(1), Some(2), |_, _, s, stats| {
        write_hello(s, stats)
    });
    let url = server.url("/hello");
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "6",
            "-d",
            "1500ms",
            "--timeout",
            "300ms",
            "--json",
        ],
        RUN_LIMIT,
    );
    // Stuck connects and requests must not hold the run past its end by more than one timeout. A
    // generator that waited for them would wait for the kernel: the dropped SYNs are retried at 1, 3,
    // 7, ... s, for about two minutes. So the bound is the run plus one timeout plus a slack far below
    // that, which a slow or stalling host's start-up and scheduling cannot use up.
    assert!(
        run.wall < Duration::from_millis(1500 + 300) + SLOW_HOST_SLACK,
        "a 1.5 s run with a 300 ms timeout took {:?}\n{}",
        run.wall,
        run.describe()
    );
    let r = run.result();
    assert!(
        r.u64("/totals/requests") > 0,
        "the two accepted connections should keep working\n{}",
        r.context
    );
    r.assert_only_errors(&["connect_timeout", "timeout"]);
    assert!(
        r.class("connect_timeout") + r.class("timeout") > 0,
        "{}",
        r.context
    );
    let duration_s = r.f64("/duration_s");
    assert!(
        (1.4..=run.wall.as_secs_f64()).contains(&duration_s),
        "duration_s {duration_s} for -d 1500ms, in a process that lived {:?}\n{}",
        run.wall,
        r.context
    );
}

#[test]
fn nothing_listening_is_connect_refused() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hello");
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "2",
            "-d",
            "500ms",
            "--timeout",
            "1s",
            "--json",
        ],
        RUN_LIMIT,
    );
    // Refused connects end at once, so the run ends at its -d like any other; one they held (a loop
    // that never gives up) would run into RUN_LIMIT.
    assert!(
        run.wall < Duration::from_millis(500) + SLOW_HOST_SLACK,
        "a 0.5 s run took {:?}\n{}",
        run.wall,
        run.describe()
    );
    let r = run.result();
    assert!(r.class("connect_refused") > 0, "{}", r.context);
    r.assert_only_errors(&["connect_refused"]);
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
}

// ---------------------------------------------------------------------------------------------
// Safety and usage errors
// ---------------------------------------------------------------------------------------------

#[test]
fn non_loopback_target_is_refused_before_connecting() {
    // 192.0.2.0/24 is TEST-NET-1: never routed, and the tool must not even try.
    for args in [
        vec!["http", "http://192.0.2.1/", "--json", "-d", "1s"],
        vec!["http", "http://192.0.2.1:8080/hello", "-n", "1"],
        vec!["echo", "192.0.2.1:7", "--json"],
    ] {
        let run = run_load(&args, Duration::from_secs(10));
        assert_eq!(
            run.code,
            2,
            "non-loopback target must exit 2\n{}",
            run.describe()
        );
        assert!(
            run.stderr.contains("--allow-target"),
            "message must name --allow-target\n{}",
            run.describe()
        );
        assert!(
            run.stdout.trim().is_empty(),
            "no result may be printed for a refused target\n{}",
            run.describe()
        );
        // Refused while reading the command line: a connect attempt to this unrouted address would
        // first wait out the 5 s default timeout.
        assert!(
            run.wall < Duration::from_secs(4),
            "refusal took {:?}\n{}",
            run.wall,
            run.describe()
        );
    }
}

#[test]
fn bad_usage_exits_2_with_a_message_naming_the_problem_and_sends_nothing() {
    let server = hello_server();
    let url = server.url("/hello");
    let hp = server.host_port();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["http", &url, "--no-such-flag"], "--no-such-flag"),
        (vec!["http", &url, "--connections", "0"], "connections"),
        (vec!["http", &url, "-c", "many"], "many"),
        (vec!["http", &url, "--threads", "0"], "threads"),
        (vec!["http", &url, "--duration", "10x"], "10x"),
        (vec!["http", &url, "--timeout", "soon"], "soon"),
        (
            vec!["http", &url, "--expect-body-sha256", "not-hex"],
            "sha256",
        ),
        (vec!["http", &url, "--cpus", "1-"], "cpus"),
        (vec!["http", "ftp://127.0.0.1/x"], "ftp"),
        (vec!["http"], "url"),
        (vec!["echo", &hp, "--chunk", "0"], "chunk"),
        (vec!["echo", &hp, "--bytes", "lots"], "lots"),
        (vec!["bogus-mode", &url], "bogus-mode"),
    ];
    for (mut args, needle) in cases {
        args.push("--json");
        let run = run_load(&args, Duration::from_secs(10));
        assert_eq!(run.code, 2, "bad usage must exit 2\n{}", run.describe());
        assert!(
            run.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "the message should name `{needle}`\n{}",
            run.describe()
        );
        assert!(
            run.stdout.trim().is_empty(),
            "no result may be printed on bad usage\n{}",
            run.describe()
        );
    }
    // "nothing was sent": give a connect that slipped through time to be accepted, then look.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        server.stats.connections(),
        0,
        "a bad-usage run connected to the target"
    );
    let _ = TcpStream::connect(server.addr); // the server still works: the check above was not vacuous
    thread::sleep(Duration::from_millis(100));
    assert_eq!(server.stats.connections(), 1);
}

/// Whether some thread of process `pid` is blocked in a read of a socket (`read` or `recvfrom`, as
/// std's `TcpStream::read` may use either), from /proc/PID/task/TID/syscall: the number of the
/// system call each thread is in, "running" when none.
fn a_thread_is_in_a_read(pid: i32) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/task: {e}"));
    tasks.flatten().any(|task| {
        let path = task.path().join("syscall");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (readable by the parent of the process)",
                path.display()
            )
        });
        let number = text
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<i64>().ok());
        number == Some(libc::SYS_read) || number == Some(libc::SYS_recvfrom)
    })
}

/// The state letter of process `pid` (`T` when stopped) from /proc/PID/stat, after the command name
/// in parentheses (which may itself hold spaces).
fn process_state(pid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').expect("(comm) in /proc/PID/stat") + 1..];
    after_name.trim_start().chars().next().unwrap()
}

#[test]
fn verify_learn_survives_a_stop_and_continue_during_a_slow_first_answer() {
    // A server whose first answer (the learning request) is slow, like a JIT-cold JVM's first query. A
    // read with a timeout is not restarted after SIGSTOP + SIGCONT: it fails with EINTR, which the
    // learning request must retry rather than report as a failure. The first answer waits until
    // the test has stopped and continued the generator while it was blocked in that read.
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let learning_request_read = Arc::new(AtomicBool::new(false));
    let may_answer = Arc::new(AtomicBool::new(false));
    let (read, answer) = (learning_request_read.clone(), may_answer.clone());
    let server = http_server(loopback_listener(), None, move |index, _, s, stats| {
        if index == 0 {
            read.store(true, Ordering::SeqCst);
            // Bounded: a test that failed before releasing it must not hold the server forever.
            let held = std::time::Instant::now();
            while !answer.load(Ordering::SeqCst) && held.elapsed() < RUN_LIMIT {
                thread::sleep(Duration::from_millis(10));
            }
        }
        write_hello(s, stats)
    });
    let url = server.url("/hello");
    let load = spawn_load(&[
        "http",
        &url,
        "-c",
        "1",
        "--requests",
        "10",
        "--verify-learn",
    ]);
    // The learning request has arrived, so the generator is waiting for its answer: stop it once
    // that wait is a read blocked in the kernel, the path the retry is for.
    wait_until(
        "the generator blocked reading the learning answer",
        RUN_LIMIT,
        || learning_request_read.load(Ordering::SeqCst) && a_thread_is_in_a_read(load.pid()),
    );
    load.signal(libc::SIGSTOP);
    wait_until("the generator stopped", RUN_LIMIT, || {
        process_state(load.pid()) == 'T'
    });
    load.signal(libc::SIGCONT);
    may_answer.store(true, Ordering::SeqCst);
    let run = load.finish(RUN_LIMIT);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert_eq!(
        server.stats.requests(),
        11,
        "the learning request and the 10 asked"
    );
}
