//! How a run is controlled and judged from outside, on the real binary against real loopback
//! servers: `--threshold` verdicts and exit code 99, the first SIGINT ending the measured phase
//! with a result (exit 105), a second one exiting at once, progress lines on a terminal only, and
//! shell completions.

mod loadgen_support;

use std::time::Duration;

use loadgen_support::{free_port, http_server, run_load, validate_against_schema};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);
/// docs/load-generator.md, "Exit codes".
const EXIT_USAGE: i32 = 2;
const EXIT_THRESHOLD_FAILED: i32 = 99;

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
    let server = http_server(200, b"Hello, World!");
    let url = format!("http://{}/hello", server.addr);
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
    assert_eq!(run.code, 0, "{}", run.describe());
    let doc = run.stdout_json();
    validate_against_schema(&doc);
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
    assert_eq!(run.code, EXIT_THRESHOLD_FAILED, "{}", run.describe());
    let doc = run.stdout_json();
    validate_against_schema(&doc);
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
    let server = http_server(200, b"Hello, World!");
    let url = format!("http://{}/hello", server.addr);
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
    assert_eq!(
        server.count.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing may be sent"
    );
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
    assert_eq!(run.code, EXIT_THRESHOLD_FAILED, "{}", run.describe());
    let doc = run.stdout_json();
    validate_against_schema(&doc);
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
