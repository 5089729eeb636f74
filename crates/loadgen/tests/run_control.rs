//! How a run is controlled and judged from outside, on the real binary against real loopback
//! servers: `--threshold` verdicts and exit code 99, the first SIGINT ending the measured phase
//! with a result (exit 105), a second one exiting at once, progress lines on a terminal only, and
//! shell completions.

mod common;

use std::time::Duration;

use common::{
    echo_server, free_port, hello_server, http_server, io_args, loopback_listener, run_load,
    spawn_load, validate_against_schema, wait_until, After, EchoFault, LoadRun,
};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);
/// docs/load-generator.md, "Exit codes".
const EXIT_USAGE: i32 = 2;
const EXIT_THRESHOLD_FAILED: i32 = 99;
const EXIT_INTERRUPTED: i32 = 105;
/// The interrupted runs ask for 10 s and get their signal after measuring for 1 s or 5 s.
const TEN_S: Duration = Duration::from_secs(10);
const HALFWAY: Duration = Duration::from_secs(5);
const ONE_S: Duration = Duration::from_secs(1);

/// The result of a run that ended with `code`: printed in full and valid against the schema.
fn judged(run: &LoadRun, code: i32) -> Value {
    assert_eq!(run.code, code, "{}", run.describe());
    let doc = run.stdout_json();
    validate_against_schema(&doc);
    doc
}

fn thresholds(doc: &Value) -> Vec<Value> {
    doc["thresholds"]
        .as_array()
        .unwrap_or_else(|| panic!("no thresholds list: {doc:#}"))
        .clone()
}

fn verdict<'a>(list: &'a [Value], expr: &str) -> &'a Value {
    list.iter()
        .find(|t| t["expr"] == expr)
        .unwrap_or_else(|| panic!("no verdict for {expr}: {list:#?}"))
}

#[test]
fn thresholds_that_hold_exit_0_and_one_that_cannot_exits_99() {
    let server = hello_server();
    let url = server.url("/hello");
    let holds = [
        "errors==0",
        "requests>=1",
        "p99<=1h",
        "p99.9 <= 1h",
        "max<=1h",
        "rps>0",
    ];
    let mut args = vec!["http", &url, "-c", "2", "-d", "1s", "--json"];
    for t in &holds {
        args.extend(["--threshold", t]);
    }
    let run = run_load(&args, LIMIT);
    let doc = judged(&run, 0);
    let list = thresholds(&doc);
    assert_eq!(list.len(), holds.len(), "one verdict per --threshold");
    for (t, given) in list.iter().zip(holds) {
        assert_eq!(t["expr"], given, "in the order given");
        assert_eq!(t["pass"], true, "{t}");
    }
    // The verdict is about the document's own figures, in the metric's unit.
    let p99 = verdict(&list, "p99<=1h");
    assert_eq!(p99["unit"], "us");
    assert_eq!(p99["limit"].as_f64(), Some(3_600_000_000.0));
    assert_eq!(p99["measured"].as_f64(), doc["latency"]["p99_us"].as_f64());
    assert_eq!(
        verdict(&list, "requests>=1")["measured"].as_f64(),
        doc["totals"]["requests"].as_f64()
    );
    assert_eq!(verdict(&list, "errors==0")["measured"].as_f64(), Some(0.0));

    // Latencies are recorded as at least 1 µs, so p50 < 1us cannot hold; neither can a rate no
    // loopback server reaches. The result is still printed in full.
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "2",
            "-d",
            "1s",
            "--json",
            "--threshold",
            "p50<1us",
            "--threshold",
            "errors<=0.1%",
            "--threshold",
            "rps>=1e12",
        ],
        LIMIT,
    );
    let doc = judged(&run, EXIT_THRESHOLD_FAILED);
    let list = thresholds(&doc);
    assert_eq!(verdict(&list, "p50<1us")["pass"], false);
    assert_eq!(verdict(&list, "rps>=1e12")["pass"], false);
    assert_eq!(
        verdict(&list, "rps>=1e12")["measured"].as_f64(),
        doc["throughput"]["requests_per_s"].as_f64()
    );
    let errors = verdict(&list, "errors<=0.1%");
    assert_eq!(
        (errors["pass"].as_bool(), errors["unit"].as_str()),
        (Some(true), Some("fraction"))
    );
    assert!(doc["totals"]["requests"].as_u64() > Some(0), "{doc:#}");

    // The human summary lists each verdict.
    let run = run_load(
        &[
            "http",
            &url,
            "-c",
            "1",
            "-d",
            "300ms",
            "--threshold",
            "errors==0",
            "--threshold",
            "p50<1us",
        ],
        LIMIT,
    );
    assert_eq!(run.code, EXIT_THRESHOLD_FAILED, "{}", run.describe());
    assert!(run.stdout.contains("PASS errors==0"), "{}", run.describe());
    assert!(run.stdout.contains("FAIL p50<1us"), "{}", run.describe());
}

#[test]
fn a_malformed_threshold_exits_2_before_any_load() {
    let server = hello_server();
    let url = server.url("/hello");
    for bad in ["p99<=5", "latency<=5ms", "p99", "errors<=5", "rps=>10"] {
        let run = run_load(&["http", &url, "-d", "1s", "--threshold", bad], LIMIT);
        assert_eq!(run.code, EXIT_USAGE, "{}", run.describe());
        assert!(run.stdout.is_empty(), "{}", run.describe());
        // One message naming the expression and what is valid.
        assert!(
            run.stderr.contains(&format!("--threshold '{bad}'")),
            "{}",
            run.describe()
        );
        assert!(
            run.stderr.contains("metrics: pN") && run.stderr.contains("operators: <="),
            "{}",
            run.describe()
        );
    }
    let port = free_port().to_string();
    let run = run_load(
        &[
            "echo",
            &format!("127.0.0.1:{port}"),
            "--threshold",
            "p99<=fast",
        ],
        LIMIT,
    );
    assert_eq!(run.code, EXIT_USAGE, "{}", run.describe());
    assert_eq!(server.stats.requests(), 0, "nothing may be sent");
}

#[test]
fn an_echo_flood_against_a_refused_port_fails_errors_eq_0() {
    let target = format!("127.0.0.1:{}", free_port());
    let run = run_load(
        &[
            "echo",
            &target,
            "-c",
            "3",
            "--json",
            "--threshold",
            "errors==0",
        ],
        LIMIT,
    );
    let doc = judged(&run, EXIT_THRESHOLD_FAILED);
    assert!(
        doc["errors"]["by_class"]["connect_refused"].as_u64() > Some(0),
        "{doc:#}"
    );
    let t = &thresholds(&doc)[0];
    assert_eq!(
        (t["pass"].as_bool(), t["measured"].as_f64()),
        (Some(false), Some(1.0)),
        "{t}"
    );
}

/// The run, interrupted by its first SIGINT once it has measured for `measured_for`: sent once
/// `working` says the generator is at work (the server saw its traffic, so its signal thread is
/// installed and the measured phase has begun), then `measured_for` later. Returns the finished run
/// (the process must end by itself).
fn interrupt_after(
    args: &[&str],
    working: impl FnMut() -> bool,
    measured_for: Duration,
) -> LoadRun {
    let running = spawn_load(args);
    wait_until("the generator's first traffic", LIMIT, working);
    std::thread::sleep(measured_for);
    running.signal(libc::SIGINT);
    running.finish(LIMIT)
}

/// The document of an interrupted run: exit 105, valid, marked, and measured from at least
/// `measured_for` (the time between its first traffic and the signal) to less than the `asked`
/// duration: the signal, not the clock, ended it. Speed plays no part: a slower machine only
/// takes longer to notice the signal, and `asked` is far above `measured_for`.
fn interrupted_doc(run: &LoadRun, measured_for: Duration, asked: Duration) -> Value {
    let doc = judged(run, EXIT_INTERRUPTED);
    // Under NETARENA_LOAD_TEST_IO the closed-loop http runs are that engine's; without --io, auto.
    assert_eq!(
        doc["config"]["io_requested"],
        run.io_asked(),
        "{}",
        run.describe()
    );
    assert_eq!(doc["interrupted"], true, "{}", run.describe());
    let d = doc["duration_s"].as_f64().unwrap();
    assert!(
        measured_for.as_secs_f64() <= d && d < asked.as_secs_f64(),
        "duration_s {d}: measured for {measured_for:?} before the signal, {asked:?} asked\n{}",
        run.describe()
    );
    assert!(run.stderr.contains("SIGINT"), "{}", run.describe());
    doc
}

#[test]
fn sigint_halfway_through_a_10s_run_prints_what_was_measured() {
    let server = hello_server();
    let url = server.url("/hello");
    let connections = 2;
    let working = || server.stats.requests() > 0;
    let run = interrupt_after(
        &[
            "http",
            &url,
            "-c",
            &connections.to_string(),
            "-d",
            "10s",
            "--json",
        ],
        working,
        HALFWAY,
    );
    let doc = interrupted_doc(&run, HALFWAY, TEN_S);
    let responses = doc["totals"]["responses"].as_u64().unwrap();
    let seen = server.stats.requests();
    // Every request the server read was answered and counted, except those still in flight when
    // the phase ended: at most one per connection.
    assert!(responses > 0, "{doc:#}");
    assert!(
        seen >= responses && seen <= responses + connections,
        "server saw {seen}, the result counts {responses} responses\n{}",
        run.describe()
    );
    assert_eq!(
        doc["totals"]["requests"], doc["totals"]["responses"],
        "{doc:#}"
    );
    assert_eq!(doc["errors"]["total"], 0, "{doc:#}");

    // The human summary says so too.
    let served_before = server.stats.requests();
    let run = interrupt_after(
        &["http", &url, "-c", "1", "-d", "10s"],
        || server.stats.requests() > served_before,
        Duration::ZERO,
    );
    assert_eq!(run.code, EXIT_INTERRUPTED, "{}", run.describe());
    assert!(run.stdout.contains("INTERRUPTED"), "{}", run.describe());
}

#[test]
fn sigint_ends_the_open_loop_and_the_echo_flood_too() {
    let server = hello_server();
    let url = server.url("/hello");
    let run = interrupt_after(
        &[
            "http", &url, "-c", "2", "--rate", "200", "-d", "10s", "--json",
        ],
        || server.stats.requests() > 0,
        ONE_S,
    );
    let doc = interrupted_doc(&run, ONE_S, TEN_S);
    // The schedule ended with the signal: the achieved rate is over the part that ran, not
    // diluted over the 10 s asked.
    let ol = &doc["open_loop"];
    let started = ol["started"].as_f64().unwrap();
    let achieved = ol["achieved_rate_per_s"].as_f64().unwrap();
    assert!(started > 0.0 && achieved > started / 10.0, "{ol:#}");
    assert_eq!(
        server.stats.requests(),
        doc["totals"]["responses"].as_u64().unwrap(),
        "the open loop drains what it sent before printing\n{}",
        run.describe()
    );

    let echo = echo_server(EchoFault::None);
    let target = echo.host_port();
    let run = interrupt_after(
        &["echo", &target, "-c", "2", "-d", "10s", "--json"],
        || echo.stats.echoed_bytes() > 0,
        ONE_S,
    );
    let doc = interrupted_doc(&run, ONE_S, TEN_S);
    assert!(doc["echo"]["verified_bytes"].as_u64() > Some(0), "{doc:#}");
}

#[test]
fn a_second_sigint_exits_at_once() {
    // A server that reads each request and never answers, so after the first signal the open
    // loop's drain would wait for them up to --timeout (60 s).
    let silent = http_server(loopback_listener(), None, |_, _, _, _| Ok(After::Hold));
    let url = silent.url("/");
    let mut running = spawn_load(&[
        "http",
        &url,
        "-c",
        "2",
        "--rate",
        "50",
        "-d",
        "30s",
        "--timeout",
        "60s",
        "--json",
    ]);
    // The first signal once the generator is at work (its signal thread installed, requests out),
    // the second once it has taken the first: it says so on stderr before it marks the stop, and
    // only then looks for the next signal.
    wait_until("a request at the silent server", LIMIT, || {
        silent.stats.requests() > 0
    });
    running.signal(libc::SIGINT);
    running.wait_for_stderr("SIGINT: ending the measured phase", LIMIT);
    let second = std::time::Instant::now();
    running.signal(libc::SIGINT);
    let run = running.finish(LIMIT);
    assert_eq!(run.code, 128 + libc::SIGINT, "{}", run.describe());
    assert!(run.wall < Duration::from_secs(20), "{}", run.describe());
    assert!(
        second.elapsed() < Duration::from_secs(10),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout.is_empty(),
        "no result after the second signal\n{}",
        run.describe()
    );
}

/// Runs the binary under a pseudo-terminal (`script`), where stderr is a terminal; returns what
/// the terminal showed.
fn under_pty(args: &[&str]) -> String {
    let bin = env!("CARGO_BIN_EXE_netarena-load");
    let command = std::iter::once(bin.to_string())
        .chain(io_args(args).into_iter().map(|a| format!("'{a}'")))
        .collect::<Vec<_>>()
        .join(" ");
    let out = std::process::Command::new("timeout")
        .args(["60", "script", "-qfec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run script(1) from util-linux");
    assert!(out.status.success(), "{command}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn progress_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('[') && l.contains("/s") && l.contains("errors"))
        .collect()
}

#[test]
fn progress_lines_on_a_terminal_only() {
    let server = hello_server();
    let url = server.url("/hello");
    let args = [
        "http",
        url.as_str(),
        "-c",
        "2",
        "-d",
        "2500ms",
        "--interval",
        "500ms",
    ];
    let shown = under_pty(&args);
    let lines = progress_lines(&shown);
    // One line per finished interval: at most the run's 5 (the last may fall after the end); a
    // host that stalls the printer may show fewer by the end, never none.
    assert!((1..=5).contains(&lines.len()), "{shown}");
    assert!(
        lines[0].contains("req/s") && lines[0].contains("p50") && lines[0].contains("p99"),
        "{shown}"
    );
    assert!(lines.iter().all(|l| l.contains("errors 0")), "{shown}");

    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let shown = under_pty(&quiet);
    assert!(progress_lines(&shown).is_empty(), "--quiet: {shown}");

    // stderr a pipe: nothing but the result.
    let run = run_load(&args, LIMIT);
    assert_eq!(run.code, 0, "{}", run.describe());
    assert!(progress_lines(&run.stderr).is_empty(), "{}", run.describe());
}

#[test]
fn completion_scripts_for_each_shell() {
    let bash = run_load(&["completions", "bash"], LIMIT);
    assert_eq!(bash.code, 0, "{}", bash.describe());
    assert!(bash.stdout.contains("--threshold"), "{}", bash.describe());
    let file = std::env::temp_dir().join(format!(
        "netarena-load-completion-{}.bash",
        std::process::id()
    ));
    std::fs::write(&file, &bash.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).ok();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    for shell in ["zsh", "fish"] {
        let run = run_load(&["completions", shell], LIMIT);
        assert_eq!(run.code, 0, "{}", run.describe());
        assert!(run.stdout.contains("netarena-load"), "{}", run.describe());
    }
    let run = run_load(&["completions", "tcsh"], LIMIT);
    assert_eq!(run.code, EXIT_USAGE, "{}", run.describe());
}
