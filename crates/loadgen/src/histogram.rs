//! The latency histogram every measurement uses (its range, resolution and how a latency becomes a
//! value): shared by the per-thread counters (`stats`), the progress lines (`progress`) and the
//! result document, so none of them has to import another for it.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Histogram range: 1 µs to 1 h at 3 significant digits (0.1% resolution).
pub const HIST_LOWEST_US: u64 = 1;
pub const HIST_HIGHEST_US: u64 = 3_600_000_000;
pub const HIST_SIGFIG: u8 = 3;

/// A latency as a histogram value: whole µs, within the histogram's range.
#[inline]
pub fn micros(d: Duration) -> u64 {
    (d.as_micros().min(u128::from(HIST_HIGHEST_US)) as u64).max(HIST_LOWEST_US)
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOWEST_US, HIST_HIGHEST_US, HIST_SIGFIG)
        .expect("valid histogram bounds")
}
