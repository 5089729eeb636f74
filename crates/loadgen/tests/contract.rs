//! The documented contract, checked on the real binary against real loopback servers: the JSON
//! document validates against docs/schema/netarena-load.schema.json in both modes, and its numbers
//! agree with what the servers saw.

mod common;

use std::time::Duration;

use common::{
    echo_server, fixed_http_server, free_port, run_load, spawn_load_with, validate_against_schema,
    EchoFault, LoadRun,
};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs the binary with RLIMIT_NOFILE set to (soft, hard) in the child.
fn run_with_fd_limit(args: &[&str], soft: u64, hard: u64) -> LoadRun {
    use std::os::unix::process::CommandExt;
    spawn_load_with(args, |cmd| {
        // SAFETY: setrlimit is async-signal-safe and touches only the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let rl = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .finish(LIMIT)
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

#[test]
fn http_result_matches_schema_and_counts() {
    let server = fixed_http_server(200, b"Hello, World!");
    let url = format!("http://{}/hello", server.addr);
    let doc = run_load(
        &[
            "http",
            &url,
            "-c",
            "4",
            "-t",
            "2",
            "-d",
            "1500ms",
            "--expect-body-size",
            "13",
            "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    assert_eq!(doc["mode"], "http");
    assert!(doc["echo"].is_null());
    let requests = u(&doc["totals"]["requests"]);
    assert!(requests > 0, "{doc:#}");
    assert_eq!(u(&doc["totals"]["errors"]), 0, "{doc:#}");
    // Plus one censored lower bound per request still in flight at the end (one per connection).
    let censored = u(&doc["latency"]["censored"]);
    assert_eq!(censored, u(&doc["totals"]["unfinished"]));
    assert!(censored <= 4, "{doc:#}");
    assert_eq!(u(&doc["latency"]["count"]), requests + censored);
    // Every response counted was the server's, whatever rate this machine reached (the server
    // may have read more: requests in flight or sent as the phase ended, which it does not count;
    // with epoll, 5 more than counted on 4 connections was seen).
    assert!(requests <= server.stats.requests(), "{doc:#}");
    // 1.5 s measured: one full second and a partial one, zeros included, summing to the total.
    let timeline = doc["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 2);
    assert_eq!(
        timeline[1]["t_s"].as_f64().unwrap(),
        doc["duration_s"].as_f64().unwrap()
    );
    assert_eq!(
        timeline.iter().map(|s| u(&s["requests"])).sum::<u64>(),
        requests
    );
    assert_eq!(u(&doc["totals"]["connections_opened"]), 4);
}

#[test]
fn http_requests_stop_exactly_at_n() {
    let server = fixed_http_server(200, b"ok");
    let url = format!("http://{}/", server.addr);
    let doc = run_load(
        &[
            "http",
            &url,
            "-c",
            "7",
            "-t",
            "2",
            "-n",
            "1001",
            "--pipeline",
            "3",
            "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    assert_eq!(u(&doc["totals"]["responses"]), 1001);
    assert_eq!(u(&doc["totals"]["requests"]), 1001);
    // Sends are capped by the quota too: the server never saw more than N requests.
    assert_eq!(server.stats.requests(), 1001);
}

#[test]
fn requests_mode_is_bounded_in_time_and_says_it_stopped_short() {
    // Accepted by the kernel, never answered: -n 10 can never complete. -d bounds the run (without
    // -d, REQUESTS_MODE_TIME_BOUND does, 60 s): it ends, exit 0, with what it got and a line on
    // stderr saying it stopped short. The test's own limit would fail a run that waited for -n.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "2",
            "-n",
            "10",
            "-d",
            "1s",
            "--timeout",
            "500ms",
            "--json",
        ],
        LIMIT,
    );
    let doc = run.json();
    validate_against_schema(&doc);
    assert_eq!(u(&doc["config"]["requests"]), 10, "{}", run.describe());
    assert_eq!(u(&doc["totals"]["responses"]), 0, "{}", run.describe());
    assert!(
        run.stderr
            .contains("stopped by the time bound (1s) after 0 of 10 responses"),
        "{}",
        run.describe()
    );
    assert!(
        run.wall >= Duration::from_secs(1),
        "ended before -d\n{}",
        run.describe()
    );
    drop(silent);
}

#[test]
fn unexpected_bodies_and_statuses_are_errors_not_successes() {
    let server = fixed_http_server(200, b"Hello, World!");
    let url = format!("http://{}/", server.addr);
    let doc = run_load(
        &[
            "http",
            &url,
            "-c",
            "2",
            "-n",
            "50",
            "--expect-body-size",
            "12",
            "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    assert_eq!(u(&doc["totals"]["requests"]), 0);
    assert_eq!(u(&doc["totals"]["responses"]), 50);
    assert_eq!(u(&doc["errors"]["by_class"]["verification_mismatch"]), 50);
    assert_eq!(u(&doc["latency"]["count"]), 0);

    let busy = fixed_http_server(503, b"busy");
    let url = format!("http://{}/", busy.addr);
    let doc = run_load(&["http", &url, "-c", "2", "-n", "20", "--json"], LIMIT).json();
    validate_against_schema(&doc);
    assert_eq!(u(&doc["errors"]["by_class"]["status"]), 20);
    assert_eq!(u(&doc["errors"]["status_codes"]["503"]), 20);
    assert!(doc["errors"]["examples"][0]
        .as_str()
        .unwrap()
        .contains("503"));
}

#[test]
fn verify_learn_uses_the_first_response() {
    let server = fixed_http_server(200, b"Hello, World!");
    let url = format!("http://{}/", server.addr);
    let doc = run_load(
        &[
            "http",
            &url,
            "-c",
            "2",
            "-n",
            "10",
            "--verify-learn",
            "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    assert_eq!(doc["config"]["expect_status"], 200);
    assert_eq!(doc["config"]["expect_body_size"], 13);
    assert_eq!(
        doc["config"]["expect_body_sha256"],
        "dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f"
    );
    assert_eq!(u(&doc["totals"]["requests"]), 10);
}

#[test]
fn verify_learn_with_expect_status_learns_the_body_and_checks_the_status() {
    // netarena's json scenario: status 200 required, the framework's own serialization learned.
    let server = fixed_http_server(200, b"{\"message\":\"Hello, World!\"}");
    let url = format!("http://{}/json", server.addr);
    let args = |status: &'static str| {
        vec![
            "http",
            url.as_str(),
            "-c",
            "2",
            "-n",
            "10",
            "--expect-status",
            status,
            "--verify-learn",
            "--json",
        ]
    };
    let ok = run_load(&args("200"), LIMIT);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let doc = ok.json();
    validate_against_schema(&doc);
    assert_eq!(doc["config"]["expect_status"], 200);
    assert_eq!(doc["config"]["expect_body_size"], 27);
    assert_eq!(u(&doc["totals"]["requests"]), 10);
    // A learned response without the asked status stops before any load, saying both statuses.
    let wrong = run_load(&args("201"), LIMIT);
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);
    assert!(
        wrong
            .stderr
            .contains("status 200, but --expect-status says 201"),
        "{}",
        wrong.stderr
    );
    // The body expectations are what --verify-learn learns: giving both is refused.
    let both = run_load(
        &[
            "http",
            &url,
            "-n",
            "1",
            "--verify-learn",
            "--expect-body-size",
            "27",
        ],
        LIMIT,
    );
    assert_eq!(both.code, 2, "{}", both.stderr);
    assert!(
        both.stderr.contains("--expect-body-size"),
        "{}",
        both.stderr
    );
}

#[test]
fn echo_fixed_bytes_result_matches_schema() {
    let server = echo_server(EchoFault::None);
    let target = server.addr.to_string();
    let doc = run_load(
        &[
            "echo",
            &target,
            "-c",
            "8",
            "-t",
            "2",
            "--bytes",
            "100000",
            "--chunk",
            "8192",
            "--probe-interval",
            "20ms",
            "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    let echo = &doc["echo"];
    assert_eq!(u(&echo["connections_completed"]), 8);
    assert_eq!(u(&echo["verified_bytes"]), 800_000);
    assert_eq!(u(&doc["totals"]["bytes_sent"]), 800_000);
    // 100000 bytes in 8192-byte chunks: 12 full chunks and one of 1696 bytes per connection.
    assert_eq!(u(&doc["totals"]["requests"]), 8 * 13);
    assert!(echo["completion_time_s"].as_f64().unwrap() > 0.0);
    assert_eq!(u(&doc["totals"]["errors"]), 0, "{doc:#}");
}

#[test]
fn echo_duration_with_probe_matches_schema() {
    let server = echo_server(EchoFault::None);
    let target = server.addr.to_string();
    let r = run_load(
        &[
            "echo",
            &target,
            "-c",
            "4",
            "-d",
            "1s",
            "--chunk",
            "4096",
            "--probe-interval",
            "100ms",
            "--json",
        ],
        LIMIT,
    )
    .result();
    r.assert_probes_kept_their_interval();
    let doc = r.doc;
    validate_against_schema(&doc);
    let probe = &doc["echo"]["probe"];
    assert_eq!(u(&probe["completed"]), u(&probe["attempts"]), "{probe:#}");
    assert_eq!(u(&probe["latency"]["count"]), u(&probe["completed"]));
    assert!(doc["echo"]["completion_time_s"].is_null());
    assert!(u(&doc["totals"]["requests"]) > 10);
}

#[test]
fn corrupted_echo_is_a_verification_mismatch() {
    let server = echo_server(EchoFault::CorruptByte {
        conn: None,
        offset: 5000,
    });
    let target = server.addr.to_string();
    let doc = run_load(
        &[
            "echo", &target, "-c", "3", "--bytes", "20000", "--chunk", "4096", "--json",
        ],
        LIMIT,
    )
    .json();
    validate_against_schema(&doc);
    assert_eq!(u(&doc["errors"]["by_class"]["verification_mismatch"]), 3);
    assert_eq!(u(&doc["echo"]["connections_completed"]), 0);
    // The first chunk (bytes 0..4096) was fine, the second carried the flipped byte.
    assert_eq!(u(&doc["totals"]["requests"]), 3);
    let example = doc["errors"]["examples"][0].as_str().unwrap();
    assert!(example.contains("byte 5000"), "{example}");
}

#[test]
fn refusals_exit_2_and_send_nothing() {
    let run = run_load(
        &["http", "http://10.255.255.1:80/", "-d", "1s", "--json"],
        LIMIT,
    );
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("--allow-target 10.255.255.1"),
        "{}",
        run.stderr
    );

    // More connections than file descriptors, under a limit the test sets itself: true on any
    // machine, whatever its own limit. The soft limit starts below the hard one, so the refusal's
    // number also shows the tool raised it to the hard limit first.
    let LoadRun { stderr, code, .. } = run_with_fd_limit(
        &["echo", "127.0.0.1:9", "-c", "2000", "-d", "1s"],
        512,
        1024,
    );
    assert_eq!(code, 2, "{stderr}");
    // One thread: FD_RESERVE + 1 descriptors kept for the tool.
    let fit = 1024 - netarena_load::limits::FD_RESERVE - 1;
    assert!(
        stderr.contains(&format!("at most {fit} connections")) && stderr.contains("ulimit -n"),
        "{stderr}"
    );

    let run = run_load(&["http", "http://127.0.0.1:9/", "-d", "ten"], LIMIT);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("invalid duration"), "{}", run.stderr);

    let run = run_load(&["echo", "127.0.0.1:9", "--bytes", "10", "-d", "1s"], LIMIT);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not both"), "{}", run.stderr);
}

#[test]
fn dead_server_is_counted_not_fatal() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let doc = run_load(&["http", &url, "-c", "3", "-d", "500ms", "--json"], LIMIT).json();
    validate_against_schema(&doc);
    let refused = u(&doc["errors"]["by_class"]["connect_refused"]);
    assert!(refused >= 3, "{doc:#}");
    // The backoff keeps a dead server from spinning a core: 3 connections, at most ~100 tries each.
    assert!(refused < 400, "{refused} connect attempts in 0.5 s");
    assert_eq!(u(&doc["totals"]["requests"]), 0);
}

#[test]
fn the_schema_check_rejects_a_drifted_document() {
    let server = fixed_http_server(200, b"ok");
    let url = format!("http://{}/", server.addr);
    let mut doc = run_load(&["http", &url, "-c", "1", "-n", "5", "--json"], LIMIT).json();
    validate_against_schema(&doc);
    doc["totals"]["surprise"] = Value::from(1);
    assert!(
        std::panic::catch_unwind(|| validate_against_schema(&doc)).is_err(),
        "an unknown field must fail validation"
    );
    doc["totals"].as_object_mut().unwrap().remove("surprise");
    doc["errors"]["by_class"]
        .as_object_mut()
        .unwrap()
        .remove("reset");
    assert!(
        std::panic::catch_unwind(|| validate_against_schema(&doc)).is_err(),
        "a missing error class must fail validation"
    );
}
