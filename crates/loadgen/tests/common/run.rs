//! Running the real `netarena-load` binary: every run has a hard time limit (a hung generator is
//! killed and fails the test), both pipes are drained on their own threads (a chatty child cannot
//! block on a full pipe), and `NETARENA_LOAD_TEST_IO` picks the engine of the `http` and `echo`
//! runs.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Result;

/// A finished run: what was run and everything it printed.
pub struct LoadRun {
    /// The arguments as run, `io_args` applied.
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

impl LoadRun {
    /// Context for assertion messages: what was run and everything it printed.
    pub fn describe(&self) -> String {
        format!(
            "netarena-load {}\nexit code {} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.code,
            self.wall,
            self.stdout,
            self.stderr
        )
    }

    /// The JSON document on stdout, whatever the exit code (a failed threshold or an interrupted
    /// run still prints its result).
    pub fn stdout_json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not one JSON document ({e})\n{}", self.describe())
        })
    }

    /// The result document as printed (exit 0 required), without further checks.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.code,
            0,
            "expected exit 0 with a JSON result\n{}",
            self.describe()
        );
        self.stdout_json()
    }

    /// The engine this run asked for: its `--io` (given by the test or by
    /// NETARENA_LOAD_TEST_IO), or `auto` without one.
    pub fn io_asked(&self) -> &str {
        self.args
            .iter()
            .position(|a| a == "--io")
            .map_or("auto", |k| self.args[k + 1].as_str())
    }

    /// The result document, after checking the invariants every result must satisfy.
    pub fn result(&self) -> Result {
        let r = Result {
            doc: self.json(),
            context: self.describe(),
        };
        r.check_invariants();
        // The engine asked for (by the test or by NETARENA_LOAD_TEST_IO) is the engine that ran;
        // without --io, auto, which names the engine it chose and why.
        if matches!(r.get("/mode").as_str(), Some("http" | "echo")) {
            let asked = self.io_asked();
            assert_eq!(
                r.get("/config/io_requested").as_str(),
                Some(asked),
                "{}",
                r.context
            );
            if asked != "auto" {
                assert_eq!(
                    r.get("/config/io_backend").as_str(),
                    Some(asked),
                    "the run used another engine than asked\n{}",
                    r.context
                );
            }
            assert!(
                !r.get("/config/io_reason")
                    .as_str()
                    .unwrap_or_default()
                    .is_empty(),
                "{}",
                r.context
            );
        }
        r
    }
}

/// `NETARENA_LOAD_TEST_IO=uring cargo test` runs every `http` scenario (closed and open loop) and
/// every `echo` scenario with `--io uring`, so the same servers and assertions check both engines;
/// words after the engine are passed on too (`NETARENA_LOAD_TEST_IO="uring --coalesce-us 50"`), to
/// HTTP closed-loop runs only: coalescing is theirs (the open loop and echo refuse it).
pub fn io_args(args: &[&str]) -> Vec<String> {
    let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Ok(io) = std::env::var("NETARENA_LOAD_TEST_IO") {
        let open_loop = args
            .iter()
            .any(|a| matches!(*a, "--rate" | "--conn-rate" | "--steps" | "--find-max"));
        let mut words = io.split_whitespace().map(str::to_string);
        let explicit = args.contains(&"--io") || args.contains(&"--coalesce-us");
        match args.first() {
            Some(&"http") if !explicit => {
                full.push("--io".to_string());
                full.extend(words.next());
                if !open_loop {
                    full.extend(words);
                }
            }
            Some(&"echo") if !explicit => {
                full.push("--io".to_string());
                full.extend(words.next());
            }
            _ => {}
        }
    }
    full
}

/// A test found that this machine lacks a kernel feature it checks (io_uring, its min-wait). `make
/// test` needs both (README, Requirements), so under CI (the variable `CI` set, as `.ci/run` does)
/// that fails the test; elsewhere the test prints what it did not check and returns, and the line
/// shows with `cargo test -- --nocapture` or in a failing run's output.
pub fn feature_missing(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what}: under CI every test must run (make test needs io_uring and Linux 6.12+)");
    }
    eprintln!("SKIPPED: {what}");
}

/// Whether this machine can run the io_uring engine, as a run finds out: `netarena-load check`
/// probes it the same way (once per test binary). Where it cannot, the refusal must name the cause
/// and the way out, and the calling test reports what it did not check (`feature_missing`: a
/// failure under CI).
pub fn uring_usable_here() -> bool {
    static PROBE: std::sync::OnceLock<std::result::Result<(), String>> = std::sync::OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        let check = run_load(
            &[
                "check",
                "--skip-limits",
                "http",
                "http://127.0.0.1:9/",
                "--io",
                "uring",
            ],
            Duration::from_secs(20),
        );
        if check.code == 0 {
            return Ok(());
        }
        assert_eq!(check.code, 2, "{}", check.describe());
        assert!(
            check.stderr.contains("io_uring cannot be used here")
                && check.stderr.contains("--io epoll"),
            "the refusal must name the cause and the way out\n{}",
            check.describe()
        );
        Err(check.stderr.trim().to_string())
    });
    match probe {
        Ok(()) => true,
        Err(why) => {
            feature_missing(&format!("io_uring is not usable here: {why}"));
            false
        }
    }
}

/// A scenario's tests on both engines: for each `fn scenario(io: &str)` given (`io` as `--io` takes
/// it), the tests `scenario::epoll` and `scenario::uring` (where io_uring is usable here, see
/// `uring_usable_here`), so a scenario is written once, `cargo test scenario` runs it on both, and
/// a failure names its engine.
#[macro_export]
macro_rules! on_both_engines {
    ($($scenario:ident),+ $(,)?) => {$(
        mod $scenario {
            #[test]
            fn epoll() {
                super::$scenario("epoll");
            }

            #[test]
            fn uring() {
                if $crate::common::uring_usable_here() {
                    super::$scenario("uring");
                }
            }
        }
    )+};
}

/// Waits for `cond` to hold, looking every 10 ms; fails the test naming `what` if it does not within
/// `limit`. For waiting on what a process did (a request served, a line printed) instead of
/// sleeping for a time a slower machine might need more of: `limit` only bounds a hang.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < limit,
            "waited {limit:?} for {what}, in vain"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the real binary; kills it and fails the test if it is still running after `limit`.
pub fn run_load(args: &[&str], limit: Duration) -> LoadRun {
    spawn_load(args).finish(limit)
}

/// The real binary, started and running, with both pipes drained on their own threads so a chatty
/// child cannot block on a full pipe.
pub struct RunningLoad {
    child: std::process::Child,
    args: Vec<String>,
    started: Instant,
    /// The pipe readers: taken by `finish` (None after it).
    out_reader: Option<thread::JoinHandle<String>>,
    /// Everything printed on stderr so far, appended as it arrives (`wait_for_stderr` looks in it).
    stderr: Arc<Mutex<Vec<u8>>>,
    err_reader: Option<thread::JoinHandle<()>>,
    /// Reaped by `finish`: a run dropped unfinished (a test failed while it ran) is killed.
    reaped: bool,
}

/// Starts the real binary (with `io_args`) and returns at once.
pub fn spawn_load(args: &[&str]) -> RunningLoad {
    spawn_load_with(args, |_| {})
}

/// `spawn_load`, with `setup` given the command just before the start: for what the arguments
/// cannot say (a resource limit set in the child, say).
pub fn spawn_load_with(args: &[&str], setup: impl FnOnce(&mut Command)) -> RunningLoad {
    let bin = env!("CARGO_BIN_EXE_netarena-load");
    let args = io_args(args);
    let mut command = Command::new(bin);
    command
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut command);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let err_sink = stderr.clone();
    let err_reader = thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = err_pipe.read(&mut buf) {
            err_sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    RunningLoad {
        child,
        args,
        started,
        out_reader: Some(out_reader),
        stderr,
        err_reader: Some(err_reader),
        reaped: false,
    }
}

impl RunningLoad {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` (e.g. libc::SIGINT) to the generator, and only to it.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill() on our own child's pid, which we have not waited for yet.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill({sig})");
    }

    fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until the generator has printed `needle` on stderr; fails the test if it has not after
    /// `limit` (or exits first: then it never will).
    pub fn wait_for_stderr(&mut self, needle: &str, limit: Duration) {
        wait_until(&format!("{needle:?} on stderr"), limit, || {
            if self.stderr_so_far().contains(needle) {
                return true;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "netarena-load {} exited ({status}) without printing {needle:?}\n--- stderr ---\n{}",
                    self.args.join(" "),
                    self.stderr_so_far()
                );
            }
            false
        });
    }

    /// Waits for the exit; kills it and fails the test if it is still running `limit` after its start.
    pub fn finish(mut self, limit: Duration) -> LoadRun {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waiting for netarena-load") {
                break status;
            }
            if self.started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.reaped = true;
                let (stdout, stderr) = self.output();
                panic!(
                    "netarena-load {} did not finish within {limit:?}; killed\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                    self.args.join(" ")
                );
            }
            thread::sleep(Duration::from_millis(10));
        };
        self.reaped = true;
        let wall = self.started.elapsed();
        let (stdout, stderr) = self.output();
        LoadRun {
            args: std::mem::take(&mut self.args),
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
            wall,
        }
    }

    /// Everything the exited process printed: (stdout, stderr), once its pipes are drained.
    fn output(&mut self) -> (String, String) {
        let stdout = self
            .out_reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default();
        if let Some(r) = self.err_reader.take() {
            let _ = r.join();
        }
        (stdout, self.stderr_so_far())
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs and returns the checked result document (exit 0 required).
pub fn run_json(args: &[&str], limit: Duration) -> Result {
    let mut full: Vec<&str> = args.to_vec();
    if !full.contains(&"--json") {
        full.push("--json");
    }
    run_load(&full, limit).result()
}
