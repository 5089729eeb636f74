//! The coordinator of every load model: splits connections (and `--requests`) over threads
//! (`thread_shares`), starts them (`spawn_load_thread`), and merges what they measured
//! (`merge_threads`) into one `RunOutcome`. `run` drives the closed loop and echo with it (one
//! measured phase, optionally the echo probe beside it); `openrun` drives the open loop's phases
//! with the same pieces.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, HttpConfig, LoadKind, Mode};
use crate::error::RunError;
use crate::exchange::Exchange;
use crate::http::{Expectation, Response, ResponseParser, Step};
use crate::http2::{Event, H2Conn, H2Requests};
use crate::io::echo::{self, Echo, EchoProtocol, ProbeResult};
use crate::io::http::{HttpParams, HttpProtocol};
use crate::io::uring::closed;
use crate::io::worker::{ThreadConns, ThreadSummary, WorkerConfig, WorkerResult};
use crate::io::{epoll, on_engine, OnEngine};
use crate::load::open::OpenStats;
use crate::stats::ThreadStats;
use crate::tls::Duplex;
use crate::{progress, signals, sys};

/// What one measured phase gave, merged over the threads: the closed loop's or echo's run, or one
/// rate of the open loop (then `open` holds the schedule's figures).
pub struct RunOutcome {
    pub stats: ThreadStats,
    pub threads: Vec<ThreadSummary>,
    /// Wall-clock start of the measured phase.
    pub started_at: SystemTime,
    pub duration: Duration,
    pub warmup: Duration,
    pub probe: Option<ProbeResult>,
    pub open: Option<OpenOutcome>,
    /// A SIGINT/SIGTERM ended the phase early.
    pub interrupted: bool,
}

impl RunOutcome {
    /// The connections that could have been left waiting: the pool (the closed loop, `--rate`), or
    /// the connections started (`--conn-rate`, where each arrival is a connection).
    pub fn connections_used(&self, cfg: &Config) -> u64 {
        let conn_rate = matches!(&cfg.mode, Mode::Http(h)
            if h.open.as_ref().is_some_and(|o| matches!(o.kind, LoadKind::ConnRate { .. })));
        match &self.open {
            Some(step) if conn_rate => step.stats.started,
            _ => cfg.connections as u64,
        }
    }
}

/// One open-loop rate: the asked rate, the schedule's length (arrivals happen in it; the outcome's
/// `duration` also covers the drain), and its figures merged over the threads.
pub struct OpenOutcome {
    pub rate: f64,
    pub schedule: Duration,
    pub stats: OpenStats,
}

/// `--prepare` refuses a start time further away than this (a typo in the orchestrator, most
/// likely seconds given instead of nanoseconds or the reverse).
pub const PREPARE_MAX_WAIT: Duration = Duration::from_secs(3600);

/// Share `total` as evenly as possible: the first `total % parts` get one more.
pub fn split_evenly(total: u64, parts: usize, index: usize) -> u64 {
    total / parts as u64 + u64::from((index as u64) < total % parts as u64)
}

/// One load thread's share of the run, the same for every load model.
pub struct ThreadShare {
    pub index: usize,
    /// `--cpus`, round-robin over the threads.
    pub cpu: Option<usize>,
    /// This thread's connections are numbers first_conn .. first_conn + connections.
    pub first_conn: usize,
    pub connections: usize,
    /// Its part of `--requests`.
    pub response_quota: Option<u64>,
}

impl ThreadShare {
    /// The thread's connections and where they go, as every engine takes them.
    pub fn conns(&self, cfg: &Config) -> ThreadConns {
        ThreadConns {
            thread_index: self.index,
            cpu: self.cpu,
            target: cfg.target_addr,
            source_ips: cfg.source_ips.clone(),
            first_conn: self.first_conn,
            connections: self.connections,
            timeout: cfg.timeout,
        }
    }
}

pub fn thread_shares(cfg: &Config) -> Vec<ThreadShare> {
    let mut first_conn = 0;
    (0..cfg.threads)
        .map(|t| {
            let connections = split_evenly(cfg.connections as u64, cfg.threads, t) as usize;
            let share = ThreadShare {
                index: t,
                cpu: (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]),
                first_conn,
                connections,
                response_quota: match &cfg.mode {
                    Mode::Http(h) => h.requests.map(|n| split_evenly(n, cfg.threads, t)),
                    Mode::Echo(_) => None,
                },
            };
            first_conn += connections;
            share
        })
        .collect()
}

/// Start load thread `index` running `work`.
pub fn spawn_load_thread<T, F>(index: usize, work: F) -> Result<JoinHandle<T>, RunError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    std::thread::Builder::new()
        .name(format!("load-{index}"))
        .spawn(work)
        .map_err(|e| RunError::Failure(format!("cannot start load thread {index}: {e}")))
}

/// Load thread `t` of the closed loop or echo, started on the engine `io::on_engine` chooses: its
/// protocol is built here and moved to the thread.
struct ClosedThread<'a> {
    cfg: &'a Config,
    t: usize,
    wc: WorkerConfig,
}

impl OnEngine for ClosedThread<'_> {
    type Output = Result<JoinHandle<std::io::Result<WorkerResult>>, RunError>;

    fn epoll(self) -> Self::Output {
        let ClosedThread { cfg, t, wc } = self;
        match &cfg.mode {
            Mode::Http(h) => {
                let proto = HttpProtocol::new(Exchange::for_config(h, t));
                spawn_load_thread(t, move || epoll::run_worker(wc, proto))
            }
            Mode::Echo(e) => {
                let proto = EchoProtocol::new(e.bytes_per_connection, e.chunk_bytes);
                spawn_load_thread(t, move || epoll::run_worker(wc, proto))
            }
        }
    }

    fn uring(self) -> Self::Output {
        let ClosedThread { cfg, t, wc } = self;
        match &cfg.mode {
            Mode::Http(h) => {
                let params = HttpParams::new(h, cfg.coalesce, t);
                spawn_load_thread(t, move || closed::run_worker(wc, params))
            }
            Mode::Echo(e) => {
                let echo = Echo::new(e.bytes_per_connection, e.chunk_bytes);
                spawn_load_thread(t, move || closed::run_worker(wc, echo))
            }
        }
    }
}

/// What the threads measured, merged once: one set of counters, one summary per thread.
pub fn merge_threads(results: Vec<WorkerResult>) -> (ThreadStats, Vec<ThreadSummary>) {
    let mut threads = Vec::with_capacity(results.len());
    let mut merged: Option<ThreadStats> = None;
    for r in results {
        threads.push(r.thread);
        match merged.as_mut() {
            None => merged = Some(r.stats),
            Some(m) => m.merge(&r.stats),
        }
    }
    (merged.expect("at least one thread"), threads)
}

/// What a progress line counts per second.
pub fn progress_unit(cfg: &Config) -> &'static str {
    match cfg.mode {
        Mode::Http(_) => "req/s",
        Mode::Echo(_) => "chunks/s",
    }
}

/// The closed loop or echo: one measured phase. `start_at`: the `--prepare` start time; the
/// threads (and their connections) start then.
pub fn run(cfg: &Config, start_at: Option<Instant>) -> Result<RunOutcome, RunError> {
    if let Some(t) = start_at {
        std::thread::sleep(t.saturating_duration_since(Instant::now()));
    }
    let run_start = Instant::now();
    let wall_start = SystemTime::now();
    // Given a start time, the measured phase is timed from it, not from this thread's wake-up: a
    // generator woken late by a busy host warms up for less and measures the same window as the
    // other generators and the profilers given that start time. Woken later than the warm-up's
    // end, it measures from its wake-up (a measured phase without load would count as idle).
    let measure_start = (start_at.unwrap_or(run_start) + cfg.warmup).max(run_start);
    let warmup = measure_start - run_start;
    let measure_end = cfg.duration.map(|d| measure_start + d);
    let stop_probe = Arc::new(AtomicBool::new(false));

    let probe = match &cfg.mode {
        Mode::Echo(e) => e.probe_interval.map(|interval| {
            let (target, timeout, stop) = (cfg.target_addr, cfg.timeout, stop_probe.clone());
            std::thread::Builder::new()
                .name("probe".into())
                .spawn(move || echo::run_probe(target, interval, timeout, measure_start, stop))
        }),
        Mode::Http(_) => None,
    }
    .transpose()
    .map_err(|e| RunError::Failure(format!("cannot start the probe thread: {e}")))?;

    let progress = progress::start(measure_start, cfg.interval, progress_unit(cfg));
    let mut handles = Vec::with_capacity(cfg.threads);
    for share in thread_shares(cfg) {
        let t = share.index;
        let wc = WorkerConfig {
            conns: share.conns(cfg),
            measure_start,
            measure_end,
            response_quota: share.response_quota,
        };
        let handle = on_engine(cfg.io, ClosedThread { cfg, t, wc });
        handles.push(handle?);
    }

    let mut results: Vec<WorkerResult> = Vec::with_capacity(handles.len());
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(e)) => failure = Some(format!("load thread failed: {e}")),
            Err(_) => failure = Some("a load thread panicked".to_string()),
        }
    }
    drop(progress);
    stop_probe.store(true, Ordering::Relaxed);
    let probe = probe
        .map(|h| {
            h.join()
                .map_err(|_| RunError::Failure("the probe thread panicked".into()))
        })
        .transpose()?;
    if let Some(f) = failure {
        return Err(RunError::Failure(f));
    }

    let stopped_at = results
        .iter()
        .map(|r| r.stopped_at)
        .max()
        .unwrap_or(measure_start);
    let measured_end = measure_end.map_or(stopped_at, |end| stopped_at.min(end));
    let (stats, threads) = merge_threads(results);
    Ok(RunOutcome {
        stats,
        threads,
        started_at: wall_start + warmup,
        duration: measured_end.saturating_duration_since(measure_start),
        warmup: warmup.min(stopped_at.saturating_duration_since(run_start)),
        probe,
        open: None,
        interrupted: signals::stop_requested(),
    })
}

/// `--prepare`: announce readiness, then read the start time (Unix ns) from stdin. Every load model
/// waits here before its connections open.
pub fn wait_for_start() -> Result<Instant, RunError> {
    eprintln!("READY {}", sys::unix_now_ns());
    let mut line = String::new();
    let n = std::io::stdin().lock().read_line(&mut line).map_err(|e| {
        RunError::Failure(format!("--prepare: reading the start time from stdin: {e}"))
    })?;
    if n == 0 {
        return Err(RunError::Aborted(
            "--prepare: stdin closed before a start time arrived; nothing was measured".into(),
        ));
    }
    let text = line.trim();
    let start_ns: u128 = text.parse().map_err(|_| {
        RunError::Usage(format!(
            "--prepare: '{text}' is not a start time; write the Unix time in nanoseconds, e.g. {}",
            sys::unix_now_ns() + 1_000_000_000
        ))
    })?;
    let (now_i, now_ns) = (Instant::now(), sys::unix_now_ns());
    if start_ns <= now_ns {
        return Err(RunError::Usage(format!(
            "--prepare: the start time {start_ns} is {:.3} ms in the past (now {now_ns}); send a time in the future",
            (now_ns - start_ns) as f64 / 1e6
        )));
    }
    let wait = Duration::from_nanos((start_ns - now_ns).min(u128::from(u64::MAX)) as u64);
    if wait > PREPARE_MAX_WAIT {
        return Err(RunError::Usage(format!(
            "--prepare: the start time {start_ns} is {:.0} s away, more than {:?}; is it in nanoseconds?",
            wait.as_secs_f64(),
            PREPARE_MAX_WAIT
        )));
    }
    Ok(now_i + wait)
}

/// `--verify-learn`: one request on its own connection before the load; its status, body size and
/// digest become the expectation for every response of the run (on every thread alike). With
/// `--expect-status` the learned response must have that status.
pub fn learn_expectation(
    h: &HttpConfig,
    target: std::net::SocketAddr,
    timeout: Duration,
) -> Result<Expectation, String> {
    let fail = |e: String| format!("--verify-learn: the learning request to {target} failed: {e}");
    let tcp =
        std::net::TcpStream::connect_timeout(&target, timeout).map_err(|e| fail(e.to_string()))?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| fail(e.to_string()))?;
    // https: the same TLS settings as the load's connections (a fresh session, never resumed).
    let mut s = crate::tls::blocking_stream(h.tls.as_ref(), tcp).map_err(fail)?;
    let head = h.method.eq_ignore_ascii_case("HEAD");
    let response = match &h.h2 {
        Some(h2) => learn_over_h2(h2, s.as_mut(), head).map_err(fail)?,
        None => learn_over_h1(h, s.as_mut(), head).map_err(fail)?,
    };
    if let Some(want) = h.expect.status {
        if response.status != want {
            return Err(fail(format!(
                "the response has status {}, but --expect-status says {want}",
                response.status
            )));
        }
    } else if !(200..400).contains(&response.status) {
        return Err(fail(format!(
            "the response has status {}; only a 2xx/3xx response can be learned as the expectation",
            response.status
        )));
    }
    Ok(Expectation {
        status: Some(response.status),
        body_size: Some(response.body_len),
        body_sha256: response.body_sha256,
    })
}

/// The learning request over HTTP/1.1: the run's request, its response parsed as the load's are.
fn learn_over_h1(h: &HttpConfig, s: &mut dyn Duplex, head: bool) -> Result<Response, String> {
    s.write_all(&h.request).map_err(|e| e.to_string())?;
    let mut parser = ResponseParser::new(true, head);
    let mut buf = vec![0u8; 256 * 1024];
    let mut have = 0;
    loop {
        // A read with a timeout (SO_RCVTIMEO) is not restarted by the kernel after a signal, even one
        // that is handled or stops and continues the process: retry it, as the engines do.
        let Some(n) = read_once(s, &mut buf[have..])? else {
            continue;
        };
        if n == 0 {
            return match parser.on_eof() {
                Some(r) if have == 0 => Ok(r),
                _ => Err("the server closed the connection before a complete response".into()),
            };
        }
        have += n;
        match parser.advance(&buf[..have]) {
            Step::Done(_, r) => return Ok(r),
            Step::NeedMore(k) => {
                buf.copy_within(k..have, 0);
                have -= k;
                if have == buf.len() {
                    return Err("response head too large".into());
                }
            }
            Step::Error(e) => return Err(e),
        }
    }
}

/// The learning request over HTTP/2 (`--h2`): a connection of its own with one stream, the
/// positional URL's request, driven by the load's own HTTP/2 client (`H2Conn`), so the learned
/// response is judged exactly as the load's responses are.
fn learn_over_h2(h2: &H2Requests, s: &mut dyn Duplex, head: bool) -> Result<Response, String> {
    let mut conn = H2Conn::new(h2.settings, true, head);
    let now = Instant::now();
    conn.start_stream(0, &h2.blocks[0], &h2.body, now, now);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let unsent = conn.unsent().len();
        if unsent > 0 {
            s.write_all(conn.unsent()).map_err(|e| e.to_string())?;
            conn.wrote(unsent);
        }
        for event in conn.events.drain(..) {
            match event {
                Event::Done { response, .. } => return Ok(response),
                Event::Reset { code, .. } => {
                    return Err(format!("the server reset the stream (RST_STREAM, error code {code})"))
                }
                // Going away with this stream kept (processed): its answer still comes.
                Event::GoAway { unprocessed: 0, .. } => {}
                Event::GoAway { code, debug, .. } => {
                    return Err(format!(
                        "the server ended the connection before answering (GOAWAY, error code {code}{})",
                        if debug.is_empty() { String::new() } else { format!(": {debug}") }
                    ))
                }
            }
        }
        let Some(n) = read_once(s, &mut buf)? else {
            continue;
        };
        if n == 0 {
            return Err("the server closed the connection before a complete response".into());
        }
        conn.receive(&buf[..n])
            .map_err(|e| format!("HTTP/2 protocol error: {e}"))?;
    }
}

/// One read: Some(bytes read, 0 at the end), or None when a signal interrupted it. A read with a
/// timeout (SO_RCVTIMEO) is not restarted by the kernel after a signal, even one that is handled or
/// stops and continues the process: the caller retries it, as the engines do.
fn read_once(s: &mut dyn Duplex, buf: &mut [u8]) -> Result<Option<usize>, String> {
    match s.read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::split_evenly;

    #[test]
    fn even_split_adds_up() {
        for (total, parts) in [(10u64, 3usize), (1, 4), (100, 1), (7, 7)] {
            let shares: Vec<u64> = (0..parts).map(|i| split_evenly(total, parts, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }
}
