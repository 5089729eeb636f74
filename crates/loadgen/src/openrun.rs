//! Runs the open-loop modes: starts the workers, runs the warm-up, the `--prepare` barrier, then
//! one phase per measured rate (a single `--rate`, the `--steps` sweep, or the `--find-max`
//! search), and turns what the workers measured into result documents.

use std::io::BufRead;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, FindMax, HttpConfig, Mode, OpenConfig};
use crate::exchange::Exchange;
use crate::openloop::{
    self, LoadKind, OpenStats, OpenWorkerConfig, PhasePlan, PhaseReport, WorkerMsg, LATE_THRESHOLD,
};
use crate::output::{self, Document, FindMaxDoc, OpenLoopDoc, StepVerdict};
use crate::run::{split_evenly, RunOutcome, ThreadSummary};
use crate::stats::ThreadStats;
use crate::{progress, run, signals, sys};

/// A measured step whose achieved rate is below this fraction of the asked one is marked
/// `rate_not_met`.
pub const RATE_MET_FRACTION: f64 = 0.99;
/// ... as is one whose schedule lag p99 exceeds this.
pub const LAG_P99_LIMIT: Duration = Duration::from_millis(1);
/// Phases start this long after they are planned, so every thread gets the plan before its start.
const PHASE_LEAD: Duration = Duration::from_millis(5);
/// `--find-max` doubles the rate while it passes.
pub const FIND_MAX_GROWTH: f64 = 2.0;
/// `--find-max` measures at most this many steps.
pub const FIND_MAX_MAX_STEPS: usize = 40;
/// `--prepare` refuses a start time further away than this (a typo in the orchestrator, most
/// likely seconds given instead of nanoseconds or the reverse).
pub const PREPARE_MAX_WAIT: Duration = Duration::from_secs(3600);

pub enum OpenError {
    /// Exit 2: bad input (a start time in the past).
    Usage(String),
    /// Exit 1: the tool failed.
    Failure(String),
    /// Exit 3: `--prepare` got no start time (stdin closed); nothing was measured.
    Aborted(String),
}

struct Workers {
    plans: Vec<mpsc::Sender<PhasePlan>>,
    reports: mpsc::Receiver<(usize, std::io::Result<WorkerMsg>)>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    fn recv_all(&self) -> Result<Vec<WorkerMsg>, OpenError> {
        let mut out: Vec<Option<WorkerMsg>> = (0..self.plans.len()).map(|_| None).collect();
        for _ in 0..self.plans.len() {
            match self.reports.recv() {
                Ok((i, Ok(m))) => out[i] = Some(m),
                Ok((i, Err(e))) => {
                    return Err(OpenError::Failure(format!("load thread {i} failed: {e}")))
                }
                Err(_) => return Err(OpenError::Failure("a load thread panicked".into())),
            }
        }
        Ok(out
            .into_iter()
            .map(|m| m.expect("one per thread"))
            .collect())
    }

    fn phase(
        &self,
        start: Instant,
        end: Instant,
        rate: f64,
        arrivals: Option<u64>,
    ) -> Result<Vec<PhaseReport>, OpenError> {
        let threads = self.plans.len();
        for (t, p) in self.plans.iter().enumerate() {
            let plan = PhasePlan {
                start,
                end,
                rate_per_s: rate / threads as f64,
                offset: Duration::from_secs_f64(t as f64 / rate),
                // Thread t's uniform arrivals are every threads-th one from the t-th: of N, the
                // first N % threads threads get one more (split_evenly's share).
                max_arrivals: arrivals.map(|n| split_evenly(n, threads, t)),
            };
            p.send(plan)
                .map_err(|_| OpenError::Failure("a load thread stopped".into()))?;
        }
        self.recv_all()?
            .into_iter()
            .map(|m| match m {
                WorkerMsg::Phase(r) => Ok(*r),
                WorkerMsg::Connected { .. } => Err(OpenError::Failure(
                    "unexpected message from a load thread".into(),
                )),
            })
            .collect()
    }

    fn stop(self) {
        drop(self.plans);
        for h in self.handles {
            h.join().ok();
        }
    }
}

/// One measured rate, merged over threads.
pub struct StepOut {
    pub rate: f64,
    /// The schedule's length (arrivals happen in it); `outcome.duration` also covers the drain.
    pub schedule: Duration,
    pub outcome: RunOutcome,
    pub open: OpenStats,
    /// A signal ended this phase before its schedule's end.
    pub interrupted: bool,
}

pub fn run(cfg: &Config) -> Result<Document, OpenError> {
    let Mode::Http(h) = &cfg.mode else {
        unreachable!("open loop is http only")
    };
    let o = h.open.as_ref().expect("open-loop config");
    let workers = spawn(cfg, h, o)?;
    let result = drive(cfg, h, o, &workers);
    workers.stop();
    result
}

fn spawn(cfg: &Config, h: &HttpConfig, o: &OpenConfig) -> Result<Workers, OpenError> {
    let (report_tx, reports) = mpsc::channel();
    let mut plans = Vec::new();
    let mut handles = Vec::new();
    let mut first_conn = 0;
    for t in 0..cfg.threads {
        let connections = split_evenly(cfg.connections as u64, cfg.threads, t) as usize;
        let wc = OpenWorkerConfig {
            thread_index: t,
            cpu: (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]),
            target: cfg.target_addr,
            source_ips: cfg.source_ips.clone(),
            first_conn,
            connections,
            timeout: cfg.timeout,
            kind: o.kind,
            arrival: o.arrival,
            seed: h.seed,
            interval: cfg.interval,
            spin: o.spin,
        };
        let exchange = Exchange::for_config(h, t).with_uncorrected();
        first_conn += connections;
        let (tx, rx) = mpsc::channel();
        let rtx = report_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || openloop::run_open_worker(wc, exchange, rx, rtx))
            .map_err(|e| OpenError::Failure(format!("cannot start load thread {t}: {e}")))?;
        plans.push(tx);
        handles.push(handle);
    }
    Ok(Workers {
        plans,
        reports,
        handles,
    })
}

fn drive(cfg: &Config, h: &HttpConfig, o: &OpenConfig, w: &Workers) -> Result<Document, OpenError> {
    let connected = w.recv_all()?;
    let failed: usize = connected
        .iter()
        .map(|m| match m {
            WorkerMsg::Connected { failed } => *failed,
            WorkerMsg::Phase(_) => 0,
        })
        .sum();
    if failed > 0 && matches!(o.kind, LoadKind::Rate) {
        eprintln!(
            "netarena-load: {failed} of {} connections could not be opened before the start; they keep retrying",
            cfg.connections
        );
    }
    let mut warmup = Duration::ZERO;
    if !cfg.warmup.is_zero() {
        let start = Instant::now() + PHASE_LEAD;
        let reports = w.phase(start, start + cfg.warmup, o.base_rate(), None)?;
        let stopped = reports.iter().map(|r| r.stopped_at).max().unwrap_or(start);
        warmup = stopped.saturating_duration_since(start);
    }
    let first_start = if cfg.prepare {
        wait_for_start()?
    } else {
        Instant::now() + PHASE_LEAD
    };

    let _progress = progress::start(first_start, cfg.interval, run::progress_unit(cfg));
    // With --conns-per-step a step lasts as long as its N connections take to start at its rate
    // (the last one starts (N-1)/rate after the first; the step ends one gap later).
    let fixed_length = o.step_duration.or(cfg.duration);
    let length_of = |rate: f64| match o.conns_per_step {
        Some(n) => Duration::from_secs_f64(n as f64 / rate),
        None => fixed_length.expect("a length"),
    };
    let mut steps: Vec<StepOut> = Vec::new();
    let mut next_start = first_start;
    let measure = |rate: f64, start: Instant| -> Result<StepOut, OpenError> {
        let step_duration = length_of(rate);
        let reports = w.phase(start, start + step_duration, rate, o.conns_per_step)?;
        // A SIGINT/SIGTERM during the phase ended its schedule when it arrived: the rate achieved
        // and the throughput are over the part that ran.
        let cut = signals::stopped_at().filter(|&t| t < start + step_duration);
        let schedule = cut.map_or(step_duration, |t| t.saturating_duration_since(start));
        let mut s = merge_reports(rate, start, schedule, warmup, reports);
        s.interrupted = cut.is_some();
        Ok(s)
    };

    if let Some(fm) = &o.find_max {
        let (verdicts, found, why) = find_max(fm, o.base_rate(), |rate| {
            let s = measure(rate, next_start)?;
            next_start = Instant::now() + PHASE_LEAD;
            let v = verdict(cfg, &s, fm, o);
            steps.push(s);
            Ok(v)
        })?;
        let docs: Vec<Document> = steps.iter().map(|s| step_doc(cfg, h, o, s)).collect();
        let mut top = sweep_doc(cfg, h, o, &steps);
        top.steps = Some(docs);
        top.find_max = Some(FindMaxDoc {
            method: "geometric growth (x2) from the start rate until a step fails, then bisection between the highest passing and the lowest failing rate",
            slo: fm.slo.describe(),
            slo_percentile: fm.slo.percentile,
            slo_max_latency_us: fm.slo.max_latency.as_micros() as u64,
            max_errors_fraction: fm.max_errors,
            start_rate_per_s: o.base_rate(),
            growth_factor: FIND_MAX_GROWTH,
            resolution_fraction: fm.resolution,
            limit_rate_per_s: fm.limit,
            found_rate_per_s: found,
            verdicts,
            stopped_because: why,
        });
        return Ok(top);
    }
    if let Some(rates) = &o.steps {
        for &rate in rates {
            // After a SIGINT/SIGTERM no further rate is measured (the first always is, so the
            // sweep has a result; a stopped one is over at once).
            if signals::stop_requested() && !steps.is_empty() {
                break;
            }
            steps.push(measure(rate, next_start)?);
            next_start = Instant::now() + PHASE_LEAD;
        }
        let docs: Vec<Document> = steps.iter().map(|s| step_doc(cfg, h, o, s)).collect();
        let mut top = sweep_doc(cfg, h, o, &steps);
        top.steps = Some(docs);
        return Ok(top);
    }
    let s = measure(o.base_rate(), next_start)?;
    Ok(step_doc(cfg, h, o, &s))
}

/// `--prepare`: announce readiness, then read the start time (Unix ns) from stdin. The closed loop
/// and echo (main.rs) call it too, before their connections open.
pub fn wait_for_start() -> Result<Instant, OpenError> {
    eprintln!("READY {}", sys::unix_now_ns());
    let mut line = String::new();
    let n = std::io::stdin().lock().read_line(&mut line).map_err(|e| {
        OpenError::Failure(format!("--prepare: reading the start time from stdin: {e}"))
    })?;
    if n == 0 {
        return Err(OpenError::Aborted(
            "--prepare: stdin closed before a start time arrived; nothing was measured".into(),
        ));
    }
    let text = line.trim();
    let start_ns: u128 = text.parse().map_err(|_| {
        OpenError::Usage(format!(
            "--prepare: '{text}' is not a start time; write the Unix time in nanoseconds, e.g. {}",
            sys::unix_now_ns() + 1_000_000_000
        ))
    })?;
    let (now_i, now_ns) = (Instant::now(), sys::unix_now_ns());
    if start_ns <= now_ns {
        return Err(OpenError::Usage(format!(
            "--prepare: the start time {start_ns} is {:.3} ms in the past (now {now_ns}); send a time in the future",
            (now_ns - start_ns) as f64 / 1e6
        )));
    }
    let wait = Duration::from_nanos((start_ns - now_ns).min(u128::from(u64::MAX)) as u64);
    if wait > PREPARE_MAX_WAIT {
        return Err(OpenError::Usage(format!(
            "--prepare: the start time {start_ns} is {:.0} s away, more than {:?}; is it in nanoseconds?",
            wait.as_secs_f64(),
            PREPARE_MAX_WAIT
        )));
    }
    Ok(now_i + wait)
}

fn wall_of(t: Instant) -> SystemTime {
    let now = Instant::now();
    let wall = SystemTime::now();
    if t <= now {
        wall - (now - t)
    } else {
        wall + (t - now)
    }
}

fn merge_reports(
    rate: f64,
    start: Instant,
    duration: Duration,
    warmup: Duration,
    reports: Vec<PhaseReport>,
) -> StepOut {
    let mut threads = Vec::new();
    let mut merged: Option<ThreadStats> = None;
    let mut open = OpenStats::new();
    let stopped = reports.iter().map(|r| r.stopped_at).max().unwrap_or(start);
    for r in reports {
        threads.push(ThreadSummary {
            cpu: None,
            cpu_time: r.cpu_time,
            wall_time: r.wall_time,
            user_time: r.user_time,
            sys_time: r.sys_time,
            run_delay: r.run_delay,
            batch_wait_max: None,
        });
        open.merge(&r.open);
        match merged.as_mut() {
            None => merged = Some(r.stats),
            Some(m) => m.merge(&r.stats),
        }
    }
    StepOut {
        rate,
        schedule: duration,
        outcome: RunOutcome {
            stats: merged.expect("at least one thread"),
            threads,
            started_at: wall_of(start),
            // Responses to requests due in the phase count, also when they arrive in the drain:
            // the throughput is over the time it took to answer them.
            duration: stopped.saturating_duration_since(start).max(duration),
            warmup,
            probe: None,
        },
        open,
        interrupted: false,
    }
}

fn step_doc(cfg: &Config, h: &HttpConfig, o: &OpenConfig, s: &StepOut) -> Document {
    let mut doc = output::document(cfg, &s.outcome);
    fix_cpus(cfg, &mut doc);
    doc.no_answer = no_answer(cfg, o, &s.outcome.stats, &s.open);
    doc.open_loop = Some(open_doc(h, o, Some(s.rate), &s.open, s.schedule));
    doc.interrupted = s.interrupted;
    doc
}

fn fix_cpus(cfg: &Config, doc: &mut Document) {
    doc.generator.cpus = if cfg.cpus.is_empty() {
        Vec::new()
    } else {
        (0..cfg.threads)
            .map(|t| cfg.cpus[t % cfg.cpus.len()])
            .collect()
    };
}

/// The whole sweep as one result: counts and histograms merged over the steps, the timeline and
/// the intervals concatenated in the order measured.
fn sweep_doc(cfg: &Config, h: &HttpConfig, o: &OpenConfig, steps: &[StepOut]) -> Document {
    let first = &steps[0].outcome;
    let mut stats = ThreadStats::new(Instant::now(), Instant::now(), None);
    let mut timeline = Vec::new();
    let mut intervals = Vec::new();
    let mut open = OpenStats::new();
    let mut duration = Duration::ZERO;
    let mut threads: Vec<ThreadSummary> = Vec::new();
    for s in steps {
        let st = &s.outcome.stats;
        stats.merge(st);
        let seconds = s.outcome.duration.as_secs_f64().ceil() as usize;
        let mut tl = st.timeline.clone();
        tl.resize(seconds.max(tl.len()), Default::default());
        timeline.extend(tl);
        let offset = (duration.as_nanos() / cfg.interval.as_nanos()) as u64;
        intervals.extend(
            st.intervals
                .done
                .iter()
                .map(|(i, b)| (i + offset, b.clone())),
        );
        // Each step is padded to whole intervals, so the next one starts on a boundary.
        let n = s
            .outcome
            .duration
            .as_nanos()
            .div_ceil(cfg.interval.as_nanos());
        duration += Duration::from_nanos((n * cfg.interval.as_nanos()) as u64);
        open.merge(&s.open);
        for (k, t) in s.outcome.threads.iter().enumerate() {
            if threads.len() <= k {
                threads.push(ThreadSummary {
                    cpu: None,
                    cpu_time: Duration::ZERO,
                    wall_time: Duration::ZERO,
                    user_time: Duration::ZERO,
                    sys_time: Duration::ZERO,
                    run_delay: Some(Duration::ZERO),
                    batch_wait_max: None,
                });
            }
            threads[k].cpu_time += t.cpu_time;
            threads[k].wall_time += t.wall_time;
            threads[k].user_time += t.user_time;
            threads[k].sys_time += t.sys_time;
            // Unknown in any step (no schedstat) is unknown for the run.
            threads[k].run_delay = threads[k].run_delay.zip(t.run_delay).map(|(a, b)| a + b);
        }
    }
    stats.timeline = timeline;
    stats.intervals.done = intervals;
    let measured: Duration = steps.iter().map(|s| s.outcome.duration).sum();
    let scheduled: Duration = steps.iter().map(|s| s.schedule).sum();
    let outcome = RunOutcome {
        stats,
        threads,
        started_at: first.started_at,
        duration: measured,
        warmup: first.warmup,
        probe: None,
    };
    let mut doc = output::document(cfg, &outcome);
    fix_cpus(cfg, &mut doc);
    doc.intervals = output::intervals_doc(&outcome.stats.intervals.done, cfg.interval, duration);
    // Counts summed over the steps; flagged when any step was.
    let per_step: Vec<_> = steps
        .iter()
        .map(|s| no_answer(cfg, o, &s.outcome.stats, &s.open))
        .collect();
    doc.no_answer = output::no_answer_doc(
        per_step.iter().map(|n| n.connections).sum(),
        per_step.iter().map(|n| n.of_connections).sum(),
    );
    doc.no_answer.flagged = per_step.iter().any(|n| n.flagged);
    let mut od = open_doc(h, o, None, &open, scheduled);
    // A sweep is marked when any of its steps was.
    let marked: Vec<String> = steps
        .iter()
        .filter_map(|s| {
            let d = open_doc(h, o, Some(s.rate), &s.open, s.schedule);
            d.rate_not_met
                .then(|| format!("step {}/s: {}", s.rate, d.rate_not_met_reasons.join("; ")))
        })
        .collect();
    od.rate_not_met = !marked.is_empty();
    od.rate_not_met_reasons = marked;
    doc.open_loop = Some(od);
    doc
}

/// Connections left waiting in one step: of the pool (`--rate`) or of the connections started
/// (`--conn-rate`, where each arrival is a connection).
fn no_answer(
    cfg: &Config,
    o: &OpenConfig,
    st: &ThreadStats,
    open: &OpenStats,
) -> output::NoAnswerDoc {
    let of = match o.kind {
        LoadKind::Rate => cfg.connections as u64,
        LoadKind::ConnRate { .. } => open.started,
    };
    output::no_answer_doc(st.unanswered_connections, of)
}

/// Arrivals started before the schedule's end, per second of schedule. Sends made in the drain
/// (due in the phase, sent after it ended because the generator or the pool was behind) do not
/// count: counting them would show a generator that fell behind and caught up as on schedule.
pub fn achieved_rate(s: &OpenStats, schedule: Duration) -> f64 {
    let d = schedule.as_secs_f64();
    if d > 0.0 {
        s.started_in_schedule as f64 / d
    } else {
        0.0
    }
}

pub fn open_doc(
    h: &HttpConfig,
    o: &OpenConfig,
    asked: Option<f64>,
    s: &OpenStats,
    duration: Duration,
) -> OpenLoopDoc {
    let achieved = achieved_rate(s, duration);
    let lag = output::latency_doc(&s.lag);
    let mut reasons = Vec::new();
    if let Some(asked) = asked {
        if achieved < RATE_MET_FRACTION * asked {
            reasons.push(format!(
                "achieved {achieved:.1}/s of the asked {asked}/s (below {:.0}%)",
                RATE_MET_FRACTION * 100.0
            ));
        }
    }
    if s.dropped() > 0 {
        reasons.push(format!(
            "{} arrivals dropped ({} over the backlog/connection cap, {} unsent at the end)",
            s.dropped(),
            s.dropped_overflow,
            s.dropped_unsent
        ));
    }
    if lag.p99_us > LAG_P99_LIMIT.as_micros() as u64 {
        reasons.push(format!(
            "schedule lag p99 {} us above {} us",
            lag.p99_us,
            LAG_P99_LIMIT.as_micros()
        ));
    }
    let (kind, connections) = match o.kind {
        LoadKind::Rate => ("rate", None),
        LoadKind::ConnRate { requests_per_conn } => (
            "conn_rate",
            Some(output::ConnRateDoc {
                requests_per_conn,
                started: s.started,
                completed: s.conns_completed,
                ended_early: s.conns_ended_early,
                failed: s.conns_failed,
                unfinished: s.conns_unfinished,
                lifetime: output::latency_doc(&s.lifetime),
            }),
        ),
    };
    OpenLoopDoc {
        kind,
        arrival: o.arrival.name(),
        seed: h.seed,
        asked_rate_per_s: asked,
        achieved_rate_per_s: achieved,
        intended: s.intended,
        started: s.started,
        late: s.late,
        late_threshold_us: LATE_THRESHOLD.as_micros() as u64,
        dropped: s.dropped(),
        dropped_overflow: s.dropped_overflow,
        dropped_unsent: s.dropped_unsent,
        rate_not_met: !reasons.is_empty(),
        rate_not_met_reasons: reasons,
        latency_uncorrected: output::Latency {
            censored: Some(s.uncorrected_censored),
            ..output::latency_doc(&s.uncorrected)
        },
        schedule_lag: lag,
        spin_us: s.spin.as_micros() as u64,
        spin_auto: s.spin_auto.map(|a| output::SpinAutoDoc {
            timer_lag_p99_us: a.timer_lag_p99.as_micros() as u64,
            send_gap_us: a.send_gap.as_micros() as u64,
            widened: a.widened,
        }),
        spin_wait_s: s.spin_wait.as_secs_f64(),
        connections,
    }
}

/// A step's share of failed attempts (`stats::error_fraction`); a step that attempted nothing
/// counts as all failed, so it can never pass `--max-errors`.
pub fn error_fraction(st: &ThreadStats) -> f64 {
    crate::stats::error_fraction(st.errors_total(), st.requests).unwrap_or(1.0)
}

/// Did this step meet the objective, the error budget and its own schedule?
fn verdict(cfg: &Config, s: &StepOut, fm: &FindMax, o: &OpenConfig) -> StepVerdict {
    let st = &s.outcome.stats;
    let mut reasons = Vec::new();
    let error_fraction = error_fraction(st);
    if error_fraction > fm.max_errors {
        reasons.push(format!(
            "errors {:.3}% above {:.3}%",
            error_fraction * 100.0,
            fm.max_errors * 100.0
        ));
    }
    if st.hist.is_empty() {
        reasons.push("no successful responses".into());
    } else {
        let v = st.hist.value_at_quantile(fm.slo.percentile / 100.0);
        let bound = fm.slo.max_latency.as_micros() as u64;
        if v > bound {
            reasons.push(format!(
                "corrected p{} {} us above {} us",
                fm.slo.percentile, v, bound
            ));
        }
    }
    let achieved = achieved_rate(&s.open, s.schedule);
    if achieved < RATE_MET_FRACTION * s.rate || s.open.dropped() > 0 {
        reasons.push(format!(
            "rate not met: achieved {achieved:.1}/s of {}/s",
            s.rate
        ));
    }
    let na = no_answer(cfg, o, st, &s.open);
    if na.flagged {
        reasons.push(format!(
            "{} of {} connections got no answer",
            na.connections, na.of_connections
        ));
    }
    StepVerdict {
        rate_per_s: s.rate,
        passed: reasons.is_empty(),
        reasons,
    }
}

/// The search itself, separate from measuring so it can be tested with a model of a server.
/// Returns the verdicts in order, the highest passing rate, and why it stopped.
pub fn find_max(
    fm: &FindMax,
    start: f64,
    mut measure: impl FnMut(f64) -> Result<StepVerdict, OpenError>,
) -> Result<(Vec<StepVerdict>, Option<f64>, String), OpenError> {
    let mut verdicts = Vec::new();
    let (mut pass, mut fail): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = start;
    let why = loop {
        if !verdicts.is_empty() && signals::stop_requested() {
            break "interrupted by a signal".to_string();
        }
        if verdicts.len() >= FIND_MAX_MAX_STEPS {
            break format!("measured {FIND_MAX_MAX_STEPS} steps (FIND_MAX_MAX_STEPS)");
        }
        let v = measure(rate)?;
        let passed = v.passed;
        verdicts.push(v);
        if passed {
            pass = Some(rate);
        } else {
            fail = Some(rate);
        }
        match (pass, fail) {
            (None, Some(_)) => {
                break "the start rate already fails; lower --rate/--conn-rate".into()
            }
            (Some(p), None) => {
                if p >= fm.limit {
                    break format!(
                        "reached --find-max-limit {} with every step passing",
                        fm.limit
                    );
                }
                rate = (p * FIND_MAX_GROWTH).min(fm.limit);
            }
            (Some(p), Some(f)) => {
                if (f - p) / p <= fm.resolution {
                    break format!(
                        "passing {p}/s and failing {f}/s are within the resolution {:.1}%",
                        fm.resolution * 100.0
                    );
                }
                rate = ((p + f) / 2.0).round().max(p + 1.0);
                if rate >= f {
                    break format!("passing {p}/s and failing {f}/s are adjacent");
                }
            }
            (None, None) => unreachable!(),
        }
    };
    Ok((verdicts, pass, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::parse_slo;

    fn fm() -> FindMax {
        FindMax {
            slo: parse_slo("p99<=50ms").unwrap(),
            max_errors: 0.001,
            resolution: 0.05,
            limit: 1e6,
        }
    }

    #[test]
    fn error_fraction_counts_a_bad_response_once() {
        use crate::stats::ErrorClass;
        let t0 = Instant::now();
        let mut st = ThreadStats::new(t0, t0 + Duration::from_secs(10), None);
        let now = t0 + Duration::from_millis(1);
        let lat = Duration::from_micros(100);
        for _ in 0..98 {
            st.response(now, lat, true);
        }
        // A 500: a complete response, and a status error.
        st.response(now, lat, false);
        st.status_error(500);
        st.error(now, ErrorClass::Status, || "status 500".into());
        // A timeout: an error without a response.
        st.error(now, ErrorClass::Timeout, || "timeout".into());
        assert_eq!((st.requests, st.responses, st.errors_total()), (98, 99, 2));
        // 2 of 100 attempts failed (not 2 of 101).
        assert_eq!(error_fraction(&st), 0.02);
        let empty = ThreadStats::new(t0, t0 + Duration::from_secs(1), None);
        assert_eq!(error_fraction(&empty), 1.0);
    }

    #[test]
    fn achieved_rate_counts_only_sends_started_in_the_schedule() {
        let mut s = OpenStats::new();
        s.intended = 20_000;
        // Half went out on time; the other half were caught up in the drain.
        s.started = 20_000;
        s.started_in_schedule = 10_000;
        assert_eq!(achieved_rate(&s, Duration::from_secs(2)), 5_000.0);
        assert_eq!(achieved_rate(&s, Duration::ZERO), 0.0);
    }

    #[test]
    fn search_grows_then_bisects_to_the_capacity() {
        let capacity = 3170.0;
        let (v, found, why) = find_max(&fm(), 100.0, |r| {
            Ok(StepVerdict {
                rate_per_s: r,
                passed: r <= capacity,
                reasons: vec![],
            })
        })
        .unwrap_or_else(|_| panic!());
        let rates: Vec<f64> = v.iter().map(|s| s.rate_per_s).collect();
        assert_eq!(
            &rates[..7],
            &[100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 2400.0]
        );
        let found = found.unwrap();
        assert!(
            found <= capacity && found >= capacity * 0.95,
            "{found} {rates:?}"
        );
        assert!(why.contains("resolution"), "{why}");
    }

    #[test]
    fn search_reports_a_failing_start_and_the_limit() {
        let (v, found, why) = find_max(&fm(), 100.0, |r| {
            Ok(StepVerdict {
                rate_per_s: r,
                passed: false,
                reasons: vec![],
            })
        })
        .unwrap_or_else(|_| panic!());
        assert_eq!((v.len(), found), (1, None));
        assert!(why.contains("start rate"));
        let mut f = fm();
        f.limit = 500.0;
        let (v, found, _) = find_max(&f, 100.0, |r| {
            Ok(StepVerdict {
                rate_per_s: r,
                passed: true,
                reasons: vec![],
            })
        })
        .unwrap_or_else(|_| panic!());
        assert_eq!(found, Some(500.0));
        assert_eq!(v.last().unwrap().rate_per_s, 500.0);
    }
}
