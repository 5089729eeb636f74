//! Open-loop load models: when each request (or connection) is meant to start, independent of how
//! fast the server answers. Also the small languages that describe a rate sweep: `--steps`,
//! `--slo` and `--max-errors`.
//!
//! Intended times are computed from the phase start and the arrival index (uniform) or by summing
//! seeded exponential gaps (poisson), never from the time a previous request actually went out:
//! a late send must not push the rest of the schedule back, or the generator would quietly slow
//! down with the server (coordinated omission).

use std::time::{Duration, Instant};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and every seed (0 included) gives a
/// full-period, well-mixed stream. Used for poisson gaps and random URL picks, so a run is
/// repeatable from its recorded seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Independent stream for thread `index` of a run seeded with `seed`.
    pub fn for_thread(seed: u64, index: usize, purpose: u64) -> Self {
        let mut r = Rng(seed ^ purpose.wrapping_mul(0xA076_1D64_78BD_642F));
        for _ in 0..=index {
            r.next_u64();
        }
        Rng(r.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1]: never 0, so `-ln(u)` is finite.
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (Lemire's multiply-shift; the bias for n << 2^64 is negligible).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Uniform,
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

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

/// `--steps LOW:HIGH:STEP`: LOW, LOW+STEP, ... up to HIGH inclusive (a last partial step is not
/// added: the rates are exactly the ones the user can compute by hand).
pub fn parse_steps(text: &str) -> Result<Vec<f64>, String> {
    let bad = |why: &str| {
        format!("--steps '{text}': {why}; write LOW:HIGH:STEP in requests (or connections) per second, e.g. 50:1500:50")
    };
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 3 {
        return Err(bad("expected three numbers separated by ':'"));
    }
    let mut v = [0.0f64; 3];
    for (slot, p) in v.iter_mut().zip(&parts) {
        *slot = p
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| bad(&format!("'{p}' is not a positive number")))?;
    }
    let [low, high, step] = v;
    if high < low {
        return Err(bad("HIGH is below LOW"));
    }
    let count = ((high - low) / step + 1e-9).floor() as u64 + 1;
    if count > MAX_STEPS as u64 {
        return Err(bad(&format!(
            "that is {count} steps, more than {MAX_STEPS}; use a larger STEP"
        )));
    }
    Ok((0..count).map(|i| low + i as f64 * step).collect())
}

pub const MAX_STEPS: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    /// Percentile in (0, 100), e.g. 99.0 or 99.9.
    pub percentile: f64,
    pub max_latency: Duration,
}

impl Slo {
    pub fn describe(&self) -> String {
        format!("p{}<={:?}", self.percentile, self.max_latency)
    }
}

/// `--slo 'p99<=50ms'`: a latency percentile and its bound.
pub fn parse_slo(text: &str) -> Result<Slo, String> {
    let bad = |why: String| {
        format!("--slo '{text}': {why}; write pPERCENTILE<=DURATION, e.g. 'p99<=50ms' or 'p99.9<=200ms'")
    };
    let t = text.trim();
    let rest = t
        .strip_prefix('p')
        .or_else(|| t.strip_prefix('P'))
        .ok_or_else(|| bad("it must start with p".into()))?;
    let (pct, bound) = rest
        .split_once("<=")
        .ok_or_else(|| bad("missing '<='".into()))?;
    let percentile: f64 = pct
        .trim()
        .parse()
        .ok()
        .filter(|p: &f64| *p > 0.0 && *p < 100.0)
        .ok_or_else(|| bad(format!("'{pct}' is not a percentile between 0 and 100")))?;
    let max_latency = crate::parse::parse_duration(bound.trim()).map_err(bad)?;
    if max_latency.is_zero() {
        return Err(bad("the bound must be longer than 0".into()));
    }
    Ok(Slo {
        percentile,
        max_latency,
    })
}

/// `--max-errors 0.1%` (or a fraction, 0.001): errors / (requests answered + errors) allowed.
pub fn parse_error_budget(text: &str) -> Result<f64, String> {
    parse_fraction(text).map_err(|e| format!("--max-errors {e}"))
}

/// A share of something: a percentage (`0.1%`) or a fraction (`0.001`), between 0 and 100%; the
/// value returned is the fraction. The error starts with the text quoted, for the caller to prefix
/// with the option it came from.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (t, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|x| x / scale)
        .filter(|x| (0.0..=1.0).contains(x))
        .ok_or_else(|| {
            format!("'{text}': give a percentage like 0.1% or a fraction like 0.001, between 0 and 100%")
        })
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

    #[test]
    fn thread_streams_differ() {
        let mut a = Rng::for_thread(7, 0, 1);
        let mut b = Rng::for_thread(7, 1, 1);
        let mut c = Rng::for_thread(7, 0, 2);
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert!(x != y && x != z && y != z);
        assert_eq!(Rng::for_thread(7, 0, 1).next_u64(), x);
        let mut r = Rng::new(3);
        let mut seen = [0u32; 5];
        for _ in 0..50_000 {
            seen[r.below(5)] += 1;
        }
        assert!(
            seen.iter().all(|&n| (9_000..11_000).contains(&n)),
            "{seen:?}"
        );
    }

    #[test]
    fn steps_parse() {
        assert_eq!(
            parse_steps("50:200:50").unwrap(),
            vec![50.0, 100.0, 150.0, 200.0]
        );
        assert_eq!(parse_steps("100:250:100").unwrap(), vec![100.0, 200.0]);
        assert_eq!(parse_steps("0.5:1.5:0.5").unwrap(), vec![0.5, 1.0, 1.5]);
        assert_eq!(parse_steps("7:7:1").unwrap(), vec![7.0]);
        for bad in [
            "", "1:2", "1:2:3:4", "a:2:1", "5:1:1", "0:10:1", "1:10:0", "1:1e9:1", "-1:2:1",
        ] {
            let e = parse_steps(bad).unwrap_err();
            assert!(
                e.contains("--steps") && e.contains("LOW:HIGH:STEP"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn slo_parse() {
        assert_eq!(
            parse_slo("p99<=50ms").unwrap(),
            Slo {
                percentile: 99.0,
                max_latency: Duration::from_millis(50)
            }
        );
        assert_eq!(
            parse_slo(" p99.9 <= 200ms ").unwrap(),
            Slo {
                percentile: 99.9,
                max_latency: Duration::from_millis(200)
            }
        );
        assert_eq!(
            parse_slo("p50<=1.5").unwrap().max_latency,
            Duration::from_millis(1500)
        );
        for bad in [
            "99<=50ms",
            "p99<50ms",
            "p100<=1s",
            "p0<=1s",
            "px<=1s",
            "p99<=fast",
            "p99<=0ms",
            "",
        ] {
            let e = parse_slo(bad).unwrap_err();
            assert!(e.contains("--slo") && e.contains("p99<=50ms"), "{bad}: {e}");
        }
    }

    #[test]
    fn error_budget_parse() {
        assert!((parse_error_budget("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert_eq!(parse_error_budget("0").unwrap(), 0.0);
        assert!((parse_error_budget("0.05").unwrap() - 0.05).abs() < 1e-12);
        for bad in ["", "x%", "101%", "-1%", "2"] {
            assert!(
                parse_error_budget(bad)
                    .unwrap_err()
                    .contains("--max-errors"),
                "{bad}"
            );
        }
    }
}
