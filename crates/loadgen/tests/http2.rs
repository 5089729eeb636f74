//! `--h2`: HTTP/2 against nginx, a real server, in cleartext (h2c, prior knowledge) and over TLS
//! (ALPN h2): every stream's response verified, exactly `-n` requests sent (nginx's own access log
//! counts them), flow control that lets a body larger than the window through, a graceful GOAWAY
//! (nginx's keepalive_requests) that the load rides over on new connections. Against a scripted
//! server: a wrong body on some streams, RST_STREAM, GOAWAY with an error and a protocol violation,
//! each counted in its own error class while the load goes on. The open loop (`--rate`, its
//! `--steps` and `--find-max`; `--conn-rate`): exactly the schedule's sends against nginx (h2c and
//! TLS), each verified; several streams in flight on one connection of a slow scripted server, whose
//! slowness shows in the corrected latency and bounds what find-max finds; a GOAWAY mid-load
//! counted while the schedule goes on. Bad combinations of flags are refused before anything is
//! sent. Every scenario runs on both engines (`on_both_engines!`: one HTTP/2 connection code, whose
//! frames io_uring stages for its sends), and `--io auto` picks the engine as for HTTP/1.1.

mod common;

use std::time::Duration;

use common::{
    h2c_server, run_json, run_load, sha256_hex, start_nginx, tls_http_server, uring_usable_here,
    validate_against_schema, Cert, H2Fault, Nginx, TestCa, HELLO,
};

on_both_engines!(
    h2c_against_nginx_sends_exactly_n_requests_and_verifies_every_stream,
    h2_over_tls_is_chosen_by_alpn_and_a_server_without_it_is_a_handshake_error,
    nginx_going_away_gracefully_is_a_reconnect_not_an_error,
    verify_learn_learns_over_http2_and_holds_every_stream_to_it,
    a_wrong_body_on_some_streams_is_a_mismatch_counted_stream_by_stream,
    reset_streams_goaway_with_an_error_and_protocol_violations_have_their_own_classes,
    the_open_loop_over_h2c_sends_the_schedule_and_verifies_every_stream,
    conn_rate_over_h2c_opens_a_connection_per_arrival_for_its_requests_in_turn,
    the_open_loop_fills_a_connections_streams_and_a_slow_server_shows_in_corrected_latency,
    a_goaway_mid_load_is_counted_and_the_open_loop_goes_on,
    find_max_over_h2_stops_at_what_the_streams_can_carry,
);

const LIMIT: Duration = Duration::from_secs(60);
/// A body larger than the windows the tests set, so it crosses them only with WINDOW_UPDATEs.
const BIG_BODY_BYTES: usize = 200_000;

/// A folder of the test's own (nginx's files, its access log).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("netarena-h2-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn big_body() -> Vec<u8> {
    (0..BIG_BODY_BYTES).map(|i| (i * 7 % 251) as u8).collect()
}

/// nginx serving `Hello, World!` on /hello and the big body on /big.bin over `listen`, logging
/// each request (its request line, with the protocol, and status) to access.log.
fn nginx_h2(dir: &std::path::Path, listen: &str) -> Option<Nginx> {
    std::fs::write(dir.join("big.bin"), big_body()).unwrap();
    start_nginx(
        dir,
        &format!(
            "{listen}
    access_log {d}/access.log;
    location = /hello {{ return 200 \"Hello, World!\"; }}
    location = /big.bin {{ root {d}; }}",
            d = dir.display()
        ),
    )
}

fn access_log(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// nginx over h2c (`nginx_h2`) in a folder of the test's own named `name`: the folder, nginx and
/// its /hello URL. None without nginx (then reported as a missing feature).
fn h2c_nginx(name: &str) -> Option<(std::path::PathBuf, Nginx, String)> {
    let dir = scratch(name);
    let Some(nginx) = nginx_h2(&dir, "listen 127.0.0.1:{port} http2;") else {
        common::feature_missing("nginx is not installed");
        return None;
    };
    let url = format!("http://127.0.0.1:{}/hello", nginx.port);
    Some((dir, nginx, url))
}

/// nginx's own count: its access log in `dir` holds exactly `n` requests, each a GET of /hello
/// over HTTP/2 answered 200 with its 13 bytes.
fn assert_hello_log(dir: &std::path::Path, n: u64) {
    let log = access_log(dir);
    assert_eq!(log.len() as u64, n, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l.contains("\"GET /hello HTTP/2.0\" 200 13 ")),
        "{log:?}"
    );
}

fn h2c_against_nginx_sends_exactly_n_requests_and_verifies_every_stream(io: &str) {
    let Some((dir, nginx, url)) = h2c_nginx(&format!("h2c-{io}")) else {
        return;
    };
    let r = h2_run(
        io,
        &url,
        &[
            "--streams",
            "8",
            "-c",
            "2",
            "-t",
            "1",
            "-n",
            "300",
            "--expect-status",
            "200",
            "--expect-body-size",
            "13",
        ],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 300, "{}", r.context);
    assert_eq!(
        r.get("/http2/protocol").as_str(),
        Some("h2c"),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/http2/streams"), 8, "{}", r.context);
    assert_eq!(r.u64("/totals/connections_opened"), 2, "{}", r.context);
    // nginx's own count: every request of the run, each over HTTP/2 (-n sends no more than N).
    assert_hello_log(&dir, 300);

    let big = format!("http://127.0.0.1:{}/big.bin", nginx.port);
    big_body_through_small_windows(io, &big, &[]);
}

/// 20 requests of the body of 200 kB (`big_body`, at `url`) on one connection of 4 streams, through
/// 64 KiB windows: each arrives (its digest checked) only if the client gives the windows back as
/// it reads. `extra`: the run's other arguments.
fn big_body_through_small_windows(io: &str, url: &str, extra: &[&str]) -> common::Result {
    let digest = sha256_hex(&big_body());
    let mut args = vec![
        "--streams",
        "4",
        "--h2-window",
        "65535",
        "-c",
        "1",
        "-n",
        "20",
        "--timeout",
        "10s",
        "--expect-body-sha256",
        &digest,
    ];
    args.extend_from_slice(extra);
    let r = h2_run(io, url, &args);
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 20, "{}", r.context);
    assert_eq!(r.u64("/http2/window"), 65535, "{}", r.context);
    r
}

fn h2_over_tls_is_chosen_by_alpn_and_a_server_without_it_is_a_handshake_error(io: &str) {
    let ca = TestCa::new(&format!("h2-tls-{io}"));
    let (cert, key) = ca.server_pem_files(Cert::Good);
    let listen = format!(
        "listen 127.0.0.1:{{port}} ssl http2;
    ssl_certificate {}; ssl_certificate_key {}; ssl_protocols TLSv1.2 TLSv1.3;",
        cert.display(),
        key.display()
    );
    let Some(nginx) = nginx_h2(&ca.dir, &listen) else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("https://localhost:{}/hello", nginx.port);
    let cacert = ca.ca_pem.to_str().unwrap();
    let r = h2_run(
        io,
        &url,
        &[
            "--cacert",
            cacert,
            "--streams",
            "4",
            "-c",
            "2",
            "-n",
            "200",
            "--expect-body-size",
            "13",
        ],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    assert_eq!(r.get("/tls/alpn").as_str(), Some("h2"), "{}", r.context);
    assert_eq!(
        r.get("/http2/protocol").as_str(),
        Some("h2"),
        "{}",
        r.context
    );
    let log = access_log(&ca.dir);
    assert_eq!(log.len(), 200, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l.contains("\"GET /hello HTTP/2.0\" 200 ")),
        "{log:?}"
    );

    // Flow control over TLS: a body of 200 kB through 64 KiB windows arrives only if the window
    // updates go out as records while the DATA frames come in.
    let big = format!("https://localhost:{}/big.bin", nginx.port);
    let r = big_body_through_small_windows(io, &big, &["--cacert", cacert]);
    assert_eq!(r.get("/tls/alpn").as_str(), Some("h2"), "{}", r.context);

    // The open loop over TLS: each scheduled request a stream on the two TLS connections, whose
    // handshake and preface go out as soon as each connects.
    let r = open_loop_run(
        io,
        &url,
        &[
            "--cacert",
            cacert,
            "--streams",
            "4",
            "-c",
            "2",
            "--rate",
            "100",
            "-d",
            "1s",
        ],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.get("/tls/alpn").as_str(), Some("h2"), "{}", r.context);
    let sent = assert_schedule_sent(&r, "");
    assert_eq!(
        access_log(&ca.dir).len() as u64,
        200 + 20 + sent,
        "{}",
        r.context
    );

    // A TLS server that speaks HTTP/1.1 only: no h2 by ALPN, so no HTTP/2 figure at all.
    let server = tls_http_server(ca.server_config(Cert::Good), HELLO);
    let url = format!("https://localhost:{}/", server.addr.port());
    let r = h2_run(io, &url, &["--cacert", cacert, "-c", "1", "-d", "1s"]);
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    assert!(r.class("tls_handshake") > 0, "{}", r.context);
    r.assert_only_errors(&["tls_handshake"]);
}

fn nginx_going_away_gracefully_is_a_reconnect_not_an_error(io: &str) {
    let dir = scratch(&format!("goaway-{io}"));
    let Some(nginx) = nginx_h2(
        &dir,
        "listen 127.0.0.1:{port} http2; keepalive_requests 20;",
    ) else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/hello", nginx.port);
    let r = h2_run(
        io,
        &url,
        &[
            "--streams",
            "4",
            "-c",
            "2",
            "-n",
            "200",
            "--expect-body-size",
            "13",
        ],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    // 20 requests per connection: about 10 connections, each ended by a GOAWAY (NO_ERROR).
    assert!(r.u64("/http2/goaways") >= 8, "{}", r.context);
    assert!(r.u64("/totals/connections_opened") >= 9, "{}", r.context);
}

fn verify_learn_learns_over_http2_and_holds_every_stream_to_it(io: &str) {
    // Against nginx (h2c): the learning request is one more HTTP/2 request on a connection of its own,
    // and its status, size and digest hold every stream of the load.
    let dir = scratch(&format!("learn-{io}"));
    let Some(nginx) = nginx_h2(&dir, "listen 127.0.0.1:{port} http2;") else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/big.bin", nginx.port);
    let r = h2_run(
        io,
        &url,
        &["--streams", "4", "-c", "2", "-n", "50", "--verify-learn"],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/responses"), 50, "{}", r.context);
    assert_eq!(r.get("/config/verify_learn").as_bool(), Some(true));
    assert_eq!(r.u64("/config/expect_body_size"), BIG_BODY_BYTES as u64);
    assert_eq!(
        r.get("/config/expect_body_sha256").as_str(),
        Some(sha256_hex(&big_body()).as_str()),
        "{}",
        r.context
    );
    let log = access_log(&dir);
    assert_eq!(
        log.len(),
        51,
        "the load's 50 and the learning request: {log:?}"
    );
    assert!(
        log.iter().all(|l| l.contains(" HTTP/2.0\" 200 ")),
        "{log:?}"
    );

    // Against a server answering some streams with another body: what it learned is the right one,
    // so each wrong stream is a verification mismatch.
    let server = h2c_server(HELLO, H2Fault::WrongBodyEvery(5));
    let url = server.url("/");
    let r = h2_run(
        io,
        &url,
        &["--streams", "10", "-c", "2", "-n", "200", "--verify-learn"],
    );
    r.assert_only_errors(&["verification_mismatch"]);
    assert_eq!(r.u64("/config/expect_body_size"), HELLO.len() as u64);
    assert_eq!(
        r.class("verification_mismatch"),
        server.stats.misbehaved(),
        "{}",
        r.context
    );
    assert!(server.stats.misbehaved() >= 30, "{}", r.context);
}

fn a_wrong_body_on_some_streams_is_a_mismatch_counted_stream_by_stream(io: &str) {
    let server = h2c_server(HELLO, H2Fault::WrongBodyEvery(5));
    let url = server.url("/");
    let r = h2_run(
        io,
        &url,
        &[
            "--streams",
            "10",
            "-c",
            "2",
            "-n",
            "400",
            "--expect-body-size",
            "13",
        ],
    );
    r.assert_only_errors(&["verification_mismatch"]);
    assert_eq!(
        r.class("verification_mismatch"),
        server.stats.misbehaved(),
        "{}",
        r.context
    );
    assert_eq!(
        r.u64("/totals/requests"),
        server.stats.good(),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/totals/responses"), 400, "{}", r.context);
    assert!(server.stats.misbehaved() >= 80, "{}", r.context);
}

fn reset_streams_goaway_with_an_error_and_protocol_violations_have_their_own_classes(io: &str) {
    // RST_STREAM on every 4th stream: counted, the connection goes on.
    let server = h2c_server(HELLO, H2Fault::ResetEvery(4));
    let r = h2_run(
        io,
        &server.url("/"),
        &["--streams", "4", "-c", "1", "-n", "120"],
    );
    r.assert_only_errors(&["h2_rst_stream"]);
    assert_eq!(
        r.class("h2_rst_stream"),
        server.stats.misbehaved(),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/totals/connections_opened"), 1, "{}", r.context);
    assert_eq!(
        r.u64("/totals/requests"),
        server.stats.good(),
        "{}",
        r.context
    );

    // GOAWAY (ENHANCE_YOUR_CALM) after 10 requests per connection: counted, and the load goes on
    // on new connections until -n is reached.
    let server = h2c_server(HELLO, H2Fault::GoawayAfter(10));
    let r = h2_run(
        io,
        &server.url("/"),
        &["-c", "1", "-n", "50", "--expect-body-size", "13"],
    );
    r.assert_only_errors(&["h2_goaway"]);
    assert_eq!(r.u64("/totals/requests"), 50, "{}", r.context);
    assert!(r.class("h2_goaway") >= 4, "{}", r.context);
    assert_eq!(
        r.class("h2_goaway"),
        r.u64("/http2/goaways"),
        "{}",
        r.context
    );
    assert!(r.u64("/totals/connections_opened") >= 5, "{}", r.context);

    // DATA on stream 0 after 5 requests: the connection is closed, counted as h2_protocol.
    let server = h2c_server(HELLO, H2Fault::ProtocolErrorAfter(5));
    let r = h2_run(io, &server.url("/"), &["-c", "1", "-n", "30"]);
    r.assert_only_errors(&["h2_protocol"]);
    assert_eq!(r.u64("/totals/requests"), 30, "{}", r.context);
    assert!(r.class("h2_protocol") >= 5, "{}", r.context);
    let examples = r.get("/errors/examples").to_string();
    assert!(examples.contains("on stream 0"), "{examples}");
}

#[test]
fn flags_http2_cannot_take_are_refused_before_anything_is_sent() {
    let server = h2c_server(HELLO, H2Fault::None);
    let url = server.url("/");
    for (args, says) in [
        (
            vec!["--streams", "4"],
            "--streams applies to HTTP/2: add --h2",
        ),
        (vec!["--h2-window", "100"], "--h2-window applies to HTTP/2"),
        (
            vec!["--h2", "--pipeline", "2"],
            "HTTP/2 has no pipelining; use --streams",
        ),
        (
            vec!["--h2", "--conn-rate", "10", "--streams", "4"],
            "--conn-rate sends each connection's requests one after another",
        ),
        (vec!["--h2", "--close"], "--h2 with --close"),
        (
            vec!["--h2", "--streams", "0"],
            "--streams 0 is out of range",
        ),
        (
            vec!["--h2", "--h2-window", "0"],
            "--h2-window 0 is out of range",
        ),
    ] {
        let mut full = vec!["http", url.as_str(), "-d", "1s"];
        full.extend(args.iter().copied());
        let out = run_load(&full, LIMIT);
        assert_eq!(out.code, 2, "{args:?}: {}", out.describe());
        assert!(
            out.stderr.contains(says),
            "{args:?}: expected {says:?}\n{}",
            out.describe()
        );
    }
    assert_eq!(server.stats.connections(), 0, "nothing may be sent");
    // --io auto picks the engine for HTTP/2 as for HTTP/1.1: the closed loop on io_uring where it
    // is usable, the open loop on epoll; each says why.
    let engine = if uring_usable_here() {
        "uring"
    } else {
        "epoll"
    };
    for (model, engine, why) in [
        (&["-n", "10"][..], engine, "io_uring"),
        (&["--rate", "20", "-d", "500ms"], "epoll", "open loop"),
    ] {
        let r = h2_run("auto", &url, model);
        r.assert_only_errors(&[]);
        assert_eq!(
            r.get("/config/io_backend").as_str(),
            Some(engine),
            "{}",
            r.context
        );
        let reason = r.get("/config/io_reason").to_string();
        assert!(reason.contains(why), "{reason}");
    }
}

/// `netarena-load http URL --io IO --h2 ARGS`: its document, checked for the invariants every
/// result satisfies.
fn h2_run(io: &str, url: &str, args: &[&str]) -> common::Result {
    run_json(
        &[&["http", url, "--io", io, "--h2"][..], args].concat(),
        LIMIT,
    )
}

/// `netarena-load http URL --io IO --h2 -t 1 --expect-body-size 13 ARGS` (an open-loop run: ARGS
/// give the rate and the pool), its document checked against the JSON Schema.
fn open_loop_run(io: &str, url: &str, args: &[&str]) -> common::Result {
    let r = h2_run(
        io,
        url,
        &[&["-t", "1", "--expect-body-size", "13"][..], args].concat(),
    );
    validate_against_schema(&r.doc);
    r
}

/// An open-loop run (ARGS: the rate) against a scripted server answering every request 100 ms
/// after it arrived, on one connection of 4 streams: at most 40 requests a second. The server
/// (its counts) and the run's document.
fn slow_h2_run(io: &str, args: &[&str]) -> (common::TestServer, common::Result) {
    let server = h2c_server(HELLO, H2Fault::AnswerAfter(Duration::from_millis(100)));
    let pool = ["--streams", "4", "-c", "1"];
    let r = open_loop_run(io, &server.url("/"), &[&pool[..], args].concat());
    (server, r)
}

/// The open loop's own figures of a run (or a step) that kept its schedule: every arrival the
/// schedule made was sent (none dropped), and every send answered; how many were sent.
fn assert_schedule_sent(r: &common::Result, base: &str) -> u64 {
    let at = |p: &str| r.u64(&format!("{base}{p}"));
    let started = at("/open_loop/started");
    assert_eq!(at("/open_loop/dropped"), 0, "{}", r.context);
    assert_eq!(started, at("/open_loop/intended"), "{}", r.context);
    assert_eq!(at("/totals/requests"), started, "{}", r.context);
    assert_eq!(at("/totals/responses"), started, "{}", r.context);
    started
}

fn the_open_loop_over_h2c_sends_the_schedule_and_verifies_every_stream(io: &str) {
    let Some((dir, _nginx, url)) = h2c_nginx(&format!("h2c-rate-{io}")) else {
        return;
    };
    let pool = ["--streams", "4", "-c", "2"];
    let r = open_loop_run(
        io,
        &url,
        &[
            &pool[..],
            &["--rate", "200", "-d", "2s", "--expect-status", "200"],
        ]
        .concat(),
    );
    r.assert_only_errors(&[]);
    assert_eq!(
        r.get("/open_loop/kind").as_str(),
        Some("rate"),
        "{}",
        r.context
    );
    assert_eq!(
        r.get("/latency_corrected").as_bool(),
        Some(true),
        "{}",
        r.context
    );
    // 2 s at 200/s: 400 arrivals, whatever the machine; each one sent and answered.
    assert!(
        (399..=401).contains(&r.u64("/open_loop/intended")),
        "{}",
        r.context
    );
    let sent = assert_schedule_sent(&r, "");
    assert_eq!(
        r.get("/http2/protocol").as_str(),
        Some("h2c"),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/http2/streams"), 4, "{}", r.context);
    // nginx's own count: every send of the schedule, each over HTTP/2, none more.
    assert_hello_log(&dir, sent);

    // Rate steps ride on the same path: each step is its own schedule, kept on the same pool.
    let steps = [
        "--rate",
        "50",
        "--steps",
        "100:200:100",
        "--step-duration",
        "1s",
    ];
    let r = open_loop_run(io, &url, &[&pool[..], &steps[..]].concat());
    r.assert_only_errors(&[]);
    assert_eq!(
        r.get("/steps").as_array().unwrap().len(),
        2,
        "{}",
        r.context
    );
    for (i, rate) in [100, 200].into_iter().enumerate() {
        let step = format!("/steps/{i}");
        let intended = r.u64(&format!("{step}/open_loop/intended"));
        assert!(
            (rate - 1..=rate + 1).contains(&intended),
            "step {i}: {}",
            r.context
        );
        assert_schedule_sent(&r, &step);
        assert_eq!(r.u64(&format!("{step}/http2/streams")), 4, "{}", r.context);
    }
}

fn conn_rate_over_h2c_opens_a_connection_per_arrival_for_its_requests_in_turn(io: &str) {
    let Some((dir, _nginx, url)) = h2c_nginx(&format!("h2c-conn-rate-{io}")) else {
        return;
    };
    // 1 s at 50 connections a second, each with 4 requests, one stream after another.
    let r = open_loop_run(
        io,
        &url,
        &["--conn-rate", "50", "--requests-per-conn", "4", "-d", "1s"],
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/open_loop/connections/started"), 50, "{}", r.context);
    assert_eq!(
        r.u64("/open_loop/connections/completed"),
        50,
        "{}",
        r.context
    );
    assert_eq!(r.u64("/totals/connections_opened"), 50, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    assert_eq!(
        r.get("/http2/protocol").as_str(),
        Some("h2c"),
        "{}",
        r.context
    );
    assert_hello_log(&dir, 200);
}

fn the_open_loop_fills_a_connections_streams_and_a_slow_server_shows_in_corrected_latency(
    io: &str,
) {
    // The schedule asks 50 requests a second of a connection that completes at most 40. The
    // streams fill, and the requests due while all 4 are busy wait for one to free up (as
    // HTTP/1.1's wait for a free connection), each a little longer than the one before: about
    // 5 ms more per request, 0.5 s by the 100th.
    let (server, r) = slow_h2_run(io, &["--rate", "50", "-d", "2s", "--timeout", "10s"]);
    r.assert_only_errors(&[]);
    let sent = assert_schedule_sent(&r, "");
    assert_eq!(server.stats.good(), sent, "{}", r.context);
    assert_eq!(server.stats.connections(), 1, "{}", r.context);
    // Several streams side by side on the one connection, never more than --streams.
    assert_eq!(server.stats.peak_streams(), 4, "{}", r.context);
    // From its actual send each request took the server's 100 ms; from its intended time, the
    // wait for a free stream comes on top. The bar is the queue's (hundreds of ms on any host; a
    // slower one queues more), not this machine's speed.
    let uncorrected_min = r.latency_us_at_least("/open_loop/latency_uncorrected/min_us");
    let uncorrected_max = r.u64("/open_loop/latency_uncorrected/max_us");
    let corrected_max = r.u64("/latency/max_us");
    assert!(uncorrected_min >= 100_000.0, "{}", r.context);
    assert!(
        corrected_max >= uncorrected_max + 200_000,
        "corrected max {corrected_max} us, uncorrected max {uncorrected_max} us\n{}",
        r.context
    );
    // Sends that waited for a stream were late, and the result says the schedule was not kept.
    assert!(r.u64("/open_loop/late") > 0, "{}", r.context);
    assert_eq!(
        r.get("/open_loop/rate_not_met").as_bool(),
        Some(true),
        "{}",
        r.context
    );
}

fn a_goaway_mid_load_is_counted_and_the_open_loop_goes_on(io: &str) {
    // GOAWAY (ENHANCE_YOUR_CALM) at each connection's 11th request, which the server leaves
    // unprocessed: about 9 times in 100 scheduled requests.
    let server = h2c_server(HELLO, H2Fault::GoawayAfter(10));
    let r = open_loop_run(
        io,
        &server.url("/"),
        &["-c", "1", "--rate", "100", "-d", "1s"],
    );
    r.assert_only_errors(&["h2_goaway"]);
    let goaways = r.class("h2_goaway");
    assert_eq!(goaways, r.u64("/http2/goaways"), "{}", r.context);
    assert!(goaways >= 4, "{}", r.context);
    // Each connection that went away was replaced (the last one's replacement may come after the
    // run's end).
    assert!(
        r.u64("/totals/connections_opened") + 1 >= goaways,
        "{}",
        r.context
    );
    // The schedule went on over new connections: every arrival was sent; each send was answered
    // except the one stream each GOAWAY left unprocessed (one stream in flight at a time).
    let started = r.u64("/open_loop/started");
    assert_eq!(r.u64("/open_loop/dropped"), 0, "{}", r.context);
    assert_eq!(started, r.u64("/open_loop/intended"), "{}", r.context);
    assert_eq!(
        r.u64("/totals/requests"),
        server.stats.good(),
        "{}",
        r.context
    );
    assert_eq!(
        r.u64("/totals/requests") + goaways,
        started,
        "{}",
        r.context
    );
    assert!(r.u64("/totals/requests") >= 50, "{}", r.context);
}

fn find_max_over_h2_stops_at_what_the_streams_can_carry(io: &str) {
    // At most 40 requests a second (`slow_h2_run`: 4 streams of 100 ms answers). Above that the
    // backlog waits for streams and grows through the step, so no rate well above it can meet the
    // SLO, however fast the machine (a slower one only queues more). At 60/s a 1 s step ends with
    // its last request waiting 0.5 s for a stream.
    let (server, r) = slow_h2_run(
        io,
        &[
            "--rate",
            "10",
            "--find-max",
            "--slo",
            "p99<=300ms",
            "--step-duration",
            "1s",
            "--find-max-resolution",
            "25%",
            "--timeout",
            "3s",
        ],
    );
    eprintln!("find-max over h2: {}", r.get("/find_max"));
    let verdicts = r.get("/find_max/verdicts").as_array().unwrap();
    assert_eq!(
        r.get("/steps").as_array().unwrap().len(),
        verdicts.len(),
        "{}",
        r.context
    );
    for v in verdicts {
        let rate = v["rate_per_s"].as_f64().unwrap();
        let passed = v["passed"].as_bool().unwrap();
        assert!(!passed || rate <= 60.0, "{rate}/s passed\n{}", r.context);
    }
    // The search did fail somewhere: the streams' capacity stopped it, not --find-max-limit.
    assert!(
        verdicts.iter().any(|v| v["passed"] == false),
        "{}",
        r.context
    );
    assert!(server.stats.peak_streams() <= 4, "{}", r.context);
}
