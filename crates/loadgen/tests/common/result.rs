//! The result document of a run, parsed, with the invariants every result satisfies whatever the
//! server did; the tests add their own assertions on top.

use std::collections::HashMap;

use serde_json::Value;

/// Every class of `errors.by_class` (docs/load-generator.md).
pub const ERROR_CLASSES: [&str; 18] = [
    "connect_refused",
    "connect_timeout",
    "connect_error",
    "address_unavailable",
    "too_many_open_files",
    "reset",
    "closed_early",
    "read_error",
    "write_error",
    "timeout",
    "parse_error",
    "status",
    "verification_mismatch",
    "tls_handshake",
    "tls_certificate",
    "h2_rst_stream",
    "h2_goaway",
    "h2_protocol",
];

/// How much lower than the value it recorded a histogram's figure may read: 3 significant digits.
pub const HISTOGRAM_READS_LOW: f64 = 0.999;

/// A parsed result document plus the run's description for failure messages.
pub struct Result {
    pub doc: Value,
    pub context: String,
}

impl Result {
    pub fn get(&self, pointer: &str) -> &Value {
        self.doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("result has no {pointer}\n{}", self.context))
    }

    pub fn u64(&self, pointer: &str) -> u64 {
        let v = self.get(pointer);
        v.as_u64().unwrap_or_else(|| {
            panic!(
                "{pointer} is {v}, expected a non-negative integer\n{}",
                self.context
            )
        })
    }

    pub fn f64(&self, pointer: &str) -> f64 {
        let v = self.get(pointer);
        v.as_f64()
            .unwrap_or_else(|| panic!("{pointer} is {v}, expected a number\n{}", self.context))
    }

    /// A latency figure (µs, from a histogram) as a lower bound can be checked against: HdrHistogram
    /// keeps 3 significant digits and reports a bucket's lowest value, so a latency reads up to 0.1%
    /// lower than it was (100,010 µs reads 99,968). This is the figure raised by that much.
    pub fn latency_us_at_least(&self, pointer: &str) -> f64 {
        self.u64(pointer) as f64 / HISTOGRAM_READS_LOW
    }

    pub fn class(&self, name: &str) -> u64 {
        self.u64(&format!("/errors/by_class/{name}"))
    }

    /// Non-zero error classes other than `allowed`, for "nothing else went wrong" assertions.
    pub fn unexpected_errors(&self, allowed: &[&str]) -> Vec<(String, u64)> {
        ERROR_CLASSES
            .iter()
            .filter(|c| !allowed.contains(c))
            .map(|c| (c.to_string(), self.class(c)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    pub fn assert_only_errors(&self, allowed: &[&str]) {
        let other = self.unexpected_errors(allowed);
        assert!(
            other.is_empty(),
            "unexpected error classes {other:?} (only {allowed:?} allowed)\n{}",
            self.context
        );
    }

    pub fn status_codes(&self) -> HashMap<String, u64> {
        let v = self.get("/errors/status_codes");
        let obj = v.as_object().unwrap_or_else(|| {
            panic!(
                "errors.status_codes is {v}, expected an object\n{}",
                self.context
            )
        });
        obj.iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n.as_u64().expect("status_codes values are integers"),
                )
            })
            .collect()
    }

    /// What the contract says holds for every result, whatever the server did.
    pub(super) fn check_invariants(&self) {
        assert_eq!(self.u64("/schema_version"), 1, "{}", self.context);
        let mut sum = 0;
        for class in ERROR_CLASSES {
            sum += self.class(class);
        }
        let total = self.u64("/errors/total");
        assert_eq!(
            sum, total,
            "errors.total is not the sum of errors.by_class\n{}",
            self.context
        );
        assert_eq!(
            self.u64("/totals/errors"),
            total,
            "totals.errors != errors.total\n{}",
            self.context
        );
        let status_sum: u64 = self.status_codes().values().sum();
        assert_eq!(
            status_sum,
            self.class("status"),
            "errors.status_codes does not add up to by_class.status\n{}",
            self.context
        );
        assert!(
            self.u64("/totals/responses") >= self.u64("/totals/requests"),
            "more successful requests than complete responses\n{}",
            self.context
        );
        let duration_s = self.f64("/duration_s");
        assert!(
            duration_s > 0.0,
            "duration_s must be positive\n{}",
            self.context
        );
    }

    /// p50 <= p99 <= max and friends, for a latency object that has at least one sample.
    pub fn assert_latency_ordered(&self, base: &str) {
        let keys = [
            "min_us",
            "p50_us",
            "p75_us",
            "p90_us",
            "p99_us",
            "p99_9_us",
            "p99_99_us",
            "max_us",
        ];
        let values: Vec<f64> = keys
            .iter()
            .map(|k| self.f64(&format!("{base}/{k}")))
            .collect();
        for w in values.windows(2).zip(keys.windows(2)) {
            let (v, k) = w;
            assert!(
                v[0] <= v[1],
                "{base}: {} ({}) > {} ({})\n{}",
                k[0],
                v[0],
                k[1],
                v[1],
                self.context
            );
        }
        let mean = self.f64(&format!("{base}/mean_us"));
        assert!(
            values[0] <= mean && mean <= values[7],
            "{base}: mean_us {mean} outside [min, max]\n{}",
            self.context
        );
        assert!(
            values[7] > 0.0,
            "{base}: max_us is 0 for a non-empty histogram\n{}",
            self.context
        );
        let hist = self.get(&format!("{base}/histogram/data"));
        assert!(
            hist.as_str().is_some_and(|s| !s.is_empty()),
            "{base}: histogram data missing\n{}",
            self.context
        );
    }

    /// The echo probe (`--probe-interval`) repeated and kept its interval: no catch-up burst, so at
    /// most one probe per interval of the measured phase (plus the one at its start), and more
    /// than one. Derived from the document's own duration, not from a rate this machine must
    /// reach: a probe slower than its interval delays the next one, which only lowers the count.
    pub fn assert_probes_kept_their_interval(&self) {
        let interval_s = self.f64("/echo/probe/interval_s");
        let duration_s = self.f64("/duration_s");
        let attempts = self.u64("/echo/probe/attempts");
        assert!(
            2 <= attempts && attempts as f64 <= duration_s / interval_s + 1.0,
            "{attempts} probes every {interval_s} s in {duration_s} s\n{}",
            self.context
        );
    }
}
