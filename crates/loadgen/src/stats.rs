//! Per-thread measurements (counters, error classes, latency histogram, per-second timeline) and
//! their merge. A thread only ever touches its own `ThreadStats`; the merge happens once, after the
//! threads have stopped, so the hot path has no locks and no shared cache lines. With progress lines
//! on, a thread also stores its running counts into its own `progress::Live` (read, not written, by
//! the reporter once per interval).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::serialization::Serializer as _;
use hdrhistogram::Histogram;

use crate::histogram::{micros, new_histogram};
use crate::progress::{self, Live};

/// A measurement in which at least this fraction of the connections got no answer at all during
/// the measured phase (they were still waiting at the end) is flagged `no_answer.flagged`: its
/// throughput and percentiles describe the connections the server did serve. In a fair run every
/// connection is answered many times; 5% is far from that and far below a server that serves N
/// of M connections (a thread pool of 128 under 5,000 connections leaves ~97% waiting).
pub const NO_ANSWER_FLAG_FRACTION: f64 = 0.05;

/// Whether `connections` left waiting, of `of_connections` that could have been, is too many to
/// pass unremarked (`NO_ANSWER_FLAG_FRACTION`).
pub fn no_answer_flagged(connections: u64, of_connections: u64) -> bool {
    connections > 0 && connections as f64 >= NO_ANSWER_FLAG_FRACTION * of_connections as f64
}

/// How many distinct error messages a run keeps as examples.
pub const MAX_ERROR_EXAMPLES: usize = 5;
/// `--interval` default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    ConnectRefused,
    ConnectTimeout,
    /// Any other failed connect: unreachable network or host, permission, ... (the message says).
    ConnectError,
    AddressUnavailable,
    TooManyOpenFiles,
    Reset,
    ClosedEarly,
    ReadError,
    WriteError,
    Timeout,
    ParseError,
    Status,
    VerificationMismatch,
    /// https: the TLS handshake failed (an alert, bytes that are not TLS, the peer closed or reset
    /// the connection during it).
    TlsHandshake,
    /// https: the server's certificate was refused (wrong name, expired, unknown issuer).
    TlsCertificate,
    /// `--h2`: the server reset a stream (RST_STREAM) before its response was complete.
    H2StreamReset,
    /// `--h2`: the server went away with an error code (GOAWAY other than NO_ERROR).
    H2Goaway,
    /// `--h2`: the server broke HTTP/2 (a frame or header block the client cannot accept): a
    /// connection error, the connection is closed.
    H2Protocol,
}

/// Latency histograms per `--interval`: the current one is live, finished ones are kept encoded
/// (V2, run-length compressed; a few hundred bytes each) so an hour-long run costs kilobytes, not
/// one 180 KiB histogram per second. Recording is one comparison plus the histogram increment.
pub struct Intervals {
    pub interval: Duration,
    start: Instant,
    index: u64,
    end: Instant,
    current: Histogram<u64>,
    /// (interval index, V2-serialized histogram), in index order; empty intervals are absent.
    pub done: Vec<(u64, Vec<u8>)>,
    /// Progress lines on: each finished interval is handed over there too.
    live: Option<Arc<Live>>,
}

impl Intervals {
    pub fn new(start: Instant, interval: Duration) -> Self {
        Intervals {
            interval,
            start,
            index: 0,
            end: start + interval,
            current: new_histogram(),
            done: Vec::new(),
            live: None,
        }
    }

    #[inline]
    pub fn record(&mut self, now: Instant, us: u64) {
        if now >= self.end {
            self.roll(now);
        }
        self.current.saturating_record(us);
    }

    /// `n` entries of the same value at once (censored lower bounds, see `ThreadStats::unfinished`).
    pub fn record_n(&mut self, now: Instant, us: u64, n: u64) {
        if now >= self.end {
            self.roll(now);
        }
        self.current.saturating_record_n(us, n);
    }

    #[cold]
    fn roll(&mut self, now: Instant) {
        self.flush();
        self.index = (now.saturating_duration_since(self.start).as_nanos()
            / self.interval.as_nanos().max(1)) as u64;
        self.end = self.start
            + Duration::from_nanos(
                (self.interval.as_nanos() as u64).saturating_mul(self.index + 1),
            );
    }

    /// Move the live histogram into `done` (at the end of the run).
    pub fn flush(&mut self) {
        if !self.current.is_empty() {
            let mut bytes = Vec::new();
            hdrhistogram::serialization::V2Serializer::new()
                .serialize(&self.current, &mut bytes)
                .expect("serializing to memory cannot fail");
            if let Some(live) = &self.live {
                live.interval_done(&bytes);
            }
            self.done.push((self.index, bytes));
            self.current.reset();
        }
    }
}

/// Merge the interval histograms of several threads: one histogram per interval index, from 0 to
/// the largest index seen or `min_count - 1`, empty ones included (a stall must show).
pub fn merge_intervals(parts: &[&[(u64, Vec<u8>)]], min_count: u64) -> Vec<Histogram<u64>> {
    let count = parts
        .iter()
        .flat_map(|p| p.iter().map(|(i, _)| i + 1))
        .max()
        .unwrap_or(0)
        .max(min_count);
    let mut out: Vec<Histogram<u64>> = (0..count).map(|_| new_histogram()).collect();
    let mut de = hdrhistogram::serialization::Deserializer::new();
    for part in parts {
        for (i, bytes) in part.iter() {
            let h: Histogram<u64> = de
                .deserialize(&mut &bytes[..])
                .expect("our own encoding decodes");
            out[*i as usize].add(&h).expect("histograms share bounds");
        }
    }
    out
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 18] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectError,
        ErrorClass::AddressUnavailable,
        ErrorClass::TooManyOpenFiles,
        ErrorClass::Reset,
        ErrorClass::ClosedEarly,
        ErrorClass::ReadError,
        ErrorClass::WriteError,
        ErrorClass::Timeout,
        ErrorClass::ParseError,
        ErrorClass::Status,
        ErrorClass::VerificationMismatch,
        ErrorClass::TlsHandshake,
        ErrorClass::TlsCertificate,
        ErrorClass::H2StreamReset,
        ErrorClass::H2Goaway,
        ErrorClass::H2Protocol,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::ConnectError => "connect_error",
            ErrorClass::AddressUnavailable => "address_unavailable",
            ErrorClass::TooManyOpenFiles => "too_many_open_files",
            ErrorClass::Reset => "reset",
            ErrorClass::ClosedEarly => "closed_early",
            ErrorClass::ReadError => "read_error",
            ErrorClass::WriteError => "write_error",
            ErrorClass::Timeout => "timeout",
            ErrorClass::ParseError => "parse_error",
            ErrorClass::Status => "status",
            ErrorClass::VerificationMismatch => "verification_mismatch",
            ErrorClass::TlsHandshake => "tls_handshake",
            ErrorClass::TlsCertificate => "tls_certificate",
            ErrorClass::H2StreamReset => "h2_rst_stream",
            ErrorClass::H2Goaway => "h2_goaway",
            ErrorClass::H2Protocol => "h2_protocol",
        }
    }

    /// Class of a failed connect() (immediate or reported later through SO_ERROR).
    pub fn of_connect_error(e: &std::io::Error) -> ErrorClass {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => ErrorClass::ConnectRefused,
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => ErrorClass::AddressUnavailable,
            Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorClass::TooManyOpenFiles,
            Some(libc::ETIMEDOUT) => ErrorClass::ConnectTimeout,
            Some(libc::ECONNRESET) => ErrorClass::Reset,
            // ENETUNREACH, EHOSTUNREACH, EACCES, EPERM, ...: the connect failed, but it was not
            // refused by a peer, so it must not be counted as if a server had said no.
            _ => ErrorClass::ConnectError,
        }
    }

    pub fn of_read_error(e: &std::io::Error) -> ErrorClass {
        match e.raw_os_error() {
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => ErrorClass::Reset,
            Some(libc::ECONNREFUSED) => ErrorClass::ConnectRefused,
            _ => ErrorClass::ReadError,
        }
    }

    pub fn of_write_error(e: &std::io::Error) -> ErrorClass {
        match e.raw_os_error() {
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => ErrorClass::Reset,
            Some(libc::ECONNREFUSED) => ErrorClass::ConnectRefused,
            _ => ErrorClass::WriteError,
        }
    }
}

/// errors / (successful requests + errors), as python/netarena/stats.py's `error_rate`: a status
/// or verification error is a response too, so dividing by responses + errors would count it twice.
/// None when nothing was attempted (no success and no error): there is no share to give.
pub fn error_fraction(errors: u64, successes: u64) -> Option<f64> {
    let attempts = successes + errors;
    (attempts > 0).then(|| errors as f64 / attempts as f64)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Second {
    pub requests: u64,
    pub bytes_received: u64,
    pub errors: u64,
}

/// https: the handshakes one thread completed during the measured phase, and what the last one
/// agreed on (every connection of a run offers the same, so one is as good as any).
#[derive(Clone, Debug, Default)]
pub struct TlsStats {
    pub handshakes: u64,
    /// Of `handshakes`, those that resumed an earlier session (`--tls-resume`).
    pub resumed: u64,
    pub version: Option<&'static str>,
    pub cipher_suite: Option<&'static str>,
    /// None: the server chose no ALPN protocol.
    pub alpn: Option<String>,
}

/// Everything one thread counted during the measured phase.
pub struct ThreadStats {
    /// Counting window: events before `measure_start` are warm-up, events at or after `measure_end`
    /// are past the end of the run.
    measure_start: Instant,
    measure_end: Instant,
    /// With `--requests`: this thread stops counting (and sending) after this many responses.
    pub response_quota: Option<u64>,
    pub hist: Histogram<u64>,
    pub requests: u64,
    pub responses: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub connections_completed: u64,
    pub verified_bytes: u64,
    pub errors: [u64; ErrorClass::ALL.len()],
    /// (status code, count), only for responses counted under `status`; tiny, searched linearly.
    pub status_codes: Vec<(u16, u64)>,
    pub examples: Vec<String>,
    pub timeline: Vec<Second>,
    /// When the last counted response arrived (the end of a `--requests` or fixed-bytes run).
    pub last_event: Option<Instant>,
    /// The same latencies as `hist`, per `--interval`.
    pub intervals: Intervals,
    /// Progress lines on (`progress`): the running counts are mirrored there.
    live: Option<Arc<Live>>,
    /// Requests (echo: chunks) still unanswered when the measured phase ended. Not errors: a
    /// healthy closed loop always ends with a request in flight on every connection.
    pub unfinished: u64,
    /// Entries of `hist` that are lower bounds: each unfinished request's time waited so far.
    pub censored: u64,
    /// Connections still waiting at the end (a request outstanding or the connect not complete)
    /// that got no answer at all during the measured phase (see `output::NO_ANSWER_FLAG_FRACTION`).
    pub unanswered_connections: u64,
    /// Responses (echo: chunks) that arrived during the warm-up: in no figure. With `responses` they
    /// are what the server answered over the whole run, which is what a count of the server's own work
    /// over the run (its database queries) divides by.
    pub warmup_responses: u64,
    pub tls: TlsStats,
    /// `--h2`: GOAWAY frames received in the measured phase, graceful ones (NO_ERROR) included.
    pub h2_goaways: u64,
}

impl ThreadStats {
    pub fn new(measure_start: Instant, measure_end: Instant, response_quota: Option<u64>) -> Self {
        let live = progress::attach();
        let mut intervals = Intervals::new(measure_start, DEFAULT_INTERVAL);
        intervals.live = live.clone();
        ThreadStats {
            live,
            measure_start,
            measure_end,
            response_quota,
            hist: new_histogram(),
            requests: 0,
            responses: 0,
            bytes_sent: 0,
            bytes_received: 0,
            connections_opened: 0,
            connections_completed: 0,
            verified_bytes: 0,
            errors: [0; ErrorClass::ALL.len()],
            status_codes: Vec::new(),
            examples: Vec::new(),
            timeline: Vec::new(),
            last_event: None,
            intervals,
            unfinished: 0,
            censored: 0,
            unanswered_connections: 0,
            warmup_responses: 0,
            tls: TlsStats::default(),
            h2_goaways: 0,
        }
    }

    pub fn set_interval(&mut self, interval: Duration) {
        self.intervals = Intervals::new(self.measure_start, interval);
        self.intervals.live = self.live.clone();
    }

    #[inline]
    pub fn counting(&self, now: Instant) -> bool {
        now >= self.measure_start && now < self.measure_end
    }

    pub fn measure_start(&self) -> Instant {
        self.measure_start
    }

    /// True when `--requests` is in force and this thread has counted its share.
    #[inline]
    pub fn quota_reached(&self) -> bool {
        matches!(self.response_quota, Some(q) if self.responses >= q)
    }

    #[inline]
    fn second(&mut self, now: Instant) -> &mut Second {
        let idx = (now - self.measure_start).as_secs() as usize;
        if idx >= self.timeline.len() {
            self.timeline.resize(idx + 1, Second::default());
        }
        &mut self.timeline[idx]
    }

    /// A complete response (or echoed chunk). `ok` = expected status and verified; only those
    /// count as requests and enter the latency histogram. Returns false if not counted.
    #[inline]
    pub fn response(&mut self, now: Instant, latency: Duration, ok: bool) -> bool {
        if !self.counting(now) || self.quota_reached() {
            if now < self.measure_start {
                self.warmup_responses += 1;
            }
            if now >= self.measure_end && !self.quota_reached() {
                // Answered after the end, in the loop turn that noticed the end: at the end this
                // request was still in flight.
                let sent = now.checked_sub(latency).unwrap_or(now);
                self.unfinished(sent, 1, self.measure_end);
            }
            return false;
        }
        self.responses += 1;
        self.last_event = Some(now);
        if ok {
            self.requests += 1;
            if let Some(live) = &self.live {
                live.set_requests(self.requests);
            }
            let us = micros(latency);
            self.hist.saturating_record(us);
            self.intervals.record(now, us);
            self.second(now).requests += 1;
        }
        true
    }

    /// The measured phase ended at `end` with a connection still waiting: `n` requests (or an echo
    /// chunk) in flight on it since `since`, or (n = 0) its connect not complete. The requests are
    /// unfinished, and the connection counts as unanswered if `answered` says it got no response
    /// in the whole phase. Every engine ends a phase with this for each waiting connection.
    pub fn left_in_flight(&mut self, since: Instant, n: u64, answered: bool, end: Instant) {
        self.unfinished(since, n, end);
        if !answered {
            self.unanswered_connections += 1;
        }
    }

    /// `n` requests sent at `since` were still unanswered when the measured phase ended at `end`:
    /// count them as unfinished (not as errors), and enter the time they had waited by then into
    /// the latency histogram as censored entries, lower bounds of their latency. A survivors-only
    /// histogram would hide a server that never answers most connections. Requests sent at or
    /// after `end` were not in flight at the end and are left out.
    pub fn unfinished(&mut self, since: Instant, n: u64, end: Instant) {
        if n == 0 || since >= end || end <= self.measure_start {
            return;
        }
        self.unfinished += n;
        self.censored += n;
        let us = micros(end - since);
        self.hist.saturating_record_n(us, n);
        // Into the interval holding the phase's last instant, not one starting at `end`.
        let last = (end - Duration::from_nanos(1)).max(self.measure_start);
        self.intervals.record_n(last, us, n);
    }

    #[inline]
    pub fn received(&mut self, now: Instant, n: usize) {
        if self.counting(now) {
            self.bytes_received += n as u64;
            self.second(now).bytes_received += n as u64;
        }
    }

    #[inline]
    pub fn sent(&mut self, now: Instant, n: usize) {
        if self.counting(now) {
            self.bytes_sent += n as u64;
        }
    }

    pub fn connection_opened(&mut self, now: Instant) {
        if self.counting(now) {
            self.connections_opened += 1;
        }
    }

    /// https: a handshake completed (`resumed`: an earlier session was resumed); the parameters are
    /// kept even outside the measured phase, the counts only in it.
    pub fn tls_handshake(
        &mut self,
        now: Instant,
        resumed: bool,
        version: Option<&'static str>,
        cipher_suite: Option<&'static str>,
        alpn: Option<&[u8]>,
    ) {
        let t = &mut self.tls;
        t.version = version.or(t.version);
        t.cipher_suite = cipher_suite.or(t.cipher_suite);
        if t.alpn.is_none() {
            t.alpn = alpn.map(|a| String::from_utf8_lossy(a).into_owned());
        }
        if self.counting(now) {
            self.tls.handshakes += 1;
            self.tls.resumed += u64::from(resumed);
        }
    }

    /// `--h2`: the server said GOAWAY.
    pub fn h2_goaway(&mut self, now: Instant) {
        if self.counting(now) {
            self.h2_goaways += 1;
        }
    }

    /// Count an error. `detail` is only called when the message could still become an example.
    pub fn error(&mut self, now: Instant, class: ErrorClass, detail: impl FnOnce() -> String) {
        if !self.counting(now) {
            return;
        }
        self.errors[class as usize] += 1;
        if let Some(live) = &self.live {
            live.set_errors(self.errors_total());
        }
        self.second(now).errors += 1;
        if self.examples.len() < MAX_ERROR_EXAMPLES {
            let msg = detail();
            if !self.examples.contains(&msg) {
                self.examples.push(msg);
            }
        }
    }

    pub fn status_error(&mut self, code: u16) {
        match self.status_codes.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += 1,
            None => self.status_codes.push((code, 1)),
        }
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Fold another thread's measurements into this one.
    pub fn merge(&mut self, other: &ThreadStats) {
        self.hist.add(&other.hist).expect("histograms share bounds");
        self.requests += other.requests;
        self.responses += other.responses;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.connections_opened += other.connections_opened;
        self.connections_completed += other.connections_completed;
        self.verified_bytes += other.verified_bytes;
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            *a += b;
        }
        for &(code, n) in &other.status_codes {
            match self.status_codes.iter_mut().find(|(c, _)| *c == code) {
                Some((_, m)) => *m += n,
                None => self.status_codes.push((code, n)),
            }
        }
        for e in &other.examples {
            if self.examples.len() < MAX_ERROR_EXAMPLES && !self.examples.contains(e) {
                self.examples.push(e.clone());
            }
        }
        if self.timeline.len() < other.timeline.len() {
            self.timeline
                .resize(other.timeline.len(), Second::default());
        }
        for (a, b) in self.timeline.iter_mut().zip(other.timeline.iter()) {
            a.requests += b.requests;
            a.bytes_received += b.bytes_received;
            a.errors += b.errors;
        }
        self.intervals
            .done
            .extend(other.intervals.done.iter().cloned());
        self.unfinished += other.unfinished;
        self.censored += other.censored;
        self.unanswered_connections += other.unanswered_connections;
        self.warmup_responses += other.warmup_responses;
        self.h2_goaways += other.h2_goaways;
        self.tls.handshakes += other.tls.handshakes;
        self.tls.resumed += other.tls.resumed;
        self.tls.version = self.tls.version.or(other.tls.version);
        self.tls.cipher_suite = self.tls.cipher_suite.or(other.tls.cipher_suite);
        if self.tls.alpn.is_none() {
            self.tls.alpn.clone_from(&other.tls.alpn);
        }
        self.last_event = match (self.last_event, other.last_event) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_errnos_map_to_their_own_classes_never_to_refused_by_default() {
        let class = |errno| ErrorClass::of_connect_error(&std::io::Error::from_raw_os_error(errno));
        assert_eq!(class(libc::ECONNREFUSED), ErrorClass::ConnectRefused);
        assert_eq!(class(libc::ETIMEDOUT), ErrorClass::ConnectTimeout);
        assert_eq!(class(libc::EADDRNOTAVAIL), ErrorClass::AddressUnavailable);
        assert_eq!(class(libc::EMFILE), ErrorClass::TooManyOpenFiles);
        assert_eq!(class(libc::ECONNRESET), ErrorClass::Reset);
        for errno in [
            libc::ENETUNREACH,
            libc::EHOSTUNREACH,
            libc::EACCES,
            libc::EPERM,
        ] {
            assert_eq!(class(errno), ErrorClass::ConnectError, "errno {errno}");
        }
        // Every class has a distinct name in the result (the schema lists each).
        let mut names: Vec<_> = ErrorClass::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorClass::ALL.len());
    }

    #[test]
    fn counts_only_inside_the_window_and_merges() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_secs(1);
        let end = start + Duration::from_secs(3);
        let mut a = ThreadStats::new(start, end, None);
        assert!(
            !a.response(t0, Duration::from_micros(5), true),
            "warm-up must not count"
        );
        assert!(a.response(start, Duration::from_micros(100), true));
        assert!(a.response(
            start + Duration::from_millis(2500),
            Duration::from_micros(300),
            false
        ));
        a.error(
            start + Duration::from_millis(2500),
            ErrorClass::Status,
            || "status 503".into(),
        );
        a.status_error(503);
        assert!(
            !a.response(end, Duration::from_micros(5), true),
            "the end is exclusive"
        );
        // ... and that request, sent 5 µs before the end, was in flight at it: unfinished.
        assert_eq!((a.unfinished, a.censored), (1, 1));
        let mut b = ThreadStats::new(start, end, None);
        b.response(
            start + Duration::from_millis(100),
            Duration::from_micros(200),
            true,
        );
        b.error(start, ErrorClass::Status, || "status 503".into());
        b.status_error(503);
        a.merge(&b);
        assert_eq!((a.requests, a.responses), (2, 3));
        assert_eq!(a.hist.len(), 3, "two successes and one censored entry");
        assert_eq!(a.hist.max(), a.hist.highest_equivalent(200));
        assert_eq!(a.errors[ErrorClass::Status as usize], 2);
        assert_eq!(a.status_codes, vec![(503, 2)]);
        assert_eq!(
            a.examples,
            vec!["status 503".to_string()],
            "examples are distinct"
        );
        assert_eq!(a.timeline.len(), 3);
        assert_eq!(
            a.timeline[0],
            Second {
                requests: 2,
                bytes_received: 0,
                errors: 1
            }
        );
        assert_eq!(a.timeline[1], Second::default());
        assert_eq!(a.timeline[2].errors, 1);
    }

    #[test]
    fn unfinished_requests_are_censored_lower_bounds_not_errors() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let end = t0 + ms(2000);
        let mut s = ThreadStats::new(t0, end, None);
        // Three pipelined requests sent 1.5 s before the end on a connection never answered.
        s.left_in_flight(t0 + ms(500), 3, false, end);
        // A request sent at the end was not in flight at it; its connection had answers.
        s.left_in_flight(end, 1, true, end);
        assert_eq!(
            (s.unfinished, s.censored, s.unanswered_connections),
            (3, 3, 1)
        );
        assert_eq!(
            (s.requests, s.errors_total()),
            (0, 0),
            "not successes, not errors"
        );
        assert_eq!(s.hist.len(), 3);
        assert_eq!(s.hist.min(), s.hist.lowest_equivalent(1_500_000));
        // Answered in the loop turn that noticed the end: in flight at the end, waited until it.
        assert!(!s.response(end + ms(1), ms(1701), true));
        assert_eq!((s.unfinished, s.censored, s.responses), (4, 4, 0));
        assert_eq!(s.hist.max(), s.hist.highest_equivalent(1_700_000));
        // The interval histograms hold them too, in the interval of the phase's last instant.
        s.intervals.flush();
        assert_eq!(s.intervals.done.len(), 1);
        assert_eq!(s.intervals.done[0].0, 1);
    }

    #[test]
    fn quota_stops_counting() {
        let now = Instant::now();
        let mut s = ThreadStats::new(now, now + Duration::from_secs(60), Some(2));
        assert!(s.response(now, Duration::from_micros(1), true));
        assert!(s.response(now, Duration::from_micros(1), false));
        assert!(s.quota_reached());
        assert!(!s.response(now, Duration::from_micros(1), true));
        assert_eq!((s.requests, s.responses), (1, 2));
    }
}
