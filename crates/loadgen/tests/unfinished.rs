//! Requests still in flight when the measured phase ends, against real loopback servers that leave
//! connections waiting: they are counted (`totals.unfinished`, not errors), each one's wait so far
//! is a censored lower bound in the latency histogram (`latency.censored`), and a run in which a
//! sizeable share of the connections got no answer at all is flagged (`no_answer`).
//!
//! Every `--timeout` here is longer than the run, the case in which nothing else would report the
//! requests left waiting. Closed-loop runs go through both engines (`NETARENA_LOAD_TEST_IO`, see
//! the Makefile's ENGINE_TESTS); the open loop is epoll's.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// Upper bound for any generator run in this file: the runs are 1–2.5 s; a generator that waited
/// for its 30 s `--timeout` instead of ending on time fails here.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// Reads each request and never answers (it keeps reading until the client closes).
fn silent_server() -> TestServer {
    http_server(loopback_listener(), None, |_, _, _, _| Ok(After::Hold))
}

/// A thread-per-connection server with `threads` threads: as with a threaded server under
/// keep-alive, a connection holds its thread for its whole life, so the first `threads`
/// connections are served (each request after `work`) and the others wait for a thread forever.
fn thread_pool_server(threads: u64, work: Duration) -> (TestServer, Arc<AtomicU64>) {
    let taken = Arc::new(AtomicU64::new(0));
    let served = taken.clone();
    let server = http_server(loopback_listener(), None, move |_, req, s, stats| {
        if req.index_on_connection == 0 {
            let give_up = Instant::now() + SERVER_LIFETIME;
            while taken
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                    (t < threads).then_some(t + 1)
                })
                .is_err()
            {
                if Instant::now() > give_up {
                    return Ok(After::Gone);
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        thread::sleep(work);
        write_hello(s, stats)
    });
    (server, served)
}

/// The accounting every result keeps: censored entries are the unfinished requests, and the
/// histogram holds the successes plus them.
fn assert_censored_accounting(r: &Result, latency: &str) {
    let censored = r.u64(&format!("{latency}/censored"));
    assert_eq!(censored, r.u64("/totals/unfinished"), "{}", r.context);
    assert_eq!(
        r.u64(&format!("{latency}/count")),
        r.u64("/totals/requests") + censored,
        "{}",
        r.context
    );
}

#[test]
fn a_server_that_never_answers_leaves_every_request_unfinished_and_is_flagged() {
    let server = silent_server();
    let url = server.url("/");
    // Sent in the warm-up, never answered: each waited through the whole measured phase.
    let r = run_json(
        &[
            "http",
            &url,
            "-c",
            "8",
            "-t",
            "2",
            "--warmup",
            "300ms",
            "-d",
            "1s",
            "--timeout",
            "30s",
        ],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/totals/requests"), 0, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "not errors\n{}", r.context);
    assert_eq!(r.u64("/totals/unfinished"), 8, "{}", r.context);
    assert_censored_accounting(&r, "/latency");
    let measured_us = r.f64("/duration_s") * 1e6;
    let min_us = r.latency_us_at_least("/latency/min_us");
    assert!(
        min_us >= measured_us,
        "a request waiting since the warm-up entered {min_us} us, less than the {measured_us} us measured\n{}",
        r.context
    );
    assert!(
        r.u64("/latency/max_us") as f64 <= (measured_us + r.f64("/warmup_s") * 1e6) * 1.002,
        "{}",
        r.context
    );
    assert_eq!(r.u64("/no_answer/connections"), 8, "{}", r.context);
    assert_eq!(r.u64("/no_answer/of_connections"), 8, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), true, "{}", r.context);
    // The interval histograms hold the same entries as `latency`.
    let in_intervals: u64 = r
        .get("/intervals/entries")
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    assert_eq!(in_intervals, 8, "{}", r.context);

    let human = run_load(
        &["http", &url, "-c", "3", "-d", "500ms", "--timeout", "30s"],
        RUN_LIMIT,
    );
    assert_eq!(human.code, 0, "{}", human.describe());
    for want in [
        "percentiles include 3 censored lower bound(s)",
        "Unfinished  3 requests",
        "NO ANSWER: 3 of 3 connections",
    ] {
        assert!(
            human.stdout.contains(want),
            "{want:?}\n{}",
            human.describe()
        );
    }
}

#[test]
fn a_pool_of_four_threads_answers_four_connections_and_leaves_the_rest_flagged() {
    let (server, served) = thread_pool_server(4, Duration::from_secs(1));
    let url = server.url("/sleep");
    let r = run_json(
        &["http", &url, "-c", "50", "-d", "2500ms", "--timeout", "30s"],
        RUN_LIMIT,
    );
    let served = served.load(Ordering::SeqCst);
    assert_eq!(served, 4, "the pool serves as many connections as threads");
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let requests = r.u64("/totals/requests");
    assert!(
        requests >= served && requests <= server.stats.good(),
        "each served connection was answered at least once, by the server\n{}",
        r.context
    );
    // Every connection had a request in flight at the end: the served ones their next one.
    assert_eq!(r.u64("/totals/unfinished"), 50, "{}", r.context);
    assert_censored_accounting(&r, "/latency");
    assert_eq!(
        r.u64("/no_answer/connections"),
        50 - served,
        "the connections the pool never took got no answer\n{}",
        r.context
    );
    assert_eq!(r.get("/no_answer/flagged"), true, "{}", r.context);
    // Most entries are the waits of connections unanswered since the start: the median is one
    // of them, not the 1 s of the survivors.
    assert!(
        r.u64("/latency/p50_us") as f64 >= r.f64("/duration_s") * 1e6 / 2.0,
        "{}",
        r.context
    );
}

#[test]
fn a_fair_server_leaves_at_most_one_request_per_connection_unfinished_and_no_flag() {
    let server = hello_server();
    let url = server.url("/hello");
    let r = run_json(&["http", &url, "-c", "4", "-d", "700ms"], RUN_LIMIT);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert!(r.u64("/totals/unfinished") <= 4, "{}", r.context);
    assert_censored_accounting(&r, "/latency");
    assert_eq!(r.u64("/no_answer/connections"), 0, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), false, "{}", r.context);
}

#[test]
fn open_loop_requests_on_the_wire_at_the_drain_deadline_are_unfinished() {
    let server = silent_server();
    let url = server.url("/");
    // 40 arrivals in 1 s on 4 connections. The 4 first requests time out 1.5 s after their send,
    // inside the drain; the connections are replaced and take 4 requests from the backlog, which
    // are still on the wire at the drain deadline (the end + --timeout): unfinished, each waited
    // at least --timeout since its intended send. The rest of the backlog is dropped unsent.
    let started = Instant::now();
    let r = run_json(
        &[
            "http",
            &url,
            "--rate",
            "40",
            "-c",
            "4",
            "-d",
            "1s",
            "--timeout",
            "1500ms",
        ],
        RUN_LIMIT,
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the drain ends at its deadline\n{}",
        r.context
    );
    r.assert_only_errors(&["timeout"]);
    assert_eq!(r.class("timeout"), 4, "{}", r.context);
    assert_eq!(r.u64("/totals/unfinished"), 4, "{}", r.context);
    assert_censored_accounting(&r, "/latency");
    assert_eq!(
        r.u64("/open_loop/latency_uncorrected/censored"),
        4,
        "{}",
        r.context
    );
    assert!(
        r.latency_us_at_least("/latency/min_us") >= 1.5e6,
        "from the intended send, at least --timeout\n{}",
        r.context
    );
    assert_eq!(r.u64("/open_loop/intended"), 40, "{}", r.context);
    assert_eq!(r.u64("/open_loop/dropped_unsent"), 32, "{}", r.context);
    assert_eq!(r.u64("/no_answer/connections"), 4, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), true, "{}", r.context);
}

#[test]
fn conn_rate_connections_with_a_request_on_the_wire_at_the_deadline_are_unfinished() {
    // The first request of each connection is answered after 600 ms, the second never: the
    // connections started in the 500 ms schedule send their second request in the drain, and it
    // is on the wire at the deadline (the end + 1 s).
    let server = http_server(loopback_listener(), None, |_, req, s, stats| {
        if req.index_on_connection > 0 {
            return Ok(After::Hold);
        }
        thread::sleep(Duration::from_millis(600));
        write_hello(s, stats)
    });
    let url = server.url("/");
    let r = run_json(
        &[
            "http",
            &url,
            "--conn-rate",
            "10",
            "--requests-per-conn",
            "2",
            "-d",
            "500ms",
            "--timeout",
            "1s",
        ],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let started = r.u64("/open_loop/connections/started");
    assert_eq!(started, 5, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), started, "{}", r.context);
    assert_eq!(r.u64("/totals/unfinished"), started, "{}", r.context);
    assert_eq!(
        r.u64("/open_loop/connections/unfinished"),
        started,
        "{}",
        r.context
    );
    assert_censored_accounting(&r, "/latency");
    // Every connection was answered once: none was left without an answer.
    assert_eq!(r.u64("/no_answer/connections"), 0, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), false, "{}", r.context);
}

#[test]
fn echo_chunks_never_echoed_are_unfinished() {
    let server = TestServer::start(loopback_listener(), None, |mut s, _, ctx| {
        ctx.hold_until_peer_closes(&mut s)
    });
    let r = run_json(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "3",
            "-d",
            "1s",
            "--timeout",
            "30s",
        ],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/totals/unfinished"), 3, "{}", r.context);
    assert_censored_accounting(&r, "/latency");
    assert_eq!(r.u64("/no_answer/connections"), 3, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), true, "{}", r.context);
}

#[test]
fn connections_whose_connect_never_completes_count_as_unanswered() {
    // A listener that never accepts, with a backlog of 1: a connection or two complete in the
    // kernel and send their request; the SYNs of the others are dropped and retried by TCP, so
    // their connects are still in progress at the end. All of them got no answer at all.
    let listener = listener_with_backlog(1);
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let r = run_json(
        &["http", &url, "-c", "8", "-d", "1s", "--timeout", "30s"],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let unfinished = r.u64("/totals/unfinished");
    assert!(
        (1..8).contains(&unfinished),
        "only the connections in the accept queue sent a request\n{}",
        r.context
    );
    assert_censored_accounting(&r, "/latency");
    assert_eq!(r.u64("/no_answer/connections"), 8, "{}", r.context);
    assert_eq!(r.get("/no_answer/flagged"), true, "{}", r.context);
    drop(listener);
}
