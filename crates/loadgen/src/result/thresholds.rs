//! The `--threshold` verdicts on a finished result document (the expressions: `threshold`).

use crate::parse::{fmt_bytes, fmt_us};
use crate::result::document::{self, Document, ThresholdDoc};
use crate::threshold::{Metric, Threshold};

/// The verdict of every threshold on a finished result, in the order given.
pub fn evaluate(thresholds: &[Threshold], doc: &Document) -> Vec<ThresholdDoc> {
    thresholds
        .iter()
        .map(|t| {
            let measured = measure(t.metric, doc);
            ThresholdDoc {
                expr: t.expr.clone(),
                metric: t.metric_name.clone(),
                op: t.op.text().into(),
                limit: t.limit,
                unit: t.metric.unit().into(),
                measured,
                pass: measured.is_some_and(|m| t.op.holds(m, t.limit)),
            }
        })
        .collect()
}

fn measure(metric: Metric, doc: &Document) -> Option<f64> {
    let l = &doc.latency;
    let has_latency = l.count > 0;
    match metric {
        // From the histogram itself, as the document's own p50_us..p99_99_us are, so `p99` here is
        // exactly `latency.p99_us` and any other percentile is computed the same way.
        Metric::Percentile(p) => has_latency
            .then(|| document::decode_histogram(&l.histogram.data).ok())
            .flatten()
            .map(|h| h.value_at_quantile(p / 100.0) as f64),
        Metric::Min => has_latency.then_some(l.min_us as f64),
        Metric::Max => has_latency.then_some(l.max_us as f64),
        Metric::Mean => has_latency.then_some(l.mean_us),
        Metric::Errors => crate::stats::error_fraction(doc.totals.errors, doc.totals.requests),
        Metric::ErrorCount => Some(doc.totals.errors as f64),
        Metric::Requests => Some(doc.totals.requests as f64),
        Metric::Rps => Some(doc.throughput.requests_per_s),
        Metric::BytesPerS => Some(doc.throughput.bytes_per_s),
    }
}

/// A value in its metric's unit, for the human summary.
pub fn describe(unit: &str, v: f64) -> String {
    match unit {
        "us" => fmt_us(v.round() as u64),
        "fraction" => format!("{:.3}%", v * 100.0),
        "count" => format!("{v:.0}"),
        "per_s" => format!("{v:.1}/s"),
        "bytes_per_s" => format!("{}/s", fmt_bytes(v)),
        _ => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threshold::{parse, Op};

    fn t(expr: &str) -> Threshold {
        parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    #[test]
    fn expressions_parse_into_their_unit() {
        let p99 = t("p99<=5ms");
        assert_eq!(
            (p99.metric_name.as_str(), p99.op, p99.limit),
            ("p99", Op::Le, 5000.0)
        );
        assert_eq!(t("p99.9 < 250us").metric, Metric::Percentile(99.9));
        assert_eq!(t("p99.9 < 250us").limit, 250.0);
        assert_eq!(t("max<=1s").limit, 1_000_000.0);
        assert_eq!(t("mean<=3ms").metric, Metric::Mean);
        assert!((t("errors<=0.1%").limit - 0.001).abs() < 1e-12);
        assert_eq!(t("errors==0").limit, 0.0);
        assert_eq!(t("errors==0").op, Op::Eq);
        assert_eq!(t("errors<=0").op, Op::Le);
        assert_eq!(t("rps>=50000").limit, 50000.0);
        assert_eq!(t("rps>5e4").op, Op::Gt);
        assert_eq!(t("bytes_per_s>=100m").limit, (100u64 << 20) as f64);
        assert_eq!(t("error_count<10").limit, 10.0);
        assert_eq!(t("requests>=1").metric, Metric::Requests);
    }

    #[test]
    fn bad_expressions_name_themselves_and_the_valid_forms() {
        for bad in [
            "",
            "p99",
            "p99<=",
            "<=5ms",
            "latency<=5ms",
            "p100<=1s",
            "p0<=1s",
            "p99<=5",
            "p99<=fast",
            "errors<=5",
            "errors<=200%",
            "rps>=-1",
            "rps>=lots",
            "p99=>5ms",
            "bytes_per_s>=1.5k",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
            assert!(
                e.contains("metrics: pN") && e.contains("operators: <="),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn operators_compare_as_written() {
        assert!(Op::Le.holds(5.0, 5.0) && !Op::Lt.holds(5.0, 5.0));
        assert!(Op::Ge.holds(5.0, 5.0) && !Op::Gt.holds(5.0, 5.0));
        assert!(Op::Eq.holds(0.0, 0.0) && !Op::Eq.holds(1.0, 0.0));
    }
}
