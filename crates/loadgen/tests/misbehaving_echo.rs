//! `netarena-load echo` against real echo servers on loopback, correct and faulty.
//!
//! The generator must verify every echoed byte, put each fault in its documented class, and keep the
//! other connections going.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;

const RUN_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn correct_echo_verifies_every_byte_of_every_connection() {
    let server = echo_server(EchoFault::None);
    let (connections, bytes, chunk) = (8u64, 262_144u64, 32_768u64);
    let r = run_json(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "8",
            "--bytes",
            "262144",
            "--chunk",
            "32768",
        ],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.get("/mode"), "echo");
    assert_eq!(
        r.u64("/echo/connections_completed"),
        connections,
        "{}",
        r.context
    );
    assert_eq!(
        r.u64("/echo/verified_bytes"),
        connections * bytes,
        "{}",
        r.context
    );
    assert_eq!(r.u64("/echo/bytes_per_connection"), bytes, "{}", r.context);
    assert_eq!(r.u64("/echo/chunk_bytes"), chunk, "{}", r.context);
    // "requests" are chunks echoed and verified; each is one latency sample.
    let chunks = connections * bytes / chunk;
    assert_eq!(r.u64("/totals/requests"), chunks, "{}", r.context);
    assert_eq!(r.u64("/latency/count"), chunks, "{}", r.context);
    r.assert_latency_ordered("/latency");
    assert!(
        r.u64("/totals/bytes_received") >= connections * bytes,
        "{}",
        r.context
    );
    assert!(
        r.u64("/totals/bytes_sent") >= connections * bytes,
        "{}",
        r.context
    );
    assert_eq!(server.stats.echoed_bytes(), connections * bytes);
    let completion_s = r.f64("/echo/completion_time_s");
    assert!(
        completion_s > 0.0 && completion_s < 20.0,
        "completion_time_s {completion_s}\n{}",
        r.context
    );

    // The payload is a pattern that never contains zeros and differs between connections.
    let prefixes = server.stats.echo_prefixes.lock().unwrap().clone();
    assert_eq!(prefixes.len() as u64, connections);
    for (i, p) in prefixes.iter().enumerate() {
        assert_eq!(
            p.len(),
            ECHO_PREFIX_BYTES,
            "connection {i} sent only {} bytes",
            p.len()
        );
        assert!(
            !p.contains(&0),
            "connection {i}'s payload contains zero bytes"
        );
    }
    let distinct: HashSet<&Vec<u8>> = prefixes.iter().collect();
    assert_eq!(
        distinct.len() as u64,
        connections,
        "connections sent identical payloads"
    );
}

#[test]
fn byte_count_not_a_multiple_of_the_chunk() {
    let server = echo_server(EchoFault::None);
    let r = run_json(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "3",
            "--bytes",
            "100000",
            "--chunk",
            "32768",
        ],
        RUN_LIMIT,
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/echo/connections_completed"), 3, "{}", r.context);
    assert_eq!(r.u64("/echo/verified_bytes"), 300_000, "{}", r.context);
    // 3 full chunks and a 1696-byte tail per connection.
    assert_eq!(r.u64("/totals/requests"), 12, "{}", r.context);
    assert_eq!(server.stats.echoed_bytes(), 300_000);
}

#[test]
fn one_corrupted_byte_is_a_verification_mismatch_and_others_complete() {
    // Byte 40000 of connection 2 lies in its second 32 KiB chunk: the first chunk still verifies.
    let offset = 40_000u64;
    let server = echo_server(EchoFault::CorruptByte {
        conn: Some(2),
        offset,
    });
    let (connections, bytes) = (4u64, 131_072u64);
    let r = run_json(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "4",
            "--bytes",
            "131072",
            "--chunk",
            "32768",
        ],
        RUN_LIMIT,
    );
    assert_eq!(
        server.stats.misbehaved(),
        1,
        "the server did not corrupt anything"
    );
    r.assert_only_errors(&["verification_mismatch"]);
    assert_eq!(r.class("verification_mismatch"), 1, "{}", r.context);
    assert_eq!(
        r.u64("/echo/connections_completed"),
        connections - 1,
        "{}",
        r.context
    );
    let verified = r.u64("/echo/verified_bytes");
    let good = (connections - 1) * bytes;
    assert!(
        verified >= good + 32_768 && verified <= good + offset,
        "verified_bytes {verified}: expected the 3 good connections ({good}) plus the bad one's bytes before the \
         corrupted one (32768..=40000)\n{}",
        r.context
    );
}

#[test]
fn server_closing_early_is_closed_early_and_others_complete() {
    let server = echo_server(EchoFault::CloseEarly {
        conn: 1,
        read_bytes: 32_768,
        echo_bytes: 16_384,
    });
    let (connections, bytes) = (4u64, 65_536u64);
    let r = run_json(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "4",
            "--bytes",
            "65536",
            "--chunk",
            "32768",
        ],
        RUN_LIMIT,
    );
    assert_eq!(
        server.stats.misbehaved(),
        1,
        "the server did not close any connection early"
    );
    r.assert_only_errors(&["closed_early"]);
    assert_eq!(r.class("closed_early"), 1, "{}", r.context);
    assert_eq!(
        r.u64("/echo/connections_completed"),
        connections - 1,
        "{}",
        r.context
    );
    let verified = r.u64("/echo/verified_bytes");
    let good = (connections - 1) * bytes;
    assert!(
        verified >= good && verified <= good + 16_384,
        "verified_bytes {verified}\n{}",
        r.context
    );
}

#[test]
fn duration_flood_with_probes() {
    let server = echo_server(EchoFault::None);
    let run = run_load(
        &[
            "echo",
            &server.host_port(),
            "-c",
            "4",
            "--chunk",
            "4096",
            "-d",
            "1s",
            "--probe-interval",
            "100ms",
            "--json",
        ],
        RUN_LIMIT,
    );
    let r = run.result();
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    // The flood ran for the -d asked and stopped by itself (a generator that does not stop is
    // killed at RUN_LIMIT): its measured phase lies within the process's life.
    let duration_s = r.f64("/duration_s");
    assert!(
        (1.0..=run.wall.as_secs_f64()).contains(&duration_s),
        "duration_s {duration_s} for -d 1s, in a process that lived {:?}\n{}",
        run.wall,
        r.context
    );
    assert!(r.u64("/totals/requests") > 0, "{}", r.context);
    assert!(r.u64("/echo/verified_bytes") > 0, "{}", r.context);
    assert_eq!(r.u64("/echo/chunk_bytes"), 4096, "{}", r.context);

    assert!(
        (r.f64("/echo/probe/interval_s") - 0.1).abs() < 1e-9,
        "{}",
        r.context
    );
    let attempts = r.u64("/echo/probe/attempts");
    let completed = r.u64("/echo/probe/completed");
    r.assert_probes_kept_their_interval();
    assert!(
        completed + 1 >= attempts && completed <= attempts,
        "probe completed {completed} of {attempts}\n{}",
        r.context
    );
    assert_eq!(r.u64("/echo/probe/errors"), 0, "{}", r.context);
    assert_eq!(
        r.u64("/echo/probe/latency/count"),
        completed,
        "{}",
        r.context
    );
    r.assert_latency_ordered("/echo/probe/latency");
    // Each probe is a fresh connection on top of the flood's own.
    assert!(
        server.stats.connections() >= 4 + completed,
        "server saw {} connections",
        server.stats.connections()
    );
}
