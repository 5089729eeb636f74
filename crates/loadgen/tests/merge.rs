//! `netarena-load merge`: real runs against a real server on loopback, their documents merged by
//! the real binary. The merged document must be what one document of the whole load says: counts
//! summed, percentiles those of one histogram holding every part's values, intervals merged entry
//! by entry; and input that cannot be merged is exit 2 naming the file, nothing on stdout.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use hdrhistogram::Histogram;
use netarena_load::result::document::decode_histogram;
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(30);

/// A folder of this test's own for the documents it writes.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netarena-merge-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn write(dir: &std::path::Path, name: &str, doc: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, doc.to_string()).expect("the document is written");
    path.display().to_string()
}

/// `netarena-load merge ARGS...`, finished.
fn merge(args: &[&str]) -> LoadRun {
    run_load(&[&["merge"][..], args].concat(), LIMIT)
}

/// The merged document (exit 0), checked against the schema: every reader of a run's reads it.
fn merged(args: &[&str]) -> Value {
    let out = merge(args);
    let doc = out.json();
    validate_against_schema(&doc);
    doc
}

fn hist(data: &Value) -> Histogram<u64> {
    decode_histogram(data.as_str().expect("histogram data is a string")).expect("it decodes")
}

/// The histogram holding the values of every one of `datas`.
fn added(datas: &[&Value]) -> Histogram<u64> {
    let mut h = hist(datas[0]);
    for d in &datas[1..] {
        h.add(hist(d)).expect("same range");
    }
    h
}

fn entries(d: &Value) -> Vec<Value> {
    d["intervals"]["entries"]
        .as_array()
        .expect("entries")
        .clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a count"))
}

/// A server that answers one request in seven with a 503: each run has `status` errors to sum.
fn server_with_errors() -> TestServer {
    http_server(loopback_listener(), None, |n, _, s, stats| {
        if n % 7 == 3 {
            write_response(s, 503, "Service Unavailable", b"busy")?;
            Ok(After::KeepAlive)
        } else {
            write_hello(s, stats)
        }
    })
}

fn closed_loop_run(url: &str, connections: &str) -> Value {
    let args = [
        "http",
        url,
        "-c",
        connections,
        "-d",
        "600ms",
        "--interval",
        "200ms",
        "--expect-status",
        "200",
        "--threshold",
        "p99<=10s",
    ];
    run_json(&args, LIMIT).doc
}

#[test]
fn two_runs_merge_into_one_document_of_the_whole_load() {
    let server = server_with_errors();
    let url = server.url("/hello");
    let (a, b) = (closed_loop_run(&url, "2"), closed_loop_run(&url, "3"));
    let dir = scratch("two");
    let (fa, fb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let m = merged(&["--label", "g1", "--label", "g2", &fa, &fb]);
    let ctx = format!("a: {a}\nb: {b}\nmerged: {m}");

    for key in [
        "requests",
        "responses",
        "bytes_sent",
        "bytes_received",
        "connections_opened",
        "errors",
        "unfinished",
    ] {
        assert_eq!(
            u(&m["totals"][key]),
            u(&a["totals"][key]) + u(&b["totals"][key]),
            "totals.{key}\n{ctx}"
        );
    }
    for key in ["requests_per_s", "bytes_per_s"] {
        let sum = a["throughput"][key].as_f64().unwrap() + b["throughput"][key].as_f64().unwrap();
        assert_eq!(
            m["throughput"][key].as_f64(),
            Some(sum),
            "throughput.{key}\n{ctx}"
        );
    }
    assert_eq!(m["config"]["connections"], 5, "{ctx}");
    assert_eq!(m["generator"]["threads"], 2, "{ctx}");

    // The percentiles are those of one histogram holding both runs' values, not averages.
    let whole = added(&[
        &a["latency"]["histogram"]["data"],
        &b["latency"]["histogram"]["data"],
    ]);
    let l = &m["latency"];
    assert_eq!(
        u(&l["count"]),
        u(&a["latency"]["count"]) + u(&b["latency"]["count"]),
        "{ctx}"
    );
    assert_eq!(u(&l["count"]), whole.len(), "{ctx}");
    assert_eq!(u(&l["p50_us"]), whole.value_at_quantile(0.50), "{ctx}");
    assert_eq!(u(&l["p99_us"]), whole.value_at_quantile(0.99), "{ctx}");
    assert_eq!(u(&l["max_us"]), whole.max(), "{ctx}");
    assert_eq!(hist(&l["histogram"]["data"]).len(), whole.len(), "{ctx}");
    assert_eq!(
        u(&l["censored"]),
        u(&a["latency"]["censored"]) + u(&b["latency"]["censored"]),
        "{ctx}"
    );

    // Errors summed by class and by status code; the server made some in both runs.
    assert!(
        u(&a["errors"]["by_class"]["status"]) > 0 && u(&b["errors"]["by_class"]["status"]) > 0,
        "{ctx}"
    );
    for class in ERROR_CLASSES {
        let sum = u(&a["errors"]["by_class"][class]) + u(&b["errors"]["by_class"][class]);
        assert_eq!(
            u(&m["errors"]["by_class"][class]),
            sum,
            "errors.by_class.{class}\n{ctx}"
        );
    }
    let codes = |d: &Value| d["errors"]["status_codes"]["503"].as_u64().unwrap_or(0);
    assert_eq!(codes(&m), codes(&a) + codes(&b), "{ctx}");
    assert_eq!(
        u(&m["errors"]["total"]),
        u(&a["errors"]["total"]) + u(&b["errors"]["total"]),
        "{ctx}"
    );

    // Interval i of the merged document holds interval i of both runs.
    let (ea, eb, em) = (entries(&a), entries(&b), entries(&m));
    assert_eq!(em.len(), ea.len().max(eb.len()), "{ctx}");
    assert!(em.len() >= 2, "{ctx}");
    for (i, e) in em.iter().enumerate() {
        let parts: Vec<&Value> = [ea.get(i), eb.get(i)]
            .into_iter()
            .flatten()
            .map(|p| &p["data"])
            .collect();
        let h = added(&parts);
        let counts: u64 = [ea.get(i), eb.get(i)]
            .into_iter()
            .flatten()
            .map(|p| u(&p["count"]))
            .sum();
        assert_eq!(u(&e["count"]), counts, "interval {i}\n{ctx}");
        assert_eq!(u(&e["count"]), h.len(), "interval {i}\n{ctx}");
        if !h.is_empty() {
            assert_eq!(
                u(&e["p99_us"]),
                h.value_at_quantile(0.99),
                "interval {i}\n{ctx}"
            );
            assert_eq!(u(&e["max_us"]), h.max(), "interval {i}\n{ctx}");
        }
        assert_eq!(e["t_s"], ea[i]["t_s"], "interval {i}\n{ctx}");
    }

    // The timeline summed second by second.
    for (i, s) in m["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .enumerate()
    {
        let part = |d: &Value| d["timeline"].get(i).map_or(0, |s| u(&s["requests"]));
        assert_eq!(u(&s["requests"]), part(&a) + part(&b), "second {i}\n{ctx}");
    }

    // The thresholds are judged again, on the whole: its p99, not one part's.
    assert_eq!(m["thresholds"][0]["expr"], "p99<=10s", "{ctx}");
    assert_eq!(
        m["thresholds"][0]["measured"].as_f64(),
        Some(whole.value_at_quantile(0.99) as f64),
        "{ctx}"
    );
    assert_eq!(m["thresholds"][0]["pass"], true, "{ctx}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn one_document_merged_alone_is_itself() {
    let server = server_with_errors();
    let a = closed_loop_run(&server.url("/"), "2");
    let dir = scratch("one");
    let m = merged(&[&write(&dir, "a.json", &a)]);
    let ctx = format!("a: {a}\nmerged: {m}");
    for block in [
        "totals",
        "throughput",
        "errors",
        "config",
        "no_answer",
        "timeline",
        "thresholds",
        "started_at",
        "ended_at",
        "duration_s",
        "mode",
        "generator_saturated",
        "interrupted",
    ] {
        assert_eq!(m[block], a[block], "{block}\n{ctx}");
    }
    // Every figure of the latency block, from the same histogram.
    let figures = |d: &Value| {
        let mut l = d["latency"].clone();
        l["histogram"]["data"] = Value::Null;
        l
    };
    assert_eq!(figures(&m), figures(&a), "{ctx}");
    assert_eq!(
        hist(&m["latency"]["histogram"]["data"]),
        hist(&a["latency"]["histogram"]["data"]),
        "{ctx}"
    );
    assert_eq!(entries(&m).len(), entries(&a).len(), "{ctx}");
    for (e, ae) in entries(&m).iter().zip(&entries(&a)) {
        for key in ["t_s", "count", "p50_us", "p99_us", "p99_9_us", "max_us"] {
            assert_eq!(e[key], ae[key], "interval {key}\n{ctx}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn open_loop_reasons_are_named_by_their_part_and_rates_summed() {
    let server = hello_server();
    let url = server.url("/");
    let run = run_json(
        &["http", &url, "--rate", "200", "-c", "2", "-d", "500ms"],
        LIMIT,
    )
    .doc;
    // The reasons are crafted on a real document: whether a machine meets a rate is not a mechanism.
    let mut a = run.clone();
    a["open_loop"]["rate_not_met"] = json!(true);
    a["open_loop"]["rate_not_met_reasons"] =
        json!(["achieved 10.0/s of the asked 200/s (below 90%)"]);
    let mut b = run.clone();
    b["open_loop"]["rate_not_met"] = json!(false);
    b["open_loop"]["rate_not_met_reasons"] = json!([]);
    let dir = scratch("open");
    let (fa, fb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let m = merged(&["--label", "g1", "--label", "g2", &fa, &fb, &fa]);
    let ol = &m["open_loop"];
    let ctx = format!("run: {run}\nmerged: {m}");
    assert_eq!(ol["rate_not_met"], true, "{ctx}");
    let reason = "achieved 10.0/s of the asked 200/s (below 90%)";
    // The third file has no label: its path names it.
    assert_eq!(
        ol["rate_not_met_reasons"],
        json!([format!("g1: {reason}"), format!("{fa}: {reason}")]),
        "{ctx}"
    );
    let asked = run["open_loop"]["asked_rate_per_s"].as_f64().unwrap();
    assert_eq!(ol["asked_rate_per_s"].as_f64(), Some(3.0 * asked), "{ctx}");
    assert_eq!(m["config"]["rate"].as_f64(), Some(3.0 * asked), "{ctx}");
    assert_eq!(
        u(&ol["intended"]),
        3 * u(&run["open_loop"]["intended"]),
        "{ctx}"
    );
    assert_eq!(
        u(&ol["latency_uncorrected"]["count"]),
        3 * u(&run["open_loop"]["latency_uncorrected"]["count"]),
        "{ctx}"
    );
    assert_eq!(
        u(&ol["schedule_lag"]["count"]),
        3 * u(&run["open_loop"]["schedule_lag"]["count"]),
        "{ctx}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sweeps_merge_step_by_step() {
    let server = hello_server();
    let url = server.url("/");
    let (a, b) = (
        run_json(&["http", &url, "-c", "1", "-d", "300ms"], LIMIT).doc,
        run_json(&["http", &url, "-c", "2", "-d", "300ms"], LIMIT).doc,
    );
    // Sweeps of two steps each, crafted from real documents: step i of every part is merged.
    let mut sa = a.clone();
    sa["steps"] = json!([a, b]);
    let mut sb = b.clone();
    sb["steps"] = json!([b, a]);
    let dir = scratch("steps");
    let m = merged(&[&write(&dir, "a.json", &sa), &write(&dir, "b.json", &sb)]);
    let both = u(&a["totals"]["requests"]) + u(&b["totals"]["requests"]);
    for i in 0..2 {
        assert_eq!(
            u(&m["steps"][i]["totals"]["requests"]),
            both,
            "step {i}\n{m}"
        );
        assert_eq!(m["steps"][i]["config"]["connections"], 3, "step {i}\n{m}");
    }
    // A part with a sweep of another length has no step to merge with: refused.
    let mut short = sb.clone();
    short["steps"] = json!([b]);
    let fs = write(&dir, "short.json", &short);
    let out = merge(&[&write(&dir, "a.json", &sa), &fs]);
    assert_refused(&out, &fs, "1 steps");
    let _ = std::fs::remove_dir_all(dir);
}

fn assert_refused(out: &LoadRun, file: &str, what: &str) {
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(out.stdout.is_empty(), "{}", out.describe());
    assert!(
        out.stderr.contains(file),
        "the message does not name {file}\n{}",
        out.describe()
    );
    assert!(
        out.stderr.contains(what),
        "the message does not say {what:?}\n{}",
        out.describe()
    );
}

#[test]
fn input_that_cannot_be_merged_is_exit_2_naming_the_file() {
    let server = hello_server();
    let doc = run_json(&["http", &server.url("/"), "-c", "1", "-d", "200ms"], LIMIT).doc;
    let dir = scratch("bad");
    let good = write(&dir, "good.json", &doc);

    let missing = dir.join("missing.json").display().to_string();
    assert_refused(&merge(&[&good, &missing]), &missing, "cannot read");

    let not_json = dir.join("not.json");
    std::fs::write(&not_json, "READY 123\n").unwrap();
    let not_json = not_json.display().to_string();
    assert_refused(&merge(&[&good, &not_json]), &not_json, "not JSON");

    let other = write(&dir, "other.json", &json!({"name": "x", "rows": [1, 2]}));
    assert_refused(
        &merge(&[&other]),
        &other,
        "not a netarena-load result document",
    );

    let mut incomplete = doc.clone();
    incomplete.as_object_mut().unwrap().remove("totals");
    let incomplete = write(&dir, "incomplete.json", &incomplete);
    assert_refused(&merge(&[&good, &incomplete]), &incomplete, "totals");

    let mut newer = doc.clone();
    newer["schema_version"] = json!(2);
    let newer = write(&dir, "newer.json", &newer);
    assert_refused(&merge(&[&good, &newer]), &newer, "schema_version 2");

    let mut echo = doc.clone();
    echo["mode"] = json!("echo");
    let echo = write(&dir, "echo.json", &echo);
    assert_refused(&merge(&[&good, &echo]), &echo, "mode echo");

    let mut coarse = doc.clone();
    coarse["latency"]["histogram"]["significant_digits"] = json!(2);
    let coarse = write(&dir, "coarse.json", &coarse);
    assert_refused(&merge(&[&good, &coarse]), &coarse, "histogram settings");

    let mut wide = doc.clone();
    wide["latency"]["histogram"]["highest_trackable"] = json!(60_000_000u64);
    let wide = write(&dir, "wide.json", &wide);
    assert_refused(&merge(&[&good, &wide]), &wide, "histogram settings");

    // Parts of a --find-max search each searched a rate of their own.
    let mut search = doc.clone();
    search["find_max"] = json!({
        "method": "m", "slo": "p99<=50ms", "slo_percentile": 99.0, "slo_max_latency_us": 50000,
        "max_errors_fraction": 0.001, "start_rate_per_s": 100.0, "growth_factor": 2.0,
        "resolution_fraction": 0.05, "limit_rate_per_s": 1e6, "found_rate_per_s": null,
        "verdicts": [], "stopped_because": "x"
    });
    let search = write(&dir, "search.json", &search);
    assert_refused(&merge(&[&search, &search]), &search, "--find-max");
    // One search alone is that search.
    assert_eq!(merged(&[&search])["find_max"]["slo"], "p99<=50ms");

    // More labels than files.
    let out = merge(&["--label", "a", "--label", "b", &good]);
    assert_eq!(out.code, 2, "{}", out.describe());
    assert!(
        out.stdout.is_empty() && out.stderr.contains("--label"),
        "{}",
        out.describe()
    );
    let _ = std::fs::remove_dir_all(dir);
}
