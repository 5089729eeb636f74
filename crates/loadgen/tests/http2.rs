//! `--h2`: HTTP/2 against nginx, a real server, in cleartext (h2c, prior knowledge) and over TLS
//! (ALPN h2): every stream's response verified, exactly `-n` requests sent (nginx's own access log
//! counts them), flow control that lets a body larger than the window through, a graceful GOAWAY
//! (nginx's keepalive_requests) that the load rides over on new connections. Against a scripted
//! server: a wrong body on some streams, RST_STREAM, GOAWAY with an error and a protocol violation,
//! each counted in its own error class while the load goes on. Bad combinations of flags are
//! refused before anything is sent.

mod common;

use std::time::Duration;

use common::{
    h2c_server, run_json, run_load, sha256_hex, start_nginx, tls_http_server, Cert, H2Fault, Nginx,
    TestCa, HELLO,
};

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

#[test]
fn h2c_against_nginx_sends_exactly_n_requests_and_verifies_every_stream() {
    let dir = scratch("h2c");
    let Some(nginx) = nginx_h2(&dir, "listen 127.0.0.1:{port} http2;") else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/hello", nginx.port);
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
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
        LIMIT,
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
    let log = access_log(&dir);
    assert_eq!(log.len(), 300, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l.contains("\"GET /hello HTTP/2.0\" 200 13 ")),
        "{log:?}"
    );

    // A body of 200 kB through 64 KiB windows: it arrives only if the client gives the windows back.
    let big = format!("http://127.0.0.1:{}/big.bin", nginx.port);
    let r = run_json(
        &[
            "http",
            &big,
            "--h2",
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
            &sha256_hex(&big_body()),
        ],
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 20, "{}", r.context);
    assert_eq!(r.u64("/http2/window"), 65535, "{}", r.context);
}

#[test]
fn h2_over_tls_is_chosen_by_alpn_and_a_server_without_it_is_a_handshake_error() {
    let ca = TestCa::new("h2-tls");
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
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
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
        LIMIT,
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

    // A TLS server that speaks HTTP/1.1 only: no h2 by ALPN, so no HTTP/2 figure at all.
    let server = tls_http_server(ca.server_config(Cert::Good), HELLO);
    let url = format!("https://localhost:{}/", server.addr.port());
    let r = run_json(
        &[
            "http", &url, "--h2", "--cacert", cacert, "-c", "1", "-d", "1s",
        ],
        LIMIT,
    );
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    assert!(r.class("tls_handshake") > 0, "{}", r.context);
    r.assert_only_errors(&["tls_handshake"]);
}

#[test]
fn nginx_going_away_gracefully_is_a_reconnect_not_an_error() {
    let dir = scratch("goaway");
    let Some(nginx) = nginx_h2(
        &dir,
        "listen 127.0.0.1:{port} http2; keepalive_requests 20;",
    ) else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/hello", nginx.port);
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
            "--streams",
            "4",
            "-c",
            "2",
            "-n",
            "200",
            "--expect-body-size",
            "13",
        ],
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    // 20 requests per connection: about 10 connections, each ended by a GOAWAY (NO_ERROR).
    assert!(r.u64("/http2/goaways") >= 8, "{}", r.context);
    assert!(r.u64("/totals/connections_opened") >= 9, "{}", r.context);
}

#[test]
fn verify_learn_learns_over_http2_and_holds_every_stream_to_it() {
    // Against nginx (h2c): the learning request is one more HTTP/2 request on a connection of its own,
    // and its status, size and digest hold every stream of the load.
    let dir = scratch("learn");
    let Some(nginx) = nginx_h2(&dir, "listen 127.0.0.1:{port} http2;") else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/big.bin", nginx.port);
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
            "--streams",
            "4",
            "-c",
            "2",
            "-n",
            "50",
            "--verify-learn",
        ],
        LIMIT,
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
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
            "--streams",
            "10",
            "-c",
            "2",
            "-n",
            "200",
            "--verify-learn",
        ],
        LIMIT,
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

#[test]
fn a_wrong_body_on_some_streams_is_a_mismatch_counted_stream_by_stream() {
    let server = h2c_server(HELLO, H2Fault::WrongBodyEvery(5));
    let url = server.url("/");
    let r = run_json(
        &[
            "http",
            &url,
            "--h2",
            "--streams",
            "10",
            "-c",
            "2",
            "-n",
            "400",
            "--expect-body-size",
            "13",
        ],
        LIMIT,
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

#[test]
fn reset_streams_goaway_with_an_error_and_protocol_violations_have_their_own_classes() {
    // RST_STREAM on every 4th stream: counted, the connection goes on.
    let server = h2c_server(HELLO, H2Fault::ResetEvery(4));
    let r = run_json(
        &[
            "http",
            &server.url("/"),
            "--h2",
            "--streams",
            "4",
            "-c",
            "1",
            "-n",
            "120",
        ],
        LIMIT,
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
    let r = run_json(
        &[
            "http",
            &server.url("/"),
            "--h2",
            "-c",
            "1",
            "-n",
            "50",
            "--expect-body-size",
            "13",
        ],
        LIMIT,
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
    let r = run_json(
        &["http", &server.url("/"), "--h2", "-c", "1", "-n", "30"],
        LIMIT,
    );
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
            vec!["--h2", "--rate", "100"],
            "the open loop over HTTP/2 is not built yet",
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
        (
            vec!["--h2", "--io", "uring"],
            "--io uring does not speak HTTP/2 yet",
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
    // --io auto runs HTTP/2 on epoll and says why.
    let r = run_json(&["http", &url, "--h2", "-n", "10", "--io", "auto"], LIMIT);
    let reason = r.get("/config/io_reason").to_string();
    assert!(reason.contains("HTTP/2 runs on epoll"), "{reason}");
}
