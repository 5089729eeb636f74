//! The open-loop HTTP engine: requests (`--rate`) or connections (`--conn-rate`) start when the
//! schedule says, not when the previous response arrived.
//!
//! A separate loop from the closed loop's engines on purpose: their hot path (read a response,
//! write the next request) stays free of any schedule decision, and this loop can own what only the
//! open loop needs: wake-ups finer than a millisecond, a backlog of due-but-unsent requests, a pool
//! of free connections, and phases (warm-up, then one or more measured rates on the same
//! connections).
//!
//! The schedule is written once, for either engine: how bytes move (connect, send, receive, close,
//! wait until a time or an event) is `io::open_io::OpenIo`, with an epoll backend (mio + a timerfd,
//! `EpollOpen`) and an io_uring one (`io::uring::open::UringOpen`). `Worker` is generic over it, so
//! phases, backlog, dispatch, drain, sweep and accounting cannot differ between engines. Nor between
//! HTTP/1.1 and HTTP/2 (`--h2`): a connection is free when the exchange says it can
//! take a request (`Exchange::can_start`: HTTP/2 with a free stream), the rest is the same.
//!
//! Per thread: a long-lived worker opens its connections once, then runs the phases the main
//! thread sends it, one at a time, and returns one `PhaseReport` per phase. A phase ends at its end
//! time: no new arrivals, but due requests still in the backlog are sent as connections free up and
//! requests on the wire are waited for, all within `--timeout` (then the unsent ones are counted as
//! dropped, replies owed longer than `--timeout` are `timeout` errors, and requests still on the
//! wire are unfinished, their connections closed), so every request belongs to exactly the phase of
//! its intended time.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::config::{Arrival, IoBackend, LoadKind, SpinWindow};
use crate::exchange::{Exchange, ExchangeConn, Outcome};
use crate::histogram;
use crate::io::open_io::{EpollOpen, IoEvent, OpenIo};
use crate::io::uring::open::UringOpen;
use crate::io::worker::{
    back_off, sweep_action, Phase, SweepAction, ThreadConns, ThreadSummary, WorkerResult,
    SWEEP_INTERVAL,
};
use crate::io::{on_engine, OnEngine};
use crate::load::schedule::Schedule;
use crate::rng::Rng;
use crate::stats::{ErrorClass, ThreadStats};
use crate::sys;

/// A send whose schedule lag (actual − intended send time) exceeds this is counted as late.
pub const LATE_THRESHOLD: Duration = Duration::from_millis(1);
/// Due requests waiting for a free connection, per thread. Beyond this the generator is hopelessly
/// behind (the server or the pool cannot keep up): further due requests are dropped and counted,
/// rather than growing memory without bound.
pub const MAX_BACKLOG: usize = 1_000_000;
/// `--spin-us auto`'s measurement of the timer: this many waits of this length.
const TIMER_SAMPLES: usize = 500;
const TIMER_SAMPLE_PERIOD: Duration = Duration::from_micros(200);

/// An open-loop thread: its connections (`--rate`: the pool; `--conn-rate`: at most this many open
/// at once) and its schedule.
pub struct OpenWorkerConfig {
    pub conns: ThreadConns,
    /// The engine that moves the bytes (`--io` resolved); the schedule is the same on both.
    pub io: IoBackend,
    pub kind: LoadKind,
    pub arrival: Arrival,
    /// The run's seed: this thread's poisson gaps follow from it (the URL order is the exchange's).
    pub seed: u64,
    pub interval: Duration,
    /// `--spin-us`: when the next wake-up is this close, poll without sleeping instead of arming
    /// the timer. A sleeping thread wakes as late as the machine's timer lets it (tens to hundreds
    /// of µs at p99 on a VM); a polling one sees its send time within a loop turn. `auto`: the
    /// window follows this thread's measured timer lag and each phase's rate (`SpinWindow::window`).
    pub spin: SpinWindow,
}

/// One phase for one thread.
#[derive(Clone, Copy, Debug)]
pub struct PhasePlan {
    pub start: Instant,
    pub end: Instant,
    /// This thread's share of the rate (requests or connections per second).
    pub rate_per_s: f64,
    /// Uniform arrivals: this thread's first arrival is this long after `start` (thread t of T at
    /// t/(T x rate_per_s)), so the threads' arrivals interleave evenly.
    pub offset: Duration,
    /// `--conns-per-step`: this thread's share of the step's arrivals; the schedule stops after it
    /// even if float rounding put one more arrival before `end`. None: every arrival before `end`.
    pub max_arrivals: Option<u64>,
}

/// Open-loop counters of one phase (one thread, or merged).
pub struct OpenStats {
    /// Latency from the actual send (what a closed-loop tool would report).
    pub uncorrected: Histogram<u64>,
    /// Actual − intended start (send, or connect for `--conn-rate`), µs.
    pub lag: Histogram<u64>,
    /// `--conn-rate`: from the intended connection start to its close after the last response.
    pub lifetime: Histogram<u64>,
    /// Arrivals the schedule produced in the phase.
    pub intended: u64,
    /// Arrivals actually started (request written / connect issued).
    pub started: u64,
    /// Of those, started before the phase's end: the achieved rate counts only these, so sends
    /// caught up in the drain do not make a generator that fell behind look on schedule.
    pub started_in_schedule: u64,
    pub late: u64,
    /// Not started because the backlog (rate) or the connection cap (conn-rate) was full.
    pub dropped_overflow: u64,
    /// Still waiting for a free connection when the phase ended.
    pub dropped_unsent: u64,
    pub conns_completed: u64,
    /// The server closed before the connection's K requests were done (not an error by itself).
    pub conns_ended_early: u64,
    pub conns_failed: u64,
    /// Closed at the drain deadline with a request still unanswered.
    pub conns_unfinished: u64,
    /// Entries of `uncorrected` that are lower bounds (requests unfinished at the drain deadline).
    pub uncorrected_censored: u64,
    /// Wall time of loop turns that only busy-polled for the next send (`--spin-us`): nothing
    /// arrived, nothing was sent, no socket was ready. Left out of the thread's busy time, so a
    /// generator spinning on purpose is not taken for a saturated one.
    pub spin_wait: Duration,
    /// The spin window the phase ran with (merged: the widest of the threads').
    pub spin: Duration,
    /// `--spin-us auto`: the thread's timer wake-up lag p99, measured before it connected (merged:
    /// the largest), the time between the thread's sends at this phase's rate, and whether the
    /// window was widened for it (merged: any thread's). None with a fixed window.
    pub spin_auto: Option<SpinAuto>,
}

/// What `--spin-us auto` measured and chose for a phase.
#[derive(Clone, Copy, Debug)]
pub struct SpinAuto {
    pub timer_lag_p99: Duration,
    pub send_gap: Duration,
    pub widened: bool,
}

impl OpenStats {
    pub fn new() -> Self {
        OpenStats {
            uncorrected: histogram::new_histogram(),
            lag: histogram::new_histogram(),
            lifetime: histogram::new_histogram(),
            intended: 0,
            started: 0,
            started_in_schedule: 0,
            late: 0,
            dropped_overflow: 0,
            dropped_unsent: 0,
            conns_completed: 0,
            conns_ended_early: 0,
            conns_failed: 0,
            conns_unfinished: 0,
            uncorrected_censored: 0,
            spin_wait: Duration::ZERO,
            spin: Duration::ZERO,
            spin_auto: None,
        }
    }

    pub fn merge(&mut self, o: &OpenStats) {
        self.uncorrected.add(&o.uncorrected).expect("same bounds");
        self.lag.add(&o.lag).expect("same bounds");
        self.lifetime.add(&o.lifetime).expect("same bounds");
        self.intended += o.intended;
        self.started += o.started;
        self.started_in_schedule += o.started_in_schedule;
        self.late += o.late;
        self.dropped_overflow += o.dropped_overflow;
        self.dropped_unsent += o.dropped_unsent;
        self.conns_completed += o.conns_completed;
        self.conns_ended_early += o.conns_ended_early;
        self.conns_failed += o.conns_failed;
        self.conns_unfinished += o.conns_unfinished;
        self.uncorrected_censored += o.uncorrected_censored;
        self.spin_wait += o.spin_wait;
        self.spin = self.spin.max(o.spin);
        self.spin_auto = match (self.spin_auto, o.spin_auto) {
            (Some(a), Some(b)) => Some(SpinAuto {
                timer_lag_p99: a.timer_lag_p99.max(b.timer_lag_p99),
                send_gap: a.send_gap.min(b.send_gap),
                widened: a.widened || b.widened,
            }),
            (a, b) => a.or(b),
        };
    }

    pub fn dropped(&self) -> u64 {
        self.dropped_overflow + self.dropped_unsent
    }
}

impl Default for OpenStats {
    fn default() -> Self {
        Self::new()
    }
}

/// One thread's phase: what every load thread reports (`WorkerResult`, the same as the closed
/// loop's), and the schedule's own figures.
pub struct PhaseReport {
    pub result: WorkerResult,
    pub open: OpenStats,
}

pub enum WorkerMsg {
    /// The initial connections are open (or failed); `failed` of them could not connect.
    Connected {
        failed: usize,
    },
    Phase(Box<PhaseReport>),
}

/// One connection slot. Its life (`Phase`) is the closed loop's: `Open` with a request in flight
/// is busy, `Open` with room for another request (`Exchange::can_start`: HTTP/1.1 with nothing in
/// flight, HTTP/2 with a free stream) is free; a `--conn-rate` slot not in use is `Done`.
struct Slot {
    phase: Phase,
    ex: ExchangeConn,
    /// Pool: the slot is in `Worker::free` (once at most, so the list stays as long as the pool).
    listed: bool,
    /// `--conn-rate`: when the connection was meant to start, and the requests it has still to make.
    conn_intended: Instant,
    requests_left: u32,
    backoff_ms: u32,
    source: Option<SocketAddr>,
}

struct Worker<B: OpenIo> {
    cfg: OpenWorkerConfig,
    /// What the requests and their answers mean: the same `Exchange` the closed loop drives.
    ex: Exchange,
    /// How bytes move (epoll or io_uring): slot i's socket is the backend's slot i.
    io: B,
    slots: Vec<Slot>,
    /// Pool: slots with room for a request (stale entries are skipped; see `list_free`).
    /// Conn-rate: slots not in use.
    free: Vec<usize>,
    backlog: VecDeque<Instant>,
    /// Slots with a request outstanding (HTTP/2: any stream in flight), or (conn-rate) a
    /// connection in use.
    outstanding: usize,
    stats: ThreadStats,
    open: OpenStats,
    /// Phases use distinct seeds for their poisson gaps, derived from the run's seed.
    phase_index: u64,
    /// `--spin-us auto`: this thread's timed-wait wake-up lag p99 (`measure_timer_lag`).
    timer_lag_p99: Option<Duration>,
    /// The current phase's end: starts after it are drain catch-up, not schedule.
    phase_end: Instant,
}

/// Runs on its own thread: connect, report, then one phase per received plan until the channel
/// closes. `exchange` is this thread's (`Exchange::for_config(..).with_uncorrected()`).
pub fn run_open_worker(
    cfg: OpenWorkerConfig,
    exchange: Exchange,
    plans: Receiver<PhasePlan>,
    reports: Sender<(usize, io::Result<WorkerMsg>)>,
) {
    let index = cfg.conns.thread_index;
    let result = (|| -> io::Result<()> {
        cfg.conns.pin_this_thread()?;
        on_engine(
            cfg.io,
            OpenThread {
                cfg,
                exchange,
                plans,
                reports: &reports,
            },
        )
    })();
    if let Err(e) = result {
        reports.send((index, Err(e))).ok();
    }
}

/// An open-loop thread's life on the engine `io::on_engine` chooses: its `OpenIo` backend.
struct OpenThread<'a> {
    cfg: OpenWorkerConfig,
    exchange: Exchange,
    plans: Receiver<PhasePlan>,
    reports: &'a Sender<(usize, io::Result<WorkerMsg>)>,
}

impl OpenThread<'_> {
    /// `serve` on the backend `backend` makes from the target and the thread's slot count.
    fn serve_on<B: OpenIo>(
        self,
        backend: impl FnOnce(SocketAddr, usize) -> io::Result<B>,
    ) -> io::Result<()> {
        let OpenThread {
            cfg,
            exchange,
            plans,
            reports,
        } = self;
        // Slots the thread may have at once: the pool, or the `--conn-rate` cap.
        let (target, cap) = (cfg.conns.target, cfg.conns.connections);
        serve(
            Worker::new(cfg, exchange, backend(target, cap)?),
            plans,
            reports,
        )
    }
}

impl OnEngine for OpenThread<'_> {
    type Output = io::Result<()>;

    fn epoll(self) -> io::Result<()> {
        self.serve_on(|target, _| EpollOpen::new(target, 0))
    }

    fn uring(self) -> io::Result<()> {
        self.serve_on(UringOpen::new)
    }
}

/// The thread's life once its engine is chosen: connect, report, then one phase per plan.
fn serve<B: OpenIo>(
    mut w: Worker<B>,
    plans: Receiver<PhasePlan>,
    reports: &Sender<(usize, io::Result<WorkerMsg>)>,
) -> io::Result<()> {
    let index = w.cfg.conns.thread_index;
    if w.cfg.spin == SpinWindow::Auto {
        w.timer_lag_p99 = Some(w.measure_timer_lag()?);
    }
    let failed = w.connect_pool()?;
    reports
        .send((index, Ok(WorkerMsg::Connected { failed })))
        .ok();
    while let Ok(plan) = plans.recv() {
        let report = w.run_phase(plan)?;
        if reports
            .send((index, Ok(WorkerMsg::Phase(Box::new(report)))))
            .is_err()
        {
            break;
        }
    }
    Ok(())
}

impl<B: OpenIo> Worker<B> {
    /// `io` starts without slots; the pool's are added here (`--conn-rate` adds them as it goes).
    fn new(cfg: OpenWorkerConfig, ex: Exchange, mut io: B) -> Self {
        let now = Instant::now();
        let n = match cfg.kind {
            LoadKind::Rate => cfg.conns.connections,
            LoadKind::ConnRate { .. } => 0,
        };
        let slots = (0..n)
            .map(|k| {
                io.add_slot();
                new_slot(&cfg, &ex, k, now)
            })
            .collect();
        let stats = ThreadStats::new(now, now, None);
        Worker {
            io,
            slots,
            free: Vec::new(),
            backlog: VecDeque::new(),
            outstanding: 0,
            ex,
            stats,
            open: OpenStats::new(),
            timer_lag_p99: None,
            phase_index: 0,
            phase_end: now,
            cfg,
        }
    }

    /// Pool mode: open every connection and wait (at most `--timeout`) until each is open or
    /// failed; failed ones keep retrying with backoff during the phases.
    fn connect_pool(&mut self) -> io::Result<usize> {
        if !matches!(self.cfg.kind, LoadKind::Rate) {
            return Ok(0);
        }
        let start = Instant::now();
        for i in 0..self.slots.len() {
            self.open(i, start);
        }
        let deadline = start + self.cfg.conns.timeout;
        while self
            .slots
            .iter()
            .any(|s| matches!(s.phase, Phase::Connecting { .. }))
        {
            let now = Instant::now();
            if now >= deadline {
                self.sweep(now + self.cfg.conns.timeout);
                break;
            }
            self.wait(Some((now + SWEEP_INTERVAL).min(deadline)))?;
        }
        Ok(self
            .slots
            .iter()
            .filter(|s| !matches!(s.phase, Phase::Open))
            .count())
    }

    fn run_phase(&mut self, plan: PhasePlan) -> io::Result<PhaseReport> {
        let far = plan.end + Duration::from_secs(10 * 365 * 86400);
        self.stats = ThreadStats::new(plan.start, far, None);
        self.stats.set_interval(self.cfg.interval);
        self.open = OpenStats::new();
        let (spin, widened) = self.cfg.spin.window(self.timer_lag_p99, plan.rate_per_s);
        self.open.spin = spin;
        self.open.spin_auto = self.timer_lag_p99.map(|timer_lag_p99| SpinAuto {
            timer_lag_p99,
            send_gap: Duration::from_secs_f64(1.0 / plan.rate_per_s.max(1e-9))
                .min(Duration::from_secs(3600)),
            widened,
        });
        self.phase_end = plan.end;
        let spin = self.open.spin;
        self.phase_index += 1;
        for slot in &mut self.slots {
            self.ex.new_phase(&mut slot.ex);
        }
        // Nothing is in flight between phases; start the phase's latencies from the send afresh.
        self.ex.take_uncorrected();
        let rng = Rng::for_thread(
            self.cfg.seed,
            self.cfg.conns.thread_index,
            10 + self.phase_index,
        );
        let mut sched = Schedule::new(self.cfg.arrival, plan.rate_per_s, plan.start, rng)
            .with_offset(plan.offset);
        let mut next_sweep = Instant::now() + SWEEP_INTERVAL;
        let mut at_start: Option<sys::ThreadClocks> = None;
        let conn_rate = matches!(self.cfg.kind, LoadKind::ConnRate { .. });

        // The schedule phase: arrivals until plan.end.
        loop {
            let now = Instant::now();
            let turn_start = now;
            let progress_before = (self.open.intended, self.open.started);
            if at_start.is_none() && now >= plan.start {
                at_start = Some(sys::ThreadClocks::read(now));
            }
            // Arrivals due before the end are taken before leaving: the loop may wake late
            // (waiting on a full backlog it sleeps until a response or the sweep), and leaving
            // first would lose the arrivals intended between the last wake-up and the end.
            while sched.next() <= now
                && sched.next() < plan.end
                && plan.max_arrivals.is_none_or(|m| self.open.intended < m)
            {
                let t = sched.advance();
                self.open.intended += 1;
                if conn_rate {
                    self.start_connection(t, now);
                } else if self.backlog.len() >= MAX_BACKLOG {
                    self.open.dropped_overflow += 1;
                } else {
                    self.backlog.push_back(t);
                }
            }
            // A SIGINT/SIGTERM ends the schedule here; the drain below still waits for what is
            // on the wire, so every request sent is answered or counted.
            if now >= plan.end || crate::signals::stop_requested() {
                break;
            }
            self.dispatch();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_INTERVAL;
            }
            // Wake for the next arrival unless it could not be sent anyway (backlog waiting for a
            // connection): then the next response or the sweep is what matters.
            let send_due = (conn_rate || self.backlog.is_empty())
                .then(|| sched.next())
                .filter(|&t| t < plan.end)
                .filter(|_| plan.max_arrivals.is_none_or(|m| self.open.intended < m));
            let other_wake = next_sweep.min(plan.end);
            let now = Instant::now();
            // Busy-poll only toward a send: the window is there to send on time, while a sweep or
            // the phase's end woken a timer's lag late costs nothing (with a window `auto` widened
            // to the 10 ms sweep interval, spinning toward sweeps would spin the whole phase).
            let spinning = send_due.is_some_and(|t| t <= now + spin);
            let until = if spinning {
                None
            } else {
                // Wake a spin window before the send: the timer's own lag is then absorbed by the
                // busy-polling that follows instead of landing on the send.
                let send_wake = send_due.map(|t| t.checked_sub(spin).unwrap_or(t));
                Some(send_wake.map_or(other_wake, |t| t.min(other_wake)))
            };
            let ready = self.wait(until)?;
            // Only turns inside the measured phase: busy time is measured from plan.start.
            let idle = !ready && (self.open.intended, self.open.started) == progress_before;
            if spinning && idle && at_start.is_some() {
                self.open.spin_wait += turn_start.elapsed();
            }
        }
        let end = Instant::now();

        // Drain: requests due in the phase but still waiting for a connection are sent as
        // connections free up, and what is on the wire is waited for; both for at most
        // --timeout. Dropping the backlog at once would drop exactly the requests that waited
        // through a stall, and the stall would vanish from the corrected latency.
        let drain_deadline = end + self.cfg.conns.timeout;
        while self.outstanding > 0 || !self.backlog.is_empty() {
            let now = Instant::now();
            if now >= drain_deadline {
                self.open.dropped_unsent += self.backlog.len() as u64;
                self.backlog.clear();
                // Replies owed longer than --timeout are timeouts; the rest (sent in the drain)
                // are unfinished: the phase ends here, not when the last of them would time out.
                self.sweep(now);
                self.end_in_flight(now);
                break;
            }
            self.dispatch();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_INTERVAL;
            }
            if self.outstanding == 0 && self.backlog.is_empty() {
                break;
            }
            self.wait(Some(next_sweep.min(drain_deadline)))?;
        }
        let stopped_at = Instant::now();
        self.stats.intervals.flush();
        if let Some(u) = self.ex.take_uncorrected() {
            self.open.uncorrected = u.hist;
            self.open.uncorrected_censored = u.censored;
        }
        let usage = at_start
            .unwrap_or_else(|| sys::ThreadClocks::read(end))
            .usage(stopped_at);
        let far = plan.end;
        // Busy time is work: the turns spent only polling for the next send are taken out
        // (`OpenStats::spin_wait`; on a pinned, otherwise idle CPU their wall time is CPU time).
        // That wall time also holds any wait for a CPU during those turns, which `run_delay`
        // adds back, so busy (CPU + run_delay) leaves out exactly the polling turns.
        let cpu_time = usage.cpu_time.saturating_sub(self.open.spin_wait);
        let result = WorkerResult {
            stats: std::mem::replace(&mut self.stats, ThreadStats::new(far, far, None)),
            stopped_at,
            thread: ThreadSummary {
                cpu: self.cfg.conns.cpu,
                cpu_time,
                wall_time: usage.wall_time,
                user_time: usage.user_time,
                sys_time: usage.sys_time,
                run_delay: usage.run_delay,
                batching: None,
            },
        };
        Ok(PhaseReport {
            result,
            open: std::mem::take(&mut self.open),
        })
    }

    /// At the drain deadline `end`: every request still on the wire is unfinished, its time since
    /// the intended send a censored entry of the corrected histogram (and since the actual send,
    /// of the uncorrected one). Its connection is closed, so the next phase starts with nothing in
    /// flight: the pool reopens it, a `--conn-rate` connection is retired.
    fn end_in_flight(&mut self, end: Instant) {
        for i in 0..self.slots.len() {
            if !self.busy(i) {
                continue;
            }
            let c = &self.slots[i].ex;
            self.ex.end_of_phase(c, false, end, &mut self.stats);
            self.ex.censor_uncorrected(c, end);
            let next = match self.cfg.kind {
                LoadKind::Rate => Outcome::Reconnect,
                LoadKind::ConnRate { .. } => {
                    self.open.conns_unfinished += 1;
                    Outcome::Finished
                }
            };
            self.apply(i, next, end);
        }
    }

    /// One wait (until `until`; None: only look) and its events; whether any event came.
    fn wait(&mut self, until: Option<Instant>) -> io::Result<bool> {
        let ready = self.io.wait(until)?;
        while let Some((i, ev)) = self.io.next_event() {
            self.on_event(i, ev);
        }
        Ok(ready)
    }

    /// `--spin-us auto`: how late this thread's timed wait wakes it, waiting as the load waits
    /// (epoll: the timerfd in the thread's epoll set; io_uring: io_uring_enter's timeout), on its
    /// own CPU, before any connection exists: the p99 of `TIMER_SAMPLES` waits of
    /// `TIMER_SAMPLE_PERIOD` each (about 0.1 s in all).
    fn measure_timer_lag(&mut self) -> io::Result<Duration> {
        let mut lags = Vec::with_capacity(TIMER_SAMPLES);
        for _ in 0..TIMER_SAMPLES {
            let target = Instant::now() + TIMER_SAMPLE_PERIOD;
            // A wake-up before the target (a signal, a timer that fired early) waits again.
            while Instant::now() < target {
                self.wait(Some(target))?;
            }
            lags.push(Instant::now() - target);
        }
        lags.sort();
        Ok(lags[lags.len() * 99 / 100])
    }

    /// Pool mode: send due requests on free connections (HTTP/2: connections with a free
    /// stream), oldest first. A connection that still has room after a send (HTTP/2) goes back on
    /// top, so its streams fill before the next connection's are used.
    #[inline]
    fn dispatch(&mut self) {
        while !self.backlog.is_empty() {
            let Some(i) = self.free.pop() else { return };
            self.slots[i].listed = false;
            if !self.has_room(i) {
                continue; // stale entry: the slot failed, closed or filled up since it was listed
            }
            let intended = self.backlog.pop_front().expect("checked non-empty");
            // A fresh reading: the previous send's write() took time, and the lag must say so.
            let now = Instant::now();
            let out = self.send_request(i, intended, now);
            self.apply(i, out, now);
            self.list_free(i);
        }
    }

    /// A request is in flight on slot `i`.
    fn busy(&self, i: usize) -> bool {
        let slot = &self.slots[i];
        matches!(slot.phase, Phase::Open) && self.ex.inflight(&slot.ex) > 0
    }

    /// Slot `i` is open and may take one more request now.
    fn has_room(&self, i: usize) -> bool {
        let slot = &self.slots[i];
        matches!(slot.phase, Phase::Open) && self.ex.can_start(&slot.ex)
    }

    /// Pool: put slot `i` on the free list if it has room and is not on it already.
    fn list_free(&mut self, i: usize) {
        if !self.slots[i].listed && self.has_room(i) {
            self.slots[i].listed = true;
            self.free.push(i);
        }
    }

    fn record_start(&mut self, intended: Instant, now: Instant) {
        let lag = now.saturating_duration_since(intended);
        self.open.started += 1;
        if now < self.phase_end {
            self.open.started_in_schedule += 1;
        }
        if lag > LATE_THRESHOLD {
            self.open.late += 1;
        }
        self.open
            .lag
            .saturating_record(lag.as_micros().min(u128::from(histogram::HIST_HIGHEST_US)) as u64);
    }

    /// Send the next request on open slot `i`, meant to go out at `intended`.
    fn send_request(&mut self, i: usize, intended: Instant, now: Instant) -> Outcome {
        if matches!(self.cfg.kind, LoadKind::Rate) {
            self.record_start(intended, now);
            if !self.busy(i) {
                self.outstanding += 1;
            }
        }
        let slot = &mut self.slots[i];
        let Some(len) = self.ex.start_one(&mut slot.ex, intended, now, &self.stats) else {
            unreachable!("the open loop has no request quota and sends only where there is room");
        };
        self.io
            .send(i, &self.ex, &mut slot.ex, len, now, &mut self.stats)
    }

    /// Conn-rate: one arrival = one new connection, unless the cap is reached.
    fn start_connection(&mut self, intended: Instant, now: Instant) {
        let LoadKind::ConnRate { requests_per_conn } = self.cfg.kind else {
            return;
        };
        let i = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < self.cfg.conns.connections => {
                let k = self.slots.len();
                self.slots.push(new_slot(&self.cfg, &self.ex, k, now));
                self.io.add_slot();
                k
            }
            None => {
                self.open.dropped_overflow += 1;
                return;
            }
        };
        self.record_start(intended, now);
        let slot = &mut self.slots[i];
        slot.conn_intended = intended;
        slot.requests_left = requests_per_conn;
        self.outstanding += 1;
        self.open(i, now);
    }

    fn open(&mut self, i: usize, now: Instant) {
        let nodelay = !self.ex.close_each();
        let slot = &mut self.slots[i];
        // Connecting before the attempt, so a failure at once is a failed connection in use.
        slot.phase = Phase::Connecting { since: now };
        if let Err((class, message)) = self.io.open(i, slot.source, nodelay) {
            self.fail(i, now, class, message);
        }
    }

    /// What the engine reported on slot `i` (never about a socket closed since: the engine drops
    /// those).
    fn on_event(&mut self, i: usize, ev: IoEvent<B::Ready>) {
        let now = Instant::now();
        let out = match ev {
            IoEvent::Connected => {
                let slot = &mut self.slots[i];
                self.stats.connection_opened(now);
                slot.backoff_ms = 0;
                slot.phase = Phase::Open;
                match self.cfg.kind {
                    LoadKind::Rate => {
                        self.list_free(i);
                        // HTTP/2: the preface goes out now, not with the first request.
                        let slot = &mut self.slots[i];
                        if self.ex.on_connected(&mut slot.ex) {
                            self.io
                                .flush(i, &self.ex, &mut slot.ex, now, &mut self.stats)
                        } else {
                            Outcome::Ok
                        }
                    }
                    // The first request is late by the connect: its corrected latency counts
                    // from the connection's intended start.
                    LoadKind::ConnRate { .. } => {
                        let intended = slot.conn_intended;
                        self.send_request(i, intended, now)
                    }
                }
            }
            IoEvent::Failed(class, msg) => Outcome::Fail(class, msg),
            IoEvent::Writable => {
                let slot = &mut self.slots[i];
                self.io
                    .flush(i, &self.ex, &mut slot.ex, now, &mut self.stats)
            }
            IoEvent::Readable(ready) => self.read(i, ready),
        };
        self.apply(i, out, now);
    }

    /// Read and judge what slot `i`'s socket holds; then what the load model does with a
    /// request answered (the pool frees the connection; `--conn-rate` sends its next request or
    /// retires it).
    fn read(&mut self, i: usize, ready: B::Ready) -> Outcome {
        let was_busy = self.busy(i);
        let slot = &mut self.slots[i];
        let out = self
            .io
            .receive(i, ready, &mut self.ex, &mut slot.ex, &mut self.stats);
        let answered = was_busy && self.ex.inflight(&self.slots[i].ex) == 0;
        match self.cfg.kind {
            LoadKind::Rate => {
                if answered {
                    self.outstanding -= 1;
                }
                // Free again once answered (HTTP/2: as soon as a stream is free).
                if matches!(out, Outcome::Ok) {
                    self.list_free(i);
                }
                let unused = self.ex.completed(&self.slots[i].ex) == 0;
                if matches!(out, Outcome::Reconnect) && !was_busy && unused {
                    // Closed by the server before it carried a single request (a server that
                    // closes every connection at once): no request was lost, so no error, but the
                    // connection is reopened after the failure back-off, not at once, or such a
                    // server would get a storm of connects.
                    let now = Instant::now();
                    self.close(i);
                    let slot = &mut self.slots[i];
                    slot.phase = back_off(&mut slot.backoff_ms, now);
                    return Outcome::Ok;
                }
                out
            }
            LoadKind::ConnRate { .. } => {
                let failed = matches!(out, Outcome::Fail(..));
                if answered && !failed {
                    let slot = &mut self.slots[i];
                    slot.requests_left = slot.requests_left.saturating_sub(1);
                    if slot.requests_left == 0 {
                        let now = Instant::now();
                        let life = now.saturating_duration_since(slot.conn_intended);
                        self.open
                            .lifetime
                            .saturating_record(histogram::micros(life));
                        self.open.conns_completed += 1;
                        return Outcome::Finished;
                    }
                    if matches!(out, Outcome::Ok) {
                        // The next request of this connection follows its previous response at
                        // once (httperf's sequential requests per connection).
                        let now = Instant::now();
                        return self.send_request(i, now, now);
                    }
                }
                match out {
                    // The server closed (or asked to) before the connection's requests were done:
                    // not an error by itself.
                    Outcome::Reconnect => {
                        self.open.conns_ended_early += 1;
                        Outcome::Finished
                    }
                    other => other,
                }
            }
        }
    }

    fn apply(&mut self, i: usize, out: Outcome, now: Instant) {
        match out {
            Outcome::Ok => {}
            // Pool: the connection cannot carry more (the server closed it, `--close`): a new one
            // at once, not an error.
            Outcome::Reconnect => {
                self.close(i);
                self.open(i, now);
            }
            // Conn-rate: the connection is done (completed or ended early).
            Outcome::Finished => {
                self.close(i);
                self.free.push(i);
                self.outstanding -= 1;
            }
            Outcome::Fail(class, msg) => self.fail(i, now, class, msg),
        }
    }

    fn close(&mut self, i: usize) {
        if matches!(self.cfg.kind, LoadKind::Rate) && self.busy(i) {
            self.outstanding -= 1;
        }
        let slot = &mut self.slots[i];
        self.ex.reset(&mut slot.ex);
        self.io.close(i);
        slot.phase = Phase::Done;
    }

    fn fail(&mut self, i: usize, now: Instant, class: ErrorClass, msg: String) {
        self.stats.error(now, class, || msg);
        let in_use = !matches!(self.slots[i].phase, Phase::Done | Phase::New);
        self.close(i);
        match self.cfg.kind {
            LoadKind::Rate => {
                let slot = &mut self.slots[i];
                slot.phase = back_off(&mut slot.backoff_ms, now);
            }
            LoadKind::ConnRate { .. } => {
                if in_use {
                    self.open.conns_failed += 1;
                    self.outstanding -= 1;
                    self.free.push(i);
                }
            }
        }
    }

    /// Timeouts of connects and replies, and reconnects after a back-off: the closed loop's rule.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            let busy_since = self.ex.busy_since(&slot.ex);
            match sweep_action(
                &slot.phase,
                busy_since,
                now,
                self.cfg.conns.timeout,
                self.cfg.conns.target,
            ) {
                SweepAction::Fail(class, msg) => self.fail(i, now, class, msg),
                SweepAction::Reopen => self.open(i, now),
                SweepAction::Nothing => {}
            }
        }
    }
}

fn new_slot(cfg: &OpenWorkerConfig, ex: &Exchange, k: usize, now: Instant) -> Slot {
    Slot {
        phase: match cfg.kind {
            LoadKind::Rate => Phase::New,
            LoadKind::ConnRate { .. } => Phase::Done,
        },
        ex: ex.new_conn(),
        listed: false,
        conn_intended: now,
        requests_left: 0,
        backoff_ms: 0,
        source: cfg.conns.source_for(k),
    }
}
