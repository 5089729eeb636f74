//! `--urls` in the closed loop (siege's file list): every connection takes the next URL for each
//! request, keep-alive, and each response is held to the size and digest its own line gives. Real
//! binary, real loopback server serving files of different sizes by path. Run once per engine by
//! the Makefile (NETARENA_LOAD_TEST_IO, see `common::io_args`): no `--rate` here, so each run uses
//! the engine under test. Runs are bounded by `-n`, never by time, so nothing depends on speed.

mod common;

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    http_server, loopback_listener, run_json, run_load, sha256_hex, validate_against_schema,
    write_response, After, TestServer,
};

const LIMIT: Duration = Duration::from_secs(60);

/// Five files from empty-ish to larger than any receive buffer, so a response spans many reads.
const SIZES: [usize; 5] = [1, 100, 5_000, 70_000, 300_000];

fn file(i: usize) -> Vec<u8> {
    (0..SIZES[i]).map(|k| (k * 31 + i * 7) as u8).collect()
}

/// What the server does wrong, if anything.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// `/f/2` is one byte short (honestly framed: a wrong file, not a broken response).
    ShortFile2,
    /// `/f/3` has the right size and wrong bytes (only its sha256 tells).
    WrongBytesFile3,
}

/// Serves `/f/<i>` with `file(i)`; anything else is a 404. Records every path in arrival order.
fn file_server(fault: Fault) -> (TestServer, Arc<Mutex<Vec<String>>>) {
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    let files: Vec<Vec<u8>> = (0..SIZES.len()).map(file).collect();
    let s = http_server(loopback_listener(), None, move |_, req, stream, _| {
        seen.lock().unwrap().push(req.target.clone());
        let Some(i) = req
            .target
            .strip_prefix("/f/")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|i| *i < files.len())
        else {
            write_response(stream, 404, "Not Found", b"no such file")?;
            return Ok(After::KeepAlive);
        };
        let mut body = files[i].clone();
        match fault {
            Fault::ShortFile2 if i == 2 => {
                body.pop();
            }
            Fault::WrongBytesFile3 if i == 3 => body[SIZES[3] / 2] ^= 0xff,
            _ => {}
        }
        write_response(stream, 200, "OK", &body)?;
        Ok::<After, io::Error>(After::KeepAlive)
    });
    (s, paths)
}

/// A URL list of the five files, each line with its size and (if `digests`) its sha256.
fn url_list(name: &str, digests: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("netarena-url-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from("# the five test files, with sizes\n");
    for (i, size) in SIZES.iter().enumerate() {
        text += &format!("/f/{i} {size}");
        if digests {
            text += &format!(" sha256={}", sha256_hex(&file(i)));
        }
        text += "\n";
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn counts(paths: &[String]) -> HashMap<String, usize> {
    let mut c = HashMap::new();
    for p in paths {
        *c.entry(p.clone()).or_insert(0) += 1;
    }
    c
}

#[test]
fn round_robin_fetches_the_list_in_order_and_judges_each_file_by_its_own_size() {
    let (s, paths) = file_server(Fault::None);
    let list = url_list("sizes.txt", true);
    // One connection, one thread: the order the server sees is the order of the picks.
    let r = run_json(
        &[
            "http",
            &s.url("/"),
            "-c",
            "1",
            "-t",
            "1",
            "-n",
            "20",
            "--urls",
            list.to_str().unwrap(),
            "--url-order",
            "round-robin",
        ],
        LIMIT,
    );
    validate_against_schema(&r.doc);
    assert_eq!(r.u64("/totals/responses"), 20, "{}", r.context);
    r.assert_only_errors(&[]);
    assert_eq!(r.get("/config/url_order").as_str(), Some("round-robin"));
    assert_eq!(r.u64("/config/url_count"), 5);
    let want: Vec<String> = (0..20).map(|k| format!("/f/{}", k % 5)).collect();
    assert_eq!(*paths.lock().unwrap(), want);
    // Keep-alive: the whole list went over the one connection.
    assert_eq!(s.stats.connections(), 1, "{}", r.context);
    let body_bytes: usize = SIZES.iter().sum::<usize>() * 4;
    assert!(
        r.u64("/totals/bytes_received") as usize > body_bytes,
        "{}",
        r.context
    );
}

#[test]
fn random_picks_follow_the_seed_cover_every_file_and_are_all_verified() {
    let (s, paths) = file_server(Fault::None);
    let list = url_list("random.txt", true);
    // Several connections on two threads, pipelined: each response of a batch is still judged by
    // the URL of its own request.
    let r = run_json(
        &[
            "http",
            &s.url("/"),
            "-c",
            "4",
            "-t",
            "2",
            "--pipeline",
            "3",
            "-n",
            "300",
            "--urls",
            list.to_str().unwrap(),
            "--seed",
            "7",
        ],
        LIMIT,
    );
    validate_against_schema(&r.doc);
    assert_eq!(r.u64("/totals/responses"), 300, "{}", r.context);
    r.assert_only_errors(&[]);
    assert_eq!(r.u64("/config/seed"), 7, "the seed is in the result");
    assert_eq!(r.get("/config/url_order").as_str(), Some("random"));
    let seen = counts(&paths.lock().unwrap());
    assert!(
        (0..5).all(|i| seen.contains_key(&format!("/f/{i}"))),
        "every file is fetched: {seen:?}"
    );
    assert!(seen.keys().all(|p| p.starts_with("/f/")), "{seen:?}");
}

/// A wrong file is a `verification_mismatch` of that URL and only that URL, with or without
/// pipelining; the connection is kept (the response itself was well framed).
#[test]
fn a_wrong_file_is_a_verification_mismatch_of_its_own_url() {
    for (fault, wrong, digests) in [
        (Fault::ShortFile2, "/f/2", false),
        (Fault::WrongBytesFile3, "/f/3", true),
    ] {
        for pipeline in ["1", "4"] {
            let (s, _) = file_server(fault);
            let list = url_list(&format!("wrong-{pipeline}-{digests}.txt"), digests);
            let r = run_json(
                &[
                    "http",
                    &s.url("/"),
                    "-c",
                    "1",
                    "-t",
                    "1",
                    "--pipeline",
                    pipeline,
                    "-n",
                    "20",
                    "--urls",
                    list.to_str().unwrap(),
                    "--url-order",
                    "round-robin",
                ],
                LIMIT,
            );
            validate_against_schema(&r.doc);
            assert_eq!(r.u64("/totals/responses"), 20, "{}", r.context);
            // Four laps of five files, one of them wrong in each lap.
            assert_eq!(r.class("verification_mismatch"), 4, "{}", r.context);
            r.assert_only_errors(&["verification_mismatch"]);
            let samples = r.get("/errors").to_string();
            assert!(samples.contains(wrong), "{samples}");
            for i in (0..5).filter(|i| format!("/f/{i}") != wrong) {
                assert!(!samples.contains(&format!("/f/{i}")), "{samples}");
            }
            assert_eq!(s.stats.connections(), 1, "{}", r.context);
        }
    }
}

/// What makes no sense with a list is refused before anything is sent, exit 2.
#[test]
fn closed_loop_url_list_refusals_exit_2_and_send_nothing() {
    let (s, _) = file_server(Fault::None);
    let list = url_list("refusals.txt", false);
    let list_s = list.to_str().unwrap();
    let target = s.url("/");
    let cases: [(Vec<&str>, &str); 4] = [
        // It would learn the positional URL's body and expect it from every file.
        (vec!["--urls", list_s, "--verify-learn"], "--verify-learn"),
        // One size for every URL beside sizes per URL: one of the two would be ignored.
        (
            vec!["--urls", list_s, "--expect-body-size", "100"],
            "keep one of the two",
        ),
        // Without a list nothing in the closed loop is random.
        (vec!["--seed", "3"], "--urls FILE"),
        (vec!["--urls", list_s, "--hlog", list_s], "same file"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["http", target.as_str(), "-n", "5"];
        args.extend(extra);
        let run = run_load(&args, LIMIT);
        assert_eq!(run.code, 2, "{}", run.describe());
        assert!(run.stdout.is_empty(), "{}", run.describe());
        assert!(run.stderr.contains(says), "wanted {says:?}: {}", run.stderr);
    }
    assert_eq!(
        s.stats.requests.load(Ordering::SeqCst),
        0,
        "nothing is sent"
    );
}

/// Without `--urls` the run's request list has one entry, the positional URL, and both loops judge by
/// it: `--verify-learn` must put the learned body there, or the open loop would judge by the status
/// alone. The server answers the learning request right, then every other request with the right
/// size and a wrong byte.
#[test]
fn the_learned_expectation_judges_every_response_in_both_loops() {
    let s = http_server(loopback_listener(), None, |n, _, stream, _| {
        let body: &[u8] = if n % 2 == 1 {
            b"Hello, World?"
        } else {
            b"Hello, World!"
        };
        write_response(stream, 200, "OK", body)?;
        Ok(After::KeepAlive)
    });
    let target = s.url("/hello");
    let closed = run_json(
        &["http", &target, "-c", "1", "-n", "20", "--verify-learn"],
        LIMIT,
    );
    // Requests 1 to 20 after the learning request 0: the odd ten are wrong.
    assert_eq!(
        closed.class("verification_mismatch"),
        10,
        "{}",
        closed.context
    );
    closed.assert_only_errors(&["verification_mismatch"]);
    let open = run_json(
        &[
            "http",
            &target,
            "--rate",
            "200",
            "-c",
            "1",
            "-d",
            "300ms",
            "--verify-learn",
        ],
        LIMIT,
    );
    let (responses, wrong) = (
        open.u64("/totals/responses"),
        open.class("verification_mismatch"),
    );
    // One connection answers in order, so the wrong ones alternate with the right ones.
    assert!(
        responses >= 2 && wrong * 2 + 1 >= responses && wrong * 2 <= responses + 1,
        "{wrong} mismatches of {responses}\n{}",
        open.context
    );
    open.assert_only_errors(&["verification_mismatch"]);
}
