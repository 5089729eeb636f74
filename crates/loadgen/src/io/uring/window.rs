//! `--coalesce-us auto` keeps its window only where it saves CPU.
//!
//! A coalescing window (io_uring min-wait) pays when completions arrive in bunches: one wake-up then
//! serves many responses. Where they trickle in, each wait runs its timer out and the arming, firing
//! and cancelling of that timer is added to every wait instead. On this machine's VM, against Go's
//! net/http server (one thread, 50 connections), the window raised the generator's CPU per request
//! from 8.7 to 13.4 µs and its busy share from 0.65 to 0.95, while against nginx it lowered it from
//! 6.6 to 5.6 µs (bench/RESULTS.md). Which one a server gets cannot be known in advance, so it is
//! measured: short epochs with the window on and off in adjacent pairs, each pair's ratio of thread
//! CPU time per response taken, and the cheaper kept for a while before the next trial (servers and
//! machines change during a run). The trial needs no clock of its own: the engine's loop passes its
//! time.
//!
//! Why pairs: a shared VM changes speed in steps (runs of the same command fall into a fast and a
//! slow group, bench/RESULTS.md). A median over all on-epochs against a median over all off-epochs
//! can turn a step in the middle of a trial into a false verdict (the side whose epochs mostly came
//! after the step looks dearer); a pair's two epochs, 100 ms apart, nearly always meet the same
//! speed, and the median over the pairs ignores the one that straddles a step.

use std::time::{Duration, Instant};

/// One epoch of the trial: long enough for thousands of responses at typical rates, short enough
/// that a trial (TRIAL_ORDER.len() epochs) is a small part of a 10 s run.
pub const EPOCH: Duration = Duration::from_millis(100);
/// Whether the window is on in each epoch of a trial: pairs of adjacent epochs, one with and one
/// without, whose order alternates from pair to pair (on-off, off-on, ...) so that a steady drift
/// of the machine during the trial favours neither side.
pub const TRIAL_ORDER: [bool; 8] = [true, false, false, true, true, false, false, true];
/// Epochs the decision holds before the next trial.
pub const SETTLED_EPOCHS: u32 = 50;
/// An epoch with fewer responses is extended: its CPU per response would be mostly noise.
pub const MIN_EPOCH_RESPONSES: u64 = 64;
/// The window is kept only if the median over the pairs of (CPU per response with it / without it)
/// is at least this much below 1: a tie goes to no window, which adds nothing to measured latencies.
pub const MIN_SAVING: f64 = 0.02;

#[derive(Debug)]
pub struct WindowTrial {
    on: bool,
    /// Where the current epoch started: time, the thread's CPU time, responses completed.
    epoch: Option<(Instant, Duration, u64)>,
    /// CPU seconds per response of the current trial's epochs so far, in TRIAL_ORDER.
    costs: Vec<f64>,
    /// Epochs left before the next trial; 0 while a trial runs.
    settled_left: u32,
    /// The first epoch carries the connections' set-up: it is not compared.
    first_epoch: bool,
}

impl Default for WindowTrial {
    fn default() -> Self {
        WindowTrial {
            on: TRIAL_ORDER[0],
            epoch: None,
            costs: Vec::new(),
            settled_left: 0,
            first_epoch: true,
        }
    }
}

impl WindowTrial {
    /// Whether the window applies to the next wait. `responses` counts every completed response of
    /// the thread (warm-up included, never reset); `thread_cpu` is called only when an epoch ends.
    pub fn window_on(
        &mut self,
        now: Instant,
        responses: u64,
        thread_cpu: impl FnOnce() -> Duration,
    ) -> bool {
        match self.epoch {
            None => self.epoch = Some((now, thread_cpu(), responses)),
            Some((start, cpu, done)) => {
                let answered = responses.saturating_sub(done);
                if now.saturating_duration_since(start) >= EPOCH && answered >= MIN_EPOCH_RESPONSES
                {
                    let cpu_now = thread_cpu();
                    let per_response = cpu_now.saturating_sub(cpu).as_secs_f64() / answered as f64;
                    self.epoch = Some((now, cpu_now, responses));
                    self.epoch_ended(per_response);
                }
            }
        }
        self.on
    }

    fn epoch_ended(&mut self, per_response: f64) {
        if std::mem::take(&mut self.first_epoch) {
            return;
        }
        if self.settled_left > 0 {
            self.settled_left -= 1;
            if self.settled_left == 0 {
                self.costs.clear();
                self.on = TRIAL_ORDER[0];
            }
            return;
        }
        self.costs.push(per_response);
        if self.costs.len() == TRIAL_ORDER.len() {
            let mut ratios: Vec<f64> = self
                .costs
                .chunks(2)
                .zip(TRIAL_ORDER.chunks(2))
                .map(|(cost, on)| {
                    let (with, without) = if on[0] {
                        (cost[0], cost[1])
                    } else {
                        (cost[1], cost[0])
                    };
                    with / without
                })
                .collect();
            // Of an even count the upper middle: a close call goes to no window.
            ratios.sort_by(f64::total_cmp);
            self.on = ratios[ratios.len() / 2] < 1.0 - MIN_SAVING;
            self.settled_left = SETTLED_EPOCHS;
        } else {
            self.on = TRIAL_ORDER[self.costs.len()];
        }
    }
}

/// `--coalesce-us auto`: responses per re-estimate of the window.
pub(crate) const AUTO_SAMPLE: u32 = 256;
/// `--coalesce-us auto`: the window is at most 1/AUTO_FRACTION_DIV (5%) of the fastest response
/// latency among the last AUTO_SAMPLE, so what batching adds to a measured latency stays within 5%
/// of it, far inside this machine's run-to-run noise (15-40%).
const AUTO_FRACTION_DIV: u128 = 20;
/// `--coalesce-us auto` never waits longer than this (most of the saving is reached well below).
const AUTO_MAX_US: u32 = 50;

/// The automatic coalescing window for a fastest recent latency: 5% of it, at most AUTO_MAX_US;
/// below 1 µs (sub-20 µs exchanges, e.g. one connection) there is no coalescing at all.
pub fn auto_window_us(fastest: Duration) -> u32 {
    (fastest.as_micros() / AUTO_FRACTION_DIV).min(u128::from(AUTO_MAX_US)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a trial through epochs whose CPU per response depends on whether the window was on
    /// and on the epoch's number (1 = the first, uncompared one).
    fn run_epochs(
        trial: &mut WindowTrial,
        epochs: u32,
        cost: impl Fn(bool, u32) -> Duration,
    ) -> Vec<bool> {
        let start = Instant::now();
        let (mut cpu, mut responses) = (Duration::ZERO, 0u64);
        let mut states = Vec::new();
        trial.window_on(start, responses, || cpu);
        for e in 1..=epochs {
            let on = trial.on;
            states.push(on);
            responses += 1000;
            cpu += cost(on, e) * 1000;
            trial.window_on(start + EPOCH * e, responses, || cpu);
        }
        states
    }

    #[test]
    fn a_window_that_costs_cpu_is_dropped_after_one_trial_and_tried_again_later() {
        let mut trial = WindowTrial::default();
        let states = run_epochs(
            &mut trial,
            (1 + TRIAL_ORDER.len()) as u32 + SETTLED_EPOCHS + 1,
            |on, _| Duration::from_nanos(if on { 13_000 } else { 9_000 }),
        );
        // The first epoch (set-up) is not compared, then the trial's order, then off while
        // settled, then a new trial, starting with the window on.
        let trial_end = 1 + TRIAL_ORDER.len();
        assert_eq!(&states[1..trial_end], &TRIAL_ORDER);
        let settled = &states[trial_end..trial_end + SETTLED_EPOCHS as usize];
        assert!(settled.iter().all(|&on| !on), "{states:?}");
        assert_eq!(states.len(), trial_end + SETTLED_EPOCHS as usize + 1);
        assert!(
            *states.last().unwrap(),
            "a new trial starts with the window on"
        );
    }

    #[test]
    fn a_window_that_saves_cpu_is_kept() {
        let mut trial = WindowTrial::default();
        let states = run_epochs(&mut trial, 2 + TRIAL_ORDER.len() as u32 + 5, |on, _| {
            Duration::from_nanos(if on { 5_600 } else { 6_600 })
        });
        assert!(states[1 + TRIAL_ORDER.len()..].iter().all(|&on| on));
    }

    #[test]
    fn a_tie_goes_to_no_window() {
        let mut trial = WindowTrial::default();
        let states = run_epochs(&mut trial, 2 + TRIAL_ORDER.len() as u32 + 3, |on, _| {
            Duration::from_nanos(if on { 9_900 } else { 10_000 })
        });
        assert!(states[1 + TRIAL_ORDER.len()..].iter().all(|&on| !on));
    }

    #[test]
    fn a_step_in_the_machines_speed_during_a_trial_does_not_decide_it() {
        // The window saves 10%; the machine becomes twice as fast, or twice as slow, from some
        // epoch of the trial on. The verdict must be the window's, wherever the step falls: compared
        // as two medians (all on-epochs against all off-epochs), a step mid-trial made the side
        // whose epochs came mostly before it look dearer or cheaper.
        for step_epoch in 2..=(1 + TRIAL_ORDER.len() as u32) {
            for (before, after) in [(10_000u64, 5_000u64), (5_000, 10_000)] {
                let mut trial = WindowTrial::default();
                let states = run_epochs(&mut trial, 2 + TRIAL_ORDER.len() as u32, |on, e| {
                    let base = if e < step_epoch { before } else { after };
                    Duration::from_nanos(if on { base * 9 / 10 } else { base })
                });
                assert!(
                    states[1 + TRIAL_ORDER.len()],
                    "step at epoch {step_epoch} ({before} -> {after} ns): window dropped, {states:?}"
                );
            }
        }
    }

    #[test]
    fn an_epoch_waits_for_enough_responses() {
        let mut trial = WindowTrial::default();
        let start = Instant::now();
        trial.window_on(start, 0, || Duration::ZERO);
        trial.window_on(start + EPOCH, MIN_EPOCH_RESPONSES, || Duration::ZERO); // first epoch, not compared
        let mut cpu_read = false;
        trial.window_on(start + EPOCH * 3, MIN_EPOCH_RESPONSES + 1, || {
            cpu_read = true;
            Duration::ZERO
        });
        assert!(!cpu_read, "an epoch of 1 response must not end");
        assert!(trial.on && trial.costs.is_empty());
    }

    #[test]
    fn auto_window_is_five_percent_of_the_fastest_latency_capped() {
        let us = Duration::from_micros;
        assert_eq!(
            auto_window_us(us(19)),
            0,
            "one fast connection: no coalescing"
        );
        assert_eq!(auto_window_us(us(40)), 2);
        assert_eq!(auto_window_us(us(700)), 35);
        assert_eq!(auto_window_us(us(5_000)), AUTO_MAX_US);
        assert_eq!(auto_window_us(Duration::MAX), AUTO_MAX_US);
    }
}
