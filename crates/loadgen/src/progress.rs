//! Progress lines while the run measures: when stderr is a terminal (and not `--quiet`), one line
//! per `--interval` with the elapsed time, the successful requests per second and the latency p50
//! and p99 of that interval, and the errors so far. Off (and free) otherwise.
//!
//! Load threads never lock or share a cache line on the hot path: each `ThreadStats` gets its own
//! `Live` when progress is on, stores its running counts there (a plain store, no read-modify-write)
//! and hands over each finished interval histogram (once per interval, already encoded by
//! `stats::Intervals`). The reporter thread sums the `Live`s of every `ThreadStats` created since
//! `enable` and prints. So no engine knows about progress, and open-loop phases (a fresh
//! `ThreadStats` each) are covered too.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::serialization::Deserializer;

use crate::histogram::new_histogram;
use crate::parse::fmt_us;

static ENABLED: AtomicBool = AtomicBool::new(false);
static REGISTRY: Mutex<Vec<Arc<Live>>> = Mutex::new(Vec::new());
/// A thread's histogram of interval k is handed over with its first response in interval k+1, a
/// moment after the boundary; the line for interval k waits this long (at most a fifth of the
/// interval) so that it is there.
const GRACE: Duration = Duration::from_millis(100);

/// One `ThreadStats`'s running figures, read by the reporter.
#[derive(Default)]
pub struct Live {
    requests: AtomicU64,
    errors: AtomicU64,
    /// Finished interval histograms (V2 encoded) not yet printed.
    finished: Mutex<Vec<Vec<u8>>>,
}

impl Live {
    /// The thread's count of successful requests (its own counter, so a store suffices).
    #[inline]
    pub fn set_requests(&self, n: u64) {
        self.requests.store(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn set_errors(&self, n: u64) {
        self.errors.store(n, Ordering::Relaxed);
    }

    pub fn interval_done(&self, encoded: &[u8]) {
        self.finished
            .lock()
            .expect("no panics while held")
            .push(encoded.to_vec());
    }
}

/// Turn progress on for the `ThreadStats` created from now on. Called by `main` before the run.
pub fn enable() {
    ENABLED.store(true, Ordering::SeqCst);
}

/// A `Live` for a new `ThreadStats` when progress is on.
pub fn attach() -> Option<Arc<Live>> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let live = Arc::new(Live::default());
    REGISTRY
        .lock()
        .expect("no panics while held")
        .push(live.clone());
    Some(live)
}

/// Whether progress lines should be printed: stderr is a terminal and `--quiet` was not given.
pub fn wanted(quiet: bool) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    !quiet && unsafe { libc::isatty(libc::STDERR_FILENO) } == 1
}

/// The reporter thread; it stops when this is dropped.
pub struct Reporter {
    _stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self._stop.take();
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

/// Start printing a line per `interval` from `measure_start` on (nothing when progress is off).
/// `unit` names what is counted: "req/s" or, for echo, "chunks/s".
pub fn start(measure_start: Instant, interval: Duration, unit: &'static str) -> Reporter {
    if !ENABLED.load(Ordering::SeqCst) {
        return Reporter {
            _stop: None,
            thread: None,
        };
    }
    let (tx, rx) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("progress".into())
        .spawn(move || report(&rx, measure_start, interval, unit))
        .ok();
    Reporter {
        _stop: Some(tx),
        thread,
    }
}

fn totals() -> (u64, u64) {
    let lives = REGISTRY.lock().expect("no panics while held");
    lives.iter().fold((0, 0), |(r, e), l| {
        (
            r + l.requests.load(Ordering::Relaxed),
            e + l.errors.load(Ordering::Relaxed),
        )
    })
}

/// The finished interval histograms handed over since the last call, merged.
fn take_finished() -> hdrhistogram::Histogram<u64> {
    let mut merged = new_histogram();
    let mut de = Deserializer::new();
    for live in REGISTRY.lock().expect("no panics while held").iter() {
        for bytes in live
            .finished
            .lock()
            .expect("no panics while held")
            .drain(..)
        {
            if let Ok(h) = de.deserialize::<u64, _>(&mut &bytes[..]) {
                merged.add(&h).ok();
            }
        }
    }
    merged
}

fn report(stop: &mpsc::Receiver<()>, measure_start: Instant, interval: Duration, unit: &str) {
    let grace = GRACE.min(interval / 5);
    // True when `t` came; false when the reporter is to stop (its `Reporter` was dropped).
    let wait_until = |t: Instant| {
        matches!(
            stop.recv_timeout(t.saturating_duration_since(Instant::now())),
            Err(RecvTimeoutError::Timeout)
        )
    };
    if !wait_until(measure_start) {
        return;
    }
    // What came before the measured phase (an open-loop warm-up phase) is not "so far".
    let (base_requests, base_errors) = totals();
    take_finished();
    let mut last_requests = base_requests;
    let mut last_at = Instant::now();
    for k in 1u32.. {
        if !wait_until(measure_start + interval * k + grace) || crate::signals::stop_requested() {
            return;
        }
        let now = Instant::now();
        let (requests, errors) = totals();
        let h = take_finished();
        let rate = requests.saturating_sub(last_requests) as f64
            / now.duration_since(last_at).as_secs_f64();
        let latency = if h.is_empty() {
            "p50 -  p99 -".to_string()
        } else {
            format!(
                "p50 {}  p99 {}",
                fmt_us(h.value_at_quantile(0.5)),
                fmt_us(h.value_at_quantile(0.99))
            )
        };
        let line = format!(
            "[{:>7.1}s] {rate:>10.1} {unit}  {latency}  errors {}\n",
            (interval * k).as_secs_f64(),
            errors.saturating_sub(base_errors)
        );
        // One write per line, so it is not torn by other output on stderr.
        std::io::stderr().lock().write_all(line.as_bytes()).ok();
        (last_requests, last_at) = (requests, now);
    }
}
