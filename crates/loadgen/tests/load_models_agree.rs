//! The closed loop and the open loop judge a misbehaving server alike: both drive the same exchange
//! (`src/exchange.rs`) and the same connection slots (`src/io/worker.rs`), so they share one
//! definition of success and of every error class. Each server below misbehaves in one way; both
//! load models run against it and must report errors of that way's class, and of no other.
//!
//! The closed loop runs on the engine `NETARENA_LOAD_TEST_IO` names (the Makefile runs this file
//! once per engine); the open loop on epoll, its only engine.

mod common;

use std::io::Write;
use std::thread;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(30);

/// The same load in both models: two connections for one second, replies owed for 5 s at most (a
/// starved host may hold the generator off its CPU for most of a second: a reply it was slow to read
/// must not count as a timeout), 300 ms where the test is about timeouts.
fn both_models(url: &str, extra: &[&str]) -> [(&'static str, Result); 2] {
    both_models_with_timeout(url, extra, "5s")
}

fn both_models_with_timeout(
    url: &str,
    extra: &[&str],
    timeout: &str,
) -> [(&'static str, Result); 2] {
    let mut closed = vec!["http", url, "-c", "2", "-d", "1s", "--timeout", timeout];
    closed.extend_from_slice(extra);
    let mut open = closed.clone();
    open.extend_from_slice(&["--rate", "200"]);
    [
        ("closed loop", run_json(&closed, LIMIT)),
        ("open loop", run_json(&open, LIMIT)),
    ]
}

/// Both models counted errors of `class`, and only of it.
fn assert_both_see_only(runs: &[(&str, Result)], class: &str) {
    for (model, r) in runs {
        assert!(
            r.class(class) > 0,
            "{model}: no {class} errors\n{}",
            r.context
        );
        r.assert_only_errors(&[class]);
    }
}

#[test]
fn a_reset_in_the_middle_of_a_response_is_reset_in_both() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        if n % 3 != 1 {
            return write_hello(s, stats);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHel")?;
        // Let the client read the part before the RST.
        thread::sleep(Duration::from_millis(10));
        reset(s.try_clone()?);
        Ok(After::Gone)
    });
    assert_both_see_only(&both_models(&server.url("/hello"), &[]), "reset");
}

#[test]
fn a_close_before_or_inside_a_response_is_closed_early_in_both() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        let partial: &[u8] = match n % 4 {
            1 => b"",
            2 => b"HTTP/1.1 200 OK\r\nContent-Le",
            3 => b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello",
            _ => return write_hello(s, stats),
        };
        s.write_all(partial)?;
        Ok(After::Close)
    });
    assert_both_see_only(&both_models(&server.url("/hello"), &[]), "closed_early");
}

#[test]
fn a_server_that_closes_every_connection_at_once_is_never_a_connect_error() {
    // The FIN may come with the connect's completion: that connection did connect. The closed loop
    // has a request in flight on it (closed_early); the open loop may not have sent one yet (then
    // the close costs no request and is no error), but the requests it does send are closed_early.
    let server = TestServer::start(loopback_listener(), None, |mut s, _, ctx| {
        let _ = s.shutdown(std::net::Shutdown::Write);
        ctx.hold_until_peer_closes(&mut s);
    });
    for (model, r) in both_models(&server.url("/hello"), &[]) {
        r.assert_only_errors(&["closed_early"]);
        assert_eq!(r.u64("/totals/requests"), 0, "{model}\n{}", r.context);
        // Bounded reconnects: after a close the connection waits its back-off (10 ms and more),
        // so each connection opens at most once per 10 ms of the run, not the thousands a second
        // of a reconnect at once. The bound follows the run's measured length: the open loop goes
        // on until every request of its second is sent, which a slow host stretches to seconds
        // (each request needs a connect, and the connects are spaced by the back-off).
        let opened = r.u64("/totals/connections_opened");
        let duration_s = r.f64("/duration_s");
        let bound = 2.0 * (1.0 + duration_s / 0.010) * 1.1;
        assert!(
            (opened as f64) <= bound,
            "{model}: {opened} connects in {duration_s} s, above {bound:.0}\n{}",
            r.context
        );
    }
}

#[test]
fn invalid_http_is_a_parse_error_in_both() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        if n % 3 != 1 {
            return write_hello(s, stats);
        }
        s.write_all(b"HTTP/1.1 2OO OK\r\nContent-Length: 13\r\n\r\nHello, World!")?;
        // Leave the connection open: the generator has to notice the garbage itself.
        Ok(After::Hold)
    });
    assert_both_see_only(&both_models(&server.url("/hello"), &[]), "parse_error");
}

#[test]
fn an_unexpected_status_is_status_in_both() {
    let server = fixed_http_server(500, b"no");
    let runs = both_models(&server.url("/hello"), &[]);
    assert_both_see_only(&runs, "status");
    for (model, r) in &runs {
        assert!(
            r.status_codes().get("500").is_some_and(|&n| n > 0),
            "{model}\n{}",
            r.context
        );
    }
}

#[test]
fn a_wrong_body_size_is_a_verification_mismatch_in_both() {
    let server = fixed_http_server(200, b"Hello");
    let runs = both_models(&server.url("/hello"), &["--expect-body-size", "13"]);
    assert_both_see_only(&runs, "verification_mismatch");
}

#[test]
fn a_reply_later_than_the_timeout_is_timeout_in_both() {
    let server = http_server(loopback_listener(), None, |n, _, s, stats| {
        if n % 2 == 1 {
            // Never answer this one; the client gives up and closes.
            return Ok(After::Hold);
        }
        write_hello(s, stats)
    });
    assert_both_see_only(
        &both_models_with_timeout(&server.url("/hello"), &[], "300ms"),
        "timeout",
    );
}

#[test]
fn nothing_listening_is_connect_refused_in_both() {
    let url = format!("http://127.0.0.1:{}/hello", free_port());
    assert_both_see_only(&both_models(&url, &[]), "connect_refused");
}
