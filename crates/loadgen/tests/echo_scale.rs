//! 19,000 concurrent echo connections from one generator process (the machine's per-process fd
//! limit is 20,000). The server runs in this test process, the generator is the real binary.
//!
//! The connections come from eight source addresses: from a single one, Linux's connect() spends
//! ever longer searching the ephemeral range for a free port as it fills (measured here: 16,400
//! connections after 8 s), which would make this test slow without testing anything of ours.
//!
//! The connections open gradually (at most 1024 handshakes in progress per thread), so how many are
//! open after N seconds depends on the machine: on a busy 2-core VM only half of them were open
//! after 5 s. So the run is not given a duration to open them in: it is asked for far longer than
//! any machine needs and interrupted (SIGINT, which ends the measured phase with a result) once
//! the server has seen all of them open at once and traffic on them. The assertions are about
//! holding them, not about how fast they open.

mod common;

use std::time::Duration;

use common::{echo_server, spawn_load, validate_against_schema, wait_until, EchoFault};

/// docs/load-generator.md, "Exit codes": a run ended by its first SIGINT.
const EXIT_INTERRUPTED: i32 = 105;
/// How long the generator may take to open every connection and get traffic through them: only a
/// bound for a hang, inside the test server's own lifetime (`SERVER_LIFETIME`, 60 s).
const OPEN_LIMIT: Duration = Duration::from_secs(50);

#[test]
fn holds_19000_concurrent_echo_connections() {
    const CONNECTIONS: u64 = 19_000;
    let server = echo_server(EchoFault::None);
    let target = server.addr.to_string();
    let running = spawn_load(&[
        "echo",
        &target,
        "-c",
        "19000",
        "-t",
        "2",
        "-d",
        "80s",
        "--chunk",
        "64",
        "--timeout",
        "20s",
        "--source-ips",
        "127.0.1.1-127.0.1.8",
        "--json",
    ]);
    wait_until("all connections open at the server", OPEN_LIMIT, || {
        server.stats.peak_connections() >= CONNECTIONS
    });
    // Two chunks' worth per connection echoed since: the flood runs on them.
    let echoed_when_open = server.stats.echoed_bytes();
    wait_until("traffic on the open connections", OPEN_LIMIT, || {
        server.stats.echoed_bytes() >= echoed_when_open + 2 * 64 * CONNECTIONS
    });
    running.signal(libc::SIGINT);
    let run = running.finish(Duration::from_secs(90));
    assert_eq!(run.code, EXIT_INTERRUPTED, "{}", run.describe());
    let doc = run.stdout_json();
    validate_against_schema(&doc);
    assert_eq!(doc["errors"]["total"], 0, "{}", doc["errors"]);
    // In --duration mode a connection is only ever closed after an error, so with no errors every
    // one of them was open at the same time; the server saw that too.
    assert_eq!(
        doc["totals"]["connections_opened"].as_u64().unwrap(),
        CONNECTIONS
    );
    assert!(server.stats.peak_connections() >= CONNECTIONS);
    assert!(
        doc["totals"]["requests"].as_u64().unwrap() >= CONNECTIONS,
        "{}",
        doc["totals"]
    );
}
