//! `--io uring` beyond the shared scenarios. Every http scenario of contract.rs and
//! misbehaving_http.rs runs on the uring engine with `NETARENA_LOAD_TEST_IO=uring cargo test`; this
//! file checks what is specific to the choice of engine: the result names it, it validates against
//! the schema, sockets given up on are really closed (an io_uring operation holds its socket open
//! until it is cancelled), and what uring does not do is refused rather than faked. The echo
//! scenarios (misbehaving_echo.rs, echo_scale.rs, contract.rs) run on it the same way.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

const RUN_LIMIT: Duration = Duration::from_secs(20);

/// io_uring can be unavailable (kernel.io_uring_disabled, a container's seccomp profile). Then the
/// tool must say so and exit 2; this checks that and tells the caller to stop (a failure under CI:
/// `feature_missing`).
fn uring_usable(server: &TestServer) -> bool {
    let url = server.url("/hello");
    let run = run_load(
        &["http", &url, "-n", "1", "--io", "uring", "--json"],
        RUN_LIMIT,
    );
    if run.code == 0 {
        return true;
    }
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr.contains("io_uring cannot be used here") && run.stderr.contains("--io epoll"),
        "the refusal must name the cause and the way out\n{}",
        run.describe()
    );
    assert!(run.stdout.trim().is_empty(), "{}", run.describe());
    feature_missing("io_uring is not usable on this machine; only the refusal was checked");
    false
}

#[test]
fn result_names_the_engine_and_matches_the_schema() {
    let server = hello_server();
    if !uring_usable(&server) {
        return;
    }
    let url = server.url("/hello");
    for io in ["uring", "epoll"] {
        let r = run_json(
            &[
                "http",
                &url,
                "-c",
                "6",
                "-t",
                "2",
                "-d",
                "1s",
                "--io",
                io,
                "--expect-body-size",
                "13",
            ],
            RUN_LIMIT,
        );
        validate_against_schema(&r.doc);
        assert_eq!(
            r.get("/config/io_backend").as_str(),
            Some(io),
            "{}",
            r.context
        );
        assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
        assert!(r.u64("/totals/requests") > 100, "{}", r.context);
        assert_eq!(r.u64("/totals/connections_opened"), 6, "{}", r.context);
        assert_eq!(r.u64("/generator/threads"), 2, "{}", r.context);
        assert!(r.f64("/generator/busy_fraction") > 0.0, "{}", r.context);
        // Two threads: the busiest is at least the mean, and saturation is judged on the busiest.
        let (mean, max) = (
            r.f64("/generator/busy_fraction"),
            r.f64("/generator/busy_fraction_max"),
        );
        assert!(max >= mean, "{}", r.context);
        assert_eq!(
            r.get("/generator/saturated").as_bool(),
            Some(max >= 0.9),
            "{}",
            r.context
        );
        r.assert_latency_ordered("/latency");
    }
    // Without --io (unless NETARENA_LOAD_TEST_IO adds one), auto: the closed loop on io_uring with
    // automatic coalescing (make test needs min-wait), the open loop on epoll (measured cheaper for
    // it); each says why.
    if std::env::var_os("NETARENA_LOAD_TEST_IO").is_none() {
        let r = run_json(&["http", &url, "-n", "5"], RUN_LIMIT);
        validate_against_schema(&r.doc);
        let engine = (
            r.get("/config/io_requested").as_str(),
            r.get("/config/io_backend").as_str(),
            r.get("/config/coalesce").as_str(),
        );
        assert_eq!(
            engine,
            (Some("auto"), Some("uring"), Some("auto")),
            "{}",
            r.context
        );
        let why = r
            .get("/config/io_reason")
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(why.contains("io_uring usable"), "{}", r.context);
        let r = run_json(&["http", &url, "-d", "300ms", "--rate", "50"], RUN_LIMIT);
        validate_against_schema(&r.doc);
        let engine = (
            r.get("/config/io_backend").as_str(),
            r.get("/config/coalesce").as_str(),
        );
        assert_eq!(engine, (Some("epoll"), Some("off")), "{}", r.context);
        assert!(
            r.get("/config/io_reason")
                .as_str()
                .unwrap_or_default()
                .contains("open loop"),
            "{}",
            r.context
        );
    }
}

#[test]
fn echo_runs_on_uring_too_and_auto_picks_it() {
    let probe = hello_server();
    if !uring_usable(&probe) {
        return;
    }
    let server = echo_server(EchoFault::None);
    let target = server.host_port();
    // Chunks of 3 pattern slices and a bit (a slice is 64 KiB): one send at a time per connection,
    // the next queued when the previous completes, and every byte verified.
    let r = run_json(
        &[
            "echo", &target, "-c", "3", "--bytes", "600000", "--chunk", "200000", "--io", "uring",
        ],
        RUN_LIMIT,
    );
    validate_against_schema(&r.doc);
    assert_eq!(
        r.get("/config/io_backend").as_str(),
        Some("uring"),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    assert_eq!(r.u64("/echo/verified_bytes"), 1_800_000, "{}", r.context);
    assert_eq!(r.u64("/totals/requests"), 9, "{}", r.context);
    assert_eq!(server.stats.echoed_bytes(), 1_800_000);
    // No coalescing window for echo: the bound on what batching added is 0.
    assert_eq!(r.f64("/generator/batch_wait_max_us"), 0.0, "{}", r.context);
    assert_eq!(r.f64("/generator/batch_wait_share"), 0.0, "{}", r.context);
    if std::env::var_os("NETARENA_LOAD_TEST_IO").is_none() {
        let r = run_json(&["echo", &target, "--bytes", "10000"], RUN_LIMIT);
        let engine = (
            r.get("/config/io_requested").as_str(),
            r.get("/config/io_backend").as_str(),
            r.get("/config/coalesce").as_str(),
        );
        assert_eq!(
            engine,
            (Some("auto"), Some("uring"), Some("off")),
            "{}",
            r.context
        );
        let why = r
            .get("/config/io_reason")
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            why.contains("io_uring usable") && why.contains("echo"),
            "{}",
            r.context
        );
    }
}

/// Sets a sysctl for the life of the guard and puts back what was there, even when the test fails.
struct SysctlGuard {
    path: &'static str,
    before: String,
}

impl SysctlGuard {
    fn set(path: &'static str, value: &str) -> std::io::Result<SysctlGuard> {
        let before = std::fs::read_to_string(path)?.trim().to_string();
        std::fs::write(path, value)?;
        Ok(SysctlGuard { path, before })
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, &self.before);
    }
}

/// Where io_uring is refused (kernel.io_uring_disabled = 1 lets only root or kernel.io_uring_group
/// create rings), `--io auto` runs epoll and the result says why, while `--io uring` is an error.
/// Processes running as root keep io_uring meanwhile, so tests running beside this one are unaffected;
/// the generator runs here as the unprivileged user `nobody`.
#[test]
fn auto_falls_back_to_epoll_where_io_uring_is_refused() {
    let server = hello_server();
    if !uring_usable(&server) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        feature_missing(
            "refusing io_uring to one process needs root (sysctl kernel.io_uring_disabled)",
        );
        return;
    }
    let guard = match SysctlGuard::set("/proc/sys/kernel/io_uring_disabled", "1") {
        Ok(g) => g,
        Err(e) => {
            feature_missing(&format!(
                "kernel.io_uring_disabled cannot be set ({e}; Linux 6.6+)"
            ));
            return;
        }
    };
    let url = server.url("/hello");
    let as_nobody = |extra: &[&str]| {
        let mut command = std::process::Command::new("setpriv");
        command.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_netarena-load"),
        ]);
        command
            .args(["http", &url, "-n", "20", "-c", "2", "--json"])
            .args(extra);
        command.output().expect("setpriv runs")
    };
    let auto = as_nobody(&[]);
    let refused = as_nobody(&["--io", "uring"]);
    drop(guard);
    assert_eq!(
        auto.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&auto.stdout).expect("a JSON result");
    validate_against_schema(&doc);
    let config = &doc["config"];
    assert_eq!(
        (
            config["io_requested"].as_str(),
            config["io_backend"].as_str()
        ),
        (Some("auto"), Some("epoll")),
        "{doc}"
    );
    let why = config["io_reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("io_uring cannot be used here") && why.contains("io_uring_disabled"),
        "{why}"
    );
    assert_eq!(doc["totals"]["requests"].as_u64(), Some(20), "{doc}");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("io_uring cannot be used here") && stderr.contains("--io epoll"),
        "{stderr}"
    );
}

#[test]
fn timed_out_connections_are_closed_at_once_not_at_exit() {
    // The server never answers and records how long each connection lived until the client closed.
    let lifetimes: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let seen = lifetimes.clone();
    let server = http_server(loopback_listener(), None, move |_, _, s, stats| {
        let accepted = Instant::now();
        stats
            .misbehaved
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ctx_free_hold = |s: &mut std::net::TcpStream| {
            let mut buf = [0u8; 1024];
            loop {
                match std::io::Read::read(s, &mut buf) {
                    Ok(0) => return true,
                    Ok(_) => {}
                    Err(e) if is_poll_timeout(&e) => {
                        if accepted.elapsed() > Duration::from_secs(10) {
                            return false;
                        }
                    }
                    Err(_) => return true,
                }
            }
        };
        if ctx_free_hold(s) {
            seen.lock().unwrap().push(accepted.elapsed());
        }
        Ok(After::Gone)
    });
    let probe = hello_server();
    if !uring_usable(&probe) {
        return;
    }
    let run = run_load(
        &[
            "http",
            &server.url("/"),
            "-c",
            "2",
            "-d",
            "1200ms",
            "--timeout",
            "200ms",
            "--io",
            "uring",
            "--json",
        ],
        RUN_LIMIT,
    );
    let r = run.result();
    let timeouts = r.class("timeout");
    assert!(
        timeouts >= 4,
        "two connections x 1.2 s / 200 ms\n{}",
        r.context
    );
    r.assert_only_errors(&["timeout"]);
    std::thread::sleep(Duration::from_millis(200));
    let lifetimes = lifetimes.lock().unwrap().clone();
    // A connection given up on after 200 ms (checked every 10 ms) must be gone well before the run
    // ends; one kept open by a still-armed recv would live until the process exits (~1.2 s).
    let closed_promptly = lifetimes
        .iter()
        .filter(|d| **d < Duration::from_millis(700))
        .count() as u64;
    assert!(
        closed_promptly >= timeouts.saturating_sub(2),
        "only {closed_promptly} of {timeouts} timed-out connections were closed promptly: {lifetimes:?}\n{}",
        r.context
    );
}

#[test]
fn what_uring_does_not_do_is_refused() {
    let server = hello_server();
    // The echo flood has no coalescing window (it reacts to every completion).
    let run = run_load(
        &[
            "echo",
            &server.host_port(),
            "--io",
            "uring",
            "--coalesce-us",
            "20",
        ],
        RUN_LIMIT,
    );
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr
            .contains("--coalesce-us applies to the HTTP closed loop only: the echo flood")
            && run.stderr.contains("drop --coalesce-us"),
        "{}",
        run.describe()
    );
    // The open loop runs on io_uring, but without coalescing: it would add to the latencies
    // measured against the schedule.
    let run = run_load(
        &[
            "http",
            &server.url("/"),
            "--io",
            "uring",
            "--rate",
            "100",
            "--coalesce-us",
            "10",
        ],
        RUN_LIMIT,
    );
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr
            .contains("--coalesce-us applies to the HTTP closed loop only: the open loop")
            && run.stderr.contains("drop --coalesce-us"),
        "{}",
        run.describe()
    );
    let run = run_load(&["http", &server.url("/"), "--io", "kqueue"], RUN_LIMIT);
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr.contains("kqueue") && run.stderr.contains("uring"),
        "{}",
        run.describe()
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        server.stats.connections(),
        0,
        "a refused run connected to the target"
    );
}

#[test]
fn coalescing_is_recorded_and_only_for_uring() {
    let server = hello_server();
    if !uring_usable(&server) {
        return;
    }
    let url = server.url("/hello");
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "8",
            "-n",
            "2000",
            "--io",
            "uring",
            "--coalesce-us",
            "200",
            "--json",
        ],
        RUN_LIMIT,
    );
    if run.code == 2 && run.stderr.contains("Linux 6.12+") {
        feature_missing(
            "this kernel has no io_uring min-wait (Linux 6.12+); only the refusal was checked",
        );
        return;
    }
    let r = run.result();
    validate_against_schema(&r.doc);
    assert_eq!(r.u64("/config/coalesce_us"), 200, "{}", r.context);
    assert_eq!(
        r.get("/config/coalesce").as_str(),
        Some("fixed"),
        "{}",
        r.context
    );
    assert_eq!(
        r.get("/generator/batch_wait_max_us").as_f64(),
        Some(200.0),
        "the bound on added latency is the fixed window\n{}",
        r.context
    );
    assert_eq!(
        r.get("/generator/batch_wait_share").as_f64(),
        Some(1.0),
        "a fixed window holds out at every wait\n{}",
        r.context
    );
    assert_eq!(r.u64("/totals/requests"), 2000, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let run = run_load(&["http", &url, "-n", "5", "--coalesce-us", "50"], RUN_LIMIT);
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(
        run.stderr
            .contains("--coalesce-us only applies to --io uring"),
        "{}",
        run.describe()
    );
}

/// A server whose every answer takes at least `delay`: the latencies the automatic window follows.
fn slow_hello_server(delay: Duration) -> TestServer {
    http_server(loopback_listener(), None, move |_, _, s, stats| {
        std::thread::sleep(delay);
        write_hello(s, stats)
    })
}

/// One `--coalesce-us auto` run; None if this kernel has no io_uring min-wait (then only the
/// refusal is checked).
fn auto_run(server: &TestServer, connections: &str) -> Option<common::Result> {
    let url = server.url("/hello");
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            connections,
            "-d",
            "1s",
            "--warmup",
            "300ms",
            "--io",
            "uring",
            "--coalesce-us",
            "auto",
            "--json",
        ],
        RUN_LIMIT,
    );
    if run.code == 2 && run.stderr.contains("Linux 6.12+") {
        feature_missing(
            "this kernel has no io_uring min-wait (Linux 6.12+); only the refusal was checked",
        );
        return None;
    }
    let r = run.result();
    validate_against_schema(&r.doc);
    assert_eq!(
        r.get("/config/coalesce").as_str(),
        Some("auto"),
        "{}",
        r.context
    );
    assert_eq!(r.u64("/config/coalesce_us"), 0, "{}", r.context);
    assert_eq!(r.u64("/errors/total"), 0, "{}", r.context);
    let share = r.f64("/generator/batch_wait_share");
    assert!((0.0..=1.0).contains(&share), "{}", r.context);
    Some(r)
}

fn batch_wait_bound(r: &common::Result) -> f64 {
    r.get("/generator/batch_wait_max_us")
        .as_f64()
        .expect("a number for the uring engine")
}

/// `--coalesce-us auto` holds a response at most 5% of the fastest of the previous 256 latencies
/// (at most 50 µs), and says how long it may have held one; epoll says it never holds any.
#[test]
fn automatic_coalescing_follows_the_latency_within_five_percent() {
    if !uring_usable(&hello_server()) {
        return;
    }
    // Fast exchanges (one connection, tens of µs): next to no window. The fastest of 256 responses
    // is below the run's p99.9 whenever the run has fewer than 256,000 responses.
    let fast = hello_server();
    let Some(r) = auto_run(&fast, "1") else {
        return;
    };
    let p999 = r.u64("/latency/p99_9_us") as f64;
    assert!(r.u64("/totals/responses") < 256_000, "{}", r.context);
    let bound = batch_wait_bound(&r);
    assert!(
        bound <= 0.05 * p999 + 1.0,
        "window {bound} µs with a p99.9 latency of {p999} µs\n{}",
        r.context
    );
    // Every answer takes >= 600 µs: the window is >= 30 µs (5%), never above the 50 µs cap.
    let slow = slow_hello_server(Duration::from_micros(600));
    let r = auto_run(&slow, "4").expect("min-wait was there a moment ago");
    let bound = batch_wait_bound(&r);
    assert!(
        (30.0..=50.0).contains(&bound),
        "window {bound} µs for answers of >= 600 µs\n{}",
        r.context
    );
    // Every answer takes >= 3 ms: 5% would be 150 µs, the cap holds it at 50.
    let slower = slow_hello_server(Duration::from_millis(3));
    let r = auto_run(&slower, "4").expect("min-wait was there a moment ago");
    assert_eq!(batch_wait_bound(&r), 50.0, "{}", r.context);
    let url = fast.url("/hello");
    let r = run_json(
        &["http", &url, "-c", "2", "-n", "50", "--io", "epoll"],
        RUN_LIMIT,
    );
    assert!(
        r.get("/generator/batch_wait_max_us").is_null()
            && r.get("/generator/batch_wait_share").is_null(),
        "epoll reacts at once: no bound to report\n{}",
        r.context
    );
}
