//! https:// (HTTP/1.1 over TLS) against real TLS servers on loopback, certificates made at test
//! time: the closed loop, the open loop and `--conn-rate` (with and without `--tls-resume`) verify
//! every response as over http://; a refused certificate is `tls_certificate`, a broken handshake
//! `tls_handshake`; bad TLS flags are refused before anything is sent. Every scenario runs on both
//! engines (`on_both_engines!`: one TLS layer, whose records io_uring stages for its sends), and
//! `--io auto` picks the engine as for http://.

mod common;

use std::time::Duration;

use common::{
    closes_during_handshake_server, plain_http_400_server, run_json, run_load, sha256_hex,
    tls_http_server, uring_usable_here, validate_against_schema, Cert, TestCa, HELLO,
};

on_both_engines!(
    closed_loop_over_https_verifies_every_response,
    a_batch_larger_than_the_tls_buffers_goes_out_whole,
    open_loop_over_https,
    conn_rate_over_https_resumes_only_when_asked,
    refused_certificates_are_tls_certificate_errors,
    broken_handshakes_are_tls_handshake_errors,
    a_wrong_body_over_tls_is_a_verification_mismatch,
    verify_learn_over_https,
    nginx_over_https_closed_loop_and_resumed_reconnects,
);

const LIMIT: Duration = Duration::from_secs(60);

fn https_url(host: &str, port: u16) -> String {
    format!("https://{host}:{port}/")
}

fn cacert(ca: &TestCa) -> &str {
    ca.ca_pem.to_str().unwrap()
}

/// A test CA, a TLS server answering `Hello, World!` with a good certificate of it, and the
/// server's https URL by `host`.
fn hello_over_tls(ca_name: &str, host: &str) -> (TestCa, common::TestServer, String) {
    let ca = TestCa::new(ca_name);
    let server = tls_http_server(ca.server_config(Cert::Good), HELLO);
    let url = https_url(host, server.addr.port());
    (ca, server, url)
}

/// `http URL --cacert CA --io IO` and the rest of a run's arguments.
fn https_args<'a>(io: &'a str, url: &'a str, ca: &'a TestCa, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["http", url, "--cacert", cacert(ca), "--io", io];
    args.extend_from_slice(rest);
    args
}

/// The `tls` block of a run that completed handshakes: TLS 1.3, ALPN http/1.1.
fn assert_tls_block(r: &common::Result, resume: bool) {
    assert_eq!(
        r.get("/tls/version").as_str(),
        Some("TLSv1_3"),
        "{}",
        r.context
    );
    assert_eq!(
        r.get("/tls/alpn").as_str(),
        Some("http/1.1"),
        "{}",
        r.context
    );
    assert!(
        r.get("/tls/cipher_suite")
            .as_str()
            .is_some_and(|s| s.starts_with("TLS13_")),
        "{}",
        r.context
    );
    assert_eq!(
        r.get("/tls/resume").as_bool(),
        Some(resume),
        "{}",
        r.context
    );
    assert!(r.u64("/tls/handshakes") >= 1, "{}", r.context);
}

fn closed_loop_over_https_verifies_every_response(io: &str) {
    let ca = TestCa::new(&format!("closed-{io}"));
    let server = tls_http_server(ca.server_config(Cert::Good), HELLO);
    let digest = sha256_hex(HELLO);
    // By IP (an IpAddress server name) and by DNS name: both are in the certificate.
    for host in ["127.0.0.1", "localhost"] {
        let url = https_url(host, server.addr.port());
        let r = run_json(
            &https_args(
                io,
                &url,
                &ca,
                &[
                    "-c",
                    "4",
                    "-t",
                    "1",
                    "-n",
                    "300",
                    "--expect-status",
                    "200",
                    "--expect-body-size",
                    "13",
                    "--expect-body-sha256",
                    &digest,
                ],
            ),
            LIMIT,
        );
        r.assert_only_errors(&[]);
        assert_eq!(r.u64("/totals/requests"), 300, "{}", r.context);
        assert!(r.u64("/totals/bytes_received") >= 300 * 13, "{}", r.context);
        assert_tls_block(&r, false);
        assert!(
            r.u64("/tls/handshakes") <= 4,
            "one handshake per connection\n{}",
            r.context
        );
        assert_eq!(r.u64("/tls/resumed"), 0, "{}", r.context);
        assert_eq!(r.get("/tls/certificate_verified").as_bool(), Some(true));
        validate_against_schema(&r.doc);
    }
    assert!(server.stats.good() >= 600);
}

/// A pipelined batch of large requests is more than rustls takes at once (its buffer) and more than
/// a record: it goes out in pieces (on io_uring, staged while the previous send is in flight), and
/// every request arrives whole and is answered.
fn a_batch_larger_than_the_tls_buffers_goes_out_whole(io: &str) {
    let (ca, server, url) = hello_over_tls(&format!("batch-{io}"), "127.0.0.1");
    let pad = format!("X-Pad: {}", "p".repeat(8000));
    let batches = [
        "-c",
        "2",
        "--pipeline",
        "32",
        "-n",
        "256",
        "-H",
        &pad,
        "--expect-body-size",
        "13",
    ];
    let r = run_json(&https_args(io, &url, &ca, &batches), LIMIT);
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 256, "{}", r.context);
    assert!(r.u64("/totals/bytes_sent") >= 256 * 8000, "{}", r.context);
    assert_eq!(server.stats.good(), 256, "{}", r.context);
}

/// `--io auto` picks the engine for https as for http://: the closed loop on io_uring where it is
/// usable (with its coalescing), the open loop on epoll; io_uring's coalescing applies over TLS too.
#[test]
fn auto_picks_the_engine_for_https_as_for_plain_http() {
    let (ca, _server, url) = hello_over_tls("engines", "127.0.0.1");
    let r = run_json(
        &https_args("auto", &url, &ca, &["-c", "2", "-n", "50"]),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    let uring = uring_usable_here();
    let (engine, why) = if uring {
        ("uring", "io_uring usable")
    } else {
        ("epoll", "io_uring cannot be used here")
    };
    assert_eq!(
        r.get("/config/io_backend").as_str(),
        Some(engine),
        "{}",
        r.context
    );
    assert!(why_contains(&r, why), "{}", r.context);
    let r = run_json(
        &https_args(
            "auto",
            &url,
            &ca,
            &["--rate", "50", "-c", "2", "-d", "500ms"],
        ),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(
        r.get("/config/io_backend").as_str(),
        Some("epoll"),
        "{}",
        r.context
    );
    assert!(why_contains(&r, "open loop"), "{}", r.context);
    if !uring {
        return;
    }
    let run = run_load(
        &https_args(
            "uring",
            &url,
            &ca,
            &["-c", "4", "-n", "400", "--coalesce-us", "200", "--json"],
        ),
        LIMIT,
    );
    if run.code == 2 && run.stderr.contains("Linux 6.12+") {
        common::feature_missing(
            "this kernel has no io_uring min-wait (Linux 6.12+); only the refusal was checked",
        );
        return;
    }
    let r = run.result();
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 400, "{}", r.context);
    assert_eq!(
        r.get("/generator/batch_wait_max_us").as_f64(),
        Some(200.0),
        "{}",
        r.context
    );
    assert_tls_block(&r, false);
}

fn why_contains(r: &common::Result, words: &str) -> bool {
    r.get("/config/io_reason")
        .as_str()
        .is_some_and(|why| why.contains(words))
}

fn open_loop_over_https(io: &str) {
    let (ca, _server, url) = hello_over_tls(&format!("open-{io}"), "127.0.0.1");
    let r = run_json(
        &https_args(
            io,
            &url,
            &ca,
            &[
                "--rate",
                "200",
                "-c",
                "4",
                "-t",
                "1",
                "-d",
                "1s",
                "--expect-body-size",
                "13",
            ],
        ),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert!(r.u64("/totals/requests") > 0, "{}", r.context);
    assert_eq!(r.get("/latency_corrected").as_bool(), Some(true));
    assert_tls_block(&r, false);
    validate_against_schema(&r.doc);
}

/// `--conn-rate`: every connection its own handshake; resumed ones only with `--tls-resume` (the
/// server issues TLS 1.3 tickets after every full handshake).
fn conn_rate_over_https_resumes_only_when_asked(io: &str) {
    let (ca, _server, url) = hello_over_tls(&format!("connrate-{io}"), "127.0.0.1");
    for resume in [false, true] {
        let mut args = https_args(
            io,
            &url,
            &ca,
            &[
                "--conn-rate",
                "50",
                "-c",
                "8",
                "-t",
                "1",
                "-d",
                "1s",
                "--expect-body-size",
                "13",
            ],
        );
        if resume {
            args.push("--tls-resume");
        }
        let r = run_json(&args, LIMIT);
        r.assert_only_errors(&[]);
        let handshakes = r.u64("/tls/handshakes");
        assert!(
            handshakes >= 10,
            "a handshake per connection\n{}",
            r.context
        );
        assert!(
            handshakes <= r.u64("/totals/connections_opened"),
            "{}",
            r.context
        );
        assert_tls_block(&r, resume);
        if resume {
            assert!(r.u64("/tls/resumed") > 0, "{}", r.context);
        } else {
            assert_eq!(r.u64("/tls/resumed"), 0, "{}", r.context);
        }
        validate_against_schema(&r.doc);
    }
}

/// A run whose every connection fails in its handshake: its errors are all of `class`, no response
/// came, and the generator exited normally with its document.
fn assert_every_connection_fails(
    io: &str,
    url: &str,
    extra: &[&str],
    class: &str,
) -> common::Result {
    let mut args = vec!["http", url, "-c", "2", "-t", "1", "-d", "500ms", "--io", io];
    args.extend_from_slice(extra);
    let r = run_json(&args, LIMIT);
    r.assert_only_errors(&[class]);
    assert!(r.class(class) >= 1, "{}", r.context);
    assert_eq!(r.u64("/totals/responses"), 0, "{}", r.context);
    validate_against_schema(&r.doc);
    r
}

fn refused_certificates_are_tls_certificate_errors(io: &str) {
    let ca = TestCa::new(&format!("certs-{io}"));
    for cert in [Cert::WrongName, Cert::Expired] {
        let server = tls_http_server(ca.server_config(cert), HELLO);
        let url = https_url("127.0.0.1", server.addr.port());
        let r =
            assert_every_connection_fails(io, &url, &["--cacert", cacert(&ca)], "tls_certificate");
        assert_eq!(server.stats.good(), 0, "{cert:?}\n{}", r.context);
    }
    // A certificate of a CA the run does not trust: refused, unless --insecure.
    let other = TestCa::new(&format!("other-{io}"));
    let server = tls_http_server(other.server_config(Cert::Good), HELLO);
    let url = https_url("127.0.0.1", server.addr.port());
    assert_every_connection_fails(io, &url, &["--cacert", cacert(&ca)], "tls_certificate");
    let r = run_json(
        &[
            "http",
            &url,
            "--insecure",
            "-c",
            "2",
            "-n",
            "40",
            "--io",
            io,
        ],
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 40, "{}", r.context);
    assert_eq!(r.get("/tls/certificate_verified").as_bool(), Some(false));
    assert_tls_block(&r, false);
}

fn broken_handshakes_are_tls_handshake_errors(io: &str) {
    let ca = TestCa::new(&format!("handshake-{io}"));
    let closing = closes_during_handshake_server();
    let url = https_url("127.0.0.1", closing.addr.port());
    assert_every_connection_fails(io, &url, &["--cacert", cacert(&ca)], "tls_handshake");
    // https spoken to a plain-HTTP server: its 400 is no TLS record.
    let plain = plain_http_400_server();
    let url = https_url("127.0.0.1", plain.addr.port());
    assert_every_connection_fails(io, &url, &["--cacert", cacert(&ca)], "tls_handshake");
}

fn a_wrong_body_over_tls_is_a_verification_mismatch(io: &str) {
    let ca = TestCa::new(&format!("mismatch-{io}"));
    let server = tls_http_server(ca.server_config(Cert::Good), b"Goodbye, World");
    let url = https_url("127.0.0.1", server.addr.port());
    let r = run_json(
        &https_args(
            io,
            &url,
            &ca,
            &[
                "-c",
                "2",
                "-n",
                "20",
                "--expect-body-sha256",
                &sha256_hex(HELLO),
            ],
        ),
        LIMIT,
    );
    r.assert_only_errors(&["verification_mismatch"]);
    assert!(r.class("verification_mismatch") >= 1, "{}", r.context);
}

fn verify_learn_over_https(io: &str) {
    let (ca, _server, url) = hello_over_tls(&format!("learn-{io}"), "localhost");
    let r = run_json(
        &https_args(io, &url, &ca, &["-c", "2", "-n", "30", "--verify-learn"]),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 30, "{}", r.context);
}

#[test]
fn bad_tls_flags_are_refused_before_any_load() {
    let ca = TestCa::new("flags");
    let not_pem = ca.dir.join("not.pem");
    std::fs::write(&not_pem, "this is no certificate\n").unwrap();
    let https = "https://127.0.0.1:9/";
    let cases: [(&[&str], &str); 5] = [
        (
            &["http", https, "--cacert", "/nonexistent/ca.pem"],
            "--cacert /nonexistent/ca.pem: cannot read it",
        ),
        (
            &["http", https, "--cacert", not_pem.to_str().unwrap()],
            "holds no PEM certificate",
        ),
        (
            &["http", "http://127.0.0.1:9/", "--cacert", cacert(&ca)],
            "--cacert applies to https:// URLs only",
        ),
        (
            &["http", "http://127.0.0.1:9/", "--tls-resume"],
            "--tls-resume applies to https:// URLs only",
        ),
        (&["http", https], "say whom to trust, --cacert FILE"),
    ];
    for (args, says) in cases {
        let r = run_load(args, LIMIT);
        assert_eq!(r.code, 2, "{}", r.describe());
        assert!(
            r.stderr.contains(says),
            "expected {says:?}\n{}",
            r.describe()
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.describe());
    }
}

/// nginx (`ssl` on a loopback port) serving `Hello, World!` with a certificate of the test CA.
fn start_nginx(ca: &TestCa) -> Option<common::Nginx> {
    let (cert, key) = ca.server_pem_files(Cert::Good);
    common::start_nginx(
        &ca.dir,
        &format!(
            "listen 127.0.0.1:{{port}} ssl;
    ssl_certificate {cert}; ssl_certificate_key {key}; ssl_protocols TLSv1.2 TLSv1.3;
    location / {{ return 200 \"Hello, World!\"; }}",
            cert = cert.display(),
            key = key.display()
        ),
    )
}

/// A real TLS server: OpenSSL's side of the handshake, its session tickets, its records.
fn nginx_over_https_closed_loop_and_resumed_reconnects(io: &str) {
    let ca = TestCa::new(&format!("nginx-{io}"));
    let Some(nginx) = start_nginx(&ca) else {
        common::feature_missing("nginx is not installed");
        return;
    };
    let url = https_url("localhost", nginx.port);
    let r = run_json(
        &https_args(
            io,
            &url,
            &ca,
            &["-c", "4", "-t", "1", "-n", "200", "--expect-status", "200"],
        ),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 200, "{}", r.context);
    assert_tls_block(&r, false);
    // --close: a connection per request, each resuming the session of an earlier one.
    let r = run_json(
        &https_args(
            io,
            &url,
            &ca,
            &[
                "-c",
                "2",
                "-t",
                "1",
                "-n",
                "40",
                "--close",
                "--tls-resume",
                "--expect-status",
                "200",
            ],
        ),
        LIMIT,
    );
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/totals/requests"), 40, "{}", r.context);
    assert_tls_block(&r, true);
    assert!(r.u64("/tls/resumed") > 0, "{}", r.context);
}
