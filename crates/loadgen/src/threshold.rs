//! `--threshold EXPR`: pass/fail gates on the result, for CI jobs (k6's thresholds, as one flag):
//! the expression and its parser (the verdicts are `result::thresholds`).
//!
//! An expression is `METRIC OP LIMIT`, e.g. `p99<=5ms`, `errors<=0.1%`, `rps>=50000`. It is parsed
//! with the rest of the command line (a bad one exits 2 before any load) and judged against the
//! finished result document, so a verdict is always about the numbers the document shows: latency
//! is the document's `latency` (corrected in open-loop modes), throughput its `throughput`. Each
//! metric has one unit, used for both `limit` and `measured` in the JSON (docs/load-generator.md,
//! "Thresholds").

use crate::parse::parse_fraction;
use crate::parse::{parse_bytes, parse_duration};

/// The metrics and operators, as listed in every parse error.
pub const METRICS_HELP: &str = "metrics: pN (a latency percentile, 0 < N < 100, e.g. p50, p99, p99.9), min, max, mean (latency: give a unit, us, ms or s), \
errors (failed share of attempts: 0.1% or 0.001), error_count, requests (successful, a count), \
rps (successful requests per second; echo: chunks per second), bytes_per_s (received: 1000000, 512k, 100m); \
operators: <=, <, >=, >, ==";

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Metric {
    /// A latency percentile in (0, 100).
    Percentile(f64),
    Min,
    Max,
    Mean,
    /// errors / (successful requests + errors), as `stats::error_fraction`.
    Errors,
    ErrorCount,
    Requests,
    Rps,
    BytesPerS,
}

impl Metric {
    /// The unit of `limit` and `measured` in the result document.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Metric::Percentile(_) | Metric::Min | Metric::Max | Metric::Mean => "us",
            Metric::Errors => "fraction",
            Metric::ErrorCount | Metric::Requests => "count",
            Metric::Rps => "per_s",
            Metric::BytesPerS => "bytes_per_s",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

impl Op {
    /// Two-character operators first, so `<=` is not read as `<` followed by `=5ms`.
    const ALL: [(&'static str, Op); 5] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    pub(crate) fn text(self) -> &'static str {
        Op::ALL.iter().find(|(_, o)| *o == self).expect("listed").0
    }

    pub(crate) fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Le => measured <= limit,
            Op::Lt => measured < limit,
            Op::Ge => measured >= limit,
            Op::Gt => measured > limit,
            Op::Eq => measured == limit,
        }
    }
}

/// One parsed `--threshold`.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// As given on the command line.
    pub expr: String,
    /// The metric's canonical name (`p99`, `errors`, ...).
    pub metric_name: String,
    pub(crate) metric: Metric,
    pub(crate) op: Op,
    /// In the metric's unit.
    pub(crate) limit: f64,
}

/// `--threshold EXPR`: the metric, the operator and the limit in the metric's unit.
pub fn parse(expr: &str) -> Result<Threshold, String> {
    let bad = |why: String| format!("--threshold '{expr}': {why}; {METRICS_HELP}");
    let (at, op_text, op) = Op::ALL
        .iter()
        .filter_map(|&(t, o)| expr.find(t).map(|at| (at, t, o)))
        // The leftmost operator; of two at the same place, the longer (listed first).
        .min_by_key(|(at, _, _)| *at)
        .ok_or_else(|| bad("no comparison operator".into()))?;
    let name = expr[..at].trim().to_ascii_lowercase();
    let value = expr[at + op_text.len()..].trim();
    if value.is_empty() {
        return Err(bad("no limit after the operator".into()));
    }
    let metric = match name.as_str() {
        "min" => Metric::Min,
        "max" => Metric::Max,
        "mean" => Metric::Mean,
        "errors" => Metric::Errors,
        "error_count" => Metric::ErrorCount,
        "requests" => Metric::Requests,
        "rps" => Metric::Rps,
        "bytes_per_s" => Metric::BytesPerS,
        "" => return Err(bad("no metric before the operator".into())),
        n => match n.strip_prefix('p').map(str::parse::<f64>) {
            Some(Ok(p)) if p > 0.0 && p < 100.0 => Metric::Percentile(p),
            Some(Ok(_)) => {
                return Err(bad(format!(
                    "'{n}': a percentile must be above 0 and below 100 (use max for the largest)"
                )))
            }
            _ => return Err(bad(format!("unknown metric '{n}'"))),
        },
    };
    let limit = match metric {
        Metric::Percentile(_) | Metric::Min | Metric::Max | Metric::Mean => {
            latency_us(value).map_err(bad)?
        }
        Metric::Errors => parse_fraction(value).map_err(|e| bad(format!("errors limit {e}")))?,
        Metric::ErrorCount | Metric::Requests | Metric::Rps => value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| bad(format!("'{value}' is not a non-negative number")))?,
        Metric::BytesPerS => parse_bytes(value).map_err(bad)? as f64,
    };
    let metric_name = match metric {
        Metric::Percentile(p) => format!("p{p}"),
        _ => name,
    };
    Ok(Threshold {
        expr: expr.to_string(),
        metric_name,
        metric,
        op,
        limit,
    })
}

/// A latency limit in µs: `500us` (or `µs`), or any duration with a unit (`5ms`, `1.5s`, `1m`). The unit is required: a bare `5`
/// would be seconds to `--timeout` but could be meant as milliseconds here.
fn latency_us(value: &str) -> Result<f64, String> {
    let v = value.trim();
    if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
        return n
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("'{value}' is not a latency; write e.g. 500us, 5ms or 1s"));
    }
    if !v.ends_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!(
            "'{value}' has no unit; write a latency like 500us, 5ms or 1s"
        ));
    }
    // From whole nanoseconds, so 5ms is exactly 5000 µs (not 4999.999... from seconds × 1e6).
    Ok(parse_duration(v)?.as_nanos() as f64 / 1000.0)
}
