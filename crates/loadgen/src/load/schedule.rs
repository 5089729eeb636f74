//! Open-loop load models: when each request (or connection) is meant to start, independent of how
//! fast the server answers (the seeded RNG is `rng`'s; the rate sweep's `--steps`, `--slo` and
//! `--max-errors` are parsed in `sweep`).
//!
//! Intended times are computed from the phase start and the arrival index (uniform) or by summing
//! seeded exponential gaps (poisson), never from the time a previous request actually went out:
//! a late send must not push the rest of the schedule back, or the generator would quietly slow
//! down with the server (coordinated omission).

use std::time::{Duration, Instant};

use crate::config::Arrival;
use crate::rng::Rng;

/// The intended start times of one thread's share of a phase.
pub struct Schedule {
    arrival: Arrival,
    start: Instant,
    rate_per_s: f64,
    index: u64,
    /// Poisson: seconds from `start` to the next arrival (summed in f64, ns precision for days).
    offset_s: f64,
    rng: Rng,
    next: Instant,
}

impl Schedule {
    pub fn new(arrival: Arrival, rate_per_s: f64, start: Instant, rng: Rng) -> Self {
        assert!(rate_per_s > 0.0, "a schedule needs a positive rate");
        let mut s = Schedule {
            arrival,
            start,
            rate_per_s,
            index: 0,
            offset_s: 0.0,
            rng,
            next: start,
        };
        // The first poisson arrival is one gap after the start, like every other one; the first
        // uniform one is at the start itself.
        if arrival == Arrival::Poisson {
            s.offset_s = s.gap_s();
            s.next = start + Duration::from_secs_f64(s.offset_s);
        }
        s
    }

    fn gap_s(&mut self) -> f64 {
        -self.rng.next_open01().ln() / self.rate_per_s
    }

    /// Uniform: shift every arrival by `offset`. With T threads sharing a rate R, thread t starts
    /// t/R after the phase start, so the threads' combined arrivals are evenly spaced 1/R apart
    /// instead of coming in bursts of T at the same instant. Poisson streams are independent and
    /// need no offset (merged independent poisson streams are poisson).
    pub fn with_offset(mut self, offset: Duration) -> Self {
        if self.arrival == Arrival::Uniform {
            self.start += offset;
            self.next = self.start;
        }
        self
    }

    /// The next intended time (not yet consumed).
    #[inline]
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Consume the next intended time and compute the one after it.
    #[inline]
    pub fn advance(&mut self) -> Instant {
        let t = self.next;
        self.index += 1;
        self.next = match self.arrival {
            // From the index, not by adding a rounded period: no drift over millions of arrivals.
            Arrival::Uniform => {
                self.start + Duration::from_secs_f64(self.index as f64 / self.rate_per_s)
            }
            Arrival::Poisson => {
                self.offset_s += self.gap_s();
                self.start + Duration::from_secs_f64(self.offset_s)
            }
        };
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_times_are_exact_multiples() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Arrival::Uniform, 10_000.0, t0, Rng::new(1));
        let times: Vec<Instant> = (0..100_001).map(|_| s.advance()).collect();
        assert_eq!(times[0], t0);
        assert_eq!(times[1] - t0, Duration::from_micros(100));
        // No drift: arrival 100000 is exactly 10 s in.
        assert_eq!(times[100_000] - t0, Duration::from_secs(10));
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_spread_and_repeat_with_the_seed() {
        let t0 = Instant::now();
        let n = 200_000;
        let gaps = |seed| {
            let mut s = Schedule::new(Arrival::Poisson, 1000.0, t0, Rng::new(seed));
            let mut prev = t0;
            (0..n)
                .map(|_| {
                    let t = s.advance();
                    let g = (t - prev).as_secs_f64();
                    prev = t;
                    g
                })
                .collect::<Vec<f64>>()
        };
        let a = gaps(42);
        assert_eq!(a, gaps(42), "same seed, same schedule");
        assert_ne!(a, gaps(43));
        let mean = a.iter().sum::<f64>() / n as f64;
        let var = a.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        // Exponential with rate 1000/s: mean = stdev = 1 ms. With 200k samples the standard error
        // of the mean is 1/sqrt(200k) ≈ 0.2%, so 2% is a wide margin that still catches a wrong
        // distribution (uniform gaps would have stdev 0).
        assert!((mean - 1e-3).abs() < 2e-5, "mean gap {mean}");
        assert!((var.sqrt() - 1e-3).abs() < 3e-5, "stdev {}", var.sqrt());
        // Memorylessness shows as P(gap > mean) = 1/e.
        let above = a.iter().filter(|&&g| g > 1e-3).count() as f64 / n as f64;
        assert!(
            (above - (-1f64).exp()).abs() < 0.01,
            "P(gap > mean) = {above}"
        );
    }

    #[test]
    fn thread_offsets_space_the_combined_uniform_schedule_evenly() {
        let t0 = Instant::now();
        let (total, threads) = (10_000.0, 4usize);
        let mut all: Vec<Instant> = Vec::new();
        for t in 0..threads {
            let offset = Duration::from_secs_f64(t as f64 / total);
            let mut s = Schedule::new(Arrival::Uniform, total / threads as f64, t0, Rng::new(1))
                .with_offset(offset);
            all.extend((0..1000).map(|_| s.advance()));
        }
        all.sort();
        assert_eq!(all[0], t0);
        for (k, w) in all.windows(2).enumerate() {
            let gap = (w[1] - w[0]).as_nanos() as i64;
            assert!(
                (gap - 100_000).abs() <= 2,
                "gap {k}: {gap} ns (want 100 us)"
            );
        }
        // Poisson ignores the offset: its streams are independent already.
        let a = Schedule::new(Arrival::Poisson, 100.0, t0, Rng::new(3)).next();
        let b = Schedule::new(Arrival::Poisson, 100.0, t0, Rng::new(3))
            .with_offset(Duration::from_millis(5))
            .next();
        assert_eq!(a, b);
    }
}
