//! Runs the open-loop modes: starts the workers, runs the warm-up, the `--prepare` barrier, then
//! one phase per measured rate (a single `--rate`, the `--steps` sweep, or the `--find-max`
//! search); each measured rate is one `RunOutcome`, and `output` turns them into the document.

use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, FindMax, HttpConfig, LoadKind, Mode, OpenConfig, FIND_MAX_MAX_STEPS};
use crate::error::RunError;
use crate::exchange::Exchange;
use crate::load::open::{
    self as openloop, OpenStats, OpenWorkerConfig, PhasePlan, PhaseReport, WorkerMsg,
};
use crate::load::run::{self, split_evenly, OpenOutcome, RunOutcome};
use crate::stats::{self, ThreadStats};
use crate::{progress, signals};

/// A measured step whose achieved rate is below this fraction of the asked one is marked
/// `rate_not_met`.
pub const RATE_MET_FRACTION: f64 = 0.99;
/// ... as is one whose schedule lag p99 exceeds this.
pub const LAG_P99_LIMIT: Duration = Duration::from_millis(1);
/// Phases start this long after they are planned, so every thread gets the plan before its start.
const PHASE_LEAD: Duration = Duration::from_millis(5);
/// `--find-max` doubles the rate while it passes.
pub const FIND_MAX_GROWTH: f64 = 2.0;

struct Workers {
    plans: Vec<mpsc::Sender<PhasePlan>>,
    reports: mpsc::Receiver<(usize, std::io::Result<WorkerMsg>)>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    fn recv_all(&self) -> Result<Vec<WorkerMsg>, RunError> {
        let mut out: Vec<Option<WorkerMsg>> = (0..self.plans.len()).map(|_| None).collect();
        for _ in 0..self.plans.len() {
            match self.reports.recv() {
                Ok((i, Ok(m))) => out[i] = Some(m),
                Ok((i, Err(e))) => {
                    return Err(RunError::Failure(format!("load thread {i} failed: {e}")))
                }
                Err(_) => return Err(RunError::Failure("a load thread panicked".into())),
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
    ) -> Result<Vec<PhaseReport>, RunError> {
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
                .map_err(|_| RunError::Failure("a load thread stopped".into()))?;
        }
        self.recv_all()?
            .into_iter()
            .map(|m| match m {
                WorkerMsg::Phase(r) => Ok(*r),
                WorkerMsg::Connected { .. } => Err(RunError::Failure(
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

/// Every measured rate's outcome in order, and the `--find-max` search if there was one
/// (`result::document::open_loop_document` turns them into the result).
pub fn run(cfg: &Config) -> Result<(Vec<RunOutcome>, Option<FindMaxSearch>), RunError> {
    let Mode::Http(h) = &cfg.mode else {
        unreachable!("open loop is http only")
    };
    let o = h.open.as_ref().expect("open-loop config");
    let workers = spawn(cfg, h, o)?;
    let result = drive(cfg, o, &workers);
    workers.stop();
    result
}

/// What `--find-max` found: the verdict on every measured rate in order, the highest passing rate,
/// and why the search stopped.
pub struct FindMaxSearch {
    pub verdicts: Vec<StepVerdict>,
    pub found: Option<f64>,
    pub stopped_because: String,
}

fn spawn(cfg: &Config, h: &HttpConfig, o: &OpenConfig) -> Result<Workers, RunError> {
    let (report_tx, reports) = mpsc::channel();
    let mut plans = Vec::new();
    let mut handles = Vec::new();
    for share in run::thread_shares(cfg) {
        let t = share.index;
        let wc = OpenWorkerConfig {
            conns: share.conns(cfg),
            io: cfg.io,
            kind: o.kind,
            arrival: o.arrival,
            seed: h.seed,
            interval: cfg.interval,
            spin: o.spin,
        };
        let exchange = Exchange::for_config(h, t).with_uncorrected();
        let (tx, rx) = mpsc::channel();
        let rtx = report_tx.clone();
        let handle =
            run::spawn_load_thread(t, move || openloop::run_open_worker(wc, exchange, rx, rtx))?;
        plans.push(tx);
        handles.push(handle);
    }
    Ok(Workers {
        plans,
        reports,
        handles,
    })
}

/// Connect, warm up, wait for `--prepare`'s start, then measure every rate asked: one outcome per
/// measured rate, in order, and the `--find-max` search if there was one.
fn drive(
    cfg: &Config,
    o: &OpenConfig,
    w: &Workers,
) -> Result<(Vec<RunOutcome>, Option<FindMaxSearch>), RunError> {
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
        let stopped = reports
            .iter()
            .map(|r| r.result.stopped_at)
            .max()
            .unwrap_or(start);
        warmup = stopped.saturating_duration_since(start);
    }
    let first_start = if cfg.prepare {
        run::wait_for_start()?
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
    let mut steps: Vec<RunOutcome> = Vec::new();
    let mut next_start = first_start;
    let measure = |rate: f64, start: Instant| -> Result<RunOutcome, RunError> {
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
            let v = verdict(cfg, &s, fm);
            steps.push(s);
            Ok(v)
        })?;
        let search = FindMaxSearch {
            verdicts,
            found,
            stopped_because: why,
        };
        return Ok((steps, Some(search)));
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
        return Ok((steps, None));
    }
    steps.push(measure(o.base_rate(), next_start)?);
    Ok((steps, None))
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
    schedule: Duration,
    warmup: Duration,
    reports: Vec<PhaseReport>,
) -> RunOutcome {
    let stopped = reports
        .iter()
        .map(|r| r.result.stopped_at)
        .max()
        .unwrap_or(start);
    let mut open = OpenStats::new();
    let mut results = Vec::with_capacity(reports.len());
    for r in reports {
        open.merge(&r.open);
        results.push(r.result);
    }
    let (stats, threads) = run::merge_threads(results);
    RunOutcome {
        stats,
        threads,
        started_at: wall_of(start),
        // Responses to requests due in the phase count, also when they arrive in the drain:
        // the throughput is over the time it took to answer them.
        duration: stopped.saturating_duration_since(start).max(schedule),
        warmup,
        probe: None,
        open: Some(OpenOutcome {
            rate,
            schedule,
            stats: open,
        }),
        interrupted: false,
    }
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

/// The verdict of `--find-max` on one measured rate.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct StepVerdict {
    pub rate_per_s: f64,
    pub passed: bool,
    pub reasons: Vec<String>,
}

/// A step's share of failed attempts (`stats::error_fraction`); a step that attempted nothing
/// counts as all failed, so it can never pass `--max-errors`.
pub fn error_fraction(st: &ThreadStats) -> f64 {
    crate::stats::error_fraction(st.errors_total(), st.requests).unwrap_or(1.0)
}

/// Did this step meet the objective, the error budget and its own schedule?
fn verdict(cfg: &Config, s: &RunOutcome, fm: &FindMax) -> StepVerdict {
    let st = &s.stats;
    let step = s.open.as_ref().expect("an open-loop step");
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
    let achieved = achieved_rate(&step.stats, step.schedule);
    if achieved < RATE_MET_FRACTION * step.rate || step.stats.dropped() > 0 {
        reasons.push(format!(
            "rate not met: achieved {achieved:.1}/s of {}/s",
            step.rate
        ));
    }
    let (waiting, of) = (st.unanswered_connections, s.connections_used(cfg));
    if stats::no_answer_flagged(waiting, of) {
        reasons.push(format!("{waiting} of {of} connections got no answer"));
    }
    StepVerdict {
        rate_per_s: step.rate,
        passed: reasons.is_empty(),
        reasons,
    }
}

/// The search itself, separate from measuring so it can be tested with a model of a server.
/// Returns the verdicts in order, the highest passing rate, and why it stopped.
pub fn find_max(
    fm: &FindMax,
    start: f64,
    mut measure: impl FnMut(f64) -> Result<StepVerdict, RunError>,
) -> Result<(Vec<StepVerdict>, Option<f64>, String), RunError> {
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
    use crate::sweep::parse_slo;

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
