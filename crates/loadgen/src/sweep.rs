//! The small languages that describe an open-loop rate sweep and its verdict: `--steps`, `--slo` and
//! `--max-errors`.

use std::time::Duration;

use crate::parse::parse_fraction;

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

#[cfg(test)]
mod tests {
    use super::*;

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
