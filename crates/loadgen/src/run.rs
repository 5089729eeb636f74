//! Runs a validated configuration: splits connections (and `--requests`) over threads, starts them
//! with a common clock, optionally the echo probe, then merges what the threads measured.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, HttpConfig, IoBackend, Mode};
use crate::echo::{self, EchoProtocol, ProbeResult};
use crate::engine::{self, WorkerConfig, WorkerResult};
use crate::exchange::Exchange;
use crate::http::{Expectation, HttpProtocol, ResponseParser, Step};
use crate::stats::ThreadStats;
use crate::{progress, uring};

pub struct ThreadSummary {
    pub cpu: Option<usize>,
    pub cpu_time: Duration,
    pub wall_time: Duration,
    pub user_time: Duration,
    pub sys_time: Duration,
    /// See `WorkerResult::run_delay`.
    pub run_delay: Option<Duration>,
    /// See `WorkerResult::batch_wait_max`.
    pub batch_wait_max: Option<Duration>,
}

pub struct RunOutcome {
    pub stats: ThreadStats,
    pub threads: Vec<ThreadSummary>,
    /// Wall-clock start of the measured phase.
    pub started_at: SystemTime,
    pub duration: Duration,
    pub warmup: Duration,
    pub probe: Option<ProbeResult>,
}

/// Share `total` as evenly as possible: the first `total % parts` get one more.
pub fn split_evenly(total: u64, parts: usize, index: usize) -> u64 {
    total / parts as u64 + u64::from((index as u64) < total % parts as u64)
}

/// What a progress line counts per second.
pub fn progress_unit(cfg: &Config) -> &'static str {
    match cfg.mode {
        Mode::Http(_) => "req/s",
        Mode::Echo(_) => "chunks/s",
    }
}

/// `start_at`: the `--prepare` start time; the threads (and their connections) start then.
pub fn run(cfg: &Config, start_at: Option<Instant>) -> Result<RunOutcome, String> {
    if let Some(t) = start_at {
        std::thread::sleep(t.saturating_duration_since(Instant::now()));
    }
    let run_start = Instant::now();
    let wall_start = SystemTime::now();
    let measure_start = run_start + cfg.warmup;
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
    .map_err(|e| format!("cannot start the probe thread: {e}"))?;

    let progress = progress::start(measure_start, cfg.interval, progress_unit(cfg));
    let mut handles = Vec::with_capacity(cfg.threads);
    let mut first_conn = 0;
    for t in 0..cfg.threads {
        let connections = split_evenly(cfg.connections as u64, cfg.threads, t) as usize;
        let wc = WorkerConfig {
            thread_index: t,
            cpu: (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]),
            target: cfg.target_addr,
            source_ips: cfg.source_ips.clone(),
            first_conn,
            connections,
            timeout: cfg.timeout,
            measure_start,
            measure_end,
            response_quota: match &cfg.mode {
                Mode::Http(h) => h.requests.map(|n| split_evenly(n, cfg.threads, t)),
                Mode::Echo(_) => None,
            },
        };
        first_conn += connections;
        let spawned = match &cfg.mode {
            Mode::Http(h) if cfg.io == IoBackend::Uring => {
                let params = uring::HttpParams::new(h, cfg.coalesce, t);
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn(move || uring::run_worker(wc, params))
            }
            Mode::Http(h) => {
                let proto = HttpProtocol::new(Exchange::for_config(h, t));
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn(move || engine::run_worker(wc, proto))
            }
            Mode::Echo(e) => {
                let proto = EchoProtocol::new(e.bytes_per_connection, e.chunk_bytes);
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn(move || engine::run_worker(wc, proto))
            }
        };
        handles.push(spawned.map_err(|e| format!("cannot start load thread {t}: {e}"))?);
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
                .map_err(|_| "the probe thread panicked".to_string())
        })
        .transpose()?;
    if let Some(f) = failure {
        return Err(f);
    }

    let stopped_at = results
        .iter()
        .map(|r| r.stopped_at)
        .max()
        .unwrap_or(measure_start);
    let measured_end = measure_end.map_or(stopped_at, |end| stopped_at.min(end));
    let mut threads = Vec::with_capacity(results.len());
    let mut merged: Option<ThreadStats> = None;
    for r in results {
        threads.push(ThreadSummary {
            cpu: r.cpu,
            cpu_time: r.cpu_time,
            wall_time: r.wall_time,
            user_time: r.user_time,
            sys_time: r.sys_time,
            run_delay: r.run_delay,
            batch_wait_max: r.batch_wait_max,
        });
        match merged.as_mut() {
            None => merged = Some(r.stats),
            Some(m) => m.merge(&r.stats),
        }
    }
    Ok(RunOutcome {
        stats: merged.expect("at least one thread"),
        threads,
        started_at: wall_start + cfg.warmup,
        duration: measured_end.saturating_duration_since(measure_start),
        warmup: cfg
            .warmup
            .min(stopped_at.saturating_duration_since(run_start)),
        probe,
    })
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
    let mut s =
        std::net::TcpStream::connect_timeout(&target, timeout).map_err(|e| fail(e.to_string()))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| fail(e.to_string()))?;
    s.write_all(&h.request).map_err(|e| fail(e.to_string()))?;
    let mut parser = ResponseParser::new(true, h.method.eq_ignore_ascii_case("HEAD"));
    let mut buf = vec![0u8; 256 * 1024];
    let mut have = 0;
    let response = loop {
        // A read with a timeout (SO_RCVTIMEO) is not restarted by the kernel after a signal, even one
        // that is handled or stops and continues the process: retry it, as the engines do.
        let n = match s.read(&mut buf[have..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(e.to_string())),
        };
        if n == 0 {
            match parser.on_eof() {
                Some(r) if have == 0 => break r,
                _ => {
                    return Err(fail(
                        "the server closed the connection before a complete response".into(),
                    ))
                }
            }
        }
        have += n;
        match parser.advance(&buf[..have]) {
            Step::Done(_, r) => break r,
            Step::NeedMore(k) => {
                buf.copy_within(k..have, 0);
                have -= k;
                if have == buf.len() {
                    return Err(fail("response head too large".into()));
                }
            }
            Step::Error(e) => return Err(fail(e)),
        }
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
