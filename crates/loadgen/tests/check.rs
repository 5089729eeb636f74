//! `netarena-load check http|echo ...`: the run's resolved configuration as JSON (exit 0), the same
//! `config` a run of those arguments records, or exit 2 with the reason; never any load.

mod common;

use std::thread;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(10);

/// "Nothing was sent": give a connect that slipped through time to be accepted, then look.
fn assert_no_connection(server: &TestServer) {
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        server.stats.connections(),
        0,
        "check connected to the target"
    );
}

#[test]
fn check_prints_the_configuration_a_run_records_and_sends_nothing() {
    let server = hello_server();
    let url = server.url("/hello");
    // An explicit engine, so the run resolves it as the check did whatever NETARENA_LOAD_TEST_IO says.
    let args = [
        "http",
        url.as_str(),
        "-c",
        "2",
        "--requests",
        "5",
        "--io",
        "epoll",
        "--threshold",
        "p99<2s",
        "--threshold",
        "errors<=1%",
    ];
    let check = run_load(&[&["check"][..], &args[..]].concat(), LIMIT);
    let doc = check.json();
    assert!(check.stderr.is_empty(), "{}", check.describe());
    assert_no_connection(&server);
    assert_eq!(doc["mode"], "http", "{doc}");
    assert_eq!(doc["config"]["connections"], 2, "{doc}");
    assert_eq!(doc["config"]["requests"], 5, "{doc}");
    assert_eq!(doc["config"]["io_backend"], "epoll", "{doc}");
    let metrics: Vec<&str> = doc["thresholds"]
        .as_array()
        .expect("thresholds is an array")
        .iter()
        .map(|t| t["metric"].as_str().expect("a metric"))
        .collect();
    assert_eq!(metrics, ["p99", "errors"], "{doc}");
    assert_eq!(doc["thresholds"][1]["expr"], "errors<=1%", "{doc}");

    // The seed is drawn per process where none is given (--seed is the open loop's and --urls').
    let without_seed = |v: &serde_json::Value| {
        let mut c = v["config"].clone();
        c.as_object_mut()
            .expect("config is an object")
            .remove("seed");
        c
    };
    let run = run_load(&[&args[..], &["--json"][..]].concat(), LIMIT).json();
    assert_eq!(
        without_seed(&doc),
        without_seed(&run),
        "check's configuration is not the one the run recorded"
    );
}

#[test]
fn check_of_an_echo_run_resolves_its_defaults() {
    let server = echo_server(EchoFault::None);
    let target = server.host_port();
    let doc = run_load(&["check", "echo", &target, "--bytes", "64k"], LIMIT).json();
    assert_eq!(doc["mode"], "echo", "{doc}");
    assert_eq!(doc["config"]["bytes_per_connection"], 65536, "{doc}");
    assert_eq!(doc["config"]["connections"], 1, "{doc}");
    assert!(doc["config"]["chunk_bytes"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["thresholds"], serde_json::json!([]), "{doc}");
    assert_no_connection(&server);
}

#[test]
fn check_refuses_what_a_run_refuses_with_exit_2_and_sends_nothing() {
    let server = hello_server();
    let url = server.url("/hello");
    let cases: [(&[&str], &str); 6] = [
        (&["--threshold", "p99<<10ms"], "--threshold"),
        (&["--threshold", "latency<1s"], "metrics"),
        (&["-c", "0"], "connections"),
        (
            &["--rate", "100", "--steps", "1:2:1", "-d", "1s"],
            "--step-duration",
        ),
        (&["--slo", "p99<=50ms"], "--slo"),
        (&["--pipeline", "2", "--close"], "--close"),
    ];
    for (extra, needle) in cases {
        let args = [&["check", "http", url.as_str()][..], extra].concat();
        let run = run_load(&args, LIMIT);
        assert_eq!(run.code, 2, "{}", run.describe());
        assert!(
            run.stderr.contains(needle),
            "the message should name `{needle}`\n{}",
            run.describe()
        );
        assert!(run.stdout.trim().is_empty(), "{}", run.describe());
    }
    // A target off this machine is refused before anything is sent, as a run's is.
    let run = run_load(&["check", "http", "http://192.0.2.1/"], LIMIT);
    assert_eq!(run.code, 2, "{}", run.describe());
    assert!(run.stderr.contains("--allow-target"), "{}", run.describe());
    assert_no_connection(&server);
}

#[test]
fn skip_limits_checks_the_rules_only() {
    let server = hello_server();
    let url = server.url("/hello");
    // More connections than one process may open (the hard limit is far below a million here and on
    // any host): refused with the limits, accepted with --skip-limits, whose rules still hold.
    let many = ["-c", "1000000"];
    let with_limits = run_load(
        &[&["check", "http", url.as_str()][..], &many].concat(),
        LIMIT,
    );
    assert_eq!(with_limits.code, 2, "{}", with_limits.describe());
    assert!(
        with_limits.stderr.contains("file descriptors"),
        "{}",
        with_limits.describe()
    );
    let rules_only = run_load(
        &[&["check", "--skip-limits", "http", url.as_str()][..], &many].concat(),
        LIMIT,
    );
    assert_eq!(rules_only.code, 0, "{}", rules_only.describe());
    assert_eq!(rules_only.json()["config"]["connections"], 1_000_000);
    let broken = run_load(
        &[
            &["check", "--skip-limits", "http", url.as_str()][..],
            &many,
            &["--pipeline", "2", "--close"],
        ]
        .concat(),
        LIMIT,
    );
    assert_eq!(broken.code, 2, "{}", broken.describe());
    assert!(broken.stderr.contains("--close"), "{}", broken.describe());
    assert_no_connection(&server);
}

/// `--version` names the cargo profile of the build, the folder cargo put this binary in
/// (target/<profile>/netarena-load): netarena tells a `make test` build from the measured release build by it.
#[test]
fn version_names_the_cargo_profile_the_binary_was_built_with() {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_netarena-load"));
    let profile = bin
        .parent()
        .and_then(|dir| dir.file_name())
        .unwrap()
        .to_str()
        .unwrap();
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let expected = format!(
        "netarena-load {} ({profile} build)\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}
